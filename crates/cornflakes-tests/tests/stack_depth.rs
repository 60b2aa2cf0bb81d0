//! Decoding recursion is bounded by the stack, not only by the depth
//! counter. The worst message we know of is a 41-field recursive one
//! (`wide.DeepWide`): in a debug build each level of its decode takes
//! kilobytes of stack. `DecodeOptions::max_stack` (default 1 MiB) stops a
//! decode that has used that much stack with `TooDeep`, whatever the
//! depth counter says; these tests decode on threads with Rust's default 2 MiB
//! thread stack, where an overflow would abort the test
//! process.

use cornflakes::{Arena, DecodeError, DecodeOptions, Message};
use cornflakes_tests::wide::DeepWide;

/// `depth` nested levels, serialized (on a large stack: the encoder's
/// recursion over trusted data is not what is under test).
fn chain(depth: usize) -> Vec<u8> {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let arena = Arena::copying();
            let mut m = DeepWide::new_in(&arena);
            for _ in 1..depth {
                let mut parent = DeepWide::new_in(&arena);
                parent.set_f1(b"x");
                parent.set_f2(3);
                parent.set_f3("s");
                parent.set_next(m);
                m = parent;
            }
            let bytes = m.serialize_to_vec().unwrap();
            std::mem::forget(m); // dropping is recursive too
            bytes
        })
        .unwrap()
        .join()
        .unwrap()
}

/// Decodes on a thread with a `stack`-byte stack; a stack overflow aborts
/// the test process, so returning at all is the proof.
fn decode_on_stack(bytes: Vec<u8>, stack: usize, options: DecodeOptions) -> Result<(), DecodeError> {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            let arena = Arena::copying();
            DeepWide::deserialize_with_options(&bytes, None, &arena, options).map(std::mem::forget)
        })
        .unwrap()
        .join()
        .unwrap()
}

#[test]
#[cfg_attr(miri, ignore)] // no stack addresses under Miri: the check is off there
fn deep_decodes_stop_before_the_stack_ends() {
    for depth in [64, 65, 300, 5000] {
        let r = decode_on_stack(chain(depth), 2048 * 1024, DecodeOptions::default());
        assert!(r.is_ok() && depth <= 64 || matches!(r, Err(DecodeError::TooDeep(_))), "{depth}: {r:?}");
    }
    // With no depth limit to speak of, the stack budget alone stops it.
    let unlimited = DecodeOptions { max_depth: u32::MAX, ..DecodeOptions::default() };
    let r = decode_on_stack(chain(5000), 2048 * 1024, unlimited);
    assert!(matches!(r, Err(DecodeError::TooDeep(_))), "{r:?}");
}

/// The per-level frame, measured: how deep the default stack budget lets
/// `DeepWide` go (printed with `--nocapture`). Release builds reach the
/// default depth limit of 64; debug builds stop earlier, with an error.
#[test]
#[cfg_attr(miri, ignore)]
fn default_limits_measured() {
    let unlimited = DecodeOptions { max_depth: u32::MAX, ..DecodeOptions::default() };
    let reached = match decode_on_stack(chain(5000), 2048 * 1024, unlimited) {
        Err(DecodeError::TooDeep(d)) => d,
        other => panic!("{other:?}"),
    };
    let per_level = DecodeOptions::default().max_stack / reached as usize;
    eprintln!("DeepWide: {reached} levels in 1 MiB of stack, about {per_level} bytes per level");
    assert!(reached >= 32, "a frame of {per_level} bytes per level");
    if !cfg!(debug_assertions) {
        assert!(reached >= 64, "release builds decode the default depth");
        decode_on_stack(chain(64), 2048 * 1024, DecodeOptions::default()).unwrap();
    }
}
