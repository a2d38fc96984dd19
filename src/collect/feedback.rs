//! Planning the follow-up rounds (SPEC §11): the feedback round (`collect --feedback`), which
//! follows up the first-round samples of a cell that the current checkers score as a *visible*
//! failure ([`crate::follow_up::visible`]: a router never learns of a silent one), and the
//! review round (`collect --review checklist`, HiTEC-ICL's second round), which follows up
//! every first-round sample that got an answer, passing or not. For each such sample without a
//! follow-up of an [`Ask`] and [`History`] yet, the plan names the parent; when a cell is sent,
//! the request is built ([`crate::follow_up::follow_up`], [`crate::follow_up::review`]). The
//! requests are sent by the same pipeline as first-round samples (`collect::launch_model`) and
//! written as run folders of kind `feedback` or `review`, one per cell, ask and history in a
//! collection.
//!
//! A plan holds the parents' keys only, never a body: a BFCL-sized tree has tens of thousands of
//! failures, and holding every follow-up body of the round at once would cost gigabytes. Each
//! cell's bodies are built from the parents' files when the cell is sent ([`bodies`]), so
//! memory holds the bodies of the open cells only, as for first-round samples.
//!
//! Resuming is by content, not by name: a follow-up exists when a finished feedback run of that
//! style in the cell holds a sample whose `meta.json` names the parent. With `--retry-errors`
//! a follow-up kept as a transport error does not count, so it is asked again (the error stays
//! on disk, as first-round errors do; build counts it apart). An interrupted collection leaves
//! only temporary folders (removed, and their follow-ups planned again).

use crate::follow_up::{self, NoFollowUp};
use crate::runs::{self, FeedbackStyle, History, RunKind};
use crate::task::Task;
use crate::taxonomy::{Label, Outcome};
use crate::transcript::{Meta, ParentRef};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What a follow-up asks of the model: to try again after feedback in a style (after a visible
/// failure), or to review its answer against the checklist (after every answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ask {
    Feedback(FeedbackStyle),
    Review,
}

impl Ask {
    /// `error`, `checklist`, `retry` or `review`: in run ids, headers and the terminal.
    pub fn as_str(&self) -> &'static str {
        match self {
            Ask::Feedback(s) => s.as_str(),
            Ask::Review => "review",
        }
    }

    /// The kind of the run folders it writes.
    pub fn kind(&self) -> RunKind {
        match self {
            Ask::Feedback(_) => RunKind::Feedback,
            Ask::Review => RunKind::Review,
        }
    }

    /// The style recorded in `cell.json`: a review's text is the checklist.
    pub fn style(&self) -> FeedbackStyle {
        match self {
            Ask::Feedback(s) => *s,
            Ask::Review => FeedbackStyle::Checklist,
        }
    }

    /// The ask a finished run of `kind` with `style` answered; `None` for first-round runs.
    fn of_run(kind: RunKind, style: FeedbackStyle) -> Option<Ask> {
        match kind {
            RunKind::Samples => None,
            RunKind::Feedback => Some(Ask::Feedback(style)),
            RunKind::Review => Some(Ask::Review),
        }
    }
}

/// One follow-up to send: its parent's key, not its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowUp {
    /// The first-round sample it follows up.
    pub parent: ParentRef,
    /// The parent's position among the cell's first-round samples, in run order: the sample
    /// number sent in collect's sample header, so a scripted server answers the follow-up of
    /// the same parent the same way whatever the run ids.
    pub position: u32,
    /// The parent's label under the current checkers (`None`: it passed, a review's parent).
    pub label: Option<Label>,
}

/// The follow-ups of one ask and history still missing in one cell.
#[derive(Debug, Clone)]
pub struct FeedbackPlan {
    pub ask: Ask,
    pub history: History,
    pub items: Vec<FollowUp>,
}

impl FeedbackPlan {
    /// What the follow-up header says of an item: `<ask>/<parent's label or pass>`.
    pub fn header(&self, item: &FollowUp) -> String {
        let label = item.label.map_or("pass", |l| l.as_str());
        format!("{}/{label}", self.ask.as_str())
    }
}

/// What the planning of one cell found.
#[derive(Debug, Default)]
pub struct CellFeedback {
    /// Per ask, in the order asked, the follow-ups to send (asks with none left out).
    pub plans: Vec<FeedbackPlan>,
    /// First-round samples that failed visibly under the current checkers.
    pub failures: u32,
    /// First-round samples that failed silently: no router sees them, none is followed up.
    pub silent: u32,
    /// First-round samples that got an answer (passes and failures): a review's parents.
    pub answered: u32,
    /// Follow-ups already on disk (of the styles asked for).
    pub done: u32,
    /// Follow-ups on disk kept as transport errors that are asked again (`--retry-errors`).
    pub again: u32,
    /// Samples that could not be read or followed up, one line each.
    pub warnings: Vec<String>,
}

/// A follow-up's identity in a cell: what it asked, with which history, of which parent.
pub type FollowUpKey = (Ask, History, ParentRef);

/// The parents followed up in a cell's finished feedback and review runs, and how many of
/// those follow-ups were transport errors left out of the set because `retry_errors` asks them
/// again.
pub struct FollowedUp {
    pub done: BTreeSet<FollowUpKey>,
    pub errors_to_retry: BTreeSet<FollowUpKey>,
    pub warnings: Vec<String>,
}

/// The parents already followed up in `cell`'s finished feedback and review runs, by ask and
/// history. With `retry_errors`, a follow-up whose exchange failed is not one (unless another
/// follow-up of the same key got an answer).
pub fn followed_up(scan: &runs::Scan, retry_errors: bool) -> FollowedUp {
    let mut out = FollowedUp {
        done: BTreeSet::new(),
        errors_to_retry: BTreeSet::new(),
        warnings: Vec::new(),
    };
    for r in scan.runs.iter().filter(|r| !r.cell.kind.is_samples()) {
        let Some(info) = &r.cell.feedback else {
            out.warnings.push(format!(
                "{}: a feedback or review run without its style in cell.json",
                r.dir.display()
            ));
            continue;
        };
        let Some(ask) = Ask::of_run(r.cell.kind, info.style) else {
            continue;
        };
        for s in &r.samples {
            let path = r.sample_dir(s).join("meta.json");
            let meta = runs::read_bounded(&path, runs::MAX_SAMPLE_FILE)
                .ok()
                .and_then(|b| serde_json::from_slice::<Meta>(&b).ok());
            let Some(parent) = meta.as_ref().and_then(|m| m.parent.clone()) else {
                out.warnings.push(format!(
                    "{}: a feedback sample whose meta.json names no parent",
                    path.display()
                ));
                continue;
            };
            let key = (ask, info.history, parent);
            if retry_errors && meta.as_ref().is_some_and(super::exchange_failed) {
                out.errors_to_retry.insert(key);
            } else {
                out.done.insert(key);
            }
        }
    }
    // A parent asked again once already, and answered then, is done.
    let done = &out.done;
    out.errors_to_retry.retain(|k| !done.contains(k));
    out
}

/// Plans the follow-up rounds of one cell: scores its first-round samples against `task` and
/// lists, for each ask of `asks` and each sample it applies to (a visible failure for
/// feedback, any answer for a review) that has no follow-up of that ask and `history` yet, the
/// parent to follow up. No body is built here ([`bodies`]).
pub fn plan_cell(
    root: &Path,
    model: &str,
    task: &Task,
    asks: &[Ask],
    history: History,
    retry_errors: bool,
) -> CellFeedback {
    let scan = runs::cell_runs(root, model, &task.id);
    let mut out = CellFeedback {
        warnings: scan
            .skipped
            .iter()
            .map(|s| format!("{}: {}", s.path.display(), s.reason))
            .collect(),
        ..CellFeedback::default()
    };
    let followed = followed_up(&scan, retry_errors);
    out.warnings.extend(followed.warnings);
    let mut plans: Vec<FeedbackPlan> = asks
        .iter()
        .map(|&ask| FeedbackPlan {
            ask,
            history,
            items: Vec::new(),
        })
        .collect();
    for (here, r, s) in first_round(&scan) {
        let Classified { label, seen, fit } = match classify(task, r, s) {
            Ok(Some(c)) => c,
            Ok(None) => continue,
            Err(e) => {
                out.warnings.push(e);
                continue;
            }
        };
        out.answered += 1;
        if label.is_some() {
            if seen {
                out.failures += 1;
            } else {
                out.silent += 1;
            }
        }
        let parent = ParentRef {
            run: r.run_id.clone(),
            sample: s.clone(),
        };
        for plan in &mut plans {
            if matches!(plan.ask, Ask::Feedback(_)) && !seen {
                continue;
            }
            let key = (plan.ask, history, parent.clone());
            if followed.done.contains(&key) {
                out.done += 1;
                continue;
            }
            if let Err(e) = &fit {
                out.warnings.push(format!(
                    "{}: {e}: not followed up",
                    r.sample_dir(s).display()
                ));
                break;
            }
            if followed.errors_to_retry.contains(&key) {
                out.again += 1;
            }
            plan.items.push(FollowUp {
                parent: parent.clone(),
                position: here,
                label,
            });
        }
    }
    plans.retain(|p| !p.items.is_empty());
    out.plans = plans;
    out
}

/// A first-round sample that got an answer, as planning sees it.
struct Classified {
    /// Its label under the current checkers; `None`: it passed.
    label: Option<Label>,
    /// Its failure is visible to a router (decided from the request and the answer alone).
    seen: bool,
    /// Whether a follow-up can be built on its request.
    fit: Result<(), NoFollowUp>,
}

/// Reads and scores one first-round sample for planning: `Ok(None)` for a transport error
/// (nothing to follow up), `Err` with a line for the terminal when it cannot be read.
fn classify(task: &Task, r: &runs::RunDir, s: &str) -> Result<Option<Classified>, String> {
    let judged = crate::evidence::judge(r, s, task).map_err(|e| {
        format!(
            "{}: cannot read ({e}): not followed up",
            r.sample_dir(s).display()
        )
    })?;
    let verdict = &judged.verdict;
    let (label, completion) = match (verdict.outcome, &judged.completion) {
        (Outcome::Pass, Ok(c)) => (None, c),
        (Outcome::Fail(l), Ok(c)) => (Some(l), c),
        _ => return Ok(None),
    };
    // A follow-up echoes the answer it follows up: one cut to the calls callcheck reads would
    // not be what the model said, and one whole would be a request as large as the answer
    // (73.6 MB for 300,000 calls).
    if let Some(held) = completion.calls_cut {
        return Err(format!(
            "{}: its answer holds {held} tool calls, more than the {} callcheck reads of one: not followed up",
            r.sample_dir(s).display(),
            crate::score::wire::MAX_CALLS
        ));
    }
    let request = judged.sample.transcript.request.as_deref();
    let seen = follow_up::visible(verdict);
    let fit = request
        .ok_or(NoFollowUp::BadRequest)
        .and_then(follow_up::check_request);
    Ok(Some(Classified { label, seen, fit }))
}

/// A cell's first-round samples in run order, each with its position (the sample number the
/// follow-up's header carries).
fn first_round(scan: &runs::Scan) -> impl Iterator<Item = (u32, &runs::RunDir, &String)> {
    scan.runs
        .iter()
        .filter(|r| r.cell.kind == RunKind::Samples)
        .flat_map(|r| r.samples.iter().map(move |s| (r, s)))
        .zip(0u32..)
        .map(|((r, s), position)| (position, r, s))
}

/// The follow-up bodies of one planned run, built from the parents' files as they are now, in
/// the plan's order: each item's body, or why none can be built any more (the parent's files
/// changed or went since the plan, which another program may do; callcheck's lock keeps only
/// other collections out). Reads each parent once; holds this cell's bodies only.
pub fn bodies(
    root: &Path,
    model: &str,
    task: &Task,
    plan: &FeedbackPlan,
) -> Vec<Result<bytes::Bytes, String>> {
    let scan = runs::cell_runs(root, model, &task.id);
    let by_key: BTreeMap<(&str, &str), &runs::RunDir> = first_round(&scan)
        .map(|(_, r, s)| ((r.run_id.as_str(), s.as_str()), r))
        .collect();
    plan.items
        .iter()
        .map(|item| {
            let p = &item.parent;
            let gone = || format!("{}/{}: no longer in the cell", p.run, p.sample);
            let run = by_key
                .get(&(p.run.as_str(), p.sample.as_str()))
                .ok_or_else(gone)?;
            let where_ = run.sample_dir(&p.sample);
            let judged = crate::evidence::judge(run, &p.sample, task)
                .map_err(|e| format!("{}: cannot read ({e})", where_.display()))?;
            let verdict = &judged.verdict;
            let request = &judged.sample.transcript.request;
            let (Ok(completion), Some(request)) = (&judged.completion, request) else {
                return Err(format!(
                    "{}: {}",
                    where_.display(),
                    NoFollowUp::TransportError
                ));
            };
            let body = match plan.ask {
                Ask::Feedback(style) => {
                    follow_up::follow_up(request, completion, verdict, style, plan.history)
                }
                Ask::Review => follow_up::review(request, completion, plan.history),
            }
            .map_err(|e| format!("{}: {e}", where_.display()))?;
            serde_json::to_vec(&body)
                .map(bytes::Bytes::from)
                .map_err(|e| format!("{}: cannot encode its follow-up ({e})", where_.display()))
        })
        .collect()
}

/// What the follow-up rounds found and did for one row, for the terminal.
#[derive(Debug, Clone, Default)]
pub struct RoundTally {
    /// First-round samples of the row's selected cells that fail visibly under the current
    /// checkers.
    pub failures: u64,
    /// Of their failures, the silent ones (not followed up).
    pub silent: u64,
    /// First-round samples that got an answer (a review's parents).
    pub answered: u64,
    /// Cells holding at least one sample a follow-up applies to.
    pub cells: u64,
    /// Follow-ups of the asks already on disk (not sent again).
    pub done: u64,
    /// Follow-ups on disk kept as transport errors, planned again (`--retry-errors`).
    pub again: u64,
    /// Follow-ups planned, per ask.
    pub planned: BTreeMap<Ask, u64>,
    /// Follow-ups sent and written, per ask.
    pub sent: BTreeMap<Ask, u64>,
}

impl RoundTally {
    /// Adds one cell's planning for `asks`.
    pub fn add(&mut self, cell: &CellFeedback, asks: &[Ask]) {
        self.failures += u64::from(cell.failures);
        self.silent += u64::from(cell.silent);
        self.answered += u64::from(cell.answered);
        let reviews = asks.contains(&Ask::Review);
        let applies = if reviews {
            cell.answered
        } else {
            cell.failures
        };
        self.cells += u64::from(applies > 0);
        self.done += u64::from(cell.done);
        self.again += u64::from(cell.again);
        for p in &cell.plans {
            *self.planned.entry(p.ask).or_default() += p.items.len() as u64;
        }
    }

    /// What the samples a round applies to are, in words: `5 visible failures among the
    /// first-round samples (2 silent ones left alone: a router cannot see them)`, `12 answered
    /// first-round samples`.
    fn parents_text(&self, asks: &[Ask]) -> String {
        let mut parts = Vec::new();
        if asks.iter().any(|a| matches!(a, Ask::Feedback(_))) {
            parts.push(format!(
                "{} visible failures among the first-round samples ({} silent ones left alone: a router cannot see them)",
                self.failures, self.silent
            ));
        }
        if asks.contains(&Ask::Review) {
            parts.push(format!("{} answered first-round samples", self.answered));
        }
        parts.join(", ")
    }

    /// What the round will send for a row, said before it starts (in place of the first
    /// round's preflight line: a follow-up round probes nothing).
    pub fn plan_line(&self, asks: &[Ask]) -> String {
        let per_ask = asks
            .iter()
            .map(|a| {
                format!(
                    "{} {}",
                    a.as_str(),
                    self.planned.get(a).copied().unwrap_or(0)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let mut s = format!(
            "{} in {} cells; follow-ups to send: {per_ask} ({} already on disk",
            self.parents_text(asks),
            self.cells,
            self.done
        );
        if self.again > 0 {
            s.push_str(&format!(
                "; {} kept as transport errors, asked again",
                self.again
            ));
        }
        s.push(')');
        s
    }

    /// The follow-ups sent, per ask, against those planned.
    pub fn sent_line(&self, asks: &[Ask]) -> String {
        asks.iter()
            .map(|a| {
                format!(
                    "{} {}/{}",
                    a.as_str(),
                    self.sent.get(a).copied().unwrap_or(0),
                    self.planned.get(a).copied().unwrap_or(0)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The names of the asks, for the summary.
pub fn ask_names(asks: &[Ask]) -> String {
    asks.iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The command line's name for a round of these asks: `collect --feedback`, `collect
/// --review`, or both.
pub fn round_name(asks: &[Ask]) -> &'static str {
    let feedback = asks.iter().any(|a| matches!(a, Ask::Feedback(_)));
    match (feedback, asks.contains(&Ask::Review)) {
        (true, true) => "collect --feedback --review",
        (false, true) => "collect --review",
        _ => "collect --feedback",
    }
}

/// The summary of a follow-up round: what it sent per ask, not how the follow-ups scored
/// (scoring is build's: collect never scores its own answers).
pub(super) fn render(report: &super::Report, asks: &[Ask], history: History) -> String {
    let name = round_name(asks);
    let round = |m: &super::ModelSummary| m.feedback.clone().unwrap_or_default();
    let planned: u64 = report
        .models
        .iter()
        .map(|m| round(m).planned.values().sum::<u64>())
        .sum();
    if planned == 0 && report.fatal.is_none() && !report.interrupted {
        let mut out = format!(
            "{name}: nothing to send: every first-round sample it applies to has its follow-ups ({}; history {})\n",
            ask_names(asks),
            history.as_str()
        );
        for m in &report.models {
            let r = round(m);
            out.push_str(&m.failure_line().unwrap_or_else(|| {
                format!(
                    "  {}: {} in {} cells; {} follow-ups on disk\n",
                    m.name,
                    r.parents_text(asks),
                    r.cells,
                    r.done
                )
            }));
        }
        return out;
    }
    let sent: u64 = report.models.iter().map(|m| m.samples).sum();
    let mut out = report.headline(
        name,
        &format!("{sent} follow-ups ({} history)", history.as_str()),
        sent,
    );
    for m in &report.models {
        out.push_str(&m.warning_lines());
        if let Some(line) = m.failure_line() {
            out.push_str(&line);
            continue;
        }
        let r = round(m);
        let more = match m.not_completions {
            0 => String::new(),
            n => format!(
                " and {n} answered but not a chat completion (build counts them as transport errors too)"
            ),
        };
        out.push_str(&format!(
            "  {}: follow-ups sent: {}, for {} ({} already on disk); {}; follow-up runs {}/{} written; {:.1} s\n",
            m.name,
            r.sent_line(asks),
            r.parents_text(asks),
            r.done,
            m.exchange_counts(&more, "follow-ups"),
            m.cells_done,
            m.cells_planned,
            m.seconds
        ));
    }
    out.push_str(&format!(
        "{name}: which follow-ups passed is build's to say: run `callcheck build` and read routing.html\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{ModelRow, RunSpec, Wire, write_run};

    /// The task of the cells these tests write, and their row `m`.
    fn weather_cell() -> (Task, ModelRow) {
        let task = crate::task::load(Path::new("tasks/basic/basic-weather-city.json"))
            .unwrap()
            .remove(0);
        let row = ModelRow {
            name: "m".into(),
            served: "m".into(),
            stream: false,
        };
        (task, row)
    }

    fn spec<'a>(row: &'a ModelRow, task: &'a Task, run_id: &'a str) -> RunSpec<'a> {
        RunSpec {
            model: row,
            task,
            task_sha256: &task.sha256,
            run_id,
            server: serde_json::Value::Null,
            seed: 1,
        }
    }

    /// A broken-JSON call: a visible failure whatever `tool_choice` says.
    fn broken(task: &Task) -> Wire {
        let mut r = crate::corrupt::gold(task);
        r.tool_calls[0].arguments = r#"{"city": "Paris""#.into();
        Wire::Reply(r)
    }

    /// A cell with a pass, a visible failure, a silent one, a transport error and a second
    /// visible failure: each visible failure is planned once per feedback style, in sample
    /// order with its position; the silent one never (a router cannot see it); every answer
    /// once for a review; a follow-up already on disk is not planned again, and a follow-up
    /// run never counts as first-round samples.
    #[test]
    fn visible_failures_get_feedback_and_every_answer_a_review() {
        let tmp = tempfile::tempdir().unwrap();
        let (task, row) = weather_cell();
        let coerced = crate::corrupt::corruptions(&task, Label::HallucinatedParam, 512)
            .unwrap()
            .remove(0)
            .reply;
        let wires = [
            Wire::Reply(crate::corrupt::gold(&task)),
            broken(&task),
            Wire::Reply(crate::reply::Reply::text("It is probably sunny.")),
            Wire::Status(503, "{\"error\": {\"message\": \"busy\"}}".into()),
            Wire::Reply(coerced),
        ];
        let spec = |run_id: &'static str| spec(&row, &task, run_id);
        write_run(tmp.path(), spec("r1"), &wires).unwrap();
        use FeedbackStyle::*;
        let asks = [Ask::Feedback(Error), Ask::Feedback(Retry), Ask::Review];
        let h = History::AsProduced;
        let planned = plan_cell(tmp.path(), "m", &task, &asks, h, false);
        assert_eq!(
            (
                planned.failures,
                planned.silent,
                planned.answered,
                planned.done
            ),
            (2, 1, 4, 0)
        );
        assert!(planned.warnings.is_empty(), "{:?}", planned.warnings);
        let shown = |p: &CellFeedback| -> Vec<(Ask, String, u32, Option<Label>)> {
            p.plans
                .iter()
                .flat_map(|p| {
                    p.items
                        .iter()
                        .map(|i| (p.ask, i.parent.sample.clone(), i.position, i.label))
                })
                .collect()
        };
        let (mj, tc, nc) = (
            Some(Label::MalformedJson),
            Some(Label::HallucinatedParam),
            Some(Label::NoCall),
        );
        let e = Ask::Feedback(Error);
        let r = Ask::Feedback(Retry);
        let v = Ask::Review;
        assert_eq!(
            shown(&planned),
            [
                (e, "001".into(), 1, mj),
                (e, "004".into(), 4, tc),
                (r, "001".into(), 1, mj),
                (r, "004".into(), 4, tc),
                (v, "000".into(), 0, None),
                (v, "001".into(), 1, mj),
                (v, "002".into(), 2, nc),
                (v, "004".into(), 4, tc),
            ]
        );
        assert_eq!(
            planned.plans[2].header(&planned.plans[2].items[0]),
            "review/pass"
        );
        assert_eq!(
            planned.plans[0].header(&planned.plans[0].items[0]),
            "error/malformed_json"
        );
        // Each body, built when its cell is sent, is the follow-up of its parent.
        let r1 = runs::cell_runs(tmp.path(), "m", &task.id).runs.remove(0);
        let want = |sample: &str, ask: Ask| {
            let t = r1.read_sample(sample).unwrap().transcript();
            let request = t.request.as_ref().unwrap();
            let c = crate::score::parse(&t).unwrap();
            let body = match ask {
                Ask::Feedback(style) => crate::follow_up::follow_up(
                    request,
                    &c,
                    &crate::score::score(&task, &t),
                    style,
                    h,
                ),
                Ask::Review => crate::follow_up::review(request, &c, h),
            }
            .unwrap();
            Ok(bytes::Bytes::from(serde_json::to_vec(&body).unwrap()))
        };
        assert_eq!(
            bodies(tmp.path(), "m", &task, &planned.plans[1]),
            [want("001", r), want("004", r)]
        );
        assert_eq!(
            bodies(tmp.path(), "m", &task, &planned.plans[2]),
            [
                want("000", v),
                want("001", v),
                want("002", v),
                want("004", v)
            ]
        );
        // A parent gone since the plan is said, not sent.
        let mut stale = planned.plans[1].clone();
        stale.items[0].parent.run = "r0".into();
        assert_eq!(
            bodies(tmp.path(), "m", &task, &stale),
            [Err("r0/001: no longer in the cell".into()), want("004", r)]
        );

        // A retry follow-up of 001 on disk: only 004 is left for that style; a sanitised
        // history is another follow-up, planned in full.
        let dir = write_run(tmp.path(), spec("r2-retry"), &wires[..1]).unwrap();
        let parent = ParentRef {
            run: "r1".into(),
            sample: "001".into(),
        };
        make_follow_up(&dir, r, h, &[parent]);
        let planned = plan_cell(tmp.path(), "m", &task, &asks[..2], h, false);
        assert_eq!((planned.failures, planned.done), (2, 1));
        assert_eq!(
            shown(&planned),
            [
                (e, "001".into(), 1, mj),
                (e, "004".into(), 4, tc),
                (r, "004".into(), 4, tc),
            ]
        );
        let sanitised = plan_cell(
            tmp.path(),
            "m",
            &task,
            &asks[1..2],
            History::Sanitised,
            false,
        );
        assert_eq!(sanitised.done, 0);
        assert_eq!(sanitised.plans[0].items.len(), 2);
    }

    /// Turns a run written by `write_run` into a follow-up run of `ask` and `history` whose
    /// samples follow up `parents` (as `collect --feedback` and `--review` write them).
    fn make_follow_up(dir: &Path, ask: Ask, history: History, parents: &[ParentRef]) {
        let mut cell: runs::CellInfo =
            serde_json::from_slice(&std::fs::read(dir.join("cell.json")).unwrap()).unwrap();
        cell.kind = ask.kind();
        cell.feedback = Some(runs::FeedbackInfo {
            style: ask.style(),
            history,
        });
        std::fs::write(dir.join("cell.json"), serde_json::to_vec(&cell).unwrap()).unwrap();
        for (i, p) in parents.iter().enumerate() {
            let meta_path = dir.join(format!("samples/{i:03}/meta.json"));
            let mut meta: Meta =
                serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
            meta.parent = Some(p.clone());
            std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
        }
    }

    /// A follow-up kept as a transport error is done without `--retry-errors` and planned
    /// again with it, unless a later follow-up of the same parent and style got an answer.
    #[test]
    fn follow_ups_kept_as_transport_errors_are_planned_again_with_retry_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let (task, row) = weather_cell();
        let spec = |run_id: &'static str| spec(&row, &task, run_id);
        let prose = || broken(&task);
        write_run(tmp.path(), spec("r1"), &[prose(), prose()]).unwrap();
        let parent = |sample: &str| ParentRef {
            run: "r1".into(),
            sample: sample.into(),
        };
        // Error style: 000 answered, 001 kept as a 503.
        let busy = || Wire::Status(503, "{\"error\": {\"message\": \"busy\"}}".into());
        let dir = write_run(tmp.path(), spec("r2-error"), &[prose(), busy()]).unwrap();
        make_follow_up(
            &dir,
            Ask::Feedback(FeedbackStyle::Error),
            History::AsProduced,
            &[parent("000"), parent("001")],
        );
        let styles = [Ask::Feedback(FeedbackStyle::Error)];
        let h = History::AsProduced;
        let keys = |p: &CellFeedback| -> Vec<String> {
            p.plans
                .iter()
                .flat_map(|p| p.items.iter().map(|i| i.parent.sample.clone()))
                .collect()
        };

        let without = plan_cell(tmp.path(), "m", &task, &styles, h, false);
        assert_eq!((without.failures, without.done, without.again), (2, 2, 0));
        assert!(without.plans.is_empty());

        let with = plan_cell(tmp.path(), "m", &task, &styles, h, true);
        assert_eq!((with.failures, with.done, with.again), (2, 1, 1));
        assert_eq!(keys(&with), ["001"]);
        assert_eq!(with.plans[0].items[0].position, 1);

        // Asked again and answered: done, the error kept beside it.
        let dir = write_run(tmp.path(), spec("r3-error"), &[prose()]).unwrap();
        make_follow_up(
            &dir,
            Ask::Feedback(FeedbackStyle::Error),
            h,
            &[parent("001")],
        );
        let again = plan_cell(tmp.path(), "m", &task, &styles, h, true);
        assert_eq!((again.failures, again.done, again.again), (2, 2, 0));
        assert!(again.plans.is_empty());
        assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    }
}
