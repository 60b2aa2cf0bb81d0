//! `cf zc-probe`: plain `SENDMSG` against `SENDMSG_ZC` over the tcp
//! datapath for segment sizes of 1 KiB to 1 MiB, on loopback (a discard
//! sink in this process, on the server core) or to a `cf zc-sink` at
//! `--addr` (across the namespaces: see the command's help), and the
//! `zero_copy_min` the measurements imply. The measuring and the choice are
//! [`TcpDatapath::probe_zero_copy`]'s (see its module docs); this prints
//! them.

use std::net::SocketAddr;
use std::time::Duration;

use cornflakes_datapath::tcp::{DiscardSink, TcpConfig, TcpDatapath, ZcProbe, PROBE_SIZES};

use crate::bulk::load_average;
use crate::pin::pin_to_core;
use crate::Error;

/// Settings of `cf zc-probe`.
#[derive(Clone, Debug)]
pub struct Config {
    /// A `cf zc-sink` to send to; `None`: a sink on loopback in this process.
    pub addr: Option<SocketAddr>,
    /// Time per size and mode.
    pub per_size: Duration,
    /// Core of the local sink.
    pub server_core: usize,
    /// Core of the sender.
    pub client_core: usize,
}

/// Runs the probe and prints the table, the break-even and the choice;
/// the last line is a JSON object.
///
/// # Errors
///
/// [`Error::Failed`] when the sink cannot be reached or a send fails.
pub fn run(config: &Config) -> Result<ZcProbe, Error> {
    let load_before = load_average();
    let local = match config.addr {
        Some(_) => None,
        None => {
            let core = config.server_core;
            // The sink's threads inherit the core of the thread that spawns them.
            let sink = std::thread::spawn(move || {
                pin_to_core(core)?;
                DiscardSink::spawn("127.0.0.1:0".parse().expect("an address"))
                    .map_err(|e| Error::Failed(format!("cannot start the discard sink: {e}")))
            })
            .join()
            .map_err(|_| Error::Failed("the sink thread panicked".into()))??;
            Some(sink)
        }
    };
    let addr = config.addr.or(local.as_ref().map(DiscardSink::addr)).expect("one of the two");
    pin_to_core(config.client_core)?;
    println!(
        "cf zc-probe: SENDMSG vs SENDMSG_ZC to {addr}{}, {} ms per size and mode, sender on core {}; load average {load_before}",
        if local.is_some() { " (discard sink in this process)" } else { "" },
        config.per_size.as_millis(),
        config.client_core
    );
    let mut dp = TcpDatapath::new(TcpConfig::default()).map_err(|e| Error::Failed(e.to_string()))?;
    let probe = dp.probe_zero_copy(addr, &PROBE_SIZES, config.per_size).map_err(|e| Error::Failed(e.to_string()))?;
    println!(
        "{:>9} {:>11} {:>11} {:>15} {:>15} {:>14}",
        "segment", "plain GB/s", "zc GB/s", "plain ns/KiB", "zc ns/KiB", "zc copied"
    );
    for r in &probe.rows {
        println!(
            "{:>9} {:>11.2} {:>11.2} {:>15.0} {:>15.0} {:>9}/{:<5}",
            r.size, r.plain_gbps, r.zc_gbps, r.plain_ns_per_kib, r.zc_ns_per_kib, r.copied, r.notifications
        );
    }
    let chosen = if probe.chosen == usize::MAX { "never (usize::MAX)".to_string() } else { probe.chosen.to_string() };
    println!(
        "break-even: {}; zero_copy_min would be {chosen}: {} (load average after: {})",
        probe.break_even.map_or("none".to_string(), |b| format!("{b} B")),
        probe.reason(),
        load_average()
    );
    let json = serde_json::json!({
        "benchmark": "zc-probe",
        "sink": addr.to_string(),
        "supported": probe.supported,
        "kernel_copies": probe.kernel_copies,
        "break_even": probe.break_even,
        "zero_copy_min": if probe.chosen == usize::MAX { None } else { Some(probe.chosen) },
        "rows": probe.rows.iter().map(|r| serde_json::json!({
            "size": r.size, "plain_gbps": r.plain_gbps, "zc_gbps": r.zc_gbps,
            "plain_ns_per_kib": r.plain_ns_per_kib, "zc_ns_per_kib": r.zc_ns_per_kib,
            "notifications": r.notifications, "copied": r.copied,
        })).collect::<Vec<_>>(),
    });
    println!("{json}");
    Ok(probe)
}

/// `cf zc-sink`: reads and discards on `addr` until killed.
///
/// # Errors
///
/// [`Error::Failed`] when binding fails.
pub fn sink(addr: SocketAddr) -> Result<(), Error> {
    let sink = DiscardSink::spawn(addr).map_err(|e| Error::Failed(format!("cannot listen on {addr}: {e}")))?;
    println!("zc-sink: discarding on {}", sink.addr());
    sink.serve_forever();
    Ok(())
}
