//! The serving loop, and the systems a server can run.

use std::time::{Duration, Instant};

use cornflakes::field::{machine_threshold, AdaptiveConfig, AdaptiveThreshold, ONLY_COPY, ONLY_ZERO_COPY};
use cornflakes_datapath::{Datapath, Received, RecvError, SendError};

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
#[derive(Clone, Copy, Debug)]
pub enum ThresholdPolicy {
    /// This many bytes, all along.
    Fixed(usize),
    /// Found and followed while serving ([`AdaptiveThreshold`]).
    Adaptive(AdaptiveConfig),
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
) -> Result<(ServerStats, Option<AdaptiveThreshold>), RecvError> {
    let hybrid = matches!(system, System::Cornflakes | System::CornflakesNoSas);
    let (threshold, mut adaptive) = match policy {
        ThresholdPolicy::Fixed(t) => (t, None),
        ThresholdPolicy::Adaptive(config) if hybrid => {
            let a = AdaptiveThreshold::new(config);
            (a.threshold(), Some(a))
        }
        ThresholdPolicy::Adaptive(_) => (0, None),
    };
    let stats = serve_system(dp, store, system, threshold, adaptive.as_mut(), &mut keep_going)?;
    Ok((stats, adaptive))
}

fn serve_system<D: Datapath>(
    dp: &mut D,
    store: &mut Store,
    system: System,
    threshold: usize,
    adaptive: Option<&mut AdaptiveThreshold>,
    mut keep_going: &mut dyn FnMut(&ServerStats) -> bool,
) -> Result<ServerStats, RecvError> {
    // Cornflakes' arena recovers the store's values (in `pool`, sent
    // zero-copy on purpose); the baselines build whole responses per
    // request, which go in the scratch pool (on shm never mapped by a peer).
    let pool = dp.pool().clone();
    let scratch = dp.scratch_pool().clone();
    match system {
        System::Cornflakes => run(dp, store, CornflakesServer::new(&pool, threshold, true), &mut keep_going, adaptive),
        System::CornflakesOnlySg => {
            run(dp, store, CornflakesServer::new(&pool, ONLY_ZERO_COPY, true), &mut keep_going, adaptive)
        }
        System::CornflakesOnlyCopy => {
            run(dp, store, CornflakesServer::new(&pool, ONLY_COPY, true), &mut keep_going, adaptive)
        }
        System::CornflakesNoSas => {
            run(dp, store, CornflakesServer::new(&pool, threshold, false), &mut keep_going, adaptive)
        }
        System::Raw => run(dp, store, RawEchoServer, &mut keep_going, adaptive),
        System::CornflakesProtobuf => {
            run(dp, store, crate::codec::protowire::ProtowireServer::new(&pool, threshold), &mut keep_going, adaptive)
        }
        System::Protobuf => run(dp, store, crate::codec::prost::ProstServer::new(&scratch), &mut keep_going, adaptive),
        System::Flatbuffers => {
            run(dp, store, crate::codec::flatbuffers::FlatbuffersServer::new(&scratch), &mut keep_going, adaptive)
        }
        System::Capnp => run(dp, store, crate::codec::capnp::CapnpServer::new(&scratch), &mut keep_going, adaptive),
        System::Rkyv => run(dp, store, crate::codec::rkyv::RkyvServer::new(&scratch), &mut keep_going, adaptive),
        System::TokioProst => Err(RecvError::Io(std::io::Error::other(
            "tokio-prost is its own tokio server (crate cornflakes-kv-tokio), not a codec on a datapath",
        ))),
    }
}

fn run<D: Datapath, C: ServerCodec>(
    dp: &mut D,
    store: &mut Store,
    mut codec: C,
    keep_going: &mut dyn FnMut(&ServerStats) -> bool,
    mut adaptive: Option<&mut AdaptiveThreshold>,
) -> Result<ServerStats, RecvError> {
    let mut stats = ServerStats::default();
    let mut rx: Vec<Received> = Vec::with_capacity(32);
    while keep_going(&stats) {
        let batch_start = Instant::now();
        match dp.recv_batch(&mut rx, 32) {
            Ok(0) => {
                dp.wait(WAIT)?;
                continue;
            }
            Ok(_) => {}
            // A client that goes away ends its connection, not the server.
            Err(RecvError::Closed(_)) => continue,
            Err(e) => return Err(e),
        }
        let batch = rx.len() as u64;
        for r in rx.drain(..) {
            match codec.handle(dp, store, &r) {
                Ok(()) => stats.handled += 1,
                Err(HandleError::Malformed) => stats.malformed += 1,
                Err(HandleError::Send(SendError::Full | SendError::Backlogged(_) | SendError::Closed(_))) => {
                    stats.dropped_full += 1
                }
                Err(HandleError::Send(SendError::Io(e))) => return Err(RecvError::Io(e)),
                Err(HandleError::Send(_)) => stats.send_failed += 1,
            }
        }
        codec.end_batch();
        // Errors here are the peer's (closed) or back-pressure; the next
        // receive reports a real failure.
        crate::phase::flush(|| {
            let _ = dp.flush();
            let _ = dp.poll_completions();
        });
        let busy = batch_start.elapsed().as_nanos() as u64;
        stats.busy_ns += busy;
        if let Some(t) = adaptive.as_deref_mut().and_then(|a| a.observe(batch, busy)) {
            codec.set_threshold(t);
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::ServerStats;

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
