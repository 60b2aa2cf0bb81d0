//! A zero-copy threshold that finds itself: the paper's future work (§7).
//!
//! [`AdaptiveThreshold`] is told, after each batch, how many requests a
//! server handled and how long that took, and answers which threshold to
//! use next. It first measures every candidate threshold (0, every field
//! zero-copy; powers of two from 64 B to 16 KiB; and "never"), keeps the cheapest for a while, then
//! measures its two neighbours and itself again and moves when a neighbour
//! is cheaper by more than the noise margin: a hill climb that follows the
//! workload when it changes. Cost is busy nanoseconds per request, which is
//! what the threshold trades (a copy's CPU time against a zero-copy entry's
//! bookkeeping and the receiver's cache misses).
//!
//! Two things make a busy server's cost per request noisy, and the
//! controller is built against both:
//!
//! - **Drift.** The cost per request depends on the load (a batch of one
//!   request pays the whole per-batch overhead; a batch of 32 shares it),
//!   and the load changes while a server runs. Candidates measured one
//!   after another would be compared at different loads. So a measurement
//!   interleaves them: [`ROUNDS`] rounds, each giving every candidate of the
//!   set a slice of `epoch_requests / ROUNDS` requests, in alternating
//!   order (a steady drift then weighs all alike), and the totals per
//!   candidate are compared.
//! - **Stalls.** A virtual machine takes the core away for milliseconds at
//!   a time; one such batch would outweigh thousands of requests. A batch
//!   is counted at most at [`STALL_CAP`] times the cheapest cost per request
//!   measured so far.
//!
//! It is pure bookkeeping — no clock, no I/O — so servers feed it whatever
//! they measure and tests feed it a cost model.

use super::{ONLY_COPY, ONLY_ZERO_COPY};

/// Thresholds the controller chooses from, ascending. 0 is there because
/// on shared memory a server answering Google's lists (34 % of values
/// <= 8 B) measured 8-17 % cheaper sending every value zero-copy than at 64
/// or 128 B, though copying wins for lists of tiny values only.
pub const CANDIDATES: [usize; 11] = [ONLY_ZERO_COPY, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, ONLY_COPY];

/// Rounds of a measurement: each candidate of the set is measured this many
/// times, interleaved with the others.
pub const ROUNDS: u64 = 8;

/// A batch is counted at most at this many times the cheapest cost per
/// request measured so far (a stalled core, not the threshold).
pub const STALL_CAP: f64 = 4.0;

/// Settings of an [`AdaptiveThreshold`].
#[derive(Clone, Copy, Debug)]
pub struct AdaptiveConfig {
    /// Requests per candidate per measurement (split into [`ROUNDS`]
    /// slices), and the length of one epoch of holding.
    pub epoch_requests: u64,
    /// Epochs spent on the chosen threshold between two measurements of
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
    /// Measuring `set` (indices into [`CANDIDATES`]) round-robin: `pos` is
    /// the one being measured, `rounds_left` counts down. `incumbent` is
    /// the held choice whose neighbours are measured (`None`: the first
    /// survey of every candidate).
    Measure { set: Vec<usize>, pos: usize, rounds_left: u64, incumbent: Option<usize> },
    /// Using the chosen one; `left` epochs to go.
    Hold { left: u32 },
}

/// The candidate measured at `pos` of a round: forwards in one round,
/// backwards in the next, so that a load drifting steadily through an even
/// number of rounds weighs every candidate alike.
fn serpentine(len: usize, pos: usize, rounds_left: u64) -> usize {
    if (ROUNDS - rounds_left).is_multiple_of(2) {
        pos
    } else {
        len - 1 - pos
    }
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
/// let mut t = AdaptiveThreshold::new(AdaptiveConfig { epoch_requests: 80, hold_epochs: 5, margin: 0.02 });
/// for _ in 0..2000 {
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
    /// The cheapest of `cost`, kept so that capping a stalled batch costs
    /// no scan per batch.
    floor: Option<f64>,
    /// The running measurement's totals per candidate: (requests, busy ns).
    totals: [(u64, u64); CANDIDATES.len()],
    phase: Phase,
    /// Since the last slice or epoch ended.
    requests: u64,
    busy_ns: u64,
    /// How many times a measurement's choice changed.
    changes: u64,
}

impl AdaptiveThreshold {
    /// Starts by surveying every candidate.
    pub fn new(config: AdaptiveConfig) -> Self {
        AdaptiveThreshold {
            config: AdaptiveConfig { epoch_requests: config.epoch_requests.max(1), ..config },
            current: 0,
            cost: [None; CANDIDATES.len()],
            floor: None,
            totals: [(0, 0); CANDIDATES.len()],
            phase: Phase::Measure {
                set: (0..CANDIDATES.len()).collect(),
                pos: 0,
                rounds_left: ROUNDS,
                incumbent: None,
            },
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

    /// The threshold the last measurement chose (what it holds between
    /// measurements); `None` during the first survey.
    pub fn choice(&self) -> Option<usize> {
        match self.phase {
            Phase::Hold { .. } => Some(CANDIDATES[self.current]),
            Phase::Measure { incumbent, .. } => incumbent.map(|i| CANDIDATES[i]),
        }
    }

    /// Times a measurement chose another threshold than the one before
    /// (not counting the switches while measuring).
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
        let cap = self.floor.map(|c| c * STALL_CAP * requests as f64);
        self.requests += requests;
        self.busy_ns += cap.map_or(busy_ns, |cap| busy_ns.min(cap as u64));
        let slice = (self.config.epoch_requests / ROUNDS).max(1);
        let needed = if self.is_holding() { self.config.epoch_requests } else { slice };
        if self.requests < needed {
            return None;
        }
        let (requests, busy_ns) = (std::mem::take(&mut self.requests), std::mem::take(&mut self.busy_ns));
        let before = self.current;
        self.phase = match std::mem::replace(&mut self.phase, Phase::Hold { left: 0 }) {
            Phase::Hold { left } if left > 1 => Phase::Hold { left: left - 1 },
            Phase::Hold { .. } => {
                let incumbent = self.current;
                let set: Vec<usize> =
                    [incumbent.checked_sub(1), Some(incumbent), Some(incumbent + 1).filter(|&i| i < CANDIDATES.len())]
                        .into_iter()
                        .flatten()
                        .collect();
                self.start(set, Some(incumbent))
            }
            Phase::Measure { set, pos, rounds_left, incumbent } => {
                let t = &mut self.totals[self.current];
                (t.0, t.1) = (t.0 + requests, t.1 + busy_ns);
                let (pos, rounds_left) =
                    if pos + 1 < set.len() { (pos + 1, rounds_left) } else { (0, rounds_left - 1) };
                if rounds_left > 0 {
                    self.current = set[serpentine(set.len(), pos, rounds_left)];
                    Phase::Measure { set, pos, rounds_left, incumbent }
                } else {
                    self.decide(&set, incumbent)
                }
            }
        };
        (self.current != before).then(|| self.threshold())
    }

    /// Begins measuring `set`, from its first candidate.
    fn start(&mut self, set: Vec<usize>, incumbent: Option<usize>) -> Phase {
        for &i in &set {
            self.totals[i] = (0, 0);
        }
        self.current = set[0];
        Phase::Measure { set, pos: 0, rounds_left: ROUNDS, incumbent }
    }

    /// Ends a measurement: records each candidate's cost, chooses, holds.
    fn decide(&mut self, set: &[usize], incumbent: Option<usize>) -> Phase {
        for &i in set {
            let (requests, busy_ns) = self.totals[i];
            if requests > 0 {
                self.cost[i] = Some(busy_ns as f64 / requests as f64);
            }
        }
        self.floor = self.cost.iter().flatten().copied().reduce(f64::min);
        let cost = |i: usize| self.cost[i].unwrap_or(f64::INFINITY);
        let best = set.iter().copied().min_by(|&a, &b| cost(a).total_cmp(&cost(b))).unwrap_or(self.current);
        self.current = match incumbent {
            // The survey: the cheapest of all.
            None => best,
            // Move only for a clear gain.
            Some(inc) if cost(best) < cost(inc) * (1.0 - self.config.margin) => best,
            Some(inc) => inc,
        };
        if incumbent.is_some_and(|c| c != self.current) {
            self.changes += 1;
        }
        Phase::Hold { left: self.config.hold_epochs.max(1) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the controller against a cost model for `epochs` epochs' worth
    /// of requests (in batches of a measurement slice), then until it holds
    /// a choice; returns the share of requests served at `best`.
    fn run(t: &mut AdaptiveThreshold, epochs: usize, cost: impl Fn(usize) -> u64, best: usize) -> f64 {
        let batch = (t.config.epoch_requests / ROUNDS).max(1);
        let (mut at_best, mut n) = (0, 0);
        while n < epochs * ROUNDS as usize || !t.is_holding() {
            at_best += usize::from(t.threshold() == best);
            t.observe(batch, batch * cost(t.threshold()));
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
        assert_eq!(t.choice(), Some(256));
        // 2048 -> 1024 -> 512 -> 256, one step per measurement.
        assert_eq!(t.changes(), 3);
    }

    #[test]
    fn a_drifting_load_does_not_pick_the_last_measured() {
        // 1024 B is 10 % cheaper than the rest, while the cost of every
        // request falls steadily to half over the survey (the load rises,
        // batches grow). Measured one after another, "never" (measured last)
        // would look cheapest.
        let config = AdaptiveConfig { epoch_requests: 800, hold_epochs: 5, margin: 0.02 };
        let mut t = AdaptiveThreshold::new(config);
        let survey_batches = (CANDIDATES.len() as u64 * ROUNDS) as f64;
        let mut batch = 0.0;
        while batch < survey_batches {
            let base = if t.threshold() == 1024 { 900.0 } else { 1000.0 };
            let drift = 1.0 - 0.5 * batch / survey_batches;
            t.observe(100, (100.0 * base * drift) as u64);
            batch += 1.0;
        }
        assert!(t.is_holding());
        assert_eq!(t.threshold(), 1024, "{:?}", t.costs().collect::<Vec<_>>());
    }

    #[test]
    fn a_stalled_batch_does_not_decide() {
        // 512 B is best by 20 %; one batch of its measurement takes 5 ms
        // (the core was taken away), 8 times the measurement's whole cost.
        let config = AdaptiveConfig { epoch_requests: 800, hold_epochs: 5, margin: 0.02 };
        let mut t = AdaptiveThreshold::new(config);
        run(&mut t, 30, |th| if th == 512 { 800 } else { 1000 }, 512);
        assert_eq!(t.threshold(), 512);
        let mut stalled = false;
        while t.is_holding() {
            t.observe(10, 10 * 800);
        }
        // Batches of 10 requests, slices of 100.
        while !t.is_holding() {
            let cost = if t.threshold() == 512 { 800 } else { 1000 };
            let stall = if t.threshold() == 512 && !stalled { 5_000_000 } else { 0 };
            stalled |= stall > 0;
            t.observe(10, 10 * cost + stall);
        }
        assert!(stalled);
        assert_eq!(t.threshold(), 512, "{:?}", t.costs().collect::<Vec<_>>());
    }

    #[test]
    fn never_copying_and_always_copying_are_reachable() {
        let config = AdaptiveConfig { epoch_requests: 10, hold_epochs: 5, margin: 0.02 };
        let mut t = AdaptiveThreshold::new(config);
        run(&mut t, 100, |th| if th == ONLY_COPY { 10 } else { 100 }, ONLY_COPY);
        assert_eq!(t.threshold(), ONLY_COPY);
        let mut t = AdaptiveThreshold::new(config);
        run(&mut t, 100, |th| th.min(100_000) as u64 + 10, ONLY_ZERO_COPY);
        assert_eq!(t.threshold(), ONLY_ZERO_COPY);
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
