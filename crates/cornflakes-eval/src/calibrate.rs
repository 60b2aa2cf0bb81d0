//! `cf calibrate`: the paper's threshold study (§5, Figure 5) on this
//! machine, and the threshold it finds written where servers look for it.
//!
//! Each cell of the grid is a key-value server answering gets of `entries`
//! list elements whose sizes add up to `total` bytes, its keys drawn
//! uniformly from a working set that either fits in the caches or is far
//! larger than the last-level cache (the `grid` workload).
//!
//! In each cell one hybrid server takes turns (2048 requests each) between
//! sending every element zero-copy (threshold 0, what `cornflakes-only-sg`
//! does) and copying every element (`never`, `cornflakes-only-copy`) under
//! closed-loop load, and counts each turn's busy time: the cell's value is
//! the ratio of the two server capacities, scatter-gather over copy. Both
//! modes run in one process, interleaved, so a stall of the machine or a
//! change of load falls on both alike. This is the paper's measure where
//! the server is the bottleneck, as it is there (many client machines); on
//! a machine where one client core saturates first, the end-to-end maxima
//! cannot tell the two modes apart, and on this 2-core VM they were noise.
//! With `--maxima` each cell is also swept end to end as `cf compare` does
//! (a capacity probe, then open-loop points held to its latency bound) and
//! the threshold is decided from those maxima instead, as the paper does.
//!
//! The threshold: for each element size (`total / entries`), the geometric
//! mean of the ratios over every cell of that element size; the threshold is
//! the smallest element size from which on every mean is at least 1 —
//! zero-copy pays for this size and all larger ones. It is written to the
//! calibration file (see [`cornflakes::field::Threshold`]) for the
//! transport, and as the default.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cornflakes::field::{calibration_path, Threshold, ThresholdSource, ONLY_COPY, ONLY_ZERO_COPY};
use cornflakes_kv::server::{TurnCost, TurnMode};
use cornflakes_kv::System;
use cornflakes_workloads::WorkloadSpec;
use serde::{Deserialize, Serialize};

use crate::child::ServerPlace;
use crate::compare::sweep_server;
use crate::loadgen::LoadConfig;
use crate::report::{rounded, threshold_arg, threshold_text};
use crate::sweep::SweepConfig;
use crate::transport::Transport;
use crate::{plot, Error};

/// What `cf calibrate` runs.
#[derive(Clone, Debug)]
pub struct CalibrateConfig {
    /// Datapath to calibrate.
    pub transport: Transport,
    /// Numbers of list elements per response (the heatmap's rows).
    pub entries: Vec<u32>,
    /// Total response sizes, bytes (its columns).
    pub totals: Vec<u32>,
    /// Working sets, bytes: each gives one heatmap.
    pub working_sets: Vec<u64>,
    /// Measured seconds per load point.
    pub seconds: f64,
    /// Core of the server.
    pub server_core: usize,
    /// Core of the load generator.
    pub client_core: usize,
    /// Where the table, summary.json and the heatmaps go.
    pub out: PathBuf,
    /// Where to write the threshold (`None`: the default calibration file);
    /// not written when `dry_run`.
    pub write_to: Option<PathBuf>,
    /// Measure and report, but write no calibration file.
    pub dry_run: bool,
    /// Also sweep both modes end to end in every cell, and decide the
    /// threshold from those maxima (the paper's way) instead of from the
    /// server's cost.
    pub maxima: bool,
}

impl CalibrateConfig {
    /// The paper's grid: 1-32 entries, 64 B to 64 KiB in total.
    pub const ENTRIES: [u32; 6] = [1, 2, 4, 8, 16, 32];
    /// See [`Self::ENTRIES`].
    pub const TOTALS: [u32; 11] = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];
    /// In the caches: 1 MiB of values (this machine's L2 is 1 MiB per core).
    pub const IN_CACHE: u64 = 1 << 20;
    /// Far beyond the last-level cache: 512 MiB of values.
    pub const BEYOND_LLC: u64 = 512 << 20;
    /// Most list elements a cell's store holds (keys x entries): 32 M
    /// elements of at most 64 B take 2 GiB of pool slots at least.
    pub const MAX_ELEMENTS: u32 = 1 << 25;
}

/// One cell: both modes' figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Cell {
    /// List elements per response.
    pub entries: u32,
    /// Bytes per response.
    pub total: u32,
    /// Bytes per element.
    pub element: u32,
    /// Bytes of values the keys span.
    pub working_set: u64,
    /// Highest load kept up with, zero-copy (requests/s; `--maxima` only).
    pub sg_max: Option<f64>,
    /// Highest load kept up with, copying (`--maxima` only).
    pub copy_max: Option<f64>,
    /// Server capacity (requests per second of busy time) in its zero-copy
    /// turns.
    pub sg_capacity: Option<f64>,
    /// Server capacity in its copying turns.
    pub copy_capacity: Option<f64>,
    /// `sg_max / copy_max` (`--maxima` only).
    pub max_ratio: Option<f64>,
    /// `sg_capacity / copy_capacity`.
    pub capacity_ratio: Option<f64>,
    /// Wrong responses over every run of the cell (must be 0).
    pub errors: u64,
}

impl Basis {
    /// What the ratio compares, for titles and tables.
    pub fn what(self) -> &'static str {
        match self {
            Basis::ServerCost => "server capacity",
            Basis::Maxima => "highest load kept up with",
        }
    }
}

impl Cell {
    /// The ratio the threshold is decided from.
    pub fn ratio(&self, basis: Basis) -> Option<f64> {
        match basis {
            Basis::ServerCost => self.capacity_ratio,
            Basis::Maxima => self.max_ratio,
        }
    }
}

/// What a cell's ratio compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// The server's busy time per request, both modes in turns in one
    /// server.
    ServerCost,
    /// The highest load kept up with end to end, one sweep per mode.
    Maxima,
}

/// What `cf calibrate` writes to `summary.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CalibrationReport {
    /// Datapath.
    pub transport: String,
    /// What the threshold was decided from (`None` in reports written
    /// before there was a choice: the maxima).
    pub basis: Option<Basis>,
    /// Every cell measured.
    pub cells: Vec<Cell>,
    /// Per element size: the geometric mean of the ratios of its cells.
    pub by_element: Vec<(u32, Option<f64>)>,
    /// The threshold found (bytes; `null`: copy always).
    pub threshold: Option<usize>,
    /// The file written, if any.
    pub written_to: Option<String>,
}

/// Runs the study, prints the heatmaps as tables, writes `summary.json`,
/// one PNG per working set and the calibration file.
///
/// # Errors
///
/// [`Error::Invalid`] for an empty grid; [`Error::Failed`] when output
/// cannot be written. A cell whose server fails is reported and left out.
pub fn run(cfg: &CalibrateConfig) -> Result<CalibrationReport, Error> {
    if cfg.entries.is_empty() || cfg.totals.is_empty() || cfg.working_sets.is_empty() {
        return Err(Error::Invalid("the grid is empty: give --entries, --totals and --working-sets".into()));
    }
    std::fs::create_dir_all(&cfg.out).map_err(|e| format!("cannot create {}: {e}", cfg.out.display()))?;
    let started = Instant::now();
    let mut grid = Vec::new();
    for &ws in &cfg.working_sets {
        for &entries in &cfg.entries {
            for &total in &cfg.totals {
                if total >= entries {
                    grid.push((ws, entries, total));
                }
            }
        }
    }
    let mut report = CalibrationReport { transport: cfg.transport.name().to_owned(), ..Default::default() };
    for (i, &(ws, entries, total)) in grid.iter().enumerate() {
        let element = total / entries;
        // Each element takes a pool slot of at least 64 B however small it
        // is: bound their number, or 32 elements of 2 B over 512 MiB would
        // need 8 M keys and 16 GB of slots (the kernel killed that server).
        // Such a working set still spans far more than the LLC.
        let keys = (ws / u64::from(total)).clamp(1, u64::from(CalibrateConfig::MAX_ELEMENTS / entries.max(1))) as u32;
        let spec = WorkloadSpec::Grid { keys, fields: entries, size: element };
        let label = format!(
            "[{}/{}, {:.0} s] {} working set, {entries} x {element} B",
            i + 1,
            grid.len(),
            started.elapsed().as_secs_f64(),
            bytes_text(ws)
        );
        let mut cell = Cell { entries, total, element, working_set: ws, ..Default::default() };
        let turns = [ONLY_ZERO_COPY.into(), ONLY_COPY.into()];
        match turn_costs(&cfg.bench(), &spec, cfg.seconds.max(0.05) * 4.0, &turns) {
            Ok((point, costs)) => {
                cell.errors += point.errors;
                let capacity = |t| costs.iter().find(|c| c.threshold == Some(t)).and_then(TurnCost::capacity_rps);
                (cell.sg_capacity, cell.copy_capacity) = (capacity(ONLY_ZERO_COPY), capacity(ONLY_COPY));
            }
            Err(e) => eprintln!("{label}: zero-copy and copy in turns FAILED: {e}"),
        }
        if cfg.maxima {
            for system in [System::CornflakesOnlySg, System::CornflakesOnlyCopy] {
                match measure(&cfg.bench(), &spec, system, &[]) {
                    Ok(m) => {
                        cell.errors += m.errors;
                        if system == System::CornflakesOnlySg {
                            cell.sg_max = m.max;
                        } else {
                            cell.copy_max = m.max;
                        }
                    }
                    Err(e) => eprintln!("{label}: {} FAILED: {e}", system.name()),
                }
            }
        }
        cell.max_ratio = ratio(cell.sg_max, cell.copy_max);
        cell.capacity_ratio = ratio(cell.sg_capacity, cell.copy_capacity);
        let maxima = if cfg.maxima {
            format!(
                "; highest load sg {} / copy {} requests/s = {}",
                num(cell.sg_max),
                num(cell.copy_max),
                num2(cell.max_ratio)
            )
        } else {
            String::new()
        };
        eprintln!(
            "{label}: server capacity sg {} / copy {} requests/s = {}{maxima}{}",
            num(cell.sg_capacity),
            num(cell.copy_capacity),
            num2(cell.capacity_ratio),
            if cell.errors > 0 { format!(", {} WRONG RESPONSES", cell.errors) } else { String::new() }
        );
        report.cells.push(cell);
    }
    let basis = cfg.basis();
    report.basis = Some(basis);
    report.by_element = by_element(&report.cells, basis);
    report.threshold = threshold_from(&report.by_element);
    for &ws in &cfg.working_sets {
        print!("{}", table(&report.cells, ws, cfg));
        let mut drawn = vec![(Basis::ServerCost, "")];
        if cfg.maxima {
            drawn.push((Basis::Maxima, "-maxima"));
        }
        for (basis, suffix) in drawn {
            let png = cfg.out.join(format!("heatmap-{}{suffix}.png", bytes_text(ws).replace(' ', "")));
            let cells: Vec<Vec<Option<f64>>> = cfg
                .entries
                .iter()
                .map(|&n| {
                    cfg.totals.iter().map(|&t| find(&report.cells, ws, n, t).and_then(|c| c.ratio(basis))).collect()
                })
                .collect();
            let x: Vec<String> = cfg.totals.iter().map(|&t| bytes_text(t.into())).collect();
            let y: Vec<String> = cfg.entries.iter().map(|n| n.to_string()).collect();
            let title = format!(
                "{}: only-sg / only-copy, {} ({} working set)",
                cfg.transport.name(),
                basis.what(),
                bytes_text(ws)
            );
            if let Err(e) = plot::ratio_heatmap_png(&png, &title, ("total response size", &x), ("entries", &y), &cells)
            {
                eprintln!("warning: cannot draw {}: {e}", png.display());
            }
        }
    }
    println!(
        "\nper element size, geometric mean of sg/copy ({}) over every cell with that element size:",
        basis.what()
    );
    for (element, mean) in &report.by_element {
        println!("  {:>9}  {}", bytes_text((*element).into()), num2(*mean));
    }
    let found = report.threshold.unwrap_or(ONLY_COPY);
    println!("threshold for {}: {}", cfg.transport.name(), threshold_text(found));
    if !cfg.dry_run {
        let path = cfg.write_to.clone().or_else(calibration_path).ok_or(
            "no place for the calibration file: set HOME, XDG_CONFIG_HOME or CORNFLAKES_CALIBRATION, or give --write-to",
        )?;
        write_threshold(&path, cfg.transport.name(), found)?;
        println!("wrote {} (servers use it from now on; see `cf kv-server --help`)", path.display());
        report.written_to = Some(path.display().to_string());
    }
    let text = serde_json::to_string_pretty(&report).expect("report serializes");
    let summary = cfg.out.join("summary.json");
    std::fs::write(&summary, text).map_err(|e| format!("cannot write {}: {e}", summary.display()))?;
    eprintln!("wrote {} and the heatmaps in {:.0} s", summary.display(), started.elapsed().as_secs_f64());
    Ok(report)
}

/// One row of [`compare_thresholds`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThresholdRow {
    /// `64 B` ... `never`, or `adaptive`.
    pub threshold: String,
    /// Highest load kept up with (median of the repeats).
    pub max: Option<f64>,
    /// Server busy capacity (median of the repeats).
    pub capacity: Option<f64>,
    /// Wrong responses over the repeats.
    pub errors: u64,
}

/// The hybrid system (`cornflakes`) on `spec` with each static threshold of
/// [`cornflakes::field::ADAPTIVE_CANDIDATES`] and with the adaptive one,
/// `repeats` times interleaved; prints the table and how the adaptive one
/// compares with the best static threshold. The paper's threshold sweep
/// (Table 5), and the check of issue 17's adaptive threshold.
///
/// # Errors
///
/// None today: a run that fails is reported and counts as no figure.
pub fn compare_thresholds(cfg: &Bench, spec: &WorkloadSpec, repeats: usize) -> Result<Vec<ThresholdRow>, Error> {
    let mut choices: Vec<(String, Vec<String>)> = cornflakes::field::ADAPTIVE_CANDIDATES
        .iter()
        .map(|&t| (threshold_text(t), vec!["--threshold".into(), threshold_arg(t)]))
        .collect();
    choices.push(("adaptive".into(), vec!["--threshold".into(), "adaptive".into()]));
    let mut runs: Vec<Vec<Measured>> = vec![Vec::new(); choices.len()];
    let started = Instant::now();
    for repeat in 0..repeats.max(1) {
        for (i, (name, extra)) in choices.iter().enumerate() {
            let r = measure(cfg, spec, System::Cornflakes, extra).unwrap_or_else(|e| {
                eprintln!("threshold {name}: FAILED: {e}");
                Measured::default()
            });
            eprintln!(
                "[repeat {}/{}, {:.0} s] threshold {name}: max {} requests/s, server capacity {}",
                repeat + 1,
                repeats.max(1),
                started.elapsed().as_secs_f64(),
                num(r.max),
                num(r.capacity)
            );
            runs[i].push(r);
        }
    }
    let median = |mut v: Vec<f64>| -> Option<f64> {
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| v[v.len() / 2])
    };
    let rows: Vec<ThresholdRow> = choices
        .iter()
        .zip(&runs)
        .map(|((name, _), r)| ThresholdRow {
            threshold: name.clone(),
            max: median(r.iter().filter_map(|x| x.max).collect()),
            capacity: median(r.iter().filter_map(|x| x.capacity).collect()),
            errors: r.iter().map(|x| x.errors).sum(),
        })
        .collect();
    println!("\n{} on {}: the hybrid system by threshold (medians of {repeats} repeats)", spec, cfg.transport.name());
    println!("{:>10} {:>14} {:>16} {:>7}", "threshold", "max req/s", "server capacity", "errors");
    for r in &rows {
        println!("{:>10} {:>14} {:>16} {:>7}", r.threshold, num(r.max), num(r.capacity), r.errors);
    }
    let statics = &rows[..rows.len() - 1];
    let adaptive = &rows[rows.len() - 1];
    for (what, get) in
        [("max", (|r: &ThresholdRow| r.max) as fn(&ThresholdRow) -> Option<f64>), ("server capacity", |r| r.capacity)]
    {
        if let (Some(best), Some(a)) =
            (statics.iter().filter_map(|r| Some((r, get(r)?))).max_by(|a, b| a.1.total_cmp(&b.1)), get(adaptive))
        {
            println!(
                "{what}: best static threshold {} ({:.0}); adaptive {:.0} = {:.3}x of it",
                best.0.threshold,
                best.1,
                a,
                a / best.1
            );
        }
    }
    Ok(rows)
}

/// One hybrid server on `spec` in which `turns` (thresholds, and the
/// adaptive controller when empty) take turns of
/// [`INTERLEAVE_SLICE`](crate::kv::INTERLEAVE_SLICE) requests under
/// `seconds` of closed-loop load: the load point and each turn's cost.
///
/// # Errors
///
/// When the server or the load generator fails, or the server reports no
/// turns.
pub fn turn_costs(
    cfg: &Bench,
    spec: &WorkloadSpec,
    seconds: f64,
    turns: &[TurnMode],
) -> Result<(crate::loadgen::PointResult, Vec<TurnCost>), Error> {
    use crate::child::KvServer;
    use crate::loadgen::run_point;
    let choice = if turns.is_empty() {
        "interleaved".to_owned()
    } else {
        let list: Vec<String> = turns.iter().map(|&t| crate::report::turn_arg(t)).collect();
        format!("turns:{}", list.join(","))
    };
    let addr = crate::transport::local_server_addr(cfg.transport);
    let place = ServerPlace { transport: cfg.transport, addr: &addr, prefix: &[], server_core: cfg.server_core };
    let mut server = KvServer::start(&place, System::Cornflakes, spec, &["--threshold".to_owned(), choice])?;
    let workload = spec.build().map_err(|e| Error::Invalid(e.to_string()))?;
    let target = crate::transport::Target::new(cfg.transport, &server.addr)?;
    let load = LoadConfig {
        rate: None,
        threads: 1,
        warmup: Duration::from_secs_f64((seconds / 4.0).min(0.5)),
        duration: Duration::from_secs_f64(seconds),
        timeout: Duration::from_millis(500),
        max_outstanding: 32,
        seed: 1,
        in_place: false,
    };
    let point = run_point(&target, System::Cornflakes, workload.as_ref(), &load, Some(cfg.client_core));
    let lines = server.finish();
    drop(server);
    let point = point?;
    let costs: Vec<TurnCost> = lines
        .iter()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?.get("turns").cloned())
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or("the server reported no turns")?;
    Ok((point, costs))
}

/// [`turn_costs`] for `turns`, or, when it is empty, for every candidate
/// threshold and the adaptive controller: each one's busy cost per
/// request, side by side in one process, so that the machine's stalls and
/// the load fall on all of them alike. Prints the table, each one's
/// capacity against the first's, and the adaptive controller's ratio to the
/// best static threshold; returns (threshold or `adaptive`, requests, ns
/// per request).
///
/// # Errors
///
/// As [`turn_costs`].
pub fn interleaved_thresholds(
    cfg: &Bench,
    spec: &WorkloadSpec,
    seconds: f64,
    turns: &[TurnMode],
) -> Result<Vec<(String, u64, f64)>, Error> {
    eprintln!("interleaved: {seconds} s of closed-loop load on {spec}");
    let (point, costs) = turn_costs(cfg, spec, seconds, turns)?;
    let rows: Vec<(String, u64, f64)> = costs
        .iter()
        .map(|t| {
            let name = t.mode().map_or("adaptive".to_owned(), crate::report::turn_text);
            (name, t.requests, t.busy_ns as f64 / t.requests.max(1) as f64)
        })
        .collect();
    println!(
        "\n{spec} on {}: {:.0} requests/s achieved closed loop, {} errors, {} timeouts; busy time per request by threshold, in turns of {} requests",
        cfg.transport.name(),
        point.achieved,
        point.errors,
        point.timeouts,
        crate::kv::INTERLEAVE_SLICE
    );
    println!(
        "{:>14} {:>10} {:>12} {:>16} {:>11}",
        "threshold", "requests", "ns/request", "server capacity", "x of first"
    );
    let first_ns = rows.first().map_or(f64::NAN, |r| r.2);
    for (name, requests, ns) in &rows {
        println!("{name:>14} {requests:>10} {ns:>12.0} {:>16.0} {:>11.3}", 1e9 / ns, first_ns / ns);
    }
    let statics: Vec<&(String, u64, f64)> =
        rows.iter().zip(&costs).filter(|(_, c)| c.threshold.is_some()).map(|(r, _)| r).collect();
    let adaptive = rows.iter().zip(&costs).find(|(_, c)| c.threshold.is_none()).map(|(r, _)| r);
    if let (Some(best), Some(a)) =
        (statics.iter().filter(|r| r.1 > 0).min_by(|a, b| a.2.total_cmp(&b.2)), adaptive.filter(|r| r.1 > 0))
    {
        println!(
            "server capacity: best static threshold {} ({:.0}); adaptive {:.0} = {:.3}x of it",
            best.0,
            1e9 / best.2,
            1e9 / a.2,
            best.2 / a.2
        );
    }
    if point.errors > 0 {
        return Err(Error::Failed(format!("{} wrong responses", point.errors)));
    }
    Ok(rows)
}

/// Where and how long each sweep runs.
#[derive(Clone, Debug)]
pub struct Bench {
    /// Datapath.
    pub transport: Transport,
    /// Measured seconds per load point.
    pub seconds: f64,
    /// Core of the server.
    pub server_core: usize,
    /// Core of the load generator.
    pub client_core: usize,
}

impl CalibrateConfig {
    /// What the threshold is decided from.
    pub fn basis(&self) -> Basis {
        if self.maxima {
            Basis::Maxima
        } else {
            Basis::ServerCost
        }
    }

    fn bench(&self) -> Bench {
        Bench {
            transport: self.transport,
            seconds: self.seconds,
            server_core: self.server_core,
            client_core: self.client_core,
        }
    }
}

/// What one sweep of one server found.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    /// Highest load kept up with, requests/s.
    pub max: Option<f64>,
    /// Server busy capacity, requests/s.
    pub capacity: Option<f64>,
    /// Wrong responses.
    pub errors: u64,
}

/// Starts a server of `system` on `spec` (with `extra` arguments to
/// `cf kv-server`), sweeps it, stops it.
pub fn measure(cfg: &Bench, spec: &WorkloadSpec, system: System, extra: &[String]) -> Result<Measured, Error> {
    let addr = crate::transport::local_server_addr(cfg.transport);
    let point = LoadConfig {
        rate: None,
        threads: 1,
        warmup: Duration::from_secs_f64((cfg.seconds / 4.0).min(0.1)),
        duration: Duration::from_secs_f64(cfg.seconds),
        timeout: Duration::from_millis(100),
        max_outstanding: 16384,
        seed: 1,
        in_place: false,
    };
    let sweep_cfg = SweepConfig { fractions: vec![0.3, 0.6, 0.8, 0.95, 1.1], refine: 1, ..SweepConfig::new(point) };
    let place = ServerPlace { transport: cfg.transport, addr: &addr, prefix: &[], server_core: cfg.server_core };
    let (result, _) = sweep_server(&place, spec, system, extra, &sweep_cfg, cfg.client_core, |_| {})?;
    let result = result?;
    Ok(Measured {
        max: result.best().map(|p| p.achieved),
        capacity: result.server_busy_capacity(),
        errors: result.errors(),
    })
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let r = a? / b?;
    (r.is_finite() && r > 0.0).then_some(r)
}

fn find(cells: &[Cell], ws: u64, entries: u32, total: u32) -> Option<&Cell> {
    cells.iter().find(|c| c.working_set == ws && c.entries == entries && c.total == total)
}

/// Per element size (ascending): the geometric mean of the cells' ratios.
pub fn by_element(cells: &[Cell], basis: Basis) -> Vec<(u32, Option<f64>)> {
    let mut sizes: Vec<u32> = cells.iter().map(|c| c.element).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|e| {
            let logs: Vec<f64> =
                cells.iter().filter(|c| c.element == e).filter_map(|c| c.ratio(basis)).map(f64::ln).collect();
            (e, (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp()))
        })
        .collect()
}

/// The smallest element size from which on zero-copy never loses (every
/// measured mean at least 1); `None` when even the largest loses (copy
/// always). Sizes without a measurement are skipped.
///
/// # Examples
///
/// ```
/// use cornflakes_eval::calibrate::threshold_from;
///
/// let m = [(64, Some(0.8)), (256, Some(1.02)), (512, Some(0.99)), (1024, Some(1.2)), (4096, None), (8192, Some(1.5))];
/// assert_eq!(threshold_from(&m), Some(1024));
/// assert_eq!(threshold_from(&[(64, Some(1.1))]), Some(0));
/// assert_eq!(threshold_from(&[(64, Some(1.1)), (128, Some(0.9))]), None);
/// ```
pub fn threshold_from(by_element: &[(u32, Option<f64>)]) -> Option<usize> {
    let measured: Vec<(u32, f64)> = by_element.iter().filter_map(|&(e, m)| Some((e, m?))).collect();
    let first_winning_tail = (0..measured.len()).find(|&i| measured[i..].iter().all(|&(_, m)| m >= 1.0))?;
    // Every size measured wins: zero-copy from the smallest (threshold 0
    // would also send smaller ones zero-copy, which were not measured, so
    // use the smallest measured size unless it is the grid's first).
    if first_winning_tail == 0 {
        return Some(if measured[0].0 <= 64 { 0 } else { measured[0].0 as usize });
    }
    Some(measured[first_winning_tail].0 as usize)
}

/// Sets `transport`'s threshold, and the default, in the calibration file
/// at `path`, keeping the other datapaths' lines.
fn write_threshold(path: &std::path::Path, transport: &str, threshold: usize) -> Result<(), Error> {
    let mut t = match std::fs::read_to_string(path) {
        Ok(text) => Threshold::parse(&text, Some(path))
            .map_err(|e| format!("{} exists but does not parse ({e}); remove it or fix it", path.display()))?,
        Err(_) => Threshold { source: ThresholdSource::File(path.to_owned()), ..Threshold::paper() },
    };
    t.per_datapath.retain(|(d, _)| d != transport);
    t.per_datapath.push((transport.to_owned(), threshold));
    t.default = threshold;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let comment = format!(
        "Zero-copy thresholds measured by `cf calibrate` (last: {transport}, unix time {}).\n`default` is the most recent one; remove this file to go back to the paper's 512 B.",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
    );
    std::fs::write(path, t.to_file_text(&comment))
        .map_err(|e| Error::Failed(format!("cannot write {}: {e}", path.display())))
}

fn table(cells: &[Cell], ws: u64, cfg: &CalibrateConfig) -> String {
    let what = if cfg.maxima {
        "server capacity (highest load kept up with in brackets)"
    } else {
        "server capacity, both in turns in one server"
    };
    let mut out = format!("\n{}, {} working set: only-sg / only-copy, {what}\n", cfg.transport.name(), bytes_text(ws));
    out.push_str(&format!("{:>8}", "entries"));
    for &t in &cfg.totals {
        out.push_str(&format!(" {:>13}", bytes_text(t.into())));
    }
    out.push('\n');
    for &n in cfg.entries.iter().rev() {
        out.push_str(&format!("{n:>8}"));
        for &t in &cfg.totals {
            let text = match find(cells, ws, n, t) {
                Some(c) if cfg.maxima => format!("{} ({})", num2(c.capacity_ratio), num2(c.max_ratio)),
                Some(c) => num2(c.capacity_ratio),
                None => "-".to_owned(),
            };
            out.push_str(&format!(" {text:>13}"));
        }
        out.push('\n');
    }
    out
}

fn num(x: Option<f64>) -> String {
    x.map_or("n/a".to_owned(), |v| format!("{v:.0}"))
}

fn num2(x: Option<f64>) -> String {
    x.and_then(|v| rounded(v, 2)).map_or("n/a".to_owned(), |v| format!("{v:.2}"))
}

/// `64 B`, `1 KiB`, `512 MiB`.
fn bytes_text(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_means_are_geometric_and_skip_missing_cells() {
        let cell = |entries, total, r| Cell {
            entries,
            total,
            element: total / entries,
            working_set: 1,
            capacity_ratio: r,
            // The other measure says the opposite: the basis decides.
            max_ratio: r.map(|r| 1.0 / r),
            ..Default::default()
        };
        let cells = [cell(1, 512, Some(2.0)), cell(2, 1024, Some(0.5)), cell(1, 1024, Some(1.5)), cell(4, 4096, None)];
        let m = by_element(&cells, Basis::ServerCost);
        assert_eq!(m[0].0, 512);
        assert!((m[0].1.unwrap() - 1.0).abs() < 1e-12, "{m:?}");
        assert_eq!(m[1], (1024, Some(1.5)));
        assert_eq!(threshold_from(&m), Some(512));
        let m = by_element(&cells, Basis::Maxima);
        assert_eq!(m[1], (1024, Some(1.0 / 1.5)));
        assert_eq!(threshold_from(&m), None);
    }

    #[test]
    fn the_file_keeps_other_datapaths_and_sets_the_default() {
        let dir = std::env::temp_dir().join(format!("cf-calibrate-{}", std::process::id()));
        let path = dir.join("calibration");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&path, "default = 512\nudp = 256\n").unwrap();
        write_threshold(&path, "shm", 2048).unwrap();
        let t = Threshold::parse(&std::fs::read_to_string(&path).unwrap(), None).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!((t.default, t.for_datapath("udp"), t.for_datapath("shm")), (2048, 256, 2048));
    }
}
