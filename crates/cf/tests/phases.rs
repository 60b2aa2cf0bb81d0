//! `cf phases` end to end at a small scale: the server under callgrind,
//! instructions per step, the table, JSON and plot written.
#![cfg(not(miri))]

use std::process::{Command, Stdio};

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

#[test]
fn phases_counts_each_step_and_sees_the_copy_cornflakes_avoids() {
    if !have("valgrind") {
        assert!(std::env::var_os("CI").is_none(), "valgrind is missing under CI: scripts/setup.sh must install it");
        eprintln!("SKIPPED: valgrind not installed (scripts/setup.sh installs it)");
        return;
    }
    let out = std::env::temp_dir().join(format!("cf-phases-{}", std::process::id()));
    let run = Command::new(env!("CARGO_BIN_EXE_cf"))
        .args(["phases", "--systems", "cornflakes,protobuf", "--workload", "cdn:objects=2000"])
        .args(["--rate", "200", "--seconds", "1"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("cf runs");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("phases.json")).expect("phases.json")).unwrap();
    let systems = json.as_array().expect("one entry per system");
    assert_eq!(systems.len(), 2, "{json}");
    let step = |system: &str, name: &str, event: &str| {
        let s = systems.iter().find(|s| s["system"] == system).unwrap_or_else(|| panic!("{system}: {json}"));
        assert!(s["requests"].as_u64().is_some_and(|n| n > 50), "{system} handled requests: {json}");
        assert_eq!(s["errors"], 0, "{system}: every response right: {json}");
        let steps = s["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 5, "{json}");
        steps.iter().find(|x| x["step"] == name).unwrap()[event].as_f64().unwrap()
    };
    for system in ["cornflakes", "protobuf"] {
        for name in ["deserialize", "store", "serialize_send"] {
            assert!(step(system, name, "instructions") > 10.0, "{system} {name}: {json}");
        }
    }
    // CDN values are 8000 B segments, 42 MB of them (more than a last-level
    // cache): prost reads each value from memory while encoding it,
    // Cornflakes takes a reference and sends a descriptor. Cache misses,
    // unlike instruction counts, do not depend on the build's optimisation.
    let misses = |system: &str| step(system, "set_value", "ll_misses") + step(system, "serialize_send", "ll_misses");
    let (cornflakes, prost) = (misses("cornflakes"), misses("protobuf"));
    assert!(
        prost > 20.0 && prost > 10.0 * cornflakes,
        "last-level misses per request: prost {prost}, cornflakes {cornflakes}: {json}"
    );
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(table.contains("| cornflakes |") && table.contains("**total**"), "{table}");
    assert!(std::fs::read(out.join("phases.png")).unwrap().starts_with(b"\x89PNG"));
    assert!(out.join("callgrind.server.cornflakes.out").exists());

    // An echo skips the store; its requests are still counted and its
    // steps measured.
    let echo = Command::new(env!("CARGO_BIN_EXE_cf"))
        .args(["phases", "--systems", "cornflakes", "--workload", "echo", "--rate", "200", "--seconds", "1"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("cf runs");
    assert!(echo.status.success(), "{}", String::from_utf8_lossy(&echo.stderr));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("phases.json")).expect("phases.json")).unwrap();
    assert!(json[0]["requests"].as_u64().is_some_and(|n| n > 50) && json[0]["errors"] == 0, "{json}");
    let steps = json[0]["steps"].as_array().expect("steps");
    let of = |name: &str| steps.iter().find(|x| x["step"] == name).unwrap()["instructions"].as_f64().unwrap();
    assert!(of("deserialize") > 10.0 && of("serialize_send") > 10.0 && of("store") == 0.0, "{json}");

    // The load generator's side: the server runs natively.
    let client = Command::new(env!("CARGO_BIN_EXE_cf"))
        .args(["phases", "--side", "client", "--systems", "cornflakes", "--workload", "ycsb:keys=1000"])
        .args(["--rate", "300", "--seconds", "1"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("cf runs");
    assert!(client.status.success(), "{}", String::from_utf8_lossy(&client.stderr));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("phases.json")).expect("phases.json")).unwrap();
    let steps = json[0]["steps"].as_array().expect("steps");
    let names: Vec<&str> = steps.iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(names, ["arrive", "send_backlog", "receive", "on_response", "expire"], "{json}");
    assert!(json[0]["requests"].as_u64().is_some_and(|n| n > 50) && json[0]["errors"] == 0, "{json}");
    // Receiving a response gathers its 4 x 1024 B of values out of the
    // server's pool (at 16-32 bytes an instruction: over 128 of them)...
    assert!(steps[2]["instructions"].as_f64().is_some_and(|i| i > 300.0), "{json}");
    // ...and checking it reads every byte again.
    assert!(steps[3]["instructions"].as_f64().is_some_and(|i| i > 1000.0), "{json}");
    std::fs::remove_dir_all(&out).ok();

    let refused = Command::new(env!("CARGO_BIN_EXE_cf"))
        .args(["phases", "--systems", "capnp", "--out"])
        .arg(std::env::temp_dir().join("cf-phases-refused"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "a system without marked steps is a usage error");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("does not mark the steps"));
}
