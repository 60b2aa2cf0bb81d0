//! Unmodified `redis-server` and `redis-cli` (Debian packages) under
//! `LD_PRELOAD=libcfsocket.so`: the answers are right, and the monitor says
//! the connections went through rings. Skips, saying so, without redis.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cornflakes_socket::{MonitorAddr, MonitorOptions};

fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet", "-p", "cornflakes-socket-preload"]);
    if dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    assert!(build.status().unwrap().success(), "building libcfsocket.so failed");
    dir.join("libcfsocket.so")
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A monitor on a thread of the test.
struct Monitor {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<std::io::Result<cornflakes_socket::MonitorStats>>,
}

impl Monitor {
    fn start(spec: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let opts = MonitorOptions {
            addr: MonitorAddr::parse(spec),
            verbose: false,
            stop: Some(stop.clone()),
            on_ready: Some(Arc::new(move || {
                let _ = tx.send(());
            })),
        };
        let thread = std::thread::spawn(move || cornflakes_socket::run_monitor(&opts));
        rx.recv_timeout(Duration::from_secs(10)).expect("monitor did not start");
        Self { stop, thread }
    }

    fn stop(self) -> cornflakes_socket::MonitorStats {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap().unwrap()
    }
}

fn start_redis(lib: &Path, mon: &str) -> (Kill, u16) {
    let port = free_port();
    let server = Kill(
        Command::new("redis-server")
            .env("LD_PRELOAD", lib)
            .env("CFSOCKET_MONITOR", mon)
            .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    // A client without the library: served by the kernel twin.
    while Command::new("redis-cli")
        .args(["-p", &port.to_string(), "ping"])
        .output()
        .map_or(true, |o| String::from_utf8_lossy(&o.stdout).trim() != "PONG")
    {
        assert!(start.elapsed() < Duration::from_secs(10), "redis-server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (server, port)
}

/// The monitor stops and another starts: nothing breaks. Connections go to
/// the kernel twin until the listener has registered with the new monitor,
/// which it does at its next `accept` (here: of a kernel connection).
#[test]
fn monitor_restart_kernel_until_the_listener_registers_again() {
    if !have("redis-server") || !have("redis-cli") {
        assert!(
            std::env::var_os("CI").is_none(),
            "a test partner is missing under CI: scripts/setup.sh must install it"
        );
        eprintln!("SKIPPED: redis-server/redis-cli not installed (scripts/setup.sh installs them)");
        return;
    }
    let lib = library();
    let mon = format!("@cf-redis-restart-{}", std::process::id());
    let first = Monitor::start(&mon);
    let (_server, port) = start_redis(&lib, &mon);
    assert_eq!(cli(&lib, &mon, port, &["set", "k", "v1"]), "OK");
    let stats = first.stop();
    assert_eq!((stats.listens, stats.delivered), (1, 1), "{stats:?}");
    // No monitor at all.
    assert_eq!(cli(&lib, &mon, port, &["get", "k"]), "v1");
    // A new monitor that has never heard of this listener: the first client
    // goes to the kernel, and redis-server's accept of it registers again
    // (retries are at most every 200 ms).
    let second = Monitor::start(&mon);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cli(&lib, &mon, port, &["set", "k", "v2"]), "OK");
    assert_eq!(cli(&lib, &mon, port, &["get", "k"]), "v2");
    let stats = second.stop();
    assert_eq!((stats.listens, stats.no_listener, stats.delivered), (1, 1, 1), "{stats:?}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn cli(lib: &Path, mon: &str, port: u16, args: &[&str]) -> String {
    cli_stdin(lib, mon, port, args, None)
}

/// With `stdin`, `redis-cli -x` sends it as the last argument (too long for
/// the command line).
fn cli_stdin(lib: &Path, mon: &str, port: u16, args: &[&str], stdin: Option<&[u8]>) -> String {
    use std::io::Write;
    let mut cmd = Command::new("redis-cli");
    cmd.env("LD_PRELOAD", lib).env("CFSOCKET_MONITOR", mon).args(["-p", &port.to_string()]);
    if stdin.is_some() {
        cmd.arg("-x");
    }
    let mut child = cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or_default()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn redis_server_and_cli_over_rings() {
    if !have("redis-server") || !have("redis-cli") {
        assert!(
            std::env::var_os("CI").is_none(),
            "a test partner is missing under CI: scripts/setup.sh must install it"
        );
        eprintln!("SKIPPED: redis-server/redis-cli not installed (scripts/setup.sh installs them)");
        return;
    }
    let lib = library();
    let mon = format!("@cf-redis-test-{}", std::process::id());
    let monitor = Monitor::start(&mon);
    let (server, port) = start_redis(&lib, &mon);

    // The ping above came from a client without the library: the kernel twin.
    assert_eq!(cli(&lib, &mon, port, &["set", "greeting", "hello"]), "OK");
    assert_eq!(cli(&lib, &mon, port, &["get", "greeting"]), "hello");
    let big = "x".repeat(300_000); // more than one ring record
    assert_eq!(cli_stdin(&lib, &mon, port, &["set", "big"], Some(big.as_bytes())), "OK");
    assert_eq!(cli(&lib, &mon, port, &["strlen", "big"]), "300000");
    assert_eq!(cli(&lib, &mon, port, &["get", "big"]).len(), 300_000);
    assert_eq!(cli(&lib, &mon, port, &["dbsize"]), "2");

    drop(server);
    let stats = monitor.stop();
    assert_eq!(stats.listens, 1, "{stats:?}");
    assert_eq!(stats.delivered, 6, "every redis-cli under the library used rings: {stats:?}");
}

/// No monitor running and `CFSOCKET_MONITOR_BIN` set: the first process
/// that needs the monitor (redis-server at `listen`) starts `cf
/// socket-monitor`, and connections then go through rings.
#[test]
fn monitor_started_on_demand() {
    if !have("redis-server") || !have("redis-cli") {
        assert!(
            std::env::var_os("CI").is_none(),
            "a test partner is missing under CI: scripts/setup.sh must install it"
        );
        eprintln!("SKIPPED: redis-server/redis-cli not installed (scripts/setup.sh installs them)");
        return;
    }
    let lib = library();
    let cf = lib.with_file_name("cf");
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet", "-p", "cf"]);
    if lib.parent().and_then(Path::file_name).is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    assert!(build.status().unwrap().success(), "building cf failed");
    let mon = format!("@cf-redis-on-demand-{}", std::process::id());
    let port = free_port();
    let log = std::env::temp_dir().join(format!("cf-on-demand-{}.log", std::process::id()));
    let server = Kill(
        Command::new("redis-server")
            .env("LD_PRELOAD", &lib)
            .env("CFSOCKET_MONITOR", &mon)
            .env("CFSOCKET_MONITOR_BIN", &cf)
            .env("CFSOCKET_DEBUG", "1")
            .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while Command::new("redis-cli")
        .args(["-p", &port.to_string(), "ping"])
        .output()
        .map_or(true, |o| String::from_utf8_lossy(&o.stdout).trim() != "PONG")
    {
        assert!(start.elapsed() < Duration::from_secs(10), "redis-server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = Command::new("redis-cli")
        .env("LD_PRELOAD", &lib)
        .env("CFSOCKET_MONITOR", &mon)
        .env("CFSOCKET_DEBUG", "1")
        .args(["-p", &port.to_string(), "set", "k", "on-demand"])
        .output()
        .unwrap();
    drop(server);
    let server_log = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    // Stop the monitor redis-server started (its pid is in the log).
    let pid = server_log
        .lines()
        .find_map(|l| l.split("socket-monitor (pid ").nth(1))
        .and_then(|rest| rest.trim_end_matches(')').parse::<u32>().ok());
    if let Some(pid) = pid {
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
    assert!(pid.is_some(), "redis-server did not start a monitor:\n{server_log}");
    assert!(server_log.contains("registered"), "{server_log}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
    let cli_log = String::from_utf8_lossy(&out.stderr);
    assert!(cli_log.contains(": rings"), "redis-cli did not use rings: {cli_log}");
}
