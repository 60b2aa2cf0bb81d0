//! The varint block in hardware description (hw/varint/) against the Rust
//! encoder: vectors written by Rust, checked by an Icarus Verilog testbench,
//! the modules linted by Verilator and synthesized to gates by Yosys. Skips, saying so, when `iverilog`
//! or `verilator` or `yosys` is absent (scripts/setup.sh installs both; CI has them).
// Runs external programs, which Miri cannot (scripts/miri.sh runs this crate's tests).
#![cfg(not(miri))]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The reference encoding: prost's, which the protobuf wire format of the
/// runtime matches byte for byte.
fn encode(value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_varint(value, &mut out);
    out
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// Ten bytes as one 80-bit hex number, byte 0 in the low bits.
fn hex80(bytes: &[u8]) -> String {
    let mut padded = [0u8; 10];
    padded[..bytes.len().min(10)].copy_from_slice(&bytes[..bytes.len().min(10)]);
    padded.iter().rev().map(|b| format!("{b:02x}")).collect()
}

/// An encode vector: `raw` is what the block gets; with `zz` it maps it
/// as an sint before encoding.
fn encode_vector(out: &mut String, raw: u64, zz: bool) {
    let mapped = if zz { zigzag(raw as i64) } else { raw };
    let bytes = encode(mapped);
    writeln!(out, "0 {} {raw:016x} {:x} {} a 1 0 0", zz as u8, bytes.len(), hex80(&bytes)).unwrap();
}

/// A decode vector: what the block must say of the first `avail` bytes.
fn decode_vector(out: &mut String, bytes: &[u8], avail: usize, zz: bool) {
    let given = &bytes[..avail.min(bytes.len())];
    let terminator = given.iter().take(10).position(|b| b & 0x80 == 0);
    let (ok, incomplete, malformed, value, len) = match terminator {
        None if avail < 10 => (false, true, false, 0, 0),
        None => (false, false, true, 0, 0),
        Some(i) => {
            let mut buf = given;
            match prost::encoding::decode_varint(&mut buf) {
                Ok(v) => {
                    let v = if zz { ((v >> 1) as i64 ^ -((v & 1) as i64)) as u64 } else { v };
                    (true, false, false, v, i + 1)
                }
                Err(_) => (false, false, true, 0, 0),
            }
        }
    };
    writeln!(
        out,
        "1 {} {value:016x} {len:x} {} {avail:x} {} {} {}",
        zz as u8,
        hex80(given),
        ok as u8,
        incomplete as u8,
        malformed as u8
    )
    .unwrap();
}

fn vectors() -> (String, usize) {
    let mut out = String::new();
    // Every length boundary, both sides, and the extremes.
    let mut edges = vec![0u64, 1, u64::MAX, u64::MAX - 1, i64::MAX as u64, i64::MIN as u64];
    for k in 1..10 {
        let b = 1u64 << (7 * k);
        edges.extend([b - 1, b, b + 1]);
    }
    for &v in &edges {
        encode_vector(&mut out, v, false);
    }
    // sint values, negative ones included, around each boundary.
    let mut sints = vec![0i64, 1, -1, 63, -64, 64, -65, i64::MAX, i64::MIN, i64::MIN + 1];
    for k in 1..10 {
        let b = 1i64 << (7 * k - 1).min(62);
        sints.extend([b - 1, b, -b, -b - 1]);
    }
    for &v in &sints {
        encode_vector(&mut out, v as u64, true);
    }
    // 100 000 random values, their bit length uniform so every encoded
    // length is well covered; half of them as sint.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..100_000 {
        let bits = (next() % 64) as u32 + 1;
        let v = next() >> (64 - bits);
        encode_vector(&mut out, v, i % 2 == 1);
    }
    // What the decoder must refuse or wait for: a cut varint at every
    // length, ten continuation bytes, a tenth byte over 1, no bytes at all,
    // and a valid varint followed by more input.
    for v in [300u64, 1 << 35, u64::MAX] {
        let e = encode(v);
        for avail in 0..e.len() {
            decode_vector(&mut out, &e, avail, false);
        }
    }
    decode_vector(&mut out, &[0x80; 10], 10, false);
    decode_vector(&mut out, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02], 10, false);
    decode_vector(&mut out, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], 10, false);
    decode_vector(&mut out, &[0x96, 0x01, 0x80, 0x80], 4, true);
    decode_vector(&mut out, &[0x05, 0xff, 0xff], 3, false);
    let count = out.lines().count();
    (out, count)
}

/// Whether `tool` runs; under CI (where scripts/setup.sh installed it) a
/// missing tool is a failure, not a skip.
fn have(tool: &str) -> bool {
    let flag = match tool {
        "iverilog" => "-V",
        "yosys" => "-V",
        _ => "--version",
    };
    let found = Command::new(tool).arg(flag).output().is_ok_and(|o| o.status.success());
    assert!(
        found || std::env::var_os("CI").is_none(),
        "{tool} is missing under CI: scripts/setup.sh should install it"
    );
    found
}

fn hw_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hw/varint")
}

#[test]
fn the_verilog_block_matches_the_rust_encoder_on_every_vector() {
    if !have("iverilog") {
        eprintln!("SKIPPED: iverilog is not installed (scripts/setup.sh installs it)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("cf-hw-varint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (text, count) = vectors();
    assert!(count > 100_000);
    let vectors = dir.join("vectors.txt");
    std::fs::write(&vectors, text).unwrap();
    let hw = hw_dir();
    let sim = dir.join("sim");
    let built = Command::new("iverilog")
        .args(["-g2012", "-Wall", "-o"])
        .arg(&sim)
        .arg(hw.join("varint_encoder.v"))
        .arg(hw.join("varint_decoder.v"))
        .arg(hw.join("tb_varint.v"))
        .output()
        .unwrap();
    assert!(built.status.success(), "iverilog: {}", String::from_utf8_lossy(&built.stderr));
    let run = Command::new("vvp").arg(&sim).arg(format!("+vectors={}", vectors.display())).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    std::fs::remove_dir_all(&dir).ok();
    assert!(run.status.success(), "vvp: {stdout}");
    let want = format!("varint: {count} vectors, 0 failures");
    assert!(stdout.contains(&want), "expected {want:?}; the testbench printed:\n{stdout}");
    eprintln!("{}", stdout.trim());
}

#[test]
fn the_verilog_block_passes_verilator_lint() {
    if !have("verilator") {
        eprintln!("SKIPPED: verilator is not installed (scripts/setup.sh installs it)");
        return;
    }
    for module in ["varint_encoder.v", "varint_decoder.v"] {
        let lint =
            Command::new("verilator").args(["--lint-only", "-Wall"]).arg(hw_dir().join(module)).output().unwrap();
        assert!(
            lint.status.success(),
            "verilator --lint-only -Wall {module}:\n{}",
            String::from_utf8_lossy(&lint.stderr)
        );
    }
}

#[test]
fn the_testbench_notices_a_wrong_encoding() {
    // The check above could pass on a testbench that compares nothing; a
    // vector with one wrong byte must be reported as a failure.
    if !have("iverilog") {
        eprintln!("SKIPPED: iverilog is not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("cf-hw-varint-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let vectors = dir.join("vectors.txt");
    // 300 encodes to ac 02; say ad 02: the encoding and both decodings
    // (which give 301) must fail.
    std::fs::write(&vectors, format!("0 0 {:016x} 2 {} a 1 0 0\n", 300, hex80(&[0xad, 0x02]))).unwrap();
    let hw = hw_dir();
    let sim = dir.join("sim");
    let built = Command::new("iverilog")
        .args(["-g2012", "-o"])
        .arg(&sim)
        .arg(hw.join("varint_encoder.v"))
        .arg(hw.join("varint_decoder.v"))
        .arg(hw.join("tb_varint.v"))
        .output()
        .unwrap();
    assert!(built.status.success());
    let run = Command::new("vvp").arg(&sim).arg(format!("+vectors={}", vectors.display())).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    std::fs::remove_dir_all(&dir).ok();
    assert!(stdout.contains("varint: 1 vectors, 3 failures") && stdout.contains("FAIL encode"), "{stdout}");
}

#[test]
fn the_verilog_block_synthesizes_to_gates_without_latches() {
    // Synthesizable, and purely combinational: an `always @*` that forgot
    // to assign an output on some path would infer a latch.
    if !have("yosys") {
        eprintln!("SKIPPED: yosys is not installed (scripts/setup.sh installs it)");
        return;
    }
    for module in ["varint_encoder", "varint_decoder"] {
        let script = format!(
            "read_verilog {}; synth -top {module} -flatten; stat",
            hw_dir().join(format!("{module}.v")).display()
        );
        let out = Command::new("yosys").args(["-p", &script]).output().unwrap();
        let log = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "yosys {module}:\n{log}");
        assert!(log.contains("Found and reported 0 problems"), "yosys check of {module}:\n{log}");
        assert!(!log.contains("Latch inferred"), "{module} infers a latch:\n{log}");
        let stat = log.rsplit("=== ").next().unwrap_or_default();
        assert!(
            !stat.to_lowercase().contains("latch") && !stat.contains("DFF"),
            "{module} is not combinational:\n{stat}"
        );
        assert!(stat.contains("Number of cells"), "{stat}");
    }
}
