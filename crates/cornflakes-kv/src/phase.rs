//! The steps of answering one request, each a function that is never
//! inlined, so that a profiler can say what each step costs.
//!
//! `cf reproduce fig11` (the paper's Figure 11: cycles per step of the CDN
//! workload) runs `cf kv-server` under callgrind with collection switched
//! on only inside these functions (`--toggle-collect`) and reads each one's
//! inclusive instruction count. The server codecs call them so that the
//! steps never nest: every instruction collected belongs to exactly one
//! step. A wrapper costs one call and one return.
//!
//! What each step holds differs by design between serializers; that is
//! what the figure shows:
//!
//! | step | Cornflakes | prost | FlatBuffers | rkyv |
//! |---|---|---|---|---|
//! | [`deserialize`] | header walk, views of the fields | `merge` into views, UTF-8 of keys | verifier, views | bytecheck, UTF-8 of keys, views |
//! | [`store`] | lookups | lookups | lookups | lookups |
//! | [`set_value`] | a reference per value (or a copy below the threshold) | views into the message | values copied into the builder, table finished | a list of views |
//! | [`serialize_send`] | serialize-and-send: header and copies into the ring, a descriptor per zero-copy value | encoding (copies every value) and the push | the push of the finished buffer | archiving (copies every value into a pool buffer) and the push |
//! | [`flush`] | per batch: doorbell and completions | same | same | same |
//!
//! `cornflakes-protobuf` marks the same steps as Cornflakes (its decoder
//! and encoder speak the protobuf wire format instead).
//!
//! The receive path is not a step: the datapath hands every codec the same
//! received buffer, and an idle server polls it continuously.

/// Decoding the request into a [`Request`](crate::Request) view.
#[inline(never)]
pub fn deserialize<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Running the request on the store.
#[inline(never)]
pub fn store<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Putting the status and values into the response object.
#[inline(never)]
pub fn set_value<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Encoding the response and handing it to the datapath.
#[inline(never)]
pub fn serialize_send<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Once per received batch: flushing the datapath and reaping send
/// completions.
#[inline(never)]
pub fn flush<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// The steps, in order, as callgrind names them (the path of each function
/// above).
pub const STEPS: [&str; 5] = [
    "cornflakes_kv::phase::deserialize",
    "cornflakes_kv::phase::store",
    "cornflakes_kv::phase::set_value",
    "cornflakes_kv::phase::serialize_send",
    "cornflakes_kv::phase::flush",
];
