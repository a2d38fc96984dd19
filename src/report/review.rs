//! The review round measured (SPEC §11, HiTEC-ICL's second round): per row and tag, the final
//! success after a review of every answer, what the review fixed, what it broke, what the server
//! refused, what it cost against the first round alone, and a paired difference — review
//! against no review, over the same first-round samples — that says whether the review helped
//! on these tasks. Pure: a [`Matrix`] in, a [`ReviewRow`] per reviewed row out;
//! `data/routing.json`'s `review` and `routing.html`'s review section render it.
//!
//! The unit is a first-round sample of the row (a *parent*): its final answer is its review's
//! when it has one, else its own (a transport error, never reviewed, stays a failure). Each
//! task weighs the same (SPEC §9): every rate is the mean over the tasks of the task's share.

use super::routing::these_tasks;
use super::{Matrix, SampleKey, Scored};
use crate::stats::interval::{CONFIDENCE, Interval};
use crate::taxonomy::Outcome;
use statrs::distribution::{ContinuousCDF, Normal};
use std::collections::BTreeMap;

/// What the paired difference says about the review on these tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The interval of final − first lies above 0.
    Helped,
    /// It lies below 0.
    Hurt,
    /// It holds 0.
    NoClearDifference,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Helped => "helped",
            Verdict::Hurt => "hurt",
            Verdict::NoClearDifference => "no clear difference",
        }
    }

    fn of(iv: &Interval) -> Verdict {
        if iv.lower > 0.0 {
            Verdict::Helped
        } else if iv.upper < 0.0 {
            Verdict::Hurt
        } else {
            Verdict::NoClearDifference
        }
    }
}

/// Expected cost of one call, each task weighing the same: requests, and, when the server
/// reported them, prompt and completion tokens and total milliseconds (requests one after the
/// other).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallCost {
    pub requests: f64,
    pub prompt_tokens: Option<f64>,
    pub completion_tokens: Option<f64>,
    pub latency_ms: Option<f64>,
}

/// A first-round answer whose review failed: both samples, for their permalinks.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokenPair {
    pub first: SampleKey,
    pub review: SampleKey,
}

/// The review round of one row over a set of tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewMeasure {
    /// Tasks with a first-round sample: the unit of every rate.
    pub tasks: u64,
    /// First-round samples (transport errors included: never reviewed, a failure either way).
    pub parents: u64,
    /// Of them, those with a review sample.
    pub reviewed: u64,
    /// The first round's success over the same samples, and its interval (these tasks).
    pub first: Option<f64>,
    pub first_interval: Option<Interval>,
    /// The final success: the review's answer where there is one, else the first answer.
    pub rate: Option<f64>,
    pub interval: Option<Interval>,
    /// First answer failed, its review passed.
    pub fixed: u64,
    /// First answer passed, its review came back and failed.
    pub broken: u64,
    /// Reviews with no usable answer, by HTTP status (`None`: no response at all); each a
    /// final that did not pass.
    pub refused: BTreeMap<Option<u16>, u64>,
    /// Every broken pair, in key order.
    pub broken_pairs: Vec<BrokenPair>,
    /// Mean over tasks of the task's mean of final − first (pass 1, else 0), and its interval.
    pub difference: Option<f64>,
    pub difference_interval: Option<Interval>,
    pub verdict: Option<Verdict>,
    /// One call with the first round alone (`single`), and with the review.
    pub single: CallCost,
    pub with_review: CallCost,
}

impl ReviewMeasure {
    pub fn refused_total(&self) -> u64 {
        self.refused.values().sum()
    }
}

/// One reviewed row.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewRow {
    pub model: String,
    pub overall: ReviewMeasure,
    /// Per tag of the row's tasks, sorted.
    pub by_tag: BTreeMap<String, ReviewMeasure>,
    /// Review samples whose parent is not a first-round sample of this build: counted nowhere.
    pub orphans: u64,
}

/// One first-round sample and what its review made of it.
#[derive(Debug, Clone, Copy)]
struct Pair<'a> {
    first: &'a Scored,
    review: Option<&'a Scored>,
}

impl Pair<'_> {
    fn first_passes(&self) -> bool {
        self.first.outcome == Outcome::Pass
    }

    fn final_passes(&self) -> bool {
        match self.review {
            Some(r) => r.outcome == Outcome::Pass,
            None => self.first_passes(),
        }
    }
}

/// The first-round samples of one task of a row, with their reviews.
type TaskPairs<'a> = Vec<Pair<'a>>;

/// Every row with at least one review sample, by name.
pub fn review(m: &Matrix) -> Vec<ReviewRow> {
    // Each parent's review: when a review was asked again (`--retry-errors` after a transport
    // error), the one that got an answer, else the last; ties by key, so the choice is fixed.
    let mut chosen: BTreeMap<usize, &Scored> = BTreeMap::new();
    let mut orphans: BTreeMap<&str, u64> = BTreeMap::new();
    let mut reviewed_rows: BTreeMap<&str, ()> = BTreeMap::new();
    for s in &m.feedback {
        if !s.feedback.as_deref().is_some_and(|f| f.review) {
            continue;
        }
        reviewed_rows.insert(&s.key.model, ());
        let Some(i) = m.parent_index(s) else {
            *orphans.entry(&s.key.model).or_default() += 1;
            continue;
        };
        let answered = |r: &Scored| r.outcome != Outcome::Error;
        match chosen.get(&i) {
            Some(prev) if answered(prev) && !answered(s) => {}
            _ => {
                chosen.insert(i, s);
            }
        }
    }
    reviewed_rows
        .keys()
        .map(|&model| {
            let from = m.samples.partition_point(|s| s.key.model.as_str() < model);
            let to = from + m.samples[from..].partition_point(|s| s.key.model.as_str() <= model);
            let mut tasks: BTreeMap<&str, TaskPairs> = BTreeMap::new();
            for (i, s) in m.samples[from..to].iter().enumerate() {
                tasks.entry(&s.key.task).or_default().push(Pair {
                    first: s,
                    review: chosen.get(&(from + i)).copied(),
                });
            }
            let mut tagged: BTreeMap<&str, Vec<&TaskPairs>> = BTreeMap::new();
            for (task, pairs) in &tasks {
                for tag in m.task(task).map(|t| t.tags.as_slice()).unwrap_or_default() {
                    tagged.entry(tag).or_default().push(pairs);
                }
            }
            let all: Vec<&TaskPairs> = tasks.values().collect();
            ReviewRow {
                model: model.to_string(),
                overall: measure(&all),
                by_tag: tagged
                    .into_iter()
                    .map(|(tag, ts)| (tag.to_string(), measure(&ts)))
                    .collect(),
                orphans: orphans.get(model).copied().unwrap_or(0),
            }
        })
        .collect()
}

/// Means over tasks of a per-call figure, each task the mean over its calls where known.
#[derive(Default)]
struct CostSums {
    requests: Vec<f64>,
    prompt: Vec<f64>,
    completion: Vec<f64>,
    latency: Vec<f64>,
}

impl CostSums {
    /// Adds one task's calls: `of` gives a call's requests, prompt and completion tokens and
    /// milliseconds (each `None` when a request of the call did not report it).
    fn add<'a>(
        &mut self,
        pairs: &[Pair<'a>],
        of: impl Fn(&Pair<'a>) -> (f64, Option<f64>, Option<f64>, Option<f64>),
    ) {
        let calls: Vec<_> = pairs.iter().map(of).collect();
        let known = |xs: Vec<f64>, into: &mut Vec<f64>| {
            if !xs.is_empty() {
                into.push(xs.iter().sum::<f64>() / xs.len() as f64);
            }
        };
        known(calls.iter().map(|c| c.0).collect(), &mut self.requests);
        known(calls.iter().filter_map(|c| c.1).collect(), &mut self.prompt);
        known(
            calls.iter().filter_map(|c| c.2).collect(),
            &mut self.completion,
        );
        known(
            calls.iter().filter_map(|c| c.3).collect(),
            &mut self.latency,
        );
    }

    fn cost(&self) -> CallCost {
        let mean = |xs: &[f64]| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
        CallCost {
            requests: mean(&self.requests).unwrap_or(0.0),
            prompt_tokens: mean(&self.prompt),
            completion_tokens: mean(&self.completion),
            latency_ms: mean(&self.latency),
        }
    }
}

/// A request's prompt and completion tokens and milliseconds.
fn request_cost(s: &Scored) -> (Option<f64>, Option<f64>, Option<f64>) {
    (
        s.prompt_tokens.map(|t| t as f64),
        s.completion_tokens.map(|t| t as f64),
        s.total_ms,
    )
}

/// Both requests' figure when both reported it; the first's when there was no review.
fn both(a: Option<f64>, b: Option<Option<f64>>) -> Option<f64> {
    match b {
        None => a,
        Some(b) => Some(a? + b?),
    }
}

fn measure(tasks: &[&TaskPairs]) -> ReviewMeasure {
    let rated: Vec<&&TaskPairs> = tasks.iter().filter(|t| !t.is_empty()).collect();
    let mut first = Vec::with_capacity(rated.len());
    let mut last = Vec::with_capacity(rated.len());
    let mut paired = Vec::with_capacity(rated.len());
    let (mut fixed, mut broken, mut reviewed) = (0, 0, 0);
    let mut refused: BTreeMap<Option<u16>, u64> = BTreeMap::new();
    let mut broken_pairs = Vec::new();
    let (mut single, mut with_review) = (CostSums::default(), CostSums::default());
    for pairs in &rated {
        let n = pairs.len() as u64;
        let (mut x0, mut x1, mut up, mut down) = (0u64, 0u64, 0u64, 0u64);
        for p in pairs.iter() {
            let (a, b) = (p.first_passes(), p.final_passes());
            x0 += u64::from(a);
            x1 += u64::from(b);
            up += u64::from(!a && b);
            down += u64::from(a && !b);
            let Some(r) = p.review else { continue };
            reviewed += 1;
            match r.outcome {
                Outcome::Error => *refused.entry(r.refused_status).or_default() += 1,
                Outcome::Fail(_) if a => {
                    broken += 1;
                    broken_pairs.push(BrokenPair {
                        first: p.first.key.clone(),
                        review: r.key.clone(),
                    });
                }
                Outcome::Pass if !a => fixed += 1,
                _ => {}
            }
        }
        first.push((x0 as f64, n, 0.0));
        last.push((x1 as f64, n, 0.0));
        paired.push((up, down, n));
        single.add(pairs, |p| {
            let (pr, co, ms) = request_cost(p.first);
            (1.0, pr, co, ms)
        });
        with_review.add(pairs, |p| {
            let (pr, co, ms) = request_cost(p.first);
            let r = p.review.map(request_cost);
            (
                1.0 + f64::from(u8::from(r.is_some())),
                both(pr, r.map(|r| r.0)),
                both(co, r.map(|r| r.1)),
                both(ms, r.map(|r| r.2)),
            )
        });
    }
    broken_pairs.sort_by(|a, b| a.first.cmp(&b.first));
    let split = |x: Option<(f64, Interval)>| match x {
        Some((r, iv)) => (Some(r), Some(iv)),
        None => (None, None),
    };
    let (first_rate, first_interval) = split(these_tasks(&first));
    let (rate, interval) = split(these_tasks(&last));
    let (difference, difference_interval) = split(paired_difference(&paired));
    ReviewMeasure {
        tasks: rated.len() as u64,
        parents: rated.iter().map(|t| t.len() as u64).sum(),
        reviewed,
        first: first_rate,
        first_interval,
        rate,
        interval,
        fixed,
        broken,
        refused,
        broken_pairs,
        difference,
        verdict: difference_interval.as_ref().map(Verdict::of),
        difference_interval,
        single: single.cost(),
        with_review: with_review.cost(),
    }
}

/// The mean over tasks, each weighing the same, of the task's mean paired difference final −
/// first, from per task `(up, down, n)`: `up` pairs went from fail to pass, `down` from pass to
/// fail, of `n`. With a 95 % interval over these tasks (SPEC §9).
///
/// The interval is Tango's score interval for a difference of paired proportions ("Equivalence
/// test and confidence interval for the difference in proportions for the paired-sample
/// design", Statistics in Medicine 1998) on the pooled pairs, at the effective sample size of
/// the equally weighted mean, `C² / Σ 1/nᵢ` (the pooled count with equal k), with the pooled
/// shares of up and down pairs the tasks' mean shares. With fixed tasks that differ, the pooled
/// multinomial variance is at least the true one (the mean of the tasks' squared differences is
/// at least the square of their mean), so it errs on the wide side, as Clopper–Pearson on the
/// pooled samples does for one rate. A Wald interval on the paired variance within tasks was
/// the first choice and fails: when no pair moved it has zero width, and its coverage falls to
/// about 0.5 where reviews rarely change an answer (the simulation in the tests prints both).
pub fn paired_difference(per_task: &[(u64, u64, u64)]) -> Option<(f64, Interval)> {
    let rated: Vec<&(u64, u64, u64)> = per_task.iter().filter(|t| t.2 > 0).collect();
    if rated.is_empty() {
        return None;
    }
    let c = rated.len() as f64;
    let share = |f: &dyn Fn(&(u64, u64, u64)) -> u64| {
        rated.iter().map(|t| f(t) as f64 / t.2 as f64).sum::<f64>() / c
    };
    let (up, down) = (share(&|t| t.0), share(&|t| t.1));
    let n = c * c / rated.iter().map(|t| 1.0 / t.2 as f64).sum::<f64>();
    Some((up - down, tango(up * n, down * n, n)))
}

/// Tango's score interval for `(up − down) / n` from `up` and `down` discordant pairs of `n`
/// (real-valued, so that an effective sample size can be used). Never zero width.
pub fn tango(up: f64, down: f64, n: f64) -> Interval {
    let z = Normal::new(0.0, 1.0)
        .map(|d| d.inverse_cdf(0.5 + CONFIDENCE / 2.0))
        .unwrap_or(1.959_963_984_540_054);
    let d = (up - down) / n;
    // The score statistic at a hypothesised difference `delta`: decreasing in `delta`, 0 at
    // the estimate.
    let score = |delta: f64| {
        let var = restricted_variance(up, down, n, delta);
        // Half a step of the discrete estimate (one pair is 1/n) comes off the distance: the
        // plain score interval's coverage dips to 0.92 where few pairs move (the simulation).
        let gap = d - delta;
        let gap = gap.signum() * (gap.abs() - 0.5 / n).max(0.0);
        if var <= 0.0 {
            if gap.abs() < 1e-12 {
                0.0
            } else {
                gap.signum() * f64::INFINITY
            }
        } else {
            gap / var.sqrt()
        }
    };
    // Bisection between a point inside (`inside`, the estimate) and the end of the range.
    let bound = |end: f64| {
        let (mut inside, mut outside) = (d, end);
        if score(end).abs() <= z {
            return end;
        }
        for _ in 0..60 {
            let mid = 0.5 * (inside + outside);
            if score(mid).abs() <= z {
                inside = mid;
            } else {
                outside = mid;
            }
        }
        inside
    };
    Interval {
        lower: bound(-1.0),
        upper: bound(1.0),
    }
}

/// The variance of `(up − down) / n` at the multinomial's maximum likelihood under the
/// constraint that the difference is `delta`: `(p̃_up + p̃_down − delta²) / n`.
fn restricted_variance(up: f64, down: f64, n: f64, delta: f64) -> f64 {
    // Solved for the smaller of the two discordant shares; a negative difference is the
    // positive one with up and down swapped.
    let (a, b, dl) = if delta >= 0.0 {
        (up, down, delta)
    } else {
        (down, up, -delta)
    };
    let m = (n - a - b).max(0.0);
    // d/dg of a·ln(g + dl) + b·ln g + m·ln(1 − 2g − dl) = 0, a quadratic in g.
    let beta = a * (1.0 - dl) + b * (1.0 - 3.0 * dl) - 2.0 * m * dl;
    let disc = (beta * beta + 8.0 * n * b * dl * (1.0 - dl)).max(0.0);
    let g = ((beta + disc.sqrt()) / (4.0 * n)).clamp(0.0, ((1.0 - dl) / 2.0).max(0.0));
    (2.0 * g + dl - dl * dl) / n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::compare::SplitMix64;

    #[test]
    fn tango_matches_its_worked_values_and_never_has_zero_width() {
        // No pair moved: the estimate 0, an interval around it that is not a point.
        let iv = tango(0.0, 0.0, 30.0);
        assert!(iv.lower < -0.05 && iv.upper > 0.05, "{iv:?}");
        assert!((iv.lower + iv.upper).abs() < 1e-9);
        // Every pair moved up: the upper bound is 1, the lower one well above 0.
        let iv = tango(10.0, 0.0, 10.0);
        assert_eq!(iv.upper, 1.0);
        // (The restricted fit puts every pair among the moved ones: the variance is (1 − Δ²)/n.)
        assert!(iv.lower > 0.3 && iv.lower < 0.6, "{iv:?}");
        // No pair moved, in closed form: the restricted share of the discordant pairs is 0, so
        // the bound solves n·(Δ − 1/2n)² = z²·Δ(1 − Δ).
        let (z2, n) = (1.959_963_984_540_054f64.powi(2), 30.0);
        let upper = ((1.0 + z2) + ((1.0 + z2).powi(2) - (n + z2) / n).sqrt()) / (2.0 * (n + z2));
        let iv = tango(0.0, 0.0, n);
        assert!((iv.upper - upper).abs() < 1e-9, "{iv:?} against {upper}");
        // Mirror images: swapping up and down negates the interval.
        let (a, b) = (tango(2.0, 12.0, 44.0), tango(12.0, 2.0, 44.0));
        assert!((a.lower + b.upper).abs() < 1e-9 && (a.upper + b.lower).abs() < 1e-9);
        assert!(a.upper < 0.0, "10 of 44 net down is a clear drop: {a:?}");
    }

    #[test]
    fn paired_difference_weighs_each_task_the_same() {
        // Task 1: 2 of 4 up; task 2: 0 of 2. Mean of 0.5 and 0 = 0.25, not 2/6.
        let (d, iv) = paired_difference(&[(2, 0, 4), (0, 0, 2)]).unwrap();
        assert!((d - 0.25).abs() < 1e-12);
        assert!(iv.lower < 0.25 && iv.upper > 0.25);
        assert_eq!(paired_difference(&[]), None);
        assert_eq!(paired_difference(&[(0, 0, 0)]), None);
    }

    /// The paired variance within tasks, the Wald interval the method replaced, for the table.
    fn wald(per_task: &[Vec<i8>]) -> Interval {
        let c = per_task.len() as f64;
        let mut d = 0.0;
        let mut v = 0.0;
        for t in per_task {
            let n = t.len() as f64;
            let mean = t.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
            let s2 = t
                .iter()
                .map(|&x| (f64::from(x) - mean).powi(2))
                .sum::<f64>()
                / (n - 1.0);
            d += mean / c;
            v += s2 / n / (c * c);
        }
        Interval {
            lower: d - 1.96 * v.sqrt(),
            upper: d + 1.96 * v.sqrt(),
        }
    }

    /// Per task: the final successes as [`these_tasks`] reads them, the (up, down, n) pairs as
    /// [`paired_difference`] reads them, and each pair's final − first.
    type Simulated = (Vec<(f64, u64, f64)>, Vec<(u64, u64, u64)>, Vec<Vec<i8>>);

    /// One simulated collection: per task, `k` first answers passing with `p`, each reviewed:
    /// a pass kept with `keep`, a failure fixed with `fix`. The final success's per-task counts
    /// and the pairs' differences.
    fn simulate(
        rng: &mut SplitMix64,
        (k, tasks, p, keep, fix): (usize, usize, f64, f64, f64),
    ) -> Simulated {
        let (mut finals, mut pairs, mut diffs) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..tasks {
            let (mut x, mut up, mut down) = (0u64, 0u64, 0u64);
            let mut d = Vec::with_capacity(k);
            for _ in 0..k {
                let first = rng.unit() < p;
                let last = if first {
                    rng.unit() < keep
                } else {
                    rng.unit() < fix
                };
                x += u64::from(last);
                up += u64::from(!first && last);
                down += u64::from(first && !last);
                d.push(i8::from(last) - i8::from(first));
            }
            finals.push((x as f64, k as u64, 0.0));
            pairs.push((up, down, k as u64));
            diffs.push(d);
        }
        (finals, pairs, diffs)
    }

    /// Coverage of the final success's interval and of the paired difference's, on the grid
    /// of the review's settings; then the power to say "helped" / "hurt" at a true difference
    /// of ±0.1. Prints both tables (the closing note carries them).
    #[test]
    fn review_intervals_hold_their_level_on_a_grid() {
        let mut rng = SplitMix64::new(43);
        let reps = 2000;
        let mut worst = (1.0f64, String::new());
        println!(
            "k  tasks  p  keep  fix  true_final  true_diff  cover_final  cover_diff  cover_wald"
        );
        for k in [3usize, 5, 10] {
            for tasks in [10usize, 40] {
                for p in [0.3, 0.7, 0.95] {
                    for keep in [0.8, 0.98] {
                        for fix in [0.2, 0.6] {
                            let truth = p * keep + (1.0 - p) * fix;
                            let diff = (1.0 - p) * fix - p * (1.0 - keep);
                            let (mut cf, mut cd, mut cw) = (0, 0, 0);
                            for _ in 0..reps {
                                let (finals, pairs, diffs) =
                                    simulate(&mut rng, (k, tasks, p, keep, fix));
                                let (_, iv) = these_tasks(&finals).unwrap();
                                cf += usize::from(iv.lower <= truth && truth <= iv.upper);
                                let (_, iv) = paired_difference(&pairs).unwrap();
                                assert!(iv.upper > iv.lower, "zero width");
                                cd += usize::from(iv.lower <= diff && diff <= iv.upper);
                                let iv = wald(&diffs);
                                cw += usize::from(iv.lower <= diff && diff <= iv.upper);
                            }
                            let (cf, cd, cw) = (
                                cf as f64 / reps as f64,
                                cd as f64 / reps as f64,
                                cw as f64 / reps as f64,
                            );
                            println!(
                                "{k}  {tasks}  {p}  {keep}  {fix}  {truth:.3}  {diff:+.3}  {cf:.3}  {cd:.3}  {cw:.3}"
                            );
                            for (what, cov) in [("final", cf), ("difference", cd)] {
                                if cov < worst.0 {
                                    worst = (
                                        cov,
                                        format!(
                                            "{what}: k {k}, tasks {tasks}, p {p}, keep {keep}, fix {fix}"
                                        ),
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
        println!("worst coverage: {:.3} ({})", worst.0, worst.1);
        // Power at ±0.1 from a first-round pass rate of 0.7: +0.1 with keep 0.98 and fix 0.38,
        // −0.1 with fix 0.2 and keep 1 − 0.16 / 0.7.
        println!("k  tasks  true_diff  says_helped  says_hurt");
        for k in [3usize, 5, 10] {
            for tasks in [10usize, 40] {
                for (keep, fix) in [(0.98, 0.38), (1.0 - 0.16 / 0.7, 0.2)] {
                    let diff = 0.3 * fix - 0.7 * (1.0 - keep);
                    let (mut helped, mut hurt) = (0, 0);
                    for _ in 0..reps {
                        let (_, pairs, _) = simulate(&mut rng, (k, tasks, 0.7, keep, fix));
                        let (_, iv) = paired_difference(&pairs).unwrap();
                        match Verdict::of(&iv) {
                            Verdict::Helped => helped += 1,
                            Verdict::Hurt => hurt += 1,
                            Verdict::NoClearDifference => {}
                        }
                    }
                    println!(
                        "{k}  {tasks}  {diff:+.2}  {:.3}  {:.3}",
                        helped as f64 / reps as f64,
                        hurt as f64 / reps as f64
                    );
                }
            }
        }
        assert!(
            worst.0 >= 0.93,
            "worst coverage {:.3} at {}",
            worst.0,
            worst.1
        );
    }
}
