//! The rate of one action after a failure with one label (SPEC §11's reroll, repair, feedback
//! and fallback measures), over these tasks, with an interval that respects how the samples
//! were drawn. Pure: per-task counts in, a rate and an [`Interval`] out.
//!
//! **What the rate is.** `passes / n` of the measure's trials, which is the ratio
//! `Σ_t Y_t / Σ_t X_t` over the tasks `t` (a task's passing trials `Y_t` over its trials
//! `X_t`). With equal k per cell it is P(the action passes | a first-round sample failed with
//! the label) for a task drawn uniformly from these tasks: each failure weighs the same, so a
//! task weighs as often as it failed with the label. (Equal weights over the tasks that *showed*
//! the label would be a different, biased thing: a task enters only when it failed, and
//! conditioned on that its other samples pass more often than its pass probability; no
//! estimator of a task's rate is unbiased under that conditioning.)
//!
//! **Why counting trials is wrong.** The trials of one failure share its cell: a reroll pairs
//! every failure with the same other samples of the cell, a fallback pairs every failure of a
//! task with the same samples of the other row. Counting each pair as an independent Bernoulli
//! trial makes the interval too narrow.
//!
//! **The interval.** Tasks are fixed (strata) and the samples within a task are the random
//! part, in independent groups: the row's first-round samples of the task and, for a fallback,
//! the other row's samples of it. The variance of the ratio is the stratified delete-one
//! jackknife over those samples (each sample left out in turn, the ratio recomputed, summed per
//! group with the factor `(m − 1)/m`); the interval is Clopper–Pearson at the effective sample
//! size `rate(1 − rate)/V` (Korn & Graubard 1998), never more than the trials that are
//! independent ([`TaskCounts::distinct`]: a reroll's other samples of the cell, the other row's
//! samples, each repaired failure, each feedback sample). When the jackknife cannot be taken (a
//! rate of 0 or 1, or one failure in all, whose removal leaves no trial), the interval is
//! Clopper–Pearson on those independent trials, which is exact for a single failure. It never
//! has zero width. `tests/it/routing_stats.rs` prints its coverage over a grid of tasks per label,
//! k and heterogeneous per-task rates.

use crate::stats::interval::{CONFIDENCE, Interval};
use smallvec::SmallVec;
use statrs::distribution::{Beta, ContinuousCDF};

/// The action whose rate is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Each failure against each other scored sample of its cell.
    Reroll,
    /// Each failure's mechanical repair, scored again.
    Repair,
    /// Each feedback sample (of one style) whose parent failed with the label.
    Feedback,
    /// Each failure against each scored sample of the other row on the same task.
    Fallback,
}

/// One first-round scored sample of the row, as the measures read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// It failed with the measured label.
    pub failed_with_label: bool,
    /// It passed.
    pub pass: bool,
    /// Its mechanical repair passes (read only when it failed with the label).
    pub repaired: bool,
    /// Its counted feedback samples of the measured style, and how many of them passed.
    pub children: u64,
    pub child_passes: u64,
}

/// The counts of one task that a measure is a function of; removing a sample subtracts its
/// share, so the jackknife costs one pass over the samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Counts {
    /// Samples of the row (scored).
    n: f64,
    /// Failures with the label.
    f: f64,
    /// Passes of the row.
    x: f64,
    /// Failures with the label whose repair passes.
    repaired: f64,
    /// Feedback samples of failures with the label, and their passes.
    children: f64,
    child_passes: f64,
    /// The other row's scored samples and passes (fallback).
    n_b: f64,
    x_b: f64,
}

impl Counts {
    /// Adds `times` samples like `s` (removes them when negative).
    fn add(&mut self, s: &Sample, times: f64) {
        self.n += times;
        self.x += times * f64::from(u8::from(s.pass));
        if s.failed_with_label {
            self.f += times;
            self.repaired += times * f64::from(u8::from(s.repaired));
            self.children += times * s.children as f64;
            self.child_passes += times * s.child_passes as f64;
        }
    }

    /// `(Y, X)`: the task's passing trials and trials under `action`.
    fn trials(&self, action: Action) -> (f64, f64) {
        match action {
            Action::Reroll => (self.f * self.x, self.f * (self.n - 1.0).max(0.0)),
            Action::Repair => (self.repaired, self.f),
            Action::Feedback => (self.child_passes, self.children),
            Action::Fallback => (self.f * self.x_b, self.f * self.n_b),
        }
    }

    /// The trials of this task that are independent of each other: one failure's rerolls (the
    /// cell's other samples), the other row's samples, the repaired failures, the feedback
    /// samples. With one failure in the task, exactly its trials.
    fn distinct(&self, action: Action) -> f64 {
        if self.f <= 0.0 {
            return 0.0;
        }
        match action {
            Action::Reroll => (self.n - 1.0).max(0.0),
            Action::Repair => self.f,
            Action::Feedback => self.children,
            Action::Fallback => self.n_b,
        }
    }
}

/// One task's part of a measure: its trials and, per independent group of its samples, the
/// trials with each sample left out.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskCounts {
    /// Passing trials.
    pub passes: f64,
    /// Trials.
    pub trials: f64,
    /// Trials of this task that are independent of each other (the conservative sample size).
    pub distinct: f64,
    /// Per group (the row's samples; for a fallback also the other row's): `(passes, trials)`
    /// of this task with each sample left out in turn. (Held in place: a routing page makes
    /// hundreds of thousands of these, one per task, label, action and fallback row.)
    pub leave_one_out: SmallVec<[LeaveOneOut; 2]>,
}

/// One group's leave-one-out trials. Samples that count alike leave the same trials behind, and
/// a group has few kinds of sample (passed, failed with the label and repaired or not, …), so
/// each distinct `(passes, trials)` is kept once with the number of samples that leave it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeaveOneOut {
    /// Samples in the group.
    pub size: f64,
    /// `(passes, trials, samples)`: the task's trials without one such sample, and how many
    /// samples of the group leave exactly these.
    pub values: SmallVec<[(f64, f64, f64); 4]>,
}

impl LeaveOneOut {
    fn add(&mut self, (passes, trials): (f64, f64), samples: f64) {
        if samples <= 0.0 {
            return;
        }
        self.size += samples;
        match self
            .values
            .iter_mut()
            .find(|v| v.0.to_bits() == passes.to_bits() && v.1.to_bits() == trials.to_bits())
        {
            Some(v) => v.2 += samples,
            None => self.values.push((passes, trials, samples)),
        }
    }
}

/// The distinct samples of `a`, each with how many times it occurs (in order of first
/// occurrence): what [`TaskCounts::of_kinds`] reads.
pub fn kinds(a: impl IntoIterator<Item = Sample>) -> Vec<(Sample, u64)> {
    let mut out: Vec<(Sample, u64)> = Vec::new();
    for s in a {
        match out.iter_mut().find(|(k, _)| *k == s) {
            Some((_, n)) => *n += 1,
            None => out.push((s, 1)),
        }
    }
    out
}

impl TaskCounts {
    /// The task's part of `action`'s measure, from the row's scored first-round samples of the
    /// task (`a`) and, for a fallback, whether each scored sample of the other row passed
    /// (`b`; ignored by the other actions).
    pub fn new(action: Action, a: &[Sample], b: &[bool]) -> TaskCounts {
        let passes = b.iter().filter(|p| **p).count() as u64;
        TaskCounts::of_kinds(action, &kinds(a.iter().copied()), (b.len() as u64, passes))
    }

    /// [`TaskCounts::new`] from the row's samples counted by kind ([`kinds`]) and the other
    /// row's samples as counts, `(scored, passed)`: the same measure, each kind of sample left
    /// out once and weighed by its count. A row's samples are counted once per task and label,
    /// then read by every action and every other row's fallback.
    pub fn of_kinds(action: Action, a: &[(Sample, u64)], (n_b, x_b): (u64, u64)) -> TaskCounts {
        let mut all = Counts::default();
        for (s, n) in a {
            all.add(s, *n as f64);
        }
        all.n_b = n_b as f64;
        all.x_b = x_b as f64;
        let (passes, trials) = all.trials(action);
        let mut own = LeaveOneOut::default();
        for (s, n) in a {
            let mut c = all;
            c.add(s, -1.0);
            own.add(c.trials(action), *n as f64);
        }
        let mut groups: SmallVec<[LeaveOneOut; 2]> = SmallVec::new();
        groups.push(own);
        if action == Action::Fallback {
            let mut other = LeaveOneOut::default();
            for (passed, n) in [(true, x_b), (false, n_b.saturating_sub(x_b))] {
                let mut c = all;
                c.n_b -= 1.0;
                c.x_b -= f64::from(u8::from(passed));
                other.add(c.trials(action), n as f64);
            }
            groups.push(other);
        }
        TaskCounts {
            passes,
            trials,
            distinct: all.distinct(action),
            leave_one_out: groups,
        }
    }
}

/// The measure over `tasks`: `(passes, trials, rate, interval)`, `None` when there is no trial.
/// `passes` and `trials` are whole numbers (counts of pairs or samples); the rate is their
/// ratio.
pub fn over_tasks(tasks: &[TaskCounts]) -> Option<(u64, u64, f64, Interval)> {
    let y: f64 = tasks.iter().map(|t| t.passes).sum();
    let x: f64 = tasks.iter().map(|t| t.trials).sum();
    if x <= 0.0 {
        return None;
    }
    let rate = (y / x).clamp(0.0, 1.0);
    let distinct: f64 = tasks.iter().map(|t| t.distinct).sum::<f64>().max(1.0);
    let n_eff = match jackknife(tasks, y, x) {
        Some(v) if v > 0.0 && rate > 0.0 && rate < 1.0 => (rate * (1.0 - rate) / v).min(distinct),
        _ => distinct,
    };
    Some((
        y.round() as u64,
        x.round() as u64,
        rate,
        beta_interval(rate * n_eff, n_eff),
    ))
}

/// The stratified delete-one jackknife variance of `y / x`; `None` when leaving some sample out
/// leaves no trial at all (the ratio is then undefined, as with a single failure).
fn jackknife(tasks: &[TaskCounts], y: f64, x: f64) -> Option<f64> {
    let mut v = 0.0;
    for t in tasks {
        for group in &t.leave_one_out {
            let m = group.size;
            if m < 2.0 {
                continue;
            }
            if group
                .values
                .iter()
                .any(|&(_, xj, _)| x - t.trials + xj <= 0.0)
            {
                return None;
            }
            // Each distinct estimate once, weighed by the samples that give it.
            let est = |yj: f64, xj: f64| (y - t.passes + yj) / (x - t.trials + xj);
            let mean = group
                .values
                .iter()
                .map(|&(yj, xj, c)| c * est(yj, xj))
                .sum::<f64>()
                / m;
            let ss: f64 = group
                .values
                .iter()
                .map(|&(yj, xj, c)| {
                    let d = est(yj, xj) - mean;
                    c * d * d
                })
                .sum();
            v += (m - 1.0) / m * ss;
        }
    }
    Some(v)
}

/// Clopper–Pearson at a real-valued number of successes `x` of `n` trials (Beta quantiles, as
/// `binom.test` for whole numbers). At `x` within a hair of 0 or `n` the bound is 0 or 1.
pub fn beta_interval(x: f64, n: f64) -> Interval {
    let alpha = 1.0 - CONFIDENCE;
    const EPS: f64 = 1e-9;
    let lower = if x <= EPS {
        0.0
    } else {
        Beta::new(x, n - x + 1.0)
            .map(|b| b.inverse_cdf(alpha / 2.0))
            .unwrap_or(0.0)
    };
    let upper = if x >= n - EPS {
        1.0
    } else {
        Beta::new(x + 1.0, n - x)
            .map(|b| b.inverse_cdf(1.0 - alpha / 2.0))
            .unwrap_or(1.0)
    };
    Interval {
        lower: lower.clamp(0.0, 1.0),
        upper: upper.clamp(0.0, 1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::IntervalKind;
    use crate::stats::interval;

    fn s(failed: bool, pass: bool) -> Sample {
        Sample {
            failed_with_label: failed,
            pass,
            ..Sample::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn one_failure_is_clopper_pearson_on_its_trials() {
        // One task, one failure, 3 of 4 others pass: exactly binom.test(3, 4).
        let a = [
            s(true, false),
            s(false, true),
            s(false, true),
            s(false, true),
            s(false, false),
        ];
        let t = TaskCounts::new(Action::Reroll, &a, &[]);
        let (p, n, rate, iv) = over_tasks(&[t]).unwrap();
        let cp = interval::interval(IntervalKind::ClopperPearson, 3, 4).unwrap();
        assert_eq!((p, n), (3, 4));
        assert!(close(rate, 0.75));
        assert!(close(iv.lower, cp.lower) && close(iv.upper, cp.upper));
        // Fallback of that failure to a row that passed 2 of 5: binom.test(2, 5).
        let t = TaskCounts::new(Action::Fallback, &a, &[true, false, true, false, false]);
        let (p, n, _, iv) = over_tasks(&[t]).unwrap();
        let cp = interval::interval(IntervalKind::ClopperPearson, 2, 5).unwrap();
        assert_eq!((p, n), (2, 5));
        assert!(close(iv.lower, cp.lower) && close(iv.upper, cp.upper));
    }

    #[test]
    fn shared_trials_are_not_counted_as_independent() {
        // Four failures of one task against the same 5 samples of the other row (3 pass): 20
        // pairs, 12 passing, but only 5 independent trials. The interval is at least as wide as
        // binom.test(3, 5), never as narrow as binom.test(12, 20).
        let a = [
            s(true, false),
            s(true, false),
            s(true, false),
            s(true, false),
            s(false, true),
        ];
        let t = TaskCounts::new(Action::Fallback, &a, &[true, true, true, false, false]);
        let (p, n, rate, iv) = over_tasks(&[t]).unwrap();
        assert_eq!((p, n), (12, 20));
        assert!(close(rate, 0.6));
        let narrow = interval::interval(IntervalKind::ClopperPearson, 12, 20).unwrap();
        let five = interval::interval(IntervalKind::ClopperPearson, 3, 5).unwrap();
        assert!(iv.lower <= five.lower + 1e-9 && iv.upper >= five.upper - 1e-9);
        assert!(iv.upper - iv.lower > narrow.upper - narrow.lower);
    }

    #[test]
    fn every_action_counts_its_own_trials() {
        let a = [
            Sample {
                failed_with_label: true,
                repaired: true,
                children: 1,
                child_passes: 1,
                ..Sample::default()
            },
            Sample {
                failed_with_label: true,
                children: 2,
                child_passes: 0,
                ..Sample::default()
            },
            // A failure with another label: no trial of this label's measures.
            Sample {
                children: 1,
                child_passes: 1,
                repaired: true,
                ..Sample::default()
            },
            s(false, true),
        ];
        let t = |x: Action| {
            let t = TaskCounts::new(x, &a, &[true, false]);
            (t.passes, t.trials, t.distinct)
        };
        assert_eq!(t(Action::Reroll), (2.0, 6.0, 3.0));
        assert_eq!(t(Action::Repair), (1.0, 2.0, 2.0));
        assert_eq!(t(Action::Feedback), (1.0, 3.0, 3.0));
        assert_eq!(t(Action::Fallback), (2.0, 4.0, 2.0));
        // No failure with the label: no trial, no measure.
        let none = TaskCounts::new(Action::Reroll, &[s(false, true), s(false, false)], &[]);
        assert_eq!((none.trials, none.distinct), (0.0, 0.0));
        assert_eq!(over_tasks(&[none]), None);
    }

    #[test]
    fn an_all_pass_measure_never_has_zero_width() {
        let a = [s(true, false), s(false, true), s(false, true)];
        let ts = vec![TaskCounts::new(Action::Reroll, &a, &[]); 3];
        let (p, n, rate, iv) = over_tasks(&ts).unwrap();
        assert_eq!((p, n, rate), (6, 6, 1.0));
        let cp = interval::interval(IntervalKind::ClopperPearson, 6, 6).unwrap();
        assert!(close(iv.lower, cp.lower) && iv.upper == 1.0 && iv.lower < 0.6);
    }
}
