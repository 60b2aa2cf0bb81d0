//! `cf redis-compare` end to end at a tiny scale: both servers under
//! `redis-benchmark`, the open-loop RESP phase and the formats phase, with
//! the table, summary.json and the plots written.
#![cfg(not(miri))]

use std::process::{Command, Stdio};

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

#[test]
fn redis_compare_writes_its_table_summary_and_plots() {
    if !have("redis-server") || !have("redis-benchmark") {
        assert!(
            std::env::var_os("CI").is_none(),
            "a test partner is missing under CI: scripts/setup.sh must install it"
        );
        eprintln!("SKIPPED: redis-server/redis-benchmark not installed (scripts/setup.sh installs them)");
        return;
    }
    let out = std::env::temp_dir().join(format!("cf-redis-compare-{}", std::process::id()));
    let run = Command::new(env!("CARGO_BIN_EXE_cf"))
        .args(["redis-compare", "--sizes", "512", "--tests", "get", "--requests", "300", "--latency-requests", "100"])
        .args(["--ycsb-rates", "1000", "--formats-rates", "1000", "--ycsb-keys", "200", "--ycsb-seconds", "0.3"])
        .args(["--twitter-keys", "300"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("cf runs");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).expect("summary.json")).unwrap();
    let rows = summary["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 6, "two servers x three modes: {summary}");
    assert!(rows.iter().all(|r| r["rps"].as_f64().is_some_and(|x| x > 0.0)), "{summary}");
    for phase in ["ycsb", "formats"] {
        let points = summary[phase].as_array().expect(phase);
        assert!(!points.is_empty(), "{phase}: {summary}");
        assert!(points.iter().all(|p| p["errors"] == 0), "{phase}: every reply checked, none wrong: {summary}");
        // The Twitter workload (gets of plain and chunked values, puts) ran too.
        assert!(
            points.iter().any(|p| p["op"] == "twitter" && p["achieved"].as_f64().is_some_and(|a| a > 0.0)),
            "{phase}: {summary}"
        );
    }
    let formats = summary["formats"].as_array().unwrap();
    for op in ["get", "mget-2", "lrange-2", "twitter"] {
        for format in ["resp", "cornflakes"] {
            assert!(formats.iter().any(|p| p["op"] == op && p["format"] == format), "{op} {format}: {summary}");
        }
    }
    for png in ["bench-get-c50.png", "ycsb-get.png", "ycsb-lrange-2.png", "formats-get.png"] {
        let bytes = std::fs::read(out.join(png)).unwrap_or_else(|e| panic!("{png}: {e}"));
        assert!(bytes.starts_with(b"\x89PNG"), "{png} is a PNG");
    }
    assert!(std::fs::read_to_string(out.join("table.txt")).unwrap().contains("redis req/s"));
    std::fs::remove_dir_all(&out).ok();
}
