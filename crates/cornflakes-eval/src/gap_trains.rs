//! Gaps that recur at a fixed period, and what recurs at that rate.
//!
//! A core that spins reading the clock (`cf hiccup`) or a server's loop
//! (`cf tails`) sees gaps when something else runs. Most of them on the
//! 2-core guests are not random: on 2026-12-02 the Intel guest's spinning
//! cores lost 25-100 µs every 4.000 ms, on the grid of the kernel's
//! scheduler tick (`CONFIG_HZ=250`, and the kernel is built without
//! `CONFIG_NO_HZ_FULL`, so a busy core cannot stop it), and 40-60 µs every
//! 10.000 ms from something no interrupt counter of the guest shows. A
//! *train* is such a series; [`find_trains`] finds them from the gaps'
//! start times alone, by the lags between gaps: a train of period P puts
//! many pairs of gaps at lags P, 2P, ...; random gaps spread their lags
//! evenly.
//!
//! [`InterruptCounts`] reads `/proc/interrupts` so a train can be matched
//! with an interrupt that recurs at its rate (the local timer's, for the
//! tick).

use serde::{Deserialize, Serialize};

/// Lags are counted in bins this wide, ns.
const BIN_NS: u64 = 10_000;
/// Shortest period looked for, ns: below it, gaps of 20-100 µs would
/// overlap their neighbours.
const MIN_PERIOD_NS: u64 = 500_000;
/// Longest period looked for, ns (a 100 Hz tick has 10 ms).
const MAX_PERIOD_NS: u64 = 25_000_000;
/// A gap is in a train when another gap lies 1 to [`NEIGHBOURS`] periods
/// from it, within this many ns (a few µs of drift per period between a
/// host's clock and the guest's are allowed for).
const TOLERANCE_NS: u64 = 15_000;
/// Periods on each side searched for a gap of the same train (a tick
/// whose gap was under the threshold leaves a hole in the train).
const NEIGHBOURS: u64 = 3;
/// At most this many trains are reported.
const MAX_TRAINS: usize = 3;
/// Above this many gaps a second no train is looked for (each gap's
/// neighbours within [`MAX_PERIOD_NS`] are visited: 500 of them at this
/// density).
const MAX_GAPS_PER_SECOND: f64 = 20_000.0;
/// A train has a gap in at least this share of its periods: at short
/// periods, many irregular gaps have some other gap a whole number of
/// periods away by chance.
const MIN_SHARE_OF_PERIODS: f64 = 0.2;

/// One train of gaps recurring at a fixed period.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GapTrain {
    /// The period, µs.
    pub period_us: f64,
    /// Gaps in the train.
    pub gaps: u64,
    /// Of all the gaps, the share in this train.
    pub share_of_gaps: f64,
    /// Of the periods in the time watched, the share that had a gap.
    pub share_of_periods: f64,
    /// Time lost in the train's gaps, as a share of the time watched.
    pub lost_share: f64,
    /// The median gap of the train, µs.
    pub median_us: f64,
    /// What recurs at the train's rate, when something in
    /// `/proc/interrupts` does ([`GapTrain::explain`]).
    #[serde(default)]
    pub source: Option<String>,
}

impl GapTrain {
    /// Occurrences per second of the period.
    pub fn rate_hz(&self) -> f64 {
        1e6 / self.period_us
    }

    /// Names what recurs at this train's rate on `core` (nothing when
    /// `counts` is empty: `/proc/interrupts` was not readable): the interrupt of
    /// `counts` whose rate is within 10 % of it (other timers add to the
    /// local timer's count), if any; the local timer
    /// interrupt (`LOC`) is named as the scheduler tick, with whether this
    /// kernel could stop it on a busy core.
    pub fn explain(&mut self, counts: &InterruptRates, core: usize) {
        if counts.rates.is_empty() {
            // /proc/interrupts could not be read: nothing to say.
            self.source = None;
            return;
        }
        let rate = self.rate_hz();
        let matching = counts
            .rates
            .iter()
            .filter_map(|(name, per_core)| Some((name, *per_core.get(core)?)))
            .find(|(_, r)| (r - rate).abs() <= 0.1 * rate);
        self.source = Some(match matching {
            Some((name, r)) if name == "LOC" => format!(
                "the rate of this core's local timer interrupts (LOC {r:.0}/s): the scheduler tick, {}",
                nohz_full_note()
            ),
            Some((name, r)) => format!("the rate of interrupt {name} on this core ({r:.0}/s)"),
            None => format!(
                "no interrupt of this core in /proc/interrupts recurs at {rate:.0}/s: the cause is outside what the kernel counts (on a VM, the hypervisor)"
            ),
        });
    }
}

/// Whether this kernel can stop the tick on a busy core.
fn nohz_full_note() -> String {
    match std::fs::read_to_string("/sys/devices/system/cpu/nohz_full") {
        Ok(cpus) if !cpus.trim().is_empty() && cpus.trim() != "(null)" => {
            format!("stopped only on the nohz_full cores ({})", cpus.trim())
        }
        Ok(_) => "which a busy core takes every period (boot with nohz_full= and isolcpus= to stop it there)".into(),
        Err(_) => {
            "which a busy core takes every period (this kernel is built without CONFIG_NO_HZ_FULL: it cannot be stopped)"
                .into()
        }
    }
}

/// Finds the trains among gaps given by their start times and lengths,
/// ns, over `seconds` watched: the strongest first, each one's gaps left
/// out of the search for the next; gaps in no train are irregular.
/// Returns the trains and, per gap, the index of its train.
///
/// A lag of period P between gaps of a train is counted when the lag
/// histogram's peak (three [`BIN_NS`] bins, between 0.5 and 25 ms) holds
/// at least five times the pairs an even spread would put there and at
/// least 20; the period is then the shortest submultiple of the peak lag
/// whose own peak is as significant and holds a quarter as many (a train
/// at 4 ms also peaks at 8 ms; trains at 4 and 10 ms both peak at 20).
pub fn find_trains(gaps: &[(u64, u64)], seconds: f64) -> (Vec<GapTrain>, Vec<Option<usize>>) {
    let mut train_of: Vec<Option<usize>> = vec![None; gaps.len()];
    let mut trains = Vec::new();
    if gaps.len() as f64 > MAX_GAPS_PER_SECOND * seconds {
        // A loop that long, that often, is busy, not interrupted; and the
        // search would take quadratic time.
        return (trains, train_of);
    }
    let mut order: Vec<usize> = (0..gaps.len()).collect();
    order.sort_by_key(|&i| gaps[i].0);
    let seconds = seconds.max(f64::MIN_POSITIVE);
    while trains.len() < MAX_TRAINS {
        let left: Vec<u64> = order.iter().filter(|&&i| train_of[i].is_none()).map(|&i| gaps[i].0).collect();
        let Some(period) = strongest_period(&left) else { break };
        let members: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| train_of[i].is_none() && has_neighbour(&left, gaps[i].0, period))
            .collect();
        // Periods that had a gap (a tick can leave two gaps close together).
        let first = members.first().map_or(0, |&i| gaps[i].0);
        let mut hit: Vec<u64> = members.iter().map(|&i| (gaps[i].0 - first + period / 2) / period).collect();
        hit.dedup();
        let share_of_periods = (hit.len() as f64 / (seconds * 1e9 / period as f64)).min(1.0);
        if members.len() < 20 || share_of_periods < MIN_SHARE_OF_PERIODS {
            break;
        }
        let index = trains.len();
        for &i in &members {
            train_of[i] = Some(index);
        }
        let mut lengths: Vec<u64> = members.iter().map(|&i| gaps[i].1).collect();
        lengths.sort_unstable();
        let lost: u64 = lengths.iter().sum();
        trains.push(GapTrain {
            period_us: period as f64 / 1e3,
            gaps: members.len() as u64,
            share_of_gaps: members.len() as f64 / gaps.len() as f64,
            share_of_periods,
            lost_share: lost as f64 / 1e9 / seconds,
            median_us: lengths[lengths.len() / 2] as f64 / 1e3,
            source: None,
        });
    }
    (trains, train_of)
}

/// The period of the strongest train among `starts` (sorted), ns.
fn strongest_period(starts: &[u64]) -> Option<u64> {
    let bins = (MAX_PERIOD_NS / BIN_NS) as usize + 2;
    // Pairs and the sum of their lags, per bin: a peak's mean lag comes
    // from the same pass.
    let mut hist = vec![(0u32, 0u64); bins];
    let mut pairs = 0u64;
    for (i, &a) in starts.iter().enumerate() {
        for &b in &starts[i + 1..] {
            let lag = b - a;
            if lag > MAX_PERIOD_NS {
                break;
            }
            if lag >= MIN_PERIOD_NS {
                let bin = &mut hist[(lag / BIN_NS) as usize];
                bin.0 += 1;
                bin.1 += lag;
                pairs += 1;
            }
        }
    }
    // Pairs and summed lags of bins `b - 1` to `b + 1`.
    let window = |b: usize| {
        let near = [b.saturating_sub(1), b, (b + 1).min(bins - 1)];
        near.iter().fold((0u32, 0u64), |(n, sum), &k| (n + hist[k].0, sum + hist[k].1))
    };
    let mean = |b: usize| {
        let (n, sum) = window(b);
        sum.checked_div(u64::from(n)).unwrap_or(b as u64 * BIN_NS)
    };
    let first = (MIN_PERIOD_NS / BIN_NS) as usize;
    let peak = (first..bins - 1).max_by_key(|&b| (window(b).0, std::cmp::Reverse(b)))?;
    let even = pairs as f64 * 3.0 * BIN_NS as f64 / (MAX_PERIOD_NS - MIN_PERIOD_NS) as f64;
    let count = window(peak).0;
    if count < 20 || f64::from(count) < 5.0 * even {
        return None;
    }
    // The shortest submultiple that peaks too is the period.
    let lag = mean(peak);
    let period = (2..=8u64)
        .rev()
        .map(|k| lag / k)
        .filter(|&p| p >= MIN_PERIOD_NS)
        .find(|&p| {
            let at = window((p / BIN_NS) as usize).0;
            4 * at >= count && at >= 20 && f64::from(at) >= 5.0 * even
        })
        .map(|p| mean((p / BIN_NS) as usize))
        .unwrap_or(lag);
    Some(period)
}

/// Whether a gap of `starts` (sorted) lies 1 to [`NEIGHBOURS`] periods
/// before or after `at`.
fn has_neighbour(starts: &[u64], at: u64, period: u64) -> bool {
    (1..=NEIGHBOURS).any(|m| {
        let lag = m * period;
        let near = |t: u64| {
            let from = starts.partition_point(|&s| s + TOLERANCE_NS < t);
            starts.get(from).is_some_and(|&s| s <= t + TOLERANCE_NS)
        };
        near(at + lag) || (at >= lag && near(at - lag))
    })
}

/// Per-second rates of each line of `/proc/interrupts`, per core, between
/// two readings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InterruptRates {
    /// The line's name (`LOC`, `36`, ...) and its rate on each core.
    pub rates: Vec<(String, Vec<f64>)>,
}

/// One reading of `/proc/interrupts`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InterruptCounts {
    lines: Vec<(String, Vec<u64>)>,
}

impl InterruptCounts {
    /// Reads `/proc/interrupts`; empty where it cannot be read.
    pub fn read() -> Self {
        std::fs::read_to_string("/proc/interrupts").map(|t| Self::parse(&t)).unwrap_or_default()
    }

    /// Parses the text of `/proc/interrupts`: a header of CPU names, then
    /// `NAME: count count ... description` per line.
    pub fn parse(text: &str) -> Self {
        let mut lines = text.lines();
        let cpus = lines.next().map_or(0, |h| h.split_whitespace().count());
        let lines = lines
            .filter_map(|line| {
                let (name, rest) = line.split_once(':')?;
                let counts: Vec<u64> =
                    rest.split_whitespace().take(cpus).map_while(|w| w.parse().ok()).collect::<Vec<_>>();
                (!counts.is_empty()).then(|| (name.trim().to_owned(), counts))
            })
            .collect();
        InterruptCounts { lines }
    }

    /// The rates from `self` to the later reading `later`, `seconds` apart.
    pub fn rates_until(&self, later: &InterruptCounts, seconds: f64) -> InterruptRates {
        let seconds = seconds.max(f64::MIN_POSITIVE);
        let rates = later
            .lines
            .iter()
            .filter_map(|(name, after)| {
                let (_, before) = self.lines.iter().find(|(n, _)| n == name)?;
                let per_core = after.iter().zip(before).map(|(a, b)| a.saturating_sub(*b) as f64 / seconds).collect();
                Some((name.clone(), per_core))
            })
            .collect();
        InterruptRates { rates }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// `n` gaps of `len` ns at uniformly random times within `seconds`.
    fn random_gaps(n: usize, len: u64, seconds: f64, seed: u64) -> Vec<(u64, u64)> {
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..n).map(|_| (rng.random_range(0..(seconds * 1e9) as u64), len)).collect()
    }

    #[test]
    fn a_tick_and_a_slower_drifting_train_are_told_apart_from_random_gaps() {
        let seconds = 5.0;
        let mut gaps = Vec::new();
        // 250 Hz, at 0.713 ms past each 4 ms, 30 µs, in 9 of 10 periods.
        for k in 0..1250u64 {
            if k % 10 != 3 {
                gaps.push((713_000 + k * 4_000_000, 30_000));
            }
        }
        // 100 Hz drifting 0.5 µs a period (another clock), 50 µs.
        for k in 0..500u64 {
            gaps.push((7_145_000 + k * 10_000_500, 50_000));
        }
        // 300 random gaps of 25 µs.
        gaps.extend(random_gaps(300, 25_000, seconds, 1));
        let (trains, of) = find_trains(&gaps, seconds);
        assert_eq!(trains.len(), 2, "{trains:?}");
        assert!((trains[0].period_us - 4000.0).abs() < 1.0, "{trains:?}");
        assert!((trains[1].period_us - 10_000.5).abs() < 2.0, "{trains:?}");
        assert!(trains[0].gaps >= 1125 && trains[0].gaps <= 1150, "{trains:?}");
        assert!(trains[1].gaps >= 495 && trains[1].gaps <= 510, "{trains:?}");
        assert!((trains[0].share_of_periods - 0.9).abs() < 0.02, "{trains:?}");
        assert!((trains[0].lost_share - 1125.0 * 30e-6 / seconds).abs() < 1e-4, "{trains:?}");
        assert_eq!(trains[1].median_us, 50.0);
        // Most random gaps are in no train (a few land near a train's gap).
        let random_in_trains = of[1625..].iter().filter(|t| t.is_some()).count();
        assert!(random_in_trains < 30, "{random_in_trains} random gaps put in a train");
    }

    #[test]
    fn random_gaps_make_no_train() {
        let gaps = random_gaps(3000, 30_000, 5.0, 2);
        let (trains, of) = find_trains(&gaps, 5.0);
        assert!(trains.is_empty(), "{trains:?}");
        assert!(of.iter().all(Option::is_none));
        assert_eq!(find_trains(&[], 1.0).0, vec![]);
        // A loop gapping 50 000 times a second is not searched.
        let busy: Vec<(u64, u64)> = (0..50_000u64).map(|k| (k * 20_000, 21_000)).collect();
        assert!(find_trains(&busy, 1.0).0.is_empty());
    }

    #[test]
    fn interrupt_rates_come_from_two_readings_of_proc_interrupts() {
        let before = InterruptCounts::parse(
            "           CPU0       CPU1       \n 36:          0      33813 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\nLOC:      58567      60597   Local timer interrupts\nERR:          0\n",
        );
        let after = InterruptCounts::parse(
            "           CPU0       CPU1       \n 36:          0      33913 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\nLOC:      61067      63107   Local timer interrupts\nERR:          0\n",
        );
        let rates = before.rates_until(&after, 10.0);
        assert_eq!(rates.rates[0], ("36".to_owned(), vec![0.0, 10.0]));
        assert_eq!(rates.rates[1], ("LOC".to_owned(), vec![250.0, 251.0]));
        let mut tick = GapTrain {
            period_us: 4000.0,
            gaps: 1000,
            share_of_gaps: 0.6,
            share_of_periods: 0.8,
            lost_share: 0.01,
            median_us: 30.0,
            source: None,
        };
        tick.explain(&rates, 1);
        assert!(tick.source.as_deref().is_some_and(|s| s.contains("LOC 251/s")), "{tick:?}");
        let mut other = GapTrain { period_us: 10_000.0, ..tick.clone() };
        other.explain(&rates, 1);
        assert!(other.source.as_deref().is_some_and(|s| s.starts_with("no interrupt")), "{other:?}");
        other.explain(&InterruptRates::default(), 1);
        assert_eq!(other.source, None, "nothing read, nothing said");
    }
}
