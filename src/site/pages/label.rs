//! `labels/<label>.html` and their index: where each label occurs, a few example transcripts per
//! cell, what its retry class means, and what each row's failures with it measured when retried
//! (SPEC §11).

use super::{render, routing};
use crate::hitec::HitecError;
use crate::report::routing::Routing;
use crate::site::html::root;
use crate::site::matrix::cell_href;
use crate::site::{GroupKeys, Sink, SiteError, SiteInput};
use crate::taxonomy::{Label, Outcome};
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

fn retry_meaning(r: crate::taxonomy::Retry) -> &'static str {
    match r {
        crate::taxonomy::Retry::Reroll => {
            "a sampling artifact: asking the same model again is reasonable"
        }
        crate::taxonomy::Retry::Fallback => "a capability gap: send the request to another model",
        crate::taxonomy::Retry::Repair => "mechanically fixable by the caller",
    }
}

/// The label pages, each handed to `sink` as it is drawn (or left as it is: [`crate::site::reuse`]), and
/// their index.
pub fn pages(
    input: &SiteInput,
    keys: GroupKeys,
    routing_of: &Routing,
    sink: Sink,
) -> Result<(), SiteError> {
    let m = input.matrix;
    let r = root(1);
    let mut totals: BTreeMap<Label, u64> = BTreeMap::new();
    for c in m.cells.values() {
        for (&l, &count) in &c.labels {
            *totals.entry(l).or_default() += count;
        }
    }
    // Each label's page is drawn on its own core, unless the site being updated holds it as
    // drawn from the same cells and routing evidence.
    Label::ALL.par_iter().try_for_each(|&l| {
        let actions = routing::label_actions(routing_of, l);
        let key = keys.map(|(g, k)| (*g, routing::label_key(k.label(input, l), &actions)));
        if key.is_some_and(|(g, k)| g.keep(&label_group(l), &k)) {
            return Ok(());
        }
        // model → the cells with the label, in model and task order. Only the first
        // MAX_LABEL_EXAMPLES samples of each cell are kept: the page grows with cells, not
        // samples.
        let mut by_model: BTreeMap<&str, Vec<LabelCell>> = BTreeMap::new();
        for c in m.cells.values() {
            let Some(&count) = c.labels.get(&l) else {
                continue;
            };
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
            by_model
                .entry(c.model.as_str())
                .or_default()
                .push(LabelCell {
                    task: c.task.clone(),
                    cell: cell_href(m, &c.model, &c.task),
                    count,
                    scored: c.scored,
                    more: count - examples.len() as u64,
                    examples,
                    detail,
                });
        }
        let groups: Vec<LabelGroup> = by_model
            .into_iter()
            .map(|(model, cells)| LabelGroup {
                model: model.to_string(),
                count: cells.iter().map(|c| c.count).sum(),
                cells,
            })
            .collect();
        let total: u64 = groups.iter().map(|g| g.count).sum();
        let n_cells = groups.iter().map(|g| g.cells.len()).sum();
        let hitec = HitecError::ALL
            .iter()
            .filter(|h| h.labels().contains(l.as_str()))
            .map(|h| format!("type {} (\u{201c}{}\u{201d})", h.number(), h.name()))
            .collect::<Vec<_>>()
            .join("; ");
        let page = LabelPage {
            title: format!("label {l}"),
            root: r.clone(),
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
            groups,
            total,
            n_cells,
            max_examples: MAX_LABEL_EXAMPLES,
        };
        let path = format!("labels/{l}.html");
        if let Some((g, key)) = key {
            g.drawn(&label_group(l), key, vec![path.clone()]);
        }
        sink((path, render("label page", &page)?))
    })?;
    let index_rows = Label::ALL
        .iter()
        .map(|&l| LabelIndexRow {
            label: l.as_str(),
            meaning: l.meaning(),
            retry: l.retry().as_str(),
            count: totals.get(&l).copied().unwrap_or(0),
        })
        .collect();
    let page = LabelsPage {
        title: "labels".into(),
        root: r,
        rows: index_rows,
    };
    sink(("labels/index.html".into(), render("labels index", &page)?))
}

/// The name of a label page's group ([`crate::site::reuse`]).
fn label_group(l: Label) -> String {
    format!("label {l}")
}
