//! The files of `data/` (documented in docs/data.md): `data/matrix.json`, `data/routing.json`,
//! `data/compare.json`, `data/samples.csv` (or one file per model) and `data/manifest.json`;
//! and reading a previous build's `samples.csv` to say what changed. Pure serialisers,
//! hyperfine-style: data in, bytes out. (`data/samples.js` is the triage page's own encoding:
//! [`super::pages::samples`].)

use crate::compare::Comparison;
use crate::evidence::{SkippedInput, samples_csv};
use crate::hitec::{F1, HitecError};
use crate::report::pooled::Pooled;
use crate::report::review::{CallCost, ReviewMeasure, ReviewRow};
use crate::report::routing::{
    Action, Chain, Chosen, Decision, Measure, PolicyResult, Routing, Trigger,
};
use crate::report::{Cell, Matrix, ModelView, Scored, Total, ValuePooled};
use crate::stats::compare::{CELL_METHOD, GATE_METHOD, POOLED_METHOD};
use crate::stats::interval::{Interval, round4};
use crate::stats::{Reliability, Thresholds};
use crate::taxonomy::{Label, Outcome};
use rayon::prelude::*;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The sources of the scoring rules, embedded at compile time: their hash in the manifest says
/// which checkers labelled a site, so two sites with the same hash and inputs are comparable.
const RULES: &[(&str, &str)] = &[
    ("src/score/mod.rs", include_str!("../score/mod.rs")),
    ("src/score/extract.rs", include_str!("../score/extract.rs")),
    ("src/score/repair.rs", include_str!("../score/repair.rs")),
    ("src/score/schema.rs", include_str!("../score/schema.rs")),
    ("src/score/wire.rs", include_str!("../score/wire.rs")),
    // Predicates decide labels at the semantic stage (roundtrip above all).
    (
        "src/task/predicate.rs",
        include_str!("../task/predicate.rs"),
    ),
    ("src/taxonomy.rs", include_str!("../taxonomy.rs")),
];

/// sha256 over the scoring rules' sources (each as its path, a NUL, its length, a NUL, its text).
pub(crate) fn rules_sha256() -> String {
    let mut all = Vec::new();
    for (path, text) in RULES {
        all.extend_from_slice(path.as_bytes());
        all.push(0);
        all.extend_from_slice(text.len().to_string().as_bytes());
        all.push(0);
        all.extend_from_slice(text.as_bytes());
    }
    crate::task::sha256_hex(&all)
}

fn num(x: f64) -> Value {
    serde_json::Number::from_f64(round4(x))
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// `x` to four significant digits: a price per call is a few millionths, which four
/// decimals would round away.
fn significant(x: f64) -> Value {
    format!("{x:.3e}")
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

fn opt_num(x: Option<f64>) -> Value {
    x.map(num).unwrap_or(Value::Null)
}

/// An interval's bounds, `{"lower", "upper"}`, or null without an interval.
fn bounds(iv: Option<&Interval>) -> Value {
    iv.map_or(
        Value::Null,
        |iv| json!({"lower": num(iv.lower), "upper": num(iv.upper)}),
    )
}

/// The objects `parts` as one, their keys in the order given: for objects that share a run of
/// keys (a model's and a tag's totals).
fn object(parts: impl IntoIterator<Item = Value>) -> Value {
    let mut all = Map::new();
    for part in parts {
        if let Value::Object(o) = part {
            all.extend(o);
        }
    }
    Value::Object(all)
}

/// A number of `data/matrix.json` written straight from its struct: rounded to four decimals
/// (the same text [`num`] gives), null when not finite.
#[derive(Clone, Copy)]
struct Num(f64);

impl serde::Serialize for Num {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let x = round4(self.0);
        if x.is_finite() {
            s.serialize_f64(x)
        } else {
            s.serialize_none()
        }
    }
}

/// An interval's bounds.
#[derive(serde::Serialize)]
struct Bounds {
    lower: Num,
    upper: Num,
}

impl Bounds {
    fn of(iv: &crate::stats::interval::Interval) -> Bounds {
        Bounds {
            lower: Num(iv.lower),
            upper: Num(iv.upper),
        }
    }
}

/// `{"count", "of", "rate", "interval"}` with the build's interval method; `rate` and
/// `interval` are null when `of` is 0.
#[derive(serde::Serialize)]
struct RateWithInterval {
    count: u64,
    of: u64,
    rate: Option<Num>,
    interval: Option<Bounds>,
}

impl RateWithInterval {
    fn of(m: &Matrix, count: u64, of: u64) -> RateWithInterval {
        let iv = crate::stats::interval::interval(m.method, count, of);
        RateWithInterval {
            count,
            of,
            rate: (of != 0).then(|| Num(count as f64 / of as f64)),
            interval: iv.as_ref().map(Bounds::of),
        }
    }
}

/// A pooled rate whose interval takes the task as its unit (report::pooled).
fn pooled_json(p: &Pooled, at: Thresholds) -> Value {
    json!({
        "unit": "task",
        "tasks": p.tasks, "scored": p.scored, "passes": p.passes,
        "rate": opt_num(p.rate()),
        "design_effect": num(p.deff),
        "interval": bounds(p.interval.as_ref()),
        "verdict": p.reliability(at).as_str(),
        "all_passed_cells": p.all_passed,
        "flaky_cells": p.flaky,
    })
}

/// Value accuracy and BFCL-style accuracy pooled by task over the tasks that report them, with
/// the conformance rate over the same tasks (report::ValuePooled).
fn values_json(v: &ValuePooled, at: Thresholds) -> Value {
    let part = |p: &Pooled| {
        json!({
            "unit": "task",
            "tasks": p.tasks, "count": p.passes, "of": p.scored,
            "rate": opt_num(p.rate()),
            "design_effect": num(p.deff),
            "interval": bounds(p.interval.as_ref()),
        })
    };
    json!({
        "conformance": pooled_json(&v.conformance, at),
        "value_accuracy": part(&v.value),
        "bfcl_style": part(&v.bfcl_style),
    })
}

/// One cell of `data/matrix.json`, in the order its fields are written (docs/data.md).
#[derive(serde::Serialize)]
struct CellJson<'a> {
    model: &'a str,
    task: &'a str,
    tags: &'a [String],
    runs: &'a [String],
    k: u64,
    scored: u64,
    passes: u64,
    errors: u64,
    rate: Option<Num>,
    interval: Option<Bounds>,
    verdict: &'static str,
    flaky: bool,
    all_passed: bool,
    value_matches: u64,
    value_compared: u64,
    value_accuracy: RateWithInterval,
    bfcl_style: RateWithInterval,
    task_changed: bool,
    distinct_responses: u64,
    identical: bool,
    label_counts: LabelCounts<'a>,
}

/// A cell's label counts, as an object in label order.
struct LabelCounts<'a>(&'a BTreeMap<Label, u64>);

impl serde::Serialize for LabelCounts<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(l, n)| (l.as_str(), n)))
    }
}

fn cell_json<'a>(m: &'a Matrix, c: &'a Cell) -> CellJson<'a> {
    CellJson {
        model: &c.model,
        task: &c.task,
        tags: m
            .task(&c.task)
            .map(|t| t.tags.as_slice())
            .unwrap_or_default(),
        runs: &c.runs,
        k: c.k,
        scored: c.scored,
        passes: c.passes,
        errors: c.errors,
        rate: c.rate().map(Num),
        interval: c.interval.as_ref().map(Bounds::of),
        verdict: c.reliability.as_str(),
        flaky: c.flaky(),
        all_passed: c.all_passed(),
        value_matches: c.value_matches,
        value_compared: c.value_compared,
        value_accuracy: RateWithInterval::of(m, c.value_matches, c.value_compared),
        bfcl_style: RateWithInterval::of(m, c.bfcl_style_correct(), c.scored),
        task_changed: c.task_changed,
        distinct_responses: c.distinct_responses,
        identical: c.identical(),
        label_counts: LabelCounts(&c.labels),
    }
}

/// The cells of `data/matrix.json`, each built only while it is written: a large matrix never
/// holds every cell as a JSON tree at once.
struct Cells<'a>(&'a Matrix);

impl serde::Serialize for Cells<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.cells.len()))?;
        for c in self.0.cells.values() {
            seq.serialize_element(&cell_json(self.0, c))?;
        }
        seq.end()
    }
}

/// `data/matrix.json`.
pub(crate) fn matrix_json(m: &Matrix, routing: &Routing, skipped: &[SkippedInput]) -> Vec<u8> {
    /// The document, in the order its fields are written.
    #[derive(serde::Serialize)]
    struct Doc<'a> {
        callcheck_version: &'static str,
        interval: Value,
        verdicts: Value,
        /// `build --reliable-at`: the threshold the verdicts above were taken at.
        reliable_at: f64,
        tasks: Vec<Value>,
        models: Vec<Value>,
        cells: Cells<'a>,
        labels: Vec<Value>,
        skipped: Vec<Value>,
    }
    let doc = Doc {
        callcheck_version: env!("CARGO_PKG_VERSION"),
        interval: json!({"method": m.method.as_str(), "confidence": crate::stats::interval::CONFIDENCE}),
        verdicts: verdicts_json(m.thresholds),
        reliable_at: m.thresholds.reliable_at(),
        tasks: m
            .tasks
            .iter()
            .map(|t| json!({"id": t.id, "title": t.title, "tags": t.tags}))
            .collect(),
        models: m.models.iter().map(|mv| model_json(m, mv)).collect(),
        cells: Cells(m),
        labels: Label::ALL
            .iter()
            .map(|&l| label_json(m, routing, l))
            .collect(),
        skipped: skipped
            .iter()
            .map(|s| json!({"path": s.path, "reason": s.reason}))
            .collect(),
    };
    // Room for the whole document at once (a cell takes about 1 KB): grown by doubling, a
    // 34 MB document passed through a 32 MB copy into a 64 MB buffer. Room not written to
    // costs no memory.
    let mut out = Vec::with_capacity((m.cells.len() + m.models.len() * 8) * 1536 + (1 << 20));
    // Compact: a notebook or a router reads it, and the indentation of a pretty print was 40 %
    // of its bytes (a browser's JSON viewer lays it out for a person).
    if serde_json::to_writer(&mut out, &doc).is_err() {
        out.clear();
    }
    out.push(b'\n');
    out
}

/// What each verdict word means at the build's thresholds.
fn verdicts_json(at: Thresholds) -> Value {
    json!({
        Reliability::Reliable.as_str(): format!("interval lower bound >= {at}"),
        Reliability::Unreliable.as_str(): format!("interval upper bound < {at}"),
        Reliability::Broken.as_str(): format!("interval upper bound < {}", at.broken_below()),
        Reliability::Uncertain.as_str(): format!("the interval straddles {at}, or no scored sample"),
    })
}

/// The totals over a model's or a tag's cells (report::Total): the keys both objects share.
/// No interval or verdict of their own: one that treated every sample as independent would
/// disagree with the page's (SPEC §9); `by_task` is the page's.
fn total_json(t: &Total) -> Value {
    json!({
        "cells": t.cells, "scored": t.scored, "passes": t.passes, "errors": t.errors,
        "rate": opt_num(t.rate()),
        "pass_at_1": opt_num(t.pass_at_1()),
        "pass_all_k": opt_num(t.pass_all_k()),
        "pass_all_k_interval": bounds(t.all_passed_interval.as_ref()),
    })
}

/// A name-and-parameters match's F1 with its counts (HiTEC).
fn f1_json(f: &F1) -> Value {
    json!({"true_positives": f.true_positives, "emitted": f.emitted, "gold": f.gold,
           "precision": opt_num(f.precision()), "recall": opt_num(f.recall()), "f1": opt_num(f.f1())})
}

/// One model of `data/matrix.json`: its totals, pooled by task, per tag, its HiTEC counts and
/// F1, and its value accuracy where its tasks report values.
fn model_json(m: &Matrix, mv: &ModelView) -> Value {
    let at = m.thresholds;
    let tags: Map<String, Value> = mv
        .tags
        .iter()
        .map(|(tag, t)| {
            let mut v = object([
                total_json(t),
                json!({"by_task": mv.pooled.get(tag).map(|p| pooled_json(p, at))}),
            ]);
            if let Some(x) = mv.value_by_tag.get(tag) {
                v["values_by_task"] = values_json(x, at);
            }
            (tag.clone(), v)
        })
        .collect();
    let mut v = object([
        json!({"model": mv.name}),
        total_json(&mv.total),
        json!({
            "flaky_cells": mv.total.flaky_cells,
            "by_task": pooled_json(&mv.pooled_total, at),
            "tags": tags,
            "hitec": HitecError::ALL.iter().map(|h| json!({
                "type": h.number(), "name": h.name(), "count": mv.hitec[h.number() as usize]
            })).collect::<Vec<_>>(),
            "f1_name": f1_json(&mv.metrics.name),
            "f1_name_parameter": f1_json(&mv.metrics.name_and_parameters),
        }),
    ]);
    if let Some(x) = &mv.value_total {
        v["values_by_task"] = values_json(x, at);
    }
    v
}

/// One label of `data/matrix.json`: what it means, its retry class, and per model how often a
/// reroll of its failures passed.
fn label_json(m: &Matrix, routing: &Routing, l: Label) -> Value {
    let per_model: Map<String, Value> = m
        .models
        .iter()
        .filter_map(|mv| {
            let r = mv.reroll.get(&l)?;
            // The interval of routing's reroll measure over every failure with the label (seen
            // by a router or not): over these tasks, the trials of one failure sharing its cell
            // (docs/data.md).
            let interval = routing
                .model(&mv.name)
                .and_then(|o| o.labels.iter().find(|x| x.label == l))
                .and_then(|x| x.reroll_all.interval);
            Some((
                mv.name.clone(),
                json!({
                    "failures": r.failures,
                    "rerolls": r.trials,
                    "rerolls_passed": r.successes,
                    "rate": opt_num(r.rate()),
                    "interval": bounds(interval.as_ref()),
                }),
            ))
        })
        .collect();
    json!({
        "label": l.as_str(),
        "meaning": l.meaning(),
        "retry": l.retry().as_str(),
        "reroll_success": per_model,
    })
}

/// One measured action (SPEC §11): its trials, passes, rate and interval.
fn measure_json(m: &Measure) -> Value {
    json!({
        "n": m.n,
        "passes": m.passes,
        "rate": opt_num(m.rate()),
        "interval": bounds(m.interval.as_ref()),
    })
}

/// How routing.json names the HTTP status of a refused follow-up: the status, or `none` when
/// no response head came at all.
fn refusal_key(status: Option<u16>) -> String {
    status.map_or_else(|| "none".to_string(), |s| s.to_string())
}

/// One routing policy's expected success and cost.
fn policy_json(p: &PolicyResult) -> Value {
    let mut o = json!({
        "policy": p.policy.as_str(),
        "success": {"rate": opt_num(p.rate), "interval": bounds(p.interval.as_ref())},
        "end_to_end": {
            "rate": opt_num(p.end_to_end),
            "interval": bounds(p.end_to_end_interval.as_ref()),
        },
        "tasks": p.tasks,
        "requests": num(p.requests),
        "completion_tokens": opt_num(p.tokens),
        "prompt_tokens": opt_num(p.prompt_tokens),
        "latency_ms": {
            "mean": opt_num(p.latency_ms),
            "p50": opt_num(p.latency_p50),
            "p95": opt_num(p.latency_p95),
        },
        "cost": p.cost.map_or(Value::Null, significant),
        "imputed": p.imputed,
    });
    if let (Some(b), Some(map)) = (&p.fallback_to, o.as_object_mut()) {
        map.insert("fallback_to".into(), Value::String(b.clone()));
    }
    o
}

/// A policy per tag, short: its success both ways and its requests (the row's own policies
/// carry the costs; a tag's would multiply routing.json by the tags).
fn tag_policy_json(p: &PolicyResult) -> Value {
    json!({
        "policy": p.policy.as_str(),
        "success": {"rate": opt_num(p.rate), "interval": bounds(p.interval.as_ref())},
        "end_to_end": {
            "rate": opt_num(p.end_to_end),
            "interval": bounds(p.end_to_end_interval.as_ref()),
        },
        "requests": num(p.requests),
    })
}

/// Whether a policy wins (SPEC §11): `winner` only when the paired difference against the
/// runner-up excludes 0, else null ("no clear winner"); the leader, the runner-up and their
/// difference either way.
fn decision_json(d: Option<&Decision>) -> Value {
    let Some(d) = d else {
        return json!({"winner": null, "leader": null, "runner_up": null, "difference": null});
    };
    json!({
        "winner": d.winner().map(|p| p.as_str()),
        "leader": d.leader.as_str(),
        "runner_up": d.runner_up.map(|p| p.as_str()),
        "difference": d.difference.map_or(Value::Null, |(x, iv)| {
            json!({"estimate": num(x), "interval": bounds(Some(&iv))})
        }),
    })
}

/// How routing.json and router.json name a trigger: the label, or `transport_error`.
fn trigger_name(t: Trigger) -> &'static str {
    match t {
        Trigger::Failed(l) => l.as_str(),
        Trigger::Transport => "transport_error",
    }
}

/// One action as router.json names it: `{"action": "reroll"}`, `{"action": "feedback",
/// "style", "history"}`, `{"action": "fallback", "model"}`.
fn action_json(a: Action, models: &[crate::report::ModelView]) -> Value {
    match a {
        Action::Reroll => json!({"action": "reroll"}),
        Action::Repair => json!({"action": "repair"}),
        Action::Feedback { style, history } => {
            json!({"action": "feedback", "style": style.as_str(), "history": history.as_str()})
        }
        Action::Fallback(b) => json!({
            "action": "fallback",
            "model": models.get(b).map(|m| m.name.as_str()),
        }),
    }
}

fn chain_json(c: &Chain, models: &[crate::report::ModelView]) -> Value {
    let mut out = vec![action_json(c.first, models)];
    out.extend(c.then.map(|a| action_json(a, models)));
    Value::Array(out)
}

/// `data/router.json` (docs/data.md): per row, what its `best` policy does after each visible
/// label and after a request with no answer — a file a router can load — with the row's
/// `best` figures (chosen on half of the tasks, scored on the other half).
pub(crate) fn router_json(m: &Matrix, r: &Routing) -> Vec<u8> {
    let models: Vec<Value> = r
        .models
        .iter()
        .map(|mr| {
            let price = r.prices.get(&mr.model);
            let rules: Vec<Value> = mr
                .router
                .entries()
                .map(|(t, c)| chosen_json(t, c, price, &m.models))
                .collect();
            let best = mr
                .policies
                .iter()
                .find(|p| p.policy == crate::report::routing::Policy::Best);
            json!({
                "model": mr.model,
                "best": best.map_or(Value::Null, |p| json!({
                    "success": {"rate": opt_num(p.rate), "interval": bounds(p.interval.as_ref())},
                    "end_to_end": {"rate": opt_num(p.end_to_end), "interval": bounds(p.end_to_end_interval.as_ref())},
                    "requests": num(p.requests),
                    "cost": p.cost.map_or(Value::Null, significant),
                })),
                "on": rules,
            })
        })
        .collect();
    let doc = json!({
        "format_version": 1,
        "chosen": "per trigger, the action or chain of two with the most expected successes end to end over the row's tasks (each task weighing the same); a trigger with no chain is final",
        "best": "the row's best policy: chains chosen on one half of the tasks and scored on the other, halves swapped (data/routing.json's policy best)",
        "models": models,
    });
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

/// One trigger's chosen chain in router.json.
fn chosen_json(
    t: Option<Trigger>,
    c: &Chosen,
    price: Option<&crate::report::routing::Price>,
    models: &[crate::report::ModelView],
) -> Value {
    let (rate, iv) = c
        .success()
        .map_or((None, None), |(x, iv)| (Some(x), Some(iv)));
    let cost = match (
        price,
        c.prompt_tokens,
        c.completion_tokens,
        c.chain.first,
        c.chain.then,
    ) {
        // Priced only when every request of the chain goes to the row itself.
        (Some(p), Some(i), Some(o), first, then)
            if ![Some(first), then]
                .iter()
                .any(|a| matches!(a, Some(Action::Fallback(_)))) =>
        {
            significant(p.of(i, o))
        }
        _ => Value::Null,
    };
    json!({
        "trigger": t.map_or("any other visible label", trigger_name),

        "chain": chain_json(&c.chain, models),
        "failures": c.failures,
        "success": {"rate": opt_num(rate), "interval": bounds(iv.as_ref())},
        "requests": num(c.requests),
        "prompt_tokens": opt_num(c.prompt_tokens),
        "completion_tokens": opt_num(c.completion_tokens),
        "latency_ms": opt_num(c.latency_ms),
        "cost": cost,
    })
}

/// One `labels[]` entry of routing.json: what each action did after the row's visible failures
/// with the label.
fn label_routing_json(l: &crate::report::routing::LabelRouting) -> Value {
    let feedback: serde_json::Map<String, Value> = l
        .feedback
        .iter()
        .map(|((st, h), x)| {
            let mut v = measure_json(&x.measure);
            let refused: serde_json::Map<String, Value> = x
                .refused
                .iter()
                .map(|(status, n)| (refusal_key(*status), json!(n)))
                .collect();
            if let Some(o) = v.as_object_mut() {
                o.insert("refused".into(), Value::Object(refused));
            }
            (format!("{}/{}", st.as_str(), h.as_str()), v)
        })
        .collect();
    let fallback: Vec<Value> = l
        .fallback
        .iter()
        .map(|(b, x)| {
            let mut v = measure_json(x);
            if let Some(o) = v.as_object_mut() {
                o.insert("model".into(), Value::String(b.clone()));
            }
            v
        })
        .collect();
    json!({
        "label": l.label.as_str(),
        "default": l.label.retry().as_str(),
        "failures": l.failures,
        "visible": l.visible,
        "reroll": measure_json(&l.reroll),
        "repair": l.repair.as_ref().map_or(Value::Null, measure_json),
        "feedback": feedback,
        "fallback": fallback,
    })
}

/// One call's expected cost (a review round's, or the first round's alone).
fn call_cost_json(c: &CallCost) -> Value {
    json!({
        "requests": num(c.requests),
        "prompt_tokens": opt_num(c.prompt_tokens),
        "completion_tokens": opt_num(c.completion_tokens),
        "latency_ms": opt_num(c.latency_ms),
    })
}

/// The review round over a set of a row's tasks (docs/data.md); with `pairs`, every broken
/// pair's permalinks.
fn review_measure_json(x: &ReviewMeasure, pairs: bool) -> Value {
    let refused: serde_json::Map<String, Value> = x
        .refused
        .iter()
        .map(|(status, n)| (refusal_key(*status), json!(n)))
        .collect();
    let mut o = json!({
        "tasks": x.tasks,
        "parents": x.parents,
        "reviewed": x.reviewed,
        "first": {"rate": opt_num(x.first), "interval": bounds(x.first_interval.as_ref())},
        "final": {"rate": opt_num(x.rate), "interval": bounds(x.interval.as_ref())},
        "fixed": x.fixed,
        "broken": x.broken,
        "refused": refused,
        "difference": {
            "estimate": opt_num(x.difference),
            "interval": bounds(x.difference_interval.as_ref()),
            "verdict": x.verdict.map(|v| v.as_str()),
        },
        "cost": {
            "single": call_cost_json(&x.single),
            "review": call_cost_json(&x.with_review),
        },
    });
    if let (true, Some(map)) = (pairs, o.as_object_mut()) {
        let list: Vec<Value> = x
            .broken_pairs
            .iter()
            .map(|p| json!({"first": p.first.permalink(), "review": p.review.permalink()}))
            .collect();
        map.insert("broken_pairs".into(), Value::Array(list));
    }
    o
}

/// A reviewed row's `review` (docs/data.md): over all its tasks, with the broken pairs, and
/// per tag.
fn review_json(row: &ReviewRow) -> Value {
    let mut o = review_measure_json(&row.overall, true);
    let tags: Vec<Value> = row
        .by_tag
        .iter()
        .map(|(tag, x)| {
            let mut v = review_measure_json(x, false);
            if let Some(map) = v.as_object_mut() {
                map.insert("tag".into(), Value::String(tag.clone()));
            }
            v
        })
        .collect();
    if let Some(map) = o.as_object_mut() {
        map.insert("orphans".into(), json!(row.orphans));
        map.insert("tags".into(), Value::Array(tags));
    }
    o
}

/// `data/routing.json` (docs/data.md); `reviews`, the review round of each reviewed row.
pub(crate) fn routing_json(m: &Matrix, r: &Routing, reviews: &[ReviewRow]) -> Vec<u8> {
    // Each row's part is made on its own core (a row of many labels holds a fallback measure
    // per label and other row), and they are taken in the rows' order.
    let models: Vec<Value> = r
        .models
        .par_iter()
        .map(|mr| {
            let labels: Vec<Value> = mr.labels.iter().map(label_routing_json).collect();
            let tags: Vec<Value> = mr
                .by_tag
                .iter()
                .map(|(tag, ps)| {
                    json!({
                        "tag": tag,
                        "decision": decision_json(mr.tag_decisions.get(tag)),
                        "policies": ps.iter().map(tag_policy_json).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let mut row = json!({
                "model": mr.model,
                "feedback_samples": mr.feedback_samples,
                "parent_passes": mr.parent_passes,
                "orphans": mr.orphans,
                "silent_parents": mr.silent_parents,
                "feedback_errors": mr.feedback_errors,
                "failures": mr.failures,
                "visible": mr.visible,
                "labels": labels,
                "decision": decision_json(mr.decision.as_ref()),
                "policies": mr.policies.iter().map(policy_json).collect::<Vec<_>>(),
                "oracle": mr.oracle.map_or(Value::Null, |o| json!({
                    "end_to_end": num(o.end_to_end),
                    "requests": num(o.requests),
                    "prompt_tokens": opt_num(o.prompt_tokens),
                    "completion_tokens": opt_num(o.completion_tokens),
                })),
                "tags": tags,
            });
            // Only a row with a review round has a `review`.
            if let (Some(rv), Some(map)) = (
                reviews.iter().find(|x| x.model == mr.model),
                row.as_object_mut(),
            ) {
                map.insert("review".into(), review_json(rv));
            }
            row
        })
        .collect();
    let doc = json!({
        "format_version": 1,
        "interval_method": m.method.as_str(),
        "success_unit": "these tasks: the mean over the row's tasks, each weighing the same, of the task's expected success under the policy",
        "models": models,
    });
    let mut out = serde_json::to_vec(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

/// `data/compare.json`: the numbers of every comparison page.
pub(crate) fn compare_json(comparisons: &[Comparison]) -> Vec<u8> {
    let doc = json!({
        "callcheck_version": env!("CARGO_PKG_VERSION"),
        "difference": "B − A, as a proportion (A the baseline)",
        "confidence": crate::stats::interval::CONFIDENCE,
        "pooled_method": POOLED_METHOD,
        "gate_method": GATE_METHOD,
        "cell_method": CELL_METHOD,
        "gate": format!("a pooled row or a task is a regression when its one-sided p-value of a drop, adjusted by weighted Holm over its family (each comparison's `family`: a pair of rows alone, every row against the baseline together), is under {:.2}", crate::stats::compare::ALPHA),
        "power": format!("detectable_drop: the smallest drop from {} on each task of a row that the gate detects with {} power at the row's level in its family, simulated for the gate's test", crate::stats::gate::REFERENCE_RATE, crate::stats::gate::POWER),
        "comparisons": comparisons,
    });
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

/// The columns of `data/samples.csv`, in order.
const CSV_COLUMNS: [&str; 17] = [
    "permalink",
    "model",
    "task",
    "run",
    "sample",
    "outcome",
    "label",
    "stage",
    "detail",
    "value_match",
    "ttfb_ms",
    "total_ms",
    "completion_tokens",
    "round",
    "parent",
    "feedback",
    "visible",
];

/// Every model with a sample, first-round or feedback, in name order.
fn csv_models(m: &Matrix) -> Vec<&str> {
    m.samples
        .iter()
        .chain(&m.feedback)
        .map(|s| s.key.model.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// One model's rows of samples.csv: its first-round and feedback samples (SPEC §11) merged
/// in key order.
fn model_rows<'a>(m: &'a Matrix, model: &str) -> Box<dyn Iterator<Item = &'a Scored> + 'a> {
    let of = |samples: &'a [Scored]| {
        let from = samples.partition_point(|s| s.key.model.as_str() < model);
        let to = from + samples[from..].partition_point(|s| s.key.model.as_str() <= model);
        &samples[from..to]
    };
    let (first, feedback) = (of(&m.samples), of(&m.feedback));
    if feedback.is_empty() {
        return Box::new(first.iter());
    }
    let mut rows: Vec<&Scored> = first.iter().chain(feedback).collect();
    rows.sort_by(|a, b| a.key.cmp(&b.key));
    Box::new(rows.into_iter())
}

/// The largest `data/samples.csv` written whole; a bigger one is split by model (GitHub warns
/// at 50 MB per file, and a notebook reading one model should not fetch all of them).
pub(crate) const CSV_SPLIT_BYTES: usize = 40 << 20;

/// Writes the one-row-per-sample export through `sink`: `data/samples.csv`, or, past `limit`
/// bytes, `data/samples/<model>.csv` (each with the header), in model order. Returns the paths
/// written. Each model's rows are rendered once; no more than `limit` bytes of them are held
/// before the choice is made, and none after.
pub(crate) fn samples_csv_files(
    m: &Matrix,
    limit: usize,
    sink: &mut dyn FnMut((String, Vec<u8>)) -> Result<(), super::SiteError>,
) -> Result<Vec<String>, super::SiteError> {
    let part_name = |model: &str| format!("{}/{model}.csv", samples_csv::SAMPLES_DIR);
    let header = samples_csv_of(std::iter::empty())?;
    // Each model's rows are appended to one buffer while it stays under `limit`: it is then the
    // export, handed on as it is (never copied). Past the limit the rows held become one file
    // per model, and the remaining models follow one at a time.
    // Room for the rows up front (a row is about the length of its fields, twice its key's):
    // the export is not copied from buffer to ever larger buffer as it grows.
    let estimate: usize = m
        .samples
        .iter()
        .chain(&m.feedback)
        .map(|s| {
            let k = &s.key;
            64 + s.detail.len() + 2 * (k.model.len() + k.task.len() + k.run.len() + k.sample.len())
        })
        .sum();
    let mut whole = Vec::with_capacity(header.len() + estimate.min(limit));
    whole.extend_from_slice(&header);
    let mut held: Vec<(&str, std::ops::Range<usize>)> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut split = false;
    // The rows of as many models as there are cores are rendered at once, each on its own core
    // (a row's bytes do not depend on the rows before it); they are then taken in model order.
    let models = csv_models(m);
    let rendered = models
        .chunks(rayon::current_num_threads().max(1))
        .flat_map(|batch| {
            batch
                .par_iter()
                .map(|model| {
                    let mut rows = Vec::new();
                    samples_csv_rows(&mut rows, model_rows(m, model)).map(|()| rows)
                })
                .collect::<Vec<_>>()
        });
    for (model, rows) in models.iter().copied().zip(rendered) {
        let rows = rows?;
        if split {
            let mut part = Vec::with_capacity(header.len() + rows.len());
            part.extend_from_slice(&header);
            part.extend_from_slice(&rows);
            names.push(part_name(model));
            sink((part_name(model), part))?;
            continue;
        }
        let from = whole.len();
        whole.extend_from_slice(&rows);
        held.push((model, from..whole.len()));
        if whole.len() > limit {
            split = true;
            for (model, range) in held.drain(..) {
                let mut part = Vec::with_capacity(header.len() + range.len());
                part.extend_from_slice(&header);
                part.extend_from_slice(&whole[range]);
                names.push(part_name(model));
                sink((part_name(model), part))?;
            }
            whole = Vec::new();
        }
    }
    if split {
        return Ok(names);
    }
    sink((samples_csv::SAMPLES_CSV.to_string(), whole))?;
    Ok(vec![samples_csv::SAMPLES_CSV.to_string()])
}

/// The header, then one row per sample of `samples`: RFC 4180 quoting, CRLF line ends.
fn samples_csv_of<'a>(samples: impl Iterator<Item = &'a Scored>) -> Result<Vec<u8>, csv::Error> {
    let mut out = Vec::new();
    {
        let mut w = csv::WriterBuilder::new()
            .terminator(csv::Terminator::CRLF)
            .from_writer(&mut out);
        w.write_record(CSV_COLUMNS)?;
        w.flush()?;
    }
    samples_csv_rows(&mut out, samples)?;
    Ok(out)
}

/// Appends one CSV row per sample to `out` (no header).
fn samples_csv_rows<'a>(
    out: &mut Vec<u8>,
    samples: impl Iterator<Item = &'a Scored>,
) -> Result<(), csv::Error> {
    use std::fmt::Write as _;
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(out);
    // The fields that are formatted are formatted into buffers reused from row to row.
    let (mut link, mut ttfb, mut total, mut tokens, mut parent) = (
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    );
    for s in samples {
        let k = &s.key;
        for b in [&mut link, &mut ttfb, &mut total, &mut tokens, &mut parent] {
            b.clear();
        }
        let feedback = s.feedback.as_deref();
        if let Some(p) = feedback.and_then(|f| f.parent.as_ref()) {
            let _ = write!(
                parent,
                "t/{}/{}/{}/{}.html",
                k.model, k.task, p.run, p.sample
            );
        }
        for part in k.permalink_parts() {
            link.push_str(part);
        }
        if let Some(x) = s.ttfb_ms {
            push_tenths(&mut ttfb, x);
        }
        if let Some(x) = s.total_ms {
            push_tenths(&mut total, x);
        }
        if let Some(x) = s.completion_tokens {
            let _ = write!(tokens, "{x}");
        }
        w.write_record([
            link.as_str(),
            &k.model,
            &k.task,
            &k.run,
            &k.sample,
            s.outcome.kind(),
            s.outcome.label().map(Label::as_str).unwrap_or(""),
            s.stage.map(|x| x.as_str()).unwrap_or(""),
            // The detail quotes what the server sent: its control characters written visibly,
            // so no spreadsheet or terminal that shows the file obeys one (SPEC §12, turn 5).
            &crate::term::escape_controls(&s.detail),
            match s.value_match {
                Some(true) => "true",
                Some(false) => "false",
                None => "",
            },
            &ttfb,
            &total,
            &tokens,
            if feedback.is_some() { "1" } else { "0" },
            &parent,
            feedback.map(|f| f.name()).unwrap_or(""),
            // Whether a router could tell the sample failed; nothing to say of a pass.
            match (s.outcome, s.visible) {
                (Outcome::Pass, _) => "",
                (_, true) => "true",
                (_, false) => "false",
            },
        ])?;
    }
    Ok(w.flush()?)
}

/// Appends `x` as `format!("{x:.1}")` does: the exact binary value rounded to tenths, half to
/// even, with its sign (`-0.0` included). The export's times are milliseconds, and the
/// formatter's exact mode (big-number arithmetic for most values) was a tenth of a rebuild's
/// time: a value under 10^15 is rounded here in integers, from its bits; anything else is left
/// to the formatter.
fn push_tenths(out: &mut String, x: f64) {
    use std::fmt::Write as _;
    if !x.is_finite() || x.abs() >= 1e15 {
        // Writing to a String cannot fail.
        let _ = write!(out, "{x:.1}");
        return;
    }
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    // |x| = mantissa × 2^-shift, with shift > 0 below 10^15 < 2^50.
    let (mantissa, shift) = if exponent == 0 {
        (fraction, 1074)
    } else {
        (fraction | 1 << 52, (1075 - exponent) as u32)
    };
    // 10|x| = scaled × 2^-shift, and scaled < 2^57.
    let scaled = mantissa * 10;
    let tenths = if shift >= 64 {
        // 10|x| < 2^57 / 2^64: under half a tenth.
        0
    } else {
        let whole = scaled >> shift;
        let rest = scaled & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        whole + u64::from(rest > half || (rest == half && whole & 1 == 1))
    };
    if bits >> 63 == 1 {
        out.push('-');
    }
    let _ = write!(out, "{}.{}", tenths / 10, tenths % 10);
}

/// `data/manifest.json`: what made this site. `runs` maps every run folder read (relative to the
/// runs root) to the sha256 of its listing ([`run_listing`]): one line per run, so the manifest
/// grows with runs, not with files, and anyone can check a site against its `runs/` with
/// `sha256sum` (docs/data.md).
pub(crate) fn manifest_json(
    m: &Matrix,
    tasks: &BTreeMap<String, String>,
    runs: &BTreeMap<String, String>,
) -> Vec<u8> {
    let doc = json!({
        "callcheck_version": env!("CARGO_PKG_VERSION"),
        "scoring_rules_sha256": rules_sha256(),
        "scoring_rules_files": RULES.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
        "interval": m.method.as_str(),
        "reliable_at": m.thresholds.reliable_at(),
        "tasks": tasks,
        "runs": runs,
    });
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

/// The listing of one run folder, exactly as
/// `find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum` prints it from inside the
/// folder: one `<sha256>  ./<path>` line per file, sorted by path bytes. `files` are the paths
/// relative to the folder (`cell.json`, `samples/000/request.json`…) with their sha256.
pub(crate) fn run_listing<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut lines: Vec<(String, &str)> = files
        .into_iter()
        .map(|(path, sha)| (format!("./{path}"), sha))
        .collect();
    lines.sort();
    let mut out = String::new();
    for (path, sha) in lines {
        out.push_str(sha);
        out.push_str("  ");
        out.push_str(&path);
        out.push('\n');
    }
    out
}

/// One sample whose outcome changed between two builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) permalink: String,
    pub(crate) old: String,
    pub(crate) new: String,
    pub(crate) detail: String,
}

/// What changed since the previous build.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// In permalink order.
    pub(crate) changed: Vec<Change>,
    /// (old, new) → count.
    pub(crate) moves: BTreeMap<(String, String), u64>,
    /// Samples in this build and not in the previous one, and the other way round.
    pub(crate) added: u64,
    pub(crate) removed: u64,
    pub(crate) previous: u64,
}

impl Changes {
    /// Nothing moved, appeared or disappeared: the rebuild re-scored the same samples the same
    /// way, and no changes page is written (so rebuilding unchanged inputs gives the same site).
    pub(crate) fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.added == 0 && self.removed == 0
    }
}

/// Compares the previous build's outcomes with this build's.
pub(crate) fn changes(previous: &BTreeMap<String, String>, m: &Matrix) -> Changes {
    let mut c = RunChanges::default();
    for s in m.samples.iter().chain(&m.feedback) {
        c.sample(s, previous.get(&s.key.permalink()).map(String::as_str));
    }
    Changes::gather(previous.len() as u64, [c])
}

/// What changed in some samples since the previous build: a rebuild that knows the previous
/// outcomes from its cache tells this run by run, and [`Changes::gather`] adds them up.
#[derive(Debug, Default)]
pub struct RunChanges {
    /// Samples the previous build had too.
    pub(crate) seen: u64,
    /// Samples it did not have.
    added: u64,
    /// Samples whose outcome moved.
    changed: Vec<Change>,
}

impl RunChanges {
    /// Sample `s`, whose outcome in the previous build was `old` (`None`: it had no such sample).
    pub(crate) fn sample(&mut self, s: &Scored, old: Option<&str>) {
        let new = s.outcome.name();
        match old {
            None => self.added += 1,
            Some(old) => {
                self.seen += 1;
                if old != new {
                    self.changed.push(Change {
                        permalink: s.key.permalink(),
                        old: old.to_string(),
                        new: new.to_string(),
                        detail: s.detail.clone(),
                    });
                }
            }
        }
    }
}

impl Changes {
    /// The changes of all samples, told in parts, against a previous build of `previous`
    /// samples: what it had and this build has not were removed.
    pub(crate) fn gather(previous: u64, parts: impl IntoIterator<Item = RunChanges>) -> Changes {
        let mut c = Changes {
            previous,
            ..Changes::default()
        };
        let mut seen = 0u64;
        for p in parts {
            seen += p.seen;
            c.added += p.added;
            c.changed.extend(p.changed);
        }
        for x in &c.changed {
            *c.moves.entry((x.old.clone(), x.new.clone())).or_default() += 1;
        }
        c.changed.sort_by(|a, b| a.permalink.cmp(&b.permalink));
        c.removed = previous.saturating_sub(seen);
        c
    }
}

#[cfg(test)]
mod split_tests {
    use super::*;
    use crate::report::SampleKey;
    use crate::stats::IntervalKind;
    use crate::taxonomy::Outcome;

    fn matrix(tasks: &[crate::task::Task]) -> Matrix {
        let mut samples = Vec::new();
        for (m, model) in ["alpha", "beta", "gamma"].iter().enumerate() {
            for (t, task) in tasks.iter().take(4).enumerate() {
                for i in 0..5 {
                    let outcome = if (m + t + i) % 3 == 0 {
                        Outcome::Fail(Label::NoCall)
                    } else {
                        Outcome::Pass
                    };
                    let key = SampleKey {
                        model: model.to_string(),
                        task: task.id.clone(),
                        run: "r0001".into(),
                        sample: format!("{i:03}"),
                    };
                    samples.push(Scored::bare(key, outcome));
                }
            }
        }
        crate::report::aggregate(samples, crate::compare::infos(tasks), IntervalKind::Wilson)
    }

    /// `data/samples.csv` written in one go: every model's rows after one header, RFC 4180
    /// quoting.
    fn samples_csv(m: &Matrix) -> Result<Vec<u8>, csv::Error> {
        let models = csv_models(m);
        samples_csv_of(models.iter().flat_map(|model| model_rows(m, model)))
    }

    /// Past the limit, the export is one file per model holding exactly that model's rows, and
    /// a comparison reads the split site as it reads the whole file.
    #[test]
    fn a_large_samples_csv_is_split_by_model_and_read_back_whole() {
        let tasks = crate::task::load(std::path::Path::new("tasks")).unwrap();
        let m = matrix(&tasks);
        let files = |limit: usize| {
            let mut out = Vec::new();
            let names = samples_csv_files(&m, limit, &mut |f| {
                out.push(f);
                Ok(())
            })
            .unwrap();
            assert_eq!(names, out.iter().map(|f| f.0.clone()).collect::<Vec<_>>());
            out
        };
        let whole = files(usize::MAX);
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].0, "data/samples.csv");
        // Assembled from the per-model parts, byte for byte the file written in one go.
        assert!(whole[0].1 == samples_csv(&m).unwrap());
        let split = files(whole[0].1.len() - 1);
        let names: Vec<&str> = split.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "data/samples/alpha.csv",
                "data/samples/beta.csv",
                "data/samples/gamma.csv"
            ]
        );
        // Each part: the header, then its model's rows; together, the whole file's rows in order.
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        let whole_text = text(&whole[0].1);
        let (header, rows) = whole_text.split_once("\r\n").unwrap();
        let mut joined = String::new();
        for (name, bytes) in &split {
            let t = text(bytes);
            let (h, r) = t.split_once("\r\n").unwrap();
            assert_eq!(h, header);
            let model = name
                .trim_start_matches("data/samples/")
                .trim_end_matches(".csv");
            assert!(
                r.lines().all(|l| l.split(',').nth(1) == Some(model)),
                "{name}"
            );
            joined.push_str(r);
        }
        assert_eq!(joined, rows);
        // Split as soon as the first model's rows pass the limit: the same parts, the later
        // models rendered one at a time.
        assert!(files(1) == split);

        // Written out as a site: found, and read back to the same cells.
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in &split {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        assert_eq!(samples_csv::site_samples_csvs(dir.path()).len(), 3);
        let back = crate::compare::load_baseline(dir.path(), &tasks, IntervalKind::Wilson).unwrap();
        let cells = |m: &Matrix| {
            m.cells
                .iter()
                .map(|(k, c)| (k.clone(), c.passes, c.scored))
                .collect::<Vec<_>>()
        };
        assert_eq!(cells(&back.matrix), cells(&m));
        assert_eq!(back.matrix.samples.len(), 60);
    }
}

#[cfg(test)]
mod tenths_tests {
    use super::push_tenths;
    use proptest::prelude::*;

    fn tenths(x: f64) -> String {
        let mut s = String::new();
        push_tenths(&mut s, x);
        s
    }

    #[test]
    fn ties_signs_and_limits_are_the_formatters() {
        for x in [
            0.0,
            -0.0,
            0.05,
            0.15,
            0.25,
            0.35,
            0.45,
            0.95,
            2.25,
            9.95,
            99.95,
            1e-320,
            -1e-320,
            -0.01,
            -0.05,
            5e-324,
            1e15 - 0.5,
            1e15,
            1e300,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1234.5678,
            0.049999999999999996,
        ] {
            assert_eq!(tenths(x), format!("{x:.1}"), "{x:e}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20000))]

        /// Any bit pattern, milliseconds as a server's clock gives them, and exact halves.
        #[test]
        fn tenths_are_the_formatters(
            bits in any::<u64>(),
            ms in 0.0f64..1e7,
            half in 0u64..100_000_000,
        ) {
            for x in [f64::from_bits(bits), ms, -ms, (half as f64 + 0.5) / 10.0, half as f64 / 20.0] {
                prop_assert_eq!(tenths(x), format!("{x:.1}"), "{:e}", x);
            }
        }
    }
}
