//! The open-loop load generator (paper §6.1.1).
//!
//! Each client thread owns one connection and issues transactions at
//! Poisson arrival times at its share of the offered rate, whether or not
//! earlier responses came back (open loop). Latency runs from a
//! transaction's *scheduled* arrival to its last response, so a client that
//! falls behind measures the queueing it causes instead of hiding it
//! (coordinated omission). Transactions whose arrival falls in the warm-up
//! are not recorded. Every response is checked against what its key holds
//! (every byte of every value, see [`check_value`]); a request without a response
//! after the timeout is counted, never dropped from the statistics.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use cornflakes::RcBuf;
use cornflakes_datapath::shm::PeerSlice;
use cornflakes_datapath::timeline::{self, Kind};
use cornflakes_datapath::{ConnId, Datapath, InPlace, Prepared, Received, SendError, Span};
use cornflakes_kv::codec::cornflakes::{CornflakesClient, RawEchoClient};
use cornflakes_kv::codec::{capnp::CapnpClient, flatbuffers::FlatbuffersClient, prost::ProstClient, rkyv::RkyvClient};
use cornflakes_kv::{ClientCodec, Op, Request, ServerStats, Status, System};
use cornflakes_workloads::{check_value, check_value_blocks, fill_value, Blocks, Generator, Transaction, Workload};
use hdrhistogram::Histogram;
use rand::{rngs::SmallRng, SeedableRng};
use rand_distr::{Distribution, Exp};

use crate::transport::Target;
use crate::Error;

/// One load point's settings.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Offered transactions per second, all threads together; `None` runs
    /// closed loop (as fast as `max_outstanding` allows), to probe capacity.
    pub rate: Option<f64>,
    /// Client threads (connections).
    pub threads: usize,
    /// Unrecorded time first.
    pub warmup: Duration,
    /// Recorded time.
    pub duration: Duration,
    /// A request without a response after this long counts as timed out.
    pub timeout: Duration,
    /// Transactions in flight per thread at most; arrivals beyond it wait
    /// (and their wait counts in their latency).
    pub max_outstanding: usize,
    /// Seed of the arrival and key choices.
    pub seed: u64,
    /// Read responses in place (shm only): the server's zero-copy values
    /// stay in its pool, leased until checked, instead of being copied
    /// into ours (`ShmConfig::receive_in_place`, for peers that trust
    /// each other).
    pub in_place: bool,
}

/// What one load point measured.
#[derive(Clone, Debug)]
pub struct PointResult {
    /// Offered transactions per second (`None`: closed loop).
    pub offered: Option<f64>,
    /// Transactions completed correctly per second of recorded time.
    pub achieved: f64,
    /// Latency quantiles of recorded transactions, microseconds.
    pub p50_us: f64,
    /// See `p50_us`.
    pub p99_us: f64,
    /// See `p50_us`.
    pub p999_us: f64,
    /// Recorded transactions that arrived in the window.
    pub offered_count: u64,
    /// Recorded transactions completed correctly.
    pub completed: u64,
    /// Requests without a response in time (or never sent by the end).
    pub timeouts: u64,
    /// Responses that were wrong: bad status, a value with any byte wrong,
    /// undecodable.
    pub errors: u64,
    /// What the server counted during the point (warm-up and drain
    /// included), when the sweep could ask it.
    pub server: Option<ServerStats>,
    /// How busy the load generator was (`None` where no load generator
    /// ran, as in tests that make points up).
    pub client: Option<ClientBusy>,
}

/// How busy the load generator was during a point. With the server's busy
/// time it says which side limited a maximum: the busier one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClientBusy {
    /// Nanoseconds of the passes of its loop that did work (queued an
    /// arrival, sent, or received a response); a pass that found nothing
    /// to do is idle. Waiting for room in a full ring counts as busy, as
    /// the server's back-pressure spins do.
    pub busy_ns: u64,
    /// Nanoseconds it ran, warm-up and drain included, summed over threads.
    pub wall_ns: u64,
    /// Responses it received in that time.
    pub responses: u64,
    /// Its threads.
    pub threads: u32,
}

impl ClientBusy {
    /// The share of its time the load generator was busy (0-1).
    pub fn fraction(&self) -> Option<f64> {
        (self.wall_ns > 0).then(|| (self.busy_ns as f64 / self.wall_ns as f64).min(1.0))
    }

    /// Responses per second of busy time, all threads together: how fast
    /// it could go if it were busy all the time.
    pub fn capacity_rps(&self) -> Option<f64> {
        (self.busy_ns > 0 && self.responses > 0)
            .then(|| self.responses as f64 * 1e9 / self.busy_ns as f64 * f64::from(self.threads.max(1)))
    }

    fn merge(&mut self, other: &ClientBusy) {
        self.busy_ns += other.busy_ns;
        self.wall_ns += other.wall_ns;
        self.responses += other.responses;
        self.threads += other.threads;
    }
}

impl PointResult {
    /// The share of the point's time the server was busy (0-1), against
    /// the load generator's running time (the server's counters also span
    /// its connecting, a few ms of a point's seconds).
    pub fn server_busy_fraction(&self) -> Option<f64> {
        let (server, client) = (self.server?, self.client?);
        let wall = client.wall_ns / u64::from(client.threads.max(1));
        (wall > 0).then(|| (server.busy_ns as f64 / wall as f64).min(1.0))
    }

    /// The share of the point's time the load generator was busy (0-1).
    pub fn client_busy_fraction(&self) -> Option<f64> {
        self.client?.fraction()
    }

    /// Whether the system kept up with this point: it completed at least
    /// 95 % of the transactions offered ([`fell_behind`](Self::fell_behind)), no request timed out, and the `quantile`
    /// of its latencies stayed within `bound_us` (the SLO). A queue that
    /// grows through a point but drains before its end leaves the
    /// throughput whole and shows in the latencies. With the median, a few
    /// milliseconds' stall of the machine (this 2-core VM has them at any
    /// load) does not count; with the p99 (the paper's SLO) it can.
    pub fn kept_up(&self, quantile: crate::sweep::Quantile, bound_us: f64) -> bool {
        !self.fell_behind() && (self.offered.is_none() || quantile.of(self) <= bound_us)
    }

    /// Whether the throughput fell behind the offered load: fewer than
    /// 95 % of the transactions that arrived in the window completed, or
    /// requests timed out.
    ///
    /// Counted against the arrivals the point actually drew, not the
    /// nominal rate: arrivals are Poisson, so at 80/s a 0.4 s point draws
    /// 32 +- 6 of them and a third of such points would fall 5 % short of
    /// the rate by chance alone (a sweep of a system slowed down by the
    /// machine used to halve its way down to nothing on that noise).
    pub fn fell_behind(&self) -> bool {
        match self.offered {
            Some(_) => (self.completed as f64) < 0.95 * self.offered_count as f64 || self.timeouts > 0,
            None => false,
        }
    }
}

/// Runs one load point with `threads` client threads pinned to `core`.
pub fn run_point(
    target: &Target,
    system: System,
    workload: &dyn Workload,
    cfg: &LoadConfig,
    core: Option<usize>,
) -> Result<PointResult, Error> {
    let threads = cfg.threads.max(1);
    let results: Vec<Result<ThreadResult, Error>> = std::thread::scope(|s| {
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
        client: Some(total.busy),
    })
}

fn thread_main(
    target: &Target,
    system: System,
    workload: &dyn Workload,
    cfg: &LoadConfig,
) -> Result<ThreadResult, Error> {
    match target {
        Target::Shm(path) => {
            let (mut dp, conn) = crate::transport::shm_client_with(path, cfg.in_place)?;
            with_codec(&mut dp, conn, system, workload, cfg)
        }
        _ if cfg.in_place => {
            Err(Error::Invalid("receiving in place is for the shared-memory transport only (--transport shm)".into()))
        }
        Target::Udp(addr) => {
            let (mut dp, conn) = crate::transport::udp_client(*addr)?;
            with_codec(&mut dp, conn, system, workload, cfg)
        }
        Target::Tcp(addr) => {
            let (mut dp, conn) = crate::transport::tcp_client(*addr)?;
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
) -> Result<ThreadResult, Error> {
    // Requests are built per message: in the scratch pool (private on
    // shm, copied into the ring), like any per-message buffer; see the
    // pool table in crates/cornflakes-datapath/README.md. The values the
    // requests carry are the application's, in the shared pool
    // (`values_of`): the Cornflakes codecs reference them there (sent by
    // descriptor), the others copy them into their encodings.
    let pool = dp.scratch_pool().clone();
    let shared = dp.pool().clone();
    match system {
        System::Cornflakes | System::CornflakesOnlySg | System::CornflakesOnlyCopy | System::CornflakesNoSas => {
            Client::new(dp, conn, CornflakesClient::new(&shared), workload, cfg)?.run()
        }
        System::Raw => Client::new(dp, conn, RawEchoClient::new(&shared), workload, cfg)?.run(),
        // tokio-prost speaks prost in the same frames: our prost client
        // drives it and checks its responses like any other system's.
        System::Protobuf | System::TokioProst => Client::new(dp, conn, ProstClient::new(&pool), workload, cfg)?.run(),
        System::Flatbuffers => Client::new(dp, conn, FlatbuffersClient::new(&pool), workload, cfg)?.run(),
        System::Capnp => Client::new(dp, conn, CapnpClient::new(&pool), workload, cfg)?.run(),
        System::Rkyv => Client::new(dp, conn, RkyvClient::new(&pool), workload, cfg)?.run(),
        System::CornflakesProtobuf => {
            Client::new(dp, conn, cornflakes_kv::codec::protowire::ProtowireClient::new(&pool), workload, cfg)?.run()
        }
    }
}

/// Counters and latencies of one thread.
struct ThreadResult {
    hist: Histogram<u64>,
    offered: u64,
    completed: u64,
    timeouts: u64,
    errors: u64,
    busy: ClientBusy,
}

impl ThreadResult {
    fn new() -> Self {
        ThreadResult {
            hist: Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("histogram bounds"),
            offered: 0,
            completed: 0,
            timeouts: 0,
            errors: 0,
            busy: ClientBusy::default(),
        }
    }

    fn merge(&mut self, other: &ThreadResult) {
        self.hist.add(&other.hist).expect("same histogram bounds");
        self.offered += other.offered;
        self.completed += other.completed;
        self.timeouts += other.timeouts;
        self.errors += other.errors;
        self.busy.merge(&other.busy);
    }
}

/// A recorded transaction slower than this goes on the timeline, when it
/// is enabled (the p99 target of issue 12 at low and moderate load).
pub const SLOW_NS: u64 = 50_000;

/// Transactions `Client::send_backlog` sends per pass at most.
const SEND_BUDGET: usize = 256;

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

/// A client's receive batch: whole messages, or messages received in place.
struct Inbox {
    whole: Vec<Received>,
    in_place: Vec<InPlace>,
}

impl Inbox {
    fn with_capacity(n: usize) -> Self {
        Inbox { whole: Vec::with_capacity(n), in_place: Vec::with_capacity(n) }
    }
}

/// A response to check: in our memory, or partly left in the server's.
#[derive(Clone, Copy)]
enum Response<'a> {
    Whole(&'a RcBuf),
    InPlace(&'a InPlace),
    /// Received in place, and neither readable there by this serializer
    /// nor copyable into our memory (no buffer, or the lease expired): an
    /// error.
    Unreadable,
}

/// A response received in place, copied whole into a buffer of our
/// scratch pool (for serializers that read whole messages only).
fn gather<D: Datapath>(dp: &D, msg: &InPlace) -> Option<RcBuf> {
    let mut buf = dp.alloc(msg.len()).ok()?;
    msg.copy_to_slice(&mut buf).ok()?;
    Some(buf.freeze())
}

/// A value as a codec hands it to the check: bytes, or a [`Span`] of a
/// response received in place.
trait ValueBytes {
    /// Whether it is element `elem` of key `key`'s value of `len` bytes,
    /// every byte compared.
    fn is_value(&self, key: u32, elem: u32, len: u32) -> bool;
}

impl ValueBytes for &[u8] {
    #[inline]
    fn is_value(&self, key: u32, elem: u32, len: u32) -> bool {
        check_value(key, elem, len, self)
    }
}

impl ValueBytes for Span<'_> {
    #[inline]
    fn is_value(&self, key: u32, elem: u32, len: u32) -> bool {
        match self {
            Span::Local(b) => check_value(key, elem, len, b),
            // Each 64-byte block goes from the sender's pool straight into
            // the comparison: the value is read once, not copied first. An
            // expired lease is a failed check.
            Span::Peer(s) => check_value_blocks(key, elem, len, &PeerBlocks(s)),
        }
    }
}

/// A value left in the server's pool, as the value check
/// ([`check_value_blocks`]) reads it.
pub struct PeerBlocks<'a>(pub &'a PeerSlice);

impl Blocks for PeerBlocks<'_> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.0.len()
    }

    #[inline(always)]
    fn block(&self, i: usize) -> Option<[u8; 64]> {
        self.0.block(i).ok()
    }
}

/// Whether the values of a response are what request `f` asks for.
fn values_match<V: ValueBytes>(
    workload: &dyn Workload,
    f: &InFlight,
    multi_keys: &[u32],
    sizes: &mut Vec<u32>,
    vals: &[V],
) -> bool {
    match f.op {
        Op::Put | Op::PutM | Op::Append => vals.is_empty(),
        Op::Get => {
            workload.value_sizes(f.key, sizes);
            matches!((vals, sizes.as_slice()), ([v], [len]) if v.is_value(f.key, 0, *len))
        }
        Op::GetFromList => match (vals, workload.value_size(f.key, f.index)) {
            ([v], Some(len)) => v.is_value(f.key, f.index, len),
            _ => false,
        },
        Op::GetList | Op::Echo => {
            workload.value_sizes(f.key, sizes);
            vals.len() == sizes.len()
                && vals.iter().zip(sizes.iter()).enumerate().all(|(i, (v, &len))| v.is_value(f.key, i as u32, len))
        }
        Op::GetM => {
            vals.len() == multi_keys.len()
                && vals.iter().zip(multi_keys).all(|(v, &k)| {
                    workload.value_sizes(k, sizes);
                    matches!(sizes.as_slice(), [len] if v.is_value(k, 0, *len))
                })
        }
    }
}

/// Responses in flight at most per thread (a power of two); msg ids index
/// a ring of this size. Small in tests, so that ids wrap within a short
/// point.
const SLOTS: usize = if cfg!(test) { 1 << 10 } else { 1 << 16 };

struct Client<'w, 'd, D: Datapath, C: ClientCodec> {
    dp: &'d mut D,
    conn: ConnId,
    codec: C,
    workload: &'w dyn Workload,
    cfg: LoadConfig,
    gen: Box<dyn Generator>,
    rng: SmallRng,
    /// Gaps between arrivals, in nanoseconds (`None`: closed loop).
    gaps: Option<Exp<f64>>,
    /// Requests in flight, by `msg_id % SLOTS`.
    inflight: Vec<Option<InFlight>>,
    /// Occupied entries of `inflight`.
    in_flight: usize,
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
    /// Echo requests by key, encoded once by the codec and re-sent under
    /// fresh ids: an echo point repeats a few distinct requests, and
    /// building each again made the load generator the busier side.
    prepared: Vec<Option<Prepared>>,
    scratch_sizes: Vec<u32>,
    result: ThreadResult,
    record_from: Instant,
    record_until: Instant,
    /// Whether the process's timeline records (`cf tails`): the loop's gaps
    /// and the slow requests go there.
    timeline: bool,
    /// Responses received, and those of them read in place (part of them
    /// left in the server's pool), with `LoadConfig::in_place`.
    responses: u64,
    read_in_place: u64,
    /// Responses received in place that this serializer cannot read there,
    /// copied whole into our memory first.
    copied_in: u64,
}

impl<'w, 'd, D: Datapath, C: ClientCodec> Client<'w, 'd, D, C> {
    fn new(dp: &'d mut D, conn: ConnId, codec: C, workload: &'w dyn Workload, cfg: &LoadConfig) -> Result<Self, Error> {
        let gaps = match cfg.rate {
            // Gaps in nanoseconds: `Duration::from_nanos` of a rounded
            // sample is a few instructions, `from_secs_f64` ~45 per arrival.
            Some(rate) if rate > 0.0 => Some(Exp::new(rate / 1e9).map_err(|e| format!("bad rate {rate}: {e}"))?),
            Some(rate) => {
                return Err(Error::Invalid(format!(
                    "bad rate {rate}: give a positive number of transactions per second"
                )))
            }
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
            in_flight: 0,
            multi_keys: vec![Vec::new(); SLOTS],
            txns: Vec::new(),
            free_txns: Vec::new(),
            backlog: VecDeque::new(),
            next_id: 0,
            send_order: VecDeque::new(),
            outstanding_txns: 0,
            key_scratch: Vec::with_capacity(128),
            value_cache: (0..echo_keys).map(|_| None).collect(),
            prepared: (0..echo_keys).map(|_| None).collect(),
            scratch_sizes: Vec::new(),
            result: ThreadResult::new(),
            record_from: now + cfg.warmup,
            record_until: now + cfg.warmup + cfg.duration,
            timeline: timeline::is_enabled(),
            responses: 0,
            read_in_place: 0,
            copied_in: 0,
        })
    }

    fn run(mut self) -> Result<ThreadResult, Error> {
        let start = Instant::now();
        let mut next_arrival = start;
        let mut rx = Inbox::with_capacity(64);
        let mut txn = Transaction::default();
        let mut last_sweep = start;
        let mut last_ns = 0;
        // The previous pass: when it began and whether it did work (its
        // time counts as busy, measured with this pass's clock read).
        let (mut pass_start, mut pass_busy) = (start, false);
        loop {
            let now = Instant::now();
            if self.timeline {
                timeline::note_clock_read(Kind::ClientGap, &mut last_ns, timeline::ns_of(now));
            }
            if pass_busy {
                self.result.busy.busy_ns += now.saturating_duration_since(pass_start).as_nanos() as u64;
            }
            pass_start = now;
            pass_busy = false;
            // New arrivals, until the end of the recorded window.
            if now < self.record_until {
                if self.gaps.is_none() || next_arrival <= now {
                    pass_busy |= self.arrive(now, &mut next_arrival, &mut txn);
                }
            } else if self.outstanding_txns == 0 || now > self.record_until + self.cfg.timeout {
                break;
            }
            if !self.backlog.is_empty() {
                pass_busy |= self.send_backlog()?;
            }
            pass_busy |= self.receive(&mut rx)?;
            let _ = self.dp.poll_completions();
            if now.duration_since(last_sweep) > Duration::from_millis(10) {
                self.expire(now);
                last_sweep = now;
            }
        }
        if self.cfg.in_place {
            // Says whether the option took effect (a server that sends no
            // pool segments leaves nothing in place).
            eprintln!(
                "  load generator: {} of {} responses read in place (part left in the server's pool){}",
                self.read_in_place,
                self.responses,
                if self.copied_in > 0 {
                    format!(", {} copied in first (this serializer reads whole messages only)", self.copied_in)
                } else {
                    String::new()
                }
            );
        }
        // Whatever is still waiting never got an answer in time.
        let now = Instant::now();
        self.result.busy.wall_ns = now.saturating_duration_since(start).as_nanos() as u64;
        self.result.busy.responses = self.responses;
        self.result.busy.threads = 1;
        self.expire(now + self.cfg.timeout + Duration::from_secs(1));
        while let Some((arrival, t)) = self.backlog.pop_front() {
            if self.in_window(arrival) {
                self.result.offered += 1;
                self.result.timeouts += t.requests.len() as u64;
            }
        }
        Ok(self.result)
    }

    /// Queues the transactions that arrived by `now` (open loop), or
    /// enough to keep `max_outstanding` in flight (closed loop).
    ///
    /// This and the other per-request steps of the client are never
    /// inlined, so that `callgrind --toggle-collect` can count them.
    /// Whether it queued any.
    #[inline(never)]
    fn arrive(&mut self, now: Instant, next_arrival: &mut Instant, txn: &mut Transaction) -> bool {
        let queued = self.backlog.len();
        match self.gaps {
            Some(gaps) => {
                while *next_arrival <= now {
                    self.gen.next(txn);
                    self.backlog.push_back((*next_arrival, std::mem::take(txn)));
                    *next_arrival += Duration::from_nanos((gaps.sample(&mut self.rng) + 0.5) as u64);
                }
            }
            None => {
                while self.outstanding_txns + self.backlog.len() < self.cfg.max_outstanding {
                    self.gen.next(txn);
                    self.backlog.push_back((now, std::mem::take(txn)));
                }
            }
        }
        self.backlog.len() > queued
    }

    fn in_window(&self, arrival: Instant) -> bool {
        arrival >= self.record_from && arrival < self.record_until
    }

    /// Sends backlogged transactions while the datapath and the in-flight
    /// limit allow; requests are flushed together. Whether it sent any.
    #[inline(never)]
    fn send_backlog(&mut self) -> Result<bool, Error> {
        let mut sent_any = false;
        // One clock read per pass: the send time only starts the timeout
        // (latency runs from the arrival), and a pass is a few µs long.
        let sent = Instant::now();
        // At most this many per pass, so that a large backlog (an overloaded
        // server) never keeps the loop from reading responses and watching
        // the clock for long.
        let mut budget = SEND_BUDGET;
        while self.outstanding_txns < self.cfg.max_outstanding && budget > 0 {
            budget -= 1;
            let Some((arrival, t)) = self.backlog.front() else { break };
            let (arrival, n) = (*arrival, t.requests.len());
            // Every request of the transaction needs a free slot.
            if self.in_flight + n > SLOTS {
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
                self.send_one(txn_id, req, sent)?;
                sent_any = true;
            }
        }
        if sent_any {
            self.dp.flush().map_err(|e| format!("flush failed: {e}"))?;
        }
        Ok(sent_any)
    }

    fn send_one(&mut self, txn: u32, req: &cornflakes_workloads::Request, sent: Instant) -> Result<(), Error> {
        let msg_id = self.free_id();
        let slot = msg_id as usize % SLOTS;
        let key = req.keys.first().copied().unwrap_or(0);
        // An echo of one key is the same request every time: encoded once.
        let reused =
            req.op == Op::Echo && req.keys.len() == 1 && req.index == 0 && (key as usize) < self.prepared.len();
        let mut prepared = if reused { self.prepared[key as usize].take() } else { None };
        let values = match req.op {
            _ if prepared.is_some() => None,
            Op::Put | Op::Echo | Op::Append => Some(self.values_of(key)?),
            Op::PutM => return Err("the load generator does not issue put-many".into()),
            _ => None,
        };
        // Key bytes for every key of the request, back to back.
        let mut key_bytes: smallvec::SmallVec<[u8; 256]> = smallvec::SmallVec::new();
        let mut key_ends: smallvec::SmallVec<[usize; 4]> = smallvec::SmallVec::new();
        if prepared.is_none() {
            for &k in &req.keys {
                self.key_scratch.clear();
                self.workload.key(k, &mut self.key_scratch);
                key_bytes.extend_from_slice(&self.key_scratch);
                key_ends.push(key_bytes.len());
            }
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
        if reused && prepared.is_none() {
            let p = self.codec.prepare_request(&*self.dp, &view).map_err(|e| format!("encoding failed: {e}"))?;
            prepared = Some(p);
        }
        loop {
            let pushed = match &prepared {
                Some(p) => p.push(self.dp, self.conn, msg_id),
                None => self.codec.send_request(self.dp, self.conn, msg_id, &view),
            };
            match pushed {
                Ok(()) => break,
                Err(SendError::Full | SendError::Backlogged(_))
                    if Instant::now() > self.record_until + self.cfg.timeout =>
                {
                    // The point is over: leave it unsent; it counts as timed
                    // out (a point never runs past its end waiting for room).
                    break;
                }
                Err(SendError::Full | SendError::Backlogged(_)) => {
                    // Make room: flush, take completions and responses.
                    self.dp.flush().map_err(|e| format!("flush failed: {e}"))?;
                    let _ = self.dp.poll_completions();
                    // Empty vectors: nothing is allocated unless a
                    // response arrives.
                    self.receive(&mut Inbox::with_capacity(0))?;
                }
                Err(e) => return Err(Error::Failed(format!("send failed: {e}"))),
            }
        }
        if reused {
            self.prepared[key as usize] = prepared;
        }
        if req.keys.len() > 1 {
            self.multi_keys[slot].clear();
            self.multi_keys[slot].extend_from_slice(&req.keys);
        }
        self.inflight[slot] = Some(InFlight { msg_id, txn, op: req.op, key, index: req.index, sent });
        self.in_flight += 1;
        self.send_order.push_back(msg_id);
        Ok(())
    }

    /// The next message id whose slot is free. Ids go up, skipping the
    /// slots still held: a request whose response the server dropped (its
    /// ring was full) holds its slot until it times out, and waiting for
    /// that slot stopped every send for up to the timeout, so that one
    /// lost response sank a whole load point. The caller has checked that
    /// a slot is free.
    fn free_id(&mut self) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1);
            if self.inflight[id as usize % SLOTS].is_none() {
                return id;
            }
        }
    }

    /// The value key `key` holds, as buffers of the shared pool (the
    /// application's values, which the server may read anyway): cached for
    /// echo keys, made fresh for puts.
    fn values_of(&mut self, key: u32) -> Result<Values, Error> {
        if let Some(Some(v)) = self.value_cache.get(key as usize) {
            return Ok(v.clone());
        }
        let mut sizes = std::mem::take(&mut self.scratch_sizes);
        self.workload.value_sizes(key, &mut sizes);
        let mut values = Values::with_capacity(sizes.len());
        for (elem, &size) in sizes.iter().enumerate() {
            let mut buf = self.dp.pool().alloc(size as usize).map_err(|e| format!("no client buffer: {e}"))?;
            fill_value(key, elem as u32, &mut buf);
            values.push(buf.freeze());
        }
        self.scratch_sizes = sizes;
        if let Some(slot) = self.value_cache.get_mut(key as usize) {
            *slot = Some(values.clone());
        }
        Ok(values)
    }

    /// Receives a batch (in place when configured) and checks every
    /// response in it; whether there were any. Never inlined, so that
    /// callgrind can count the client's whole cost per response (the
    /// receive's copy included).
    #[inline(never)]
    fn receive(&mut self, rx: &mut Inbox) -> Result<bool, Error> {
        let failed = |e| Error::Failed(format!("receive failed: {e}"));
        let got = if self.cfg.in_place {
            self.dp.recv_batch_in_place(&mut rx.in_place, 64).map_err(failed)?
        } else {
            self.dp.recv_batch(&mut rx.whole, 64).map_err(failed)?
        };
        if got > 0 {
            let now = Instant::now();
            for r in rx.whole.drain(..) {
                self.on_response(r.msg_id, Response::Whole(&r.payload), now);
            }
            self.responses += got as u64;
            for r in rx.in_place.drain(..) {
                if let Some(payload) = r.as_local() {
                    self.on_response(r.msg_id, Response::Whole(payload), now);
                } else if self.codec.reads_in_place() {
                    self.read_in_place += 1;
                    self.on_response(r.msg_id, Response::InPlace(&r), now);
                } else {
                    // This serializer reads whole messages only: copy it in.
                    self.copied_in += 1;
                    let whole = gather(&*self.dp, &r);
                    match whole {
                        Some(payload) => self.on_response(r.msg_id, Response::Whole(&payload), now),
                        None => self.on_response(r.msg_id, Response::Unreadable, now),
                    }
                }
            }
            self.codec.end_batch();
        }
        Ok(got > 0)
    }

    #[inline(never)]
    fn on_response(&mut self, msg_id: u32, r: Response<'_>, now: Instant) {
        let slot = msg_id as usize % SLOTS;
        let Some(f) = self.inflight[slot].filter(|f| f.msg_id == msg_id) else {
            // A response after its request timed out: already counted.
            return;
        };
        self.inflight[slot] = None;
        self.in_flight -= 1;
        let ok = self.check(r, &f, slot);
        self.finish(f.txn, ok, now);
    }

    /// Whether a response is what the key holds.
    fn check(&mut self, r: Response<'_>, f: &InFlight, slot: usize) -> bool {
        let workload = self.workload;
        let mut sizes = std::mem::take(&mut self.scratch_sizes);
        let multi_keys = &self.multi_keys[slot];
        let mut ok = false;
        let decoded = match r {
            Response::Whole(payload) => self.codec.read_response(payload, &mut |status, vals| {
                ok = status == Status::Ok && values_match(workload, f, multi_keys, &mut sizes, vals);
            }),
            Response::InPlace(msg) => self.codec.read_response_in_place(msg, &mut |status, vals| {
                ok = status == Status::Ok && values_match(workload, f, multi_keys, &mut sizes, vals);
            }),
            Response::Unreadable => Err(cornflakes_kv::codec::Malformed),
        };
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
            if self.timeline && ns > SLOW_NS {
                timeline::record(Kind::Slow, timeline::ns_of(t.arrival), timeline::ns_of(now));
            }
        }
    }

    /// Counts requests older than the timeout and forgets them. Requests
    /// are sent in id order, so the oldest are at the front.
    #[inline(never)]
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
            self.in_flight -= 1;
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

#[cfg(test)]
mod tests {
    use super::PointResult;

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
            client: None,
        }
    }

    #[test]
    fn busy_shares_are_of_the_load_generators_running_time() {
        use super::ClientBusy;
        let mut a = ClientBusy { busy_ns: 300, wall_ns: 1000, responses: 30, threads: 1 };
        assert_eq!(a.fraction(), Some(0.3));
        assert_eq!(a.capacity_rps(), Some(1e8));
        a.merge(&ClientBusy { busy_ns: 100, wall_ns: 1000, responses: 10, threads: 1 });
        // Two threads, each busy a fifth of the time on average, each
        // answering 0.1 responses per busy ns.
        assert_eq!((a.fraction(), a.capacity_rps()), (Some(0.2), Some(2e8)));
        let mut p = point(1000.0, 1000.0, 50.0, 0);
        assert_eq!(p.server_busy_fraction(), None, "no client measure");
        p.client = Some(a);
        assert_eq!(p.server_busy_fraction(), None, "no server counters");
        p.server = Some(cornflakes_kv::ServerStats { busy_ns: 250, ..Default::default() });
        // Against one thread's running time (1000 ns on average).
        assert_eq!(p.server_busy_fraction(), Some(0.25));
        assert!(!crate::report::limited_by_client(&p), "client 20 %, server 25 %");
        p.server = Some(cornflakes_kv::ServerStats { busy_ns: 150, ..Default::default() });
        assert!(crate::report::limited_by_client(&p), "client 20 %, server 15 %");
        assert_eq!(ClientBusy::default().fraction(), None);
    }

    #[test]
    fn a_point_keeps_up_only_with_its_load_its_requests_and_its_tail() {
        use crate::sweep::Quantile::{P50, P99};
        assert!(point(1000.0, 960.0, 50.0, 0).kept_up(P50, 100.0));
        assert!(!point(1000.0, 940.0, 50.0, 0).kept_up(P50, 100.0), "below 95 % of offered");
        assert!(!point(1000.0, 1000.0, 50.0, 1).kept_up(P50, 100.0), "a timeout");
        assert!(!point(1000.0, 1000.0, 150.0, 0).kept_up(P50, 100.0), "median over the bound");
        let tail = point(1000.0, 1000.0, 50.0, 0);
        assert!(!tail.kept_up(P99, tail.p99_us - 1.0) && tail.kept_up(P99, tail.p99_us), "the p99 SLO");
        assert!(!point(1000.0, 1000.0, 150.0, 0).fell_behind(), "slow responses alone are not falling behind");
        assert!(point(1000.0, 940.0, 50.0, 0).fell_behind() && point(1000.0, 1000.0, 50.0, 1).fell_behind());
    }

    #[test]
    fn falling_behind_is_against_the_arrivals_drawn_not_the_nominal_rate() {
        use crate::sweep::Quantile::P50;
        // 84/s for 0.4 s: 33.6 arrivals expected; this point drew 29 and
        // answered all of them (72.5/s, 86 % of the rate).
        let drew_few = PointResult { offered_count: 29, completed: 29, achieved: 72.5, ..point(84.0, 72.5, 50.0, 0) };
        assert!(!drew_few.fell_behind() && drew_few.kept_up(P50, 100.0), "{drew_few:?}");
        // Drew 40 and answered 37 (92 %): behind, though above the rate.
        let lost = PointResult { offered_count: 40, completed: 37, achieved: 92.5, ..point(84.0, 92.5, 50.0, 0) };
        assert!(lost.fell_behind(), "{lost:?}");
        // Nothing arrived: nothing to fall behind on.
        assert!(!PointResult { offered_count: 0, completed: 0, ..point(1.0, 0.0, 0.0, 0) }.fell_behind());
    }

    /// One load point of the raw echo client against the shm server at
    /// `path` (timeout 300 ms, one thread, no warm-up).
    #[cfg(not(miri))]
    fn raw_echo_point(
        path: &str,
        spec: &str,
        rate: f64,
        duration: std::time::Duration,
        max_outstanding: usize,
    ) -> PointResult {
        let workload = spec.parse::<cornflakes_workloads::WorkloadSpec>().unwrap().build().unwrap();
        let cfg = super::LoadConfig {
            rate: Some(rate),
            threads: 1,
            warmup: std::time::Duration::ZERO,
            duration,
            timeout: std::time::Duration::from_millis(300),
            max_outstanding,
            seed: 1,
            in_place: false,
        };
        let target = crate::transport::Target::Shm(path.to_owned());
        super::run_point(&target, cornflakes_kv::System::Raw, workload.as_ref(), &cfg, None).unwrap()
    }

    /// A server that drops one response (its ring full, say): the request
    /// times out, and every other one is answered. Waiting for the lost
    /// request's slot once the ids wrapped used to stop every send until
    /// it timed out.
    #[cfg(not(miri))]
    #[test]
    fn a_lost_response_costs_one_request_not_the_point() {
        use cornflakes_datapath::{Datapath, Segment};
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::Duration;

        let path = crate::transport::shm_socket_path();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let server = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut dp = crate::transport::shm_server(&path).expect("listens");
                ready_tx.send(()).expect("test waits");
                let (mut rx, mut dropped) = (Vec::new(), false);
                while !stop.load(Ordering::Relaxed) {
                    match dp.recv_batch(&mut rx, 32) {
                        Ok(0) | Err(_) => {
                            let _ = dp.wait(Duration::from_millis(1));
                        }
                        Ok(_) => {
                            for r in rx.drain(..) {
                                if std::mem::replace(&mut dropped, true) {
                                    dp.push_segments(r.conn, r.msg_id, &[Segment::ZeroCopy(r.payload.clone())])
                                        .expect("room in the ring");
                                }
                            }
                            let _ = dp.flush();
                        }
                    }
                }
            })
        };
        ready_rx.recv().expect("server up");
        // 20 k/s for 0.5 s: the ids wrap (SLOTS is 1024 in tests) after
        // ~50 ms, long before the lost request's 300 ms timeout.
        let point = raw_echo_point(&path, "echo:fields=1,size=64", 20_000.0, Duration::from_millis(500), 512);
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!((point.timeouts, point.errors), (1, 0), "{point:?}");
        assert_eq!(point.completed + 1, point.offered_count, "{point:?}");
        assert!(point.offered_count > 8_000, "{point:?}");
        // Not a speed bound: waiting for the lost slot held the requests
        // of the next ~250 ms back (a p99 of 255 ms, where this machine's
        // longest stalls are a few ms).
        assert!(point.p99_us < 100_000.0, "sends waited for the lost request's slot: {point:?}");
        // Its busy time: every response counted, and a spinning load
        // generator is idle between arrivals at 20 k/s (busy passes take a
        // few µs, ~20 µs in a debug build: ~45 % busy), where counting
        // every pass would make it ~100 %.
        let busy = point.client.expect("measured");
        assert!(busy.responses >= point.completed && busy.threads == 1, "{busy:?}");
        let share = busy.fraction().expect("ran");
        assert!(share > 0.0 && share < 0.95, "an idle pass counted as busy? {busy:?}");
        assert!(busy.capacity_rps().expect("responses") > 20_000.0, "{busy:?}");
    }

    /// The values a request carries are the application's, in the shared
    /// pool: the Cornflakes codecs send them by descriptor (a server
    /// receiving in place sees each as a segment left in the client's
    /// pool). Values in private memory were copied into the ring instead:
    /// 4 KB of copies per echo request on the load generator's core.
    #[cfg(not(miri))]
    #[test]
    fn cornflakes_requests_send_their_values_by_descriptor() {
        use cornflakes_datapath::Datapath;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        use std::time::Duration;

        let path = crate::transport::shm_socket_path();
        let stop = Arc::new(AtomicBool::new(false));
        // Requests seen, and how many of their segments stayed in the client's pool.
        let (requests, by_descriptor) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let server = {
            let (path, stop) = (path.clone(), stop.clone());
            let (requests, by_descriptor) = (requests.clone(), by_descriptor.clone());
            std::thread::spawn(move || {
                let mut dp = crate::transport::shm_server_with(&path, true).expect("listens");
                ready_tx.send(()).expect("test waits");
                let mut rx = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match dp.recv_batch_in_place(&mut rx, 32) {
                        Ok(0) | Err(_) => {
                            let _ = dp.wait(Duration::from_millis(1));
                        }
                        Ok(_) => {
                            for m in rx.drain(..) {
                                requests.fetch_add(1, Ordering::Relaxed);
                                by_descriptor.fetch_add(m.peer_segments() as u64, Ordering::Relaxed);
                                // The raw echo: the request's bytes back, whole.
                                let mut echo = vec![0; m.len()];
                                m.copy_to_slice(&mut echo).expect("lease held");
                                dp.push_buf(m.conn, m.msg_id, &echo).expect("room in the ring");
                            }
                            let _ = dp.flush();
                        }
                    }
                }
            })
        };
        ready_rx.recv().expect("server up");
        let point = raw_echo_point(&path, "echo:fields=2,size=2048", 2_000.0, Duration::from_millis(300), 64);
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!((point.timeouts, point.errors), (0, 0), "every echo checked: {point:?}");
        let requests = requests.load(Ordering::Relaxed);
        assert!(requests > 100, "{point:?}");
        assert_eq!(by_descriptor.load(Ordering::Relaxed), 2 * requests, "each of the two values by descriptor");
    }
}
