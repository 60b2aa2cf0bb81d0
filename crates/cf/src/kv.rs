//! `cf kv-server` and `cf loadgen`: the two halves of the key-value
//! experiments, to run by hand (on two hosts, or against other clients).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cornflakes_datapath::Datapath;
use cornflakes_kv::{Limits, Store, System};
use cornflakes_workloads::{fill_value, Workload, WorkloadSpec};

use crate::loadgen::{self, LoadConfig, SweepArgs, Target};
use crate::transport::Transport;

/// Parses a system name for clap.
pub(crate) fn parse_system(s: &str) -> Result<System, String> {
    System::from_name(s).ok_or_else(|| {
        let names: Vec<_> = System::ALL.iter().map(|s| s.name()).collect();
        format!("unknown system {s:?}; one of: {}", names.join(", "))
    })
}

/// Parses a workload description for clap.
pub(crate) fn parse_workload(s: &str) -> Result<WorkloadSpec, String> {
    s.parse::<WorkloadSpec>().map_err(|e| e.to_string())
}

/// Options of `cf kv-server`.
#[derive(clap::Args, Debug)]
pub(crate) struct ServerArgs {
    /// Serializer: cornflakes, cornflakes-only-sg, cornflakes-only-copy,
    /// cornflakes-no-sas, protobuf, flatbuffers, capnp, raw (echo only).
    #[arg(long, value_parser = parse_system, default_value = "cornflakes")]
    pub(crate) system: System,
    /// Workload whose keys are preloaded, e.g. `ycsb`, `google:max=8`,
    /// `twitter:keys=1000000`, `cdn`, `echo` (see `cf compare --help`).
    #[arg(long, value_parser = parse_workload, default_value = "ycsb")]
    pub(crate) workload: WorkloadSpec,
    /// Transport (`shm` or `udp`).
    #[arg(long, value_enum, default_value = "shm")]
    pub(crate) transport: Transport,
    /// Unix socket path (shm) or IP:port to bind (udp).
    #[arg(long, default_value = "/tmp/cf-kv.sock")]
    pub(crate) addr: String,
    /// Core to pin the server to.
    #[arg(long)]
    pub(crate) core: Option<usize>,
    /// Exit when standard input closes (set by `cf compare`).
    #[arg(long, hide = true)]
    pub(crate) exit_with_parent: bool,
}

/// Fills `store` with every key of `workload`, printing progress.
pub(crate) fn preload(store: &mut Store, workload: &dyn Workload) -> Result<(), String> {
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

pub(crate) fn run_server(args: &ServerArgs) -> Result<(), String> {
    if args.exit_with_parent {
        crate::child::control_from_parent(&STOP, &REPORT);
    }
    if let Some(core) = args.core {
        crate::pin::pin_to_core(core)?;
    }
    let workload = args.workload.build().map_err(|e| e.to_string())?;
    match args.transport {
        Transport::Shm => {
            let _ = std::fs::remove_file(&args.addr);
            let config = cornflakes_datapath::shm::ShmConfig {
                pool: pool_config_for(cornflakes_workloads::total_value_bytes(workload.as_ref())),
                ..Default::default()
            };
            let mut dp = cornflakes_datapath::shm::ShmDatapath::listen(&args.addr, config)
                .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
            serve(&mut dp, args, workload.as_ref(), &args.addr)
        }
        Transport::Udp => {
            let addr = args.addr.parse().map_err(|e| format!("bad --addr {:?} for udp: {e}", args.addr))?;
            let mut dp =
                cornflakes_datapath::udp::UdpDatapath::bind(addr, cornflakes_datapath::udp::UdpConfig::loopback())
                    .map_err(|e| format!("cannot bind UDP on {addr}: {e}"))?;
            let local = dp.local_addr().to_string();
            serve(&mut dp, args, workload.as_ref(), &local)
        }
        Transport::Bare => Err("the key-value server runs over a datapath: --transport shm or udp".into()),
    }
}

fn serve<D: Datapath>(dp: &mut D, args: &ServerArgs, workload: &dyn Workload, addr: &str) -> Result<(), String> {
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
            let _ = writeln!(out, "{stats}").and_then(|()| out.flush());
        }
        !STOP.load(Ordering::Relaxed)
    })
    .map_err(|e| format!("server failed: {e}"))?;
    eprintln!("kv-server: stopped after {} requests", stats.handled);
    // For `cf compare`, which collects it into summary.json.
    println!("{stats}");
    Ok(())
}

/// Options of `cf loadgen`.
#[derive(clap::Args, Debug)]
pub(crate) struct LoadgenArgs {
    /// Serializer the server runs (the client speaks the same).
    #[arg(long, value_parser = parse_system, default_value = "cornflakes")]
    pub(crate) system: System,
    /// Workload, as given to the server.
    #[arg(long, value_parser = parse_workload, default_value = "ycsb")]
    pub(crate) workload: WorkloadSpec,
    /// Transport (`shm` or `udp`).
    #[arg(long, value_enum, default_value = "shm")]
    pub(crate) transport: Transport,
    /// Server's Unix socket path (shm) or IP:port (udp).
    #[arg(long, default_value = "/tmp/cf-kv.sock")]
    pub(crate) addr: String,
    /// Offered load, transactions per second; without it, sweep.
    #[arg(long)]
    pub(crate) rate: Option<f64>,
    /// Client threads (connections).
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// Recorded seconds per load point.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) seconds: f64,
    /// Unrecorded seconds before each point.
    #[arg(long, default_value_t = 0.5)]
    pub(crate) warmup: f64,
    /// Request timeout, milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub(crate) timeout_ms: u64,
    /// Core to pin the client threads to.
    #[arg(long)]
    pub(crate) core: Option<usize>,
    /// Seed of arrivals and key choices.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[command(flatten)]
    pub(crate) sweep: SweepArgs,
}

impl LoadgenArgs {
    pub(crate) fn load_config(&self) -> LoadConfig {
        LoadConfig {
            rate: self.rate,
            threads: self.threads,
            warmup: Duration::from_secs_f64(self.warmup),
            duration: Duration::from_secs_f64(self.seconds),
            timeout: Duration::from_millis(self.timeout_ms),
            max_outstanding: 16384,
            seed: self.seed,
        }
    }
}

pub(crate) fn target(transport: Transport, addr: &str) -> Result<Target, String> {
    match transport {
        Transport::Shm => Ok(Target::Shm(addr.to_owned())),
        Transport::Udp => Ok(Target::Udp(addr.parse().map_err(|e| format!("bad server address {addr:?}: {e}"))?)),
        Transport::Bare => Err("the load generator runs over a datapath: --transport shm or udp".into()),
    }
}

pub(crate) fn run_loadgen(args: &LoadgenArgs) -> Result<(), String> {
    let workload = args.workload.build().map_err(|e| e.to_string())?;
    let target = target(args.transport, &args.addr)?;
    let cfg = args.load_config();
    let (points, best) = match args.rate {
        Some(_) => {
            let p = loadgen::run_point(&target, args.system, workload.as_ref(), &cfg, args.core)?;
            (vec![p.clone()], p)
        }
        None => {
            let sweep_cfg = args.sweep.sweep_config(cfg);
            let r = loadgen::sweep(
                &target,
                args.system,
                workload.as_ref(),
                &sweep_cfg,
                args.core,
                |m| eprintln!("  {m}"),
                || None,
            )?;
            let best = r.best().ok_or("no load point ran")?.clone();
            (r.points, best)
        }
    };
    for p in &points {
        eprintln!("{}", crate::compare::describe_point(p, workload.unit()));
    }
    println!("{}", crate::compare::system_json(args.system.name(), &points, &best, None));
    Ok(())
}
