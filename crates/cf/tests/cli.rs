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
    for sub in ["shapes", "pingpong", "echo"] {
        assert!(help.contains(sub), "{help}");
    }
    assert!(!help.lines().any(|l| l.trim_start().starts_with("serve ")), "the server subcommand stays hidden: {help}");
}
