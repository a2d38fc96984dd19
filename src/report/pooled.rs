//! Pooled pass@1 over the cells of one call shape (a model × tag), with a 95 % interval about
//! **these tasks** (SPEC §9): the mean over the tag's tasks, each weighing the same, of each
//! task's pass probability. Samples within a task are independent draws; the tasks are fixed —
//! the corpus defines the shape, and the pages claim nothing about tasks not in it.
//!
//! The interval is [`crate::stats::compare::pooled_rate_interval`]: with equal k per task,
//! Clopper–Pearson on the pooled samples (heterogeneity across tasks only narrows the spread of
//! the pooled count, so it is conservative, and unlike plain Wilson it holds its level near 1);
//! with unequal k, the same on the effective sample `C² / Σ 1/mᵢ` (Korn & Graubard). The
//! design effect reported beside it is that of unequal task sizes, `scored / effective sample`
//! (1 with equal k). The earlier interval targeted the next, unseen task (a design effect from
//! the spread between tasks, Student's t at C − 1 df): its coverage fell to 56 % on realistic
//! heterogeneous tags, and it printed [4–100 %] for 9/10 over two tasks.
//!
//! Validated on SPEC §9's grid by `examples/compare-grid` (docs/compare-grid.md; its corners in
//! `tests/it/compare_stats.rs`).

use super::{Cell, Reliability, Thresholds};
use crate::stats::interval::Interval;

/// What a reader of the models × tags table needs for one model and one tag.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pooled {
    /// Tasks (cells) of the tag with at least one scored sample: the unit of analysis.
    pub tasks: u64,
    /// Scored samples over those tasks.
    pub scored: u64,
    pub passes: u64,
    /// Transport errors, counted apart.
    pub errors: u64,
    /// Design effect of unequal task sizes: scored samples over the effective sample of the
    /// equal-weight mean (1 with equal k, more when tasks have different numbers of samples).
    pub deff: f64,
    /// The mean over tasks of each task's rate (each task weighing the same): the estimate.
    pub task_mean: f64,
    /// 95 % interval of the pooled rate, by task (see the module comment); `None` without a
    /// scored sample.
    pub interval: Option<Interval>,
    /// Cells where every scored sample passed (pass^k).
    pub all_passed: u64,
    /// Cells where some samples passed and some failed.
    pub flaky: u64,
}

impl Pooled {
    /// The pooled rate: the mean of the tasks' rates (passes over scored samples with equal k).
    pub fn rate(&self) -> Option<f64> {
        (self.scored > 0).then_some(self.task_mean)
    }

    /// The verdict at the build's thresholds, the same as a cell's.
    pub fn reliability(&self, at: Thresholds) -> Reliability {
        at.verdict(self.interval.as_ref())
    }
}

/// Roughly how many more samples per task would settle an `uncertain` pooled rate (SPEC §6):
/// the fewest, in steps of the tasks' current k, after which the same rate's interval no longer
/// straddles `threshold` (all tasks given the same number of samples). `None` when the rate is
/// not uncertain, or sits so close to the threshold that 50 times the samples would not settle
/// it.
pub fn samples_to_settle(p: &Pooled, threshold: f64) -> Option<u64> {
    let iv = p.interval?;
    if p.tasks == 0 || iv.lower >= threshold || iv.upper < threshold {
        return None;
    }
    let per_task = p.scored.div_ceil(p.tasks);
    let rate = p.task_mean;
    (2..=50u64).find_map(|f| {
        let k = per_task * f;
        let n = k * p.tasks;
        let x = (rate * n as f64).round() as u64;
        let counts: Vec<(u64, u64)> = (0..p.tasks)
            .map(|i| {
                // The same passes spread over the tasks, the remainder on the first ones.
                let share = x / p.tasks + u64::from(i < x % p.tasks);
                (share.min(k), k)
            })
            .collect();
        let iv = crate::stats::compare::pooled_rate_interval(&counts)?;
        (iv.lower >= threshold || iv.upper < threshold).then_some(k - per_task)
    })
}

/// Pools `cells` (one model's cells of one tag).
pub fn pool<'a>(cells: impl IntoIterator<Item = &'a Cell>) -> Pooled {
    let mut p = Pooled::default();
    let mut counts = Vec::new();
    for c in cells {
        p.errors += c.errors;
        if c.scored == 0 {
            continue;
        }
        p.tasks += 1;
        p.scored += c.scored;
        p.passes += c.passes;
        p.all_passed += u64::from(c.all_passed());
        p.flaky += u64::from(c.flaky());
        counts.push((c.passes, c.scored));
    }
    let (deff, interval) = by_task(&counts);
    p.deff = deff;
    p.interval = interval;
    p.task_mean = task_mean(&counts);
    p
}

/// Pools per-task `(count, of)` pairs of any proportion (value accuracy, BFCL-style accuracy)
/// the way [`pool`] pools passes: `passes` holds the counts, `scored` their denominators, and a
/// task with nothing to count (`of` = 0) is left out of the tasks. No errors are counted here.
pub fn pool_counts(counts: impl IntoIterator<Item = (u64, u64)>) -> Pooled {
    let counts: Vec<(u64, u64)> = counts.into_iter().filter(|c| c.1 > 0).collect();
    let mut p = Pooled {
        tasks: counts.len() as u64,
        ..Pooled::default()
    };
    for &(x, n) in &counts {
        p.scored += n;
        p.passes += x;
        p.all_passed += u64::from(x == n);
        p.flaky += u64::from(x > 0 && x < n);
    }
    (p.deff, p.interval) = by_task(&counts);
    p.task_mean = task_mean(&counts);
    p
}

/// The design effect of unequal task sizes and the interval for per-task `(passes, scored)`
/// counts (see the module comment).
pub fn by_task(counts: &[(u64, u64)]) -> (f64, Option<Interval>) {
    let counts: Vec<(u64, u64)> = counts.iter().copied().filter(|c| c.1 > 0).collect();
    let n: u64 = counts.iter().map(|c| c.1).sum();
    if n == 0 {
        return (1.0, None);
    }
    let c = counts.len() as f64;
    let effective = c * c / counts.iter().map(|&(_, m)| 1.0 / m as f64).sum::<f64>();
    (
        (n as f64 / effective).max(1.0),
        crate::stats::compare::pooled_rate_interval(&counts),
    )
}

/// The mean of the tasks' rates, each task weighing the same (0 without a task).
fn task_mean(counts: &[(u64, u64)]) -> f64 {
    let rates: Vec<f64> = counts
        .iter()
        .filter(|c| c.1 > 0)
        .map(|&(x, m)| x.min(m) as f64 / m as f64)
        .collect();
    if rates.is_empty() {
        0.0
    } else {
        rates.iter().sum::<f64>() / rates.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_k_pools_like_clopper_pearson_on_the_samples() {
        // Eight tasks, 5/5 each: Clopper–Pearson on 40 samples, lower = 0.025^(1/40): reliable.
        let (deff, iv) = by_task(&[(5, 5); 8]);
        assert_eq!(deff, 1.0);
        let iv = iv.unwrap();
        assert!(
            (iv.lower - 0.025f64.powf(1.0 / 40.0)).abs() < 1e-6,
            "{iv:?}"
        );
        assert_eq!(
            Thresholds::default().verdict(Some(&iv)),
            Reliability::Reliable
        );
        // 3 tasks at 5/5 are 15 samples: not enough to be sure of 0.9.
        let (_, iv) = by_task(&[(5, 5); 3]);
        assert_eq!(
            Thresholds::default().verdict(iv.as_ref()),
            Reliability::Uncertain
        );
        let (_, iv) = by_task(&[(0, 5); 6]);
        assert_eq!(
            Thresholds::default().verdict(iv.as_ref()),
            Reliability::Broken
        );
        assert_eq!(by_task(&[]), (1.0, None));
    }

    #[test]
    fn uncertain_rates_say_how_many_more_samples_settle_them() {
        // 3 tasks at 5/5: [78–100 %], uncertain; 3 × 15 samples all passing give a lower
        // bound of 0.025^(1/45) = 0.921, so 10 more per task settle it (10 = 2 × 5 too few).
        let p = pool_counts([(5, 5); 3]);
        assert_eq!(p.reliability(Thresholds::default()), Reliability::Uncertain);
        assert_eq!(samples_to_settle(&p, 0.9), Some(10));
        // Decided rates need nothing more.
        assert_eq!(samples_to_settle(&pool_counts([(5, 5); 12]), 0.9), None);
        // Exactly at 0.9, no number of samples separates it from 0.9.
        assert_eq!(samples_to_settle(&pool_counts([(9, 10); 2]), 0.9), None);
    }

    #[test]
    fn the_rate_is_the_mean_of_the_tasks_and_unequal_k_has_a_design_effect() {
        let p = pool_counts([(10, 10), (0, 2)]);
        assert_eq!(p.rate(), Some(0.5));
        // Effective sample 4 / (1/10 + 1/2) = 6.67 of 12 scored: design effect 1.8.
        assert!((p.deff - 1.8).abs() < 1e-9, "{}", p.deff);
        let iv = p.interval.unwrap();
        assert!(
            iv.lower < 0.5 && iv.upper > 0.5 && iv.upper - iv.lower > 0.3,
            "{iv:?}"
        );
    }
}
