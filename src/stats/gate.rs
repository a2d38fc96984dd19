//! The CI gate's statistics (SPEC §9, "what the gate can and cannot see"): the test, the family
//! it decides over, and the power it has, computed for the test actually run.
//!
//! - **The test** ([`one_sided_p`]) is an exact stratified permutation test of the very
//!   statistic the interval estimates: B − A, the mean over tasks of each task's difference of
//!   pass rates, every task weighing the same. Under "A and B pass a task equally often" a
//!   task's samples are exchangeable between the two rows, so given each task's total passes
//!   A's count is hypergeometric, independently across tasks; the statistic is a weighted sum
//!   of those counts (weight `1/n_A + 1/n_B`, equal when every task has the same k, where the
//!   test is the exact conditional Cochran–Mantel–Haenszel test), and its tail is computed by
//!   convolution. An observed difference that is not a drop is no evidence of one (p = 1), so no
//!   row can print an interval above 0 and a regression.
//! - **The family** ([`decide`]): every pooled row (overall, tags, transport errors) and every
//!   task of the comparisons the gate decides on, in one weighted Holm procedure (Holm 1979,
//!   "A simple sequentially rejective multiple test procedure": weighted Bonferroni tests closed
//!   under intersection). Half of α goes to the pooled rows, half to the tasks, each half
//!   shared equally, so a single task that broke has a voice of its own; a hypothesis that no
//!   outcome could make significant at its share (one task at k = 3: its smallest p is
//!   1/C(6, 3) = 0.05) is left out and its share goes to the others (Tarone 1990, "A modified
//!   Bonferroni method for discrete data", with the smallest p taken from the sample counts
//!   alone, so the family is fixed before any outcome is seen). With no task able to reach
//!   its share, the pooled rows keep all of α, as they had before tasks had a voice.
//! - **Power** ([`detectable_drop`]) is simulated for that test at a row's own task count and
//!   sample counts, seeded by the design (so `build` stays deterministic and `callcheck plan`
//!   prints what `compare` will), at the row's level in the family: "detects a drop of D points
//!   at 80 %" when every task of the row falls from [`REFERENCE_RATE`] to that minus D.
//!
//! Every difference is **B − A**: A is the baseline, B the change.

use super::compare::SplitMix64;
use statrs::distribution::{ContinuousCDF, Normal};
use statrs::function::factorial::ln_factorial;

/// The significance level of the gate, family-wise.
pub const ALPHA: f64 = 1.0 - super::interval::CONFIDENCE;

/// The share of α the tasks get when any of them can reach significance; the pooled rows get
/// the rest. Half: at k = 10 over callcheck's 68 tasks and 19 pooled rows a task's level is
/// 0.025/68 = 3.7·10⁻⁴, above the p of a task going from 8 of 10 to 0 of 10 (3.6·10⁻⁴), so a
/// task falling from 90 % to 0 is caught 93 % of the time; a smaller share would miss it at 9
/// of 10. The pooled rows pay with half their level (docs/compare-grid.md shows the trade).
pub const TASK_SHARE: f64 = 0.5;

/// The power a printed detectable drop promises.
pub const POWER: f64 = 0.8;

/// The pass rate each task of a row is taken to start from in A when power is computed: the
/// default `--reliable-at`, the level a row the gate protects is expected to hold. A row
/// passing every sample is easier to watch (its detectable drop is smaller than printed); a
/// row far below it harder.
pub const REFERENCE_RATE: f64 = 0.9;

/// Simulated collections behind each power figure (the 80th percentile of the smallest drop
/// each one reveals): enough that the printed drop's Monte Carlo error is a fraction of a
/// point. Rows whose detectable drop is a few points (hundreds of tasks) need fewer for the
/// same error in points, down to [`FEWEST_SIMULATIONS`] ([`simulations`]).
pub const SIMULATIONS: usize = 1000;

/// The fewest simulated collections behind a power figure.
pub const FEWEST_SIMULATIONS: usize = 200;

/// How many collections a design's power is simulated with: [`SIMULATIONS`] while its
/// detectable drop is 5 points or more (by a first guess), fewer as it shrinks (the
/// percentile's error shrinks with the spread of the drops, which shrinks with the drop).
pub fn simulations(design: &[(u64, u64)], level: f64) -> usize {
    let (d, _) = seed_of(design, level);
    let guess = guess_drop(&d, level);
    ((SIMULATIONS as f64 * (guess / 0.05).powi(2)).ceil() as usize)
        .clamp(FEWEST_SIMULATIONS, SIMULATIONS)
}

/// Above this many multiply-adds the exact convolution gives way to the normal approximation
/// of the same conditional statistic (with continuity correction): only corpora of thousands
/// of tasks at large k with uneven sample counts reach it, and there the statistic is a sum of
/// thousands of independent terms.
const EXACT_BUDGET: f64 = 2e8;

/// Weights above this (after reducing them to integers) are rounded to about one part in
/// this many, keeping the convolution's lattice small; only sample counts whose least common
/// multiple is large (k = 17 beside 19 beside 20) need it.
const MAX_WEIGHT: u64 = 4096;

/// One task's counts for a one-sided test: events and trials of A and of B.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stratum {
    pub a_events: u64,
    pub a_trials: u64,
    pub b_events: u64,
    pub b_trials: u64,
}

/// A stratum both sides have trials in, with what the permutation distribution needs.
struct Part {
    na: u64,
    nb: u64,
    /// A's observed count.
    xa: u64,
    /// Total events of the task.
    t: u64,
    /// The support of A's count given `t`.
    lo: u64,
    hi: u64,
}

fn parts(strata: &[Stratum]) -> Vec<Part> {
    strata
        .iter()
        .filter(|s| s.a_trials > 0 && s.b_trials > 0)
        .map(|s| {
            let (na, nb) = (s.a_trials, s.b_trials);
            let (xa, xb) = (s.a_events.min(na), s.b_events.min(nb));
            Part::new(na, nb, xa, xa + xb)
        })
        .collect()
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Integer weights proportional to each task's `1/n_A + 1/n_B` (what a unit of A's count
/// moves the equal-weight difference by): exact when their common denominator is small,
/// otherwise rounded to about one part in [`MAX_WEIGHT`].
fn weights(parts: &[&Part]) -> Vec<u64> {
    if parts.is_empty() {
        return Vec::new();
    }
    // w = (na + nb) / (na nb), reduced; the least common multiple of the denominators.
    let reduced: Vec<(u64, u64)> = parts
        .iter()
        .map(|p| {
            let (num, den) = (p.na + p.nb, p.na * p.nb);
            let g = gcd(num, den);
            (num / g, den / g)
        })
        .collect();
    let mut lcm: u64 = 1;
    let mut exact = true;
    for &(_, den) in &reduced {
        let g = gcd(lcm, den);
        match (lcm / g).checked_mul(den) {
            Some(l) if l <= 1 << 40 => lcm = l,
            _ => {
                exact = false;
                break;
            }
        }
    }
    if exact {
        let w: Vec<u64> = reduced.iter().map(|&(n, d)| n * (lcm / d)).collect();
        let g = w.iter().fold(0, |g, &x| gcd(g, x)).max(1);
        let w: Vec<u64> = w.into_iter().map(|x| x / g).collect();
        if w.iter().all(|&x| x <= MAX_WEIGHT) {
            return w;
        }
    }
    let real: Vec<f64> = parts
        .iter()
        .map(|p| 1.0 / p.na as f64 + 1.0 / p.nb as f64)
        .collect();
    let top = real.iter().copied().fold(0.0, f64::max);
    real.iter()
        .map(|w| ((w / top) * MAX_WEIGHT as f64).round().max(1.0) as u64)
        .collect()
}

/// `ln C(n, k)`.
pub(crate) fn ln_choose(n: u64, k: u64) -> f64 {
    if k > n {
        return f64::NEG_INFINITY;
    }
    ln_factorial(n) - ln_factorial(k) - ln_factorial(n - k)
}

/// A's count's conditional distribution, from its largest value down: `q[j] = P(X = hi − j)`.
fn pmf_from_top(p: &Part) -> Vec<f64> {
    let n = p.na + p.nb;
    let ln_all = ln_choose(n, p.t);
    (0..=p.hi - p.lo)
        .map(|j| {
            let x = p.hi - j;
            (ln_choose(p.na, x) + ln_choose(p.nb, p.t - x) - ln_all).exp()
        })
        .collect()
}

/// The equal-weight difference B − A over the strata both sides have trials in (in f64, as
/// the interval computes it); 0 without one.
fn observed_difference(parts: &[Part]) -> f64 {
    if parts.is_empty() {
        return 0.0;
    }
    parts
        .iter()
        .map(|p| (p.t - p.xa) as f64 / p.nb as f64 - p.xa as f64 / p.na as f64)
        .sum::<f64>()
        / parts.len() as f64
}

/// The one-sided p-value of "B's event probability is at least A's on every task" against "B's
/// is lower", for the equal-weight difference: the exact stratified permutation test described
/// in the module's documentation. Tasks where either side has no trial are left out; an
/// observed difference that is not a drop gives 1. Its smallest attainable value is the data's
/// own (Π 1/C(Nᵢ, nᵢ) when every task went from all to none), not a resampling floor.
pub fn one_sided_p(strata: &[Stratum]) -> f64 {
    let parts = parts(strata);
    if parts.is_empty() || observed_difference(&parts) >= 0.0 {
        return 1.0;
    }
    tail(&parts)
}

/// `P(Σ wᵢ Xᵢ ≥ observed)` under the permutation distribution.
fn tail(parts: &[Part]) -> f64 {
    let w = weights(&parts.iter().collect::<Vec<_>>());
    let pmfs: Vec<Vec<f64>> = parts.iter().map(pmf_from_top).collect();
    convolve(parts, &w, |i| &pmfs[i], None, &mut Scratch::default())
}

/// Buffers a convolution reuses (the power simulation runs thousands).
#[derive(Default)]
struct Scratch {
    dist: Vec<f64>,
    next: Vec<f64>,
    order: Vec<usize>,
    parts: Vec<Part>,
}

/// The tail of the weighted sum, from each task's part, weight and pmf (from the top). Written
/// as the deficit from the top, `Yᵢ = wᵢ (hiᵢ − Xᵢ)`, the p-value is `P(Σ Yᵢ ≤ r)` with `r`
/// the observed deficit: a convolution truncated at `r`, cheap exactly where the p-value is
/// small, and free of the cancellation a tail summed from the other end would have. With
/// `decide_at`, it may stop as soon as the p-value is known to be below that level or not,
/// returning a bound on the right side of it.
fn convolve<'q>(
    parts: &[Part],
    w: &[u64],
    pmf: impl Fn(usize) -> &'q [f64],
    decide_at: Option<f64>,
    scratch: &mut Scratch,
) -> f64 {
    let Scratch {
        dist, next, order, ..
    } = scratch;
    // Tasks whose totals leave A's count one value add a constant: they are left out. The
    // widest first, so that the bounds below tighten early.
    order.clear();
    order.extend((0..parts.len()).filter(|&i| parts[i].lo < parts[i].hi));
    if order.is_empty() {
        // Nothing could have come out otherwise: the observed is the only outcome.
        return 1.0;
    }
    let range = |i: usize| w[i] * (parts[i].hi - parts[i].lo);
    order.sort_by_key(|&i| (std::cmp::Reverse(range(i)), i));
    let r: u64 = order
        .iter()
        .map(|&i| w[i] * (parts[i].hi - parts[i].xa))
        .sum();
    let mut cost = 0.0;
    let mut reach: u64 = 0;
    for &i in order.iter() {
        reach = (reach + range(i)).min(r);
        cost += (reach + 1) as f64 * (parts[i].hi - parts[i].lo + 1) as f64;
    }
    if cost > EXACT_BUDGET {
        return normal_tail(order.iter().map(|&i| (&parts[i], w[i], pmf(i))));
    }
    let len = r as usize + 1;
    // The most the tasks not yet added can still add to the deficit.
    let mut rest: u64 = order.iter().map(|&i| range(i)).sum();
    dist.clear();
    dist.push(1.0);
    for &i in order.iter() {
        let q = pmf(i);
        let step = w[i] as usize;
        let top = (dist.len() - 1 + step * (q.len() - 1)).min(len - 1);
        next.clear();
        next.resize(top + 1, 0.0);
        for (s, &d) in dist.iter().enumerate() {
            if d == 0.0 {
                continue;
            }
            for (j, &qj) in q.iter().enumerate() {
                let at = s + j * step;
                if at > top {
                    break;
                }
                next[at] += d * qj;
            }
        }
        std::mem::swap(dist, next);
        rest -= range(i);
        if let Some(level) = decide_at {
            // The p-value is at most the mass at or under r now (what is added only moves mass
            // up), and at least the mass that stays under r whatever is added: when either
            // settles the comparison with `level`, stop with that bound.
            let upper: f64 = dist.iter().sum();
            if below(upper, level) {
                return upper;
            }
            if rest <= r {
                let sure = ((r - rest) as usize + 1).min(dist.len());
                let lower: f64 = dist[..sure].iter().sum();
                if !below(lower, level) {
                    return lower;
                }
            }
        }
    }
    dist.iter().sum::<f64>().clamp(0.0, 1.0)
}

/// The normal approximation of the same tail, for sizes beyond [`EXACT_BUDGET`].
fn normal_tail<'q>(moving: impl Iterator<Item = (&'q Part, u64, &'q [f64])>) -> f64 {
    let (mut mean, mut var, mut obs) = (0.0, 0.0, 0.0);
    for (p, w, q) in moving {
        let wi = w as f64;
        let m: f64 = q.iter().enumerate().map(|(j, x)| x * j as f64).sum();
        let m2: f64 = q.iter().enumerate().map(|(j, x)| x * (j * j) as f64).sum();
        mean += wi * m;
        var += wi * wi * (m2 - m * m);
        obs += wi * (p.hi - p.xa) as f64;
    }
    let z = (obs + 0.5 - mean) / var.max(1e-300).sqrt();
    Normal::standard().cdf(z).clamp(0.0, 1.0)
}

/// The smallest p-value [`one_sided_p`] could give for strata with these trials, whatever
/// their outcomes: every trial of A an event and none of B's, `Π 1/C(n_A + n_B, n_A)` (for one
/// task the minimum over its totals is at `n_A` events). A function of the sample counts only.
pub fn smallest_p(trials: &[(u64, u64)]) -> f64 {
    trials
        .iter()
        .filter(|(a, b)| *a > 0 && *b > 0)
        .map(|&(a, b)| -ln_choose(a + b, a))
        .sum::<f64>()
        .exp()
}

/// Whether a hypothesis of the family is a pooled row or a single task: the two groups that
/// share α ([`TASK_SHARE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    Row,
    Task,
}

/// One hypothesis of the gate's family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hypothesis {
    pub group: Group,
    /// Its one-sided p-value ([`one_sided_p`]).
    pub p: f64,
    /// The smallest p-value its sample counts allow ([`smallest_p`]).
    pub smallest: f64,
}

/// What the family decided about one hypothesis.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Decision {
    /// In the family: some outcome could make it significant at its share of α. Left out, it
    /// is never a regression and its share goes to the others.
    pub in_family: bool,
    /// Its level at the procedure's first step, `α · wᵢ`: the level its power is computed at;
    /// the step-down can only raise it. 0 when left out.
    pub level: f64,
    /// The weighted-Holm adjusted p-value (1 when left out): a regression when below α.
    pub adjusted: f64,
}

impl Default for Decision {
    /// Not (yet) decided: out of any family, never a regression.
    fn default() -> Decision {
        Decision {
            in_family: false,
            level: 0.0,
            adjusted: 1.0,
        }
    }
}

impl Decision {
    /// Significant after the correction: a regression.
    pub fn rejected(&self) -> bool {
        self.in_family && below(self.adjusted, ALPHA)
    }
}

/// `p < level`, with a p-value a rounding error below the level counted as equal to it: one
/// task from 3/3 to 0/3 has p = 1/C(6, 3) = 0.05 exactly, which `exp(−ln 20)` computes a
/// hair under 0.05, and 0.05 is not below α.
pub fn below(p: f64, level: f64) -> bool {
    p < level * (1.0 - 1e-9)
}

/// The weights of the family's members: which hypotheses are in it, and each one's share of
/// α (summing to 1 over those in it). A function of the groups and the smallest attainable
/// p-values only — of the sample counts, never of the outcomes — so that the family is fixed
/// before the data are seen (Tarone's condition for leaving hypotheses out).
pub fn weights_of(members: &[(Group, f64)]) -> Vec<Option<f64>> {
    let mut inside: Vec<bool> = members.iter().map(|(_, s)| below(*s, ALPHA)).collect();
    loop {
        let count = |g: Group| {
            members
                .iter()
                .zip(&inside)
                .filter(|((x, _), i)| *x == g && **i)
                .count()
        };
        let (rows, tasks) = (count(Group::Row), count(Group::Task));
        // Each member's share: its group's, split equally; a group alone takes all of α.
        let share = |g: Group| match (g, rows, tasks) {
            (_, 0, 0) => 0.0,
            (Group::Row, r, 0) => 1.0 / r as f64,
            (Group::Task, 0, t) => 1.0 / t as f64,
            (Group::Row, r, _) => (1.0 - TASK_SHARE) / r as f64,
            (Group::Task, _, t) => TASK_SHARE / t as f64,
        };
        let next: Vec<bool> = members
            .iter()
            .zip(&inside)
            .map(|((g, s), i)| *i && below(*s, ALPHA * share(*g)))
            .collect();
        if next == inside {
            return members
                .iter()
                .zip(&inside)
                .map(|((g, _), i)| i.then(|| share(*g)))
                .collect();
        }
        inside = next;
    }
}

/// The gate over a family: Tarone's selection ([`weights_of`]), then weighted Holm. Returns a
/// decision per hypothesis, in order.
pub fn decide(family: &[Hypothesis]) -> Vec<Decision> {
    let w = weights_of(
        &family
            .iter()
            .map(|h| (h.group, h.smallest))
            .collect::<Vec<_>>(),
    );
    let mut order: Vec<usize> = (0..family.len()).filter(|&i| w[i].is_some()).collect();
    let ratio = |i: usize| family[i].p / w[i].unwrap_or(1.0);
    order.sort_by(|&i, &j| ratio(i).total_cmp(&ratio(j)).then(i.cmp(&j)));
    let mut out: Vec<Decision> = w
        .iter()
        .map(|x| Decision {
            in_family: x.is_some(),
            level: x.map_or(0.0, |x| ALPHA * x),
            adjusted: 1.0,
        })
        .collect();
    // Step j tests the j-th smallest p/w against α·w over the hypotheses not yet rejected;
    // the adjusted p-value is the running maximum of p·(remaining weight)/w.
    let mut remaining: f64 = order.iter().map(|&i| w[i].unwrap_or(0.0)).sum();
    let mut running: f64 = 0.0;
    for &i in &order {
        let wi = w[i].unwrap_or(1.0);
        running = running.max((family[i].p * remaining / wi).min(1.0));
        out[i].adjusted = running;
        remaining -= wi;
    }
    out
}

/// Holm's step-down adjustment with equal weights: the adjusted p-values, in the input's order.
/// The gate used it over the pooled rows alone before tasks had a voice; the grid's table
/// compares the two.
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

/// A pooled row's design: each task's scored samples in A and in B.
pub type Design = Vec<(u64, u64)>;

/// The seed of a design's power simulation: its sample counts (in a fixed order: tasks are
/// exchangeable under the reference) and the level, so that the same design at the same level
/// gets the same figure wherever it is computed.
fn seed_of(design: &[(u64, u64)], level: f64) -> (Design, u64) {
    let mut d: Design = design
        .iter()
        .copied()
        .filter(|(a, b)| *a > 0 && *b > 0)
        .collect();
    d.sort_unstable();
    let mut text = format!("{:016x}", level.to_bits());
    for (a, b) in &d {
        text.push_str(&format!(" {a}:{b}"));
    }
    (d, super::compare::fnv1a(&text))
}

/// The simulated collections of one design, sharing their random numbers across drops: a B
/// sample passes at drop D when its uniform draw is below the reference rate minus D, so
/// each collection's B counts only fall as D rises, and with them the test's p-value. The
/// gate's test at a level is then a threshold in D per collection, found where needed.
struct Simulation {
    design: Design,
    /// The test's weight of each task (a function of the sample counts alone).
    weights: Vec<u64>,
    /// Per task, the pmf of A's count from the top ([`pmf_from_top`]) for every total.
    pmfs: Vec<std::sync::Arc<Vec<Vec<f64>>>>,
    /// Per collection and task: A's passes.
    a: Vec<u64>,
    /// Per collection and task, B's uniform draws below the reference rate (the others never
    /// pass), sorted, in one list: task `i` of collection `c` at `b[offsets[c·C + i]..]`.
    b: Vec<f64>,
    offsets: Vec<usize>,
    runs: usize,
}

impl Simulation {
    fn new(design: &[(u64, u64)], level: f64) -> Simulation {
        let runs = simulations(design, level);
        let (design, seed) = seed_of(design, level);
        let blank: Vec<Part> = design
            .iter()
            .map(|&(na, nb)| Part::new(na, nb, 0, 0))
            .collect();
        let weights = weights(&blank.iter().collect::<Vec<_>>());
        let mut tables: std::collections::BTreeMap<(u64, u64), std::sync::Arc<Vec<Vec<f64>>>> =
            Default::default();
        let pmfs = design
            .iter()
            .map(|&(na, nb)| {
                tables
                    .entry((na, nb))
                    .or_insert_with(|| {
                        std::sync::Arc::new(
                            (0..=na + nb)
                                .map(|t| pmf_from_top(&Part::new(na, nb, 0, t)))
                                .collect(),
                        )
                    })
                    .clone()
            })
            .collect();
        let c = design.len();
        let mut a = Vec::with_capacity(runs * c);
        let mut b = Vec::new();
        let mut offsets = Vec::with_capacity(runs * c + 1);
        for run in 0..runs {
            let mut rng = SplitMix64::new(seed ^ (run as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            for &(na, nb) in &design {
                a.push((0..na).filter(|_| rng.unit() < REFERENCE_RATE).count() as u64);
                offsets.push(b.len());
                let start = b.len();
                for _ in 0..nb {
                    let v = rng.unit();
                    if v < REFERENCE_RATE {
                        b.push(v);
                    }
                }
                b[start..].sort_by(f64::total_cmp);
            }
        }
        offsets.push(b.len());
        Simulation {
            design,
            weights,
            pmfs,
            a,
            b,
            offsets,
            runs,
        }
    }

    /// Whether the test at `level` rejects in collection `run` at drop `drop`.
    fn rejects(&self, run: usize, drop: f64, level: f64, scratch: &mut Scratch) -> bool {
        let c = self.design.len();
        let mut parts = std::mem::take(&mut scratch.parts);
        parts.clear();
        for (i, &(na, nb)) in self.design.iter().enumerate() {
            let at = run * c + i;
            let draws = &self.b[self.offsets[at]..self.offsets[at + 1]];
            // B passes where its draw is below the reference rate minus the drop.
            let xb = draws.partition_point(|v| *v < REFERENCE_RATE - drop) as u64;
            let xa = self.a[at];
            parts.push(Part::new(na, nb, xa, xa + xb));
        }
        let answer = observed_difference(&parts) < 0.0
            && below(
                convolve(
                    &parts,
                    &self.weights,
                    |i| self.pmfs[i][parts[i].t as usize].as_slice(),
                    Some(level),
                    scratch,
                ),
                level,
            );
        scratch.parts = parts;
        answer
    }

    /// The smallest drop at which at least `need` collections reject at `level`, to within
    /// half a thousandth; `None` when fewer do even at a fall to 0. Bisection over the drop,
    /// testing only the collections whose answer at the midpoint is not implied by an earlier
    /// one (rejecting at a drop means rejecting at every larger one), from a bracket around
    /// `guess` widened until it holds the answer.
    fn quantile(&self, level: f64, need: usize, guess: f64) -> Option<f64> {
        use rayon::prelude::*;
        let n = self.runs;
        // Per collection: the largest drop known not to reject, the smallest known to.
        let mut known: Vec<(f64, f64)> = vec![(-1.0, f64::INFINITY); n];
        let count_at = |drop: f64, known: &mut Vec<(f64, f64)>| {
            let answers: Vec<bool> = known
                .par_iter()
                .enumerate()
                .map_init(Scratch::default, |scratch, (i, &(no, yes))| {
                    if yes <= drop {
                        true
                    } else if no >= drop {
                        false
                    } else {
                        self.rejects(i, drop, level, scratch)
                    }
                })
                .collect();
            for (k, &yes) in known.iter_mut().zip(&answers) {
                if yes {
                    k.1 = k.1.min(drop);
                } else {
                    k.0 = k.0.max(drop);
                }
            }
            answers.iter().filter(|&&x| x).count()
        };
        // A bracket [lo, hi] with fewer than `need` rejecting at lo and `need` at hi.
        let guess = guess.clamp(0.01, REFERENCE_RATE);
        let (mut lo, mut hi);
        if count_at(guess, &mut known) >= need {
            hi = guess;
            lo = guess;
            loop {
                lo = (lo - 0.1 * guess.max(0.1)).max(0.0);
                if lo == 0.0 || count_at(lo, &mut known) < need {
                    break;
                }
                hi = lo;
            }
        } else {
            lo = guess;
            hi = guess;
            loop {
                hi = (hi + 0.1 * guess.max(0.1)).min(REFERENCE_RATE);
                if count_at(hi, &mut known) >= need {
                    break;
                }
                if hi >= REFERENCE_RATE {
                    return None;
                }
                lo = hi;
            }
        }
        while hi - lo > 0.0005 {
            let mid = 0.5 * (lo + hi);
            if count_at(mid, &mut known) >= need {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(hi)
    }
}

/// A first guess of the detectable drop, to start the simulation's search near it: the
/// normal approximation of the difference's power (never printed; the simulation decides).
fn guess_drop(design: &[(u64, u64)], level: f64) -> f64 {
    let normal = Normal::standard();
    let need = normal.inverse_cdf(1.0 - level.clamp(1e-300, 0.5)) + normal.inverse_cdf(POWER);
    let c = design.len() as f64;
    let p = REFERENCE_RATE;
    let gap = |drop: f64| {
        let q = (p - drop).max(0.0);
        let var: f64 = design
            .iter()
            .map(|&(na, nb)| p * (1.0 - p) / na as f64 + q * (1.0 - q) / nb as f64)
            .sum::<f64>()
            / (c * c);
        drop - need * var.sqrt()
    };
    let (mut lo, mut hi) = (0.0, p);
    for _ in 0..30 {
        let mid = 0.5 * (lo + hi);
        if gap(mid) >= 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

impl Part {
    /// A task with `na` and `nb` trials, `xa` of A's an event, `t` in all.
    fn new(na: u64, nb: u64, xa: u64, t: u64) -> Part {
        Part {
            na,
            nb,
            xa,
            t,
            lo: t.saturating_sub(nb),
            hi: t.min(na),
        }
    }
}

/// The smallest drop, in points of pass rate over the row's tasks, that the gate's test at
/// `level` detects with [`POWER`] when each of the row's tasks falls from [`REFERENCE_RATE`]
/// by that much: simulated ([`simulations`] collections, seeded by the design) for the test
/// actually run. `None` when not even a fall to 0 would be detected that often. Rounded up
/// to a thousandth (a tenth of a point).
pub fn detectable_drop(design: &[(u64, u64)], level: f64) -> Option<f64> {
    let (d, _) = seed_of(design, level);
    if d.is_empty() || !below(smallest_p(&d), level) {
        return None;
    }
    let sim = Simulation::new(&d, level);
    let need = (POWER * sim.runs as f64).ceil() as usize;
    let q = sim.quantile(level, need, guess_drop(&d, level))?;
    Some((q * 1000.0).ceil() / 1000.0)
}

/// The simulated power of the gate's test at `level` for a drop of `drop` from
/// [`REFERENCE_RATE`] on every task of the design (the same simulations as
/// [`detectable_drop`]).
pub fn power(design: &[(u64, u64)], level: f64, drop: f64) -> f64 {
    let (d, _) = seed_of(design, level);
    if d.is_empty() {
        return 0.0;
    }
    let sim = Simulation::new(&d, level);
    let mut scratch = Scratch::default();
    let hits = (0..sim.runs)
        .filter(|&i| sim.rejects(i, drop, level, &mut scratch))
        .count();
    hits as f64 / sim.runs as f64
}

/// The smallest k at which one task going from all k samples passing in A to none in B is
/// significant at `level` (its p-value is 1/C(2k, k)); `None` above `k_max`.
pub fn single_task_k(level: impl Fn(u64) -> f64, k_max: u64) -> Option<u64> {
    (1..=k_max).find(|&k| below((-ln_choose(2 * k, k)).exp(), level(k)))
}

/// The first-step levels of a family of pooled rows over `row_sizes` tasks each and `tasks`
/// single tasks when every task has `k` samples on both sides: (a row of each size's level
/// or 0 when it is left out, a task's level or 0). What `callcheck plan` prints, and what
/// `compare` computes from the collected counts.
pub fn levels_at(row_sizes: &[usize], tasks: usize, k: u64) -> (Vec<f64>, f64) {
    // The same computation as the comparison's, from the same counts.
    let members: Vec<(Group, f64)> = row_sizes
        .iter()
        .map(|&c| (Group::Row, smallest_p(&vec![(k, k); c])))
        .chain((0..tasks).map(|_| (Group::Task, smallest_p(&[(k, k)]))))
        .collect();
    let w = weights_of(&members);
    let rows = w[..row_sizes.len()]
        .iter()
        .map(|x| x.map_or(0.0, |x| ALPHA * x))
        .collect();
    let task = w[row_sizes.len()..]
        .first()
        .copied()
        .flatten()
        .map_or(0.0, |x| ALPHA * x);
    (rows, task)
}

/// In a family of pooled rows over `row_sizes` tasks and `tasks` single tasks, the smallest k
/// (every task at k samples on both sides) at which one task going from all-pass to all-fail
/// is a regression whatever else the family shows; `None` above `k_max` or without a task.
pub fn single_task_k_in(row_sizes: &[usize], tasks: usize, k_max: u64) -> Option<u64> {
    if tasks == 0 {
        return None;
    }
    (1..=k_max).find(|&k| {
        below(
            (-ln_choose(2 * k, k)).exp(),
            levels_at(row_sizes, tasks, k).1,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(a: u64, na: u64, b: u64, nb: u64) -> Stratum {
        Stratum {
            a_events: a,
            a_trials: na,
            b_events: b,
            b_trials: nb,
        }
    }

    /// The exact conditional test against hand-computed hypergeometric tails.
    #[test]
    fn the_gate_test_is_the_exact_hypergeometric_tail() {
        // 3/3 against 0/3: all three passes in A, 1/C(6, 3) = 0.05.
        assert!((one_sided_p(&[one(3, 3, 0, 3)]) - 0.05).abs() < 1e-12);
        // 2/3 against 1/3: P(X ≥ 2) for X ~ H(6, 3, 3) = (9 + 1)/20.
        assert!((one_sided_p(&[one(2, 3, 1, 3)]) - 0.5).abs() < 1e-12);
        // B better, or no different: no evidence of a drop.
        assert_eq!(one_sided_p(&[one(0, 3, 3, 3)]), 1.0);
        assert_eq!(one_sided_p(&[one(2, 3, 2, 3)]), 1.0);
        // Two tasks: the first 2/2 → 0/2, the second 1/2 → 1/2; each A count is H(4, 2, 2):
        // 1/6, 4/6, 1/6 at 0, 1, 2. S = X1 + X2 ≥ 3: P(2, ≥ 1) + P(1, 2) = 5/36 + 4/36.
        let p = one_sided_p(&[one(2, 2, 0, 2), one(1, 2, 1, 2)]);
        assert!((p - 0.25).abs() < 1e-12, "{p}");
        assert_eq!(one_sided_p(&[]), 1.0);
        assert_eq!(one_sided_p(&[one(1, 0, 1, 3)]), 1.0);
        // Six tasks all 5/5 → 0/5: (1/252)^6.
        let p = one_sided_p(&[one(5, 5, 0, 5); 6]);
        assert!((p / (1.0f64 / 252.0).powi(6) - 1.0).abs() < 1e-9, "{p}");
    }

    /// With unequal k the statistic is the equal-weight difference: checked against a brute
    /// force enumeration of every allocation of each task's passes.
    #[test]
    fn with_unequal_k_the_test_is_the_permutation_test_of_the_equal_weight_difference() {
        let cases = [
            vec![one(4, 5, 1, 3), one(2, 2, 1, 4), one(3, 4, 3, 5)],
            vec![one(5, 5, 0, 1), one(1, 1, 3, 5), one(2, 3, 0, 2)],
            vec![one(6, 7, 2, 4), one(3, 3, 1, 2)],
        ];
        for strata in cases {
            let diff = |xa: &[u64]| -> f64 {
                strata
                    .iter()
                    .zip(xa)
                    .map(|(s, &x)| {
                        let t = s.a_events + s.b_events;
                        (t - x) as f64 / s.b_trials as f64 - x as f64 / s.a_trials as f64
                    })
                    .sum::<f64>()
                    / strata.len() as f64
            };
            let observed = diff(&strata.iter().map(|s| s.a_events).collect::<Vec<_>>());
            // Enumerate: each task's A count with its hypergeometric probability.
            let mut p = 0.0;
            let mut stack = vec![(Vec::<u64>::new(), 1.0f64)];
            while let Some((xs, pr)) = stack.pop() {
                if xs.len() == strata.len() {
                    if diff(&xs) <= observed + 1e-12 {
                        p += pr;
                    }
                    continue;
                }
                let s = strata[xs.len()];
                let t = s.a_events + s.b_events;
                let n = s.a_trials + s.b_trials;
                for x in t.saturating_sub(s.b_trials)..=t.min(s.a_trials) {
                    let q = (ln_choose(s.a_trials, x) + ln_choose(s.b_trials, t - x)
                        - ln_choose(n, t))
                    .exp();
                    let mut next = xs.clone();
                    next.push(x);
                    stack.push((next, pr * q));
                }
            }
            let got = one_sided_p(&strata);
            assert!(observed < 0.0);
            assert!((got - p).abs() < 1e-12, "{strata:?}: {got} vs {p}");
        }
    }

    #[test]
    fn the_smallest_p_is_the_all_to_none_outcome() {
        assert!((smallest_p(&[(3, 3)]) - 0.05).abs() < 1e-12);
        let s = smallest_p(&[(5, 5), (5, 5)]);
        assert!((s - 1.0 / 252.0f64.powi(2)).abs() < 1e-15);
        // Nothing reaches below the smallest p, which the counts alone determine.
        for a in 0..=4 {
            for b in 0..=4 {
                assert!(one_sided_p(&[one(a, 4, b, 4)]) >= smallest_p(&[(4, 4)]) - 1e-15);
            }
        }
    }

    #[test]
    fn holm_steps_down() {
        let adj = holm(&[0.01, 0.04, 0.03, 0.005]);
        let want = [0.03, 0.06, 0.06, 0.02];
        for (g, w) in adj.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{adj:?}");
        }
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn the_family_splits_alpha_and_leaves_out_what_cannot_reach_its_share() {
        let h = |group, p, smallest| Hypothesis { group, p, smallest };
        // Three rows and two tasks that can reach their share: rows 0.5/3 each, tasks 0.25.
        let family = [
            h(Group::Row, 0.001, 1e-9),
            h(Group::Row, 0.5, 1e-9),
            h(Group::Row, 1.0, 1e-9),
            h(Group::Task, 0.004, 1e-6),
            h(Group::Task, 1.0, 1e-6),
        ];
        let d = decide(&family);
        assert!(d.iter().all(|x| x.in_family));
        assert!((d[0].level - ALPHA * 0.5 / 3.0).abs() < 1e-15);
        assert!((d[3].level - ALPHA * 0.25).abs() < 1e-15);
        // Weighted Holm: p/w = 0.006 (row 0), 0.016 (task 3) → adjusted 0.006·1, then
        // max(0.006, 0.004·(1 − 1/6)/0.25).
        assert!((d[0].adjusted - 0.006).abs() < 1e-12, "{d:?}");
        assert!(
            (d[3].adjusted - 0.004 * (5.0 / 6.0) / 0.25).abs() < 1e-12,
            "{d:?}"
        );
        assert!(d[0].rejected() && d[3].rejected() && !d[1].rejected());
        // Tasks at k = 3 (smallest p 0.05) can never be significant: they leave the family and
        // the rows keep all of α.
        let k3 = [
            h(Group::Row, 0.01, 1e-6),
            h(Group::Row, 0.5, 1e-6),
            h(Group::Task, 0.05, 0.05),
        ];
        let d = decide(&k3);
        assert!(!d[2].in_family && !d[2].rejected());
        assert!((d[0].level - ALPHA / 2.0).abs() < 1e-15);
        // A task whose smallest p is above its share leaves; left alone, the others' shares
        // rise until none is out of reach.
        let w = weights_of(&[
            (Group::Row, 1e-9),
            (Group::Task, 0.004),
            (Group::Task, 0.004),
            (Group::Task, 0.02),
        ]);
        // 0.025/3 = 0.0083 excludes the 0.02 one; then 0.0125 keeps the two others.
        assert_eq!(w, vec![Some(0.5), Some(0.25), Some(0.25), None]);
    }

    #[test]
    fn power_is_simulated_for_the_test_and_grows_with_k() {
        let level = ALPHA / 19.0;
        let d5 = detectable_drop(&[(5, 5); 4], level).unwrap();
        let d10 = detectable_drop(&[(10, 10); 4], level).unwrap();
        assert!(d10 < d5 && d5 < REFERENCE_RATE, "{d5} {d10}");
        // Same design, same figure: the seed is the design's.
        assert_eq!(detectable_drop(&[(5, 5); 4], level), Some(d5));
        // The power at the printed drop is the promised one (same simulations), and a smaller
        // drop has less.
        let p = power(&[(5, 5); 4], level, d5 + 1e-9);
        assert!((POWER..POWER + 0.01).contains(&p), "{p}");
        assert!(power(&[(5, 5); 4], level, d5 - 0.05) < POWER);
        // Two tasks at k = 1: the smallest p is 1/4, nothing is detectable at 5 %.
        assert_eq!(detectable_drop(&[(1, 1); 2], ALPHA), None);
        // One task: from all-pass to all-fail is p = 1/C(2k, k): k = 3 gives 0.05, not below.
        assert_eq!(single_task_k(|_| 0.05, 100), Some(4));
        assert_eq!(single_task_k(|_| 0.025 / 68.0, 100), Some(7));
    }

    #[test]
    fn the_p_value_only_falls_as_b_loses_passes() {
        // The monotonicity the power simulation's bisection relies on, over random strata.
        let mut rng = SplitMix64::new(3);
        for _ in 0..300 {
            let c = 1 + rng.below(5) as usize;
            let mut s: Vec<Stratum> = (0..c)
                .map(|_| {
                    let (na, nb) = (1 + rng.below(6), 1 + rng.below(6));
                    one(rng.below(na + 1), na, rng.below(nb + 1), nb)
                })
                .collect();
            let mut last = one_sided_p(&s);
            while let Some(i) = (0..c).find(|&i| s[i].b_events > 0) {
                s[i].b_events -= 1;
                let p = one_sided_p(&s);
                assert!(p <= last + 1e-12, "{s:?}: {p} after {last}");
                last = p;
            }
        }
    }
}
