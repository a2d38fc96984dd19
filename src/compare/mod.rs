//! Comparing two rows (SPEC §9): did B help or hurt against A, where, and how sure are we.
//! Loading a collection to compare ([`load`]), pairing its rows ([`pair`]), the statistics
//! ([`stats`]), the words of a verdict ([`verdict`]) and the terminal table ([`table`]); the
//! comparison itself ([`compare`]) and the family the gate decides on ([`comparisons`],
//! [`correct`]). `build`, the site and `callcheck compare` all come here.
//!
//! Every difference is **B − A**: A is the baseline, B the change, so `better` means B passes
//! more often than A.

pub mod load;
pub mod pair;
pub mod stats;
pub mod table;
pub mod verdict;

pub use load::{Collection, infos, load_baseline, load_runs};
pub use pair::{Pair, RowSettings, SettingDiff, pairs, parse_pairs, row_settings, settings_diff};
pub use stats::{
    ALPHA, CELL_METHOD, POOLED_METHOD, Pooled, REPLICATES, SEED, TaskPair, fnv1a, holm, newcombe,
    pooled,
};
pub use verdict::Direction;

use crate::report::interval::Interval;
use crate::report::{Matrix, SampleKey, TaskInfo};
use crate::taxonomy::{Label, Outcome};
use anyhow::{Result, bail};
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

/// The comparisons a build shows: every pair of rows of the collection (§9), then every row
/// against the same-named row of the baseline. Holm's correction is applied over all of them.
/// A `--compare` row that has no samples is an error naming it.
pub fn comparisons(
    current: &Matrix,
    rows: &BTreeMap<String, RowSettings>,
    explicit: &[(String, String)],
    baseline: Option<&Collection>,
    tasks: &[TaskInfo],
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
    let mut out: Vec<Comparison> = pairs(&rows, explicit)
        .iter()
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
            );
            c.a = format!("{} (baseline)", m.name);
            out.push(c);
        }
    }
    correct(&mut out);
    Ok(out)
}
