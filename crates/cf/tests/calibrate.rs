//! `cf calibrate` end to end on a one-cell grid: both modes measured,
//! every response checked, the calibration file written where it was told,
//! and `cf kv-server` reading it back.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn a_one_cell_study_writes_a_threshold_that_the_server_uses() {
    let dir = std::env::temp_dir().join(format!("cf-calibrate-cli-{}", std::process::id()));
    let file = dir.join("calibration");
    let out = Command::new(env!("CARGO_BIN_EXE_cf"))
        .args([
            "calibrate",
            "--hugepages",
            "off",
            "--entries",
            "2",
            "--totals",
            "4096",
            "--working-sets-mib",
            "1",
            "--seconds",
            "0.05",
        ])
        .arg("--out")
        .arg(&dir)
        .arg("--write-to")
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let cell = &summary["cells"][0];
    assert_eq!((cell["entries"].as_u64(), cell["element"].as_u64()), (Some(2), Some(2048)));
    assert_eq!(cell["errors"].as_u64(), Some(0), "{cell}");
    // Both modes took turns in the server and each was measured; no
    // end-to-end sweeps without --maxima.
    let (sg, copy) = (cell["sg_capacity"].as_f64().unwrap(), cell["copy_capacity"].as_f64().unwrap());
    assert!(sg > 0.0 && copy > 0.0, "{cell}");
    assert!((cell["capacity_ratio"].as_f64().unwrap() / (sg / copy) - 1.0).abs() < 1e-9, "{cell}");
    assert!(cell["sg_max"].is_null() && cell["max_ratio"].is_null(), "{cell}");
    assert_eq!(summary["basis"].as_str(), Some("server-cost"));
    assert!(dir.join("heatmap-1MiB.png").exists());
    assert!(!dir.join("heatmap-1MiB-maxima.png").exists());
    // One element size: its threshold is 2048 B if zero-copy won, never
    // otherwise; either way the file says it for shm and as the default.
    let text = std::fs::read_to_string(&file).unwrap();
    let expected = if sg / copy >= 1.0 { "2048" } else { "never" };
    assert!(
        text.contains(&format!("\nshm = {expected}\n")) && text.contains(&format!("\ndefault = {expected}\n")),
        "{text}"
    );
    assert!(stdout.contains(&format!("wrote {}", file.display())), "{stdout}");

    // The server reads it and says so.
    let sock = dir.join("kv.sock");
    let mut server = Command::new(env!("CARGO_BIN_EXE_cf"))
        .args(["kv-server", "--workload", "grid:keys=4,fields=1,size=64", "--addr"])
        .arg(&sock)
        .env("CORNFLAKES_CALIBRATION", &file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(server.stderr.take().unwrap());
    let mut said = String::new();
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        said.push_str(&line);
        if line.contains("zero-copy threshold") {
            break;
        }
        line.clear();
    }
    server.kill().ok();
    server.wait().ok();
    std::fs::remove_dir_all(&dir).ok();
    let shown = if expected == "never" { "never".to_owned() } else { format!("{expected} B") };
    assert!(said.contains(&format!("zero-copy threshold {shown} (from {})", file.display())), "{said}");
}

#[test]
fn thresholds_in_turns_measure_each_one_in_one_server() {
    let out = Command::new(env!("CARGO_BIN_EXE_cf"))
        .args([
            "thresholds",
            "--hugepages",
            "off",
            "--workload",
            "grid:keys=64,fields=2,size=1024",
            "--interleaved",
            "0.5",
        ])
        // The last one without serialize-and-send.
        .args(["--turns", "128,0,never,128-no-sas"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(" 0 errors, 0 timeouts"), "{stdout}");
    // One row per threshold, in the order given, each with requests and a
    // cost; no adaptive row.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() >= 5 && (w[0] == "never" || w.get(1) == Some(&"B")))
        .collect();
    let names: Vec<String> = rows
        .iter()
        .map(|w| match (w[0], w[2]) {
            ("never", _) => "never".into(),
            (_, "no-sas") => w[0..3].join(" "),
            _ => w[0..2].join(" "),
        })
        .collect();
    assert_eq!(names, ["128 B", "0 B", "never", "128 B no-sas"], "{stdout}");
    for w in &rows {
        let requests: u64 = w[w.len() - 4].parse().unwrap();
        let ns: f64 = w[w.len() - 3].parse().unwrap();
        assert!(requests > 0 && ns > 0.0, "{stdout}");
    }
    assert!(!stdout.contains("adaptive"), "{stdout}");
}
