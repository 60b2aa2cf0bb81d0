//! `cf compare`: the main job. For each workload it starts the key-value
//! server with each system in turn (pinned to one core), sweeps the offered
//! load with the load generator (pinned to the other core) over the
//! shared-memory datapath, prints a table like the paper's, and writes
//! `summary.json` and throughput-latency plots.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cornflakes_kv::System;
use cornflakes_workloads::WorkloadSpec;
use serde_json::{json, Value};

use crate::child::ServerChild;
use crate::kv::parse_system;
use crate::loadgen::{self, LoadConfig, PointResult, SweepConfig, SweepResult, Target};
use crate::plot;

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

pub(crate) fn run(args: &Args) -> Result<(), String> {
    let names: Vec<String> = if args.workload.is_empty() {
        WorkloadSpec::names().iter().map(|s| s.to_string()).collect()
    } else {
        args.workload.clone()
    };
    let specs: Vec<WorkloadSpec> = names.iter().map(|n| crate::kv::parse_workload(n)).collect::<Result<_, _>>()?;
    std::fs::create_dir_all(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    if crate::pin::available_cores() <= args.server_core.max(args.client_core) {
        eprintln!("warning: fewer cores than --server-core/--client-core; pinning will fail");
    }
    let started = Instant::now();
    let mut summary = Vec::new();
    for spec in &specs {
        let workload = spec.build().map_err(|e| e.to_string())?;
        let systems = if args.systems.is_empty() { default_systems(workload.name()) } else { args.systems.clone() };
        eprintln!("\n== {} ({} systems; unit: {}) ==", workload.name(), systems.len(), workload.unit());
        let mut results = Vec::new();
        for (i, &system) in systems.iter().enumerate() {
            let label = format!("[{}/{}] {} {}", i + 1, systems.len(), workload.name(), system.name());
            let r = run_system(args, spec, system, &label);
            match r {
                Ok(r) => results.push((system, Some(r))),
                Err(e) => {
                    eprintln!("{label}: FAILED: {e}");
                    results.push((system, None));
                }
            }
        }
        print_table(workload.name(), workload.unit(), &results);
        let png = args.out.join(format!("{}.png", workload.name()));
        let series: Vec<plot::Series> = results
            .iter()
            .filter_map(|(s, r)| {
                r.as_ref().map(|r| plot::Series {
                    name: s.name().to_owned(),
                    points: r.points.iter().map(|p| (p.achieved, p.p99_us)).collect(),
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
        let bars: Vec<(String, f64)> = results
            .iter()
            .map(|(s, r)| (s.name().to_owned(), r.as_ref().and_then(|r| r.best()).map_or(f64::NAN, |b| b.achieved)))
            .collect();
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
            "plot": png.file_name().map(|f| f.to_string_lossy().into_owned()),
            "systems": results.iter().map(|(s, r)| match r {
                Some(r) => match r.best() {
                    Some(best) => system_json(s.name(), &r.points, best),
                    None => json!({"name": s.name(), "failed": "no load point ran"}),
                },
                None => json!({"name": s.name(), "failed": true}),
            }).collect::<Vec<_>>(),
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

fn write_summary(out: &Path, summary: &[Value]) -> Result<(), String> {
    let path = out.join("summary.json");
    let text = serde_json::to_string_pretty(&json!({ "workloads": summary })).expect("JSON values serialize");
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Starts the server with `system` and sweeps it.
fn run_system(args: &Args, spec: &WorkloadSpec, system: System, label: &str) -> Result<SweepResult, String> {
    let path = crate::transport::shm_socket_path();
    eprintln!("{label}: starting server (preloading)");
    let t0 = Instant::now();
    let server = ServerChild::spawn_subcommand(
        "kv-server",
        &[
            "--system".into(),
            system.name().into(),
            "--workload".into(),
            spec.to_string(),
            "--transport".into(),
            "shm".into(),
            "--addr".into(),
            path.clone(),
            "--core".into(),
            args.server_core.to_string(),
            "--exit-with-parent".into(),
        ],
    )?;
    eprintln!("{label}: server ready in {:.1} s", t0.elapsed().as_secs_f64());
    let workload = spec.build().map_err(|e| e.to_string())?;
    let cfg = SweepConfig {
        point: LoadConfig {
            rate: None,
            threads: args.threads,
            warmup: Duration::from_secs_f64(args.warmup),
            duration: Duration::from_secs_f64(args.seconds),
            timeout: Duration::from_millis(args.timeout_ms),
            max_outstanding: 16384,
            seed: 1,
        },
        fractions: SweepConfig::DEFAULT_FRACTIONS.to_vec(),
        probe_outstanding: 32,
    };
    let result = loadgen::sweep(
        &Target::Shm(server.addr.clone()),
        system,
        workload.as_ref(),
        &cfg,
        Some(args.client_core),
        |m| eprintln!("{label}: {m}"),
    );
    drop(server);
    let _ = std::fs::remove_file(&path);
    let result = result?;
    if let Some(best) = result.best() {
        eprintln!(
            "{label}: max {:.0} {}/s (p99 {:.1} µs), {} errors, {} timeouts",
            best.achieved,
            workload.unit(),
            best.p99_us,
            result.errors(),
            result.timeouts()
        );
    }
    Ok(result)
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
pub(crate) fn system_json(name: &str, points: &[PointResult], best: &PointResult) -> Value {
    json!({
        "name": name,
        "max_achieved_rps": best.achieved.round(),
        "p99_us": best.p99_us,
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
        })).collect::<Vec<_>>(),
    })
}

fn max_of(results: &[(System, Option<SweepResult>)], system: System) -> Option<f64> {
    results.iter().find(|(s, _)| *s == system)?.1.as_ref()?.best().map(|b| b.achieved)
}

/// The paper's comparisons that apply to this workload: (what, ratio).
fn ratios(results: &[(System, Option<SweepResult>)]) -> Value {
    let cf = max_of(results, System::Cornflakes);
    let best_lib = [System::Protobuf, System::Flatbuffers, System::Capnp]
        .into_iter()
        .filter_map(|s| max_of(results, s).map(|m| (s, m)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let mut out = serde_json::Map::new();
    let mut put = |name: &str, a: Option<f64>, b: Option<f64>| {
        if let (Some(a), Some(b)) = (a, b) {
            out.insert(name.to_owned(), json!((a / b * 1000.0).round() / 1000.0));
        }
    };
    put("cornflakes_over_best_library", cf, best_lib.map(|b| b.1));
    put("cornflakes_over_raw", cf, max_of(results, System::Raw));
    put("cornflakes_over_only_sg", cf, max_of(results, System::CornflakesOnlySg));
    put("cornflakes_over_only_copy", cf, max_of(results, System::CornflakesOnlyCopy));
    put("sas_over_no_sas", cf, max_of(results, System::CornflakesNoSas));
    if let Some((s, _)) = best_lib {
        out.insert("best_library".into(), json!(s.name()));
    }
    Value::Object(out)
}

fn print_table(workload: &str, unit: &str, results: &[(System, Option<SweepResult>)]) {
    let cf = max_of(results, System::Cornflakes);
    println!("\n{workload}: highest achieved load (achieved >= 95 % of offered up to it), p99 at that load");
    println!(
        "{:<22} {:>14} {:>10} {:>10} {:>8} {:>9}",
        "system",
        format!("{unit}/s"),
        "p99 µs",
        "vs cf",
        "errors",
        "timeouts"
    );
    for (s, r) in results {
        match r.as_ref().and_then(|r| r.best().map(|b| (r, b))) {
            Some((r, best)) => println!(
                "{:<22} {:>14.0} {:>10.1} {:>10} {:>8} {:>9}",
                s.name(),
                best.achieved,
                best.p99_us,
                cf.map_or("-".to_owned(), |cf| format!("{:.2}x", best.achieved / cf)),
                r.errors(),
                r.timeouts()
            ),
            None => println!("{:<22} {:>14}", s.name(), "failed"),
        }
    }
    let ratios = ratios(results);
    if let Value::Object(m) = ratios {
        for (k, v) in m {
            println!("  {k}: {v}");
        }
    }
}
