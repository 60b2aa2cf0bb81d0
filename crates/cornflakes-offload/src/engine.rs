//! The engine thread: plays Zerializer's NIC on a second core.
//!
//! ```text
//!  application core                              engine core ("the NIC")
//!  ┌───────────────────────┐  tx ring (TxDescriptor: arena, root,
//!  │ build object in Arena │  schema, conn, msg id)  ┌──────────────────────────┐
//!  │ post(descriptor) ─────┼────────────────────────►│ table walk: sizes, then  │
//!  │                       │                         │ keys/varints/lengths;    │
//!  │ poll_completion() ◄───┼─────────────────────────┤ push_segments(copied run,│
//!  │  (arena comes back)   │  completion ring        │ ZeroCopy(registered), ..)│──► Datapath
//!  │                       │                         │                          │
//!  │ poll_received() ◄─────┼─────────────────────────┤ recv_batch; parse into an│◄── Datapath
//!  │ recycle(arena) ───────┼────────────────────────►│ arena with the table     │
//!  └───────────────────────┘  rx ring, recycle ring  └──────────────────────────┘
//! ```
//!
//! The four rings are `rtrb` single-producer single-consumer queues. An
//! [`Arena`] moves through them by ownership (a pointer move): whoever holds
//! the descriptor owns the object, so the two threads never share one. The
//! datapath, its pools and the registered buffers ([`BufId`](crate::BufId)) live on the
//! engine thread only (pools are single-threaded); the application names a
//! registered buffer by id, as an RDMA application names registered memory
//! by key. Received objects are copied out of the datapath's buffers into
//! the receive arena (the NIC's DMA into the RX arena).
//!
//! Back-pressure: [`Engine::post`] hands the descriptor back when the tx ring
//! is full; the engine takes a descriptor only when the completion ring has
//! room, and receives only when the rx ring has room (the datapath then
//! queues or drops, and counts).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use cornflakes::RcBuf;
use cornflakes_datapath::{ConnId, Datapath, Received, SendError};
use rtrb::{Consumer, Producer, RingBuffer};

use crate::decode::Decoder;
use crate::encode::{EncodeError, Encoder};
use crate::object::{Arena, ObjId};
use crate::schema::{SchemaId, SchemaSet};

/// What the engine is set up with.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The schema tables, loaded at start.
    pub schemas: Arc<SchemaSet>,
    /// Table of received messages.
    pub rx_schema: SchemaId,
    /// Registered bytes at or above this length are sent zero-copy (the
    /// Cornflakes paper's 512 B).
    pub threshold: usize,
    /// Descriptors each ring holds.
    pub ring_capacity: usize,
    /// Bytes a receive arena may use (hostile input cannot make the engine
    /// allocate more per message).
    pub rx_arena_limit: usize,
    /// Buffers to register: copied into the datapath's pool at start and
    /// named by [`BufId`](crate::BufId) in the order given.
    pub registered: Vec<Vec<u8>>,
}

/// A transmit descriptor: "send this object".
#[derive(Debug)]
pub struct TxDescriptor {
    /// The arena holding the object; comes back in the [`Completion`].
    pub arena: Box<Arena>,
    /// The object.
    pub root: ObjId,
    /// Its table.
    pub schema: SchemaId,
    /// Where to send it.
    pub conn: ConnId,
    /// The datapath message id.
    pub msg_id: u32,
}

/// Why a transmit failed.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// The object does not fit its table.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The datapath refused the message.
    #[error(transparent)]
    Send(#[from] SendError),
}

/// A completion: the descriptor's arena back, and how the send went.
#[derive(Debug)]
pub struct Completion {
    /// The arena, to reuse.
    pub arena: Box<Arena>,
    /// The descriptor's message id.
    pub msg_id: u32,
    /// Bytes of the encoded message, or why it was not sent.
    pub result: Result<usize, TxError>,
}

/// A received, parsed message.
#[derive(Debug)]
pub struct RxDescriptor {
    /// The arena holding the object; hand it back with [`Engine::recycle`].
    pub arena: Box<Arena>,
    /// The object.
    pub root: ObjId,
    /// Its table ([`EngineConfig::rx_schema`]).
    pub schema: SchemaId,
    /// Who sent it.
    pub conn: ConnId,
    /// The sender's message id.
    pub msg_id: u32,
}

/// Work the engine thread does between its own polls: `cf offload` runs
/// its in-process echo peer here, on the engine's core.
pub trait Sidecar {
    /// Does some work without blocking.
    ///
    /// # Errors
    ///
    /// A message saying what failed; the engine stops with it.
    fn poll(&mut self) -> Result<(), String>;
}

/// No sidecar.
impl Sidecar for () {
    fn poll(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// What the engine did, returned by [`Engine::stop`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Messages encoded and handed to the datapath.
    pub sent: u64,
    /// Descriptors whose object did not fit its table.
    pub encode_errors: u64,
    /// Descriptors the datapath refused.
    pub send_errors: u64,
    /// Zero-copy segments posted.
    pub zero_copy_segments: u64,
    /// Received messages parsed and handed to the application.
    pub received: u64,
    /// Received messages that were malformed (dropped).
    pub malformed: u64,
}

/// Why the engine could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Setting up the datapath or registering buffers failed.
    #[error("engine set-up failed: {0}")]
    Setup(String),
    /// The datapath or the sidecar failed while running.
    #[error("engine failed: {0}")]
    Failed(String),
    /// The engine thread panicked.
    #[error("the engine thread panicked")]
    Panicked,
}

/// The application's side of a running engine.
pub struct Engine {
    tx: Producer<TxDescriptor>,
    done: Consumer<Completion>,
    rx: Consumer<RxDescriptor>,
    recycle: Producer<Box<Arena>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<EngineStats, EngineError>>>,
}

impl Engine {
    /// Starts the engine thread. `make` runs on it first (pin the thread
    /// there) and returns its datapath and sidecar; this returns once they
    /// are set up and the buffers registered.
    ///
    /// # Errors
    ///
    /// [`EngineError::Setup`] when `make` fails or a buffer cannot be
    /// registered.
    pub fn spawn<D, S, F>(config: EngineConfig, make: F) -> Result<Self, EngineError>
    where
        D: Datapath,
        S: Sidecar,
        F: FnOnce() -> Result<(D, S), String> + Send + 'static,
    {
        let cap = config.ring_capacity.max(1);
        let (tx, tx_in) = RingBuffer::new(cap);
        let (done_out, done) = RingBuffer::new(cap);
        let (rx_out, rx) = RingBuffer::new(cap);
        let (recycle, recycle_in) = RingBuffer::new(cap);
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let rings = EngineRings { tx_in, done_out, rx_out, recycle_in };
        let stop_flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("offload-engine".into())
            .spawn(move || {
                let (dp, side) = match make() {
                    Ok(v) => v,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.clone()));
                        return Err(EngineError::Setup(e));
                    }
                };
                let mut registered = Vec::with_capacity(config.registered.len());
                for data in &config.registered {
                    match dp.pool().alloc_copy(data) {
                        Ok(b) => registered.push(b),
                        Err(e) => {
                            let msg = format!("cannot register a {} B buffer: {e}", data.len());
                            let _ = ready_tx.send(Err(msg.clone()));
                            return Err(EngineError::Setup(msg));
                        }
                    }
                }
                let _ = ready_tx.send(Ok(()));
                run(&config, dp, side, &registered, rings, &stop_flag)
            })
            .map_err(|e| EngineError::Setup(format!("cannot start the engine thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Self { tx, done, rx, recycle, stop, thread: Some(thread) }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(EngineError::Setup(e))
            }
            Err(_) => {
                let _ = thread.join();
                Err(EngineError::Panicked)
            }
        }
    }

    /// Posts a transmit descriptor; hands it back when the ring is full
    /// (poll completions, then retry).
    #[inline]
    #[allow(clippy::result_large_err)]
    pub fn post(&mut self, descriptor: TxDescriptor) -> Result<(), TxDescriptor> {
        self.tx.push(descriptor).map_err(|rtrb::PushError::Full(d)| d)
    }

    /// The next completion, if any.
    #[inline]
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.done.pop().ok()
    }

    /// The next received message, if any.
    #[inline]
    pub fn poll_received(&mut self) -> Option<RxDescriptor> {
        self.rx.pop().ok()
    }

    /// Whether a received message is waiting (cheap; nothing is taken).
    #[inline]
    pub fn has_received(&self) -> bool {
        !self.rx.is_empty()
    }

    /// Gives a receive arena back to the engine for reuse (dropped when
    /// the recycle ring is full).
    #[inline]
    pub fn recycle(&mut self, arena: Box<Arena>) {
        let _ = self.recycle.push(arena);
    }

    /// Whether the engine thread is still running.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the engine once it has taken every posted descriptor, and
    /// returns its counters.
    ///
    /// # Errors
    ///
    /// What stopped the engine early, if something did.
    pub fn stop(mut self) -> Result<EngineStats, EngineError> {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread.take().ok_or(EngineError::Panicked)?;
        thread.join().map_err(|_| EngineError::Panicked)?
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct EngineRings {
    tx_in: Consumer<TxDescriptor>,
    done_out: Producer<Completion>,
    rx_out: Producer<RxDescriptor>,
    recycle_in: Consumer<Box<Arena>>,
}

/// Received messages taken per datapath poll.
const RX_BATCH: usize = 32;

fn run<D: Datapath, S: Sidecar>(
    config: &EngineConfig,
    mut dp: D,
    mut side: S,
    registered: &[RcBuf],
    mut rings: EngineRings,
    stop: &AtomicBool,
) -> Result<EngineStats, EngineError> {
    let set = &*config.schemas;
    let mut stats = EngineStats::default();
    let mut encoder = Encoder::new(config.threshold);
    let mut decoder = Decoder::new();
    let mut received: Vec<Received> = Vec::with_capacity(RX_BATCH);
    let mut spare: Vec<Box<Arena>> = Vec::new();
    // A descriptor whose encoding the datapath had no room for yet.
    let mut stalled: Option<(TxDescriptor, usize)> = None;
    let failed = |e: &dyn std::fmt::Display| EngineError::Failed(e.to_string());
    loop {
        // Transmit: only when a completion can be posted for it.
        loop {
            if rings.done_out.slots() == 0 {
                break;
            }
            let (d, len) = match stalled.take() {
                Some(s) => s,
                None => {
                    let Ok(d) = rings.tx_in.pop() else { break };
                    match encoder.encode(set, d.schema, &d.arena, d.root, registered) {
                        Ok(len) => (d, len),
                        Err(e) => {
                            stats.encode_errors += 1;
                            let c = Completion { arena: d.arena, msg_id: d.msg_id, result: Err(e.into()) };
                            let _ = rings.done_out.push(c);
                            continue;
                        }
                    }
                }
            };
            let result = dp.push_segments(d.conn, d.msg_id, &encoder.segments());
            let result = match result {
                Err(SendError::Full) => {
                    stalled = Some((d, len));
                    break;
                }
                Ok(()) => {
                    stats.sent += 1;
                    stats.zero_copy_segments += encoder.zero_copy_pieces() as u64;
                    Ok(len)
                }
                Err(e) => {
                    stats.send_errors += 1;
                    Err(e.into())
                }
            };
            let _ = rings.done_out.push(Completion { arena: d.arena, msg_id: d.msg_id, result });
        }
        dp.flush().or_else(|e| if matches!(e, SendError::Full) { Ok(()) } else { Err(e) }).map_err(|e| failed(&e))?;
        dp.poll_completions().map_err(|e| failed(&e))?;

        // Receive: only as many as the rx ring has room for.
        let room = rings.rx_out.slots().min(RX_BATCH);
        if room > 0 && dp.recv_batch(&mut received, room).map_err(|e| failed(&e))? > 0 {
            while let Ok(a) = rings.recycle_in.pop() {
                spare.push(a);
            }
            for r in received.drain(..) {
                let mut arena = spare.pop().unwrap_or_else(|| Box::new(Arena::with_limit(config.rx_arena_limit)));
                arena.reset_with_limit(config.rx_arena_limit);
                match decoder.decode(set, config.rx_schema, &r.payload, &mut arena) {
                    Ok(root) => {
                        stats.received += 1;
                        let d = RxDescriptor { arena, root, schema: config.rx_schema, conn: r.conn, msg_id: r.msg_id };
                        let _ = rings.rx_out.push(d);
                    }
                    Err(_) => {
                        stats.malformed += 1;
                        spare.push(arena);
                    }
                }
            }
        }
        side.poll().map_err(|e| EngineError::Failed(format!("sidecar: {e}")))?;
        if stop.load(Ordering::Acquire) && rings.tx_in.is_empty() && stalled.is_none() {
            return Ok(stats);
        }
        std::hint::spin_loop();
    }
}
