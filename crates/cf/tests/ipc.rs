//! `cf ipc-pingpong` and `cf ipc-compare`, short: real iceoryx2 and shm
//! servers in their own processes, every echoed byte checked by the client
//! (a wrong or missing response fails the run).

use std::process::Command;

fn cf(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cf")).args(args).output().expect("cf runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "cf {args:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn last_json(out: &str) -> serde_json::Value {
    let line = out.lines().last().expect("output");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("last line is not JSON ({e}): {line}"))
}

fn u64_of(json: &serde_json::Value, key: &str) -> u64 {
    json[key].as_u64().unwrap_or_else(|| panic!("no integer {key} in {json}"))
}

#[test]
fn ipc_pingpong_echoes_every_size() {
    for size in ["1", "8", "2048", "65536"] {
        let json = last_json(&cf(&["ipc-pingpong", "--size", size, "--iters", "500", "--warmup", "50"]));
        assert_eq!(json["transport"], "iceoryx2");
        assert_eq!(json["size"].to_string(), size);
        assert_eq!(u64_of(&json, "round_trips"), 500);
        let (p50, p99, max) = (u64_of(&json, "p50_ns"), u64_of(&json, "p99_ns"), u64_of(&json, "max_ns"));
        assert!(p50 > 0 && p50 <= p99 && p99 <= max, "quantiles out of order: {json}");
    }
}

#[test]
fn ipc_compare_reports_both_systems_per_size() {
    let out = cf(&[
        "ipc-compare",
        "--sizes",
        "8,70000",
        "--iters",
        "300",
        "--large-iters",
        "100",
        "--warmup",
        "30",
        "--repeats",
        "2",
    ]);
    assert!(out.contains("shm p50"), "no table:\n{out}");
    let rows = last_json(&out);
    let rows = rows.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 2);
    for (row, size) in rows.iter().zip([8, 70000]) {
        assert_eq!(u64_of(row, "size"), size);
        let runs = row["runs"].as_array().expect("runs");
        // Two repeats of each system, each going first in turn.
        let order: Vec<&str> = runs.iter().map(|r| r["transport"].as_str().expect("transport")).collect();
        assert_eq!(order, ["iceoryx2", "shm", "shm-in-place", "shm", "shm-in-place", "iceoryx2"]);
        let expected_trips = if size >= 65536 { 100 } else { 300 };
        assert!(runs.iter().all(|r| u64_of(r, "round_trips") == expected_trips && u64_of(r, "size") == size));
        let (i50, s50) = (u64_of(row, "iceoryx2_p50_ns"), u64_of(row, "shm_p50_ns"));
        assert!(i50 > 0 && s50 > 0);
        let ratio = row["p50_ratio"].as_f64().expect("ratio");
        assert!((ratio - s50 as f64 / i50 as f64).abs() < 0.01, "ratio {ratio} is not {s50} / {i50}");
        let p50 = u64_of(row, "in_place_p50_ns");
        let ratio = row["in_place_p50_ratio"].as_f64().expect("ratio");
        assert!(p50 > 0 && (ratio - p50 as f64 / i50 as f64).abs() < 0.01, "ratio {ratio} is not {p50} / {i50}");
    }
}

#[test]
fn ipc_compare_refuses_a_zero_size() {
    let out = Command::new(env!("CARGO_BIN_EXE_cf")).args(["ipc-compare", "--sizes", "0"]).output().expect("cf runs");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn help_lists_the_ipc_subcommands_and_hides_the_server() {
    let help = cf(&["--help"]);
    assert!(help.contains("ipc-pingpong") && help.contains("ipc-compare"), "{help}");
    assert!(!help.contains("ipc-serve"), "the iceoryx2 server subcommand stays hidden: {help}");
}
