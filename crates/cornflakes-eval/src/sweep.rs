//! A sweep: the closed-loop capacity probe, then open-loop load points at
//! fractions of it until the system no longer keeps up, then a few points
//! that bisect the step where it fell behind. The rules that decide whether
//! a point was kept up with are [`PointResult::kept_up`] and
//! [`LatencyBound`].

use cornflakes_kv::{ServerStats, System};
use cornflakes_workloads::Workload;

use crate::loadgen::{run_point, LoadConfig, PointResult};

use crate::transport::Target;
use crate::Error;

/// How a sweep chooses its load points.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    /// Settings of each point (`rate` is set per point).
    pub point: LoadConfig,
    /// Offered loads as fractions of the probed capacity, in order.
    pub fractions: Vec<f64>,
    /// In-flight transactions per thread of the closed-loop probe.
    pub probe_outstanding: usize,
    /// The latency bound (the SLO) of a point that kept up.
    pub bound: LatencyBound,
    /// Points spent bisecting between the highest load kept up with and
    /// the lowest one not kept up with.
    pub refine: usize,
    /// Wait out the machine's slow phases before each point, and run a
    /// point again when one began during it (`cf compare`); `None`: measure
    /// whatever the machine does.
    pub gate: Option<MachineGate>,
}

/// A core-to-core round trip more than this many times the run's median
/// marks the machine's slow phase.
pub const SLOW_PHASE_FACTOR: f64 = 2.0;

/// Points run again per sweep at most because a slow phase began during
/// them.
const MAX_SLOW_PHASE_RERUNS: usize = 6;

/// Keeps load points out of the machine's slow phases. On this VM a
/// shared-memory ping-pong between the two cores (`cf pingpong --transport
/// bare`) takes 100 or 160-180 ns in most phases and 540-560 ns in others,
/// each lasting seconds to a minute (the hypervisor moves the virtual
/// cores); in a slow phase YCSB at 600 k/s has twice the median latency and
/// sometimes collapses, and which systems ran in one decided their ratios.
/// Before each point the gate measures the round trip of a cache line
/// ([`crate::hiccup::core_round_trip_ns`], 28 or 60-70 ns in the usual
/// phases; ~1 ms to measure) and, while it is over [`SLOW_PHASE_FACTOR`]
/// times the median of the run's measurements so far, waits (up to
/// `max_wait`, then goes on and says so); after the point it measures
/// again, and a point a slow phase began in is run again.
#[derive(Clone, Debug)]
pub struct MachineGate {
    /// The server's and the client's cores.
    pub cores: (usize, usize),
    /// The longest wait for a fast phase before one point.
    pub max_wait: std::time::Duration,
    /// Every round trip measured in the run, ns, shared by every sweep of
    /// a run so that all systems are held to the same phases.
    seen_ns: std::sync::Arc<std::sync::Mutex<Vec<f64>>>,
    /// The buffer of the copy probe run after each point.
    copy: std::sync::Arc<std::sync::Mutex<CopyProbe>>,
}

/// The buffer [`MachineGate::copy_gbps`] writes and copies (allocated at
/// its first use), and how many passes it made.
#[derive(Default)]
struct CopyProbe {
    buf: Vec<u8>,
    passes: u64,
}

impl std::fmt::Debug for CopyProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyProbe").field("bytes", &self.buf.len()).field("passes", &self.passes).finish()
    }
}

impl MachineGate {
    /// A gate on the round trip between `server_core` and `client_core`.
    pub fn new(server_core: usize, client_core: usize) -> Self {
        MachineGate {
            cores: (server_core, client_core),
            max_wait: std::time::Duration::from_secs(120),
            seen_ns: Default::default(),
            copy: Default::default(),
        }
    }

    /// The machine's cross-core copy bandwidth now, GB/s
    /// ([`crate::hiccup::copy_bandwidth_gbps`]: the server's core writes,
    /// the client's copies); `None` when it cannot be measured. Not a gate:
    /// it changes from one measurement to the next by 30 % and from one
    /// minute to the next by up to 1.5x, so it is recorded, not waited
    /// for, and `cf compare` prints it beside each table.
    pub fn copy_gbps(&self) -> Option<f64> {
        let mut probe = self.copy.lock().unwrap_or_else(|e| e.into_inner());
        if probe.buf.is_empty() {
            probe.buf = vec![0; crate::hiccup::COPY_PROBE_BYTES];
        }
        probe.passes += 1;
        let CopyProbe { buf, passes } = &mut *probe;
        crate::hiccup::copy_bandwidth_gbps(self.cores.0, self.cores.1, buf, *passes).ok()
    }

    /// The round trip now and whether it is a slow phase's; `None` when it
    /// cannot be measured (then nothing is held up). With `record` it joins
    /// the run's measurements (not while waiting: a long slow phase polled
    /// every half second would become the usual).
    fn measure(&self, record: bool) -> Option<(f64, bool)> {
        let ns = crate::hiccup::core_round_trip_ns(self.cores.0, self.cores.1, 2000).ok()?;
        if record {
            self.seen_ns.lock().unwrap_or_else(|e| e.into_inner()).push(ns);
        }
        Some((ns, is_slow_phase(ns, self.usual_ns())))
    }

    /// The median round trip measured in the run so far, ns.
    pub fn usual_ns(&self) -> f64 {
        let mut seen = self.seen_ns.lock().unwrap_or_else(|e| e.into_inner()).clone();
        seen.sort_by(f64::total_cmp);
        seen.get(seen.len() / 2).copied().unwrap_or(f64::NAN)
    }

    /// Waits until the machine is out of a slow phase (or `max_wait`
    /// passed); the seconds waited.
    fn wait_for_fast_phase(&self, progress: &mut dyn FnMut(&str)) -> f64 {
        let start = std::time::Instant::now();
        let mut told = false;
        while let Some((ns, true)) = self.measure(!told) {
            let waited = start.elapsed();
            if waited >= self.max_wait {
                progress(&format!(
                    "  the machine stayed in its slow phase for {:.0} s (core round trip {ns:.0} ns, usually {:.0} ns): measuring anyway",
                    waited.as_secs_f64(),
                    self.usual_ns()
                ));
                break;
            }
            if !told {
                progress(&format!(
                    "  waiting for the machine's usual phase: core round trip {ns:.0} ns, usually {:.0} ns",
                    self.usual_ns()
                ));
                told = true;
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        start.elapsed().as_secs_f64()
    }
}

/// Whether a round trip of `ns` is a slow phase's, given the run's usual
/// (median) one.
fn is_slow_phase(ns: f64, usual_ns: f64) -> bool {
    ns > SLOW_PHASE_FACTOR * usual_ns
}

/// What a sweep's [`MachineGate`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SlowPhases {
    /// Seconds spent waiting for the fast phase.
    pub waited_s: f64,
    /// Points run again because a slow phase began during them.
    pub reruns: usize,
}

impl SweepConfig {
    /// Load points from 5 % to 130 % of the probed capacity. The probe
    /// runs closed loop with many requests in flight, so it batches better
    /// than Poisson arrivals can: open-loop knees were seen at 30-60 % of
    /// it, hence the dense low end.
    pub const DEFAULT_FRACTIONS: [f64; 11] = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.1, 1.3];

    /// The default sweep around `point`.
    pub fn new(point: LoadConfig) -> Self {
        SweepConfig {
            point,
            fractions: Self::DEFAULT_FRACTIONS.to_vec(),
            probe_outstanding: 32,
            bound: LatencyBound::default(),
            refine: 2,
            gate: None,
        }
    }
}

/// Which latency quantile a bound holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantile {
    /// The median.
    P50,
    /// The 99th percentile: the paper's SLO (its Figure 6 reads maxima at
    /// a p99 of ~50-60 µs).
    P99,
}

impl Quantile {
    /// This quantile of `p`'s latencies, µs.
    pub fn of(self, p: &PointResult) -> f64 {
        match self {
            Quantile::P50 => p.p50_us,
            Quantile::P99 => p.p99_us,
        }
    }

    /// `p50` or `p99`.
    pub fn name(self) -> &'static str {
        match self {
            Quantile::P50 => "p50",
            Quantile::P99 => "p99",
        }
    }
}

/// The latency a load point may have and still count as kept up: an SLO on
/// one quantile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyBound {
    /// The quantile held to the bound.
    pub quantile: Quantile,
    /// How the bound is set.
    pub rule: BoundRule,
}

/// How a [`LatencyBound`] is set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BoundRule {
    /// At most this many microseconds.
    Fixed(f64),
    /// At most `factor` times the quantile at the sweep's first (lowest)
    /// load point, and never less than `floor_us`: "no queue has built up
    /// yet", whatever the workload's unloaded latency is.
    RelativeToLowLoad {
        /// Multiple of the low-load latency.
        factor: f64,
        /// The bound's minimum, µs.
        floor_us: f64,
    },
}

impl Default for LatencyBound {
    /// The p99 SLO: 10x the low-load p99, at least 50 µs.
    fn default() -> Self {
        LatencyBound::p99_default()
    }
}

impl LatencyBound {
    /// p99 within 10x the low-load p99, and at least 50 µs.
    pub fn p99_default() -> Self {
        LatencyBound { quantile: Quantile::P99, rule: BoundRule::RelativeToLowLoad { factor: 10.0, floor_us: 50.0 } }
    }

    /// The median within 20x the low-load median, and at least 200 µs
    /// (the rule before the p99 SLO; kept as an option).
    pub fn p50_default() -> Self {
        LatencyBound { quantile: Quantile::P50, rule: BoundRule::RelativeToLowLoad { factor: 20.0, floor_us: 200.0 } }
    }

    /// The bound in microseconds, given the quantile's latency at the
    /// lowest load.
    pub fn bound_us(self, low_load_us: f64) -> f64 {
        match self.rule {
            BoundRule::Fixed(us) => us,
            BoundRule::RelativeToLowLoad { factor, floor_us } => (factor * low_load_us).max(floor_us),
        }
    }
}

/// The machine's own gaps, as a share of a spinning core's time summed over
/// the server's and the client's cores, above which a p99 bound measures
/// the machine rather than the system: every request that arrives during a
/// gap on either side is late, so this share of requests is slow whatever
/// the server does (`cf tails` shows it request by request).
pub const MACHINE_P99_SHARE: f64 = 0.01;

/// Why a p99 bound would measure the machine, when it would: the cores'
/// gaps over 20 µs ([`crate::hiccup`], watched with nothing else running)
/// add up to [`MACHINE_P99_SHARE`] or more of their time.
pub fn p99_measures_the_machine(cores: &[crate::hiccup::CoreHiccups]) -> Option<String> {
    let lost: f64 = cores.iter().map(|h| h.lost_over_20us_share).sum();
    if cores.is_empty() || lost < MACHINE_P99_SHARE {
        return None;
    }
    let each: Vec<String> =
        cores.iter().map(|h| format!("core {} {:.2} %", h.core, 100.0 * h.lost_over_20us_share)).collect();
    let periodic: f64 = cores.iter().flat_map(|h| &h.trains).map(|t| t.lost_share).sum();
    let mut periods_ms: Vec<u64> =
        cores.iter().flat_map(|h| &h.trains).map(|t| (t.period_us / 1e3).round() as u64).collect();
    periods_ms.sort_unstable();
    periods_ms.dedup();
    let trains = if periodic > 0.0 {
        let every: Vec<String> = periods_ms.iter().map(|ms| format!("{ms} ms")).collect();
        format!(
            " ({:.1} % in gaps that recur every {}: cf hiccup names them, such as the scheduler tick)",
            100.0 * periodic,
            every.join(" and ")
        )
    } else {
        String::new()
    };
    Some(format!(
        "this machine takes {} of a spinning core's time in gaps over 20 µs (cf hiccup), {:.1} % together{trains}: at least that share of requests is late whatever the server does, so a p99 bound would measure the machine (cf tails shows it request by request)",
        each.join(", "),
        100.0 * lost
    ))
}

/// Points past the listed fractions before a sweep gives up looking for
/// the load the system cannot keep up with.
const MAX_EXTRA_POINTS: usize = 6;

/// Loads tried a second time per sweep (see [`sweep`]).
const MAX_RETRIES: usize = 3;

/// A point not kept up with while neither the server nor the load
/// generator was busy for this share of it did not meet the system's limit
/// (at a maximum the busier side is usually busy 56-97 % of the time on
/// the 2-core guests) but a stall of the machine: a 179 ms median at 40 % of
/// the probe, twice in a row, ended one Google 1-8 sweep of Cornflakes at
/// 381 k against its other repeats' 722-828 k.
const IDLE_FAILURE_SHARE: f64 = 0.5;

/// Such points tried again per sweep, beyond [`MAX_RETRIES`].
const MAX_IDLE_RETRIES: usize = 4;

/// Points whose latency sets the bound of a [`BoundRule::RelativeToLowLoad`]
/// SLO (the smallest of them).
const LOW_LOAD_POINTS: usize = 2;

/// A sweep's outcome.
#[derive(Clone, Debug)]
pub struct SweepResult {
    /// The closed-loop probe.
    pub probe: PointResult,
    /// Open-loop points, in the order run.
    pub points: Vec<PointResult>,
    /// The quantile the points were held to.
    pub quantile: Quantile,
    /// The bound (µs) that quantile was held to.
    pub bound_us: f64,
    /// What the machine gate did (all zero without one).
    pub slow_phases: SlowPhases,
    /// The machine's cross-core copy bandwidth after each point, GB/s
    /// ([`MachineGate::copy_gbps`]; empty without a gate).
    pub copy_gbps: Vec<f64>,
}

impl SweepResult {
    /// The point with the highest achieved load among those the system
    /// kept up with, or among all points if it kept up with none: its p99
    /// is then the overloaded one.
    pub fn best(&self) -> Option<&PointResult> {
        let by_load = |a: &&PointResult, b: &&PointResult| a.achieved.total_cmp(&b.achieved);
        self.points
            .iter()
            .filter(|p| p.kept_up(self.quantile, self.bound_us))
            .max_by(by_load)
            .or_else(|| self.points.iter().max_by(by_load))
    }

    /// The server's highest busy capacity (requests per second of busy
    /// time) over the points kept up with. Not the capacity at the best
    /// point: near the load generator's own limit the server also spins on
    /// back-pressure, which counts as busy.
    pub fn server_busy_capacity(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| p.kept_up(self.quantile, self.bound_us))
            .filter_map(|p| p.server.and_then(|s| s.busy_capacity_rps()))
            .max_by(f64::total_cmp)
    }

    /// Why the highest load kept up with is below half the closed-loop
    /// probe, when it is: the first point above it that was not kept up
    /// with and what it missed. An open loop with Poisson arrivals reaches
    /// less than a closed loop with many requests in flight, but not less
    /// than half on a system without a latency problem.
    pub fn below_probe(&self) -> Option<String> {
        let best = self.best()?;
        if best.achieved >= 0.5 * self.probe.achieved {
            return None;
        }
        let miss = self
            .points
            .iter()
            .filter(|p| p.offered.is_some_and(|o| o > best.offered.unwrap_or(0.0)))
            .find(|p| !p.kept_up(self.quantile, self.bound_us));
        let why = match miss {
            Some(p) if p.fell_behind() => format!(
                "at {:.0}/s offered it achieved {:.0}/s with {} timeouts",
                p.offered.unwrap_or(0.0),
                p.achieved,
                p.timeouts
            ),
            Some(p) => format!(
                "at {:.0}/s offered its {} was {:.1} µs, over the bound of {:.1} µs",
                p.offered.unwrap_or(0.0),
                self.quantile.name(),
                self.quantile.of(p),
                self.bound_us
            ),
            None => "no point above it was run".into(),
        };
        Some(format!(
            "max {:.0}/s is {:.0} % of the closed-loop probe ({:.0}/s): {why}",
            best.achieved,
            100.0 * best.achieved / self.probe.achieved,
            self.probe.achieved
        ))
    }

    /// Errors over all points, the probe included.
    pub fn errors(&self) -> u64 {
        self.points.iter().chain([&self.probe]).map(|p| p.errors).sum()
    }

    /// Timeouts over all open-loop points.
    pub fn timeouts(&self) -> u64 {
        self.points.iter().map(|p| p.timeouts).sum()
    }
}

/// Raises the offered load until the system no longer keeps up (achieved
/// below 95 % of offered, timeouts, or the SLO quantile over the bound) with
/// one load twice in a row: first a closed-loop probe estimates the
/// capacity, then open-loop points run at fractions of it, then a few
/// points bisect between the last load kept up with and the first one not
/// (the rules are [`SweepPlan`]'s). `progress` hears about each point;
/// `server_counters`, when it can ask the server, is called before and
/// after each open-loop point.
pub fn sweep(
    target: &Target,
    system: System,
    workload: &dyn Workload,
    cfg: &SweepConfig,
    core: Option<usize>,
    mut progress: impl FnMut(&str),
    mut server_counters: impl FnMut() -> Option<ServerStats>,
) -> Result<SweepResult, Error> {
    let mut plan = SweepPlan::new(cfg);
    plan.probe(target, system, workload, core, &mut progress)?;
    while plan.measure(target, system, workload, core, &mut progress, &mut server_counters)?.is_some() {}
    Ok(plan.finish())
}

/// One sweep as a sequence of steps, so that the sweeps of several systems
/// can run interleaved point by point (`cf compare`): [`probe`](Self::probe)
/// once, then [`measure`](Self::measure) until [`is_done`](Self::is_done),
/// then [`finish`](Self::finish).
///
/// The points: the configured fractions of the probe, then 20 % more each
/// time, until a load is not kept up with; then `refine` points bisecting
/// between the highest load kept up with and that one. A load not kept up
/// with is tried once more before the sweep believes it: this VM stalls for
/// milliseconds now and then, at any load, and one stall used to end a
/// sweep at a random low load. A load not kept up with while both sides
/// were mostly idle (busier side under [`IDLE_FAILURE_SHARE`]) is tried
/// again however often it failed: it was not the system's limit. The
/// retries per sweep are bounded, so a system that misses its SLO
/// everywhere costs a few points more, not twice the time.
#[derive(Debug)]
pub struct SweepPlan {
    cfg: SweepConfig,
    probe: Option<PointResult>,
    points: Vec<PointResult>,
    /// The quantile at the lowest loads, of which the bound takes the
    /// smallest: one stall of the machine in the first point must not
    /// loosen the SLO of the whole sweep.
    low_load: Vec<f64>,
    bound_us: f64,
    retries_left: usize,
    idle_retries_left: usize,
    /// The next point runs the last load again (it was not kept up with),
    /// and why.
    again: Option<Again>,
    slow_phases: SlowPhases,
    copy_gbps: Vec<f64>,
    stage: Stage,
}

/// Why a [`SweepPlan`] runs the last load again.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Again {
    /// It was not kept up with: a stall of the machine, or the limit.
    Unsure,
    /// It was not kept up with while the busier side was busy for only
    /// this share of the point: a stall, not the limit.
    Idle { busier: f64 },
}

/// Where a [`SweepPlan`] is.
#[derive(Clone, Copy, Debug)]
enum Stage {
    /// Before the probe.
    Probe,
    /// Raising the load: the `tried`-th fraction (counting extra points),
    /// the highest rate kept up with so far.
    Climb {
        tried: usize,
        fraction: f64,
        kept_rate: Option<f64>,
    },
    /// Bisecting between `lo` (kept up with) and `hi` (not), `left` points
    /// to go.
    Bisect {
        lo: f64,
        hi: f64,
        left: usize,
    },
    Done,
}

/// The load point a [`SweepPlan`] measures next.
#[derive(Clone, Debug, PartialEq)]
struct Step {
    /// Offered load, requests per second.
    rate: f64,
    /// Why this load, for the progress line.
    what: String,
}

impl SweepPlan {
    /// A sweep by `cfg`, before its probe.
    pub fn new(cfg: &SweepConfig) -> Self {
        SweepPlan {
            cfg: cfg.clone(),
            probe: None,
            points: Vec::new(),
            low_load: Vec::new(),
            bound_us: f64::INFINITY,
            retries_left: MAX_RETRIES,
            idle_retries_left: MAX_IDLE_RETRIES,
            again: None,
            slow_phases: SlowPhases::default(),
            copy_gbps: Vec::new(),
            stage: Stage::Probe,
        }
    }

    /// Runs the closed-loop probe (after waiting out a slow phase of the
    /// machine, with a gate).
    ///
    /// # Errors
    ///
    /// The load generator's, or [`Error::Failed`] when the system answered
    /// nothing correctly.
    pub fn probe(
        &mut self,
        target: &Target,
        system: System,
        workload: &dyn Workload,
        core: Option<usize>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<&PointResult, Error> {
        if let Some(gate) = &self.cfg.gate {
            self.slow_phases.waited_s += gate.wait_for_fast_phase(progress);
        }
        progress("probing capacity (closed loop)");
        let cfg = LoadConfig { rate: None, max_outstanding: self.cfg.probe_outstanding, ..self.cfg.point.clone() };
        let probe = run_point(target, system, workload, &cfg, core)?;
        if probe.completed == 0 {
            self.stage = Stage::Done;
            return Err(Error::Failed(format!(
                "{} answered no {} correctly in the probe ({} errors, {} timeouts)",
                system.name(),
                workload.unit(),
                probe.errors,
                probe.timeouts
            )));
        }
        self.stage = Stage::Climb { tried: 0, fraction: self.fraction(0, 0.0), kept_rate: None };
        Ok(self.probe.insert(probe))
    }

    /// The `tried`-th fraction of the probe: the configured ones, then 20 %
    /// more than `last` each time.
    fn fraction(&self, tried: usize, last: f64) -> f64 {
        self.cfg.fractions.get(tried).copied().unwrap_or(last * 1.2)
    }

    /// Whether no point is left to measure (or the probe has not run).
    pub fn is_done(&self) -> bool {
        self.next_point().is_none()
    }

    /// The next point to measure; `None` when the sweep is done (or has not
    /// probed yet).
    fn next_point(&self) -> Option<Step> {
        let probe = self.probe.as_ref()?.achieved;
        let (rate, what) = match self.stage {
            Stage::Probe | Stage::Done => return None,
            Stage::Climb { fraction, .. } => (probe * fraction, format!("{:.0} % of the probe", fraction * 100.0)),
            Stage::Bisect { lo, hi, .. } => ((lo + hi) / 2.0, "refining".to_owned()),
        };
        let what = match self.again {
            Some(Again::Unsure) => "the same load again: a stall of the machine, or the limit?".to_owned(),
            Some(Again::Idle { busier }) => format!(
                "the same load again: it was missed with neither side busy over {:.0} % of the time, a stall, not the limit",
                busier * 100.0
            ),
            None => what,
        };
        Some(Step { rate, what })
    }

    /// Measures the next point: waits out a slow phase of the machine,
    /// runs the point, runs it again when a slow phase began during it, and
    /// records it. `server_counters` is asked before and after. Whether the
    /// point was kept up with; `None` when the sweep is done.
    ///
    /// # Errors
    ///
    /// The load generator's.
    pub fn measure(
        &mut self,
        target: &Target,
        system: System,
        workload: &dyn Workload,
        core: Option<usize>,
        progress: &mut dyn FnMut(&str),
        server_counters: &mut dyn FnMut() -> Option<ServerStats>,
    ) -> Result<Option<bool>, Error> {
        let Some(step) = self.next_point() else { return Ok(None) };
        progress(&format!("point {}: offered {:.0}/s ({})", self.points.len() + 1, step.rate, step.what));
        let mut reruns_left = MAX_SLOW_PHASE_RERUNS.saturating_sub(self.slow_phases.reruns);
        let point = loop {
            if let Some(gate) = &self.cfg.gate {
                self.slow_phases.waited_s += gate.wait_for_fast_phase(progress);
            }
            let before = server_counters();
            let cfg = LoadConfig { rate: Some(step.rate), ..self.cfg.point.clone() };
            let mut point = run_point(target, system, workload, &cfg, core)?;
            point.server = before.zip(server_counters()).map(|(b, a)| a.since(&b));
            match self.cfg.gate.as_ref().and_then(|g| g.measure(true)) {
                Some((ns, true)) if reruns_left > 0 => {
                    reruns_left -= 1;
                    self.slow_phases.reruns += 1;
                    progress(&format!(
                        "  a slow phase of the machine began during the point (core round trip {ns:.0} ns): running it again"
                    ));
                }
                _ => break point,
            }
        };
        if let Some(gbps) = self.cfg.gate.as_ref().and_then(MachineGate::copy_gbps) {
            self.copy_gbps.push(gbps);
        }
        let kept = self.record(step.rate, point);
        if !kept {
            let p = self.points.last().expect("just recorded");
            progress(&format!(
                "  not kept up: achieved {:.0}/s, p50 {:.1} µs, p99 {:.1} µs ({} bound {:.1}), {} timeouts",
                p.achieved,
                p.p50_us,
                p.p99_us,
                self.cfg.bound.quantile.name(),
                self.bound_us,
                p.timeouts
            ));
        }
        Ok(Some(kept))
    }

    /// Records a point measured at `rate` and moves the plan on; whether
    /// it was kept up with.
    fn record(&mut self, rate: f64, point: PointResult) -> bool {
        if self.low_load.len() < LOW_LOAD_POINTS {
            self.low_load.push(self.cfg.bound.quantile.of(&point));
            self.bound_us = self.cfg.bound.bound_us(self.low_load.iter().copied().fold(f64::INFINITY, f64::min));
        }
        let kept = point.kept_up(self.cfg.bound.quantile, self.bound_us);
        let busier = point.server_busy_fraction().zip(point.client_busy_fraction()).map(|(s, c)| s.max(c));
        self.points.push(point);
        if !kept {
            match busier {
                Some(busier) if busier < IDLE_FAILURE_SHARE && self.idle_retries_left > 0 => {
                    self.idle_retries_left -= 1;
                    self.again = Some(Again::Idle { busier });
                    return kept;
                }
                _ if self.again.is_none() && self.retries_left > 0 => {
                    self.retries_left -= 1;
                    self.again = Some(Again::Unsure);
                    return kept;
                }
                _ => {}
            }
        }
        self.again = None;
        self.stage = match self.stage {
            Stage::Climb { tried, fraction, .. } if kept => {
                let tried = tried + 1;
                if tried >= self.cfg.fractions.len() + MAX_EXTRA_POINTS {
                    Stage::Done
                } else {
                    Stage::Climb { tried, fraction: self.fraction(tried, fraction), kept_rate: Some(rate) }
                }
            }
            Stage::Climb { kept_rate, .. } if self.cfg.refine > 0 => {
                Stage::Bisect { lo: kept_rate.unwrap_or(0.0), hi: rate, left: self.cfg.refine }
            }
            Stage::Bisect { lo, hi, left, .. } if left > 1 => {
                let (lo, hi) = if kept { (rate, hi) } else { (lo, rate) };
                Stage::Bisect { lo, hi, left: left - 1 }
            }
            _ => Stage::Done,
        };
        kept
    }

    /// The sweep so far (after [`probe`](Self::probe); a sweep whose probe
    /// failed has no result).
    ///
    /// # Panics
    ///
    /// Before a successful probe.
    pub fn finish(self) -> SweepResult {
        SweepResult {
            probe: self.probe.expect("the sweep was probed"),
            points: self.points,
            quantile: self.cfg.bound.quantile,
            bound_us: self.bound_us,
            slow_phases: self.slow_phases,
            copy_gbps: self.copy_gbps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{BoundRule, LatencyBound, Quantile, SweepResult};
    use crate::loadgen::PointResult;

    fn point(offered: Option<f64>, achieved: f64, p99_us: f64, timeouts: u64) -> PointResult {
        PointResult {
            offered,
            achieved,
            p50_us: 2.0,
            p99_us,
            p999_us: p99_us,
            offered_count: 1000,
            completed: 1000,
            timeouts,
            errors: 0,
            server: None,
            client: None,
        }
    }

    /// Drives a plan against a system that keeps up with loads up to
    /// `capacity`, except at the loads in `stalls` the first time each is
    /// run; the loads run, in order.
    fn drive(capacity: f64, stalls: &[f64]) -> (Vec<f64>, SweepResult) {
        let stalls: Vec<(f64, usize)> = stalls.iter().map(|&r| (r, 1)).collect();
        drive_measured(capacity, &stalls, false)
    }

    /// [`drive`] with stalls `(load, how many runs of it in a row)`, and,
    /// when `busy`, both sides' busy shares measured: the load over the
    /// capacity (a stall leaves them as low as the load).
    fn drive_measured(capacity: f64, stalls: &[(f64, usize)], busy: bool) -> (Vec<f64>, SweepResult) {
        let cfg = super::SweepConfig {
            fractions: vec![0.25, 0.5, 0.75, 1.0],
            bound: LatencyBound { quantile: Quantile::P99, rule: BoundRule::Fixed(50.0) },
            ..super::SweepConfig::new(crate::loadgen::LoadConfig {
                rate: None,
                threads: 1,
                warmup: std::time::Duration::ZERO,
                duration: std::time::Duration::from_secs(1),
                timeout: std::time::Duration::from_millis(500),
                max_outstanding: 16,
                seed: 1,
                in_place: false,
            })
        };
        let mut plan = super::SweepPlan::new(&cfg);
        assert_eq!(plan.next_point(), None, "nothing before the probe");
        plan.probe = Some(point(None, 100_000.0, 30.0, 0));
        plan.stage = super::Stage::Climb { tried: 0, fraction: 0.25, kept_rate: None };
        let mut rates: Vec<f64> = Vec::new();
        while let Some(step) = plan.next_point() {
            let r = step.rate;
            let runs_before = rates.iter().filter(|&&x| x == r).count();
            let stall = stalls.iter().any(|&(s, times)| s == r && runs_before < times);
            let p99 = if r <= capacity && !stall { 10.0 } else { 900.0 };
            let mut p = point(Some(r), r, p99, 0);
            if busy {
                let share = (r / capacity).min(1.0);
                let wall_ns = 1_000_000_000;
                let busy_ns = (share * wall_ns as f64) as u64;
                p.server = Some(cornflakes_kv::ServerStats { busy_ns, ..Default::default() });
                p.client = Some(crate::loadgen::ClientBusy { busy_ns, wall_ns, responses: r as u64, threads: 1 });
            }
            plan.record(r, p);
            rates.push(r);
            assert!(rates.len() < 30, "the plan ends: {rates:?}");
        }
        (rates, plan.finish())
    }

    #[test]
    fn a_plan_climbs_tries_a_miss_twice_then_bisects() {
        let (rates, result) = drive(60_000.0, &[]);
        // 25 k, 50 k kept; 75 k missed twice; bisect 62.5 k (twice: a miss),
        // then 56.25 k.
        assert_eq!(rates, [25_000.0, 50_000.0, 75_000.0, 75_000.0, 62_500.0, 62_500.0, 56_250.0]);
        assert_eq!(result.best().map(|b| b.achieved), Some(56_250.0));
        assert_eq!(result.bound_us, 50.0);
    }

    #[test]
    fn a_stall_in_one_point_does_not_end_the_sweep() {
        let (rates, result) = drive(90_000.0, &[50_000.0]);
        assert_eq!(&rates[..3], [25_000.0, 50_000.0, 50_000.0], "the stalled load again");
        // 75 k kept, 100 k missed twice, 87.5 k kept, 93.75 k missed twice.
        assert_eq!(&rates[3..], [75_000.0, 100_000.0, 100_000.0, 87_500.0, 93_750.0, 93_750.0]);
        assert_eq!(result.best().map(|b| b.achieved), Some(87_500.0));
    }

    #[test]
    fn a_load_missed_while_both_sides_idled_is_tried_until_it_passes() {
        // 25 k is missed three times in a row with both sides 28 % busy: a
        // stall of the machine. Without busy shares the second miss is
        // believed and the sweep ends below 25 k.
        let (rates, result) = drive_measured(90_000.0, &[(25_000.0, 3)], false);
        assert_eq!(&rates[..2], [25_000.0, 25_000.0]);
        assert!(result.best().is_none_or(|b| b.achieved < 25_000.0), "{rates:?}");
        let (rates, result) = drive_measured(90_000.0, &[(25_000.0, 3)], true);
        assert_eq!(&rates[..5], [25_000.0, 25_000.0, 25_000.0, 25_000.0, 50_000.0], "{rates:?}");
        assert_eq!(result.best().map(|b| b.achieved), Some(87_500.0), "{rates:?}");
        // At the limit both sides are busy: a miss is tried once more, as
        // without busy shares.
        let (busy, _) = drive_measured(60_000.0, &[], true);
        assert_eq!(busy, drive(60_000.0, &[]).0);
    }

    #[test]
    fn idle_misses_are_tried_again_a_bounded_number_of_times() {
        let (rates, _) = drive_measured(90_000.0, &[(25_000.0, 100)], true);
        let runs = rates.iter().filter(|&&r| r == 25_000.0).count();
        assert_eq!(runs, 1 + super::MAX_IDLE_RETRIES, "{rates:?}");
    }

    #[test]
    fn a_plan_that_keeps_up_everywhere_ends_after_its_extra_points() {
        let (rates, _) = drive(f64::INFINITY, &[]);
        assert_eq!(rates.len(), 4 + super::MAX_EXTRA_POINTS);
        assert!((rates[4] - 120_000.0).abs() < 1e-6 && (rates[5] - 144_000.0).abs() < 1e-6, "{rates:?}");
    }

    #[test]
    fn a_maximum_below_half_the_probe_says_which_point_stopped_it() {
        let sweep = |points| SweepResult {
            probe: point(None, 100_000.0, 30.0, 0),
            points,
            quantile: Quantile::P99,
            bound_us: 50.0,
            slow_phases: Default::default(),
            copy_gbps: Vec::new(),
        };
        let latency = sweep(vec![
            point(Some(10_000.0), 10_000.0, 5.0, 0),
            point(Some(30_000.0), 30_000.0, 40.0, 0),
            point(Some(40_000.0), 40_000.0, 900.0, 0),
        ]);
        let why = latency.below_probe().expect("30 % of the probe");
        assert!(why.contains("30 % of the closed-loop probe") && why.contains("p99 was 900.0 µs"), "{why}");
        let behind = sweep(vec![point(Some(10_000.0), 10_000.0, 5.0, 0), point(Some(40_000.0), 30_000.0, 20.0, 7)]);
        assert!(behind.below_probe().expect("10 %").contains("7 timeouts"));
        let fine = sweep(vec![point(Some(60_000.0), 60_000.0, 5.0, 0), point(Some(90_000.0), 80_000.0, 20.0, 0)]);
        assert_eq!(fine.below_probe(), None);
    }

    #[test]
    fn a_p99_bound_is_refused_only_when_the_machine_loses_a_percent_of_its_cores() {
        let core = |core, share| crate::hiccup::CoreHiccups {
            core,
            seconds: 1.0,
            over_20us: 100,
            lost_over_20us_share: share,
            over_50us: 10,
            over_200us: 1,
            over_1ms: 0,
            max_us: 300.0,
            lost_share: share / 2.0,
            trains: Vec::new(),
        };
        assert_eq!(super::p99_measures_the_machine(&[]), None);
        assert_eq!(super::p99_measures_the_machine(&[core(0, 0.004), core(1, 0.005)]), None);
        let why = super::p99_measures_the_machine(&[core(0, 0.004), core(1, 0.014)]).expect("1.8 % together");
        assert!(why.contains("core 1 1.40 %") && why.contains("1.8 % together"), "{why}");
        assert!(!why.contains("recur"), "{why}");
        let train = |period_us: f64, lost_share| crate::gap_trains::GapTrain {
            period_us,
            gaps: 250,
            share_of_gaps: 0.5,
            share_of_periods: 1.0,
            lost_share,
            median_us: 30.0,
            source: None,
        };
        let mut ticking = core(1, 0.014);
        ticking.trains = vec![train(10_000.4, 0.004), train(3_999.9, 0.006)];
        let mut other = core(0, 0.004);
        other.trains = vec![train(4_000.2, 0.002)];
        let why = super::p99_measures_the_machine(&[other, ticking]).expect("1.8 % together");
        assert!(why.contains("(1.2 % in gaps that recur every 4 ms and 10 ms"), "{why}");
    }

    #[test]
    fn a_slow_phase_is_twice_the_usual_round_trip() {
        assert!(!super::is_slow_phase(28.0, 65.0), "the faster mode is not slow");
        assert!(!super::is_slow_phase(125.0, 65.0));
        assert!(super::is_slow_phase(250.0, 65.0));
        let gate = super::MachineGate::new(0, 1);
        assert!(gate.usual_ns().is_nan(), "nothing measured yet");
        gate.seen_ns.lock().unwrap().extend([65.0, 28.0, 250.0, 66.0, 61.0]);
        assert_eq!(gate.usual_ns(), 65.0);
    }

    #[test]
    fn the_latency_bound_follows_the_low_load_latency_above_a_floor() {
        let bound = LatencyBound::p50_default();
        assert_eq!(bound.bound_us(5.0), 200.0);
        assert_eq!(bound.bound_us(80.0), 1600.0);
        let slo = LatencyBound::default();
        assert_eq!(slo.quantile, Quantile::P99);
        assert_eq!((slo.bound_us(3.0), slo.bound_us(20.0)), (50.0, 200.0));
        assert_eq!(LatencyBound { quantile: Quantile::P99, rule: BoundRule::Fixed(70.0) }.bound_us(40.0), 70.0);
    }
}
