# Cap'n Proto mirror of crates/cornflakes-kv/proto/kv.proto (field for
# field). Generated Rust code: src/generated/kv_capnp.rs
# (scripts/regen-baselines.sh).
@0xa1a8010c0963acf2;

struct KvRequest {
  # An `Op` (crates/cornflakes-kv-protocol).
  op @0 :UInt32;
  # Text: UTF-8 by contract, checked only by readers that ask for `&str`
  # (the server compares bytes).
  keys @1 :List(Text);
  vals @2 :List(Data);
  # Element index for get-from-list.
  index @3 :UInt32;
}

struct KvResponse {
  # A `Status` (crates/cornflakes-kv-protocol).
  status @0 :UInt32;
  vals @1 :List(Data);
}
