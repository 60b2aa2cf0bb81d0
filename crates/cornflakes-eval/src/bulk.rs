//! `cf bulk`: one-way throughput of large messages (16 MiB by default) over
//! the tcp datapath on loopback, side by side with what a plain program
//! would do: a blocking `std::net` `write_all` / `read_exact` loop of the
//! same frames.
//!
//! Each run has a receiver thread pinned to the server core and a sender
//! thread pinned to the client core, one connection, for `seconds`; the two
//! systems alternate, `repeats` times, and the medians are compared.
//!
//! **What is checked.** Every message's id (its sequence number), its
//! length, and every byte of it: message `k` is the pattern of seed
//! `k % 4` (64-bit words `seed * φ ^ index`), so a byte lost, moved, or
//! taken from another message fails the run. The same check runs in both
//! systems, so it costs both the same (one read of the message).
//!
//! **What is timed.** From the first message received to the last one
//! received in the window; bytes are the messages after the first.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use cornflakes::mem::HugePages;
use cornflakes::{PoolConfig, RcBuf};
pub use cornflakes_datapath::tcp::RecvMode;
use cornflakes_datapath::tcp::{TcpConfig, TcpDatapath};
use cornflakes_datapath::{Datapath, RecvError, Segment, SendError, PACKET_HEADER_LEN};

use crate::pin::pin_to_core;
use crate::Error;

/// Settings of `cf bulk`.
#[derive(Clone, Debug)]
pub struct Config {
    /// Bytes per message.
    pub size: usize,
    /// Length of each run.
    pub seconds: f64,
    /// Runs of each system.
    pub repeats: usize,
    /// Core of the receiver.
    pub server_core: usize,
    /// Core of the sender.
    pub client_core: usize,
    /// How the tcp datapath's receiver receives.
    pub recv_mode: RecvMode,
}

/// One run's outcome.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    /// Messages received and checked in the window (after the first).
    pub messages: u64,
    /// Payload bytes of those messages.
    pub bytes: u64,
    /// Time from the first to the last message of the window.
    pub elapsed: Duration,
}

impl Run {
    /// Payload throughput, 10^9 bytes per second.
    pub fn gb_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9) / 1e9
    }
}

/// Both systems' runs, in the order measured.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The tcp datapath.
    pub datapath: Vec<Run>,
    /// Blocking `std::net` write/read.
    pub blocking: Vec<Run>,
}

/// Patterns that messages cycle through.
const VARIANTS: u64 = 4;

#[inline(always)]
fn word(seed: u64, index: u64) -> u64 {
    seed.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index
}

/// Writes the pattern of `seed` into `buf`.
fn fill(buf: &mut [u8], seed: u64) {
    let mut words = buf.chunks_exact_mut(8);
    for (i, w) in (&mut words).enumerate() {
        w.copy_from_slice(&word(seed, i as u64).to_le_bytes());
    }
    let n = (buf.len() / 8) as u64;
    let tail = buf.len() % 8;
    let last = word(seed, n).to_le_bytes();
    let len = buf.len();
    buf[len - tail..].copy_from_slice(&last[..tail]);
}

/// Whether `buf` holds the pattern of `seed`: one pass, no early exit, so
/// that it vectorizes.
fn holds_pattern(buf: &[u8], seed: u64) -> bool {
    let mut words = buf.chunks_exact(8);
    let mut diff = 0u64;
    for (i, w) in (&mut words).enumerate() {
        let got = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        diff |= got ^ word(seed, i as u64);
    }
    let last = word(seed, (buf.len() / 8) as u64).to_le_bytes();
    diff == 0 && words.remainder() == &last[..words.remainder().len()]
}

fn check(seq: u64, msg_id: u32, payload: &[u8], size: usize) -> Result<(), Error> {
    if msg_id != seq as u32 {
        return Err(Error::Failed(format!("message {seq} arrived with id {msg_id}")));
    }
    if payload.len() != size {
        return Err(Error::Failed(format!("message {seq}: {} bytes, expected {size}", payload.len())));
    }
    if !holds_pattern(payload, seq % VARIANTS) {
        return Err(Error::Failed(format!("message {seq}: bytes differ from what was sent")));
    }
    Ok(())
}

/// Counts the window: started by the first message, closed after
/// `seconds`.
struct Window {
    seconds: f64,
    first: Option<Instant>,
    last: Instant,
    messages: u64,
    done: bool,
}

impl Window {
    fn new(seconds: f64) -> Self {
        Self { seconds, first: None, last: Instant::now(), messages: 0, done: false }
    }

    /// Records one message; true once the window is over.
    fn record(&mut self) -> bool {
        let now = Instant::now();
        if self.done {
            return true;
        }
        match self.first {
            None => self.first = Some(now),
            Some(first) => {
                self.messages += 1;
                self.last = now;
                self.done = (now - first).as_secs_f64() >= self.seconds;
            }
        }
        self.done
    }

    fn run(&self, size: usize) -> Run {
        let elapsed = self.first.map_or(Duration::ZERO, |f| self.last - f);
        Run { messages: self.messages, bytes: self.messages * size as u64, elapsed }
    }
}

fn tcp_config(size: usize, recv_mode: RecvMode) -> TcpConfig {
    TcpConfig {
        recv_mode,
        pool_config: PoolConfig { max_bytes: 4 << 30, hugepages: HugePages::Auto, lock: false },
        max_message: size.max(cornflakes_datapath::tcp::MAX_TCP_MESSAGE),
        // Four messages queued keep the socket busy while one is sent.
        max_queued_bytes: 4 * (size + PACKET_HEADER_LEN),
        ..TcpConfig::loopback()
    }
}

fn failed(what: &str) -> impl Fn(String) -> Error + '_ {
    move |e| Error::Failed(format!("{what}: {e}"))
}

/// One run over the tcp datapath.
fn datapath_run(config: &Config) -> Result<Run, Error> {
    let size = config.size;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let (server_core, seconds, recv_mode) = (config.server_core, config.seconds, config.recv_mode);
    let stop_rx = stop.clone();
    let receiver = std::thread::spawn(move || -> Result<Run, Error> {
        pin_to_core(server_core)?;
        let mut dp = TcpDatapath::bind("127.0.0.1:0".parse().expect("an address"), tcp_config(size, recv_mode))
            .map_err(|e| failed("receiver")(e.to_string()))?;
        tx.send(dp.local_addrs()[0]).map_err(|e| failed("receiver")(e.to_string()))?;
        let (mut window, mut seq, mut out) = (Window::new(seconds), 0u64, Vec::new());
        loop {
            out.clear();
            match dp.recv_batch(&mut out, 16) {
                Ok(0) => {
                    dp.wait(Duration::from_millis(10)).map_err(|e| failed("receiver")(e.to_string()))?;
                }
                Ok(_) => {
                    for r in &out {
                        check(seq, r.msg_id, &r.payload, size)?;
                        seq += 1;
                        if window.record() {
                            stop_rx.store(true, Ordering::Relaxed);
                        }
                    }
                }
                // The sender closes once it has stopped.
                Err(RecvError::Closed(_)) => break,
                Err(e) => return Err(failed("receiver")(e.to_string())),
            }
        }
        Ok(window.run(size))
    });
    let Ok(addr) = rx.recv() else {
        // The receiver stopped before listening: its error says why.
        let why = receiver.join().map_err(|_| Error::Failed("the receiver thread panicked".into()))?;
        return Err(why.err().unwrap_or_else(|| Error::Failed("the receiver did not start".into())));
    };
    let addr: SocketAddr = addr;
    let client_core = config.client_core;
    let sender = std::thread::spawn(move || -> Result<(), Error> {
        pin_to_core(client_core)?;
        let mut dp =
            TcpDatapath::new(tcp_config(size, RecvMode::Single)).map_err(|e| failed("sender")(e.to_string()))?;
        let conn = dp.connect(addr).map_err(|e| failed("sender")(e.to_string()))?;
        let messages: Vec<RcBuf> = (0..VARIANTS)
            .map(|seed| {
                let mut b = dp.pool().alloc(size).map_err(|e| failed("sender")(e.to_string()))?;
                fill(&mut b, seed);
                Ok(b.freeze())
            })
            .collect::<Result<_, Error>>()?;
        let mut seq = 0u64;
        let err = failed("sender");
        while !stop.load(Ordering::Relaxed) {
            let value = messages[(seq % VARIANTS) as usize].clone();
            match dp.push_segments(conn, seq as u32, &[Segment::ZeroCopy(value)]) {
                Ok(()) => {
                    seq += 1;
                    dp.flush().map_err(|e| err(e.to_string()))?;
                }
                Err(SendError::Backlogged(_)) => {
                    dp.flush().map_err(|e| err(e.to_string()))?;
                    dp.wait(Duration::from_micros(50)).map_err(|e| err(e.to_string()))?;
                    dp.poll_completions().map_err(|e| err(e.to_string()))?;
                }
                Err(e) => return Err(err(e.to_string())),
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while dp.in_flight() > 0 {
            if Instant::now() > deadline {
                return Err(err("messages still in flight 30 s after the run".into()));
            }
            dp.flush().map_err(|e| err(e.to_string()))?;
            dp.wait(Duration::from_micros(200)).map_err(|e| err(e.to_string()))?;
            dp.poll_completions().map_err(|e| err(e.to_string()))?;
        }
        Ok(())
    });
    let sent = sender.join().map_err(|_| Error::Failed("the sender thread panicked".into()))?;
    let received = receiver.join().map_err(|_| Error::Failed("the receiver thread panicked".into()))?;
    sent?;
    received
}

/// One run of blocking `write_all` / `read_exact` on `std::net` sockets.
fn blocking_run(config: &Config) -> Result<Run, Error> {
    let size = config.size;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| failed("blocking receiver")(e.to_string()))?;
    let addr = listener.local_addr().map_err(|e| failed("blocking receiver")(e.to_string()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_rx = stop.clone();
    let (server_core, seconds) = (config.server_core, config.seconds);
    let receiver = std::thread::spawn(move || -> Result<Run, Error> {
        pin_to_core(server_core)?;
        let err = failed("blocking receiver");
        let (mut s, _) = listener.accept().map_err(|e| err(e.to_string()))?;
        s.set_nodelay(true).map_err(|e| err(e.to_string()))?;
        let mut header = [0u8; PACKET_HEADER_LEN];
        let mut payload = vec![0u8; size];
        let (mut window, mut seq) = (Window::new(seconds), 0u64);
        loop {
            match s.read_exact(&mut header) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(err(e.to_string())),
            }
            let (id, len) = cornflakes_datapath::tcp::read_frame_header(&header).expect("8 bytes");
            if len != size {
                return Err(err(format!("message {seq} announces {len} bytes, expected {size}")));
            }
            s.read_exact(&mut payload).map_err(|e| err(e.to_string()))?;
            check(seq, id, &payload, size)?;
            seq += 1;
            if window.record() {
                stop_rx.store(true, Ordering::Relaxed);
            }
        }
        Ok(window.run(size))
    });
    let client_core = config.client_core;
    let sender = std::thread::spawn(move || -> Result<(), Error> {
        pin_to_core(client_core)?;
        let err = failed("blocking sender");
        let mut s = TcpStream::connect(addr).map_err(|e| err(e.to_string()))?;
        s.set_nodelay(true).map_err(|e| err(e.to_string()))?;
        // Header and payload in one buffer, one write_all per message, as
        // a plain program would frame them.
        let mut frames: Vec<Vec<u8>> = (0..VARIANTS)
            .map(|seed| {
                let mut f = vec![0u8; PACKET_HEADER_LEN + size];
                fill(&mut f[PACKET_HEADER_LEN..], seed);
                f
            })
            .collect();
        let mut seq = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let frame = &mut frames[(seq % VARIANTS) as usize];
            cornflakes_datapath::tcp::write_frame_header(frame, seq as u32, size);
            s.write_all(frame).map_err(|e| err(e.to_string()))?;
            seq += 1;
        }
        s.shutdown(Shutdown::Write).map_err(|e| err(e.to_string()))?;
        Ok(())
    });
    let sent = sender.join().map_err(|_| Error::Failed("the blocking sender panicked".into()))?;
    let received = receiver.join().map_err(|_| Error::Failed("the blocking receiver panicked".into()))?;
    sent?;
    received
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The median of `runs` by throughput.
pub fn median(runs: &[Run]) -> f64 {
    let mut v: Vec<f64> = runs.iter().map(Run::gb_per_s).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Runs `cf bulk` and prints the runs, the medians and a JSON line.
///
/// # Errors
///
/// [`Error::Invalid`] for a size of zero, above the frame limit, or fewer
/// than one repeat; [`Error::Failed`] when a run fails, including any
/// message that does not arrive exactly as sent.
pub fn run(config: &Config) -> Result<Report, Error> {
    if config.size == 0 || config.size > cornflakes_datapath::tcp::FRAME_MAX_MESSAGE {
        return Err(Error::Invalid(format!(
            "--size must be between 1 byte and {} bytes",
            cornflakes_datapath::tcp::FRAME_MAX_MESSAGE
        )));
    }
    if config.repeats == 0 || config.seconds.is_nan() || config.seconds <= 0.0 {
        return Err(Error::Invalid("--repeats and --seconds must be positive".into()));
    }
    let load_before = load_average();
    println!(
        "cf bulk: {} B messages one way over 127.0.0.1, {} s per run, {} repeats; receiver on core {}, sender on core {}; datapath receive mode {:?}",
        config.size, config.seconds, config.repeats, config.server_core, config.client_core, config.recv_mode
    );
    println!("every message's id, length and bytes are checked on receipt (both systems); load average {load_before}");
    let mut report = Report::default();
    for r in 1..=config.repeats {
        let d = datapath_run(config)?;
        println!(
            "run {r}/{}: tcp datapath         {:>6.2} GB/s ({} messages in {:.2} s)",
            config.repeats,
            d.gb_per_s(),
            d.messages,
            d.elapsed.as_secs_f64()
        );
        let b = blocking_run(config)?;
        println!(
            "run {r}/{}: std::net write/read  {:>6.2} GB/s ({} messages in {:.2} s)",
            config.repeats,
            b.gb_per_s(),
            b.messages,
            b.elapsed.as_secs_f64()
        );
        report.datapath.push(d);
        report.blocking.push(b);
    }
    let (d, b) = (median(&report.datapath), median(&report.blocking));
    let load_after = load_average();
    println!(
        "median of {}: tcp datapath {d:.2} GB/s, std::net write/read {b:.2} GB/s, ratio {:.2}x (load average after: {load_after})",
        config.repeats,
        d / b.max(1e-12)
    );
    let json = serde_json::json!({
        "benchmark": "bulk",
        "size": config.size,
        "seconds": config.seconds,
        "repeats": config.repeats,
        "recv_mode": format!("{:?}", config.recv_mode),
        "datapath_gbps": report.datapath.iter().map(Run::gb_per_s).collect::<Vec<_>>(),
        "blocking_gbps": report.blocking.iter().map(Run::gb_per_s).collect::<Vec<_>>(),
        "datapath_median_gbps": d,
        "blocking_median_gbps": b,
        "load_before": load_before,
        "load_after": load_after,
    });
    println!("{json}");
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_catches_one_changed_byte_anywhere() {
        for len in [1, 7, 8, 9, 100, 4096 + 3] {
            let mut buf = vec![0u8; len];
            fill(&mut buf, 2);
            assert!(holds_pattern(&buf, 2), "len {len}");
            assert!(!holds_pattern(&buf, 3), "another message's pattern, len {len}");
            for at in [0, len / 2, len - 1] {
                buf[at] ^= 0x10;
                assert!(!holds_pattern(&buf, 2), "len {len}, byte {at}");
                buf[at] ^= 0x10;
            }
        }
    }

    #[test]
    fn both_systems_carry_large_messages_intact() {
        let mut config = Config {
            size: (3 << 20) + 5,
            seconds: 0.2,
            repeats: 1,
            server_core: 0,
            client_core: 0,
            recv_mode: RecvMode::Single,
        };
        let d = datapath_run(&config).unwrap();
        let b = blocking_run(&config).unwrap();
        assert!(d.messages > 0 && b.messages > 0, "{d:?} {b:?}");
        assert_eq!(d.bytes, d.messages * config.size as u64);
        config.recv_mode = RecvMode::Multishot;
        let m = datapath_run(&config).unwrap();
        assert!(m.messages > 0, "{m:?}");
    }
}
