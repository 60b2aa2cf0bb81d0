//! End-to-end runs of the `cf` benchmarks, short: two real processes per
//! run, every response checked by the client (a wrong one fails the run).

use std::process::Command;

fn cf(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cf")).args(args).output().expect("cf runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "cf {args:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// The value of `"key":` in a one-line JSON object (numbers and strings).
fn field<'s>(json: &'s str, key: &str) -> &'s str {
    let start = json.find(&format!("\"{key}\":")).unwrap_or_else(|| panic!("no {key} in {json}")) + key.len() + 3;
    let rest = &json[start..];
    rest[..rest.find([',', '}']).unwrap()].trim_matches('"')
}

#[test]
fn pingpong_over_every_transport() {
    for transport in ["shm", "udp", "bare"] {
        for size in ["8", "2048"] {
            let out = cf(&["pingpong", "--transport", transport, "--size", size, "--iters", "2000", "--warmup", "200"]);
            let json = out.lines().last().unwrap();
            assert_eq!(field(json, "transport"), transport);
            assert_eq!(field(json, "size"), size);
            assert_eq!(field(json, "round_trips"), "2000");
            let p50: u64 = field(json, "p50_ns").parse().unwrap();
            let p99: u64 = field(json, "p99_ns").parse().unwrap();
            assert!(p50 > 0 && p99 >= p50, "{json}");
        }
    }
}

#[test]
fn echo_in_every_mode_over_both_datapaths() {
    for transport in ["shm", "udp"] {
        for mode in ["hybrid", "no-sas", "raw"] {
            let out = cf(&["echo", "--transport", transport, "--mode", mode, "--seconds", "0.3", "--warmup", "0.1"]);
            let json = out.lines().last().unwrap();
            assert_eq!(field(json, "mode"), mode);
            assert_eq!(field(json, "errors"), "0");
            let responses: u64 = field(json, "responses").parse().unwrap();
            assert!(responses > 0, "{json}");
        }
    }
}

#[test]
fn help_explains_each_subcommand() {
    let help = cf(&["--help"]);
    for sub in ["shapes", "pingpong", "echo", "compare", "kv-server", "loadgen"] {
        assert!(help.contains(sub), "{help}");
    }
    assert!(!help.lines().any(|l| l.trim_start().starts_with("serve ")), "the server subcommand stays hidden: {help}");
}

#[test]
fn compare_writes_a_summary_and_a_plot_for_every_system() {
    let out = std::env::temp_dir().join(format!("cf-compare-test-{}", std::process::id()));
    let table = cf(&[
        "compare",
        "--workload",
        "ycsb:keys=2000,fields=2,size=600",
        "--workload",
        "echo:fields=2,size=2048",
        "--systems",
        "cornflakes,protobuf,flatbuffers,capnp",
        "--seconds",
        "0.2",
        "--warmup",
        "0.05",
        "--repeats",
        "2",
        "--refine",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).expect("summary.json written"))
            .expect("summary.json is JSON");
    let workloads = summary["workloads"].as_array().expect("workloads");
    assert_eq!(workloads.len(), 2, "{summary}");
    for w in workloads {
        let systems = w["systems"].as_array().expect("systems");
        assert_eq!(systems.len(), 4, "{w}");
        for s in systems {
            assert!(s["max_achieved_rps"].as_f64().expect("max_achieved_rps") > 0.0, "{s}");
            assert_eq!(s["errors"], 0, "{s}");
            assert!(s["p99_us"].as_f64().expect("p99_us") > 0.0, "{s}");
            assert!(!s["points"].as_array().expect("points").is_empty(), "{s}");
            assert_eq!(s["repeats_max_rps"].as_array().expect("repeats_max_rps").len(), 2, "{s}");
            assert!(s["server"]["handled"].as_u64().expect("server counters") > 0, "{s}");
            assert_eq!(s["server"]["malformed"], 0, "{s}");
            // Every point carries the server's busy capacity over it (the
            // system's figure needs a point kept up with, which a loaded
            // test machine may not give).
            let points = s["points"].as_array().expect("points");
            assert!(points.iter().all(|p| p["server_busy_capacity_rps"].as_f64().is_some_and(|c| c > 0.0)), "{s}");
            assert!(s["p50_bound_us"].as_f64().expect("p50_bound_us") >= 200.0, "{s}");
            assert!(table.contains(s["name"].as_str().unwrap()), "{table}");
        }
        let png = std::fs::read(out.join(w["plot"].as_str().expect("plot"))).expect("plot written");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
    }
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn loadgen_against_a_server_started_by_hand() {
    let sock = std::env::temp_dir().join(format!("cf-kv-test-{}.sock", std::process::id()));
    let sock = sock.to_str().unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_cf"))
        .args(["kv-server", "--system", "capnp", "--workload", "twitter:keys=2000", "--addr", sock])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("server starts");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(server.stdout.take().unwrap()), &mut line).unwrap();
    assert!(line.starts_with("READY"), "{line}");
    let out = cf(&[
        "loadgen",
        "--system",
        "capnp",
        "--workload",
        "twitter:keys=2000",
        "--addr",
        sock,
        "--rate",
        "5000",
        "--seconds",
        "0.3",
        "--warmup",
        "0.1",
    ]);
    server.kill().ok();
    server.wait().ok();
    let json: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).expect("JSON last line");
    assert_eq!(json["errors"], 0, "{json}");
    assert_eq!(json["timeouts"], 0, "{json}");
    let achieved = json["max_achieved_rps"].as_f64().unwrap();
    assert!(achieved > 4000.0 && achieved < 6000.0, "offered 5000/s, achieved {achieved}");
}
