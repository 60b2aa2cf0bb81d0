//! `cf ipc-pingpong` and `cf ipc-compare`: round trips through iceoryx2
//! (the zero-copy IPC library a user would pick instead), request-response
//! between two processes pinned like `cf pingpong`'s, and side by side with
//! `cf pingpong --transport shm`, copied and received in place, in the same
//! run.
//!
//! The iceoryx2 server (`cf ipc-serve`, hidden) busy-polls its port and
//! answers each request with a response loaned from its own segment, the
//! request's bytes copied in; the client writes its payload into a loaned
//! request (one copy, as `push_buf` makes one) and checks every echoed byte
//! in place, in the server's segment.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use iceoryx2::prelude::*;
use serde::{Deserialize, Serialize};

use crate::child::ServerChild;
use crate::pingpong::{PingpongReport, IN_PLACE};
use crate::report::rounded;
use crate::Error;

/// A round trip that takes longer than this is reported as lost.
const LOST_AFTER: Duration = Duration::from_secs(2);

/// The payload sizes of issue 12, item 6a: 8 B, 2 KiB, 64 KiB and 1 MiB,
/// the last less 24 B: the shm datapath's largest message is 1 MiB - 16 B
/// with its 8-byte header (`ShmConfig::max_message`).
pub const DEFAULT_SIZES: [usize; 4] = [8, 2048, 64 << 10, (1 << 20) - 24];

/// Sizes from here on are measured with `large_iters` round trips.
pub const LARGE: usize = 64 << 10;

/// What `cf ipc-pingpong` runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Message size in bytes (at least 1).
    pub size: usize,
    /// Measured round trips.
    pub iters: u64,
    /// Unrecorded round trips first.
    pub warmup: u64,
    /// Core of the client (this process).
    pub client_core: usize,
    /// Core of the server process.
    pub server_core: usize,
}

fn iox<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> Error {
    move |e| Error::Failed(format!("iceoryx2: {what}: {e}"))
}

/// A node without iceoryx2's own signal handlers (Ctrl-C stops `cf` as
/// everywhere else) and with only its errors logged. Creating it removes
/// the shared memory of killed runs' nodes (iceoryx2's default
/// `cleanup_dead_nodes_on_creation`; checked by killing a run with -9).
fn node() -> Result<Node<ipc::Service>, Error> {
    set_log_level(LogLevel::Error);
    NodeBuilder::new()
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<ipc::Service>()
        .map_err(iox("cannot create a node"))
}

/// A service name no other run uses.
fn service_name() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("cornflakes/ipc-pingpong/{}/{nanos}", std::process::id())
}

/// Server of `cf ipc-pingpong`: creates the request-response service
/// `service` for messages up to `max_size` bytes, prints `READY <service>`,
/// and echoes every request until the parent closes standard input; then
/// drops its ports and node, so iceoryx2 removes the shared memory.
///
/// # Errors
///
/// When the service cannot be created or a port fails.
pub fn serve(service: &str, max_size: usize, core: Option<usize>) -> Result<(), Error> {
    static STOP: AtomicBool = AtomicBool::new(false);
    static REPORT: AtomicBool = AtomicBool::new(false);
    crate::child::control_from_parent(&STOP, &REPORT, || {});
    if let Some(core) = core {
        crate::pin::pin_to_core(core)?;
    }
    if max_size == 0 {
        return Err(Error::Invalid("--max-size must be at least 1".into()));
    }
    let node = node()?;
    let name: ServiceName = service.try_into().map_err(iox("bad service name"))?;
    // One client, one request in flight: small limits keep the segments
    // (max_size bytes per sample) small.
    let service = node
        .service_builder(&name)
        .request_response::<[u8], [u8]>()
        .max_clients(2)
        .max_servers(1)
        .max_nodes(4)
        .max_active_requests_per_client(2)
        .max_response_buffer_size(2)
        .max_loaned_requests(2)
        .create()
        .map_err(iox("cannot create the service"))?;
    let server = service
        .server_builder()
        .initial_max_slice_len(max_size)
        .create()
        .map_err(iox("cannot create the server port"))?;
    println!("READY {}", name.as_str());
    while !STOP.load(Ordering::Relaxed) {
        match server.receive().map_err(iox("receive failed"))? {
            Some(request) => {
                let response =
                    request.loan_slice_uninit(request.payload().len()).map_err(iox("cannot loan a response"))?;
                let response = response.write_from_slice(request.payload());
                response.send().map_err(iox("cannot send a response"))?;
            }
            // Busy-polls, as the shm server does while requests come.
            None => std::hint::spin_loop(),
        }
    }
    Ok(())
}

/// Starts the iceoryx2 server on `server_core`, measures `iters` round
/// trips here (every echoed byte checked), and returns them in the shape
/// of `cf pingpong`'s report (`transport` is `iceoryx2`).
///
/// # Errors
///
/// When the server does not start, or a response is wrong or missing.
pub fn measure(args: &Config) -> Result<PingpongReport, Error> {
    if args.size == 0 {
        return Err(Error::Invalid("--size must be at least 1".into()));
    }
    let service_name = service_name();
    let serve_args = vec![
        "--core".to_owned(),
        args.server_core.to_string(),
        "--service".to_owned(),
        service_name.clone(),
        "--max-size".to_owned(),
        args.size.to_string(),
    ];
    let started = Instant::now();
    let mut server = ServerChild::spawn_subcommand("ipc-serve", &serve_args)?;
    crate::pin::pin_to_core(args.client_core)?;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds");
    {
        let node = node()?;
        let name: ServiceName = server.addr.as_str().try_into().map_err(iox("bad service name"))?;
        let service = node
            .service_builder(&name)
            .request_response::<[u8], [u8]>()
            .open()
            .map_err(iox("cannot open the server's service"))?;
        let client = service
            .client_builder()
            .initial_max_slice_len(args.size)
            .create()
            .map_err(iox("cannot create the client port"))?;
        client_loop(&client, args, &mut hist)?;
    }
    // Lets the server drop its segments before this returns.
    server.finish();
    let secs = started.elapsed().as_secs_f64();
    let q = |p: f64| hist.value_at_quantile(p);
    Ok(PingpongReport {
        transport: "iceoryx2".to_owned(),
        size: args.size,
        p50_ns: q(0.5),
        p99_ns: q(0.99),
        p999_ns: q(0.999),
        mean_ns: rounded(hist.mean(), 1),
        max_ns: hist.max(),
        round_trips: hist.len(),
        seconds: rounded(secs, 3),
        std_tcp_p50_ns: None,
    })
}

type Client = iceoryx2::port::client::Client<ipc::Service, [u8], (), [u8], ()>;

fn client_loop(client: &Client, args: &Config, hist: &mut Histogram<u64>) -> Result<(), Error> {
    // Distinct bytes per position, and the round trip's number in the
    // first (up to) 8, so an echo of an earlier request fails the check.
    let mut payload: Vec<u8> = (0..args.size).map(|i| (i * 31 + 7) as u8).collect();
    let stamp = args.size.min(8);
    for i in 0..args.warmup + args.iters {
        payload[..stamp].copy_from_slice(&i.to_le_bytes()[..stamp]);
        let start = Instant::now();
        let request = client.loan_slice_uninit(args.size).map_err(iox("cannot loan a request"))?;
        let pending = request.write_from_slice(&payload).send().map_err(iox("cannot send a request"))?;
        let mut polls = 0u32;
        let response = loop {
            if let Some(r) = pending.receive().map_err(iox("receive failed"))? {
                break r;
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(4096) && start.elapsed() > LOST_AFTER {
                return Err(Error::Failed(format!(
                    "no response to round trip {i} within {LOST_AFTER:?} (server connections: {})",
                    pending.number_of_server_connections()
                )));
            }
            std::hint::spin_loop();
        };
        let ok = *response.payload() == payload[..];
        let rtt = start.elapsed();
        if !ok {
            return Err(Error::Failed(format!(
                "wrong response to round trip {i}: {} bytes, expected {} bytes",
                response.payload().len(),
                payload.len()
            )));
        }
        drop(response);
        drop(pending);
        if i >= args.warmup {
            hist.record(rtt.as_nanos() as u64).expect("within histogram bounds");
        }
    }
    Ok(())
}

/// `cf ipc-pingpong`: [`measure`], printed like `cf pingpong` (a summary,
/// then the report as the last line of standard output).
///
/// # Errors
///
/// As [`measure`].
pub fn run(args: &Config) -> Result<(), Error> {
    eprintln!(
        "iceoryx2 request-response with {} B messages: {} round trips after {} warm-up (client core {}, server core {})",
        args.size, args.iters, args.warmup, args.client_core, args.server_core
    );
    let r = measure(args)?;
    println!(
        "round trip: p50 {} ns, p99 {} ns, p99.9 {} ns, mean {:.0} ns, max {} ns ({} round trips)",
        r.p50_ns,
        r.p99_ns,
        r.p999_ns,
        r.mean_ns.unwrap_or(0.0),
        r.max_ns,
        r.round_trips
    );
    println!("{}", serde_json::to_string(&r).expect("reports serialize"));
    Ok(())
}

/// What `cf ipc-compare` runs.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    /// Message sizes, bytes.
    pub sizes: Vec<usize>,
    /// Measured round trips per run below [`LARGE`] bytes.
    pub iters: u64,
    /// Measured round trips per run from [`LARGE`] bytes on.
    pub large_iters: u64,
    /// Unrecorded round trips first, per run (a tenth of that from
    /// [`LARGE`] bytes on).
    pub warmup: u64,
    /// Runs of each system at each size, alternating which goes first.
    pub repeats: u32,
    /// Core of the clients.
    pub client_core: usize,
    /// Core of the servers.
    pub server_core: usize,
}

/// One size of `cf ipc-compare`: medians over the repeats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    /// Message size, bytes.
    pub size: usize,
    /// iceoryx2's median p50 round trip, ns.
    pub iceoryx2_p50_ns: u64,
    /// iceoryx2's median p99 round trip, ns.
    pub iceoryx2_p99_ns: u64,
    /// `cf pingpong --transport shm`'s median p50 round trip, ns.
    pub shm_p50_ns: u64,
    /// Its median p99, ns.
    pub shm_p99_ns: u64,
    /// shm p50 / iceoryx2 p50 (below 1: ours is faster).
    pub p50_ratio: f64,
    /// shm p99 / iceoryx2 p99.
    pub p99_ratio: f64,
    /// `cf pingpong --transport shm --in-place`'s median p50 round trip, ns.
    pub in_place_p50_ns: u64,
    /// Its median p99, ns.
    pub in_place_p99_ns: u64,
    /// shm in place p50 / iceoryx2 p50.
    pub in_place_p50_ratio: f64,
    /// shm in place p99 / iceoryx2 p99.
    pub in_place_p99_ratio: f64,
    /// Every run's report, in the order run.
    pub runs: Vec<PingpongReport>,
}

/// The systems of `cf ipc-compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum System {
    Iceoryx2,
    Shm,
    /// `cf pingpong --transport shm --in-place`.
    ShmInPlace,
}

/// The order of repeat `r`: each system goes first in turn.
fn order(r: u32) -> [System; 3] {
    let mut systems = [System::Iceoryx2, System::Shm, System::ShmInPlace];
    systems.rotate_left(r as usize % 3);
    systems
}

/// Runs one system at one size in its own `cf` process (so each run pins
/// and cleans up by itself) and reads the report on its last line:
/// `cf pingpong --transport shm` or `cf ipc-pingpong`.
fn run_child(system: System, size: usize, cfg: &CompareConfig) -> Result<PingpongReport, Error> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the cf binary: {e}"))?;
    let mut cmd = Command::new(exe);
    match system {
        System::Shm => cmd.args(["pingpong", "--transport", "shm"]),
        System::ShmInPlace => cmd.args(["pingpong", "--transport", "shm", "--in-place"]),
        System::Iceoryx2 => cmd.arg("ipc-pingpong"),
    };
    let (iters, warmup) = if size >= LARGE { (cfg.large_iters, cfg.warmup / 10) } else { (cfg.iters, cfg.warmup) };
    let out = cmd
        .args(["--size", &size.to_string(), "--iters", &iters.to_string(), "--warmup", &warmup.to_string()])
        .args(["--client-core", &cfg.client_core.to_string(), "--server-core", &cfg.server_core.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start a cf process: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(Error::Failed(format!("the {system:?} run at {size} B failed ({}): {stdout}", out.status)));
    }
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last)
        .map_err(|e| Error::Failed(format!("the {system:?} run printed no report ({e}): {last:?}")))
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    match v.len() {
        0 => 0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2,
    }
}

/// `cf ipc-compare`: for each size, `repeats` runs of iceoryx2, of
/// `cf pingpong --transport shm` and of the same `--in-place`, each going
/// first in turn; prints a
/// line per run, then a table of median p50/p99 and shm / iceoryx2, then
/// the rows as JSON (the last line).
///
/// # Errors
///
/// When a run fails (a wrong or missing response fails it).
pub fn compare(cfg: &CompareConfig) -> Result<Vec<CompareRow>, Error> {
    if cfg.sizes.is_empty() || cfg.sizes.contains(&0) {
        return Err(Error::Invalid("--sizes must list sizes of at least 1 byte".into()));
    }
    if cfg.repeats == 0 {
        return Err(Error::Invalid("--repeats must be at least 1".into()));
    }
    let total = cfg.sizes.len() * 3 * cfg.repeats as usize;
    let mut done = 0;
    let mut rows = Vec::new();
    for &size in &cfg.sizes {
        let mut runs = Vec::new();
        for r in 0..cfg.repeats {
            for system in order(r) {
                let report = run_child(system, size, cfg)?;
                done += 1;
                eprintln!(
                    "[{done}/{total}] {:<12} {size:>8} B  repeat {}: p50 {} ns, p99 {} ns, p99.9 {} ns",
                    report.transport,
                    r + 1,
                    report.p50_ns,
                    report.p99_ns,
                    report.p999_ns
                );
                runs.push(report);
            }
        }
        let of = |name: &str, f: fn(&PingpongReport) -> u64| {
            median(runs.iter().filter(|r| r.transport == name).map(f).collect())
        };
        let (i50, i99) = (of("iceoryx2", |r| r.p50_ns), of("iceoryx2", |r| r.p99_ns));
        let (s50, s99) = (of("shm", |r| r.p50_ns), of("shm", |r| r.p99_ns));
        let (p50, p99) = (of(IN_PLACE, |r| r.p50_ns), of(IN_PLACE, |r| r.p99_ns));
        let ratio = |a: u64, b: u64| rounded(a as f64 / b.max(1) as f64, 3).unwrap_or(0.0);
        rows.push(CompareRow {
            size,
            iceoryx2_p50_ns: i50,
            iceoryx2_p99_ns: i99,
            shm_p50_ns: s50,
            shm_p99_ns: s99,
            p50_ratio: ratio(s50, i50),
            p99_ratio: ratio(s99, i99),
            in_place_p50_ns: p50,
            in_place_p99_ns: p99,
            in_place_p50_ratio: ratio(p50, i50),
            in_place_p99_ratio: ratio(p99, i99),
            runs,
        });
    }
    println!(
        "round trip, median of {} runs each (client core {}, server core {}; ratios are / iceoryx2, below 1: ours is faster; \
         in place: received in place, 512 B and more by descriptor)",
        cfg.repeats, cfg.client_core, cfg.server_core
    );
    println!(
        "{:>9} | {:>13} {:>13} | {:>13} {:>13} {:>6} {:>6} | {:>13} {:>13} {:>6} {:>6}",
        "size",
        "iceoryx2 p50",
        "iceoryx2 p99",
        "shm p50",
        "shm p99",
        "p50 x",
        "p99 x",
        "in place p50",
        "in place p99",
        "p50 x",
        "p99 x"
    );
    for r in &rows {
        println!(
            "{:>9} | {:>10} ns {:>10} ns | {:>10} ns {:>10} ns {:>6.2} {:>6.2} | {:>10} ns {:>10} ns {:>6.2} {:>6.2}",
            r.size,
            r.iceoryx2_p50_ns,
            r.iceoryx2_p99_ns,
            r.shm_p50_ns,
            r.shm_p99_ns,
            r.p50_ratio,
            r.p99_ratio,
            r.in_place_p50_ns,
            r.in_place_p99_ns,
            r.in_place_p50_ratio,
            r.in_place_p99_ratio
        );
    }
    println!("{}", serde_json::to_string(&rows).expect("rows serialize"));
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::{median, order, System};

    #[test]
    fn each_system_goes_first_in_turn() {
        let firsts: Vec<System> = (0..3).map(|r| order(r)[0]).collect();
        assert_eq!(firsts, [System::Iceoryx2, System::Shm, System::ShmInPlace]);
        assert_eq!(order(3), order(0));
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(vec![5, 1, 3]), 3);
        assert_eq!(median(vec![4, 1, 3, 2]), 2);
        assert_eq!(median(vec![]), 0);
    }
}
