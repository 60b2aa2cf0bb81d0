//! Replays saved inputs (`tests/regressions/*.bin`, minimized fuzzer
//! findings and other bad input) through every decoder the `decode` fuzz
//! target drives (`fuzz/fuzz_targets/decode.rs`): `Everything`, `Node` and
//! `GetM`, from a slice and from a pool buffer with thresholds 0 and 512.
//! Each decode must return without panicking; a successful one must
//! re-serialize into bytes that decode to an equal message.
//!
//! To add a finding: `cargo fuzz tmin decode <artifact>`, copy the result
//! here as `<what-it-breaks>.bin`, and add a test below that asserts the
//! exact outcome.

use std::path::PathBuf;

use cornflakes::{Arena, DecodeError, Message, Pool};
use cornflakes_tests::example::{Everything, GetM, Node};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/regressions")
}

/// Every saved input, with its file name.
fn inputs() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir()).expect("regressions directory") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_some_and(|e| e == "bin") {
            let name = path.file_name().expect("file name").to_string_lossy().into_owned();
            out.push((name, std::fs::read(&path).expect("regression input")));
        }
    }
    out.sort();
    out
}

/// Decodes `data` as `$ty` in every mode; returns the slice decode's result.
macro_rules! replay {
    ($ty:ident, $name:expr, $data:expr, $pool:expr) => {{
        let data: &[u8] = $data;
        let arena = Arena::copying();
        let result = $ty::deserialize_from_slice(data, &arena).map(|m| m.serialize_to_vec().unwrap());
        if let Ok(bytes) = &result {
            let again = Arena::copying();
            let second = $ty::deserialize_from_slice(bytes, &again)
                .unwrap_or_else(|e| panic!("{}: re-serialized {} does not decode: {e}", $name, stringify!($ty)));
            assert_eq!(
                &second.serialize_to_vec().unwrap(),
                bytes,
                "{}: {} is not a fixed point",
                $name,
                stringify!($ty)
            );
        }
        for threshold in [0, 512] {
            let pkt = $pool.alloc_copy(data).expect("pool buffer");
            let arena = Arena::with_threshold(Some($pool), threshold);
            let pooled = $ty::deserialize(&pkt, &arena).map(|m| {
                let bytes = m.serialize_to_vec().unwrap();
                let again = Arena::copying();
                let second = $ty::deserialize_from_slice(&bytes, &again)
                    .unwrap_or_else(|e| panic!("{}: re-serialized {} does not decode: {e}", $name, stringify!($ty)));
                second.serialize_to_vec().unwrap()
            });
            assert_eq!(
                pooled.is_ok(),
                result.is_ok(),
                "{}: pool and slice decodes of {} disagree",
                $name,
                stringify!($ty)
            );
            assert_eq!(pkt.ref_count(), 1, "{}: references into the packet leaked", $name);
        }
        result.map(|_| ())
    }};
}

/// Every saved input decodes, or fails cleanly, in every mode.
#[test]
fn replay_saved_inputs() {
    let pool = Pool::new().expect("pool");
    let inputs = inputs();
    for (name, data) in &inputs {
        let _: Result<(), DecodeError> = replay!(Everything, name, data, &pool);
        let _: Result<(), DecodeError> = replay!(Node, name, data, &pool);
        let _: Result<(), DecodeError> = replay!(GetM, name, data, &pool);
    }
    eprintln!("replayed {} saved inputs from {}", inputs.len(), dir().display());
}
