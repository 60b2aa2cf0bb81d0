//! A zero-copy threshold that finds itself: the paper's future work (§7).
//!
//! [`AdaptiveThreshold`] is told, after each batch, how many requests a
//! server handled and how long that took, and answers which threshold to
//! use next. It measures every candidate threshold (powers of two from 64 B
//! to 16 KiB, and "never") for one epoch, keeps the cheapest for a while,
//! then measures its two neighbours and the incumbent again and moves when a
//! neighbour is cheaper by more than the noise margin: a hill climb that
//! follows the workload when it changes. Cost is busy nanoseconds per
//! request, which is what the threshold trades (a copy's CPU time against a
//! zero-copy entry's bookkeeping and the receiver's cache misses).
//!
//! It is pure bookkeeping — no clock, no I/O — so servers feed it whatever
//! they measure and tests feed it a cost model.

use super::ONLY_COPY;

/// Thresholds the controller chooses from, ascending.
pub const CANDIDATES: [usize; 10] = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, ONLY_COPY];

/// Settings of an [`AdaptiveThreshold`].
#[derive(Clone, Copy, Debug)]
pub struct AdaptiveConfig {
    /// Requests per measurement epoch.
    pub epoch_requests: u64,
    /// Epochs spent on the chosen threshold between two rounds of probing
    /// its neighbours.
    pub hold_epochs: u32,
    /// A neighbour must be cheaper than the incumbent by this fraction to
    /// replace it (measurement noise).
    pub margin: f64,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig { epoch_requests: 8192, hold_epochs: 40, margin: 0.02 }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Phase {
    /// The first sweep over every candidate, in order.
    Survey,
    /// Using the chosen one; `left` epochs to go.
    Hold { left: u32 },
    /// Measuring the incumbent's neighbours and then the incumbent again;
    /// `queue` is what is still to be measured after the current one.
    Probe { incumbent: usize, queue: Vec<usize> },
}

/// The controller (see the module docs).
///
/// # Examples
///
/// ```
/// use cornflakes::field::{AdaptiveConfig, AdaptiveThreshold};
///
/// // A made-up machine where a 512 B field costs 512 ns to copy and 300 ns
/// // to send zero-copy: any threshold up to 512 B is best.
/// let mut t = AdaptiveThreshold::new(AdaptiveConfig { epoch_requests: 10, hold_epochs: 5, margin: 0.02 });
/// for _ in 0..200 {
///     let cost_per_request = if t.threshold() <= 512 { 300 } else { 512 };
///     t.observe(10, 10 * cost_per_request);
/// }
/// assert!(t.threshold() <= 512);
/// ```
#[derive(Clone, Debug)]
pub struct AdaptiveThreshold {
    config: AdaptiveConfig,
    /// Index into [`CANDIDATES`] in use.
    current: usize,
    /// Latest measured cost (ns per request) per candidate.
    cost: [Option<f64>; CANDIDATES.len()],
    phase: Phase,
    /// The epoch being measured.
    requests: u64,
    busy_ns: u64,
    /// How many times the threshold changed.
    changes: u64,
}

impl AdaptiveThreshold {
    /// Starts by surveying every candidate, smallest first.
    pub fn new(config: AdaptiveConfig) -> Self {
        AdaptiveThreshold {
            config: AdaptiveConfig { epoch_requests: config.epoch_requests.max(1), ..config },
            current: 0,
            cost: [None; CANDIDATES.len()],
            phase: Phase::Survey,
            requests: 0,
            busy_ns: 0,
            changes: 0,
        }
    }

    /// The threshold to use now.
    pub fn threshold(&self) -> usize {
        CANDIDATES[self.current]
    }

    /// Whether it is using its choice (not measuring other candidates).
    pub fn is_holding(&self) -> bool {
        matches!(self.phase, Phase::Hold { .. })
    }

    /// Times the threshold changed so far.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The last cost measured per candidate: (threshold, ns per request).
    pub fn costs(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        CANDIDATES.iter().zip(&self.cost).filter_map(|(&t, c)| Some((t, (*c)?)))
    }

    /// Records `requests` handled in `busy_ns`; returns the new threshold
    /// when it changes.
    pub fn observe(&mut self, requests: u64, busy_ns: u64) -> Option<usize> {
        self.requests += requests;
        self.busy_ns += busy_ns;
        if self.requests < self.config.epoch_requests {
            return None;
        }
        self.cost[self.current] = Some(self.busy_ns as f64 / self.requests as f64);
        (self.requests, self.busy_ns) = (0, 0);
        let before = self.current;
        let hold = Phase::Hold { left: self.config.hold_epochs.max(1) };
        self.phase = match std::mem::replace(&mut self.phase, Phase::Survey) {
            Phase::Survey if self.current + 1 < CANDIDATES.len() => {
                self.current += 1;
                Phase::Survey
            }
            Phase::Survey => {
                self.current = self.cheapest(0..CANDIDATES.len());
                hold
            }
            Phase::Hold { left } if left > 1 => Phase::Hold { left: left - 1 },
            Phase::Hold { .. } => {
                let incumbent = self.current;
                let mut queue: Vec<usize> =
                    [incumbent.checked_sub(1), Some(incumbent + 1).filter(|&i| i < CANDIDATES.len())]
                        .into_iter()
                        .flatten()
                        .collect();
                queue.push(incumbent);
                self.current = queue.remove(0);
                Phase::Probe { incumbent, queue }
            }
            Phase::Probe { incumbent, mut queue } if !queue.is_empty() => {
                self.current = queue.remove(0);
                Phase::Probe { incumbent, queue }
            }
            Phase::Probe { incumbent, .. } => {
                // Fresh figures for the incumbent and both neighbours: move
                // only for a clear gain.
                let best = self.cheapest(incumbent.saturating_sub(1)..(incumbent + 2).min(CANDIDATES.len()));
                let cost = |i: usize| self.cost[i].unwrap_or(f64::INFINITY);
                self.current = if cost(best) < cost(incumbent) * (1.0 - self.config.margin) { best } else { incumbent };
                hold
            }
        };
        (self.current != before).then(|| {
            self.changes += 1;
            self.threshold()
        })
    }

    fn cheapest(&self, range: std::ops::Range<usize>) -> usize {
        range
            .filter_map(|i| Some((i, self.cost[i]?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map_or(self.current, |(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the controller against a cost model for `epochs` epochs, then
    /// until it holds a choice; returns the share of epochs served at
    /// `best`.
    fn run(t: &mut AdaptiveThreshold, epochs: usize, cost: impl Fn(usize) -> u64, best: usize) -> f64 {
        let (mut at_best, mut n) = (0, 0);
        while n < epochs || !t.is_holding() {
            at_best += usize::from(t.threshold() == best);
            t.observe(t.config.epoch_requests, t.config.epoch_requests * cost(t.threshold()));
            n += 1;
        }
        at_best as f64 / n as f64
    }

    #[test]
    fn finds_the_cheapest_threshold_and_follows_a_change() {
        let config = AdaptiveConfig { epoch_requests: 100, hold_epochs: 20, margin: 0.02 };
        let mut t = AdaptiveThreshold::new(config);
        // A valley at 2048 B.
        let valley = |at: usize| move |th: usize| 1000 + (th.min(1 << 20) as i64 - at as i64).unsigned_abs() / 8;
        let share = run(&mut t, 400, valley(2048), 2048);
        assert_eq!(t.threshold(), 2048);
        assert!(share > 0.8, "served at the best threshold {share:.2} of the time");
        // The workload changes: now 256 B is best. The hill climb walks there.
        run(&mut t, 400, valley(256), 256);
        assert_eq!(t.threshold(), 256, "{:?}", t.costs().collect::<Vec<_>>());
        assert!(t.changes() >= 4);
    }

    #[test]
    fn never_copying_and_always_copying_are_reachable() {
        let config = AdaptiveConfig { epoch_requests: 10, hold_epochs: 5, margin: 0.02 };
        let mut t = AdaptiveThreshold::new(config);
        run(&mut t, 100, |th| if th == ONLY_COPY { 10 } else { 100 }, ONLY_COPY);
        assert_eq!(t.threshold(), ONLY_COPY);
        let mut t = AdaptiveThreshold::new(config);
        run(&mut t, 100, |th| th.min(100_000) as u64, 64);
        assert_eq!(t.threshold(), 64);
    }

    #[test]
    fn a_small_difference_does_not_move_it() {
        let config = AdaptiveConfig { epoch_requests: 10, hold_epochs: 3, margin: 0.05 };
        let mut t = AdaptiveThreshold::new(config);
        // Survey: 1024 is cheapest by far; later its neighbour 2048 gets 1 %
        // cheaper, within the margin.
        run(&mut t, 10, |th| if th == 1024 { 1000 } else { 2000 }, 1024);
        assert_eq!(t.threshold(), 1024);
        let share = run(
            &mut t,
            100,
            |th| {
                if th == 1024 {
                    1000
                } else if th == 2048 {
                    990
                } else {
                    2000
                }
            },
            1024,
        );
        assert_eq!(t.threshold(), 1024);
        assert!(share > 0.4, "{share}");
    }
}
