//! `cf kv-server` and `cf loadgen`: the two halves of the key-value
//! experiments, to run by hand (on two hosts, or against other clients).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cornflakes_datapath::Datapath;
use cornflakes_kv::{Limits, Store, System};
use cornflakes_workloads::{fill_value, Workload, WorkloadSpec};

use crate::loadgen;
use crate::report::{self, SystemReport};
use crate::sweep::{self, SweepConfig};
use crate::transport::{Target, Transport};
use crate::Error;

/// What `cf kv-server` runs.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Serializer.
    pub system: System,
    /// Workload whose keys are preloaded.
    pub workload: WorkloadSpec,
    /// Datapath.
    pub transport: Transport,
    /// Unix socket path (shm) or IP:port to bind (udp).
    pub addr: String,
    /// Core to pin the server to.
    pub core: Option<usize>,
    /// Take commands from standard input (see [`crate::child`]): a line asks
    /// for the counters (one JSON line on standard output), end of input
    /// stops the server, which then prints its final counters.
    pub controlled_by_parent: bool,
}

/// Fills `store` with every key of `workload`, printing progress.
///
/// # Errors
///
/// When the store runs out of pool memory.
pub fn preload(store: &mut Store, workload: &dyn Workload) -> Result<(), Error> {
    if !workload.preload() {
        return Ok(());
    }
    let start = Instant::now();
    let mut last = start;
    let (mut key, mut sizes) = (Vec::new(), Vec::new());
    let n = workload.num_keys();
    for i in 0..n {
        key.clear();
        workload.key(i, &mut key);
        workload.value_sizes(i, &mut sizes);
        store
            .insert_with(&key, &sizes, |elem, buf| fill_value(i, elem as u32, buf))
            .map_err(|e| format!("cannot preload key {i}: {e} (try a smaller workload, e.g. keys=...)"))?;
        if last.elapsed() > Duration::from_secs(2) {
            eprintln!("  preloading: {i}/{n} keys, {} MB", store.value_bytes() >> 20);
            last = Instant::now();
        }
    }
    eprintln!(
        "preloaded {} keys, {} MB of values in {:.1} s",
        store.len(),
        store.value_bytes() >> 20,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Free hugepage memory, bytes (0 when the machine has none reserved).
fn free_hugepage_bytes() -> u64 {
    let Ok(meminfo) = std::fs::read_to_string("/proc/meminfo") else { return 0 };
    let field = |name: &str| -> u64 {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    field("HugePages_Free:") * field("Hugepagesize:") * 1024
}

/// The server's pool: hugepages only when enough are free for the values
/// (a pool's memory is one file, so it cannot switch to small pages once
/// the hugepages run out).
fn pool_config_for(value_bytes: u64) -> cornflakes::PoolConfig {
    let mut config = cornflakes::PoolConfig::default();
    // Slots are powers of two, and requests and responses need room too.
    let needed = value_bytes * 2 + (256 << 20);
    let free = free_hugepage_bytes();
    if free < needed {
        if free > 0 {
            eprintln!("kv-server: {} MB of free hugepages < {} MB needed; using 4 KiB pages", free >> 20, needed >> 20);
        }
        config.hugepages = cornflakes::mem::HugePages::Never;
    }
    config
}

/// Raised when `cf compare` closes the server's stdin.
static STOP: AtomicBool = AtomicBool::new(false);
/// Raised when `cf compare` asks for the counters.
static REPORT: AtomicBool = AtomicBool::new(false);

/// Runs the key-value server until it is stopped (see
/// [`ServerOptions::controlled_by_parent`]) or killed.
///
/// # Errors
///
/// [`Error::Invalid`] for a bad address; [`Error::Failed`] when the
/// datapath, the preload or the serving loop fails.
pub fn run_server(args: &ServerOptions) -> Result<(), Error> {
    if args.controlled_by_parent {
        crate::child::control_from_parent(&STOP, &REPORT);
    }
    if let Some(core) = args.core {
        crate::pin::pin_to_core(core)?;
    }
    let workload = args.workload.build().map_err(|e| Error::Invalid(e.to_string()))?;
    match args.transport {
        Transport::Shm => {
            let _ = std::fs::remove_file(&args.addr);
            let config = cornflakes_datapath::shm::ShmConfig {
                pool: pool_config_for(cornflakes_workloads::total_value_bytes(workload.as_ref())),
                ..crate::transport::shm_config()
            };
            let mut dp = cornflakes_datapath::shm::ShmDatapath::listen(&args.addr, config)
                .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
            serve(&mut dp, args, workload.as_ref(), &args.addr)
        }
        Transport::Udp => {
            let addr = crate::transport::parse_udp_addr(&args.addr)?;
            // Like shm: hugepages only when enough are free for the values
            // (with 128 MiB of hugepages reserved, google:max=4 used to fail
            // its preload over UDP).
            let config = cornflakes_datapath::udp::UdpConfig {
                pool_config: pool_config_for(cornflakes_workloads::total_value_bytes(workload.as_ref())),
                ..cornflakes_datapath::udp::UdpConfig::loopback()
            };
            let mut dp = cornflakes_datapath::udp::UdpDatapath::bind(addr, config)
                .map_err(|e| format!("cannot bind UDP on {addr}: {e}"))?;
            let local = dp.local_addr().to_string();
            serve(&mut dp, args, workload.as_ref(), &local)
        }
    }
}

fn serve<D: Datapath>(dp: &mut D, args: &ServerOptions, workload: &dyn Workload, addr: &str) -> Result<(), Error> {
    let mut store = Store::new(dp.pool().clone(), Limits::default());
    preload(&mut store, workload)?;
    eprintln!("kv-server: {} on {} at {addr}, workload {}", args.system.name(), args.transport.name(), workload.name());
    println!("READY {addr}");
    let mut last = Instant::now();
    let mut reported = (0, 0);
    let stats = cornflakes_kv::server::serve(dp, &mut store, args.system, |stats| {
        let problems = (stats.malformed, stats.dropped_full + stats.send_failed);
        if problems != reported && last.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "kv-server: {} handled, {} malformed dropped, {} responses dropped",
                stats.handled, problems.0, problems.1
            );
            (last, reported) = (Instant::now(), problems);
        }
        // A load first: this runs once per loop pass, and a swap is a
        // locked instruction.
        if REPORT.load(Ordering::Relaxed) && REPORT.swap(false, Ordering::Relaxed) {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", stats.to_json_line()).and_then(|()| out.flush());
        }
        !STOP.load(Ordering::Relaxed)
    })
    .map_err(|e| format!("server failed: {e}"))?;
    eprintln!("kv-server: stopped after {} requests", stats.handled);
    // For `cf compare`, which collects it into summary.json.
    println!("{}", stats.to_json_line());
    Ok(())
}

/// What `cf loadgen` runs.
#[derive(Clone, Debug)]
pub struct LoadgenOptions {
    /// Serializer the server runs (the client speaks the same).
    pub system: System,
    /// Workload, as given to the server.
    pub workload: WorkloadSpec,
    /// The server.
    pub target: Target,
    /// One point at `sweep.point.rate`, or (`None`) a sweep.
    pub sweep: SweepConfig,
    /// Core to pin the client threads to.
    pub core: Option<usize>,
}

/// Runs one load point (or a sweep) against a running server; prints one
/// line per point on standard error and the [`SystemReport`] as the last
/// line of standard output.
///
/// # Errors
///
/// When the server cannot be reached or the run fails.
pub fn run_loadgen(args: &LoadgenOptions) -> Result<(), Error> {
    let workload = args.workload.build().map_err(|e| Error::Invalid(e.to_string()))?;
    let target = &args.target;
    let (points, best) = match args.sweep.point.rate {
        Some(_) => {
            let p = loadgen::run_point(target, args.system, workload.as_ref(), &args.sweep.point, args.core)?;
            (vec![p.clone()], p)
        }
        None => {
            let r = sweep::sweep(
                target,
                args.system,
                workload.as_ref(),
                &args.sweep,
                args.core,
                |m| eprintln!("  {m}"),
                || None,
            )?;
            let best = r.best().ok_or("no load point ran")?.clone();
            (r.points, best)
        }
    };
    for p in &points {
        eprintln!("{}", report::describe_point(p, workload.unit()));
    }
    let report = SystemReport::new(args.system.name(), &points, &best, None);
    println!("{}", serde_json::to_string(&report).expect("reports serialize"));
    Ok(())
}
