# Cap'n Proto mirror of kv.proto (field for field). Generated Rust code:
# src/generated/kv_capnp.rs (scripts/kv-regen-baselines.sh).
@0xa1a8010c0963acf2;

# capnpc-rust's `parentModule` annotation (declared in its rust.capnp; the
# plugin recognises it by this id), so that the generated code names itself
# `crate::codec::capnp::kv_capnp`, where src/codec/capnp.rs includes it.
annotation parentModule @0xabee386cd1450364 (file) :Text;
$parentModule("codec::capnp");

struct KvRequest {
  # An `Op` (src/protocol.rs).
  op @0 :UInt32;
  # Text: UTF-8 by contract, checked only by readers that ask for `&str`
  # (the server compares bytes).
  keys @1 :List(Text);
  vals @2 :List(Data);
  # Element index for get-from-list.
  index @3 :UInt32;
}

struct KvResponse {
  # A `Status` (src/protocol.rs).
  status @0 :UInt32;
  vals @1 :List(Data);
}
