//! `index.html`: what each model can be relied on for, then the models × tags table, the matrix
//! (or, above [`MATRIX_CELLS`] cells, the pages that hold it), the label counts and the models'
//! totals.

use super::{compare, render};
use crate::evidence::SkippedInput;
use crate::report::{Matrix, TaskInfo};
use crate::site::data;
use crate::site::html::slug;
use crate::site::marks::{LegendItem, MAX_MARKS, legend};
use crate::site::matrix::{MATRIX_CELLS, MatrixRow, index_draws_matrix, matrix_row, pooled_row};
use crate::site::repeats::{self, Repeats};
use crate::site::text::{TotalRow, total_row};
use crate::site::{File, SiteError, SiteInput, answers, card, tags};
use crate::stats::interval::show;
use crate::taxonomy::Label;
use askama::Template;
use std::collections::BTreeMap;

/// One model's samples counted by outcome, in label order.
struct LabelCountRow {
    model: String,
    passes: u64,
    counts: Vec<u64>,
    errors: u64,
}

/// One row of the models × tags table.
struct ShapeRow {
    tag: String,
    link: String,
    description: String,
    tasks: usize,
    /// Pre-rendered `<td>`s, one per model.
    cells: String,
}

/// Above [`MATRIX_CELLS`], one page holding part of the matrix: a tag page, or the page of a
/// task with no tag.
struct MatrixPageLink {
    name: String,
    link: String,
    tasks: usize,
}

/// The tasks grouped under one tag in the index's matrix.
struct MatrixGroup {
    tag: String,
    link: Option<String>,
    rows: Vec<MatrixRow>,
}

#[derive(Template)]
#[template(path = "index.html")]
struct IndexPage<'a> {
    title: String,
    root: String,
    /// Escaped HTML: the link card's tags ([`card`]).
    card: String,
    method: &'static str,
    n_models: usize,
    n_tasks: usize,
    n_samples: usize,
    passes: u64,
    fails: u64,
    errors: u64,
    skipped: &'a [SkippedInput],
    has_changes: bool,
    models: Vec<String>,
    /// Each model with its identical-samples mark, said once in the shape table's heading
    /// ([`Repeats::heads`]).
    heads: Vec<(String, String)>,
    shapes: Vec<ShapeRow>,
    /// The matrix, empty above [`MATRIX_CELLS`] cells.
    groups: Vec<MatrixGroup>,
    n_cells: usize,
    matrix_cells: usize,
    /// Above [`MATRIX_CELLS`] cells: the pages that hold the matrix instead.
    matrix_pages: Vec<MatrixPageLink>,
    labels: Vec<&'static str>,
    label_rows: Vec<LabelCountRow>,
    totals: Vec<TotalRow>,
    legend: Vec<LegendItem>,
    /// Above this many samples a cell's marks are counts ([`MAX_MARKS`]).
    max_marks: usize,
    rules: String,
    /// The pre-rendered "Comparisons" block (empty without comparisons).
    comparisons: String,
    /// The pre-rendered first answer: per model, the shapes it is reliable on, those it is
    /// not, and those not told yet ([`answers`]).
    answers: String,
    /// The one-row-per-sample export: `data/samples.csv`, or one file per model.
    samples_csvs: &'a [String],
    /// The sentence on the identical-samples mark, or `""` ([`repeats`]).
    repeats: String,
    /// `--reliable-at` and the broken threshold as the legend writes them (`90 %`, `50 %`).
    reliable_at: String,
    broken_below: String,
    /// The interval of 5/5 in one cell, and the fewest all-passing samples a cell needs to
    /// read `reliable` (0: never, within four billion).
    five_of_five: String,
    cell_reliable_from: u64,
}

/// The tag a task is grouped under in the matrix: its first, or none.
fn primary_tag(t: &TaskInfo) -> &str {
    t.tags.first().map_or("", String::as_str)
}

/// The models × tags table's rows, one per tag with its description and one pooled cell per
/// model (`root` leads to the site root).
fn shape_rows(m: &Matrix, root: &str, rep: &Repeats) -> Vec<ShapeRow> {
    m.tags
        .iter()
        .map(|tag| {
            let tasks = m.tasks.iter().filter(|t| t.tags.contains(tag)).count();
            // Sortable: a model that ran none of the tag's tasks sorts below every rate.
            let cells = pooled_row(m, rep, tag, "<td class=\"none\" data-v=\"-2\">not run</td>");
            ShapeRow {
                tag: tag.clone(),
                link: format!("{root}tags/{}.html", slug(tag)),
                description: tags::describe(tag),
                tasks,
                cells,
            }
        })
        .collect()
}

/// `index.html`; `samples_csvs` are the export's files, which it links.
pub(crate) fn page(
    input: &SiteInput,
    rep: &Repeats,
    samples_csvs: &[String],
    files: &mut Vec<File>,
) -> Result<(), SiteError> {
    let m = input.matrix;
    let n_cells = m.models.len() * m.tasks.len();
    let (groups, matrix_pages) = if index_draws_matrix(n_cells) {
        (matrix_groups(m, rep), Vec::new())
    } else {
        (Vec::new(), matrix_page_links(m))
    };
    let (passes, fails, errors) = m.outcome_counts();
    // The rows marked in the shape table and the answers (tagged tasks), and in the matrix
    // when the index draws it (every task).
    let heads = rep.heads(
        m,
        m.tasks
            .iter()
            .filter(|t| index_draws_matrix(n_cells) || !t.tags.is_empty()),
    );
    let page = IndexPage {
        title: "Tool-call conformance".into(),
        root: String::new(),
        card: link_card(m, (passes, fails, errors), input.site_url),
        method: m.method.title(),
        n_models: m.models.len(),
        n_tasks: m.tasks.len(),
        n_samples: m.samples.len(),
        passes,
        fails,
        errors,
        skipped: input.skipped,
        has_changes: input.changes.is_some(),
        models: m.models.iter().map(|mv| mv.name.clone()).collect(),
        shapes: shape_rows(m, "", rep),
        groups,
        n_cells,
        matrix_cells: MATRIX_CELLS,
        matrix_pages,
        labels: Label::ALL.iter().map(|l| l.as_str()).collect(),
        label_rows: label_rows(m),
        totals: ranked_totals(m),
        legend: legend(),
        max_marks: MAX_MARKS,
        rules: data::rules_sha256()[..12].to_string(),
        comparisons: compare::block(input.comparisons, 0, None, None),
        answers: answers::block(m, rep),
        repeats: repeats::heads_note(&heads, ""),
        heads,
        samples_csvs,
        reliable_at: m.thresholds.reliable_percent(),
        broken_below: m.thresholds.broken_percent(),
        five_of_five: crate::stats::interval::interval(m.method, 5, 5)
            .as_ref()
            .map(show)
            .unwrap_or_default(),
        cell_reliable_from: m.thresholds.fewest_samples(m.method).unwrap_or(0),
    };
    files.push(("index.html".into(), render("index.html", &page)?));
    Ok(())
}

/// The per-model table, ranked by the lower bound of each model's pooled interval (what its
/// samples guarantee), highest first; ties and models with nothing scored (last) by name.
fn ranked_totals(m: &Matrix) -> Vec<TotalRow> {
    let mut ranked: Vec<_> = m.models.iter().collect();
    let lower =
        |mv: &&crate::report::ModelView| mv.pooled_total.interval.map_or(-1.0, |iv| iv.lower);
    ranked.sort_by(|a, b| {
        lower(b)
            .total_cmp(&lower(a))
            .then_with(|| a.name.cmp(&b.name))
    });
    ranked
        .into_iter()
        .map(|mv| {
            total_row(
                m.thresholds,
                &mv.name,
                format!("models/{}.html", mv.name),
                &mv.total,
                &mv.pooled_total,
                Some(&mv.latency),
            )
        })
        .collect()
}

/// The tasks grouped under their first tag (`""` for the untagged), in tag order, then id.
fn by_primary_tag(m: &Matrix) -> BTreeMap<&str, Vec<&TaskInfo>> {
    let mut by_group: BTreeMap<&str, Vec<&TaskInfo>> = BTreeMap::new();
    for t in &m.tasks {
        by_group.entry(primary_tag(t)).or_default().push(t);
    }
    by_group
}

/// The matrix: tasks down the side grouped under their first tag (tag order, then id), models
/// across.
fn matrix_groups(m: &Matrix, rep: &Repeats) -> Vec<MatrixGroup> {
    by_primary_tag(m)
        .into_iter()
        .map(|(tag, tasks)| MatrixGroup {
            tag: if tag.is_empty() {
                "untagged".into()
            } else {
                tag.to_string()
            },
            link: (!tag.is_empty()).then(|| format!("tags/{}.html", slug(tag))),
            rows: tasks
                .into_iter()
                .map(|t| {
                    let also = t.tags.iter().skip(1).cloned().collect::<Vec<_>>();
                    matrix_row(m, t, "", also.join(", "), rep)
                })
                .collect(),
        })
        .collect()
}

/// Too many cells for one page: each tag's page is its part of the matrix (with the cells'
/// anchors), and tasks with no tag are listed with their own pages.
fn matrix_page_links(m: &Matrix) -> Vec<MatrixPageLink> {
    let tags = m.tags.iter().map(|tag| MatrixPageLink {
        name: tag.clone(),
        link: format!("tags/{}.html", slug(tag)),
        tasks: m.tasks.iter().filter(|t| t.tags.contains(tag)).count(),
    });
    let untagged = by_primary_tag(m).remove("").unwrap_or_default();
    tags.chain(untagged.into_iter().map(|t| MatrixPageLink {
        name: t.id.clone(),
        link: format!("tasks/{}.html", t.id),
        tasks: 1,
    }))
    .collect()
}

/// Each model's samples counted by outcome.
fn label_rows(m: &Matrix) -> Vec<LabelCountRow> {
    m.models
        .iter()
        .map(|mv| LabelCountRow {
            model: mv.name.clone(),
            passes: mv.total.passes,
            counts: Label::ALL
                .iter()
                .map(|l| mv.labels.get(l).copied().unwrap_or(0))
                .collect(),
            errors: mv.total.errors,
        })
        .collect()
}

/// The site's link card: what was measured, in one line; `outcomes` are the samples passed,
/// failed with a label and lost to transport errors.
fn link_card(m: &Matrix, outcomes: (u64, u64, u64), site_url: Option<&str>) -> String {
    let (passes, fails, errors) = outcomes;
    card::render(
        &card::Card {
            title: &format!(
                "Tool-call conformance: {} model{} × {} task{}",
                m.models.len(),
                if m.models.len() == 1 { "" } else { "s" },
                m.tasks.len(),
                if m.tasks.len() == 1 { "" } else { "s" },
            ),
            description: &format!(
                "{} samples: {passes} passed, {fails} failed with a label, {errors} transport errors; every rate with its 95 % interval, every failure linked to its transcript.",
                m.samples.len()
            ),
            // The site's own address.
            path: "",
            kind: "website",
        },
        site_url,
    )
}
