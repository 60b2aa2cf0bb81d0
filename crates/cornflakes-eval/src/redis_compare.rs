//! `cf redis-compare`: `redis-server` (Debian's, persistence off) and our
//! RESP server side by side under `redis-benchmark`, in one run.
//!
//! For each value size, each server is started in turn, pinned to the
//! server core, its keys preloaded (so that GETs hit), and driven by
//! `redis-benchmark` on the client core for each test in three modes:
//! latency (`-c 1`), throughput (`-c 50`) and pipelined throughput (`-c 50
//! -P 16`). After the runs, the values are read back and compared with what
//! was stored. `redis-benchmark` does not check replies; the read-back and
//! the benchmark's own error output (any `Error`, or a non-zero exit, fails
//! the row) are what is checked.
//!
//! Tests: `SET` (`-t set -d SIZE`), `GET` (`-t get`, key preloaded), `MGET`
//! of 2 and of 10 keys and `LRANGE mylist 0 99` (custom commands over
//! preloaded keys and a preloaded 100-element list; `-t lrange_100` would
//! first LPUSH `-n` elements of SIZE bytes, gigabytes at 16 KiB).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::child::ServerChild;
use crate::Error;

/// Settings of `cf redis-compare`.
#[derive(Clone, Debug)]
pub struct RedisCompareConfig {
    /// Value sizes, bytes.
    pub sizes: Vec<usize>,
    /// Tests to run (names of [`Test::name`]).
    pub tests: Vec<Test>,
    /// Requests per throughput run (`-c 50`, and `-P 16`); runs whose
    /// replies are large take fewer (see [`RedisCompareConfig::reply_bytes_budget`]).
    pub requests: u64,
    /// Requests per latency run (`-c 1`).
    pub latency_requests: u64,
    /// Reply bytes one run may move at most: a test's request count is
    /// lowered to this divided by its reply size (at least 1000).
    pub reply_bytes_budget: u64,
    /// Connections of the throughput runs.
    pub clients: u32,
    /// Pipeline depth of the pipelined runs.
    pub pipeline: u32,
    /// Core the servers are pinned to.
    pub server_core: usize,
    /// Core `redis-benchmark` is pinned to.
    pub client_core: usize,
    /// Our server's zero-copy threshold.
    pub threshold: usize,
    /// Directory for summary.json and table.txt.
    pub out: PathBuf,
    /// Offered loads (requests/s) of the YCSB phase with our open-loop
    /// RESP load generator (get, mget-2, lrange-2); empty: no such phase.
    pub ycsb_rates: Vec<f64>,
    /// Keys of the YCSB phase.
    pub ycsb_keys: u32,
    /// Value (and list element) bytes of the YCSB phase.
    pub ycsb_size: u32,
    /// Recorded seconds per YCSB load point.
    pub ycsb_seconds: f64,
    /// Offered loads of the formats phase (issue 14, item 5): our server
    /// answering YCSB get and lrange-2 from one store in RESP and in the
    /// Cornflakes format, same process, same run; empty: no such phase.
    pub formats_rates: Vec<f64>,
    /// The formats phase also finds each format's maximum (the highest
    /// load kept up with: achieved >= 95 % of offered, nothing late or
    /// wrong), raising the load by half each step from 10 000 requests/s
    /// and bisecting the last step; its table sets the ratios next to the
    /// paper's Table 3.
    pub formats_max: bool,
    /// Keys of the Twitter workload, run with the YCSB requests in both
    /// open-loop phases (paper Figure 8); 0: no Twitter.
    pub twitter_keys: u32,
}

impl Default for RedisCompareConfig {
    fn default() -> Self {
        RedisCompareConfig {
            sizes: vec![64, 1024, 4096, 16384],
            tests: Test::ALL.to_vec(),
            requests: 100_000,
            latency_requests: 20_000,
            reply_bytes_budget: 2 << 30,
            clients: 50,
            pipeline: 16,
            server_core: 0,
            client_core: 1,
            threshold: cornflakes::field::DEFAULT_THRESHOLD,
            out: PathBuf::from("results/redis-compare"),
            ycsb_rates: Vec::new(),
            ycsb_keys: 10_000,
            ycsb_size: 2048,
            ycsb_seconds: 2.0,
            formats_rates: Vec::new(),
            formats_max: false,
            twitter_keys: 20_000,
        }
    }
}

/// A `redis-benchmark` test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// `SET key:__rand_int__ <SIZE bytes>`.
    Set,
    /// `GET key:__rand_int__`.
    Get,
    /// `MGET key:0 key:1`.
    Mget2,
    /// `MGET key:0 ... key:9`.
    Mget10,
    /// `LRANGE mylist 0 99` of a 100-element list.
    Lrange100,
}

impl Test {
    /// Every test, in table order.
    pub const ALL: [Test; 5] = [Test::Get, Test::Set, Test::Mget2, Test::Mget10, Test::Lrange100];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Test::Set => "set",
            Test::Get => "get",
            Test::Mget2 => "mget-2",
            Test::Mget10 => "mget-10",
            Test::Lrange100 => "lrange-100",
        }
    }

    /// The test called `name`.
    pub fn from_name(name: &str) -> Option<Test> {
        Test::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Values in one reply.
    fn values(self) -> u64 {
        match self {
            Test::Set => 0,
            Test::Get => 1,
            Test::Mget2 => 2,
            Test::Mget10 => 10,
            Test::Lrange100 => 100,
        }
    }

    /// `redis-benchmark` arguments after the common ones.
    fn args(self, size: usize) -> Vec<String> {
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        match self {
            Test::Set => s(&["-t", "set", "-d", &size.to_string()]),
            Test::Get => s(&["-t", "get"]),
            Test::Mget2 => s(&["MGET", "key:0", "key:1"]),
            Test::Mget10 => {
                let mut v = s(&["MGET"]);
                v.extend((0..10).map(|i| format!("key:{i}")));
                v
            }
            Test::Lrange100 => s(&["LRANGE", "mylist", "0", "99"]),
        }
    }
}

/// How `redis-benchmark` drives a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `-c 1`: mean latency.
    Latency,
    /// `-c 50`.
    Throughput,
    /// `-c 50 -P 16`.
    Pipelined,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Latency, Mode::Throughput, Mode::Pipelined];

    fn name(self) -> &'static str {
        match self {
            Mode::Latency => "c1",
            Mode::Throughput => "c50",
            Mode::Pipelined => "c50-P16",
        }
    }
}

/// The servers compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Server {
    /// Debian's `redis-server`.
    RedisServer,
    /// `cf kv-server --protocol resp`.
    Cornflakes,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::RedisServer => "redis-server",
            Server::Cornflakes => "cornflakes",
        }
    }
}

/// One `redis-benchmark` run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    /// Server driven.
    pub server: Server,
    /// Test name.
    pub test: &'static str,
    /// Value size, bytes.
    pub size: usize,
    /// Mode name (`c1`, `c50`, `c50-P16`).
    pub mode: &'static str,
    /// Requests sent.
    pub requests: u64,
    /// Requests per second.
    pub rps: f64,
    /// Mean latency, ms.
    pub avg_ms: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// One-minute load average when the run ended.
    pub load_avg: f64,
}

/// The one-minute load average (NaN when /proc cannot be read).
pub(crate) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

fn loadavg_text() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_owned()
}

/// The bytes of value `i` of `size` bytes (distinct per element, so that a
/// mix-up shows in the read-back).
fn value(i: usize, size: usize) -> Vec<u8> {
    (0..size).map(|j| b'a' + ((i * 7 + j) % 26) as u8).collect()
}

fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n", a.len()).bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A blocking RESP2 client for preloading and reading back.
struct Client {
    stream: BufReader<TcpStream>,
}

/// A reply, as far as this client needs.
#[derive(Debug, PartialEq)]
enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Value>),
}

impl Client {
    fn connect(addr: SocketAddr) -> Result<Client, Error> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match TcpStream::connect(addr) {
                Ok(s) => {
                    s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
                    return Ok(Client { stream: BufReader::new(s) });
                }
                Err(e) if Instant::now() > deadline => {
                    return Err(Error::Failed(format!("cannot connect to {addr}: {e}")))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    fn call(&mut self, args: &[&[u8]]) -> Result<Value, Error> {
        self.stream.get_mut().write_all(&encode(args)).map_err(|e| format!("cannot send: {e}"))?;
        self.read()
    }

    fn read(&mut self) -> Result<Value, Error> {
        let mut line = Vec::new();
        self.stream.read_until(b'\n', &mut line).map_err(|e| format!("cannot read a reply: {e}"))?;
        let text = String::from_utf8_lossy(line.strip_suffix(b"\r\n").ok_or("truncated reply")?).into_owned();
        let (kind, rest) = text.split_at(1.min(text.len()));
        let number = || rest.parse::<i64>().map_err(|_| Error::Failed(format!("bad reply line {text:?}")));
        Ok(match kind {
            "+" => Value::Simple(rest.to_owned()),
            "-" => Value::Error(rest.to_owned()),
            ":" => Value::Int(number()?),
            "$" => match number()? {
                -1 => Value::Bulk(None),
                n => {
                    let mut buf = vec![0u8; n as usize + 2];
                    self.stream.read_exact(&mut buf).map_err(|e| format!("cannot read a reply: {e}"))?;
                    buf.truncate(n as usize);
                    Value::Bulk(Some(buf))
                }
            },
            "*" => {
                let n = number()?;
                let mut items = Vec::new();
                for _ in 0..n.max(0) {
                    items.push(self.read()?);
                }
                Value::Array(items)
            }
            _ => return Err(Error::Failed(format!("bad reply line {text:?}"))),
        })
    }
}

/// Stores what the tests read: `key:__rand_int__`, `key:0..9`, and
/// `mylist` of 100 elements, all of `size` bytes.
fn preload(addr: SocketAddr, size: usize) -> Result<(), Error> {
    let mut c = Client::connect(addr)?;
    let ok = |v: Value, what: &str| match v {
        Value::Simple(_) | Value::Int(_) => Ok(()),
        other => Err(Error::Failed(format!("preloading {what}: {other:?}"))),
    };
    ok(c.call(&[b"SET", b"key:__rand_int__", &value(0, size)])?, "key:__rand_int__")?;
    for i in 0..10 {
        ok(c.call(&[b"SET", format!("key:{i}").as_bytes(), &value(i, size)])?, "key:i")?;
    }
    let elems: Vec<Vec<u8>> = (0..100).map(|i| value(100 + i, size)).collect();
    let mut args: Vec<&[u8]> = vec![b"RPUSH", b"mylist"];
    args.extend(elems.iter().map(|e| e.as_slice()));
    ok(c.call(&args)?, "mylist")
}

/// Reads the preloaded values back and compares them (SET runs rewrite
/// `key:__rand_int__` with `redis-benchmark`'s own bytes: its length is
/// checked).
fn read_back(addr: SocketAddr, size: usize) -> Result<(), Error> {
    let mut c = Client::connect(addr)?;
    let bulk = |v: Value| match v {
        Value::Bulk(Some(b)) => Ok(b),
        other => Err(Error::Failed(format!("read-back: expected a value, got {other:?}"))),
    };
    if bulk(c.call(&[b"GET", b"key:__rand_int__"])?)?.len() != size {
        return Err("read-back: key:__rand_int__ has the wrong length".into());
    }
    let keys: Vec<Vec<u8>> = (0..10).map(|i| format!("key:{i}").into_bytes()).collect();
    let mut args: Vec<&[u8]> = vec![b"MGET"];
    args.extend(keys.iter().map(|k| k.as_slice()));
    let Value::Array(vals) = c.call(&args)? else { return Err("read-back: MGET did not answer an array".into()) };
    for (i, v) in vals.into_iter().enumerate() {
        if bulk(v)? != value(i, size) {
            return Err(Error::Failed(format!("read-back: key:{i} differs from what was stored")));
        }
    }
    let Value::Array(elems) = c.call(&[b"LRANGE", b"mylist", b"0", b"-1"])? else {
        return Err("read-back: LRANGE did not answer an array".into());
    };
    if elems.len() != 100 {
        return Err(Error::Failed(format!("read-back: mylist has {} elements, not 100", elems.len())));
    }
    for (i, v) in elems.into_iter().enumerate() {
        if bulk(v)? != value(100 + i, size) {
            return Err(Error::Failed(format!("read-back: mylist[{i}] differs from what was stored")));
        }
    }
    Ok(())
}

/// A server under test, stopped on drop.
enum Running {
    Redis(Child),
    Ours(ServerChild),
}

impl Running {
    /// Stops the server; our server's counters (its last line).
    fn stop(self) -> Option<String> {
        match self {
            Running::Redis(mut child) => {
                let _ = child.kill();
                let _ = child.wait();
                None
            }
            Running::Ours(mut child) => child.finish().pop(),
        }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> Result<u16, Error> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot find a free port: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

fn start(server: Server, config: &RedisCompareConfig) -> Result<(Running, SocketAddr), Error> {
    let port = free_port()?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    match server {
        Server::RedisServer => {
            let child = Command::new("taskset")
                .args(["-c", &config.server_core.to_string(), "redis-server"])
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| {
                    format!("cannot start redis-server under taskset: {e} (install redis-server and util-linux: scripts/setup.sh)")
                })?;
            Ok((Running::Redis(child), addr))
        }
        Server::Cornflakes => {
            let args: Vec<String> = [
                "--protocol",
                "resp",
                "--transport",
                "tcp",
                "--workload",
                "echo",
                "--exit-with-parent",
                "--addr",
                &addr.to_string(),
                "--core",
                &config.server_core.to_string(),
                "--threshold",
                &config.threshold.to_string(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let child = ServerChild::spawn_subcommand("kv-server", &args)?;
            Ok((Running::Ours(child), addr))
        }
    }
}

/// The figures of `redis-benchmark --csv`'s last line
/// (`"name","rps","avg","min","p50","p95","p99","max"`, latencies in ms),
/// without the name; `None` unless all seven are numbers.
pub(crate) fn benchmark_csv(stdout: &str) -> Option<[f64; 7]> {
    let fields: Vec<f64> = stdout
        .lines()
        .last()?
        .split("\",\"")
        .skip(1)
        .map(|f| f.trim_matches('"').parse().unwrap_or(f64::NAN))
        .collect();
    fields.get(..7)?.try_into().ok().filter(|f: &[f64; 7]| f.iter().all(|v| !v.is_nan()))
}

/// Runs `redis-benchmark`; the row, or why it failed.
fn bench(
    server: Server,
    addr: SocketAddr,
    test: Test,
    size: usize,
    mode: Mode,
    config: &RedisCompareConfig,
) -> Result<Row, Error> {
    let reply_bytes = (test.values() * size as u64).max(64);
    let requests = match mode {
        Mode::Latency => config.latency_requests,
        Mode::Throughput | Mode::Pipelined => config.requests,
    };
    let mut requests = requests.min((config.reply_bytes_budget / reply_bytes).max(1000));
    let (clients, pipeline) = match mode {
        Mode::Latency => (1, 1),
        Mode::Throughput => (config.clients, 1),
        Mode::Pipelined => (config.clients, config.pipeline),
    };
    // redis-benchmark times a run in whole milliseconds: a run shorter than
    // one reports an infinite rate. Such a run is repeated with 10x the
    // requests (twice at most), then reported as failed.
    for _ in 0..3 {
        let row = bench_once(server, addr, test, size, mode, requests, clients, pipeline, config)?;
        if row.rps.is_finite() {
            return Ok(row);
        }
        requests *= 10;
    }
    Err(Error::Failed(format!(
        "redis-benchmark {} {} {size} B {}: every run shorter than its 1 ms clock, even with {} requests",
        server.name(),
        test.name(),
        mode.name(),
        requests / 10
    )))
}

/// One `redis-benchmark` run of `requests` requests.
#[allow(clippy::too_many_arguments)]
fn bench_once(
    server: Server,
    addr: SocketAddr,
    test: Test,
    size: usize,
    mode: Mode,
    requests: u64,
    clients: u32,
    pipeline: u32,
    config: &RedisCompareConfig,
) -> Result<Row, Error> {
    let out = Command::new("taskset")
        .args(["-c", &config.client_core.to_string(), "redis-benchmark"])
        .args(["-h", "127.0.0.1", "-p", &addr.port().to_string()])
        .args(["-n", &requests.to_string(), "-c", &clients.to_string(), "-P", &pipeline.to_string(), "--csv"])
        .args(test.args(size))
        .output()
        .map_err(|e| format!("cannot run redis-benchmark: {e} (install redis-tools: scripts/setup.sh)"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let context = || format!("{} {} {size} B {}: {stdout}{stderr}", server.name(), test.name(), mode.name());
    if !out.status.success() || stdout.contains("rror") || stderr.contains("rror") {
        return Err(Error::Failed(format!("redis-benchmark failed or saw errors: {}", context())));
    }
    let Some(fields) = benchmark_csv(&stdout) else {
        return Err(Error::Failed(format!("cannot read redis-benchmark's CSV: {}", context())));
    };
    Ok(Row {
        server,
        test: test.name(),
        size,
        mode: mode.name(),
        requests,
        rps: fields[0],
        avg_ms: fields[1],
        p50_ms: fields[3],
        p99_ms: fields[5],
        load_avg: load_average(),
    })
}

/// Runs the comparison, printing each run as it ends, then the table;
/// writes OUT/summary.json and OUT/table.txt.
///
/// # Errors
///
/// When a server does not start, `redis-benchmark` fails or reports an
/// error, a read-back differs, or the results cannot be written.
pub fn run(config: &RedisCompareConfig) -> Result<(), Error> {
    for program in ["redis-server", "redis-benchmark", "taskset"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .output()
            .map_or(true, |o| !o.status.success())
        {
            return Err(Error::Failed(format!(
                "`{program}` is not installed (scripts/setup.sh installs redis-server, redis-tools and util-linux)"
            )));
        }
    }
    let started = Instant::now();
    let load_before = loadavg_text();
    let total = config.sizes.len() * 2 * config.tests.len() * Mode::ALL.len();
    eprintln!(
        "redis-compare: {total} redis-benchmark runs, servers on core {}, redis-benchmark on core {}; load average {load_before}",
        config.server_core, config.client_core
    );
    let mut rows = Vec::new();
    let mut server_counters = Vec::new();
    for &size in &config.sizes {
        for server in [Server::RedisServer, Server::Cornflakes] {
            let (running, addr) = start(server, config)?;
            let result = (|| -> Result<(), Error> {
                preload(addr, size)?;
                for &test in &config.tests {
                    for mode in Mode::ALL {
                        let row = bench(server, addr, test, size, mode, config)?;
                        eprintln!(
                            "  [{:>3}/{total}] {:>5.0} s  {:<12} {:<10} {:>5} B {:<7} {:>10.0} req/s  mean {:.3} ms  p99 {:.3} ms  (load {:.2})",
                            rows.len() + 1,
                            started.elapsed().as_secs_f64(),
                            server.name(),
                            test.name(),
                            size,
                            mode.name(),
                            row.rps,
                            row.avg_ms,
                            row.p99_ms,
                            row.load_avg
                        );
                        rows.push(row);
                    }
                }
                read_back(addr, size)
            })();
            let counters = running.stop();
            result?;
            if let Some(line) = counters {
                let v: serde_json::Value = serde_json::from_str(&line).unwrap_or(serde_json::Value::Null);
                let bad = ["protocol_errors", "query_buffer_full", "reply_dropped"]
                    .iter()
                    .map(|k| v.get(k).and_then(|n| n.as_u64()).unwrap_or(0))
                    .sum::<u64>();
                if bad > 0 {
                    return Err(Error::Failed(format!("our server closed {bad} connections at {size} B: {line}")));
                }
                server_counters.push(serde_json::json!({"size": size, "counters": v}));
            }
        }
    }
    let ycsb = ycsb_phase(config, &started)?;
    let (formats, formats_max) = formats_phase(config, &started)?;
    let mut table = table(&rows, config);
    if !ycsb.is_empty() {
        table.push_str(&ycsb_table(&ycsb));
    }
    if !config.formats_rates.is_empty() {
        table.push_str(&formats_table(&formats));
    }
    if !formats_max.is_empty() {
        table.push_str(&formats_max_table(&formats_max));
    }
    println!("{table}");
    let load_after = loadavg_text();
    println!("load average before: {load_before}; after: {load_after}");
    std::fs::create_dir_all(&config.out).map_err(|e| format!("cannot create {}: {e}", config.out.display()))?;
    std::fs::write(
        config.out.join("table.txt"),
        format!("{table}\nload average before: {load_before}; after: {load_after}\n"),
    )
    .map_err(|e| format!("cannot write table.txt: {e}"))?;
    let summary = serde_json::json!({
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "redis_server": Command::new("redis-server").arg("--version").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default(),
        "server_core": config.server_core,
        "client_core": config.client_core,
        "threshold": config.threshold,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "seconds": started.elapsed().as_secs_f64(),
        "rows": rows,
        "ycsb": ycsb,
        "formats": formats,
        "formats_max": formats_max,
        "ratios": ratios(&rows),
        "our_server_counters": server_counters,
    });
    let path = config.out.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(&summary).expect("serializable"))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let plots = plots(&config.out, &rows, &ycsb, &formats);
    eprintln!("wrote {}, table.txt and {} plots", path.display(), plots);
    Ok(())
}

/// Draws, into `out`: per `redis-benchmark` test and mode, requests/s of
/// both servers by value size (`bench-<test>-<mode>.png`); per request type
/// of the open-loop phases, p99 latency against achieved load, one curve
/// per server (`ycsb-<op>.png`) and per format (`formats-<op>.png`). A plot
/// that cannot be drawn is a warning. Returns how many were written.
fn plots(out: &std::path::Path, rows: &[Row], ycsb: &[YcsbRow], formats: &[FormatRow]) -> usize {
    use crate::plot::{self, Series};
    let mut written = 0;
    let mut done = |result: Result<(), Error>, path: &std::path::Path| match result {
        Ok(()) => written += 1,
        Err(e) => eprintln!("warning: cannot draw {}: {e}", path.display()),
    };
    let mut tests: Vec<(&str, &str)> = rows.iter().map(|r| (r.test, r.mode)).collect();
    tests.dedup();
    tests.sort_unstable();
    tests.dedup();
    for (test, mode) in tests {
        let bars: Vec<(String, f64)> = rows
            .iter()
            .filter(|r| r.test == test && r.mode == mode)
            .map(|r| (format!("{} {} B", r.server.name(), r.size), r.rps))
            .collect();
        let path = out.join(format!("bench-{test}-{mode}.png"));
        done(
            plot::max_throughput_bars_png(
                &path,
                &format!("redis-benchmark {test} {mode}: ours vs redis-server"),
                "thousand requests / s",
                &bars,
            ),
            &path,
        );
    }
    let curve = |name: &str, points: Vec<(f64, f64)>| Series { name: name.to_owned(), points };
    let mut ops: Vec<&str> = ycsb.iter().map(|r| r.op).collect();
    ops.sort_unstable();
    ops.dedup();
    for op in ops {
        let series: Vec<Series> = [Server::RedisServer, Server::Cornflakes]
            .iter()
            .map(|&server| {
                let points = ycsb
                    .iter()
                    .filter(|r| r.op == op && r.server == server)
                    .map(|r| (r.result.achieved, r.result.p99_us))
                    .collect();
                curve(server.name(), points)
            })
            .collect();
        let path = out.join(format!("ycsb-{op}.png"));
        done(
            plot::throughput_latency_png(
                &path,
                &format!("YCSB {op} over RESP: p99 vs load"),
                "achieved load (thousand requests / s)",
                &series,
            ),
            &path,
        );
    }
    let mut ops: Vec<&str> = formats.iter().map(|r| r.op).collect();
    ops.sort_unstable();
    ops.dedup();
    for op in ops {
        let series: Vec<Series> = ["resp", "cornflakes"]
            .iter()
            .map(|&format| {
                let points = formats
                    .iter()
                    .filter(|r| r.op == op && r.format == format)
                    .map(|r| (r.achieved, r.p99_us))
                    .collect();
                curve(format, points)
            })
            .collect();
        let path = out.join(format!("formats-{op}.png"));
        done(
            plot::throughput_latency_png(
                &path,
                &format!("{op}, one server: RESP vs the Cornflakes format, p99 vs load"),
                "achieved load (thousand requests / s)",
                &series,
            ),
            &path,
        );
    }
    written
}

/// One point of the YCSB phase.
#[derive(Clone, Debug, serde::Serialize)]
pub struct YcsbRow {
    /// Server driven.
    pub server: Server,
    /// Request type.
    pub op: &'static str,
    /// The point.
    #[serde(flatten)]
    pub result: crate::resp_load::RespLoadResult,
    /// One-minute load average when the point ended.
    pub load_avg: f64,
}

/// Each server in turn: the YCSB keys preloaded over RESP, then each
/// request type at each offered load (every reply checked).
fn ycsb_phase(config: &RedisCompareConfig, started: &Instant) -> Result<Vec<YcsbRow>, Error> {
    use crate::resp_load::{self, RespLoadConfig, RespOp};
    let mut rows = Vec::new();
    if config.ycsb_rates.is_empty() {
        return Ok(rows);
    }
    for server in [Server::RedisServer, Server::Cornflakes] {
        let (running, addr) = start(server, config)?;
        let result = (|| -> Result<(), Error> {
            let _ = Client::connect(addr)?;
            resp_load::preload(addr, config.ycsb_keys, config.ycsb_size)?;
            let mut ops = RespOp::YCSB.to_vec();
            if config.twitter_keys > 0 {
                resp_load::preload_workload(addr, resp_load::twitter(config.twitter_keys)?.as_ref())?;
                ops.push(RespOp::Twitter);
            }
            for op in ops {
                for &rate in &config.ycsb_rates {
                    let point = RespLoadConfig {
                        addr,
                        op,
                        keys: if op == RespOp::Twitter { config.twitter_keys } else { config.ycsb_keys },
                        size: config.ycsb_size,
                        rate,
                        threads: 1,
                        warmup: Duration::from_millis(500),
                        duration: Duration::from_secs_f64(config.ycsb_seconds),
                        timeout: Duration::from_secs(2),
                        seed: 1,
                        core: Some(config.client_core),
                        lists_at_keys: false,
                    };
                    let r = match resp_load::run_point(&point) {
                        Ok(r) => r,
                        // Overloaded: the point is recorded as not kept up with.
                        Err(e) => {
                            eprintln!("  {} {} {rate}: {e}", server.name(), op.name());
                            resp_load::RespLoadResult { offered: rate, ..Default::default() }
                        }
                    };
                    if r.errors > 0 {
                        return Err(Error::Failed(format!(
                            "{} answered {} {} requests wrongly at {rate} req/s",
                            server.name(),
                            r.errors,
                            op.name()
                        )));
                    }
                    eprintln!(
                        "  ycsb {:>5.0} s  {:<12} {:<9} offered {:>8.0}  achieved {:>8.0} req/s  p50 {:>8.1} us  p99 {:>8.1} us  (load {:.2})",
                        started.elapsed().as_secs_f64(),
                        server.name(),
                        op.name(),
                        rate,
                        r.achieved,
                        r.p50_us,
                        r.p99_us,
                        load_average()
                    );
                    rows.push(YcsbRow { server, op: op.name(), result: r, load_avg: load_average() });
                }
            }
            Ok(())
        })();
        running.stop();
        result?;
    }
    Ok(rows)
}

/// One point of the formats phase.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FormatRow {
    /// `get`, `mget-2`, `lrange-2` or `twitter`.
    pub op: &'static str,
    /// `resp` or `cornflakes`.
    pub format: &'static str,
    /// Offered requests per second.
    pub offered: f64,
    /// Correct responses per second.
    pub achieved: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// Wrong responses.
    pub errors: u64,
    /// Requests not answered in time.
    pub timeouts: u64,
    /// One-minute load average when the point ended.
    pub load_avg: f64,
}

/// Our server with a YCSB preload (1 field for get, 2 for lrange-2),
/// answering RESP and the Cornflakes format from the same store; each
/// offered load in RESP, then in the Cornflakes format.
fn formats_phase(config: &RedisCompareConfig, started: &Instant) -> Result<(Vec<FormatRow>, Vec<FormatMax>), Error> {
    use crate::loadgen::{self, LoadConfig};
    use crate::resp_load::{self, RespLoadConfig, RespOp};
    let (mut rows, mut maxima) = (Vec::new(), Vec::new());
    let ycsb =
        |fields| cornflakes_workloads::WorkloadSpec::Ycsb { keys: config.ycsb_keys, fields, size: config.ycsb_size };
    let mget = cornflakes_workloads::WorkloadSpec::Mget { keys: config.ycsb_keys, size: config.ycsb_size, n: 2 };
    let mut phases = vec![(RespOp::Get, ycsb(1)), (RespOp::Mget2, mget), (RespOp::Lrange2, ycsb(2))];
    if config.twitter_keys > 0 {
        let spec = format!("twitter:keys={}", config.twitter_keys)
            .parse()
            .map_err(|e: cornflakes_workloads::WorkloadError| Error::Invalid(e.to_string()))?;
        phases.push((RespOp::Twitter, spec));
    }
    for (op, spec) in phases {
        if config.formats_rates.is_empty() && !config.formats_max {
            break;
        }
        let workload = spec.build().map_err(|e| Error::Invalid(e.to_string()))?;
        let args: Vec<String> = [
            "--protocol",
            "resp",
            "--transport",
            "tcp",
            "--workload",
            &spec.to_string(),
            "--exit-with-parent",
            "--addr",
            "127.0.0.1:0",
            "--kv-addr",
            "127.0.0.1:0",
            "--core",
            &config.server_core.to_string(),
            "--threshold",
            &config.threshold.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut child = ServerChild::spawn_subcommand("kv-server", &args)?;
        let addrs: Vec<SocketAddr> = child.addr.split_whitespace().filter_map(|a| a.parse().ok()).collect();
        let [resp_addr, kv_addr] = addrs[..] else {
            return Err(Error::Failed(format!("the server said READY {}, not two addresses", child.addr)));
        };
        let measure = |format: &'static str, rate: f64| -> Result<FormatRow, Error> {
            let row = if format == "resp" {
                let point = RespLoadConfig {
                    addr: resp_addr,
                    op,
                    keys: if op == RespOp::Twitter { config.twitter_keys } else { config.ycsb_keys },
                    size: config.ycsb_size,
                    rate,
                    threads: 1,
                    warmup: Duration::from_millis(500),
                    duration: Duration::from_secs_f64(config.ycsb_seconds),
                    timeout: Duration::from_secs(2),
                    seed: 1,
                    core: Some(config.client_core),
                    lists_at_keys: true,
                };
                // A reply later than the timeout ends the point with an
                // error: that load was not kept up with.
                let (r, late) = match resp_load::run_point(&point) {
                    Ok(r) => (r, 0),
                    Err(e) => {
                        eprintln!("  formats resp {} {rate:.0}: {e}", op.name());
                        (resp_load::RespLoadResult { offered: rate, ..Default::default() }, 1)
                    }
                };
                FormatRow {
                    op: op.name(),
                    format,
                    offered: rate,
                    achieved: r.achieved,
                    p50_us: r.p50_us,
                    p99_us: r.p99_us,
                    errors: r.errors,
                    timeouts: r.unanswered + late,
                    load_avg: load_average(),
                }
            } else {
                let cfg = LoadConfig {
                    rate: Some(rate),
                    threads: 1,
                    warmup: Duration::from_millis(500),
                    duration: Duration::from_secs_f64(config.ycsb_seconds),
                    timeout: Duration::from_secs(2),
                    max_outstanding: 60_000,
                    seed: 1,
                    in_place: false,
                };
                let target = crate::transport::Target::Tcp(kv_addr);
                let c = loadgen::run_point(
                    &target,
                    cornflakes_kv::System::Cornflakes,
                    workload.as_ref(),
                    &cfg,
                    Some(config.client_core),
                )?;
                FormatRow {
                    op: op.name(),
                    format,
                    offered: rate,
                    achieved: c.achieved,
                    p50_us: c.p50_us,
                    p99_us: c.p99_us,
                    errors: c.errors,
                    timeouts: c.timeouts,
                    load_avg: load_average(),
                }
            };
            eprintln!(
                "  formats {:>5.0} s  {:<9} {:<10} offered {:>8.0}  achieved {:>8.0} req/s  p50 {:>8.1} us  p99 {:>8.1} us  wrong {}  timeouts {}  (load {:.2})",
                started.elapsed().as_secs_f64(), row.op, row.format, row.offered, row.achieved, row.p50_us, row.p99_us, row.errors, row.timeouts, row.load_avg
            );
            if row.errors > 0 {
                return Err(Error::Failed(format!(
                    "{} {} answered {} requests wrongly",
                    row.format, row.op, row.errors
                )));
            }
            Ok(row)
        };
        for &rate in &config.formats_rates {
            for format in ["resp", "cornflakes"] {
                rows.push(measure(format, rate)?);
            }
        }
        if config.formats_max {
            for format in ["resp", "cornflakes"] {
                let (max, points) = find_max(|rate| measure(format, rate))?;
                maxima.push(FormatMax { op: op.name(), format, max_rps: max });
                rows.extend(points);
            }
        }
        child.finish();
    }
    Ok((rows, maxima))
}

/// A format's highest load kept up with on one request type.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FormatMax {
    /// `get`, `mget-2`, `lrange-2` or `twitter`.
    pub op: &'static str,
    /// `resp` or `cornflakes`.
    pub format: &'static str,
    /// Requests per second; 0 when not even the first load was kept up with.
    pub max_rps: f64,
}

/// The first load of a ramp, requests/s.
const RAMP_START: f64 = 10_000.0;
/// Loads tried at most before a ramp gives up rising.
const RAMP_STEPS: usize = 14;

/// Whether a point kept up with its load: at least 95 % of it achieved,
/// nothing late or unanswered, nothing wrong.
fn kept_up(r: &FormatRow) -> bool {
    r.achieved >= 0.95 * r.offered && r.timeouts == 0 && r.errors == 0
}

/// Raises the load by half each step from [`RAMP_START`] until a load is
/// not kept up with twice in a row (one miss may be a stall of the
/// machine), then bisects that step once: the highest achieved load kept
/// up with, and every point run.
fn find_max(mut measure: impl FnMut(f64) -> Result<FormatRow, Error>) -> Result<(f64, Vec<FormatRow>), Error> {
    let mut points = Vec::new();
    let mut run = |rate: f64, points: &mut Vec<FormatRow>| -> Result<bool, Error> {
        let r = measure(rate)?;
        let kept = kept_up(&r);
        points.push(r);
        Ok(kept)
    };
    let (mut kept_rate, mut failed_rate) = (None, None);
    let mut rate = RAMP_START;
    for _ in 0..RAMP_STEPS {
        if run(rate, &mut points)? || run(rate, &mut points)? {
            kept_rate = Some(rate);
            rate *= 1.5;
        } else {
            failed_rate = Some(rate);
            break;
        }
    }
    if let (Some(lo), Some(hi)) = (kept_rate, failed_rate) {
        run((lo + hi) / 2.0, &mut points)?;
    }
    let max = points.iter().filter(|r| kept_up(r)).map(|r| r.achieved).fold(0.0, f64::max);
    Ok((max, points))
}

/// The maxima next to the paper's Table 3.
fn formats_max_table(maxima: &[FormatMax]) -> String {
    use std::fmt::Write as _;
    let mut t = String::from(
        "\nOne server, one store: highest load kept up with in RESP and in the Cornflakes format (ramp, every response checked)\n",
    );
    let _ = writeln!(t, "{:<9} {:>12} {:>12} {:>9} {:>7}", "op", "resp req/s", "cf req/s", "cf/resp", "paper");
    for (op, paper) in [("get", "1.26x"), ("mget-2", "1.15x"), ("lrange-2", "1.40x"), ("twitter", "1.088x")] {
        let of = |format: &str| maxima.iter().find(|m| m.op == op && m.format == format).map(|m| m.max_rps);
        let (Some(resp), Some(cf)) = (of("resp"), of("cornflakes")) else { continue };
        let ratio = if resp > 0.0 { format!("{:.2}x", cf / resp) } else { "-".into() };
        let _ = writeln!(t, "{op:<9} {resp:>12.0} {cf:>12.0} {ratio:>9} {paper:>7}");
    }
    t
}

fn formats_table(rows: &[FormatRow]) -> String {
    use std::fmt::Write as _;
    let mut t = String::from(
        "\nOne server, one store, RESP vs the Cornflakes format (open loop, every response checked); paper Table 3: Cornflakes over Redis serialization 1.26x get, 1.15x mget-2, 1.40x lrange-2; Figure 8: 1.088x Twitter\n",
    );
    let _ = writeln!(
        t,
        "{:<9} {:>9} {:>11} {:>10} {:>11} {:>10}",
        "op", "offered", "resp req/s", "resp p99", "cf req/s", "cf p99"
    );
    for resp in rows.iter().filter(|r| r.format == "resp") {
        let Some(cf) = rows.iter().find(|c| c.format == "cornflakes" && c.op == resp.op && c.offered == resp.offered)
        else {
            continue;
        };
        let _ = writeln!(
            t,
            "{:<9} {:>9.0} {:>11.0} {:>10.1} {:>11.0} {:>10.1}",
            resp.op, resp.offered, resp.achieved, resp.p99_us, cf.achieved, cf.p99_us
        );
    }
    t
}

fn ycsb_table(rows: &[YcsbRow]) -> String {
    use std::fmt::Write as _;
    let mut t = String::from("\nYCSB over RESP, open loop (every reply checked): achieved req/s and p99 us\n");
    let _ = writeln!(
        t,
        "{:<9} {:>9} {:>12} {:>10} {:>12} {:>10}",
        "op", "offered", "redis req/s", "redis p99", "ours req/s", "ours p99"
    );
    for theirs in rows.iter().filter(|r| r.server == Server::RedisServer) {
        let Some(ours) = rows
            .iter()
            .find(|o| o.server == Server::Cornflakes && o.op == theirs.op && o.result.offered == theirs.result.offered)
        else {
            continue;
        };
        let _ = writeln!(
            t,
            "{:<9} {:>9.0} {:>12.0} {:>10.1} {:>12.0} {:>10.1}",
            theirs.op,
            theirs.result.offered,
            theirs.result.achieved,
            theirs.result.p99_us,
            ours.result.achieved,
            ours.result.p99_us
        );
    }
    t
}

/// Our figure over redis-server's, per test, size and mode.
fn ratios(rows: &[Row]) -> Vec<serde_json::Value> {
    rows.iter()
        .filter(|r| r.server == Server::RedisServer)
        .filter_map(|theirs| {
            let ours = rows.iter().find(|o| {
                o.server == Server::Cornflakes
                    && o.test == theirs.test
                    && o.size == theirs.size
                    && o.mode == theirs.mode
            })?;
            Some(serde_json::json!({
                "test": theirs.test, "size": theirs.size, "mode": theirs.mode,
                "throughput_ratio": ours.rps / theirs.rps,
                "mean_latency_ratio": ours.avg_ms / theirs.avg_ms,
            }))
        })
        .collect()
}

fn table(rows: &[Row], _config: &RedisCompareConfig) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<10} {:>6} {:<8} {:>13} {:>13} {:>7}   {:>9} {:>9} {:>7}",
        "test", "size", "mode", "redis req/s", "ours req/s", "ratio", "redis ms", "ours ms", "ratio"
    );
    for theirs in rows.iter().filter(|r| r.server == Server::RedisServer) {
        let Some(ours) = rows.iter().find(|o| {
            o.server == Server::Cornflakes && o.test == theirs.test && o.size == theirs.size && o.mode == theirs.mode
        }) else {
            continue;
        };
        let _ = writeln!(
            t,
            "{:<10} {:>6} {:<8} {:>13.0} {:>13.0} {:>6.2}x   {:>9.3} {:>9.3} {:>6.2}x",
            theirs.test,
            theirs.size,
            theirs.mode,
            theirs.rps,
            ours.rps,
            ours.rps / theirs.rps,
            theirs.avg_ms,
            ours.avg_ms,
            ours.avg_ms / theirs.avg_ms
        );
    }
    t.push_str("ratio: ours / redis-server (throughput: above 1 is better; mean latency: below 1 is better)\n");
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A format that keeps up with anything below `capacity`, and stalls
    /// once (a missed point) at `stall`.
    fn server(capacity: f64, stall: f64) -> impl FnMut(f64) -> Result<FormatRow, Error> {
        let mut stalled = false;
        move |rate| {
            let hiccup = rate == stall && !std::mem::replace(&mut stalled, true);
            let achieved = if hiccup { rate * 0.5 } else { rate.min(capacity) };
            Ok(FormatRow {
                op: "get",
                format: "resp",
                offered: rate,
                achieved,
                p50_us: 10.0,
                p99_us: 50.0,
                errors: 0,
                timeouts: 0,
                load_avg: 0.0,
            })
        }
    }

    #[test]
    fn the_ramp_finds_the_capacity_and_survives_one_stall() {
        let (max, points) = find_max(server(100_000.0, 22_500.0)).unwrap();
        // 10 k, 15 k, 22.5 k (stalled, then again), 33.75 k, 50.6 k, 75.9 k,
        // 113.9 k twice (not kept up with), then the bisection at 94.9 k.
        assert!((90_000.0..=100_000.0).contains(&max), "{max}");
        assert_eq!(points.len(), 10, "{points:?}");
        assert!(points.iter().filter(|p| p.offered == 22_500.0).count() == 2);
        let (none, _) = find_max(server(5_000.0, 0.0)).unwrap();
        assert_eq!(none, 0.0, "not even the first load kept up with");
    }

    #[test]
    fn test_names_round_trip_and_commands_are_what_redis_benchmark_takes() {
        for t in Test::ALL {
            assert_eq!(Test::from_name(t.name()), Some(t));
        }
        assert_eq!(Test::Mget10.args(1).len(), 11);
        assert_eq!(Test::Set.args(4096), ["-t", "set", "-d", "4096"]);
        assert_eq!(value(3, 5), value(3, 5));
        assert_ne!(value(3, 5), value(4, 5));
    }
}
