//! `cf tails`: where the slow requests of a load point spent their time
//! (issue 12, item 2: latency at low and moderate load).
//!
//! A p50 of 2-4 µs next to a p99 of hundreds says that a few requests met
//! something the others did not. This command finds what, request by
//! request. The server runs with its timeline on (`cf kv-server --timeline`,
//! see [`cornflakes_datapath::timeline`]): its loops record every moment
//! they lost their core for more than 20 µs, every sleep and every batch
//! longer than 20 µs. The load generator records its own lost moments and
//! every request slower than [`SLOW_NS`] (50 µs, the p99 target),
//! from its scheduled arrival to its response. All of it is on
//! `CLOCK_MONOTONIC`, so each slow request can be matched with what
//! overlapped it:
//!
//! - **client gap**: the load generator's loop did not come round (its core
//!   was taken, or a pass had that much work): the response waited in the
//!   ring, or the request was sent late;
//! - **server gap**: the server's core was taken away;
//! - **server asleep**: the server slept in the kernel (after its adaptive
//!   spin) and had to be woken;
//! - **long batch**: the server spent more than 20 µs on one batch;
//! - **none of these**: the cause is elsewhere (queueing behind requests
//!   that met one of the above, or a cause the timeline does not see).
//!
//! Before the points, every core spins alone for a while with nothing
//! else running (as `cf hiccup`): what the machine takes from a loop that
//! never yields. If the machine takes 3 % of each core in gaps of 20-300 µs,
//! about 6 % of requests overlap a gap on one side or the other, and no
//! p99 below the length of those gaps is possible whatever the server does.

use std::collections::BTreeMap;
use std::io::{BufReader, Write as _};
use std::path::PathBuf;
use std::time::Duration;

use cornflakes_datapath::timeline::{self, Kind, Span};
use cornflakes_kv::System;
use cornflakes_workloads::WorkloadSpec;
use serde::Serialize;

use crate::child::{KvServer, ServerPlace};
use crate::gap_trains::{self, GapTrain};
use crate::hiccup::{self, CoreHiccups};
use crate::loadgen::{run_point, LoadConfig, PointResult, SLOW_NS};
use crate::transport::{Target, Transport};
use crate::Error;

/// What `cf tails` runs.
#[derive(Clone, Debug)]
pub struct TailsConfig {
    /// Serializer.
    pub system: System,
    /// Workload.
    pub workload: WorkloadSpec,
    /// Datapath.
    pub transport: Transport,
    /// Every point's settings (its rate is set per point).
    pub point: LoadConfig,
    /// Offered loads as fractions of the closed-loop probe, when `rates`
    /// is empty.
    pub fractions: Vec<f64>,
    /// Offered loads, transactions per second (no probe then).
    pub rates: Vec<f64>,
    /// Each load this many times.
    pub repeats: usize,
    /// Seconds each core spins alone first (0: skip).
    pub machine_seconds: f64,
    /// Core of the server.
    pub server_core: usize,
    /// Core of the load generator.
    pub client_core: usize,
    /// Folder for `summary.json` and each point's timeline.
    pub out: PathBuf,
}

/// Where one point's slow requests met something.
#[derive(Clone, Debug, Serialize)]
pub struct TailPoint {
    /// The point as the load generator measured it.
    pub offered_rps: f64,
    /// See [`PointResult::achieved`].
    pub achieved_rps: f64,
    /// Latency quantiles, µs.
    pub p50_us: f64,
    /// See `p50_us`.
    pub p99_us: f64,
    /// See `p50_us`.
    pub p999_us: f64,
    /// Requests completed in the recorded window.
    pub completed: u64,
    /// Of them, slower than [`SLOW_NS`].
    pub slow: u64,
    /// Slow requests that overlapped at least one span of each kind, by the
    /// kind's name (a request can count under several).
    pub slow_overlapping: BTreeMap<&'static str, u64>,
    /// Slow requests that overlapped none.
    pub slow_unexplained: u64,
    /// Share of the point's time the client's loop lost in gaps.
    pub client_lost_share: f64,
    /// Share of the point's time the server's loops lost in gaps.
    pub server_lost_share: f64,
    /// Times the server slept during the point.
    pub server_sleeps: u64,
    /// Spans recorded during the point, by kind.
    pub spans: BTreeMap<&'static str, u64>,
    /// Spans a full timeline could not keep (0 unless something is wrong).
    pub spans_lost: u64,
    /// Slow requests that overlapped a gap of a train (a gap recurring at
    /// a fixed period, [`gap_trains::find_trains`]) on either side.
    #[serde(default)]
    pub slow_meeting_a_train: u64,
    /// The trains among the load generator's gaps during the point.
    #[serde(default)]
    pub client_trains: Vec<GapTrain>,
    /// The trains among the server's gaps during the point.
    #[serde(default)]
    pub server_trains: Vec<GapTrain>,
}

impl TailPoint {
    /// Percentage of the slow requests that overlapped a span of `kind`.
    pub fn overlapping_pct(&self, kind: Kind) -> f64 {
        pct(self.slow_overlapping.get(kind.name()).copied().unwrap_or(0), self.slow)
    }

    /// Share of completed requests that were slow and met nothing on the
    /// timeline: the p99 could be within [`SLOW_NS`] without the gaps only
    /// when this is below 1 %.
    pub fn unexplained_share(&self) -> f64 {
        self.slow_unexplained as f64 / self.completed.max(1) as f64
    }
}

/// What `cf tails` writes to `summary.json`.
#[derive(Clone, Debug, Serialize)]
pub struct TailsSummary {
    /// Serializer, workload, datapath.
    pub system: String,
    /// See `system`.
    pub workload: String,
    /// See `system`.
    pub transport: String,
    /// A request slower than this is slow, µs.
    pub slow_us: f64,
    /// A loop's gap longer than this is time it lost, µs.
    pub gap_us: f64,
    /// Each core spinning alone before the points.
    pub machine: Vec<CoreHiccups>,
    /// The closed-loop probe, when the loads were fractions of it.
    pub probe_rps: Option<f64>,
    /// Each point, in the order run.
    pub points: Vec<TailPoint>,
}

/// Runs the points, prints a table and writes `summary.json` and each
/// point's timeline (`timeline-<n>.tsv`) to `cfg.out`.
///
/// # Errors
///
/// [`Error::Invalid`] for no loads or a bad fraction; [`Error::Failed`] when
/// the server or the load generator fails, or a point has errors.
pub fn run(cfg: &TailsConfig) -> Result<TailsSummary, Error> {
    if cfg.rates.is_empty() && cfg.fractions.is_empty() || cfg.repeats == 0 {
        return Err(Error::Invalid("cf tails needs --rates or --fractions, and at least one repeat".into()));
    }
    if cfg.fractions.iter().any(|f| !(*f > 0.0 && *f <= 2.0)) {
        return Err(Error::Invalid("--fractions are of the probed capacity: between 0 and 2".into()));
    }
    std::fs::create_dir_all(&cfg.out).map_err(|e| format!("cannot create {}: {e}", cfg.out.display()))?;
    let workload = cfg.workload.build().map_err(|e| Error::Invalid(e.to_string()))?;
    let machine = if cfg.machine_seconds > 0.0 {
        eprintln!("tails: each core spins alone for {} s (the machine's own gaps)", cfg.machine_seconds);
        let cores = [cfg.server_core, cfg.client_core];
        let found = hiccup::measure(&cores, Duration::from_secs_f64(cfg.machine_seconds))?;
        for h in &found {
            eprintln!("  {h}");
        }
        found
    } else {
        Vec::new()
    };
    let server_timeline = cfg.out.join("server-timeline.tsv");
    let _ = std::fs::remove_file(&server_timeline);
    let addr = crate::transport::local_server_addr(cfg.transport);
    eprintln!("tails: starting the {} server ({}, {})", cfg.system.name(), cfg.transport.name(), workload.name());
    let place = ServerPlace { transport: cfg.transport, addr: &addr, prefix: &[], server_core: cfg.server_core };
    let extra = ["--timeline".to_owned(), server_timeline.display().to_string()];
    let mut server = KvServer::start(&place, cfg.system, &cfg.workload, &extra)?;
    let target = Target::new(cfg.transport, &server.addr)?;
    timeline::enable(TIMELINE_CAPACITY);

    let (rates, probe_rps) = if cfg.rates.is_empty() {
        let probe_cfg = LoadConfig { rate: None, max_outstanding: 32, ..cfg.point.clone() };
        let probe = run_point(&target, cfg.system, workload.as_ref(), &probe_cfg, Some(cfg.client_core))?;
        if probe.completed == 0 || probe.errors > 0 {
            return Err(Error::Failed(format!(
                "the closed-loop probe completed {} requests with {} errors",
                probe.completed, probe.errors
            )));
        }
        eprintln!("tails: closed-loop probe {:.0}/s", probe.achieved);
        (cfg.fractions.iter().map(|f| f * probe.achieved).collect::<Vec<_>>(), Some(probe.achieved))
    } else {
        (cfg.rates.clone(), None)
    };

    let mut points = Vec::new();
    let total = rates.len() * cfg.repeats;
    for repeat in 0..cfg.repeats {
        for &rate in &rates {
            // Flush what the server recorded so far (the probe, the
            // previous point) and forget it, and our own.
            server.report()?;
            let _ = std::fs::remove_file(&server_timeline);
            timeline::take();
            let lost_before = timeline::lost();
            let point_cfg =
                LoadConfig { rate: Some(rate), seed: cfg.point.seed.wrapping_add(repeat as u64), ..cfg.point.clone() };
            let start_ns = timeline::now_ns();
            let p = run_point(&target, cfg.system, workload.as_ref(), &point_cfg, Some(cfg.client_core))?;
            let end_ns = timeline::now_ns();
            server.report()?;
            if p.errors > 0 {
                return Err(Error::Failed(format!("{} wrong responses at {rate:.0}/s", p.errors)));
            }
            let mut spans = timeline::take();
            let spans_lost = timeline::lost() - lost_before;
            let file = std::fs::File::open(&server_timeline)
                .map_err(|e| format!("the server wrote no timeline at {}: {e}", server_timeline.display()))?;
            spans.extend(
                timeline::read_tsv(BufReader::new(file))
                    .map_err(|e| format!("bad server timeline {}: {e}", server_timeline.display()))?,
            );
            spans.sort_by_key(|s| (s.start_ns, s.end_ns));
            let n = points.len() + 1;
            let path = cfg.out.join(format!("timeline-{n}.tsv"));
            write_spans(&path, &spans)?;
            let tp = analyse(&p, &spans, start_ns, end_ns, spans_lost);
            eprintln!("[{n}/{total}] {}", describe(&tp));
            points.push(tp);
        }
    }
    drop(server);
    let _ = std::fs::remove_file(&server_timeline);

    let summary = TailsSummary {
        system: cfg.system.name().to_owned(),
        workload: workload.name().to_owned(),
        transport: cfg.transport.name().to_owned(),
        slow_us: SLOW_NS as f64 / 1e3,
        gap_us: timeline::GAP_NS as f64 / 1e3,
        machine,
        probe_rps,
        points,
    };
    print!("{}", table(&summary));
    let json = serde_json::to_string_pretty(&summary).expect("plain data serializes");
    let path = cfg.out.join("summary.json");
    std::fs::write(&path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!("tails: wrote {} and the points' timelines", path.display());
    Ok(summary)
}

/// Spans the load generator keeps per point at most.
const TIMELINE_CAPACITY: usize = 1 << 20;

fn write_spans(path: &std::path::Path, spans: &[Span]) -> Result<(), Error> {
    let write = || -> std::io::Result<()> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        timeline::write_tsv(spans, &mut out)?;
        out.flush()
    };
    write().map_err(|e| Error::Failed(format!("cannot write {}: {e}", path.display())))
}

/// Matches each slow request of a point with the spans that overlapped it.
/// `spans` is sorted by start; only those within `start_ns..end_ns` count
/// towards the lost shares.
fn analyse(p: &PointResult, spans: &[Span], start_ns: u64, end_ns: u64, spans_lost: u64) -> TailPoint {
    let window = Span { kind: Kind::Slow, start_ns, end_ns };
    let in_window: Vec<&Span> = spans.iter().filter(|s| s.overlaps(&window)).collect();
    let causes: Vec<&Span> = in_window.iter().copied().filter(|s| s.kind != Kind::Slow).collect();
    let longest = causes.iter().map(|s| s.len_ns()).max().unwrap_or(0);
    // Which gaps of each side recur at a fixed period.
    let mut in_train = vec![false; causes.len()];
    let mut trains_of = |kind: Kind| {
        let at: Vec<usize> = (0..causes.len()).filter(|&i| causes[i].kind == kind).collect();
        let gaps: Vec<(u64, u64)> = at.iter().map(|&i| (causes[i].start_ns, causes[i].len_ns())).collect();
        let (trains, of) = gap_trains::find_trains(&gaps, end_ns.saturating_sub(start_ns) as f64 / 1e9);
        for (&i, train) in at.iter().zip(of) {
            in_train[i] = train.is_some();
        }
        trains
    };
    let client_trains = trains_of(Kind::ClientGap);
    let server_trains = trains_of(Kind::ServerGap);
    let mut meeting_a_train = 0;
    let mut slow = 0;
    let mut unexplained = 0;
    let mut overlapping: BTreeMap<&'static str, u64> = BTreeMap::new();
    for s in in_window.iter().filter(|s| s.kind == Kind::Slow) {
        slow += 1;
        // Causes are sorted by start: those starting after the request
        // ended cannot overlap it, nor can those that ended before it began
        // (at most `longest` before its start).
        let from = causes.partition_point(|c| c.start_ns + longest < s.start_ns);
        let to = causes.partition_point(|c| c.start_ns < s.end_ns);
        meeting_a_train += u64::from((from..to).any(|i| in_train[i] && causes[i].overlaps(s)));
        let mut kinds: Vec<Kind> = causes[from..to].iter().filter(|c| c.overlaps(s)).map(|c| c.kind).collect();
        kinds.sort();
        kinds.dedup();
        if kinds.is_empty() {
            unexplained += 1;
        }
        for k in kinds {
            *overlapping.entry(k.name()).or_default() += 1;
        }
    }
    let secs = end_ns.saturating_sub(start_ns).max(1) as f64;
    let lost = |kind: Kind| {
        causes
            .iter()
            .filter(|c| c.kind == kind)
            .map(|c| c.end_ns.min(end_ns).saturating_sub(c.start_ns.max(start_ns)))
            .sum::<u64>() as f64
            / secs
    };
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    for s in &in_window {
        *counts.entry(s.kind.name()).or_default() += 1;
    }
    TailPoint {
        offered_rps: p.offered.unwrap_or(0.0),
        achieved_rps: p.achieved,
        p50_us: p.p50_us,
        p99_us: p.p99_us,
        p999_us: p.p999_us,
        completed: p.completed,
        // Only recorded requests are on the timeline; the warm-up's are not.
        slow,
        slow_overlapping: overlapping,
        slow_unexplained: unexplained,
        client_lost_share: lost(Kind::ClientGap),
        server_lost_share: lost(Kind::ServerGap),
        server_sleeps: counts.get(Kind::ServerSleep.name()).copied().unwrap_or(0),
        spans: counts,
        spans_lost,
        slow_meeting_a_train: meeting_a_train,
        client_trains,
        server_trains,
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// The trains of one side, as `every 4.000 ms (1.02 % of the time), ...`.
fn trains_text(trains: &[GapTrain]) -> String {
    if trains.is_empty() {
        return "none".into();
    }
    let each: Vec<String> = trains
        .iter()
        .map(|t| format!("every {:.3} ms ({:.2} % of the time)", t.period_us / 1e3, t.lost_share * 100.0))
        .collect();
    each.join(", ")
}

fn describe(t: &TailPoint) -> String {
    let of = |k: Kind| t.overlapping_pct(k);
    format!(
        "{:.0}/s offered, {:.0}/s achieved: p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs; {:.2} % of requests over {} µs, of which {:.0} % met a client gap, {:.0} % a server gap, {:.0} % a sleeping server, {:.0} % a long batch, {:.0} % nothing ({:.3} % of all requests); {:.0} % met a gap that recurs at a fixed period (client: {}; server: {}); lost: client {:.2} %, server {:.2} % of the time",
        t.offered_rps,
        t.achieved_rps,
        t.p50_us,
        t.p99_us,
        t.p999_us,
        pct(t.slow, t.completed),
        SLOW_NS / 1000,
        of(Kind::ClientGap),
        of(Kind::ServerGap),
        of(Kind::ServerSleep),
        of(Kind::ServerBatch),
        pct(t.slow_unexplained, t.slow),
        100.0 * t.unexplained_share(),
        pct(t.slow_meeting_a_train, t.slow),
        trains_text(&t.client_trains),
        trains_text(&t.server_trains),
        100.0 * t.client_lost_share,
        100.0 * t.server_lost_share,
    )
}

/// The table `cf tails` prints.
pub fn table(s: &TailsSummary) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "tails: {} on {}, {}", s.system, s.transport, s.workload);
    for h in &s.machine {
        let _ = writeln!(
            out,
            "machine, core {} spinning alone: {:.2} % of the time lost in gaps > {} µs ({:.0}/s), longest {:.0} µs",
            h.core,
            100.0 * h.lost_over_20us_share,
            s.gap_us,
            h.over_20us as f64 / h.seconds.max(f64::MIN_POSITIVE),
            h.max_us
        );
        for train in &h.trains {
            let _ = writeln!(
                out,
                "  of them every {:.3} ms: {:.2} % of the time, median {:.0} µs{}",
                train.period_us / 1e3,
                100.0 * train.lost_share,
                train.median_us,
                train.source.as_deref().map(|s| format!(" ({s})")).unwrap_or_default()
            );
        }
    }
    if let Some(p) = s.probe_rps {
        let _ = writeln!(out, "closed-loop probe: {p:.0}/s");
    }
    let _ = writeln!(
        out,
        "{:>10} {:>8} {:>8} {:>9} {:>8} | {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} | {:>7} {:>7} | p99 <= {} µs without gaps",
        "offered/s",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "slow %",
        "cli gap",
        "srv gap",
        "asleep",
        "batch",
        "none",
        "none/all",
        "periodic",
        "cli lost",
        "srv lost",
        s.slow_us
    );
    for t in &s.points {
        let of = |k: Kind| t.overlapping_pct(k);
        let _ = writeln!(
            out,
            "{:>10.0} {:>8.1} {:>8.1} {:>9.1} {:>7.2}% | {:>6.0}% {:>6.0}% {:>6.0}% {:>6.0}% {:>6.0}% {:>6.3}% {:>7.0}% | {:>6.2}% {:>6.2}% | {}",
            t.offered_rps,
            t.p50_us,
            t.p99_us,
            t.p999_us,
            pct(t.slow, t.completed),
            of(Kind::ClientGap),
            of(Kind::ServerGap),
            of(Kind::ServerSleep),
            of(Kind::ServerBatch),
            pct(t.slow_unexplained, t.slow),
            100.0 * t.unexplained_share(),
            pct(t.slow_meeting_a_train, t.slow),
            100.0 * t.client_lost_share,
            100.0 * t.server_lost_share,
            if t.p99_us <= s.slow_us {
                "met as measured"
            } else if t.unexplained_share() < 0.01 {
                "yes: every slow request but <1 % met a gap"
            } else {
                "no: >= 1 % were slow with no gap"
            }
        );
    }
    let _ = writeln!(
        out,
        "(slow: over {} µs from scheduled arrival to response; the gap columns are shares of the slow requests that overlapped such a span, a request can count in several; none/all: slow with no span, as a share of all requests; periodic: share of the slow requests that overlapped a gap recurring at a fixed period on either side, such as the scheduler tick)",
        s.slow_us
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(kind: Kind, a: u64, b: u64) -> Span {
        Span { kind, start_ns: a, end_ns: b }
    }

    fn point(completed: u64) -> PointResult {
        PointResult {
            offered: Some(1000.0),
            achieved: 1000.0,
            p50_us: 3.0,
            p99_us: 100.0,
            p999_us: 500.0,
            offered_count: completed,
            completed,
            timeouts: 0,
            errors: 0,
            server: None,
            client: None,
        }
    }

    #[test]
    fn each_slow_request_is_matched_with_what_overlapped_it() {
        let mut spans = vec![
            // A long server gap early on, then a client gap.
            span(Kind::ServerGap, 1_000, 400_000),
            span(Kind::ClientGap, 500_000, 530_000),
            span(Kind::ServerSleep, 700_000, 800_000),
            // Slow requests: during the server gap (its start long after the
            // gap began), over the client gap and the sleep, and one alone.
            span(Kind::Slow, 300_000, 360_000),
            span(Kind::Slow, 490_000, 750_000),
            span(Kind::Slow, 900_000, 960_000),
            // Outside the window: ignored.
            span(Kind::Slow, 2_000_000, 2_100_000),
            span(Kind::ClientGap, 2_000_000, 2_500_000),
        ];
        spans.sort_by_key(|s| (s.start_ns, s.end_ns));
        let t = analyse(&point(1000), &spans, 0, 1_000_000, 0);
        assert_eq!(t.slow, 3);
        assert_eq!(t.slow_unexplained, 1);
        assert_eq!(t.slow_overlapping.get("server-gap"), Some(&1));
        assert_eq!(t.slow_overlapping.get("client-gap"), Some(&1));
        assert_eq!(t.slow_overlapping.get("server-sleep"), Some(&1));
        assert_eq!(t.server_sleeps, 1);
        assert!((t.server_lost_share - 0.399).abs() < 1e-9, "{}", t.server_lost_share);
        assert!((t.client_lost_share - 0.03).abs() < 1e-9, "{}", t.client_lost_share);
        assert!((t.unexplained_share() - 0.001).abs() < 1e-12);
        let summary = TailsSummary {
            system: "cornflakes".into(),
            workload: "ycsb".into(),
            transport: "shm".into(),
            slow_us: 50.0,
            gap_us: 20.0,
            machine: Vec::new(),
            probe_rps: None,
            points: vec![t],
        };
        let text = table(&summary);
        assert!(text.contains("yes: every slow request but <1 % met a gap"), "{text}");
    }

    #[test]
    fn slow_requests_that_met_a_periodic_gap_are_counted() {
        // The load generator's loop loses 30 µs every 4 ms for a second (a
        // tick); the server loses 100 µs twice, at no period.
        let mut spans: Vec<Span> =
            (0..250u64).map(|k| span(Kind::ClientGap, 1_000_000 + k * 4_000_000, 1_030_000 + k * 4_000_000)).collect();
        spans.push(span(Kind::ServerGap, 2_500_000, 2_600_000));
        spans.push(span(Kind::ServerGap, 333_700_000, 333_800_000));
        // Slow requests: over two ticks, over a server gap, over nothing.
        spans.push(span(Kind::Slow, 5_010_000, 5_070_000));
        spans.push(span(Kind::Slow, 401_000_000, 401_060_000));
        spans.push(span(Kind::Slow, 333_750_000, 333_820_000));
        spans.push(span(Kind::Slow, 600_100_000, 600_160_000));
        spans.sort_by_key(|s| (s.start_ns, s.end_ns));
        let t = analyse(&point(100_000), &spans, 0, 1_002_000_000, 0);
        assert_eq!((t.slow, t.slow_unexplained), (4, 1));
        assert_eq!(t.slow_meeting_a_train, 2);
        assert_eq!(t.client_trains.len(), 1, "{:?}", t.client_trains);
        assert!((t.client_trains[0].period_us - 4000.0).abs() < 1.0, "{:?}", t.client_trains);
        assert_eq!(t.client_trains[0].gaps, 250);
        assert!(t.server_trains.is_empty(), "{:?}", t.server_trains);
        assert!(
            describe(&t).contains("50 % met a gap that recurs at a fixed period (client: every 4.000 ms"),
            "{}",
            describe(&t)
        );
    }
}
