//! `cf compare`: the main job. For each workload it starts the key-value
//! server with each system in turn (pinned to one core), sweeps the offered
//! load with the load generator (pinned to the other core) over the
//! shared-memory datapath (or UDP), prints a table like the paper's, and writes
//! `summary.json` and throughput-latency plots.

use crate::hugepages::HugepagePolicy;
use std::path::{Path, PathBuf};
use std::time::Instant;

use cornflakes_kv::{ServerStats, System};
use cornflakes_workloads::WorkloadSpec;

use crate::child::{KvServer, ServerPlace};
use crate::loadgen::PointResult;
use crate::plot;
use crate::report::{self, Ratios, Summary, SystemReport, TableRow, WorkloadReport};
use crate::sweep::{self, LatencyBound, MachineGate, Quantile, SweepConfig, SweepPlan, SweepResult};
use crate::transport::{Target, Transport};
use crate::Error;

/// What `cf compare` runs.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    /// Workloads, in order.
    pub workloads: Vec<WorkloadSpec>,
    /// Systems to compare; empty: every system that applies to the
    /// workload ([`default_systems`]).
    pub systems: Vec<System>,
    /// Directory for summary.json and the plots.
    pub out: PathBuf,
    /// The sweep of each system (its `point.rate` is ignored).
    pub sweep: SweepConfig,
    /// Core of the server.
    pub server_core: usize,
    /// Core of the load generator.
    pub client_core: usize,
    /// Datapath between the load generator and the server.
    pub transport: Transport,
    /// Sweeps per system (at least 1); the table shows the median maximum,
    /// ratios pair each repeat's maxima (geometric mean over the repeats
    /// in which neither system stalled, `report::stalled_repeats`).
    /// Repeats are interleaved across systems.
    pub repeats: usize,
    /// udp/tcp: IP:port the servers listen on (port 0: the kernel picks);
    /// `None`: 127.0.0.1:0, or [`NETNS_SERVER_ADDR`] across namespaces.
    pub addr: Option<String>,
    /// Run across two network namespaces (tcp only; needs root).
    pub netns: Option<NetnsConfig>,
    /// The latency bound was not chosen by the user: when the machine's
    /// own gaps would set the p99 ([`sweep::p99_measures_the_machine`]),
    /// hold the median instead ([`LatencyBound::p50_default`]) and say so.
    pub slo_auto: bool,
    /// Sweep the systems of a workload point by point in turns, all their
    /// servers up at once ([`Schedule::Interleaved`]), or one after the
    /// other.
    pub schedule: Schedule,
    /// Hugepages reserved for the servers' pools during the run (see
    /// [`crate::hugepages`]).
    pub hugepages: HugepagePolicy,
}

/// How `cf compare` orders the sweeps of one workload's systems.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Schedule {
    /// Every system's server is started (and preloaded) for each repeat;
    /// the load generator probes each in turn, then runs one load point of each
    /// system in turn until every sweep is done, so that a slow phase of
    /// the machine (seconds to minutes on these VMs) falls on every system
    /// alike instead of on whichever one was sweeping. Idle servers sleep
    /// (no CPU), but each holds its preloaded store (~0.4-0.9 GB on the
    /// default workloads).
    #[default]
    Interleaved,
    /// One server at a time, its whole sweep, then the next (less memory).
    Sequential,
}

/// Two "hosts" for `cf compare --netns`: each server runs in namespace
/// `NAME-b`, the load generator (this process) in `NAME-a`, joined by a
/// veth pair (`scripts/netns.sh`).
#[derive(Clone, Debug)]
pub struct NetnsConfig {
    /// `scripts/netns.sh`.
    pub script: PathBuf,
    /// MTU of the veth pair (1500 or 9000).
    pub mtu: u32,
}

/// Where the servers listen across namespaces: `NAME-b`'s end of the veth
/// pair (see `scripts/netns.sh`).
pub const NETNS_SERVER_ADDR: &str = "192.0.2.2:0";

/// The namespaces of one `cf compare --netns`, removed when dropped (on
/// success, error or panic; a process killed by a signal leaves them: then
/// `scripts/netns.sh down NAME`).
struct Namespaces {
    script: PathBuf,
    name: String,
}

impl Namespaces {
    /// Creates them, and moves this thread (and so the load generator's
    /// threads, started from it later) into `NAME-a`.
    fn up(cfg: &NetnsConfig) -> Result<Namespaces, Error> {
        if !rustix::process::geteuid().is_root() {
            return Err(Error::Invalid(
                "--netns creates network namespaces and needs root: run as root, or drop --netns to compare over loopback"
                    .into(),
            ));
        }
        if cfg.mtu != 1500 && cfg.mtu != 9000 {
            return Err(Error::Invalid(format!("--mtu {} : use 1500 or 9000", cfg.mtu)));
        }
        let name = format!("cfcmp{}", std::process::id());
        let status = std::process::Command::new("bash")
            .arg(&cfg.script)
            .args(["up", &name, &cfg.mtu.to_string()])
            .status()
            .map_err(|e| format!("cannot run {}: {e}", cfg.script.display()))?;
        let ns = Namespaces { script: cfg.script.clone(), name };
        if !status.success() {
            return Err(Error::Failed(format!(
                "{} up {} failed ({status}; its error is above)",
                cfg.script.display(),
                ns.name
            )));
        }
        let path = format!("/run/netns/{}-a", ns.name);
        let file = std::fs::File::open(&path).map_err(|e| format!("cannot open {path}: {e}"))?;
        rustix::thread::move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&file),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .map_err(|e| format!("cannot enter the network namespace {}-a: {e}", ns.name))?;
        eprintln!(
            "across namespaces: servers in {0}-b (192.0.2.2), load generator in {0}-a (192.0.2.1), veth MTU {1}",
            ns.name, cfg.mtu
        );
        Ok(ns)
    }

    /// The command prefix that runs a server in `NAME-b`.
    fn server_prefix(&self) -> Vec<String> {
        ["ip", "netns", "exec"].iter().map(|s| s.to_string()).chain([format!("{}-b", self.name)]).collect()
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        let ok = std::process::Command::new("bash")
            .arg(&self.script)
            .args(["down", &self.name])
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            eprintln!("removed the network namespaces {0}-a and {0}-b", self.name);
        } else {
            eprintln!("warning: could not remove the namespaces: run {} down {}", self.script.display(), self.name);
        }
    }
}

/// The systems compared on a workload by default.
pub fn default_systems(workload: &str) -> Vec<System> {
    if workload.starts_with("echo") {
        vec![
            System::Cornflakes,
            System::CornflakesNoSas,
            System::Protobuf,
            System::Flatbuffers,
            System::Capnp,
            System::Rkyv,
            System::Raw,
            System::TokioProst,
        ]
    } else {
        System::ALL.into_iter().filter(|s| *s != System::Raw).collect()
    }
}

/// One system's sweeps on a workload, one per repeat.
struct SystemRuns {
    system: System,
    /// The repeats that finished (their indices) and their sweeps.
    sweeps: Vec<(usize, SweepResult)>,
    /// Repeats that failed, and why.
    failures: Vec<String>,
    /// The server's counters, summed over the repeats.
    server: ServerStats,
}

impl SystemRuns {
    /// The sweep whose highest achieved load is the median of the repeats
    /// (the lower middle one for an even count), with that point.
    fn median(&self) -> Option<(&SweepResult, &PointResult)> {
        let mut runs: Vec<_> = self.sweeps.iter().filter_map(|(_, s)| s.best().map(|b| (s, b))).collect();
        runs.sort_by(|a, b| a.1.achieved.total_cmp(&b.1.achieved));
        runs.get(runs.len().saturating_sub(1) / 2).copied()
    }

    /// The median highest achieved load.
    fn max(&self) -> Option<f64> {
        self.median().map(|(_, b)| b.achieved)
    }

    /// The highest achieved load of each repeat, in the order run.
    fn maxima(&self) -> Vec<f64> {
        self.maxima_by_repeat().into_iter().map(|(_, m)| m).collect()
    }

    /// The highest achieved load of each repeat, with the repeat's index.
    fn maxima_by_repeat(&self) -> Vec<(usize, f64)> {
        self.sweeps.iter().filter_map(|(r, s)| s.best().map(|b| (*r, b.achieved))).collect()
    }

    /// The repeats whose maximum says the machine stalled
    /// ([`report::stalled_repeats`]), with their maxima.
    fn stalled(&self) -> Vec<(usize, f64)> {
        let maxima = self.maxima_by_repeat();
        let stalled = report::stalled_repeats(&maxima);
        maxima.into_iter().filter(|(r, _)| stalled.contains(r)).collect()
    }

    fn errors(&self) -> u64 {
        self.sweeps.iter().map(|(_, s)| s.errors()).sum()
    }

    /// Records (and prints) a repeat, or a server, that failed.
    fn fail(&mut self, label: &str, e: &Error) {
        eprintln!("{label}: FAILED: {e}");
        self.failures.push(e.to_string());
    }

    fn timeouts(&self) -> u64 {
        self.sweeps.iter().map(|(_, s)| s.timeouts()).sum()
    }

    /// The machine's cross-core copy bandwidth after each of its points,
    /// GB/s, over every repeat.
    fn copy_gbps(&self) -> impl Iterator<Item = f64> + '_ {
        self.sweeps.iter().flat_map(|(_, s)| s.copy_gbps.iter().copied())
    }

    /// The median copy bandwidth of each repeat's points, in the order of
    /// [`SystemRuns::maxima`] (repeats without a best point left out, as
    /// there; NaN for one without a measurement).
    fn repeats_copy_gbps(&self) -> Vec<f64> {
        self.sweeps
            .iter()
            .filter(|(_, s)| s.best().is_some())
            .map(|(_, s)| {
                report::median(s.copy_gbps.iter().copied()).and_then(|g| report::rounded(g, 2)).unwrap_or(f64::NAN)
            })
            .collect()
    }
}

/// Runs every system on every workload, prints a table per workload and
/// writes `summary.json` (a [`Summary`]) and the plots to `cfg.out`.
///
/// # Errors
///
/// [`Error::Invalid`] for settings that cannot work; [`Error::Failed`] when
/// the output cannot be written. A system that fails is reported in its
/// table row and in `summary.json`, and the comparison goes on.
pub fn run(cfg: &CompareConfig) -> Result<(), Error> {
    let args = cfg;
    if args.repeats == 0 {
        return Err(Error::Invalid("--repeats must be at least 1".into()));
    }
    if args.netns.is_some() && args.transport != Transport::Tcp {
        return Err(Error::Invalid("--netns runs over tcp: add --transport tcp".into()));
    }
    if args.addr.is_some() && args.transport == Transport::Shm {
        return Err(Error::Invalid(
            "--addr is for udp and tcp (IP:port); shm servers get their own socket paths".into(),
        ));
    }
    if let Some(a) = &args.addr {
        crate::transport::parse_tcp_addr(a)?;
    }
    let namespaces = args.netns.as_ref().map(Namespaces::up).transpose()?;
    if let Some(s) = args.systems.iter().find(|s| !s.runs_on_datapath() && args.transport != Transport::Tcp) {
        return Err(Error::Invalid(format!(
            "{} is a TCP server (tokio): run it with --transport tcp, or leave it out of --systems",
            s.name()
        )));
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    if crate::pin::available_cores() <= args.server_core.max(args.client_core) {
        eprintln!("warning: fewer cores than --server-core/--client-core; pinning will fail");
    }
    // Given back when `run` returns, also on an error.
    let _hugepages = crate::hugepages::reserve(args.hugepages).map_err(Error::Failed)?;
    let started = Instant::now();
    let calibrated = cornflakes::field::machine_threshold();
    eprintln!(
        "zero-copy threshold of the hybrid systems on {}: {} (from {})",
        args.transport.name(),
        report::threshold_text(calibrated.for_datapath(args.transport.name())),
        calibrated.source
    );
    let mut summary = Summary { glibc_tunables: crate::glibc::tunables_in_effect(), ..Summary::default() };
    // The copy probe's measurements of the whole run.
    let mut copy_gbps: Vec<f64> = Vec::new();
    if let Some(t) = &summary.glibc_tunables {
        eprintln!("copies: GLIBC_TUNABLES={t} (in every process of the run; see `cf --help`)");
    }
    let stalls = |when: &str, summary: &mut Summary| {
        let cores = [args.server_core, args.client_core];
        match crate::hiccup::measure(&cores, std::time::Duration::from_secs(1)) {
            Ok(found) => {
                for h in found {
                    eprintln!("machine stalls {when}: {h}");
                    summary.machine_stalls.push(h);
                }
            }
            Err(e) => eprintln!("warning: cannot watch the cores for stalls: {e}"),
        }
    };
    stalls("before", &mut summary);
    let machine = if args.slo_auto && args.sweep.bound.quantile == Quantile::P99 {
        sweep::p99_measures_the_machine(&summary.machine_stalls)
    } else {
        None
    };
    let mut sweep_cfg = args.sweep.clone();
    if let Some(why) = machine {
        let note = format!(
            "maxima are held to the median (p50 within 20x the low-load median, at least 200 µs), not the p99: {why}; give --slo p99 to hold the p99 anyway"
        );
        eprintln!("latency bound: {note}");
        summary.latency_bound_choice = Some(note);
        sweep_cfg.bound = LatencyBound::p50_default();
    }
    // Every point of every system out of the machine's slow phases.
    sweep_cfg.gate.get_or_insert_with(|| MachineGate::new(args.server_core, args.client_core));
    let mut schedule = args.schedule;
    if schedule == Schedule::Interleaved && args.addr.as_deref().is_some_and(fixed_port) {
        eprintln!("--addr names a port: one server at a time (as with --sequential), since two cannot listen on it");
        schedule = Schedule::Sequential;
    }
    let chosen = CompareConfig { sweep: sweep_cfg, schedule, ..args.clone() };
    let args = &chosen;
    for (w, spec) in args.workloads.iter().enumerate() {
        let workload = spec.build().map_err(|e| Error::Invalid(e.to_string()))?;
        let systems = if args.systems.is_empty() {
            // tokio-prost is a TCP server: it joins the default set on tcp.
            default_systems(workload.name())
                .into_iter()
                .filter(|s| s.runs_on_datapath() || args.transport == Transport::Tcp)
                .collect()
        } else {
            args.systems.clone()
        };
        eprintln!(
            "\n== {} ({} systems x {} repeats; unit: {}) ==",
            workload.name(),
            systems.len(),
            args.repeats,
            workload.unit()
        );
        let mut results: Vec<SystemRuns> = systems
            .iter()
            .map(|&system| SystemRuns { system, sweeps: Vec::new(), failures: Vec::new(), server: Default::default() })
            .collect();
        match args.schedule {
            Schedule::Interleaved => sweep_interleaved(args, spec, w, &mut results, namespaces.as_ref())?,
            Schedule::Sequential => sweep_sequential(args, spec, w, &mut results, namespaces.as_ref())?,
        }
        let ratios = ratios(&results);
        let rows: Vec<TableRow<'_>> = results
            .iter()
            .map(|r| TableRow {
                system: r.system,
                best: r.median().map(|(sweep, best)| (best, sweep.server_busy_capacity())),
                maxima: r.maxima(),
                errors: r.errors(),
                timeouts: r.timeouts(),
                dropped: r.server.malformed + r.server.dropped_full + r.server.send_failed,
                below_probe: r.median().and_then(|(sweep, _)| sweep.below_probe()),
                vs_cornflakes: vs_cornflakes(&results, r),
                stalled: r.stalled(),
            })
            .collect();
        print!("{}", report::format_table(workload.name(), workload.unit(), &rows, &ratios));
        if let Some(note) = &summary.latency_bound_choice {
            println!("({note})");
        }
        let workload_copy: Vec<f64> = results.iter().flat_map(SystemRuns::copy_gbps).collect();
        copy_gbps.extend(&workload_copy);
        let workload_copy = report::CopyBandwidth::of(&workload_copy);
        summary.copy_gbps = report::CopyBandwidth::of(&copy_gbps);
        if let (Some(w), Some(run)) = (&workload_copy, &summary.copy_gbps) {
            let per_system: Vec<(&str, f64)> =
                results.iter().filter_map(|r| report::median(r.copy_gbps()).map(|g| (r.system.name(), g))).collect();
            println!("  {}", report::copy_bandwidth_note(w, run, &per_system));
        }
        let png = args.out.join(format!("{}.png", workload.name()));
        let series: Vec<plot::Series> = results
            .iter()
            .filter_map(|r| {
                r.median().map(|(sweep, _)| {
                    // In load order: refining points run after higher ones.
                    let mut points: Vec<(f64, f64)> = sweep.points.iter().map(|p| (p.achieved, p.p99_us)).collect();
                    points.sort_by(|a, b| a.0.total_cmp(&b.0));
                    plot::Series { name: r.system.name().to_owned(), points }
                })
            })
            .collect();
        let x_label = format!("achieved load (thousand {} / s)", workload.unit());
        if let Err(e) =
            plot::throughput_latency_png(&png, &format!("{}: p99 latency vs load", workload.name()), &x_label, &series)
        {
            eprintln!("warning: cannot draw {}: {e}", png.display());
        }
        let bars_png = args.out.join(format!("{}-max.png", workload.name()));
        let bars: Vec<(String, f64)> =
            results.iter().map(|r| (r.system.name().to_owned(), r.max().unwrap_or(f64::NAN))).collect();
        let y_label = format!("highest achieved load (thousand {} / s)", workload.unit());
        if let Err(e) = plot::max_throughput_bars_png(
            &bars_png,
            &format!("{}: highest achieved load", workload.name()),
            &y_label,
            &bars,
        ) {
            eprintln!("warning: cannot draw {}: {e}", bars_png.display());
        }
        summary.workloads.push(WorkloadReport {
            workload: workload.name().to_owned(),
            spec: spec.to_string(),
            unit: workload.unit().to_owned(),
            transport: args.transport.name().to_owned(),
            repeats: args.repeats,
            plot: png.file_name().map(|f| f.to_string_lossy().into_owned()),
            systems: results
                .iter()
                .map(|r| SystemReport { vs_cornflakes: vs_cornflakes(&results, r), ..runs_report(r) })
                .collect(),
            ratios,
            copy_gbps: workload_copy,
        });
        write_summary(&args.out, &summary)?;
    }
    stalls("after", &mut summary);
    if let Some(c) = &summary.copy_gbps {
        eprintln!(
            "machine: cross-core copy bandwidth after each point of the run {:.1} GB/s (median of {}, middle half {:.1}-{:.1})",
            c.median, c.samples, c.p25, c.p75
        );
    }
    write_summary(&args.out, &summary)?;
    eprintln!(
        "\nwrote {} and plots in {:.0} s",
        args.out.join("summary.json").display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One sweep per system and repeat, one system after another: repeats are
/// interleaved, and the order turns with the workload and the repeat, so
/// that no system always runs first.
fn sweep_sequential(
    args: &CompareConfig,
    spec: &WorkloadSpec,
    w: usize,
    results: &mut [SystemRuns],
    namespaces: Option<&Namespaces>,
) -> Result<(), Error> {
    let workload = spec.build().map_err(|e| Error::Invalid(e.to_string()))?;
    for repeat in 0..args.repeats {
        for (k, i) in run_order(results.len(), w + repeat).enumerate() {
            let label = label(args, k, results.len(), repeat, workload.name(), results[i].system);
            let runs = &mut results[i];
            match run_system(args, spec, runs.system, &label, namespaces) {
                Ok((sweep, server)) => {
                    runs.sweeps.push((repeat, sweep));
                    runs.server.add(&server);
                }
                Err(e) => runs.fail(&label, &e),
            }
        }
    }
    Ok(())
}

/// The progress prefix of the `k`-th of `n` systems in a repeat.
fn label(args: &CompareConfig, k: usize, n: usize, repeat: usize, workload: &str, system: System) -> String {
    format!("[{}/{n}{}] {workload} {}", k + 1, repeat_text(args, repeat), system.name())
}

/// `, repeat R/N` in progress lines, when there are repeats.
fn repeat_text(args: &CompareConfig, repeat: usize) -> String {
    if args.repeats > 1 {
        format!(", repeat {}/{}", repeat + 1, args.repeats)
    } else {
        String::new()
    }
}

/// One system's server and sweep in [`sweep_interleaved`].
struct Lane {
    /// Index into the workload's results.
    index: usize,
    server: KvServer,
    target: Target,
    plan: Option<SweepPlan>,
}

/// [`Schedule::Interleaved`]: per repeat, starts every system's server,
/// probes each in turn, runs one load point of each system in turn until
/// every sweep is done (the order turns with each round), and stops the
/// servers. Fresh servers per repeat: a server whose memory landed badly
/// (a run's rkyv on Google 1-8 had three repeats at 0.75x its other runs',
/// server busy capacity too) spoils one repeat, not all.
fn sweep_interleaved(
    args: &CompareConfig,
    spec: &WorkloadSpec,
    w: usize,
    results: &mut [SystemRuns],
    namespaces: Option<&Namespaces>,
) -> Result<(), Error> {
    let workload = spec.build().map_err(|e| Error::Invalid(e.to_string()))?;
    let n = results.len();
    let names: Vec<String> = results.iter().map(|r| format!("{} {}", workload.name(), r.system.name())).collect();
    let name = |i: usize| &names[i];
    let core = Some(args.client_core);
    for repeat in 0..args.repeats {
        let mut lanes: Vec<Lane> = Vec::new();
        for (k, i) in run_order(n, w + repeat).enumerate() {
            let label = format!("[{}/{n}{}] {}", k + 1, repeat_text(args, repeat), name(i));
            match start_server(args, spec, results[i].system, &label, namespaces) {
                Ok((server, target)) => lanes.push(Lane { index: i, server, target, plan: None }),
                Err(e) => results[i].fail(&label, &e),
            }
        }
        let sweeping = |lanes: &[Lane]| lanes.iter().filter(|l| l.plan.is_some()).count();
        for j in run_order(lanes.len(), w + repeat) {
            let lane = &mut lanes[j];
            let label = format!("[probe{}] {}", repeat_text(args, repeat), name(lane.index));
            let mut plan = SweepPlan::new(&args.sweep);
            let mut progress = |m: &str| eprintln!("{label}: {m}");
            match plan.probe(&lane.target, results[lane.index].system, workload.as_ref(), core, &mut progress) {
                Ok(p) => {
                    eprintln!("{label}: {:.0} {}/s closed loop", p.achieved, workload.unit());
                    lane.plan = Some(plan);
                }
                Err(e) => results[lane.index].fail(&label, &e),
            }
        }
        let mut round = 0;
        loop {
            let left = sweeping(&lanes);
            let mut ran = false;
            for j in run_order(lanes.len(), w + repeat + round) {
                let Lane { index, server, target, plan } = &mut lanes[j];
                let Some(sweep) = plan.as_mut().filter(|p| !p.is_done()) else { continue };
                let system = results[*index].system;
                let label =
                    format!("[round {}, {left} sweeping{}] {}", round + 1, repeat_text(args, repeat), name(*index));
                let mut progress = |m: &str| eprintln!("{label}: {m}");
                let mut counters = || server.report().ok().and_then(|l| ServerStats::from_json_line(&l));
                if let Err(e) = sweep.measure(target, system, workload.as_ref(), core, &mut progress, &mut counters) {
                    results[*index].fail(&label, &e);
                    *plan = None;
                }
                ran = true;
            }
            if !ran {
                break;
            }
            round += 1;
        }
        for lane in &mut lanes {
            if let Some(plan) = lane.plan.take() {
                let result = plan.finish();
                let label = format!("[done{}] {}", repeat_text(args, repeat), name(lane.index));
                say_max(&label, &result, workload.unit(), None);
                results[lane.index].sweeps.push((repeat, result));
            }
        }
        for lane in &mut lanes {
            match lane.server.finish().iter().find_map(|l| ServerStats::from_json_line(l)) {
                Some(counters) => results[lane.index].server.add(&counters),
                None => results[lane.index].failures.push("the server did not report its counters when stopped".into()),
            }
        }
    }
    Ok(())
}

/// Starts the server of `system` for `cf compare` (preloading it).
fn start_server(
    args: &CompareConfig,
    spec: &WorkloadSpec,
    system: System,
    label: &str,
    namespaces: Option<&Namespaces>,
) -> Result<(KvServer, Target), Error> {
    let (path, prefix) = server_place(args, namespaces);
    let place = ServerPlace { transport: args.transport, addr: &path, prefix: &prefix, server_core: args.server_core };
    eprintln!("{label}: starting server (preloading)");
    start_at(&place, system, spec, &server_extra(args), &mut |m| eprintln!("{label}: {m}"))
}

/// Starts `cf kv-server` with `system` on `spec` (plus `extra` arguments)
/// at `place`, and connects a target to it.
fn start_at(
    place: &ServerPlace<'_>,
    system: System,
    spec: &WorkloadSpec,
    extra: &[String],
    progress: &mut dyn FnMut(&str),
) -> Result<(KvServer, Target), Error> {
    let t0 = Instant::now();
    pretouch_fresh_memory(PRETOUCH_BYTES);
    let server = KvServer::start(place, system, spec, extra)?;
    progress(&format!("server ready in {:.1} s", t0.elapsed().as_secs_f64()));
    // The load generator's side of the connection (its pool) too.
    pretouch_fresh_memory(PRETOUCH_BYTES);
    let target = Target::new(place.transport, &server.addr)?;
    Ok((server, target))
}

/// Bytes [`pretouch_fresh_memory`] touches before each server starts and
/// before each connection to it.
const PRETOUCH_BYTES: usize = 1 << 30;

/// Writes one byte in every page of `bytes` (at most a quarter of the
/// available memory) of freshly allocated memory, then frees it.
///
/// Why: on the Intel test VM (free page reporting on: the guest hands
/// freed memory back to the host), the first server started after other
/// servers had exited, with its connection, ran 15-45 % slower for its
/// whole sweep than the same system started later (five of the six
/// workloads of a `cf reproduce` run; on Google 1 whichever system came
/// first); touching fresh memory just before the server and before the
/// connection removed the gap (`docs/results/2026-11-28-first-server/`).
fn pretouch_fresh_memory(bytes: usize) {
    const PAGE: usize = 4096;
    let bytes = bytes.min(available_memory() / 4);
    // Zeroed allocations this large are fresh mappings: each write below
    // faults one page in.
    let mut fresh = vec![0u8; bytes];
    for at in (0..bytes).step_by(PAGE) {
        fresh[at] = 1;
    }
    std::hint::black_box(&fresh);
}

/// `MemAvailable` of `/proc/meminfo`, bytes (0 when unreadable).
fn available_memory() -> usize {
    let Ok(meminfo) = std::fs::read_to_string("/proc/meminfo") else { return 0 };
    let kib = crate::kv::meminfo_field(&meminfo, "MemAvailable:");
    usize::try_from(kib.saturating_mul(1024)).unwrap_or(usize::MAX)
}

/// Where a server of `cf compare` listens, and the command it runs in.
fn server_place(args: &CompareConfig, namespaces: Option<&Namespaces>) -> (String, Vec<String>) {
    let default_ip = if namespaces.is_some() { NETNS_SERVER_ADDR } else { "127.0.0.1:0" };
    let path = match args.transport {
        Transport::Shm => crate::transport::shm_socket_path(),
        Transport::Udp | Transport::Tcp => args.addr.clone().unwrap_or_else(|| default_ip.to_owned()),
    };
    (path, namespaces.map(Namespaces::server_prefix).unwrap_or_default())
}

/// The servers' extra arguments: with trusted peers the server gathers
/// requests into its shared pool too.
fn server_extra(args: &CompareConfig) -> Vec<String> {
    if args.sweep.point.in_place {
        vec!["--in-place".to_owned()]
    } else {
        Vec::new()
    }
}

/// Prints a sweep's maximum, its latency and bound, and its errors;
/// `counters`: the server's, when known.
fn say_max(label: &str, result: &SweepResult, unit: &str, counters: Option<&ServerStats>) {
    let Some(best) = result.best() else { return };
    let server = counters.map_or(String::new(), |c| {
        format!("; server: {} malformed, {} responses dropped", c.malformed, c.dropped_full + c.send_failed)
    });
    let pct = |f: Option<f64>| f.map_or("-".to_owned(), |f| format!("{:.0} %", f * 100.0));
    eprintln!(
        "{label}: max {:.0} {unit}/s (p99 {:.1} µs, {} bound {:.1} µs; server busy capacity {:.0} requests/s; \
         busy at the max: server {}, load generator {}), {} errors, {} timeouts{server}",
        best.achieved,
        best.p99_us,
        result.quantile.name(),
        result.bound_us,
        result.server_busy_capacity().unwrap_or(f64::NAN),
        pct(best.server_busy_fraction()),
        pct(best.client_busy_fraction()),
        result.errors(),
        result.timeouts(),
    );
}

/// Whether an `IP:port` names a port (not 0, the kernel's choice).
fn fixed_port(addr: &str) -> bool {
    crate::transport::parse_tcp_addr(addr).is_ok_and(|a| a.port() != 0)
}

/// The order in which `n` systems run at `turn` (the workload's index
/// plus the repeat's): their table order, started at `turn % n`.
fn run_order(n: usize, turn: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (k + turn) % n)
}

/// The report of one system's repeats: the median repeat's figures and
/// curve, every repeat's maximum, totals of errors and counters.
fn runs_report(r: &SystemRuns) -> SystemReport {
    let median = r.median();
    let mut report = median
        .and_then(|(sweep, _)| SystemReport::of_sweep(r.system.name(), sweep))
        .unwrap_or_else(|| SystemReport::failed(r.system.name()));
    report.repeats_max_rps = Some(r.maxima().iter().map(|x| x.round()).collect());
    report.errors = r.errors();
    report.timeouts = r.timeouts();
    report.latency_bound_us = median.and_then(|(sweep, _)| report::rounded(sweep.bound_us, 1));
    report.latency_bound_quantile = median.map(|(sweep, _)| sweep.quantile);
    report.server = Some(r.server);
    report.failed = r.failures.clone();
    report.stalled_repeats = r.stalled().into_iter().map(|(repeat, _)| repeat).collect();
    report.copy_gbps = report::median(r.copy_gbps()).and_then(|g| report::rounded(g, 2));
    report.repeats_copy_gbps = r.repeats_copy_gbps();
    report
}

fn write_summary(out: &Path, summary: &Summary) -> Result<(), Error> {
    let path = out.join("summary.json");
    let text = serde_json::to_string_pretty(summary).expect("reports serialize");
    std::fs::write(&path, text).map_err(|e| Error::Failed(format!("cannot write {}: {e}", path.display())))
}

/// Starts the server with `system`, sweeps it, and stops it.
fn run_system(
    args: &CompareConfig,
    spec: &WorkloadSpec,
    system: System,
    label: &str,
    namespaces: Option<&Namespaces>,
) -> Result<(SweepResult, ServerStats), Error> {
    let (path, prefix) = server_place(args, namespaces);
    eprintln!("{label}: starting server (preloading)");
    let where_ = ServerPlace { transport: args.transport, addr: &path, prefix: &prefix, server_core: args.server_core };
    let workload = spec.build().map_err(|e| Error::Invalid(e.to_string()))?;
    let (result, counters) =
        sweep_server(&where_, spec, system, &server_extra(args), &args.sweep, args.client_core, |m| {
            eprintln!("{label}: {m}")
        })?;
    let result = result?;
    let counters = counters.ok_or("the server did not report its counters when stopped")?;
    say_max(label, &result, workload.unit(), Some(&counters));
    Ok((result, counters))
}

/// Starts `cf kv-server` with `system` on `spec` (plus `extra` arguments),
/// sweeps it from `client_core`, stops it and removes its shm socket: the
/// sweep, or the reason it failed, and the counters the server reported
/// when stopped. Used by `cf compare` and `cf calibrate`.
pub(crate) fn sweep_server(
    place: &ServerPlace<'_>,
    spec: &WorkloadSpec,
    system: System,
    extra: &[String],
    sweep_cfg: &SweepConfig,
    client_core: usize,
    mut progress: impl FnMut(&str),
) -> Result<(Result<SweepResult, Error>, Option<ServerStats>), Error> {
    let (mut server, target) = start_at(place, system, spec, extra, &mut progress)?;
    let workload = spec.build().map_err(|e| Error::Invalid(e.to_string()))?;
    let result = sweep::sweep(&target, system, workload.as_ref(), sweep_cfg, Some(client_core), &mut progress, || {
        server.report().ok().and_then(|l| ServerStats::from_json_line(&l))
    });
    let counters = server.finish().iter().find_map(|l| ServerStats::from_json_line(l));
    Ok((result, counters))
}

/// The server's busy capacity in the median repeat.
fn capacity_of(results: &[SystemRuns], system: System) -> Option<f64> {
    results.iter().find(|r| r.system == system)?.median()?.0.server_busy_capacity()
}

/// `a`'s maxima over `b`'s, paired by repeat ([`report::paired_ratio`]).
fn paired(results: &[SystemRuns], a: System, b: System) -> Option<f64> {
    let runs = |s| results.iter().find(|r| r.system == s).map(SystemRuns::maxima_by_repeat);
    report::paired_ratio(&runs(a)?, &runs(b)?)
}

/// `r`'s maxima over Cornflakes', paired by repeat (three decimals).
fn vs_cornflakes(results: &[SystemRuns], r: &SystemRuns) -> Option<f64> {
    paired(results, r.system, System::Cornflakes).and_then(|v| report::rounded(v, 3))
}

/// The paper's comparisons that apply to this workload, as ratios of
/// maxima paired by repeat (the best library: the one Cornflakes leads
/// least), and ratios of the servers' busy capacities in their median
/// repeats (which still compare the servers when the load generator
/// saturates first).
fn ratios(results: &[SystemRuns]) -> Ratios {
    let mut out = Ratios::between(|a, b| paired(results, a, b));
    out.server_busy_capacity = Some(Box::new(Ratios::of(|s| capacity_of(results, s))));
    out
}

#[cfg(test)]
mod tests {
    use super::run_order;

    #[test]
    fn each_turn_runs_every_system_once_and_another_goes_first() {
        for turn in 0..7 {
            let mut order: Vec<usize> = run_order(4, turn).collect();
            assert_eq!(order[0], turn % 4);
            order.sort_unstable();
            assert_eq!(order, [0, 1, 2, 3]);
        }
        assert_eq!(run_order(1, 5).collect::<Vec<_>>(), [0]);
        assert_eq!(run_order(0, 3).count(), 0);
    }
}
