//! What the load generator and the comparison print and write: the JSON
//! objects (built with serde, one struct per object) and the text lines and
//! tables.
//!
//! Numbers that are not finite (a rate over no time, a capacity that was
//! never measured) are written as `null`, never as `NaN` or `inf`, which
//! are not JSON: fields that can lack a value are `Option`s, and
//! [`finite`] turns a computed `f64` into one.

use cornflakes_kv::server::TurnMode;
use cornflakes_kv::{ServerStats, System};
use serde::{Deserialize, Serialize};

use crate::loadgen::PointResult;
use crate::sweep::SweepResult;

/// `Some(x)` when `x` is a finite number: what a JSON number can hold.
pub fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// `x` rounded to `decimals` places, `None` when it is not finite.
pub fn rounded(x: f64, decimals: i32) -> Option<f64> {
    let scale = 10f64.powi(decimals);
    finite((x * scale).round() / scale)
}

/// A zero-copy threshold for people: `512 B`, or `never` for copy-always.
pub fn threshold_text(threshold: usize) -> String {
    if threshold == cornflakes::field::ONLY_COPY {
        "never".to_owned()
    } else {
        format!("{threshold} B")
    }
}

/// A zero-copy threshold as given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThresholdChoice {
    /// Bytes (`usize::MAX`: never).
    Fixed(usize),
    /// Found while serving ([`cornflakes::field::AdaptiveThreshold`]).
    Adaptive,
    /// Every candidate and the adaptive controller in turns, each turn's
    /// cost counted (`cf thresholds --interleaved`).
    Interleaved,
    /// These thresholds (each with or without serialize-and-send) in
    /// turns, each turn's cost counted (`cf calibrate`: zero-copy against
    /// copy in one server).
    Turns(Vec<TurnMode>),
}

/// Parses a zero-copy threshold given on the command line: bytes, `never`
/// (copy every field), `adaptive`, `interleaved`, or `turns:` and a
/// comma-separated list of turns as [`parse_turn`] reads them.
///
/// # Examples
///
/// ```
/// use cornflakes_eval::report::{parse_threshold, ThresholdChoice};
///
/// assert_eq!(parse_threshold("512"), Ok(ThresholdChoice::Fixed(512)));
/// assert_eq!(parse_threshold("turns:0,never"), Ok(ThresholdChoice::Turns(vec![0.into(), usize::MAX.into()])));
/// assert!(parse_threshold("turns:").is_err());
/// assert!(parse_threshold("lots").is_err());
/// ```
pub fn parse_threshold(s: &str) -> Result<ThresholdChoice, String> {
    let bytes = parse_bytes_or_never;
    match s {
        "adaptive" => Ok(ThresholdChoice::Adaptive),
        "interleaved" => Ok(ThresholdChoice::Interleaved),
        _ => match s.strip_prefix("turns:") {
            Some(list) if !list.is_empty() => {
                list.split(',').map(parse_turn).collect::<Result<_, _>>().map(ThresholdChoice::Turns)
            }
            Some(_) => Err("`turns:` needs thresholds, e.g. `turns:0,never`".into()),
            None => bytes(s).map(ThresholdChoice::Fixed).map_err(|_| {
                format!("`{s}` is not a byte count, `never`, `adaptive`, `interleaved` or `turns:<bytes>,...`")
            }),
        },
    }
}

/// A fixed threshold as [`parse_bytes_or_never`] reads it back.
pub fn threshold_arg(threshold: usize) -> String {
    if threshold == cornflakes::field::ONLY_COPY {
        "never".to_owned()
    } else {
        threshold.to_string()
    }
}

/// Parses one turn of `turns:` or `cf thresholds --turns`: a threshold as
/// [`parse_bytes_or_never`] reads it, with serialize-and-send, or followed
/// by `-no-sas` without it (responses through an intermediate buffer and a
/// segment list, as `cornflakes-no-sas` sends them).
///
/// # Examples
///
/// ```
/// use cornflakes_eval::report::{parse_turn, turn_arg};
/// use cornflakes_kv::server::TurnMode;
///
/// let without = TurnMode { threshold: 512, serialize_and_send: false };
/// assert_eq!(parse_turn("512"), Ok(512.into()));
/// assert_eq!(parse_turn("512-no-sas"), Ok(without));
/// assert_eq!(parse_turn(&turn_arg(without)), Ok(without));
/// assert!(parse_turn("-no-sas").is_err());
/// ```
pub fn parse_turn(s: &str) -> Result<TurnMode, String> {
    let (threshold, serialize_and_send) = match s.strip_suffix("-no-sas") {
        Some(t) => (t, false),
        None => (s, true),
    };
    let threshold = parse_bytes_or_never(threshold)
        .map_err(|_| format!("`{s}` is not a byte count or `never`, optionally followed by `-no-sas`"))?;
    Ok(TurnMode { threshold, serialize_and_send })
}

/// A turn as [`parse_turn`] reads it back.
pub fn turn_arg(m: TurnMode) -> String {
    let t = threshold_arg(m.threshold);
    if m.serialize_and_send {
        t
    } else {
        format!("{t}-no-sas")
    }
}

/// A turn for a table: `512 B`, `512 B no-sas`.
pub fn turn_text(m: TurnMode) -> String {
    let t = threshold_text(m.threshold);
    if m.serialize_and_send {
        t
    } else {
        format!("{t} no-sas")
    }
}

/// Parses a fixed threshold: bytes, or `never` (copy every field).
pub fn parse_bytes_or_never(s: &str) -> Result<usize, String> {
    match s {
        "never" => Ok(cornflakes::field::ONLY_COPY),
        _ => s.parse().map_err(|_| format!("`{s}` is not a byte count or `never`")),
    }
}

/// One line about a load point.
pub fn describe_point(p: &PointResult, unit: &str) -> String {
    let offered = p.offered.map_or("closed loop".to_owned(), |o| format!("{o:>9.0}/s"));
    format!(
        "offered {offered}  achieved {:>9.0} {unit}/s  p50 {:>8.1} µs  p99 {:>8.1} µs  p99.9 {:>8.1} µs  errors {}  timeouts {}",
        p.achieved, p.p50_us, p.p99_us, p.p999_us, p.errors, p.timeouts
    )
}

/// The JSON object of one load point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointReport {
    /// Offered transactions per second (`null`: closed loop).
    pub offered_rps: Option<f64>,
    /// Transactions completed correctly per second of recorded time.
    pub achieved_rps: Option<f64>,
    /// Latency quantiles, microseconds.
    pub p50_us: Option<f64>,
    /// See `p50_us`.
    pub p99_us: Option<f64>,
    /// See `p50_us`.
    pub p999_us: Option<f64>,
    /// Recorded transactions that arrived in the window.
    pub offered: u64,
    /// Recorded transactions completed correctly.
    pub completed: u64,
    /// Wrong responses.
    pub errors: u64,
    /// Requests without a response in time.
    pub timeouts: u64,
    /// The server's requests per second of busy time over the point, when
    /// it could be asked.
    pub server_busy_capacity_rps: Option<f64>,
    /// The share of the point's time the server was busy (0-1).
    #[serde(default)]
    pub server_busy_fraction: Option<f64>,
    /// The share of the point's time the load generator was busy (0-1).
    #[serde(default)]
    pub client_busy_fraction: Option<f64>,
    /// The load generator's responses per second of its busy time.
    #[serde(default)]
    pub client_busy_capacity_rps: Option<f64>,
}

impl From<&PointResult> for PointReport {
    fn from(p: &PointResult) -> Self {
        PointReport {
            offered_rps: p.offered.and_then(|o| rounded(o, 0)),
            achieved_rps: rounded(p.achieved, 0),
            p50_us: finite(p.p50_us),
            p99_us: finite(p.p99_us),
            p999_us: finite(p.p999_us),
            offered: p.offered_count,
            completed: p.completed,
            errors: p.errors,
            timeouts: p.timeouts,
            server_busy_capacity_rps: p.server.and_then(|s| s.busy_capacity_rps()).and_then(|c| rounded(c, 0)),
            server_busy_fraction: p.server_busy_fraction().and_then(|f| rounded(f, 3)),
            client_busy_fraction: p.client_busy_fraction().and_then(|f| rounded(f, 3)),
            client_busy_capacity_rps: p.client.and_then(|c| c.capacity_rps()).and_then(|c| rounded(c, 0)),
        }
    }
}

/// The JSON object of one system: the last line of `cf loadgen`, and an
/// element of `systems` in `summary.json` (which adds the fields after
/// `points`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemReport {
    /// The system's name (`cornflakes`, `protobuf`, ...).
    pub name: String,
    /// Highest achieved load kept up with (see [`SweepResult::best`]);
    /// absent when no sweep finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_achieved_rps: Option<f64>,
    /// p99 latency (µs) at that load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<f64>,
    /// See [`SweepResult::server_busy_capacity`]; `null` when unknown.
    #[serde(default)]
    pub server_busy_capacity_rps: Option<f64>,
    /// The share of the time the server was busy at the maximum (0-1) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_busy_at_max: Option<f64>,
    /// ... and the load generator: the busier side limited the maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_busy_at_max: Option<f64>,
    /// Wrong responses.
    pub errors: u64,
    /// Requests without a response in time.
    pub timeouts: u64,
    /// The open-loop points, in the order run.
    #[serde(default)]
    pub points: Vec<PointReport>,
    /// `cf compare`: each repeat's highest achieved load, in the order run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats_max_rps: Option<Vec<f64>>,
    /// `cf compare`: the latency bound (µs) the points were held to ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_bound_us: Option<f64>,
    /// ... and the quantile it bounds (`p99`, the SLO, or `p50`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_bound_quantile: Option<crate::sweep::Quantile>,
    /// `cf compare`: the server's counters, summed over the repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerStats>,
    /// `cf compare`: repeats that failed, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// The closed-loop probe's achieved load (of the median repeat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_rps: Option<f64>,
    /// Why the maximum is below half the probe, when it is
    /// ([`SweepResult::below_probe`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below_probe: Option<String>,
    /// Seconds the sweep waited for the machine's fast phase
    /// ([`crate::sweep::MachineGate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_phase_wait_s: Option<f64>,
    /// Points it ran again because a slow phase began during them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_phase_reruns: Option<usize>,
    /// Its maximum over Cornflakes', paired by repeat ([`paired_ratio`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_cornflakes: Option<f64>,
    /// `cf compare`: the repeats (numbered from 0) left out of its ratios
    /// as stalled ([`stalled_repeats`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalled_repeats: Vec<usize>,
    /// `cf compare`: the median of the machine's cross-core copy bandwidth
    /// after each of its points, GB/s ([`crate::sweep::MachineGate::copy_gbps`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_gbps: Option<f64>,
    /// ... and of each repeat's points, in the order of `repeats_max_rps`
    /// (`null` for a repeat without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats_copy_gbps: Vec<f64>,
}

impl SystemReport {
    /// The report of one run's `points`, whose best is `best`.
    pub fn new(name: &str, points: &[PointResult], best: &PointResult, busy_capacity: Option<f64>) -> Self {
        SystemReport {
            name: name.to_owned(),
            max_achieved_rps: rounded(best.achieved, 0),
            p99_us: finite(best.p99_us),
            server_busy_capacity_rps: busy_capacity.and_then(|c| rounded(c, 0)),
            server_busy_at_max: best.server_busy_fraction().and_then(|f| rounded(f, 3)),
            client_busy_at_max: best.client_busy_fraction().and_then(|f| rounded(f, 3)),
            errors: points.iter().map(|p| p.errors).sum(),
            timeouts: points.iter().map(|p| p.timeouts).sum(),
            points: points.iter().map(PointReport::from).collect(),
            repeats_max_rps: None,
            latency_bound_us: None,
            latency_bound_quantile: None,
            server: None,
            failed: Vec::new(),
            probe_rps: None,
            below_probe: None,
            slow_phase_wait_s: None,
            slow_phase_reruns: None,
            vs_cornflakes: None,
            stalled_repeats: Vec::new(),
            copy_gbps: None,
            repeats_copy_gbps: Vec::new(),
        }
    }

    /// The report of a sweep: its points and best point.
    pub fn of_sweep(name: &str, sweep: &SweepResult) -> Option<Self> {
        let best = sweep.best()?;
        let mut report = Self::new(name, &sweep.points, best, sweep.server_busy_capacity());
        report.probe_rps = rounded(sweep.probe.achieved, 0);
        report.below_probe = sweep.below_probe();
        report.slow_phase_wait_s = rounded(sweep.slow_phases.waited_s, 1);
        report.slow_phase_reruns = Some(sweep.slow_phases.reruns);
        Some(report)
    }

    /// A system with no finished sweep.
    pub fn failed(name: &str) -> Self {
        SystemReport {
            name: name.to_owned(),
            max_achieved_rps: None,
            p99_us: None,
            server_busy_capacity_rps: None,
            server_busy_at_max: None,
            client_busy_at_max: None,
            errors: 0,
            timeouts: 0,
            points: Vec::new(),
            repeats_max_rps: None,
            latency_bound_us: None,
            latency_bound_quantile: None,
            server: None,
            failed: Vec::new(),
            probe_rps: None,
            below_probe: None,
            slow_phase_wait_s: None,
            slow_phase_reruns: None,
            vs_cornflakes: None,
            stalled_repeats: Vec::new(),
            copy_gbps: None,
            repeats_copy_gbps: Vec::new(),
        }
    }
}

/// The paper's comparisons that apply to a workload, as ratios (three
/// decimals) of one metric; absent where a system did not run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ratios {
    /// Cornflakes over the best of protobuf, FlatBuffers and Cap'n Proto.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cornflakes_over_best_library: Option<f64>,
    /// Cornflakes over the tokio-prost baseline (tcp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cornflakes_over_tokio_prost: Option<f64>,
    /// Cornflakes over the best of protobuf, FlatBuffers and Cap'n Proto on
    /// our datapath (rkyv left out: the issue 13 target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cornflakes_over_best_pb_fb_capnp: Option<f64>,
    /// Cornflakes over echo without serialization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cornflakes_over_raw: Option<f64>,
    /// Hybrid over only scatter-gather.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cornflakes_over_only_sg: Option<f64>,
    /// Hybrid over only copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cornflakes_over_only_copy: Option<f64>,
    /// With serialize-and-send over without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sas_over_no_sas: Option<f64>,
    /// Which library `cornflakes_over_best_library` compares with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_library: Option<String>,
    /// The same ratios of the servers' busy capacities (which still
    /// compare the servers when the load generator saturates first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_busy_capacity: Option<Box<Ratios>>,
}

impl Ratios {
    /// The ratios of `metric`, a system's figure (`None`: not run).
    pub fn of(metric: impl Fn(System) -> Option<f64>) -> Ratios {
        Self::between(|a, b| metric(a).zip(metric(b)).map(|(a, b)| a / b))
    }

    /// The ratios that `ratio(a, b)` gives for Cornflakes (`a`) over each
    /// system `b`; the best library is the one Cornflakes leads least.
    pub fn between(ratio: impl Fn(System, System) -> Option<f64>) -> Ratios {
        let best_of = |systems: &[System]| {
            systems
                .iter()
                .filter_map(|&s| ratio(System::Cornflakes, s).map(|r| (s, r)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(s, _)| s)
        };
        let best_lib = best_of(&[System::Protobuf, System::Flatbuffers, System::Capnp, System::Rkyv]);
        let best_of_three = best_of(&[System::Protobuf, System::Flatbuffers, System::Capnp]);
        let over = |b: Option<System>| b.and_then(|b| ratio(System::Cornflakes, b)).and_then(|r| rounded(r, 3));
        Ratios {
            cornflakes_over_best_library: over(best_lib),
            cornflakes_over_tokio_prost: over(Some(System::TokioProst)),
            cornflakes_over_best_pb_fb_capnp: over(best_of_three),
            cornflakes_over_raw: over(Some(System::Raw)),
            cornflakes_over_only_sg: over(Some(System::CornflakesOnlySg)),
            cornflakes_over_only_copy: over(Some(System::CornflakesOnlyCopy)),
            sas_over_no_sas: over(Some(System::CornflakesNoSas)),
            best_library: best_lib.map(|s| s.name().to_owned()),
            server_busy_capacity: None,
        }
    }
}

/// A repeat whose maximum is below this share of the median of the
/// system's repeats is a *stalled* repeat: the machine, not the system.
///
/// A slow phase of the test VM that covers part of a repeat can slow some
/// systems of it ten- to a thousandfold (run1 of
/// `docs/results/2026-12-01-intel-twice/`: seven of nine CDN probes at
/// 2-15 % of the other repeats', one sweep ending at 72 objects/s against
/// 216 k in its other repeats) and others not at all, so pairing by repeat
/// does not cancel it. A system's own repeats vary by 10-40 % otherwise.
pub const STALLED_REPEAT: f64 = 0.5;

/// The repeats (the `usize`s) whose figure is below [`STALLED_REPEAT`]
/// times the median of `maxima` (fewer than two repeats: none).
pub fn stalled_repeats(maxima: &[(usize, f64)]) -> Vec<usize> {
    if maxima.len() < 2 {
        return Vec::new();
    }
    let median = median(maxima.iter().map(|&(_, m)| m)).expect("two or more values");
    maxima.iter().filter(|&&(_, m)| m < STALLED_REPEAT * median).map(|&(r, _)| r).collect()
}

/// The median of `values` (the mean of the middle two for an even count);
/// `None` for none.
pub fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut sorted: Vec<f64> = values.collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// `a` over `b` for figures measured in the same repeats: the geometric
/// mean of `a / b` over the repeats (the `usize`s) that both have and in
/// which neither stalled ([`stalled_repeats`]; when every shared repeat
/// stalled for one or the other, over all of them), or `None` when they
/// share none.
///
/// A repeat measures every system in the same minutes (interleaved, point
/// by point), so a slow phase of the machine that spans a repeat scales
/// both figures alike and cancels in its ratio; the ratio of two medians
/// can instead pair a slow repeat of one system with a fast one of the
/// other. A stalled repeat is left out because a geometric mean is not
/// robust to it: one repeat a thousand times low moves the mean of three
/// tenfold.
pub fn paired_ratio(a: &[(usize, f64)], b: &[(usize, f64)]) -> Option<f64> {
    let pairs: Vec<(usize, f64)> = a
        .iter()
        .filter_map(|&(repeat, x)| {
            let y = b.iter().find(|(r, _)| *r == repeat)?.1;
            let q = x / y;
            (q.is_finite() && q > 0.0).then(|| (repeat, q.ln()))
        })
        .collect();
    let (stalled_a, stalled_b) = (stalled_repeats(a), stalled_repeats(b));
    let clean: Vec<f64> =
        pairs.iter().filter(|(r, _)| !stalled_a.contains(r) && !stalled_b.contains(r)).map(|&(_, l)| l).collect();
    let logs = if clean.is_empty() { pairs.iter().map(|&(_, l)| l).collect() } else { clean };
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// One workload's entry in `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReport {
    /// The workload's name.
    pub workload: String,
    /// Its full description, as `--workload` takes it.
    pub spec: String,
    /// What a transaction is (`requests`, `echoes`, ...).
    pub unit: String,
    /// `shm` or `udp`.
    pub transport: String,
    /// Sweeps per system.
    pub repeats: usize,
    /// File name of the throughput-latency plot.
    pub plot: Option<String>,
    /// One entry per system, in the order run.
    pub systems: Vec<SystemReport>,
    /// Ratios of the maxima, paired by repeat ([`paired_ratio`]); their
    /// `server_busy_capacity` are ratios of the median repeat's capacities.
    pub ratios: Ratios,
    /// The machine's cross-core copy bandwidth after each point of the
    /// workload ([`crate::sweep::MachineGate::copy_gbps`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_gbps: Option<CopyBandwidth>,
}

/// Measurements of the machine's cross-core copy bandwidth, GB/s
/// ([`crate::hiccup::copy_bandwidth_gbps`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CopyBandwidth {
    /// The median.
    pub median: f64,
    /// The middle half: from the 25th ...
    pub p25: f64,
    /// ... to the 75th percentile.
    pub p75: f64,
    /// How many measurements.
    pub samples: usize,
}

impl CopyBandwidth {
    /// The median and middle half of `samples` (`None` when there are
    /// none), rounded to 0.01 GB/s.
    pub fn of(samples: &[f64]) -> Option<CopyBandwidth> {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        // Finite by the filter above.
        let r = |x: f64| rounded(x, 2).unwrap_or(x);
        (!sorted.is_empty()).then(|| CopyBandwidth {
            median: r(median(sorted.iter().copied()).expect("not empty")),
            p25: r(at(0.25)),
            p75: r(at(0.75)),
            samples: sorted.len(),
        })
    }
}

/// The line under a workload's table that says how fast the machine
/// copied between the cores during it (`workload`), during the run so far
/// (`run`), and at each system's points (`per_system`, GB/s medians): two
/// runs whose maxima differ can be told apart by it.
pub fn copy_bandwidth_note(workload: &CopyBandwidth, run: &CopyBandwidth, per_system: &[(&str, f64)]) -> String {
    let lo = per_system.iter().min_by(|a, b| a.1.total_cmp(&b.1));
    let hi = per_system.iter().max_by(|a, b| a.1.total_cmp(&b.1));
    let systems = match (lo, hi) {
        (Some(lo), Some(hi)) => {
            format!("; per system from {:.1} ({}) to {:.1} ({})", lo.1, lo.0, hi.1, hi.0)
        }
        _ => String::new(),
    };
    format!(
        "machine: cross-core copy bandwidth after each point {:.1} GB/s (median of {} points, middle half {:.1}-{:.1}{systems}; \
         the run so far {:.1}): the maxima the load generator sets move with it from one run to the next",
        workload.median, workload.samples, workload.p25, workload.p75, run.median
    )
}

/// `summary.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// One entry per workload, in the order run.
    pub workloads: Vec<WorkloadReport>,
    /// The machine's own stalls of the server's and the client's cores
    /// ([`crate::hiccup`]), watched for a second before the first workload
    /// and after the last: what tail latencies cannot be lower than.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_stalls: Vec<crate::hiccup::CoreHiccups>,
    /// Why the maxima were held to another bound than the one asked for
    /// (a p99 on a machine whose own gaps set the p99), when they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_bound_choice: Option<String>,
    /// `GLIBC_TUNABLES` as every process of the run had it (`cf` sets it
    /// on AMD CPUs, [`crate::glibc`]), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glibc_tunables: Option<String>,
    /// The machine's cross-core copy bandwidth after each point of the run
    /// ([`crate::sweep::MachineGate::copy_gbps`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_gbps: Option<CopyBandwidth>,
}

/// One system's line in the table of a workload.
pub struct TableRow<'a> {
    /// The system.
    pub system: System,
    /// Its median repeat's best point and server busy capacity; `None`
    /// when every repeat failed.
    pub best: Option<(&'a PointResult, Option<f64>)>,
    /// Each repeat's highest achieved load.
    pub maxima: Vec<f64>,
    /// Wrong responses over the repeats.
    pub errors: u64,
    /// Timeouts over the repeats.
    pub timeouts: u64,
    /// Requests and responses the server dropped.
    pub dropped: u64,
    /// Why its maximum is below half its closed-loop probe, when it is.
    pub below_probe: Option<String>,
    /// Its maximum over Cornflakes', paired by repeat ([`paired_ratio`]).
    pub vs_cornflakes: Option<f64>,
    /// Its stalled repeats ([`stalled_repeats`]) with their maxima.
    pub stalled: Vec<(usize, f64)>,
}

/// `86/97 %`: the server's and the load generator's busy shares at `p`.
fn busy_at(p: &PointResult) -> String {
    match (p.server_busy_fraction(), p.client_busy_fraction()) {
        (Some(s), Some(c)) => format!("{:.0}/{:.0} %", s * 100.0, c * 100.0),
        (None, Some(c)) => format!("-/{:.0} %", c * 100.0),
        _ => "-".to_owned(),
    }
}

/// Whether the load generator was busier than the server at `p` (so it,
/// not the server, set that maximum).
pub fn limited_by_client(p: &PointResult) -> bool {
    matches!((p.server_busy_fraction(), p.client_busy_fraction()), (Some(s), Some(c)) if c > s)
}

/// The table of one workload, like the paper's, with its ratios.
pub fn format_table(workload: &str, unit: &str, rows: &[TableRow<'_>], ratios: &Ratios) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{workload}: highest load kept up with (at least 95 % of the arrivals answered, no timeouts, latency within the SLO); \
         median of repeats, p99 at that load; vs cf: geometric mean over the repeats of the system's maximum \
         over Cornflakes' in the same repeat, leaving out repeats in which either stalled (below half its median; \
         listed under the table), as are the ratios below; server busy capacity: requests per \
         second of the server's busy time, the highest over the loads kept up with; busy srv/cli: the share of \
         the time the server and the load generator were busy at the maximum (the busier one limited it)"
    );
    let _ = writeln!(
        out,
        "{:<22} {:>12} {:>21} {:>10} {:>10} {:>14} {:>13} {:>8} {:>9} {:>8}",
        "system",
        format!("{unit}/s"),
        "repeats min-max",
        "p99 µs",
        "vs cf",
        "srv busy cap.",
        "busy srv/cli",
        "errors",
        "timeouts",
        "dropped"
    );
    for r in rows {
        match r.best {
            Some((best, capacity)) => {
                let lo = r.maxima.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = r.maxima.iter().copied().fold(0.0, f64::max);
                let _ = writeln!(
                    out,
                    "{:<22} {:>12.0} {:>21} {:>10.1} {:>10} {:>14.0} {:>13} {:>8} {:>9} {:>8}",
                    r.system.name(),
                    best.achieved,
                    format!("{lo:.0}-{hi:.0}"),
                    best.p99_us,
                    r.vs_cornflakes.map_or("-".to_owned(), |v| format!("{v:.2}x")),
                    capacity.unwrap_or(f64::NAN),
                    busy_at(best),
                    r.errors,
                    r.timeouts,
                    r.dropped,
                );
            }
            None => {
                let _ = writeln!(out, "{:<22} {:>12}", r.system.name(), "failed");
            }
        }
    }
    for r in rows {
        if let Some(why) = &r.below_probe {
            let _ = writeln!(out, "  note: {}: {why}", r.system.name());
        }
        if !r.stalled.is_empty() {
            let which: Vec<String> = r.stalled.iter().map(|(i, m)| format!("repeat {} at {m:.0}/s", i + 1)).collect();
            // The median the rule compared with (for an even number of
            // repeats not the median repeat's maximum the table shows).
            let median = median(r.maxima.iter().copied()).unwrap_or(f64::NAN);
            let _ = writeln!(
                out,
                "  stalled: {}: {} (below half its median {median:.0}/s: the machine stalled), left out of its ratios",
                r.system.name(),
                which.join(", ")
            );
        }
    }
    let client_bound: Vec<&str> = rows
        .iter()
        .filter(|r| r.best.is_some_and(|(best, _)| limited_by_client(best)))
        .map(|r| r.system.name())
        .collect();
    if !client_bound.is_empty() {
        let _ = writeln!(
            out,
            "  limited by the load generator (busier than the server at the maximum): {}",
            client_bound.join(", ")
        );
    }
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(ratios) {
        for (k, v) in m {
            let _ = writeln!(out, "  {k}: {v}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_numbers_are_null() {
        let p = PointResult {
            offered: Some(f64::INFINITY),
            achieved: f64::NAN,
            p50_us: 1.5,
            p99_us: f64::NAN,
            p999_us: 3.0,
            offered_count: 0,
            completed: 0,
            timeouts: 0,
            errors: 0,
            server: None,
            client: None,
        };
        let report = SystemReport::new("cornflakes", std::slice::from_ref(&p), &p, Some(f64::NAN));
        let line = serde_json::to_string(&report).unwrap();
        assert!(!line.contains("NaN") && !line.contains("inf"), "{line}");
        let v: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(v["points"][0]["achieved_rps"], serde_json::Value::Null);
        assert_eq!(v["points"][0]["offered_rps"], serde_json::Value::Null);
        assert_eq!(v["points"][0]["p50_us"], 1.5);
        assert_eq!(v["server_busy_capacity_rps"], serde_json::Value::Null);
        assert!(v.get("max_achieved_rps").is_none(), "{v}");
        assert_eq!(serde_json::from_str::<SystemReport>(&line).unwrap(), report);
    }

    #[test]
    fn ratios_compare_with_the_best_library_and_skip_missing_systems() {
        let r = Ratios::of(|s| match s {
            System::Cornflakes => Some(300.0),
            System::Protobuf => Some(100.0),
            System::Capnp => Some(200.0),
            _ => None,
        });
        assert_eq!(r.cornflakes_over_best_library, Some(1.5));
        assert_eq!(r.best_library.as_deref(), Some("capnp"));
        assert_eq!(r.cornflakes_over_raw, None);
        assert_eq!(r.cornflakes_over_best_pb_fb_capnp, Some(1.5));
        assert_eq!(r.cornflakes_over_tokio_prost, None);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "cornflakes_over_best_library": 1.5,
                "cornflakes_over_best_pb_fb_capnp": 1.5,
                "best_library": "capnp"
            })
        );
        // rkyv counts among the libraries but not in the issue 13 target;
        // tokio-prost has its own ratio.
        let r = Ratios::of(|s| match s {
            System::Cornflakes => Some(300.0),
            System::Rkyv => Some(250.0),
            System::Flatbuffers => Some(120.0),
            System::TokioProst => Some(60.0),
            _ => None,
        });
        assert_eq!(r.cornflakes_over_best_library, Some(1.2));
        assert_eq!(r.cornflakes_over_best_pb_fb_capnp, Some(2.5));
        assert_eq!(r.cornflakes_over_tokio_prost, Some(5.0));
    }

    #[test]
    fn paired_ratios_pair_repeats_and_skip_unshared_ones() {
        // Repeat 1 ran slow for both: its ratio is 2 like the others'.
        let a = [(0, 400.0), (1, 100.0), (2, 200.0)];
        let b = [(0, 200.0), (1, 50.0), (2, 100.0)];
        assert_eq!(paired_ratio(&a, &b).and_then(|r| rounded(r, 9)), Some(2.0));
        // b alone slow in repeat 2: the ratio of the medians (200 / 50)
        // pairs a's middle repeat with b's slow-phase low one.
        let b = [(0, 200.0), (1, 50.0), (2, 100.0 / 4.0)];
        let median_ratio = 200.0 / 50.0;
        let paired = paired_ratio(&a, &b).unwrap();
        assert!(paired < median_ratio && (paired - 2f64 * 4f64.cbrt()).abs() < 1e-9, "{paired}");
        // Repeats that one system lacks (a failed sweep) are left out.
        let r = paired_ratio(&[(0, 300.0), (2, 90.0)], &[(0, 100.0), (1, 7.0), (2, 30.0)]);
        assert_eq!(r.and_then(|r| rounded(r, 9)), Some(3.0));
        assert_eq!(paired_ratio(&[(0, 300.0)], &[(1, 100.0)]), None);
        assert_eq!(paired_ratio(&[(0, 300.0)], &[(0, 0.0)]), None);
        assert_eq!(paired_ratio(&[], &[]), None);
    }

    #[test]
    fn copy_bandwidth_is_summarized_by_its_median_and_middle_half() {
        assert_eq!(CopyBandwidth::of(&[]), None);
        assert_eq!(CopyBandwidth::of(&[f64::NAN]), None, "nothing measured");
        let b = CopyBandwidth::of(&[12.0, 5.0, 9.0, 10.0, 11.0, f64::NAN]).expect("five measured");
        assert_eq!(b, CopyBandwidth { median: 10.0, p25: 9.0, p75: 11.0, samples: 5 });
        let note = copy_bandwidth_note(&b, &CopyBandwidth::of(&[8.0]).unwrap(), &[("cornflakes", 9.5), ("rkyv", 10.3)]);
        assert!(note.contains("10.0 GB/s (median of 5 points, middle half 9.0-11.0"), "{note}");
        assert!(note.contains("from 9.5 (cornflakes) to 10.3 (rkyv)"), "{note}");
        assert!(note.contains("the run so far 8.0"), "{note}");
    }

    #[test]
    fn stalled_repeats_are_those_below_half_the_median() {
        assert_eq!(stalled_repeats(&[(0, 215_878.0), (1, 72.0), (2, 216_445.0)]), [1]);
        assert_eq!(stalled_repeats(&[(0, 100.0), (1, 60.0), (2, 140.0)]), Vec::<usize>::new(), "spread, no stall");
        assert_eq!(stalled_repeats(&[(0, 100.0), (1, 10.0)]), [1], "two repeats: against their mean");
        assert_eq!(stalled_repeats(&[(3, 5.0)]), Vec::<usize>::new(), "one repeat: nothing to compare with");
        assert_eq!(stalled_repeats(&[(0, 10.0), (1, 12.0), (2, 1000.0), (3, 1100.0)]), [0, 1]);
    }

    #[test]
    fn paired_ratios_leave_out_repeats_in_which_either_stalled() {
        // run1 of docs/results/2026-12-01-intel-twice, CDN: only-copy and
        // Cornflakes both stalled in repeat 2, by different factors.
        let only_copy = [(0, 215_878.0), (1, 72.0), (2, 216_445.0)];
        let cornflakes = [(0, 268_308.0), (1, 37_640.0), (2, 288_278.0)];
        let r = paired_ratio(&only_copy, &cornflakes).unwrap();
        let clean = ((215_878.0f64 / 268_308.0) * (216_445.0 / 288_278.0)).sqrt();
        assert!((r - clean).abs() < 1e-9, "{r} vs {clean}");
        // With the stall kept, the geometric mean would be 0.10.
        let all = ((215_878.0f64 / 268_308.0) * (72.0 / 37_640.0) * (216_445.0 / 288_278.0)).cbrt();
        assert!(all < 0.11 && r > 0.77, "{all} {r}");
        // One side alone stalled: that repeat goes too.
        let b = [(0, 100.0), (1, 100.0), (2, 100.0)];
        assert_eq!(paired_ratio(&[(0, 200.0), (1, 3.0), (2, 200.0)], &b).and_then(|r| rounded(r, 9)), Some(2.0));
        // Every shared repeat stalled for one or the other: all of them.
        let r = paired_ratio(&[(0, 200.0), (1, 2.0)], &[(0, 1.0), (1, 100.0)]).unwrap();
        assert!((r - (200.0f64 * 0.02).sqrt()).abs() < 1e-9, "{r}");
    }

    #[test]
    fn ratios_between_take_the_library_cornflakes_leads_least() {
        // Paired ratios can rank libraries unlike their medians would: the
        // best library is the one with the lowest ratio.
        let r = Ratios::between(|a, b| {
            let of = |s| match s {
                System::Protobuf => Some(1.07),
                System::Rkyv => Some(1.0),
                System::Capnp => Some(1.2),
                System::CornflakesOnlySg => Some(0.97),
                _ => None,
            };
            (a == System::Cornflakes).then(|| of(b)).flatten()
        });
        assert_eq!(r.best_library.as_deref(), Some("rkyv"));
        assert_eq!(r.cornflakes_over_best_library, Some(1.0));
        assert_eq!(r.cornflakes_over_best_pb_fb_capnp, Some(1.07));
        assert_eq!(r.cornflakes_over_only_sg, Some(0.97));
        assert_eq!(r.cornflakes_over_raw, None);
    }
}
