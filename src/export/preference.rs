//! Failures as training data: labelled negatives (and the positives they are contrasted with) as
//! JSON Lines in TRL's conversational preference formats, KTO (unpaired) and DPO (paired).
//!
//! Two kinds of negatives. *Real* ones are the failing completions that models actually put on
//! the wire, re-scored with the current checkers (so a relabel changes the export too).
//! *Synthetic* ones are the task's gold reply corrupted by the families of [`crate::corrupt`],
//! one per label that can apply to the task, in the spirit of the HiTEC paper's negatives; each
//! is scored again in the very form it is written (the assistant message, with its
//! `finish_reason`), and a variant that does not earn its label is dropped and counted, so every
//! synthetic line carries exactly the label the scorer gives it.
//!
//! Everything here is pure apart from reading sample files; writing happens in `cmd::export`.

use crate::corrupt;
use crate::evidence::{self, Judged};
use crate::hitec::{HitecError, crosswalk};
use crate::reply::Reply;
use crate::report::SampleKey;
use crate::runs::RunDir;
use crate::score::score;
use crate::score::wire::{Completion, WireArgs};
use crate::task::{Expect, Task};
use crate::taxonomy::{Label, Outcome, Stage};
use crate::transcript::Transcript;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// The token budget given to synthetic variants (a truncation variant reaches it).
const SYNTHETIC_BUDGET: u64 = 512;

/// What replaces a secret found in a line.
pub const REDACTED: &str = "[REDACTED]";

/// Which trainer's layout to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Unpaired: `prompt`, `completion`, `label` (true = desirable), `tools`.
    Kto,
    /// Paired: `prompt`, `chosen` (the gold reply), `rejected` (a failure), `tools`.
    Dpo,
}

/// Where negatives come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sources {
    Real,
    Synthetic,
    Both,
}

impl Sources {
    fn real(self) -> bool {
        matches!(self, Sources::Real | Sources::Both)
    }
    fn synthetic(self) -> bool {
        matches!(self, Sources::Synthetic | Sources::Both)
    }
}

/// What to export.
#[derive(Debug, Clone)]
pub struct Options {
    pub format: Format,
    pub sources: Sources,
    /// Only these model rows (real examples); all when `None`.
    pub models: Option<BTreeSet<String>>,
    /// Only negatives with these labels; all when `None`.
    pub labels: Option<BTreeSet<Label>>,
    /// At most this many negatives per label (over all sources and models).
    pub max_per_label: Option<usize>,
    /// Keep every failing sample, even one whose completion repeats another of its cell.
    pub keep_repeats: bool,
}

/// Where an example comes from: the `source` field of the `callcheck` metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    /// The task's own gold reply.
    Gold,
    /// A sample collected from a model row.
    Real,
    /// A corrupted variant of the gold reply.
    Synthetic,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Gold => "gold",
            Origin::Real => "real",
            Origin::Synthetic => "synthetic",
        }
    }
}

/// Why a negative is one: the scorer's verdict on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub label: Label,
    pub stage: Option<Stage>,
    pub detail: String,
    pub hitec: Option<HitecError>,
}

/// One example before it is laid out as a line: a completion to a prompt, good or bad.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    pub task: String,
    /// The model row, for real examples.
    pub model: Option<String>,
    /// `t/<model>/<task>/<run>/<NNN>.html`, for real examples.
    pub permalink: Option<String>,
    pub origin: Origin,
    /// The corruption variant (`escaping_error/raw_newline`), for synthetic examples.
    pub variant: Option<String>,
    /// `None` for a positive.
    pub failure: Option<Failure>,
    /// The messages sent, in order (a model row's system prompt included).
    pub prompt: Vec<Value>,
    /// The tool definitions sent (empty when none were).
    pub tools: Vec<Value>,
    /// The assistant message: `content` and `tool_calls` as emitted, arguments as strings.
    pub completion: Value,
    /// How the reply ended: the message alone does not say that it was cut.
    pub finish_reason: Option<String>,
    pub completion_tokens: Option<u64>,
}

/// What an export found, for the printed summary.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// Samples read from runs/ (after the model filter).
    pub samples: usize,
    /// Samples with no complete model response: never exported.
    pub transport_errors: usize,
    /// Failing samples whose completion repeated one already kept for the same cell.
    pub duplicate_negatives: usize,
    /// Passing samples whose completion repeated one already kept for the same cell.
    pub duplicate_positives: usize,
    /// Passing samples not used as positives (their arguments differ from the gold call).
    pub passes_not_gold: usize,
    /// Samples that could not be used, with the reason (unreadable files, a request that does
    /// not parse, a call only in the legacy `function_call` field).
    pub unusable: BTreeMap<String, usize>,
    /// Runs of a task that is not in the corpus.
    pub unknown_task_runs: usize,
    /// Synthetic variants that did not score as their label, by variant name.
    pub dropped_synthetic: Vec<String>,
    /// Negatives cut by `--max-per-label`, per label.
    pub capped: BTreeMap<Label, usize>,
    /// Samples of feedback rounds read (never examples of their own: their prompt holds the
    /// failure fed back); the passing ones are corrections.
    pub feedback_samples: usize,
    /// Samples of review rounds read (SPEC §11): a passing one corrects a failed parent, a
    /// failing one of a passing parent is a broken call ([`Harvest::broken`]).
    pub review_samples: usize,
}

/// The examples of an export and what was left out on the way.
#[derive(Debug, Clone, Default)]
pub struct Harvest {
    pub positives: Vec<Example>,
    pub negatives: Vec<Example>,
    pub counts: Counts,
    /// Per failed sample (its permalink): the same model's passing answer to the feedback round
    /// that followed it up (SPEC §11), which a DPO pair takes as `chosen` instead of the gold.
    pub corrections: BTreeMap<String, Correction>,
    /// The sample folders whose files could not be read (a symlink, a FIFO, too large), with
    /// why: named on stderr, as build names them.
    pub unreadable: Vec<(std::path::PathBuf, String)>,
    /// Correct calls a review talked the model out of (SPEC §11), by the review's permalink.
    pub broken: Vec<Broken>,
}

/// A correct first answer and the failing answer its review gave instead: a real rejected
/// answer with the model's own correct one as chosen. The rejected example carries the first
/// round's prompt (as a feedback correction's pair does), so chosen and rejected answer the
/// same request.
#[derive(Debug, Clone, PartialEq)]
pub struct Broken {
    /// The review's answer, its failure and permalink; the parent's prompt and tools.
    pub rejected: Example,
    /// The parent's assistant message, which passed.
    pub chosen: Value,
    /// The parent's permalink.
    pub chosen_permalink: String,
}

/// A model's own corrected answer: a feedback sample that passed.
#[derive(Debug, Clone, PartialEq)]
pub struct Correction {
    /// The assistant message of the feedback sample, as emitted.
    pub completion: Value,
    /// The feedback sample's permalink.
    pub permalink: String,
    /// How the failure was fed back.
    pub style: crate::runs::FeedbackStyle,
    /// A review round's answer (every answer reviewed, SPEC §11) rather than a feedback
    /// round's; `style` is then the review's (`checklist`).
    pub review: bool,
}

// ---- the assistant message ----

fn arguments_text(a: &WireArgs) -> String {
    match a {
        WireArgs::Absent => String::new(),
        WireArgs::Text(s) => s.clone(),
        // A server that sent an object: written as the JSON text a client would have to send on.
        WireArgs::Json(v) => serde_json::to_string(v).unwrap_or_default(),
    }
}

/// The assistant message of a parsed response, as a chat template reads it: `content` always
/// present (null when the server sent none) and `tool_calls` when there were any.
pub fn message_of_completion(c: &Completion) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    m.insert("content".into(), json!(c.content));
    if !c.tool_calls.is_empty() {
        let calls: Vec<Value> = c
            .tool_calls
            .iter()
            .map(|call| {
                let mut o = Map::new();
                if let Some(id) = &call.id {
                    o.insert("id".into(), json!(id));
                }
                o.insert("type".into(), json!("function"));
                o.insert(
                    "function".into(),
                    json!({"name": call.name, "arguments": arguments_text(&call.arguments)}),
                );
                Value::Object(o)
            })
            .collect();
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(m)
}

/// The assistant message of a scripted reply (gold or corrupted).
pub fn message_of_reply(r: &Reply) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    m.insert("content".into(), json!(r.content));
    if !r.tool_calls.is_empty() {
        let calls: Vec<Value> = r
            .tool_calls
            .iter()
            .map(|c| json!({"type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(m)
}

/// A minimal chat-completions body carrying one assistant message: what `callcheck check`
/// scores when a line of the export is checked on its own.
pub fn response_body(
    message: &Value,
    finish_reason: Option<&str>,
    completion_tokens: Option<u64>,
) -> Value {
    let mut body = json!({
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    });
    if let Some(n) = completion_tokens {
        body["usage"] = json!({"completion_tokens": n});
    }
    body
}

/// Scores an assistant message against its task the way `callcheck check` does with only a
/// response file: the tools are the task's and no token budget is known.
fn rescore(task: &Task, message: &Value, finish_reason: Option<&str>) -> Outcome {
    let body = response_body(message, finish_reason, None);
    let t = Transcript {
        request: None,
        body: serde_json::to_vec(&body).unwrap_or_default(),
        streamed: false,
        meta: None,
    };
    score(task, &t).outcome
}

// ---- gold and synthetic ----

/// The task's gold reply as a positive example (prose for a task that expects no call, the
/// gold JSON for structured output), or `None` if it does not pass its own task, which lint
/// rules out for the corpus.
pub fn gold_example(task: &Task) -> Option<Example> {
    let reply = corrupt::gold(task);
    let completion = message_of_reply(&reply);
    if rescore(task, &completion, Some(&reply.finish_reason)) != Outcome::Pass {
        return None;
    }
    Some(Example {
        task: task.id.clone(),
        model: None,
        permalink: None,
        origin: Origin::Gold,
        variant: None,
        failure: None,
        prompt: task.messages.clone(),
        tools: task.tools_json.clone(),
        completion,
        finish_reason: Some(reply.finish_reason),
        completion_tokens: None,
    })
}

/// One synthetic negative per label that can apply to the task: the first variant of the
/// label's corruption family that scores as exactly that label in its exported form. Variants
/// that score otherwise are returned by name in the second list.
pub fn synthetic_examples(task: &Task, labels: &[Label]) -> (Vec<Example>, Vec<String>) {
    let mut out = Vec::new();
    let mut dropped = Vec::new();
    for &label in labels {
        let Ok(variants) = corrupt::corruptions(task, label, SYNTHETIC_BUDGET) else {
            continue;
        };
        for c in variants {
            let completion = message_of_reply(&c.reply);
            let body = response_body(&completion, Some(&c.reply.finish_reason), None);
            let t = Transcript {
                request: None,
                body: serde_json::to_vec(&body).unwrap_or_default(),
                streamed: false,
                meta: None,
            };
            let v = score(task, &t);
            if v.outcome != Outcome::Fail(label) {
                dropped.push(format!("{}: {}", task.id, c.name));
                continue;
            }
            out.push(Example {
                task: task.id.clone(),
                model: None,
                permalink: None,
                origin: Origin::Synthetic,
                variant: Some(c.name),
                failure: Some(Failure {
                    label,
                    stage: v.stage,
                    hitec: crosswalk(&v),
                    detail: v.detail,
                }),
                prompt: task.messages.clone(),
                tools: task.tools_json.clone(),
                completion,
                finish_reason: Some(c.reply.finish_reason),
                completion_tokens: None,
            });
            break;
        }
    }
    (out, dropped)
}

// ---- real samples ----

/// What one sample of runs/ gives the export.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// A usable example (a failure, or a pass whose arguments equal the gold).
    Example(Box<Example>),
    /// A pass that is not used as a positive (arguments differ from the gold).
    PassNotGold,
    /// No complete model response.
    TransportError,
    /// Not usable, and why.
    Unusable(&'static str),
}

/// One sample, read and scored through [`crate::evidence`] as a build scores it, into an
/// example.
pub fn sample_reading(task: &Task, judged: &Judged) -> Reading {
    let Judged {
        sample,
        verdict,
        completion,
        ..
    } = judged;
    if verdict.outcome == Outcome::Error {
        return Reading::TransportError;
    }
    let Some(request) = &sample.transcript.request else {
        return Reading::Unusable("request.json missing or not JSON");
    };
    let Some(prompt) = request.get("messages").and_then(Value::as_array) else {
        return Reading::Unusable("request.json has no messages");
    };
    let tools = request
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Ok(completion) = completion else {
        return Reading::TransportError;
    };
    if completion.tool_calls.is_empty() && completion.function_call.is_some() {
        // A call only in the deprecated field has no place in a tool-calling chat template;
        // written as content-less prose it would teach something else than what was emitted.
        return Reading::Unusable("a call only in the legacy function_call field");
    }
    let failure = match verdict.outcome {
        Outcome::Fail(label) => Some(Failure {
            label,
            stage: verdict.stage,
            hitec: crosswalk(verdict),
            detail: verdict.detail.clone(),
        }),
        Outcome::Pass => {
            // A pass is a positive when it is what the gold says: prose where no call is
            // expected, or arguments (or structured output) equal to the gold.
            let gold_like =
                matches!(task.expect, Expect::NoCall) || verdict.value_match == Some(true);
            if !gold_like {
                return Reading::PassNotGold;
            }
            None
        }
        Outcome::Error => return Reading::TransportError,
    };
    Reading::Example(Box::new(Example {
        task: task.id.clone(),
        model: Some(sample.key.model.clone()),
        permalink: Some(sample.key.permalink()),
        origin: Origin::Real,
        variant: None,
        failure,
        prompt: prompt.clone(),
        tools,
        completion: message_of_completion(completion),
        finish_reason: completion.finish_reason.clone(),
        completion_tokens: completion.completion_tokens,
    }))
}

/// What makes two completions of a cell the same: the prompt, the tools and the message
/// without call ids (servers draw a fresh id for every call).
fn identity(e: &Example) -> String {
    let mut m = e.completion.clone();
    if let Some(calls) = m.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for c in calls {
            if let Some(o) = c.as_object_mut() {
                o.remove("id");
            }
        }
    }
    let key = json!([e.prompt, e.tools, m, e.finish_reason]);
    serde_json::to_string(&key).unwrap_or_default()
}

/// Reads every sample of the given runs (sorted as `runs::scan` returns them), keeping each
/// distinct completion of a cell once (the first in run and sample order) unless
/// `keep_repeats`: a model that fails the same way five times is one lesson, not five.
pub fn harvest_real(tasks: &[Task], runs: &[RunDir], opts: &Options, h: &mut Harvest) {
    let by_id: BTreeMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut seen: BTreeSet<(String, String, String)> = BTreeSet::new();
    let mut reviews: Vec<(&Task, &RunDir)> = Vec::new();
    for r in runs {
        if let Some(models) = &opts.models
            && !models.contains(&r.model)
        {
            continue;
        }
        let Some(task) = by_id.get(r.task_id.as_str()) else {
            h.counts.unknown_task_runs += 1;
            continue;
        };
        if r.cell.kind == crate::runs::RunKind::Feedback {
            harvest_corrections(task, r, h);
            continue;
        }
        // A review round (SPEC §11): its passing answers correct failed parents, as feedback
        // does; its failing answers to passing parents are read once every first round is.
        if r.cell.kind == crate::runs::RunKind::Review {
            harvest_corrections(task, r, h);
            reviews.push((task, r));
            continue;
        }
        for s in &r.samples {
            h.counts.samples += 1;
            let judged = match evidence::judge(r, s, task) {
                Ok(j) => j,
                Err(e) => {
                    h.unreadable.push((r.sample_dir(s), e.to_string()));
                    *h.counts
                        .unusable
                        .entry("sample files not readable".into())
                        .or_default() += 1;
                    continue;
                }
            };
            match sample_reading(task, &judged) {
                Reading::Example(e) => {
                    let kind = if e.failure.is_some() { "neg" } else { "pos" };
                    if !opts.keep_repeats
                        && !seen.insert((r.model.clone(), kind.into(), identity(&e)))
                    {
                        if e.failure.is_some() {
                            h.counts.duplicate_negatives += 1;
                        } else {
                            h.counts.duplicate_positives += 1;
                        }
                        continue;
                    }
                    match &e.failure {
                        Some(f) => {
                            if opts.labels.as_ref().is_none_or(|l| l.contains(&f.label)) {
                                h.negatives.push(*e);
                            }
                        }
                        None => h.positives.push(*e),
                    }
                }
                Reading::PassNotGold => h.counts.passes_not_gold += 1,
                Reading::TransportError => h.counts.transport_errors += 1,
                Reading::Unusable(why) => *h.counts.unusable.entry(why.into()).or_default() += 1,
            }
        }
    }
    for (task, r) in reviews {
        harvest_broken(task, r, runs, opts, h);
    }
}

/// The failing answers of a review run whose parent passed: each a real rejected answer, the
/// parent's own as chosen. The parent is read from its run (same row and task) and scored
/// again, so a relabel that fails the parent drops the pair.
fn harvest_broken(task: &Task, r: &RunDir, runs: &[RunDir], opts: &Options, h: &mut Harvest) {
    for s in &r.samples {
        let Ok(judged) = evidence::judge(r, s, task) else {
            continue;
        };
        let meta = judged.sample.transcript.meta.as_ref();
        let Some(parent) = meta.and_then(|m| m.parent.clone()) else {
            continue;
        };
        let Reading::Example(review) = sample_reading(task, &judged) else {
            continue;
        };
        let Some(label) = review.failure.as_ref().map(|f| f.label) else {
            continue;
        };
        if opts.labels.as_ref().is_some_and(|l| !l.contains(&label)) {
            continue;
        }
        let Some(parent_run) = runs.iter().find(|p| {
            p.model == r.model
                && p.task_id == r.task_id
                && p.run_id == parent.run
                && p.cell.kind == crate::runs::RunKind::Samples
        }) else {
            continue;
        };
        let Ok(parent_judged) = evidence::judge(parent_run, &parent.sample, task) else {
            continue;
        };
        let first = match sample_reading(task, &parent_judged) {
            Reading::Example(e) if e.failure.is_none() => *e,
            // A pass whose arguments differ from the gold is still a correct call.
            Reading::PassNotGold => match passing_message(&parent_judged) {
                Some(e) => e,
                None => continue,
            },
            _ => continue,
        };
        let mut rejected = *review;
        rejected.prompt = first.prompt.clone();
        rejected.tools = first.tools.clone();
        h.broken.push(Broken {
            rejected,
            chosen: first.completion,
            chosen_permalink: parent_judged.sample.key.permalink(),
        });
    }
}

/// A passing sample's prompt, tools and assistant message (the parts a broken pair's chosen
/// side needs), for a pass that [`sample_reading`] does not make a positive.
fn passing_message(judged: &Judged) -> Option<Example> {
    let request = judged.sample.transcript.request.as_ref()?;
    let prompt = request.get("messages")?.as_array()?.clone();
    let tools = request
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let completion = judged.completion.as_ref().ok()?;
    Some(Example {
        task: String::new(),
        model: None,
        permalink: None,
        origin: Origin::Real,
        variant: None,
        failure: None,
        prompt,
        tools,
        completion: message_of_completion(completion),
        finish_reason: completion.finish_reason.clone(),
        completion_tokens: completion.completion_tokens,
    })
}

/// The passing samples of a feedback or review run, as corrections of their parents (a review's
/// pass corrects only a parent that failed: the others are never looked up). When several
/// follow-ups of one failure passed, a feedback round's first, then the first by style (error,
/// checklist, retry), then by permalink, is kept, so the choice does not depend on the order
/// runs are read.
fn harvest_corrections(task: &Task, r: &RunDir, h: &mut Harvest) {
    let Some(style) = r.cell.feedback.as_ref().map(|f| f.style) else {
        return;
    };
    let review = r.cell.kind == crate::runs::RunKind::Review;
    for s in &r.samples {
        if review {
            h.counts.review_samples += 1;
        } else {
            h.counts.feedback_samples += 1;
        }
        let Ok(judged) = evidence::judge(r, s, task) else {
            continue;
        };
        let meta = judged.sample.transcript.meta.as_ref();
        let Some(parent) = meta.and_then(|m| m.parent.clone()) else {
            continue;
        };
        if judged.verdict.outcome != Outcome::Pass {
            continue;
        }
        let Ok(completion) = &judged.completion else {
            continue;
        };
        let key = SampleKey {
            model: r.model.clone(),
            task: r.task_id.clone(),
            run: parent.run,
            sample: parent.sample,
        };
        let correction = Correction {
            completion: message_of_completion(completion),
            permalink: judged.sample.key.permalink(),
            style,
            review,
        };
        let slot = h.corrections.entry(key.permalink());
        match slot {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(correction);
            }
            std::collections::btree_map::Entry::Occupied(mut o) => {
                let old = o.get();
                // A feedback round's correction before a review's, then by style and permalink.
                if (correction.review, correction.style, &correction.permalink)
                    < (old.review, old.style, &old.permalink)
                {
                    o.insert(correction);
                }
            }
        }
    }
}

/// Gold positives and, when asked for, synthetic negatives for every task.
pub fn harvest_tasks(tasks: &[Task], opts: &Options, h: &mut Harvest) {
    let labels: Vec<Label> = Label::ALL
        .into_iter()
        .filter(|l| opts.labels.as_ref().is_none_or(|s| s.contains(l)))
        .collect();
    for task in tasks {
        if let Some(g) = gold_example(task) {
            h.positives.push(g);
        }
        if opts.sources.synthetic() {
            let (mut ex, dropped) = synthetic_examples(task, &labels);
            h.negatives.append(&mut ex);
            h.counts.dropped_synthetic.extend(dropped);
        }
    }
}

/// The whole export's examples: real ones from `runs` when the sources include them, gold
/// positives and synthetic negatives from `tasks`, the `--max-per-label` cut applied, in a
/// deterministic order.
pub fn harvest(tasks: &[Task], runs: &[RunDir], opts: &Options) -> Harvest {
    let mut h = Harvest::default();
    harvest_tasks(tasks, opts, &mut h);
    if opts.sources.real() {
        harvest_real(tasks, runs, opts, &mut h);
    }
    if let Some(max) = opts.max_per_label {
        cap(&mut h, max);
    }
    let order = |e: &Example| {
        (
            e.task.clone(),
            e.origin,
            e.model.clone(),
            e.failure.as_ref().map(|f| f.label),
            e.permalink.clone(),
            e.variant.clone(),
        )
    };
    h.positives.sort_by_cached_key(order);
    h.negatives.sort_by_cached_key(order);
    h.broken.sort_by_cached_key(|b| order(&b.rejected));
    h
}

/// Keeps at most `max` negatives per label. Which ones is decided by a hash of each example's
/// content rather than by position, so the kept ones spread over tasks and models instead of
/// favouring the alphabetically first, and the choice is the same on every run.
fn cap(h: &mut Harvest, max: usize) {
    let mut by_label: BTreeMap<Label, Vec<(String, Example)>> = BTreeMap::new();
    for e in std::mem::take(&mut h.negatives) {
        let Some(label) = e.failure.as_ref().map(|f| f.label) else {
            continue;
        };
        let digest = Sha256::digest(
            format!(
                "{}\n{}\n{:?}\n{:?}\n{:?}",
                identity(&e),
                e.task,
                e.model,
                e.permalink,
                e.variant
            )
            .as_bytes(),
        );
        let hex = crate::task::hex(&digest);
        by_label.entry(label).or_default().push((hex, e));
    }
    for (label, mut list) in by_label {
        list.sort_by(|a, b| a.0.cmp(&b.0));
        if list.len() > max {
            h.counts.capped.insert(label, list.len() - max);
            list.truncate(max);
        }
        h.negatives.extend(list.into_iter().map(|(_, e)| e));
    }
    // The answers reviews broke take what the label's budget leaves, in permalink order.
    let mut kept: BTreeMap<Label, usize> = BTreeMap::new();
    for e in &h.negatives {
        if let Some(f) = &e.failure {
            *kept.entry(f.label).or_default() += 1;
        }
    }
    h.broken
        .sort_by(|a, b| a.rejected.permalink.cmp(&b.rejected.permalink));
    h.broken.retain(|b| {
        let Some(label) = b.rejected.failure.as_ref().map(|f| f.label) else {
            return false;
        };
        let n = kept.entry(label).or_default();
        if *n < max {
            *n += 1;
            true
        } else {
            *h.counts.capped.entry(label).or_default() += 1;
            false
        }
    });
}

// ---- the lines ----

fn metadata(e: &Example) -> Value {
    let f = e.failure.as_ref();
    json!({
        "task": e.task,
        "model": e.model,
        "permalink": e.permalink,
        "source": e.origin.as_str(),
        "variant": e.variant,
        "label": f.map(|f| f.label.as_str()),
        "stage": f.and_then(|f| f.stage).map(|s| s.as_str()),
        "detail": f.map(|f| f.detail.as_str()),
        "hitec": f.and_then(|f| f.hitec).map(|h| json!({"number": h.number(), "name": h.name()})),
        "finish_reason": e.finish_reason,
        "completion_tokens": e.completion_tokens,
    })
}

/// The lines of the file, in order: KTO lists each task's positives then its negatives; DPO pairs every negative with the same model's passing answer to
/// its feedback or review round when there is one, else with its task's gold reply (tasks
/// without a passing gold reply give no such pairs), then each answer a review broke with the
/// correct first answer it replaced; `callcheck.chosen.source` says which (`feedback`,
/// `review`, `gold` or `first`), and `callcheck.rejected` marks a review's broken answer.
pub fn lines(h: &Harvest, format: Format) -> Vec<Value> {
    match format {
        Format::Kto => {
            let mut all: Vec<&Example> = h.positives.iter().chain(&h.negatives).collect();
            // Stable: each task's positives, then its negatives, in harvest order.
            all.sort_by(|a, b| {
                (a.task.as_str(), a.failure.is_some()).cmp(&(b.task.as_str(), b.failure.is_some()))
            });
            // A review's broken answer is a pair's rejected side (DPO), not an unpaired
            // negative: its lesson is the correct answer it replaced.
            all.into_iter()
                .map(|e| {
                    json!({
                        "prompt": e.prompt,
                        "completion": [e.completion],
                        "label": e.failure.is_none(),
                        "tools": e.tools,
                        "callcheck": metadata(e),
                    })
                })
                .collect()
        }
        Format::Dpo => {
            let gold: BTreeMap<&str, &Example> = h
                .positives
                .iter()
                .filter(|e| e.origin == Origin::Gold)
                .map(|e| (e.task.as_str(), e))
                .collect();
            h.negatives
                .iter()
                .filter_map(|e| {
                    // A real failure that the same model fixed when it was fed back is paired
                    // with that answer (real on both sides); any other with the gold reply.
                    let fixed = e.permalink.as_ref().and_then(|p| h.corrections.get(p));
                    let (chosen, how) = match fixed {
                        Some(c) if c.review => (
                            &c.completion,
                            json!({"source": "review", "permalink": c.permalink}),
                        ),
                        Some(c) => (
                            &c.completion,
                            json!({"source": "feedback", "style": c.style.as_str(), "permalink": c.permalink}),
                        ),
                        None => (&gold.get(e.task.as_str())?.completion, json!({"source": "gold"})),
                    };
                    let mut meta = metadata(e);
                    if let Some(m) = meta.as_object_mut() {
                        m.insert("chosen".into(), how);
                    }
                    Some(json!({
                        "prompt": e.prompt,
                        "chosen": [chosen],
                        "rejected": [e.completion],
                        "tools": e.tools,
                        "callcheck": meta,
                    }))
                })
                .chain(h.broken.iter().map(|b| {
                    // A correct call a review broke: the model's own first answer chosen.
                    let e = &b.rejected;
                    let mut meta = metadata(e);
                    if let Some(m) = meta.as_object_mut() {
                        m.insert(
                            "chosen".into(),
                            json!({"source": "first", "permalink": b.chosen_permalink}),
                        );
                        m.insert("rejected".into(), broken_source(b));
                    }
                    json!({
                        "prompt": e.prompt,
                        "chosen": [b.chosen],
                        "rejected": [e.completion],
                        "tools": e.tools,
                        "callcheck": meta,
                    })
                }))
                .collect()
        }
    }
}

/// Where a broken pair's rejected answer comes from: a review of a first answer that passed.
fn broken_source(b: &Broken) -> Value {
    json!({"source": "review", "first": b.chosen_permalink})
}

/// Replaces every occurrence of each secret in the strings (and keys) of `v`.
pub fn redact(v: &mut Value, secrets: &[String]) -> usize {
    let mut n = 0;
    let scrub = |s: &str, n: &mut usize| -> Option<String> {
        let mut out = s.to_string();
        let mut hit = false;
        for secret in secrets.iter().filter(|s| !s.is_empty()) {
            if out.contains(secret.as_str()) {
                *n += out.matches(secret.as_str()).count();
                out = out.replace(secret.as_str(), REDACTED);
                hit = true;
            }
        }
        hit.then_some(out)
    };
    fn walk(v: &mut Value, f: &mut dyn FnMut(&str) -> Option<String>) {
        match v {
            Value::String(s) => {
                if let Some(new) = f(s) {
                    *s = new;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, f)),
            Value::Object(o) => {
                let old = std::mem::take(o);
                for (k, mut val) in old {
                    walk(&mut val, f);
                    let k = f(&k).unwrap_or(k);
                    o.insert(k, val);
                }
            }
            _ => {}
        }
    }
    walk(v, &mut |s| scrub(s, &mut n));
    n
}

/// The file's bytes: one JSON object per line, `\n`-terminated.
pub fn serialize(lines: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        out.extend(serde_json::to_vec(l).unwrap_or_default());
        out.push(b'\n');
    }
    out
}

/// Examples per label, per model and per source, for the printed summary: `(what, count)`.
pub fn tallies(h: &Harvest, format: Format) -> BTreeMap<&'static str, BTreeMap<String, usize>> {
    let mut t: BTreeMap<&'static str, BTreeMap<String, usize>> = BTreeMap::new();
    let gold: BTreeSet<&str> = h
        .positives
        .iter()
        .filter(|p| p.origin == Origin::Gold)
        .map(|p| p.task.as_str())
        .collect();
    let negatives = h.negatives.iter().filter(|e| match format {
        // A DPO export has a line only for a negative whose task has a gold reply.
        Format::Dpo => gold.contains(e.task.as_str()),
        Format::Kto => true,
    });
    let positives: Vec<&Example> = match format {
        Format::Kto => h.positives.iter().collect(),
        Format::Dpo => Vec::new(),
    };
    let broken: &[Broken] = match format {
        Format::Dpo => &h.broken,
        Format::Kto => &[],
    };
    let negatives = negatives
        .map(|e| (e, format!("{} negative", e.origin.as_str())))
        .chain(
            broken
                .iter()
                .map(|b| (&b.rejected, "review negative".to_string())),
        );
    for (e, source) in negatives {
        let label = e.failure.as_ref().map(|f| f.label.as_str()).unwrap_or("?");
        *t.entry("label")
            .or_default()
            .entry(label.into())
            .or_default() += 1;
        *t.entry("model")
            .or_default()
            .entry(e.model.clone().unwrap_or_else(|| "(gold/synthetic)".into()))
            .or_default() += 1;
        *t.entry("source").or_default().entry(source).or_default() += 1;
    }
    for e in positives {
        *t.entry("label")
            .or_default()
            .entry("positive".into())
            .or_default() += 1;
        *t.entry("model")
            .or_default()
            .entry(e.model.clone().unwrap_or_else(|| "(gold/synthetic)".into()))
            .or_default() += 1;
        *t.entry("source")
            .or_default()
            .entry(format!("{} positive", e.origin.as_str()))
            .or_default() += 1;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_reaches_nested_strings_and_keys() {
        let mut v = json!({"a": ["x sk-123 y", {"sk-123": "sk-123sk-123"}], "n": 1});
        let n = redact(&mut v, &["sk-123".to_string(), String::new()]);
        assert_eq!(n, 4);
        let s = serde_json::to_string(&v).unwrap();
        assert!(!s.contains("sk-123"), "{s}");
        assert!(s.contains("x [REDACTED] y"));
    }

    #[test]
    fn call_ids_do_not_make_completions_distinct() {
        let mk = |id: &str| Example {
            task: "t".into(),
            model: Some("m".into()),
            permalink: None,
            origin: Origin::Real,
            variant: None,
            failure: None,
            prompt: vec![json!({"role": "user", "content": "hi"})],
            tools: vec![],
            completion: json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
            finish_reason: Some("tool_calls".into()),
            completion_tokens: None,
        };
        assert_eq!(identity(&mk("call_a")), identity(&mk("call_b")));
        let mut other = mk("call_a");
        other.completion["tool_calls"][0]["function"]["arguments"] = json!("{\"x\": 1}");
        assert_ne!(identity(&mk("call_a")), identity(&other));
    }
}
