//! `cf sockets-bench` end to end at a tiny scale: every program pair on the
//! kernel and through libcfsocket, with the table, summary.json and the
//! plot written, and every library run carried by rings.
#![cfg(not(miri))]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn have(tool: &str, flag: &str) -> bool {
    Command::new(tool).arg(flag).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// libcfsocket.so of this build profile (built here: `cargo test -p cf`
/// alone does not build the preload package).
fn library() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_cf"));
    let dir = exe.parent().map(Path::to_path_buf).unwrap();
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet", "-p", "cornflakes-socket-preload"]);
    if dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    assert!(build.status().unwrap().success(), "building libcfsocket.so failed");
    dir.join("libcfsocket.so")
}

#[test]
fn sockets_bench_runs_every_program_both_ways() {
    let partners =
        [("sockperf", "--version"), ("redis-server", "--version"), ("nginx", "-v"), ("wrk", "-v"), ("iperf3", "-v")];
    if let Some((missing, _)) = partners.iter().find(|(p, f)| !have(p, f)) {
        assert!(std::env::var_os("CI").is_none(), "{missing} is missing under CI: scripts/setup.sh must install it");
        eprintln!("SKIPPED: {missing} not installed (scripts/setup.sh installs it)");
        return;
    }
    let out = std::env::temp_dir().join(format!("cf-sockets-bench-{}", std::process::id()));
    let run = Command::new(env!("CARGO_BIN_EXE_cf"))
        .args(["sockets-bench", "--rounds", "1", "--seconds", "1", "--redis-requests", "3000"])
        .args(["--redis-latency-requests", "500", "--wrk-connections", "8"])
        .arg("--library")
        .arg(library())
        .arg("--out")
        .arg(&out)
        .output()
        .expect("cf runs");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).expect("summary.json")).unwrap();
    let cases: Vec<&str> = summary["cases"].as_array().unwrap().iter().map(|c| c["case"].as_str().unwrap()).collect();
    assert_eq!(cases, ["sockperf 64 B", "redis -c 1", "redis -c 50", "nginx", "iperf3"], "{summary}");
    for r in summary["runs"].as_array().unwrap() {
        assert!(r["value"].as_f64().is_some_and(|v| v > 0.0), "{r}");
        let rings = r["ring_connections"].as_u64().unwrap();
        match r["mode"].as_str().unwrap() {
            "cfsocket" => assert!(rings > 0, "a library run without rings: {r}"),
            _ => assert_eq!(rings, 0, "{r}"),
        }
    }
    let nginx = summary["runs"].as_array().unwrap().iter().find(|r| r["case"] == "nginx").unwrap();
    assert!(nginx["extra"]["responses_checked"].as_f64().unwrap() > 0.0, "{nginx}");
    assert!(summary["sockperf_over_bare"].as_f64().is_some_and(|r| r > 0.0), "{summary}");
    for f in ["table.txt", "runs.tsv", "sockets-bench.png"] {
        assert!(std::fs::metadata(out.join(f)).is_ok_and(|m| m.len() > 0), "{f}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
