//! The collect phase (SPEC §1, §4): ask every selected model every selected task k times and
//! write what was sent and received under runs/, immutable, resumable, safe to kill. It never
//! scores.
//!
//! Shape: plan the cells (skipping those already holding k finished samples), ask each server
//! about itself once and run each row's preflight probes (`preflight`), then one launcher per
//! model starts sample requests under the model's concurrency limit (and a global one). Each
//! sample is written to its run's `.tmp-<run-id>` folder as soon as it arrives; the sample that
//! completes a cell writes `cell.json` and renames the run into place. Memory therefore holds
//! the open cells only, whatever the collection size.

pub mod client;
pub mod clock;
pub mod config;
pub mod feedback;
pub mod preflight;
pub mod progress;
pub mod secret;

use crate::runs::{
    self, CellInfo, FeedbackInfo, FeedbackStyle, History, RunKind, RunWriter, SampleOut, TaskRef,
};
use crate::task::Task;
use anyhow::{Context, Result, bail};
use client::{Endpoint, Exchange, RetryPolicy};
use config::ModelEntry;
use feedback::Ask;
use indicatif::ProgressBar;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{Semaphore, watch};

/// Fewer samples than this per cell make an anecdote, not a rate (SPEC: k ≥ 3).
pub const MIN_K: u32 = 3;

/// One part of a collection split across machines: cells whose hash falls in part `index`
/// (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not I/N (e.g. 1/4)"))?;
        let index: u32 = i
            .trim()
            .parse()
            .map_err(|_| format!("{i:?} in {s:?} is not a number"))?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("{n:?} in {s:?} is not a number"))?;
        if count == 0 || index == 0 || index > count {
            return Err(format!(
                "{s:?}: I must be between 1 and N (shards are numbered from 1)"
            ));
        }
        Ok(Shard { index, count })
    }
}

/// The shard (1-based, of `count`) a cell belongs to: a hash of the model name and the task id,
/// so every machine computes the same split whatever its config order or corpus size.
pub fn shard_of(model: &str, task_id: &str, count: u32) -> u32 {
    let digest = Sha256::digest(format!("{model}\n{task_id}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) % u64::from(count.max(1))) as u32 + 1
}

/// A run id: UTC time (sorts chronologically), the shard, and 32 random bits, so that runs
/// collected on several machines at the same second never collide when their trees are merged.
pub fn new_run_id(shard: Option<Shard>) -> String {
    let s = shard.unwrap_or(Shard { index: 1, count: 1 });
    format!(
        "{}-s{}of{}-{:08x}",
        clock::compact_now(),
        s.index,
        s.count,
        rand::random::<u32>()
    )
}

/// Everything `callcheck collect` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub config: PathBuf,
    /// The config's text when it is held in memory (`callcheck demo` points it at a mock on an
    /// ephemeral port); `config` then only names it in messages.
    pub config_text: Option<String>,
    pub tasks: PathBuf,
    pub runs: PathBuf,
    pub k: u32,
    pub allow_anecdote: bool,
    /// Model names to collect (all when `None`).
    pub models: Option<Vec<String>>,
    /// A glob on task ids.
    pub only: Option<String>,
    pub shard: Option<Shard>,
    /// Requests in flight across all models (each model also has its own limit).
    pub jobs: Option<usize>,
    pub retry: RetryPolicy,
    /// Samples whose exchange failed do not count towards k, so they are asked again.
    pub retry_errors: bool,
    /// No progress bar, no summary.
    pub quiet: bool,
    /// Probe each row's server before its cells (`preflight`); off with `--no-preflight`.
    pub preflight: bool,
    /// Every preflight request on its own line (`--verbose`), not one line per row.
    pub verbose: bool,
    /// The feedback round (`--feedback`, SPEC §11) in these styles instead of first-round
    /// samples: a follow-up for each visibly failed first-round sample that has none of a
    /// style yet.
    pub feedback: Option<Vec<FeedbackStyle>>,
    /// The review round (`--review checklist`, SPEC §11): a review request after every
    /// answered first-round sample that has none yet.
    pub review: bool,
    /// How the follow-ups carry the model's answer back (`--feedback-history`).
    pub history: History,
}

impl Options {
    /// The follow-up rounds asked for, in order (feedback styles, then the review); empty for
    /// a first-round collection.
    pub fn asks(&self) -> Vec<Ask> {
        let mut asks: Vec<Ask> = self
            .feedback
            .iter()
            .flatten()
            .map(|&s| Ask::Feedback(s))
            .collect();
        if self.review {
            asks.push(Ask::Review);
        }
        asks
    }

    /// True for a follow-up round (feedback or review), which sends no first-round sample.
    fn follows_up(&self) -> bool {
        self.feedback.is_some() || self.review
    }
}

/// One cell to collect: `need` more samples, numbered from `first` within the cell; or, for
/// the feedback round, `need` follow-ups of one style (a run of kind `feedback`).
#[derive(Debug, Clone)]
struct CellPlan {
    task: usize,
    first: u32,
    need: u32,
    feedback: Option<Arc<feedback::FeedbackPlan>>,
}

/// One request of a run: a first-round sample built from the task, or a follow-up built from
/// a parent sample. Both go through the same sending and writing.
#[derive(Debug, Clone)]
struct WorkItem {
    body: bytes::Bytes,
    /// `<task-id>/<sample number>` for the sample header.
    tag: String,
    /// For a follow-up: the parent (kept in its `meta.json`) and `<style>/<label>` for the
    /// feedback header.
    parent: Option<(crate::transcript::ParentRef, String)>,
}

/// The requests of one planned run, in sample order, and one line per follow-up whose body
/// could not be built. A follow-up's body is built from its parent's files here, when its cell
/// is sent, not at planning (blocking reads: called off the async threads).
fn work_items(
    shared: &Shared,
    model: &str,
    asking: &crate::request::Asking,
    plan: &CellPlan,
) -> Result<(Vec<WorkItem>, Vec<String>), serde_json::Error> {
    let task = &shared.tasks[plan.task];
    match &plan.feedback {
        Some(f) => {
            let mut items = Vec::with_capacity(f.items.len());
            let mut not_sent = Vec::new();
            let bodies = feedback::bodies(&shared.root, model, task, f);
            for (item, body) in f.items.iter().zip(bodies) {
                match body {
                    Ok(body) => items.push(WorkItem {
                        body,
                        tag: format!("{}/{}", task.id, item.position),
                        parent: Some((item.parent.clone(), f.header(item))),
                    }),
                    Err(e) => not_sent.push(format!(
                        "{} follow-up not sent (the parent changed since the plan): {e}",
                        f.ask.as_str()
                    )),
                }
            }
            Ok((items, not_sent))
        }
        // One body per sample: a row that sets `seed` sends each sample its own (derived from
        // the row's seed, the task and the sample number), so k samples are k draws.
        None => (0..plan.need)
            .map(|i| {
                let body = serde_json::to_vec(&crate::request::sample_request(
                    task,
                    asking,
                    plan.first + i,
                ))?;
                Ok(WorkItem {
                    body: body.into(),
                    tag: format!("{}/{}", task.id, plan.first + i),
                    parent: None,
                })
            })
            .collect::<Result<_, _>>()
            .map(|items| (items, Vec::new())),
    }
}

/// The id of a planned run: the collection's, and for a follow-up run its ask (and a
/// sanitised history) too (one collection writes a run per ask in a cell).
fn plan_run_id(run_id: &str, plan: &CellPlan) -> String {
    match &plan.feedback {
        Some(f) if f.history == History::Sanitised => {
            format!("{run_id}-{}-{}", f.ask.as_str(), f.history.as_str())
        }
        Some(f) => format!("{run_id}-{}", f.ask.as_str()),
        None => run_id.to_string(),
    }
}

/// Per-model tallies, for progress and the summary.
#[derive(Debug, Default)]
struct Tally {
    samples: AtomicU64,
    errors: AtomicU64,
    cells: AtomicU64,
    retried: AtomicU64,
    attempts: AtomicU64,
    /// What the samples kept as transport errors ended with ("HTTP 404", "cannot connect").
    error_kinds: Mutex<std::collections::BTreeMap<String, u64>>,
    /// Samples whose exchange succeeded but whose body is no chat completion.
    not_completions: AtomicU64,
    /// Follow-ups written, per ask (the feedback and review rounds).
    follow_ups: Mutex<std::collections::BTreeMap<Ask, u64>>,
    /// Follow-ups planned whose body could not be built when their cell was sent.
    not_sent: Mutex<Vec<String>>,
}

/// The kind of error of a sample whose response head did not come within the row's
/// `timeout_secs`: callcheck's own timeout, an outcome of the sample (never asked again).
const TIMED_OUT: &str = "callcheck's timeout (timeout_secs)";

/// What a sample kept as a transport error ended with, in a few stable words: the HTTP status
/// when one arrived, else the kind of failure (never the varying details, so they count up).
pub fn error_kind(meta: &crate::transcript::Meta) -> String {
    match (meta.status, meta.error.as_deref()) {
        (Some(s), _) if !(200..300).contains(&s) => format!("HTTP {s}"),
        // callcheck's own timeout_secs ran out mid-body: not a body the server cut.
        (Some(s), Some(e)) if e.starts_with("timed out") => {
            format!("HTTP {s}, then callcheck's timeout (timeout_secs) reading the body")
        }
        (Some(s), Some(_)) => format!("HTTP {s} with a cut body"),
        (None, Some(e)) if e.contains("timed out") => TIMED_OUT.into(),
        (None, Some(e)) if e.contains("cannot connect") => "cannot connect".into(),
        (None, Some(_)) => "no response".into(),
        (_, None) => "no response".into(),
    }
}

/// What is already on disk for one row's selected cells (the complete ones and the partial).
#[derive(Debug, Clone, Default)]
pub struct Prior {
    /// Finished samples in those cells.
    pub samples: u64,
    /// Of them, kept as transport errors.
    pub errors: u64,
    /// Complete cells (k samples already) whose every sample is a transport error.
    pub error_only_cells: u64,
    /// What those errors ended with.
    pub kinds: std::collections::BTreeMap<String, u64>,
}

/// What happened to one model, for the summary.
#[derive(Debug, Clone)]
pub struct ModelSummary {
    pub name: String,
    pub cells_planned: u64,
    pub cells_skipped: u64,
    pub cells_done: u64,
    /// Samples written by this collection.
    pub samples: u64,
    /// Of them, kept as transport errors (no complete response: build counts them apart).
    pub errors: u64,
    /// Of them, exchanges that succeeded with a body that is no chat completion (not JSON, a
    /// stream with no end, an error event): build counts these as transport errors too, so
    /// `errors + not_completions` is build's count for these samples.
    pub not_completions: u64,
    /// Samples that needed more than one attempt.
    pub retried: u64,
    /// HTTP attempts made for the samples (first attempts and retries).
    pub attempts: u64,
    /// What the samples kept as errors ended with, and how many each.
    pub error_kinds: std::collections::BTreeMap<String, u64>,
    /// What the row's selected cells already held before this collection.
    pub prior: Prior,
    /// The row's endpoints (redacted), for the hint when nothing scored.
    pub base_urls: Vec<String>,
    /// The variable holding the row's key, for the hint on a 401.
    pub api_key_env: Option<String>,
    pub seconds: f64,
    /// Set when the model was not collected at all (server unreachable, model id not served).
    pub failure: Option<String>,
    /// The preflight checks that failed, one line each (already printed before the cells).
    pub warnings: Vec<String>,
    /// For a follow-up round: what it found to follow up and what it sent.
    pub feedback: Option<feedback::RoundTally>,
}

/// The result of a collection.
#[derive(Debug, Clone)]
pub struct Report {
    pub run_id: String,
    pub models: Vec<ModelSummary>,
    pub interrupted: bool,
    /// A failure that stopped the collection (a write that failed).
    pub fatal: Option<String>,
    pub seconds: f64,
    /// Ctrl-C came during the preflight, before any cell was started.
    pub preflight_interrupted: bool,
    /// The asks and history of a follow-up round (`--feedback`, `--review`); `None` for
    /// first-round samples.
    pub follow_ups: Option<(Vec<Ask>, History)>,
}

impl ModelSummary {
    /// Takes what the row's collection did from its tally.
    fn take_tally(&mut self, tally: &Tally, secs: f64) {
        self.samples = tally.samples.load(Ordering::Relaxed);
        self.errors = tally.errors.load(Ordering::Relaxed);
        self.not_completions = tally.not_completions.load(Ordering::Relaxed);
        self.cells_done = tally.cells.load(Ordering::Relaxed);
        self.retried = tally.retried.load(Ordering::Relaxed);
        self.attempts = tally.attempts.load(Ordering::Relaxed);
        self.error_kinds = tally
            .error_kinds
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default();
        self.seconds = secs;
        if let Some(r) = &mut self.feedback {
            r.sent = tally
                .follow_ups
                .lock()
                .map(|k| k.clone())
                .unwrap_or_default();
        }
        if let Ok(lines) = tally.not_sent.lock() {
            self.warnings.extend(lines.iter().cloned());
        }
    }

    /// True when the row holds samples and not one of them is a complete response: nothing
    /// of it can be scored, which a collection must not report as a success.
    pub fn never_scored(&self) -> bool {
        self.failure.is_none()
            && self.samples + self.prior.samples > 0
            && self.errors + self.prior.errors == self.samples + self.prior.samples
    }

    /// What the server answered, for a row that never scored, and the likely cause.
    pub fn diagnosis(&self) -> String {
        let mut kinds = self.error_kinds.clone();
        for (k, n) in &self.prior.kinds {
            *kinds.entry(k.clone()).or_default() += n;
        }
        let total: u64 = kinds.values().sum();
        let answered = match kinds.iter().next() {
            Some((k, _)) if kinds.len() == 1 => format!("{k} on every request"),
            _ => kinds
                .iter()
                .map(|(k, n)| format!("{k} × {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let only = |k: &str| kinds.len() == 1 && kinds.contains_key(k);
        let urls = self.base_urls.join(", ");
        let hint = if only("HTTP 404") && self.base_urls.iter().any(|u| !u.ends_with("/v1")) {
            format!(
                "base_url should end in /v1 (callcheck appends /chat/completions and /models to it); it is {urls}"
            )
        } else if only("HTTP 404") {
            format!(
                "the server has no chat completions at {urls}/chat/completions, or does not serve the row's model"
            )
        } else if only("HTTP 401") || only("HTTP 403") {
            match &self.api_key_env {
                Some(v) => {
                    format!("the server refused the key: check the variable {v} (api_key_env)")
                }
                None => "the server wants a key: set api_key_env to the variable holding it".into(),
            }
        } else if only("cannot connect") {
            format!("is the server running and reachable at {urls}?")
        } else if only(TIMED_OUT) {
            "the server did not answer in time: raise timeout_secs or lower concurrency".into()
        } else {
            "look at the samples' meta.json for each error".into()
        };
        format!("no scored sample: all {total} samples are transport errors ({answered}); {hint}")
    }
}

/// A rate for people: whole numbers when fast (a mock), two decimals when slow (a model on a
/// CPU does well under one sample a second, which `{:.0}` would show as 0).
fn per_second(rate: f64) -> String {
    if rate >= 10.0 {
        format!("{rate:.0}")
    } else {
        format!("{rate:.2}")
    }
}

impl Report {
    /// The summary as text, one line per model.
    pub fn render(&self) -> String {
        if self.preflight_interrupted {
            return "collect: interrupted during the preflight; no cell was started\n".to_string();
        }
        if let Some((asks, history)) = &self.follow_ups {
            return feedback::render(self, asks, *history);
        }
        let planned: u64 = self.models.iter().map(|m| m.cells_planned).sum();
        if planned == 0 && self.fatal.is_none() && !self.interrupted {
            return self.render_nothing_to_collect();
        }
        let total: u64 = self.models.iter().map(|m| m.samples).sum();
        let mut out = self.headline("collect", &format!("{total} samples"), total);
        for m in &self.models {
            out.push_str(&m.warning_lines());
            match m.failure_line() {
                Some(line) => out.push_str(&line),
                None => out.push_str(&m.first_round_line()),
            }
        }
        out
    }

    /// The summary when every cell was already complete.
    fn render_nothing_to_collect(&self) -> String {
        let complete: u64 = self.models.iter().map(|m| m.cells_skipped).sum();
        let mut out = format!("collect: nothing to collect: all {complete} cells complete\n");
        for m in &self.models {
            if let Some(line) = m.failure_line() {
                out.push_str(&line);
            }
            out.push_str(&error_only_note(m));
            if m.never_scored() {
                out.push_str(&format!("  {}: {}\n", m.name, m.diagnosis()));
            }
        }
        out
    }

    /// A round's first line, the same for every round: `<command> <run id>: <what> in <s> s
    /// (<rate>/s)`, with `count` the requests the rate counts, and whether it was interrupted.
    fn headline(&self, command: &str, what: &str, count: u64) -> String {
        format!(
            "{command} {}: {what} in {:.1} s ({}/s){}\n",
            self.run_id,
            self.seconds,
            per_second(count as f64 / self.seconds.max(1e-9)),
            if self.interrupted {
                " — interrupted"
            } else {
                ""
            }
        )
    }
}

impl ModelSummary {
    /// The row's warnings, a line each.
    fn warning_lines(&self) -> String {
        self.warnings
            .iter()
            .map(|w| {
                format!(
                    "  {}: WARNING {}\n",
                    self.name,
                    crate::term::escape_controls(w)
                )
            })
            .collect()
    }

    /// The line of a row that was not collected, saying why; `None` for a row that was.
    fn failure_line(&self) -> Option<String> {
        self.failure.as_ref().map(|f| {
            format!(
                "  {}: not collected: {}\n",
                self.name,
                crate::term::escape_controls(f)
            )
        })
    }

    /// What a round's requests met on the wire, the same words in every round's summary:
    /// `<n> kept as transport errors (<kinds>)<more>; <n> HTTP attempts (<n> retries, on <n>
    /// <requests>)`.
    pub(super) fn exchange_counts(&self, more: &str, requests: &str) -> String {
        format!(
            "{} kept as transport errors{}{more}; {} HTTP attempts ({} retries, on {} {requests})",
            self.errors,
            kinds_text(&self.error_kinds),
            self.attempts,
            self.attempts.saturating_sub(self.samples),
            self.retried
        )
    }

    /// A collected row's line in the first round's summary, with its notes.
    fn first_round_line(&self) -> String {
        let m = self;
        // An exchange that succeeded with a body that is no chat completion is a sample here
        // and a transport error to build: said, so the counts agree.
        let more = match m.not_completions {
            0 => String::new(),
            n => format!(
                " and {n} answered but not a chat completion (not JSON, or a stream with no end), which build also counts as transport errors ({} in all)",
                m.errors + n
            ),
        };
        let mut out = format!(
            "  {}: {} samples written, {}; cells {}/{} written, {} already complete; {:.1} s\n",
            m.name,
            m.samples,
            m.exchange_counts(&more, "samples"),
            m.cells_done,
            m.cells_planned,
            m.cells_skipped,
            m.seconds
        );
        out.push_str(&error_only_note(m));
        if m.never_scored() {
            out.push_str(&format!("  {}: {}\n", m.name, m.diagnosis()));
        }
        out
    }
}

/// What the samples kept as errors ended with, for the summary: ` (HTTP 404 × 3, timed out ×
/// 1)`, or nothing when none was.
fn kinds_text(kinds: &std::collections::BTreeMap<String, u64>) -> String {
    if kinds.is_empty() {
        return String::new();
    }
    let each: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} × {n}")).collect();
    format!(" ({})", each.join(", "))
}

/// The line saying that complete cells hold only errors, and what to do, when they do.
fn error_only_note(m: &ModelSummary) -> String {
    if m.prior.error_only_cells == 0 {
        return String::new();
    }
    format!(
        "  {}: {} of the {} complete cells hold only transport errors; --retry-errors asks for those samples again\n",
        m.name, m.prior.error_only_cells, m.cells_skipped
    )
}

/// A cell's finished samples: how many count towards k (those of failed exchanges left out
/// when asked), and how many there are and failed in all.
struct CellHave {
    counted: u32,
    samples: u32,
    errors: u32,
    kinds: Vec<String>,
}

/// What one cell already holds on disk.
fn finished_samples(
    root: &Path,
    model: &str,
    task_id: &str,
    retry_errors: bool,
) -> (CellHave, Vec<String>) {
    let scan = runs::cell_runs(root, model, task_id);
    let warnings = scan
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.path.display(), s.reason))
        .collect();
    let mut have = CellHave {
        counted: 0,
        samples: 0,
        errors: 0,
        kinds: Vec::new(),
    };
    // Feedback and review runs hold follow-ups, not samples of the cell: never counted in k.
    for r in scan.runs.iter().filter(|r| r.cell.kind == RunKind::Samples) {
        for s in &r.samples {
            have.samples = have.samples.saturating_add(1);
            if let Some(kind) = sample_failed(&r.sample_dir(s)) {
                have.errors = have.errors.saturating_add(1);
                have.kinds.push(kind);
                if retry_errors {
                    continue;
                }
            }
            have.counted = have.counted.saturating_add(1);
        }
    }
    (have, warnings)
}

/// What a finished sample's exchange failed with, when it failed.
fn sample_failed(dir: &Path) -> Option<String> {
    let m = crate::runs::read_bounded(&dir.join("meta.json"), crate::runs::MAX_SAMPLE_FILE)
        .ok()
        .and_then(|b| serde_json::from_slice::<crate::transcript::Meta>(&b).ok())?;
    exchange_failed(&m).then(|| error_kind(&m))
}

/// True when a sample's exchange failed (no complete 2xx response): `--retry-errors` asks it
/// again, first-round sample or follow-up alike.
fn exchange_failed(m: &crate::transcript::Meta) -> bool {
    m.error.is_some() || m.status.is_none_or(|s| !(200..300).contains(&s))
}

/// A run being written: shared by its samples; the one that completes it renames it.
struct OpenCell {
    writer: Mutex<Option<RunWriter>>,
    remaining: AtomicU32,
    info: Mutex<Option<CellInfo>>,
    /// The ask of a follow-up run, for the per-ask count of follow-ups sent.
    style: Option<Ask>,
}

impl Drop for OpenCell {
    fn drop(&mut self) {
        // Reached with a writer only when the cell was not completed (interrupted, or a write
        // failed): its temporary folder goes, so nothing unfinished is left looking finished.
        if let Ok(mut w) = self.writer.lock()
            && let Some(w) = w.take()
        {
            w.abandon();
        }
    }
}

/// Shared state of one model's collection.
struct ModelRun {
    entry: ModelEntry,
    endpoint: Endpoint,
    cells: Vec<CellPlan>,
    redacted: Value,
    server: Value,
    limit: Arc<Semaphore>,
    tally: Tally,
}

struct Shared {
    tasks: Vec<Task>,
    root: PathBuf,
    run_id: String,
    retry: RetryPolicy,
    global: Arc<Semaphore>,
    stop: watch::Receiver<bool>,
    fatal: Mutex<Option<String>>,
    stopped_by_fatal: AtomicBool,
    progress: ProgressBar,
    total_errors: AtomicU64,
    cells_done: AtomicU64,
    cells_total: u64,
    started: Instant,
}

impl Shared {
    fn fail(&self, e: String, stop: &watch::Sender<bool>) {
        if let Ok(mut f) = self.fatal.lock()
            && f.is_none()
        {
            *f = Some(e);
        }
        self.stopped_by_fatal.store(true, Ordering::SeqCst);
        let _ = stop.send(true);
    }

    /// Where the collection stands, for the progress lines.
    fn counts(&self, samples_total: u64) -> progress::Counts {
        progress::Counts {
            cells_done: self.cells_done.load(Ordering::Relaxed),
            cells_total: self.cells_total,
            samples: self.progress.position(),
            samples_total,
            errors: self.total_errors.load(Ordering::Relaxed),
        }
    }

    fn tick(&self) {
        self.progress.inc(1);
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        self.progress.set_message(format!(
            "cells {}/{} · errors {} · {} samples/s",
            self.cells_done.load(Ordering::Relaxed),
            self.cells_total,
            self.total_errors.load(Ordering::Relaxed),
            per_second(self.progress.position() as f64 / secs)
        ));
    }
}

/// One row ready to ask its server: its plan with its endpoint.
type RowStart = (
    ModelEntry,
    Vec<CellPlan>,
    u64,
    Endpoint,
    Prior,
    Option<feedback::RoundTally>,
);

/// One row's plan: its cells to collect, how many are complete, what they already hold and,
/// for the feedback round, what it found to follow up.
type RowPlan = (
    ModelEntry,
    Vec<CellPlan>,
    u64,
    Prior,
    Option<feedback::RoundTally>,
);

/// What one row still needs: its cells to collect (or, for a follow-up round, the follow-ups
/// per cell), how many are complete, what they already hold, and lines for the terminal.
fn plan_row(opts: &Options, m: ModelEntry, tasks: &[Task]) -> Result<(RowPlan, Vec<String>)> {
    let mut warnings: Vec<String> = Vec::new();
    let mut cells = Vec::new();
    let mut skipped = 0;
    let mut prior = Prior::default();
    let asks = opts.asks();
    let mut round = opts.follows_up().then(feedback::RoundTally::default);
    for (ti, t) in tasks.iter().enumerate() {
        if let Some(s) = opts.shard
            && shard_of(&m.name, &t.id, s.count) != s.index
        {
            continue;
        }
        let dir = runs::cell_dir(&opts.runs, &m.name, &t.id)?;
        runs::remove_stale_temps(&dir)
            .with_context(|| format!("cannot remove unfinished runs in {}", dir.display()))?;
        if opts.follows_up() {
            let planned = feedback::plan_cell(
                &opts.runs,
                &m.name,
                t,
                &asks,
                opts.history,
                opts.retry_errors,
            );
            if let Some(r) = &mut round {
                r.add(&planned, &asks);
            }
            warnings.extend(planned.warnings);
            if planned.plans.is_empty() {
                skipped += 1;
            }
            for p in planned.plans {
                cells.push(CellPlan {
                    task: ti,
                    first: 0,
                    need: p.items.len() as u32,
                    feedback: Some(Arc::new(p)),
                });
            }
            continue;
        }
        let (have, w) = finished_samples(&opts.runs, &m.name, &t.id, opts.retry_errors);
        warnings.extend(w);
        prior.samples += u64::from(have.samples);
        prior.errors += u64::from(have.errors);
        for k in have.kinds {
            *prior.kinds.entry(k).or_default() += 1;
        }
        if have.counted >= opts.k {
            skipped += 1;
            if have.samples > 0 && have.errors == have.samples {
                prior.error_only_cells += 1;
            }
            continue;
        }
        cells.push(CellPlan {
            task: ti,
            first: have.counted,
            need: opts.k - have.counted,
            feedback: None,
        });
    }
    Ok(((m, cells, skipped, prior, round), warnings))
}

/// The rows and tasks a collection selects (`--models`, `--only`), checked before anything is
/// asked.
fn selection(opts: &Options) -> Result<(Vec<ModelEntry>, Vec<Task>)> {
    let config = match &opts.config_text {
        Some(text) => config::parse(&opts.config, text)?,
        None => config::load(&opts.config)?,
    };
    let mut entries = config.models;
    if let Some(wanted) = &opts.models {
        for w in wanted {
            if !entries.iter().any(|m| &m.name == w) {
                bail!(
                    "--models: {w:?} is not a model in {} (it has: {})",
                    opts.config.display(),
                    entries
                        .iter()
                        .map(|m| m.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        entries.retain(|m| wanted.contains(&m.name));
    }
    let mut tasks = crate::task::load(&opts.tasks)?;
    crate::task::only(&mut tasks, opts.only.as_deref(), &opts.tasks)?;
    if tasks.is_empty() {
        bail!("no tasks in {}", opts.tasks.display());
    }
    for t in &tasks {
        // The loader checks ids already; this guards the one place they become paths.
        runs::cell_dir(&opts.runs, "m", &t.id)
            .with_context(|| format!("task file {}", t.file.display()))?;
    }

    Ok((entries, tasks))
}

/// What one row's server says about itself (for cell.json) and, for a first round, its
/// preflight probes, with a line of progress per row (or per request with `--verbose`).
async fn ask_server(
    opts: &Options,
    entry: &ModelEntry,
    ep: &Endpoint,
    say: &(dyn Fn(&str) + Sync),
) -> (Result<Value, String>, Option<preflight::Preflight>) {
    let name = &entry.name;
    // Without --verbose a row's requests make one line, said when its preflight ends:
    // what the server lists (the GET lines) and how many checks passed.
    let gets = Mutex::new(Vec::new());
    let progress = |line: String| {
        if opts.verbose {
            say(&format!("preflight {name}: {line}"));
        } else if line.starts_with("GET ")
            && let Ok(mut g) = gets.lock()
        {
            g.push(line);
        }
    };
    let t0 = Instant::now();
    let server = ep
        .server_info(&entry.model, preflight::PROBE_TIMEOUT, &progress)
        .await;
    let p = match &server {
        // The feedback round follows up what first-round samples already showed of
        // the server: no probes.
        Ok(server) if opts.preflight && !opts.follows_up() => {
            Some(preflight::run(ep, entry, server, &opts.retry, &progress).await)
        }
        _ => None,
    };
    let secs = t0.elapsed().as_secs_f64();
    if opts.verbose {
        if opts.preflight && !opts.follows_up() {
            progress(format!("done in {secs:.1} s"));
        }
    } else if !opts.follows_up() {
        // The feedback round's line was said at planning: it asks the server only what
        // it serves (for cell.json), and a failure there is in the summary.
        let gets = gets.into_inner().unwrap_or_default();
        say(&format!(
            "preflight {name}: {}",
            preflight::one_line(&gets, p.as_ref(), secs)
        ));
    }
    (server, p)
}

/// One row as its collection starts: its summary so far and, unless its server did not answer
/// or its preflight stopped it, what its launcher needs.
fn start_row(
    (entry, cells, skipped, endpoint, prior, round): RowStart,
    probe: Result<Value, String>,
    preflight: Option<preflight::Preflight>,
) -> (ModelSummary, Option<Arc<ModelRun>>) {
    let mut run = None;
    let mut summary = ModelSummary {
        name: entry.name.clone(),
        cells_planned: cells.len() as u64,
        cells_skipped: skipped,
        cells_done: 0,
        samples: 0,
        errors: 0,
        not_completions: 0,
        retried: 0,
        attempts: 0,
        error_kinds: Default::default(),
        base_urls: entry.urls().iter().map(|u| config::redact_url(u)).collect(),
        api_key_env: entry.api_key_env.clone(),
        prior,
        seconds: 0.0,
        failure: None,
        warnings: Vec::new(),
        feedback: round,
    };
    if let Some(p) = &preflight {
        // Printed whatever --quiet says: a misconfigured server makes every sample of the
        // row wrong, which a script must hear about.
        for w in p.warnings() {
            eprintln!(
                "WARNING {}: {}",
                entry.name,
                crate::term::escape_controls(&w)
            );
        }
        // A stopped row's summary line says why already.
        if p.stop.is_none() {
            summary.warnings = p.warnings();
        }
    }
    match probe {
        Ok(_) if preflight.as_ref().is_some_and(|p| p.stop.is_some()) => {
            let why = preflight.and_then(|p| p.stop).unwrap_or_default();
            summary.failure = Some(format!("{why}; nothing was written for it"));
        }
        Ok(mut server) => {
            if let (Some(p), Some(o)) = (&preflight, server.as_object_mut()) {
                o.insert("preflight".into(), p.to_json());
            }
            let limit = Arc::new(Semaphore::new(entry.concurrency));
            run = Some(Arc::new(ModelRun {
                redacted: entry.redacted(),
                endpoint,
                cells,
                server,
                limit,
                tally: Tally::default(),
                entry,
            }));
        }
        Err(e) => {
            summary.failure = Some(format!(
                "no endpoint answered GET /models ({e}); nothing was written for it"
            ));
        }
    }
    (summary, run)
}

/// Sends every row's cells under the collection's limits, with progress, until done or
/// stopped; returns the shared state (its run id, stop and failure) and each row's seconds.
async fn run_rows(
    opts: &Options,
    models: &[Arc<ModelRun>],
    tasks: Vec<Task>,
    stop_tx: watch::Sender<bool>,
) -> (Arc<Shared>, Vec<f64>) {
    let total_samples: u64 = models
        .iter()
        .flat_map(|m| m.cells.iter())
        .map(|c| u64::from(c.need))
        .sum();
    let cells_total: u64 = models.iter().map(|m| m.cells.len() as u64).sum();
    let progress = crate::term::progress_bar(
        total_samples,
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} samples · {msg}",
        opts.quiet,
    );
    let jobs = opts
        .jobs
        .unwrap_or_else(|| models.iter().map(|m| m.entry.concurrency).sum::<usize>())
        .clamp(1, Semaphore::MAX_PERMITS);
    let shared = Arc::new(Shared {
        tasks,
        root: opts.runs.clone(),
        run_id: new_run_id(opts.shard),
        retry: opts.retry,
        global: Arc::new(Semaphore::new(jobs)),
        stop: stop_tx.subscribe(),
        fatal: Mutex::new(None),
        stopped_by_fatal: AtomicBool::new(false),
        progress,
        total_errors: AtomicU64::new(0),
        cells_done: AtomicU64::new(0),
        cells_total,
        started: Instant::now(),
    });
    // Off a terminal the bar is hidden: a plain line at a steady interval shows the work.
    let ticker = progress::Ticker::start(
        progress::every(opts.quiet, crate::term::stderr_is_terminal()),
        shared.started,
        {
            let shared = shared.clone();
            move || shared.counts(total_samples)
        },
    );
    let stop_tx = Arc::new(stop_tx);
    let launchers = models.iter().map(|m| {
        let m = m.clone();
        let shared = shared.clone();
        let stop_tx = stop_tx.clone();
        async move {
            let t0 = Instant::now();
            launch_model(&m, &shared, &stop_tx).await;
            t0.elapsed().as_secs_f64()
        }
    });
    let times = futures_util::future::join_all(launchers).await;
    drop(ticker);
    shared.progress.finish_and_clear();

    (shared, times)
}

/// The lines said before a collection starts: what planning could not count, and for a
/// follow-up round what it will send per row.
fn announce(opts: &Options, warnings: &[String], plans: &[RowPlan], say: &dyn Fn(&str)) {
    for w in warnings {
        say(&format!("warning: not counted: {w}"));
    }
    if opts.follows_up() {
        let asks = opts.asks();
        let word = if opts.feedback.is_some() {
            "feedback"
        } else {
            "review"
        };
        for (m, _, _, _, round) in plans {
            if let Some(r) = round {
                say(&format!("{word} {}: {}", m.name, r.plan_line(&asks)));
            }
        }
    }
}

/// Every row's server info and preflight at once (each row's requests one after the other),
/// or `None` when Ctrl-C came first.
async fn ask_servers(
    opts: &Options,
    infos: &[RowStart],
    say: &(dyn Fn(&str) + Sync),
    stop_tx: &watch::Sender<bool>,
) -> Option<Vec<(Result<Value, String>, Option<preflight::Preflight>)>> {
    // Server info and preflight, every row at once (each row's requests one after the other),
    // each line of progress naming its row. Ctrl-C stops it at once, like the cells.
    let mut stop = stop_tx.subscribe();
    let asked = async {
        futures_util::future::join_all(infos.iter().map(|(entry, cells, _, ep, _, _)| async move {
            if cells.is_empty() {
                return (Ok(Value::Null), None);
            }
            ask_server(opts, entry, ep, say).await
        }))
        .await
    };
    tokio::select! {
        biased;
        _ = stop.wait_for(|s| *s) => None,
        a = asked => Some(a),
    }
}

/// Runs a collection until done or until `stop` turns true (Ctrl-C).
pub async fn collect(opts: &Options, stop_tx: watch::Sender<bool>) -> Result<Report> {
    if !opts.follows_up() && (opts.k == 0 || (opts.k < MIN_K && !opts.allow_anecdote)) {
        bail!(
            "--k {} is too few samples per cell to give a rate (at least {MIN_K}); pass --allow-anecdote to collect anyway",
            opts.k
        );
    }
    let (entries, tasks) = selection(opts)?;
    let _lock =
        runs::lock(&opts.runs).with_context(|| format!("cannot lock {}", opts.runs.display()))?;

    // Plan: what each cell still needs.
    let mut plans: Vec<RowPlan> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    for m in entries {
        let (plan, w) = plan_row(opts, m, &tasks)?;
        plans.push(plan);
        warnings.extend(w);
    }

    let quiet = opts.quiet;
    // Every line here can quote a server (its model list, its errors): shown, never obeyed.
    let say = |s: &str| {
        if !quiet {
            eprintln!("{}", crate::term::escape_controls(s));
        }
    };
    announce(opts, &warnings, &plans, &say);

    // Endpoints (keys read now, so a missing key fails before any request) and server info.
    let mut models: Vec<Arc<ModelRun>> = Vec::new();
    let mut summaries: Vec<ModelSummary> = Vec::new();
    let mut infos = Vec::new();
    for (entry, cells, skipped, prior, round) in plans {
        let endpoint = Endpoint::new(&entry)?;
        infos.push((entry, cells, skipped, endpoint, prior, round));
    }
    let asked = ask_servers(opts, &infos, &say, &stop_tx).await;
    let Some(asked) = asked else {
        return Ok(Report {
            run_id: String::new(),
            models: Vec::new(),
            interrupted: true,
            fatal: None,
            seconds: 0.0,
            preflight_interrupted: true,
            follow_ups: opts.follows_up().then(|| (opts.asks(), opts.history)),
        });
    };
    let (probes, preflights): (Vec<_>, Vec<_>) = asked.into_iter().unzip();
    for ((info, probe), preflight) in infos.into_iter().zip(probes).zip(preflights) {
        let (summary, run) = start_row(info, probe, preflight);
        models.extend(run);
        summaries.push(summary);
    }

    let (shared, times) = run_rows(opts, &models, tasks, stop_tx).await;
    let interrupted = *shared.stop.borrow() && !shared.stopped_by_fatal.load(Ordering::SeqCst);
    for (m, secs) in models.iter().zip(times) {
        if let Some(s) = summaries.iter_mut().find(|s| s.name == m.entry.name) {
            s.take_tally(&m.tally, secs);
        }
    }
    let fatal = shared.fatal.lock().ok().and_then(|f| f.clone());
    Ok(Report {
        run_id: shared.run_id.clone(),
        models: summaries,
        interrupted,
        fatal,
        seconds: shared.started.elapsed().as_secs_f64(),
        preflight_interrupted: false,
        follow_ups: opts.follows_up().then(|| (opts.asks(), opts.history)),
    })
}

/// Starts every sample of one model's cells, in task order, within its limits; returns when
/// all of them have ended (or the collection was stopped and the in-flight ones dropped).
async fn launch_model(m: &Arc<ModelRun>, shared: &Arc<Shared>, stop_tx: &Arc<watch::Sender<bool>>) {
    let mut stop = shared.stop.clone();
    'cells: for plan in &m.cells {
        if *stop.borrow() {
            break;
        }
        let (bodies, cell) = match open_cell(m, shared, plan).await {
            Ok(Some(opened)) => opened,
            Ok(None) => continue,
            Err(why) => {
                shared.fail(why, stop_tx);
                break;
            }
        };
        for (i, item) in (0u32..).zip(&bodies) {
            // Wait for room under both limits, or for a stop.
            let permits = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break 'cells,
                p = async {
                    let a = m.limit.clone().acquire_owned().await;
                    let b = shared.global.clone().acquire_owned().await;
                    (a, b)
                } => p,
            };
            let (Ok(model_permit), Ok(global_permit)) = permits else {
                break 'cells;
            };
            let m = m.clone();
            let shared = shared.clone();
            let stop_tx = stop_tx.clone();
            let cell = cell.clone();
            let WorkItem { body, tag, parent } = item.clone();
            tokio::spawn(async move {
                let mut stop = shared.stop.clone();
                let header = parent.as_ref().map(|(_, h)| h.as_str());
                let ex = tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => None,
                    ex = m.endpoint.chat_tagged(&body, &tag, header, &shared.retry) => Some(ex),
                };
                if let Some(mut ex) = ex {
                    ex.meta.parent = parent.map(|(p, _)| p);
                    sample_done(&m, &shared, &stop_tx, &cell, i, body, ex).await;
                }
                // The cell goes first: when this is its last holder, dropping it removes an
                // unfinished run's folder, and that must happen before the permits tell the
                // launcher (and so the process) that this sample's work is over.
                drop(cell);
                drop(global_permit);
                drop(model_permit);
            });
        }
    }
    // Every sample task holds a model permit until it has written its files: taking them all
    // back means this model's work is over.
    let _ = m.limit.acquire_many(m.entry.concurrency as u32).await;
}

/// One planned run made ready to send: its requests, and its run folder open for writing.
/// `None` when it has nothing to send; an error is the collection's end, said.
async fn open_cell(
    m: &Arc<ModelRun>,
    shared: &Arc<Shared>,
    plan: &CellPlan,
) -> Result<Option<(Vec<WorkItem>, Arc<OpenCell>)>, String> {
    let task = &shared.tasks[plan.task];
    let built = {
        let (m, shared, plan) = (m.clone(), shared.clone(), plan.clone());
        tokio::task::spawn_blocking(move || {
            work_items(&shared, &m.entry.name, &m.entry.asking(), &plan)
        })
        .await
    };
    let bodies = match built {
        Ok(Ok((items, not_sent))) => {
            if let Ok(mut lines) = m.tally.not_sent.lock() {
                lines.extend(not_sent.into_iter().map(|l| format!("{}: {l}", task.id)));
            }
            items
        }
        Ok(Err(e)) => return Err(format!("cannot encode the request for {}: {e}", task.id)),
        Err(e) => return Err(format!("request task failed: {e}")),
    };
    if bodies.is_empty() {
        return Ok(None);
    }
    // A follow-up whose parent changed since the plan is left out of its run.
    let need = bodies.len() as u32;
    let dir = runs::cell_dir(&shared.root, &m.entry.name, &task.id).map_err(|e| e.to_string())?;
    let run_id = plan_run_id(&shared.run_id, plan);
    // The writer makes the cell's folders itself, refusing a symlink among them.
    let created = tokio::task::spawn_blocking(move || RunWriter::create(&dir, &run_id, need)).await;
    let writer = match created {
        Ok(Ok(w)) => w,
        Ok(Err(e)) => {
            return Err(format!(
                "cannot create a run folder for {} / {}: {e}",
                m.entry.name, task.id
            ));
        }
        Err(e) => return Err(format!("writer task failed: {e}")),
    };
    let cell = Arc::new(OpenCell {
        writer: Mutex::new(Some(writer)),
        remaining: AtomicU32::new(need),
        info: Mutex::new(Some(cell_record(m, shared, plan, need))),
        style: plan.feedback.as_ref().map(|f| f.ask),
    });
    Ok(Some((bodies, cell)))
}

/// The run's `cell.json` as it starts (its end time is written when its last sample is).
fn cell_record(m: &ModelRun, shared: &Shared, plan: &CellPlan, need: u32) -> CellInfo {
    let task = &shared.tasks[plan.task];
    CellInfo {
        format_version: runs::FORMAT_VERSION,
        callcheck_version: env!("CARGO_PKG_VERSION").to_string(),
        model: m.redacted.clone().into(),
        task: TaskRef {
            id: task.id.clone(),
            sha256: task.sha256.clone(),
        },
        k: need,
        run_id: plan_run_id(&shared.run_id, plan),
        server: m.server.clone().into(),
        started: clock::rfc3339_now(),
        ended: String::new(),
        kind: plan
            .feedback
            .as_ref()
            .map_or(RunKind::Samples, |f| f.ask.kind()),
        feedback: plan.feedback.as_ref().map(|f| FeedbackInfo {
            style: f.ask.style(),
            history: f.history,
        }),
    }
}

/// Writes one sample and, when it is the cell's last, finishes the run.
async fn sample_done(
    m: &Arc<ModelRun>,
    shared: &Arc<Shared>,
    stop_tx: &Arc<watch::Sender<bool>>,
    cell: &Arc<OpenCell>,
    i: u32,
    body: bytes::Bytes,
    ex: Exchange,
) {
    let counted = Counted::of(&ex);
    let out = SampleOut {
        request: body.to_vec(),
        response: ex.response,
        sse: ex.sse,
        meta: ex.meta,
    };
    match write_sample(cell, i, out).await {
        Ok(true) => {}
        Ok(false) => return,
        Err(why) => {
            shared.fail(why, stop_tx);
            return;
        }
    }
    counted.add_to(m, shared, cell.style);
    shared.tick();
    if cell.remaining.fetch_sub(1, Ordering::AcqRel) != 1 {
        return;
    }
    // The last sample of the cell: finish the run, unless a stop came first (an interrupted
    // collection leaves no new finished run but the ones already renamed).
    if *shared.stop.borrow() {
        return;
    }
    match finish_cell(cell).await {
        Ok(()) => {
            m.tally.cells.fetch_add(1, Ordering::Relaxed);
            shared.cells_done.fetch_add(1, Ordering::Relaxed);
        }
        Err(why) => shared.fail(why, stop_tx),
    }
}

/// What one sample adds to its row's tally, read from its exchange before it is written.
struct Counted {
    is_error: bool,
    retried: bool,
    attempts: u64,
    /// What a transport error ended with ([`error_kind`]).
    kind: Option<String>,
    /// An answer that is no completion (read as build reads it, so the summary can say what
    /// build will count as an error).
    not_completion: bool,
}

impl Counted {
    fn of(ex: &Exchange) -> Counted {
        let is_error = ex.is_error();
        Counted {
            is_error,
            retried: ex.meta.attempts.len() > 1,
            attempts: ex.meta.attempts.len().max(1) as u64,
            kind: is_error.then(|| error_kind(&ex.meta)),
            not_completion: !is_error
                && if ex.sse {
                    crate::score::wire::parse_stream(&ex.response).is_err()
                } else {
                    crate::score::wire::parse_body(&ex.response).is_err()
                },
        }
    }

    fn add_to(self, m: &ModelRun, shared: &Shared, style: Option<Ask>) {
        m.tally.samples.fetch_add(1, Ordering::Relaxed);
        m.tally.attempts.fetch_add(self.attempts, Ordering::Relaxed);
        if let Some(kind) = self.kind
            && let Ok(mut kinds) = m.tally.error_kinds.lock()
        {
            *kinds.entry(kind).or_default() += 1;
        }
        if self.is_error {
            m.tally.errors.fetch_add(1, Ordering::Relaxed);
            shared.total_errors.fetch_add(1, Ordering::Relaxed);
        }
        if self.not_completion {
            m.tally.not_completions.fetch_add(1, Ordering::Relaxed);
        }
        if self.retried {
            m.tally.retried.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(style) = style
            && let Ok(mut sent) = m.tally.follow_ups.lock()
        {
            *sent.entry(style).or_default() += 1;
        }
    }
}

/// Writes sample `i` into the cell's run (off the async threads); `false` when the run was
/// already closed.
async fn write_sample(cell: &Arc<OpenCell>, i: u32, out: SampleOut) -> Result<bool, String> {
    let c = cell.clone();
    let written = tokio::task::spawn_blocking(move || -> std::io::Result<bool> {
        let guard = c
            .writer
            .lock()
            .map_err(|_| std::io::Error::other("writer lock poisoned"))?;
        let Some(w) = guard.as_ref() else {
            return Ok(false);
        };
        w.write_sample(i, &out)?;
        Ok(true)
    });
    match written.await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(e)) => Err(format!("cannot write a sample: {e}")),
        Err(e) => Err(format!("writer task failed: {e}")),
    }
}

/// Finishes the cell's run: its end time in `cell.json`, the folder renamed into place.
async fn finish_cell(cell: &Arc<OpenCell>) -> Result<(), String> {
    let c = cell.clone();
    let finished = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        let w = c
            .writer
            .lock()
            .map_err(|_| std::io::Error::other("writer lock poisoned"))?
            .take();
        let info = c
            .info
            .lock()
            .map_err(|_| std::io::Error::other("cell lock poisoned"))?
            .take();
        if let (Some(w), Some(mut info)) = (w, info) {
            info.ended = clock::rfc3339_now();
            w.finish(&info)?;
        }
        Ok(())
    });
    match finished.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("cannot finish a run: {e}")),
        Err(e) => Err(format!("writer task failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_cut_by_callchecks_own_timeout_is_not_called_a_cut_body() {
        let meta = |error: &str| crate::transcript::Meta {
            status: Some(200),
            error: Some(error.into()),
            ..Default::default()
        };
        assert_eq!(
            error_kind(&meta(
                "timed out after 812 bytes of the body: kept as received"
            )),
            "HTTP 200, then callcheck's timeout (timeout_secs) reading the body"
        );
        assert_eq!(
            error_kind(&meta(
                "connection reset after 812 bytes of the body: kept as received"
            )),
            "HTTP 200 with a cut body"
        );
    }

    #[test]
    fn shards_parse_and_split_deterministically() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        for bad in ["0/4", "5/4", "1/0", "x/2", "3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        // Fixed values (sha256 of "model\ntask", first 8 bytes big-endian, mod N, plus 1): the
        // split must not change between versions or machines.
        assert_eq!(shard_of("qwen3-8b", "weather-parallel-3", 4), 3);
        assert_eq!(shard_of("a", "b", 7), 6);
        let mut counts = [0u32; 4];
        for t in 0..400 {
            counts[(shard_of("m", &format!("task-{t}"), 4) - 1) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 60), "{counts:?}");
    }

    #[test]
    fn run_ids_carry_time_shard_and_random_bits() {
        let a = new_run_id(Some(Shard { index: 2, count: 3 }));
        let b = new_run_id(Some(Shard { index: 2, count: 3 }));
        assert_ne!(a, b);
        let re = regex::Regex::new(r"^\d{8}T\d{6}Z-s2of3-[0-9a-f]{8}$").unwrap();
        assert!(re.is_match(&a), "{a}");
        assert!(crate::task::is_path_safe(&a));
    }
}
