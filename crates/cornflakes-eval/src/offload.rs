//! `cf offload`: Zerializer's offload engine in software
//! (`cornflakes-offload`), measured against encoding on the application
//! core.
//!
//! The message is the paper's echo message, `offload.Pair` (two bytes
//! fields of `--size` B, 2048 by default), sent to an echo peer over the
//! shared-memory datapath and checked when it comes back. Three systems,
//! side by side in one run:
//!
//! - `engine`: the application (this thread, `--app-core`) builds the
//!   object in an arena (two registered-buffer slots), posts a descriptor
//!   and reaps the completion; the engine thread (`--engine-core`) encodes
//!   with the schema table and sends (both fields zero-copy), receives the
//!   echo, parses it into an arena and hands it back on the receive ring;
//!   the application checks both fields.
//! - `inline-table`: the application does the engine's work itself, with
//!   the same table-driven encoder and decoder and the same zero-copy
//!   rule, on its own datapath.
//! - `inline-prost`: the application encodes with prost into a buffer of
//!   the datapath's shared (pinned) pool, sends it by descriptor, and
//!   decodes the echo with prost.
//!
//! **How the two cores are shared.** Core `--app-core` runs only the
//! application thread. Core `--engine-core` runs the echo peer in every
//! system: with `engine`, the peer is a sidecar polled by the engine
//! thread itself between its own polls (one thread, one core: engine and
//! peer); with the inline systems, the peer is a thread of this process
//! alone on that core. The peer does the same work in all three (receive,
//! copy the message back).
//!
//! **Instructions** (`valgrind --tool=callgrind --separate-threads=yes`):
//! `cf offload` re-runs itself under callgrind once per system and phase
//! with collection toggled on only inside `offload_app_send` (build, encode
//! or post, send or reap completions) and then also `offload_app_receive`
//! (receive or pop, decode, check), and reads the application thread's
//! total. Waiting for a reply happens outside both functions, so spinning
//! is not counted. Per message = total / messages.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use cornflakes::RcBuf;
use cornflakes_datapath::shm::ShmDatapath;
use cornflakes_datapath::{ConnId, Datapath, Received, RecvError, Segment, SendError};
use cornflakes_offload::{
    Arena, BufId, Decoder, Encoder, Engine, EngineConfig, RxDescriptor, SchemaId, SchemaSet, Sidecar, Slot,
    TxDescriptor,
};
use hdrhistogram::Histogram;
use prost::Message as _;
use serde::{Deserialize, Serialize};

use crate::Error;

/// One of the systems `cf offload` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum System {
    /// The offload engine on the second core.
    Engine,
    /// The same table-driven encoder and decoder on the application core.
    InlineTable,
    /// prost on the application core, into pinned memory.
    InlineProst,
}

impl System {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            System::Engine => "engine",
            System::InlineTable => "inline-table",
            System::InlineProst => "inline-prost",
        }
    }

    const ALL: [System; 3] = [System::Engine, System::InlineTable, System::InlineProst];
}

/// What `cf offload` runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Bytes of each of the two fields.
    pub size: usize,
    /// Zero-copy threshold of the table encoder.
    pub threshold: usize,
    /// Round trips measured one at a time (latency).
    pub iters: u64,
    /// Unrecorded round trips first.
    pub warmup: u64,
    /// Messages outstanding in the throughput run.
    pub window: usize,
    /// Length of each throughput run.
    pub seconds: f64,
    /// Rounds of all three systems (figures are medians over rounds).
    pub rounds: u32,
    /// Core of the application thread.
    pub app_core: usize,
    /// Core of the engine thread (and of the echo peer).
    pub engine_core: usize,
    /// Round trips per callgrind run (0: do not count instructions).
    pub count_messages: u64,
    /// Internal: run one system for callgrind and exit.
    pub count_only: Option<System>,
}

/// One system's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemReport {
    /// `engine`, `inline-table` or `inline-prost`.
    pub system: String,
    /// Round-trip latency, one message at a time, ns (median of rounds).
    pub p50_ns: u64,
    /// See `p50_ns`.
    pub p99_ns: u64,
    /// Round trips per second with `window` outstanding (median of rounds).
    pub round_trips_per_s: f64,
    /// Payload (both fields, one direction) in Gbit/s at that rate.
    pub payload_gbps: f64,
    /// Each round's figures (the fields above are their medians).
    pub rounds: Vec<RoundFigures>,
    /// Application-thread instructions per message: send side
    /// (`offload_app_send`), `null` when not counted.
    pub app_instructions_send: Option<f64>,
    /// Same, for the whole round trip (send + receive + check).
    pub app_instructions_round_trip: Option<f64>,
}

/// One round of one system.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundFigures {
    /// Round-trip latency p50, ns.
    pub p50_ns: u64,
    /// Round-trip latency p99, ns.
    pub p99_ns: u64,
    /// Round trips per second with `window` outstanding.
    pub round_trips_per_s: f64,
}

/// The last line of `cf offload`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OffloadReport {
    /// Bytes per field.
    pub size: usize,
    /// Messages outstanding in the throughput runs.
    pub window: usize,
    /// The systems, in the order run.
    pub systems: Vec<SystemReport>,
    /// `inline-table` send instructions / `engine` send instructions.
    pub send_instruction_ratio_vs_table: Option<f64>,
    /// `inline-prost` send instructions / `engine` send instructions.
    pub send_instruction_ratio_vs_prost: Option<f64>,
    /// `/proc/loadavg` at the start of the run.
    pub loadavg_start: String,
    /// `/proc/loadavg` at the end of the run.
    pub loadavg_end: String,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.trim().to_owned()).unwrap_or_default()
}

/// The paper's echo message in prost, to compare with.
#[derive(Clone, PartialEq, prost::Message)]
struct PairPb {
    #[prost(bytes = "vec", tag = "1")]
    a: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    b: Vec<u8>,
}

/// The two field values: distinct bytes per position and per field.
fn fields(size: usize) -> (Vec<u8>, Vec<u8>) {
    ((0..size).map(|i| (i * 7 + 1) as u8).collect(), (0..size).map(|i| (i * 13 + 5) as u8).collect())
}

/// The echo peer: sends every message back as it came (a copy into the
/// ring: received buffers are private). Same code in every system.
struct EchoPeer {
    dp: ShmDatapath,
    got: Vec<Received>,
    /// The application has gone (it closes its end when it stops).
    closed: bool,
}

impl Sidecar for EchoPeer {
    #[inline]
    fn poll(&mut self) -> Result<(), String> {
        match self.dp.recv_batch(&mut self.got, 32) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(RecvError::Closed(_)) => {
                self.closed = true;
                return Ok(());
            }
            Err(e) => return Err(format!("echo peer: {e}")),
        }
        for r in self.got.drain(..) {
            loop {
                match self.dp.push_segments(r.conn, r.msg_id, &[Segment::ZeroCopy(r.payload.clone())]) {
                    Ok(()) => break,
                    Err(SendError::Full) => {
                        self.dp.poll_completions().map_err(|e| e.to_string())?;
                    }
                    Err(e) => return Err(format!("echo peer: {e}")),
                }
            }
        }
        self.dp.poll_completions().map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// What every system offers the measuring loops.
trait App {
    /// Sends message `id`; `false` when it must be retried (back-pressure).
    fn send(&mut self, id: u32) -> Result<bool, Error>;
    /// Whether a reply may be ready (cheap; not counted).
    fn ready(&mut self) -> bool;
    /// Takes and checks one reply; `None` when there was none.
    fn receive(&mut self) -> Result<Option<u32>, Error>;
}

#[inline(never)]
fn offload_app_send(app: &mut dyn App, id: u32) -> Result<bool, Error> {
    app.send(id)
}

#[inline(never)]
fn offload_app_receive(app: &mut dyn App) -> Result<Option<u32>, Error> {
    app.receive()
}

fn check(what: &str, got_a: &[u8], got_b: &[u8], a: &[u8], b: &[u8]) -> Result<(), Error> {
    if got_a != a || got_b != b {
        return Err(Error::Failed(format!("{what}: an echoed message came back different")));
    }
    Ok(())
}

// ---- engine ----

struct EngineApp {
    engine: Engine,
    schema: SchemaId,
    slot_a: u16,
    slot_b: u16,
    slots: u16,
    conn: ConnId,
    len: u32,
    // Boxed: arenas travel the rings as a pointer, and come back boxed.
    #[allow(clippy::vec_box)]
    free: Vec<Box<Arena>>,
    a: Vec<u8>,
    b: Vec<u8>,
}

impl EngineApp {
    fn start(cfg: &Config, set: Arc<SchemaSet>) -> Result<Self, Error> {
        let schema = set.id("offload.Pair").ok_or("offload.Pair missing from the schema")?;
        let table = set.table(schema);
        let (slot_a, slot_b) = (
            table.field("a").ok_or("offload.Pair has no field a")?.slot,
            table.field("b").ok_or("offload.Pair has no field b")?.slot,
        );
        let slots = table.slots;
        let (a, b) = fields(cfg.size);
        let config = EngineConfig {
            schemas: set,
            rx_schema: schema,
            threshold: cfg.threshold,
            ring_capacity: cfg.window.max(1) * 2,
            rx_arena_limit: 4 * cfg.size + 4096,
            registered: vec![a.clone(), b.clone()],
        };
        let core = cfg.engine_core;
        let (conn_tx, conn_rx) = mpsc::channel();
        let engine = Engine::spawn(config, move || {
            crate::pin::pin_to_core(core).map_err(|e| e.to_string())?;
            let (dp, peer) = ShmDatapath::pair(crate::transport::shm_config()).map_err(|e| e.to_string())?;
            let conn = dp.connections().next().ok_or("the shm pair has no connection")?;
            let _ = conn_tx.send(conn);
            Ok((dp, EchoPeer { dp: peer, got: Vec::with_capacity(32), closed: false }))
        })
        .map_err(|e| Error::Failed(e.to_string()))?;
        let conn = conn_rx.recv().map_err(|_| "the engine did not report its connection")?;
        let free = (0..cfg.window.max(1) * 2).map(|_| Box::<Arena>::default()).collect();
        Ok(Self { engine, schema, slot_a, slot_b, slots, conn, len: cfg.size as u32, free, a, b })
    }
}

impl App for EngineApp {
    #[inline]
    fn send(&mut self, id: u32) -> Result<bool, Error> {
        while let Some(c) = self.engine.poll_completion() {
            c.result.map_err(|e| Error::Failed(format!("engine refused a message: {e}")))?;
            self.free.push(c.arena);
        }
        let Some(mut arena) = self.free.pop() else { return Ok(false) };
        arena.clear();
        let root = arena.alloc(self.slots).map_err(|e| e.to_string())?;
        arena.set(root, self.slot_a, Slot::Registered { buf: BufId(0), off: 0, len: self.len });
        arena.set(root, self.slot_b, Slot::Registered { buf: BufId(1), off: 0, len: self.len });
        match self.engine.post(TxDescriptor { arena, root, schema: self.schema, conn: self.conn, msg_id: id }) {
            Ok(()) => Ok(true),
            Err(d) => {
                self.free.push(d.arena);
                Ok(false)
            }
        }
    }

    fn ready(&mut self) -> bool {
        self.engine.has_received()
    }

    #[inline]
    fn receive(&mut self) -> Result<Option<u32>, Error> {
        let Some(rx): Option<RxDescriptor> = self.engine.poll_received() else { return Ok(None) };
        let a = rx.arena.get(rx.root, self.slot_a).and_then(|s| rx.arena.bytes(s)).unwrap_or_default();
        let b = rx.arena.get(rx.root, self.slot_b).and_then(|s| rx.arena.bytes(s)).unwrap_or_default();
        check("engine", a, b, &self.a, &self.b)?;
        let id = rx.msg_id;
        self.engine.recycle(rx.arena);
        Ok(Some(id))
    }
}

// ---- inline: the peer in a thread of its own ----

struct PeerThread {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl PeerThread {
    /// Listens on a fresh socket path on `core`, returns the path once
    /// listening; the peer accepts one connection and echoes until stopped.
    fn start(core: usize) -> Result<(Self, String), Error> {
        let path = crate::transport::shm_socket_path();
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let stop_flag = Arc::clone(&stop);
        let listen_path = path.clone();
        let thread = std::thread::Builder::new()
            .name("offload-peer".into())
            .spawn(move || {
                let setup = || -> Result<ShmDatapath, String> {
                    crate::pin::pin_to_core(core).map_err(|e| e.to_string())?;
                    ShmDatapath::listen(&listen_path, crate::transport::shm_config()).map_err(|e| e.to_string())
                };
                let mut dp = match setup() {
                    Ok(dp) => dp,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.clone()));
                        return Err(e);
                    }
                };
                let _ = ready_tx.send(Ok(()));
                dp.accept(Duration::from_secs(10)).map_err(|e| format!("echo peer: no connection: {e}"))?;
                let mut peer = EchoPeer { dp, got: Vec::with_capacity(32), closed: false };
                while !stop_flag.load(Ordering::Relaxed) && !peer.closed {
                    peer.poll()?;
                }
                Ok(())
            })
            .map_err(|e| format!("cannot start the echo peer: {e}"))?;
        ready_rx.recv().map_err(|_| "the echo peer died")??;
        Ok((Self { stop, thread: Some(thread) }, path))
    }

    fn stop(mut self) -> Result<(), Error> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r.map_err(Error::Failed),
            Some(Err(_)) => Err("the echo peer panicked".into()),
            None => Ok(()),
        }
    }
}

impl Drop for PeerThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct InlineTableApp {
    dp: ShmDatapath,
    conn: ConnId,
    set: Arc<SchemaSet>,
    schema: SchemaId,
    slot_a: u16,
    slot_b: u16,
    slots: u16,
    len: u32,
    registered: Vec<RcBuf>,
    encoder: Encoder,
    decoder: Decoder,
    tx_arena: Arena,
    rx_arena: Arena,
    got: Vec<Received>,
    a: Vec<u8>,
    b: Vec<u8>,
}

impl App for InlineTableApp {
    #[inline]
    fn send(&mut self, id: u32) -> Result<bool, Error> {
        self.dp.poll_completions().map_err(|e| e.to_string())?;
        self.tx_arena.clear();
        let root = self.tx_arena.alloc(self.slots).map_err(|e| e.to_string())?;
        self.tx_arena.set(root, self.slot_a, Slot::Registered { buf: BufId(0), off: 0, len: self.len });
        self.tx_arena.set(root, self.slot_b, Slot::Registered { buf: BufId(1), off: 0, len: self.len });
        self.encoder
            .encode(&self.set, self.schema, &self.tx_arena, root, &self.registered)
            .map_err(|e| e.to_string())?;
        match self.dp.push_segments(self.conn, id, &self.encoder.segments()) {
            Ok(()) => Ok(true),
            Err(SendError::Full) => Ok(false),
            Err(e) => Err(e.to_string().into()),
        }
    }

    fn ready(&mut self) -> bool {
        self.dp.wait(Duration::ZERO).unwrap_or(true)
    }

    #[inline]
    fn receive(&mut self) -> Result<Option<u32>, Error> {
        if self.got.is_empty() && self.dp.recv_batch(&mut self.got, 32).map_err(|e| e.to_string())? == 0 {
            return Ok(None);
        }
        let r = self.got.remove(0);
        self.rx_arena.clear();
        let root = self
            .decoder
            .decode(&self.set, self.schema, &r.payload, &mut self.rx_arena)
            .map_err(|e| format!("inline-table: a malformed echo: {e}"))?;
        let arena = &self.rx_arena;
        let a = arena.get(root, self.slot_a).and_then(|s| arena.bytes(s)).unwrap_or_default();
        let b = arena.get(root, self.slot_b).and_then(|s| arena.bytes(s)).unwrap_or_default();
        check("inline-table", a, b, &self.a, &self.b)?;
        Ok(Some(r.msg_id))
    }
}

struct InlineProstApp {
    dp: ShmDatapath,
    conn: ConnId,
    msg: PairPb,
    got: Vec<Received>,
}

impl App for InlineProstApp {
    #[inline]
    fn send(&mut self, id: u32) -> Result<bool, Error> {
        self.dp.poll_completions().map_err(|e| e.to_string())?;
        let len = self.msg.encoded_len();
        // The shared pool: pinned, and sent by descriptor (no second copy).
        let mut buf = self.dp.pool().alloc(len).map_err(|e| e.to_string())?;
        self.msg.encode(&mut buf.as_mut_slice()).map_err(|e| e.to_string())?;
        match self.dp.push_segments(self.conn, id, &[Segment::ZeroCopy(buf.freeze())]) {
            Ok(()) => Ok(true),
            Err(SendError::Full) => Ok(false),
            Err(e) => Err(e.to_string().into()),
        }
    }

    fn ready(&mut self) -> bool {
        self.dp.wait(Duration::ZERO).unwrap_or(true)
    }

    #[inline]
    fn receive(&mut self) -> Result<Option<u32>, Error> {
        if self.got.is_empty() && self.dp.recv_batch(&mut self.got, 32).map_err(|e| e.to_string())? == 0 {
            return Ok(None);
        }
        let r = self.got.remove(0);
        let back = PairPb::decode(&r.payload[..]).map_err(|e| format!("inline-prost: a malformed echo: {e}"))?;
        check("inline-prost", &back.a, &back.b, &self.msg.a, &self.msg.b)?;
        Ok(Some(r.msg_id))
    }
}

/// A system, started: the application side and what must be stopped.
struct Running {
    app: Box<dyn App>,
    peer: Option<PeerThread>,
}

impl Running {
    fn start(system: System, cfg: &Config, set: &Arc<SchemaSet>) -> Result<Self, Error> {
        if system == System::Engine {
            return Ok(Self { app: Box::new(EngineApp::start(cfg, Arc::clone(set))?), peer: None });
        }
        let (peer, path) = PeerThread::start(cfg.engine_core)?;
        let dp = ShmDatapath::connect(&path, crate::transport::shm_config())
            .map_err(|e| format!("cannot connect to the echo peer at {path}: {e}"))?;
        let conn = dp.connections().next().ok_or("connected datapath has no connection")?;
        let (a, b) = fields(cfg.size);
        let app: Box<dyn App> = match system {
            System::InlineProst => {
                Box::new(InlineProstApp { dp, conn, msg: PairPb { a, b }, got: Vec::with_capacity(32) })
            }
            _ => {
                let schema = set.id("offload.Pair").ok_or("offload.Pair missing from the schema")?;
                let table = set.table(schema);
                let registered = vec![
                    dp.pool().alloc_copy(&a).map_err(|e| e.to_string())?,
                    dp.pool().alloc_copy(&b).map_err(|e| e.to_string())?,
                ];
                Box::new(InlineTableApp {
                    conn,
                    set: Arc::clone(set),
                    schema,
                    slot_a: table.field("a").ok_or("no field a")?.slot,
                    slot_b: table.field("b").ok_or("no field b")?.slot,
                    slots: table.slots,
                    len: cfg.size as u32,
                    registered,
                    encoder: Encoder::new(cfg.threshold),
                    decoder: Decoder::new(),
                    tx_arena: Arena::new(),
                    rx_arena: Arena::with_limit(4 * cfg.size + 4096),
                    got: Vec::with_capacity(32),
                    a,
                    b,
                    dp,
                })
            }
        };
        Ok(Self { app, peer: Some(peer) })
    }

    fn stop(self) -> Result<(), Error> {
        drop(self.app);
        if let Some(p) = self.peer {
            p.stop()?;
        }
        Ok(())
    }
}

/// A reply that takes longer than this is an error (lost).
const LOST_AFTER: Duration = Duration::from_secs(5);

/// One round trip: send, wait (not counted), receive and check.
#[inline]
fn round_trip(app: &mut dyn App, id: u32, yield_while_waiting: bool) -> Result<(), Error> {
    let started = Instant::now();
    while !offload_app_send(app, id)? {
        if started.elapsed() > LOST_AFTER {
            return Err(Error::Failed(format!("message {id} could not be sent for {LOST_AFTER:?}")));
        }
    }
    loop {
        if app.ready() {
            if let Some(got) = offload_app_receive(app)? {
                if got != id {
                    return Err(Error::Failed(format!("reply {got} to message {id}")));
                }
                return Ok(());
            }
        }
        if started.elapsed() > LOST_AFTER {
            return Err(Error::Failed(format!("no reply to message {id} within {LOST_AFTER:?}")));
        }
        if yield_while_waiting {
            std::thread::yield_now(); // under valgrind: let the other thread run
        }
    }
}

fn latency(app: &mut dyn App, cfg: &Config) -> Result<Histogram<u64>, Error> {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds");
    for i in 0..cfg.warmup + cfg.iters {
        let t = Instant::now();
        round_trip(app, i as u32, false)?;
        if i >= cfg.warmup {
            hist.record(t.elapsed().as_nanos().max(1) as u64).map_err(|e| e.to_string())?;
        }
    }
    Ok(hist)
}

/// Round trips per second with `window` messages outstanding; every reply
/// checked.
fn throughput(app: &mut dyn App, cfg: &Config) -> Result<f64, Error> {
    let window = cfg.window.max(1) as u64;
    let run = Duration::from_secs_f64(cfg.seconds);
    let (mut sent, mut done) = (0u64, 0u64);
    let mut last_progress = Instant::now();
    let started = Instant::now();
    loop {
        let open = started.elapsed() < run;
        while open && sent - done < window && offload_app_send(app, sent as u32)? {
            sent += 1;
        }
        if app.ready() {
            while let Some(got) = offload_app_receive(app)? {
                if got != done as u32 {
                    return Err(Error::Failed(format!("reply {got} out of order (expected {done})")));
                }
                done += 1;
                last_progress = Instant::now();
            }
        }
        if !open && done == sent {
            break;
        }
        if last_progress.elapsed() > LOST_AFTER {
            return Err(Error::Failed(format!("no reply for {LOST_AFTER:?} ({done} of {sent} back)")));
        }
    }
    Ok(done as f64 / started.elapsed().as_secs_f64())
}

/// The schema of `offload.Pair` and the test messages.
fn schemas() -> Result<Arc<SchemaSet>, Error> {
    cornflakes_offload::bundled_schemas().map(Arc::new).map_err(|e| Error::Failed(e.to_string()))
}

/// Under callgrind: pin, start `system`, run `count_messages` round trips
/// (waiting by yielding), stop.
fn count_only(system: System, cfg: &Config) -> Result<(), Error> {
    let set = schemas()?;
    crate::pin::pin_to_core(cfg.app_core)?;
    let mut running = Running::start(system, cfg, &set)?;
    for i in 0..cfg.count_messages {
        round_trip(running.app.as_mut(), i as u32, true)?;
    }
    running.stop()
}

/// The application thread's collected instructions of one callgrind run.
fn callgrind(system: System, cfg: &Config, functions: &[&str], dir: &Path) -> Result<f64, Error> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the cf binary: {e}"))?;
    let out = dir.join(format!("{}-{}.cg", system.name(), functions.len()));
    let mut cmd = Command::new("valgrind");
    cmd.args(["--tool=callgrind", "--separate-threads=yes", "--fair-sched=yes"])
        .arg(format!("--callgrind-out-file={}", out.display()));
    for f in functions {
        cmd.arg(format!("--toggle-collect=*{f}*"));
    }
    cmd.arg(&exe).args([
        "offload",
        "--count-only",
        system.name(),
        "--count-messages",
        &cfg.count_messages.to_string(),
        "--size",
        &cfg.size.to_string(),
        "--threshold",
        &cfg.threshold.to_string(),
        "--app-core",
        &cfg.app_core.to_string(),
        "--engine-core",
        &cfg.engine_core.to_string(),
    ]);
    let status = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("cannot run valgrind: {e} (install it: apt-get install valgrind)"))?;
    if !status.success() {
        return Err(Error::Failed(format!("callgrind run of {} failed: {status}", system.name())));
    }
    // --separate-threads: OUT-01 is the main thread, the application.
    let main = PathBuf::from(format!("{}-01", out.display()));
    let text = std::fs::read_to_string(&main).map_err(|e| format!("cannot read {}: {e}", main.display()))?;
    let total = text
        .lines()
        .find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .ok_or_else(|| format!("no totals line in {}", main.display()))?;
    Ok(total as f64 / cfg.count_messages as f64)
}

fn valgrind_available() -> bool {
    Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Runs `cf offload`: prints progress and a table, and an
/// [`OffloadReport`] as the last line of standard output.
///
/// # Errors
///
/// [`Error::Invalid`] for settings that cannot work; [`Error::Failed`]
/// when a system fails or an echo comes back wrong.
pub fn run(cfg: &Config) -> Result<(), Error> {
    if cfg.size == 0 || cfg.size > (256 << 10) {
        return Err(Error::Invalid("--size must be 1 ..= 262144 bytes".into()));
    }
    if cfg.app_core == cfg.engine_core {
        return Err(Error::Invalid("--app-core and --engine-core must differ".into()));
    }
    if let Some(system) = cfg.count_only {
        return count_only(system, cfg);
    }
    let loadavg_start = loadavg();
    let set = schemas()?;
    eprintln!(
        "offload: 2x{} B messages, app on core {}, engine/peer on core {}; {} rounds of: {} round trips after {} warm-up, then {} s at window {}; load {}",
        cfg.size, cfg.app_core, cfg.engine_core, cfg.rounds, cfg.iters, cfg.warmup, cfg.seconds, cfg.window, loadavg_start
    );
    crate::pin::pin_to_core(cfg.app_core)?;
    // Rounds: every system once per round, so a burst of load from the
    // other tenants of the machine hits all of them; medians reported.
    let rounds = cfg.rounds.max(1);
    let mut samples: Vec<Vec<(u64, u64, f64)>> = vec![Vec::new(); System::ALL.len()];
    for round in 1..=rounds {
        for (i, system) in System::ALL.into_iter().enumerate() {
            eprintln!("  round {round}/{rounds}, {}: latency, then throughput ...", system.name());
            let mut running = Running::start(system, cfg, &set)?;
            let hist = latency(running.app.as_mut(), cfg)?;
            let rate = throughput(running.app.as_mut(), cfg)?;
            running.stop()?;
            samples[i].push((hist.value_at_quantile(0.5), hist.value_at_quantile(0.99), rate));
        }
    }
    let mut reports = Vec::new();
    for (system, runs) in System::ALL.into_iter().zip(samples) {
        let median_u64 = |f: fn(&(u64, u64, f64)) -> u64| {
            let mut v: Vec<u64> = runs.iter().map(f).collect();
            v.sort_unstable();
            v[v.len() / 2]
        };
        let mut rates: Vec<f64> = runs.iter().map(|r| r.2).collect();
        rates.sort_by(f64::total_cmp);
        let rate = rates[rates.len() / 2];
        reports.push(SystemReport {
            system: system.name().to_owned(),
            p50_ns: median_u64(|r| r.0),
            p99_ns: median_u64(|r| r.1),
            round_trips_per_s: rate,
            payload_gbps: rate * (2 * cfg.size) as f64 * 8.0 / 1e9,
            rounds: runs.iter().map(|r| RoundFigures { p50_ns: r.0, p99_ns: r.1, round_trips_per_s: r.2 }).collect(),
            app_instructions_send: None,
            app_instructions_round_trip: None,
        });
    }
    if cfg.count_messages > 0 {
        if valgrind_available() {
            let dir = std::env::temp_dir().join(format!("cf-offload-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            for (system, r) in System::ALL.iter().zip(&mut reports) {
                eprintln!(
                    "  {}: counting instructions under callgrind ({} messages) ...",
                    system.name(),
                    cfg.count_messages
                );
                r.app_instructions_send = Some(callgrind(*system, cfg, &["offload_app_send"], &dir)?);
                r.app_instructions_round_trip =
                    Some(callgrind(*system, cfg, &["offload_app_send", "offload_app_receive"], &dir)?);
            }
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            eprintln!("  valgrind not found: skipping instruction counts (apt-get install valgrind)");
        }
    }
    let ratio = |i: usize| Some(reports[i].app_instructions_send? / reports[0].app_instructions_send?);
    let report = OffloadReport {
        size: cfg.size,
        window: cfg.window,
        send_instruction_ratio_vs_table: ratio(1),
        send_instruction_ratio_vs_prost: ratio(2),
        systems: reports,
        loadavg_start,
        loadavg_end: loadavg(),
    };
    println!(
        "{:<13} {:>9} {:>9} {:>12} {:>8} {:>12} {:>12}",
        "system", "p50 ns", "p99 ns", "rt/s", "Gbit/s", "send instr", "rt instr"
    );
    let fmt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
    for r in &report.systems {
        println!(
            "{:<13} {:>9} {:>9} {:>12.0} {:>8.2} {:>12} {:>12}",
            r.system,
            r.p50_ns,
            r.p99_ns,
            r.round_trips_per_s,
            r.payload_gbps,
            fmt(r.app_instructions_send),
            fmt(r.app_instructions_round_trip)
        );
    }
    println!("(latency and rt/s: medians of {} rounds; each round's p50 ns / rt/s below)", cfg.rounds.max(1));
    for r in &report.systems {
        let each: Vec<String> = r.rounds.iter().map(|f| format!("{} / {:.0}", f.p50_ns, f.round_trips_per_s)).collect();
        println!("  {:<13} {}", r.system, each.join(", "));
    }
    if let (Some(t), Some(p)) = (report.send_instruction_ratio_vs_table, report.send_instruction_ratio_vs_prost) {
        println!(
            "application-core send instructions: inline-table / engine = {t:.2}x, inline-prost / engine = {p:.2}x"
        );
    }
    println!("load average: start {}, end {}", report.loadavg_start, report.loadavg_end);
    println!("{}", serde_json::to_string(&report).map_err(|e| e.to_string())?);
    Ok(())
}
