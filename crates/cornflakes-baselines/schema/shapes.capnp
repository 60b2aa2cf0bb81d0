# Cap'n Proto mirror of crates/cornflakes-bench/proto/shapes.proto.
# Generated Rust code: src/generated/shapes_capnp.rs
# (scripts/regen-baselines.sh).
@0xf23d10d0f3ca0354;

# Shapes (a), (b): one bytes field.
struct Single {
  data @0 :Data;
}

# Shapes (c), (d), (e): a repeated bytes field.
struct Repeated {
  vals @0 :List(Data);
}

# Shape (f), nested part.
struct Inner {
  a @0 :UInt32;
  data @1 :Data;
}

# Shape (f).
struct Outer {
  id @0 :UInt64;
  data @1 :Data;
  inner @2 :Inner;
}
