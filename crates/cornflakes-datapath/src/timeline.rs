//! A timeline of the moments a busy loop lost its core, for explaining
//! tail latencies (`cf tails`).
//!
//! A request is slow when something stood between its arrival and its
//! response: the client's or the server's core was taken away (an
//! interrupt, the hypervisor, another process), the server was asleep, or
//! the server was busy with a long batch. Loops that spin anyway (the shm
//! datapath's wait, the key-value server, the load generator) read the
//! clock often; with the timeline enabled they record every gap between
//! two reads longer than [`GAP_NS`], every sleep and every long batch as a
//! [`Span`] on `CLOCK_MONOTONIC`, which every process of the host shares,
//! so a server's spans and a client's slow requests line up.
//!
//! The timeline is process-wide and **off** unless [`enable`] was called:
//! then recording costs a relaxed load where a loop already reads the
//! clock. It holds at most the capacity given to `enable` (later spans
//! are counted in [`lost`], not kept).

use std::fmt;
use std::io::{self, BufRead, Write};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// A gap between two clock reads of a spinning loop longer than this is
/// time the loop lost its core (20 µs: an idle loop reads the clock every
/// few microseconds at most; the p99 target is 50 µs).
pub const GAP_NS: u64 = 20_000;

/// What a span of the timeline was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A server loop lost its core (two clock reads more than [`GAP_NS`]
    /// apart while spinning).
    ServerGap,
    /// The server slept in the kernel, from announcing sleep to waking.
    ServerSleep,
    /// The server spent more than [`GAP_NS`] on one batch of requests.
    ServerBatch,
    /// A client loop did not come round for longer than [`GAP_NS`]: its
    /// core was taken away, or one pass had that much work.
    ClientGap,
    /// A request slower than the bound its recorder chose, from its
    /// scheduled arrival to its response.
    Slow,
}

impl Kind {
    const ALL: [Kind; 5] = [Kind::ServerGap, Kind::ServerSleep, Kind::ServerBatch, Kind::ClientGap, Kind::Slow];

    /// The name in the TSV form.
    pub fn name(self) -> &'static str {
        match self {
            Kind::ServerGap => "server-gap",
            Kind::ServerSleep => "server-sleep",
            Kind::ServerBatch => "server-batch",
            Kind::ClientGap => "client-gap",
            Kind::Slow => "slow",
        }
    }
}

impl FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Kind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| format!("unknown span kind {s:?}"))
    }
}

/// One interval of the timeline, nanoseconds of `CLOCK_MONOTONIC`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// What it was.
    pub kind: Kind,
    /// Its start.
    pub start_ns: u64,
    /// Its end (`>= start_ns`).
    pub end_ns: u64,
}

impl Span {
    /// Its length in nanoseconds.
    pub fn len_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// Whether it and `other` share a moment.
    pub fn overlaps(&self, other: &Span) -> bool {
        self.start_ns < other.end_ns && other.start_ns < self.end_ns
    }
}

impl fmt::Display for Span {
    /// `kind<TAB>start<TAB>end`, one line of the TSV form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\t{}\t{}", self.kind.name(), self.start_ns, self.end_ns)
    }
}

impl FromStr for Span {
    type Err = String;
    fn from_str(line: &str) -> Result<Self, String> {
        let mut it = line.trim_end().split('\t');
        let (Some(kind), Some(start), Some(end), None) = (it.next(), it.next(), it.next(), it.next()) else {
            return Err(format!("not a span line (kind, start, end): {line:?}"));
        };
        let num = |s: &str| s.parse::<u64>().map_err(|e| format!("bad time {s:?} in {line:?}: {e}"));
        let span = Span { kind: kind.parse()?, start_ns: num(start)?, end_ns: num(end)? };
        if span.end_ns < span.start_ns {
            return Err(format!("a span that ends before it starts: {line:?}"));
        }
        Ok(span)
    }
}

static ENABLED: AtomicBool = AtomicBool::new(false);
static LOST: AtomicU64 = AtomicU64::new(0);
static SPANS: Mutex<Vec<Span>> = Mutex::new(Vec::new());
static CAPACITY: AtomicU64 = AtomicU64::new(0);
/// An `Instant` and the `CLOCK_MONOTONIC` reading taken right after it,
/// to place `Instant`s on the shared clock.
static BASE: OnceLock<(Instant, u64)> = OnceLock::new();

/// Starts recording, keeping at most `capacity` spans until [`take`].
pub fn enable(capacity: usize) {
    BASE.get_or_init(|| (Instant::now(), now_ns()));
    CAPACITY.store(capacity as u64, Ordering::Relaxed);
    ENABLED.store(true, Ordering::Release);
}

/// Whether [`enable`] was called: loops test this before reading the
/// clock for the timeline.
#[inline]
pub fn is_enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Now, in nanoseconds of `CLOCK_MONOTONIC` (shared by every process).
#[inline]
pub fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// `at` in nanoseconds of `CLOCK_MONOTONIC` (`Instant` is that clock on
/// Linux, but does not say its value); 0 before [`enable`].
pub fn ns_of(at: Instant) -> u64 {
    let Some(&(base, base_ns)) = BASE.get() else { return 0 };
    match at.checked_duration_since(base) {
        Some(d) => base_ns.saturating_add(d.as_nanos() as u64),
        None => base_ns.saturating_sub(base.duration_since(at).as_nanos() as u64),
    }
}

/// Records a span when the timeline is enabled (and has room).
#[cold]
pub fn record(kind: Kind, start_ns: u64, end_ns: u64) {
    if !is_enabled() {
        return;
    }
    let mut spans = SPANS.lock().unwrap_or_else(|e| e.into_inner());
    if spans.len() as u64 >= CAPACITY.load(Ordering::Relaxed) {
        LOST.fetch_add(1, Ordering::Relaxed);
        return;
    }
    spans.push(Span { kind, start_ns, end_ns: end_ns.max(start_ns) });
}

/// Records a gap of a spinning loop if `now_ns - *last_ns` exceeds
/// [`GAP_NS`]; `*last_ns` becomes `now_ns`.
#[inline]
pub fn note_clock_read(kind: Kind, last_ns: &mut u64, now_ns: u64) {
    if now_ns.saturating_sub(*last_ns) > GAP_NS && *last_ns != 0 {
        record(kind, *last_ns, now_ns);
    }
    *last_ns = now_ns;
}

/// The spans recorded since the last call, in the order recorded.
pub fn take() -> Vec<Span> {
    std::mem::take(&mut *SPANS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Spans not kept because the timeline was full.
pub fn lost() -> u64 {
    LOST.load(Ordering::Relaxed)
}

/// Writes spans one per line (see [`Span`]'s `Display`).
pub fn write_tsv(spans: &[Span], out: &mut impl Write) -> io::Result<()> {
    for s in spans {
        writeln!(out, "{s}")?;
    }
    Ok(())
}

/// Reads what [`write_tsv`] wrote; an unreadable line is an error that
/// names it.
pub fn read_tsv(input: impl BufRead) -> io::Result<Vec<Span>> {
    let mut spans = Vec::new();
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        spans.push(line.parse().map_err(io::Error::other)?);
    }
    Ok(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_survive_their_tsv_form_and_bad_lines_are_refused() {
        let spans = vec![
            Span { kind: Kind::ServerGap, start_ns: 5, end_ns: 30_000 },
            Span { kind: Kind::Slow, start_ns: 7, end_ns: 9 },
            Span { kind: Kind::ClientGap, start_ns: 1, end_ns: 1 },
        ];
        let mut out = Vec::new();
        write_tsv(&spans, &mut out).unwrap();
        assert_eq!(read_tsv(&out[..]).unwrap(), spans);
        for bad in ["slow\t1", "slow\t1\t2\t3", "nap\t1\t2", "slow\t2\t1", "slow\tx\t2"] {
            assert!(read_tsv(bad.as_bytes()).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn overlap_is_a_shared_moment() {
        let s = |a, b| Span { kind: Kind::Slow, start_ns: a, end_ns: b };
        assert!(s(0, 10).overlaps(&s(9, 20)));
        assert!(!s(0, 10).overlaps(&s(10, 20)));
        assert!(s(5, 6).overlaps(&s(0, 100)));
    }

    #[test]
    fn gaps_are_recorded_only_when_enabled_long_and_not_from_the_first_read() {
        // The only test of this file that touches the process-wide state.
        record(Kind::ServerGap, 0, 1);
        assert!(take().is_empty(), "recorded while disabled");
        enable(2);
        let mut last = 0;
        note_clock_read(Kind::ServerGap, &mut last, 1_000_000);
        note_clock_read(Kind::ServerGap, &mut last, 1_000_000 + GAP_NS);
        note_clock_read(Kind::ServerGap, &mut last, 1_000_001 + 2 * GAP_NS);
        assert_eq!(
            take(),
            vec![Span { kind: Kind::ServerGap, start_ns: 1_000_000 + GAP_NS, end_ns: 1_000_001 + 2 * GAP_NS }]
        );
        for i in 0..3 {
            record(Kind::Slow, i, i + 1);
        }
        assert_eq!(take().len(), 2);
        assert_eq!(lost(), 1);
        let now = Instant::now();
        let ns = now_ns();
        assert!(ns_of(now).abs_diff(ns) < 1_000_000_000, "Instant placed on the shared clock");
    }
}
