//! `cf stall`: does one client that stops reading slow down the others?
//!
//! Starts the key-value server, then alternates, `repeats` times, two load
//! points at the same offered rate: the load generator alone, and the load
//! generator while `stalled` more clients are connected that have each sent
//! `stall_requests` gets and never read a response. Prints each pair and
//! the medians, with the ratios a server that isolates its clients keeps
//! near 1 (issue 10's target: throughput >= 0.9x, p99 <= 2x).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use cornflakes_datapath::{ConnId, Datapath, SendError};
use cornflakes_kv::codec::cornflakes::{CornflakesClient, RawEchoClient};
use cornflakes_kv::codec::{capnp::CapnpClient, flatbuffers::FlatbuffersClient, prost::ProstClient, rkyv::RkyvClient};
use cornflakes_kv::{ClientCodec, Op, Request, ServerStats, System};
use cornflakes_workloads::{Workload, WorkloadSpec};

use crate::child::{KvServer, ServerChild, ServerPlace};
use crate::loadgen::{run_point, LoadConfig, PointResult};
use crate::transport::{Target, Transport};
use crate::Error;

/// What `cf stall` runs.
#[derive(Clone, Debug)]
pub struct StallConfig {
    /// Serializer.
    pub system: System,
    /// Workload the server preloads and the load generator runs.
    pub workload: WorkloadSpec,
    /// Datapath.
    pub transport: Transport,
    /// The load point (its `rate` must be set).
    pub point: LoadConfig,
    /// Clients that send and never read, during the second point of a pair.
    pub stalled: usize,
    /// Gets each of them sends.
    pub stall_requests: usize,
    /// Pairs of points.
    pub repeats: usize,
    /// Core of the server.
    pub server_core: usize,
    /// Core of the clients.
    pub client_core: usize,
}

/// Runs the pairs and prints them and their medians.
///
/// # Errors
///
/// [`Error::Invalid`] without a rate or with zero repeats; [`Error::Failed`]
/// when the server or a client fails.
pub fn run(cfg: &StallConfig) -> Result<(), Error> {
    if cfg.point.rate.is_none() || cfg.repeats == 0 {
        return Err(Error::Invalid("cf stall needs --rate and at least one repeat".into()));
    }
    let workload = cfg.workload.build().map_err(|e| Error::Invalid(e.to_string()))?;
    let addr = crate::transport::local_server_addr(cfg.transport);
    eprintln!("stall: starting the {} server ({}, {})", cfg.system.name(), cfg.transport.name(), workload.name());
    let place = ServerPlace { transport: cfg.transport, addr: &addr, prefix: &[], server_core: cfg.server_core };
    let mut server = KvServer::start(&place, cfg.system, &cfg.workload, &[])?;
    let target = Target::new(cfg.transport, &server.addr)?;
    let counters = |server: &mut ServerChild| server.report().ok().and_then(|l| ServerStats::from_json_line(&l));
    let mut alone = Vec::new();
    let mut stalled = Vec::new();
    let mut dropped = 0;
    for r in 0..cfg.repeats {
        let point = LoadConfig { seed: cfg.point.seed.wrapping_add(r as u64), ..cfg.point.clone() };
        let a = run_point(&target, cfg.system, workload.as_ref(), &point, Some(cfg.client_core))?;
        eprintln!("[{}/{}] alone:        {}", r + 1, cfg.repeats, describe(&a));
        let before = counters(&mut server);
        let stall =
            Stall::start(&target, cfg.system, workload.as_ref(), cfg.stalled, cfg.stall_requests, cfg.client_core)?;
        let s = run_point(&target, cfg.system, workload.as_ref(), &point, Some(cfg.client_core))?;
        let after = counters(&mut server);
        drop(stall);
        let d = match (before, after) {
            (Some(b), Some(a)) => a.since(&b).dropped_full,
            _ => 0,
        };
        dropped += d;
        eprintln!(
            "[{}/{}] with {} stalled: {} ({d} responses dropped by the server)",
            r + 1,
            cfg.repeats,
            cfg.stalled,
            describe(&s)
        );
        alone.push(a);
        stalled.push(s);
    }
    drop(server);
    let med = |v: &[PointResult], f: fn(&PointResult) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(f64::total_cmp);
        x[x.len() / 2]
    };
    let (ta, ts) = (med(&alone, |p| p.achieved), med(&stalled, |p| p.achieved));
    let (pa, ps) = (med(&alone, |p| p.p99_us), med(&stalled, |p| p.p99_us));
    println!(
        "{} on {}, {} at {:.0}/s offered, {} pairs (medians):",
        cfg.system.name(),
        cfg.transport.name(),
        workload.name(),
        cfg.point.rate.unwrap_or(0.0),
        cfg.repeats
    );
    println!("  alone:           {ta:>10.0}/s  p50 {:>8.1} us  p99 {pa:>8.1} us", med(&alone, |p| p.p50_us));
    println!(
        "  with {} stalled:  {ts:>10.0}/s  p50 {:>8.1} us  p99 {ps:>8.1} us  ({dropped} responses to stalled clients dropped)",
        cfg.stalled,
        med(&stalled, |p| p.p50_us)
    );
    println!(
        "  ratios: throughput {:.3}x (target >= 0.9), p99 {:.2}x (target <= 2)",
        ts / ta.max(f64::MIN_POSITIVE),
        ps / pa.max(f64::MIN_POSITIVE)
    );
    Ok(())
}

fn describe(p: &PointResult) -> String {
    format!(
        "{:.0}/s, p50 {:.1} us, p99 {:.1} us, {} errors, {} timeouts",
        p.achieved, p.p50_us, p.p99_us, p.errors, p.timeouts
    )
}

/// Clients that have sent their requests and hold their connections open
/// without reading, until dropped.
struct Stall {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Stall {
    /// Starts `n` stalled clients and returns once each has sent
    /// `requests` gets (or met a backlog it cannot pass for a second).
    fn start(
        target: &Target,
        system: System,
        workload: &dyn Workload,
        n: usize,
        requests: usize,
        core: usize,
    ) -> Result<Self, Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<usize, String>>();
        let mut keys = Vec::new();
        for i in 0..workload.num_keys().min(1024) {
            let mut k = Vec::new();
            workload.key(i, &mut k);
            keys.push(k);
        }
        let keys = Arc::new(keys);
        let threads = (0..n)
            .map(|_| {
                let (target, stop, ready, keys) = (target.clone(), stop.clone(), ready_tx.clone(), keys.clone());
                std::thread::spawn(move || {
                    let _ = crate::pin::pin_to_core(core);
                    let r = match &target {
                        Target::Shm(path) => crate::transport::shm_client(path)
                            .map_err(|e| e.to_string())
                            .map(|(dp, conn)| stalled_client(dp, conn, system, &keys, requests, &ready, &stop)),
                        Target::Udp(addr) => crate::transport::udp_client(*addr)
                            .map_err(|e| e.to_string())
                            .map(|(dp, conn)| stalled_client(dp, conn, system, &keys, requests, &ready, &stop)),
                        Target::Tcp(addr) => crate::transport::tcp_client(*addr)
                            .map_err(|e| e.to_string())
                            .map(|(dp, conn)| stalled_client(dp, conn, system, &keys, requests, &ready, &stop)),
                    };
                    if let Err(e) = r {
                        let _ = ready.send(Err(e));
                    }
                })
            })
            .collect();
        let stall = Stall { stop, threads };
        for _ in 0..n {
            match ready_rx.recv_timeout(Duration::from_secs(30)) {
                Ok(Ok(sent)) if sent < requests => {
                    eprintln!("stall: a stalled client got {sent} of {requests} requests out (the server took no more)")
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(Error::Failed(format!("a stalled client failed: {e}"))),
                Err(_) => return Err(Error::Failed("a stalled client did not get its requests out in 30 s".into())),
            }
        }
        Ok(stall)
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Sends `requests` get-lists round-robin over `keys`, reports how many went
/// out, then holds the connection without reading until `stop`.
fn stalled_client<D: Datapath>(
    mut dp: D,
    conn: ConnId,
    system: System,
    keys: &[Vec<u8>],
    requests: usize,
    ready: &mpsc::Sender<Result<usize, String>>,
    stop: &AtomicBool,
) {
    let pool = dp.scratch_pool().clone();
    let sent = match system {
        System::Cornflakes | System::CornflakesOnlySg | System::CornflakesOnlyCopy | System::CornflakesNoSas => {
            send_gets(&mut dp, conn, &mut CornflakesClient::new(&pool), keys, requests)
        }
        System::Raw => send_gets(&mut dp, conn, &mut RawEchoClient::new(&pool), keys, requests),
        System::Protobuf | System::TokioProst => send_gets(&mut dp, conn, &mut ProstClient::new(&pool), keys, requests),
        System::Flatbuffers => send_gets(&mut dp, conn, &mut FlatbuffersClient::new(&pool), keys, requests),
        System::Capnp => send_gets(&mut dp, conn, &mut CapnpClient::new(&pool), keys, requests),
        System::Rkyv => send_gets(&mut dp, conn, &mut RkyvClient::new(&pool), keys, requests),
        System::CornflakesProtobuf => {
            send_gets(&mut dp, conn, &mut cornflakes_kv::codec::protowire::ProtowireClient::new(&pool), keys, requests)
        }
    };
    let _ = ready.send(sent);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn send_gets<D: Datapath, C: ClientCodec>(
    dp: &mut D,
    conn: ConnId,
    codec: &mut C,
    keys: &[Vec<u8>],
    requests: usize,
) -> Result<usize, String> {
    for i in 0..requests {
        let key = &keys[i % keys.len()];
        // GetList answers with every element of any key: the largest
        // responses the workload has.
        let req =
            Request { op: Op::GetList as u32, keys: std::iter::once(key.as_slice()).collect(), ..Request::default() };
        let since = Instant::now();
        loop {
            match codec.send_request(dp, conn, i as u32, &req) {
                Ok(()) => break,
                // Our own requests wait for the server to take them in.
                Err(SendError::Full | SendError::Backlogged(_)) if since.elapsed() < Duration::from_secs(1) => {
                    let _ = dp.flush();
                    let _ = dp.poll_completions();
                }
                Err(SendError::Full | SendError::Backlogged(_)) => return Ok(i),
                Err(e) => return Err(e.to_string()),
            }
        }
        codec.end_batch();
    }
    dp.flush().map_err(|e| e.to_string())?;
    Ok(requests)
}
