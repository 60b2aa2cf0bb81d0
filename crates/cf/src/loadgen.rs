//! The open-loop load generator (paper §6.1.1).
//!
//! Each client thread owns one connection and issues transactions at
//! Poisson arrival times at its share of the offered rate, whether or not
//! earlier responses came back (open loop). Latency runs from a
//! transaction's *scheduled* arrival to its last response, so a client that
//! falls behind measures the queueing it causes instead of hiding it
//! (coordinated omission). Transactions whose arrival falls in the warm-up
//! are not recorded. Every response is checked against what its key holds
//! (length and fingerprint of every value); a request without a response
//! after the timeout is counted, never dropped from the statistics.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use cornflakes::RcBuf;
use cornflakes_datapath::{ConnId, Datapath, Received, SendError};
use cornflakes_kv::codec::cornflakes::{CornflakesClient, RawEchoClient};
use cornflakes_kv::codec::{capnp::CapnpClient, flatbuffers::FlatbuffersClient, prost::ProstClient};
use cornflakes_kv::{ClientCodec, Op, Request, ServerStats, Status, System};
use cornflakes_workloads::{check_value, fill_value, Generator, Transaction, Workload};
use hdrhistogram::Histogram;
use rand::{rngs::SmallRng, SeedableRng};
use rand_distr::{Distribution, Exp};

/// One load point's settings.
#[derive(Clone, Debug)]
pub(crate) struct LoadConfig {
    /// Offered transactions per second, all threads together; `None` runs
    /// closed loop (as fast as `max_outstanding` allows), to probe capacity.
    pub(crate) rate: Option<f64>,
    /// Client threads (connections).
    pub(crate) threads: usize,
    /// Unrecorded time first.
    pub(crate) warmup: Duration,
    /// Recorded time.
    pub(crate) duration: Duration,
    /// A request without a response after this long counts as timed out.
    pub(crate) timeout: Duration,
    /// Transactions in flight per thread at most; arrivals beyond it wait
    /// (and their wait counts in their latency).
    pub(crate) max_outstanding: usize,
    /// Seed of the arrival and key choices.
    pub(crate) seed: u64,
}

/// What one load point measured.
#[derive(Clone, Debug)]
pub(crate) struct PointResult {
    /// Offered transactions per second (`None`: closed loop).
    pub(crate) offered: Option<f64>,
    /// Transactions completed correctly per second of recorded time.
    pub(crate) achieved: f64,
    /// Latency quantiles of recorded transactions, microseconds.
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) p999_us: f64,
    /// Recorded transactions that arrived in the window.
    pub(crate) offered_count: u64,
    /// Recorded transactions completed correctly.
    pub(crate) completed: u64,
    /// Requests without a response in time (or never sent by the end).
    pub(crate) timeouts: u64,
    /// Responses that were wrong: bad status, wrong length or fingerprint,
    /// undecodable.
    pub(crate) errors: u64,
    /// What the server counted during the point (warm-up and drain
    /// included), when the sweep could ask it.
    pub(crate) server: Option<ServerStats>,
}

impl PointResult {
    /// Whether the system kept up with this point: it achieved at least
    /// 95 % of the offered load, no request timed out, and the median
    /// latency stayed within `p50_bound_us`. A queue that grows through a
    /// point, but drains before its end, leaves the throughput whole and
    /// shows in the median; a few milliseconds' stall of the machine (this
    /// 2-core VM has them at any load) shows in the p99 but not there.
    pub(crate) fn kept_up(&self, p50_bound_us: f64) -> bool {
        !self.fell_behind() && (self.offered.is_none() || self.p50_us <= p50_bound_us)
    }

    /// Whether the throughput fell behind the offered load: achieved below
    /// 95 % of it, or requests timed out.
    pub(crate) fn fell_behind(&self) -> bool {
        match self.offered {
            Some(rate) => self.achieved < 0.95 * rate || self.timeouts > 0,
            None => false,
        }
    }
}

/// How a client thread reaches the server.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// The shared-memory datapath, via its Unix socket.
    Shm(String),
    /// The UDP datapath, at this address.
    Udp(std::net::SocketAddr),
}

/// Runs one load point with `threads` client threads pinned to `core`.
pub(crate) fn run_point(
    target: &Target,
    system: System,
    workload: &dyn Workload,
    cfg: &LoadConfig,
    core: Option<usize>,
) -> Result<PointResult, String> {
    let threads = cfg.threads.max(1);
    let results: Vec<Result<ThreadResult, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    if let Some(core) = core {
                        crate::pin::pin_to_core(core)?;
                    }
                    let mut cfg = cfg.clone();
                    cfg.rate = cfg.rate.map(|r| r / threads as f64);
                    cfg.seed = cfg.seed.wrapping_add(t as u64 * 0x9E37_79B9);
                    thread_main(target, system, workload, &cfg)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a client thread panicked".into()))).collect()
    });
    let mut total = ThreadResult::new();
    for r in results {
        total.merge(&r?);
    }
    let secs = cfg.duration.as_secs_f64();
    let q = |p: f64| total.hist.value_at_quantile(p) as f64 / 1000.0;
    Ok(PointResult {
        offered: cfg.rate,
        achieved: total.completed as f64 / secs,
        p50_us: q(0.5),
        p99_us: q(0.99),
        p999_us: q(0.999),
        offered_count: total.offered,
        completed: total.completed,
        timeouts: total.timeouts,
        errors: total.errors,
        server: None,
    })
}

fn thread_main(
    target: &Target,
    system: System,
    workload: &dyn Workload,
    cfg: &LoadConfig,
) -> Result<ThreadResult, String> {
    match target {
        Target::Shm(path) => {
            let (mut dp, conn) = crate::transport::shm_client(path)?;
            with_codec(&mut dp, conn, system, workload, cfg)
        }
        Target::Udp(addr) => {
            let (mut dp, conn) = crate::transport::udp_client(&addr.to_string())?;
            with_codec(&mut dp, conn, system, workload, cfg)
        }
    }
}

fn with_codec<D: Datapath>(
    dp: &mut D,
    conn: ConnId,
    system: System,
    workload: &dyn Workload,
    cfg: &LoadConfig,
) -> Result<ThreadResult, String> {
    let pool = dp.pool().clone();
    match system {
        System::Cornflakes | System::CornflakesOnlySg | System::CornflakesOnlyCopy | System::CornflakesNoSas => {
            Client::new(dp, conn, CornflakesClient::new(&pool), workload, cfg)?.run()
        }
        System::Raw => Client::new(dp, conn, RawEchoClient::new(&pool), workload, cfg)?.run(),
        System::Protobuf => Client::new(dp, conn, ProstClient::new(&pool), workload, cfg)?.run(),
        System::Flatbuffers => Client::new(dp, conn, FlatbuffersClient::new(&pool), workload, cfg)?.run(),
        System::Capnp => Client::new(dp, conn, CapnpClient::new(&pool), workload, cfg)?.run(),
    }
}

/// Counters and latencies of one thread.
struct ThreadResult {
    hist: Histogram<u64>,
    offered: u64,
    completed: u64,
    timeouts: u64,
    errors: u64,
}

impl ThreadResult {
    fn new() -> Self {
        ThreadResult {
            hist: Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("histogram bounds"),
            offered: 0,
            completed: 0,
            timeouts: 0,
            errors: 0,
        }
    }

    fn merge(&mut self, other: &ThreadResult) {
        self.hist.add(&other.hist).expect("same histogram bounds");
        self.offered += other.offered;
        self.completed += other.completed;
        self.timeouts += other.timeouts;
        self.errors += other.errors;
    }
}

/// A request on the wire, waiting for its response.
#[derive(Clone, Copy)]
struct InFlight {
    msg_id: u32,
    txn: u32,
    op: Op,
    /// First key of the request; others are in `keys`.
    key: u32,
    index: u32,
    sent: Instant,
}

/// A transaction: its arrival time and the requests it still waits for.
struct Txn {
    arrival: Instant,
    left: u32,
    failed: bool,
    recorded: bool,
}

/// A value's elements; inline so that reusing a cached echo value does
/// not allocate per request.
type Values = smallvec::SmallVec<[RcBuf; 4]>;

/// Responses in flight at most per thread (a power of two); msg ids index
/// a ring of this size.
const SLOTS: usize = 1 << 16;

struct Client<'w, 'd, D: Datapath, C: ClientCodec> {
    dp: &'d mut D,
    conn: ConnId,
    codec: C,
    workload: &'w dyn Workload,
    cfg: LoadConfig,
    gen: Box<dyn Generator>,
    rng: SmallRng,
    gaps: Option<Exp<f64>>,
    /// Requests in flight, by `msg_id % SLOTS`.
    inflight: Vec<Option<InFlight>>,
    /// Keys of multi-key requests, by slot.
    multi_keys: Vec<Vec<u32>>,
    txns: Vec<Option<Txn>>,
    free_txns: Vec<u32>,
    /// Transactions that arrived but are not sent yet (back-pressure).
    backlog: VecDeque<(Instant, Transaction)>,
    next_id: u32,
    /// Message ids in the order sent, for expiring the oldest first.
    send_order: VecDeque<u32>,
    outstanding_txns: usize,
    key_scratch: Vec<u8>,
    /// Values for puts and echoes, in the pool (so zero-copy applies).
    value_cache: Vec<Option<Values>>,
    scratch_sizes: Vec<u32>,
    result: ThreadResult,
    record_from: Instant,
    record_until: Instant,
}

impl<'w, 'd, D: Datapath, C: ClientCodec> Client<'w, 'd, D, C> {
    fn new(
        dp: &'d mut D,
        conn: ConnId,
        codec: C,
        workload: &'w dyn Workload,
        cfg: &LoadConfig,
    ) -> Result<Self, String> {
        let gaps = match cfg.rate {
            Some(rate) if rate > 0.0 => Some(Exp::new(rate).map_err(|e| format!("bad rate {rate}: {e}"))?),
            Some(rate) => return Err(format!("bad rate {rate}")),
            None => None,
        };
        let now = Instant::now();
        let echo_keys = if workload.preload() { 0 } else { workload.num_keys() as usize };
        Ok(Client {
            dp,
            conn,
            codec,
            workload,
            cfg: cfg.clone(),
            gen: workload.generator(cfg.seed),
            rng: SmallRng::seed_from_u64(cfg.seed ^ 0x5EED),
            gaps,
            inflight: vec![None; SLOTS],
            multi_keys: vec![Vec::new(); SLOTS],
            txns: Vec::new(),
            free_txns: Vec::new(),
            backlog: VecDeque::new(),
            next_id: 0,
            send_order: VecDeque::new(),
            outstanding_txns: 0,
            key_scratch: Vec::with_capacity(128),
            value_cache: (0..echo_keys).map(|_| None).collect(),
            scratch_sizes: Vec::new(),
            result: ThreadResult::new(),
            record_from: now + cfg.warmup,
            record_until: now + cfg.warmup + cfg.duration,
        })
    }

    fn run(mut self) -> Result<ThreadResult, String> {
        let start = Instant::now();
        let mut next_arrival = start;
        let mut rx: Vec<Received> = Vec::with_capacity(64);
        let mut txn = Transaction::default();
        let mut last_sweep = start;
        loop {
            let now = Instant::now();
            // New arrivals, until the end of the recorded window.
            if now < self.record_until {
                match self.gaps {
                    Some(gaps) => {
                        while next_arrival <= now {
                            self.gen.next(&mut txn);
                            self.backlog.push_back((next_arrival, std::mem::take(&mut txn)));
                            next_arrival += Duration::from_secs_f64(gaps.sample(&mut self.rng));
                        }
                    }
                    None => {
                        while self.outstanding_txns + self.backlog.len() < self.cfg.max_outstanding {
                            self.gen.next(&mut txn);
                            self.backlog.push_back((now, std::mem::take(&mut txn)));
                        }
                    }
                }
            } else if self.outstanding_txns == 0 || now > self.record_until + self.cfg.timeout {
                break;
            }
            self.send_backlog()?;
            let got = self.dp.recv_batch(&mut rx, 64).map_err(|e| format!("receive failed: {e}"))?;
            if got > 0 {
                let now = Instant::now();
                for r in rx.drain(..) {
                    self.on_response(&r, now);
                }
                self.codec.end_batch();
            }
            let _ = self.dp.poll_completions();
            if now.duration_since(last_sweep) > Duration::from_millis(10) {
                self.expire(now);
                last_sweep = now;
            }
        }
        // Whatever is still waiting never got an answer in time.
        let now = Instant::now();
        self.expire(now + self.cfg.timeout + Duration::from_secs(1));
        while let Some((arrival, t)) = self.backlog.pop_front() {
            if self.in_window(arrival) {
                self.result.offered += 1;
                self.result.timeouts += t.requests.len() as u64;
            }
        }
        Ok(self.result)
    }

    fn in_window(&self, arrival: Instant) -> bool {
        arrival >= self.record_from && arrival < self.record_until
    }

    /// Sends backlogged transactions while the datapath and the in-flight
    /// limit allow; requests are flushed together.
    fn send_backlog(&mut self) -> Result<(), String> {
        let mut sent_any = false;
        while self.outstanding_txns < self.cfg.max_outstanding {
            let Some((arrival, t)) = self.backlog.front() else { break };
            let (arrival, n) = (*arrival, t.requests.len());
            // Every request of the transaction needs a free slot.
            let ids_free =
                (0..n as u32).all(|k| self.inflight[self.next_id.wrapping_add(k) as usize % SLOTS].is_none());
            if !ids_free {
                break;
            }
            let txn_id = match self.free_txns.pop() {
                Some(id) => id,
                None => {
                    self.txns.push(None);
                    (self.txns.len() - 1) as u32
                }
            };
            let recorded = self.in_window(arrival);
            self.txns[txn_id as usize] = Some(Txn { arrival, left: n as u32, failed: false, recorded });
            if recorded {
                self.result.offered += 1;
            }
            let (_, t) = self.backlog.pop_front().expect("checked above");
            self.outstanding_txns += 1;
            for req in &t.requests {
                self.send_one(txn_id, req)?;
                sent_any = true;
            }
        }
        if sent_any {
            self.dp.flush().map_err(|e| format!("flush failed: {e}"))?;
        }
        Ok(())
    }

    fn send_one(&mut self, txn: u32, req: &cornflakes_workloads::Request) -> Result<(), String> {
        let msg_id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let slot = msg_id as usize % SLOTS;
        let key = req.keys.first().copied().unwrap_or(0);
        let values = match req.op {
            Op::Put | Op::Echo | Op::Append => Some(self.values_of(key)?),
            Op::PutM => return Err("the load generator does not issue put-many".into()),
            _ => None,
        };
        // Key bytes for every key of the request, back to back.
        let mut key_bytes: smallvec::SmallVec<[u8; 256]> = smallvec::SmallVec::new();
        let mut key_ends: smallvec::SmallVec<[usize; 4]> = smallvec::SmallVec::new();
        for &k in &req.keys {
            self.key_scratch.clear();
            self.workload.key(k, &mut self.key_scratch);
            key_bytes.extend_from_slice(&self.key_scratch);
            key_ends.push(key_bytes.len());
        }
        let mut view = Request { op: req.op as u32, index: req.index, ..Request::default() };
        let mut begin = 0;
        for &end in &key_ends {
            view.keys.push(&key_bytes[begin..end]);
            begin = end;
        }
        if let Some(values) = &values {
            view.vals.extend(values.iter().map(|v| v.as_slice()));
        }
        loop {
            match self.codec.send_request(self.dp, self.conn, msg_id, &view) {
                Ok(()) => break,
                Err(SendError::Full) => {
                    // Make room: flush, take completions and responses.
                    self.dp.flush().map_err(|e| format!("flush failed: {e}"))?;
                    let _ = self.dp.poll_completions();
                    let mut rx = Vec::new();
                    if self.dp.recv_batch(&mut rx, 64).map_err(|e| format!("receive failed: {e}"))? > 0 {
                        let now = Instant::now();
                        for r in rx.drain(..) {
                            self.on_response(&r, now);
                        }
                        self.codec.end_batch();
                    }
                }
                Err(e) => return Err(format!("send failed: {e}")),
            }
        }
        if req.keys.len() > 1 {
            self.multi_keys[slot].clear();
            self.multi_keys[slot].extend_from_slice(&req.keys);
        }
        self.inflight[slot] = Some(InFlight { msg_id, txn, op: req.op, key, index: req.index, sent: Instant::now() });
        self.send_order.push_back(msg_id);
        Ok(())
    }

    /// The value key `key` holds, as pool buffers: cached for echo keys,
    /// made fresh for puts.
    fn values_of(&mut self, key: u32) -> Result<Values, String> {
        if let Some(Some(v)) = self.value_cache.get(key as usize) {
            return Ok(v.clone());
        }
        let mut sizes = std::mem::take(&mut self.scratch_sizes);
        self.workload.value_sizes(key, &mut sizes);
        let mut values = Values::with_capacity(sizes.len());
        for (elem, &size) in sizes.iter().enumerate() {
            let mut buf = self.dp.alloc(size as usize).map_err(|e| format!("no client buffer: {e}"))?;
            fill_value(key, elem as u32, &mut buf);
            values.push(buf.freeze());
        }
        self.scratch_sizes = sizes;
        if let Some(slot) = self.value_cache.get_mut(key as usize) {
            *slot = Some(values.clone());
        }
        Ok(values)
    }

    fn on_response(&mut self, r: &Received, now: Instant) {
        let slot = r.msg_id as usize % SLOTS;
        let Some(f) = self.inflight[slot].filter(|f| f.msg_id == r.msg_id) else {
            // A response after its request timed out: already counted.
            return;
        };
        self.inflight[slot] = None;
        let ok = self.check(r, &f, slot);
        self.finish(f.txn, ok, now);
    }

    /// Whether a response is what the key holds.
    fn check(&mut self, r: &Received, f: &InFlight, slot: usize) -> bool {
        let workload = self.workload;
        let mut sizes = std::mem::take(&mut self.scratch_sizes);
        let multi_keys = &self.multi_keys[slot];
        let mut ok = false;
        let decoded = self.codec.read_response(&r.payload, &mut |status, vals| {
            ok = status == Status::Ok
                && match f.op {
                    Op::Put | Op::PutM | Op::Append => vals.is_empty(),
                    Op::Get => {
                        workload.value_sizes(f.key, &mut sizes);
                        matches!((vals, sizes.as_slice()), ([v], [len]) if check_value(f.key, 0, *len, v))
                    }
                    Op::GetFromList => {
                        workload.value_sizes(f.key, &mut sizes);
                        match (vals, sizes.get(f.index as usize)) {
                            ([v], Some(&len)) => check_value(f.key, f.index, len, v),
                            _ => false,
                        }
                    }
                    Op::GetList | Op::Echo => {
                        workload.value_sizes(f.key, &mut sizes);
                        vals.len() == sizes.len()
                            && vals
                                .iter()
                                .zip(&sizes)
                                .enumerate()
                                .all(|(i, (v, &len))| check_value(f.key, i as u32, len, v))
                    }
                    Op::GetM => {
                        vals.len() == multi_keys.len()
                            && vals.iter().zip(multi_keys).all(|(v, &k)| {
                                workload.value_sizes(k, &mut sizes);
                                matches!(sizes.as_slice(), [len] if check_value(k, 0, *len, v))
                            })
                    }
                };
        });
        self.scratch_sizes = sizes;
        decoded.is_ok() && ok
    }

    fn finish(&mut self, txn: u32, ok: bool, now: Instant) {
        let Some(t) = self.txns[txn as usize].as_mut() else { return };
        t.left -= 1;
        if !ok {
            t.failed = true;
        }
        if t.left > 0 {
            return;
        }
        let t = self.txns[txn as usize].take().expect("present");
        self.free_txns.push(txn);
        self.outstanding_txns -= 1;
        if !t.recorded {
            return;
        }
        if t.failed {
            self.result.errors += 1;
        } else {
            self.result.completed += 1;
            let ns = now.saturating_duration_since(t.arrival).as_nanos() as u64;
            self.result.hist.saturating_record(ns.max(1));
        }
    }

    /// Counts requests older than the timeout and forgets them. Requests
    /// are sent in id order, so the oldest are at the front.
    fn expire(&mut self, now: Instant) {
        while let Some(&msg_id) = self.send_order.front() {
            let slot = msg_id as usize % SLOTS;
            let f = match self.inflight[slot] {
                Some(f) if f.msg_id == msg_id => f,
                // Answered already.
                _ => {
                    self.send_order.pop_front();
                    continue;
                }
            };
            if now.saturating_duration_since(f.sent) <= self.cfg.timeout {
                break;
            }
            self.send_order.pop_front();
            self.inflight[slot] = None;
            let Some(t) = self.txns[f.txn as usize].as_mut() else { continue };
            if t.recorded {
                self.result.timeouts += 1;
            }
            // The transaction fails, but counts once: as a timeout, not as
            // an error.
            t.recorded = false;
            self.finish(f.txn, false, now);
        }
    }
}

/// How a sweep chooses its load points.
#[derive(Clone, Debug)]
pub(crate) struct SweepConfig {
    /// Settings of each point (`rate` is set per point).
    pub(crate) point: LoadConfig,
    /// Offered loads as fractions of the probed capacity, in order.
    pub(crate) fractions: Vec<f64>,
    /// In-flight transactions per thread of the closed-loop probe.
    pub(crate) probe_outstanding: usize,
    /// The median-latency bound of a point that kept up.
    pub(crate) bound: LatencyBound,
    /// Points spent bisecting between the highest load kept up with and
    /// the lowest one not kept up with.
    pub(crate) refine: usize,
}

impl SweepConfig {
    /// Load points from 5 % to 130 % of the probed capacity. The probe
    /// runs closed loop with many requests in flight, so it batches better
    /// than Poisson arrivals can: open-loop knees were seen at 30-60 % of
    /// it, hence the dense low end.
    pub(crate) const DEFAULT_FRACTIONS: [f64; 11] = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.1, 1.3];

    /// The default sweep around `point`.
    pub(crate) fn new(point: LoadConfig) -> Self {
        SweepConfig {
            point,
            fractions: Self::DEFAULT_FRACTIONS.to_vec(),
            probe_outstanding: 32,
            bound: LatencyBound::default(),
            refine: 2,
        }
    }
}

/// The median latency a load point may have and still count as kept up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum LatencyBound {
    /// At most this many microseconds.
    Fixed(f64),
    /// At most `factor` times the median latency of the sweep's first
    /// (lowest) load point, and never less than `floor_us`: "no queue has
    /// built up yet", whatever the workload's unloaded latency is.
    RelativeToLowLoad { factor: f64, floor_us: f64 },
}

impl Default for LatencyBound {
    fn default() -> Self {
        LatencyBound::RelativeToLowLoad { factor: 20.0, floor_us: 200.0 }
    }
}

impl LatencyBound {
    /// The bound in microseconds, given the median latency at the lowest
    /// load.
    pub(crate) fn bound_us(self, low_load_p50_us: f64) -> f64 {
        match self {
            LatencyBound::Fixed(us) => us,
            LatencyBound::RelativeToLowLoad { factor, floor_us } => (factor * low_load_p50_us).max(floor_us),
        }
    }
}

/// Command-line settings of a sweep's stopping rule.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct SweepArgs {
    /// Median-latency bound (µs) of a load point that counts as kept up.
    /// Default: 20x the median latency of the sweep's lowest load point,
    /// at least 200 µs (see --p50-factor, --p50-floor-us).
    #[arg(long)]
    pub(crate) p50_bound_us: Option<f64>,
    /// Without --p50-bound-us: the bound as a multiple of the lowest load's
    /// median latency ...
    #[arg(long, default_value_t = 20.0)]
    pub(crate) p50_factor: f64,
    /// ... but never below this many µs.
    #[arg(long, default_value_t = 200.0)]
    pub(crate) p50_floor_us: f64,
    /// Extra points that bisect the step where the system fell behind.
    #[arg(long, default_value_t = 2)]
    pub(crate) refine: usize,
}

impl SweepArgs {
    /// The sweep these settings describe, around `point`.
    pub(crate) fn sweep_config(&self, point: LoadConfig) -> SweepConfig {
        let bound = match self.p50_bound_us {
            Some(us) => LatencyBound::Fixed(us),
            None => LatencyBound::RelativeToLowLoad { factor: self.p50_factor, floor_us: self.p50_floor_us },
        };
        SweepConfig { bound, refine: self.refine, ..SweepConfig::new(point) }
    }
}

/// Points past the listed fractions before a sweep gives up looking for
/// the load the system cannot keep up with.
const MAX_EXTRA_POINTS: usize = 6;

/// A sweep's outcome.
#[derive(Clone, Debug)]
pub(crate) struct SweepResult {
    /// The closed-loop probe.
    pub(crate) probe: PointResult,
    /// Open-loop points, in the order run.
    pub(crate) points: Vec<PointResult>,
    /// The median-latency bound (µs) the points were held to.
    pub(crate) p50_bound_us: f64,
}

impl SweepResult {
    /// The point with the highest achieved load among those the system
    /// kept up with, or among all points if it kept up with none: its p99
    /// is then the overloaded one.
    pub(crate) fn best(&self) -> Option<&PointResult> {
        let by_load = |a: &&PointResult, b: &&PointResult| a.achieved.total_cmp(&b.achieved);
        self.points
            .iter()
            .filter(|p| p.kept_up(self.p50_bound_us))
            .max_by(by_load)
            .or_else(|| self.points.iter().max_by(by_load))
    }

    /// The server's highest busy capacity (requests per second of busy
    /// time) over the points kept up with. Not the capacity at the best
    /// point: near the load generator's own limit the server also spins on
    /// back-pressure, which counts as busy.
    pub(crate) fn server_busy_capacity(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| p.kept_up(self.p50_bound_us))
            .filter_map(|p| p.server.and_then(|s| s.busy_capacity_rps()))
            .max_by(f64::total_cmp)
    }

    /// Errors over all points, the probe included.
    pub(crate) fn errors(&self) -> u64 {
        self.points.iter().chain([&self.probe]).map(|p| p.errors).sum()
    }

    /// Timeouts over all open-loop points.
    pub(crate) fn timeouts(&self) -> u64 {
        self.points.iter().map(|p| p.timeouts).sum()
    }
}

/// Raises the offered load until the system no longer keeps up (achieved
/// below 95 % of offered or timeouts; or median latency over the bound
/// twice): first a closed-loop probe estimates the capacity, then open-loop
/// points run at fractions of it, then a few points bisect between the last load kept up
/// with and the first one not. `progress` hears about each point;
/// `server_counters`, when it can ask the server, is called before and
/// after each open-loop point.
pub(crate) fn sweep(
    target: &Target,
    system: System,
    workload: &dyn Workload,
    cfg: &SweepConfig,
    core: Option<usize>,
    mut progress: impl FnMut(&str),
    mut server_counters: impl FnMut() -> Option<ServerStats>,
) -> Result<SweepResult, String> {
    progress("probing capacity (closed loop)");
    let probe_cfg = LoadConfig { rate: None, max_outstanding: cfg.probe_outstanding, ..cfg.point.clone() };
    let probe = run_point(target, system, workload, &probe_cfg, core)?;
    if probe.completed == 0 {
        return Err(format!(
            "{} answered no {} correctly in the probe ({} errors, {} timeouts)",
            system.name(),
            workload.unit(),
            probe.errors,
            probe.timeouts
        ));
    }
    let mut points: Vec<PointResult> = Vec::new();
    let mut bound_us = f64::INFINITY;
    let mut run = |rate: f64, what: String, progress: &mut dyn FnMut(&str)| -> Result<(bool, bool), String> {
        progress(&format!("point {}: offered {rate:.0}/s ({what})", points.len() + 1));
        let before = server_counters();
        let mut point =
            run_point(target, system, workload, &LoadConfig { rate: Some(rate), ..cfg.point.clone() }, core)?;
        point.server = before.zip(server_counters()).map(|(b, a)| a.since(&b));
        if points.is_empty() {
            bound_us = cfg.bound.bound_us(point.p50_us);
        }
        let kept = point.kept_up(bound_us);
        if !kept {
            progress(&format!(
                "  not kept up: achieved {:.0}/s, p50 {:.1} µs (bound {bound_us:.1}), p99 {:.1} µs, {} timeouts",
                point.achieved, point.p50_us, point.p99_us, point.timeouts
            ));
        }
        let fell_behind = point.fell_behind();
        points.push(point);
        Ok((kept, fell_behind))
    };
    // The given fractions, then 20 % more each time, until the system falls
    // behind in throughput or misses the latency bound twice in a row (an
    // open loop can go past the closed-loop probe; one miss may be a stall
    // of the machine).
    let mut fraction = cfg.fractions.iter().copied();
    let (mut last, mut kept_rate, mut failed_above, mut misses) = (0.0, None, None, 0);
    for _ in 0..cfg.fractions.len() + MAX_EXTRA_POINTS {
        let f = fraction.next().unwrap_or(last * 1.2);
        last = f;
        let rate = probe.achieved * f;
        let (kept, fell_behind) = run(rate, format!("{:.0} % of the probe", f * 100.0), &mut progress)?;
        if kept {
            (kept_rate, failed_above, misses) = (Some(rate), None, 0);
        } else {
            failed_above = failed_above.or(Some(rate));
            misses += 1;
        }
        if fell_behind || misses == 2 {
            break;
        }
    }
    // Bisect between the highest load kept up with and the next one tried
    // (from zero if none was kept up with).
    if let Some(mut hi) = failed_above {
        let mut lo = kept_rate.unwrap_or(0.0);
        for _ in 0..cfg.refine {
            let mid = (lo + hi) / 2.0;
            if run(mid, "refining".into(), &mut progress)?.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    Ok(SweepResult { probe, points, p50_bound_us: bound_us })
}

#[cfg(test)]
mod tests {
    use super::{LatencyBound, PointResult};

    fn point(offered: f64, achieved: f64, p50_us: f64, timeouts: u64) -> PointResult {
        PointResult {
            offered: Some(offered),
            achieved,
            p50_us,
            p99_us: p50_us * 10.0,
            p999_us: p50_us * 20.0,
            offered_count: offered as u64,
            completed: achieved as u64,
            timeouts,
            errors: 0,
            server: None,
        }
    }

    #[test]
    fn a_point_keeps_up_only_with_its_load_its_requests_and_its_tail() {
        assert!(point(1000.0, 960.0, 50.0, 0).kept_up(100.0));
        assert!(!point(1000.0, 940.0, 50.0, 0).kept_up(100.0), "below 95 % of offered");
        assert!(!point(1000.0, 1000.0, 50.0, 1).kept_up(100.0), "a timeout");
        assert!(!point(1000.0, 1000.0, 150.0, 0).kept_up(100.0), "median over the bound");
        assert!(!point(1000.0, 1000.0, 150.0, 0).fell_behind(), "slow responses alone are not falling behind");
        assert!(point(1000.0, 940.0, 50.0, 0).fell_behind() && point(1000.0, 1000.0, 50.0, 1).fell_behind());
    }

    #[test]
    fn the_latency_bound_follows_the_low_load_median_above_a_floor() {
        let bound = LatencyBound::RelativeToLowLoad { factor: 20.0, floor_us: 200.0 };
        assert_eq!(bound.bound_us(5.0), 200.0);
        assert_eq!(bound.bound_us(80.0), 1600.0);
        assert_eq!(LatencyBound::Fixed(70.0).bound_us(40.0), 70.0);
    }
}
