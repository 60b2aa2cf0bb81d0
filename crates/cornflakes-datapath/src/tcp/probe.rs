//! The zero-copy break-even probe: plain `SENDMSG` against `SENDMSG_ZC`
//! for a range of segment sizes, over this datapath, to a peer that reads
//! and discards ([`DiscardSink`]), and the `zero_copy_min` it implies.
//!
//! For each size, one message of one zero-copy segment is sent
//! back to back for a fixed time with `zero_copy_min` forced to "never",
//! then to "always"; the figures are the throughput the sender saw (bytes
//! whose sends completed, notifications included, per second) and the
//! sender thread's CPU time per KiB (`CLOCK_THREAD_CPUTIME_ID`: io_uring
//! runs these sends inline in the thread's `io_uring_enter` and task work;
//! work the kernel hands to its io-wq threads is not counted).
//!
//! **Choice.** When most zero-copy notifications say the kernel copied
//! after all (loopback, veth, a device without scatter-gather), or the
//! kernel has no `SENDMSG_ZC`, zero-copy never pays: `usize::MAX`.
//! Otherwise the break-even is the smallest size from which zero-copy costs
//! the sender no more CPU per byte than a plain send, at that size and
//! every larger one measured; `zero_copy_min` is set to it (never, when no
//! size qualifies).

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{TcpDatapath, TcpError};
use crate::{Datapath, Segment, SendError, PACKET_HEADER_LEN};

/// The segment sizes a probe measures by default: 1 KiB to 1 MiB, by
/// powers of two.
pub const PROBE_SIZES: [usize; 11] =
    [1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20];

/// One segment size of a probe.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZcProbeRow {
    /// Bytes of the zero-copy segment.
    pub size: usize,
    /// Plain `SENDMSG`: 10^9 bytes per second.
    pub plain_gbps: f64,
    /// `SENDMSG_ZC`: 10^9 bytes per second.
    pub zc_gbps: f64,
    /// Plain `SENDMSG`: sender CPU nanoseconds per KiB sent.
    pub plain_ns_per_kib: f64,
    /// `SENDMSG_ZC`: sender CPU nanoseconds per KiB sent.
    pub zc_ns_per_kib: f64,
    /// Zero-copy notifications received.
    pub notifications: u64,
    /// Of those, how many said the kernel copied the data anyway.
    pub copied: u64,
}

/// What a probe measured and chose.
#[derive(Clone, Debug, PartialEq)]
pub struct ZcProbe {
    /// Where the probe sent.
    pub sink: SocketAddr,
    /// One row per size, in the order measured.
    pub rows: Vec<ZcProbeRow>,
    /// Whether the kernel has `SENDMSG_ZC`.
    pub supported: bool,
    /// Whether most notifications said the kernel copied.
    pub kernel_copies: bool,
    /// The smallest size from which zero-copy paid, if any.
    pub break_even: Option<usize>,
    /// The `zero_copy_min` chosen (`usize::MAX`: never).
    pub chosen: usize,
}

impl ZcProbe {
    /// The choice, from the rows (see the module docs).
    fn choose(&mut self) {
        let (notes, copied) = self.rows.iter().fold((0, 0), |(n, c), r| (n + r.notifications, c + r.copied));
        self.kernel_copies = notes > 0 && copied * 2 >= notes;
        self.break_even = None;
        if self.supported && !self.kernel_copies {
            // Smallest size whose row and every later (larger) row pays.
            for (k, r) in self.rows.iter().enumerate() {
                if self.rows[k..].iter().all(|r| r.zc_ns_per_kib <= r.plain_ns_per_kib) {
                    self.break_even = Some(r.size);
                    break;
                }
            }
        }
        self.chosen = self.break_even.unwrap_or(usize::MAX);
    }

    /// Why the probe chose what it chose, in one sentence.
    pub fn reason(&self) -> String {
        if !self.supported {
            "the kernel has no SENDMSG_ZC: never".into()
        } else if self.kernel_copies {
            "the kernel copied zero-copy sends on this path (notifications say so): never".into()
        } else if let Some(b) = self.break_even {
            format!("zero-copy costs the sender no more CPU per byte from {b} B on: zero_copy_min = {b}")
        } else {
            "zero-copy never cost the sender less CPU per byte here: never".into()
        }
    }
}

/// A peer for the probe: accepts connections on a thread and reads and
/// discards whatever arrives, until dropped.
pub struct DiscardSink {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl DiscardSink {
    /// Listens on `addr` (port 0: the kernel picks).
    ///
    /// # Errors
    ///
    /// When binding fails.
    pub fn spawn(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut readers = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        let _ = s.set_nonblocking(false);
                        readers.push(std::thread::spawn(move || {
                            let mut buf = vec![0u8; 1 << 20];
                            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            // Readers end when their peers close.
            drop(readers);
        });
        Ok(Self { addr, stop, thread: Some(thread) })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until the process ends (for `cf zc-sink`).
    pub fn serve_forever(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for DiscardSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

impl TcpDatapath {
    /// Runs the zero-copy probe to `sink` (a peer that reads and discards,
    /// such as a [`DiscardSink`]) over this datapath: each of `sizes` for
    /// `per_size` with plain sends, then with zero-copy ones. Sets
    /// [`TcpConfig::zero_copy_min`](super::TcpConfig::zero_copy_min) to
    /// the choice and keeps the result ([`TcpDatapath::zero_copy_probe`]).
    ///
    /// # Errors
    ///
    /// [`TcpError::Connect`] when the sink cannot be reached or the
    /// connection fails during the probe.
    pub fn probe_zero_copy(
        &mut self,
        sink: SocketAddr,
        sizes: &[usize],
        per_size: Duration,
    ) -> Result<ZcProbe, TcpError> {
        let failed = |what: &str| TcpError::Connect { addr: sink, error: std::io::Error::other(what.to_string()) };
        let conn = self.connect(sink)?;
        let saved_min = self.config.zero_copy_min;
        let mut probe = ZcProbe {
            sink,
            rows: Vec::new(),
            supported: self.zc_supported,
            kernel_copies: false,
            break_even: None,
            chosen: usize::MAX,
        };
        let mut result = Ok(());
        for &size in sizes {
            let Ok(mut value) = self.pool.alloc(size) else {
                result = Err(failed("the pool has no buffer for the probe"));
                break;
            };
            value.fill(0x5A);
            let value = value.freeze();
            let mut row = ZcProbeRow {
                size,
                plain_gbps: 0.0,
                zc_gbps: 0.0,
                plain_ns_per_kib: 0.0,
                zc_ns_per_kib: 0.0,
                notifications: 0,
                copied: 0,
            };
            for zc in [false, true] {
                if zc && !self.zc_supported {
                    break;
                }
                self.config.zero_copy_min = if zc { 0 } else { usize::MAX };
                let (notes, copied) = (self.tcp.notifications, self.stats.zero_copy_copied);
                match self.probe_one(conn, &value, per_size) {
                    Ok((gbps, ns_per_kib)) => {
                        if zc {
                            (row.zc_gbps, row.zc_ns_per_kib) = (gbps, ns_per_kib);
                        } else {
                            (row.plain_gbps, row.plain_ns_per_kib) = (gbps, ns_per_kib);
                        }
                    }
                    Err(e) => {
                        result = Err(failed(&e));
                        break;
                    }
                }
                row.notifications += self.tcp.notifications - notes;
                row.copied += self.stats.zero_copy_copied - copied;
            }
            if result.is_err() {
                break;
            }
            probe.rows.push(row);
        }
        self.close(conn);
        self.config.zero_copy_min = saved_min;
        result?;
        probe.choose();
        self.config.zero_copy_min = probe.chosen;
        self.zc_probe = Some(probe.clone());
        Ok(probe)
    }

    /// Sends `value` back to back on `conn` for `time`, then waits until
    /// every send has finished; returns GB/s and sender CPU ns per KiB.
    fn probe_one(
        &mut self,
        conn: crate::ConnId,
        value: &cornflakes::RcBuf,
        time: Duration,
    ) -> Result<(f64, f64), String> {
        let (start, cpu) = (Instant::now(), thread_cpu());
        let mut messages = 0u64;
        while start.elapsed() < time {
            match self.push_segments(conn, 0, &[Segment::ZeroCopy(value.clone())]) {
                Ok(()) => {
                    messages += 1;
                    self.flush().map_err(|e| e.to_string())?;
                }
                Err(SendError::Backlogged(_)) => {
                    self.flush().map_err(|e| e.to_string())?;
                    self.poll_completions().map_err(|e| e.to_string())?;
                    self.wait(Duration::from_micros(20)).map_err(|e| e.to_string())?;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.in_flight() > 0 {
            if Instant::now() > deadline {
                return Err("sends did not finish within 10 s".into());
            }
            self.flush().map_err(|e| e.to_string())?;
            self.poll_completions().map_err(|e| e.to_string())?;
            self.wait(Duration::from_micros(20)).map_err(|e| e.to_string())?;
        }
        let (elapsed, cpu) = (start.elapsed(), thread_cpu() - cpu);
        let bytes = messages * (value.len() + PACKET_HEADER_LEN) as u64;
        let gbps = bytes as f64 / elapsed.as_secs_f64() / 1e9;
        Ok((gbps, cpu.as_nanos() as f64 / (bytes as f64 / 1024.0).max(1.0)))
    }

    /// The last zero-copy probe's result (run at start-up when
    /// [`TcpConfig::zero_copy_probe`](super::TcpConfig::zero_copy_probe)
    /// is set, or by [`TcpDatapath::probe_zero_copy`]).
    pub fn zero_copy_probe(&self) -> Option<&ZcProbe> {
        self.zc_probe.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(size: usize, plain: f64, zc: f64, copied: u64) -> ZcProbeRow {
        ZcProbeRow {
            size,
            plain_gbps: 1.0,
            zc_gbps: 1.0,
            plain_ns_per_kib: plain,
            zc_ns_per_kib: zc,
            notifications: 10,
            copied,
        }
    }

    fn probe(rows: Vec<ZcProbeRow>) -> ZcProbe {
        let mut p = ZcProbe {
            sink: "127.0.0.1:1".parse().unwrap(),
            rows,
            supported: true,
            kernel_copies: false,
            break_even: None,
            chosen: 0,
        };
        p.choose();
        p
    }

    #[test]
    fn the_break_even_is_where_zero_copy_pays_from_then_on() {
        let p = probe(vec![row(1024, 100.0, 300.0, 0), row(4096, 100.0, 90.0, 0), row(8192, 100.0, 50.0, 0)]);
        assert_eq!((p.break_even, p.chosen), (Some(4096), 4096));
        // A larger size where it does not pay again moves the break-even up.
        let p = probe(vec![row(1024, 100.0, 90.0, 0), row(4096, 100.0, 110.0, 0), row(8192, 100.0, 50.0, 0)]);
        assert_eq!(p.chosen, 8192);
        let p = probe(vec![row(1024, 100.0, 300.0, 0), row(4096, 100.0, 200.0, 0)]);
        assert_eq!((p.break_even, p.chosen), (None, usize::MAX));
    }

    #[test]
    fn a_path_where_the_kernel_copies_never_uses_zero_copy() {
        let p = probe(vec![row(1024, 100.0, 50.0, 10), row(4096, 100.0, 10.0, 10)]);
        assert!(p.kernel_copies);
        assert_eq!((p.break_even, p.chosen), (None, usize::MAX));
        assert!(p.reason().contains("copied"));
    }

    #[test]
    fn loopback_probe_measures_and_chooses_never() {
        let sink = DiscardSink::spawn("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut dp = TcpDatapath::new(super::super::TcpConfig::default()).unwrap();
        let p = dp.probe_zero_copy(sink.addr(), &[4096, 65536], Duration::from_millis(30)).unwrap();
        assert_eq!(p.rows.len(), 2);
        assert!(p.rows.iter().all(|r| r.plain_gbps > 0.0), "{p:?}");
        if p.supported {
            assert!(p.rows.iter().all(|r| r.zc_gbps > 0.0 && r.notifications > 0), "{p:?}");
            assert!(p.kernel_copies, "loopback copies: {p:?}");
        }
        assert_eq!(p.chosen, usize::MAX);
        assert_eq!(dp.config().zero_copy_min, usize::MAX);
        assert_eq!(dp.zero_copy_probe(), Some(&p));
        assert_eq!(dp.connections().count(), 0, "the probe's connection is closed");
    }

    #[test]
    fn the_start_up_probe_sets_zero_copy_min_and_says_why() {
        let sink = DiscardSink::spawn("127.0.0.1:0".parse().unwrap()).unwrap();
        let config = super::super::TcpConfig {
            zero_copy_min: 0,
            zero_copy_probe: Some(sink.addr()),
            ..super::super::TcpConfig::default()
        };
        let dp = TcpDatapath::new(config).unwrap();
        let p = dp.zero_copy_probe().expect("probed at start-up");
        assert_eq!(p.rows.len(), PROBE_SIZES.len());
        assert_eq!(dp.config().zero_copy_min, p.chosen);
        assert_eq!(p.chosen, usize::MAX, "loopback: {}", p.reason());
    }
}
