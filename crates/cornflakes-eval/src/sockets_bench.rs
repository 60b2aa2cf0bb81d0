//! `cf sockets-bench`: unmodified programs over kernel loopback TCP and
//! through the drop-in socket layer (`LD_PRELOAD=libcfsocket.so`), side by
//! side in one run (issue 15, item 6).
//!
//! Each round runs every case twice, kernel first, then the library, with
//! the server pinned to the server core and the client to the client core:
//!
//! | case | programs | figure (better) |
//! |---|---|---|
//! | `sockperf` | `sockperf sr` / `sockperf pp --tcp -m 64` | mean one-way latency (lower) |
//! | `redis -c 1` | `redis-server` / `redis-benchmark -t get -c 1` | mean latency (lower) |
//! | `redis -c 50` | `redis-server` / `redis-benchmark -t get -c 50` | requests/s (higher) |
//! | `nginx` | `nginx` (master + 1 worker, so `fork`) / `wrk -c 50` | requests/s (higher) |
//! | `iperf3` | `iperf3 -s` / `iperf3 -c`, one stream | Gbit/s (higher) |
//!
//! In the same round `cf pingpong --transport bare` at the same message size
//! gives the bare ring's round trip, the bound for `sockperf` through the
//! library.
//!
//! What is checked: `wrk` runs a Lua script that compares every response
//! body with the page and counts the wrong ones; `redis-benchmark`'s GETs
//! read a preloaded value that is read back with `redis-cli` afterwards;
//! any error output, non-2xx reply or socket error fails the run. A library
//! run counts the connections the monitor delivered as rings (its `-v`
//! log): a run in which none went through the rings fails, so a silent fall
//! back to the kernel cannot pass for a result.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::redis_compare::free_port;
use crate::Error;

/// One unmodified program pair measured by `cf sockets-bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Tool {
    /// `sockperf` ping-pong (and `cf pingpong --transport bare` beside it).
    Sockperf,
    /// `redis-server` under `redis-benchmark` GET, `-c 1` and `-c 50`.
    Redis,
    /// `nginx` (a master and its worker) under `wrk`.
    Nginx,
    /// `iperf3`, one TCP stream.
    Iperf3,
}

impl Tool {
    /// Every tool, in run order.
    pub const ALL: [Tool; 4] = [Tool::Sockperf, Tool::Redis, Tool::Nginx, Tool::Iperf3];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Sockperf => "sockperf",
            Tool::Redis => "redis",
            Tool::Nginx => "nginx",
            Tool::Iperf3 => "iperf3",
        }
    }

    /// The programs it needs on `PATH`.
    fn programs(self) -> &'static [&'static str] {
        match self {
            Tool::Sockperf => &["sockperf"],
            Tool::Redis => &["redis-server", "redis-benchmark", "redis-cli"],
            Tool::Nginx => &["nginx", "wrk"],
            Tool::Iperf3 => &["iperf3"],
        }
    }
}

/// Settings of `cf sockets-bench`.
#[derive(Clone, Debug)]
pub struct SocketsBenchConfig {
    /// Programs to run.
    pub tools: Vec<Tool>,
    /// Rounds; each runs every case on the kernel and through the library.
    pub rounds: usize,
    /// Seconds of each timed run (`sockperf`, `wrk`, `iperf3`).
    pub seconds: f64,
    /// `sockperf` message bytes (and the bare ring's).
    pub message_bytes: usize,
    /// Bytes of the page `nginx` serves.
    pub page_bytes: usize,
    /// `wrk` connections.
    pub wrk_connections: u32,
    /// Requests of `redis-benchmark -c 1`.
    pub redis_latency_requests: u64,
    /// Requests of `redis-benchmark -c 50`.
    pub redis_requests: u64,
    /// `libcfsocket.so`.
    pub library: PathBuf,
    /// `cf`, for the monitor and the bare ring.
    pub cf: PathBuf,
    /// Core of the servers.
    pub server_core: usize,
    /// Core of the clients.
    pub client_core: usize,
    /// Directory for table.txt, summary.json, runs.tsv and the PNG.
    pub out: PathBuf,
}

impl Default for SocketsBenchConfig {
    fn default() -> Self {
        let cf = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("cf"));
        let library = cf.with_file_name("libcfsocket.so");
        SocketsBenchConfig {
            tools: Tool::ALL.to_vec(),
            rounds: 3,
            seconds: 3.0,
            message_bytes: 64,
            page_bytes: 1024,
            wrk_connections: 50,
            redis_latency_requests: 20_000,
            redis_requests: 100_000,
            library,
            cf,
            server_core: 0,
            client_core: 1,
            out: PathBuf::from("results/sockets-bench"),
        }
    }
}

/// Where a run's sockets went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// No preload: kernel loopback TCP.
    Kernel,
    /// `LD_PRELOAD=libcfsocket.so` on server and client.
    Cfsocket,
    /// `cf pingpong --transport bare` (no sockets at all).
    Bare,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Kernel => "kernel",
            Mode::Cfsocket => "cfsocket",
            Mode::Bare => "bare ring",
        }
    }
}

/// One measured run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Run {
    /// Case, e.g. `redis -c 50`.
    pub case: String,
    /// Where its sockets went.
    pub mode: Mode,
    /// 1-based round.
    pub round: usize,
    /// The case's figure (see [`Run::unit`]).
    pub value: f64,
    /// Unit of `value`.
    pub unit: &'static str,
    /// Whether higher `value` is better.
    pub higher_is_better: bool,
    /// Other figures of the run (percentiles, ...).
    pub extra: BTreeMap<&'static str, f64>,
    /// Connections the monitor delivered as rings during the run (library
    /// runs; 0 otherwise).
    pub ring_connections: u64,
    /// One-minute load average after the run.
    pub load1: f64,
}

/// Medians of one case and what they say.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CaseSummary {
    /// Case name.
    pub case: String,
    /// Unit of the medians.
    pub unit: &'static str,
    /// Median over rounds, kernel.
    pub kernel: f64,
    /// Median over rounds, through the library.
    pub cfsocket: f64,
    /// How many times better the library is (kernel/library for a
    /// latency, library/kernel for a rate).
    pub gain: f64,
    /// The issue's target for `gain`.
    pub target: f64,
}

/// Settings, runs and medians, as written to summary.json.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    /// Every run, in order.
    pub runs: Vec<Run>,
    /// Per case.
    pub cases: Vec<CaseSummary>,
    /// The library's `sockperf` round trip (2 x mean one-way) over the bare
    /// ring's mean round trip (target: at most 1.5).
    pub sockperf_over_bare: Option<f64>,
    /// The command line's settings and the machine.
    pub settings: serde_json::Value,
}

/// The issue's target per case.
fn target(case: &str) -> f64 {
    match case {
        c if c.starts_with("sockperf") => 10.0,
        "redis -c 1" => 3.0,
        "redis -c 50" => 2.0,
        _ => 1.5,
    }
}

/// A started server, killed (its process group) when dropped.
struct Server {
    child: Child,
    what: &'static str,
}

impl Server {
    fn spawn(mut cmd: Command, what: &'static str) -> Result<Self, Error> {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0).stdin(Stdio::null()).stdout(Stdio::null());
        let child = cmd.spawn().map_err(|e| format!("cannot start {what}: {e}"))?;
        Ok(Server { child, what })
    }

    /// Spawns `cmd` (its stderr discarded) and waits until the kernel lists
    /// a TCP socket listening on `port` (read from /proc, so no probe
    /// connection reaches the server).
    fn listening(mut cmd: Command, what: &'static str, port: u16) -> Result<Self, Error> {
        cmd.stderr(Stdio::null());
        let mut server = Server::spawn(cmd, what)?;
        let needle = format!(":{port:04X} 00000000:0000 0A");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if std::fs::read_to_string("/proc/net/tcp").is_ok_and(|t| t.contains(&needle)) {
                return Ok(server);
            }
            server.check_alive()?;
            if Instant::now() >= deadline {
                return Err(Error::Failed(format!("{what} did not listen on port {port} within 10 s")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Fails if the server has already exited.
    fn check_alive(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::Failed(format!("{} exited early ({status})", self.what))),
            Err(e) => Err(Error::Failed(format!("{}: {e}", self.what))),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        use rustix::process::{kill_process_group, Pid, Signal};
        // The whole group: nginx's worker, sockperf's threads.
        let group = Pid::from_child(&self.child);
        let _ = kill_process_group(group, Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = kill_process_group(group, Signal::KILL);
        let _ = self.child.wait();
    }
}

/// The monitor, with its `-v` log in a file from which deliveries are counted.
struct Monitor {
    server: Server,
    log: PathBuf,
}

impl Monitor {
    fn delivered(&self) -> u64 {
        std::fs::read_to_string(&self.log)
            .map_or(0, |s| s.lines().filter(|l| l.ends_with(": delivered")).count() as u64)
    }
}

/// The programs of one run: how to start each under the chosen mode.
struct Ctx<'a> {
    config: &'a SocketsBenchConfig,
    monitor_name: String,
    work: PathBuf,
}

impl Ctx<'_> {
    /// `taskset -c CORE program`, preloaded in library mode.
    fn command(&self, mode: Mode, core: usize, program: &str) -> Command {
        let mut cmd = Command::new("taskset");
        cmd.args(["-c", &core.to_string(), program]).env("CFSOCKET_MONITOR", &self.monitor_name);
        if mode == Mode::Cfsocket {
            cmd.env("LD_PRELOAD", &self.config.library);
        } else {
            cmd.env_remove("LD_PRELOAD");
        }
        cmd
    }

    fn server(&self, mode: Mode, program: &str) -> Command {
        self.command(mode, self.config.server_core, program)
    }

    fn client(&self, mode: Mode, program: &str) -> Command {
        self.command(mode, self.config.client_core, program)
    }
}

fn output(mut cmd: Command, what: &str) -> Result<(String, String), Error> {
    let Output { status, stdout, stderr } = cmd.output().map_err(|e| format!("cannot run {what}: {e}"))?;
    let (stdout, stderr) =
        (String::from_utf8_lossy(&stdout).into_owned(), String::from_utf8_lossy(&stderr).into_owned());
    if !status.success() {
        return Err(Error::Failed(format!("{what} failed ({status}): {}{}", tail(&stdout), tail(&stderr))));
    }
    Ok((stdout, stderr))
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(6)..].join("\n")
}

/// The number after `key` (e.g. `avg-latency=`) in `text`.
fn number_after(text: &str, key: &str) -> Option<f64> {
    let rest = &text[text.find(key)? + key.len()..];
    let rest = rest.trim_start_matches([' ', '=']);
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

struct Measured {
    value: f64,
    extra: BTreeMap<&'static str, f64>,
}

fn sockperf(ctx: &Ctx<'_>, mode: Mode) -> Result<Measured, Error> {
    let c = ctx.config;
    let port_number = free_port()?;
    let port = port_number.to_string();
    let mut cmd = ctx.server(mode, "sockperf");
    cmd.args(["sr", "--tcp", "-i", "127.0.0.1", "-p", &port]);
    let mut server = Server::listening(cmd, "sockperf sr", port_number)?;
    let mut cmd = ctx.client(mode, "sockperf");
    cmd.args(["pp", "--tcp", "-i", "127.0.0.1", "-p", &port, "-m", &c.message_bytes.to_string()]);
    // sockperf sizes its table of send times from the rate: with the
    // default (`max`) it stops with "_seqN > m_maxSequenceNo" once round
    // trips are faster than about 1 us. A cap far above any rate here.
    cmd.args(["--mps", "4000000"]);
    cmd.args(["-t", &format!("{}", c.seconds.ceil().max(1.0))]);
    let (out, err) = output(cmd, "sockperf pp")?;
    let text = format!("{out}{err}");
    let get = |key: &str| {
        number_after(&text, key).ok_or_else(|| Error::Failed(format!("sockperf printed no {key}: {}", tail(&text))))
    };
    let mean = get("avg-latency=")?;
    let mut extra = BTreeMap::new();
    extra.insert("p50_us", get("percentile 50.000 =")?);
    extra.insert("p99_us", get("percentile 99.000 =")?);
    extra.insert("p999_us", get("percentile 99.900 =")?);
    server.check_alive()?;
    Ok(Measured { value: mean, extra })
}

fn bare_ring(ctx: &Ctx<'_>) -> Result<Measured, Error> {
    let c = ctx.config;
    let mut cmd = Command::new(&c.cf);
    cmd.args(["pingpong", "--transport", "bare", "--size", &c.message_bytes.to_string()]);
    cmd.args(["--server-core", &c.server_core.to_string(), "--client-core", &c.client_core.to_string()]);
    let (out, _) = output(cmd, "cf pingpong --transport bare")?;
    let json: serde_json::Value = out
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| Error::Failed(format!("cf pingpong printed no JSON line: {}", tail(&out))))?;
    let ns = |k: &str| json[k].as_f64().unwrap_or(f64::NAN);
    let mut extra = BTreeMap::new();
    extra.insert("p50_us", ns("p50_ns") / 1000.0);
    extra.insert("p99_us", ns("p99_ns") / 1000.0);
    Ok(Measured { value: ns("mean_ns") / 1000.0, extra })
}

/// The value `redis-benchmark -t get` reads (its key is literally
/// `key:__rand_int__` without `-r`).
const REDIS_KEY: &str = "key:__rand_int__";

fn redis_value() -> String {
    (0..64).map(|i| char::from(b'a' + (i * 7 % 26) as u8)).collect()
}

/// Both redis cases, on one server: `-c 1` (mean latency) then `-c 50`.
fn redis(ctx: &Ctx<'_>, mode: Mode) -> Result<[Measured; 2], Error> {
    let c = ctx.config;
    let port_number = free_port()?;
    let port = port_number.to_string();
    let mut cmd = ctx.server(mode, "redis-server");
    cmd.args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
    let mut server = Server::listening(cmd, "redis-server", port_number)?;
    let cli = |args: &[&str]| {
        let mut cmd = ctx.client(mode, "redis-cli");
        cmd.args(["-p", &port]).args(args);
        output(cmd, "redis-cli")
    };
    let (set, _) = cli(&["set", REDIS_KEY, &redis_value()])?;
    if set.trim() != "OK" {
        return Err(Error::Failed(format!("redis-cli set answered {set:?}")));
    }
    let mut bench = |clients: u32, requests: u64| -> Result<Measured, Error> {
        let mut cmd = ctx.client(mode, "redis-benchmark");
        cmd.args(["-p", &port, "-t", "get", "--csv", "-c", &clients.to_string(), "-n", &requests.to_string()]);
        let (out, err) = output(cmd, "redis-benchmark")?;
        if out.contains("rror") || err.contains("rror") {
            return Err(Error::Failed(format!("redis-benchmark saw errors: {}{}", tail(&out), tail(&err))));
        }
        let Some(f) = crate::redis_compare::benchmark_csv(&out) else {
            return Err(Error::Failed(format!("cannot read redis-benchmark's CSV: {}", tail(&out))));
        };
        server.check_alive()?;
        let mut extra = BTreeMap::new();
        extra.insert("requests_per_s", f[0]);
        extra.insert("mean_us", f[1] * 1000.0);
        extra.insert("p50_us", f[3] * 1000.0);
        extra.insert("p99_us", f[5] * 1000.0);
        let value = if clients == 1 { f[1] * 1000.0 } else { f[0] };
        Ok(Measured { value, extra })
    };
    let one = bench(1, c.redis_latency_requests)?;
    let fifty = bench(50, c.redis_requests)?;
    let (got, _) = cli(&["get", REDIS_KEY])?;
    if got.trim() != redis_value() {
        return Err(Error::Failed(format!("the value read back differs: {got:?}")));
    }
    Ok([one, fifty])
}

/// wrk's Lua script: every response's status and body checked against the
/// page; the totals printed by `done`.
const WRK_CHECK: &str = r#"
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  local f = assert(io.open(os.getenv("CF_PAGE"), "rb")); page = f:read("*a"); f:close()
  checked = 0; bad = 0
end
function response(status, headers, body)
  checked = checked + 1
  if status ~= 200 or body ~= page then bad = bad + 1 end
end
function done(summary, latency, requests)
  local c, b = 0, 0
  for _, t in ipairs(threads) do c = c + t:get("checked"); b = b + t:get("bad") end
  io.write(string.format("checked %d bad %d\n", c, b))
end
"#;

fn nginx(ctx: &Ctx<'_>, mode: Mode) -> Result<Measured, Error> {
    let c = ctx.config;
    let port = free_port()?;
    let prefix = ctx.work.join(format!("nginx-{}", mode.name()));
    std::fs::create_dir_all(prefix.join("html")).map_err(|e| format!("{}: {e}", prefix.display()))?;
    let page = prefix.join("html/index.html");
    let body: Vec<u8> = (0..c.page_bytes).map(|i| b'a' + (i * 11 % 26) as u8).collect();
    std::fs::write(&page, body).map_err(|e| format!("{}: {e}", page.display()))?;
    let p = prefix.display();
    let conf = format!(
        "daemon off;\nmaster_process on;\nworker_processes 1;\nerror_log {p}/error.log warn;\npid {p}/nginx.pid;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {p}/body;\n  proxy_temp_path {p}/proxy;\n  \
         fastcgi_temp_path {p}/fastcgi;\n  uwsgi_temp_path {p}/uwsgi;\n  scgi_temp_path {p}/scgi;\n  \
         server {{ listen 127.0.0.1:{port}; root {p}/html; }}\n}}\n"
    );
    let conf_path = prefix.join("nginx.conf");
    std::fs::write(&conf_path, conf).map_err(|e| format!("{}: {e}", conf_path.display()))?;
    let script = prefix.join("check.lua");
    std::fs::write(&script, WRK_CHECK).map_err(|e| format!("{}: {e}", script.display()))?;
    let mut cmd = ctx.server(mode, "nginx");
    cmd.arg("-c").arg(&conf_path).arg("-p").arg(&prefix);
    let mut server = Server::listening(cmd, "nginx", port)?;
    let mut cmd = ctx.client(mode, "wrk");
    cmd.args(["-t1", "-c", &c.wrk_connections.to_string(), "-d", &format!("{}s", c.seconds.ceil().max(1.0))]);
    cmd.arg("--latency").arg("-s").arg(&script).env("CF_PAGE", &page);
    cmd.arg(format!("http://127.0.0.1:{port}/index.html"));
    let (out, err) = output(cmd, "wrk")?;
    server.check_alive()?;
    if out.contains("Socket errors") || out.contains("Non-2xx") {
        return Err(Error::Failed(format!("wrk saw errors: {}", tail(&out))));
    }
    let rps = number_after(&out, "Requests/sec:")
        .ok_or_else(|| Error::Failed(format!("wrk printed no Requests/sec: {}{}", tail(&out), tail(&err))))?;
    let checked = number_after(&out, "checked ").unwrap_or(0.0);
    let bad = number_after(&out, " bad ").unwrap_or(f64::NAN);
    if checked < 1.0 || bad != 0.0 {
        return Err(Error::Failed(format!("wrk's check: {checked} responses checked, {bad} wrong: {}", tail(&out))));
    }
    let mut extra = BTreeMap::new();
    extra.insert("responses_checked", checked);
    for (key, label) in [("p50_us", "50%"), ("p99_us", "99%")] {
        if let Some(line) = out.lines().find(|l| l.trim_start().starts_with(label)) {
            if let Some(us) = wrk_duration_us(line.split_whitespace().nth(1).unwrap_or("")) {
                extra.insert(key, us);
            }
        }
    }
    Ok(Measured { value: rps, extra })
}

/// A wrk duration (`87.36us`, `1.20ms`, `2.00s`) in microseconds.
fn wrk_duration_us(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    Some(match unit {
        "us" => n,
        "ms" => n * 1e3,
        "s" => n * 1e6,
        _ => return None,
    })
}

fn iperf3(ctx: &Ctx<'_>, mode: Mode) -> Result<Measured, Error> {
    let c = ctx.config;
    let port_number = free_port()?;
    let port = port_number.to_string();
    let mut cmd = ctx.server(mode, "iperf3");
    cmd.args(["-s", "-1", "-B", "127.0.0.1", "-p", &port]);
    // Held until the client is done (`iperf3 -s -1` exits after one test).
    let _server = Server::listening(cmd, "iperf3 -s", port_number)?;
    let mut cmd = ctx.client(mode, "iperf3");
    cmd.args(["-c", "127.0.0.1", "-p", &port, "-J", "-t", &format!("{}", c.seconds.ceil().max(1.0))]);
    let (out, _) = output(cmd, "iperf3 -c")?;
    let json: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("iperf3 printed no JSON ({e}): {}", tail(&out)))?;
    let received = json["end"]["sum_received"]["bits_per_second"].as_f64();
    let sent_bytes = json["end"]["sum_sent"]["bytes"].as_f64().unwrap_or(0.0);
    let received_bytes = json["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0);
    let Some(bps) = received.filter(|b| *b > 0.0) else {
        return Err(Error::Failed(format!("iperf3 reported no received throughput: {}", tail(&out))));
    };
    let mut extra = BTreeMap::new();
    extra.insert("bytes_sent", sent_bytes);
    extra.insert("bytes_received", received_bytes);
    Ok(Measured { value: bps / 1e9, extra })
}

fn check_programs(config: &SocketsBenchConfig) -> Result<(), Error> {
    let mut programs = vec!["taskset"];
    for t in &config.tools {
        programs.extend(t.programs());
    }
    for p in programs {
        let found =
            Command::new("sh").args(["-c", &format!("command -v {p}")]).output().is_ok_and(|o| o.status.success());
        if !found {
            return Err(Error::Failed(format!("`{p}` is not installed (scripts/setup.sh installs it)")));
        }
    }
    if !config.library.is_file() {
        return Err(Error::Failed(format!(
            "{} not found: build it with `cargo build --release -p cornflakes-socket-preload` or pass --library",
            config.library.display()
        )));
    }
    Ok(())
}

/// Runs every case of every round, printing each run as it ends and then
/// the table; writes OUT/table.txt, OUT/summary.json, OUT/runs.tsv and
/// OUT/sockets-bench.png.
///
/// # Errors
///
/// When a program is missing, a server does not start, a client fails or
/// reports an error or a wrong response, a library run made no ring
/// connection, or the results cannot be written.
pub fn run(config: &SocketsBenchConfig) -> Result<Summary, Error> {
    if config.rounds == 0 || config.tools.is_empty() || config.seconds <= 0.0 {
        return Err(Error::Invalid("--rounds, --seconds and --tools must not be zero or empty".into()));
    }
    check_programs(config)?;
    std::fs::create_dir_all(&config.out).map_err(|e| format!("cannot create {}: {e}", config.out.display()))?;
    let out = config.out.canonicalize().map_err(|e| format!("{}: {e}", config.out.display()))?;
    // Configs, pages and the monitor's log: kept only when the run fails.
    let work = std::env::temp_dir().join(format!("cf-sockets-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let monitor_name = format!("@cf-sockets-bench-{}", std::process::id());
    let log = work.join("monitor.log");
    let mut cmd = Command::new(&config.cf);
    cmd.args(["socket-monitor", "-v", "--addr", &monitor_name]).env_remove("LD_PRELOAD");
    cmd.stderr(File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?);
    let mut monitor = Monitor { server: Server::spawn(cmd, "cf socket-monitor")?, log };
    std::thread::sleep(Duration::from_millis(300));
    monitor.server.check_alive()?;
    let ctx = Ctx { config, monitor_name, work };

    let started = Instant::now();
    let steps = config.rounds * config.tools.len();
    let mut runs: Vec<Run> = Vec::new();
    let mut record =
        |case: &str, mode: Mode, round: usize, m: Measured, unit: &'static str, higher: bool, rings: u64| {
            let run = Run {
                case: case.to_owned(),
                mode,
                round,
                value: m.value,
                unit,
                higher_is_better: higher,
                extra: m.extra,
                ring_connections: rings,
                load1: crate::redis_compare::load_average(),
            };
            eprintln!(
                "  {:<12} {:<9} {:>10.2} {:<5} rings {:>4}  load {:.1}",
                run.case,
                mode.name(),
                run.value,
                unit,
                rings,
                run.load1
            );
            runs.push(run);
        };
    for round in 1..=config.rounds {
        for (i, tool) in config.tools.iter().enumerate() {
            eprintln!(
                "[{}/{steps}] round {round}/{}: {} ({:.0} s elapsed)",
                (round - 1) * config.tools.len() + i + 1,
                config.rounds,
                tool.name(),
                started.elapsed().as_secs_f64()
            );
            for mode in [Mode::Kernel, Mode::Cfsocket] {
                let before = monitor.delivered();
                let rings = |monitor: &Monitor| -> Result<u64, Error> {
                    let n = monitor.delivered() - before;
                    if mode == Mode::Cfsocket && n == 0 {
                        return Err(Error::Failed(format!(
                            "{}: no connection went through the rings (see {})",
                            tool.name(),
                            monitor.log.display()
                        )));
                    }
                    if mode == Mode::Kernel && n != 0 {
                        return Err(Error::Failed(format!("{}: a kernel run made {n} ring connections", tool.name())));
                    }
                    Ok(n)
                };
                match tool {
                    Tool::Sockperf => {
                        let m = sockperf(&ctx, mode)?;
                        let n = rings(&monitor)?;
                        let case = format!("sockperf {} B", config.message_bytes);
                        record(&case, mode, round, m, "us", false, n);
                    }
                    Tool::Redis => {
                        let [one, fifty] = redis(&ctx, mode)?;
                        let n = rings(&monitor)?;
                        record("redis -c 1", mode, round, one, "us", false, n);
                        record("redis -c 50", mode, round, fifty, "req/s", true, n);
                    }
                    Tool::Nginx => {
                        let m = nginx(&ctx, mode)?;
                        let n = rings(&monitor)?;
                        record("nginx", mode, round, m, "req/s", true, n);
                    }
                    Tool::Iperf3 => {
                        let m = iperf3(&ctx, mode)?;
                        let n = rings(&monitor)?;
                        record("iperf3", mode, round, m, "Gbit/s", true, n);
                    }
                }
            }
            if *tool == Tool::Sockperf {
                let case = format!("sockperf {} B", config.message_bytes);
                let m = bare_ring(&ctx)?;
                record(&case, Mode::Bare, round, m, "us rt", false, 0);
            }
        }
    }
    drop(monitor);
    let _ = std::fs::remove_dir_all(&ctx.work);

    let summary = summarize(config, runs);
    let table = table(&summary);
    eprintln!("\n{table}");
    let write = |name: &str, text: &str| {
        let p = out.join(name);
        std::fs::write(&p, text).map_err(|e| Error::Failed(format!("cannot write {}: {e}", p.display())))
    };
    write("table.txt", &table)?;
    write("summary.json", &serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?)?;
    let mut tsv = String::from("case\tmode\tround\tvalue\tunit\tring_connections\tload1\n");
    for r in &summary.runs {
        tsv += &format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            r.case,
            r.mode.name(),
            r.round,
            r.value,
            r.unit,
            r.ring_connections,
            r.load1
        );
    }
    write("runs.tsv", &tsv)?;
    plot(&summary, &out.join("sockets-bench.png"))?;
    eprintln!("wrote {}/{{table.txt,summary.json,runs.tsv,sockets-bench.png}}", out.display());
    Ok(summary)
}

fn summarize(config: &SocketsBenchConfig, runs: Vec<Run>) -> Summary {
    let mut names: Vec<String> = Vec::new();
    for r in &runs {
        if !names.contains(&r.case) {
            names.push(r.case.clone());
        }
    }
    let of = |case: &str, mode: Mode| -> Vec<f64> {
        runs.iter().filter(|r| r.case == case && r.mode == mode).map(|r| r.value).collect()
    };
    let cases: Vec<CaseSummary> = names
        .iter()
        .map(|case| {
            let first = runs.iter().find(|r| &r.case == case && r.mode == Mode::Kernel);
            let (unit, higher) = first.map_or(("", true), |r| (r.unit, r.higher_is_better));
            let kernel = crate::overload::median(of(case, Mode::Kernel)).unwrap_or(f64::NAN);
            let cfsocket = crate::overload::median(of(case, Mode::Cfsocket)).unwrap_or(f64::NAN);
            let gain = if higher { cfsocket / kernel } else { kernel / cfsocket };
            CaseSummary { case: case.clone(), unit, kernel, cfsocket, gain, target: target(case) }
        })
        .collect();
    let sockperf_over_bare = names.iter().find(|c| c.starts_with("sockperf")).and_then(|case| {
        let bare = crate::overload::median(of(case, Mode::Bare)).unwrap_or(f64::NAN);
        let lib = crate::overload::median(of(case, Mode::Cfsocket)).unwrap_or(f64::NAN);
        (bare > 0.0 && lib.is_finite()).then(|| 2.0 * lib / bare)
    });
    let settings = serde_json::json!({
        "tools": config.tools.iter().map(|t| t.name()).collect::<Vec<_>>(),
        "rounds": config.rounds,
        "seconds": config.seconds,
        "message_bytes": config.message_bytes,
        "page_bytes": config.page_bytes,
        "wrk_connections": config.wrk_connections,
        "redis_latency_requests": config.redis_latency_requests,
        "redis_requests": config.redis_requests,
        "server_core": config.server_core,
        "client_core": config.client_core,
        "library": config.library.display().to_string(),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
    });
    Summary { runs, cases, sockperf_over_bare, settings }
}

fn table(s: &Summary) -> String {
    let mut t = String::from("case           unit     kernel (median)  cfsocket (median)   gain  target\n");
    for c in &s.cases {
        let mark = if c.gain >= c.target { "met" } else { "missed" };
        t += &format!(
            "{:<14} {:<8} {:>15.2} {:>18.2} {:>6.2}x  >= {}x {mark}\n",
            c.case, c.unit, c.kernel, c.cfsocket, c.gain, c.target
        );
    }
    if let Some(r) = s.sockperf_over_bare {
        let mark = if r <= 1.5 { "met" } else { "missed" };
        t += &format!(
            "sockperf round trip through the library / bare ring round trip: {r:.2}x (target <= 1.5x: {mark})\n"
        );
    }
    t += "gain: kernel/library for latencies (us), library/kernel for rates; medians over rounds\n";
    t
}

fn plot(s: &Summary, path: &Path) -> Result<(), Error> {
    let groups: Vec<String> = s.cases.iter().map(|c| c.case.clone()).collect();
    let series = vec![
        ("kernel loopback TCP".to_owned(), vec![1.0; s.cases.len()]),
        ("LD_PRELOAD libcfsocket".to_owned(), s.cases.iter().map(|c| c.gain).collect()),
    ];
    crate::plot::grouped_bars_png(
        path,
        "Unmodified programs: kernel vs drop-in sockets (SocksDirect Fig. 7, 11 and its Redis text)",
        "performance relative to the kernel (higher is better)",
        &groups,
        &series,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_from_tool_output() {
        let sockperf = "sockperf: Summary: Latency is 10.255 usec\nsockperf: ====> avg-latency=10.255 (std-dev=2.1)\n\
                        sockperf: ---> percentile 99.900 =   25.338\nsockperf: ---> percentile 50.000 =    9.871\n";
        assert_eq!(number_after(sockperf, "avg-latency="), Some(10.255));
        assert_eq!(number_after(sockperf, "percentile 50.000 ="), Some(9.871));
        assert_eq!(number_after(sockperf, "percentile 99.900 ="), Some(25.338));
        assert_eq!(number_after(sockperf, "percentile 99.000 ="), None);
        assert_eq!(number_after("Requests/sec:  87193.64\n", "Requests/sec:"), Some(87193.64));
        assert_eq!(number_after("checked 235638 bad 0\n", " bad "), Some(0.0));
        assert_eq!(wrk_duration_us("87.36us"), Some(87.36));
        assert_eq!(wrk_duration_us("2.19ms"), Some(2190.0));
        assert_eq!(wrk_duration_us("1.00s"), Some(1e6));
        assert_eq!(wrk_duration_us("3m"), None);
    }

    #[test]
    fn gains_point_the_right_way_and_use_medians() {
        let run = |case: &str, mode, value, higher| Run {
            case: case.into(),
            mode,
            round: 1,
            value,
            unit: "x",
            higher_is_better: higher,
            extra: BTreeMap::new(),
            ring_connections: 0,
            load1: 0.0,
        };
        let runs = vec![
            run("sockperf 64 B", Mode::Kernel, 20.0, false),
            run("sockperf 64 B", Mode::Cfsocket, 1.0, false),
            run("sockperf 64 B", Mode::Cfsocket, 2.0, false),
            run("sockperf 64 B", Mode::Cfsocket, 100.0, false),
            run("sockperf 64 B", Mode::Bare, 1.0, false),
            run("nginx", Mode::Kernel, 50.0, true),
            run("nginx", Mode::Cfsocket, 100.0, true),
        ];
        let s = summarize(&SocketsBenchConfig::default(), runs);
        assert_eq!(s.cases[0].gain, 10.0); // median 2.0 of the library
        assert_eq!(s.cases[1].gain, 2.0);
        assert_eq!(s.sockperf_over_bare, Some(4.0)); // round trip 2 x 2.0 over 1.0
        assert!(table(&s).contains("met"));
    }
}
