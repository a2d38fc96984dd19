//! The review section of `routing.html` (SPEC §11, HiTEC-ICL's second round): per reviewed row
//! and tag, the final success after a review of every answer beside the first round's, what the
//! review fixed, broke and was refused, its cost against the first round alone, and whether it
//! helped on these tasks, in words; every broken pair linked. Rendered apart from the routing
//! page's own template and set into it whole, so that the page's other sections are untouched
//! by it. Its numbers are `data/routing.json`'s `review` ([`crate::report::review`]).

use crate::report::review::{CallCost, ReviewMeasure, ReviewRow, Verdict};
use crate::site::SiteError;
use crate::stats::interval::{Interval, percent, points, round4, show};
use askama::Template;

/// A rate with its interval: `67 % [21–94 %]` (no-break spaces: a table cell wraps between
/// figures, never inside one), or `–`.
fn rate(r: Option<f64>, iv: Option<&Interval>) -> String {
    match (r, iv) {
        (Some(r), Some(iv)) => format!("{} {}", percent(r), show(iv)).replace(' ', "\u{a0}"),
        _ => "–".into(),
    }
}

/// The paired difference: `+4.2 points [+1.0, +8.1]`, or `–`.
fn difference(x: &ReviewMeasure) -> String {
    match (x.difference, &x.difference_interval) {
        (Some(d), Some(iv)) => format!(
            "{}\u{a0}points [{},\u{a0}{}]",
            points(d),
            points(iv.lower),
            points(iv.upper)
        ),
        _ => "–".into(),
    }
}

/// `3 × HTTP 500, 1 without a response`, or `0`.
fn refused(x: &ReviewMeasure) -> String {
    if x.refused.is_empty() {
        return "0".into();
    }
    x.refused
        .iter()
        .map(|(status, n)| match status {
            Some(st) => format!("{n}\u{a0}×\u{a0}HTTP\u{a0}{st}"),
            None => format!("{n} without a response"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A call's cost: `2.00 req · 843 prompt tok · 142 tok · 3,741 ms`.
fn cost(c: &CallCost) -> String {
    let mut s = format!("{:.2}\u{a0}req", round4(c.requests));
    if let Some(t) = c.prompt_tokens {
        s.push_str(&format!(" · {:.0}\u{a0}prompt\u{a0}tok", round4(t)));
    }
    if let Some(t) = c.completion_tokens {
        s.push_str(&format!(" · {:.0}\u{a0}tok", round4(t)));
    }
    if let Some(l) = c.latency_ms {
        s.push_str(&format!(" · {:.0}\u{a0}ms", round4(l)));
    }
    s
}

/// `2.9×`, the review's figure over the first round's, when both are known and the latter is
/// not 0.
fn times(review: Option<f64>, single: Option<f64>) -> Option<String> {
    let (r, s) = (review?, single?);
    (s > 0.0).then(|| format!("{:.1}×", round4(r / s)))
}

/// The row's verdict in one line (under the row's heading): what the review did on these tasks
/// and at what price.
fn verdict_line(x: &ReviewMeasure) -> String {
    let what = match x.verdict {
        Some(Verdict::Helped) => "helped",
        Some(Verdict::Hurt) => "hurt",
        Some(Verdict::NoClearDifference) | None => "made no clear difference",
    };
    let mut price = Vec::new();
    if let Some(t) = times(Some(x.with_review.requests), Some(x.single.requests)) {
        price.push(format!("{t} the requests"));
    }
    if let Some(t) = times(x.with_review.prompt_tokens, x.single.prompt_tokens) {
        price.push(format!("{t} the prompt tokens"));
    }
    if let Some(t) = times(x.with_review.latency_ms, x.single.latency_ms) {
        price.push(format!("{t} the time"));
    }
    let price = if price.is_empty() {
        String::new()
    } else {
        format!(", at {} of a call without it", price.join(", "))
    };
    format!(
        "The review {what} on these {} task{} ({}, review − first), fixing {} and breaking {} of {} calls{}",
        x.tasks,
        if x.tasks == 1 { "" } else { "s" },
        difference(x),
        x.fixed,
        x.broken,
        x.parents,
        price
    )
}

/// One row of a review table: a row over all its tasks, or over one tag.
struct ReviewLine {
    scope: String,
    tasks: u64,
    first: String,
    last: String,
    fixed: u64,
    broken: u64,
    refused: String,
    difference: String,
    verdict: &'static str,
}

fn line(scope: &str, x: &ReviewMeasure) -> ReviewLine {
    ReviewLine {
        scope: scope.to_string(),
        tasks: x.tasks,
        first: rate(x.first, x.first_interval.as_ref()),
        last: rate(x.rate, x.interval.as_ref()),
        fixed: x.fixed,
        broken: x.broken,
        refused: refused(x),
        difference: difference(x),
        verdict: x.verdict.map_or("–", Verdict::as_str),
    }
}

/// A broken pair's two links: the first answer, which passed, and its review, which failed.
struct PairLinks {
    task: String,
    first: String,
    first_name: String,
    review: String,
    review_name: String,
}

struct RowReview {
    model: String,
    verdict: String,
    overall: ReviewLine,
    single: String,
    with_review: String,
    tags: Vec<ReviewLine>,
    broken: Vec<PairLinks>,
    orphans: u64,
}

#[derive(Template)]
#[template(path = "routing_review.html")]
struct ReviewSection {
    rows: Vec<RowReview>,
}

/// The section's HTML, or nothing when no row has a review round.
pub(crate) fn section(reviews: &[ReviewRow]) -> Result<String, SiteError> {
    if reviews.is_empty() {
        return Ok(String::new());
    }
    let rows = reviews
        .iter()
        .map(|rv| RowReview {
            model: rv.model.clone(),
            verdict: verdict_line(&rv.overall),
            overall: line("all tasks", &rv.overall),
            single: cost(&rv.overall.single),
            with_review: cost(&rv.overall.with_review),
            tags: rv.by_tag.iter().map(|(t, x)| line(t, x)).collect(),
            broken: rv
                .overall
                .broken_pairs
                .iter()
                .map(|p| PairLinks {
                    task: p.first.task.clone(),
                    first: p.first.section(false),
                    first_name: format!("{}/{}", p.first.run, p.first.sample),
                    review: p.review.section(true),
                    review_name: format!("{}/{}", p.review.run, p.review.sample),
                })
                .collect(),
            orphans: rv.orphans,
        })
        .collect();
    ReviewSection { rows }
        .render()
        .map_err(|source| SiteError::Template {
            page: "routing page's review section".into(),
            source,
        })
}
