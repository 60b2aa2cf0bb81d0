//! `cf compare`: the main job. For each workload it starts the key-value
//! server with each system in turn (pinned to one core), sweeps the offered
//! load with the load generator (pinned to the other core) over the
//! shared-memory datapath (or UDP), prints a table like the paper's, and writes
//! `summary.json` and throughput-latency plots.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cornflakes_kv::{ServerStats, System};
use cornflakes_workloads::WorkloadSpec;
use serde_json::{json, Value};

use crate::child::ServerChild;
use crate::kv::parse_system;
use crate::loadgen::{self, LoadConfig, PointResult, SweepArgs, SweepResult};
use crate::plot;
use crate::transport::Transport;

/// Options of `cf compare`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Workloads to run: echo, ycsb, google, twitter, cdn, or a full
    /// description such as `ycsb:keys=1000000,fields=4,size=1024`. Repeat the
    /// flag or separate with spaces. Default: all five, at their short
    /// default sizes.
    #[arg(long, num_args = 1.., value_delimiter = ' ')]
    workload: Vec<String>,
    /// Systems to compare (default: every system that applies to the
    /// workload).
    #[arg(long, value_parser = parse_system, num_args = 1.., value_delimiter = ',')]
    systems: Vec<System>,
    /// Directory for summary.json and the plots.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Recorded seconds per load point.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Unrecorded seconds before each point.
    #[arg(long, default_value_t = 0.3)]
    warmup: f64,
    /// Client threads (connections), all on the client core.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Request timeout, milliseconds.
    #[arg(long, default_value_t = 500)]
    timeout_ms: u64,
    /// Core of the server.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
    /// Core of the load generator.
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Datapath between the load generator and the server: `shm` (the
    /// paper's targets are for it) or `udp` (io_uring on 127.0.0.1).
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// Sweeps per system; the table and ratios use the median maximum.
    /// Repeats are interleaved across systems.
    #[arg(long, default_value_t = 1)]
    repeats: usize,
    #[command(flatten)]
    sweep: SweepArgs,
}

/// The systems compared on a workload by default.
fn default_systems(workload: &str) -> Vec<System> {
    if workload.starts_with("echo") {
        vec![
            System::Cornflakes,
            System::CornflakesNoSas,
            System::Protobuf,
            System::Flatbuffers,
            System::Capnp,
            System::Raw,
        ]
    } else {
        System::ALL.into_iter().filter(|s| *s != System::Raw).collect()
    }
}

/// One system's sweeps on a workload, one per repeat.
struct SystemRuns {
    system: System,
    sweeps: Vec<SweepResult>,
    /// Repeats that failed, and why.
    failures: Vec<String>,
    /// The server's counters, summed over the repeats.
    server: ServerStats,
}

impl SystemRuns {
    /// The sweep whose highest achieved load is the median of the repeats
    /// (the lower middle one for an even count), with that point.
    fn median(&self) -> Option<(&SweepResult, &PointResult)> {
        let mut runs: Vec<_> = self.sweeps.iter().filter_map(|s| s.best().map(|b| (s, b))).collect();
        runs.sort_by(|a, b| a.1.achieved.total_cmp(&b.1.achieved));
        runs.get(runs.len().saturating_sub(1) / 2).copied()
    }

    /// The median highest achieved load.
    fn max(&self) -> Option<f64> {
        self.median().map(|(_, b)| b.achieved)
    }

    /// The highest achieved load of each repeat, in the order run.
    fn maxima(&self) -> Vec<f64> {
        self.sweeps.iter().filter_map(|s| s.best().map(|b| b.achieved)).collect()
    }

    fn errors(&self) -> u64 {
        self.sweeps.iter().map(SweepResult::errors).sum()
    }

    fn timeouts(&self) -> u64 {
        self.sweeps.iter().map(SweepResult::timeouts).sum()
    }
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    let names: Vec<String> = if args.workload.is_empty() {
        WorkloadSpec::names().iter().map(|s| s.to_string()).collect()
    } else {
        args.workload.clone()
    };
    let specs: Vec<WorkloadSpec> = names.iter().map(|n| crate::kv::parse_workload(n)).collect::<Result<_, _>>()?;
    if args.repeats == 0 {
        return Err("--repeats must be at least 1".into());
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    if crate::pin::available_cores() <= args.server_core.max(args.client_core) {
        eprintln!("warning: fewer cores than --server-core/--client-core; pinning will fail");
    }
    let started = Instant::now();
    let mut summary = Vec::new();
    for spec in &specs {
        let workload = spec.build().map_err(|e| e.to_string())?;
        let systems = if args.systems.is_empty() { default_systems(workload.name()) } else { args.systems.clone() };
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
        // Repeats are interleaved, so a slow phase of the machine hits
        // every system alike instead of one.
        for repeat in 0..args.repeats {
            for (i, runs) in results.iter_mut().enumerate() {
                let label = format!(
                    "[{}/{}{}] {} {}",
                    i + 1,
                    systems.len(),
                    if args.repeats > 1 { format!(", repeat {}/{}", repeat + 1, args.repeats) } else { String::new() },
                    workload.name(),
                    runs.system.name()
                );
                match run_system(args, spec, runs.system, &label) {
                    Ok((sweep, server)) => {
                        runs.sweeps.push(sweep);
                        runs.server.add(&server);
                    }
                    Err(e) => {
                        eprintln!("{label}: FAILED: {e}");
                        runs.failures.push(e);
                    }
                }
            }
        }
        print_table(workload.name(), workload.unit(), &results);
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
        summary.push(json!({
            "workload": workload.name(),
            "spec": spec.to_string(),
            "unit": workload.unit(),
            "transport": args.transport.name(),
            "repeats": args.repeats,
            "plot": png.file_name().map(|f| f.to_string_lossy().into_owned()),
            "systems": results.iter().map(runs_json).collect::<Vec<_>>(),
            "ratios": ratios(&results),
        }));
        write_summary(&args.out, &summary)?;
    }
    eprintln!(
        "\nwrote {} and plots in {:.0} s",
        args.out.join("summary.json").display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The JSON object of one system's repeats: the median repeat's figures
/// and curve, every repeat's maximum, totals of errors and counters.
fn runs_json(r: &SystemRuns) -> Value {
    let median = r.median();
    let mut v = match median {
        Some((sweep, best)) => system_json(r.system.name(), &sweep.points, best, sweep.server_busy_capacity()),
        None => json!({ "name": r.system.name() }),
    };
    let Value::Object(m) = &mut v else { unreachable!("system_json makes an object") };
    m.insert("repeats_max_rps".into(), json!(r.maxima().iter().map(|x| x.round()).collect::<Vec<_>>()));
    m.insert("errors".into(), json!(r.errors()));
    m.insert("timeouts".into(), json!(r.timeouts()));
    if let Some((sweep, _)) = median {
        m.insert("p50_bound_us".into(), json!((sweep.p50_bound_us * 10.0).round() / 10.0));
    }
    m.insert(
        "server".into(),
        json!({
            "handled": r.server.handled,
            "malformed": r.server.malformed,
            "dropped_full": r.server.dropped_full,
            "send_failed": r.server.send_failed,
            "busy_ns": r.server.busy_ns,
        }),
    );
    if !r.failures.is_empty() {
        m.insert("failed".into(), json!(r.failures));
    }
    v
}

fn write_summary(out: &Path, summary: &[Value]) -> Result<(), String> {
    let path = out.join("summary.json");
    let text = serde_json::to_string_pretty(&json!({ "workloads": summary })).expect("JSON values serialize");
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Starts the server with `system`, sweeps it, and stops it.
fn run_system(
    args: &Args,
    spec: &WorkloadSpec,
    system: System,
    label: &str,
) -> Result<(SweepResult, ServerStats), String> {
    let path = match args.transport {
        Transport::Shm => crate::transport::shm_socket_path(),
        Transport::Udp => "127.0.0.1:0".to_owned(),
        Transport::Bare => return Err("compare runs over a datapath: --transport shm or udp".into()),
    };
    eprintln!("{label}: starting server (preloading)");
    let t0 = Instant::now();
    let mut server = ServerChild::spawn_subcommand(
        "kv-server",
        &[
            "--system".into(),
            system.name().into(),
            "--workload".into(),
            spec.to_string(),
            "--transport".into(),
            args.transport.name().into(),
            "--addr".into(),
            path.clone(),
            "--core".into(),
            args.server_core.to_string(),
            "--exit-with-parent".into(),
        ],
    )?;
    eprintln!("{label}: server ready in {:.1} s", t0.elapsed().as_secs_f64());
    let workload = spec.build().map_err(|e| e.to_string())?;
    let cfg = args.sweep.sweep_config(LoadConfig {
        rate: None,
        threads: args.threads,
        warmup: Duration::from_secs_f64(args.warmup),
        duration: Duration::from_secs_f64(args.seconds),
        timeout: Duration::from_millis(args.timeout_ms),
        max_outstanding: 16384,
        seed: 1,
    });
    let target = crate::kv::target(args.transport, &server.addr)?;
    let result = loadgen::sweep(
        &target,
        system,
        workload.as_ref(),
        &cfg,
        Some(args.client_core),
        |m| eprintln!("{label}: {m}"),
        || server.report().ok().and_then(|l| ServerStats::parse(&l)),
    );
    let counters = server.finish().iter().find_map(|l| ServerStats::parse(l));
    drop(server);
    if args.transport == Transport::Shm {
        let _ = std::fs::remove_file(&path);
    }
    let result = result?;
    let counters = counters.ok_or("the server did not report its counters when stopped")?;
    if let Some(best) = result.best() {
        eprintln!(
            "{label}: max {:.0} {}/s (p99 {:.1} µs, p50 bound {:.1} µs; server busy capacity {:.0} requests/s), {} errors, {} timeouts; server: {} malformed, {} responses dropped",
            best.achieved,
            workload.unit(),
            best.p99_us,
            result.p50_bound_us,
            result.server_busy_capacity().unwrap_or(f64::NAN),
            result.errors(),
            result.timeouts(),
            counters.malformed,
            counters.dropped_full + counters.send_failed,
        );
    }
    Ok((result, counters))
}

/// One line about a load point.
pub(crate) fn describe_point(p: &PointResult, unit: &str) -> String {
    let offered = p.offered.map_or("closed loop".to_owned(), |o| format!("{o:>9.0}/s"));
    format!(
        "offered {offered}  achieved {:>9.0} {unit}/s  p50 {:>8.1} µs  p99 {:>8.1} µs  p99.9 {:>8.1} µs  errors {}  timeouts {}",
        p.achieved, p.p50_us, p.p99_us, p.p999_us, p.errors, p.timeouts
    )
}

/// The JSON object of one system's sweep.
pub(crate) fn system_json(name: &str, points: &[PointResult], best: &PointResult, busy_capacity: Option<f64>) -> Value {
    json!({
        "name": name,
        "max_achieved_rps": best.achieved.round(),
        "p99_us": best.p99_us,
        "server_busy_capacity_rps": busy_capacity.map(f64::round),
        "errors": points.iter().map(|p| p.errors).sum::<u64>(),
        "timeouts": points.iter().map(|p| p.timeouts).sum::<u64>(),
        "points": points.iter().map(|p| json!({
            "offered_rps": p.offered.map(|o| o.round()),
            "achieved_rps": p.achieved.round(),
            "p50_us": p.p50_us,
            "p99_us": p.p99_us,
            "p999_us": p.p999_us,
            "offered": p.offered_count,
            "completed": p.completed,
            "errors": p.errors,
            "timeouts": p.timeouts,
            "server_busy_capacity_rps": p.server.and_then(|s| s.busy_capacity_rps()).map(f64::round),
        })).collect::<Vec<_>>(),
    })
}

fn max_of(results: &[SystemRuns], system: System) -> Option<f64> {
    results.iter().find(|r| r.system == system)?.max()
}

/// The server's busy capacity in the median repeat.
fn capacity_of(results: &[SystemRuns], system: System) -> Option<f64> {
    results.iter().find(|r| r.system == system)?.median()?.0.server_busy_capacity()
}

/// The paper's comparisons that apply to this workload, as ratios of
/// median maxima, and the same ratios of the servers' busy capacities
/// (which still compare the servers when the load generator saturates
/// first).
fn ratios(results: &[SystemRuns]) -> Value {
    let mut out = ratios_by(results, max_of);
    if let Value::Object(m) = &mut out {
        m.insert("server_busy_capacity".into(), ratios_by(results, capacity_of));
    }
    out
}

fn ratios_by(results: &[SystemRuns], metric: fn(&[SystemRuns], System) -> Option<f64>) -> Value {
    let cf = metric(results, System::Cornflakes);
    let best_lib = [System::Protobuf, System::Flatbuffers, System::Capnp]
        .into_iter()
        .filter_map(|s| metric(results, s).map(|m| (s, m)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let mut out = serde_json::Map::new();
    let mut put = |name: &str, a: Option<f64>, b: Option<f64>| {
        if let (Some(a), Some(b)) = (a, b) {
            out.insert(name.to_owned(), json!((a / b * 1000.0).round() / 1000.0));
        }
    };
    put("cornflakes_over_best_library", cf, best_lib.map(|b| b.1));
    put("cornflakes_over_raw", cf, metric(results, System::Raw));
    put("cornflakes_over_only_sg", cf, metric(results, System::CornflakesOnlySg));
    put("cornflakes_over_only_copy", cf, metric(results, System::CornflakesOnlyCopy));
    put("sas_over_no_sas", cf, metric(results, System::CornflakesNoSas));
    if let Some((s, _)) = best_lib {
        out.insert("best_library".into(), json!(s.name()));
    }
    Value::Object(out)
}

fn print_table(workload: &str, unit: &str, results: &[SystemRuns]) {
    let cf = max_of(results, System::Cornflakes);
    println!(
        "\n{workload}: highest load kept up with (achieved >= 95 % of offered, no timeouts, median latency within the bound); \
         median of repeats, p99 at that load; server busy capacity: requests per second of the server's busy \
         time, the highest over the loads kept up with"
    );
    println!(
        "{:<22} {:>12} {:>21} {:>10} {:>10} {:>14} {:>8} {:>9} {:>8}",
        "system",
        format!("{unit}/s"),
        "repeats min-max",
        "p99 µs",
        "vs cf",
        "srv busy cap.",
        "errors",
        "timeouts",
        "dropped"
    );
    for r in results {
        match r.median() {
            Some((sweep, best)) => {
                let maxima = r.maxima();
                let lo = maxima.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = maxima.iter().copied().fold(0.0, f64::max);
                println!(
                    "{:<22} {:>12.0} {:>21} {:>10.1} {:>10} {:>14.0} {:>8} {:>9} {:>8}",
                    r.system.name(),
                    best.achieved,
                    format!("{lo:.0}-{hi:.0}"),
                    best.p99_us,
                    cf.map_or("-".to_owned(), |cf| format!("{:.2}x", best.achieved / cf)),
                    sweep.server_busy_capacity().unwrap_or(f64::NAN),
                    r.errors(),
                    r.timeouts(),
                    r.server.malformed + r.server.dropped_full + r.server.send_failed,
                )
            }
            None => println!("{:<22} {:>12}", r.system.name(), "failed"),
        }
    }
    if let Value::Object(m) = ratios(results) {
        for (k, v) in m {
            println!("  {k}: {v}");
        }
    }
}
