//! Comparison pages (SPEC §9): `compare/<a>--<b>.html` and `compare/baseline/<row>.html` (with
//! their numbers, `data/compare.json`), and the small "Comparisons" blocks the index, model and
//! task pages carry. Pure: comparisons in, files and HTML out.

use crate::compare::{self, Comparison, Mark};
use crate::report::Matrix;
use crate::site::html::{depth_of, escape, root};
use crate::site::marks::grouped_marks;
use crate::site::repeats::{self, Repeats};
use crate::site::{File, SiteError};
use crate::stats::Direction;
use crate::stats::compare::{CELL_METHOD, GATE_METHOD, POOLED_METHOD};
use crate::stats::interval::points;
use crate::taxonomy::Outcome;
use askama::Template;

/// Percent with one decimal.
fn pct(x: f64) -> String {
    format!("{:.1} %", (x * 1000.0).round() / 10.0)
}

/// `−8.5 points [−14.0, −3.1]`.
fn difference(d: f64, iv: &crate::stats::interval::Interval) -> String {
    format!(
        "{} points [{}, {}]",
        points(d),
        points(iv.lower),
        points(iv.upper)
    )
}

struct PooledView {
    scope: String,
    /// The identical-samples mark of the cells it pools ([`crate::site::repeats`]), or `""`.
    same: String,
    tasks: usize,
    a: String,
    b: String,
    diff: String,
    verdict: &'static str,
    class: &'static str,
    holm: String,
    /// The smallest drop the gate detects at this k with 80 % power.
    detects: String,
    regression: bool,
}

struct CellView {
    task: String,
    /// The identical-samples mark of its two cells, or `""`.
    same: String,
    a: String,
    b: String,
    diff: String,
    verdict: &'static str,
    class: &'static str,
    /// Pre-rendered marks (links to transcripts, or plain marks for a baseline).
    a_marks: String,
    b_marks: String,
    /// The task is a regression on its own after the family's correction: its adjusted p.
    regression: Option<String>,
}

#[derive(Template)]
#[template(path = "compare.html")]
struct ComparePage {
    title: String,
    root: String,
    a: String,
    b: String,
    a_link: Option<String>,
    b_link: Option<String>,
    why: String,
    lead: String,
    lead_class: &'static str,
    unmeasured: Vec<String>,
    missing: Vec<String>,
    missing_tags: Vec<String>,
    settings: Vec<(String, String, String)>,
    settings_known: bool,
    pooled: Vec<PooledView>,
    cells: Vec<CellView>,
    gained: Vec<String>,
    lost: Vec<String>,
    n_pooled: usize,
    n_cells: usize,
    /// The gate's family, in words ([`crate::compare::Family::describe`]), and the command
    /// that decides over the same family.
    family: String,
    family_command: String,
    /// What the family says about one broken task ([`crate::compare::Family::single_task`]).
    single_task: String,
    pooled_method: &'static str,
    gate_method: &'static str,
    cell_method: &'static str,
    /// How the tasks are ordered ([`CELL_ORDER`]).
    order: &'static str,
    /// The sentence on the identical-samples mark, or `""`.
    repeats: String,
    /// The identical-samples mark of the two rows over every cell shown, said once beside
    /// their names; the tables below repeat its glyph beside decided verdicts only.
    same: String,
}

/// Which of a comparison's figures rest on repeated samples ([`crate::site::repeats`]): per side,
/// the row's temperature-0 flag (only for a row of this site: a baseline's settings are not
/// known) and its identical cells.
struct Sides<'a> {
    c: &'a Comparison,
    a: &'a Repeats,
    b: &'a Repeats,
}

impl Sides<'_> {
    /// The mark of the figure over `cells` (both sides scored), its glyph alone with `glyph`,
    /// or `""`.
    fn mark<'c>(
        &self,
        cells: impl Iterator<Item = &'c compare::CellDiff> + Clone,
        glyph: bool,
    ) -> String {
        let count =
            |f: fn(&compare::CellDiff) -> bool| cells.clone().filter(|x| f(x)).count() as u64;
        repeats::mark_sides(
            self.a.why_counted(
                &self.c.a_row,
                count(|x| x.a_identical),
                count(|x| x.a_scored > 0),
            ),
            self.b.why_counted(
                &self.c.b_row,
                count(|x| x.b_identical),
                count(|x| x.b_scored > 0),
            ),
            glyph,
        )
    }

    /// The rows some figure of the page is marked for, with whether they have a page here.
    fn rows(&self) -> Vec<(&str, bool)> {
        let c = self.c;
        // Every cell shown, compared or not (an identical cell has scored samples).
        let n = c.cells.len() as u64;
        let same = |f: fn(&compare::CellDiff) -> bool| c.cells.iter().filter(|x| f(x)).count();
        [
            (self.a, &c.a_row, same(|x| x.a_identical), c.a_linked),
            (self.b, &c.b_row, same(|x| x.b_identical), c.b_linked),
        ]
        .into_iter()
        .filter(|(rep, row, same, _)| rep.why_counted(row, *same as u64, n).is_some())
        .map(|(_, row, _, linked)| (row.as_str(), linked))
        .collect()
    }
}

/// A side's marks of one task: one per outcome group (as the other summary pages draw them),
/// its glyph repeated per sample up to [`MAX_MARKS`](crate::site::marks::MAX_MARKS) samples
/// and with its count above, each group linked to its first sample, so that the page grows
/// with the tasks compared, not with k (every sample is one click further, on the run page the
/// link lands on, and on the task's page). Unlinked for a baseline, whose transcripts are not
/// on this site.
fn marks(list: &[Mark], root: &str, linked: bool) -> String {
    let mut out = String::from("<span class=\"dots\">");
    // Groups in the order of the other pages (passes, labels in taxonomy order, errors:
    // `Outcome`'s order), each with its count and first sample (the list is in key order).
    let mut groups: std::collections::BTreeMap<Outcome, (u64, &Mark)> = Default::default();
    for m in list {
        groups.entry(m.kind).or_insert((0, m)).0 += 1;
    }
    grouped_marks(
        list.len(),
        groups.into_iter().map(|(kind, (n, first))| {
            let href =
                linked.then(|| format!("{root}{}", first.key.section(kind != Outcome::Pass)));
            (kind, n, href)
        }),
        &mut out,
    );
    out.push_str("</span>");
    out
}

/// One comparison's page.
fn page(c: &Comparison, m: &Matrix, rep: &Repeats) -> Result<Vec<u8>, SiteError> {
    let root = root(depth_of(&c.page));
    let unknown = Repeats::default();
    let sides = Sides {
        c,
        a: if c.a_linked { rep } else { &unknown },
        b: if c.b_linked { rep } else { &unknown },
    };
    let (lead, lead_class) = lead(c);
    let page = ComparePage {
        title: format!("{} against {}", c.b, c.a),
        root: root.clone(),
        a: c.a.clone(),
        b: c.b.clone(),
        a_link: c.a_linked.then(|| format!("{root}models/{}.html", c.a_row)),
        b_link: c.b_linked.then(|| format!("{root}models/{}.html", c.b_row)),
        why: why_compared(c),
        lead_class,
        lead,
        unmeasured: c.unmeasured.clone(),
        missing: c.missing.clone(),
        missing_tags: c.missing_tags.clone(),
        settings_known: c.settings_known,
        settings: c
            .settings
            .iter()
            .map(|s| (s.setting.clone(), s.a.clone(), s.b.clone()))
            .collect(),
        pooled: pooled_views(&sides, m),
        cells: cell_views(&sides, &root),
        gained: label_moves(c, |a, b| b > a),
        lost: label_moves(c, |a, b| b < a),
        n_pooled: c.pooled_rows().count(),
        n_cells: c.compared_cells(),
        family: c.family.describe(),
        family_command: if c.why == "baseline" {
            "callcheck compare --baseline PATH".to_string()
        } else {
            format!("callcheck compare {} {}", c.a_row, c.b_row)
        },
        single_task: c.family.single_task(c.k()),
        pooled_method: POOLED_METHOD,
        gate_method: GATE_METHOD,
        cell_method: CELL_METHOD,
        order: CELL_ORDER,
        repeats: repeats::note(sides.rows(), &root),
        same: sides.mark(c.cells.iter(), false),
    };
    let title = format!("{} against {}", c.b, c.a);
    super::carded(&c.page, &page, &title, &page.lead, &c.page, None)
}

/// The answer first: the gate's verdict (corrected over the comparison's family, what
/// `--fail-on regression` decides) and the scopes that moved; then the overall difference and
/// its interval. With the class the sentence is shown in.
fn lead(c: &Comparison) -> (String, &'static str) {
    let failures = c.gate_failures(false);
    let gate = if failures.is_empty() {
        format!(
            "Gate: no significant regression (one-sided exact tests, Holm-corrected over its family of {} pooled rows and {} tasks), nothing unmeasured or missing.",
            c.family.rows, c.family.tasks
        )
    } else {
        format!("Gate: regression in {}.", failures.join("; "))
    };
    let lead = match &c.overall {
        Some(o) => {
            let p = &o.pooled;
            format!(
                "{gate} Overall, over these {} tasks (each weighing the same): A {}, B {}, B − A = {} ({}, uncorrected).",
                p.tasks,
                pct(p.a_rate),
                pct(p.b_rate),
                difference(p.difference, &p.interval),
                o.direction.as_str()
            )
        }
        None => format!(
            "{gate} The two rows have no task in common with a scored sample on both sides: nothing to compare."
        ),
    };
    let class = if failures.is_empty() {
        c.overall.as_ref().map_or("none", |o| o.direction.class())
    } else {
        "worse"
    };
    (lead, class)
}

/// Why the two rows are compared, in words.
fn why_compared(c: &Comparison) -> String {
    match c.why.as_str() {
        "same model id" => "both rows serve the same model id".into(),
        "variant_of" => format!("{} is declared a variant of {} (variant_of)", c.b, c.a),
        "--compare" => "asked for with build --compare".into(),
        _ => format!(
            "{} is this collection's row, {} the same-named row of the baseline (build --baseline)",
            c.b, c.a
        ),
    }
}

/// The pooled comparisons (overall, errors, per tag), each decided one (a difference whose
/// interval excludes 0, or the gate's regression) with the identical-samples glyph of the cells
/// it pools: both sides scored, and of the scope's tag. The page's head says the whole mark
/// once. The `errors` row compares getting an answer at all, which repeated answers do not
/// bear on.
fn pooled_views(sides: &Sides, m: &Matrix) -> Vec<PooledView> {
    let c = sides.c;
    let scored = || c.cells.iter().filter(|x| x.a_scored > 0 && x.b_scored > 0);
    let pooled_mark = |scope: &str| match scope {
        "errors" => String::new(),
        "overall" => sides.mark(scored(), true),
        tag => sides.mark(
            scored().filter(move |x| {
                m.task(&x.task)
                    .is_some_and(|t| t.tags.iter().any(|g| g == tag))
            }),
            true,
        ),
    };
    c.pooled_rows()
        .map(|r| PooledView {
            same: if r.direction != Direction::NoEvidence || r.regression() {
                pooled_mark(&r.scope)
            } else {
                String::new()
            },
            scope: r.scope.clone(),
            tasks: r.pooled.tasks,
            a: pct(r.pooled.a_rate),
            b: pct(r.pooled.b_rate),
            diff: difference(r.pooled.difference, &r.pooled.interval),
            verdict: r.direction.as_str(),
            // The row's colour is the gate's: red where the test corrected over its family
            // flags a regression, none elsewhere (the uncorrected word stays in its column).
            class: if r.regression() { "worse" } else { "none" },
            holm: if r.gate.in_family {
                p_value(r.holm_p)
            } else {
                "–".into()
            },
            // The terminal's `−10 pts` under a "detects a drop of" heading.
            detects: match r.detectable_drop {
                Some(d) => format!("{} points", compare::drop_points(d)),
                None => "nothing".into(),
            },
            regression: r.regression(),
        })
        .collect()
}

/// A p-value as the page prints it: four decimals, and `< 0.0001` below what they show.
fn p_value(p: f64) -> String {
    if p < 0.0001 {
        "< 0.0001".into()
    } else {
        format!("{p:.4}")
    }
}

/// The tasks compared, in the order the page states ([`CELL_ORDER`]): the tasks whose interval
/// says worse, then better; then those whose rates differ without evidence, the largest
/// difference first (a reader looks there next); then the unchanged; ties by id.
fn cell_views(sides: &Sides, root: &str) -> Vec<CellView> {
    let c = sides.c;
    let mut cells: Vec<&compare::CellDiff> = c.cells.iter().collect();
    cells.sort_by(|x, y| cell_rank(x).cmp(&cell_rank(y)).then(x.task.cmp(&y.task)));
    cells
        .iter()
        .map(|x| CellView {
            same: if (x.a_scored > 0 || x.b_scored > 0)
                && (x.direction != Direction::NoEvidence || x.regression())
            {
                sides.mark(std::iter::once(*x), true)
            } else {
                String::new()
            },
            task: x.task.clone(),
            a: format!("{}/{}", x.a_passes, x.a_scored),
            b: format!("{}/{}", x.b_passes, x.b_scored),
            diff: match (x.difference, x.interval.as_ref()) {
                (Some(d), Some(iv)) => difference(d, iv),
                _ => "– (a side has no scored sample)".into(),
            },
            verdict: x.direction.as_str(),
            class: x.direction.class(),
            a_marks: marks(&x.a_marks, root, c.a_linked),
            b_marks: marks(&x.b_marks, root, c.b_linked),
            regression: x.regression().then(|| p_value(x.gate.adjusted)),
        })
        .collect()
}

/// The labels whose counts moved from A to B the way `moved(a, b)` says (gained: B more),
/// each as `3 wrong_tool (1 → 4)`.
fn label_moves(c: &Comparison, moved: fn(u64, u64) -> bool) -> Vec<String> {
    c.labels
        .iter()
        .filter(|l| moved(l.a, l.b))
        .map(|l| {
            format!(
                "{} {} ({} → {})",
                l.a.abs_diff(l.b),
                l.label.as_str(),
                l.a,
                l.b
            )
        })
        .collect()
}

/// Every comparison page and `data/compare.json`; nothing when there is no comparison.
/// `m` is this site's matrix (the tasks' tags); `rep` tells which of its rows ask for
/// temperature 0.
pub(crate) fn files(
    comparisons: &[Comparison],
    m: &Matrix,
    rep: &Repeats,
    files: &mut Vec<File>,
) -> Result<(), SiteError> {
    if comparisons.is_empty() {
        return Ok(());
    }
    for c in comparisons {
        files.push((c.page.clone(), page(c, m, rep)?));
    }
    files.push((
        "data/compare.json".into(),
        crate::site::data::compare_json(comparisons),
    ));
    Ok(())
}

/// How a compare page orders its tasks, as the page says it.
const CELL_ORDER: &str = "tasks whose interval says worse come first, then better, then those whose rates differ without evidence of a difference (the largest difference first), then those with the same rate; ties in task id order";

/// A task's place in [`CELL_ORDER`]: its group, then (within the undecided) the size of its
/// difference in tenths of a point, larger first.
fn cell_rank(c: &crate::compare::CellDiff) -> (u8, std::cmp::Reverse<u64>) {
    match c.direction {
        Direction::Worse => (0, std::cmp::Reverse(0)),
        Direction::Better => (1, std::cmp::Reverse(0)),
        Direction::NoEvidence => match c.difference {
            // Compared at a fixed precision, so that float noise cannot reorder equal moves.
            Some(d) if (d * 1000.0).round() != 0.0 => {
                (2, std::cmp::Reverse((d.abs() * 1000.0).round() as u64))
            }
            _ => (3, std::cmp::Reverse(0)),
        },
    }
}

/// The "Comparisons" block of a page at `depth`: a list of the comparisons that involve `row`
/// (every one when `None`), each with its overall verdict; `anchor` points into the page (a
/// task's row). Empty when there is none, so pages without comparisons are unchanged.
pub(crate) fn block(
    comparisons: &[Comparison],
    depth: usize,
    row: Option<&str>,
    anchor: Option<&str>,
) -> String {
    let shown: Vec<&Comparison> = comparisons
        .iter()
        .filter(|c| {
            row.is_none_or(|r| (c.a_linked && c.a_row == r) || (c.b_linked && c.b_row == r))
        })
        .filter(|c| anchor.is_none_or(|t| c.cells.iter().any(|x| x.task == t)))
        .collect();
    if shown.is_empty() {
        return String::new();
    }
    let root = root(depth);
    let mut out = String::from(
        "<section id=\"comparisons\"><h2>Comparisons</h2>\n<ul class=\"comparisons\">",
    );
    for c in shown {
        // The verdict shown here is one interval's, uncorrected for the many made; the gate's
        // (corrected over the comparison's family, what `--fail-on regression` decides)
        // is the compare page's, stated beside it with the link, as that page's headline does.
        let verdict = match (anchor, &c.overall) {
            (Some(task), _) => c
                .cells
                .iter()
                .find(|x| x.task == task)
                .filter(|x| x.interval.is_some())
                .map_or("not run by both".to_string(), |x| {
                    format!(
                        "{} <small>(uncorrected, this task)</small>",
                        x.direction.as_str()
                    )
                }),
            (None, Some(o)) => format!(
                "{} <small>(uncorrected, overall)</small>",
                o.direction.as_str()
            ),
            (None, None) => "nothing in common".to_string(),
        };
        let failures = c.gate_failures(false);
        let gate = if failures.is_empty() {
            "no significant regression".to_string()
        } else {
            format!("regression in {}", escape(&failures.join("; ")))
        };
        out.push_str(&format!(
            "<li><a href=\"{root}{}{}\">{} against {}</a>: {} · <a href=\"{root}{}\">the gate's verdict</a>: {}</li>",
            escape(&c.page),
            anchor
                .map(|t| format!("#t~{}", escape(t)))
                .unwrap_or_default(),
            escape(&c.b),
            escape(&c.a),
            verdict,
            escape(&c.page),
            gate
        ));
    }
    out.push_str("</ul></section>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::{CELL_ORDER, cell_rank};
    use crate::compare::CellDiff;
    use crate::stats::Direction;

    fn cell(task: &str, direction: Direction, difference: Option<f64>) -> CellDiff {
        CellDiff {
            task: task.into(),
            a_passes: 0,
            a_scored: 5,
            b_passes: 0,
            b_scored: 5,
            difference,
            interval: None,
            direction,
            a_marks: Vec::new(),
            b_marks: Vec::new(),
            a_identical: false,
            b_identical: false,
            a_samples: 5,
            b_samples: 5,
            p_value: 1.0,
            gate: Default::default(),
        }
    }

    #[test]
    fn tasks_are_ordered_as_the_page_says() {
        let mut cells = [
            cell("a-same", Direction::NoEvidence, Some(0.0)),
            cell("b-small", Direction::NoEvidence, Some(0.2)),
            cell("c-better", Direction::Better, Some(0.8)),
            cell("d-large", Direction::NoEvidence, Some(-0.4)),
            cell("e-worse", Direction::Worse, Some(-0.6)),
            cell("f-unscored", Direction::NoEvidence, None),
            cell("g-small", Direction::NoEvidence, Some(-0.2)),
        ];
        cells.sort_by(|x, y| cell_rank(x).cmp(&cell_rank(y)).then(x.task.cmp(&y.task)));
        let order: Vec<&str> = cells.iter().map(|c| c.task.as_str()).collect();
        assert_eq!(
            order,
            [
                "e-worse",
                "c-better",
                "d-large",
                "b-small",
                "g-small",
                "a-same",
                "f-unscored"
            ]
        );
        assert!(CELL_ORDER.starts_with("tasks whose interval says worse come first"));
    }
}
