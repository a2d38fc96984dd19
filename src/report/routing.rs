//! The router's evidence (SPEC §11): for each row and label, how often each action a caller
//! can take after a failure made the call pass — reroll (ask again), repair (fix it
//! mechanically), feedback (send the failure back, per style), fallback (ask another row) — and
//! what each whole policy would have achieved on these tasks, at what cost. Pure: a [`Matrix`]
//! in, a [`Routing`] out; `data/routing.json` and `routing.html` render it.
//!
//! The unit of every policy's success rate is the task, as on the rest of the site (SPEC §9):
//! each task's expected success under the policy, averaged with equal weights over the tasks,
//! and an interval for that mean ([`these_tasks`]).

use super::after_failure::{self, Action as Measured, TaskCounts};
use super::{Matrix, Scored};
use crate::runs::{FeedbackStyle, History};
use crate::stats::interval::Interval;
use crate::taxonomy::{Label, Outcome, Retry};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One measured action: `passes` of `n` trials.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measure {
    pub n: u64,
    pub passes: u64,
    pub interval: Option<Interval>,
}

impl Measure {
    /// The measure over the tasks' parts: `passes` of `n` trials, and the interval of
    /// [`after_failure::over_tasks`] (these tasks, the samples within a task the random part).
    /// The parts are gathered in `buf` (emptied first): a row measures thousands of label,
    /// action and fallback row combinations, each over up to every task, and one buffer serves
    /// them all.
    fn over(buf: &mut Vec<TaskCounts>, tasks: impl Iterator<Item = TaskCounts>) -> Measure {
        buf.clear();
        buf.extend(tasks);
        let tasks = &buf[..];
        match after_failure::over_tasks(tasks) {
            Some((passes, n, _, interval)) => Measure {
                n,
                passes,
                interval: Some(interval),
            },
            None => Measure::default(),
        }
    }

    pub fn rate(&self) -> Option<f64> {
        (self.n > 0).then(|| self.passes as f64 / self.n as f64)
    }
}

/// The follow-ups of one style and history after one label: how many answered with a pass,
/// and how many the server refused.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeedbackMeasure {
    /// Every follow-up counts, a refused one as a trial that did not pass (SPEC §11).
    pub measure: Measure,
    /// Follow-ups that got no usable answer, by HTTP status (`None`: no status at all, the
    /// connection failed or timed out).
    pub refused: BTreeMap<Option<u16>, u64>,
}

impl FeedbackMeasure {
    pub fn refused_total(&self) -> u64 {
        self.refused.values().sum()
    }
}

/// What each action did after one row failed with one label. Every measure reads the
/// *visible* failures only (SPEC §11): a router never learns of a silent one, so it takes no
/// action after it.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelRouting {
    pub label: Label,
    /// First-round samples of the row that failed with the label.
    pub failures: u64,
    /// Those of them a router in front of the server could see ([`Scored::visible`]).
    pub visible: u64,
    /// Another sample of the same cell passed: each visible failure against each of its
    /// cell's other scored samples.
    pub reroll: Measure,
    /// The same after every failure with the label, visible or not: the cell's own reroll
    /// statistic (matrix.json's `reroll_success`, the model page), not a router's.
    pub reroll_all: Measure,
    /// The label's mechanical repair, applied to each visible failure and scored again; `None`
    /// for a label with no mechanical repair.
    pub repair: Option<Measure>,
    /// Follow-ups whose parent failed visibly with the label, per style and history (only the
    /// pairs the row was followed up with); a refused follow-up counts in `n`, not in `passes`.
    pub feedback: BTreeMap<(FeedbackStyle, History), FeedbackMeasure>,
    /// Per other row: each visible failure against each of that row's scored samples of the
    /// same task.
    pub fallback: Vec<(String, Measure)>,
}

/// The router's policies (SPEC §11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Policy {
    /// One request; a failure is final.
    Single,
    /// On any failure, ask the same row once more.
    Reroll,
    /// On any failure, send the error back once (`error` style).
    Feedback,
    /// On a failure, apply the label's mechanical repair (no request).
    Repair,
    /// On any failure, ask the best other row.
    Fallback,
    /// On a failure, the label's default action (SPEC §2), each measured.
    ByLabel,
    /// Per visible label (and transport error), the measured action or chain of two with the
    /// highest success: chosen on one half of the tasks, scored on the other, and the halves
    /// swapped ([`RowContext::choose`]), so that its figure is not inflated by the choice.
    Best,
}

/// The number of policies: the length of every per-policy array.
const POLICIES: usize = Policy::ALL.len();

/// [`Policy::Best`]'s place in [`Policy::ALL`]: its rules are per fold, not [`Policy::rules`]'.
const BEST: usize = 6;

impl Policy {
    pub const ALL: [Policy; 7] = [
        Policy::Single,
        Policy::Reroll,
        Policy::Feedback,
        Policy::Repair,
        Policy::Fallback,
        Policy::ByLabel,
        Policy::Best,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Single => "single",
            Policy::Reroll => "reroll",
            Policy::Feedback => "feedback",
            Policy::Repair => "repair",
            Policy::Fallback => "fallback",
            Policy::ByLabel => "by-label",
            Policy::Best => "best",
        }
    }

    /// The policy as data, for a row whose best other row is `fallback` (its index among the
    /// matrix's rows; `None` when there is no other row). [`Policy::Best`]'s rules are
    /// measured, per fold of the row's tasks ([`RowContext::choose`]): here, none.
    pub fn rules(self, fallback: Option<usize>) -> Rules {
        let one = |a: Action| Some(Chain::one(a));
        let fall = move || fallback.map(|b| Chain::one(Action::Fallback(b)));
        match self {
            Policy::Single => Rules::default(),
            Policy::Reroll => Rules::each(|_| one(Action::Reroll)),
            Policy::Feedback => Rules::each(|t| match t {
                // Nothing was answered, so there is nothing to send back.
                Trigger::Transport => None,
                Trigger::Failed(_) => one(Action::Feedback {
                    style: FeedbackStyle::Error,
                    history: POLICY_HISTORY,
                }),
            }),
            Policy::Repair => Rules::each(|t| match t {
                Trigger::Failed(l) if crate::score::mend::Mend::for_label(l).is_some() => {
                    one(Action::Repair)
                }
                _ => None,
            }),
            Policy::Fallback => Rules::each(|_| fall()),
            // §2's defaults, the blog's advice: each label's retry semantics.
            Policy::ByLabel => Rules::each(|t| match t {
                Trigger::Transport => one(Action::Reroll),
                Trigger::Failed(l) => match l.retry() {
                    Retry::Reroll => one(Action::Reroll),
                    Retry::Repair => one(Action::Repair),
                    Retry::Fallback => fall(),
                },
            }),
            Policy::Best => Rules::default(),
        }
    }

    /// In words, for pages.
    pub fn describe(self) -> &'static str {
        match self {
            Policy::Single => "one request, a failure is final",
            Policy::Reroll => "on any failure, ask the same row once more",
            Policy::Feedback => "on any failure, send the error back once (error style)",
            Policy::Repair => {
                "on a failure, repair mechanically where the label allows (no request)"
            }
            Policy::Fallback => "on any failure, ask the best other row once",
            Policy::ByLabel => {
                "on a failure, the label's default action (reroll, repair or fallback)"
            }
            Policy::Best => {
                "per visible label, the measured action or chain of two that passed most (chosen on half of the tasks, scored on the other half)"
            }
        }
    }
}

/// What a router saw go wrong, the key of a policy's rules: a visible failure with a label,
/// or a request with no usable answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Trigger {
    Failed(Label),
    /// A transport error. No policy of a build's "given an answer" figures meets one (those
    /// count only samples with an answer); the key is there so that a policy says, as data,
    /// what it would do.
    Transport,
}

impl Trigger {
    /// Every trigger, in taxonomy order, the transport error last.
    pub fn all() -> impl Iterator<Item = Trigger> {
        Label::ALL
            .into_iter()
            .map(Trigger::Failed)
            .chain(std::iter::once(Trigger::Transport))
    }
}

/// One thing a router can do after a visible failure (SPEC §11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    /// Ask the same row once more.
    Reroll,
    /// Apply the label's mechanical repair (no request); nothing for a label without one.
    Repair,
    /// Send the failure back once, in this style, with this history.
    Feedback {
        style: FeedbackStyle,
        history: History,
    },
    /// Ask another row once: its index in the matrix's rows.
    Fallback(usize),
}

/// What a policy does after one trigger: one action, and optionally a second one taken when
/// the first ends in another visible failure (a chain of at most two, SPEC §11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chain {
    pub first: Action,
    pub then: Option<Action>,
}

impl Chain {
    pub fn one(first: Action) -> Chain {
        Chain { first, then: None }
    }
}

/// A policy as data: per trigger, the chain it takes; a trigger it has no chain for is final.
/// Every named policy is one of these, and one function evaluates them all
/// ([`RowContext::chain`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    pub chains: BTreeMap<Trigger, Chain>,
}

impl Rules {
    /// Every trigger takes the chain `of(trigger)` gives, or none.
    fn each(of: impl Fn(Trigger) -> Option<Chain>) -> Rules {
        Rules {
            chains: Trigger::all().filter_map(|t| Some((t, of(t)?))).collect(),
        }
    }

    pub fn chain(&self, trigger: Trigger) -> Option<&Chain> {
        self.chains.get(&trigger)
    }
}

/// One policy of one row over a set of tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyResult {
    pub policy: Policy,
    /// Tasks with a scored first-round sample: the unit of the rate.
    pub tasks: u64,
    /// Mean over those tasks of the task's expected success under the policy.
    pub rate: Option<f64>,
    pub interval: Option<Interval>,
    /// The same end to end: over every request of the tasks, one with no usable answer a
    /// visible failure the policy's action for [`Trigger::Transport`] applies to.
    pub end_to_end: Option<f64>,
    pub end_to_end_interval: Option<Interval>,
    /// Expected requests per call, mean over the tasks.
    pub requests: f64,
    /// Expected completion tokens per call (from the samples' `usage`), when any were reported.
    pub tokens: Option<f64>,
    /// Expected prompt tokens per call (`usage.prompt_tokens`: a follow-up's prompt carries
    /// the whole conversation), when any were reported.
    pub prompt_tokens: Option<f64>,
    /// Expected total milliseconds per call (requests one after the other), when recorded.
    pub latency_ms: Option<f64>,
    /// The median and 95th percentile of a call's total milliseconds, each task weighing the
    /// same: a call's time is its first request's and, when the policy acted, the action's
    /// expected time (a follow-up's mean time, a chain's expected second request).
    pub latency_p50: Option<f64>,
    pub latency_p95: Option<f64>,
    /// Expected price of one successful call, when the row declares `[model.price]` (and the
    /// fallback row, if the policy asks one, has the same price): the expected tokens of a call
    /// at that price, over the policy's success given an answer ([`priced`]).
    pub cost: Option<f64>,
    /// Failures whose action had no measurement of its own (no other sample of the cell to
    /// reroll, no feedback sample, no sample of the fallback row on the task) and were given
    /// the row's measured rate for the label, or counted as failed when there was none.
    pub imputed: u64,
    /// The other row a fallback goes to (the `fallback` and `by-label` policies).
    pub fallback_to: Option<String>,
}

/// The routing evidence of one row.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRouting {
    pub model: String,
    /// Feedback samples counted in a measure (their parent fails under the current checkers).
    pub feedback_samples: u64,
    /// Feedback samples whose parent now passes: kept, linked, counted nowhere.
    pub parent_passes: u64,
    /// Feedback samples whose parent is not among this build's samples, or was a transport
    /// error: counted nowhere.
    pub orphans: u64,
    /// Feedback samples whose parent failed *silently* (collected before callcheck told
    /// failures apart): a router would never have sent them, so they are counted nowhere.
    pub silent_parents: u64,
    /// Counted feedback samples that got no usable answer (refused, or no response): each a
    /// trial that did not pass.
    pub feedback_errors: u64,
    /// First-round failures of the row, and how many of them a router could see.
    pub failures: u64,
    pub visible: u64,
    /// Labels the row failed with, in taxonomy order.
    pub labels: Vec<LabelRouting>,
    /// Every policy over all of the row's tasks, in [`Policy::ALL`] order.
    pub policies: Vec<PolicyResult>,
    /// Whether one of `policies` wins ([`Decision`]).
    pub decision: Option<Decision>,
    /// The same per tag, sorted by tag.
    pub by_tag: BTreeMap<String, Vec<PolicyResult>>,
    pub tag_decisions: BTreeMap<String, Decision>,
    /// What [`Policy::Best`] deploys: per trigger, the chain chosen end to end on all of the
    /// row's tasks (`data/router.json`).
    pub router: Choice,
    /// The ceiling of the cost–quality plane: the best policy per task, end to end.
    pub oracle: Option<Oracle>,
}

impl ModelRouting {
    /// The policy with the highest expected success among `policies`; ties go to fewer
    /// requests, then to the earlier policy in [`Policy::ALL`]. Whether it *wins* is
    /// [`Decision::winner`]'s to say.
    pub fn leader(policies: &[PolicyResult]) -> Option<&PolicyResult> {
        policies
            .iter()
            .filter(|p| p.rate.is_some())
            .min_by(|a, b| ModelRouting::ranking(a, b))
    }

    /// The leader's order: higher success first, then fewer requests, then [`Policy::ALL`]'s.
    fn ranking(a: &PolicyResult, b: &PolicyResult) -> std::cmp::Ordering {
        let (ra, rb) = (a.rate.unwrap_or(0.0), b.rate.unwrap_or(0.0));
        rb.total_cmp(&ra)
            .then(a.requests.total_cmp(&b.requests))
            .then(a.policy.cmp(&b.policy))
    }
}

/// The routing evidence of every row, sorted by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Routing {
    pub models: Vec<ModelRouting>,
    /// The rows' prices ([`priced`]), by row name.
    pub prices: BTreeMap<String, Price>,
}

impl Routing {
    /// Feedback samples of the whole collection whose parent now passes.
    pub fn parent_passes(&self) -> u64 {
        self.models.iter().map(|m| m.parent_passes).sum()
    }

    pub fn model(&self, name: &str) -> Option<&ModelRouting> {
        self.models.iter().find(|m| m.model == name)
    }
}

/// A row's price (`[model.price]` in callcheck.toml, recorded in its runs' `cell.json`), in
/// currency units per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl Price {
    /// The price of `prompt` input and `completion` output tokens.
    pub fn of(&self, prompt: f64, completion: f64) -> f64 {
        (prompt * self.input_per_mtok + completion * self.output_per_mtok) / 1e6
    }
}

impl PolicyResult {
    /// The expected price of one successful call at `price`: a call's expected prompt and
    /// completion tokens, priced, over the policy's success. `None` without token counts or
    /// without a success.
    pub fn cost_per_success(&self, price: Price) -> Option<f64> {
        let rate = self.rate.filter(|r| *r > 0.0)?;
        let (prompt, completion) = (self.prompt_tokens?, self.tokens?);
        Some(price.of(prompt, completion) / rate)
    }
}

/// Prices every policy of `r` whose requests all go to rows of one known price: a row's own
/// policies at its price; a policy that falls back only when the fallback row costs the same
/// (its tokens are not told apart by row). `prices` is by row name.
pub fn priced(r: &mut Routing, prices: &BTreeMap<String, Price>) {
    r.prices = prices.clone();
    for mr in &mut r.models {
        let Some(&own) = prices.get(&mr.model) else {
            continue;
        };
        let policies = mr
            .policies
            .iter_mut()
            .chain(mr.by_tag.values_mut().flatten());
        for p in policies {
            let same = match &p.fallback_to {
                Some(b) => prices.get(b) == Some(&own),
                None => true,
            };
            p.cost = same.then(|| p.cost_per_success(own)).flatten();
        }
    }
}

/// Per (model, task): the first-round cell's passes, scored samples and visible failures, and
/// the means of its scored samples' completion tokens and total time.
#[derive(Debug, Clone, Copy, Default)]
struct CellStat {
    passes: u64,
    scored: u64,
    /// Every sample, transport errors included.
    k: u64,
    visible_fails: u64,
    tokens: Option<f64>,
    /// `usage.prompt_tokens`, mean over the scored samples that reported it.
    prompt: Option<f64>,
    latency: Option<f64>,
}

impl CellStat {
    fn rate(&self) -> Option<f64> {
        (self.scored > 0).then(|| self.passes as f64 / self.scored as f64)
    }

    /// The cell end to end: every request a trial, one with no usable answer a visible
    /// failure (SPEC §11).
    fn end_to_end(self) -> CellStat {
        CellStat {
            scored: self.k,
            visible_fails: self.visible_fails + (self.k - self.scored),
            ..self
        }
    }
}

/// The history a follow-up of the `feedback` policy carries: as produced, what OpenAI's SDK,
/// LangChain and pydantic-ai send today, so the policy measures what a framework gets.
const POLICY_HISTORY: History = History::AsProduced;

/// What became of one row's feedback samples.
#[derive(Debug, Clone, Copy, Default)]
struct FeedbackCounts {
    counted: u64,
    parent_passes: u64,
    orphans: u64,
    silent_parents: u64,
    errors: u64,
}

/// A feedback sample as a policy uses it: passed, failed where a router sees it, and its cost.
#[derive(Debug, Clone, Copy)]
struct Child {
    pass: bool,
    fails_visibly: bool,
    tokens: Option<f64>,
    prompt: Option<f64>,
    latency: Option<f64>,
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = xs.fold((0.0, 0u64), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

/// Per cell, what the policies and the fallback measure read. Looked up, never iterated: no
/// order of it reaches the output.
fn cell_stats(m: &Matrix) -> HashMap<(&str, &str), CellStat> {
    let mut stats = HashMap::with_capacity(m.cells.len());
    for ((model, task), c) in &m.cells {
        let of = || {
            c.samples
                .iter()
                .filter_map(|&i| m.samples.get(i))
                .filter(|s| s.outcome.is_scored())
        };
        stats.insert(
            (model.as_str(), task.as_str()),
            CellStat {
                passes: c.passes,
                scored: c.scored,
                k: c.k.max(c.scored),
                visible_fails: of()
                    .filter(|s| s.visible && matches!(s.outcome, Outcome::Fail(_)))
                    .count() as u64,
                tokens: mean(of().filter_map(|s| s.completion_tokens.map(|t| t as f64))),
                prompt: mean(of().filter_map(|s| s.prompt_tokens.map(|t| t as f64))),
                latency: mean(of().filter_map(|s| s.total_ms)),
            },
        );
    }
    stats
}

/// A measure keyed by row, parent's label, style and history.
type FeedbackKey<'a> = (&'a str, Label, FeedbackStyle, History);

/// The feedback samples of the whole collection, each tied to its parent: what the feedback
/// measures and the `feedback` actions read.
#[derive(Default)]
struct FollowUps<'a> {
    /// Per parent (an index into the first-round samples), style and history.
    children: BTreeMap<(usize, FeedbackStyle, History), Vec<Child>>,
    counts: BTreeMap<&'a str, FeedbackCounts>,
    /// Follow-ups and their passes.
    measure: BTreeMap<FeedbackKey<'a>, (u64, u64)>,
    /// Follow-ups with no usable answer, by HTTP status.
    refusals: BTreeMap<FeedbackKey<'a>, BTreeMap<Option<u16>, u64>>,
}

impl<'a> FollowUps<'a> {
    fn of(m: &'a Matrix) -> FollowUps<'a> {
        let mut out = FollowUps::default();
        for f in &m.feedback {
            let Some(of) = f.feedback.as_deref() else {
                continue;
            };
            // A review follows up every answer, not a failure: measured in its own section.
            if of.review {
                continue;
            }
            let c = out.counts.entry(f.key.model.as_str()).or_default();
            let Some(pi) = m.parent_index(f) else {
                c.orphans += 1;
                continue;
            };
            let label = match m.samples[pi].outcome {
                Outcome::Pass => {
                    c.parent_passes += 1;
                    continue;
                }
                Outcome::Error => {
                    c.orphans += 1;
                    continue;
                }
                Outcome::Fail(l) => l,
            };
            // A router never learns of a silent failure, so it sends nothing after one: such a
            // follow-up (collected before callcheck told them apart) measures no router.
            if !m.samples[pi].visible {
                c.silent_parents += 1;
                continue;
            }
            c.counted += 1;
            let key = (f.key.model.as_str(), label, of.style, of.history);
            // A follow-up with no usable answer is a trial that did not pass: what the router
            // got.
            if f.outcome == Outcome::Error {
                c.errors += 1;
                *out.refusals
                    .entry(key)
                    .or_default()
                    .entry(f.refused_status)
                    .or_default() += 1;
            }
            let pass = f.outcome == Outcome::Pass;
            let e = out.measure.entry(key).or_default();
            e.0 += 1;
            e.1 += u64::from(pass);
            out.children
                .entry((pi, of.style, of.history))
                .or_default()
                .push(Child {
                    pass,
                    fails_visibly: !pass && f.visible,
                    tokens: f.completion_tokens.map(|t| t as f64),
                    prompt: f.prompt_tokens.map(|t| t as f64),
                    latency: f.total_ms,
                });
        }
        out
    }
}

/// What every row's evidence reads of the whole collection.
struct Collection<'a> {
    m: &'a Matrix,
    stats: HashMap<(&'a str, &'a str), CellStat>,
    follow_ups: FollowUps<'a>,
    tags_of: BTreeMap<&'a str, &'a [String]>,
    /// Per task, every row's cell record, in the rows' order: a row's fallbacks read the other
    /// rows' records of each of its tasks, and this takes one lookup per task, not one per
    /// task and other row.
    by_task: HashMap<&'a str, Vec<Option<CellStat>>>,
}

/// Computes the routing evidence of `m` (its first-round samples and its feedback samples).
pub fn routing(m: &Matrix) -> Routing {
    let all = Collection::of(m);
    // Each row's evidence is computed on its own (the rows' fallbacks read the others' cell
    // records only), in the rows' order. Rows with only feedback samples (no first-round
    // sample) have nothing to route.
    let models = m
        .models
        .par_iter()
        .map(|mv| Row::of(&all, mv).routing())
        .collect();
    Routing {
        models,
        prices: BTreeMap::new(),
    }
}

impl<'a> Collection<'a> {
    fn of(m: &'a Matrix) -> Collection<'a> {
        let stats = cell_stats(m);
        let row_of: HashMap<&str, usize> = m
            .models
            .iter()
            .enumerate()
            .map(|(i, mv)| (mv.name.as_str(), i))
            .collect();
        let mut by_task: HashMap<&str, Vec<Option<CellStat>>> = HashMap::new();
        for ((model, task), st) in &stats {
            if let Some(&i) = row_of.get(model) {
                by_task
                    .entry(*task)
                    .or_insert_with(|| vec![None; m.models.len()])[i] = Some(*st);
            }
        }
        Collection {
            m,
            follow_ups: FollowUps::of(m),
            tags_of: m
                .tasks
                .iter()
                .map(|t| (t.id.as_str(), t.tags.as_slice()))
                .collect(),
            by_task,
            stats,
        }
    }
}

/// One row, as its evidence reads it.
struct Row<'a> {
    all: &'a Collection<'a>,
    mv: &'a super::ModelView,
    name: &'a str,
    /// The row's cells, by task.
    cells: Vec<(&'a str, &'a super::Cell)>,
    /// The other rows, with their place in the rows' order.
    others: Vec<(usize, &'a str)>,
    /// Per task of the row (in `cells`' order), its scored first-round samples: the per-label
    /// measures are functions of them (and of the other rows' cells), task by task.
    samples: Vec<Vec<usize>>,
    /// Per task, the other rows' scored samples and passes (a fallback's trials), in
    /// `others`' order (task `t`'s at `t * others.len()`): looked up once per row, not once
    /// per label and action.
    other_cells: Vec<Option<(u64, u64)>>,
}

impl<'a> Row<'a> {
    fn of(all: &'a Collection<'a>, mv: &'a super::ModelView) -> Row<'a> {
        let m = all.m;
        let name = mv.name.as_str();
        let cells: Vec<(&str, &super::Cell)> = m
            .cells
            .range((name.to_string(), String::new())..)
            .take_while(|(k, _)| k.0 == name)
            .map(|(k, c)| (k.1.as_str(), c))
            .collect();
        let others: Vec<(usize, &str)> = m
            .models
            .iter()
            .enumerate()
            .map(|(i, o)| (i, o.name.as_str()))
            .filter(|(_, o)| *o != name)
            .collect();
        let samples = cells
            .iter()
            .map(|(_, c)| {
                c.samples
                    .iter()
                    .copied()
                    .filter(|&i| m.samples.get(i).is_some_and(|s| s.outcome.is_scored()))
                    .collect()
            })
            .collect();
        let mut row = Row {
            all,
            mv,
            name,
            cells,
            others,
            samples,
            other_cells: Vec::new(),
        };
        let mut other_cells = Vec::with_capacity(row.cells.len() * row.others.len());
        other_cells.extend((0..row.cells.len()).flat_map(|t| {
            let row = &row;
            row.others.iter().map(move |&(b, _)| {
                row.record(t, b)
                    .filter(|s| s.scored > 0)
                    .map(|s| (s.scored, s.passes))
            })
        }));
        row.other_cells = other_cells;
        row
    }

    /// Row `b`'s record of this row's task `t`.
    fn record(&self, t: usize, b: usize) -> Option<&'a CellStat> {
        self.all
            .by_task
            .get(self.cells[t].0)
            .and_then(|r| r.get(b))
            .and_then(Option::as_ref)
    }

    /// Task `t`'s scored first-round samples.
    fn scored(&self, t: usize) -> impl Iterator<Item = &'a Scored> + '_ {
        let m = self.all.m;
        self.samples[t]
            .iter()
            .filter_map(move |&i| m.samples.get(i))
    }

    /// Task `t`'s visible failures with `label`: what every measure conditions on.
    fn visible_of(&self, t: usize, label: Label) -> u64 {
        self.scored(t)
            .filter(|s| s.visible && s.outcome == Outcome::Fail(label))
            .count() as u64
    }

    fn routing(&self) -> ModelRouting {
        let mut buf = Vec::new();
        let labels = self
            .mv
            .labels
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(&label, &failures)| self.label(&mut buf, label, failures))
            .collect();
        let fallback_to = self.best_fallback();
        let rp = self.policies(fallback_to);
        let fc = self
            .all
            .follow_ups
            .counts
            .get(self.name)
            .copied()
            .unwrap_or_default();
        let (failures, visible) = (0..self.cells.len())
            .flat_map(|t| self.scored(t))
            .filter(|s| matches!(s.outcome, Outcome::Fail(_)))
            .fold((0, 0), |(f, v), s| (f + 1, v + u64::from(s.visible)));
        ModelRouting {
            model: self.name.to_string(),
            feedback_samples: fc.counted,
            parent_passes: fc.parent_passes,
            orphans: fc.orphans,
            silent_parents: fc.silent_parents,
            feedback_errors: fc.errors,
            failures,
            visible,
            labels,
            policies: rp.policies,
            decision: rp.decision,
            by_tag: rp.by_tag,
            tag_decisions: rp.tag_decisions,
            router: rp.router,
            oracle: rp.oracle,
        }
    }

    /// What each action did after the row's visible failures with `label` (`failures` in all,
    /// visible or not).
    fn label(&self, buf: &mut Vec<TaskCounts>, label: Label, failures: u64) -> LabelRouting {
        let m = self.all.m;
        // Only the tasks that failed visibly with the label have a trial: their index in the
        // row, and each scored first-round sample as the measures read it (feedback children
        // counted per style below).
        type Failed = (usize, Vec<(usize, after_failure::Sample)>);
        let failed: Vec<Failed> = (0..self.cells.len())
            .filter(|&t| self.visible_of(t, label) > 0)
            .map(|t| {
                let a = self.samples[t]
                    .iter()
                    .filter_map(|&i| {
                        let s = m.samples.get(i)?;
                        let sample = after_failure::Sample {
                            failed_with_label: s.visible && s.outcome == Outcome::Fail(label),
                            pass: s.outcome == Outcome::Pass,
                            repaired: s.repaired == Some(Outcome::Pass),
                            children: 0,
                            child_passes: 0,
                        };
                        Some((i, sample))
                    })
                    .collect();
                (t, a)
            })
            .collect();
        // Each task's samples counted by kind: what every action but feedback reads.
        let plain: Vec<Vec<(after_failure::Sample, u64)>> = failed
            .iter()
            .map(|(_, a)| after_failure::kinds(a.iter().map(|(_, s)| *s)))
            .collect();
        let mut measure = |action: Measured| {
            Measure::over(
                buf,
                plain
                    .iter()
                    .map(|a| TaskCounts::of_kinds(action, a, (0, 0))),
            )
        };
        let reroll = measure(Measured::Reroll);
        let repair = crate::score::mend::Mend::for_label(label).map(|_| measure(Measured::Repair));
        // The other row's samples of each task; a task it did not run is no trial of the
        // fallback.
        let fallback = self
            .others
            .iter()
            .enumerate()
            .map(|(o, &(_, b))| {
                let tasks = failed.iter().zip(&plain).filter_map(|((t, _), a)| {
                    let other = self.other_cells[t * self.others.len() + o]?;
                    Some(TaskCounts::of_kinds(Measured::Fallback, a, other))
                });
                (b.to_string(), Measure::over(buf, tasks))
            })
            .collect();
        LabelRouting {
            label,
            failures,
            visible: (0..self.cells.len())
                .map(|t| self.visible_of(t, label))
                .sum(),
            reroll_all: self.reroll_all(buf, label),
            reroll,
            repair,
            feedback: self.feedback(buf, label, &failed),
            fallback,
        }
    }

    /// Asking again after every failure with the label, seen or not: the cell's own statistic
    /// (SPEC §2's measured reroll success in matrix.json), apart from what a router gets.
    fn reroll_all(&self, buf: &mut Vec<TaskCounts>, label: Label) -> Measure {
        let tasks = self
            .cells
            .iter()
            .enumerate()
            .filter(|(_, (_, c))| c.labels.get(&label).is_some_and(|n| *n > 0))
            .map(|(t, _)| {
                let a = after_failure::kinds(self.scored(t).map(|s| after_failure::Sample {
                    failed_with_label: s.outcome == Outcome::Fail(label),
                    pass: s.outcome == Outcome::Pass,
                    repaired: false,
                    children: 0,
                    child_passes: 0,
                }));
                TaskCounts::of_kinds(Measured::Reroll, &a, (0, 0))
            });
        Measure::over(buf, tasks)
    }

    /// A follow-up's measure after `label`, per style and history the row was followed up
    /// with; `failed` are the tasks with a visible failure, each sample as the measures read it.
    fn feedback(
        &self,
        buf: &mut Vec<TaskCounts>,
        label: Label,
        failed: &[(usize, Vec<(usize, after_failure::Sample)>)],
    ) -> BTreeMap<(FeedbackStyle, History), FeedbackMeasure> {
        let f = &self.all.follow_ups;
        let pairs: std::collections::BTreeSet<(FeedbackStyle, History)> = f
            .measure
            .keys()
            .filter(|(m, _, _, _)| *m == self.name)
            .map(|(_, _, st, h)| (*st, *h))
            .collect();
        pairs
            .into_iter()
            .map(|(st, h)| {
                let tasks = failed.iter().map(|(_, a)| {
                    let a: Vec<after_failure::Sample> = a
                        .iter()
                        .map(|(i, s)| {
                            let (children, child_passes) =
                                f.children.get(&(*i, st, h)).map_or((0, 0), |cs| {
                                    (cs.len() as u64, cs.iter().filter(|c| c.pass).count() as u64)
                                });
                            after_failure::Sample {
                                children,
                                child_passes,
                                ..*s
                            }
                        })
                        .collect();
                    TaskCounts::new(Measured::Feedback, &a, &[])
                });
                let measure = FeedbackMeasure {
                    measure: Measure::over(buf, tasks),
                    refused: f
                        .refusals
                        .get(&(self.name, label, st, h))
                        .cloned()
                        .unwrap_or_default(),
                };
                ((st, h), measure)
            })
            .collect()
    }

    /// The best other row, chosen end to end: the most expected successes over this row's
    /// visible failures and requests with no usable answer (a failure the router does not see
    /// is not sent on), each sent to a row whose own requests (its transport errors included)
    /// pass at its rate. Its index among the rows.
    fn best_fallback(&self) -> Option<(usize, &'a str)> {
        self.others
            .iter()
            .map(|&(b, name)| {
                let gain: f64 = (0..self.cells.len())
                    .map(|t| {
                        let fails = self
                            .scored(t)
                            .filter(|s| s.visible && matches!(s.outcome, Outcome::Fail(_)))
                            .count() as u64
                            + self.cells[t].1.errors;
                        let rate = self.record(t, b).and_then(|r| r.end_to_end().rate());
                        fails as f64 * rate.unwrap_or(0.0)
                    })
                    .sum();
                (b, name, gain)
            })
            .min_by(|a, b| b.2.total_cmp(&a.2).then(a.1.cmp(b.1)))
            .map(|(b, name, _)| (b, name))
    }

    /// The actions [`Policy::Best`] may chain for this row: a reroll, the repair, feedback in
    /// every style and history the row was followed up with, and a fallback to every other row.
    fn actions(&self, row_rates: &BTreeMap<(Label, FeedbackStyle, History), f64>) -> Vec<Action> {
        let followed: std::collections::BTreeSet<(FeedbackStyle, History)> =
            row_rates.keys().map(|(_, st, h)| (*st, *h)).collect();
        [Action::Reroll, Action::Repair]
            .into_iter()
            .chain(
                followed
                    .into_iter()
                    .map(|(style, history)| Action::Feedback { style, history }),
            )
            .chain(self.others.iter().map(|&(b, _)| Action::Fallback(b)))
            .collect()
    }

    /// Every policy over all of the row's tasks and per tag, whether one of them wins, the
    /// router `best` deploys and the oracle's ceiling.
    fn policies(&self, fallback_to: Option<(usize, &'a str)>) -> RowPolicies {
        let (per_task, router, feedback_measured) = self.evaluate(fallback_to);
        let pool = |tasks: &[&TaskPolicies]| {
            pool_all(tasks, fallback_to.map(|(_, b)| b), feedback_measured)
        };
        let all: Vec<&TaskPolicies> = per_task.iter().map(|(_, t)| t).collect();
        let mut tag_tasks: BTreeMap<&str, Vec<&TaskPolicies>> = BTreeMap::new();
        for (task, t) in &per_task {
            for tag in self.all.tags_of.get(task).copied().unwrap_or_default() {
                tag_tasks.entry(tag.as_str()).or_default().push(t);
            }
        }
        let (mut by_tag, mut tag_decisions) = (BTreeMap::new(), BTreeMap::new());
        for (tag, ts) in tag_tasks {
            let (policies, decision) = pool(&ts);
            by_tag.insert(tag.to_string(), policies);
            if let Some(d) = decision {
                tag_decisions.insert(tag.to_string(), d);
            }
        }
        let (policies, decision) = pool(&all);
        RowPolicies {
            policies,
            decision,
            by_tag,
            tag_decisions,
            router,
            oracle: oracle(&all, feedback_measured),
        }
    }

    /// Each task under every policy (given an answer and end to end), `best`'s choice on all
    /// tasks, and whether the `feedback` policy is measured at all.
    #[allow(clippy::type_complexity)]
    fn evaluate(
        &self,
        fallback_to: Option<(usize, &'a str)>,
    ) -> (Vec<(&'a str, TaskPolicies)>, Choice, bool) {
        let f = &self.all.follow_ups;
        let name = self.name;
        // The row's feedback rate per label and style, looked up for every failure that has
        // no follow-up of its own.
        let row_rates: BTreeMap<(Label, FeedbackStyle, History), f64> = f
            .measure
            .iter()
            .filter(|((m, _, _, _), (n, _))| *m == name && *n > 0)
            .map(|((_, l, st, h), (n, p))| ((*l, *st, *h), *p as f64 / *n as f64))
            .collect();
        let stats = &self.all.stats;
        let of_row = |f: fn(&CellStat) -> Option<f64>| {
            mean(
                self.cells
                    .iter()
                    .filter_map(|(t, _)| stats.get(&(name, *t)).and_then(f)),
            )
        };
        let ctx = |end_to_end| RowContext {
            end_to_end,
            m: self.all.m,
            name,
            stats,
            children: &f.children,
            fallback_to: fallback_to.map(|(_, b)| b),
            rules: Policy::ALL.map(|p| p.rules(fallback_to.map(|(b, _)| b))),
            best: Default::default(),
            rows: &self.all.m.models,
            row_rates: &row_rates,
            reroll_rates: &self.mv.reroll,
            model_tokens: of_row(|s| s.tokens),
            model_prompt: of_row(|s| s.prompt),
            model_latency: of_row(|s| s.latency),
        };
        // The row's tasks with a request, in two folds (alternating in task order): `best`
        // chooses its chains on one and is scored on the other. Given an answer, a task
        // without a scored sample has no trial (`pool_policy` leaves it out); end to end,
        // every task with a request has.
        let tasks: Vec<(&str, &super::Cell, usize)> = self
            .cells
            .iter()
            .filter(|(_, c)| c.k > 0)
            .enumerate()
            .map(|(j, &(task, c))| (task, c, j % 2))
            .collect();
        let actions = self.actions(&row_rates);
        let (mut given, mut end_to_end) = (ctx(false), ctx(true));
        let mut router = Choice::default();
        for c in [&mut given, &mut end_to_end] {
            let [fold0, fold1, all] = c.choose(&tasks, &actions);
            c.best = [fold1.rules(), fold0.rules()];
            // What a deployed router takes: chosen end to end, on every task.
            if c.end_to_end {
                router = all;
            }
        }
        // Each task's per-policy outcome, then pooled over all tasks and per tag.
        // (Sized up front: grown by doubling, a row of hundreds of tasks was copied into
        // fresh memory again and again, and fresh memory is what a rebuild waited on most.)
        let mut per_task: Vec<(&str, TaskPolicies)> = Vec::with_capacity(tasks.len());
        per_task.extend(tasks.iter().map(|&(task, c, fold)| {
            let both = (given.task(task, c, fold), end_to_end.task(task, c, fold));
            (task, both)
        }));
        // Without a single error-style feedback sample of the row, the feedback policy is not
        // measured at all: it is shown as such, not as "every failure stays failed".
        let feedback_measured = row_rates
            .keys()
            .any(|(_, st, h)| *st == FeedbackStyle::Error && *h == POLICY_HISTORY);
        (per_task, router, feedback_measured)
    }
}

/// One task's outcome under one policy: expected successes over its scored first-round
/// samples, and expected costs summed over them.
#[derive(Debug, Clone, Default)]
struct TaskPolicy {
    n: u64,
    successes: f64,
    /// The jackknife variance of `successes / n` ([`RowContext::task`]).
    jackknife_var: f64,
    requests: f64,
    tokens: f64,
    tokens_known: bool,
    prompt: f64,
    prompt_known: bool,
    latency: f64,
    latency_known: bool,
    /// Each scored sample's total milliseconds under the policy (where recorded): what the
    /// latency percentiles are taken over.
    calls: Vec<f64>,
    imputed: u64,
    /// Per other row a fallback of the policy reads: `(row, expected fallbacks over the
    /// task's samples, variance of the row's rate on the task)`.
    via: Vec<(usize, f64, f64)>,
    /// The policy's expected success of the task with each sample left out in turn (empty
    /// below two samples): what the paired difference of two policies reads ([`paired`]).
    left_out: Vec<f64>,
}

impl TaskPolicy {
    /// The variance of `successes / n` from the other rows' samples its fallbacks read (the
    /// jackknife leaves out this row's samples only).
    fn fallback_var(&self) -> f64 {
        let n = self.n.max(1) as f64;
        self.via.iter().map(|(_, w, v)| (w / n).powi(2) * v).sum()
    }
}

/// One task under every policy of [`Policy::ALL`]: given an answer, and end to end.
type TaskPolicies = ([TaskPolicy; POLICIES], [TaskPolicy; POLICIES]);

/// One scored sample of a cell as every policy counts it ([`RowContext::drawn`]).
struct Drawn {
    /// Its index into the matrix's samples.
    i: usize,
    pass: bool,
    tokens: Option<f64>,
    prompt: Option<f64>,
    latency: Option<f64>,
    /// Per policy (in [`Policy::ALL`]'s order), what acts after its failure.
    steps: [Step; POLICIES],
}

/// What a policy does after one failure: a chain whose effect is the same whichever sample is
/// left out, or a lone reroll, whose chance is the cell's rate without the sample left out.
/// (A chain of two that holds a reroll is taken at the whole cell's rate: only a lone reroll
/// moves with the sample left out.)
#[derive(Clone, Copy)]
enum Step {
    Fixed(Option<Effect>),
    Reroll(Trigger),
}

/// What the policies of one row read.
struct RowContext<'a> {
    /// Counting every request, a transport error a visible failure; else only the samples
    /// with an answer ("given an answer").
    end_to_end: bool,
    m: &'a Matrix,
    name: &'a str,
    stats: &'a HashMap<(&'a str, &'a str), CellStat>,
    children: &'a BTreeMap<(usize, FeedbackStyle, History), Vec<Child>>,
    fallback_to: Option<&'a str>,
    /// Each policy of [`Policy::ALL`] as data ([`Policy::Best`]'s is in `best`).
    rules: [Rules; POLICIES],
    /// [`Policy::Best`]'s rules for the tasks of each fold: those chosen on the other fold.
    best: [Rules; 2],
    rows: &'a [super::ModelView],
    /// The row's feedback rate per label, style and history, for a failure with no follow-up
    /// of its own.
    row_rates: &'a BTreeMap<(Label, FeedbackStyle, History), f64>,
    /// The row's reroll rate per label, for a cell with too few samples to reroll from.
    reroll_rates: &'a BTreeMap<Label, super::Reroll>,
    model_tokens: Option<f64>,
    model_prompt: Option<f64>,
    model_latency: Option<f64>,
}

/// What an action (or a chain) does after a failure: its chance of a pass, its chance of
/// ending in another failure a router sees (what a chain's second action acts on), its cost,
/// and whether its chance was imputed.
#[derive(Debug, Clone, Copy)]
struct Effect {
    success: f64,
    fails_visibly: f64,
    requests: f64,
    tokens: Option<f64>,
    prompt: Option<f64>,
    latency: Option<f64>,
    imputed: bool,
    /// The other rows whose cell rate the chance reads: `(row, weight, variance)`, the
    /// weight the chance that the fallback is taken, the variance that of the row's rate on
    /// the task (what the jackknife over this row's samples cannot see).
    via: [Option<(usize, f64, f64)>; 2],
}

impl Effect {
    /// A request's effect: `success` of it passed, `fails_visibly` of it failed visibly.
    fn request(
        success: f64,
        fails_visibly: f64,
        (tokens, prompt): (Option<f64>, Option<f64>),
        latency: Option<f64>,
        imputed: bool,
    ) -> Effect {
        Effect {
            success,
            fails_visibly,
            requests: 1.0,
            tokens,
            prompt,
            latency,
            imputed,
            via: [None; 2],
        }
    }

    /// This effect, then `next` after a visible failure of it: the chance `fails_visibly` that
    /// the second action is taken weighs its success and its cost.
    fn then(self, next: Effect) -> Effect {
        let go = self.fails_visibly;
        let add = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + go * b.unwrap_or(0.0)),
        };
        Effect {
            success: self.success + go * next.success,
            fails_visibly: go * next.fails_visibly,
            requests: self.requests + go * next.requests,
            tokens: add(self.tokens, next.tokens),
            prompt: add(self.prompt, next.prompt),
            latency: add(self.latency, next.latency),
            imputed: self.imputed || next.imputed,
            via: {
                // A chain holds at most one fallback per action.
                let mut via = self.via;
                let scaled = next
                    .via
                    .into_iter()
                    .flatten()
                    .map(|(b, w, v)| (b, go * w, v));
                for x in scaled {
                    if let Some(slot) = via.iter_mut().find(|s| s.is_none()) {
                        *slot = Some(x);
                    }
                }
                via
            },
        }
    }
}

impl RowContext<'_> {
    /// Policy `p`'s rules for a task of `fold`.
    fn rules_of(&self, p: usize, fold: usize) -> &Rules {
        if p == BEST {
            &self.best[fold]
        } else {
            &self.rules[p]
        }
    }

    /// Row `row`'s record of `task`, end to end when the figures are.
    fn record(&self, row: &str, task: &str) -> Option<CellStat> {
        let r = self.stats.get(&(row, task)).copied()?;
        Some(if self.end_to_end { r.end_to_end() } else { r })
    }

    /// One task's outcome under every policy, with the jackknife variance of each policy's
    /// expected success over the task's first-round samples: a policy's chance after a failure
    /// is estimated from the same samples (a reroll's from the cell's other samples), so the
    /// estimate varies more than a count of independent passes would.
    fn task(&self, task: &str, c: &super::Cell, fold: usize) -> [TaskPolicy; POLICIES] {
        // What each sample contributes is looked up once: the leave-one-out sums below visit
        // every sample once per sample left out (k² at k samples), and at k = 85 the lookups
        // behind an action (the fallback row's cell, a sample's follow-ups) were a third of a
        // rebuild. The sums add the same values in the same order as before.
        let own = self.record(self.name, task).unwrap_or_default();
        // The fallback row's record of the task, looked up once for every failure of the cell.
        let fallback = self.fallback_to.and_then(|b| self.record(b, task));
        let drawn: Vec<Drawn> = c
            .samples
            .iter()
            .filter_map(|&i| self.drawn(task, fallback, own, i, fold))
            .collect();
        let mut out = self.task_totals(own, &drawn);
        // The cell's scored samples are those drawn (a transport error is not).
        let n = drawn.len();
        if n < 2 {
            return out;
        }
        let leave_one_out = self.leave_one_out(own, &drawn);
        for (p, slot) in out.iter_mut().enumerate() {
            let est: Vec<f64> = leave_one_out
                .iter()
                .map(|t| t[p].0 / t[p].1.max(1) as f64)
                .collect();
            let mean = est.iter().sum::<f64>() / n as f64;
            let ss: f64 = est.iter().map(|e| (e - mean) * (e - mean)).sum();
            slot.jackknife_var = (n as f64 - 1.0) / n as f64 * ss;
            // Kept for the paired difference of two policies over the same samples.
            slot.left_out = est;
        }
        out
    }

    /// What sample `i` of the cell contributes to every policy, whichever sample is left out;
    /// `None` for a transport error (or a sample not in the matrix), which counts nowhere.
    fn drawn(
        &self,
        task: &str,
        fallback: Option<CellStat>,
        own: CellStat,
        i: usize,
        fold: usize,
    ) -> Option<Drawn> {
        let s = self.m.samples.get(i)?;
        let trigger = match s.outcome {
            Outcome::Error if !self.end_to_end => return None,
            Outcome::Error => Some(Trigger::Transport),
            Outcome::Pass => None,
            Outcome::Fail(l) => Some(Trigger::Failed(l)),
        };
        // A request with no usable answer is always seen.
        let visible = s.visible || s.outcome == Outcome::Error;
        // A cell's own tokens and latency are its means over every sample: leaving one out
        // does not change what is imputed from them.
        let tokens = s
            .completion_tokens
            .map(|t| t as f64)
            .or(own.tokens)
            .or(self.model_tokens);
        let prompt = s
            .prompt_tokens
            .map(|t| t as f64)
            .or(own.prompt)
            .or(self.model_prompt);
        let latency = s.total_ms.or(own.latency).or(self.model_latency);
        let steps = std::array::from_fn(|p| match trigger {
            None => Step::Fixed(None),
            // A router takes a silent failure for an answer: no policy acts on it.
            Some(_) if !visible => Step::Fixed(None),
            Some(t) => match self.rules_of(p, fold).chain(t) {
                None => Step::Fixed(None),
                Some(Chain {
                    first: Action::Reroll,
                    then: None,
                }) => Step::Reroll(t),
                Some(c) => Step::Fixed(self.chain(c, t, task, i, fallback, own)),
            },
        });
        Some(Drawn {
            i,
            pass: trigger.is_none(),
            tokens,
            prompt,
            latency,
            steps,
        })
    }

    /// [`Self::task`] without the variance: every policy over the cell's samples `drawn`;
    /// `own` is the cell's record.
    fn task_totals(&self, own: CellStat, drawn: &[Drawn]) -> [TaskPolicy; POLICIES] {
        // Adds what is known of a cost, and notes that something was.
        fn add(sum: &mut f64, known: &mut bool, xs: [Option<f64>; 2]) {
            for x in xs.into_iter().flatten() {
                *sum += x;
                *known = true;
            }
        }
        let mut out: [TaskPolicy; POLICIES] = std::array::from_fn(|_| TaskPolicy::default());
        for d in drawn {
            for (p, step) in out.iter_mut().zip(&d.steps) {
                let a = match step {
                    _ if d.pass => None,
                    Step::Fixed(a) => *a,
                    Step::Reroll(t) => Some(self.reroll(*t, own)),
                };
                let then = |f: fn(&Effect) -> Option<f64>| a.as_ref().and_then(f);
                p.n += 1;
                p.successes += if d.pass {
                    1.0
                } else {
                    a.map_or(0.0, |a| a.success)
                };
                p.requests += 1.0 + a.map_or(0.0, |a| a.requests);
                add(
                    &mut p.tokens,
                    &mut p.tokens_known,
                    [d.tokens, then(|a| a.tokens)],
                );
                add(
                    &mut p.prompt,
                    &mut p.prompt_known,
                    [d.prompt, then(|a| a.prompt)],
                );
                let latency = [d.latency, then(|a| a.latency)];
                add(&mut p.latency, &mut p.latency_known, latency);
                // The call's own time: its first request and, when it was acted on, the
                // action's expected time.
                if let Some(l) = d.latency {
                    p.calls.push(l + then(|a| a.latency).unwrap_or(0.0));
                }
                p.imputed += u64::from(a.is_some_and(|a| a.imputed));
                for (b, w, v) in a.iter().flat_map(|a| a.via).flatten() {
                    match p.via.iter_mut().find(|x| x.0 == b) {
                        Some(x) => x.1 += w,
                        None => p.via.push((b, w, v)),
                    }
                }
            }
        }
        out
    }

    /// [`Self::successes_without`] of each sample drawn, in one pass over the cell (k, not k²,
    /// at k samples): leaving a sample out takes away its own part, and moves only a reroll's
    /// chance, the cell's rate without it. Below three scored samples a reroll's chance is the
    /// row's rate for each label, and the sums are taken sample by sample.
    fn leave_one_out(&self, own: CellStat, drawn: &[Drawn]) -> Vec<[(f64, u64); POLICIES]> {
        if own.scored < 3 || own.scored != drawn.len() as u64 {
            return drawn
                .iter()
                .map(|d| self.successes_without(own, drawn, d.i))
                .collect();
        }
        // A sample's part under one policy apart from rerolls, and whether it is a reroll.
        let part = |d: &Drawn, step: &Step| match step {
            _ if d.pass => (1.0, false),
            Step::Fixed(a) => (a.map_or(0.0, |a| a.success), false),
            Step::Reroll(_) => (0.0, true),
        };
        let (mut sums, mut rerolls) = ([0.0f64; POLICIES], [0u64; POLICIES]);
        for d in drawn {
            for (p, step) in d.steps.iter().enumerate() {
                let (x, reroll) = part(d, step);
                sums[p] += x;
                rerolls[p] += u64::from(reroll);
            }
        }
        let left = drawn.len() as u64 - 1;
        drawn
            .iter()
            .map(|d| {
                // The cell's other samples without this one: its rerolls' chance.
                let chance = (own.passes - u64::from(d.pass)) as f64 / (own.scored - 2) as f64;
                std::array::from_fn(|p| {
                    let (x, reroll) = part(d, &d.steps[p]);
                    let others = rerolls[p] - u64::from(reroll);
                    (sums[p] - x + others as f64 * chance, left)
                })
            })
            .collect()
    }

    /// Each policy's expected successes and samples counted with sample `exclude` left out:
    /// what the jackknife reads of [`Self::task_totals`], summed alike (the same values in the
    /// same order), without the costs it does not read. A reroll's chance is the cell's other
    /// samples' rate: it moves with the sample left out.
    fn successes_without(
        &self,
        mut own: CellStat,
        drawn: &[Drawn],
        exclude: usize,
    ) -> [(f64, u64); POLICIES] {
        let mut out = [(0.0, 0u64); POLICIES];
        if let Some(s) = self.m.samples.get(exclude) {
            // Every sample drawn is counted in the record (end to end, a transport error too).
            let drawn_here = s.outcome.is_scored() || self.end_to_end;
            own.scored -= u64::from(drawn_here);
            own.passes -= u64::from(s.outcome == Outcome::Pass);
            let seen = match s.outcome {
                Outcome::Pass => false,
                Outcome::Error => self.end_to_end,
                Outcome::Fail(_) => s.visible,
            };
            own.visible_fails -= u64::from(seen);
        }
        for d in drawn {
            if d.i == exclude {
                continue;
            }
            for (p, step) in out.iter_mut().zip(&d.steps) {
                p.1 += 1;
                if d.pass {
                    p.0 += 1.0;
                    continue;
                }
                let success = match step {
                    Step::Fixed(a) => a.map(|a| a.success),
                    Step::Reroll(l) => Some(self.reroll(*l, own).success),
                };
                if let Some(x) = success {
                    p.0 += x;
                }
            }
        }
        out
    }

    /// A reroll after a visible failure with `label`, from the cell's record `own` (without
    /// the sample left out, if any).
    fn reroll(&self, trigger: Trigger, own: CellStat) -> Effect {
        // The cell's other scored samples are the rerolls that were in fact drawn; the
        // failure itself is among its visible failures, not among its passes.
        let (success, fails_visibly, imputed) = if own.scored >= 2 {
            let others = (own.scored - 1) as f64;
            let visible = own.visible_fails.saturating_sub(1) as f64;
            (own.passes as f64 / others, visible / others, false)
        } else {
            // The row's measured reroll for the label; none after a transport error.
            let rate = match trigger {
                Trigger::Failed(label) => self.reroll_rates.get(&label).and_then(|r| r.rate()),
                Trigger::Transport => None,
            }
            .unwrap_or(0.0);
            (rate, 1.0 - rate, true)
        };
        Effect::request(
            success,
            fails_visibly,
            (
                own.tokens.or(self.model_tokens),
                own.prompt.or(self.model_prompt),
            ),
            own.latency.or(self.model_latency),
            imputed,
        )
    }

    /// What chain `c` does after sample `i` of `task` failed visibly with `label` (`fallback`
    /// is the policy's fallback row's record of the task, `own` the cell's); `None` when its
    /// first action does nothing.
    fn chain(
        &self,
        c: &Chain,
        trigger: Trigger,
        task: &str,
        i: usize,
        fallback: Option<CellStat>,
        own: CellStat,
    ) -> Option<Effect> {
        let first = self.act(c.first, trigger, task, i, fallback, own)?;
        let next = c
            .then
            .and_then(|a| self.act(a, trigger, task, i, fallback, own));
        Some(match next {
            Some(next) => first.then(next),
            None => first,
        })
    }

    /// A follow-up of `style` and `history` after sample `i` failed visibly: its own
    /// follow-ups where it has them, else the row's rate for the label (imputed); `None`
    /// after a request that got no answer, which leaves nothing to send back.
    fn feedback(
        &self,
        style: FeedbackStyle,
        history: History,
        trigger: Trigger,
        i: usize,
        own: CellStat,
    ) -> Option<Effect> {
        let Trigger::Failed(label) = trigger else {
            return None;
        };
        let Some(cs) = self
            .children
            .get(&(i, style, history))
            .filter(|c| !c.is_empty())
        else {
            let rate = self
                .row_rates
                .get(&(label, style, history))
                .copied()
                .unwrap_or(0.0);
            return Some(Effect::request(
                rate,
                1.0 - rate,
                (
                    own.tokens.or(self.model_tokens),
                    own.prompt.or(self.model_prompt),
                ),
                own.latency.or(self.model_latency),
                true,
            ));
        };
        let n = cs.len() as f64;
        let share = |f: fn(&Child) -> bool| cs.iter().filter(|c| f(c)).count() as f64 / n;
        Some(Effect::request(
            share(|c| c.pass),
            share(|c| c.fails_visibly),
            (
                mean(cs.iter().filter_map(|c| c.tokens)),
                mean(cs.iter().filter_map(|c| c.prompt)),
            ),
            mean(cs.iter().filter_map(|c| c.latency)),
            false,
        ))
    }

    /// What one action does after sample `i` of `task` failed visibly with `label`; `None`
    /// when it does nothing (no other row to fall back to).
    fn act(
        &self,
        action: Action,
        trigger: Trigger,
        task: &str,
        i: usize,
        fallback: Option<CellStat>,
        own: CellStat,
    ) -> Option<Effect> {
        match action {
            Action::Reroll => Some(self.reroll(trigger, own)),
            // No request. A repaired call that still fails goes on to a chain's second action
            // only when its label is one a validator of the request's schemas always sees (the
            // stage that decided it is not recorded for the repaired call, so the labels a
            // task predicate may also give are taken as final: an under-count, never an
            // over-count).
            Action::Repair => {
                let repaired = self.m.samples.get(i).and_then(|s| s.repaired);
                let seen = matches!(
                    repaired,
                    Some(Outcome::Fail(
                        Label::MalformedJson
                            | Label::Truncation
                            | Label::SchemaViolation
                            | Label::MissingRequired
                            | Label::HallucinatedParam
                    ))
                );
                Some(Effect {
                    success: if repaired == Some(Outcome::Pass) {
                        1.0
                    } else {
                        0.0
                    },
                    fails_visibly: if seen { 1.0 } else { 0.0 },
                    requests: 0.0,
                    tokens: None,
                    prompt: None,
                    latency: None,
                    imputed: false,
                    via: [None; 2],
                })
            }
            Action::Feedback { style, history } => self.feedback(style, history, trigger, i, own),
            Action::Fallback(b) => {
                let row = self.rows.get(b)?.name.as_str();
                // The policy's own fallback row was looked up once per cell.
                let record = if Some(row) == self.fallback_to {
                    fallback
                } else {
                    self.record(row, task)
                };
                let sb = record.filter(|s| s.scored > 0);
                let mut e = Effect::request(
                    sb.and_then(|s| s.rate()).unwrap_or(0.0),
                    sb.map_or(0.0, |s| s.visible_fails as f64 / s.scored as f64),
                    (sb.and_then(|s| s.tokens), sb.and_then(|s| s.prompt)),
                    sb.and_then(|s| s.latency),
                    sb.is_none(),
                );
                // The row's rate on the task is an estimate from its own samples: its variance,
                // with half a pass and half a failure added so that 0 of n and n of n are not
                // taken as certain.
                if let Some(s) = sb {
                    let n = s.scored as f64;
                    let q = (s.passes as f64 + 0.5) / (n + 1.0);
                    e.via[0] = Some((b, 1.0, q * (1.0 - q) / n));
                }
                Some(e)
            }
        }
    }
}

/// What [`RowContext::choose`] found for one trigger over one set of tasks: the chain with the
/// highest expected success, and its figures per failure it acts on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chosen {
    pub chain: Chain,
    /// The failures (or requests with no answer) it acts on.
    pub failures: u64,
    /// Expected passes after the chain over those failures (each failure weighing the same),
    /// and expected requests, tokens and milliseconds the chain adds per failure.
    pub passes: f64,
    pub requests: f64,
    pub prompt_tokens: Option<f64>,
    pub completion_tokens: Option<f64>,
    pub latency_ms: Option<f64>,
}

impl Chosen {
    /// The chain's success per failure acted on, with a 95 % interval that takes each failure
    /// as a trial (Clopper–Pearson at the expected passes): the chain's chance after one
    /// failure is estimated from other samples, which this interval does not widen for, and the
    /// chain was chosen on the same failures — the row's `best` policy, chosen and scored on
    /// different halves of the tasks, is the figure to plan with.
    pub fn success(&self) -> Option<(f64, Interval)> {
        (self.failures > 0).then(|| {
            let n = self.failures as f64;
            (
                self.passes / n,
                after_failure::beta_interval(self.passes, n),
            )
        })
    }
}

/// What [`Policy::Best`] chose on one set of tasks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Choice {
    /// Per trigger seen there, the chain with the most expected successes (none when no
    /// candidate passed anything).
    pub chains: BTreeMap<Trigger, Chosen>,
    /// The triggers seen there.
    pub seen: BTreeSet<Trigger>,
    /// The chain with the most expected successes over every visible label at once: what a
    /// label not seen there gets.
    pub other: Option<Chosen>,
}

impl Choice {
    /// Each chosen chain with its trigger, the one for labels not seen (`None`) last.
    pub fn entries(&self) -> impl Iterator<Item = (Option<Trigger>, &Chosen)> {
        self.chains
            .iter()
            .map(|(t, c)| (Some(*t), c))
            .chain(self.other.iter().map(|c| (None, c)))
    }

    /// The choice as a policy's rules.
    pub fn rules(&self) -> Rules {
        Rules::each(|t| match (self.chains.get(&t), t) {
            (Some(c), _) => Some(c.chain),
            (None, Trigger::Failed(_)) if !self.seen.contains(&t) => self.other.map(|c| c.chain),
            _ => None,
        })
    }
}

/// Sums of one candidate chain over the failures of one trigger: the choice's criterion (the
/// policy's unit: each task's expected successes over its samples, summed over the tasks) and
/// its cost, for ties.
#[derive(Debug, Clone, Copy, Default)]
struct Score {
    success: f64,
    requests: f64,
}

/// The candidate chains of one row: every action alone, and every ordered pair a router can
/// take (a repair is free, so it comes first or not at all; a follow-up goes to the row that
/// answered, so it never comes after a fallback; a feedback or a repair is not repeated, a
/// reroll or a fallback is a new draw and may be).
fn chains(actions: &[Action]) -> Vec<(usize, Option<usize>)> {
    let mut out: Vec<(usize, Option<usize>)> = (0..actions.len()).map(|a| (a, None)).collect();
    for (a, &first) in actions.iter().enumerate() {
        for (b, &then) in actions.iter().enumerate() {
            let ok = !matches!(
                (first, then),
                (_, Action::Repair)
                    | (Action::Feedback { .. }, Action::Feedback { .. })
                    | (Action::Fallback(_), Action::Feedback { .. })
            );
            if ok {
                out.push((a, Some(b)));
            }
        }
    }
    out
}

impl RowContext<'_> {
    /// [`Policy::Best`]'s choice: per trigger, the candidate chain (of `actions`, [`chains`])
    /// with the most expected successes over the tasks of each fold, and over all of them
    /// (`[fold 0, fold 1, all]`). Ties (within 1e-9) go to fewer expected requests, then to the
    /// earlier candidate; a trigger whose best chain passes nothing gets none. `tasks` are the
    /// row's tasks with their fold.
    fn choose(&self, tasks: &[(&str, &super::Cell, usize)], actions: &[Action]) -> [Choice; 3] {
        let candidates = chains(actions);
        // Per trigger, per candidate, the sums over fold 0, fold 1 and all tasks; `None` is
        // every visible label at once (what a label unseen in a fold gets).
        let mut scores: BTreeMap<Option<Trigger>, Vec<[Score; 3]>> = BTreeMap::new();
        let mut seen: [BTreeSet<Trigger>; 3] = Default::default();
        let mut effects: Vec<Option<Effect>> = Vec::with_capacity(actions.len());
        self.each_failure(tasks, |t, fold, n, i, fallback, own| {
            effects.clear();
            effects.extend(
                actions
                    .iter()
                    .map(|&a| self.act(a, t, tasks[fold.0].0, i, fallback, own)),
            );
            for f in [fold.1, 2] {
                seen[f].insert(t);
            }
            let keys = [
                Some(Some(t)),
                matches!(t, Trigger::Failed(_)).then_some(None),
            ];
            for key in keys.into_iter().flatten() {
                let row = scores
                    .entry(key)
                    .or_insert_with(|| vec![[Score::default(); 3]; candidates.len()]);
                for (slot, &(a, b)) in row.iter_mut().zip(&candidates) {
                    let Some(e) = chain_effect(&effects, a, b) else {
                        continue;
                    };
                    for f in [fold.1, 2] {
                        slot[f].success += e.success / n;
                        slot[f].requests += e.requests / n;
                    }
                }
            }
        });
        std::array::from_fn(|f| {
            let mut chosen: BTreeMap<Option<Trigger>, Chosen> = scores
                .iter()
                .filter_map(|(&t, row)| {
                    let mut best: Option<(usize, Score)> = None;
                    for (c, slot) in row.iter().enumerate() {
                        let x = slot[f];
                        let better = match best {
                            None => x.success > 0.0,
                            Some((_, b)) => {
                                x.success > b.success + 1e-9
                                    || (x.success >= b.success - 1e-9
                                        && x.requests < b.requests - 1e-9)
                            }
                        };
                        if better {
                            best = Some((c, x));
                        }
                    }
                    let (a, b) = candidates[best?.0];
                    let chain = Chain {
                        first: actions[a],
                        then: b.map(|b| actions[b]),
                    };
                    Some((t, self.chosen(tasks, f, t, chain)))
                })
                .collect();
            Choice {
                other: chosen.remove(&None),
                chains: chosen
                    .into_iter()
                    .filter_map(|(t, c)| Some((t?, c)))
                    .collect(),
                seen: std::mem::take(&mut seen[f]),
            }
        })
    }

    /// The figures of `chain` after trigger `trigger` (`None`: any visible label) over the
    /// tasks of fold `f` (2: all).
    fn chosen(
        &self,
        tasks: &[(&str, &super::Cell, usize)],
        f: usize,
        trigger: Option<Trigger>,
        chain: Chain,
    ) -> Chosen {
        let mut out = Chosen {
            chain,
            failures: 0,
            passes: 0.0,
            requests: 0.0,
            prompt_tokens: None,
            completion_tokens: None,
            latency_ms: None,
        };
        let add = |sum: &mut Option<f64>, x: Option<f64>| {
            if let Some(x) = x {
                *sum = Some(sum.unwrap_or(0.0) + x);
            }
        };
        self.each_failure(tasks, |t, fold, _, i, fallback, own| {
            let acts = match trigger {
                Some(x) => x == t,
                None => matches!(t, Trigger::Failed(_)),
            };
            if !acts || (f != 2 && fold.1 != f) {
                return;
            }
            out.failures += 1;
            let task = tasks[fold.0].0;
            if let Some(e) = self.chain(&chain, t, task, i, fallback, own) {
                out.passes += e.success;
                out.requests += e.requests;
                add(&mut out.prompt_tokens, e.prompt);
                add(&mut out.completion_tokens, e.tokens);
                add(&mut out.latency_ms, e.latency);
            }
        });
        let n = out.failures.max(1) as f64;
        out.requests /= n;
        for x in [
            &mut out.prompt_tokens,
            &mut out.completion_tokens,
            &mut out.latency_ms,
        ] {
            *x = x.map(|v| v / n);
        }
        out
    }

    /// Calls `f(trigger, (task index, fold), samples of the task, sample, fallback record,
    /// cell record)` for every visible failure of the tasks (end to end, every request with no
    /// answer too): what a router would act on.
    fn each_failure(
        &self,
        tasks: &[(&str, &super::Cell, usize)],
        mut f: impl FnMut(Trigger, (usize, usize), f64, usize, Option<CellStat>, CellStat),
    ) {
        for (ti, &(task, c, fold)) in tasks.iter().enumerate() {
            let own = self.record(self.name, task).unwrap_or_default();
            let fallback = self.fallback_to.and_then(|b| self.record(b, task));
            let drawn: Vec<(usize, &Scored)> = c
                .samples
                .iter()
                .filter_map(|&i| Some((i, self.m.samples.get(i)?)))
                .filter(|(_, s)| s.outcome.is_scored() || self.end_to_end)
                .collect();
            let n = drawn.len() as f64;
            for (i, s) in drawn {
                let t = match s.outcome {
                    Outcome::Error => Trigger::Transport,
                    Outcome::Fail(l) if s.visible => Trigger::Failed(l),
                    _ => continue,
                };
                f(t, (ti, fold), n, i, fallback, own);
            }
        }
    }
}

/// The effect of the candidate chain `(a, b)` from each action's effect alone; `None` when
/// the first action does nothing, or the second does nothing (the chain is then the first
/// action alone, a candidate of its own).
fn chain_effect(effects: &[Option<Effect>], a: usize, b: Option<usize>) -> Option<Effect> {
    let first = effects[a]?;
    match b {
        None => Some(first),
        Some(b) => Some(first.then(effects[b]?)),
    }
}

/// The paired difference of two policies' success over the same tasks (`a − b`), each task
/// weighing the same, with a 95 % interval: the tasks fixed and the samples within each task
/// the random part, a task's variance the delete-one jackknife of the difference over its
/// samples (both policies' estimates move with the sample left out), plus the part of the
/// other rows' samples a fallback reads ([`TaskPolicy::via`]: the two policies' expected
/// fallbacks to a row, their difference squared times the variance of that row's rate), never
/// below `|d|(1 − |d|)/n` (the spread of a share `d` of n samples changing outcome), and at one
/// sample the widest a difference of two shares can spread. Normal quantiles on the mean.
/// `None` without a task.
fn paired(a: &[&TaskPolicy], b: &[&TaskPolicy]) -> Option<(f64, Interval)> {
    let mut d_sum = 0.0;
    let mut v_sum = 0.0;
    let mut c = 0.0;
    for (x, y) in a.iter().zip(b) {
        if x.n == 0 || x.n != y.n {
            continue;
        }
        let n = x.n as f64;
        let d = (x.successes - y.successes) / n;
        let floor = d.abs() * (1.0 - d.abs()) / n;
        let var = if x.left_out.len() >= 2 && x.left_out.len() == y.left_out.len() {
            let diffs: Vec<f64> = x
                .left_out
                .iter()
                .zip(&y.left_out)
                .map(|(p, q)| p - q)
                .collect();
            let m = diffs.len() as f64;
            let mean = diffs.iter().sum::<f64>() / m;
            let ss: f64 = diffs.iter().map(|e| (e - mean) * (e - mean)).sum();
            let rows = x.via.iter().chain(&y.via).map(|v| (v.0, v.2));
            let other: f64 = rows
                .collect::<BTreeMap<usize, f64>>()
                .into_iter()
                .map(|(row, v)| {
                    let w = |t: &TaskPolicy| t.via.iter().find(|x| x.0 == row).map_or(0.0, |x| x.1);
                    ((w(x) - w(y)) / n).powi(2) * v
                })
                .sum();
            ((m - 1.0) / m * ss + other).max(floor)
        } else {
            1.0
        };
        d_sum += d;
        v_sum += var;
        c += 1.0;
    }
    if c == 0.0 {
        return None;
    }
    let d = d_sum / c;
    let half = Z95 * (v_sum / (c * c)).sqrt();
    Some((
        d,
        Interval {
            lower: (d - half).max(-1.0),
            upper: (d + half).min(1.0),
        },
    ))
}

/// The standard normal's 97.5 % quantile.
const Z95: f64 = 1.959_963_984_540_054;

/// Whether one policy beats the others on a set of tasks (SPEC §11): the leader (highest
/// success given an answer; ties to fewer requests, then the earlier policy) against the
/// runner-up, by their paired difference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub leader: Policy,
    pub runner_up: Option<Policy>,
    /// leader − runner-up, with its 95 % interval ([`paired`]).
    pub difference: Option<(f64, Interval)>,
}

impl Decision {
    /// The leader, when its difference against the runner-up excludes 0; else none ("no clear
    /// winner").
    pub fn winner(&self) -> Option<Policy> {
        self.difference
            .is_some_and(|(_, iv)| iv.lower > 0.0)
            .then_some(self.leader)
    }
}

/// [`Row::policies`]' result.
struct RowPolicies {
    policies: Vec<PolicyResult>,
    decision: Option<Decision>,
    by_tag: BTreeMap<String, Vec<PolicyResult>>,
    tag_decisions: BTreeMap<String, Decision>,
    router: Choice,
    oracle: Option<Oracle>,
}

/// Every policy pooled over `tasks` (given an answer and end to end), and whether one wins.
fn pool_all(
    tasks: &[&TaskPolicies],
    fallback_to: Option<&str>,
    feedback_measured: bool,
) -> (Vec<PolicyResult>, Option<Decision>) {
    let column = |i: usize, end_to_end: bool| -> Vec<&TaskPolicy> {
        tasks
            .iter()
            .map(|t| if end_to_end { &t.1[i] } else { &t.0[i] })
            .collect()
    };
    let policies: Vec<PolicyResult> = Policy::ALL
        .iter()
        .enumerate()
        .map(|(i, &policy)| {
            let mut p = pool_policy(policy, &column(i, false), fallback_to);
            let e = pool_policy(policy, &column(i, true), fallback_to);
            (p.end_to_end, p.end_to_end_interval) = (e.rate, e.interval);
            if policy == Policy::Feedback && !feedback_measured {
                (p.rate, p.interval) = (None, None);
                (p.end_to_end, p.end_to_end_interval) = (None, None);
            }
            p
        })
        .collect();
    let mut ranked: Vec<(usize, &PolicyResult)> = policies
        .iter()
        .enumerate()
        .filter(|(_, p)| p.rate.is_some())
        .collect();
    ranked.sort_by(|a, b| ModelRouting::ranking(a.1, b.1));
    let decision = ranked.first().map(|&(i, leader)| {
        let runner_up = ranked.get(1).copied();
        Decision {
            leader: leader.policy,
            runner_up: runner_up.map(|(_, p)| p.policy),
            difference: runner_up.and_then(|(j, _)| paired(&column(i, false), &column(j, false))),
        }
    });
    (policies, decision)
}

/// The ceiling of the cost–quality plane (RouterBench's oracle): per task, the policy with the
/// highest expected success end to end (ties to fewer requests), its success and cost averaged
/// over the tasks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Oracle {
    pub end_to_end: f64,
    pub requests: f64,
    pub prompt_tokens: Option<f64>,
    pub completion_tokens: Option<f64>,
}

fn oracle(tasks: &[&TaskPolicies], feedback_measured: bool) -> Option<Oracle> {
    let mut picks: Vec<&TaskPolicy> = Vec::with_capacity(tasks.len());
    for t in tasks {
        let pick =
            t.1.iter()
                .zip(Policy::ALL)
                .filter(|(x, p)| x.n > 0 && (feedback_measured || *p != Policy::Feedback))
                .map(|(x, _)| x)
                .min_by(|a, b| {
                    let (ra, rb) = (a.successes / a.n as f64, b.successes / b.n as f64);
                    rb.total_cmp(&ra)
                        .then((a.requests / a.n as f64).total_cmp(&(b.requests / b.n as f64)))
                });
        picks.extend(pick);
    }
    let avg = |f: &dyn Fn(&TaskPolicy) -> f64| mean(picks.iter().map(|t| f(t) / t.n as f64));
    let known = |f: &dyn Fn(&TaskPolicy) -> bool| picks.iter().any(|t| f(t));
    Some(Oracle {
        end_to_end: avg(&|t| t.successes)?,
        requests: avg(&|t| t.requests).unwrap_or(0.0),
        prompt_tokens: known(&|t| t.prompt_known)
            .then(|| avg(&|t| t.prompt))
            .flatten(),
        completion_tokens: known(&|t| t.tokens_known)
            .then(|| avg(&|t| t.tokens))
            .flatten(),
    })
}

/// Pools one policy over tasks, each weighing the same.
fn pool_policy(policy: Policy, tasks: &[&TaskPolicy], fallback_to: Option<&str>) -> PolicyResult {
    let rated: Vec<&&TaskPolicy> = tasks.iter().filter(|t| t.n > 0).collect();
    // `single` counts independent passes: its variance is binomial (and its interval exactly
    // Clopper–Pearson with equal k). The other policies' chances are estimated from the samples
    // themselves: the larger of the binomial and the jackknife variance.
    let per_task: Vec<(f64, u64, f64)> = rated
        .iter()
        .map(|t| {
            let var = if policy == Policy::Single {
                0.0
            } else {
                t.jackknife_var + t.fallback_var()
            };
            (t.successes, t.n, var)
        })
        .collect();
    let (rate, interval) = match these_tasks(&per_task) {
        Some((r, iv)) => (Some(r), Some(iv)),
        None => (None, None),
    };
    let avg = |f: &dyn Fn(&TaskPolicy) -> f64| mean(rated.iter().map(|t| f(t) / t.n as f64));
    let known = |f: &dyn Fn(&TaskPolicy) -> bool| rated.iter().any(|t| f(t));
    PolicyResult {
        policy,
        tasks: rated.len() as u64,
        rate,
        interval,
        end_to_end: None,
        end_to_end_interval: None,
        requests: avg(&|t| t.requests).unwrap_or(0.0),
        tokens: known(&|t| t.tokens_known)
            .then(|| avg(&|t| t.tokens))
            .flatten(),
        prompt_tokens: known(&|t| t.prompt_known)
            .then(|| avg(&|t| t.prompt))
            .flatten(),
        latency_ms: known(&|t| t.latency_known)
            .then(|| avg(&|t| t.latency))
            .flatten(),
        cost: None,
        latency_p50: weighted_quantile(&rated, 0.5),
        latency_p95: weighted_quantile(&rated, 0.95),
        imputed: rated.iter().map(|t| t.imputed).sum(),
        fallback_to: matches!(policy, Policy::Fallback | Policy::ByLabel)
            .then(|| fallback_to.map(str::to_string))
            .flatten(),
    }
}

/// The `q` quantile of the tasks' calls' times, each task weighing the same (each of its
/// calls `1 / calls`): the smallest time whose cumulative weight reaches `q` of the whole.
fn weighted_quantile(tasks: &[&&TaskPolicy], q: f64) -> Option<f64> {
    let mut calls: Vec<(f64, f64)> = tasks
        .iter()
        .filter(|t| !t.calls.is_empty())
        .flat_map(|t| {
            let w = 1.0 / t.calls.len() as f64;
            t.calls.iter().map(move |&c| (c, w))
        })
        .collect();
    calls.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = calls.iter().map(|c| c.1).sum();
    let mut seen = 0.0;
    for (c, w) in &calls {
        seen += w;
        if seen >= q * total - 1e-12 {
            return Some(*c);
        }
    }
    calls.last().map(|c| c.0)
}

/// The mean over tasks (each weighing the same) of `successes / n`, with a 95 % interval for
/// that mean: "these tasks" (SPEC §9), the tasks fixed and the samples within each task the
/// random part. Each entry is `(successes, n, variance)`: `variance` is an estimate of the
/// variance of `successes / n` beyond the binomial one (0 when the successes are counts of
/// independent passes).
///
/// The interval is Clopper–Pearson on the effective sample size of the equally weighted mean
/// (Korn & Graubard 1998): `n_eff = p̄(1 − p̄) / V`, where `V = Σ Vᵢ / C²` and `Vᵢ` is the larger of
/// the task's binomial variance `p̂ᵢ(1 − p̂ᵢ)/nᵢ` and the given one; `n_eff` never exceeds
/// `C² / Σ 1/nᵢ` (the pooled sample size with equal k), so with equal k and counted passes it
/// is exactly Clopper–Pearson on the pooled samples, which SPEC §9 accepts (heterogeneity
/// across tasks only narrows the pooled count's spread). The Beta quantiles are taken at the
/// real `x_eff = p̄ · n_eff`, `n_eff`. Never zero width: an all-pass mean still has a lower
/// bound below 1. The simulation in the tests prints its coverage.
pub fn these_tasks(per_task: &[(f64, u64, f64)]) -> Option<(f64, Interval)> {
    let rated: Vec<(f64, u64, f64)> = per_task.iter().copied().filter(|t| t.1 > 0).collect();
    if rated.is_empty() {
        return None;
    }
    let c = rated.len() as f64;
    let p = rated.iter().map(|(x, n, _)| x / *n as f64).sum::<f64>() / c;
    let p = p.clamp(0.0, 1.0);
    let pooled = c * c / rated.iter().map(|(_, n, _)| 1.0 / *n as f64).sum::<f64>();
    let v: f64 = rated
        .iter()
        .map(|(x, n, var)| {
            let pi = (x / *n as f64).clamp(0.0, 1.0);
            (pi * (1.0 - pi) / *n as f64).max(*var)
        })
        .sum::<f64>()
        / (c * c);
    let n_eff = if v > 0.0 && p > 0.0 && p < 1.0 {
        (p * (1.0 - p) / v).min(pooled)
    } else {
        pooled
    };
    Some((p, after_failure::beta_interval(p * n_eff, n_eff)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{FeedbackOf, SampleKey, TaskInfo, aggregate};
    use crate::stats::IntervalKind;
    use crate::stats::interval;
    use crate::transcript::ParentRef;

    fn key(model: &str, task: &str, run: &str, n: usize) -> SampleKey {
        SampleKey {
            model: model.into(),
            task: task.into(),
            run: run.into(),
            sample: format!("{n:03}"),
        }
    }

    fn first(model: &str, task: &str, n: usize, o: Outcome) -> Scored {
        Scored {
            completion_tokens: Some(10),
            total_ms: Some(100.0),
            ..Scored::bare(key(model, task, "r1", n), o)
        }
    }

    fn child(
        model: &str,
        task: &str,
        n: usize,
        parent: usize,
        st: FeedbackStyle,
        pass: bool,
    ) -> Scored {
        let o = if pass {
            Outcome::Pass
        } else {
            Outcome::Fail(Label::NoCall)
        };
        Scored {
            feedback: Some(Box::new(FeedbackOf {
                style: st,
                review: false,
                history: crate::runs::History::AsProduced,
                parent: Some(ParentRef {
                    run: "r1".into(),
                    sample: format!("{parent:03}"),
                }),
            })),
            completion_tokens: Some(20),
            total_ms: Some(300.0),
            ..Scored::bare(key(model, task, &format!("fb-{}", st.as_str()), n), o)
        }
    }

    fn tasks() -> Vec<TaskInfo> {
        ["t1", "t2"]
            .iter()
            .map(|id| TaskInfo {
                id: id.to_string(),
                title: String::new(),
                tags: vec![format!("tag-{id}")],
                bfcl_scored: false,
            })
            .collect()
    }

    /// Row `a`: t1 = pass, type_coercion (repairable), no_call, pass; t2 = malformed_json,
    /// pass, pass, pass. Row `b`: t1 all pass (4/4), t2 2/4.
    fn matrix() -> Matrix {
        let tc = Outcome::Fail(Label::TypeCoercion);
        let mut s = vec![
            first("a", "t1", 0, Outcome::Pass),
            Scored {
                repaired: Some(Outcome::Pass),
                ..first("a", "t1", 1, tc)
            },
            first("a", "t1", 2, Outcome::Fail(Label::NoCall)),
            first("a", "t1", 3, Outcome::Pass),
            first("a", "t2", 0, Outcome::Fail(Label::MalformedJson)),
            first("a", "t2", 1, Outcome::Pass),
            first("a", "t2", 2, Outcome::Pass),
            first("a", "t2", 3, Outcome::Pass),
        ];
        for n in 0..4 {
            s.push(first("b", "t1", n, Outcome::Pass));
            let o = if n < 2 {
                Outcome::Pass
            } else {
                Outcome::Fail(Label::WrongTool)
            };
            s.push(first("b", "t2", n, o));
        }
        // Feedback: the type_coercion fixed by error feedback, the no_call not; checklist fixes
        // the no_call; a child of a passing sample (counted nowhere), one of a sample that does
        // not exist (an orphan) and one transport error.
        s.push(child("a", "t1", 0, 1, FeedbackStyle::Error, true));
        s.push(child("a", "t1", 1, 2, FeedbackStyle::Error, false));
        s.push(child("a", "t1", 2, 0, FeedbackStyle::Error, true));
        s.push(child("a", "t1", 3, 9, FeedbackStyle::Error, true));
        s.push(Scored {
            outcome: Outcome::Error,
            ..child("a", "t2", 0, 0, FeedbackStyle::Error, true)
        });
        s.push(child("a", "t1", 0, 2, FeedbackStyle::Checklist, true));
        aggregate(s, tasks(), IntervalKind::Wilson)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// The paired difference of two policies on row `row` of `m` ([`paired`]).
    fn paired_of(m: &Matrix, row: &str, a: Policy, b: Policy) -> Option<(f64, Interval)> {
        let all = Collection::of(m);
        let mv = m.models.iter().find(|v| v.name == row).unwrap();
        let r = Row::of(&all, mv);
        let (per_task, _, _) = r.evaluate(r.best_fallback());
        let i = |p: Policy| Policy::ALL.iter().position(|x| *x == p).unwrap();
        let col = |p: Policy| per_task.iter().map(|(_, t)| &t.0[i(p)]).collect::<Vec<_>>();
        paired(&col(a), &col(b))
    }

    /// The winner test's interval, seeded, over a grid of tasks and k: row `a` passes task t
    /// with `p_t` (uniform in 0.2–0.9), every failure visible; row `b` with `q_t`. Reroll −
    /// single has truth mean((1 − p)·p); fallback − reroll mean((1 − p)·(q − p)), with `q_t`
    /// uniform in 0.5–0.95 (a better row: power) and with `q_t = p_t` (no difference: how often
    /// a winner is named wrongly). Prints coverage and the share of intervals that exclude 0.
    #[test]
    fn the_winners_paired_interval_holds_its_level_on_a_grid() {
        let reps = 120;
        let mut rng = crate::stats::compare::SplitMix64::new(4343);
        println!("paired difference, 95 % interval, {reps} collections per cell:");
        println!(
            "tasks  k  | reroll−single cov excl0 | fallback−reroll cov excl0 | same row: cov named"
        );
        let mut worst: f64 = 1.0;
        let mut worst_null: f64 = 0.0;
        for tasks_n in [10usize, 40] {
            for k in [3usize, 5, 10] {
                let infos: Vec<TaskInfo> = (0..tasks_n)
                    .map(|t| TaskInfo {
                        id: format!("t{t:02}"),
                        title: String::new(),
                        tags: vec![],
                        bfcl_scored: false,
                    })
                    .collect();
                // [coverage, excludes 0] per scenario.
                let mut hits = [[0usize; 2]; 3];
                for _ in 0..reps {
                    for (scenario, same) in [(1usize, false), (2, true)] {
                        let mut s = Vec::new();
                        let (mut t_rs, mut t_fr) = (0.0, 0.0);
                        for info in &infos {
                            let p = 0.2 + 0.7 * rng.unit();
                            let q = if same { p } else { 0.5 + 0.45 * rng.unit() };
                            t_rs += (1.0 - p) * p / tasks_n as f64;
                            t_fr += (1.0 - p) * (q - p) / tasks_n as f64;
                            for n in 0..k {
                                for (row, x) in [("a", p), ("b", q)] {
                                    let o = if rng.unit() < x {
                                        Outcome::Pass
                                    } else {
                                        Outcome::Fail(Label::MalformedJson)
                                    };
                                    s.push(first(row, &info.id, n, o));
                                }
                            }
                        }
                        let m = aggregate(s, infos.clone(), IntervalKind::Wilson);
                        let mut check = |slot: usize, a: Policy, b: Policy, truth: f64| {
                            let (_, iv) = paired_of(&m, "a", a, b).unwrap();
                            hits[slot][0] += usize::from(iv.lower <= truth && truth <= iv.upper);
                            hits[slot][1] += usize::from(iv.lower > 0.0 || iv.upper < 0.0);
                        };
                        if scenario == 1 {
                            check(0, Policy::Reroll, Policy::Single, t_rs);
                            check(1, Policy::Fallback, Policy::Reroll, t_fr);
                        } else {
                            check(2, Policy::Fallback, Policy::Reroll, t_fr);
                        }
                    }
                }
                let share = |n: usize| n as f64 / reps as f64;
                println!(
                    "{tasks_n:>5} {k:>2}  |        {:.3} {:.3}       |          {:.3} {:.3}      |   {:.3} {:.3}",
                    share(hits[0][0]),
                    share(hits[0][1]),
                    share(hits[1][0]),
                    share(hits[1][1]),
                    share(hits[2][0]),
                    share(hits[2][1]),
                );
                worst = worst
                    .min(share(hits[0][0]))
                    .min(share(hits[1][0]))
                    .min(share(hits[2][0]));
                worst_null = worst_null.max(share(hits[2][1]));
            }
        }
        // 95 % nominal; with 120 collections a true 0.95 falls below 0.89 with chance < 1 %.
        assert!(worst >= 0.89, "coverage {worst}");
        assert!(
            worst_null <= 0.11,
            "a winner named where there is none: {worst_null}"
        );
    }

    /// `best` against a direct simulation of its router, written out here apart from the
    /// evaluator: rows `a`, `b`, `c` on ten tasks (k = 4, seeded outcomes, some failures
    /// silent, some repairable); the tasks in two folds by alternating index; per fold and
    /// visible label the candidate chain (reroll, repair, a fallback to `b` or `c`, or an
    /// ordered pair of them) with the most expected successes, a label unseen in a fold taking
    /// the chain that is best over all of that fold's visible failures; each task scored with
    /// the other fold's choice. Both figures, and the chains chosen on all tasks, must agree.
    #[test]
    fn best_is_a_direct_simulation_of_its_router_with_its_folds() {
        #[derive(Clone, Copy, PartialEq, Debug)]
        enum A {
            Reroll,
            Repair,
            To(&'static str),
        }
        let labels = [
            Label::MalformedJson,
            Label::SchemaViolation,
            Label::TypeCoercion,
        ];
        for seed in [7u64, 8, 9, 10, 11] {
            let mut rng = crate::stats::compare::SplitMix64::new(seed);
            let ids: Vec<String> = (0..10).map(|t| format!("t{t:02}")).collect();
            let mut s = Vec::new();
            for id in &ids {
                for (row, p) in [("a", 0.45), ("b", 0.6), ("c", 0.75)] {
                    let p = p * (0.5 + rng.unit());
                    for n in 0..4 {
                        let sample = if rng.unit() < p {
                            first(row, id, n, Outcome::Pass)
                        } else {
                            let l = labels[rng.below(3) as usize];
                            let repaired = match rng.below(3) {
                                0 => Some(Outcome::Pass),
                                1 => Some(Outcome::Fail(Label::SchemaViolation)),
                                _ => Some(Outcome::Fail(Label::WrongTool)),
                            };
                            Scored {
                                visible: rng.unit() < 0.8,
                                repaired,
                                ..first(row, id, n, Outcome::Fail(l))
                            }
                        };
                        s.push(sample);
                    }
                }
            }
            let infos: Vec<TaskInfo> = ids
                .iter()
                .map(|id| TaskInfo {
                    id: id.clone(),
                    title: String::new(),
                    tags: vec![],
                    bfcl_scored: false,
                })
                .collect();
            let m = aggregate(s.clone(), infos, IntervalKind::Wilson);
            let r = routing(&m);
            let a = r.model("a").unwrap();

            // The direct simulation.
            let cell = |row: &str, id: &str| -> Vec<&Scored> {
                s.iter()
                    .filter(|x| x.key.model == row && x.key.task == id)
                    .collect()
            };
            let rate = |xs: &[&Scored]| {
                let n = xs.len() as f64;
                let passes = xs.iter().filter(|x| x.outcome == Outcome::Pass).count() as f64;
                let seen = xs
                    .iter()
                    .filter(|x| x.visible && x.outcome != Outcome::Pass)
                    .count() as f64;
                (passes, seen, n)
            };
            // (success, fails visibly, requests) of one action after sample `x` of task `id`.
            let effect = |act: A, id: &str, x: &Scored| -> (f64, f64, f64) {
                match act {
                    A::Reroll => {
                        let (p, v, n) = rate(&cell("a", id));
                        (p / (n - 1.0), (v - 1.0) / (n - 1.0), 1.0)
                    }
                    A::Repair => match x.repaired {
                        Some(Outcome::Pass) => (1.0, 0.0, 0.0),
                        Some(Outcome::Fail(Label::SchemaViolation)) => (0.0, 1.0, 0.0),
                        _ => (0.0, 0.0, 0.0),
                    },
                    A::To(row) => {
                        let (p, v, n) = rate(&cell(row, id));
                        (p / n, v / n, 1.0)
                    }
                }
            };
            let acts = [A::Reroll, A::Repair, A::To("b"), A::To("c")];
            let mut cands: Vec<(A, Option<A>)> = acts.iter().map(|&x| (x, None)).collect();
            for &x in &acts {
                for &y in &acts {
                    if y != A::Repair {
                        cands.push((x, Some(y)));
                    }
                }
            }
            let chain_effect = |c: (A, Option<A>), id: &str, x: &Scored| {
                let (s1, v1, r1) = effect(c.0, id, x);
                match c.1 {
                    None => (s1, r1),
                    Some(y) => {
                        let (s2, _, r2) = effect(y, id, x);
                        (s1 + v1 * s2, r1 + v1 * r2)
                    }
                }
            };
            let failing = |id: &str, l: Option<Label>| -> Vec<&Scored> {
                cell("a", id)
                    .into_iter()
                    .filter(|x| {
                        x.visible
                            && matches!(x.outcome, Outcome::Fail(f) if l.is_none_or(|l| l == f))
                    })
                    .collect()
            };
            // The choice on the tasks `on`, for label `l` (None: every visible label).
            let choose = |on: &[&String], l: Option<Label>| -> Option<(A, Option<A>)> {
                let mut best: Option<((A, Option<A>), f64, f64)> = None;
                for &c in &cands {
                    let (mut sum, mut req) = (0.0, 0.0);
                    for id in on {
                        let n = cell("a", id).len() as f64;
                        for x in failing(id, l) {
                            let (sx, rx) = chain_effect(c, id, x);
                            sum += sx / n;
                            req += rx / n;
                        }
                    }
                    let better = match best {
                        None => sum > 0.0,
                        Some((_, bs, br)) => {
                            sum > bs + 1e-9 || (sum >= bs - 1e-9 && req < br - 1e-9)
                        }
                    };
                    if better {
                        best = Some((c, sum, req));
                    }
                }
                best.map(|b| b.0)
            };
            let folds: [Vec<&String>; 2] = [
                ids.iter().step_by(2).collect(),
                ids.iter().skip(1).step_by(2).collect(),
            ];
            let mut per_task = Vec::new();
            for (f, tasks) in folds.iter().enumerate() {
                let other = &folds[1 - f];
                let seen: Vec<Label> = labels
                    .into_iter()
                    .filter(|&l| other.iter().any(|id| !failing(id, Some(l)).is_empty()))
                    .collect();
                let fallback = choose(other, None);
                for id in tasks {
                    let xs = cell("a", id);
                    let n = xs.len() as f64;
                    let mut succ = 0.0;
                    for x in &xs {
                        match x.outcome {
                            Outcome::Pass => succ += 1.0,
                            Outcome::Fail(l) if x.visible => {
                                let c = if seen.contains(&l) {
                                    choose(other, Some(l))
                                } else {
                                    fallback
                                };
                                succ += c.map_or(0.0, |c| chain_effect(c, id, x).0);
                            }
                            _ => {}
                        }
                    }
                    per_task.push(succ / n);
                }
            }
            let direct = per_task.iter().sum::<f64>() / per_task.len() as f64;
            let best = a
                .policies
                .iter()
                .find(|p| p.policy == Policy::Best)
                .unwrap();
            assert!(
                close(best.rate.unwrap(), direct),
                "seed {seed}: best {} against the direct simulation {direct}",
                best.rate.unwrap()
            );
            // What it deploys: chosen on every task.
            let all: Vec<&String> = ids.iter().collect();
            let name = |x: A| match x {
                A::Reroll => Action::Reroll,
                A::Repair => Action::Repair,
                A::To(row) => {
                    Action::Fallback(m.models.iter().position(|v| v.name == row).unwrap())
                }
            };
            for l in labels {
                let want = choose(&all, Some(l)).map(|(x, y)| Chain {
                    first: name(x),
                    then: y.map(name),
                });
                let got = a.router.chains.get(&Trigger::Failed(l)).map(|c| c.chain);
                assert_eq!(got, want, "seed {seed}, label {l:?}");
            }
            println!(
                "seed {seed}: best {direct:.4} (single {:.4})",
                a.policies[0].rate.unwrap()
            );
        }
    }

    #[test]
    fn feedback_samples_stay_out_of_the_matrix_and_are_counted_by_their_parents_label() {
        let m = matrix();
        assert_eq!(m.samples.len(), 16);
        assert_eq!(m.feedback.len(), 6);
        assert_eq!(m.cell("a", "t1").map(|c| (c.k, c.passes)), Some((4, 2)));
        let r = routing(&m);
        let a = r.model("a").unwrap();
        assert_eq!(
            (
                a.feedback_samples,
                a.parent_passes,
                a.orphans,
                a.feedback_errors
            ),
            (4, 1, 1, 1)
        );
        let label = |l: Label| a.labels.iter().find(|x| x.label == l).unwrap();
        let tc = label(Label::TypeCoercion);
        assert_eq!((tc.failures, tc.visible), (1, 1));
        let m1 = |x: &Measure| (x.n, x.passes);
        let fb = |l: &LabelRouting, st: FeedbackStyle| {
            let f = &l.feedback[&(st, History::AsProduced)];
            (f.measure.n, f.measure.passes)
        };
        assert_eq!(fb(tc, FeedbackStyle::Error), (1, 1));
        assert_eq!(fb(tc, FeedbackStyle::Checklist), (0, 0));
        assert_eq!(tc.repair.map(|x| m1(&x)), Some((1, 1)));
        // Reroll: the cell's 3 other samples, 2 of them passes.
        assert_eq!(m1(&tc.reroll), (3, 2));
        let nc = label(Label::NoCall);
        assert_eq!(fb(nc, FeedbackStyle::Error), (1, 0));
        assert_eq!(fb(nc, FeedbackStyle::Checklist), (1, 1));
        assert_eq!(nc.repair, None);
        // Fallback to b on t1: 4 samples, 4 passes. On t2 (malformed_json): 4 samples, 2 passes.
        assert_eq!(nc.fallback.len(), 1);
        assert_eq!(
            (nc.fallback[0].0.as_str(), m1(&nc.fallback[0].1)),
            ("b", (4, 4))
        );
        let mj = label(Label::MalformedJson);
        assert_eq!(m1(&mj.fallback[0].1), (4, 2));
        // The follow-up that got no answer is a trial that did not pass, refused without a
        // status (no response head).
        assert_eq!(fb(mj, FeedbackStyle::Error), (1, 0));
        let refused = &mj.feedback[&(FeedbackStyle::Error, History::AsProduced)].refused;
        assert_eq!(refused.iter().collect::<Vec<_>>(), [(&None, &1)]);
        assert_eq!(mj.repair, None);
    }

    #[test]
    fn a_silent_failure_is_final_and_its_follow_ups_count_nowhere() {
        // Row a's no_call (t1, sample 2) under tool_choice "auto": a router takes it for an
        // answer.
        let mut m = matrix();
        let i = m
            .samples
            .iter()
            .position(|s| s.key.model == "a" && s.key.task == "t1" && s.key.sample == "002")
            .unwrap();
        assert_eq!(m.samples[i].outcome, Outcome::Fail(Label::NoCall));
        m.samples[i].visible = false;
        let r = routing(&m);
        let a = r.model("a").unwrap();
        assert_eq!((a.failures, a.visible), (3, 2));
        // Its two follow-ups (error and checklist) are no router's: counted nowhere.
        assert_eq!((a.feedback_samples, a.silent_parents), (2, 2));
        let nc = a.labels.iter().find(|l| l.label == Label::NoCall).unwrap();
        assert_eq!((nc.failures, nc.visible), (1, 0));
        assert_eq!((nc.reroll.n, nc.fallback[0].1.n), (0, 0));
        assert!(nc.feedback.values().all(|f| f.measure.n == 0));
        let p = |x: Policy| a.policies.iter().find(|p| p.policy == x).unwrap();
        // reroll: on t1 only the type_coercion is asked again (2/3); the no_call stays failed.
        let reroll = ((2.0 + 2.0 / 3.0) / 4.0 + 1.0) / 2.0;
        assert!(close(p(Policy::Reroll).rate.unwrap(), reroll));
        assert!(close(p(Policy::Reroll).requests, (1.25 + 1.25) / 2.0));
        // fallback: t1's type_coercion to b (4/4), t2's malformed_json (2/4).
        assert!(close(
            p(Policy::Fallback).rate.unwrap(),
            (3.0 / 4.0 + 3.5 / 4.0) / 2.0
        ));
    }

    #[test]
    fn policies_are_the_mean_over_tasks_of_each_tasks_expected_success() {
        let r = routing(&matrix());
        let a = r.model("a").unwrap();
        let p = |x: Policy| a.policies.iter().find(|p| p.policy == x).unwrap();
        // single: t1 2/4, t2 3/4.
        assert!(close(p(Policy::Single).rate.unwrap(), (0.5 + 0.75) / 2.0));
        // reroll: t1's two failures each pass with 2/3 (the cell's other samples); t2's one
        // with 3/3.
        let reroll = ((2.0 + 2.0 * 2.0 / 3.0) / 4.0 + 1.0) / 2.0;
        assert!(close(p(Policy::Reroll).rate.unwrap(), reroll));
        assert!(close(p(Policy::Reroll).requests, (1.5 + 1.25) / 2.0));
        // feedback: the type_coercion's child passed, the no_call's did not; t2's malformed
        // child got no answer: a follow-up of its own that did not pass, nothing imputed.
        assert!(close(
            p(Policy::Feedback).rate.unwrap(),
            (3.0 / 4.0 + 3.0 / 4.0) / 2.0
        ));
        assert_eq!(p(Policy::Feedback).imputed, 0);
        // repair: only the type_coercion.
        assert!(close(
            p(Policy::Repair).rate.unwrap(),
            (3.0 / 4.0 + 3.0 / 4.0) / 2.0
        ));
        assert!(close(p(Policy::Repair).requests, 1.0));
        // fallback to b: t1's failures pass with 4/4, t2's with 2/4.
        assert_eq!(p(Policy::Fallback).fallback_to.as_deref(), Some("b"));
        assert!(close(
            p(Policy::Fallback).rate.unwrap(),
            (1.0 + 3.5 / 4.0) / 2.0
        ));
        // by-label: type_coercion → repair (1), no_call → fallback (1), malformed_json →
        // reroll (3/3).
        assert!(close(p(Policy::ByLabel).rate.unwrap(), 1.0));
        assert!(close(p(Policy::ByLabel).requests, (1.25 + 1.25) / 2.0));
        // Costs: 10 tokens a request; the feedback child of t1 cost 20 tokens and 300 ms.
        assert!(close(p(Policy::Single).tokens.unwrap(), 10.0));
        assert!(close(p(Policy::Single).latency_ms.unwrap(), 100.0));
        // t2's follow-up got no answer but is a request sent: its own cost counts.
        let fb_tokens = ((40.0 + 20.0 + 20.0) / 4.0 + (40.0 + 20.0) / 4.0) / 2.0;
        assert!(close(p(Policy::Feedback).tokens.unwrap(), fb_tokens));
        // Winner: by-label and fallback... by-label is 1.0, the only perfect one.
        assert_eq!(
            ModelRouting::leader(&a.policies).map(|p| p.policy),
            Some(Policy::ByLabel)
        );
        // Per tag: one task each.
        assert_eq!(a.by_tag.len(), 2);
        let t2 = &a.by_tag["tag-t2"];
        assert!(close(t2[0].rate.unwrap(), 0.75));
        assert_eq!(t2[0].tasks, 1);
        // Row b has no feedback sample: its feedback policy is not measured.
        let b = r.model("b").unwrap();
        assert_eq!(b.policies[2].policy, Policy::Feedback);
        assert_eq!(b.policies[2].rate, None);
    }

    /// Row `flaky` answers right whenever it answers, but half its requests get no answer;
    /// `steady` always answers and passes 3 of 4; `weak` fails visibly (malformed_json) 3 of
    /// 4 and has one transport error of its own.
    fn flaky_matrix() -> Matrix {
        let mj = Outcome::Fail(Label::MalformedJson);
        let mut s = Vec::new();
        for n in 0..4 {
            let flaky = if n < 2 { Outcome::Pass } else { Outcome::Error };
            s.push(first("flaky", "t1", n, flaky));
            let steady = if n < 3 { Outcome::Pass } else { mj };
            s.push(first("steady", "t1", n, steady));
            let weak = match n {
                0 => Outcome::Pass,
                1 => Outcome::Error,
                _ => mj,
            };
            s.push(first("weak", "t1", n, weak));
        }
        aggregate(s, tasks(), IntervalKind::Wilson)
    }

    #[test]
    fn end_to_end_a_request_with_no_answer_is_a_failure_the_policy_acts_on() {
        let r = routing(&flaky_matrix());
        let weak = r.model("weak").unwrap();
        let p = |x: Policy| weak.policies.iter().find(|p| p.policy == x).unwrap();
        // Given an answer, the flaky row (1.0 when it answers) would look best; end to end it
        // passes 2 of 4 requests and the steady row 3 of 4.
        assert_eq!(p(Policy::Fallback).fallback_to.as_deref(), Some("steady"));
        // single: 1 of 3 answers; end to end 1 of 4 requests.
        assert!(close(p(Policy::Single).rate.unwrap(), 1.0 / 3.0));
        assert!(close(p(Policy::Single).end_to_end.unwrap(), 0.25));
        // reroll given an answer: each malformed_json against the cell's other 2 answers (1
        // pass). End to end: each of the three failures seen (the transport error too)
        // against the other 3 requests (1 pass).
        assert!(close(
            p(Policy::Reroll).rate.unwrap(),
            (1.0 + 2.0 * 0.5) / 3.0
        ));
        assert!(close(
            p(Policy::Reroll).end_to_end.unwrap(),
            (1.0 + 3.0 / 3.0) / 4.0
        ));
        // fallback to steady (3 of 4 end to end) after each of the three.
        assert!(close(
            p(Policy::Fallback).rate.unwrap(),
            (1.0 + 2.0 * 0.75) / 3.0
        ));
        assert!(close(
            p(Policy::Fallback).end_to_end.unwrap(),
            (1.0 + 3.0 * 0.75) / 4.0
        ));
        // repair has nothing for malformed_json, nor for a request with no answer.
        assert!(close(p(Policy::Repair).end_to_end.unwrap(), 0.25));
        // Every end-to-end rate has its interval, and it holds the rate.
        for q in &weak.policies {
            if let (Some(e), Some(iv)) = (q.end_to_end, q.end_to_end_interval) {
                assert!(iv.lower <= e && e <= iv.upper, "{:?}", q.policy);
            }
        }
    }

    /// End to end, seeded: 20 tasks of k = 5, each task's chance of an answer `1 − e` and of
    /// a pass given one `p` drawn per task; every failure visible. The truth of `single` end to
    /// end is the mean of `q = (1 − e)·p`, of `reroll` the mean of `q + (1 − q)·q`; a second
    /// row `b` (its own `e`, `p`, so `q_b`) is the fallback: `q + (1 − q)·q_b`. Prints the
    /// coverage of the three 95 % intervals over 300 collections.
    #[test]
    fn end_to_end_intervals_cover_the_truth_in_a_seeded_simulation() {
        let mut rng = crate::stats::compare::SplitMix64::new(4141);
        let (tasks_n, k, reps) = (20, 5, 300);
        let infos: Vec<TaskInfo> = (0..tasks_n)
            .map(|t| TaskInfo {
                id: format!("t{t:02}"),
                title: String::new(),
                tags: vec![],
                bfcl_scored: false,
            })
            .collect();
        let (mut single_in, mut reroll_in, mut fallback_in) = (0, 0, 0);
        for _ in 0..reps {
            let mut s = Vec::new();
            let (mut t_single, mut t_reroll, mut t_fallback) = (0.0, 0.0, 0.0);
            for info in &infos {
                let p = 0.3 + 0.6 * rng.unit();
                let e = 0.3 * rng.unit();
                let q = (1.0 - e) * p;
                t_single += q / tasks_n as f64;
                t_reroll += (q + (1.0 - q) * q) / tasks_n as f64;
                let (p_b, e_b) = (0.5 + 0.4 * rng.unit(), 0.2 * rng.unit());
                t_fallback += (q + (1.0 - q) * (1.0 - e_b) * p_b) / tasks_n as f64;
                for n in 0..k {
                    for (row, e, p) in [("a", e, p), ("b", e_b, p_b)] {
                        let o = if rng.unit() < e {
                            Outcome::Error
                        } else if rng.unit() < p {
                            Outcome::Pass
                        } else {
                            Outcome::Fail(Label::MalformedJson)
                        };
                        s.push(first(row, &info.id, n, o));
                    }
                }
            }
            let r = routing(&aggregate(s, infos.clone(), IntervalKind::Wilson));
            let a = r.model("a").unwrap();
            let covers = |x: Policy, truth: f64| {
                let p = a.policies.iter().find(|p| p.policy == x).unwrap();
                let iv = p.end_to_end_interval.unwrap();
                iv.lower <= truth && truth <= iv.upper
            };
            single_in += usize::from(covers(Policy::Single, t_single));
            reroll_in += usize::from(covers(Policy::Reroll, t_reroll));
            fallback_in += usize::from(covers(Policy::Fallback, t_fallback));
        }
        let cov = |n: usize| n as f64 / reps as f64;
        println!("end to end, {tasks_n} tasks × k {k}, {reps} collections:");
        println!("  single  coverage {:.3}", cov(single_in));
        println!("  reroll  coverage {:.3}", cov(reroll_in));
        println!("  fallback coverage {:.3}", cov(fallback_in));
        // 95 % nominal; with 300 collections a true 0.95 falls below 0.91 with chance < 1 %.
        assert!(cov(single_in) >= 0.91, "single {}", cov(single_in));
        assert!(cov(reroll_in) >= 0.91, "reroll {}", cov(reroll_in));
        assert!(cov(fallback_in) >= 0.91, "fallback {}", cov(fallback_in));
    }

    #[test]
    fn every_named_policy_is_a_map_from_trigger_to_a_chain() {
        let fb = |l| {
            Policy::ByLabel
                .rules(Some(1))
                .chain(Trigger::Failed(l))
                .copied()
        };
        assert_eq!(fb(Label::MalformedJson), Some(Chain::one(Action::Reroll)));
        assert_eq!(fb(Label::TypeCoercion), Some(Chain::one(Action::Repair)));
        assert_eq!(fb(Label::WrongTool), Some(Chain::one(Action::Fallback(1))));
        // Without another row, by-label's fallback labels are final.
        let alone = Policy::ByLabel.rules(None);
        assert_eq!(alone.chain(Trigger::Failed(Label::WrongTool)), None);
        assert!(Policy::Single.rules(Some(0)).chains.is_empty());
        assert!(Policy::Fallback.rules(None).chains.is_empty());
        // Repair acts only where the label has a mechanical repair; feedback never after a
        // request that got no answer.
        let repair = Policy::Repair.rules(Some(0));
        let repaired: Vec<Trigger> = repair.chains.keys().copied().collect();
        assert_eq!(
            repaired,
            [
                Trigger::Failed(Label::HallucinatedParam),
                Trigger::Failed(Label::TypeCoercion),
                Trigger::Failed(Label::EscapingError)
            ]
        );
        let feedback = Policy::Feedback.rules(Some(0));
        assert_eq!(feedback.chain(Trigger::Transport), None);
        assert_eq!(feedback.chains.len(), Label::ALL.len());
        assert_eq!(
            Policy::Reroll.rules(None).chain(Trigger::Transport),
            Some(&Chain::one(Action::Reroll))
        );
    }

    #[test]
    fn a_chains_second_action_follows_only_the_first_ones_visible_failures() {
        let first = Effect::request(0.5, 0.3, (Some(100.0), Some(1000.0)), Some(10.0), false);
        let second = Effect::request(0.8, 0.1, (Some(50.0), Some(4000.0)), None, true);
        let both = first.then(second);
        // 0.5 pass at once; 0.3 fail where a router sees it and get the second action; the
        // other 0.2 failed silently and are final.
        assert!(close(both.success, 0.5 + 0.3 * 0.8));
        assert!(close(both.fails_visibly, 0.3 * 0.1));
        assert!(close(both.requests, 1.3));
        assert_eq!(both.tokens.map(|t| (t * 1e6).round()), Some(115.0 * 1e6));
        assert_eq!(both.prompt.map(|t| t.round()), Some(2200.0));
        assert_eq!(both.latency, Some(10.0));
        assert!(both.imputed);
    }

    #[test]
    fn these_tasks_is_clopper_pearson_on_the_pooled_samples_with_equal_k() {
        // 3 tasks × 5 samples, 12 passes: exactly binom.test(12, 15)'s interval.
        let (p, iv) = these_tasks(&[(5.0, 5, 0.0), (4.0, 5, 0.0), (3.0, 5, 0.0)]).unwrap();
        let cp = interval::interval(IntervalKind::ClopperPearson, 12, 15).unwrap();
        assert!(close(p, 0.8));
        assert!((iv.lower - cp.lower).abs() < 1e-9 && (iv.upper - cp.upper).abs() < 1e-9);
        // All passed: never zero width.
        let (p, iv) = these_tasks(&[(3.0, 3, 0.0), (3.0, 3, 0.0)]).unwrap();
        assert_eq!(p, 1.0);
        assert!(iv.lower < 0.8 && iv.upper == 1.0);
        assert_eq!(these_tasks(&[]), None);
    }

    /// Coverage of the policies' interval over these tasks, by simulation: tasks with fixed pass
    /// probabilities, k samples each; `single` counts passes, `reroll` its estimate from the
    /// cell's other samples (truth p + (1 − p)·p). Prints the worst cell of the grid.
    #[test]
    fn leave_one_out_in_one_pass_is_each_sample_left_out_in_turn() {
        // Random cells (k from 1 to 12, every kind of outcome, some repaired, some feedback
        // children), every row and task: the one-pass leave-one-out against the sums taken
        // with each sample left out.
        let mut rng = crate::stats::compare::SplitMix64::new(41);
        let labels = [
            Label::TypeCoercion,
            Label::NoCall,
            Label::MalformedJson,
            Label::WrongTool,
        ];
        let (mut cells, mut fast_cells) = (0, 0);
        for _ in 0..300 {
            let mut s = Vec::new();
            for model in ["a", "b", "c"] {
                for task in ["t1", "t2"] {
                    let k = 1 + (rng.unit() * 12.0) as usize;
                    for n in 0..k {
                        let u = rng.unit();
                        let o = if u < 0.4 {
                            Outcome::Pass
                        } else if u < 0.5 {
                            Outcome::Error
                        } else {
                            Outcome::Fail(labels[(rng.unit() * 4.0) as usize % 4])
                        };
                        s.push(Scored {
                            repaired: (rng.unit() < 0.5).then_some(Outcome::Pass),
                            ..first(model, task, n, o)
                        });
                        if rng.unit() < 0.3 {
                            let pass = rng.unit() < 0.5;
                            s.push(child(model, task, n, n, FeedbackStyle::Error, pass));
                        }
                    }
                }
            }
            let m = aggregate(s, tasks(), IntervalKind::Wilson);
            let stats = cell_stats(&m);
            let mut children: BTreeMap<(usize, FeedbackStyle, History), Vec<Child>> =
                BTreeMap::new();
            for f in &m.feedback {
                if let Some(pi) = m.parent_index(f) {
                    children
                        .entry((pi, FeedbackStyle::Error, History::AsProduced))
                        .or_default()
                        .push(Child {
                            pass: f.outcome == Outcome::Pass,
                            fails_visibly: f.outcome != Outcome::Pass,
                            tokens: None,
                            prompt: None,
                            latency: f.total_ms,
                        });
                }
            }
            let row_rates: BTreeMap<(Label, FeedbackStyle, History), f64> = Label::ALL
                .into_iter()
                .filter(|l| *l != Label::NoCall)
                .map(|l| ((l, FeedbackStyle::Error, History::AsProduced), 0.25))
                .collect();
            let half = crate::report::Reroll {
                failures: 1,
                trials: 2,
                successes: 1,
            };
            let reroll_rates: BTreeMap<Label, crate::report::Reroll> = Label::ALL
                .into_iter()
                .filter(|l| *l != Label::WrongTool)
                .map(|l| (l, half))
                .collect();
            for (name, end_to_end) in ["a", "b", "c"]
                .into_iter()
                .flat_map(|n| [(n, false), (n, true)])
            {
                let ctx = RowContext {
                    end_to_end,
                    m: &m,
                    name,
                    stats: &stats,
                    children: &children,
                    fallback_to: Some(if name == "a" { "b" } else { "a" }),
                    rules: Policy::ALL.map(|p| p.rules(Some(usize::from(name == "a")))),
                    rows: &m.models,
                    best: Default::default(),
                    row_rates: &row_rates,
                    reroll_rates: &reroll_rates,
                    model_tokens: Some(10.0),
                    model_prompt: None,
                    model_latency: None,
                };
                for task in ["t1", "t2"] {
                    let Some(c) = m.cells.get(&(name.to_string(), task.to_string())) else {
                        continue;
                    };
                    let Some(own) = ctx.record(name, task) else {
                        continue;
                    };
                    let fallback = ctx.fallback_to.and_then(|b| ctx.record(b, task));
                    let drawn: Vec<Drawn> = c
                        .samples
                        .iter()
                        .filter_map(|&i| ctx.drawn(task, fallback, own, i, 0))
                        .collect();
                    let fast = ctx.leave_one_out(own, &drawn);
                    assert_eq!(fast.len(), drawn.len());
                    cells += 1;
                    fast_cells += usize::from(own.scored >= 3);
                    for (d, got) in drawn.iter().zip(&fast) {
                        let want = ctx.successes_without(own, &drawn, d.i);
                        for (g, w) in got.iter().zip(&want) {
                            assert_eq!(g.1, w.1);
                            assert!(
                                (g.0 - w.0).abs() <= 1e-9 * w.0.abs().max(1.0),
                                "{name} {task} sample {}: {} against {}",
                                d.i,
                                g.0,
                                w.0
                            );
                        }
                    }
                }
            }
        }
        // Both ways are exercised: the one pass, and the per-sample sums below three samples.
        assert!(
            fast_cells > 1000 && cells - fast_cells > 100,
            "{fast_cells} of {cells}"
        );
    }

    #[test]
    fn these_tasks_interval_holds_its_level_on_a_grid() {
        let mut rng = crate::stats::compare::SplitMix64::new(29);
        let mut worst = (1.0f64, String::new());
        // Each setting: the pass probability of task i of C.
        type Probs = Box<dyn Fn(usize, usize) -> f64>;
        let settings: Vec<(&str, Probs)> = vec![
            ("all 0.99", Box::new(|_, _| 0.99)),
            (
                "uniform 0.3–1",
                Box::new(|i, c| 0.3 + 0.7 * (i as f64 + 0.5) / c as f64),
            ),
            (
                "C−1 at 0.99, one at 0.3",
                Box::new(|i, _| if i == 0 { 0.3 } else { 0.99 }),
            ),
            ("all 0.5", Box::new(|_, _| 0.5)),
        ];
        println!("policy  setting  C  k  coverage");
        for (name, probs) in &settings {
            for c in [2usize, 4, 8] {
                for k in [3usize, 5, 10] {
                    let ps: Vec<f64> = (0..c).map(|i| probs(i, c)).collect();
                    let truth_single = ps.iter().sum::<f64>() / c as f64;
                    let truth_reroll = ps.iter().map(|p| p + (1.0 - p) * p).sum::<f64>() / c as f64;
                    let (mut cover_s, mut cover_r) = (0, 0);
                    let reps = 1000;
                    for _ in 0..reps {
                        let mut single = Vec::new();
                        let mut reroll = Vec::new();
                        for p in &ps {
                            let x = (0..k).filter(|_| rng.unit() < *p).count() as f64;
                            single.push((x, k as u64, 0.0));
                            // The reroll estimate and its jackknife variance, as the policy
                            // computes them (leaving one sample out at a time).
                            let est = |x: f64, k: f64| (x + (k - x) * x / (k - 1.0)) / k;
                            let kf = k as f64;
                            let loo: Vec<f64> = (0..k)
                                .map(|j| {
                                    let xj = if (j as f64) < x { x - 1.0 } else { x };
                                    est(xj, kf - 1.0)
                                })
                                .collect();
                            let m = loo.iter().sum::<f64>() / kf;
                            let var = (kf - 1.0) / kf
                                * loo.iter().map(|e| (e - m) * (e - m)).sum::<f64>();
                            reroll.push((est(x, kf) * kf, k as u64, var));
                        }
                        let (_, iv) = these_tasks(&single).unwrap();
                        cover_s +=
                            usize::from(iv.lower <= truth_single && truth_single <= iv.upper);
                        let (_, iv) = these_tasks(&reroll).unwrap();
                        cover_r +=
                            usize::from(iv.lower <= truth_reroll && truth_reroll <= iv.upper);
                    }
                    for (policy, cover) in [("single", cover_s), ("reroll", cover_r)] {
                        let cov = cover as f64 / reps as f64;
                        println!("{policy}  {name}  {c}  {k}  {cov:.3}");
                        if cov < worst.0 {
                            worst = (cov, format!("{policy}, {name}, C = {c}, k = {k}"));
                        }
                    }
                }
            }
        }
        println!("worst coverage: {:.3} ({})", worst.0, worst.1);
        assert!(
            worst.0 >= 0.93,
            "worst coverage {:.3} at {}",
            worst.0,
            worst.1
        );
    }
}
