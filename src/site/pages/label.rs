//! `labels/<label>.html` and their index: where each label occurs, a few example transcripts per
//! cell, what its retry class means, and what each row's failures with it measured when retried
//! (SPEC §11).

use super::{render, routing};
use crate::hitec::HitecError;
use crate::report::routing::Routing;
use crate::report::{Cell, Matrix};
use crate::site::html::root;
use crate::site::matrix::cell_href;
use crate::site::{File, GroupKeys, Sink, SiteError, SiteInput, group};
use crate::taxonomy::{Label, Outcome, Retry};
use askama::Template;
use rayon::prelude::*;
use std::collections::BTreeMap;

/// A label's page gives at most this many example transcripts per cell (the task page links
/// every sample), so the page grows with the cells that have the label, not with k.
const MAX_LABEL_EXAMPLES: usize = 3;

/// One example of a label on its page: a link to the sample's transcript at `#fail`.
struct LabelSample {
    link: String,
    run: String,
    sample: String,
}

/// One cell (model × task) on a label's page: how many of its samples got the label, a few
/// examples and the first one's detail; the task page links every sample.
struct LabelCell {
    task: String,
    /// Where the cell is drawn ([`cell_href`]).
    cell: String,
    count: u64,
    scored: u64,
    examples: Vec<LabelSample>,
    /// Samples with the label not given as examples.
    more: u64,
    detail: String,
}

struct LabelGroup {
    model: String,
    count: u64,
    cells: Vec<LabelCell>,
}

#[derive(Template)]
#[template(path = "label.html")]
struct LabelPage {
    title: String,
    root: String,
    label: &'static str,
    meaning: &'static str,
    retry: &'static str,
    retry_meaning: &'static str,
    hitec: String,
    /// Per row: the label's four measured actions (SPEC §11).
    actions: Vec<routing::LabelView>,
    groups: Vec<LabelGroup>,
    total: u64,
    n_cells: usize,
    max_examples: usize,
}

struct LabelIndexRow {
    label: &'static str,
    meaning: &'static str,
    retry: &'static str,
    count: u64,
}

#[derive(Template)]
#[template(path = "labels.html")]
struct LabelsPage {
    title: String,
    root: String,
    rows: Vec<LabelIndexRow>,
}

/// What a retry class tells a caller to do.
fn retry_meaning(r: Retry) -> &'static str {
    match r {
        Retry::Reroll => "a sampling artifact: asking the same model again is reasonable",
        Retry::Fallback => "a capability gap: send the request to another model",
        Retry::Repair => "mechanically fixable by the caller",
    }
}

/// The label pages, each handed to `sink` as it is drawn (or left as it is:
/// [`crate::site::reuse`]), and their index.
pub(crate) fn pages(
    input: &SiteInput,
    keys: GroupKeys,
    routing_of: &Routing,
    sink: Sink,
) -> Result<(), SiteError> {
    // Each label's page is drawn on its own core, unless the site being updated holds it as
    // drawn from the same cells and routing evidence.
    Label::ALL.par_iter().try_for_each(|&l| {
        let actions = routing::label_actions(routing_of, l);
        let key = keys.map(|(g, k)| (*g, routing::label_key(k.label(input, l), &actions)));
        group(key, &format!("label {l}"), sink, |files| {
            files.push((
                format!("labels/{l}.html"),
                page(input.matrix, l, actions, input.site_url)?,
            ));
            Ok(())
        })
    })?;
    sink(index(input.matrix)?)
}

/// One label's page; `actions` are what each row's failures with it measured when retried.
fn page(
    m: &Matrix,
    l: Label,
    actions: Vec<routing::LabelView>,
    site_url: Option<&str>,
) -> Result<Vec<u8>, SiteError> {
    let groups = label_groups(m, l, &root(1));
    let hitec = HitecError::ALL
        .iter()
        .filter(|h| h.labels().contains(l.as_str()))
        .map(|h| format!("type {} (\u{201c}{}\u{201d})", h.number(), h.name()))
        .collect::<Vec<_>>()
        .join("; ");
    let page = LabelPage {
        title: format!("label {l}"),
        root: root(1),
        label: l.as_str(),
        meaning: l.meaning(),
        retry: l.retry().as_str(),
        retry_meaning: retry_meaning(l.retry()),
        hitec: if hitec.is_empty() {
            "none".into()
        } else {
            hitec
        },
        actions,
        total: groups.iter().map(|g| g.count).sum(),
        n_cells: groups.iter().map(|g| g.cells.len()).sum(),
        groups,
        max_examples: MAX_LABEL_EXAMPLES,
    };
    let title = format!(
        "{l}: {} failed sample{} in {} cell{}",
        page.total,
        if page.total == 1 { "" } else { "s" },
        page.n_cells,
        if page.n_cells == 1 { "" } else { "s" }
    );
    super::carded(
        "label page",
        &page,
        &title,
        l.meaning(),
        &format!("labels/{l}.html"),
        site_url,
    )
}

/// The cells with label `l`, per model, in model and task order (`r` leads to the site root).
fn label_groups(m: &Matrix, l: Label, r: &str) -> Vec<LabelGroup> {
    let mut by_model: BTreeMap<&str, Vec<LabelCell>> = BTreeMap::new();
    for c in m.cells.values() {
        if let Some(&count) = c.labels.get(&l) {
            by_model
                .entry(c.model.as_str())
                .or_default()
                .push(label_cell(m, c, l, count, r));
        }
    }
    by_model
        .into_iter()
        .map(|(model, cells)| LabelGroup {
            model: model.to_string(),
            count: cells.iter().map(|c| c.count).sum(),
            cells,
        })
        .collect()
}

/// One cell's `count` samples with label `l`: only the first [`MAX_LABEL_EXAMPLES`] are given
/// as examples, so that the page grows with cells, not samples; the first one's detail is shown.
fn label_cell(m: &Matrix, c: &Cell, l: Label, count: u64, r: &str) -> LabelCell {
    let mut examples = Vec::new();
    let mut detail = String::new();
    for &i in &c.samples {
        let s = &m.samples[i];
        if s.outcome != Outcome::Fail(l) {
            continue;
        }
        if examples.is_empty() {
            detail = crate::json::clip(&s.detail, 240);
        }
        examples.push(LabelSample {
            link: format!("{r}{}", s.key.section(true)),
            run: s.key.run.clone(),
            sample: s.key.sample.clone(),
        });
        if examples.len() == MAX_LABEL_EXAMPLES {
            break;
        }
    }
    LabelCell {
        task: c.task.clone(),
        cell: cell_href(m, &c.model, &c.task),
        count,
        scored: c.scored,
        more: count - examples.len() as u64,
        examples,
        detail,
    }
}

/// `labels/index.html`: every label with its meaning and how many samples it marks.
fn index(m: &Matrix) -> Result<File, SiteError> {
    let mut totals: BTreeMap<Label, u64> = BTreeMap::new();
    for c in m.cells.values() {
        for (&l, &count) in &c.labels {
            *totals.entry(l).or_default() += count;
        }
    }
    let page = LabelsPage {
        title: "labels".into(),
        root: root(1),
        rows: Label::ALL
            .iter()
            .map(|&l| LabelIndexRow {
                label: l.as_str(),
                meaning: l.meaning(),
                retry: l.retry().as_str(),
                count: totals.get(&l).copied().unwrap_or(0),
            })
            .collect(),
    };
    Ok(("labels/index.html".into(), render("labels index", &page)?))
}
