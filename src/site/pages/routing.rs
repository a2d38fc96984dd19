//! `routing.html` (SPEC §11): the measured retry semantics per row and label, and which of the
//! router's policies wins per row and per tag, at what cost; and the measured actions a label's
//! page shows. Pure: a [`Routing`] in, bytes out. Its numbers are `data/routing.json`
//! ([`crate::site::data::routing_json`]).

use crate::report::review::ReviewRow;
use crate::report::routing::{
    Action, Decision, FeedbackMeasure, LabelRouting, Measure, ModelRouting, Policy, PolicyResult,
    Routing, Trigger,
};
use crate::runs::{FeedbackStyle, History};
use crate::site::charts::{self, PlanePoint};
use crate::site::{File, SiteError};
use crate::stats::interval::{Interval, percent, points, round4, show};
use crate::taxonomy::Label;
use askama::Template;

/// The page's path, from the site root.
const PAGE: &str = "routing.html";
/// One unit of a figure that a table cell must not break (`67 %`, `[21–94 %]`, `1.15 req`):
/// its spaces no-break spaces, and a word joiner after an en dash (a line may otherwise break
/// after one). A cell then wraps only between units, never inside an interval.
fn unit(s: &str) -> String {
    s.replace(' ', "\u{a0}").replace('–', "–\u{2060}")
}

/// A row's name inside a figure (`→ mock-good`): kept whole, its hyphens not break points.
fn row_name(name: &str) -> String {
    name.replace('-', "-\u{2060}")
}

/// A rate with its interval for the page: `67 % [21–94 %]`, or `–` when nothing was measured.
fn rate_text(rate: Option<f64>, iv: Option<&Interval>) -> String {
    match (rate, iv) {
        (Some(r), Some(iv)) => format!("{} {}", unit(&percent(r)), unit(&show(iv))),
        _ => "–".into(),
    }
}

pub(crate) fn measure_text(m: &Measure) -> String {
    if m.n == 0 {
        return "–".into();
    }
    format!(
        "{}/{}\u{a0}=\u{a0}{}",
        m.passes,
        m.n,
        rate_text(m.rate(), m.interval.as_ref())
    )
}

/// A follow-up measure with its refusals: `3/10 = 30 % [7–65 %]; refused 5 × HTTP 500`.
fn feedback_text(f: &FeedbackMeasure) -> String {
    let mut s = measure_text(&f.measure);
    if f.refused_total() > 0 {
        let by: Vec<String> = f
            .refused
            .iter()
            .map(|(status, n)| match status {
                Some(st) => format!("{n}\u{a0}×\u{a0}HTTP\u{a0}{st}"),
                None => format!("{n}\u{a0}without a response"),
            })
            .collect();
        s.push_str(&format!("; refused {}", by.join(", ")));
    }
    s
}

/// The feedback columns of a row's table: each style and history the row was followed up
/// with, in order (none for a row without a feedback round: a column of dashes per style said
/// nothing, at a kilobyte a row).
fn feedback_columns(mr: &ModelRouting) -> Vec<(FeedbackStyle, History)> {
    let mut cols: Vec<(FeedbackStyle, History)> = mr
        .labels
        .iter()
        .flat_map(|l| l.feedback.keys().copied())
        .collect();
    cols.sort();
    cols.dedup();
    cols
}

/// A column's heading: the style, and the history when it is not the default.
fn column_name((style, history): (FeedbackStyle, History)) -> String {
    match history {
        History::AsProduced => style.as_str().to_string(),
        h => format!("{} ({})", style.as_str(), h.as_str()),
    }
}

/// One policy's cell on the page.
struct PolicyCell {
    policy: &'static str,
    success: String,
    /// The same counting every request, one with no usable answer a visible failure.
    end_to_end: String,
    cost: String,
    wins: bool,
}

/// A policy's cost per call, short (the page holds one per row, policy and tag): requests,
/// prompt + completion tokens, and the call's time at its median and 95th percentile.
fn cost_text(p: &PolicyResult) -> String {
    let mut s = format!("{:.2}\u{a0}req", round4(p.requests));
    match (p.prompt_tokens, p.tokens) {
        (Some(i), Some(o)) => {
            s.push_str(&format!(" · {:.0}+{:.0}\u{a0}tok", round4(i), round4(o)));
        }
        (None, Some(o)) => s.push_str(&format!(" · {:.0}\u{a0}tok", round4(o))),
        _ => {}
    }
    if let (Some(p50), Some(p95)) = (p.latency_p50, p.latency_p95) {
        s.push_str(&format!(" · {:.0}/{:.0}\u{a0}ms", round4(p50), round4(p95)));
    }
    if let Some(c) = p.cost {
        s.push_str(&format!(" · {:.4} per 1000 successes", round4(c * 1000.0)));
    }
    s
}

fn policy_cells(ps: &[PolicyResult], decision: Option<&Decision>) -> Vec<PolicyCell> {
    let winner = decision.and_then(Decision::winner);
    ps.iter()
        .map(|p| PolicyCell {
            policy: p.policy.as_str(),
            success: match (&p.fallback_to, p.policy) {
                (Some(b), Policy::Fallback) => {
                    format!(
                        "{} → {}",
                        rate_text(p.rate, p.interval.as_ref()),
                        row_name(b)
                    )
                }
                _ => rate_text(p.rate, p.interval.as_ref()),
            },
            end_to_end: rate_text(p.end_to_end, p.end_to_end_interval.as_ref()),
            cost: cost_text(p),
            wins: Some(p.policy) == winner,
        })
        .collect()
}

struct RowView {
    /// The row's feedback columns.
    styles: Vec<String>,
    model: String,
    anchor: String,
    tasks: u64,
    /// Whether a policy wins, in words.
    verdict: String,
    /// What `best` does after each visible failure.
    router: Vec<RouterRow>,
    /// The cost–quality plane's file, from the site root.
    plane: Option<String>,
    policies: Vec<PolicyCell>,
    labels: Vec<LabelView>,
    tags: Vec<TagView>,
    parent_passes: u64,
    orphans: u64,
    feedback_samples: u64,
    feedback_errors: u64,
    silent_parents: u64,
    /// The share of the row's failures a router cannot see, in words.
    silent_share: String,
}

/// One chain of a row's `best` router, in words (`fallback → b, then reroll`), and the
/// triggers it follows.
struct RouterRow {
    triggers: Vec<String>,
    chain: String,
}

struct TagView {
    tag: String,
    /// Whether `winner` names one (else it says "no clear winner").
    clear: bool,
    winner: String,
    /// The winner's (or the leader's) success and requests per call.
    success: String,
    single: String,
}

#[derive(Debug)]
pub(crate) struct LabelView {
    label: &'static str,
    default: &'static str,
    pub(crate) failures: u64,
    /// Those a router could see: the only ones any action follows.
    pub(crate) visible: u64,
    pub(crate) reroll: String,
    pub(crate) repair: String,
    pub(crate) feedback: Vec<String>,
    pub(crate) fallback: String,
    /// The row (on label pages, where rows are listed per label).
    pub(crate) model: String,
}

#[derive(Template)]
#[template(path = "routing.html")]
struct RoutingPage {
    title: String,
    root: String,

    policies: Vec<(&'static str, &'static str)>,
    rows: Vec<RowView>,
    parent_passes: u64,
    /// The review section, drawn by [`super::routing_review`]; empty without a review round.
    review: String,
}

/// A decision in words: the winner, clearly ahead of the runner-up, or "no clear winner".
fn verdict(d: Option<&Decision>) -> String {
    let Some(d) = d else {
        return "No policy measured.".into();
    };
    let diff = d.difference.map_or(String::new(), |(x, iv)| {
        format!(
            " by {} points {}",
            unit(&points(x)),
            unit(&format!("[{} to {}]", points(iv.lower), points(iv.upper)))
        )
    });
    match (d.winner(), d.runner_up) {
        (Some(w), Some(r)) => format!(
            "{} wins: ahead of {}{diff}, an interval that excludes 0.",
            w.as_str(),
            r.as_str()
        ),
        (_, Some(r)) => format!(
            "No clear winner: {} leads {}{diff}, an interval that holds 0.",
            d.leader.as_str(),
            r.as_str()
        ),
        _ => format!(
            "No clear winner: {} is the only measured policy.",
            d.leader.as_str()
        ),
    }
}

/// An action in words, for the router table; `names` are the matrix's rows in order.
fn action_text(a: Action, names: &[&str]) -> String {
    match a {
        Action::Reroll => "reroll".into(),
        Action::Repair => "repair".into(),
        Action::Feedback { style, history } => {
            format!("feedback ({}, {})", style.as_str(), history.as_str())
        }
        Action::Fallback(b) => format!(
            "fallback → {}",
            row_name(names.get(b).copied().unwrap_or("?"))
        ),
    }
}

/// The row's `best` router, its triggers grouped by the chain they take (in the order the
/// chains first come).
fn router_rows(mr: &ModelRouting, names: &[&str]) -> Vec<RouterRow> {
    let mut out: Vec<RouterRow> = Vec::new();
    let each = mr.router.entries().map(|(t, c)| {
        let mut chain = action_text(c.chain.first, names);
        if let Some(then) = c.chain.then {
            chain.push_str(", then ");
            chain.push_str(&action_text(then, names));
        }
        let trigger = match t {
            Some(Trigger::Failed(l)) => l.as_str().to_string(),
            Some(Trigger::Transport) => "no usable answer".into(),
            None => "any other visible label".into(),
        };
        (trigger, chain)
    });
    for (trigger, chain) in each {
        match out.iter_mut().find(|r| r.chain == chain) {
            Some(r) => r.triggers.push(trigger),
            None => out.push(RouterRow {
                triggers: vec![trigger],
                chain,
            }),
        }
    }
    out
}

/// How the plane measures a policy's cost per call.
#[derive(Clone, Copy)]
enum CostAxis {
    Price(crate::report::routing::Price),
    Tokens,
    Requests,
}

impl CostAxis {
    fn unit(self) -> &'static str {
        match self {
            CostAxis::Price(_) => "price",
            CostAxis::Tokens => "tokens",
            CostAxis::Requests => "requests",
        }
    }

    fn of(self, requests: f64, prompt: Option<f64>, completion: Option<f64>) -> f64 {
        let (i, o) = (prompt.unwrap_or(0.0), completion.unwrap_or(0.0));
        match self {
            CostAxis::Price(p) => p.of(i, o),
            CostAxis::Tokens => i + o,
            CostAxis::Requests => requests,
        }
    }
}

/// A row's cost–quality plane: its policies end to end against their cost per call (priced
/// when every policy is, else tokens when every policy reported them, else requests), the
/// oracle as the ceiling. `None` without a policy measured end to end.
fn plane(mr: &ModelRouting, r: &Routing) -> Option<(String, Vec<u8>)> {
    let measured: Vec<&PolicyResult> = mr
        .policies
        .iter()
        .filter(|p| p.end_to_end.is_some())
        .collect();
    if measured.is_empty() {
        return None;
    }
    let tokens = measured
        .iter()
        .all(|p| p.prompt_tokens.is_some() && p.tokens.is_some());
    // A fallback's tokens are the other row's, at its price: priced only when every policy is.
    let axis = match r.prices.get(&mr.model) {
        Some(&p) if tokens && measured.iter().all(|x| x.cost.is_some()) => CostAxis::Price(p),
        _ if tokens => CostAxis::Tokens,
        _ => CostAxis::Requests,
    };
    let points: Vec<PlanePoint> = measured
        .iter()
        .map(|p| PlanePoint {
            name: p.policy.as_str().to_string(),
            cost: axis.of(p.requests, p.prompt_tokens, p.tokens),
            success: p.end_to_end.unwrap_or(0.0),
            interval: p.end_to_end_interval,
        })
        .collect();
    let oracle = mr.oracle.map(|o| {
        (
            axis.of(o.requests, o.prompt_tokens, o.completion_tokens),
            o.end_to_end,
        )
    });
    let file = format!("charts/routing/{}.plane.svg", mr.model);
    let svg = charts::plane(
        &format!("{}: success end to end against cost per call", mr.model),
        &points,
        oracle,
        axis.unit(),
    )
    .ok()?;
    Some((file, svg.into_bytes()))
}

/// The anchor of a row's section on the routing page (model pages link it).
pub(crate) fn anchor(model: &str) -> String {
    format!("m-{model}")
}

/// `routing.html` and its cost–quality planes. `names` are the matrix's rows in order (what a
/// fallback's index points at); `reviews`, the review round of each reviewed row.
pub(crate) fn page(
    r: &Routing,
    names: &[&str],
    reviews: &[ReviewRow],
) -> Result<Vec<File>, SiteError> {
    let mut files = Vec::new();
    let rows = r
        .models
        .iter()
        .map(|mr| (mr, feedback_columns(mr)))
        .map(|(mr, columns)| RowView {
            styles: columns.iter().map(|&c| column_name(c)).collect(),
            model: mr.model.clone(),
            anchor: anchor(&mr.model),
            tasks: mr.policies.first().map_or(0, |p| p.tasks),
            verdict: verdict(mr.decision.as_ref()),
            router: router_rows(mr, names),
            plane: plane(mr, r).map(|(path, svg)| {
                files.push((path.clone(), svg));
                path
            }),
            policies: policy_cells(&mr.policies, mr.decision.as_ref()),
            labels: mr
                .labels
                .iter()
                .map(|l| label_view(&mr.model, l, &columns))
                .collect(),
            tags: mr
                .by_tag
                .iter()
                .filter_map(|(tag, ps)| {
                    let w = ModelRouting::leader(ps)?;
                    let clear = mr.tag_decisions.get(tag).and_then(Decision::winner);
                    Some(TagView {
                        tag: tag.clone(),
                        clear: clear.is_some(),
                        winner: match clear {
                            Some(p) => p.as_str().to_string(),
                            None => format!("no clear winner ({} leads)", w.policy.as_str()),
                        },
                        success: format!(
                            "{} · {:.2}\u{a0}req",
                            rate_text(w.rate, w.interval.as_ref()),
                            round4(w.requests)
                        ),
                        single: ps
                            .first()
                            .map_or("–".into(), |s| rate_text(s.rate, s.interval.as_ref())),
                    })
                })
                .collect(),
            parent_passes: mr.parent_passes,
            orphans: mr.orphans,
            feedback_samples: mr.feedback_samples,
            feedback_errors: mr.feedback_errors,
            silent_parents: mr.silent_parents,
            silent_share: silent_share(mr),
        })
        .collect();
    let page = RoutingPage {
        title: "routing".into(),
        root: String::new(),
        policies: Policy::ALL
            .iter()
            .map(|p| (p.as_str(), p.describe()))
            .collect(),
        rows,
        parent_passes: r.parent_passes(),
        review: super::routing_review::section(reviews)?,
    };
    let html = super::carded(
        "routing page",
        &page,
        "Routing: what to do after each failure",
        "Per row and label, how often a reroll, a repair, feedback and a fallback made the call pass, and the router's policies with their expected success and cost.",
        PAGE,
        None,
    )?;
    files.push((PAGE.into(), html));
    Ok(files)
}

/// What share of a row's failures a router cannot see (SPEC §11), in words: the case for a
/// better model or a verifier, not for retries.
pub(crate) fn silent_share(mr: &ModelRouting) -> String {
    if mr.failures == 0 {
        return "No failure".into();
    }
    let silent = mr.failures - mr.visible;
    format!(
        "{silent} of {} failure{} ({}) a router cannot see: it takes them for answers, and no policy acts on them",
        mr.failures,
        if mr.failures == 1 { "" } else { "s" },
        percent(silent as f64 / mr.failures as f64)
    )
}

fn label_view(model: &str, l: &LabelRouting, columns: &[(FeedbackStyle, History)]) -> LabelView {
    LabelView {
        label: l.label.as_str(),
        default: l.label.retry().as_str(),
        failures: l.failures,
        visible: l.visible,
        reroll: measure_text(&l.reroll),
        repair: l
            .repair
            .as_ref()
            .map_or_else(|| "none".into(), measure_text),
        feedback: columns
            .iter()
            .map(|c| l.feedback.get(c).map_or("–".into(), feedback_text))
            .collect(),
        fallback: l
            .fallback
            .iter()
            .filter(|(_, x)| x.n > 0)
            .max_by(|a, b| {
                let (ra, rb) = (a.1.rate().unwrap_or(0.0), b.1.rate().unwrap_or(0.0));
                ra.total_cmp(&rb).then(b.0.cmp(&a.0))
            })
            .map_or("–".into(), |(b, x)| {
                format!("{}: {}", row_name(b), measure_text(x))
            }),
        model: model.to_string(),
    }
}

/// A label page's table: per row that failed with `label`, its four measured actions.
pub(crate) fn label_actions(r: &Routing, label: Label) -> Vec<LabelView> {
    r.models
        .iter()
        .filter_map(|mr| {
            let l = mr.labels.iter().find(|l| l.label == label)?;
            // The label page's columns are the three styles, as frameworks send the history.
            let columns = FeedbackStyle::ALL.map(|s| (s, History::AsProduced));
            Some(label_view(&mr.model, l, &columns))
        })
        .collect()
}

/// A label page's group key ([`crate::site::reuse`]) extended with its measured actions: they
/// depend on other rows' cells (fallback) and on feedback runs, not only on the label's cells.
pub(crate) fn label_key(
    key: crate::site::reuse::Key,
    actions: &[LabelView],
) -> crate::site::reuse::Key {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(key);
    h.update(format!("{actions:?}").as_bytes());
    h.finalize().into()
}
