//! The command line: clap definitions, and their conversion into the
//! settings of `cornflakes_eval`. Closed sets (transports, systems, echo
//! modes, server roles) are value enums, so clap refuses a value that does
//! not apply before anything runs, and lists the ones that do.

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
#[command(version, about, long_about = None)]
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
    /// For each workload (echo, ycsb, google, twitter, cdn), starts the
    /// key-value server with each system in turn on one core, sweeps the
    /// offered load with the open-loop load generator on the other core
    /// over the shared-memory datapath, prints the highest achieved load
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
    /// caches and one far beyond the last-level cache — runs the key-value
    /// server sending every element zero-copy (only-sg) and copying every
    /// element (only-copy), each swept as `cf compare` does, and reports
    /// the ratio of their highest loads kept up with. Prints a heatmap per
    /// working set and the per-element-size means; draws OUT/heatmap-*.png;
    /// writes the threshold it finds (the smallest element size from which
    /// zero-copy never loses) to the calibration file that `cf kv-server`
    /// and `cornflakes::Arena::calibrated` read. The full grid takes about
    /// 20 minutes; --quick runs a 3 x 4 grid in about 2.
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
    /// For each size, --repeats runs of `cf ipc-pingpong` (iceoryx2) and of
    /// `cf pingpong --transport shm`, alternating which goes first, each in
    /// its own process with the same cores. Prints a line per run, then a
    /// table of the median p50 and p99 round trips and shm / iceoryx2
    /// (below 1: shm is faster); the last line is the table as JSON.
    IpcCompare(IpcCompareArgs),
    /// The server half of `ipc-pingpong` (started by it).
    #[command(hide = true)]
    IpcServe(IpcServeArgs),
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
        }
    }
}

/// Command-line settings of a sweep's stopping rule.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct SweepArgs {
    /// The latency quantile a load point must keep within the SLO to count
    /// as kept up: p99 (the paper's SLO) or p50 (the median, less sensitive
    /// to the machine's rare stalls).
    #[arg(long, value_enum, default_value = "p99")]
    slo: SloQuantile,
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
    /// The sweep these settings describe, around `point`.
    fn sweep_config(&self, point: LoadConfig) -> SweepConfig {
        let default = match self.slo {
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
    /// Recorded seconds per load point.
    #[arg(long, default_value_t = 1.0, value_parser = positive)]
    seconds: f64,
    /// Unrecorded seconds before each point.
    #[arg(long, default_value_t = 0.3, value_parser = non_negative)]
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
    /// Sweeps per system; the table and ratios use the median maximum.
    /// Repeats are interleaved across systems.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
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
            }),
            server_core: self.server_core,
            client_core: self.client_core,
            transport: self.transport,
            repeats: self.repeats as usize,
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
    /// cornflakes-no-sas): bytes, `never`, or `adaptive` (measured and
    /// followed while serving). Default: this machine's calibration for the
    /// transport (`cf calibrate` writes it; see `CORNFLAKES_THRESHOLD`,
    /// `CORNFLAKES_CALIBRATION`), else the paper's 512.
    #[arg(long, value_parser = cornflakes_eval::report::parse_threshold)]
    threshold: Option<cornflakes_eval::report::ThresholdChoice>,
    /// Take commands on standard input (set by `cf compare`): a line asks
    /// for the counters, end of input stops the server.
    #[arg(long, hide = true)]
    exit_with_parent: bool,
}

impl ServerArgs {
    pub(crate) fn options(&self) -> kv::ServerOptions {
        kv::ServerOptions {
            system: self.system.0,
            workload: self.workload.clone(),
            transport: self.transport,
            addr: self.addr.clone(),
            core: self.core,
            udp_socket_buffer: self.udp_socket_buffer,
            threshold: self.threshold,
            controlled_by_parent: self.exit_with_parent,
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
    /// Recorded seconds per load point.
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
}

impl CalibrateArgs {
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
}

impl ThresholdsArgs {
    pub(crate) fn run(&self) -> Result<(), cornflakes_eval::Error> {
        let bench = calibrate::Bench {
            transport: self.transport,
            seconds: self.seconds,
            server_core: self.server_core,
            client_core: self.client_core,
        };
        calibrate::compare_thresholds(&bench, &self.workload, self.repeats as usize).map(|_| ())
    }
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
            },
            stalled: self.stalled,
            stall_requests: self.stall_requests,
            repeats: self.repeats as usize,
            server_core: self.server_core,
            client_core: self.client_core,
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
