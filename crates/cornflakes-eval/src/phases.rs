//! `cf phases`: instructions and estimated cycles per step of answering a
//! request, per serializer (the paper's Figure 11, which breaks the CDN
//! workload's cycles down the same way).
//!
//! This machine has no hardware counters, so the counts come from callgrind:
//! `cf kv-server` runs under `valgrind --tool=callgrind` with collection
//! switched on only inside the step functions of
//! [`cornflakes_kv::phase`] (`--collect-atstart=no --toggle-collect=...`),
//! while the load generator offers a low, fixed load from the other core.
//! Each step's inclusive cost, divided by the requests the server handled
//! (calls of the `store` step), is its cost per request; the once-per-batch
//! flush is spread over the requests of the run.
//!
//! Callgrind counts instructions exactly and simulates the caches (levels 1
//! and last, sized from this machine's sysfs). "Estimated cycles" is
//! KCachegrind's estimate without branch simulation: instructions + 10 per
//! level-1 miss + 100 per last-level miss. It is a model: a copy of 8 KB is
//! a few hundred vector instructions but the memory traffic behind it is
//! what costs, which only the miss terms see; and the simulated caches
//! have no prefetcher, so a sequential read that hardware would prefetch
//! counts every line as a miss (an upper bound there).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cornflakes_kv::phase::STEPS;
use cornflakes_kv::System;
use cornflakes_workloads::WorkloadSpec;
use serde::Serialize;

use crate::child::{KvServer, ServerPlace};
use crate::loadgen::{self, LoadConfig};
use crate::transport::{self, Target, Transport};
use crate::Error;

/// The serializers of the paper's Figure 11, and those whose server codecs
/// mark their steps.
pub const PAPER_SYSTEMS: [System; 3] = [System::Cornflakes, System::Protobuf, System::Flatbuffers];

/// Callgrind counts each iteration of a `rep stos`/`rep movs` instruction
/// as one instruction, so a memset of 8 KB that glibc does with `rep stosb`
/// would count 8000 where its vector loop counts ~300 (and the hardware
/// takes a few hundred cycles either way). The server under callgrind runs
/// with glibc told to use its vector loops at every size.
const GLIBC_NO_REP_STRINGS: &str =
    "GLIBC_TUNABLES=glibc.cpu.x86_rep_stosb_threshold=0x7fffffffffffffff:glibc.cpu.x86_rep_movsb_threshold=0x7fffffffffffffff";

/// Which process runs under callgrind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Side {
    /// The key-value server: the steps of [`cornflakes_kv::phase`].
    Server,
    /// The load generator: queueing arrivals, sending, receiving and
    /// checking each response, expiring (the server runs natively).
    Client,
}

/// The load generator's steps, as callgrind names them. `take_record`
/// (shown as `receive`) is the datapath's receive of one response: its
/// checks and the gather of its zero-copy segments out of the server's
/// pool (in place: of the rest); `on_response` checks it. Before
/// 2026-12-02 the steps left the receive out, so the instructions per
/// request they gave (and the notes quoting them) were without the gather.
/// A receive that `send_backlog` makes to free ring room is counted in
/// neither (`--toggle-collect` switches collection off inside it); the
/// low rates callgrind runs at never fill the ring.
pub const CLIENT_STEPS: [&str; 5] = [
    "cornflakes_eval::loadgen::Client<D,C>::arrive",
    "cornflakes_eval::loadgen::Client<D,C>::send_backlog",
    DATAPATH_RECEIVE,
    "cornflakes_eval::loadgen::Client<D,C>::on_response",
    "cornflakes_eval::loadgen::Client<D,C>::expire",
];

/// The shm datapath's receive of one record (never inlined for this).
const DATAPATH_RECEIVE: &str = "cornflakes_datapath::shm::receive::take_record";

/// Called once per response the load generator checks: its calls count
/// the requests on the client side.
const CLIENT_PER_REQUEST: &str = "cornflakes_eval::loadgen::Client<D,C>::on_response";

impl Side {
    /// `server` or `client`.
    pub fn name(self) -> &'static str {
        match self {
            Side::Server => "server",
            Side::Client => "client",
        }
    }

    /// The functions whose inclusive costs are the steps.
    pub fn steps(self) -> &'static [&'static str] {
        match self {
            Side::Server => &STEPS,
            Side::Client => &CLIENT_STEPS,
        }
    }

    /// The function called once per request, whose calls count the
    /// requests.
    fn per_request(self) -> &'static str {
        match self {
            // serialize & send: every request handled ends there once (an
            // echo skips the store; a request decodes in two deserialize
            // calls).
            Side::Server => STEPS[3],
            Side::Client => CLIENT_PER_REQUEST,
        }
    }
}

/// What `cf phases` runs.
#[derive(Clone, Debug)]
pub struct PhasesConfig {
    /// Serializers, each in its own server run.
    pub systems: Vec<System>,
    /// The server or the load generator under callgrind.
    pub side: Side,
    /// Workload the servers preload and the load generator offers.
    pub workload: WorkloadSpec,
    /// Offered transactions per second (callgrind runs the server 50-100x
    /// slower than natively).
    pub rate: f64,
    /// Recorded seconds of load (after half a second of warm-up).
    pub seconds: f64,
    /// Directory for the callgrind files, the table, JSON and PNG.
    pub out: PathBuf,
    /// Core of the server.
    pub server_core: usize,
    /// Core of the load generator.
    pub client_core: usize,
    /// Trusted peers: the load generator reads responses in place (`cf
    /// loadgen --in-place`) and the server gathers requests into its shared
    /// pool (`cf kv-server --in-place`).
    pub in_place: bool,
}

/// One step's cost per request.
#[derive(Clone, Debug, Serialize)]
pub struct StepCost {
    /// The step's short name (`deserialize`, `store`, ...).
    pub step: String,
    /// Instructions.
    pub instructions: f64,
    /// Level-1 misses (instruction and data).
    pub l1_misses: f64,
    /// Last-level misses (instruction and data).
    pub ll_misses: f64,
    /// Mispredicted branches (conditional and indirect), as callgrind's
    /// branch simulator predicts them.
    pub mispredicts: f64,
    /// Instructions + 10 per level-1 miss + 100 per last-level miss.
    pub est_cycles: f64,
}

/// One serializer's steps.
#[derive(Clone, Debug, Serialize)]
pub struct SystemSteps {
    /// Serializer.
    pub system: String,
    /// Requests the server handled with collection on.
    pub requests: u64,
    /// Transactions per second the load generator achieved.
    pub achieved: f64,
    /// Responses that were wrong (must be 0).
    pub errors: u64,
    /// Requests without a response in time.
    pub timeouts: u64,
    /// Cost per request of each step, in the order of [`STEPS`].
    pub steps: Vec<StepCost>,
    /// The callgrind file (open it with `callgrind_annotate` or KCachegrind).
    pub callgrind_file: String,
}

impl SystemSteps {
    /// Sum over the steps of `f`.
    pub fn total(&self, f: impl Fn(&StepCost) -> f64) -> f64 {
        self.steps.iter().map(f).sum()
    }
}

/// The short name of a step (`cornflakes_kv::phase::set_value` → `set_value`).
pub fn step_name(path: &str) -> &str {
    if path == DATAPATH_RECEIVE {
        return "receive";
    }
    path.rsplit("::").next().unwrap_or(path)
}

/// Runs every system in turn and writes `phases.json`, `table.md` and
/// `phases.png` into `cfg.out`; returns the table.
///
/// # Errors
///
/// When valgrind is missing, a server or the load generator fails, or the
/// results cannot be written.
pub fn run(cfg: &PhasesConfig) -> Result<(Vec<SystemSteps>, String), Error> {
    if std::process::Command::new("valgrind").arg("--version").output().is_err() {
        return Err(Error::Failed(
            "valgrind is not installed: `cf phases` runs the server under callgrind (scripts/setup.sh installs it)"
                .into(),
        ));
    }
    if let Some(s) = cfg.systems.iter().find(|s| cfg.side == Side::Server && !s.marks_phases()) {
        let marked: Vec<&str> = System::ALL.into_iter().filter(|s| s.marks_phases()).map(System::name).collect();
        return Err(Error::Invalid(format!(
            "{} does not mark the steps of its requests; `cf phases` knows: {}",
            s.name(),
            marked.join(", ")
        )));
    }
    std::fs::create_dir_all(&cfg.out).map_err(|e| format!("cannot create {}: {e}", cfg.out.display()))?;
    let mut results = Vec::new();
    for (i, &system) in cfg.systems.iter().enumerate() {
        eprintln!("[{}/{}] {} under callgrind", i + 1, cfg.systems.len(), system.name());
        results.push(run_one(cfg, system)?);
    }
    let table = table(cfg, &results);
    let json = serde_json::to_string_pretty(&results).map_err(|e| format!("cannot encode the results: {e}"))?;
    write(&cfg.out.join("phases.json"), &json)?;
    write(&cfg.out.join("table.md"), &table)?;
    let groups: Vec<String> = cfg.side.steps().iter().map(|s| step_name(s).to_owned()).collect();
    let series: Vec<(String, Vec<f64>)> =
        results.iter().map(|r| (r.system.clone(), r.steps.iter().map(|s| s.est_cycles).collect())).collect();
    crate::plot::grouped_bars_png(
        &cfg.out.join("phases.png"),
        &match cfg.side {
            Side::Server => {
                format!("Estimated cycles per request and step, {} (cf. paper Figure 11)", cfg.workload.kind())
            }
            Side::Client => format!("Load generator: estimated cycles per request and step, {}", cfg.workload.kind()),
        },
        "estimated cycles per request",
        &groups,
        &series,
    )?;
    Ok((results, table))
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    Ok(std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?)
}

fn run_one(cfg: &PhasesConfig, system: System) -> Result<SystemSteps, Error> {
    let out_file = cfg.out.join(format!("callgrind.{}.{}.out", cfg.side.name(), system.name()));
    let _ = std::fs::remove_file(&out_file);
    let mut valgrind: Vec<String> = vec![
        "env".into(),
        GLIBC_NO_REP_STRINGS.into(),
        "valgrind".into(),
        "--tool=callgrind".into(),
        format!("--callgrind-out-file={}", out_file.display()),
        "--collect-atstart=no".into(),
        "--compress-strings=no".into(),
        "--compress-pos=no".into(),
        "--cache-sim=yes".into(),
        "--branch-sim=yes".into(),
    ];
    valgrind.extend(cfg.side.steps().iter().map(|s| format!("--toggle-collect={s}")));
    valgrind.extend(cache_args());
    let addr = transport::shm_socket_path();
    let t0 = Instant::now();
    let prefix: &[String] = if cfg.side == Side::Server { &valgrind } else { &[] };
    let place = ServerPlace { transport: Transport::Shm, addr: &addr, prefix, server_core: cfg.server_core };
    let in_place = ["--in-place".to_owned()];
    let extra: &[String] = if cfg.in_place { &in_place } else { &[] };
    let mut server = KvServer::start(&place, system, &cfg.workload, extra)?;
    eprintln!("  server ready in {:.1} s", t0.elapsed().as_secs_f64());
    let workload = cfg.workload.build().map_err(|e| Error::Invalid(e.to_string()))?;
    let load = LoadConfig {
        rate: Some(cfg.rate),
        threads: 1,
        warmup: Duration::from_millis(500),
        duration: Duration::from_secs_f64(cfg.seconds),
        // Callgrind's side is slow and stalls while it translates new code:
        // wait for it rather than count timeouts.
        timeout: Duration::from_secs(2),
        max_outstanding: 1024,
        seed: 1,
        in_place: cfg.in_place,
    };
    let point = match cfg.side {
        Side::Server => {
            let target = Target::new(Transport::Shm, &server.addr)?;
            loadgen::run_point(&target, system, workload.as_ref(), &load, Some(cfg.client_core))
                .map(|p| (p.achieved, p.errors, p.timeouts))
        }
        Side::Client => client_under_callgrind(cfg, system, &valgrind, &server.addr),
    };
    server.finish();
    drop(server);
    let (achieved, errors, timeouts) = point?;
    eprintln!("  {achieved:.0} {}/s achieved, {errors} errors, {timeouts} timeouts", workload.unit());
    let text = std::fs::read_to_string(&out_file)
        .map_err(|e| format!("callgrind wrote no {} ({e}); see its messages above", out_file.display()))?;
    let profile = Profile::parse(&text)?;
    let requests = profile.calls.get(cfg.side.per_request()).copied().unwrap_or(0);
    if requests == 0 {
        return Err(Error::Failed(format!("no request was handled in {}", out_file.display())));
    }
    let steps = cfg
        .side
        .steps()
        .iter()
        .map(|s| {
            let cost = profile.inclusive.get(*s).cloned().unwrap_or_default();
            let per = |names: &[&str]| profile.sum(&cost, names) as f64 / requests as f64;
            let l1 = per(&["I1mr", "D1mr", "D1mw"]);
            let ll = per(&["ILmr", "DLmr", "DLmw"]);
            let ir = per(&["Ir"]);
            let mispredicts = per(&["Bcm", "Bim"]);
            StepCost {
                step: step_name(s).to_owned(),
                instructions: ir,
                l1_misses: l1,
                ll_misses: ll,
                mispredicts,
                est_cycles: ir + 10.0 * l1 + 100.0 * ll,
            }
        })
        .collect();
    Ok(SystemSteps {
        system: system.name().to_owned(),
        requests,
        achieved,
        errors,
        timeouts,
        steps,
        callgrind_file: out_file.display().to_string(),
    })
}

/// Runs `cf loadgen` under `valgrind` (the callgrind command line) against
/// the server at `addr`: transactions per second achieved, wrong responses
/// and timeouts, from its JSON line.
fn client_under_callgrind(
    cfg: &PhasesConfig,
    system: System,
    valgrind: &[String],
    addr: &str,
) -> Result<(f64, u64, u64), Error> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the cf binary: {e}"))?;
    let output = std::process::Command::new(&valgrind[0])
        .args(&valgrind[1..])
        .arg(exe)
        .args(["loadgen", "--system", system.name(), "--workload", &cfg.workload.to_string()])
        .args(["--transport", "shm", "--addr", addr, "--rate", &cfg.rate.to_string()])
        .args(["--seconds", &cfg.seconds.to_string(), "--warmup", "0.5", "--timeout-ms", "2000"])
        .args(["--core", &cfg.client_core.to_string()])
        .args(cfg.in_place.then_some("--in-place"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start the load generator under valgrind: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(Error::Failed(format!("the load generator failed ({}): {stdout}", output.status)));
    }
    let line = stdout.lines().rfind(|l| l.starts_with('{')).ok_or("the load generator printed no result")?;
    let report: crate::report::SystemReport =
        serde_json::from_str(line).map_err(|e| format!("the load generator's result does not parse: {e}"))?;
    // The point's own achieved load: `max_achieved_rps` is absent when the
    // point missed its latency bound, which a client under callgrind can.
    let achieved = report.points.last().and_then(|p| p.achieved_rps).unwrap_or(0.0);
    Ok((achieved, report.errors, report.timeouts))
}

/// `--I1`, `--D1` and `--LL` from this machine's caches (sysfs), so that
/// the simulation is of this machine; none when sysfs does not say, and
/// valgrind then asks the CPU.
fn cache_args() -> Vec<String> {
    let base = Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut found: HashMap<&str, String> = HashMap::new();
    let Ok(dirs) = std::fs::read_dir(base) else { return Vec::new() };
    let mut last_level = 0;
    for dir in dirs.flatten().map(|d| d.path()) {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).map(|s| s.trim().to_owned()).ok();
        let (Some(level), Some(kind), Some(spec)) = (
            read("level").and_then(|l| l.parse::<u32>().ok()),
            read("type"),
            valgrind_cache(
                read("size").and_then(|s| parse_size(&s)),
                read("ways_of_associativity").and_then(|w| w.parse().ok()),
                read("coherency_line_size").and_then(|l| l.parse().ok()),
            ),
        ) else {
            continue;
        };
        match (level, kind.as_str()) {
            (1, "Data") => {
                found.insert("D1", spec);
            }
            (1, "Instruction") => {
                found.insert("I1", spec);
            }
            (l, "Unified") if l > last_level => {
                last_level = l;
                found.insert("LL", spec);
            }
            _ => {}
        }
    }
    if found.len() < 3 {
        return Vec::new();
    }
    ["I1", "D1", "LL"].iter().map(|k| format!("--{k}={}", found[k])).collect()
}

/// A cache as valgrind takes it, `size,ways,line`. Valgrind simulates
/// power-of-two set counts only (it refuses `--LL=503316480,16,64`, the
/// 480 MiB L3 of one of the project's VMs): a cache whose set count is not
/// one is simulated with the largest power of two below it (that L3 as
/// 256 MiB), which for the few-MB working sets of `cf phases` misses the
/// same.
fn valgrind_cache(size: Option<u64>, ways: Option<u64>, line: Option<u64>) -> Option<String> {
    let (size, ways, line) = (size?, ways?, line?);
    let sets = size.checked_div(ways.checked_mul(line)?)?;
    if sets == 0 {
        return None;
    }
    let sets = 1 << sets.ilog2();
    Some(format!("{},{ways},{line}", sets * ways * line))
}

/// `32K` → 32768.
fn parse_size(s: &str) -> Option<u64> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits.parse().ok()?;
    match unit {
        "" => Some(n),
        "K" => Some(n << 10),
        "M" => Some(n << 20),
        _ => None,
    }
}

fn table(cfg: &PhasesConfig, results: &[SystemSteps]) -> String {
    let mut t = String::new();
    writeln!(
        t,
        "Per request, {} on shm, {} transactions/s offered for {} s, the {} under callgrind (server core {}, load generator core {}).\n",
        cfg.workload, cfg.rate, cfg.seconds, cfg.side.name(), cfg.server_core, cfg.client_core
    )
    .unwrap();
    t.push_str("| system | requests | step | instructions | L1 misses | LL misses | mispredicts | est. cycles |\n");
    t.push_str("|---|---:|---|---:|---:|---:|---:|---:|\n");
    for r in results {
        for s in &r.steps {
            writeln!(
                t,
                "| {} | {} | {} | {:.0} | {:.1} | {:.2} | {:.1} | {:.0} |",
                r.system, r.requests, s.step, s.instructions, s.l1_misses, s.ll_misses, s.mispredicts, s.est_cycles
            )
            .unwrap();
        }
        writeln!(
            t,
            "| {} | {} | **total** | **{:.0}** | {:.1} | {:.2} | {:.1} | **{:.0}** |",
            r.system,
            r.requests,
            r.total(|s| s.instructions),
            r.total(|s| s.l1_misses),
            r.total(|s| s.ll_misses),
            r.total(|s| s.mispredicts),
            r.total(|s| s.est_cycles)
        )
        .unwrap();
    }
    t.push('\n');
    for r in results {
        writeln!(
            t,
            "{}: {:.0} transactions/s achieved, {} wrong responses, {} timeouts.",
            r.system, r.achieved, r.errors, r.timeouts
        )
        .unwrap();
    }
    t
}

/// What a callgrind file says about each function: its inclusive cost (its
/// own events and those of everything it called) and how often it was
/// called.
#[derive(Debug, Default)]
pub struct Profile {
    /// The event names (`events:` line), in the order of each cost vector.
    pub events: Vec<String>,
    /// Inclusive cost per function name.
    pub inclusive: HashMap<String, Vec<u64>>,
    /// Calls per function name, summed over its callers.
    pub calls: HashMap<String, u64>,
}

impl Profile {
    /// Parses a callgrind file written with `--compress-strings=no` and
    /// `--compress-pos=no`.
    ///
    /// # Errors
    ///
    /// When the file has no `events:` line or a cost line does not parse.
    pub fn parse(text: &str) -> Result<Profile, Error> {
        let bad = |n: usize, why: &str| Error::Failed(format!("callgrind file, line {}: {why}", n + 1));
        let mut p = Profile::default();
        let mut positions = 1;
        let mut current: Option<String> = None;
        let mut callee: Option<String> = None;
        for (n, line) in text.lines().enumerate() {
            if let Some(ev) = line.strip_prefix("events:") {
                p.events = ev.split_whitespace().map(str::to_owned).collect();
            } else if let Some(pos) = line.strip_prefix("positions:") {
                positions = pos.split_whitespace().count().max(1);
            } else if let Some(name) = line.strip_prefix("fn=") {
                current = Some(name.to_owned());
            } else if let Some(name) = line.strip_prefix("cfn=") {
                callee = Some(name.to_owned());
            } else if let Some(rest) = line.strip_prefix("calls=") {
                let count: u64 = rest
                    .split_whitespace()
                    .next()
                    .and_then(|c| c.parse().ok())
                    .ok_or_else(|| bad(n, "a calls= line without a count"))?;
                let name = callee.clone().ok_or_else(|| bad(n, "calls= before any cfn="))?;
                *p.calls.entry(name).or_default() += count;
            } else if line.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-' || c == '*') {
                // The function's own cost, or (after `calls=`) the call's
                // inclusive cost: both belong to the inclusive cost.
                if p.events.is_empty() {
                    return Err(bad(n, "a cost line before the events: line"));
                }
                let Some(f) = current.as_ref() else {
                    return Err(bad(n, "a cost line outside any fn="));
                };
                let costs: Vec<u64> = line
                    .split_whitespace()
                    .skip(positions)
                    .map(|c| c.parse::<u64>().map_err(|_| bad(n, "a cost that is not a number")))
                    .collect::<Result<_, _>>()?;
                let total = p.inclusive.entry(f.clone()).or_insert_with(|| vec![0; p.events.len()]);
                for (t, c) in total.iter_mut().zip(costs) {
                    *t += c;
                }
            }
        }
        if p.events.is_empty() {
            return Err(Error::Failed("not a callgrind file: no events: line".into()));
        }
        Ok(p)
    }

    /// The sum of the events `names` in `cost` (events this file does not
    /// have count 0).
    pub fn sum(&self, cost: &[u64], names: &[&str]) -> u64 {
        names
            .iter()
            .filter_map(|name| self.events.iter().position(|e| e == name))
            .map(|i| cost.get(i).copied().unwrap_or(0))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of the shape callgrind writes: `handle` calls two steps
    /// twice each; `store` calls a helper; a cost line after `calls=` is
    /// the call's inclusive cost.
    const FILE: &str = "# callgrind format
version: 1
positions: line
events: Ir Dr D1mr DLmr

fn=handle
0 5 1 0 0
cfn=cornflakes_kv::phase::store
calls=2 0
0 300 40 4 1
cfn=cornflakes_kv::phase::deserialize
calls=2 0
0 100 20 0 0

fn=cornflakes_kv::phase::store
0 20 2 0 0
cfn=lookup
calls=2 0
0 280 38 4 1

fn=lookup
0 280 38 4 1

fn=cornflakes_kv::phase::deserialize
0 100 20 0 0
";

    #[test]
    fn inclusive_costs_and_calls() {
        let p = Profile::parse(FILE).unwrap();
        assert_eq!(p.events, ["Ir", "Dr", "D1mr", "DLmr"]);
        assert_eq!(p.calls["cornflakes_kv::phase::store"], 2);
        assert_eq!(p.calls["lookup"], 2);
        // Its own 20 and the 280 of the call to `lookup`.
        assert_eq!(p.inclusive["cornflakes_kv::phase::store"], [300, 40, 4, 1]);
        assert_eq!(p.inclusive["cornflakes_kv::phase::deserialize"], [100, 20, 0, 0]);
        assert_eq!(p.inclusive["handle"], [405, 61, 4, 1]);
        let store = &p.inclusive["cornflakes_kv::phase::store"];
        assert_eq!(p.sum(store, &["D1mr", "DLmr", "I1mr"]), 5);
    }

    #[test]
    fn refuses_what_is_not_a_callgrind_file() {
        assert!(Profile::parse("hello\n").is_err());
        assert!(Profile::parse("events: Ir\nfn=f\n0 x\n").is_err());
        assert!(Profile::parse("events: Ir\n0 5\n").is_err());
    }

    #[test]
    fn caches_valgrind_cannot_simulate_are_rounded_down_to_power_of_two_sets() {
        let c = |size, ways, line| super::valgrind_cache(Some(size), Some(ways), Some(line));
        assert_eq!(c(48 << 10, 12, 64).as_deref(), Some("49152,12,64"), "64 sets: as it is");
        assert_eq!(c(32 << 20, 16, 64).as_deref(), Some("33554432,16,64"));
        assert_eq!(c(491_520 << 10, 16, 64).as_deref(), Some("268435456,16,64"), "491520 sets -> 262144");
        assert_eq!(c(32, 16, 64), None, "no whole set");
        assert_eq!(c(32 << 10, 0, 64), None);
        assert_eq!(super::valgrind_cache(None, Some(8), Some(64)), None);
    }

    #[test]
    fn sizes_and_names() {
        assert_eq!(parse_size("32K"), Some(32768));
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("3G"), None);
        assert_eq!(step_name("cornflakes_kv::phase::set_value"), "set_value");
    }
}
