//! Comparing two rows (SPEC §9): did B help or hurt against A, where, and how sure are we.
//! Pure statistics and the comparison it feeds: per cell, Newcombe's hybrid score interval for
//! a difference of two proportions; pooled (overall, per tag), a percentile bootstrap over the
//! tasks both rows have, with a fixed seed so a build stays byte-identical; Holm's correction
//! for the gate that fails a CI run on a regression.
//!
//! Every difference is **B − A**: A is the baseline, B the change, so `better` means B passes
//! more often than A.

use super::interval::{self, CONFIDENCE, Interval};
use super::{Matrix, SampleKey, TaskInfo};
use crate::cli::IntervalKind;
use crate::taxonomy::{Label, Outcome};
use serde::Serialize;
use std::collections::BTreeMap;

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

/// What an interval of a difference says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The whole interval is above 0: B passes more often than A.
    Better,
    /// The whole interval is below 0: B passes less often than A.
    Worse,
    /// The interval contains 0 (or there is nothing to compare).
    NoEvidence,
}

impl Direction {
    /// Decided by the interval, never by the bare difference.
    pub fn of(iv: Option<&Interval>) -> Direction {
        match iv {
            Some(iv) if iv.lower > 0.0 => Direction::Better,
            Some(iv) if iv.upper < 0.0 => Direction::Worse,
            _ => Direction::NoEvidence,
        }
    }

    /// The word shown on pages and in the terminal.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Better => "better",
            Direction::Worse => "worse",
            Direction::NoEvidence => "no evidence of a difference",
        }
    }

    /// A short class name for styling.
    pub fn class(self) -> &'static str {
        match self {
            Direction::Better => "better",
            Direction::Worse => "worse",
            Direction::NoEvidence => "none",
        }
    }
}

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

/// One side of a comparison: a row of a matrix, and whether its transcripts are pages of this
/// site (a baseline's are not).
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub matrix: &'a Matrix,
    pub row: &'a str,
    /// Its samples have permalinks on this site.
    pub linked: bool,
}

/// One sample's mark on a comparison page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mark {
    #[serde(skip)]
    pub key: SampleKey,
    /// `pass`, `error` or the label.
    pub outcome: String,
    #[serde(skip)]
    pub kind: Outcome,
}

/// One task compared: both cells and their difference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellDiff {
    pub task: String,
    pub a_passes: u64,
    pub a_scored: u64,
    pub b_passes: u64,
    pub b_scored: u64,
    /// `None` when one side has no scored sample.
    pub difference: Option<f64>,
    pub interval: Option<Interval>,
    pub direction: Direction,
    #[serde(skip)]
    pub a_marks: Vec<Mark>,
    #[serde(skip)]
    pub b_marks: Vec<Mark>,
}

/// A label's count in A and in B (over the common tasks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabelChange {
    pub label: Label,
    pub a: u64,
    pub b: u64,
}

/// A pooled comparison with its name (`overall` or a tag) and its Holm-adjusted p-value within
/// the family it was corrected in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PooledRow {
    pub scope: String,
    #[serde(flatten)]
    pub pooled: Pooled,
    pub direction: Direction,
    /// Filled by [`correct`]: the p-value after Holm's correction over every pooled comparison
    /// made together.
    pub holm_p: f64,
}

impl PooledRow {
    /// Worse after the correction: what fails the gate.
    pub fn regression(&self) -> bool {
        self.pooled.difference < 0.0 && self.holm_p < ALPHA && self.direction == Direction::Worse
    }
}

/// A setting in which A and B differ (what the comparison attributes the effect to).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettingDiff {
    pub setting: String,
    pub a: String,
    pub b: String,
}

/// Two rows compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The page, relative to the site root (`compare/a--b.html`).
    pub page: String,
    /// A (the baseline) and B (the change), as shown.
    pub a: String,
    pub b: String,
    /// The rows' names in their matrices (the model pages they link to, when linked).
    pub a_row: String,
    pub b_row: String,
    #[serde(skip)]
    pub a_linked: bool,
    #[serde(skip)]
    pub b_linked: bool,
    /// Why these two are compared: `same model id`, `variant_of`, `--compare`, `baseline`.
    pub why: String,
    /// Both sides' settings are known (a baseline read from a samples.csv records none).
    pub settings_known: bool,
    pub settings: Vec<SettingDiff>,
    pub overall: Option<PooledRow>,
    pub tags: Vec<PooledRow>,
    pub cells: Vec<CellDiff>,
    pub labels: Vec<LabelChange>,
}

impl Comparison {
    /// Pooled comparisons it makes (overall and each tag with a common task).
    pub fn pooled_rows(&self) -> impl Iterator<Item = &PooledRow> {
        self.overall.iter().chain(self.tags.iter())
    }

    /// Cell comparisons with both sides scored.
    pub fn compared_cells(&self) -> usize {
        self.cells.iter().filter(|c| c.interval.is_some()).count()
    }

    /// Any tag or the overall rate worse after the correction.
    pub fn regressed(&self) -> bool {
        self.pooled_rows().any(PooledRow::regression)
    }
}

fn marks(m: &Matrix, row: &str, task: &str) -> Vec<Mark> {
    m.cell(row, task)
        .map(|c| {
            c.samples
                .iter()
                .map(|&i| {
                    let s = &m.samples[i];
                    Mark {
                        key: s.key.clone(),
                        outcome: s.outcome.name().to_string(),
                        kind: s.outcome,
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

fn pooled_row(scope: &str, pairs: &[TaskPair], seed_text: &str) -> Option<PooledRow> {
    let p = pooled(pairs, SEED ^ fnv1a(seed_text), REPLICATES)?;
    Some(PooledRow {
        scope: scope.to_string(),
        direction: p.direction(),
        holm_p: p.p_value,
        pooled: p,
    })
}

/// Compares row B against row A over the tasks of `tasks` (the corpus, sorted by id). The
/// pooled rows are filled with their own p-values; [`correct`] applies Holm over a family.
pub fn compare(
    a: Side,
    b: Side,
    tasks: &[TaskInfo],
    page: String,
    why: &str,
    settings: Option<Vec<SettingDiff>>,
) -> Comparison {
    let mut cells = Vec::new();
    let mut by_tag: BTreeMap<&str, Vec<TaskPair>> = BTreeMap::new();
    let mut all = Vec::new();
    let mut labels: BTreeMap<Label, (u64, u64)> = BTreeMap::new();
    for t in tasks {
        let ca = a.matrix.cell(a.row, &t.id);
        let cb = b.matrix.cell(b.row, &t.id);
        if ca.is_none() && cb.is_none() {
            continue;
        }
        let (ap, an) = ca.map_or((0, 0), |c| (c.passes, c.scored));
        let (bp, bn) = cb.map_or((0, 0), |c| (c.passes, c.scored));
        let iv = newcombe(ap, an, bp, bn);
        if an > 0 && bn > 0 {
            let pair = TaskPair {
                a_passes: ap,
                a_scored: an,
                b_passes: bp,
                b_scored: bn,
            };
            all.push(pair);
            for tag in &t.tags {
                by_tag.entry(tag.as_str()).or_default().push(pair);
            }
            for (l, n) in ca.map(|c| &c.labels).into_iter().flatten() {
                labels.entry(*l).or_default().0 += n;
            }
            for (l, n) in cb.map(|c| &c.labels).into_iter().flatten() {
                labels.entry(*l).or_default().1 += n;
            }
        }
        cells.push(CellDiff {
            task: t.id.clone(),
            a_passes: ap,
            a_scored: an,
            b_passes: bp,
            b_scored: bn,
            difference: iv.map(|_| bp as f64 / bn as f64 - ap as f64 / an as f64),
            interval: iv,
            direction: Direction::of(iv.as_ref()),
            a_marks: marks(a.matrix, a.row, &t.id),
            b_marks: marks(b.matrix, b.row, &t.id),
        });
    }
    let key = format!("{}\u{0}{}", a.row, b.row);
    Comparison {
        page,
        a: a.row.to_string(),
        b: b.row.to_string(),
        a_row: a.row.to_string(),
        b_row: b.row.to_string(),
        a_linked: a.linked,
        b_linked: b.linked,
        why: why.to_string(),
        settings_known: settings.is_some(),
        settings: settings.unwrap_or_default(),
        overall: pooled_row("overall", &all, &format!("{key}\u{0}overall")),
        tags: by_tag
            .iter()
            .filter_map(|(tag, pairs)| pooled_row(tag, pairs, &format!("{key}\u{0}tag:{tag}")))
            .collect(),
        cells,
        labels: labels
            .into_iter()
            .filter(|(_, (x, y))| x != y)
            .map(|(label, (a, b))| LabelChange { label, a, b })
            .collect(),
    }
}

/// Applies Holm's correction over every pooled comparison of `comparisons` together (the
/// family the gate decides on), and returns how many comparisons that family holds.
pub fn correct(comparisons: &mut [Comparison]) -> usize {
    let p: Vec<f64> = comparisons
        .iter()
        .flat_map(|c| c.pooled_rows().map(|r| r.pooled.p_value))
        .collect();
    let adjusted = holm(&p);
    let mut it = adjusted.into_iter();
    for c in comparisons.iter_mut() {
        for r in c.overall.iter_mut().chain(c.tags.iter_mut()) {
            r.holm_p = it.next().unwrap_or(1.0);
        }
    }
    p.len()
}

/// What a row was collected with, from its runs' `cell.json`: the model entry (redacted by
/// collect) and what the server said about itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowSettings {
    pub entry: serde_json::Value,
    pub server: serde_json::Value,
}

impl RowSettings {
    /// The served model id.
    pub fn model_id(&self) -> Option<&str> {
        self.entry.get("model").and_then(serde_json::Value::as_str)
    }

    fn variant_of(&self) -> Option<&str> {
        self.entry
            .get("variant_of")
            .and_then(serde_json::Value::as_str)
    }

    /// The settings a comparison attributes an effect to, flattened to `name → value` (compact
    /// JSON). Scheduling (`concurrency`, `timeout_secs`) and bookkeeping (`name`, `variant_of`,
    /// the key's variable) change no request, so they are left out.
    fn flat(&self) -> BTreeMap<String, String> {
        use serde_json::Value;
        let mut out = BTreeMap::new();
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        if let Value::Object(e) = &self.entry {
            for (k, v) in e {
                match k.as_str() {
                    "name" | "variant_of" | "concurrency" | "timeout_secs" | "api_key_env" => {}
                    "base_url" | "base_urls" => {
                        let urls = match v {
                            Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(", "),
                            v => text(v),
                        };
                        out.insert("base URLs".to_string(), urls);
                    }
                    "params" | "extra" => {
                        if let Value::Object(m) = v {
                            for (pk, pv) in m {
                                out.insert(format!("{k}.{pk}"), text(pv));
                            }
                        }
                    }
                    _ => {
                        out.insert(k.clone(), text(v));
                    }
                }
            }
            out.entry("stream".into()).or_insert_with(|| "false".into());
        }
        let versions: Vec<String> = self
            .server
            .get("endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("version"))
            .map(|v| match v.get("version") {
                Some(inner) => text(inner),
                None => text(v),
            })
            .collect();
        if !versions.is_empty() {
            out.insert("server version".into(), versions.join(", "));
        }
        out
    }
}

/// The settings in which A and B differ, in name order; a setting one side lacks reads
/// `(not set)`. `None` when either side's settings are unknown (a baseline read from a
/// samples.csv records none).
pub fn settings_diff(a: Option<&RowSettings>, b: Option<&RowSettings>) -> Option<Vec<SettingDiff>> {
    let (Some(a), Some(b)) = (a, b) else {
        return None;
    };
    let (fa, fb) = (a.flat(), b.flat());
    let names: std::collections::BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    let unset = || "(not set)".to_string();
    Some(
        names
            .into_iter()
            .filter(|n| fa.get(*n) != fb.get(*n))
            .map(|n| SettingDiff {
                setting: n.clone(),
                a: fa.get(n).cloned().unwrap_or_else(unset),
                b: fb.get(n).cloned().unwrap_or_else(unset),
            })
            .collect(),
    )
}

/// Two rows of one collection to compare: A the baseline, B the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub a: String,
    pub b: String,
    /// `--compare`, `variant_of` or `same model id`.
    pub why: &'static str,
}

impl Pair {
    /// The comparison page, relative to the site root.
    pub fn page(&self) -> String {
        format!("compare/{}--{}.html", self.a, self.b)
    }
}

/// The pairs a build compares, in this order of precedence for a pair named twice: the
/// `--compare A:B` pairs as given, then each row with the row its `variant_of` names, then every
/// two rows serving the same model id (A the first by name). Sorted by page; rows that have no
/// samples are left out.
pub fn pairs(rows: &BTreeMap<String, RowSettings>, explicit: &[(String, String)]) -> Vec<Pair> {
    let mut out: Vec<Pair> = Vec::new();
    let mut add = |a: &str, b: &str, why: &'static str| {
        if a == b || !rows.contains_key(a) || !rows.contains_key(b) {
            return;
        }
        if !out
            .iter()
            .any(|p| (p.a == a && p.b == b) || (p.a == b && p.b == a))
        {
            out.push(Pair {
                a: a.into(),
                b: b.into(),
                why,
            });
        }
    };
    for (a, b) in explicit {
        add(a, b, "--compare");
    }
    for (name, s) in rows {
        if let Some(base) = s.variant_of() {
            add(base, name, "variant_of");
        }
    }
    let names: Vec<&String> = rows.keys().collect();
    for (i, a) in names.iter().enumerate() {
        for b in &names[i + 1..] {
            let (ia, ib) = (rows[*a].model_id(), rows[*b].model_id());
            if ia.is_some() && ia == ib {
                add(a, b, "same model id");
            }
        }
    }
    out.sort_by_key(Pair::page);
    out
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

    fn row(entry: serde_json::Value) -> RowSettings {
        RowSettings {
            entry,
            server: serde_json::json!({"endpoints": [{"version": {"version": "0.11.0"}}]}),
        }
    }

    #[test]
    fn rows_pair_by_model_id_variant_of_and_flag_and_list_what_differs() {
        use serde_json::json;
        let mut rows = BTreeMap::new();
        rows.insert(
            "q".to_string(),
            row(json!({"name": "q", "model": "qwen", "base_url": "http://a/v1", "stream": false, "params": {"temperature": 0.7}, "concurrency": 8})),
        );
        rows.insert(
            "q-stream".to_string(),
            row(json!({"name": "q-stream", "model": "qwen", "base_url": "http://a/v1", "stream": true, "params": {"temperature": 0.7}, "concurrency": 2})),
        );
        rows.insert(
            "checklist".to_string(),
            row(json!({"name": "checklist", "model": "qwen", "base_url": "http://a/v1", "system": "Check: <b>", "variant_of": "q"})),
        );
        rows.insert(
            "other".to_string(),
            row(json!({"name": "other", "model": "llama"})),
        );
        let got = pairs(
            &rows,
            &[("other".into(), "q".into()), ("q".into(), "missing".into())],
        );
        let got: Vec<(&str, &str, &str)> = got
            .iter()
            .map(|p| (p.a.as_str(), p.b.as_str(), p.why))
            .collect();
        assert_eq!(
            got,
            [
                ("checklist", "q-stream", "same model id"),
                ("other", "q", "--compare"),
                ("q", "checklist", "variant_of"),
                ("q", "q-stream", "same model id"),
            ]
        );
        let d = settings_diff(Some(&rows["q"]), Some(&rows["q-stream"])).unwrap();
        assert_eq!(
            d,
            [SettingDiff {
                setting: "stream".into(),
                a: "false".into(),
                b: "true".into()
            }]
        );
        let d = settings_diff(Some(&rows["q"]), Some(&rows["checklist"])).unwrap();
        let names: Vec<&str> = d.iter().map(|s| s.setting.as_str()).collect();
        assert_eq!(names, ["params.temperature", "system"]);
        assert_eq!(d[1].a, "(not set)");
        let mut newer = rows["q"].clone();
        newer.server = json!({"endpoints": [{"version": {"version": "0.12.0"}}]});
        let d = settings_diff(Some(&rows["q"]), Some(&newer)).unwrap();
        assert_eq!(
            (d[0].setting.as_str(), d[0].b.as_str()),
            ("server version", "0.12.0")
        );
        assert_eq!(settings_diff(None, Some(&newer)), None);
    }
}
