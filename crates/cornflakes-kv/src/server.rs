//! The serving loop, and the systems a server can run.

use std::time::{Duration, Instant};

use cornflakes::field::{
    machine_threshold, AdaptiveConfig, AdaptiveThreshold, ADAPTIVE_CANDIDATES, ONLY_COPY, ONLY_ZERO_COPY,
};
use cornflakes_datapath::timeline::{self, Kind};
use cornflakes_datapath::{Datapath, InPlace, Received, RecvError, SendError};

use crate::codec::cornflakes::{CornflakesServer, RawEchoServer};
use crate::codec::{HandleError, ServerCodec};
use crate::store::Store;

/// A serializer configuration the server (and the client) can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum System {
    /// Cornflakes, hybrid (threshold 512 B), serialize-and-send.
    Cornflakes,
    /// Cornflakes sending every field zero-copy (threshold 0).
    CornflakesOnlySg,
    /// Cornflakes copying every field (no zero-copy).
    CornflakesOnlyCopy,
    /// Cornflakes hybrid, without serialize-and-send (segment list).
    CornflakesNoSas,
    /// Protocol Buffers (prost).
    Protobuf,
    /// FlatBuffers.
    Flatbuffers,
    /// Cap'n Proto.
    Capnp,
    /// rkyv (zero-copy deserialization).
    Rkyv,
    /// Echo of the received bytes without serialization (echo only).
    Raw,
    /// The baseline a Rust developer would write instead: tokio, prost
    /// and a length-delimited codec (crate `cornflakes-kv-tokio`; tcp
    /// only, its own server rather than a datapath).
    TokioProst,
    /// Cornflakes' hybrid rule on the protobuf wire format (standard
    /// proto3; the hybrid systems' threshold), sent as a segment list in
    /// wire order.
    CornflakesProtobuf,
}

impl System {
    /// Every system, in the order tables list them.
    pub const ALL: [System; 11] = [
        System::Cornflakes,
        System::CornflakesOnlySg,
        System::CornflakesOnlyCopy,
        System::CornflakesNoSas,
        System::Protobuf,
        System::Flatbuffers,
        System::Capnp,
        System::Rkyv,
        System::Raw,
        System::TokioProst,
        System::CornflakesProtobuf,
    ];

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            System::Cornflakes => "cornflakes",
            System::CornflakesOnlySg => "cornflakes-only-sg",
            System::CornflakesOnlyCopy => "cornflakes-only-copy",
            System::CornflakesNoSas => "cornflakes-no-sas",
            System::Protobuf => "protobuf",
            System::Flatbuffers => "flatbuffers",
            System::Capnp => "capnp",
            System::Rkyv => "rkyv",
            System::Raw => "raw",
            System::TokioProst => "tokio-prost",
            System::CornflakesProtobuf => "cornflakes-protobuf",
        }
    }

    /// The system called `name`.
    pub fn from_name(name: &str) -> Option<System> {
        System::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether this is one of the serialization libraries Cornflakes is
    /// compared against.
    pub fn is_baseline_library(self) -> bool {
        matches!(self, System::Protobuf | System::Flatbuffers | System::Capnp | System::Rkyv)
    }

    /// Whether the system runs on our datapaths ([`serve`]); `tokio-prost`
    /// is its own tokio TCP server.
    pub fn runs_on_datapath(self) -> bool {
        self != System::TokioProst
    }

    /// Whether the system's server codec calls the step functions of
    /// [`crate::phase`] (what `cf phases` measures).
    pub fn marks_phases(self) -> bool {
        matches!(
            self,
            System::Cornflakes
                | System::CornflakesOnlySg
                | System::CornflakesOnlyCopy
                | System::CornflakesNoSas
                | System::Protobuf
                | System::Flatbuffers
                | System::Rkyv
                | System::CornflakesProtobuf
        )
    }
}

/// What a server has counted. Serialized as one JSON object with these
/// fields (see [`ServerStats::to_json_line`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerStats {
    /// Requests answered.
    pub handled: u64,
    /// Requests dropped because they could not be decoded.
    pub malformed: u64,
    /// Responses dropped because the client did not make room in time (its
    /// connection backlogged: it is not reading) or had gone.
    pub dropped_full: u64,
    /// Responses that could not be sent for another reason (no buffer).
    pub send_failed: u64,
    /// Nanoseconds spent on batches that held requests: receiving,
    /// handling, sending and reaping completions, not idle polling. On a
    /// machine where the load generator saturates before the server,
    /// `handled / busy_ns` still tells how fast the server could go.
    pub busy_ns: u64,
}

impl ServerStats {
    /// The counters as one line of JSON, e.g.
    /// `{"handled":7,"malformed":1,"dropped_full":2,"send_failed":3,"busy_ns":4}`:
    /// what a server process prints for its parent.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("integer fields always serialize")
    }

    /// Parses a line [`to_json_line`](Self::to_json_line) wrote; `None`
    /// for any other line (a server's `READY` line, a truncated object).
    pub fn from_json_line(line: &str) -> Option<Self> {
        serde_json::from_str(line.trim()).ok()
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &ServerStats) {
        self.handled += other.handled;
        self.malformed += other.malformed;
        self.dropped_full += other.dropped_full;
        self.send_failed += other.send_failed;
        self.busy_ns += other.busy_ns;
    }

    /// What happened between `earlier` and `self` (counters only grow).
    pub fn since(&self, earlier: &ServerStats) -> ServerStats {
        ServerStats {
            handled: self.handled.saturating_sub(earlier.handled),
            malformed: self.malformed.saturating_sub(earlier.malformed),
            dropped_full: self.dropped_full.saturating_sub(earlier.dropped_full),
            send_failed: self.send_failed.saturating_sub(earlier.send_failed),
            busy_ns: self.busy_ns.saturating_sub(earlier.busy_ns),
        }
    }

    /// Requests per second of busy time: how fast the server could serve
    /// if its clients kept it busy all the time.
    pub fn busy_capacity_rps(&self) -> Option<f64> {
        (self.busy_ns > 0 && self.handled > 0).then(|| self.handled as f64 / (self.busy_ns as f64 / 1e9))
    }
}

/// How long one `wait` lasts before the loop checks `keep_going` again.
const WAIT: Duration = Duration::from_millis(100);

/// Serves requests with `system` until `keep_going` returns false or the
/// datapath fails. Malformed requests are dropped and counted; one request
/// never stops the server. The hybrid systems use this machine's default
/// threshold ([`machine_threshold`]).
pub fn serve<D: Datapath>(
    dp: &mut D,
    store: &mut Store,
    system: System,
    keep_going: impl FnMut(&ServerStats) -> bool,
) -> Result<ServerStats, RecvError> {
    serve_with_threshold(dp, store, system, machine_threshold().default, keep_going)
}

/// [`serve`], with the zero-copy threshold of the hybrid systems
/// (`cornflakes`, `cornflakes-no-sas`) given; the ablations keep theirs
/// (0 and never).
pub fn serve_with_threshold<D: Datapath>(
    dp: &mut D,
    store: &mut Store,
    system: System,
    threshold: usize,
    keep_going: impl FnMut(&ServerStats) -> bool,
) -> Result<ServerStats, RecvError> {
    serve_with_policy(dp, store, system, ThresholdPolicy::Fixed(threshold), keep_going).map(|(stats, _)| stats)
}

/// How the hybrid systems choose their zero-copy threshold.
#[derive(Clone, Debug)]
pub enum ThresholdPolicy {
    /// This many bytes, all along.
    Fixed(usize),
    /// Found and followed while serving ([`AdaptiveThreshold`]).
    Adaptive(AdaptiveConfig),
    /// Takes turns, `slice_requests` requests each, between `thresholds`
    /// (and then the adaptive controller, when there is one), and counts
    /// each turn's busy time: an A/B test in one process, where a stall of
    /// the machine or a change of load falls on all of them alike (`cf
    /// thresholds --interleaved`, `cf calibrate`). The controller sees only
    /// its own turns.
    Interleaved {
        /// Requests per turn.
        slice_requests: u64,
        /// Requests at the start of each turn that are not counted: they
        /// pay for the caches the previous turn left (after a copying turn
        /// the next one measured 3-4 % slower than the same threshold in
        /// another position).
        settle_requests: u64,
        /// The fixed settings that take turns, in this order.
        thresholds: Vec<TurnMode>,
        /// The controller's settings, when it takes a turn too.
        adaptive: Option<AdaptiveConfig>,
    },
}

impl ThresholdPolicy {
    /// `thresholds` (then the controller, when `adaptive`) in turns of
    /// `slice_requests`, the first eighth of each turn not counted.
    pub fn in_turns(slice_requests: u64, thresholds: Vec<TurnMode>, adaptive: Option<AdaptiveConfig>) -> Self {
        ThresholdPolicy::Interleaved { slice_requests, settle_requests: slice_requests / 8, thresholds, adaptive }
    }

    /// Every candidate of the adaptive controller, then the controller.
    pub fn every_candidate_and_adaptive(slice_requests: u64) -> Self {
        let every = ADAPTIVE_CANDIDATES.iter().map(|&t| TurnMode::from(t)).collect();
        Self::in_turns(slice_requests, every, Some(AdaptiveConfig::default()))
    }
}

/// A fixed setting that takes turns: a zero-copy threshold, with or
/// without serialize-and-send (without: the response goes through an
/// intermediate buffer and a segment list, as `cornflakes-no-sas` sends
/// it), so that the two paths can be compared in one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnMode {
    /// Bytes (`usize::MAX`: never zero-copy).
    pub threshold: usize,
    /// Whether responses go out with serialize-and-send.
    pub serialize_and_send: bool,
}

impl From<usize> for TurnMode {
    /// `threshold` with serialize-and-send.
    fn from(threshold: usize) -> Self {
        TurnMode { threshold, serialize_and_send: true }
    }
}

/// What one turn of [`ThresholdPolicy::Interleaved`] cost in total.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TurnCost {
    /// The threshold in bytes, or `None` for the adaptive controller's
    /// turns.
    pub threshold: Option<usize>,
    /// Whether its responses went out with serialize-and-send (the
    /// controller's always do).
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub serialize_and_send: bool,
    /// Requests handled in its turns.
    pub requests: u64,
    /// Busy nanoseconds of its turns.
    pub busy_ns: u64,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

impl TurnCost {
    /// The setting of these turns (`None`: the adaptive controller's).
    pub fn mode(&self) -> Option<TurnMode> {
        self.threshold.map(|threshold| TurnMode { threshold, serialize_and_send: self.serialize_and_send })
    }

    /// Requests per second of busy time in these turns (`None` before any).
    pub fn capacity_rps(&self) -> Option<f64> {
        (self.requests > 0 && self.busy_ns > 0).then(|| self.requests as f64 * 1e9 / self.busy_ns as f64)
    }
}

/// What [`serve_with_policy`] leaves behind besides the counters.
#[derive(Debug, Default)]
pub struct PolicyOutcome {
    /// The controller, when one ran.
    pub adaptive: Option<AdaptiveThreshold>,
    /// Cost per turn, when the policy was [`ThresholdPolicy::Interleaved`].
    pub turns: Vec<TurnCost>,
}

/// The turn-taking of [`ThresholdPolicy::Interleaved`].
struct Turns {
    costs: Vec<TurnCost>,
    /// The order of this round's turns (indices into `costs`).
    order: Vec<usize>,
    /// Position in `order`.
    pos: usize,
    in_slice: u64,
    slice: u64,
    settle: u64,
    /// State of the generator that shuffles each round's order (0: every
    /// round in the given order).
    shuffle: u64,
}

impl Turns {
    /// Turns of `slice` requests for `thresholds`, then for the controller
    /// when `adaptive`; batches that start within a turn's first `settle`
    /// requests are not counted.
    fn new(slice: u64, settle: u64, thresholds: &[TurnMode], adaptive: bool) -> Self {
        let costs: Vec<TurnCost> = thresholds
            .iter()
            .map(|&m| Some(m))
            .chain(adaptive.then_some(None))
            .map(|mode| TurnCost {
                threshold: mode.map(|m| m.threshold),
                serialize_and_send: mode.is_none_or(|m| m.serialize_and_send),
                requests: 0,
                busy_ns: 0,
            })
            .collect();
        let order = (0..costs.len()).collect();
        Turns { costs, order, pos: 0, in_slice: 0, slice: slice.max(1), settle, shuffle: 0 }
    }

    /// Each round after the first in a new order, drawn from `seed`
    /// (non-zero). A turn measured a few percent slower right after a
    /// copying turn, whatever its threshold, even with the settling: in a
    /// fixed order that falls on the same threshold in every round.
    fn shuffled(mut self, seed: u64) -> Self {
        self.shuffle = seed | 1;
        self
    }

    fn current(&self) -> Option<TurnMode> {
        self.costs[self.order[self.pos]].mode()
    }

    /// The current turn's setting; in the controller's turn, `threshold`
    /// (the controller's) with that turn's send path.
    fn setting(&self, threshold: usize) -> TurnMode {
        let c = &self.costs[self.order[self.pos]];
        TurnMode { threshold: c.threshold.unwrap_or(threshold), serialize_and_send: c.serialize_and_send }
    }

    /// Every turn, the controller's too, without serialize-and-send (a
    /// system that has none: no turn switches it on).
    fn without_sas(mut self) -> Self {
        self.costs.iter_mut().for_each(|c| c.serialize_and_send = false);
        self
    }

    /// The next round's order: a Fisher-Yates shuffle with xorshift64.
    fn reshuffle(&mut self) {
        if self.shuffle == 0 {
            return;
        }
        for i in (1..self.order.len()).rev() {
            let x = &mut self.shuffle;
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            self.order.swap(i, (*x % (i as u64 + 1)) as usize);
        }
    }

    /// Records a batch; the next turn's setting (`None` inside: the
    /// controller's) when the turn ends.
    fn record(&mut self, requests: u64, busy_ns: u64) -> Option<Option<TurnMode>> {
        if self.in_slice >= self.settle {
            let c = &mut self.costs[self.order[self.pos]];
            (c.requests, c.busy_ns) = (c.requests + requests, c.busy_ns + busy_ns);
        }
        self.in_slice += requests;
        if self.in_slice < self.slice {
            return None;
        }
        self.in_slice = 0;
        self.pos += 1;
        if self.pos == self.order.len() {
            self.pos = 0;
            self.reshuffle();
        }
        Some(self.current())
    }
}

/// [`serve`], with the hybrid systems' threshold chosen by `policy`.
/// Returns the controller too when it was adaptive (what it chose, what it
/// measured).
pub fn serve_with_policy<D: Datapath>(
    dp: &mut D,
    store: &mut Store,
    system: System,
    policy: ThresholdPolicy,
    mut keep_going: impl FnMut(&ServerStats) -> bool,
) -> Result<(ServerStats, PolicyOutcome), RecvError> {
    let hybrid = matches!(system, System::Cornflakes | System::CornflakesNoSas);
    let (first, mut adaptive, mut turns) = match policy {
        ThresholdPolicy::Fixed(t) => (t.into(), None, None),
        ThresholdPolicy::Adaptive(config) if hybrid => {
            let a = AdaptiveThreshold::new(config);
            (a.threshold().into(), Some(a), None)
        }
        ThresholdPolicy::Interleaved { slice_requests, settle_requests, thresholds, adaptive } if hybrid => {
            let mut turns = Turns::new(slice_requests, settle_requests, &thresholds, adaptive.is_some())
                .shuffled(0x9e37_79b9_7f4a_7c15);
            if system == System::CornflakesNoSas {
                turns = turns.without_sas();
            }
            if turns.costs.is_empty() {
                return Err(RecvError::Io(std::io::Error::other("interleaved turns need at least one threshold")));
            }
            let adaptive = adaptive.map(AdaptiveThreshold::new);
            let first = turns.setting(adaptive.as_ref().map_or(0, AdaptiveThreshold::threshold));
            (first, adaptive, Some(turns))
        }
        ThresholdPolicy::Adaptive(_) | ThresholdPolicy::Interleaved { .. } => (0.into(), None, None),
    };
    // Only the turns change serialize-and-send; otherwise the system says.
    let sas = turns.is_some().then_some(first.serialize_and_send);
    let control = Control { adaptive: adaptive.as_mut(), turns: turns.as_mut() };
    let stats = serve_system(dp, store, system, first.threshold, sas, control, &mut keep_going)?;
    Ok((stats, PolicyOutcome { adaptive, turns: turns.map(|t| t.costs).unwrap_or_default() }))
}

/// Who changes the threshold while serving.
struct Control<'a> {
    adaptive: Option<&'a mut AdaptiveThreshold>,
    turns: Option<&'a mut Turns>,
}

impl Control<'_> {
    /// After a batch: the setting to use from now on, when it changes.
    fn after_batch(&mut self, requests: u64, busy_ns: u64) -> Option<TurnMode> {
        let Some(turns) = self.turns.as_deref_mut() else {
            return self.adaptive.as_deref_mut().and_then(|a| a.observe(requests, busy_ns)).map(TurnMode::from);
        };
        // The controller learns only from its own turns.
        let changed = if turns.current().is_none() {
            self.adaptive.as_deref_mut().and_then(|a| a.observe(requests, busy_ns))
        } else {
            None
        };
        match turns.record(requests, busy_ns) {
            Some(Some(fixed)) => Some(fixed),
            Some(None) => self.adaptive.as_deref().map(|a| turns.setting(a.threshold())),
            // Only in the controller's turn.
            None => changed.map(|t| turns.setting(t)),
        }
    }
}

fn serve_system<D: Datapath>(
    dp: &mut D,
    store: &mut Store,
    system: System,
    threshold: usize,
    sas: Option<bool>,
    control: Control<'_>,
    mut keep_going: &mut dyn FnMut(&ServerStats) -> bool,
) -> Result<ServerStats, RecvError> {
    // Cornflakes' arena recovers the store's values (in `pool`, sent
    // zero-copy on purpose); the baselines build whole responses per
    // request, which go in the scratch pool (on shm never mapped by a peer).
    let pool = dp.pool().clone();
    let scratch = dp.scratch_pool().clone();
    match system {
        System::Cornflakes => {
            run(dp, store, CornflakesServer::new(&pool, threshold, sas.unwrap_or(true)), &mut keep_going, control)
        }
        System::CornflakesOnlySg => {
            run(dp, store, CornflakesServer::new(&pool, ONLY_ZERO_COPY, true), &mut keep_going, control)
        }
        System::CornflakesOnlyCopy => {
            run(dp, store, CornflakesServer::new(&pool, ONLY_COPY, true), &mut keep_going, control)
        }
        System::CornflakesNoSas => {
            run(dp, store, CornflakesServer::new(&pool, threshold, sas.unwrap_or(false)), &mut keep_going, control)
        }
        System::Raw => run(dp, store, RawEchoServer, &mut keep_going, control),
        System::CornflakesProtobuf => {
            run(dp, store, crate::codec::protowire::ProtowireServer::new(&pool, threshold), &mut keep_going, control)
        }
        System::Protobuf => run(dp, store, crate::codec::prost::ProstServer::new(&scratch), &mut keep_going, control),
        System::Flatbuffers => {
            run(dp, store, crate::codec::flatbuffers::FlatbuffersServer::new(&scratch), &mut keep_going, control)
        }
        System::Capnp => run(dp, store, crate::codec::capnp::CapnpServer::new(&scratch), &mut keep_going, control),
        System::Rkyv => run(dp, store, crate::codec::rkyv::RkyvServer::new(&scratch), &mut keep_going, control),
        System::TokioProst => Err(RecvError::Io(std::io::Error::other(
            "tokio-prost is its own tokio server (crate cornflakes-kv-tokio), not a codec on a datapath",
        ))),
    }
}

/// Counts a handled request in `stats`; only a datapath failure ends the
/// loop.
fn tally(result: Result<(), HandleError>, stats: &mut ServerStats) -> Result<(), RecvError> {
    match result {
        Ok(()) => stats.handled += 1,
        Err(HandleError::Malformed) => stats.malformed += 1,
        Err(HandleError::Send(SendError::Full | SendError::Backlogged(_) | SendError::Closed(_))) => {
            stats.dropped_full += 1
        }
        Err(HandleError::Send(SendError::Io(e))) => return Err(RecvError::Io(e)),
        Err(HandleError::Send(_)) => stats.send_failed += 1,
    }
    Ok(())
}

fn run<D: Datapath, C: ServerCodec>(
    dp: &mut D,
    store: &mut Store,
    mut codec: C,
    keep_going: &mut dyn FnMut(&ServerStats) -> bool,
    mut control: Control<'_>,
) -> Result<ServerStats, RecvError> {
    let mut stats = ServerStats::default();
    let mut rx: Vec<Received> = Vec::with_capacity(32);
    // A datapath that leaves parts of requests in the client's pool (shm,
    // trusted peers) hands them to the codec as they are.
    let in_place = dp.receives_in_place();
    let mut rx_in_place: Vec<InPlace> = Vec::with_capacity(32);
    // With the timeline enabled (`cf tails`): when the loop last looked at
    // the clock, to record the moments it lost its core between batches.
    let mut last_ns = 0;
    while keep_going(&stats) {
        let batch_start = Instant::now();
        if timeline::is_enabled() {
            timeline::note_clock_read(Kind::ServerGap, &mut last_ns, timeline::ns_of(batch_start));
        }
        let got = if in_place { dp.recv_batch_in_place(&mut rx_in_place, 32) } else { dp.recv_batch(&mut rx, 32) };
        match got {
            Ok(0) => {
                dp.wait(WAIT)?;
                // Time in `wait` is idle (it records its own gaps).
                last_ns = 0;
                continue;
            }
            Ok(_) => {}
            // A client that goes away ends its connection, not the server.
            Err(RecvError::Closed(_)) => continue,
            Err(e) => return Err(e),
        }
        let batch = (rx.len() + rx_in_place.len()) as u64;
        for r in rx.drain(..) {
            tally(codec.handle(dp, store, &r), &mut stats)?;
        }
        for m in rx_in_place.drain(..) {
            tally(codec.handle_in_place(dp, store, &m), &mut stats)?;
        }
        codec.end_batch();
        // Errors here are the peer's (closed) or back-pressure; the next
        // receive reports a real failure.
        crate::phase::flush(|| {
            let _ = dp.flush();
            let _ = dp.poll_completions();
        });
        let busy = batch_start.elapsed().as_nanos() as u64;
        if timeline::is_enabled() {
            let start_ns = timeline::ns_of(batch_start);
            if busy > timeline::GAP_NS {
                timeline::record(Kind::ServerBatch, start_ns, start_ns + busy);
            }
            last_ns = start_ns + busy;
        }
        stats.busy_ns += busy;
        if let Some(m) = control.after_batch(batch, busy) {
            codec.set_threshold(m.threshold);
            if control.turns.is_some() {
                codec.set_serialize_and_send(m.serialize_and_send);
            }
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::{Control, ServerStats, TurnCost, TurnMode, Turns};
    use cornflakes::field::{AdaptiveConfig, AdaptiveThreshold, ADAPTIVE_CANDIDATES, ONLY_COPY, ONLY_ZERO_COPY};

    /// Fixed turns with serialize-and-send.
    fn modes(thresholds: &[usize]) -> Vec<TurnMode> {
        thresholds.iter().map(|&t| t.into()).collect()
    }

    fn sas(threshold: usize) -> Option<TurnMode> {
        Some(threshold.into())
    }

    #[test]
    fn interleaved_turns_go_round_and_the_controller_learns_only_from_its_own() {
        let mut adaptive = AdaptiveThreshold::new(AdaptiveConfig { epoch_requests: 8, hold_epochs: 2, margin: 0.02 });
        let mut turns = Turns::new(10, 0, &modes(&ADAPTIVE_CANDIDATES), true);
        let mut control = Control { adaptive: Some(&mut adaptive), turns: Some(&mut turns) };
        // Two rounds of 11 turns, one batch of 10 requests each; a turn's
        // cost is its position, so each total is identifiable.
        let mut seen = Vec::new();
        for round in 0..2 {
            for turn in 0..=ADAPTIVE_CANDIDATES.len() {
                let next = control.after_batch(10, 10 * (turn as u64 + 1) + round);
                seen.push(next);
            }
        }
        // Each fixed turn hands over to the next candidate; the last fixed
        // one to the controller's current threshold (its survey starts at
        // the smallest); the controller's turn back to the first.
        assert_eq!(seen[0], sas(ADAPTIVE_CANDIDATES[1]));
        assert_eq!(seen[ADAPTIVE_CANDIDATES.len() - 1], sas(ADAPTIVE_CANDIDATES[0]));
        assert_eq!(seen[ADAPTIVE_CANDIDATES.len()], sas(ADAPTIVE_CANDIDATES[0]));
        let costs = &turns.costs;
        assert_eq!(costs.len(), ADAPTIVE_CANDIDATES.len() + 1);
        assert!(costs.iter().all(|c| c.requests == 20), "{costs:?}");
        assert_eq!(costs[2].busy_ns, 30 + 31, "{costs:?}");
        assert_eq!(costs.last().unwrap().threshold, None);
        // The controller saw only its two turns' batches: with slices of
        // one request, each ended one slice of its survey, which is now at
        // its third candidate (after 22 batches it would be far beyond).
        assert_eq!(adaptive.costs().count(), 0, "no measurement has ended yet");
        assert_eq!(adaptive.threshold(), ADAPTIVE_CANDIDATES[2]);
    }

    #[test]
    fn turns_without_the_controller_alternate_between_the_thresholds() {
        // Turns of 4 requests, of which the first 2 settle uncounted.
        let mut turns = Turns::new(4, 2, &modes(&[ONLY_ZERO_COPY, ONLY_COPY]), false);
        let mut control = Control { adaptive: None, turns: Some(&mut turns) };
        assert_eq!(control.after_batch(2, 5), None, "half a turn, settling");
        assert_eq!(control.after_batch(2, 7), sas(ONLY_COPY));
        assert_eq!(control.after_batch(1, 1000), None, "settling");
        assert_eq!(control.after_batch(4, 40), sas(ONLY_ZERO_COPY), "started within the settling: not counted");
        assert_eq!(control.after_batch(1, 1000), None);
        assert_eq!(control.after_batch(1, 1000), None);
        assert_eq!(control.after_batch(5, 6), sas(ONLY_COPY), "a batch past the slice ends the turn");
        let expected = [(Some(ONLY_ZERO_COPY), 7, 13), (Some(ONLY_COPY), 0, 0)]
            .map(|(threshold, requests, busy_ns)| TurnCost { threshold, serialize_and_send: true, requests, busy_ns });
        assert_eq!(turns.costs, expected);
    }

    #[test]
    fn one_threshold_takes_turns_with_and_without_serialize_and_send() {
        let without = TurnMode { threshold: 512, serialize_and_send: false };
        let mut turns = Turns::new(2, 0, &[512.into(), without], false);
        let mut control = Control { adaptive: None, turns: Some(&mut turns) };
        assert_eq!(control.after_batch(2, 10), Some(without), "the second turn switches it off");
        assert_eq!(control.after_batch(2, 30), sas(512), "and the next round on again");
        let costs = &turns.costs;
        assert_eq!((costs[0].mode(), costs[0].busy_ns), (sas(512), 10));
        assert_eq!((costs[1].mode(), costs[1].busy_ns), (Some(without), 30));
        // A system without serialize-and-send is never switched to it.
        let mut never = Turns::new(2, 0, &[without, 512.into()], false).without_sas();
        let mut control = Control { adaptive: None, turns: Some(&mut never) };
        assert_eq!(control.after_batch(2, 10), Some(TurnMode { threshold: 512, serialize_and_send: false }));
        // In the servers' JSON lines a turn without it says so; one with it
        // reads as it did before the field existed.
        let with = serde_json::to_string(&costs[0]).unwrap();
        assert!(!with.contains("serialize_and_send"), "{with}");
        let off = serde_json::to_string(&costs[1]).unwrap();
        assert!(off.contains(r#""serialize_and_send":false"#), "{off}");
        let back: Vec<TurnCost> = serde_json::from_str(&format!("[{with},{off}]")).unwrap();
        assert_eq!(&back, costs);
    }

    #[test]
    fn shuffled_rounds_give_every_turn_its_slice_in_a_new_order() {
        let mut turns = Turns::new(1, 0, &modes(&[1, 2, 3, 4, 5]), false).shuffled(7);
        let mut rounds = Vec::new();
        for _ in 0..20 {
            let round: Vec<usize> = (0..5)
                .map(|_| {
                    let t = turns.current().unwrap().threshold;
                    turns.record(1, t as u64);
                    t
                })
                .collect();
            let mut sorted = round.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [1, 2, 3, 4, 5], "each round has every turn once");
            rounds.push(round);
        }
        assert_eq!(rounds[0], [1, 2, 3, 4, 5], "the first round in the given order");
        rounds.sort();
        rounds.dedup();
        assert!(rounds.len() > 10, "the order changes: {rounds:?}");
        assert!(turns.costs.iter().all(|c| c.requests == 20 && c.busy_ns == 20 * c.threshold.unwrap() as u64));
    }

    #[test]
    fn stats_survive_their_json_line() {
        let c = ServerStats { handled: 7, malformed: 1, dropped_full: 2, send_failed: 3, busy_ns: 4 };
        let line = c.to_json_line();
        assert_eq!(line, r#"{"handled":7,"malformed":1,"dropped_full":2,"send_failed":3,"busy_ns":4}"#);
        assert!(!line.contains('\n'), "one line");
        assert_eq!(ServerStats::from_json_line(&line), Some(c));
        assert_eq!(ServerStats::from_json_line(&format!("{line}\n")), Some(c));
        assert_eq!(c.busy_capacity_rps(), Some(7.0 / 4e-9));
        let later = ServerStats { handled: 10, busy_ns: 10, ..c };
        assert_eq!(later.since(&c).busy_capacity_rps(), Some(3.0 / 6e-9));
        assert_eq!(ServerStats::from_json_line("READY /tmp/x"), None);
        assert_eq!(ServerStats::from_json_line(r#"{"handled":"x"}"#), None);
        assert_eq!(ServerStats::from_json_line(r#"{"handled":7}"#), None, "every counter is required");
    }
}
