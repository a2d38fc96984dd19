//! The matrix (models × tasks) and the pooled table (models × tags) as table cells, each a
//! `<td>` graded by its interval with its verdict, rate, notes and marks; and where a cell is
//! drawn: on the index up to [`MATRIX_CELLS`] cells, on the tag pages above.

use super::html::{self, cell_id, escape, slug};
use super::marks::dots;
use super::repeats::Repeats;
use super::text::rate_text;
use crate::report::pooled::Pooled;
use crate::report::{Cell, Matrix, TaskInfo};
use crate::stats::interval::{Interval, round4};
use crate::stats::{Reliability, Thresholds};
use std::fmt::Write as _;

/// The index draws its matrix up to this many cells (models × tasks); above, it links the tag
/// pages, which draw the matrix one call shape at a time. Layout time grows with the cells:
/// bench/index.sh measured, in headless Chromium on 2 shared cores, 11,800 compact cells at
/// about 2 s (1.3 s even without their marks) and 3,894 at 0.75–0.93 s, so the budget keeps the
/// index under a second with some margin.
pub(crate) const MATRIX_CELLS: usize = 3_000;

/// The inline style that grades a cell's fill by its interval: green up to the lower bound
/// (surely passes), yellow across the interval, red above the upper bound (surely fails). So
/// 5/5, 3/5 and 0/5 look different at k = 5 although all three are `uncertain`, and the fill
/// is the interval, never the bare rate.
pub(crate) fn fill(iv: Option<&Interval>) -> String {
    match iv {
        Some(iv) => format!(
            " style=\"--l:{}%;--u:{}%\"",
            (round4(iv.lower) * 100.0).round() as i64,
            (round4(iv.upper) * 100.0).round() as i64
        ),
        None => String::new(),
    }
}

/// One task row of a matrix.
pub(crate) struct MatrixRow {
    pub(crate) task: String,
    pub(crate) title: String,
    /// Its other tags.
    pub(crate) also: String,
    /// Pre-rendered `<td>`s, one per model.
    pub(crate) cells: String,
}

/// One task's row of a matrix (the index's or a tag page's): a cell per model, each with its
/// anchor and grouped marks, and `also`, the task's other tags.
pub(crate) fn matrix_row(
    m: &Matrix,
    t: &TaskInfo,
    root: &str,
    also: String,
    rep: &Repeats,
) -> MatrixRow {
    let mut cells = String::new();
    for mv in &m.models {
        match m.cell(&mv.name, &t.id) {
            Some(c) => cell_td(m, c, root, true, false, Some(rep), &mut cells),
            None => cells.push_str("<td class=\"none\">not run</td>"),
        }
    }
    MatrixRow {
        task: t.id.clone(),
        title: t.title.clone(),
        also,
        cells,
    }
}

/// One matrix cell as a `<td>`, with its anchor (`with_id`), verdict word, rate, notes and dots:
/// linked to the transcripts with `links`, else compact marks ([`dots`]), a few dozen bytes at
/// any k. `rep`: where the page marks cells whose samples repeat one answer
/// ([`super::repeats`]).
pub(crate) fn cell_td(
    m: &Matrix,
    c: &Cell,
    root: &str,
    with_id: bool,
    links: bool,
    rep: Option<&Repeats>,
    out: &mut String,
) {
    let v = c.reliability.as_str();
    out.push_str("<td class=\"iv v-");
    out.push_str(v);
    out.push('"');
    out.push_str(&fill(c.interval.as_ref()));
    if with_id {
        out.push_str(" id=\"");
        html::escape_into(out, &cell_id(&c.model, &c.task));
        out.push('"');
    }
    // Writing to a String cannot fail.
    let _ = write!(out, " data-v=\"{:.4}", c.rate().unwrap_or(-1.0));
    out.push_str("\"><b class=\"vt\">");
    out.push_str(v);
    out.push_str("</b> <span class=\"rt\">");
    html::escape_into(out, &rate_text(c.passes, c.scored, c.interval.as_ref()));
    out.push_str("</span>");
    if c.too_few() {
        let _ = write!(
            out,
            " <small class=\"few\">only {} scored</small>",
            c.scored
        );
    }
    if c.errors > 0 {
        let _ = write!(
            out,
            " <small>+{} error{}</small>",
            c.errors,
            if c.errors == 1 { "" } else { "s" }
        );
    }
    if c.task_changed {
        out.push_str(" <small class=\"warn\">task changed</small>");
    }
    // The glyph alone, and only beside a decided verdict: the row's heading says it once.
    if let Some(why) = rep
        .filter(|_| c.reliability != Reliability::Uncertain)
        .and_then(|r| r.why(&c.model, [c]))
    {
        out.push(' ');
        out.push_str(&why.glyph());
    }
    out.push(' ');
    dots(m, c, root, links, out);
    out.push_str("</td>");
}

/// A pooled (model × tag) cell as a `<td>`: verdict, passes/scored with the by-task interval,
/// pass^k and flaky cells; graded like a matrix cell. `mark`: the identical-samples mark of the
/// cells pooled ([`super::repeats`]), or `""`.
pub(crate) fn pooled_td(at: Thresholds, p: &Pooled, mark: &str, out: &mut String) {
    let v = p.reliability(at).as_str();
    out.push_str("<td class=\"iv v-");
    out.push_str(v);
    out.push('"');
    out.push_str(&fill(p.interval.as_ref()));
    out.push_str(&format!(
        " data-v=\"{:.4}\"><b class=\"vt\">{v}</b> <span class=\"rt\">{}</span><br><small>",
        p.interval.map_or(-1.0, |iv| iv.lower),
        escape(&rate_text(p.passes, p.scored, p.interval.as_ref()))
    ));
    out.push_str(&format!(
        "{} task{} · pass^k {}/{} · flaky {}",
        p.tasks,
        if p.tasks == 1 { "" } else { "s" },
        p.all_passed,
        p.tasks,
        p.flaky
    ));
    if p.errors > 0 {
        out.push_str(&format!(" · +{} errors", p.errors));
    }
    // "uncertain" beside a row where every sample passed reads as a bug unless it says why,
    // here where it appears: the interval's unit is the task, so a few tasks bound it below
    // (one task's pool is its cell, whose count says it).
    if let Some(iv) = p
        .interval
        .as_ref()
        .filter(|_| p.passes == p.scored && p.tasks > 1 && v == Reliability::Uncertain.as_str())
    {
        out.push_str(&format!(
            " · every sample passed, but the task is the unit: {} samples over {} task{} put the lower bound at {}, under {}",
            p.scored,
            p.tasks,
            if p.tasks == 1 { "" } else { "s" },
            crate::stats::interval::percent(iv.lower),
            at.reliable_percent()
        ));
    }
    if let Some(more) = crate::report::pooled::samples_to_settle(p, at.reliable_at()) {
        out.push_str(&format!(" · ~{more} more samples per task would settle it"));
    }
    if !mark.is_empty() {
        out.push_str(" · ");
        out.push_str(mark);
    }
    out.push_str("</small></td>");
}

/// Each model's pooled verdict over `tag` as a `<td>` ([`pooled_td`]), its verdict marked by
/// the glyph when it is decided and the cells it pools repeat one answer (the model's heading
/// carries the whole mark); `not_run` where the model ran none of the tag's tasks.
pub(crate) fn pooled_row(m: &Matrix, rep: &Repeats, tag: &str, not_run: &str) -> String {
    let mut cells = String::new();
    for mv in &m.models {
        match mv.pooled.get(tag) {
            Some(p) => {
                let mark = rep
                    .why_tag(m, &mv.name, tag)
                    .filter(|_| p.reliability(m.thresholds) != Reliability::Uncertain)
                    .map(|w| w.glyph())
                    .unwrap_or_default();
                pooled_td(m.thresholds, p, &mark, &mut cells)
            }
            None => cells.push_str(not_run),
        }
    }
    cells
}

/// Where a cell is drawn with its `c~<model>~<task>` anchor, relative to the site root: the
/// index's matrix, or above [`MATRIX_CELLS`] the page of the task's first tag (tag pages always
/// carry the anchors), or the task's own page for a task with no tag.
pub(crate) fn cell_href(m: &Matrix, model: &str, task: &str) -> String {
    let tags = m
        .tasks
        .binary_search_by(|t| t.id.as_str().cmp(task))
        .ok()
        .map(|i| m.tasks[i].tags.as_slice())
        .unwrap_or_default();
    cell_href_in(m.models.len() * m.tasks.len(), tags, model, task)
}

/// Whether the index draws the matrix of a site of `cells` cells (else the tag pages do).
pub(crate) fn index_draws_matrix(cells: usize) -> bool {
    cells <= MATRIX_CELLS
}

/// [`cell_href`] for a site of `cells` cells (models × tasks), the task having `tags`: what a
/// run's page links before the matrix exists.
pub(crate) fn cell_href_in(cells: usize, tags: &[String], model: &str, task: &str) -> String {
    if index_draws_matrix(cells) {
        return format!("index.html#{}", cell_id(model, task));
    }
    match tags.first() {
        Some(tag) => format!("tags/{}.html#{}", slug(tag), cell_id(model, task)),
        None => format!("tasks/{task}.html"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{SampleKey, Scored, aggregate};
    use crate::site::SiteInput;
    use crate::site::pages::{index, tag};
    use crate::taxonomy::{Label, Outcome};
    use std::collections::BTreeMap;

    /// `models` × `tasks` cells, one sample each, over two tags and one untagged task.
    fn matrix_of(models: usize, tasks: usize) -> Matrix {
        let infos: Vec<TaskInfo> = (0..tasks)
            .map(|i| TaskInfo {
                id: format!("task-{i:04}"),
                title: format!("task {i}"),
                tags: match i {
                    0 => vec![],
                    _ if i % 2 == 0 => vec!["even".into()],
                    _ => vec!["odd".into()],
                },
                bfcl_scored: false,
            })
            .collect();
        let samples = (0..models)
            .flat_map(|m| {
                (0..tasks).map(move |t| {
                    Scored::bare(
                        SampleKey {
                            model: format!("model-{m:02}"),
                            task: format!("task-{t:04}"),
                            run: "r1".into(),
                            sample: "000".into(),
                        },
                        if (m + t) % 3 == 0 {
                            Outcome::Fail(Label::WrongTool)
                        } else {
                            Outcome::Pass
                        },
                    )
                })
            })
            .collect();
        aggregate(samples, infos, crate::stats::IntervalKind::Wilson)
    }

    /// The index and the tag pages of [`matrix_of`].
    fn index_of(m: &Matrix) -> BTreeMap<String, String> {
        let input = SiteInput {
            matrix: m,
            tasks: &[],
            models: &BTreeMap::new(),
            skipped: &[],
            changes: None,
            task_hashes: &BTreeMap::new(),
            transcripts: &BTreeMap::new(),
            comparisons: &[],
            groups: None,
            site_url: None,
        };
        let mut files = Vec::new();
        let rep = Repeats::of(input.models);
        index::page(&input, &rep, &["data/samples.csv".to_string()], &mut files).unwrap();
        for tag in &m.tags {
            tag::page(&input, &rep, tag, &mut files).unwrap();
        }
        files
            .into_iter()
            .filter(|(p, _)| p.ends_with(".html"))
            .map(|(p, b)| (p, String::from_utf8(b).unwrap()))
            .collect()
    }

    #[test]
    fn above_the_cell_budget_the_index_links_the_tag_pages_which_hold_the_anchors() {
        // Within the budget: every cell on the index, with its anchor.
        let small = index_of(&matrix_of(2, 30));
        let index = &small["index.html"];
        assert_eq!(index.matches("id=\"c~").count(), 60);
        assert!(index.contains("<table class=\"matrix\">"));
        // Above: no matrix, a link to each tag page and to the untagged task's page...
        let (models, tasks) = (41, MATRIX_CELLS / 40);
        let m = matrix_of(models, tasks);
        let big = index_of(&m);
        let index = &big["index.html"];
        assert!(!index.contains("<table class=\"matrix\">"));
        assert_eq!(index.matches("id=\"c~").count(), 0);
        assert!(index.contains(&format!("make {} cells", models * tasks)));
        for link in ["tags/even.html", "tags/odd.html", "tasks/task-0000.html"] {
            assert!(index.contains(&format!("<a href=\"{link}\">")), "{link}");
        }
        // ...and the tag pages carry every tagged cell's anchor, so the cell is one click away.
        let anchored: usize = ["tags/even.html", "tags/odd.html"]
            .iter()
            .map(|p| big[*p].matches("id=\"c~").count())
            .sum();
        assert_eq!(anchored, models * (tasks - 1));
        assert!(big["tags/odd.html"].contains("id=\"c~model-40~task-0001\""));
        // Pages that name a cell link it where it is drawn.
        assert_eq!(
            cell_href(&m, "model-40", "task-0001"),
            "tags/odd.html#c~model-40~task-0001"
        );
        assert_eq!(
            cell_href(&m, "model-40", "task-0000"),
            "tasks/task-0000.html"
        );
        assert_eq!(
            cell_href(&matrix_of(2, 30), "model-01", "task-0000"),
            "index.html#c~model-01~task-0000"
        );
    }
}
