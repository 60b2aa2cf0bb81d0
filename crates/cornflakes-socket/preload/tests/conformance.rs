//! Conformance: `tests/conformance/conformance.c` runs on the kernel and
//! under `LD_PRELOAD=libcfsocket.so` (with a monitor in this process); the
//! two outputs must match line by line, and the monitor must have handed
//! out ring connections (otherwise the comparison proves nothing).
//!
//! Needs `cc`; without it the test says so and passes (nothing to run).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cornflakes_socket::{MonitorAddr, MonitorOptions, MonitorStats};

/// Ring connections the program makes to its own listener (main, edge-
/// triggered epoll, EPIPE, non-blocking, fork echo, bulk, killed idle peer,
/// killed writer, 1000 idle).
const RING_CONNECTIONS: u64 = 1008;

/// The library, built now: `cargo test` builds this package's test
/// harnesses but not its cdylib, which would otherwise be stale.
fn library() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            // target/<profile>/deps/conformance-<hash> -> target/<profile>/
            let exe = std::env::current_exe().unwrap();
            let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
            let mut build = Command::new(env!("CARGO"));
            build.args(["build", "--quiet", "-p", "cornflakes-socket-preload"]);
            if dir.file_name().is_some_and(|n| n == "release") {
                build.arg("--release");
            }
            let st = build.status().unwrap();
            assert!(st.success(), "building libcfsocket.so failed");
            let lib = dir.join("libcfsocket.so");
            assert!(lib.exists(), "{} missing after the build", lib.display());
            lib
        })
        .clone()
}

fn compile(name: &str) -> Option<PathBuf> {
    compile_file(name, "conformance.c")
}

fn compile_file(name: &str, file: &str) -> Option<PathBuf> {
    if Command::new("cc").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "a test partner is missing under CI: scripts/setup.sh must install it"
        );
        eprintln!("SKIPPED: no C compiler (`cc`) to build the conformance program");
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance").join(file);
    let out = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let st = Command::new("cc").args(["-O1", "-Wall", "-Werror", "-o"]).arg(&out).arg(&src).status().unwrap();
    assert!(st.success(), "cc failed on {}", src.display());
    Some(out)
}

fn run(prog: &Path, monitor: &str, preload: Option<&Path>) -> Vec<String> {
    run_logged(prog, monitor, preload).0
}

/// `run`, with the library's decisions on stderr (`CFSOCKET_DEBUG=1`).
fn run_logged(prog: &Path, monitor: &str, preload: Option<&Path>) -> (Vec<String>, String) {
    let (stdout, stderr) = run_with(prog, &[], monitor, preload);
    (stdout.lines().map(str::to_owned).collect(), stderr)
}

/// Runs `prog args` (under the library when `preload` names it), which
/// must succeed; its stdout and stderr (with the library's decisions:
/// `CFSOCKET_DEBUG=1`).
fn run_with(prog: &Path, args: &[&str], monitor: &str, preload: Option<&Path>) -> (String, String) {
    let mut cmd = Command::new(prog);
    cmd.args(args).env("CFSOCKET_MONITOR", monitor).env("CFSOCKET_DEBUG", "1").env_remove("LD_PRELOAD");
    if let Some(lib) = preload {
        cmd.env("LD_PRELOAD", lib);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{} {args:?} (preload: {preload:?}) failed: {:?}\nstdout:\n{text}\nstderr:\n{stderr}",
        prog.display(),
        out.status,
    );
    (text, stderr)
}

/// Runs one of the small programs of `tests/conformance/` on the kernel,
/// then under the library with a monitor; asserts that both print the
/// same; returns the kernel's output, the library run's stderr and the
/// monitor's counts. `extra` runs with the monitor still up.
fn kernel_then_library(
    name: &str,
    file: &str,
    extra: impl FnOnce(&Path, &str, &Path),
) -> Option<(String, String, MonitorStats)> {
    let prog = compile_file(name, file)?;
    let lib = library();
    let (kernel, _) = run_with(&prog, &[], &format!("@{name}-unused"), None);
    let mut stderr = String::new();
    let stats = with_monitor(name, |mon| {
        let (library, log) = run_with(&prog, &[], mon, Some(&lib));
        assert_eq!(library, kernel, "under the library (left) vs the kernel (right); stderr: {log}");
        stderr = log;
        extra(&prog, mon, &lib);
    });
    let _ = std::fs::remove_file(prog);
    Some((kernel, stderr, stats))
}

/// `log`: the library run's stderr (its debug lines, the program's
/// diagnostics), shown when a line differs.
fn compare(kernel: &[String], library: &[String], log: &str) {
    for (i, (k, l)) in kernel.iter().zip(library).enumerate() {
        assert_eq!(
            k,
            l,
            "line {} differs (kernel vs library)\nkernel:\n{}\nlibrary:\n{}\nlibrary's stderr:\n{log}",
            i + 1,
            kernel.join("\n"),
            library.join("\n")
        );
    }
    assert_eq!(kernel.len(), library.len(), "kernel:\n{}\nlibrary:\n{}", kernel.join("\n"), library.join("\n"));
    assert_eq!(kernel.last().map(String::as_str), Some("done"));
}

fn with_monitor(name: &str, f: impl FnOnce(&str)) -> MonitorStats {
    let spec = format!("@{name}-{}", std::process::id());
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let opts = MonitorOptions {
        addr: MonitorAddr::parse(&spec),
        verbose: false,
        stop: Some(stop.clone()),
        on_ready: Some(Arc::new(move || {
            let _ = tx.send(());
        })),
    };
    let h = std::thread::spawn(move || cornflakes_socket::run_monitor(&opts));
    rx.recv_timeout(Duration::from_secs(10)).expect("monitor did not start");
    f(&spec);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap().unwrap()
}

#[test]
fn kernel_and_library_agree_line_by_line() {
    let Some(prog) = compile("cf-conformance") else { return };
    let lib = library();
    let stats = with_monitor("cf-conformance", |mon| {
        let kernel = run(&prog, mon, None);
        let (library, log) = run_logged(&prog, mon, Some(&lib));
        compare(&kernel, &library, &log);
        // The bulk transfer moved to a large ring midway (and stayed intact).
        assert!(log.contains("moved to a 4194304-byte ring"), "no bulk ring:\n{log}");
    });
    assert_eq!(stats.delivered, RING_CONNECTIONS, "{stats:?}");
    // The refused connect asked the monitor, then went to the kernel.
    assert_eq!(stats.no_listener, 1, "{stats:?}");
    assert_eq!(stats.malformed, 0, "{stats:?}");
    assert_eq!(stats.listens, 1, "{stats:?}");
    let _ = std::fs::remove_file(prog);
}

#[test]
fn without_a_monitor_everything_goes_to_the_kernel() {
    let Some(prog) = compile("cf-conformance-nomon") else { return };
    let lib = library();
    let nowhere = format!("@cf-no-monitor-{}", std::process::id());
    let kernel = run(&prog, &nowhere, None);
    let (library, log) = run_logged(&prog, &nowhere, Some(&lib));
    compare(&kernel, &library, &log);
    let _ = std::fs::remove_file(prog);
}

/// Ring sockets inherited through `exec`: the new image (the library
/// loads again) takes them over and talks (also through a dup'd number),
/// close-on-exec numbers vanish, the old image goes on; the output is the
/// kernel's line by line. A new image started without the library gets an
/// unconnected socket instead (a clean error, said on stderr), and the old
/// image's connection is untouched.
#[test]
fn exec_hands_ring_sockets_to_the_new_image() {
    let nolib = |prog: &Path, mon: &str, lib: &Path| {
        let (stdout, stderr) = run_with(prog, &["nolib"], mon, Some(lib));
        assert_eq!(
            stdout,
            "new image: write failed: Broken pipe\nnew image without the library: exit 2\nold image goes on: read 3 'old'\n",
            "{stderr}"
        );
        assert!(stderr.contains("reaches the new program as an unconnected socket"), "{stderr}");
    };
    let Some((kernel, _, stats)) = kernel_then_library("cf-exec-inherited", "exec_inherited.c", nolib) else { return };
    assert!(kernel.contains("new image exit 0"), "{kernel}");
    assert_eq!(stats.delivered, 2, "{stats:?}");
}

/// A connection to one of the host's own non-loopback addresses goes over
/// rings too, with the kernel's names; equal output on both.
#[test]
fn the_hosts_own_addresses_are_local() {
    let Some((kernel, _, stats)) = kernel_then_library("cf-host-address", "host_address.c", |_, _, _| {}) else {
        return;
    };
    let expected = if kernel.contains("host address: none") {
        eprintln!("this host has no non-loopback IPv4 address: nothing to carry over rings");
        0
    } else {
        assert!(
            kernel.contains("local is the host address 1, client peer is it 1, server local is it 1, ports match 1")
        );
        1
    };
    assert_eq!(stats.delivered, expected, "{stats:?}");
}

/// Connected ring sockets shared by `fork`: parent and child both read
/// and write them (each call whole, a message read half by each), and the
/// peer sees the end of the stream only at the last close; the output is
/// the kernel's, line by line.
#[test]
fn forked_processes_share_connected_ring_sockets() {
    let Some((kernel, stderr, stats)) = kernel_then_library("cf-fork-shared", "fork_shared.c", |_, _, _| {}) else {
        return;
    };
    assert!(kernel.contains("child records 1000, parent records 1000, broken 0"), "{kernel}");
    assert!(!stderr.contains("not supported"), "{stderr}");
    assert_eq!(stats.delivered, 1, "{stats:?}");
}
