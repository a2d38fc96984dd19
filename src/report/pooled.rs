//! Pooled pass@1 over the cells of one call shape (a model × tag), with a 95 % interval whose
//! unit of analysis is the **task**, not the sample.
//!
//! Why not plain Wilson on all the tag's samples: the k samples of one task share that task's
//! difficulty, so they are not independent draws of "a call of this shape". A model that passes
//! 5/5 on eight tasks and 0/5 on two has 40/50 samples passing, but what a reader wants to know
//! is how it does on the *next* task of this shape; the evidence for that is ten tasks, not
//! fifty samples. Treating samples as independent would make the interval too narrow exactly
//! when tasks disagree.
//!
//! The procedure: the pooled rate p̂ = Σ passes / Σ scored (a ratio estimator over tasks). Its
//! variance across tasks is the cluster-robust (between-task) one,
//! `C/(C−1) · Σᵢ (xᵢ − p̂·mᵢ)² / n²`, for C tasks with mᵢ scored samples and xᵢ passes. The design
//! effect `deff` is that variance over the binomial one, `p̂(1−p̂)/n`, floored at 1 (pooling never
//! claims more than independent samples would); Wilson's score interval is then taken on the
//! effective sample size `n / deff`, with the critical value of Student's t at C − 1 degrees of
//! freedom when tasks disagree (deff > 1), because the between-task variance is itself estimated
//! from C values. When every task agrees (all passed, or all failed, or deff = 1) there is no
//! between-task spread to estimate and the interval is Wilson's on the samples, which is what
//! lets a tag whose every sample passed become `reliable` at k = 3–5.
//!
//! Chosen over a cluster bootstrap because it is closed-form (no seed, no resampling cost at
//! 300,000 samples) and, with 3 tasks, a bootstrap has only 10 distinct resamples. The
//! simulation test below draws tags with known per-task probabilities and prints the coverage.

use super::interval::{CONFIDENCE, Interval};
use super::{Cell, Reliability};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

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
    /// Design effect: how many samples count as one independent draw (≥ 1).
    pub deff: f64,
    /// 95 % interval of the pooled rate, by task (see the module comment); `None` without a
    /// scored sample.
    pub interval: Option<Interval>,
    /// Cells where every scored sample passed (pass^k).
    pub all_passed: u64,
    /// Cells where some samples passed and some failed.
    pub flaky: u64,
}

impl Pooled {
    /// The pooled rate: passes over scored samples.
    pub fn rate(&self) -> Option<f64> {
        (self.scored > 0).then(|| self.passes as f64 / self.scored as f64)
    }

    /// The verdict, by the same thresholds as a cell's.
    pub fn reliability(&self) -> Reliability {
        Reliability::of(self.interval.as_ref())
    }
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
    p
}

/// The design effect and the interval for per-task `(passes, scored)` counts.
pub fn by_task(counts: &[(u64, u64)]) -> (f64, Option<Interval>) {
    let n: u64 = counts.iter().map(|c| c.1).sum();
    if n == 0 {
        return (1.0, None);
    }
    let x: u64 = counts.iter().map(|c| c.0).sum();
    let nf = n as f64;
    let p = x as f64 / nf;
    let tasks = counts.len();
    let binomial = p * (1.0 - p) / nf;
    let deff = if tasks >= 2 && binomial > 0.0 {
        let c = tasks as f64;
        let ss: f64 = counts
            .iter()
            .map(|&(xi, mi)| {
                let r = xi as f64 - p * mi as f64;
                r * r
            })
            .sum();
        let between = c / (c - 1.0) * ss / (nf * nf);
        (between / binomial).max(1.0)
    } else {
        1.0
    };
    let alpha = 1.0 - CONFIDENCE;
    let z = if deff > 1.0 {
        StudentsT::new(0.0, 1.0, (tasks - 1) as f64)
            .map(|t| t.inverse_cdf(1.0 - alpha / 2.0))
            .unwrap_or(f64::NAN)
    } else {
        Normal::standard().inverse_cdf(1.0 - alpha / 2.0)
    };
    (deff, Some(wilson(p, nf / deff, z)))
}

/// Wilson's score interval for a proportion `p` observed on `n` (possibly fractional) trials.
fn wilson(p: f64, n: f64, z: f64) -> Interval {
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    Interval {
        lower: if p <= 0.0 {
            0.0
        } else {
            (centre - half).clamp(0.0, 1.0)
        },
        upper: if p >= 1.0 {
            1.0
        } else {
            (centre + half).clamp(0.0, 1.0)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{BROKEN_UPPER, RELIABLE_LOWER};
    use rand::{RngExt, SeedableRng, rngs::StdRng};
    use statrs::distribution::Beta;

    #[test]
    fn agreeing_tasks_pool_like_independent_samples() {
        // Eight tasks, 5/5 each: no spread between tasks, Wilson on 40 samples: reliable.
        let (deff, iv) = by_task(&[(5, 5); 8]);
        assert_eq!(deff, 1.0);
        let iv = iv.unwrap();
        assert!((iv.lower - 40.0 / (40.0 + 1.959964f64.powi(2))).abs() < 1e-6);
        assert_eq!(Reliability::of(Some(&iv)), Reliability::Reliable);
        // The same 40 samples in one cell would be reliable too; 3 tasks at 5/5 are not (15).
        let (_, iv) = by_task(&[(5, 5); 3]);
        assert_eq!(Reliability::of(iv.as_ref()), Reliability::Uncertain);
        let (_, iv) = by_task(&[(0, 5); 6]);
        assert_eq!(Reliability::of(iv.as_ref()), Reliability::Broken);
        assert_eq!(by_task(&[]), (1.0, None));
    }

    #[test]
    fn disagreeing_tasks_widen_the_interval() {
        // 8 tasks at 5/5 and 2 at 0/5: 40/50 samples, but the tasks disagree.
        let mut counts = vec![(5, 5); 8];
        counts.extend([(0, 5); 2]);
        let (deff, iv) = by_task(&counts);
        let naive =
            crate::report::interval::interval(crate::cli::IntervalKind::Wilson, 40, 50).unwrap();
        let iv = iv.unwrap();
        assert!(deff > 4.0, "deff {deff}");
        assert!(iv.upper - iv.lower > 1.5 * (naive.upper - naive.lower));
        // Within-task noise with identical tasks gives deff near 1.
        let (deff, _) = by_task(&[(3, 5), (3, 5), (3, 5), (3, 5)]);
        assert_eq!(deff, 1.0);
    }

    /// Draws many synthetic tags with a known mean per-task pass probability (tasks drawn from
    /// a Beta distribution around it, from nearly identical to all-or-nothing), k = 3–10 samples
    /// per task, 3–30 tasks, and counts how often the interval holds that mean. Prints the
    /// coverage overall and by number of tasks, and the power to call a tag `reliable` or
    /// `broken` when it truly is far on one side.
    #[test]
    fn coverage_by_simulation() {
        let mut rng = StdRng::seed_from_u64(12);
        let means = [0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.97, 0.995];
        let concentrations = [0.5, 2.0, 10.0, 50.0, 1000.0];
        let trials = 20_000;
        let (mut hit, mut all) = (0u64, 0u64);
        let mut by_c = [(0u64, 0u64); 3];
        let (mut rel, mut rel_n, mut brk, mut brk_n) = (0u64, 0u64, 0u64, 0u64);
        let (mut naive_hit, mut naive_all) = (0u64, 0u64);
        let (mut wrong, mut wrong_n) = (0u64, 0u64);
        for _ in 0..trials {
            let mu = means[rng.random_range(0..means.len())];
            let phi = concentrations[rng.random_range(0..concentrations.len())];
            let tasks = rng.random_range(3..=30usize);
            let k = rng.random_range(3..=10u64);
            let beta = Beta::new(mu * phi, (1.0 - mu) * phi).unwrap();
            let counts: Vec<(u64, u64)> = (0..tasks)
                .map(|_| {
                    let u: f64 = rng.random();
                    let pi = beta.inverse_cdf(u.clamp(1e-12, 1.0 - 1e-12));
                    let x = (0..k).filter(|_| rng.random::<f64>() < pi).count() as u64;
                    (x, k)
                })
                .collect();
            let iv = by_task(&counts).1.unwrap();
            let covered = iv.lower <= mu && mu <= iv.upper;
            hit += u64::from(covered);
            all += 1;
            let bucket = match tasks {
                3..=5 => 0,
                6..=12 => 1,
                _ => 2,
            };
            by_c[bucket].0 += u64::from(covered);
            by_c[bucket].1 += 1;
            let (x, n) = counts.iter().fold((0, 0), |(a, b), &(x, m)| (a + x, b + m));
            let naive =
                crate::report::interval::interval(crate::cli::IntervalKind::Wilson, x, n).unwrap();
            naive_hit += u64::from(naive.lower <= mu && mu <= naive.upper);
            naive_all += 1;
            let verdict = Reliability::of(Some(&iv));
            if mu >= 0.97 && phi >= 50.0 && tasks >= 10 {
                rel_n += 1;
                rel += u64::from(verdict == Reliability::Reliable);
            }
            if mu <= 0.1 && phi >= 10.0 && tasks >= 5 {
                brk_n += 1;
                brk += u64::from(verdict == Reliability::Broken);
            }
            // A wrong verdict is the costly error: `reliable` although the mean is below 0.9,
            // or `broken` although it is at least 0.5.
            wrong_n += 1;
            wrong += u64::from(
                (verdict == Reliability::Reliable && mu < RELIABLE_LOWER)
                    || (verdict == Reliability::Broken && mu >= BROKEN_UPPER),
            );
        }
        let pct = |a: u64, b: u64| 100.0 * a as f64 / b as f64;
        let coverage = pct(hit, all);
        println!(
            "pooled-by-task interval, 95 % nominal: coverage {coverage:.1} % over {all} tags \
             (3–5 tasks {:.1} %, 6–12 tasks {:.1} %, 13–30 tasks {:.1} %); \
             samples-as-independent Wilson: {:.1} %",
            pct(by_c[0].0, by_c[0].1),
            pct(by_c[1].0, by_c[1].1),
            pct(by_c[2].0, by_c[2].1),
            pct(naive_hit, naive_all)
        );
        println!(
            "power: `reliable` when the mean is ≥ 0.97 and tasks agree (≥ 10 tasks): {:.1} %; \
             `broken` when the mean is ≤ 0.1 (≥ 5 tasks): {:.1} %; \
             a verdict on the wrong side of its threshold: {:.2} %",
            pct(rel, rel_n),
            pct(brk, brk_n),
            pct(wrong, wrong_n)
        );
        assert!(
            pct(wrong, wrong_n) < 2.5,
            "wrong verdicts {:.2} %",
            pct(wrong, wrong_n)
        );
        assert!(
            (90.0..=99.0).contains(&coverage),
            "coverage {coverage:.1} % is outside 90–99 %"
        );
        for (i, (h, n)) in by_c.iter().enumerate() {
            assert!(
                pct(*h, *n) >= 85.0,
                "coverage {:.1} % in task bucket {i}",
                pct(*h, *n)
            );
        }
        assert!(
            pct(naive_hit, naive_all) < coverage,
            "the by-task interval should do better than treating samples as independent"
        );
        assert!(pct(rel, rel_n) > 30.0 && pct(brk, brk_n) > 50.0);
    }

    /// Value accuracy and BFCL-style accuracy pooled with [`pool_counts`]: the same by-task
    /// interval, but value accuracy's denominator is itself random (a task's passes), and tasks
    /// with no pass drop out. Tags are drawn as above, each task with a pass probability and,
    /// independently, a probability that a pass has the right values; the truths are the mean
    /// value accuracy and the mean of their product (BFCL-style). Prints the coverage of both.
    #[test]
    fn value_and_bfcl_style_coverage_by_simulation() {
        let mut rng = StdRng::seed_from_u64(14);
        let means = [0.1, 0.3, 0.5, 0.7, 0.9, 0.97];
        let concentrations = [0.5, 2.0, 10.0, 50.0, 1000.0];
        let draw = |rng: &mut StdRng, beta: &Beta| {
            let u: f64 = rng.random();
            beta.inverse_cdf(u.clamp(1e-12, 1.0 - 1e-12))
        };
        let (mut value_hit, mut value_all, mut style_hit, mut style_all) = (0u64, 0u64, 0u64, 0u64);
        let (mut naive_hit, mut far, mut told) = (0u64, 0u64, 0u64);
        for _ in 0..10_000 {
            let pick = |rng: &mut StdRng| {
                let mu = means[rng.random_range(0..means.len())];
                let phi = concentrations[rng.random_range(0..concentrations.len())];
                (mu, Beta::new(mu * phi, (1.0 - mu) * phi).unwrap())
            };
            let (mu_pass, pass_beta) = pick(&mut rng);
            let (mu_value, value_beta) = pick(&mut rng);
            let tasks = rng.random_range(3..=30usize);
            let k = rng.random_range(3..=10u64);
            let (mut value, mut style) = (Vec::new(), Vec::new());
            for _ in 0..tasks {
                let (p, v) = (draw(&mut rng, &pass_beta), draw(&mut rng, &value_beta));
                let (mut passes, mut matches) = (0, 0);
                for _ in 0..k {
                    if rng.random::<f64>() < p {
                        passes += 1;
                        matches += u64::from(rng.random::<f64>() < v);
                    }
                }
                value.push((matches, passes));
                style.push((matches, k));
            }
            let naive = |c: &[(u64, u64)]| {
                let (x, n) = c.iter().fold((0, 0), |(a, b), &(x, m)| (a + x, b + m));
                crate::report::interval::interval(crate::cli::IntervalKind::Wilson, x, n)
            };
            let truth = mu_value;
            if let (Some(iv), Some(wide)) = (pool_counts(value.clone()).interval, naive(&value)) {
                value_hit += u64::from(iv.lower <= truth && truth <= iv.upper);
                naive_hit += u64::from(wide.lower <= truth && truth <= wide.upper);
                value_all += 1;
                // Power: a value accuracy 20 points or more from 50 % is told apart from it.
                if (truth - 0.5).abs() >= 0.2 && tasks >= 10 {
                    far += 1;
                    told += u64::from(iv.upper < 0.5 || iv.lower > 0.5);
                }
            }
            let truth = mu_pass * mu_value;
            if let Some(iv) = pool_counts(style).interval {
                style_hit += u64::from(iv.lower <= truth && truth <= iv.upper);
                style_all += 1;
            }
        }
        let pct = |a: u64, b: u64| 100.0 * a as f64 / b as f64;
        let (value_cov, style_cov) = (pct(value_hit, value_all), pct(style_hit, style_all));
        println!(
            "pooled by task, 95 % nominal: value accuracy coverage {value_cov:.1} % over \
             {value_all} tags with a pass (samples-as-independent Wilson: {:.1} %); BFCL-style \
             accuracy coverage {style_cov:.1} % over {style_all} tags",
            pct(naive_hit, value_all)
        );
        println!(
            "power: a value accuracy 20 points or more from 50 % (≥ 10 tasks) is told apart \
             from 50 % in {:.1} % of {far} tags",
            pct(told, far)
        );
        assert!(
            (88.0..=99.0).contains(&value_cov),
            "value accuracy {value_cov:.1} %"
        );
        assert!(
            (90.0..=99.0).contains(&style_cov),
            "BFCL-style {style_cov:.1} %"
        );
        assert!(pct(naive_hit, value_all) < value_cov);
        assert!(pct(told, far) > 50.0, "power {:.1} %", pct(told, far));
    }
}
