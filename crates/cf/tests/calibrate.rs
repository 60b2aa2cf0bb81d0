//! `cf calibrate` end to end on a one-cell grid: both systems measured,
//! every response checked, the calibration file written where it was told,
//! and `cf kv-server` reading it back.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn a_one_cell_study_writes_a_threshold_that_the_server_uses() {
    let dir = std::env::temp_dir().join(format!("cf-calibrate-cli-{}", std::process::id()));
    let file = dir.join("calibration");
    let out = Command::new(env!("CARGO_BIN_EXE_cf"))
        .args(["calibrate", "--entries", "2", "--totals", "4096", "--working-sets-mib", "1", "--seconds", "0.05"])
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
    assert!(cell["sg_max"].as_f64().unwrap() > 0.0 && cell["copy_max"].as_f64().unwrap() > 0.0, "{cell}");
    assert!(dir.join("heatmap-1MiB.png").exists());
    // One element size: its threshold is 2048 B if zero-copy won, never
    // otherwise; either way the file says it for shm and as the default.
    let text = std::fs::read_to_string(&file).unwrap();
    let expected = if cell["max_ratio"].as_f64().unwrap() >= 1.0 { "2048" } else { "never" };
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
