//! Comparing two rows (SPEC §9): did B help or hurt against A, where, and how sure are we.
//! Loading a collection to compare ([`load`]), pairing its rows ([`pair`]) and the terminal
//! table ([`table`]), over the statistics of [`crate::stats::compare`] and
//! [`crate::stats::gate`]; the comparison itself ([`compare`]) and the families the gate
//! decides on ([`comparisons`], [`correct`]): each pair of rows of a collection is a family of
//! its own, every row against a baseline one family together. `build`, the site,
//! `callcheck compare` and `callcheck plan` all come here, so the pages and the terminal
//! correct over the same set.
//!
//! Every difference is **B − A**: A is the baseline, B the change, so `better` means B passes
//! more often than A.

pub mod load;
pub mod pair;
pub mod plan;
pub mod table;

use crate::stats::Direction;
use crate::stats::compare::{Pooled, TaskPair, newcombe};
use crate::stats::gate::TASK_SHARE;
use crate::stats::gate::{self, ALPHA, Decision, Group, Hypothesis};
pub use load::{Collection, infos, load_baseline, load_runs};
pub use pair::{Pair, RowSettings, SettingDiff, pairs, parse_pairs, row_settings, settings_diff};

use crate::report::{Matrix, SampleKey, TaskInfo};
use crate::stats::interval::Interval;
use crate::taxonomy::{Label, Outcome};
use anyhow::{Result, bail};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;

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
    /// A's (B's) cell has two or more scored samples, all one answer ([`crate::report::Cell::identical`]):
    /// one observation, which the pages mark and `data/compare.json` carries (as
    /// `data/matrix.json` carries `identical` for each cell of this site).
    pub a_identical: bool,
    pub b_identical: bool,
    /// Samples collected (scored or not) on each side: what the family's make-up is decided
    /// from ([`crate::stats::gate::weights_of`]).
    pub a_samples: u64,
    pub b_samples: u64,
    /// The gate's test of a drop on this task alone (1 when a side has no scored sample).
    pub p_value: f64,
    /// Filled by [`correct`]: the gate's decision on this task within its family.
    pub gate: Decision,
}

impl CellDiff {
    /// A regression of this task on its own, after the family's correction.
    pub fn regression(&self) -> bool {
        self.gate.rejected()
    }
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
    /// Filled by [`correct`]: the p-value after the family's correction (weighted Holm over
    /// every pooled row and task of the family; 1 when the row cannot reach significance).
    pub holm_p: f64,
    /// Filled by [`correct`]: the gate's decision on this row within its family.
    pub gate: Decision,
    /// Filled by [`correct`]: the smallest drop over these tasks, from
    /// [`crate::stats::gate::REFERENCE_RATE`] on each, that the gate detects with 80 % power at
    /// this k and this row's level in the family ([`crate::stats::gate::detectable_drop`]);
    /// `None` when not even a fall to 0 could be detected.
    pub detectable_drop: Option<f64>,
    /// The tasks compared (what the test and its power are computed from).
    #[serde(skip)]
    pub pairs: Vec<TaskPair>,
    /// Samples collected per task compared, A and B (the family's make-up).
    #[serde(skip)]
    pub samples: Vec<(u64, u64)>,
}

impl PooledRow {
    /// Worse after the correction: what fails the gate.
    pub fn regression(&self) -> bool {
        self.gate.rejected()
    }
}

/// The family a comparison's gate decided in: its size and make-up, and what it can see.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Family {
    /// Comparisons in it: 1 for a pair of rows, every row for a baseline.
    pub comparisons: usize,
    /// Pooled rows (overall, tags, transport errors) and task comparisons in it.
    pub rows: usize,
    pub tasks: usize,
    /// Of those, the ones some outcome could make significant at their share of α (the others
    /// are left out, their share given to the rest).
    pub rows_in: usize,
    pub tasks_in: usize,
    /// The first-step level of a pooled row and of a task in the family (0 when none is in).
    pub row_level: f64,
    pub task_level: f64,
    /// The smallest k (every task at k samples on both sides, this family's rows and tasks) at
    /// which one task going from all samples passing to none is a regression whatever the
    /// rest shows; `None` beyond 1,000.
    pub single_task_k: Option<u64>,
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
    /// Tasks A scored that B has samples of but could not score (every sample a transport
    /// error): B's rate there is unmeasured, which fails the gate.
    pub unmeasured: Vec<String>,
    /// Tags whose every task A scored B could not score, some of them unmeasured.
    pub unmeasured_tags: Vec<String>,
    /// Tasks A scored of which B has no sample at all: they fail the gate unless missing tasks
    /// are allowed (`--allow-missing`).
    pub missing: Vec<String>,
    /// Tags whose every task A scored is missing from B: no pooled row compares them, so they
    /// are listed as missing (allowed or not).
    pub missing_tags: Vec<String>,
    /// Filled by [`correct`]: the family the gate decided in.
    pub family: Family,
}

impl Comparison {
    /// Pooled comparisons it makes (overall and each tag with a common task).
    pub fn pooled_rows(&self) -> impl Iterator<Item = &PooledRow> {
        self.overall.iter().chain(self.tags.iter())
    }

    /// The samples per task this comparison was collected with: the most common count over
    /// the tasks both rows scored (the smaller side's), for sentences about "this k".
    pub fn k(&self) -> u64 {
        let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
        for c in self.cells.iter().filter(|c| c.interval.is_some()) {
            *counts.entry(c.a_samples.min(c.b_samples)).or_default() += 1;
        }
        counts
            .into_iter()
            .max_by(|x, y| x.1.cmp(&y.1).then(y.0.cmp(&x.0)))
            .map_or(0, |(k, _)| k)
    }

    /// Cell comparisons with both sides scored.
    pub fn compared_cells(&self) -> usize {
        self.cells.iter().filter(|c| c.interval.is_some()).count()
    }

    /// Any tag, the overall rate or the transport-error rate worse after the correction.
    pub fn regressed(&self) -> bool {
        self.pooled_rows().any(PooledRow::regression)
    }

    /// Tasks that are a regression on their own, after the family's correction.
    pub fn regressed_tasks(&self) -> impl Iterator<Item = &CellDiff> {
        self.cells.iter().filter(|c| c.regression())
    }

    /// Why this comparison fails the gate, one reason a line (empty when it passes): each
    /// pooled comparison worse after the correction (`overall`, a tag, `errors`), each task
    /// worse on its own, then what B could not measure, then the tasks it lacks unless
    /// `allow_missing`.
    pub fn gate_failures(&self, allow_missing: bool) -> Vec<String> {
        // The tags (and `errors`) that moved name the regression; `overall` is named only when
        // no tag is significant on its own (a small drop spread over every tag).
        let mut out: Vec<String> = self
            .tags
            .iter()
            .filter(|r| r.regression())
            .map(|r| r.scope.clone())
            .collect();
        if out.is_empty() && self.overall.as_ref().is_some_and(PooledRow::regression) {
            out.push("overall".into());
        }
        out.extend(self.regressed_tasks().map(|c| format!("task {}", c.task)));
        if !self.unmeasured.is_empty() {
            out.push(format!(
                "unmeasured ({} task{} B could not score{})",
                self.unmeasured.len(),
                if self.unmeasured.len() == 1 { "" } else { "s" },
                if self.unmeasured_tags.is_empty() {
                    String::new()
                } else {
                    format!("; tags: {}", self.unmeasured_tags.join(", "))
                }
            ));
        }
        if !self.missing.is_empty() && !allow_missing {
            out.push(self.missing_note());
        }
        out
    }

    /// `missing (2 tasks of A not in B: x, y; tags: long-args)`.
    pub fn missing_note(&self) -> String {
        format!(
            "missing ({} task{} of A not in B: {}{})",
            self.missing.len(),
            if self.missing.len() == 1 { "" } else { "s" },
            self.missing.join(", "),
            if self.missing_tags.is_empty() {
                String::new()
            } else {
                format!("; tags: {}", self.missing_tags.join(", "))
            }
        )
    }

    /// Every hypothesis of this comparison in the gate's family, in the order [`correct`]
    /// reads them back: the pooled rows, then the tasks both rows scored.
    fn hypotheses(&self) -> Vec<Hypothesis> {
        self.pooled_rows()
            .map(|r| Hypothesis {
                group: Group::Row,
                p: r.pooled.p_value,
                smallest: gate::smallest_p(&r.samples),
            })
            .chain(
                self.cells
                    .iter()
                    .filter(|c| c.interval.is_some())
                    .map(|c| Hypothesis {
                        group: Group::Task,
                        p: c.p_value,
                        smallest: gate::smallest_p(&[(c.a_samples, c.b_samples)]),
                    }),
            )
            .collect()
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

/// A task in a pooled row: its counts, and the samples collected on each side.
type Compared = (TaskPair, (u64, u64));

/// A pooled row over `tasks`.
fn pooled_row(
    scope: &str,
    tasks: &[Compared],
    memo: &crate::stats::compare::Memo,
) -> Option<PooledRow> {
    let pairs: Vec<TaskPair> = tasks.iter().map(|t| t.0).collect();
    let p = memo.pooled(&pairs)?;
    let scored = |t: &&Compared| t.0.a_scored > 0 && t.0.b_scored > 0;
    Some(PooledRow {
        scope: scope.to_string(),
        direction: p.direction(),
        holm_p: 1.0,
        gate: Decision::default(),
        pooled: p,
        detectable_drop: None,
        pairs: tasks.iter().filter(scored).map(|t| t.0).collect(),
        samples: tasks.iter().filter(scored).map(|t| t.1).collect(),
    })
}

impl Family {
    /// What the gate decided over, in one sentence for the terminal and the page: its rows and
    /// tasks, how α is shared, who is left out.
    pub fn describe(&self) -> String {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let what = format!(
            "{} and {} of {}",
            plural(self.rows, "pooled row", "pooled rows"),
            plural(self.tasks, "task", "tasks"),
            plural(self.comparisons, "comparison", "comparisons"),
        );
        let shares = if self.tasks_in > 0 && self.rows_in > 0 {
            format!(
                "{:.0} % of α shared by the {} pooled rows that can reach significance (each at {}), {:.0} % by the {} tasks that can (each at {})",
                100.0 * (1.0 - TASK_SHARE),
                self.rows_in,
                p_text(self.row_level),
                100.0 * TASK_SHARE,
                self.tasks_in,
                p_text(self.task_level)
            )
        } else if self.rows_in > 0 {
            format!(
                "all of α shared by the {} pooled rows that can reach significance (each at {}): no single task can with these sample counts",
                self.rows_in,
                p_text(self.row_level)
            )
        } else if self.tasks_in > 0 {
            format!(
                "all of α shared by the {} tasks that can reach significance (each at {})",
                self.tasks_in,
                p_text(self.task_level)
            )
        } else {
            "nothing in it can reach significance with these sample counts".to_string()
        };
        format!(
            "{what}, one-sided exact stratified tests of the equal-weight difference, weighted Holm at {:.0} %: {shares}",
            100.0 * ALPHA
        )
    }

    /// What the family says about one task that broke: caught at these sample counts, or not,
    /// and from which k it would be (SPEC §9: "a task falling from all-pass to all-fail is
    /// detected from k = N in this family"). `k` is the comparison's samples per task.
    pub fn single_task(&self, k: u64) -> String {
        let from = match self.single_task_k {
            Some(n) => format!("from k = {n} in this family"),
            None => "at no k up to 1,000 in this family".to_string(),
        };
        if self.tasks == 0 {
            return "no task compared".to_string();
        }
        let smallest = (-gate::ln_choose(2 * k, k)).exp();
        if self.tasks_in == 0 {
            format!(
                "a single task falling from all-pass to all-fail cannot be detected at k = {k} (its smallest p is 1/C({}, {k}) = {}, above any share of α a task can get here); it is detected {from}",
                2 * k,
                p_text(smallest)
            )
        } else if self.single_task_k.is_some_and(|n| n <= k) {
            format!(
                "a single task falling from all-pass to all-fail is detected at k = {k} (p = {} against its level {}); detected {from}",
                p_text(smallest),
                p_text(self.task_level)
            )
        } else {
            format!(
                "a single task falling from all-pass to all-fail at k = {k} (p = {}) is detected only when few other tasks can reach significance (its level here {}); it is detected whatever the rest shows {from}",
                p_text(smallest),
                p_text(self.task_level)
            )
        }
    }
}

/// A detectable drop as the terminal, the pages and `plan` print it: `−12 pts`, or `nothing`
/// when not even a fall to 0 could be detected with 80 % power.
pub fn drop_text(d: Option<f64>) -> String {
    match d {
        Some(d) => format!("−{} pts", drop_points(d)),
        None => "nothing".to_string(),
    }
}

/// A detectable drop in points as printed: whole points, or tenths below 10 points, where a
/// point is a large part of the figure (its Monte Carlo error is a fraction of a tenth there).
pub fn drop_points(d: f64) -> String {
    let points = d * 100.0;
    if points < 9.95 {
        format!("{points:.1}")
    } else {
        format!("{points:.0}")
    }
}

/// A level or p-value with four significant digits: `0.0026`, `3.7e-4`.
pub fn p_text(x: f64) -> String {
    if x >= 0.001 || x == 0.0 {
        format!("{x:.4}")
    } else {
        format!("{x:.1e}")
    }
}

/// Compares row B against row A over the tasks of `tasks` (the corpus, sorted by id). The
/// pooled rows are filled with their own p-values (taken from `memo` where it has them);
/// [`correct`] decides the gate over a family.
pub fn compare(
    a: Side,
    b: Side,
    tasks: &[TaskInfo],
    page: String,
    why: &str,
    settings: Option<Vec<SettingDiff>>,
    memo: &crate::stats::compare::Memo,
) -> Comparison {
    let mut g = Gathered::default();
    for t in tasks {
        g.add(&a, &b, t);
    }
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
        overall: pooled_row("overall", &g.all, memo),
        tags: g
            .by_tag
            .iter()
            .filter_map(|(tag, pairs)| pooled_row(tag, pairs, memo))
            // A rise in transport errors is a regression of its own (SPEC §9): the same test
            // with "the request got an answer" as the event. Only shown when either side had
            // an error, so comparisons without any keep their family.
            .chain(
                g.any_error
                    .then(|| pooled_row("errors", &g.transport, memo))
                    .flatten(),
            )
            .collect(),
        labels: g
            .labels
            .iter()
            .filter(|(_, (x, y))| x != y)
            .map(|(label, (a, b))| LabelChange {
                label: *label,
                a: *a,
                b: *b,
            })
            .collect(),
        unmeasured_tags: g
            .tag_cover
            .iter()
            .filter(|(_, (scored_a, scored_b, absent))| {
                *scored_a > 0 && *scored_b == 0 && absent < scored_a
            })
            .map(|(tag, _)| tag.to_string())
            .collect(),
        missing_tags: g
            .tag_cover
            .iter()
            .filter(|(_, (scored_a, _, absent))| *scored_a > 0 && absent == scored_a)
            .map(|(tag, _)| tag.to_string())
            .collect(),
        cells: g.cells,
        unmeasured: g.unmeasured,
        missing: g.missing,
        family: Family::default(),
    }
}

/// What comparing two rows task by task gathers: a row per task, the tasks each pooled row
/// pools, the label counts, and which tasks and tags one side could not measure.
#[derive(Default)]
struct Gathered<'t> {
    cells: Vec<CellDiff>,
    /// Per tag: each task's counts and the samples collected on each side.
    by_tag: BTreeMap<&'t str, Vec<Compared>>,
    /// Every task both sides scored, for the overall row.
    all: Vec<Compared>,
    /// Per label: A's count, B's count, over the tasks both scored.
    labels: BTreeMap<Label, (u64, u64)>,
    /// Tasks A scored and B has samples of, none scored.
    unmeasured: Vec<String>,
    /// Tasks A scored and B has no sample of.
    missing: Vec<String>,
    /// Per tag: tasks A scored, of those the ones B scored, and the ones B has no sample of.
    tag_cover: BTreeMap<&'t str, (usize, usize, usize)>,
    /// Transport: per task, samples that got an answer (scored) over all samples.
    transport: Vec<Compared>,
    any_error: bool,
}

impl<'t> Gathered<'t> {
    /// Task `t` on both sides (nothing when neither has a cell of it).
    fn add(&mut self, a: &Side, b: &Side, t: &'t TaskInfo) {
        let ca = a.matrix.cell(a.row, &t.id);
        let cb = b.matrix.cell(b.row, &t.id);
        if ca.is_none() && cb.is_none() {
            return;
        }
        let (ap, an) = ca.map_or((0, 0), |c| (c.passes, c.scored));
        let (bp, bn) = cb.map_or((0, 0), |c| (c.passes, c.scored));
        let samples = (
            ca.map_or(0, |c| c.scored + c.errors),
            cb.map_or(0, |c| c.scored + c.errors),
        );
        if let (Some(x), Some(y)) = (ca, cb) {
            self.any_error |= x.errors > 0 || y.errors > 0;
            self.transport.push((
                TaskPair {
                    a_passes: x.scored,
                    a_scored: samples.0,
                    b_passes: y.scored,
                    b_scored: samples.1,
                },
                samples,
            ));
        }
        if an > 0 {
            match cb {
                None => self.missing.push(t.id.clone()),
                Some(_) if bn == 0 => self.unmeasured.push(t.id.clone()),
                Some(_) => {}
            }
            for tag in &t.tags {
                let e = self.tag_cover.entry(tag.as_str()).or_default();
                e.0 += 1;
                e.1 += usize::from(bn > 0);
                e.2 += usize::from(cb.is_none());
            }
        }
        let iv = newcombe(ap, an, bp, bn);
        let pair = TaskPair {
            a_passes: ap,
            a_scored: an,
            b_passes: bp,
            b_scored: bn,
        };
        if an > 0 && bn > 0 {
            self.all.push((pair, samples));
            for tag in &t.tags {
                self.by_tag
                    .entry(tag.as_str())
                    .or_default()
                    .push((pair, samples));
            }
            for (l, n) in ca.map(|c| &c.labels).into_iter().flatten() {
                self.labels.entry(*l).or_default().0 += n;
            }
            for (l, n) in cb.map(|c| &c.labels).into_iter().flatten() {
                self.labels.entry(*l).or_default().1 += n;
            }
        }
        self.cells.push(CellDiff {
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
            a_identical: ca.is_some_and(|c| c.identical()),
            b_identical: cb.is_some_and(|c| c.identical()),
            a_samples: samples.0,
            b_samples: samples.1,
            p_value: crate::stats::compare::drop_p_value(&[pair]),
            gate: Decision::default(),
        });
    }
}

/// Decides the gate over one family (SPEC §9): every pooled row and every task compared in
/// `comparisons`, together ([`crate::stats::gate::decide`]); fills each row's and task's
/// decision, each row's detectable drop at its level (simulated once per design and level in
/// `memo`), and each comparison's [`Family`]. Returns the family.
pub fn correct(comparisons: &mut [Comparison], memo: &crate::stats::compare::Memo) -> Family {
    let hypotheses: Vec<Hypothesis> = comparisons
        .iter()
        .flat_map(Comparison::hypotheses)
        .collect();
    let decisions = gate::decide(&hypotheses);
    let mut it = decisions.iter().copied();
    for c in comparisons.iter_mut() {
        for r in c.overall.iter_mut().chain(c.tags.iter_mut()) {
            r.gate = it.next().unwrap_or_default();
            r.holm_p = r.gate.adjusted;
        }
        for cell in c.cells.iter_mut().filter(|x| x.interval.is_some()) {
            cell.gate = it.next().unwrap_or_default();
        }
    }
    // Power per row in the family, each design and level simulated once in the build.
    let wanted: Vec<(Vec<(u64, u64)>, f64)> = comparisons
        .iter()
        .flat_map(|c| c.pooled_rows())
        .filter(|r| r.gate.in_family)
        .map(|r| {
            (
                r.pairs.iter().map(|p| (p.a_scored, p.b_scored)).collect(),
                r.gate.level,
            )
        })
        .collect();
    let mut drops = memo.detectable_drops(&wanted).into_iter();
    let family = family_of(&hypotheses, &decisions, comparisons);
    for c in comparisons.iter_mut() {
        for r in c.overall.iter_mut().chain(c.tags.iter_mut()) {
            r.detectable_drop = if r.gate.in_family {
                drops.next().flatten()
            } else {
                None
            };
        }
        c.family = family.clone();
    }
    family
}

/// What a family holds and can see: its counts, its levels, and the k from which one task
/// falling from all to none is caught (every task at that k, the same rows and tasks).
fn family_of(
    hypotheses: &[Hypothesis],
    decisions: &[Decision],
    comparisons: &[Comparison],
) -> Family {
    let count = |g: Group, inside: bool| {
        hypotheses
            .iter()
            .zip(decisions)
            .filter(|(h, d)| h.group == g && (!inside || d.in_family))
            .count()
    };
    let level = |g: Group| {
        hypotheses
            .iter()
            .zip(decisions)
            .filter(|(h, d)| h.group == g && d.in_family)
            .map(|(_, d)| d.level)
            .fold(0.0, f64::max)
    };
    let row_sizes: Vec<usize> = comparisons
        .iter()
        .flat_map(|c| c.pooled_rows().map(|r| r.pooled.tasks))
        .collect();
    Family {
        comparisons: comparisons.len(),
        rows: count(Group::Row, false),
        tasks: count(Group::Task, false),
        rows_in: count(Group::Row, true),
        tasks_in: count(Group::Task, true),
        row_level: level(Group::Row),
        task_level: level(Group::Task),
        single_task_k: gate::single_task_k_in(&row_sizes, count(Group::Task, false), 1000),
    }
}

/// Rows of `current` with samples that `baseline` has no row of the same name for: what a
/// `--baseline` comparison leaves out, for the command to name.
pub fn unpaired(current: &Matrix, baseline: &Collection) -> Vec<String> {
    current
        .models
        .iter()
        .filter(|m| !baseline.matrix.models.iter().any(|b| b.name == m.name))
        .map(|m| m.name.clone())
        .collect()
}

/// The comparisons a build shows: every pair of rows of the collection (§9), then every row
/// against the same-named row of the baseline. The gate decides each pair in a family of its
/// own and every row against the baseline in one family ([`correct`]). A `--compare` row that
/// has no samples is an error naming it.
pub fn comparisons(
    current: &Matrix,
    rows: &BTreeMap<String, RowSettings>,
    explicit: &[(String, String)],
    baseline: Option<&Collection>,
    tasks: &[TaskInfo],
    memo: &crate::stats::compare::Memo,
) -> Result<Vec<Comparison>> {
    check_explicit(current, explicit)?;
    // Rows with samples only: `model_info` and the matrix agree on that.
    let rows: BTreeMap<String, RowSettings> = current
        .models
        .iter()
        .map(|m| {
            (
                m.name.clone(),
                rows.get(&m.name).cloned().unwrap_or_default(),
            )
        })
        .collect();
    // Each pair on its own core: `compare` reads the matrix only, and the order is the pairs'.
    let mut out: Vec<Comparison> = pairs(&rows, explicit)
        .par_iter()
        .map(|p: &Pair| {
            compare(
                Side {
                    matrix: current,
                    row: &p.a,
                    linked: true,
                },
                Side {
                    matrix: current,
                    row: &p.b,
                    linked: true,
                },
                tasks,
                p.page(),
                p.why,
                settings_diff(rows.get(&p.a), rows.get(&p.b)),
                memo,
            )
        })
        .collect();
    if let Some(base) = baseline {
        out.extend(against_baseline(current, &rows, base, tasks, memo)?);
    }
    // One family per pair of rows (its page, and `callcheck compare A B`), one for every row
    // against the baseline together (`callcheck compare --baseline`): the pages and the
    // terminal decide over the same set.
    let split = out
        .iter()
        .position(|c| c.why == "baseline")
        .unwrap_or(out.len());
    let (own, base) = out.split_at_mut(split);
    for c in own.iter_mut() {
        correct(std::slice::from_mut(c), memo);
    }
    if !base.is_empty() {
        correct(base, memo);
    }
    Ok(out)
}

/// Every row a `--compare` pair names is a row of the collection.
fn check_explicit(current: &Matrix, explicit: &[(String, String)]) -> Result<()> {
    let known = |r: &str| current.models.iter().any(|m| m.name == r);
    for (a, b) in explicit {
        for r in [a, b] {
            if !known(r) {
                bail!(
                    "{a}:{b}: no row named {r:?} in this collection (rows: {})",
                    current
                        .models
                        .iter()
                        .map(|m| m.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
    }
    Ok(())
}

/// Every row of the collection against the baseline's row of the same name, or why the
/// baseline cannot be compared (it pairs no row, or shares no scored task).
fn against_baseline(
    current: &Matrix,
    rows: &BTreeMap<String, RowSettings>,
    base: &Collection,
    tasks: &[TaskInfo],
    memo: &crate::stats::compare::Memo,
) -> Result<Vec<Comparison>> {
    let mut paired = Vec::new();
    for m in &current.models {
        if !base.matrix.models.iter().any(|b| b.name == m.name) {
            continue;
        }
        let mut c = compare(
            Side {
                matrix: &base.matrix,
                row: &m.name,
                linked: false,
            },
            Side {
                matrix: current,
                row: &m.name,
                linked: true,
            },
            tasks,
            format!("compare/baseline/{}.html", m.name),
            "baseline",
            settings_diff(base.rows.get(&m.name), rows.get(&m.name)),
            memo,
        );
        c.a = format!("{} (baseline)", m.name);
        paired.push(c);
    }
    let names = |m: &Matrix| {
        m.models
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if paired.is_empty() {
        bail!(
            "the baseline {} pairs no row: it has rows {} and this collection {} (a baseline is compared row by row, by name)",
            base.source,
            names(&base.matrix),
            names(current)
        );
    }
    if paired.iter().all(|c| c.overall.is_none()) {
        bail!(
            "the baseline {} shares no scored task with this collection (rows {}): nothing to compare; is it a collection of the same task corpus?",
            base.source,
            paired
                .iter()
                .map(|c| c.b_row.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(paired)
}
