//! The statistics of a comparison (SPEC §9), in one place the simulation exercises directly:
//! per cell, Newcombe's hybrid score interval for a difference of two proportions; pooled
//! (overall, per tag), the difference over the tasks both rows have and its test; Holm's
//! correction for the gate that fails a CI run on a regression.
//!
//! Every difference is **B − A**: A is the baseline, B the change.

use super::verdict::Direction;
use crate::cli::IntervalKind;
use crate::report::interval::{self, CONFIDENCE, Interval};
use serde::Serialize;

/// Bootstrap replicates of every pooled interval. 2,000 puts the 2.5 % and 97.5 % quantiles
/// 50 replicates from the ends (Monte Carlo error of a bound ≈ 0.5 points at a 10-point
/// spread), and costs ~2,000 × tasks additions per comparison: nothing next to scoring.
pub const REPLICATES: usize = 2000;

/// The seed every pooled bootstrap starts from (mixed with what is compared, so two tags do not
/// share their resamples). Fixed: the same inputs give the same interval on every machine.
pub const SEED: u64 = 0x00c0_ffee_ca11_c4ec;

/// The significance level of the CI gate (family-wise, after Holm).
pub const ALPHA: f64 = 1.0 - CONFIDENCE;

/// How the pooled interval is computed, in words for the page and the terminal.
pub const POOLED_METHOD: &str = "the unit is the task: per task, B's pass rate minus A's over the tasks both rows have, averaged with every task weighing the same; 95 % percentile bootstrap over tasks (2,000 resamples of the tasks with replacement, fixed seed)";

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskPair {
    pub a_passes: u64,
    pub a_scored: u64,
    pub b_passes: u64,
    pub b_scored: u64,
}

impl TaskPair {
    fn difference(&self) -> f64 {
        self.b_passes as f64 / self.b_scored as f64 - self.a_passes as f64 / self.a_scored as f64
    }
}

/// A pooled difference over the tasks both rows have, the task as the unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pooled {
    /// Tasks in the comparison (scored in both rows).
    pub tasks: usize,
    /// A's and B's mean per-task pass rate over those tasks.
    pub a_rate: f64,
    pub b_rate: f64,
    /// `b_rate − a_rate`.
    pub difference: f64,
    /// 95 % percentile bootstrap interval of the difference.
    pub interval: Interval,
    /// Two-sided bootstrap p-value of "no difference", for Holm's correction.
    pub p_value: f64,
}

impl Pooled {
    pub fn direction(&self) -> Direction {
        Direction::of(Some(&self.interval))
    }
}

/// The `q` quantile of sorted values, interpolating linearly between order statistics (type 7
/// of Hyndman & Fan, R's default).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// The pooled comparison of paired tasks: the mean per-task difference and its percentile
/// bootstrap interval over tasks, from `replicates` resamples drawn from `seed`. `None` without
/// a task that both rows scored.
///
/// Only the tasks are resampled, not the samples within them: a task's observed difference
/// already carries its within-task sampling noise, so resampling the samples again counts that
/// noise twice. Measured on the simulation of `tests::null_coverage_and_power` (no difference
/// at all), the two-stage bootstrap (tasks, then the samples within each task) excluded 0 in
/// 4 of 400 datasets (1 %, a 99 % interval in effect) where a 95 % interval should in ~5 %,
/// giving up power for nothing; resampling tasks only measures 6.6 % (see that test).
pub fn pooled(pairs: &[TaskPair], seed: u64, replicates: usize) -> Option<Pooled> {
    let pairs: Vec<&TaskPair> = pairs
        .iter()
        .filter(|p| p.a_scored > 0 && p.b_scored > 0)
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len();
    let d: Vec<f64> = pairs.iter().map(|p| p.difference()).collect();
    let mean = |xs: &mut dyn Iterator<Item = f64>| xs.sum::<f64>() / n as f64;
    let a_rate = mean(&mut pairs.iter().map(|p| p.a_passes as f64 / p.a_scored as f64));
    let b_rate = mean(&mut pairs.iter().map(|p| p.b_passes as f64 / p.b_scored as f64));
    let difference = mean(&mut d.iter().copied());
    let mut rng = SplitMix64::new(seed);
    let mut reps: Vec<f64> = (0..replicates.max(1))
        .map(|_| {
            let mut s = 0.0;
            for _ in 0..n {
                s += d[rng.below(n as u64) as usize];
            }
            s / n as f64
        })
        .collect();
    reps.sort_by(f64::total_cmp);
    let alpha = 1.0 - CONFIDENCE;
    // Resampled means can differ from a plain mean by rounding dust when every task agrees;
    // the interval must then be exactly that one value, or 0 would sit "outside" it.
    let snap = |x: f64| {
        if (x - difference).abs() < 1e-12 {
            difference
        } else {
            x
        }
    };
    let interval = Interval {
        lower: snap(quantile(&reps, alpha / 2.0)),
        upper: snap(quantile(&reps, 1.0 - alpha / 2.0)),
    };
    let r = reps.len() as f64;
    let at_or_below = reps.iter().filter(|&&x| x <= 1e-12).count() as f64;
    let at_or_above = reps.iter().filter(|&&x| x >= -1e-12).count() as f64;
    let p_value =
        (2.0 * ((1.0 + at_or_below) / (r + 1.0)).min((1.0 + at_or_above) / (r + 1.0))).min(1.0);
    Some(Pooled {
        tasks: n,
        a_rate,
        b_rate,
        difference,
        interval,
        p_value,
    })
}

/// Holm's step-down adjustment: the adjusted p-values, in the input's order. A comparison is
/// significant at family-wise level α when its adjusted p-value is below α.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]).then(i.cmp(&j)));
    let mut adjusted = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(x: f64, y: f64) -> bool {
        (x - y).abs() < 5e-5
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
    fn holm_steps_down() {
        let adj = holm(&[0.01, 0.04, 0.03, 0.005]);
        // Sorted: 0.005×4 = 0.02, 0.01×3 = 0.03, 0.03×2 = 0.06, 0.04×1 → max(0.06, 0.04).
        let want = [0.03, 0.06, 0.06, 0.02];
        for (g, w) in adj.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{adj:?}");
        }
        assert!(holm(&[]).is_empty());
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
        let p = pooled(&same, 1, REPLICATES).unwrap();
        assert_eq!((p.interval.lower, p.interval.upper), (0.0, 0.0));
        assert_eq!(p.direction(), Direction::NoEvidence);
        assert_eq!(p.p_value, 1.0);
        let lost: Vec<TaskPair> = (0..6)
            .map(|_| TaskPair {
                a_passes: 5,
                a_scored: 5,
                b_passes: 0,
                b_scored: 5,
            })
            .collect();
        let p = pooled(&lost, 1, REPLICATES).unwrap();
        assert_eq!(p.direction(), Direction::Worse);
        assert_eq!(p.difference, -1.0);
        assert!(p.p_value < 0.001);
        assert_eq!(pooled(&[], 1, 10), None);
    }

    /// Draws `k` Bernoulli(p) samples and counts the passes.
    fn binomial(rng: &mut SplitMix64, k: u64, p: f64) -> u64 {
        (0..k).filter(|_| rng.unit() < p).count() as u64
    }

    /// One synthetic pair of rows: 20–60 tasks, k = 3–10, per-task pass probabilities varied
    /// across tasks; B's probability is A's plus `shift` on every task.
    fn synthetic(rng: &mut SplitMix64, shift: f64) -> Vec<TaskPair> {
        let tasks = 20 + rng.below(41);
        let k = 3 + rng.below(8);
        (0..tasks)
            .map(|_| {
                let pa = if shift == 0.0 {
                    rng.unit()
                } else {
                    0.05 + rng.unit() * (0.95 - shift - 0.05)
                };
                TaskPair {
                    a_passes: binomial(rng, k, pa),
                    a_scored: k,
                    b_passes: binomial(rng, k, pa + shift),
                    b_scored: k,
                }
            })
            .collect()
    }

    /// The acceptance simulation (SPEC §9): with no difference, the pooled 95 % interval
    /// excludes 0 in 3–8 % of datasets; with a planted 20-point difference it detects it in the
    /// large majority. 1,000 null and 300 planted datasets, each with the build's 2,000
    /// bootstrap replicates (a few seconds in debug). Run with `--nocapture` to see the figures.
    #[test]
    fn null_coverage_and_power() {
        let mut rng = SplitMix64::new(20261123);
        let null_sets = 1000;
        let mut false_alarms = 0;
        for i in 0..null_sets {
            let pairs = synthetic(&mut rng, 0.0);
            let p = pooled(&pairs, SEED ^ i as u64, REPLICATES).unwrap();
            if p.direction() != Direction::NoEvidence {
                false_alarms += 1;
            }
        }
        let planted_sets = 300;
        let mut detected = 0;
        for i in 0..planted_sets {
            let pairs = synthetic(&mut rng, 0.2);
            let p = pooled(&pairs, SEED ^ (i as u64 + 1_000_000), REPLICATES).unwrap();
            if p.direction() == Direction::Better {
                detected += 1;
            }
        }
        let exclusion = false_alarms as f64 / null_sets as f64;
        let power = detected as f64 / planted_sets as f64;
        let report = format!(
            "pooled bootstrap: no difference → 0 excluded in {false_alarms}/{null_sets} = {:.1} % (coverage {:.1} %, goal: excluded in 3–8 %); planted +20 points → detected in {detected}/{planted_sets} = {:.1} % (power, goal: large majority)",
            100.0 * exclusion,
            100.0 * (1.0 - exclusion),
            100.0 * power
        );
        println!("{report}");
        assert!((0.03..=0.08).contains(&exclusion), "{report}");
        assert!(power >= 0.8, "{report}");
    }
}
