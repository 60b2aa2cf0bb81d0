//! `cf overload`: a soak of the key-value server under overload, to check
//! that it sheds load instead of collapsing, that its memory stays bounded
//! and that it recovers once the overload stops (issue 10).
//!
//! The server runs as a child process (`cf kv-server`, pinned to one core);
//! the load comes from this process (pinned to the other core), as in
//! `cf compare`. The run has four phases:
//!
//! ```text
//!  capacity     before          overload (factor x capacity)        after
//!  (probe and  normal load     1 s load points, two lanes taking    normal load
//!  --capacity)  in 100 ms       turns, so that one point's tail      in 100 ms
//!               windows         (waiting for late responses)          windows
//!                               overlaps the next point's start
//!  ───────────┼──────────────┼───────────────────────────────────┼──────────────► t
//!                             0                                  seconds
//! ```
//!
//! Each phase is made of ordinary [`run_point`] calls against the running
//! server, so the load generator is the one every other benchmark uses
//! (Poisson arrivals, latency from the scheduled arrival, every response
//! checked). A 1 s point with no warm-up gives that second's goodput:
//! responses that were correct and arrived within the timeout, per second
//! of arrivals. Normal load runs in short windows so that the latency right
//! after the overload can be seen window by window.
//!
//! Once per second the server is asked for its counters (a
//! [`ServerReport`]: requests handled, pool bytes, datapath drops) and its
//! resident memory is read from `/proc/<pid>/status`.
//!
//! The summary gives the goodput during the overload as a share of the
//! capacity, the smallest and largest resident memory and pool during the
//! overload, and the recovery time: from the end of the overload to the end
//! of the first normal-load window with no timeout, no error and a p99
//! within 2x of the reference p99 (the median of the windows' p99 before
//! the overload).
//!
//! What this does not measure: a load generator on one core cannot offer
//! every rate; when it falls behind its own schedule, the arrivals it could
//! not send count as timeouts (they are in `offered`), so compare `offered`
//! with the server's `received` to see what reached the server.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use cornflakes_kv::System;
use cornflakes_workloads::{Workload, WorkloadSpec};

use crate::child::ServerChild;
use crate::kv::ServerReport;
use crate::loadgen::{run_point, LoadConfig, PointResult};
use crate::transport::{Target, Transport};
use crate::Error;

/// What `cf overload` runs.
#[derive(Clone, Debug)]
pub struct OverloadConfig {
    /// Datapath.
    pub transport: Transport,
    /// Serializer.
    pub system: System,
    /// Workload.
    pub workload: WorkloadSpec,
    /// Seconds of overload.
    pub seconds: u32,
    /// Overload as a multiple of the capacity.
    pub factor: f64,
    /// The capacity (requests per second); `None` measures it first with
    /// 1 s points (the highest load achieved with 95 % of it achieved and
    /// at most 0.1 % timed out).
    pub capacity: Option<f64>,
    /// Normal load as a fraction of the capacity (before and after).
    pub normal_fraction: f64,
    /// Normal load before the overload (the reference p99).
    pub before: Duration,
    /// Normal load after the overload (the recovery).
    pub after: Duration,
    /// Length of a normal-load window.
    pub window: Duration,
    /// A request without a response after this long is a timeout.
    pub timeout: Duration,
    /// Client threads per load point.
    pub threads: usize,
    /// Core of the server.
    pub server_core: usize,
    /// Core of the load generator.
    pub client_core: usize,
    /// UDP: the server's socket buffer, bytes (`cf kv-server
    /// --udp-socket-buffer`).
    pub udp_socket_buffer: usize,
}

/// Which part of the run a load point belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Normal load before the overload.
    Before,
    /// The overload.
    Overload,
    /// Normal load after the overload.
    After,
}

/// One load point of the run.
#[derive(Clone, Debug)]
pub struct Interval {
    /// Phase.
    pub phase: Phase,
    /// When its arrivals began, seconds from the start of the overload
    /// (negative before it).
    pub begin: f64,
    /// Its recorded length, seconds.
    pub secs: f64,
    /// What it measured.
    pub result: PointResult,
}

/// What the server looked like at one moment.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Seconds from the start of the overload.
    pub at: f64,
    /// Resident memory of the server process, bytes (`None` if unreadable).
    pub rss: Option<u64>,
    /// The server's counters (`None` if it did not answer).
    pub report: Option<ServerReport>,
    /// UDP datagrams the kernel dropped for lack of socket buffer, all
    /// sockets of the machine (`RcvbufErrors` of `/proc/net/snmp`): with
    /// the server's own count, tells the load generator's drops.
    pub udp_rcvbuf_errors: Option<u64>,
}

/// The figures of a run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Transport name.
    pub transport: String,
    /// System name.
    pub system: String,
    /// Workload name.
    pub workload: String,
    /// Capacity the overload is relative to, requests per second.
    pub capacity_rps: f64,
    /// Whether the capacity was measured (else given).
    pub capacity_measured: bool,
    /// Offered load during the overload, requests per second.
    pub overload_offered_rps: f64,
    /// Correct responses within the timeout per second during the
    /// overload.
    pub overload_goodput_rps: f64,
    /// `overload_goodput_rps` as a percentage of `capacity_rps`.
    pub overload_goodput_pct: f64,
    /// Timeouts during the overload.
    pub overload_timeouts: u64,
    /// Wrong responses during the whole run.
    pub errors: u64,
    /// Smallest and largest resident memory of the server during the
    /// overload, bytes.
    pub overload_rss_min: Option<u64>,
    /// See `overload_rss_min`.
    pub overload_rss_max: Option<u64>,
    /// Resident memory when the overload began, and at the end of the
    /// run, bytes.
    pub rss_before: Option<u64>,
    /// See `rss_before`.
    pub rss_end: Option<u64>,
    /// Smallest and largest pool bytes during the overload.
    pub overload_pool_min: Option<u64>,
    /// See `overload_pool_min`.
    pub overload_pool_max: Option<u64>,
    /// Requests handled per second of the server's busy time during the
    /// overload: what it could serve if nothing else held it up.
    pub overload_server_busy_capacity_rps: Option<f64>,
    /// Requests the server handled during the overload, per second.
    pub overload_server_handled_rps: Option<f64>,
    /// Requests the server received, and datagrams the kernel dropped for
    /// lack of socket buffer (UDP), during the overload.
    pub overload_server_received: Option<u64>,
    /// See `overload_server_received`.
    pub overload_server_dropped_no_buffer: Option<u64>,
    /// Datagrams dropped for lack of socket buffer by other UDP sockets of
    /// the machine (the load generator's, unless something else runs)
    /// during the overload.
    pub overload_other_socket_drops: Option<u64>,
    /// Median p99 of the normal-load windows before the overload, µs.
    pub reference_p99_us: Option<f64>,
    /// Seconds from the end of the overload to the end of the first
    /// window back within 2x the reference p99 without timeouts or errors;
    /// `None` if none was.
    pub recovery_s: Option<f64>,
    /// After-windows within the bound, and all after-windows.
    pub after_windows_ok: usize,
    /// See `after_windows_ok`.
    pub after_windows: usize,
}

/// Runs the soak: starts the server, measures (or takes) the capacity,
/// runs the phases, prints a line per second on standard error and the
/// [`Summary`] as the last line of standard output (JSON), after a
/// human-readable summary on standard error.
///
/// # Errors
///
/// [`Error::Invalid`] for settings that cannot work; [`Error::Failed`] when
/// the server cannot start or the load generator fails.
pub fn run(cfg: &OverloadConfig) -> Result<Summary, Error> {
    check(cfg)?;
    let workload = cfg.workload.build().map_err(|e| Error::Invalid(e.to_string()))?;
    let addr = crate::transport::local_server_addr(cfg.transport);
    eprintln!("starting the server ({} on {}, core {})", cfg.system.name(), cfg.transport.name(), cfg.server_core);
    let mut server = ServerChild::spawn_subcommand(
        "kv-server",
        &[
            "--system".into(),
            cfg.system.name().into(),
            "--workload".into(),
            cfg.workload.to_string(),
            "--transport".into(),
            cfg.transport.name().into(),
            "--addr".into(),
            addr.clone(),
            "--core".into(),
            cfg.server_core.to_string(),
            "--udp-socket-buffer".into(),
            cfg.udp_socket_buffer.to_string(),
            "--exit-with-parent".into(),
        ],
    )?;
    let result = soak(cfg, &mut server, workload.as_ref());
    server.finish();
    if cfg.transport == Transport::Shm {
        let _ = std::fs::remove_file(&addr);
    }
    let summary = result?;
    print_summary(&summary);
    println!("{}", serde_json::to_string(&summary).expect("summaries serialize"));
    Ok(summary)
}

fn check(cfg: &OverloadConfig) -> Result<(), Error> {
    let bad = |m: &str| Err(Error::Invalid(m.to_owned()));
    if cfg.seconds == 0 {
        return bad("--seconds must be at least 1");
    }
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !positive(cfg.factor) || !positive(cfg.normal_fraction) {
        return bad("--factor and --normal must be positive");
    }
    if cfg.window.is_zero() || cfg.timeout.is_zero() {
        return bad("--window-ms and --timeout-ms must be positive");
    }
    if cfg.timeout >= Duration::from_secs(1) {
        // A 1 s point's tail (waiting for late responses) would then
        // overlap the next-but-one point of its lane.
        return bad("--timeout-ms must be below 1000");
    }
    if cfg.capacity.is_some_and(|c| !positive(c)) {
        return bad("--capacity must be positive");
    }
    Ok(())
}

/// A message from a load thread to the main thread.
enum Msg {
    Point(Interval),
    Failed(Error),
}

fn soak(cfg: &OverloadConfig, server: &mut ServerChild, workload: &dyn Workload) -> Result<Summary, Error> {
    let target = Target::new(cfg.transport, &server.addr)?;
    let pid = server.id();
    let point = LoadConfig {
        rate: None,
        threads: cfg.threads.max(1),
        warmup: Duration::ZERO,
        duration: Duration::from_secs(1),
        timeout: cfg.timeout,
        // Room for a timeout's worth of lost requests at the overload
        // rate, within the load generator's 65536 message ids.
        max_outstanding: 60_000,
        seed: 1,
        in_place: false,
    };
    let (capacity, measured) = match cfg.capacity {
        Some(c) => (c, false),
        None => (measure_capacity(cfg, &target, workload)?, true),
    };
    let normal_rate = capacity * cfg.normal_fraction;
    let overload_rate = capacity * cfg.factor;
    eprintln!(
        "capacity {capacity:.0} requests/s ({}); normal load {normal_rate:.0}/s, overload {overload_rate:.0}/s for {} s; \
         timeout {} ms; server pid {pid}",
        if measured { "measured" } else { "given" },
        cfg.seconds,
        cfg.timeout.as_millis()
    );
    let before = cfg.before.as_secs_f64();
    let seconds = f64::from(cfg.seconds);
    let after = cfg.after.as_secs_f64();
    // Time for the first point to set up its client.
    let t0 = Instant::now() + cfg.before + Duration::from_millis(200);
    let at = |t: f64| -> Instant {
        if t >= 0.0 {
            t0 + Duration::from_secs_f64(t)
        } else {
            t0 - Duration::from_secs_f64(-t)
        }
    };
    let since_t0 = |i: Instant| -> f64 {
        if i >= t0 {
            i.duration_since(t0).as_secs_f64()
        } else {
            -t0.duration_since(i).as_secs_f64()
        }
    };
    let (tx, rx) = mpsc::channel::<Msg>();
    let core = Some(cfg.client_core);
    let mut intervals: Vec<Interval> = Vec::new();
    let mut samples: Vec<Sample> = Vec::new();
    std::thread::scope(|s| -> Result<(), Error> {
        // Normal load: windows before and after the overload.
        let normal_tx = tx.clone();
        let target_ref = &target;
        let window = LoadConfig { rate: Some(normal_rate), duration: cfg.window, ..point.clone() };
        s.spawn(move || {
            for (phase, from, to) in [(Phase::Before, -before, 0.0), (Phase::After, seconds, seconds + after)] {
                sleep_until(at(from));
                while since_t0(Instant::now()) + window.duration.as_secs_f64() <= to {
                    let begin = since_t0(Instant::now());
                    let msg = match run_point(target_ref, cfg.system, workload, &window, core) {
                        Ok(result) => {
                            Msg::Point(Interval { phase, begin, secs: window.duration.as_secs_f64(), result })
                        }
                        Err(e) => Msg::Failed(e),
                    };
                    if normal_tx.send(msg).is_err() {
                        return;
                    }
                }
            }
        });
        // The overload: two lanes, each running every other second.
        for lane in 0..2u32 {
            let lane_tx = tx.clone();
            let target_ref = &target;
            let point = LoadConfig { rate: Some(overload_rate), ..point.clone() };
            s.spawn(move || {
                for i in (lane..cfg.seconds).step_by(2) {
                    sleep_until(at(f64::from(i)));
                    let mut p = point.clone();
                    p.seed = 1 + u64::from(i);
                    let msg = match run_point(target_ref, cfg.system, workload, &p, core) {
                        Ok(result) => {
                            Msg::Point(Interval { phase: Phase::Overload, begin: f64::from(i), secs: 1.0, result })
                        }
                        Err(e) => Msg::Failed(e),
                    };
                    if lane_tx.send(msg).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        // This thread: one server sample per second; the line of a second
        // once its points are in (the lanes lag up to a timeout behind)
        // and the sample at its end is taken.
        let first = -(before.ceil() as i64);
        let last = (seconds + after).ceil() as i64;
        let window_s = cfg.window.as_secs_f64();
        let mut printed = first;
        let mut print = |intervals: &[Interval], samples: &[Sample], upto: i64, force: bool| {
            while printed < upto {
                let phase_end = if printed < 0 { 0.0 } else { seconds + after };
                if !force && !second_complete(intervals, printed as f64, seconds, phase_end, window_s) {
                    break;
                }
                eprintln!("{}", second_line(printed as f64, seconds, intervals, samples));
                printed += 1;
            }
        };
        for k in first..=last {
            loop {
                while let Ok(msg) = rx.try_recv() {
                    match msg {
                        Msg::Point(iv) => intervals.push(iv),
                        Msg::Failed(e) => return Err(e),
                    }
                }
                print(&intervals, &samples, k - 1, false);
                let now = Instant::now();
                if now >= at(k as f64) {
                    break;
                }
                std::thread::sleep((at(k as f64) - now).min(Duration::from_millis(10)));
            }
            let report = server.report().ok().and_then(|l| ServerReport::from_json_line(&l));
            samples.push(Sample { at: k as f64, rss: rss_of(pid), udp_rcvbuf_errors: udp_rcvbuf_errors(), report });
        }
        for msg in rx.iter() {
            match msg {
                Msg::Point(iv) => intervals.push(iv),
                Msg::Failed(e) => return Err(e),
            }
        }
        print(&intervals, &samples, last, true);
        Ok(())
    })?;
    intervals.sort_by(|a, b| a.begin.total_cmp(&b.begin));
    Ok(summarize(cfg, capacity, measured, workload.name(), &intervals, &samples))
}

/// The capacity: a closed-loop probe, then open-loop 1 s points at rising
/// fractions of it; the highest load achieved while achieving 95 % of the
/// offered load with at most 0.1 % of requests timed out, whatever the
/// latency; two points in a row below that end the search. (The sweep of
/// `cf loadgen` stops at the first timeout, and its latency bound scales
/// from the lowest point's median: on a shared machine one stall made
/// either rule report 1-5 k/s for a server that handled 60 k/s.)
fn measure_capacity(cfg: &OverloadConfig, target: &Target, workload: &dyn Workload) -> Result<f64, Error> {
    eprintln!("measuring the capacity (1 s points; give --capacity to skip)");
    let point = LoadConfig {
        rate: None,
        threads: cfg.threads.max(1),
        warmup: Duration::from_millis(300),
        duration: Duration::from_secs(1),
        timeout: Duration::from_millis(500),
        max_outstanding: 32,
        seed: 1,
        in_place: false,
    };
    let probe = run_point(target, cfg.system, workload, &point, Some(cfg.client_core))?;
    eprintln!("  closed-loop probe: {:.0}/s", probe.achieved);
    if probe.completed == 0 {
        return Err(Error::Failed(format!("no correct response in the probe ({} errors)", probe.errors)));
    }
    let open = LoadConfig { max_outstanding: 16384, ..point };
    let (mut best, mut misses) = (0.0f64, 0);
    for step in 1..=20 {
        let rate = probe.achieved * 0.2 * f64::from(step);
        let p = run_point(
            target,
            cfg.system,
            workload,
            &LoadConfig { rate: Some(rate), ..open.clone() },
            Some(cfg.client_core),
        )?;
        let ok = counts_as_kept_up(&p);
        eprintln!(
            "  offered {rate:.0}/s: achieved {:.0}/s, {} timeouts, p50 {} {}",
            p.achieved,
            p.timeouts,
            format_us(p.p50_us),
            if ok { "" } else { "(behind)" }
        );
        if ok {
            best = best.max(p.achieved);
            misses = 0;
        } else {
            misses += 1;
            if misses == 2 {
                break;
            }
        }
    }
    if best == 0.0 {
        return Err(Error::Failed("the server kept up with no load point; cannot tell its capacity".into()));
    }
    Ok(best)
}

/// Whether a capacity point kept up in throughput: 95 % of the offered
/// load achieved, at most 0.1 % of it timed out.
fn counts_as_kept_up(p: &PointResult) -> bool {
    let offered = p.offered.unwrap_or(0.0);
    p.achieved >= 0.95 * offered && (p.timeouts as f64) <= 0.001 * p.offered_count.max(1) as f64
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Resident memory of process `pid`, bytes.
fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&status)
}

/// `RcvbufErrors` of the `Udp:` lines of `/proc/net/snmp`.
fn udp_rcvbuf_errors() -> Option<u64> {
    parse_rcvbuf_errors(&std::fs::read_to_string("/proc/net/snmp").ok()?)
}

fn parse_rcvbuf_errors(snmp: &str) -> Option<u64> {
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let column = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(column)?.parse().ok()
}

/// `VmRSS` of a `/proc/<pid>/status` text, bytes.
fn parse_vm_rss(status: &str) -> Option<u64> {
    let kb: u64 = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()?;
    Some(kb * 1024)
}

/// Whether every point of second `k` (seconds from the start of the
/// overload) has come in: the overload point of that second; or, for
/// normal load (windows come in order, from one thread), a window that
/// began after the second, or the last window of its phase, which ends at
/// `phase_end`.
fn second_complete(intervals: &[Interval], k: f64, seconds: f64, phase_end: f64, window: f64) -> bool {
    if (0.0..seconds).contains(&k) {
        return intervals.iter().any(|iv| iv.phase == Phase::Overload && iv.begin == k);
    }
    intervals
        .iter()
        .filter(|iv| iv.phase != Phase::Overload)
        .any(|iv| iv.begin >= k + 1.0 || (iv.begin <= phase_end && iv.begin + 2.0 * window > phase_end))
}

/// The points that began in second `k`.
fn in_second(intervals: &[Interval], k: f64) -> impl Iterator<Item = &Interval> {
    intervals.iter().filter(move |iv| iv.begin >= k && iv.begin < k + 1.0)
}

/// Offered, goodput, timeouts, errors and worst p99 of some points.
fn aggregate<'a>(points: impl Iterator<Item = &'a Interval>) -> (f64, f64, u64, u64, f64, usize) {
    let (mut secs, mut offered, mut completed, mut timeouts, mut errors, mut p99, mut n) = (0.0, 0, 0, 0, 0, 0f64, 0);
    for iv in points {
        secs += iv.secs;
        offered += iv.result.offered_count;
        completed += iv.result.completed;
        timeouts += iv.result.timeouts;
        errors += iv.result.errors;
        p99 = p99.max(iv.result.p99_us);
        n += 1;
    }
    if secs == 0.0 {
        return (0.0, 0.0, 0, 0, 0.0, 0);
    }
    (offered as f64 / secs, completed as f64 / secs, timeouts, errors, p99, n)
}

/// The line printed for second `k`. Offered load and goodput are rates
/// over the recorded time of the second's points: normal-load windows
/// leave gaps (each connects a new client), so they cover part of it.
fn second_line(k: f64, seconds: f64, intervals: &[Interval], samples: &[Sample]) -> String {
    let (offered, goodput, timeouts, errors, p99, n) = aggregate(in_second(intervals, k));
    let covered: f64 = in_second(intervals, k).map(|iv| iv.secs).sum();
    let phase = if k < 0.0 {
        "before"
    } else if k < seconds {
        "OVERLOAD"
    } else {
        "after"
    };
    let mut line = format!(
        "t={k:+4.0}s {phase:8} offered {offered:8.0}/s goodput {goodput:8.0}/s timeouts {timeouts:7} errors {errors} \
         p99 {} ({n} points, {:.0} % of the second)",
        format_us(p99),
        covered * 100.0
    );
    let sample = |t: f64| samples.iter().find(|s| s.at == t);
    if let Some(end) = sample(k + 1.0) {
        if let Some(rss) = end.rss {
            line += &format!(" | server RSS {:.1} MB", rss as f64 / 1048576.0);
        }
        if let Some(r) = &end.report {
            line += &format!(", pool {:.1} MB", r.pool_bytes as f64 / 1048576.0);
            if let Some(b) = sample(k).and_then(|s| s.report.as_ref()) {
                line += &format!(
                    ", handled {}/s, received {}/s, socket drops {}/s, responses dropped {}/s",
                    r.stats.handled.saturating_sub(b.stats.handled),
                    r.received.saturating_sub(b.received),
                    r.dropped_no_buffer.saturating_sub(b.dropped_no_buffer),
                    (r.stats.dropped_full + r.stats.send_failed)
                        .saturating_sub(b.stats.dropped_full + b.stats.send_failed),
                );
                if let Some(cap) = r.stats.since(&b.stats).busy_capacity_rps() {
                    line += &format!(", busy capacity {cap:.0}/s");
                }
                let start = sample(k);
                if let (Some(all_end), Some(all_start)) =
                    (end.udp_rcvbuf_errors, start.and_then(|s| s.udp_rcvbuf_errors))
                {
                    let server = r.dropped_no_buffer.saturating_sub(b.dropped_no_buffer);
                    line += &format!(", other UDP socket drops {}/s", (all_end - all_start).saturating_sub(server));
                }
            }
        }
    }
    line
}

fn format_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// The median of `xs` (the lower middle of an even count); `None` when empty.
pub(crate) fn median(mut xs: Vec<f64>) -> Option<f64> {
    xs.sort_by(f64::total_cmp);
    (!xs.is_empty()).then(|| xs[(xs.len() - 1) / 2])
}

/// The figures of a run from its points and samples (see [`Summary`]).
fn summarize(
    cfg: &OverloadConfig,
    capacity: f64,
    measured: bool,
    workload: &str,
    intervals: &[Interval],
    samples: &[Sample],
) -> Summary {
    let seconds = f64::from(cfg.seconds);
    let (offered, goodput, timeouts, _, _, _) = aggregate(intervals.iter().filter(|iv| iv.phase == Phase::Overload));
    let errors = intervals.iter().map(|iv| iv.result.errors).sum();
    let during: Vec<&Sample> = samples.iter().filter(|s| s.at >= 0.0 && s.at <= seconds).collect();
    let rss: Vec<u64> = during.iter().filter_map(|s| s.rss).collect();
    let pool: Vec<u64> = during.iter().filter_map(|s| s.report.as_ref().map(|r| r.pool_bytes)).collect();
    let report_at = |t: f64| samples.iter().find(|s| s.at == t).and_then(|s| s.report.as_ref());
    let (start, end) = (report_at(0.0), report_at(seconds));
    let reference = median(
        intervals
            .iter()
            .filter(|iv| iv.phase == Phase::Before && iv.result.completed > 0)
            .map(|iv| iv.result.p99_us)
            .collect(),
    );
    let after: Vec<&Interval> = intervals.iter().filter(|iv| iv.phase == Phase::After).collect();
    let ok = |iv: &Interval| {
        reference.is_some_and(|r| {
            iv.result.timeouts == 0 && iv.result.errors == 0 && iv.result.completed > 0 && iv.result.p99_us <= 2.0 * r
        })
    };
    Summary {
        transport: cfg.transport.name().to_owned(),
        system: cfg.system.name().to_owned(),
        workload: workload.to_owned(),
        capacity_rps: capacity.round(),
        capacity_measured: measured,
        overload_offered_rps: offered.round(),
        overload_goodput_rps: goodput.round(),
        overload_goodput_pct: (1000.0 * goodput / capacity).round() / 10.0,
        overload_timeouts: timeouts,
        errors,
        overload_rss_min: rss.iter().copied().min(),
        overload_rss_max: rss.iter().copied().max(),
        rss_before: samples.iter().find(|s| s.at == 0.0).and_then(|s| s.rss),
        rss_end: samples.last().and_then(|s| s.rss),
        overload_pool_min: pool.iter().copied().min(),
        overload_pool_max: pool.iter().copied().max(),
        overload_server_busy_capacity_rps: start
            .zip(end)
            .and_then(|(a, b)| b.stats.since(&a.stats).busy_capacity_rps())
            .map(f64::round),
        overload_server_handled_rps: start
            .zip(end)
            .map(|(a, b)| (b.stats.handled.saturating_sub(a.stats.handled) as f64 / seconds).round()),
        overload_server_received: start.zip(end).map(|(a, b)| b.received.saturating_sub(a.received)),
        overload_server_dropped_no_buffer: start
            .zip(end)
            .map(|(a, b)| b.dropped_no_buffer.saturating_sub(a.dropped_no_buffer)),
        overload_other_socket_drops: {
            let all = |t: f64| samples.iter().find(|s| s.at == t).and_then(|s| s.udp_rcvbuf_errors);
            let server = start.zip(end).map(|(a, b)| b.dropped_no_buffer.saturating_sub(a.dropped_no_buffer));
            all(0.0).zip(all(seconds)).zip(server).map(|((a, b), s)| b.saturating_sub(a).saturating_sub(s))
        },
        reference_p99_us: reference,
        recovery_s: after.iter().find(|iv| ok(iv)).map(|iv| ((iv.begin - seconds + iv.secs) * 1000.0).round() / 1000.0),
        after_windows_ok: after.iter().filter(|iv| ok(iv)).count(),
        after_windows: after.len(),
    }
}

fn print_summary(s: &Summary) {
    let mb = |b: Option<u64>| b.map_or("?".to_owned(), |b| format!("{:.1} MB", b as f64 / 1048576.0));
    eprintln!("\n== overload summary: {} over {}, {} ==", s.system, s.transport, s.workload);
    eprintln!(
        "capacity {:.0}/s ({}); overload offered {:.0}/s; goodput {:.0}/s = {:.1} % of capacity; {} timeouts; {} errors",
        s.capacity_rps,
        if s.capacity_measured { "measured" } else { "given" },
        s.overload_offered_rps,
        s.overload_goodput_rps,
        s.overload_goodput_pct,
        s.overload_timeouts,
        s.errors
    );
    eprintln!(
        "server RSS: {} before; {} .. {} during the overload; {} at the end. Pool {} .. {}",
        mb(s.rss_before),
        mb(s.overload_rss_min),
        mb(s.overload_rss_max),
        mb(s.rss_end),
        mb(s.overload_pool_min),
        mb(s.overload_pool_max)
    );
    if let (Some(h), Some(c)) = (s.overload_server_handled_rps, s.overload_server_busy_capacity_rps) {
        eprintln!("the server handled {h:.0} requests/s during the overload; per second of its busy time, {c:.0}/s");
    }
    if let (Some(r), Some(d)) = (s.overload_server_received, s.overload_server_dropped_no_buffer) {
        eprintln!(
            "during the overload the server received {r} requests; the kernel dropped {d} for lack of socket buffer"
        );
    }
    match (s.reference_p99_us, s.recovery_s) {
        (Some(p), Some(r)) => eprintln!(
            "recovery: {r:.3} s after the overload, a window's p99 was within 2x the reference {} \
             ({} of {} windows after the overload were)",
            format_us(p),
            s.after_windows_ok,
            s.after_windows
        ),
        (Some(p), None) => eprintln!(
            "recovery: NONE of the {} windows after the overload came back within 2x the reference p99 {}",
            s.after_windows,
            format_us(p)
        ),
        (None, _) => eprintln!("recovery: no reference p99 (no window before the overload completed a request)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(completed: u64, timeouts: u64, p99_us: f64) -> PointResult {
        PointResult {
            offered: Some(1000.0),
            achieved: completed as f64,
            p50_us: p99_us / 2.0,
            p99_us,
            p999_us: p99_us,
            offered_count: completed + timeouts,
            completed,
            timeouts,
            errors: 0,
            server: None,
            client: None,
        }
    }

    fn iv(phase: Phase, begin: f64, secs: f64, result: PointResult) -> Interval {
        Interval { phase, begin, secs, result }
    }

    fn config() -> OverloadConfig {
        OverloadConfig {
            transport: Transport::Udp,
            system: System::Cornflakes,
            workload: "echo".parse().unwrap(),
            seconds: 2,
            factor: 2.0,
            capacity: Some(1000.0),
            normal_fraction: 0.5,
            before: Duration::from_secs(1),
            after: Duration::from_secs(1),
            window: Duration::from_millis(100),
            timeout: Duration::from_millis(100),
            threads: 1,
            server_core: 0,
            client_core: 1,
            udp_socket_buffer: 1 << 20,
        }
    }

    #[test]
    fn summary_goodput_memory_and_recovery() {
        let points = vec![
            iv(Phase::Before, -0.3, 0.1, point(50, 0, 100.0)),
            iv(Phase::Before, -0.2, 0.1, point(50, 0, 120.0)),
            iv(Phase::Before, -0.1, 0.1, point(50, 0, 5000.0)),
            iv(Phase::Overload, 0.0, 1.0, point(900, 1100, 9000.0)),
            iv(Phase::Overload, 1.0, 1.0, point(950, 1050, 9000.0)),
            // Timeouts: not recovered although the p99 is low.
            iv(Phase::After, 2.0, 0.1, point(40, 3, 100.0)),
            // p99 above 2x the reference (median 120 µs).
            iv(Phase::After, 2.1, 0.1, point(50, 0, 250.0)),
            iv(Phase::After, 2.2, 0.1, point(50, 0, 230.0)),
            iv(Phase::After, 2.3, 0.1, point(50, 0, 90.0)),
        ];
        let report = |pool: u64, received: u64| {
            Some(ServerReport { pool_bytes: pool, received, dropped_no_buffer: received / 2, ..Default::default() })
        };
        let samples = vec![
            Sample { at: -1.0, rss: Some(100), udp_rcvbuf_errors: Some(0), report: report(10, 0) },
            Sample { at: 0.0, rss: Some(110), udp_rcvbuf_errors: Some(50), report: report(10, 100) },
            Sample { at: 1.0, rss: Some(150), udp_rcvbuf_errors: Some(1100), report: report(12, 2100) },
            Sample { at: 2.0, rss: Some(120), udp_rcvbuf_errors: Some(2100), report: report(12, 4100) },
            Sample { at: 3.0, rss: Some(115), udp_rcvbuf_errors: Some(2400), report: report(12, 4600) },
        ];
        let s = summarize(&config(), 1000.0, false, "echo", &points, &samples);
        assert_eq!(s.overload_goodput_rps, 925.0);
        assert_eq!(s.overload_goodput_pct, 92.5);
        assert_eq!(s.overload_offered_rps, 2000.0);
        assert_eq!(s.overload_timeouts, 2150);
        assert_eq!((s.overload_rss_min, s.overload_rss_max), (Some(110), Some(150)));
        assert_eq!((s.overload_pool_min, s.overload_pool_max), (Some(10), Some(12)));
        assert_eq!((s.rss_before, s.rss_end), (Some(110), Some(115)));
        assert_eq!(s.overload_server_received, Some(4000));
        assert_eq!(s.overload_server_dropped_no_buffer, Some(2000));
        assert_eq!(s.overload_other_socket_drops, Some(50), "2050 dropped on the machine, 2000 of them by the server");
        assert_eq!(s.reference_p99_us, Some(120.0));
        assert_eq!(s.recovery_s, Some(0.3), "the window from 2.2 s (230 µs <= 240 µs) ends 0.3 s after");
        assert_eq!((s.after_windows_ok, s.after_windows), (2, 4));
    }

    #[test]
    fn no_recovery_without_a_window_in_bound() {
        let points = vec![
            iv(Phase::Before, -0.1, 0.1, point(50, 0, 100.0)),
            iv(Phase::Overload, 0.0, 1.0, point(10, 1990, 9000.0)),
            iv(Phase::After, 2.0, 0.1, point(50, 0, 201.0)),
        ];
        let s = summarize(&config(), 1000.0, true, "echo", &points, &[]);
        assert_eq!(s.recovery_s, None);
        assert_eq!(s.overload_goodput_pct, 1.0);
        assert_eq!(s.overload_rss_max, None);
    }

    #[test]
    fn rcvbuf_errors_are_read_from_the_udp_lines() {
        let snmp = "Tcp: RtoAlgorithm RtoMin\nTcp: 1 200\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\n\
                    Udp: 10 2 3 9 242136\nUdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdpLite: 0 0 0 0 0\n";
        assert_eq!(parse_rcvbuf_errors(snmp), Some(242136));
        assert_eq!(parse_rcvbuf_errors("Udp: InDatagrams\nUdp: 1\n"), None);
    }

    #[test]
    fn capacity_points_keep_up_in_throughput_despite_a_stall() {
        let mut p = point(1000, 1, 50_000.0);
        p.offered_count = 1001;
        assert!(counts_as_kept_up(&p), "one timeout in a thousand, and any latency");
        p.timeouts = 2;
        assert!(!counts_as_kept_up(&p));
        let slow = PointResult { achieved: 940.0, ..point(940, 0, 10.0) };
        assert!(!counts_as_kept_up(&slow), "below 95 % of the offered 1000/s");
    }

    #[test]
    fn vm_rss_is_read_in_bytes() {
        let status = "Name:\tcf\nVmPeak:\t  900 kB\nVmRSS:\t  523320 kB\nThreads: 2\n";
        assert_eq!(parse_vm_rss(status), Some(523320 * 1024));
        assert_eq!(parse_vm_rss("Name: cf\n"), None);
        assert!(rss_of(std::process::id()).is_some_and(|b| b > 0));
    }

    #[test]
    fn settings_that_cannot_work_are_refused() {
        assert!(check(&config()).is_ok());
        assert!(check(&OverloadConfig { seconds: 0, ..config() }).unwrap_err().is_invalid());
        assert!(check(&OverloadConfig { timeout: Duration::from_secs(1), ..config() }).unwrap_err().is_invalid());
        assert!(check(&OverloadConfig { factor: f64::NAN, ..config() }).unwrap_err().is_invalid());
        assert!(check(&OverloadConfig { capacity: Some(0.0), ..config() }).unwrap_err().is_invalid());
    }

    #[test]
    fn a_second_is_complete_once_its_points_are_in() {
        let mut points = vec![iv(Phase::Overload, 1.0, 1.0, point(1, 0, 1.0))];
        assert!(second_complete(&points, 1.0, 5.0, 6.0, 0.1));
        assert!(!second_complete(&points, 0.0, 5.0, 6.0, 0.1));
        points.push(iv(Phase::After, 5.0, 0.1, point(1, 0, 1.0)));
        assert!(!second_complete(&points, 5.0, 5.0, 6.0, 0.1), "the after phase's first second has just begun");
        points.push(iv(Phase::After, 6.05, 0.1, point(1, 0, 1.0)));
        assert!(second_complete(&points, 5.0, 5.0, 6.0, 0.1));
        let before = vec![iv(Phase::Before, -0.15, 0.1, point(1, 0, 1.0))];
        assert!(second_complete(&before, -1.0, 5.0, 0.0, 0.1), "the last window before the overload");
        assert!(!second_complete(&before[..0], -1.0, 5.0, 0.0, 0.1));
    }
}
