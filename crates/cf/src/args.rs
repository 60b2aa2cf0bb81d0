//! The command line: clap definitions, and their conversion into the
//! settings of `cornflakes_eval`. Closed sets (transports, systems, echo
//! modes, server roles) are value enums, so clap refuses a value that does
//! not apply before anything runs, and lists the ones that do.

use cornflakes_eval::hugepages::HugepagePolicy;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Parser, Subcommand, ValueEnum};
use cornflakes_eval::echo::Mode;
use cornflakes_eval::loadgen::LoadConfig;
use cornflakes_eval::serve::Role;
use cornflakes_eval::sweep::{BoundRule, LatencyBound, SweepConfig};
use cornflakes_eval::transport::{Link, Target, Transport};
use cornflakes_eval::{calibrate, compare, echo, ipc, kv, overload, pingpong, reproduce, shapes, stall};
use cornflakes_kv::System;
use cornflakes_workloads::WorkloadSpec;

use crate::error::CliError;

/// Cornflakes benchmarks and demos.
#[derive(Parser, Debug)]
#[command(
    version,
    about,
    long_about = None,
    after_help = "On AMD CPUs cf runs itself again with GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=2000000, and so does every process it starts: glibc 2.36 copies with `rep movsb` there, about 3x slower when the destination is 1-31 bytes past the source modulo a page (glibc bug 30994), which every serializer's copies hit. Set GLIBC_TUNABLES yourself (even empty) to keep glibc's choice."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Serialization speed side by side with prost, FlatBuffers and Cap'n Proto.
    ///
    /// Cornflakes, prost, FlatBuffers and Cap'n Proto build-and-serialize
    /// and decode-and-read the paper's
    /// message shapes (1x64 B, 1x4096 B, 4x1024 B, 16x256 B, 8x32 B, nested).
    /// Prints ns per operation and the ratio of the fastest baseline to
    /// Cornflakes (above 1: Cornflakes is faster).
    Shapes(ShapesArgs),
    /// Round-trip latency between two processes over shm, udp, tcp or a bare ring.
    ///
    /// Round-trip latency between two processes on different cores, over
    /// the shared-memory datapath, the UDP datapath (127.0.0.1) or a bare
    /// shared-memory ring. The last line of output is a JSON object.
    Pingpong(PingpongArgs),
    /// The paper's echo experiment (Figure 2), in three server modes.
    ///
    /// The paper's echo experiment (Figure 2): a message of two 2048 B
    /// fields echoed by a server that rebuilds it with serialize-and-send
    /// (hybrid), without it (no-sas), or echoes raw bytes (raw). Prints
    /// throughput and latency; the last line is a JSON object.
    Echo(EchoArgs),
    /// The paper's comparisons: every serializer on the key-value store.
    ///
    /// For each workload (echo, ycsb, google, twitter, cdn), starts a
    /// key-value server per system on one core and sweeps the offered load
    /// of each with the open-loop load generator on the other core, one
    /// load point of each system in turn (--sequential: one whole sweep
    /// after another), over the shared-memory datapath; prints the highest achieved load
    /// and p99 of each system and the paper's ratios, and writes
    /// OUT/summary.json and OUT/<workload>.png. With no arguments, runs a
    /// short default of all five workloads.
    Compare(CompareArgs),
    /// The key-value server, for running by hand (see also `cf loadgen`).
    ///
    /// Preloads the workload's keys into pinned memory and serves get, put,
    /// get-many, get-list, get-from-list, append and put-many (and echo)
    /// requests in the chosen serializer until killed.
    KvServer(ServerArgs),
    /// The open-loop load generator, against a running `cf kv-server`.
    ///
    /// Poisson arrivals at --rate (or a sweep that raises the load until
    /// the achieved load falls below 95 % of it), several client threads,
    /// every response checked, HDR-histogram latencies. The last line is a
    /// JSON object.
    Loadgen(LoadgenArgs),
    /// The threshold study (paper §5, Figure 5): where zero-copy starts to pay on this machine.
    ///
    /// For each cell of a grid — responses of 1..32 list elements, 64 B to
    /// 64 KiB in total, keys spread over a working set that fits in the
    /// caches and one far beyond the last-level cache — runs one key-value
    /// server that sends every element zero-copy (only-sg) and copies every
    /// element (only-copy) in turns, under closed-loop load, and reports the
    /// ratio of its capacities (requests per second of busy time) in the
    /// two modes (--maxima: of their highest loads kept up with, each swept
    /// as `cf compare` does). Prints a heatmap per working set and the
    /// per-element-size means; draws OUT/heatmap-*.png; writes the
    /// threshold it finds (the smallest element size from which zero-copy
    /// never loses) to the calibration file that `cf kv-server` and
    /// `cornflakes::Arena::calibrated` read. The full grid takes about 7
    /// minutes on a 2-core machine (--maxima: about 4x that); --quick runs a
    /// 3 x 4 grid in about 1.
    Calibrate(CalibrateArgs),
    /// The hybrid system at every static threshold and with the adaptive one (paper Table 5).
    ///
    /// Runs `cornflakes` on the workload with thresholds 64 B .. 16 KiB and
    /// `never`, then with `--threshold adaptive` (which measures the server's
    /// cost per request at each threshold while serving and follows the
    /// cheapest), each swept as `cf compare` does, --repeats times
    /// interleaved. Prints the medians and the adaptive one's ratio to the
    /// best static threshold.
    Thresholds(ThresholdsArgs),
    /// How often this machine takes a core away from a busy thread.
    ///
    /// Spins one pinned thread per core for --seconds and counts the gaps
    /// between two clock reads longer than 50 µs, 200 µs and 1 ms. Each such
    /// gap queues an open-loop load generator's requests behind it, so a
    /// benchmark's p99/p99.9 cannot be lower than what this shows allows; run
    /// it before trusting a tail latency (`cf compare` records it).
    Hiccup(HiccupArgs),
    /// Instructions and estimated cycles per step of a request (Figure 11).
    ///
    /// Runs `cf kv-server` under callgrind (valgrind), one serializer at a
    /// time, with collection on only inside the steps of request handling
    /// (deserialize, store, set value, serialize & send, flush), while the
    /// load generator offers --rate from the other core over shm. With
    /// `--side client`, the load generator runs under callgrind instead
    /// (steps: arrive, send_backlog, receive: the datapath's gather,
    /// on_response: the check, expire). Prints and writes, per system and
    /// step, instructions, simulated cache misses, simulated branch
    /// mispredictions and estimated cycles per request (OUT/table.md,
    /// phases.json, phases.png, and each callgrind file for
    /// `callgrind_annotate`). Counts are exact and repeatable, unlike times
    /// on a machine without cycle counters. Valgrind has no AVX-512: code
    /// that uses it where the CPU has it (short copies) takes its fallback
    /// under callgrind.
    Phases(PhasesArgs),
    /// Each evaluation result of the paper, made again on this machine.
    ///
    /// `cf reproduce fig2`, `... fig5 table2`, or `cf reproduce all`: each
    /// result gets a folder in OUT with its data, PNGs and a README.md that
    /// quotes what the paper found and says what was found here (or why it
    /// cannot be made here); OUT/README.md lists them. Figures 6, 7, 12 and
    /// Tables 1, 2, 4, 5 share one key-value comparison (OUT/kv).
    Reproduce(ReproduceArgs),
    /// Does a client that stops reading slow down the others?
    ///
    /// Starts the key-value server and alternates two load points at the
    /// same --rate: the load generator alone, and with --stalled clients
    /// connected that each sent --stall-requests gets and never read a
    /// response. Prints each pair, the medians and the ratios (a server
    /// that isolates its clients keeps throughput >= 0.9x and p99 <= 2x).
    Stall(StallArgs),
    /// Where the slow requests of a load point spend their time.
    ///
    /// Runs the key-value server with its timeline on and the load
    /// generator at --fractions of a closed-loop probe (or at --rates), and
    /// matches every request slower than 50 µs with what overlapped it: the
    /// client's or the server's loop losing its core for more than 20 µs, the
    /// server asleep, a server batch longer than 20 µs. First each core
    /// spins alone for --machine-seconds (the machine's own gaps, as `cf
    /// hiccup`). Prints a table (the p99 could be within 50 µs without the
    /// gaps only if fewer than 1 % of requests were slow with no gap) and
    /// writes OUT/summary.json and each point's timeline (TSV: kind, start
    /// ns, end ns on CLOCK_MONOTONIC).
    Tails(TailsArgs),
    /// Zerializer's offload engine on the second core vs encoding inline.
    ///
    /// The application (on --app-core) sends the paper's two-field message
    /// (2x--size B) to an echo peer over shared memory and checks every
    /// echo, three ways side by side: `engine` (the application posts a
    /// descriptor of an arena object; the engine thread on --engine-core
    /// encodes it with schema tables, sends, receives and parses the echo),
    /// `inline-table` (the same encoder and decoder on the application
    /// core) and `inline-prost` (prost into pinned memory). The echo peer
    /// runs on --engine-core in all three (inside the engine thread for
    /// `engine`). Prints p50/p99 round-trip latency, round trips per second
    /// at --window outstanding and, with valgrind installed, application-
    /// thread instructions per message from callgrind (send side and whole
    /// round trip). The last line is a JSON object.
    Offload(OffloadArgs),
    /// A soak of the key-value server at a multiple of its capacity.
    ///
    /// Starts `cf kv-server` on --server-core, measures its capacity (a
    /// closed-loop probe, then 1 s points at 20 %, 40 %, ... of it: the
    /// highest load with 95 % of it achieved and at most 0.1 % timed out;
    /// or takes --capacity), then offers --normal x capacity for --before seconds
    /// in 100 ms windows, --factor x capacity for --seconds in 1 s points,
    /// and --normal x capacity again for --after seconds. Prints one line
    /// per second: offered load, goodput (correct responses within the
    /// timeout per second), timeouts, worst p99, and the server's resident
    /// memory (/proc/<pid>/status), pool bytes, requests handled and
    /// received, and drops. Ends with a summary: goodput during the
    /// overload as % of capacity, smallest and largest RSS and pool during
    /// it, and the recovery time: from the end of the overload to the end
    /// of the first window with no timeout and a p99 within 2x the median
    /// p99 before it. The last line is the summary as JSON.
    Overload(OverloadArgs),
    /// The server half of `pingpong` and `echo` (started by them).
    #[command(hide = true)]
    Serve(ServeArgs),
    /// The per-host monitor of the drop-in socket library (libcfsocket.so).
    ///
    /// Programs run with `LD_PRELOAD=target/release/libcfsocket.so` register
    /// their listening TCP sockets here; a `connect` to one of them from
    /// another such program is matched here and both ends get shared-memory
    /// rings instead of a kernel connection. The monitor is never on the data
    /// path. Without a monitor the library sends everything to the kernel.
    /// Stop it with Ctrl-C; see docs/sockets.md.
    SocketMonitor(SocketMonitorArgs),
    /// Our RESP server side by side with redis-server under redis-benchmark.
    ///
    /// For each value size, starts redis-server (persistence off) and then
    /// `cf kv-server --protocol resp`, each pinned to --server-core,
    /// preloads the keys the tests read, and runs redis-benchmark on
    /// --client-core for GET, SET, MGET (2 and 10 keys) and LRANGE 0 99 of
    /// a 100-element list, with -c 1 (mean latency), -c 50 and -c 50 -P 16.
    /// Reads the values back afterwards; any error reply or wrong value
    /// fails the run. Prints one line per run (with the load average) and
    /// a table of the ratios; writes OUT/table.txt and OUT/summary.json.
    /// Needs redis-server, redis-benchmark and taskset (scripts/setup.sh).
    RedisCompare(RedisCompareArgs),
    /// Unmodified programs over kernel TCP and through libcfsocket, side by side.
    ///
    /// Runs sockperf ping-pong, redis-server under redis-benchmark GET (-c 1
    /// and -c 50), nginx (a master and its worker) under wrk, and iperf3,
    /// each first over kernel loopback TCP and then with
    /// LD_PRELOAD=libcfsocket.so on both sides, servers on --server-core and
    /// clients on --client-core, --rounds times; `cf pingpong --transport
    /// bare` beside sockperf gives the bare ring's round trip. wrk checks
    /// every response body (a Lua script), redis's value is read back, and a
    /// library run that made no ring connection fails. Starts its own
    /// monitor. Prints each run with the load average, then medians, gains
    /// and the targets; writes OUT/table.txt, OUT/summary.json,
    /// OUT/runs.tsv and OUT/sockets-bench.png. Needs the packages of
    /// scripts/setup.sh and `cargo build --release -p cornflakes-socket-preload`.
    SocketsBench(SocketsBenchArgs),
    /// Throughput of large messages (16 MiB) over the tcp datapath vs a blocking std::net loop.
    ///
    /// One connection over 127.0.0.1, receiver thread on --server-core,
    /// sender on --client-core: --size messages sent one way for --seconds
    /// through the tcp datapath, then the same through a blocking
    /// `write_all`/`read_exact` loop of `std::net` sockets; --repeats times,
    /// alternating. Every message's id, length and bytes are checked on
    /// receipt in both. Prints GB/s of each run, the medians, their ratio and
    /// the load average; the last line is a JSON object.
    Bulk(BulkArgs),
    /// Where zero-copy sends start to pay: SENDMSG vs SENDMSG_ZC, 1 KiB to 1 MiB.
    ///
    /// Sends segments of 1 KiB to 1 MiB back to back over the tcp datapath,
    /// with plain SENDMSG and then SENDMSG_ZC, for --ms per size and mode;
    /// prints GB/s, the sender's CPU ns per KiB, how many zero-copy
    /// notifications said the kernel copied anyway, the break-even size and
    /// the zero_copy_min it implies (never, on a path where the kernel
    /// copies, such as loopback and veth). Without --addr the peer is a
    /// discard sink in this process on 127.0.0.1. Across two namespaces:
    ///   scripts/netns.sh run zc 1500 target/release/cf zc-sink --addr 192.0.2.2:7100 \
    ///       -- target/release/cf zc-probe --addr 192.0.2.2:7100
    /// The last line is a JSON object.
    ZcProbe(ZcProbeArgs),
    /// A peer for `cf zc-probe`: reads and discards on --addr until killed.
    #[command(hide = true)]
    ZcSink(ZcSinkArgs),
    /// Round-trip latency of iceoryx2 request-response between two processes.
    ///
    /// Round-trip latency of iceoryx2 (zero-copy IPC) request-response
    /// between two processes on different cores: the client writes each
    /// message into a loaned request, the server copies it into a loaned
    /// response, the client checks every byte. Same options and last line
    /// (a JSON object, transport "iceoryx2") as `cf pingpong`.
    IpcPingpong(IpcPingpongArgs),
    /// iceoryx2 side by side with `cf pingpong --transport shm`.
    ///
    /// For each size, --repeats runs of `cf ipc-pingpong` (iceoryx2), of
    /// `cf pingpong --transport shm` and of the same with `--in-place`
    /// (received in place, 512 B and more by descriptor), each going first
    /// in turn, each in its own process with the same cores. Prints a line
    /// per run, then a table of the median p50 and p99 round trips and
    /// their ratios to iceoryx2 (below 1: ours is faster); the last line is
    /// the table as JSON.
    IpcCompare(IpcCompareArgs),
    /// The server half of `ipc-pingpong` (started by it).
    #[command(hide = true)]
    IpcServe(IpcServeArgs),
}

/// Arguments of `cf socket-monitor`.
#[derive(clap::Args, Debug)]
pub(crate) struct SocketMonitorArgs {
    /// Unix socket to listen on: `@name` for an abstract name, or a path.
    /// Default: `$CFSOCKET_MONITOR`, the variable through which programs
    /// under the library find the monitor, else @cornflakes-socket-monitor.
    #[arg(long)]
    pub(crate) addr: Option<String>,
    /// Print one line per listen, connect and listener death.
    #[arg(long, short)]
    pub(crate) verbose: bool,
}

/// Options of `cf sockets-bench`.
#[derive(clap::Args, Debug)]
pub(crate) struct SocketsBenchArgs {
    /// Programs to run, comma-separated.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "sockperf,redis,nginx,iperf3")]
    tools: Vec<cornflakes_eval::sockets_bench::Tool>,
    /// Rounds; each runs every program on the kernel, then through the library.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds of each sockperf, wrk and iperf3 run (whole seconds).
    #[arg(long, default_value_t = 3.0, value_parser = positive)]
    seconds: f64,
    /// sockperf message bytes (and the bare ring's).
    #[arg(long, default_value_t = 64)]
    message_bytes: usize,
    /// Bytes of the page nginx serves.
    #[arg(long, default_value_t = 1024)]
    page_bytes: usize,
    /// wrk connections.
    #[arg(long, default_value_t = 50)]
    wrk_connections: u32,
    /// Requests of redis-benchmark -c 1.
    #[arg(long, default_value_t = 20_000)]
    redis_latency_requests: u64,
    /// Requests of redis-benchmark -c 50.
    #[arg(long, default_value_t = 100_000)]
    redis_requests: u64,
    /// The preload library. Default: libcfsocket.so next to this cf.
    #[arg(long)]
    library: Option<PathBuf>,
    /// Core the servers run on.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core the clients run on.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Directory for the results.
    #[arg(long, default_value = "results/sockets-bench")]
    out: PathBuf,
}

impl SocketsBenchArgs {
    pub(crate) fn config(&self) -> cornflakes_eval::sockets_bench::SocketsBenchConfig {
        let d = cornflakes_eval::sockets_bench::SocketsBenchConfig::default();
        cornflakes_eval::sockets_bench::SocketsBenchConfig {
            tools: self.tools.clone(),
            rounds: self.rounds,
            seconds: self.seconds,
            message_bytes: self.message_bytes,
            page_bytes: self.page_bytes,
            wrk_connections: self.wrk_connections,
            redis_latency_requests: self.redis_latency_requests,
            redis_requests: self.redis_requests,
            library: self.library.clone().unwrap_or(d.library.clone()),
            server_core: self.server_core,
            client_core: self.client_core,
            out: self.out.clone(),
            ..d
        }
    }
}

/// Options of `cf redis-compare`.
#[derive(clap::Args, Debug)]
pub(crate) struct RedisCompareArgs {
    /// Value sizes, bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "64,1024,4096,16384")]
    sizes: Vec<usize>,
    /// Tests, comma-separated: get, set, mget-2, mget-10, lrange-100.
    #[arg(long, value_delimiter = ',', default_value = "get,set,mget-2,mget-10,lrange-100")]
    tests: Vec<String>,
    /// Requests per -c 50 run (fewer for large replies: at most 2 GiB of
    /// replies per run, at least 1000 requests).
    #[arg(long, default_value_t = 100_000)]
    requests: u64,
    /// Requests per -c 1 run.
    #[arg(long, default_value_t = 20_000)]
    latency_requests: u64,
    /// Core the servers run on.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core redis-benchmark runs on.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Our server's zero-copy threshold, bytes.
    #[arg(long, default_value_t = cornflakes_kv::resp::DEFAULT_THRESHOLD)]
    threshold: usize,
    /// Directory for table.txt and summary.json.
    #[arg(long, default_value = "results/redis-compare")]
    out: PathBuf,
    /// Offered loads, requests/s, comma-separated, of a YCSB phase with
    /// our open-loop RESP load generator (get, mget-2, lrange-2 of
    /// --ycsb-size values, every reply checked); none: no YCSB phase.
    #[arg(long, value_delimiter = ',')]
    ycsb_rates: Vec<f64>,
    /// Skip the redis-benchmark runs (only the YCSB and formats phases).
    #[arg(long)]
    ycsb_only: bool,
    /// Offered loads, requests/s, comma-separated, of the formats phase
    /// (issue 14, item 5): our server answers YCSB get and lrange-2 of
    /// --ycsb-size values from one store in RESP and in the Cornflakes
    /// format (tcp), driven in turn by our two open-loop load generators;
    /// none: no formats phase.
    #[arg(long, value_delimiter = ',')]
    formats_rates: Vec<f64>,
    /// The formats phase also finds each format's highest load kept up
    /// with (from 10 000 requests/s, half again each step, the last step
    /// bisected) and prints the ratios next to the paper's Table 3.
    #[arg(long)]
    formats_max: bool,
    /// Keys of the Twitter workload, run next to the YCSB requests in the
    /// open-loop and formats phases (gets of plain and chunked values, 8 %
    /// puts; paper Figure 8); 0: no Twitter.
    #[arg(long, default_value_t = 20_000)]
    twitter_keys: u32,
    /// Keys of the YCSB phase.
    #[arg(long, default_value_t = 10_000)]
    ycsb_keys: u32,
    /// Value bytes of the YCSB phase.
    #[arg(long, default_value_t = 2048)]
    ycsb_size: u32,
    /// Recorded seconds per YCSB point.
    #[arg(long, default_value_t = 2.0, value_parser = positive)]
    ycsb_seconds: f64,
}

impl RedisCompareArgs {
    pub(crate) fn config(&self) -> Result<cornflakes_eval::redis_compare::RedisCompareConfig, CliError> {
        use cornflakes_eval::redis_compare::{RedisCompareConfig, Test};
        let tests = self
            .tests
            .iter()
            .map(|t| {
                Test::from_name(t).ok_or_else(|| {
                    cornflakes_eval::Error::Invalid(format!(
                        "unknown test `{t}` (expected get, set, mget-2, mget-10, lrange-100)"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RedisCompareConfig {
            sizes: if self.ycsb_only { Vec::new() } else { self.sizes.clone() },
            tests,
            requests: self.requests,
            latency_requests: self.latency_requests,
            server_core: self.server_core,
            client_core: self.client_core,
            threshold: self.threshold,
            out: self.out.clone(),
            ycsb_rates: self.ycsb_rates.clone(),
            ycsb_keys: self.ycsb_keys,
            ycsb_size: self.ycsb_size,
            ycsb_seconds: self.ycsb_seconds,
            formats_rates: self.formats_rates.clone(),
            formats_max: self.formats_max,
            twitter_keys: self.twitter_keys,
            ..RedisCompareConfig::default()
        })
    }
}

/// Options of `cf zc-probe`.
#[derive(clap::Args, Debug)]
pub(crate) struct ZcProbeArgs {
    /// A `cf zc-sink` to send to (host:port); default: a sink in this process on 127.0.0.1.
    #[arg(long)]
    addr: Option<std::net::SocketAddr>,
    /// Milliseconds per size and mode.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    ms: u64,
    /// Core of the local sink.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core of the sender.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
}

impl ZcProbeArgs {
    pub(crate) fn config(&self) -> cornflakes_eval::zcprobe::Config {
        cornflakes_eval::zcprobe::Config {
            addr: self.addr,
            per_size: Duration::from_millis(self.ms),
            server_core: self.server_core,
            client_core: self.client_core,
        }
    }
}

/// Options of `cf zc-sink`.
#[derive(clap::Args, Debug)]
pub(crate) struct ZcSinkArgs {
    /// Address to listen on.
    #[arg(long)]
    pub(crate) addr: std::net::SocketAddr,
}

/// Options of `cf bulk`.
#[derive(clap::Args, Debug)]
pub(crate) struct BulkArgs {
    /// Bytes per message; K, M and G suffixes are powers of 1024 (16M = 16 MiB).
    #[arg(long, default_value = "16M", value_parser = parse_size)]
    size: usize,
    /// Seconds per run.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Runs of each system; the median is compared.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Core of the receiver.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core of the sender.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// How the tcp datapath receives: single (one RECV per connection into
    /// its own buffer) or multishot (provided-buffer ring).
    #[arg(long, default_value = "single", value_parser = ["single", "multishot"])]
    recv_mode: String,
}

impl BulkArgs {
    pub(crate) fn config(&self) -> cornflakes_eval::bulk::Config {
        cornflakes_eval::bulk::Config {
            size: self.size,
            seconds: self.seconds,
            repeats: self.repeats as usize,
            server_core: self.server_core,
            client_core: self.client_core,
            recv_mode: if self.recv_mode == "multishot" {
                cornflakes_eval::bulk::RecvMode::Multishot
            } else {
                cornflakes_eval::bulk::RecvMode::Single
            },
        }
    }
}

/// A memory amount as Redis's configuration takes it (`100mb`, `2gb`,
/// `1000`; `k`/`m`/`g` are powers of 1000).
fn parse_file_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.contains('/') {
        Err("a file name, not a path (the directory is --dir)".into())
    } else {
        Ok(s.to_owned())
    }
}

fn parse_memory(s: &str) -> Result<usize, String> {
    cornflakes_kv::resp::memory_value(s.as_bytes())
        .ok_or_else(|| format!("{s:?} is not a memory amount (examples: 0, 100mb, 2gb; kb/mb/gb are powers of 1024)"))
}

/// A byte count with an optional K, M or G suffix (powers of 1024).
fn parse_size(s: &str) -> Result<usize, String> {
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: usize = digits.parse().map_err(|_| format!("{s:?} is not a size (examples: 4096, 64K, 16M)"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s} is too large"))
}

/// A key-value system on the command line: the names of
/// [`System::name`], listed by `--help`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SystemArg(pub(crate) System);

const fn all_systems() -> [SystemArg; System::ALL.len()] {
    let mut out = [SystemArg(System::Cornflakes); System::ALL.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = SystemArg(System::ALL[i]);
        i += 1;
    }
    out
}

static SYSTEMS: [SystemArg; System::ALL.len()] = all_systems();

impl ValueEnum for SystemArg {
    fn value_variants<'a>() -> &'a [Self] {
        &SYSTEMS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()))
    }
}

/// Parses a workload description for clap.
fn parse_workload(s: &str) -> Result<WorkloadSpec, String> {
    s.parse::<WorkloadSpec>().map_err(|e| e.to_string())
}

/// Parses a positive, finite number for clap.
fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

/// Parses a non-negative, finite number for clap.
fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a number of at least 0")),
    }
}

/// Options of `cf shapes`.
#[derive(clap::Args, Debug)]
pub(crate) struct ShapesArgs {
    /// Time per system, shape and operation.
    #[arg(long, default_value = "300ms", value_parser = shapes::parse_duration)]
    time: Duration,
    /// Repeated batches per measurement; the median is reported.
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..))]
    batches: u32,
    /// Core to pin to (the last core by default).
    #[arg(long)]
    core: Option<usize>,
    /// Only these shapes (repeatable).
    #[arg(long, value_enum)]
    shape: Vec<cornflakes_bench::Shape>,
    /// Print one JSON object per measurement instead of the table.
    #[arg(long)]
    json: bool,
}

impl ShapesArgs {
    pub(crate) fn config(&self) -> shapes::Config {
        shapes::Config {
            time: self.time,
            batches: self.batches as usize,
            core: self.core,
            shapes: self.shape.clone(),
            json: self.json,
        }
    }
}

/// Options of `cf pingpong`.
#[derive(clap::Args, Debug)]
pub(crate) struct PingpongArgs {
    /// What to measure.
    #[arg(long, value_enum)]
    transport: Link,
    /// Message size in bytes.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    size: u32,
    /// Measured round trips.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    iters: u64,
    /// Unrecorded round trips first.
    #[arg(long, default_value_t = 10_000)]
    warmup: u64,
    /// Core of the client (this process).
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Core of the server process.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Where the server listens: IP:port for tcp and std-tcp (port 0: the
    /// kernel picks; default 127.0.0.1:0), a socket path for shm.
    #[arg(long)]
    addr: Option<String>,
    /// shm only: both sides receive in place (leased views of the peer's
    /// pool), and messages of 512 B or more go by descriptor: the client
    /// writes its payload once into its shared pool, the server copies it
    /// once into its own and sends it back, and the client checks it where
    /// it lies. The report's transport is `shm-in-place`.
    #[arg(long)]
    in_place: bool,
}

impl PingpongArgs {
    pub(crate) fn config(&self) -> pingpong::Config {
        pingpong::Config {
            transport: self.transport,
            size: self.size as usize,
            iters: self.iters,
            warmup: self.warmup,
            client_core: self.client_core,
            server_core: self.server_core,
            addr: self.addr.clone(),
            in_place: self.in_place,
        }
    }
}

/// Options of `cf echo`.
#[derive(clap::Args, Debug)]
pub(crate) struct EchoArgs {
    /// Datapath to run over.
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// How the server echoes.
    #[arg(long, value_enum, default_value = "hybrid")]
    mode: Mode,
    /// Fields in the message.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    fields: u32,
    /// Bytes per field.
    #[arg(long, default_value_t = 2048)]
    size: usize,
    /// Requests kept outstanding.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    window: u32,
    /// Measured seconds.
    #[arg(long, default_value_t = 3.0, value_parser = positive)]
    seconds: f64,
    /// Unmeasured seconds first.
    #[arg(long, default_value_t = 1.0, value_parser = non_negative)]
    warmup: f64,
    /// Core of the client (this process).
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Core of the server process.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Where the server listens: IP:port for tcp (port 0: the kernel
    /// picks; default 127.0.0.1:0), a socket path for shm.
    #[arg(long)]
    addr: Option<String>,
}

impl EchoArgs {
    pub(crate) fn config(&self) -> echo::Config {
        echo::Config {
            transport: self.transport,
            mode: self.mode,
            fields: self.fields as usize,
            size: self.size,
            window: self.window as usize,
            seconds: self.seconds,
            warmup: self.warmup,
            client_core: self.client_core,
            server_core: self.server_core,
            addr: self.addr.clone(),
        }
    }
}

/// Command-line settings of a sweep's stopping rule.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct SweepArgs {
    /// The latency quantile a load point must keep within the SLO to count
    /// as kept up: p99 (the paper's SLO) or p50 (the median, less sensitive
    /// to the machine's stalls). Default: p99, except in `cf compare` when
    /// the machine's own gaps would set the p99 (its cores, spinning with
    /// nothing else running, lose 1 % of their time or more in gaps over
    /// 20 µs; `cf hiccup`, `cf tails`): then p50, and the table says so.
    #[arg(long, value_enum)]
    slo: Option<SloQuantile>,
    /// The SLO in µs. Default: a multiple of the quantile at the sweep's
    /// lowest load point (--slo-factor), at least --slo-floor-us.
    #[arg(long, value_parser = positive)]
    slo_us: Option<f64>,
    /// Without --slo-us: the SLO as a multiple of the lowest load's
    /// latency (default 10 for p99, 20 for p50) ...
    #[arg(long, value_parser = positive)]
    slo_factor: Option<f64>,
    /// ... but never below this many µs (default 50 for p99, 200 for p50).
    #[arg(long, value_parser = non_negative)]
    slo_floor_us: Option<f64>,
    /// Extra points that bisect the step where the system fell behind.
    #[arg(long, default_value_t = 2)]
    refine: usize,
}

impl SweepArgs {
    /// Whether the user chose the latency bound (any --slo* flag).
    fn slo_given(&self) -> bool {
        self.slo.is_some() || self.slo_us.is_some() || self.slo_factor.is_some() || self.slo_floor_us.is_some()
    }

    /// The sweep these settings describe, around `point`.
    fn sweep_config(&self, point: LoadConfig) -> SweepConfig {
        let default = match self.slo.unwrap_or(SloQuantile::P99) {
            SloQuantile::P99 => LatencyBound::p99_default(),
            SloQuantile::P50 => LatencyBound::p50_default(),
        };
        let rule = match (self.slo_us, default.rule) {
            (Some(us), _) => BoundRule::Fixed(us),
            (None, BoundRule::RelativeToLowLoad { factor, floor_us }) => BoundRule::RelativeToLowLoad {
                factor: self.slo_factor.unwrap_or(factor),
                floor_us: self.slo_floor_us.unwrap_or(floor_us),
            },
            (None, fixed) => fixed,
        };
        SweepConfig {
            bound: LatencyBound { quantile: default.quantile, rule },
            refine: self.refine,
            ..SweepConfig::new(point)
        }
    }
}

/// `--slo`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum SloQuantile {
    /// The 99th percentile.
    P99,
    /// The median.
    P50,
}

/// Options of `cf compare`.
#[derive(clap::Args, Debug)]
pub(crate) struct CompareArgs {
    /// Workloads to run: echo, ycsb, google, twitter, cdn, or a full
    /// description such as `ycsb:keys=1000000,fields=4,size=1024`. Repeat the
    /// flag or separate with spaces. Default: all five, at their short
    /// default sizes.
    #[arg(long, num_args = 1.., value_delimiter = ' ', value_parser = parse_workload)]
    workload: Vec<WorkloadSpec>,
    /// Systems to compare (default: every system that applies to the
    /// workload).
    #[arg(long, value_enum, num_args = 1.., value_delimiter = ',')]
    systems: Vec<SystemArg>,
    /// Directory for summary.json and the plots.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Recorded seconds per load point. Short, so that the three default
    /// repeats take the time one sweep of 1 s points did: a VM's slow
    /// phases last seconds to minutes (on the project's test VM), and the
    /// median of three sweeps taken at different times is steadier than
    /// one sweep of longer points (a point near a knee still holds 100 k+
    /// requests).
    #[arg(long, default_value_t = 0.4, value_parser = positive)]
    seconds: f64,
    /// Unrecorded seconds before each point.
    #[arg(long, default_value_t = 0.1, value_parser = non_negative)]
    warmup: f64,
    /// Client threads (connections), all on the client core.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
    /// Request timeout, milliseconds.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: u64,
    /// Core of the server.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core of the load generator.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Datapath between the load generator and the server: `shm` (the
    /// paper's targets are for it), `udp` or `tcp` (io_uring on 127.0.0.1).
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// Sweeps per system; the table shows the median maximum. Repeats are
    /// interleaved across systems (the system that runs first turns with
    /// each workload and repeat), and ratios pair them: the geometric mean
    /// over the repeats of one system's maximum over another's in the same
    /// repeat, so a slow phase of the machine cancels out (one that hits
    /// every system alike). A repeat whose maximum is below half the
    /// system's median is a stall of the machine: it is left out of that
    /// system's ratios and listed under the table. The table also gives
    /// the machine's cross-core copy bandwidth, measured after every point:
    /// it has phases on VMs, and maxima move with it.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// udp/tcp: IP:port the servers listen on (port 0: the kernel picks).
    /// Default 127.0.0.1:0, or 192.0.2.2:0 with --netns.
    #[arg(long)]
    addr: Option<String>,
    /// Two hosts on one machine (tcp only; needs root): each server runs in
    /// one network namespace, the load generator in another, joined by a
    /// veth pair (scripts/netns.sh); the namespaces are removed at the end,
    /// also on failure. Without root it refuses and says so.
    #[arg(long)]
    netns: bool,
    /// With --netns: MTU of the veth pair, 1500 or 9000.
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// With --netns: the namespace script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/netns.sh"))]
    netns_script: PathBuf,
    /// Trusted peers (shm only): the load generator reads responses in
    /// place (`cf loadgen --in-place`) and the server receives requests in
    /// place (`cf kv-server --in-place`): a Cornflakes echo goes back by
    /// reference into the load generator's own pool, other requests are
    /// gathered into the server's shared pool.
    #[arg(long)]
    in_place: bool,
    /// One server at a time, its whole sweep, then the next system's.
    /// Default: every system's server of a workload is up at once (idle
    /// ones sleep; each holds its preloaded store, ~0.4-0.9 GB on the
    /// default workloads; started afresh for each repeat) and the load
    /// generator runs one load point of each system in turn, so that the
    /// machine's slow phases, which last seconds to minutes, fall on every
    /// system alike.
    #[arg(long)]
    sequential: bool,
    /// 2 MiB hugepages for the servers' pools: `auto` (half the available
    /// memory, at most 12 GiB, reserved at the start when run as root and
    /// given back at the end; otherwise a warning), `off` (leave the
    /// machine as it is), or a size in MiB (an error if it cannot be
    /// reserved). On a VM, a server in small pages runs at a speed that
    /// depends on which free pages it got, and so on its start order;
    /// in hugepages the start order mattered less in the runs measured
    /// (docs/results/2026-11-28-footprint/). Runs at the same time would
    /// give back each other's pages: give `off` to all but one.
    #[arg(long, default_value = "auto")]
    hugepages: HugepagePolicy,
    #[command(flatten)]
    sweep: SweepArgs,
}

impl CompareArgs {
    pub(crate) fn config(&self) -> Result<compare::CompareConfig, CliError> {
        let workloads = if self.workload.is_empty() {
            WorkloadSpec::names()
                .iter()
                .map(|n| parse_workload(n))
                .collect::<Result<_, _>>()
                .map_err(CliError::Usage)?
        } else {
            self.workload.clone()
        };
        Ok(compare::CompareConfig {
            workloads,
            systems: self.systems.iter().map(|s| s.0).collect(),
            out: self.out.clone(),
            sweep: self.sweep.sweep_config(LoadConfig {
                rate: None,
                threads: self.threads as usize,
                warmup: Duration::from_secs_f64(self.warmup),
                duration: Duration::from_secs_f64(self.seconds),
                timeout: Duration::from_millis(self.timeout_ms),
                max_outstanding: 16384,
                seed: 1,
                in_place: self.in_place,
            }),
            server_core: self.server_core,
            client_core: self.client_core,
            transport: self.transport,
            repeats: self.repeats as usize,
            addr: self.addr.clone(),
            netns: self.netns.then(|| compare::NetnsConfig { script: self.netns_script.clone(), mtu: self.mtu }),
            slo_auto: !self.sweep.slo_given(),
            schedule: if self.sequential { compare::Schedule::Sequential } else { compare::Schedule::Interleaved },
            hugepages: self.hugepages,
        })
    }
}

/// Options of `cf kv-server`.
#[derive(clap::Args, Debug)]
pub(crate) struct ServerArgs {
    /// Serializer (raw: echo workload only).
    #[arg(long, value_enum, default_value = "cornflakes")]
    system: SystemArg,
    /// Workload whose keys are preloaded, e.g. `ycsb`, `google:max=8`,
    /// `twitter:keys=1000000`, `cdn`, `echo` (see `cf compare --help`).
    #[arg(long, value_parser = parse_workload, default_value = "ycsb")]
    workload: WorkloadSpec,
    /// Datapath.
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// Unix socket path (shm) or IP:port to bind (udp, tcp; IPv6 as [::1]:port).
    #[arg(long, default_value = "/tmp/cf-kv.sock")]
    addr: String,
    /// Core to pin the server to.
    #[arg(long)]
    core: Option<usize>,
    /// UDP: socket buffer to ask for, bytes (the kernel doubles it, up to
    /// net.core.rmem_max). It is the queue of requests waiting for the
    /// server, so it bounds their queueing delay under overload: on
    /// loopback a small request takes ~830 bytes of it, so 1 MiB queues
    /// ~2500 requests, 25 ms at 100 k/s (4 MiB: ~100 ms).
    #[arg(long, default_value_t = 1 << 20)]
    udp_socket_buffer: usize,
    /// Zero-copy threshold of the hybrid systems (cornflakes,
    /// cornflakes-no-sas) and of RESP replies: bytes, `never`, or `adaptive`
    /// (measured and followed while serving; not with --protocol resp);
    /// `interleaved` or `turns:<bytes|never>[-no-sas],...` take turns of 2048
    /// requests and report each one's busy time when stopped (`cf
    /// thresholds --interleaved`, `cf calibrate`).
    /// Default: this machine's calibration for the transport (`cf calibrate`
    /// writes it; see `CORNFLAKES_THRESHOLD`, `CORNFLAKES_CALIBRATION`),
    /// else the paper's 512.
    #[arg(long, value_parser = cornflakes_eval::report::parse_threshold)]
    threshold: Option<cornflakes_eval::report::ThresholdChoice>,
    /// Take commands on standard input (set by `cf compare`): a line asks
    /// for the counters, end of input stops the server.
    #[arg(long, hide = true)]
    exit_with_parent: bool,
    /// Wire protocol: `kv`, the serializer's own messages (--system), or
    /// `resp`, RESP2 as Redis speaks it (tcp only), for redis-cli and
    /// redis-benchmark: e.g. `cf kv-server --protocol resp --transport tcp
    /// --addr 127.0.0.1:6380 --workload echo` (echo: nothing preloaded).
    #[arg(long, value_enum, default_value = "kv")]
    pub(crate) protocol: Protocol,
    /// RESP: also serve the key-value protocol in the Cornflakes format
    /// (hybrid, serialize-and-send) from the same store, on this IP:port
    /// (tcp), for comparing the two formats in one server.
    #[arg(long)]
    kv_addr: Option<String>,
    /// RESP: send replies holding a zero-copy value of at least this many
    /// bytes with SENDMSG_ZC (default: never, right on loopback and veth
    /// where the kernel copies anyway; on a NIC try 16384).
    #[arg(long, default_value_t = usize::MAX, hide_default_value = true)]
    zero_copy_min: usize,
    /// RESP: most clients connected at once (Redis's maxclients); one more
    /// is answered "-ERR max number of clients reached" and closed.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..(1 << 20)))]
    maxclients: u64,
    /// RESP: the most bytes keys and values may take (Redis's maxmemory;
    /// 100mb, 2gb, ...; 0: no limit; also CONFIG SET maxmemory). Past it
    /// keys are evicted by --maxmemory-policy, or, with noeviction,
    /// commands that may add data get Redis's OOM error. Redis counts its
    /// allocator's total, this the bytes of keys and values.
    #[arg(long, default_value = "0", value_parser = parse_memory)]
    maxmemory: usize,
    /// RESP: what goes once --maxmemory is reached, as Redis's
    /// maxmemory-policy: noeviction (refuse writes), allkeys-lru,
    /// allkeys-lfu, allkeys-random, volatile-lru, volatile-lfu,
    /// volatile-random, volatile-ttl (volatile: keys with an expiry only);
    /// also CONFIG SET maxmemory-policy.
    #[arg(long, default_value = "noeviction")]
    maxmemory_policy: cornflakes_kv::resp::EvictionPolicy,
    /// RESP: the password clients must give (AUTH, or HELLO's AUTH) before
    /// anything else, as Redis's requirepass; also CONFIG SET requirepass.
    /// Prefer the CF_REQUIREPASS environment variable: a flag shows in ps.
    #[arg(long, env = "CF_REQUIREPASS", hide_env_values = true)]
    requirepass: Option<String>,
    /// RESP: the directory SAVE and BGSAVE write their snapshot to (an RDB
    /// file redis-server loads too); a snapshot there (--dbfilename) is
    /// loaded at start, whether this server or redis-server wrote it, as
    /// Redis's dir.
    #[arg(long, default_value = ".")]
    dir: std::path::PathBuf,
    /// RESP: the snapshot's file name in --dir, as Redis's dbfilename.
    #[arg(long, default_value = "dump.rdb", value_parser = parse_file_name)]
    dbfilename: String,
    /// RESP: Redis's save points, "seconds changes [seconds changes ...]":
    /// a BGSAVE once that many changes were made and that many seconds
    /// have passed since the last save (also CONFIG SET save; none by
    /// default: Redis's default is "3600 1 300 100 60 10000").
    #[arg(long, default_value = "")]
    save: String,
    /// Record when the serving loop lost its core, slept or spent long on
    /// a batch, and append those spans to this file (TSV) each time the
    /// parent asks for counters (set by `cf tails`).
    #[arg(long, hide = true)]
    timeline: Option<std::path::PathBuf>,
    /// shm, for clients that trust each other (one application): requests
    /// are received in place (the client's zero-copy values stay in its
    /// pool, leased); Cornflakes answers an echo with references to them
    /// (to a client that accepts returns: `cf loadgen --in-place`), other
    /// requests are gathered into the shared pool instead of the private
    /// one, so every client can read every request.
    #[arg(long)]
    in_place: bool,
}

/// The wire protocol of `cf kv-server`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Protocol {
    /// The serializer's own request and response messages.
    Kv,
    /// RESP2, the Redis protocol.
    Resp,
}

impl ServerArgs {
    pub(crate) fn resp_options(&self) -> Result<cornflakes_eval::resp_server::RespServerOptions, CliError> {
        if self.transport != Transport::Tcp {
            return Err(cornflakes_eval::Error::Invalid("--protocol resp runs over --transport tcp".into()).into());
        }
        Ok(cornflakes_eval::resp_server::RespServerOptions {
            workload: self.workload.clone(),
            addr: self.addr.clone(),
            core: self.core,
            threshold: match self.threshold {
                Some(cornflakes_eval::report::ThresholdChoice::Fixed(t)) => t,
                Some(
                    cornflakes_eval::report::ThresholdChoice::Adaptive
                    | cornflakes_eval::report::ThresholdChoice::Interleaved
                    | cornflakes_eval::report::ThresholdChoice::Turns(_),
                ) => {
                    return Err(cornflakes_eval::Error::Invalid(
                        "--threshold adaptive/interleaved/turns are for the key-value protocol; give RESP a number of bytes"
                            .into(),
                    )
                    .into())
                }
                None => cornflakes::field::machine_threshold().for_datapath("tcp"),
            },
            controlled_by_parent: self.exit_with_parent,
            kv_addr: self.kv_addr.clone(),
            zero_copy_min: self.zero_copy_min,
            max_clients: self.maxclients as usize,
            maxmemory: self.maxmemory,
            maxmemory_policy: self.maxmemory_policy,
            requirepass: self.requirepass.clone(),
            dir: self.dir.clone(),
            dbfilename: self.dbfilename.clone(),
            save: self.save.clone(),
        })
    }

    pub(crate) fn options(&self) -> kv::ServerOptions {
        kv::ServerOptions {
            system: self.system.0,
            workload: self.workload.clone(),
            transport: self.transport,
            addr: self.addr.clone(),
            core: self.core,
            udp_socket_buffer: self.udp_socket_buffer,
            threshold: self.threshold.clone(),
            controlled_by_parent: self.exit_with_parent,
            timeline: self.timeline.clone(),
            in_place: self.in_place,
        }
    }
}

/// Options of `cf loadgen`.
#[derive(clap::Args, Debug)]
pub(crate) struct LoadgenArgs {
    /// Serializer the server runs (the client speaks the same).
    #[arg(long, value_enum, default_value = "cornflakes")]
    system: SystemArg,
    /// Workload, as given to the server.
    #[arg(long, value_parser = parse_workload, default_value = "ycsb")]
    workload: WorkloadSpec,
    /// Datapath.
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// Server's Unix socket path (shm) or IP:port (udp, tcp; IPv6 as [::1]:port).
    #[arg(long, default_value = "/tmp/cf-kv.sock")]
    addr: String,
    /// Offered load, transactions per second; without it, sweep.
    #[arg(long, value_parser = positive)]
    rate: Option<f64>,
    /// Client threads (connections).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
    /// Recorded seconds per load point.
    #[arg(long, default_value_t = 2.0, value_parser = positive)]
    seconds: f64,
    /// Unrecorded seconds before each point.
    #[arg(long, default_value_t = 0.5, value_parser = non_negative)]
    warmup: f64,
    /// Request timeout, milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: u64,
    /// Core to pin the client threads to.
    #[arg(long)]
    core: Option<usize>,
    /// Seed of arrivals and key choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Read responses in place (shm only): the server's zero-copy values
    /// stay in its pool, leased until checked, instead of being copied into
    /// the load generator's, and echoed values may come back by reference
    /// to the load generator's own pool (for peers that trust each other;
    /// see `ShmConfig::receive_in_place` and `accept_returns`).
    #[arg(long)]
    in_place: bool,
    #[command(flatten)]
    sweep: SweepArgs,
}

impl LoadgenArgs {
    pub(crate) fn options(&self) -> Result<kv::LoadgenOptions, CliError> {
        let target = Target::new(self.transport, &self.addr)?;
        Ok(kv::LoadgenOptions {
            system: self.system.0,
            workload: self.workload.clone(),
            target,
            sweep: self.sweep.sweep_config(LoadConfig {
                rate: self.rate,
                threads: self.threads as usize,
                warmup: Duration::from_secs_f64(self.warmup),
                duration: Duration::from_secs_f64(self.seconds),
                timeout: Duration::from_millis(self.timeout_ms),
                max_outstanding: 16384,
                seed: self.seed,
                in_place: self.in_place,
            }),
            core: self.core,
        })
    }
}

/// Options of `cf calibrate`.
#[derive(clap::Args, Debug)]
pub(crate) struct CalibrateArgs {
    /// Datapath to calibrate.
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// Numbers of list elements (comma-separated); default 1,2,4,8,16,32.
    #[arg(long, value_delimiter = ',')]
    entries: Vec<u32>,
    /// Total response sizes in bytes (comma-separated); default 64..65536, powers of two.
    #[arg(long, value_delimiter = ',')]
    totals: Vec<u32>,
    /// Working sets in MiB (comma-separated); default 1 (in cache) and 512 (far beyond the LLC).
    #[arg(long, value_delimiter = ',')]
    working_sets_mib: Vec<u64>,
    /// A small grid (1, 4, 16 entries x 256 B, 1 KiB, 4 KiB, 16 KiB; both working sets) for a first look.
    #[arg(long)]
    quick: bool,
    /// Recorded seconds per load point of the --maxima sweeps; each cell's
    /// turns of zero-copy and copy take 4x this under closed-loop load.
    #[arg(long, default_value_t = 0.25, value_parser = positive)]
    seconds: f64,
    /// Core of the server.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core of the load generator.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Directory for summary.json and the heatmaps.
    #[arg(long, default_value = "cf-calibrate")]
    out: std::path::PathBuf,
    /// Calibration file to write (default: $CORNFLAKES_CALIBRATION, else
    /// $XDG_CONFIG_HOME/cornflakes/calibration or ~/.config/cornflakes/calibration).
    #[arg(long)]
    write_to: Option<std::path::PathBuf>,
    /// Measure and report only; write no calibration file.
    #[arg(long)]
    dry_run: bool,
    /// Also sweep every cell end to end (zero-copy, then copy, each to its
    /// highest load within the latency bound, as `cf compare` does) and
    /// decide the threshold from those maxima, as the paper does. Without
    /// it the threshold comes from the server's cost per request, both
    /// modes taking turns in one server: the measure that holds when the
    /// server is the bottleneck, and the only steady one when one client
    /// core saturates first (this 2-core VM). Takes about 4x longer.
    #[arg(long)]
    maxima: bool,
    /// Hugepages for the servers' pools, as `cf compare --hugepages`.
    #[arg(long, default_value = "auto")]
    hugepages: HugepagePolicy,
}

impl CalibrateArgs {
    /// Runs the study with its hugepages reserved (as `cf thresholds` and
    /// `cf compare` do).
    pub(crate) fn run(&self) -> Result<(), cornflakes_eval::Error> {
        let _hugepages = cornflakes_eval::hugepages::reserve(self.hugepages).map_err(cornflakes_eval::Error::Failed)?;
        calibrate::run(&self.config()).map(drop)
    }

    pub(crate) fn config(&self) -> calibrate::CalibrateConfig {
        use calibrate::CalibrateConfig as C;
        let or = |given: &Vec<u32>, quick: &[u32], full: &[u32]| {
            if !given.is_empty() {
                given.clone()
            } else if self.quick {
                quick.to_vec()
            } else {
                full.to_vec()
            }
        };
        C {
            transport: self.transport,
            entries: or(&self.entries, &[1, 4, 16], &C::ENTRIES),
            totals: or(&self.totals, &[256, 1024, 4096, 16384], &C::TOTALS),
            working_sets: if self.working_sets_mib.is_empty() {
                vec![C::IN_CACHE, C::BEYOND_LLC]
            } else {
                self.working_sets_mib.iter().map(|m| m << 20).collect()
            },
            seconds: self.seconds,
            server_core: self.server_core,
            client_core: self.client_core,
            out: self.out.clone(),
            write_to: self.write_to.clone(),
            dry_run: self.dry_run,
            maxima: self.maxima,
        }
    }
}

/// Options of `cf reproduce`.
#[derive(clap::Args, Debug)]
pub(crate) struct ReproduceArgs {
    /// Results to make (`all` for every one).
    #[arg(required = true, num_args = 1..)]
    figures: Vec<FigureArg>,
    /// Directory for the results.
    #[arg(long, default_value = "cf-reproduce")]
    out: PathBuf,
    /// Datapath (Figure 9 always runs over tcp).
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// Recorded seconds per load point.
    #[arg(long, default_value_t = 0.5, value_parser = positive)]
    seconds: f64,
    /// Interleaved repeats of each comparison (medians are reported).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Core of the servers.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core of the load generators.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
}

/// A figure name on the command line, or `all`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FigureArg(Option<reproduce::Figure>);

impl ValueEnum for FigureArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [FigureArg; 14] = {
            let mut v = [FigureArg(None); 14];
            let mut i = 0;
            while i < 13 {
                v[i + 1] = FigureArg(Some(reproduce::Figure::ALL[i]));
                i += 1;
            }
            v
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.map_or("all", |f| f.name())))
    }
}

impl ReproduceArgs {
    pub(crate) fn config(&self) -> reproduce::ReproduceConfig {
        let mut figures: Vec<reproduce::Figure> = Vec::new();
        for f in &self.figures {
            match f.0 {
                None => figures = reproduce::Figure::ALL.to_vec(),
                Some(fig) if !figures.contains(&fig) => figures.push(fig),
                Some(_) => {}
            }
        }
        reproduce::ReproduceConfig {
            figures,
            out: self.out.clone(),
            transport: self.transport,
            seconds: self.seconds,
            repeats: self.repeats as usize,
            server_core: self.server_core,
            client_core: self.client_core,
        }
    }
}

/// Options of `cf thresholds`.
#[derive(clap::Args, Debug)]
pub(crate) struct ThresholdsArgs {
    /// Workload (see `cf compare --help`).
    #[arg(long, value_parser = parse_workload, default_value = "google:max=16")]
    workload: WorkloadSpec,
    /// Datapath.
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// Interleaved repeats; medians are reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Recorded seconds per load point.
    #[arg(long, default_value_t = 0.5, value_parser = positive)]
    seconds: f64,
    /// Core of the server.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core of the load generator.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Instead of a sweep per threshold: one server in which every
    /// threshold and the adaptive controller take turns of 2048 requests
    /// under this many seconds of closed-loop load, each turn's busy time
    /// counted (an A/B test in one process: stalls and load fall on all
    /// alike). The turns also share the server core's caches: a mode that
    /// reads no values (0 B) measured 13-16 % slower next to a copying one
    /// than alone on Google 1-8; give one threshold per run (`--turns 0`)
    /// to measure a mode alone.
    #[arg(long, value_parser = positive)]
    interleaved: Option<f64>,
    /// With --interleaved: only these thresholds take turns (bytes or
    /// `never`, comma-separated), each compared with the first. E.g.
    /// `--turns 512,0,never` sets the hybrid at 512 B against sending every
    /// field zero-copy (only-sg) and copying every one (only-copy). A
    /// threshold followed by `-no-sas` takes its turns without
    /// serialize-and-send (as cornflakes-no-sas sends): `--turns
    /// 512,512-no-sas` measures what serialize-and-send saves the server.
    #[arg(long, value_delimiter = ',', value_parser = cornflakes_eval::report::parse_turn, requires = "interleaved")]
    turns: Vec<cornflakes_kv::server::TurnMode>,
    /// Hugepages for the servers' pools, as `cf compare --hugepages`.
    #[arg(long, default_value = "auto")]
    hugepages: HugepagePolicy,
}

impl ThresholdsArgs {
    pub(crate) fn run(&self) -> Result<(), cornflakes_eval::Error> {
        let _hugepages = cornflakes_eval::hugepages::reserve(self.hugepages).map_err(cornflakes_eval::Error::Failed)?;
        let bench = calibrate::Bench {
            transport: self.transport,
            seconds: self.seconds,
            server_core: self.server_core,
            client_core: self.client_core,
        };
        if let Some(seconds) = self.interleaved {
            return calibrate::interleaved_thresholds(&bench, &self.workload, seconds, &self.turns).map(|_| ());
        }
        calibrate::compare_thresholds(&bench, &self.workload, self.repeats as usize).map(|_| ())
    }
}

/// Options of `cf phases`.
#[derive(clap::Args, Debug)]
pub(crate) struct PhasesArgs {
    /// Serializers (default: the paper's three: cornflakes, protobuf,
    /// flatbuffers; on the server side the others have no steps marked
    /// and are refused).
    #[arg(long, value_enum, num_args = 1.., value_delimiter = ',')]
    systems: Vec<SystemArg>,
    /// Which process runs under callgrind: the server (the paper's
    /// Figure 11), or the load generator (its cost per request: arrivals,
    /// sending, checking every response, expiry) against a native server.
    #[arg(long, value_enum, default_value = "server")]
    side: cornflakes_eval::phases::Side,
    /// Workload (the paper's Figure 11 is the CDN trace).
    #[arg(long, value_parser = parse_workload, default_value = "cdn")]
    workload: WorkloadSpec,
    /// Offered transactions per second; callgrind runs the server 50-100x
    /// slower than natively, so keep it low.
    #[arg(long, value_parser = positive, default_value_t = 300.0)]
    rate: f64,
    /// Recorded seconds of load per system.
    #[arg(long, value_parser = positive, default_value_t = 4.0)]
    seconds: f64,
    /// Directory for the results.
    #[arg(long, default_value = "cf-phases")]
    out: PathBuf,
    /// Core of the server.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core of the load generator.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Trusted peers: the load generator reads responses in place (`cf
    /// loadgen --in-place`) and the server gathers requests into its shared
    /// pool (`cf kv-server --in-place`).
    #[arg(long)]
    in_place: bool,
}

impl PhasesArgs {
    pub(crate) fn run(&self) -> Result<(), cornflakes_eval::Error> {
        let systems: Vec<System> = if self.systems.is_empty() {
            cornflakes_eval::phases::PAPER_SYSTEMS.to_vec()
        } else {
            self.systems.iter().map(|s| s.0).collect()
        };
        let (_, table) = cornflakes_eval::phases::run(&cornflakes_eval::phases::PhasesConfig {
            systems,
            side: self.side,
            workload: self.workload.clone(),
            rate: self.rate,
            seconds: self.seconds,
            out: self.out.clone(),
            server_core: self.server_core,
            client_core: self.client_core,
            in_place: self.in_place,
        })?;
        print!("{table}");
        eprintln!("wrote {}", self.out.display());
        Ok(())
    }
}

/// Options of `cf hiccup`.
#[derive(clap::Args, Debug)]
pub(crate) struct HiccupArgs {
    /// Seconds to watch.
    #[arg(long, default_value_t = 5.0, value_parser = positive)]
    seconds: f64,
    /// Cores to watch (default: every core).
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    cores: Vec<usize>,
    /// Then watch the cross-core copy bandwidth for this many seconds: the
    /// first core writes 16 MiB, the second copies it in 8000 B pieces (as
    /// a load generator gathers responses), about twice a second; prints
    /// each measurement and each minute's median. On the 2-core VMs it
    /// has phases of minutes that move the maxima of `cf compare`.
    #[arg(long, value_parser = positive, value_name = "SECONDS")]
    copy_watch: Option<f64>,
}

impl HiccupArgs {
    pub(crate) fn run(&self) -> Result<(), cornflakes_eval::Error> {
        let cores: Vec<usize> = if self.cores.is_empty() {
            (0..cornflakes_eval::pin::available_cores()).collect()
        } else {
            self.cores.clone()
        };
        let found = cornflakes_eval::hiccup::measure(&cores, std::time::Duration::from_secs_f64(self.seconds))?;
        for h in &found {
            println!("{h}");
        }
        // The cost of moving a cache line between the first two cores: it
        // has phases on this VM (see `sweep::MachineGate`).
        if let [a, b, ..] = cores[..] {
            match cornflakes_eval::hiccup::core_round_trip_ns(a, b, 2000) {
                Ok(ns) => println!("cache-line round trip between cores {a} and {b}: {ns:.0} ns"),
                Err(e) => println!("cache-line round trip between cores {a} and {b}: not measured ({e})"),
            }
            let mut buf = vec![0u8; cornflakes_eval::hiccup::COPY_PROBE_BYTES];
            match cornflakes_eval::hiccup::copy_bandwidth_gbps(a, b, &mut buf, 1) {
                Ok(gbps) => println!("copy bandwidth from core {a}'s writes to core {b}: {gbps:.1} GB/s"),
                Err(e) => println!("copy bandwidth from core {a}'s writes to core {b}: not measured ({e})"),
            }
            if let Some(seconds) = self.copy_watch {
                watch_copy_bandwidth(a, b, &mut buf, seconds)?;
            }
        }
        println!("{}", cornflakes_eval::hiccup::json_line(&found));
        Ok(())
    }
}

/// `cf hiccup --copy-watch`: the copy bandwidth from `a`'s writes to `b`
/// about twice a second for `seconds`, each minute's median at its end.
fn watch_copy_bandwidth(a: usize, b: usize, buf: &mut [u8], seconds: f64) -> Result<(), cornflakes_eval::Error> {
    use cornflakes_eval::report::CopyBandwidth;
    let start = std::time::Instant::now();
    let (mut minute, mut this_minute, mut all) = (0u64, Vec::new(), Vec::new());
    let say_minute = |minute: u64, found: &[f64]| {
        if let Some(c) = CopyBandwidth::of(found) {
            println!(
                "minute {}: median {:.1} GB/s, middle half {:.1}-{:.1} ({} measurements)",
                minute + 1,
                c.median,
                c.p25,
                c.p75,
                c.samples
            );
        }
    };
    for pass in 2.. {
        let t = start.elapsed();
        if t.as_secs_f64() >= seconds {
            break;
        }
        if t.as_secs() / 60 != minute {
            say_minute(minute, &this_minute);
            this_minute.clear();
            minute = t.as_secs() / 60;
        }
        let gbps = cornflakes_eval::hiccup::copy_bandwidth_gbps(a, b, buf, pass)?;
        println!("{:7.1} s: copy bandwidth {gbps:.1} GB/s", t.as_secs_f64());
        this_minute.push(gbps);
        all.push(gbps);
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    say_minute(minute, &this_minute);
    if let Some(c) = CopyBandwidth::of(&all) {
        println!(
            "copy bandwidth over {:.0} s: median {:.1} GB/s, middle half {:.1}-{:.1}, from {:.1} to {:.1}",
            start.elapsed().as_secs_f64(),
            c.median,
            c.p25,
            c.p75,
            all.iter().copied().fold(f64::INFINITY, f64::min),
            all.iter().copied().fold(0.0, f64::max)
        );
    }
    Ok(())
}

/// Options of `cf stall`.
#[derive(clap::Args, Debug)]
pub(crate) struct StallArgs {
    /// Serializer.
    #[arg(long, value_enum, default_value = "cornflakes")]
    system: SystemArg,
    /// Workload.
    #[arg(long, value_parser = parse_workload, default_value = "google:max=4")]
    workload: WorkloadSpec,
    /// Datapath.
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// Offered load of the measured client, transactions per second.
    #[arg(long, value_parser = positive, default_value_t = 200_000.0)]
    rate: f64,
    /// Recorded seconds per point.
    #[arg(long, default_value_t = 2.0, value_parser = positive)]
    seconds: f64,
    /// Unrecorded seconds before each point.
    #[arg(long, default_value_t = 0.5, value_parser = non_negative)]
    warmup: f64,
    /// Clients that send and never read.
    #[arg(long, default_value_t = 1)]
    stalled: usize,
    /// Gets each stalled client sends.
    #[arg(long, default_value_t = 30_000)]
    stall_requests: usize,
    /// Pairs of points (alone, with stalled clients).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Core to pin the server to.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core to pin the clients to.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
}

impl StallArgs {
    pub(crate) fn config(&self) -> stall::StallConfig {
        stall::StallConfig {
            system: self.system.0,
            workload: self.workload.clone(),
            transport: self.transport,
            point: LoadConfig {
                rate: Some(self.rate),
                threads: 1,
                warmup: Duration::from_secs_f64(self.warmup),
                duration: Duration::from_secs_f64(self.seconds),
                timeout: Duration::from_secs(1),
                max_outstanding: 16384,
                seed: 1,
                in_place: false,
            },
            stalled: self.stalled,
            stall_requests: self.stall_requests,
            repeats: self.repeats as usize,
            server_core: self.server_core,
            client_core: self.client_core,
        }
    }
}

/// Options of `cf tails`.
#[derive(clap::Args, Debug)]
pub(crate) struct TailsArgs {
    /// Serializer.
    #[arg(long, value_enum, default_value = "cornflakes")]
    system: SystemArg,
    /// Workload.
    #[arg(long, value_parser = parse_workload, default_value = "ycsb")]
    workload: WorkloadSpec,
    /// Datapath (the server's sleeps are on the timeline on shm only).
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// Offered loads as fractions of the closed-loop probe (the issue's
    /// targets are at 10 % and 50 % of the maximum).
    #[arg(long, value_delimiter = ',', default_value = "0.1,0.5")]
    fractions: Vec<f64>,
    /// Offered loads, transactions per second, instead of fractions (no probe).
    #[arg(long, value_delimiter = ',', value_parser = positive)]
    rates: Vec<f64>,
    /// Recorded seconds per point.
    #[arg(long, default_value_t = 3.0, value_parser = positive)]
    seconds: f64,
    /// Unrecorded seconds before each point.
    #[arg(long, default_value_t = 0.5, value_parser = non_negative)]
    warmup: f64,
    /// Each load this many times.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Seconds each core spins alone first, measuring the machine's own
    /// gaps (0: skip).
    #[arg(long, default_value_t = 2.0, value_parser = non_negative)]
    machine_seconds: f64,
    /// Core to pin the server to.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core to pin the load generator to.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Folder for summary.json and the points' timelines.
    #[arg(long, default_value = "results/tails")]
    out: PathBuf,
}

impl TailsArgs {
    pub(crate) fn config(&self) -> cornflakes_eval::tails::TailsConfig {
        cornflakes_eval::tails::TailsConfig {
            system: self.system.0,
            workload: self.workload.clone(),
            transport: self.transport,
            point: LoadConfig {
                rate: None,
                threads: 1,
                warmup: Duration::from_secs_f64(self.warmup),
                duration: Duration::from_secs_f64(self.seconds),
                timeout: Duration::from_secs(1),
                max_outstanding: 16384,
                seed: 1,
                in_place: false,
            },
            fractions: self.fractions.clone(),
            rates: self.rates.clone(),
            repeats: self.repeats as usize,
            machine_seconds: self.machine_seconds,
            server_core: self.server_core,
            client_core: self.client_core,
            out: self.out.clone(),
        }
    }
}

/// Options of `cf overload`.
#[derive(clap::Args, Debug)]
pub(crate) struct OverloadArgs {
    /// Datapath.
    #[arg(long, value_enum, default_value = "udp")]
    transport: Transport,
    /// Serializer.
    #[arg(long, value_enum, default_value = "cornflakes")]
    system: SystemArg,
    /// Workload (see `cf compare --help`).
    #[arg(long, value_parser = parse_workload, default_value = "google:max=4")]
    workload: WorkloadSpec,
    /// Seconds of overload.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..))]
    seconds: u32,
    /// Overload as a multiple of the capacity.
    #[arg(long, default_value_t = 2.0, value_parser = positive)]
    factor: f64,
    /// Capacity in requests per second; without it, measured first.
    #[arg(long, value_parser = positive)]
    capacity: Option<f64>,
    /// Normal load before and after the overload, as a fraction of the
    /// capacity.
    #[arg(long, default_value_t = 0.5, value_parser = positive)]
    normal: f64,
    /// Seconds of normal load before the overload (its median window p99
    /// is the reference of the recovery).
    #[arg(long, default_value_t = 3.0, value_parser = positive)]
    before: f64,
    /// Seconds of normal load after the overload.
    #[arg(long, default_value_t = 5.0, value_parser = positive)]
    after: f64,
    /// Length of a normal-load window, milliseconds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(10..))]
    window_ms: u64,
    /// A request without a correct response after this long is a timeout
    /// (below 1000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..1000))]
    timeout_ms: u64,
    /// Client threads per load point (all on the client core).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
    /// Core of the server.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core of the load generator.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// UDP: the server's socket buffer, bytes (see `cf kv-server --help`).
    #[arg(long, default_value_t = 1 << 20)]
    udp_socket_buffer: usize,
}

impl OverloadArgs {
    pub(crate) fn config(&self) -> overload::OverloadConfig {
        overload::OverloadConfig {
            transport: self.transport,
            system: self.system.0,
            workload: self.workload.clone(),
            seconds: self.seconds,
            factor: self.factor,
            capacity: self.capacity,
            normal_fraction: self.normal,
            before: Duration::from_secs_f64(self.before),
            after: Duration::from_secs_f64(self.after),
            window: Duration::from_millis(self.window_ms),
            timeout: Duration::from_millis(self.timeout_ms),
            threads: self.threads as usize,
            server_core: self.server_core,
            client_core: self.client_core,
            udp_socket_buffer: self.udp_socket_buffer,
        }
    }
}

/// Options of `cf offload`.
#[derive(clap::Args, Debug)]
pub(crate) struct OffloadArgs {
    /// Bytes of each of the message's two fields.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..=262_144))]
    size: u32,
    /// Registered fields of at least this many bytes are sent zero-copy.
    #[arg(long, default_value_t = 512)]
    threshold: usize,
    /// Round trips measured one at a time, per system (latency).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    iters: u64,
    /// Unrecorded round trips first.
    #[arg(long, default_value_t = 2_000)]
    warmup: u64,
    /// Messages outstanding in the throughput run.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    window: u32,
    /// Seconds of each throughput run.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Rounds of all three systems, interleaved; figures are medians.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Core of the application thread.
    #[arg(long, default_value_t = 0)]
    app_core: usize,
    /// Core of the engine thread and the echo peer.
    #[arg(long, default_value_t = 1)]
    engine_core: usize,
    /// Round trips per callgrind run (0: skip the instruction counts).
    #[arg(long, default_value_t = 2_000)]
    count_messages: u64,
    /// Internal: run one system for callgrind, print nothing, exit.
    #[arg(long, value_enum, hide = true)]
    count_only: Option<cornflakes_eval::offload::System>,
}

impl OffloadArgs {
    pub(crate) fn config(&self) -> cornflakes_eval::offload::Config {
        cornflakes_eval::offload::Config {
            size: self.size as usize,
            threshold: self.threshold,
            iters: self.iters,
            warmup: self.warmup,
            window: self.window as usize,
            seconds: self.seconds,
            rounds: self.rounds,
            app_core: self.app_core,
            engine_core: self.engine_core,
            count_messages: self.count_messages,
            count_only: self.count_only,
        }
    }
}

/// Options of the hidden `cf serve`.
#[derive(clap::Args, Debug)]
pub(crate) struct ServeArgs {
    #[arg(long, value_enum)]
    pub(crate) transport: Link,
    #[arg(long, value_enum)]
    pub(crate) role: Role,
    /// Unix socket path (shm) or pid:fd:fd (bare); unused for udp; IP:port to listen on for tcp
    /// (default 127.0.0.1 with a port the kernel picks).
    #[arg(long, default_value = "")]
    pub(crate) addr: String,
    #[arg(long)]
    pub(crate) core: Option<usize>,
}

/// Options of `cf ipc-pingpong`.
#[derive(clap::Args, Debug)]
pub(crate) struct IpcPingpongArgs {
    /// Message size in bytes.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    size: u32,
    /// Measured round trips.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    iters: u64,
    /// Unrecorded round trips first.
    #[arg(long, default_value_t = 10_000)]
    warmup: u64,
    /// Core of the client (this process).
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Core of the server process.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
}

impl IpcPingpongArgs {
    pub(crate) fn config(&self) -> ipc::Config {
        ipc::Config {
            size: self.size as usize,
            iters: self.iters,
            warmup: self.warmup,
            client_core: self.client_core,
            server_core: self.server_core,
        }
    }
}

/// Options of `cf ipc-compare`.
#[derive(clap::Args, Debug)]
pub(crate) struct IpcCompareArgs {
    /// Message sizes in bytes, comma-separated (default: 8 B, 2 KiB, 64 KiB, and 1 MiB less
    /// 24 B, the largest message of the shm datapath).
    #[arg(long, value_delimiter = ',', default_values_t = ipc::DEFAULT_SIZES.map(|s| s as u32),
          value_parser = clap::value_parser!(u32).range(1..))]
    sizes: Vec<u32>,
    /// Measured round trips per run, for sizes below 64 KiB.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    iters: u64,
    /// Measured round trips per run, for sizes of 64 KiB and more.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    large_iters: u64,
    /// Unrecorded round trips first, per run (a tenth of this from 64 KiB on).
    #[arg(long, default_value_t = 10_000)]
    warmup: u64,
    /// Runs of each system at each size (medians are reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Core of the clients.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Core of the servers.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
}

impl IpcCompareArgs {
    pub(crate) fn config(&self) -> ipc::CompareConfig {
        ipc::CompareConfig {
            sizes: self.sizes.iter().map(|&s| s as usize).collect(),
            iters: self.iters,
            large_iters: self.large_iters,
            warmup: self.warmup,
            repeats: self.repeats,
            client_core: self.client_core,
            server_core: self.server_core,
        }
    }
}

/// Options of the hidden `cf ipc-serve`.
#[derive(clap::Args, Debug)]
pub(crate) struct IpcServeArgs {
    /// The iceoryx2 service name to create.
    #[arg(long)]
    pub(crate) service: String,
    /// Largest message, bytes.
    #[arg(long)]
    pub(crate) max_size: usize,
    #[arg(long)]
    pub(crate) core: Option<usize>,
}
