//! Aggregation: scored samples → cells (model × task), per-model and per-tag totals with
//! intervals, label counts, measured reroll success and the HiTEC view. Pure: data in, a
//! [`Matrix`] out; the site renders it and the exports serialise it.

pub mod after_failure;
pub mod distinct;
pub mod latency;
pub mod pooled;
pub mod review;
pub mod routing;

use crate::hitec::{self, HitecError, Metrics};
use crate::stats::IntervalKind;
use crate::stats::{Interval, Reliability, Thresholds};
use crate::taxonomy::{Label, Outcome, Stage};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// Where a sample sits in `runs/`, and so where its permalink is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SampleKey {
    pub model: String,
    pub task: String,
    pub run: String,
    /// The sample folder name (`000`).
    pub sample: String,
}

impl SampleKey {
    /// The sample's run folder relative to the runs root: `<model>/<task>/<run>`, as
    /// [`crate::runs::RunDir::rel`] names it.
    pub fn run_folder(&self) -> String {
        format!("{}/{}/{}", self.model, self.task, self.run)
    }

    /// The permalink, relative to the site root: `t/<model>/<task>/<run>/<NNN>.html`. It is made
    /// of the four path segments only, so it never changes for the same sample.
    pub fn permalink(&self) -> String {
        self.permalink_parts().concat()
    }

    /// [`Self::permalink`] in pieces, for a writer that copies (or escapes) them in place.
    pub fn permalink_parts(&self) -> [&str; 9] {
        let k = self;
        [
            "t/", &k.model, "/", &k.task, "/", &k.run, "/", &k.sample, ".html",
        ]
    }

    /// Where the sample is shown: its section of its run's page, or with `fail`, its failure
    /// there. Links inside the site go here directly; the permalink redirects to the same place.
    pub fn section(&self, fail: bool) -> String {
        self.section_parts(fail).concat()
    }

    /// [`Self::section`] in pieces, for a writer that copies (or escapes) them in place.
    pub fn section_parts(&self, fail: bool) -> [&str; 8] {
        let k = self;
        let anchor = if fail {
            "/index.html#fail-"
        } else {
            "/index.html#s-"
        };
        ["t/", &k.model, "/", &k.task, "/", &k.run, anchor, &k.sample]
    }
}

/// One sample after scoring: the little that aggregation and the lists need. The full verdict
/// lives only as long as it takes to render the sample's own page.
#[derive(Debug, Clone)]
pub struct Scored {
    pub key: SampleKey,
    pub outcome: Outcome,
    pub stage: Option<Stage>,
    /// The verdict's detail, for lists and the CSV.
    pub detail: String,
    pub metrics: Metrics,
    pub hitec: Option<HitecError>,
    /// On a pass: whether the arguments equal the gold call's (value accuracy, apart from
    /// conformance).
    pub value_match: Option<bool>,
    /// The message carried prose beside its calls (HiTEC's "redundant information").
    pub extra_prose: bool,
    /// The task file changed since this sample was collected (sha256 differs from cell.json).
    pub task_changed: bool,
    /// Milliseconds to the first byte of the response body (meta.json), when recorded.
    pub ttfb_ms: Option<f64>,
    /// Milliseconds from sending to the last byte (meta.json), when recorded.
    pub total_ms: Option<f64>,
    /// `usage.completion_tokens` of the response, when the server reported it.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens` of the response, when the server reported it.
    pub prompt_tokens: Option<u64>,
    /// The HTTP status of a response that was not 2xx (a refusal, for a follow-up), from its
    /// `meta.json`.
    pub refused_status: Option<u16>,
    /// What the model answered, fingerprinted ([`distinct::fingerprint`]).
    pub response: u128,
    /// For a sample of a feedback round (SPEC §11): how the failure was fed back and which
    /// sample it follows up. Such samples are kept apart ([`Matrix::feedback`]): they never
    /// enter a rate.
    pub feedback: Option<Box<FeedbackOf>>,
    /// For a failure whose label has a mechanical repair ([`crate::score::mend`]): the outcome
    /// of the repaired answer, scored again.
    pub repaired: Option<Outcome>,
    /// A router in front of the server could tell this sample failed (SPEC §11): a transport
    /// error, or a failure decided without the task's expected calls
    /// ([`crate::score::Verdict::visible`]). Policies act on these only.
    pub visible: bool,
}

/// What a feedback sample answers (SPEC §11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackOf {
    pub style: crate::runs::FeedbackStyle,
    /// A review round's sample (HiTEC-ICL's second round, after any answer) rather than a
    /// feedback round's (after a failure).
    pub review: bool,
    /// How the failed answer went back in the follow-up's history (its run's `cell.json`).
    pub history: crate::runs::History,
    /// The failed first-round sample of the same model and task, as its `meta.json` names it;
    /// `None` when it names none.
    pub parent: Option<crate::transcript::ParentRef>,
}

impl FeedbackOf {
    /// The round's name where one word is shown: the feedback style, or `review`.
    pub fn name(&self) -> &'static str {
        if self.review {
            "review"
        } else {
            self.style.as_str()
        }
    }
}

impl Scored {
    /// A sample known only by where it sits and its outcome, every other field empty: a row of
    /// a published samples.csv, a synthetic benchmark sample, a test's.
    pub fn bare(key: SampleKey, outcome: Outcome) -> Scored {
        Scored {
            key,
            outcome,
            stage: None,
            detail: String::new(),
            metrics: Metrics::default(),
            hitec: None,
            value_match: None,
            extra_prose: false,
            task_changed: false,
            ttfb_ms: None,
            total_ms: None,
            completion_tokens: None,
            prompt_tokens: None,
            refused_status: None,
            response: 0,
            feedback: None,
            repaired: None,
            // Known by its outcome alone, a failure is taken as one a router sees, as every
            // failure was before callcheck told them apart; a scored sample says which it is.
            visible: outcome != Outcome::Pass,
        }
    }
}

/// What the site needs to know about a task.
#[derive(Debug, Clone)]
pub struct TaskInfo {
    pub id: String,
    pub title: String,
    pub tags: Vec<String>,
    /// The task lists acceptable values (`accept`) or was imported from BFCL: its cells, tags
    /// and models report value accuracy and BFCL-style accuracy beside the conformance rate.
    pub bfcl_scored: bool,
}

impl TaskInfo {
    /// The little of a task that aggregation and the summary pages need.
    pub fn of(t: &crate::task::Task) -> TaskInfo {
        TaskInfo {
            id: t.id.clone(),
            title: t.title.clone(),
            tags: t.tags.clone(),
            bfcl_scored: t.expected_calls().iter().any(|c| c.accept.is_some())
                || t.source.as_ref().is_some_and(|s| s.suite == "bfcl"),
        }
    }
}

/// One model × task cell: every sample of every run of that pair.
#[derive(Debug, Clone)]
pub struct Cell {
    pub model: String,
    pub task: String,
    /// Indices into [`Matrix::samples`], in key order.
    pub samples: Vec<usize>,
    /// Run ids, sorted.
    pub runs: Vec<String>,
    /// All samples, errors included.
    pub k: u64,
    /// Samples with a model outcome (pass or a label): the denominator.
    pub scored: u64,
    pub passes: u64,
    /// Transport errors: counted apart, never in a denominator.
    pub errors: u64,
    pub labels: BTreeMap<Label, u64>,
    pub interval: Option<Interval>,
    pub reliability: Reliability,
    /// Passes whose arguments equal the gold call's.
    pub value_matches: u64,
    /// Passes that had a gold value to compare with (none on tasks that expect no call).
    pub value_compared: u64,
    /// Some sample was collected for an earlier version of the task file.
    pub task_changed: bool,
    /// Distinct answers among the scored samples ([`distinct::fingerprint`]).
    pub distinct_responses: u64,
}

impl Cell {
    /// Two or more scored samples, all the same answer: one observation repeated, so the
    /// interval, which counts them as independent, overstates the evidence.
    pub fn identical(&self) -> bool {
        self.scored >= 2 && self.distinct_responses == 1
    }

    /// pass@1: the share of scored samples that passed.
    pub fn rate(&self) -> Option<f64> {
        (self.scored > 0).then(|| self.passes as f64 / self.scored as f64)
    }

    /// Some samples passed and some failed: the model can do it, not every time.
    pub fn flaky(&self) -> bool {
        self.passes > 0 && self.passes < self.scored
    }

    /// pass^k: every scored sample passed.
    pub fn all_passed(&self) -> bool {
        self.scored > 0 && self.passes == self.scored
    }

    /// Fewer than three scored samples: too few for the interval to say much.
    pub fn too_few(&self) -> bool {
        self.scored < 3
    }

    /// Samples BFCL's own scoring would count correct: a pass, and on a task with a value to
    /// compare, a value match too. A pass whose values are wrong is BFCL's "wrong value"; every
    /// labelled failure (`no_call`, `malformed_json`…) is wrong as well, as BFCL counts it.
    pub fn bfcl_style_correct(&self) -> u64 {
        self.passes
            .saturating_sub(self.value_compared.saturating_sub(self.value_matches))
    }
}

/// Value accuracy and BFCL-style accuracy pooled over one model's cells of tasks that report
/// them ([`TaskInfo::bfcl_scored`]), each with the by-task interval of [`pooled`]: the k samples
/// of a task share its difficulty, so the task is the unit, as for the conformance rate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValuePooled {
    /// The conformance rate over the same tasks, to read the two beside it.
    pub conformance: pooled::Pooled,
    /// Value matches (`passes`) over passes with a value to compare (`scored`), by task.
    pub value: pooled::Pooled,
    /// BFCL-style correct samples (`passes`) over scored samples (`scored`), by task.
    pub bfcl_style: pooled::Pooled,
}

impl ValuePooled {
    /// Pools the cells (those of tasks that do not report values are left out by the caller).
    pub fn of<'a>(cells: impl IntoIterator<Item = &'a Cell>) -> ValuePooled {
        let cells: Vec<&Cell> = cells.into_iter().collect();
        ValuePooled {
            value: pooled::pool_counts(cells.iter().map(|c| (c.value_matches, c.value_compared))),
            bfcl_style: pooled::pool_counts(
                cells.iter().map(|c| (c.bfcl_style_correct(), c.scored)),
            ),
            conformance: pooled::pool(cells),
        }
    }
}

/// Totals over a set of cells (a model's row, or one tag of it).
#[derive(Debug, Clone, Default)]
pub struct Total {
    pub cells: u64,
    pub scored: u64,
    pub passes: u64,
    pub errors: u64,
    /// Interval of the pooled rate (passes / scored over all the cells).
    pub interval: Option<Interval>,
    /// Interval of pass^k: cells where every sample passed, over rated cells.
    pub all_passed_interval: Option<Interval>,
    /// Cells with at least one scored sample.
    pub rated_cells: u64,
    /// Cells whose every scored sample passed (pass^k).
    pub all_passed_cells: u64,
    /// Cells where some samples passed and some failed.
    pub flaky_cells: u64,
    /// Sum of the cells' rates, for the mean pass@1.
    rate_sum: f64,
}

impl Total {
    fn add(&mut self, c: &Cell) {
        self.cells += 1;
        self.scored += c.scored;
        self.passes += c.passes;
        self.errors += c.errors;
        if let Some(r) = c.rate() {
            self.rated_cells += 1;
            self.rate_sum += r;
        }
        if c.all_passed() {
            self.all_passed_cells += 1;
        }
        if c.flaky() {
            self.flaky_cells += 1;
        }
    }

    fn finish(&mut self, kind: IntervalKind) {
        self.interval = crate::stats::interval::interval(kind, self.passes, self.scored);
        self.all_passed_interval =
            crate::stats::interval::interval(kind, self.all_passed_cells, self.rated_cells);
    }

    /// The pooled rate: passes over scored samples.
    pub fn rate(&self) -> Option<f64> {
        (self.scored > 0).then(|| self.passes as f64 / self.scored as f64)
    }

    /// Mean pass@1 over the cells (each task weighs the same, whatever its k).
    pub fn pass_at_1(&self) -> Option<f64> {
        (self.rated_cells > 0).then(|| self.rate_sum / self.rated_cells as f64)
    }

    /// The share of cells where all k samples passed.
    pub fn pass_all_k(&self) -> Option<f64> {
        (self.rated_cells > 0).then(|| self.all_passed_cells as f64 / self.rated_cells as f64)
    }

    /// The verdict on the pooled rate, at the build's thresholds.
    pub fn reliability(&self, at: Thresholds) -> Reliability {
        at.verdict(self.interval.as_ref())
    }
}

/// Measured reroll success for one model and label: over the samples that failed with the label,
/// how often another sample of the same cell passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reroll {
    /// Samples that failed with the label.
    pub failures: u64,
    /// Other scored samples of those samples' cells (the rerolls that were in fact drawn).
    pub trials: u64,
    /// Of those, the ones that passed.
    pub successes: u64,
}

impl Reroll {
    pub fn rate(&self) -> Option<f64> {
        (self.trials > 0).then(|| self.successes as f64 / self.trials as f64)
    }
}

/// One model's row and everything its page shows.
#[derive(Debug, Clone)]
pub struct ModelView {
    pub name: String,
    pub total: Total,
    /// Per tag, sorted by tag.
    pub tags: BTreeMap<String, Total>,
    pub labels: BTreeMap<Label, u64>,
    /// Counts per HiTEC error type, indexed by its number.
    pub hitec: [u64; 8],
    pub metrics: Metrics,
    pub reroll: BTreeMap<Label, Reroll>,
    /// Per tag, pass@1 pooled over the tag's tasks with an interval by task (the models × tags
    /// table), sorted by tag.
    pub pooled: BTreeMap<String, pooled::Pooled>,
    /// The same over all of the model's tasks.
    pub pooled_total: pooled::Pooled,
    /// Time to first byte, total time and completion tokens over the model's scored samples.
    pub latency: latency::Latency,
    /// The same per tag, sorted by tag.
    pub latency_by_tag: BTreeMap<String, latency::Latency>,
    /// Per tag with at least one task that reports values ([`TaskInfo::bfcl_scored`]): value
    /// accuracy and BFCL-style accuracy over those tasks, sorted by tag.
    pub value_by_tag: BTreeMap<String, ValuePooled>,
    /// The same over all such tasks of the model; `None` when it ran none.
    pub value_total: Option<ValuePooled>,
}

/// Everything the site shows, computed once.
#[derive(Debug, Clone)]
pub struct Matrix {
    pub method: IntervalKind,
    /// The thresholds every verdict of this matrix (its cells' and the pooled rates') is taken at.
    pub thresholds: Thresholds,
    /// Sorted by name.
    pub models: Vec<ModelView>,
    /// Every task of the corpus, sorted by id (a task without runs is an empty column).
    pub tasks: Vec<TaskInfo>,
    /// Sorted by key.
    pub samples: Vec<Scored>,
    /// The samples of feedback rounds (SPEC §11), sorted by key: scored against their task and
    /// linked like every sample, but in no cell, rate, table or comparison ([`routing`] reads
    /// them).
    pub feedback: Vec<Scored>,
    pub cells: BTreeMap<(String, String), Cell>,
    /// Every tag of the corpus, sorted.
    pub tags: Vec<String>,
}

impl Matrix {
    /// The index in `samples` of the first-round sample a feedback sample follows up: same model
    /// and task, the run and sample its `meta.json` names. `None` when the parent is not among
    /// this build's samples (or `of` is not a feedback sample).
    pub fn parent_index(&self, of: &Scored) -> Option<usize> {
        let parent = of.feedback.as_deref()?.parent.as_ref()?;
        self.samples
            .binary_search_by(|s| {
                let k = &s.key;
                (
                    k.model.as_str(),
                    k.task.as_str(),
                    k.run.as_str(),
                    k.sample.as_str(),
                )
                    .cmp(&(
                        of.key.model.as_str(),
                        of.key.task.as_str(),
                        parent.run.as_str(),
                        parent.sample.as_str(),
                    ))
            })
            .ok()
    }

    pub fn cell(&self, model: &str, task: &str) -> Option<&Cell> {
        self.cells.get(&(model.to_string(), task.to_string()))
    }

    pub fn task(&self, id: &str) -> Option<&TaskInfo> {
        self.tasks
            .binary_search_by(|t| t.id.as_str().cmp(id))
            .ok()
            .map(|i| &self.tasks[i])
    }

    /// Outcome counts over every first-round sample: (passes, failures, errors).
    pub fn outcome_counts(&self) -> (u64, u64, u64) {
        count_outcomes(&self.samples)
    }

    /// Outcome counts over the follow-ups of feedback and review rounds, kept apart from the
    /// first round's: a follow-up the server refused is a transport error of its own round.
    pub fn follow_up_counts(&self) -> (u64, u64, u64) {
        count_outcomes(&self.feedback)
    }
}

/// (passes, failures, errors) among `samples`.
fn count_outcomes(samples: &[Scored]) -> (u64, u64, u64) {
    let mut c = (0, 0, 0);
    for s in samples {
        match s.outcome {
            Outcome::Pass => c.0 += 1,
            Outcome::Fail(_) => c.1 += 1,
            Outcome::Error => c.2 += 1,
        }
    }
    c
}

/// Builds the matrix with the default thresholds ([`aggregate_at`]).
pub fn aggregate(samples: Vec<Scored>, tasks: Vec<TaskInfo>, kind: IntervalKind) -> Matrix {
    aggregate_at(samples, tasks, kind, Thresholds::default())
}

/// What [`aggregate_at`] sums over one row's samples, apart from its cells.
struct RowTotals {
    latency: latency::Latency,
    latency_by_tag: BTreeMap<String, latency::Latency>,
    hitec: [u64; 8],
    metrics: Metrics,
}

impl RowTotals {
    /// From one row's samples, in key order (each task's are consecutive).
    fn of(row: &[Scored], tags_of: &BTreeMap<&str, &[String]>) -> RowTotals {
        let mut all = latency::Accumulator::default();
        let mut by_tag: BTreeMap<&str, latency::Accumulator> = BTreeMap::new();
        let (mut hitec, mut metrics) = ([0u64; 8], Metrics::default());
        for cell in row.chunk_by(|a, b| a.key.task == b.key.task) {
            let tags = tags_of
                .get(cell[0].key.task.as_str())
                .copied()
                .unwrap_or_default();
            for s in cell {
                all.add(s);
                for tag in tags {
                    by_tag.entry(tag.as_str()).or_default().add(s);
                }
                if let Some(h) = s.hitec {
                    hitec[h.number() as usize] += 1;
                }
                if s.extra_prose && s.outcome.is_scored() {
                    hitec[HitecError::RedundantInformation.number() as usize] += 1;
                }
                metrics = hitec::total([&metrics, &s.metrics]);
            }
        }
        RowTotals {
            latency: all.finish(),
            latency_by_tag: by_tag
                .into_iter()
                .map(|(t, a)| (t.to_string(), a.finish()))
                .collect(),
            hitec,
            metrics,
        }
    }
}

/// Builds the matrix, judging every verdict at `thresholds`. The order of `samples` does not
/// matter: they are sorted by key first, so the result does not depend on how scoring was
/// scheduled.
pub fn aggregate_at(
    samples: Vec<Scored>,
    tasks: Vec<TaskInfo>,
    kind: IntervalKind,
    thresholds: Thresholds,
) -> Matrix {
    // A feedback round answers a failure with that failure in its prompt: a conditional draw,
    // not another sample of the cell, so it is kept out of every rate.
    // (Most collections have none: then nothing is moved.)
    let (mut feedback, mut samples): (Vec<Scored>, Vec<Scored>) =
        if samples.iter().any(|s| s.feedback.is_some()) {
            samples.into_iter().partition(|s| s.feedback.is_some())
        } else {
            (Vec::new(), samples)
        };
    feedback.sort_by(|a, b| a.key.cmp(&b.key));
    samples.sort_by(|a, b| a.key.cmp(&b.key));
    let mut tasks = tasks;
    tasks.sort_by(|a, b| a.id.cmp(&b.id));
    let tags: Vec<String> = tasks
        .iter()
        .flat_map(|t| t.tags.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let cells = cells_of(&samples, kind, thresholds);
    let tags_of: BTreeMap<&str, &[String]> = tasks
        .iter()
        .map(|t| (t.id.as_str(), t.tags.as_slice()))
        .collect();
    let mut models = rows_of(&cells, &tags_of);
    // Each row's latency, HiTEC counts and metrics, from its samples (consecutive: they are
    // sorted by key), one row per core.
    let rows: Vec<(&str, RowTotals)> = samples
        .chunk_by(|a, b| a.key.model == b.key.model)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|row| (row[0].key.model.as_str(), RowTotals::of(row, &tags_of)))
        .collect();
    for (model, t) in rows {
        if let Some(m) = models.get_mut(model) {
            m.latency = t.latency;
            m.latency_by_tag = t.latency_by_tag;
            m.hitec = t.hitec;
            m.metrics = t.metrics;
        }
    }
    let bfcl_scored: BTreeSet<&str> = tasks
        .iter()
        .filter(|t| t.bfcl_scored)
        .map(|t| t.id.as_str())
        .collect();
    for m in models.values_mut() {
        m.total.finish(kind);
        for t in m.tags.values_mut() {
            t.finish(kind);
        }
        pool_row(m, &cells, &tags_of, &bfcl_scored);
    }
    Matrix {
        method: kind,
        thresholds,
        models: models.into_values().collect(),
        tasks,
        samples,
        feedback,
        cells,
        tags,
    }
}

impl Cell {
    fn empty(model: &str, task: &str, capacity: usize) -> Cell {
        Cell {
            model: model.to_string(),
            task: task.to_string(),
            samples: Vec::with_capacity(capacity),
            runs: Vec::new(),
            k: 0,
            scored: 0,
            passes: 0,
            errors: 0,
            labels: BTreeMap::new(),
            interval: None,
            reliability: Reliability::Uncertain,
            value_matches: 0,
            value_compared: 0,
            task_changed: false,
            distinct_responses: 0,
        }
    }

    /// Counts sample `s`, the `i`th of the matrix's samples.
    fn add(&mut self, i: usize, s: &Scored) {
        self.samples.push(i);
        if self.runs.last() != Some(&s.key.run) {
            self.runs.push(s.key.run.clone());
        }
        self.k += 1;
        self.task_changed |= s.task_changed;
        match s.outcome {
            Outcome::Pass => {
                self.scored += 1;
                self.passes += 1;
                match s.value_match {
                    Some(true) => {
                        self.value_matches += 1;
                        self.value_compared += 1;
                    }
                    Some(false) => self.value_compared += 1,
                    None => {}
                }
            }
            Outcome::Fail(l) => {
                self.scored += 1;
                *self.labels.entry(l).or_default() += 1;
            }
            Outcome::Error => self.errors += 1,
        }
    }
}

/// The cells of `samples` (sorted by key), each with its interval and verdict.
fn cells_of(
    samples: &[Scored],
    kind: IntervalKind,
    thresholds: Thresholds,
) -> BTreeMap<(String, String), Cell> {
    let mut cells: BTreeMap<(String, String), Cell> = BTreeMap::new();
    // The samples are sorted, so each cell's are consecutive: its entry is made once.
    let mut start = 0;
    for cell in samples.chunk_by(|a, b| a.key.model == b.key.model && a.key.task == b.key.task) {
        let first = &cell[0].key;
        let c = cells
            .entry((first.model.clone(), first.task.clone()))
            .or_insert_with(|| Cell::empty(&first.model, &first.task, cell.len()));
        for (i, s) in (start..).zip(cell) {
            c.add(i, s);
        }
        start += cell.len();
    }
    for c in cells.values_mut() {
        let mut responses: Vec<u128> = c
            .samples
            .iter()
            .filter_map(|&i| samples.get(i))
            .filter(|s| s.outcome != Outcome::Error)
            .map(|s| s.response)
            .collect();
        responses.sort_unstable();
        responses.dedup();
        c.distinct_responses = responses.len() as u64;
        c.interval = crate::stats::interval::interval(kind, c.passes, c.scored);
        c.reliability = thresholds.verdict(c.interval.as_ref());
    }
    cells
}

/// Each row's totals, per-tag totals, label counts and reroll counts, from its cells.
fn rows_of(
    cells: &BTreeMap<(String, String), Cell>,
    tags_of: &BTreeMap<&str, &[String]>,
) -> BTreeMap<String, ModelView> {
    let mut models: BTreeMap<String, ModelView> = BTreeMap::new();
    for c in cells.values() {
        let m = models.entry(c.model.clone()).or_insert_with(|| ModelView {
            name: c.model.clone(),
            total: Total::default(),
            tags: BTreeMap::new(),
            labels: BTreeMap::new(),
            hitec: [0; 8],
            metrics: Metrics::default(),
            reroll: BTreeMap::new(),
            pooled: BTreeMap::new(),
            pooled_total: pooled::Pooled::default(),
            latency: latency::Latency::default(),
            latency_by_tag: BTreeMap::new(),
            value_by_tag: BTreeMap::new(),
            value_total: None,
        });
        m.total.add(c);
        for tag in tags_of.get(c.task.as_str()).copied().unwrap_or_default() {
            m.tags.entry(tag.clone()).or_default().add(c);
        }
        for (l, n) in &c.labels {
            *m.labels.entry(*l).or_default() += n;
            let r = m.reroll.entry(*l).or_default();
            r.failures += n;
            // Each failure's rerolls are the cell's other scored samples; none of them is the
            // failure itself, so all of the cell's passes are among them.
            r.trials += n * (c.scored - 1);
            r.successes += n * c.passes;
        }
    }
    models
}

/// A row's pooled rates (these tasks, SPEC §9) and value accuracy, per tag and over all its
/// tasks.
fn pool_row(
    m: &mut ModelView,
    cells: &BTreeMap<(String, String), Cell>,
    tags_of: &BTreeMap<&str, &[String]>,
    bfcl_scored: &BTreeSet<&str>,
) {
    let row = cells
        .range((m.name.clone(), String::new())..)
        .take_while(|(k, _)| k.0 == m.name);
    let mut by_tag: BTreeMap<&str, Vec<&Cell>> = BTreeMap::new();
    let mut all = Vec::new();
    for (_, c) in row {
        all.push(c);
        for tag in tags_of.get(c.task.as_str()).copied().unwrap_or_default() {
            by_tag.entry(tag.as_str()).or_default().push(c);
        }
    }
    let reports = |c: &Cell| bfcl_scored.contains(c.task.as_str());
    m.value_by_tag = by_tag
        .iter()
        .filter(|(_, cs)| cs.iter().any(|c| reports(c)))
        .map(|(tag, cs)| {
            let cs = cs.iter().filter(|c| reports(c)).copied();
            (tag.to_string(), ValuePooled::of(cs))
        })
        .collect();
    m.value_total = all
        .iter()
        .any(|c| reports(c))
        .then(|| ValuePooled::of(all.iter().filter(|c| reports(c)).copied()));
    m.pooled = by_tag
        .into_iter()
        .map(|(tag, cs)| (tag.to_string(), pooled::pool(cs)))
        .collect();
    m.pooled_total = pooled::pool(all);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(model: &str, task: &str, n: &str, outcome: Outcome) -> Scored {
        let key = SampleKey {
            model: model.into(),
            task: task.into(),
            run: "r1".into(),
            sample: n.into(),
        };
        Scored {
            // A distinct answer per sample name.
            response: n.bytes().fold(0, |h, b| h * 257 + u128::from(b)),
            ..Scored::bare(key, outcome)
        }
    }

    fn tasks() -> Vec<TaskInfo> {
        vec![
            TaskInfo {
                id: "a".into(),
                title: "A".into(),
                tags: vec!["x".into()],
                bfcl_scored: false,
            },
            TaskInfo {
                id: "b".into(),
                title: "B".into(),
                tags: vec!["x".into(), "y".into()],
                bfcl_scored: true,
            },
        ]
    }

    #[test]
    fn errors_stay_out_of_the_denominator_and_reroll_success_is_measured() {
        let samples = vec![
            s("m", "a", "000", Outcome::Pass),
            s("m", "a", "001", Outcome::Fail(Label::Truncation)),
            s("m", "a", "002", Outcome::Error),
            s("m", "a", "003", Outcome::Pass),
            s("m", "b", "000", Outcome::Fail(Label::Truncation)),
            s("m", "b", "001", Outcome::Fail(Label::NoCall)),
            s("m", "b", "002", Outcome::Fail(Label::NoCall)),
            s("m", "b", "003", Outcome::Fail(Label::NoCall)),
            s("m", "b", "004", Outcome::Fail(Label::NoCall)),
        ];
        let m = aggregate(samples, tasks(), IntervalKind::Wilson);
        let a = m.cell("m", "a").unwrap();
        assert_eq!((a.k, a.scored, a.passes, a.errors), (4, 3, 2, 1));
        assert!(a.flaky());
        assert!(!a.all_passed());
        // 0/3 is not enough to call a cell broken (Wilson upper bound 0.56), but it is surely
        // below 0.9: unreliable; 0/5 is broken (0.43).
        assert_eq!(
            aggregate(
                vec![
                    s("m", "a", "0", Outcome::Fail(Label::NoCall)),
                    s("m", "a", "1", Outcome::Fail(Label::NoCall)),
                    s("m", "a", "2", Outcome::Fail(Label::NoCall)),
                ],
                tasks(),
                IntervalKind::Wilson
            )
            .cell("m", "a")
            .unwrap()
            .reliability,
            Reliability::Unreliable
        );
        let b = m.cell("m", "b").unwrap();
        assert_eq!(b.reliability, Reliability::Broken);
        assert_eq!(b.interval.unwrap().lower, 0.0);
        let mv = &m.models[0];
        // Truncation in a: 2 other scored samples, both passed; in b: 4 others, none passed.
        assert_eq!(
            mv.reroll[&Label::Truncation],
            Reroll {
                failures: 2,
                trials: 6,
                successes: 2
            }
        );
        assert_eq!(
            mv.reroll[&Label::NoCall],
            Reroll {
                failures: 4,
                trials: 16,
                successes: 0
            }
        );
        assert_eq!((mv.total.scored, mv.total.passes), (8, 2));
        assert_eq!(mv.tags["y"].cells, 1);
        assert_eq!(mv.tags["x"].cells, 2);
        assert_eq!(mv.total.pass_all_k(), Some(0.0));
        assert!((mv.total.pass_at_1().unwrap() - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn input_order_does_not_matter() {
        let mut samples = vec![
            s("m2", "b", "001", Outcome::Pass),
            s("m1", "a", "000", Outcome::Fail(Label::WrongTool)),
            s("m1", "a", "001", Outcome::Pass),
            s("m2", "b", "000", Outcome::Pass),
        ];
        let one = aggregate(samples.clone(), tasks(), IntervalKind::Wilson);
        samples.reverse();
        let two = aggregate(samples, tasks(), IntervalKind::Wilson);
        let keys = |m: &Matrix| m.samples.iter().map(|s| s.key.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&one), keys(&two));
        assert_eq!(one.models[0].name, "m1");
        assert_eq!(one.cell("m2", "b").unwrap().samples, vec![2, 3]);
        assert!(one.cell("m2", "b").unwrap().too_few());
    }

    #[test]
    fn verdicts_follow_the_thresholds_the_matrix_was_built_at() {
        // 5/5 in one cell (Wilson [0.57, 1]): uncertain at 0.9, reliable at 0.5; 0/5 (upper
        // 0.43) is broken at either.
        let samples: Vec<Scored> = (0..5)
            .map(|i| s("m", "a", &format!("{i:03}"), Outcome::Pass))
            .chain((0..5).map(|i| s("m", "b", &format!("{i:03}"), Outcome::Fail(Label::NoCall))))
            .collect();
        let at_default = aggregate(samples.clone(), tasks(), IntervalKind::Wilson);
        assert_eq!(at_default.thresholds, Thresholds::default());
        assert_eq!(
            at_default.cell("m", "a").unwrap().reliability,
            Reliability::Uncertain
        );
        let half = Thresholds::new(0.5).unwrap();
        let at_half = aggregate_at(samples, tasks(), IntervalKind::Wilson, half);
        assert_eq!(at_half.thresholds, half);
        assert_eq!(
            at_half.cell("m", "a").unwrap().reliability,
            Reliability::Reliable
        );
        assert_eq!(
            at_half.cell("m", "b").unwrap().reliability,
            Reliability::Broken
        );
        // Tag x pools a and b: 5/10, whose interval straddles 0.5 and sits below 0.9.
        let x = &at_half.models[0].tags["x"];
        assert_eq!(x.reliability(half), Reliability::Uncertain);
        assert_eq!(
            x.reliability(Thresholds::default()),
            Reliability::Unreliable
        );
    }

    #[test]
    fn value_figures_pool_only_the_tasks_that_report_them() {
        let v = |n: &str, o: Outcome, m: Option<bool>| Scored {
            value_match: m,
            ..s("m", "b", n, o)
        };
        let samples = vec![
            // a: no accept, not BFCL's: its passes count nowhere in the value figures.
            s("m", "a", "000", Outcome::Pass),
            s("m", "a", "001", Outcome::Pass),
            // b: 2 value matches, 1 wrong value, 1 no_call, 1 transport error.
            v("000", Outcome::Pass, Some(true)),
            v("001", Outcome::Pass, Some(true)),
            v("002", Outcome::Pass, Some(false)),
            v("003", Outcome::Fail(Label::NoCall), None),
            v("004", Outcome::Error, None),
        ];
        let m = aggregate(samples, tasks(), IntervalKind::Wilson);
        let b = m.cell("m", "b").unwrap();
        assert_eq!(b.bfcl_style_correct(), 2);
        let mv = &m.models[0];
        let total = mv.value_total.as_ref().unwrap();
        assert_eq!((total.value.passes, total.value.scored), (2, 3));
        assert_eq!((total.bfcl_style.passes, total.bfcl_style.scored), (2, 4));
        assert_eq!((total.conformance.passes, total.conformance.scored), (3, 4));
        assert_eq!(total.conformance.errors, 1);
        assert_eq!(total.value.tasks, 1);
        // Tag x holds a and b, y only b: both pool b alone.
        assert_eq!(mv.value_by_tag.keys().collect::<Vec<_>>(), ["x", "y"]);
        assert_eq!(mv.value_by_tag["x"], *total);
        // With one task the interval about it is Clopper–Pearson on its samples.
        let exact = crate::stats::interval::interval(IntervalKind::ClopperPearson, 2, 4).unwrap();
        let got = total.bfcl_style.interval.unwrap();
        assert!((got.lower - exact.lower).abs() < 1e-9 && (got.upper - exact.upper).abs() < 1e-9);
        // A model that ran only a reports none.
        let only_a = aggregate(
            vec![s("m", "a", "000", Outcome::Pass)],
            tasks(),
            IntervalKind::Wilson,
        );
        assert!(only_a.models[0].value_total.is_none());
        assert!(only_a.models[0].value_by_tag.is_empty());
    }
}
