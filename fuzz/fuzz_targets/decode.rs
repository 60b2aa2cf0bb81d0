//! Arbitrary bytes into the decoders of `Everything`, `Node` and `GetM`,
//! from a plain slice and from a pool buffer (thresholds 0 and 512); every
//! successful decode is read field by field, re-serialized and decoded
//! again (see `cornflakes_fuzz::check`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cornflakes_fuzz::check(data);
});
