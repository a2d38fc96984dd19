//! Comparing two rows (SPEC §9): did B help or hurt against A, where, and how sure are we.
//! Loading a collection to compare ([`load`]), pairing its rows ([`pair`]) and the terminal
//! table ([`table`]), over the statistics of [`crate::stats::compare`]; the
//! comparison itself ([`compare`]) and the family the gate decides on ([`comparisons`],
//! [`correct`]). `build`, the site and `callcheck compare` all come here.
//!
//! Every difference is **B − A**: A is the baseline, B the change, so `better` means B passes
//! more often than A.

pub mod load;
pub mod pair;
pub mod table;

use crate::stats::Direction;
use crate::stats::compare::{ALPHA, Pooled, TaskPair, holm, newcombe};
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
    /// Filled by [`correct`]: the smallest drop over these tasks the gate detects with 80 %
    /// power at this k, at α over the family's size (Holm's first step); `None` when not even
    /// a fall from all to none could be detected.
    pub detectable_drop: Option<f64>,
    /// The tasks compared (what the detectable drop is computed from).
    #[serde(skip)]
    pub pairs: Vec<TaskPair>,
}

impl PooledRow {
    /// Worse after the correction: what fails the gate.
    pub fn regression(&self) -> bool {
        self.holm_p < ALPHA
    }
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
    /// Tags whose every task A scored is unmeasured or missing in B.
    pub unmeasured_tags: Vec<String>,
    /// Tasks A scored of which B has no sample at all: they fail the gate unless missing tasks
    /// are allowed (`--allow-missing`).
    pub missing: Vec<String>,
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

    /// Any tag, the overall rate or the transport-error rate worse after the correction.
    pub fn regressed(&self) -> bool {
        self.pooled_rows().any(PooledRow::regression)
    }

    /// Why this comparison fails the gate, one reason a line (empty when it passes): each
    /// pooled comparison worse after the correction (`overall`, a tag, `errors`), then what B
    /// could not measure, then the tasks it lacks unless `allow_missing`.
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
            out.push(format!(
                "missing ({} task{} of A not in B: {})",
                self.missing.len(),
                if self.missing.len() == 1 { "" } else { "s" },
                self.missing.join(", ")
            ));
        }
        out
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

fn pooled_row(
    scope: &str,
    pairs: &[TaskPair],
    memo: &crate::stats::compare::Memo,
) -> Option<PooledRow> {
    let p = memo.pooled(pairs)?;
    Some(PooledRow {
        scope: scope.to_string(),
        direction: p.direction(),
        holm_p: p.p_value,
        pooled: p,
        detectable_drop: None,
        pairs: pairs
            .iter()
            .copied()
            .filter(|p| p.a_scored > 0 && p.b_scored > 0)
            .collect(),
    })
}

/// Compares row B against row A over the tasks of `tasks` (the corpus, sorted by id). The
/// pooled rows are filled with their own p-values (taken from `memo` where it has them);
/// [`correct`] applies Holm over a family.
pub fn compare(
    a: Side,
    b: Side,
    tasks: &[TaskInfo],
    page: String,
    why: &str,
    settings: Option<Vec<SettingDiff>>,
    memo: &crate::stats::compare::Memo,
) -> Comparison {
    let mut cells = Vec::new();
    let mut by_tag: BTreeMap<&str, Vec<TaskPair>> = BTreeMap::new();
    let mut all = Vec::new();
    let mut labels: BTreeMap<Label, (u64, u64)> = BTreeMap::new();
    let (mut unmeasured, mut missing) = (Vec::new(), Vec::new());
    // Per tag: tasks A scored, and of those, tasks B scored.
    let mut tag_cover: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    // Transport: per task, samples that got an answer (scored) over all samples.
    let mut transport = Vec::new();
    let mut any_error = false;
    for t in tasks {
        let ca = a.matrix.cell(a.row, &t.id);
        let cb = b.matrix.cell(b.row, &t.id);
        if ca.is_none() && cb.is_none() {
            continue;
        }
        let (ap, an) = ca.map_or((0, 0), |c| (c.passes, c.scored));
        let (bp, bn) = cb.map_or((0, 0), |c| (c.passes, c.scored));
        if let (Some(x), Some(y)) = (ca, cb) {
            any_error |= x.errors > 0 || y.errors > 0;
            transport.push(TaskPair {
                a_passes: x.scored,
                a_scored: x.scored + x.errors,
                b_passes: y.scored,
                b_scored: y.scored + y.errors,
            });
        }
        if an > 0 {
            match cb {
                None => missing.push(t.id.clone()),
                Some(_) if bn == 0 => unmeasured.push(t.id.clone()),
                Some(_) => {}
            }
            for tag in &t.tags {
                let e = tag_cover.entry(tag.as_str()).or_default();
                e.0 += 1;
                e.1 += usize::from(bn > 0);
            }
        }
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
            a_identical: ca.is_some_and(|c| c.identical()),
            b_identical: cb.is_some_and(|c| c.identical()),
        });
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
        overall: pooled_row("overall", &all, memo),
        tags: by_tag
            .iter()
            .filter_map(|(tag, pairs)| pooled_row(tag, pairs, memo))
            // A rise in transport errors is a regression of its own (SPEC §9): the same test
            // with "the request got an answer" as the event. Only shown when either side had
            // an error, so comparisons without any keep their family.
            .chain(
                any_error
                    .then(|| pooled_row("errors", &transport, memo))
                    .flatten(),
            )
            .collect(),
        cells,
        labels: labels
            .into_iter()
            .filter(|(_, (x, y))| x != y)
            .map(|(label, (a, b))| LabelChange { label, a, b })
            .collect(),
        unmeasured_tags: tag_cover
            .iter()
            .filter(|(_, (scored_a, scored_b))| *scored_a > 0 && *scored_b == 0)
            .map(|(tag, _)| tag.to_string())
            .collect(),
        unmeasured,
        missing,
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
    let alpha = ALPHA / p.len().max(1) as f64;
    for c in comparisons.iter_mut() {
        for r in c.overall.iter_mut().chain(c.tags.iter_mut()) {
            r.holm_p = it.next().unwrap_or(1.0);
            let rates: Vec<f64> = r.pairs.iter().map(TaskPair::a_rate).collect();
            let ka: Vec<u64> = r.pairs.iter().map(|p| p.a_scored).collect();
            let kb: Vec<u64> = r.pairs.iter().map(|p| p.b_scored).collect();
            r.detectable_drop = crate::stats::compare::detectable_drop(&rates, &ka, &kb, alpha);
        }
    }
    p.len()
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
/// against the same-named row of the baseline. Holm's correction is applied over all of them.
/// A `--compare` row that has no samples is an error naming it.
pub fn comparisons(
    current: &Matrix,
    rows: &BTreeMap<String, RowSettings>,
    explicit: &[(String, String)],
    baseline: Option<&Collection>,
    tasks: &[TaskInfo],
    memo: &crate::stats::compare::Memo,
) -> Result<Vec<Comparison>> {
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
            out.push(c);
        }
        let paired: Vec<&Comparison> = out.iter().filter(|c| c.why == "baseline").collect();
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
    }
    correct(&mut out);
    Ok(out)
}
