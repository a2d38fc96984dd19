//! Value accuracy and BFCL-style accuracy on the task, tag and model pages: per cell with the
//! build's interval, pooled with the by-task interval, only where a task reports them.

use super::html::escape;
use super::matrix::{fill, pooled_td};
use super::text::rate_text;
use crate::json::preview;
use crate::report::pooled::Pooled;
use crate::report::{Cell, Matrix, ValuePooled};
use crate::stats::Thresholds;
use crate::stats::interval::{Interval, interval};
use crate::task::{Accept, Rule};
use std::collections::BTreeMap;

/// Value accuracy in one sentence (after its name), for a reader who knows BFCL's leaderboard.
pub(crate) const VALUE_MEANING: &str = "of the samples that passed conformance, the share whose \
argument values are among the answers the task accepts — on BFCL's questions matched with \
BFCL's own checker rules (strings without case, spaces or ,./-_*^; an integer for a float; an \
optional parameter left out) — reported beside the label, never changing it.";

/// BFCL-style accuracy in one sentence (after its name).
pub(crate) const BFCL_STYLE_MEANING: &str = "the share of all scored samples that pass conformance \
and match a value (a question that expects no call, or any call, only has to pass), so no_call, \
malformed_json and every other label count as wrong, as BFCL counts them: the number to hold \
against BFCL's leaderboard, which asks each question once and reports a bare percentage, where \
here each rate carries its 95 % interval over the k samples.";

/// `<td>` graded by `iv`, holding `text` and an optional note; sorted by the rate.
fn td(count: u64, of: u64, iv: Option<&Interval>, note: &str, out: &mut String) {
    let rate = if of == 0 {
        -1.0
    } else {
        count as f64 / of as f64
    };
    out.push_str("<td class=\"iv\"");
    out.push_str(&fill(iv));
    out.push_str(&format!(" data-v=\"{rate:.4}\">"));
    out.push_str(&escape(&rate_text(count, of, iv)));
    if !note.is_empty() {
        out.push_str("<br><small>");
        out.push_str(&escape(note));
        out.push_str("</small>");
    }
    out.push_str("</td>");
}

/// A cell's value accuracy and BFCL-style accuracy as two `<td>`s, each `x/n · rate
/// [lo–hi %]` with the build's interval method over the cell's samples.
pub(crate) fn cell_tds(m: &Matrix, c: &Cell, out: &mut String) {
    if c.value_compared == 0 {
        out.push_str(
            "<td class=\"none\" data-v=\"-1\">– no passing sample with a value to compare</td>",
        );
    } else {
        let iv = interval(m.method, c.value_matches, c.value_compared);
        td(c.value_matches, c.value_compared, iv.as_ref(), "", out);
    }
    let correct = c.bfcl_style_correct();
    let iv = interval(m.method, correct, c.scored);
    td(correct, c.scored, iv.as_ref(), "", out);
}

/// A pooled proportion as a `<td>`, its interval by task, with the number of tasks it covers.
fn pooled_value_td(p: &Pooled, out: &mut String) {
    if p.tasks == 0 {
        out.push_str(
            "<td class=\"none\" data-v=\"-1\">– no passing sample with a value to compare</td>",
        );
        return;
    }
    let note = format!(
        "{} task{}{}",
        p.tasks,
        if p.tasks == 1 { "" } else { "s" },
        // With unequal task sizes the estimate (about these tasks, each weighing the same) is
        // the mean of the tasks' rates, not the ratio shown first; the interval is about it.
        if p.deff > 1.0 {
            format!(
                " · mean over the tasks {} · design effect {:.2}",
                crate::stats::interval::percent(p.task_mean),
                p.deff
            )
        } else {
            String::new()
        }
    );
    td(p.passes, p.scored, p.interval.as_ref(), &note, out);
}

/// One row of a value table: a model (tag page) or a tag (model page).
pub(crate) struct ValueRow {
    pub(crate) name: String,
    pub(crate) link: String,
    /// Tasks pooled: those of the model × tag that report values.
    pub(crate) tasks: u64,
    /// Pre-rendered `<td>`s: conformance over the same tasks, value accuracy, BFCL-style.
    pub(crate) tds: String,
}

/// The value table's row for one set of pooled cells.
pub(crate) fn row(at: Thresholds, name: String, link: String, v: &ValuePooled) -> ValueRow {
    let mut tds = String::new();
    pooled_td(at, &v.conformance, "", &mut tds);
    pooled_value_td(&v.value, &mut tds);
    pooled_value_td(&v.bfcl_style, &mut tds);
    ValueRow {
        name,
        link,
        tasks: v.conformance.tasks,
        tds,
    }
}

/// What an expected call's `accept` lists, one line per parameter: `city: "Paris" or "Paris,
/// France" (BFCL's rule)`, `unit: "celsius", or left out`. Each value is clipped for the page.
pub(crate) fn accept_lines(accept: &BTreeMap<String, Accept>) -> Vec<String> {
    accept
        .iter()
        .map(|(name, a)| {
            let mut values: Vec<String> = a.values.iter().map(|v| preview(v, 120)).collect();
            if a.omit {
                values.push("left out".into());
            }
            let rule = match a.rule {
                Rule::Exact => "",
                Rule::Bfcl => " (BFCL's rule)",
            };
            format!("{name}: {}{rule}", values.join(" or "))
        })
        .collect()
}
