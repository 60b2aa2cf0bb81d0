//! `cf kv-server` and `cf loadgen`: the two halves of the key-value
//! experiments, to run by hand (on two hosts, or against other clients).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cornflakes::{AllocError, Message, Pool, RcBuf, RcBufMut};
use cornflakes_datapath::shm::ShmDatapath;
use cornflakes_datapath::udp::UdpDatapath;
use cornflakes_datapath::{ConnId, Datapath, DatapathStats, InPlace, Received, RecvError, Segment, SendError, Span};
use cornflakes_kv::{Limits, ServerStats, Store, System};
use cornflakes_workloads::{fill_value, Workload, WorkloadSpec};

use crate::loadgen;
use crate::report::{self, SystemReport};
use crate::report::{threshold_text, ThresholdChoice};
use crate::sweep::{self, SweepConfig};
use crate::transport::{Target, Transport};
use crate::Error;
use cornflakes::field::AdaptiveConfig;
use cornflakes_kv::server::ThresholdPolicy;

/// What `cf kv-server` runs.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Serializer.
    pub system: System,
    /// Workload whose keys are preloaded.
    pub workload: WorkloadSpec,
    /// Datapath.
    pub transport: Transport,
    /// Unix socket path (shm) or IP:port to bind (udp).
    pub addr: String,
    /// Core to pin the server to.
    pub core: Option<usize>,
    /// Bytes of socket receive (and send) buffer to ask for on UDP (the
    /// kernel doubles it and caps it at `net.core.rmem_max`): the server's
    /// queue of requests that wait for it. Under overload every request
    /// served has waited through a full queue, so it bounds the queueing
    /// delay: on loopback a small request takes about 830 bytes of it, so
    /// the default 1 MiB holds about 2500 requests, 25 ms at 100 k/s.
    pub udp_socket_buffer: usize,
    /// Zero-copy threshold of the hybrid systems; `None`: this machine's
    /// calibration for the transport ([`cornflakes::field::machine_threshold`]).
    pub threshold: Option<crate::report::ThresholdChoice>,
    /// Take commands from standard input (see [`crate::child`]): a line asks
    /// for the counters (one JSON line on standard output), end of input
    /// stops the server, which then prints its final counters.
    pub controlled_by_parent: bool,
    /// Record the serving loop's timeline (see
    /// [`cornflakes_datapath::timeline`]) and append it to this file (TSV)
    /// before each report to the parent (`cf tails`).
    pub timeline: Option<std::path::PathBuf>,
    /// shm: the clients are one application and trust each other
    /// (`ShmConfig::receive_into_shared_pool`): requests are gathered into
    /// the shared pool, so request values sent back (echo) go by
    /// descriptor instead of being copied into the reply.
    pub in_place: bool,
}

/// Fills `store` with every key of `workload`, printing progress.
///
/// # Errors
///
/// When the store runs out of pool memory.
pub fn preload(store: &mut Store, workload: &dyn Workload) -> Result<(), Error> {
    if !workload.preload() {
        return Ok(());
    }
    let start = Instant::now();
    let mut last = start;
    let (mut key, mut sizes) = (Vec::new(), Vec::new());
    let n = workload.num_keys();
    for i in 0..n {
        key.clear();
        workload.key(i, &mut key);
        workload.value_sizes(i, &mut sizes);
        store
            .insert_with(&key, &sizes, |elem, buf| fill_value(i, elem as u32, buf))
            .map_err(|e| format!("cannot preload key {i}: {e} (try a smaller workload, e.g. keys=...)"))?;
        if last.elapsed() > Duration::from_secs(2) {
            eprintln!("  preloading: {i}/{n} keys, {} MB", store.value_bytes() >> 20);
            last = Instant::now();
        }
    }
    eprintln!(
        "preloaded {} keys, {} MB of values in {:.1} s",
        store.len(),
        store.value_bytes() >> 20,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Free hugepage memory, bytes (0 when the machine has none reserved).
fn free_hugepage_bytes() -> u64 {
    let Ok(meminfo) = std::fs::read_to_string("/proc/meminfo") else { return 0 };
    meminfo_field(&meminfo, "HugePages_Free:") * meminfo_field(&meminfo, "Hugepagesize:") * 1024
}

/// The number after `name` (e.g. `"MemAvailable:"`) in the text of
/// `/proc/meminfo`; 0 when absent.
pub(crate) fn meminfo_field(meminfo: &str, name: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The server's pool: hugepages only when enough are free for the values
/// (a pool's memory is one file, so it cannot switch to small pages once
/// the hugepages run out).
fn pool_config_for(value_bytes: u64) -> cornflakes::PoolConfig {
    let mut config = cornflakes::PoolConfig::default();
    // Slots are powers of two, and requests and responses need room too.
    let needed = value_bytes * 2 + (256 << 20);
    let free = free_hugepage_bytes();
    if free < needed {
        if free > 0 {
            eprintln!("kv-server: {} MB of free hugepages < {} MB needed; using 4 KiB pages", free >> 20, needed >> 20);
        }
        config.hugepages = cornflakes::mem::HugePages::Never;
    }
    config
}

/// Raised when `cf compare` closes the server's stdin.
static STOP: AtomicBool = AtomicBool::new(false);
/// Raised when `cf compare` asks for the counters.
static REPORT: AtomicBool = AtomicBool::new(false);
/// Ends the serving loop's sleep when [`STOP`] or [`REPORT`] is raised (set
/// once the datapath exists). Without it a sleeping server answered after
/// its 100 ms wait and one more pass: `cf compare` asks before and after
/// every load point, and the waits were about a quarter of a default run.
static WAKER: std::sync::OnceLock<cornflakes_datapath::Waker> = std::sync::OnceLock::new();

/// What the control thread calls after raising a flag.
fn wake_server() {
    if let Some(w) = WAKER.get() {
        // A failed wake-up costs only the wait's timeout.
        let _ = w.wake();
    }
}

/// Keeps the serving datapath's waker for [`wake_server`].
fn set_waker(waker: std::io::Result<cornflakes_datapath::Waker>) -> Result<(), Error> {
    let waker = waker.map_err(|e| format!("cannot make the datapath's waker: {e}"))?;
    let _ = WAKER.set(waker);
    Ok(())
}

/// Runs the key-value server until it is stopped (see
/// [`ServerOptions::controlled_by_parent`]) or killed.
///
/// # Errors
///
/// [`Error::Invalid`] for a bad address; [`Error::Failed`] when the
/// datapath, the preload or the serving loop fails.
pub fn run_server(args: &ServerOptions) -> Result<(), Error> {
    if args.controlled_by_parent {
        crate::child::control_from_parent(&STOP, &REPORT, wake_server);
    }
    if let Some(core) = args.core {
        crate::pin::pin_to_core(core)?;
    }
    if args.timeline.is_some() {
        cornflakes_datapath::timeline::enable(TIMELINE_CAPACITY);
    }
    let workload = args.workload.build().map_err(|e| Error::Invalid(e.to_string()))?;
    if args.in_place && args.transport != Transport::Shm {
        return Err(Error::Invalid("--in-place is for --transport shm only".into()));
    }
    if !args.system.runs_on_datapath() {
        return run_tokio_server(args, workload.as_ref());
    }
    match args.transport {
        Transport::Shm => {
            let _ = std::fs::remove_file(&args.addr);
            let config = cornflakes_datapath::shm::ShmConfig {
                pool: pool_config_for(cornflakes_workloads::total_value_bytes(workload.as_ref())),
                receive_into_shared_pool: args.in_place,
                // Requests are received in place too: an echo is answered
                // from the client's own pool (by reference, to a client
                // that accepts returns); other requests are gathered into
                // the shared pool as above.
                receive_in_place: args.in_place.then(crate::transport::lease_limits),
                ..crate::transport::shm_config()
            };
            let mut dp = cornflakes_datapath::shm::ShmDatapath::listen(&args.addr, config)
                .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
            set_waker(dp.waker())?;
            serve(&mut dp, args, workload.as_ref(), &args.addr, shm_counters)
        }
        Transport::Udp => {
            let addr = crate::transport::parse_udp_addr(&args.addr)?;
            // Like shm: hugepages only when enough are free for the values
            // (with 128 MiB of hugepages reserved, google:max=4 used to fail
            // its preload over UDP).
            let config = cornflakes_datapath::udp::UdpConfig {
                pool_config: pool_config_for(cornflakes_workloads::total_value_bytes(workload.as_ref())),
                socket_buffer: args.udp_socket_buffer,
                ..cornflakes_datapath::udp::UdpConfig::loopback()
            };
            let mut dp = cornflakes_datapath::udp::UdpDatapath::bind(addr, config)
                .map_err(|e| format!("cannot bind UDP on {addr}: {e}"))?;
            let local = dp.local_addr().to_string();
            set_waker(dp.waker())?;
            serve(&mut dp, args, workload.as_ref(), &local, udp_counters)
        }
        Transport::Tcp => {
            let addr = crate::transport::parse_tcp_addr(&args.addr)?;
            let pool = pool_config_for(cornflakes_workloads::total_value_bytes(workload.as_ref()));
            let mut dp = crate::transport::tcp_server(addr, pool)?;
            let local = dp.local_addrs()[0].to_string();
            set_waker(dp.waker())?;
            serve(&mut dp, args, workload.as_ref(), &local, tcp_counters)
        }
    }
}

/// `cf kv-server --system tokio-prost`: the baseline's own tokio server
/// (crate `cornflakes-kv-tokio`), with the same preload, `READY` line and
/// parent control as the datapath servers.
fn run_tokio_server(args: &ServerOptions, workload: &dyn Workload) -> Result<(), Error> {
    if args.transport != Transport::Tcp {
        return Err(Error::Invalid(format!(
            "{} is a TCP server (tokio); use --transport tcp, not {}",
            args.system.name(),
            args.transport.name()
        )));
    }
    let addr = crate::transport::parse_tcp_addr(&args.addr)?;
    let listener = cornflakes_kv_tokio::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| format!("cannot read the bound address: {e}"))?;
    let mut store = cornflakes_kv_tokio::ValueStore::new(Limits::default());
    if workload.preload() {
        let start = Instant::now();
        let (mut key, mut sizes) = (Vec::new(), Vec::new());
        for i in 0..workload.num_keys() {
            key.clear();
            workload.key(i, &mut key);
            workload.value_sizes(i, &mut sizes);
            store.insert_with(&key, &sizes, |elem, buf| fill_value(i, elem as u32, buf));
        }
        eprintln!(
            "preloaded {} keys, {} MB of values in {:.1} s",
            store.len(),
            store.value_bytes() >> 20,
            start.elapsed().as_secs_f64()
        );
    }
    eprintln!("kv-server: {} at {local}, workload {}", args.system.name(), workload.name());
    println!("READY {local}");
    let stats = cornflakes_kv_tokio::serve(listener, store, |stats| {
        if REPORT.swap(false, Ordering::Relaxed) {
            use std::io::Write;
            let report = ServerReport { stats: *stats, ..ServerReport::default() };
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", report.to_json_line()).and_then(|()| out.flush());
        }
        !STOP.load(Ordering::Relaxed)
    })
    .map_err(|e| format!("tokio-prost server failed: {e}"))?;
    eprintln!("kv-server: stopped after {} requests ({} malformed)", stats.handled, stats.malformed);
    println!("{}", stats.to_json_line());
    Ok(())
}

/// Requests per turn of `--threshold interleaved` and `turns:`: long
/// enough that a turn is many batches, short enough that a second of load
/// gives every turn dozens of them. The first eighth of each turn is not
/// counted (the previous turn's caches).
pub const INTERLEAVE_SLICE: u64 = 2048;

fn serve<D: Datapath>(
    dp: &mut D,
    args: &ServerOptions,
    workload: &dyn Workload,
    addr: &str,
    extra: fn(&D) -> Vec<(&'static str, u64)>,
) -> Result<(), Error> {
    let mut store = Store::new(dp.pool().clone(), Limits::default());
    preload(&mut store, workload)?;
    let calibrated = cornflakes::field::machine_threshold();
    let (policy, in_use) = match &args.threshold {
        Some(ThresholdChoice::Adaptive) => {
            (ThresholdPolicy::Adaptive(AdaptiveConfig::default()), "adaptive (--threshold)".to_owned())
        }
        Some(ThresholdChoice::Interleaved) => (
            ThresholdPolicy::every_candidate_and_adaptive(INTERLEAVE_SLICE),
            format!("every candidate and adaptive in turns of {INTERLEAVE_SLICE} requests (--threshold)"),
        ),
        Some(ThresholdChoice::Turns(thresholds)) => {
            let names: Vec<String> = thresholds.iter().map(|&t| crate::report::turn_text(t)).collect();
            let in_use = format!("{} in turns of {INTERLEAVE_SLICE} requests (--threshold)", names.join(", "));
            (ThresholdPolicy::in_turns(INTERLEAVE_SLICE, thresholds.clone(), None), in_use)
        }
        &Some(ThresholdChoice::Fixed(t)) => {
            (ThresholdPolicy::Fixed(t), format!("{} (from --threshold)", threshold_text(t)))
        }
        None => {
            let t = calibrated.for_datapath(args.transport.name());
            (ThresholdPolicy::Fixed(t), format!("{} (from {})", threshold_text(t), calibrated.source))
        }
    };
    eprintln!(
        "kv-server: {} on {} at {addr}, workload {}, zero-copy threshold {in_use}",
        args.system.name(),
        args.transport.name(),
        workload.name(),
    );
    println!("READY {addr}");
    let mut last = Instant::now();
    let mut reported = (0, 0);
    let mut armed = false;
    let (pool, scratch) = (dp.pool().clone(), dp.scratch_pool().clone());
    let snapshot = Rc::new(Cell::new(DatapathStats::default()));
    let extra_snapshot = Rc::new(RefCell::new(Vec::new()));
    let mut dp = Observed { inner: dp, stats: snapshot.clone(), extra, extra_out: extra_snapshot.clone() };
    let (stats, outcome) =
        cornflakes_kv::server::serve_with_policy(&mut dp, &mut store, args.system, policy, |stats| {
            let problems = (stats.malformed, stats.dropped_full + stats.send_failed);
            if problems != reported && last.elapsed() > Duration::from_secs(10) {
                eprintln!(
                    "kv-server: {} handled, {} malformed dropped, {} responses dropped",
                    stats.handled, problems.0, problems.1
                );
                (last, reported) = (Instant::now(), problems);
            }
            // A load first: this runs once per loop pass, and a swap is a
            // locked instruction.
            // Asked for a report: first let one receive pass copy the
            // datapath's counters out (see `Observed`), then answer.
            if REPORT.load(Ordering::Relaxed) && !std::mem::replace(&mut armed, true) {
                return !STOP.load(Ordering::Relaxed);
            }
            if armed && REPORT.swap(false, Ordering::Relaxed) {
                armed = false;
                if let Some(path) = &args.timeline {
                    if let Err(e) = append_timeline(path) {
                        eprintln!("kv-server: cannot write the timeline to {}: {e}", path.display());
                    }
                }
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let report = ServerReport::new(*stats, &pool, &scratch, snapshot.get(), &extra_snapshot.borrow());
                let _ = writeln!(out, "{}", report.to_json_line()).and_then(|()| out.flush());
            }
            !STOP.load(Ordering::Relaxed)
        })
        .map_err(|e| format!("server failed: {e}"))?;
    eprintln!("kv-server: stopped after {} requests", stats.handled);
    if !outcome.turns.is_empty() {
        // For `cf thresholds --interleaved`, which reads it after the stop.
        let line = serde_json::json!({ "turns": outcome.turns });
        println!("{line}");
    }
    if let Some(a) = outcome.adaptive {
        let costs: Vec<String> = a.costs().map(|(t, ns)| format!("{}: {ns:.0} ns", threshold_text(t))).collect();
        eprintln!(
            "kv-server: adaptive threshold held {} at the end, after {} changes of choice; last cost per request by threshold: {}",
            a.choice().map_or("nothing yet (first survey)".into(), threshold_text),
            a.changes(),
            costs.join(", ")
        );
    }
    // For `cf compare`, which collects it into summary.json.
    println!("{}", stats.to_json_line());
    Ok(())
}

/// Spans a server keeps between two reports at most (a 2 s point at
/// hundreds of gaps per second needs a few thousand).
const TIMELINE_CAPACITY: usize = 1 << 20;

/// Appends the spans recorded since the last call to `path`.
fn append_timeline(path: &std::path::Path) -> std::io::Result<()> {
    let spans = cornflakes_datapath::timeline::take();
    let mut file = std::io::BufWriter::new(std::fs::OpenOptions::new().create(true).append(true).open(path)?);
    cornflakes_datapath::timeline::write_tsv(&spans, &mut file)?;
    std::io::Write::flush(&mut file)
}

/// What a `cf kv-server` run by a parent answers when asked for its
/// counters (one JSON line): the serving loop's [`ServerStats`] (at the top
/// level, so [`ServerStats::from_json_line`] reads the same line), the
/// pools' mapped memory and the datapath's counters, for watching memory
/// and drops during an overload (`cf overload`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerReport {
    /// The serving loop's counters.
    #[serde(flatten)]
    pub stats: ServerStats,
    /// Bytes mapped by the datapath's pool (values, and on UDP receive and
    /// send buffers). A pool never unmaps, so this only grows.
    pub pool_bytes: u64,
    /// Slots allocated in that pool now.
    pub pool_live_slots: u64,
    /// Bytes mapped by the scratch pool (on shm: private receive and
    /// per-message buffers; on UDP the same pool as `pool_bytes`).
    pub scratch_bytes: u64,
    /// Messages the datapath received.
    pub received: u64,
    /// Messages it sent.
    pub sent: u64,
    /// Received packets dropped as malformed.
    pub dropped_malformed: u64,
    /// Received packets dropped for lack of buffers (UDP: the kernel's
    /// count of datagrams that did not fit the socket buffer).
    pub dropped_no_buffer: u64,
    /// The transport's own counters (`UdpStats`, `ShmStats`), by name.
    pub transport: BTreeMap<String, u64>,
}

impl ServerReport {
    fn new(
        stats: ServerStats,
        pool: &Pool,
        scratch: &Pool,
        dp: DatapathStats,
        extra: &[(&'static str, u64)],
    ) -> ServerReport {
        let (p, s) = (pool.stats(), scratch.stats());
        ServerReport {
            stats,
            pool_bytes: p.mapped_bytes as u64,
            pool_live_slots: p.live_slots as u64,
            scratch_bytes: s.mapped_bytes as u64,
            received: dp.received,
            sent: dp.sent,
            dropped_malformed: dp.dropped_malformed,
            dropped_no_buffer: dp.dropped_no_buffer,
            transport: extra.iter().map(|&(k, v)| (k.to_owned(), v)).collect(),
        }
    }

    /// The report as one line of JSON.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("integer fields always serialize")
    }

    /// Parses a line [`to_json_line`](Self::to_json_line) wrote; `None`
    /// for any other line.
    pub fn from_json_line(line: &str) -> Option<Self> {
        serde_json::from_str(line.trim()).ok()
    }
}

fn udp_counters(dp: &UdpDatapath) -> Vec<(&'static str, u64)> {
    let u = dp.udp_stats();
    vec![
        ("recv_held_back", u.recv_held_back),
        ("recv_errors", u.recv_errors),
        ("send_errors", u.send_errors),
        ("fixed_buffer_updates", u.fixed_buffer_updates),
        ("submits", u.submits),
        ("dropped_unknown_peer", u.dropped_unknown_peer),
        ("in_flight", dp.in_flight() as u64),
    ]
}

fn shm_counters(dp: &ShmDatapath) -> Vec<(&'static str, u64)> {
    let s = dp.shm_stats();
    vec![
        ("accepted", s.accepted),
        ("peers_closed", s.peers_closed),
        ("handshake_failures", s.handshake_failures),
        ("sleeps", s.sleeps),
        ("wakeups_sent", s.wakeups_sent),
        ("parked", s.parked),
        ("backlogged", s.backlogged),
        ("parked_lost", s.parked_lost),
        ("leased", s.leased),
        ("lease_refused", s.lease_refused),
        ("leases_expired", s.leases_expired),
        ("returns_sent", s.returns_sent),
        ("parked_returns_lost", s.parked_returns_lost),
    ]
}

fn tcp_counters(dp: &cornflakes_datapath::tcp::TcpDatapath) -> Vec<(&'static str, u64)> {
    let t = dp.tcp_stats();
    vec![
        ("accepted", t.accepted),
        ("peer_closed", t.peer_closed),
        ("errors", t.errors),
        ("bad_frames", t.bad_frames),
        ("truncated_frames", t.truncated_frames),
        ("partial_sends", t.partial_sends),
        ("backlogged", t.backlogged),
    ]
}

/// The server's datapath, with its counters copied out after each receive
/// so that the serving loop's callback, which cannot reach the datapath,
/// can report them. Every other call is passed through.
struct Observed<'d, D: Datapath> {
    inner: &'d mut D,
    stats: Rc<Cell<DatapathStats>>,
    extra: fn(&D) -> Vec<(&'static str, u64)>,
    extra_out: Rc<RefCell<Vec<(&'static str, u64)>>>,
}

impl<D: Datapath> Observed<'_, D> {
    /// Copies the counters out (cheap: a few words; the transport's own
    /// only when a report was asked for).
    #[inline]
    fn snapshot(&self) {
        self.stats.set(self.inner.stats());
        if REPORT.load(Ordering::Relaxed) {
            *self.extra_out.borrow_mut() = (self.extra)(self.inner);
        }
    }
}

impl<D: Datapath> Datapath for Observed<'_, D> {
    fn pool(&self) -> &Pool {
        self.inner.pool()
    }
    fn scratch_pool(&self) -> &Pool {
        self.inner.scratch_pool()
    }
    fn alloc(&self, len: usize) -> Result<RcBufMut, AllocError> {
        self.inner.alloc(len)
    }
    fn recover(&self, data: &[u8]) -> Option<RcBuf> {
        self.inner.recover(data)
    }
    fn recv_batch(&mut self, out: &mut Vec<Received>, max: usize) -> Result<usize, RecvError> {
        let n = self.inner.recv_batch(out, max);
        self.snapshot();
        n
    }
    fn recv_batch_in_place(&mut self, out: &mut Vec<InPlace>, max: usize) -> Result<usize, RecvError> {
        let n = self.inner.recv_batch_in_place(out, max);
        self.snapshot();
        n
    }
    fn receives_in_place(&self) -> bool {
        self.inner.receives_in_place()
    }
    fn wait(&mut self, timeout: Duration) -> Result<bool, RecvError> {
        if REPORT.load(Ordering::Relaxed) {
            // A report is armed (see `serve`): answer in the next pass.
            return Ok(false);
        }
        self.inner.wait(timeout)
    }
    fn push_message<'a, M: Message<'a>>(&mut self, conn: ConnId, msg_id: u32, msg: &M) -> Result<(), SendError> {
        self.inner.push_message(conn, msg_id, msg)
    }
    fn push_segments(&mut self, conn: ConnId, msg_id: u32, segments: &[Segment<'_>]) -> Result<(), SendError> {
        self.inner.push_segments(conn, msg_id, segments)
    }
    fn push_buf(&mut self, conn: ConnId, msg_id: u32, data: &[u8]) -> Result<(), SendError> {
        self.inner.push_buf(conn, msg_id, data)
    }
    fn push_spans(&mut self, conn: ConnId, msg_id: u32, spans: &[Span<'_>]) -> Result<(), SendError> {
        self.inner.push_spans(conn, msg_id, spans)
    }
    fn flush(&mut self) -> Result<(), SendError> {
        self.inner.flush()
    }
    fn poll_completions(&mut self) -> Result<usize, SendError> {
        self.inner.poll_completions()
    }
    fn stats(&self) -> DatapathStats {
        self.inner.stats()
    }
}

/// What `cf loadgen` runs.
#[derive(Clone, Debug)]
pub struct LoadgenOptions {
    /// Serializer the server runs (the client speaks the same).
    pub system: System,
    /// Workload, as given to the server.
    pub workload: WorkloadSpec,
    /// The server.
    pub target: Target,
    /// One point at `sweep.point.rate`, or (`None`) a sweep.
    pub sweep: SweepConfig,
    /// Core to pin the client threads to.
    pub core: Option<usize>,
}

/// Runs one load point (or a sweep) against a running server; prints one
/// line per point on standard error and the [`SystemReport`] as the last
/// line of standard output.
///
/// # Errors
///
/// When the server cannot be reached or the run fails.
pub fn run_loadgen(args: &LoadgenOptions) -> Result<(), Error> {
    let workload = args.workload.build().map_err(|e| Error::Invalid(e.to_string()))?;
    let target = &args.target;
    let (points, best) = match args.sweep.point.rate {
        Some(_) => {
            let p = loadgen::run_point(target, args.system, workload.as_ref(), &args.sweep.point, args.core)?;
            (vec![p.clone()], p)
        }
        None => {
            let r = sweep::sweep(
                target,
                args.system,
                workload.as_ref(),
                &args.sweep,
                args.core,
                |m| eprintln!("  {m}"),
                || None,
            )?;
            let best = r.best().ok_or("no load point ran")?.clone();
            (r.points, best)
        }
    };
    for p in &points {
        eprintln!("{}", report::describe_point(p, workload.unit()));
    }
    let report = SystemReport::new(args.system.name(), &points, &best, None);
    println!("{}", serde_json::to_string(&report).expect("reports serialize"));
    Ok(())
}
