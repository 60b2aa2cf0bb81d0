//! `cf kv-server --protocol resp`: the key-value store behind a
//! Redis-compatible front end (RESP2) on the tcp datapath, for `redis-cli`,
//! `redis-benchmark` and `cf redis-compare`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cornflakes_datapath::tcp::{Framing, TcpConfig, TcpDatapath};
use cornflakes_kv::resp::{self, RespDb, RespStats, ServeOptions};
use cornflakes_kv::Store;
use cornflakes_workloads::WorkloadSpec;

use crate::Error;

/// What `cf kv-server --protocol resp` runs.
#[derive(Clone, Debug)]
pub struct RespServerOptions {
    /// Workload whose keys are preloaded (`echo`: none).
    pub workload: WorkloadSpec,
    /// IP:port to listen on.
    pub addr: String,
    /// Core to pin the server to.
    pub core: Option<usize>,
    /// Values of at least this many bytes are sent zero-copy
    /// (`usize::MAX`: copy everything).
    pub threshold: usize,
    /// Stop (and print the counters as JSON) when standard input closes.
    pub controlled_by_parent: bool,
    /// Also serve the key-value protocol in the Cornflakes format, from the
    /// same store, on this IP:port (tcp, length-framed): issue 14, item 5.
    pub kv_addr: Option<String>,
    /// Replies with a zero-copy value of at least this many bytes go out
    /// with `SENDMSG_ZC` (`usize::MAX`: never, right for loopback and veth,
    /// where the kernel copies anyway; ~16 KiB on a NIC).
    pub zero_copy_min: usize,
    /// Most clients at once (Redis's `maxclients`); one more is answered
    /// `-ERR max number of clients reached` and closed, as Redis does.
    pub max_clients: usize,
    /// Bytes keys and values may take (`maxmemory`); 0: no limit.
    pub maxmemory: usize,
    /// What is evicted past `maxmemory` (with `noeviction`, writes get
    /// Redis's OOM error).
    pub maxmemory_policy: cornflakes_kv::resp::EvictionPolicy,
    /// The password clients must give first (Redis's `requirepass`).
    pub requirepass: Option<String>,
    /// Where SAVE and BGSAVE write (Redis's `dir`); a snapshot there is
    /// loaded at start.
    pub dir: std::path::PathBuf,
    /// The snapshot's file name in `dir` (Redis's `dbfilename`).
    pub dbfilename: String,
    /// Redis's save points (`"3600 1 300 100"`; `""`: none).
    pub save: String,
}

/// The tcp datapath's settings for RESP: a raw byte stream, `SENDMSG_ZC`
/// for replies with a value of at least `zero_copy_min` bytes, and up to
/// 64 MiB of
/// replies queued per connection (redis-benchmark `-P 16` of 100 16 KiB
/// list elements is 26 MB; Redis does not limit normal clients at all), and
/// at most `max_clients` connections, the next told so as Redis tells it.
pub fn resp_tcp_config(zero_copy_min: usize, max_clients: usize) -> TcpConfig {
    // One file for the whole pool, which cannot fall back to small pages
    // once hugepages run out: small pages.
    let pool_config =
        cornflakes::PoolConfig { hugepages: cornflakes::mem::HugePages::Never, ..cornflakes::PoolConfig::default() };
    TcpConfig {
        framing: Framing::Raw,
        max_queued_bytes: 64 << 20,
        pool_config,
        zero_copy_min,
        max_connections: max_clients,
        refusal: resp::MAX_CLIENTS_REACHED.to_vec(),
        ..TcpConfig::default()
    }
}

static STOP: AtomicBool = AtomicBool::new(false);
static REPORT: AtomicBool = AtomicBool::new(false);

/// Runs the RESP server until stopped or killed.
///
/// # Errors
///
/// [`Error::Invalid`] for a bad address or workload; [`Error::Failed`] when
/// the datapath or the preload fails.
pub fn run(args: &RespServerOptions) -> Result<(), Error> {
    if args.controlled_by_parent {
        crate::child::control_from_parent(&STOP, &REPORT, || {});
    }
    if let Some(core) = args.core {
        crate::pin::pin_to_core(core)?;
    }
    let workload = args.workload.build().map_err(|e| Error::Invalid(e.to_string()))?;
    let addr = crate::transport::parse_tcp_addr(&args.addr)?;
    let mut dp = TcpDatapath::bind(addr, resp_tcp_config(args.zero_copy_min, args.max_clients))
        .map_err(|e| Error::Failed(format!("cannot start the RESP server on {addr}: {e}")))?;
    let mut store = Store::new(cornflakes_datapath::Datapath::pool(&dp).clone(), resp::resp_limits());
    crate::kv::preload(&mut store, workload.as_ref())?;
    let mut db = RespDb::new(store, args.threshold);
    db.set_max_clients(args.max_clients);
    db.set_maxmemory(args.maxmemory);
    db.set_maxmemory_policy(args.maxmemory_policy);
    db.set_requirepass(args.requirepass.as_deref().map(str::as_bytes));
    let preloaded = db.store().len();
    db.set_rdb_path(&args.dir, &args.dbfilename);
    db.set_save_points(&args.save).map_err(|e| Error::Invalid(format!("--save {:?}: {e}", args.save)))?;
    let snapshot = db.rdb_path();
    if snapshot.exists() {
        let started = Instant::now();
        let keys = db.load_rdb(&snapshot).map_err(|e| Error::Failed(format!("cannot load the snapshot: {e}")))?;
        eprintln!("kv-server: loaded {keys} keys from {} in {:.2?}", snapshot.display(), started.elapsed());
    }
    let local = dp.local_addrs()[0];
    eprintln!(
        "kv-server: RESP2 on tcp at {local}, {preloaded} keys preloaded, zero-copy from {} B (try: redis-cli -p {})",
        args.threshold,
        local.port()
    );
    if let Some(kv_addr) = &args.kv_addr {
        return serve_both(dp, db, kv_addr, local);
    }
    println!("READY {local}");
    let mut last = Instant::now();
    let mut last_problems = 0;
    let stats = resp::serve(&mut dp, &mut db, &ServeOptions::default(), |s: &RespStats| {
        let problems = s.protocol_errors + s.query_buffer_full + s.reply_dropped;
        if problems != last_problems && last.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "kv-server: {} commands, {} clients closed for protocol errors, {} for the query buffer limit, {} for not reading",
                s.commands, s.protocol_errors, s.query_buffer_full, s.reply_dropped
            );
            (last, last_problems) = (Instant::now(), problems);
        }
        if REPORT.load(Ordering::Relaxed) && REPORT.swap(false, Ordering::Relaxed) {
            println!("{}", s.to_json_line());
        }
        !STOP.load(Ordering::Relaxed)
    })
    .map_err(|e| format!("RESP server failed: {e}"))?;
    eprintln!("kv-server: stopped after {} commands", stats.commands);
    println!("{}", stats.to_json_line());
    Ok(())
}

/// RESP on `dp` and the Cornflakes format on `kv_addr`, one store, one
/// loop; prints `READY <resp addr> <kv addr>`.
fn serve_both(mut dp: TcpDatapath, mut db: RespDb, kv_addr: &str, local: std::net::SocketAddr) -> Result<(), Error> {
    use cornflakes_datapath::Datapath;
    let addr = crate::transport::parse_tcp_addr(kv_addr)?;
    let pool = dp.pool().clone();
    let config =
        TcpConfig { pool: Some(pool.clone()), zero_copy_min: dp.config().zero_copy_min, ..TcpConfig::default() };
    let mut kv = TcpDatapath::bind(addr, config)
        .map_err(|e| Error::Failed(format!("cannot start the Cornflakes-format server on {addr}: {e}")))?;
    let kv_local = kv.local_addrs()[0];
    eprintln!("kv-server: and the Cornflakes format (hybrid, serialize-and-send) on tcp at {kv_local}, same store");
    println!("READY {local} {kv_local}");
    let codec = cornflakes_kv::codec::cornflakes::CornflakesServer::new(&pool, db.threshold(), true);
    let (resp_stats, kv_stats) =
        resp::serve_with_kv(&mut dp, &mut kv, codec, &mut db, &ServeOptions::default(), |s, k| {
            if REPORT.load(Ordering::Relaxed) && REPORT.swap(false, Ordering::Relaxed) {
                println!("{} {}", s.to_json_line(), k.to_json_line());
            }
            !STOP.load(Ordering::Relaxed)
        })
        .map_err(|e| format!("server failed: {e}"))?;
    eprintln!(
        "kv-server: stopped after {} RESP commands and {} Cornflakes requests",
        resp_stats.commands, kv_stats.handled
    );
    println!("{} {}", resp_stats.to_json_line(), kv_stats.to_json_line());
    Ok(())
}
