//! `cf hiccup`: how often this machine takes a core away from a thread that
//! never yields. One thread per core spins reading the clock and counts the
//! gaps between two reads: on an idle, isolated core they are tens of
//! nanoseconds; a gap of a millisecond is time the core ran something else
//! (another process, an interrupt, the hypervisor).
//!
//! An open-loop load generator at rate R queues R x gap requests behind
//! every such gap, so a machine that loses a core for 3 ms ten times in five
//! seconds gives a p99.9 of milliseconds to any server at 50 k requests/s,
//! while a closed-loop ping-pong sees one slow round trip per gap. Run it
//! next to a benchmark's figures to tell the machine's tails from ours
//! (`cf compare` records it in `summary.json`).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::gap_trains::{self, GapTrain, InterruptCounts};
use crate::pin::pin_to_core;
use crate::Error;

/// The gaps one core showed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoreHiccups {
    /// The core.
    pub core: usize,
    /// How long it was watched, seconds.
    pub seconds: f64,
    /// Gaps longer than 20 µs ([`cornflakes_datapath::timeline::GAP_NS`]:
    /// what `cf tails` counts as a loop losing its core).
    #[serde(default)]
    pub over_20us: u64,
    /// Time lost in gaps longer than 20 µs, as a share of the time watched.
    #[serde(default)]
    pub lost_over_20us_share: f64,
    /// Gaps longer than 50 µs.
    pub over_50us: u64,
    /// Gaps longer than 200 µs.
    pub over_200us: u64,
    /// Gaps longer than 1 ms.
    pub over_1ms: u64,
    /// The longest gap, µs.
    pub max_us: f64,
    /// Time lost in gaps longer than 50 µs, as a share of the time watched.
    pub lost_share: f64,
    /// The gaps over 20 µs that recur at a fixed period
    /// ([`gap_trains::find_trains`]), strongest first, with what recurs
    /// at their rate; the other gaps are irregular.
    #[serde(default)]
    pub trains: Vec<GapTrain>,
}

impl std::fmt::Display for CoreHiccups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "core {}: {:.1} s, gaps > 20 µs {} ({:.2} % of the time), > 50 µs {}, > 200 µs {}, > 1 ms {}, longest {:.0} µs, {:.2} % of the time lost in gaps > 50 µs",
            self.core,
            self.seconds,
            self.over_20us,
            self.lost_over_20us_share * 100.0,
            self.over_50us,
            self.over_200us,
            self.over_1ms,
            self.max_us,
            self.lost_share * 100.0
        )?;
        for t in &self.trains {
            write!(
                f,
                "\n  every {:.3} ms ({:.0}/s, a gap in {:.0} % of the periods): {:.0} % of the gaps > 20 µs, {:.2} % of the time, median {:.0} µs{}",
                t.period_us / 1e3,
                t.rate_hz(),
                t.share_of_periods * 100.0,
                t.share_of_gaps * 100.0,
                t.lost_share * 100.0,
                t.median_us,
                t.source.as_deref().map(|s| format!("; {s}")).unwrap_or_default()
            )?;
        }
        if !self.trains.is_empty() {
            let periodic: f64 = self.trains.iter().map(|t| t.share_of_gaps).sum();
            write!(f, "\n  irregular: {:.0} % of the gaps > 20 µs", (1.0 - periodic).max(0.0) * 100.0)?;
        }
        Ok(())
    }
}

/// `found` as one line of JSON.
pub fn json_line(found: &[CoreHiccups]) -> String {
    serde_json::to_string(found).expect("plain numbers serialize")
}

/// Watches each of `cores` for `duration` at the same time (one pinned
/// thread each).
///
/// # Errors
///
/// When a thread cannot be pinned (no such core).
pub fn measure(cores: &[usize], duration: Duration) -> Result<Vec<CoreHiccups>, Error> {
    let (counts, start) = (InterruptCounts::read(), Instant::now());
    let threads: Vec<_> = cores
        .iter()
        .map(|&core| {
            std::thread::spawn(move || -> Result<CoreHiccups, Error> {
                pin_to_core(core)?;
                Ok(watch(core, duration, || {}))
            })
        })
        .collect();
    let mut found: Vec<CoreHiccups> = threads
        .into_iter()
        .map(|t| t.join().map_err(|_| Error::Failed("a hiccup thread panicked".into()))?)
        .collect::<Result<_, _>>()?;
    let rates = counts.rates_until(&InterruptCounts::read(), start.elapsed().as_secs_f64());
    for h in &mut found {
        for t in &mut h.trains {
            t.explain(&rates, h.core);
        }
    }
    Ok(found)
}

/// The round trip of one cache line between cores `a` and `b`, ns: two
/// pinned threads pass a counter back and forth `round_trips` times, three
/// times over; the fastest of the three. On this VM it is 100-180 ns in
/// some phases and 540-560 ns in others, lasting tens of seconds (the
/// hypervisor moves the virtual cores), and shared-memory throughput
/// follows it (`cf compare` waits out the slow phases, see
/// [`crate::sweep::MachineGate`]).
///
/// # Errors
///
/// When a thread cannot be pinned, or the other side did not answer
/// within a second (a core busy with something else).
pub fn core_round_trip_ns(a: usize, b: usize, round_trips: u64) -> Result<f64, Error> {
    use std::sync::atomic::{AtomicU64, Ordering};
    const LIMIT: Duration = Duration::from_secs(1);
    let ball = &AtomicU64::new(0);
    // Waits until the ball holds `want`; false after LIMIT (the clock is
    // read only once a wait has lasted thousands of spins).
    let wait = |want: u64| {
        let (mut spins, mut since) = (0u32, None);
        while ball.load(Ordering::Acquire) != want {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins % 4096 == 0 && since.get_or_insert_with(Instant::now).elapsed() > LIMIT {
                return false;
            }
        }
        true
    };
    let total = 3 * round_trips;
    let wait = &wait;
    std::thread::scope(|s| {
        let answerer = s.spawn(move || -> Result<(), Error> {
            pin_to_core(b)?;
            for i in 0..total {
                if !wait(2 * i + 1) {
                    return Err(Error::Failed(format!("core {b} saw no ball from core {a} within {LIMIT:?}")));
                }
                ball.store(2 * i + 2, Ordering::Release);
            }
            Ok(())
        });
        let mut best = f64::INFINITY;
        let result = (|| -> Result<f64, Error> {
            pin_to_core(a)?;
            for round in 0..3 {
                let t = Instant::now();
                for i in round * round_trips..(round + 1) * round_trips {
                    ball.store(2 * i + 1, Ordering::Release);
                    if !wait(2 * i + 2) {
                        return Err(Error::Failed(format!("core {a} got no ball back from core {b} within {LIMIT:?}")));
                    }
                }
                best = best.min(t.elapsed().as_nanos() as f64 / round_trips as f64);
            }
            Ok(best)
        })();
        if result.is_err() {
            // Let the answerer run out: it gives up after LIMIT.
            ball.store(u64::MAX, Ordering::Release);
        }
        let answered = answerer.join().map_err(|_| Error::Failed("a round-trip thread panicked".into()))?;
        let ns = result?;
        answered?;
        Ok(ns)
    })
}

/// Bytes [`copy_bandwidth_gbps`] writes on one core and copies on the
/// other: past both cores' L2 (2 MiB on the Intel guest), so the copy
/// crosses cores as a load generator's gather does, and ~2 ms each way.
pub const COPY_PROBE_BYTES: usize = 16 << 20;

/// The piece [`copy_bandwidth_gbps`] copies at a time: a CDN segment.
const COPY_PIECE: usize = 8000;

/// Cross-core copy bandwidth now, GB/s: a thread on `writer` fills `buf`
/// (a fresh pattern per `pass`), then a thread on `reader` copies it in
/// 8000 B pieces, in a scattered order, into a small buffer of its own:
/// what a load generator's gather does with each response's values. On
/// the Intel guest its per-minute median moved between 8.7 and 12.7 GB/s
/// with nothing else running, while one core's arithmetic stayed within
/// 4 % (`docs/results/2026-12-02-copy-bandwidth/`); the maxima of
/// `cf compare` move with it.
///
/// # Errors
///
/// When a thread cannot be pinned or panicked.
pub fn copy_bandwidth_gbps(writer: usize, reader: usize, buf: &mut [u8], pass: u64) -> Result<f64, Error> {
    let pieces = buf.len() / COPY_PIECE;
    if pieces == 0 {
        return Err(Error::Invalid(format!("a copy probe needs at least {COPY_PIECE} bytes")));
    }
    let panicked = |_| Error::Failed("a copy-probe thread panicked".into());
    std::thread::scope(|s| {
        s.spawn(|| -> Result<(), Error> {
            pin_to_core(writer)?;
            // New bytes each pass, so that every line is written again.
            buf.fill((pass % 255) as u8 + 1);
            Ok(())
        })
        .join()
        .map_err(panicked)?
    })?;
    let buf: &[u8] = buf;
    std::thread::scope(|s| {
        s.spawn(|| -> Result<f64, Error> {
            pin_to_core(reader)?;
            let mut into = vec![[0u8; COPY_PIECE]; 16];
            let stride = scattering_stride(pieces);
            let mut sink = 0u8;
            let start = Instant::now();
            for k in 0..pieces {
                let at = (k * stride % pieces) * COPY_PIECE;
                let to = &mut into[k % 16];
                to.copy_from_slice(&buf[at..at + COPY_PIECE]);
                sink ^= std::hint::black_box(to)[k % COPY_PIECE];
            }
            let seconds = start.elapsed().as_secs_f64();
            std::hint::black_box(sink);
            Ok((pieces * COPY_PIECE) as f64 / seconds.max(1e-9) / 1e9)
        })
        .join()
        .map_err(panicked)?
    })
}

/// A stride coprime with `pieces`, about half of it: `k * stride % pieces`
/// for `k` in `0..pieces` visits every piece once, out of order (so the
/// hardware prefetcher cannot run ahead).
fn scattering_stride(pieces: usize) -> usize {
    (pieces / 2 + 1..).find(|&k| gcd(k, pieces) == 1).unwrap_or(1)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Spins for `duration`, calling `between` between two clock reads (a
/// no-op except in tests, which stand in for preemption with it).
fn watch(core: usize, duration: Duration, mut between: impl FnMut()) -> CoreHiccups {
    // Written before the clock starts: a first touch of a page would be a
    // gap of our own.
    let mut recorded: Vec<(u64, u64)> = Vec::with_capacity(GAPS_RECORDED);
    recorded.resize(GAPS_RECORDED, (0, 0));
    let mut n = 0;
    let start = Instant::now();
    let (mut last, mut lost, mut lost_20) = (start, Duration::ZERO, Duration::ZERO);
    let (mut over_20us, mut over_50us, mut over_200us, mut over_1ms, mut max) = (0, 0, 0, 0, Duration::ZERO);
    let mut recorded_until = start;
    loop {
        between();
        let now = Instant::now();
        let gap = now - last;
        if n < GAPS_RECORDED {
            recorded_until = now;
        }
        if gap.as_nanos() > u128::from(cornflakes_datapath::timeline::GAP_NS) {
            over_20us += 1;
            lost_20 += gap;
            if n < GAPS_RECORDED {
                recorded[n] = ((last - start).as_nanos() as u64, gap.as_nanos() as u64);
                n += 1;
            }
        }
        last = now;
        if gap > Duration::from_micros(50) {
            over_50us += 1;
            lost += gap;
            over_200us += u64::from(gap > Duration::from_micros(200));
            over_1ms += u64::from(gap > Duration::from_millis(1));
            max = max.max(gap);
        }
        if now - start >= duration {
            break;
        }
    }
    let seconds = (last - start).as_secs_f64();
    recorded.truncate(n);
    let (trains, _) = gap_trains::find_trains(&recorded, (recorded_until - start).as_secs_f64());
    CoreHiccups {
        core,
        seconds,
        over_20us,
        lost_over_20us_share: lost_20.as_secs_f64() / seconds.max(f64::MIN_POSITIVE),
        over_50us,
        over_200us,
        over_1ms,
        max_us: max.as_secs_f64() * 1e6,
        lost_share: lost.as_secs_f64() / seconds.max(f64::MIN_POSITIVE),
        trains,
    }
}

/// Gaps whose start and length [`watch`] keeps for [`gap_trains`]: 1 MiB,
/// about 100 s of this guest's 600 gaps a second; later gaps are counted
/// but not looked at for trains.
const GAPS_RECORDED: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_line_goes_round_between_two_cores() {
        if crate::pin::available_cores() < 2 {
            eprintln!("SKIPPED: one core (two threads on one core take turns by the time slice)");
            return;
        }
        let ns = core_round_trip_ns(0, 1, 2000).expect("round trips");
        assert!(ns.is_finite() && ns > 0.0 && ns < 1e6, "{ns} ns");
    }

    #[test]
    fn a_copy_probe_visits_every_piece_once() {
        for pieces in [1, 2, 3, 10, 2097, 4096] {
            let stride = scattering_stride(pieces);
            let mut seen = vec![false; pieces];
            for k in 0..pieces {
                seen[k * stride % pieces] = true;
            }
            assert!(seen.iter().all(|&s| s), "{pieces} pieces, stride {stride}");
        }
    }

    #[test]
    fn a_copy_between_two_cores_has_a_bandwidth() {
        if crate::pin::available_cores() < 2 {
            eprintln!("SKIPPED: one core");
            return;
        }
        let mut buf = vec![0u8; 1 << 20];
        let gbps = copy_bandwidth_gbps(0, 1, &mut buf, 7).expect("copy probe");
        assert!(gbps.is_finite() && gbps > 0.01 && gbps < 10_000.0, "{gbps} GB/s");
        assert!(buf.iter().all(|&b| b == 8), "the writer filled the buffer");
        assert!(copy_bandwidth_gbps(0, 1, &mut [0u8; 100], 7).is_err(), "smaller than a piece");
    }

    #[test]
    fn a_core_taken_away_is_counted_as_a_gap() {
        // Two 3 ms sleeps between clock reads stand in for the core being
        // given to someone else twice.
        let mut sleeps = 0;
        let h = watch(0, Duration::from_millis(30), || {
            if sleeps < 2 {
                sleeps += 1;
                std::thread::sleep(Duration::from_millis(3));
            }
        });
        assert!(h.over_1ms >= 2 && h.max_us >= 3000.0, "{h}");
        assert!(h.over_1ms <= h.over_200us && h.over_200us <= h.over_50us && h.over_50us <= h.over_20us, "{h}");
        assert!(h.lost_over_20us_share >= h.lost_share, "{h}");
        assert!(h.lost_share >= 0.006 / h.seconds * 0.99 && h.lost_share <= 1.0, "{h}");
    }
}
