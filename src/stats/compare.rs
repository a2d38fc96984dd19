//! The statistics of a comparison (SPEC §9), in one place the simulation exercises directly:
//! per cell, Newcombe's hybrid score interval for a difference of two proportions; pooled
//! (overall, per tag), the difference over the tasks both rows have, its interval and its
//! test ([`super::gate`]: the test, the family the gate decides over, its power).
//!
//! Every difference is **B − A**: A is the baseline, B the change.

use super::direction::Direction;
use crate::stats::IntervalKind;
use crate::stats::interval::{self, CONFIDENCE, Interval};
use serde::{Deserialize, Serialize};
use statrs::distribution::{Beta, ContinuousCDF, Normal};
use std::collections::BTreeMap;

pub use super::gate::ALPHA;

/// How the pooled interval is computed, in words for the page and the terminal.
pub const POOLED_METHOD: &str = "about these tasks: per task, B's pass rate minus A's over the tasks both rows scored, averaged with every task weighing the same; 95 % stratified Miettinen–Nurminen score interval with equal task weights";

/// How the gate's test is computed, in words for the page and the terminal.
pub const GATE_METHOD: &str = "one-sided exact stratified permutation test of the same equal-weight difference (under no difference, B's and A's samples of a task are exchangeable; with equal k it is the exact conditional Cochran–Mantel–Haenszel test), per pooled row and per task; weighted Holm over the family: half of α shared by the pooled rows, half by the tasks, a task or row that could not reach significance at its share whatever its outcome left out and its share given to the others";

/// How the per-cell interval is computed.
pub const CELL_METHOD: &str =
    "Newcombe's hybrid score interval (method 10 of Newcombe 1998, from two Wilson intervals)";

/// Newcombe's hybrid score interval (method 10 of "Interval estimation for the difference
/// between independent proportions: comparison of eleven methods", 1998) for `pB − pA` at 95 %,
/// built from the two Wilson score intervals. `None` when either side has no trial.
pub fn newcombe(a_passes: u64, a_trials: u64, b_passes: u64, b_trials: u64) -> Option<Interval> {
    let wa = interval::interval(IntervalKind::Wilson, a_passes, a_trials)?;
    let wb = interval::interval(IntervalKind::Wilson, b_passes, b_trials)?;
    let pa = a_passes.min(a_trials) as f64 / a_trials as f64;
    let pb = b_passes.min(b_trials) as f64 / b_trials as f64;
    let d = pb - pa;
    Some(Interval {
        lower: d - ((pb - wb.lower).powi(2) + (wa.upper - pa).powi(2)).sqrt(),
        upper: d + ((wb.upper - pb).powi(2) + (pa - wa.lower).powi(2)).sqrt(),
    })
}

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny PRNG whose output is fixed by its definition,
/// so a bootstrap seeded with it gives the same interval on every platform and every version
/// of every dependency (rand's `StdRng` promises neither).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), without modulo bias: draws from the largest multiple of `n`
    /// below 2^64 only.
    pub fn below(&mut self, n: u64) -> u64 {
        let n = n.max(1);
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// FNV-1a of a text: mixes what is compared into the seed, the same on every platform.
pub fn fnv1a(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// One task both rows have: A's and B's passes over scored samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskPair {
    pub a_passes: u64,
    pub a_scored: u64,
    pub b_passes: u64,
    pub b_scored: u64,
}

impl TaskPair {
    /// A's pass rate (the task must have a scored sample on both sides).
    pub fn a_rate(&self) -> f64 {
        self.a_passes.min(self.a_scored) as f64 / self.a_scored as f64
    }

    /// B's pass rate.
    pub fn b_rate(&self) -> f64 {
        self.b_passes.min(self.b_scored) as f64 / self.b_scored as f64
    }
}

/// A pooled difference over the tasks both rows have: about these tasks, each weighing the same.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pooled {
    /// Tasks in the comparison (scored in both rows).
    pub tasks: usize,
    /// A's and B's mean per-task pass rate over those tasks.
    pub a_rate: f64,
    pub b_rate: f64,
    /// `b_rate − a_rate`.
    pub difference: f64,
    /// 95 % stratified score interval of the difference ([`difference_interval`]).
    pub interval: Interval,
    /// One-sided p-value of "B passes no less often than A on every task" against "B drops"
    /// ([`drop_p_value`]), for the family's correction.
    pub p_value: f64,
}

impl Pooled {
    /// What the 95 % interval says, uncorrected.
    pub fn direction(&self) -> Direction {
        Direction::of(Some(&self.interval))
    }
}

/// The tasks both rows scored: the only ones a difference is about. `None` when there is none.
fn both_scored(pairs: &[TaskPair]) -> Option<Vec<TaskPair>> {
    let pairs: Vec<TaskPair> = pairs
        .iter()
        .copied()
        .filter(|p| p.a_scored > 0 && p.b_scored > 0)
        .collect();
    (!pairs.is_empty()).then_some(pairs)
}

/// The pooled comparison of paired tasks: the mean per-task difference, its stratified score
/// interval and the gate's one-sided p-value, a test of that same difference. `None` without a
/// task that both rows scored. Exact: no resampling, so no seed and no floor under the p-value
/// other than the data's own.
pub fn pooled(pairs: &[TaskPair]) -> Option<Pooled> {
    let pairs = both_scored(pairs)?;
    let n = pairs.len() as f64;
    let a_rate = pairs.iter().map(|p| p.a_rate()).sum::<f64>() / n;
    let b_rate = pairs.iter().map(|p| p.b_rate()).sum::<f64>() / n;
    Some(Pooled {
        tasks: pairs.len(),
        a_rate,
        b_rate,
        difference: b_rate - a_rate,
        interval: difference_interval(&pairs)?,
        p_value: drop_p_value(&pairs),
    })
}

/// Pooled comparisons remembered by their tasks' counts. [`pooled`] is a pure function of the
/// counts of the tasks both rows scored, and its exact test and score interval are most of a
/// comparison's time; a rebuild after one new run changes the counts of the pairs with that
/// row only, so the others are taken from the previous build (its cache) rather than computed
/// again. The results are the bits computed then, so a rebuild's pages are the same bytes as a
/// build from nothing.
#[derive(Debug, Default)]
pub struct Memo {
    known: BTreeMap<Vec<TaskPair>, Pooled>,
    /// Every pooled comparison asked for in this build, for the next one.
    asked: std::sync::Mutex<BTreeMap<Vec<TaskPair>, Pooled>>,
    /// The detectable drops simulated in this build, by design (sorted) and level: a baseline
    /// family and the pairs of one collection repeat them row after row.
    drops: std::sync::Mutex<BTreeMap<DesignAtLevel, Option<f64>>>,
}

/// A pooled row's design (each task's scored samples in A and B, sorted) and a level (its
/// bits): what a detectable drop is a function of.
type DesignAtLevel = (super::gate::Design, u64);

/// What a [`Memo`] keeps between builds: the code it was computed with ([`memo_code`]) and the
/// results.
pub type Remembered = (String, Vec<(Vec<TaskPair>, Pooled)>);

/// What [`pooled`] is computed with: this file, the test's module, the interval module it takes its level from,
/// and the versions of the crates it calls (statrs). A remembered result is used only under
/// the same.
pub fn memo_code() -> String {
    use sha2::{Digest, Sha256};
    let mut all = Sha256::new();
    for s in [
        env!("CARGO_PKG_VERSION"),
        include_str!("compare.rs"),
        include_str!("gate.rs"),
        include_str!("interval.rs"),
        include_str!("../../Cargo.lock"),
    ] {
        all.update(Sha256::digest(s.as_bytes()));
    }
    all.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl Memo {
    /// From what a previous build remembered; empty when it was computed with other code.
    pub fn new(remembered: Option<Remembered>) -> Memo {
        let known = remembered
            .filter(|(code, _)| *code == memo_code())
            .map(|(_, results)| results.into_iter().collect())
            .unwrap_or_default();
        Memo {
            known,
            asked: Default::default(),
            drops: Default::default(),
        }
    }

    /// [`super::gate::detectable_drop`] of each (design, level), each simulated once in this
    /// build, the new ones each on its own core.
    pub fn detectable_drops(&self, wanted: &[(Vec<(u64, u64)>, f64)]) -> Vec<Option<f64>> {
        use rayon::prelude::*;
        let key = |(d, level): &(Vec<(u64, u64)>, f64)| {
            let mut d = d.clone();
            d.sort_unstable();
            (d, level.to_bits())
        };
        let keys: Vec<DesignAtLevel> = wanted.iter().map(key).collect();
        let known = |k: &DesignAtLevel| {
            self.drops
                .lock()
                .map(|m| m.get(k).copied())
                .unwrap_or_default()
        };
        let mut new: Vec<DesignAtLevel> = keys
            .iter()
            .filter(|k| known(k).is_none())
            .cloned()
            .collect();
        new.sort();
        new.dedup();
        let computed: Vec<Option<f64>> = new
            .par_iter()
            .map(|(d, level)| super::gate::detectable_drop(d, f64::from_bits(*level)))
            .collect();
        if let Ok(mut m) = self.drops.lock() {
            m.extend(new.into_iter().zip(computed));
        }
        keys.iter().map(|k| known(k).flatten()).collect()
    }

    /// [`pooled`] of `pairs`, remembered.
    pub fn pooled(&self, pairs: &[TaskPair]) -> Option<Pooled> {
        let pairs = both_scored(pairs)?;
        let p = match self.known.get(&pairs) {
            Some(p) => *p,
            None => pooled(&pairs)?,
        };
        if let Ok(mut asked) = self.asked.lock() {
            asked.insert(pairs, p);
        }
        Some(p)
    }

    /// What this build asked for, to remember for the next (what it did not ask for is
    /// forgotten).
    pub fn remembered(self) -> Remembered {
        let asked = self.asked.into_inner().unwrap_or_else(|e| e.into_inner());
        (memo_code(), asked.into_iter().collect())
    }
}

/// The two-sided 95 % critical value of the standard normal.
fn z95() -> f64 {
    Normal::standard().inverse_cdf(1.0 - (1.0 - CONFIDENCE) / 2.0)
}

/// The pooled interval of one row over fixed tasks: the mean of the tasks' pass rates, each
/// task weighing the same, with an exact (Clopper–Pearson) interval on an effective sample
/// (Korn & Graubard 1998): `n* = C² / Σ 1/mᵢ` samples of which `p̄ · n*` passed. With equal k
/// per task that is Clopper–Pearson on the pooled samples exactly; unequal k (transport errors,
/// uneven collections) shrink `n*` to the precision the equal-weight mean really has.
///
/// Why this holds for these tasks: with p̄ fixed, `Σ pᵢ(1 − pᵢ) ≤ C · p̄(1 − p̄)`, so tasks that
/// differ only narrow the spread of the pooled count; the binomial interval on the pooled
/// samples is then conservative, never too narrow. Clopper–Pearson rather than Wilson because
/// plain Wilson's coverage dips to 84.5 % for 3 tasks × 5 samples all at 0.99 (SPEC §9). It is
/// never zero-width. `None` without a scored sample. Validated on SPEC §9's grid by
/// `examples/compare-grid` (docs/compare-grid.md; its corners in `tests/it/compare_stats.rs`).
pub fn pooled_rate_interval(counts: &[(u64, u64)]) -> Option<Interval> {
    let counts: Vec<(u64, u64)> = counts.iter().copied().filter(|c| c.1 > 0).collect();
    if counts.is_empty() {
        return None;
    }
    let c = counts.len() as f64;
    let mean = counts
        .iter()
        .map(|&(x, m)| x.min(m) as f64 / m as f64)
        .sum::<f64>()
        / c;
    let n = c * c / counts.iter().map(|&(_, m)| 1.0 / m as f64).sum::<f64>();
    let x = mean * n;
    let alpha = 1.0 - CONFIDENCE;
    // Exact at the ends: no pass means a lower bound of 0, every pass an upper bound of 1 (the
    // Beta would have a zero shape parameter there).
    let lower = if x <= 1e-12 {
        0.0
    } else {
        Beta::new(x, n - x + 1.0)
            .map(|b| b.inverse_cdf(alpha / 2.0))
            .unwrap_or(0.0)
    };
    let upper = if x >= n - 1e-12 {
        1.0
    } else {
        Beta::new(x + 1.0, n - x)
            .map(|b| b.inverse_cdf(1.0 - alpha / 2.0))
            .unwrap_or(1.0)
    };
    Some(Interval {
        lower: lower.clamp(0.0, 1.0),
        upper: upper.clamp(0.0, 1.0),
    })
}

/// The restricted maximum-likelihood estimates of one task's pass probabilities under
/// `p_B − p_A = delta` (Miettinen & Nurminen 1985; the closed form of Farrington & Manning 1990,
/// group 1 = B, group 2 = A): returns `(p̃_B, p̃_A)`.
fn restricted(p: &TaskPair, delta: f64) -> (f64, f64) {
    let (n1, n2) = (p.b_scored as f64, p.a_scored as f64);
    let (p1, p2) = (p.b_rate(), p.a_rate());
    let theta = n2 / n1;
    let a = 1.0 + theta;
    let b = -(1.0 + theta + p1 + theta * p2 + delta * (theta + 2.0));
    let c = delta * delta + delta * (2.0 * p1 + theta + 1.0) + p1 + theta * p2;
    let d = -p1 * delta * (1.0 + delta);
    let v = b.powi(3) / (27.0 * a.powi(3)) - b * c / (6.0 * a * a) + d / (2.0 * a);
    let u2 = (b * b / (9.0 * a * a) - c / (3.0 * a)).max(0.0);
    let u = if v < 0.0 { -u2.sqrt() } else { u2.sqrt() };
    let cos = if u == 0.0 {
        0.0
    } else {
        (v / u.powi(3)).clamp(-1.0, 1.0)
    };
    let w = (std::f64::consts::PI + cos.acos()) / 3.0;
    let pb = (2.0 * u * w.cos() - b / (3.0 * a)).clamp(delta.max(0.0), (1.0 + delta).min(1.0));
    (pb, (pb - delta).clamp(0.0, 1.0))
}

/// The stratified score statistic of `D − delta`, every task weighing `1/C`, with Miettinen and
/// Nurminen's variance (restricted estimates, times N/(N − 1) per task).
fn score(pairs: &[TaskPair], observed: f64, delta: f64) -> f64 {
    let c = pairs.len() as f64;
    let var: f64 = pairs
        .iter()
        .map(|p| {
            let (pb, pa) = restricted(p, delta);
            let (nb, na) = (p.b_scored as f64, p.a_scored as f64);
            let total = nb + na;
            (pb * (1.0 - pb) / nb + pa * (1.0 - pa) / na) * total / (total - 1.0)
        })
        .sum::<f64>()
        / (c * c);
    let gap = observed - delta;
    if var <= 0.0 {
        // Only at delta = ±1 (the restricted estimates are then certain): any gap is infinitely
        // many standard errors, none is zero.
        return if gap == 0.0 {
            0.0
        } else {
            gap.signum() * f64::INFINITY
        };
    }
    gap / var.sqrt()
}

/// The gate's p-value for a drop in the pass rate of B against A over `pairs`
/// ([`super::gate::one_sided_p`]).
pub fn drop_p_value(pairs: &[TaskPair]) -> f64 {
    super::gate::one_sided_p(&strata(pairs))
}

/// The tasks as strata of the gate's test: passes over scored samples.
pub fn strata(pairs: &[TaskPair]) -> Vec<super::gate::Stratum> {
    pairs
        .iter()
        .map(|p| super::gate::Stratum {
            a_events: p.a_passes,
            a_trials: p.a_scored,
            b_events: p.b_passes,
            b_trials: p.b_scored,
        })
        .collect()
}

/// The 95 % interval of `B − A`, the mean over tasks of each task's difference of pass rates
/// (equal task weights): the stratified Miettinen–Nurminen score interval, the set of `delta`
/// whose score statistic lies within ±z. Found by bisection (the statistic falls as `delta`
/// rises); never zero-width, since the variance under a `delta` other than the observed one is
/// positive. `None` without a task both rows scored.
pub fn difference_interval(pairs: &[TaskPair]) -> Option<Interval> {
    let pairs = both_scored(pairs)?;
    let c = pairs.len() as f64;
    let observed = pairs.iter().map(|p| p.b_rate() - p.a_rate()).sum::<f64>() / c;
    let z = z95();
    // The bound on one side: the `delta` between `observed` and `end` where |score| = z.
    let bound = |end: f64| {
        if score(&pairs, observed, end).abs() <= z {
            return end;
        }
        let (mut inside, mut outside) = (observed, end);
        for _ in 0..60 {
            let mid = 0.5 * (inside + outside);
            if score(&pairs, observed, mid).abs() <= z {
                inside = mid;
            } else {
                outside = mid;
            }
        }
        0.5 * (inside + outside)
    };
    Some(Interval {
        lower: bound(-1.0),
        upper: bound(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(x: f64, y: f64) -> bool {
        (x - y).abs() < 5e-5
    }

    #[test]
    fn a_memo_gives_the_bits_it_was_given_and_only_under_the_same_code() {
        let pairs = |shift: u64| -> Vec<TaskPair> {
            (0..6)
                .map(|i| TaskPair {
                    a_passes: (i * 3 + shift) % 9,
                    a_scored: 9,
                    b_passes: (i * 5) % 9,
                    b_scored: 9,
                })
                .collect()
        };
        let (x, y) = (pairs(0), pairs(1));
        let fresh = Memo::default();
        assert_eq!(fresh.pooled(&x), pooled(&x));
        // A task one side did not score changes nothing: it is not part of the key.
        let mut with_unscored = x.clone();
        with_unscored.insert(
            2,
            TaskPair {
                a_passes: 0,
                a_scored: 0,
                b_passes: 1,
                b_scored: 3,
            },
        );
        assert_eq!(fresh.pooled(&with_unscored), pooled(&x));
        assert_eq!(fresh.pooled(&[]), None);
        let (code, mut results) = fresh.remembered();
        assert_eq!(code, memo_code());
        assert_eq!(results.len(), 1);
        // What was remembered is what the next build gets, whatever it would compute now: here
        // a p-value nobody computes, to see that it is taken and not recomputed.
        results[0].1.p_value = 0.123;
        let next = Memo::new(Some((code, results.clone())));
        assert_eq!(next.pooled(&x).map(|p| p.p_value), Some(0.123));
        // A pair it had not seen is computed, and both are remembered for the one after.
        assert_eq!(next.pooled(&y), pooled(&y));
        assert_eq!(next.remembered().1.len(), 2);
        // Computed with other code: forgotten.
        let other = Memo::new(Some(("another build".into(), results)));
        assert_eq!(other.pooled(&x), pooled(&x));
    }

    /// Newcombe (1998), Table II, method 10: the published worked examples (θ = p1 − p2, so
    /// here A is the second proportion and B the first).
    #[test]
    fn newcombe_matches_the_published_examples() {
        for ((x1, n1, x2, n2), (lo, hi)) in [
            ((56, 70, 48, 80), (0.0524, 0.3339)),
            ((9, 10, 3, 10), (0.1705, 0.8090)),
            ((5, 56, 0, 29), (-0.0381, 0.1926)),
            ((0, 10, 0, 20), (-0.1611, 0.2775)),
            ((0, 10, 0, 10), (-0.2775, 0.2775)),
            ((10, 10, 0, 20), (0.6791, 1.0000)),
            ((10, 10, 0, 10), (0.6075, 1.0000)),
        ] {
            let iv = newcombe(x2, n2, x1, n1).unwrap();
            assert!(
                close(iv.lower, lo) && close(iv.upper, hi),
                "{x1}/{n1} − {x2}/{n2}: got [{:.4}, {:.4}], published [{lo}, {hi}]",
                iv.lower,
                iv.upper
            );
        }
        assert_eq!(newcombe(1, 0, 1, 3), None);
    }

    #[test]
    fn the_prng_is_fixed_by_its_definition() {
        // The first outputs of SplitMix64 seeded with 0 (the reference implementation's).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let mut r = SplitMix64::new(1);
        assert!((0..1000).all(|_| r.below(7) < 7));
    }

    #[test]
    fn identical_rows_give_no_evidence_and_a_sure_loss_is_worse() {
        let same: Vec<TaskPair> = (0..10)
            .map(|i| TaskPair {
                a_passes: i % 4,
                a_scored: 5,
                b_passes: i % 4,
                b_scored: 5,
            })
            .collect();
        let p = pooled(&same).unwrap();
        assert_eq!(p.difference, 0.0);
        assert!(p.interval.lower < -0.05 && p.interval.upper > 0.05, "{p:?}");
        assert_eq!(p.direction(), Direction::NoEvidence);
        assert!(p.p_value > 0.5, "{p:?}");
        // Every sample passing on both sides: still an interval with width, and no evidence.
        let all = [TaskPair {
            a_passes: 5,
            a_scored: 5,
            b_passes: 5,
            b_scored: 5,
        }; 3];
        let p = pooled(&all).unwrap();
        assert!(p.interval.lower < -0.01 && p.interval.upper > 0.01, "{p:?}");
        assert_eq!(p.p_value, 1.0);
        let lost = [TaskPair {
            a_passes: 5,
            a_scored: 5,
            b_passes: 0,
            b_scored: 5,
        }; 6];
        let p = pooled(&lost).unwrap();
        assert_eq!(p.direction(), Direction::Worse);
        assert_eq!(p.difference, -1.0);
        // Exact: each task's 5 passes all landing in A has chance 1/C(10, 5) = 1/252.
        let want = (1.0f64 / 252.0).powi(6);
        assert!(
            (p.p_value / want - 1.0).abs() < 1e-9,
            "{} vs {want}",
            p.p_value
        );
        assert_eq!(pooled(&[]), None);
    }

    /// With equal k the one-row interval is Clopper–Pearson on the pooled samples; unequal k
    /// shrinks the effective sample; never zero-width.
    #[test]
    fn the_pooled_rate_interval_is_exact_on_pooled_samples() {
        let iv = pooled_rate_interval(&[(5, 5), (3, 5), (4, 5)]).unwrap();
        let cp = interval::interval(IntervalKind::ClopperPearson, 12, 15).unwrap();
        assert!(
            close(iv.lower, cp.lower) && close(iv.upper, cp.upper),
            "{iv:?} {cp:?}"
        );
        let all = pooled_rate_interval(&[(5, 5); 3]).unwrap();
        assert_eq!(all.upper, 1.0);
        assert!(all.lower < 0.9 && all.lower > 0.7, "{all:?}");
        // 10 of 10 and 1 of 1: the mean is 1, but the 1-sample task counts for less than 10.
        let uneven = pooled_rate_interval(&[(10, 10), (1, 1)]).unwrap();
        let even = pooled_rate_interval(&[(10, 10), (10, 10)]).unwrap();
        assert!(uneven.lower < even.lower, "{uneven:?} {even:?}");
        assert_eq!(pooled_rate_interval(&[(0, 0)]), None);
    }
}
