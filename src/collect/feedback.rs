//! Planning the feedback round (SPEC §11, `collect --feedback`): which first-round samples of a
//! cell failed under the current checkers and have no follow-up of a style yet, and, when a
//! cell is sent, the follow-up request of each ([`crate::follow_up::follow_up`]). The requests
//! are sent by the same pipeline as first-round samples (`collect::launch_model`) and written
//! as run folders of kind `feedback`, one per cell and style in a collection.
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
use crate::runs::{self, FeedbackStyle, RunKind};
use crate::task::Task;
use crate::taxonomy::{Label, Outcome};
use crate::transcript::{Meta, ParentRef};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One follow-up to send: its parent's key, not its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowUp {
    /// The failed sample it follows up.
    pub parent: ParentRef,
    /// The parent's position among the cell's first-round samples, in run order: the sample
    /// number sent in collect's sample header, so a scripted server answers the follow-up of
    /// the same parent the same way whatever the run ids.
    pub position: u32,
    /// The parent's label under the current checkers.
    pub label: Label,
}

/// The follow-ups of one style still missing in one cell.
#[derive(Debug, Clone)]
pub struct FeedbackPlan {
    pub style: FeedbackStyle,
    pub items: Vec<FollowUp>,
}

/// What the planning of one cell found.
#[derive(Debug, Default)]
pub struct CellFeedback {
    /// Per style asked for, in the order asked, the follow-ups to send (styles with none left
    /// out).
    pub plans: Vec<FeedbackPlan>,
    /// First-round samples that failed under the current checkers.
    pub failures: u32,
    /// Follow-ups already on disk (of the styles asked for).
    pub done: u32,
    /// Follow-ups on disk kept as transport errors that are asked again (`--retry-errors`).
    pub again: u32,
    /// Samples that could not be read or followed up, one line each.
    pub warnings: Vec<String>,
}

/// The parents followed up in a cell's finished feedback runs, by style, and how many of those
/// follow-ups were transport errors left out of the set because `retry_errors` asks them again.
pub struct FollowedUp {
    pub done: BTreeSet<(FeedbackStyle, ParentRef)>,
    pub errors_to_retry: BTreeSet<(FeedbackStyle, ParentRef)>,
    pub warnings: Vec<String>,
}

/// The parents already followed up in `cell`'s finished feedback runs, by style. With
/// `retry_errors`, a follow-up whose exchange failed is not one (unless another follow-up of
/// the same parent and style got an answer).
pub fn followed_up(scan: &runs::Scan, retry_errors: bool) -> FollowedUp {
    let mut out = FollowedUp {
        done: BTreeSet::new(),
        errors_to_retry: BTreeSet::new(),
        warnings: Vec::new(),
    };
    for r in scan
        .runs
        .iter()
        .filter(|r| r.cell.kind == RunKind::Feedback)
    {
        let Some(info) = &r.cell.feedback else {
            out.warnings.push(format!(
                "{}: a feedback run without its style in cell.json",
                r.dir.display()
            ));
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
            let key = (info.style, parent);
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

/// Plans the feedback round of one cell: scores its first-round samples against `task` and
/// lists, for each failure (neither a pass nor a transport error) and each style of `styles`
/// it has no follow-up of, the parent to follow up. No body is built here ([`bodies`]).
pub fn plan_cell(
    root: &Path,
    model: &str,
    task: &Task,
    styles: &[FeedbackStyle],
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
    let mut plans: Vec<FeedbackPlan> = styles
        .iter()
        .map(|&style| FeedbackPlan {
            style,
            items: Vec::new(),
        })
        .collect();
    for (here, r, s) in first_round(&scan) {
        let t = match r.read_sample(s) {
            Ok(files) => files.transcript(),
            Err(e) => {
                out.warnings.push(format!(
                    "{}: cannot read ({e}): not followed up",
                    r.sample_dir(s).display()
                ));
                continue;
            }
        };
        let parsed = crate::score::parse(&t);
        let verdict = crate::score::score_parsed(task, &t, &parsed);
        let (Outcome::Fail(label), Ok(completion)) = (verdict.outcome, &parsed) else {
            continue;
        };
        // A follow-up echoes the answer it follows up: one cut to the calls callcheck reads
        // would not be what the model said, and one whole would be a request as large as the
        // answer (73.6 MB for 300,000 calls).
        if let Some(held) = completion.calls_cut {
            out.failures += 1;
            out.warnings.push(format!(
                "{}: its answer holds {held} tool calls, more than the {} callcheck reads of one: not followed up",
                r.sample_dir(s).display(),
                crate::score::wire::MAX_CALLS
            ));
            continue;
        }
        out.failures += 1;
        let parent = ParentRef {
            run: r.run_id.clone(),
            sample: s.clone(),
        };
        let fit = t
            .request
            .as_deref()
            .ok_or(NoFollowUp::BadRequest)
            .and_then(follow_up::check_request);
        for plan in &mut plans {
            let key = (plan.style, parent.clone());
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
            let t = run
                .read_sample(&p.sample)
                .map_err(|e| format!("{}: cannot read ({e})", where_.display()))?
                .transcript();
            let parsed = crate::score::parse(&t);
            let verdict = crate::score::score_parsed(task, &t, &parsed);
            let (Ok(completion), Some(request)) = (&parsed, &t.request) else {
                return Err(format!(
                    "{}: {}",
                    where_.display(),
                    NoFollowUp::TransportError
                ));
            };
            let body = follow_up::follow_up(task, request, completion, &verdict, plan.style)
                .map_err(|e| format!("{}: {e}", where_.display()))?;
            serde_json::to_vec(&body)
                .map(bytes::Bytes::from)
                .map_err(|e| format!("{}: cannot encode its follow-up ({e})", where_.display()))
        })
        .collect()
}

/// What the feedback round found and did for one row, for the terminal.
#[derive(Debug, Clone, Default)]
pub struct RoundTally {
    /// First-round samples of the row's selected cells that fail under the current checkers.
    pub failures: u64,
    /// Cells holding at least one of them.
    pub cells: u64,
    /// Follow-ups of the styles asked already on disk (not sent again).
    pub done: u64,
    /// Follow-ups on disk kept as transport errors, planned again (`--retry-errors`).
    pub again: u64,
    /// Follow-ups planned, per style.
    pub planned: BTreeMap<FeedbackStyle, u64>,
    /// Follow-ups sent and written, per style.
    pub sent: BTreeMap<FeedbackStyle, u64>,
}

impl RoundTally {
    /// Adds one cell's planning.
    pub fn add(&mut self, cell: &CellFeedback) {
        self.failures += u64::from(cell.failures);
        self.cells += u64::from(cell.failures > 0);
        self.done += u64::from(cell.done);
        self.again += u64::from(cell.again);
        for p in &cell.plans {
            *self.planned.entry(p.style).or_default() += p.items.len() as u64;
        }
    }

    /// What the round will send for a row, said before it starts (in place of the first
    /// round's preflight line: the feedback round probes nothing).
    pub fn plan_line(&self, styles: &[FeedbackStyle]) -> String {
        let per_style = styles
            .iter()
            .map(|s| {
                format!(
                    "{} {}",
                    s.as_str(),
                    self.planned.get(s).copied().unwrap_or(0)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let mut s = format!(
            "{} failed first-round samples in {} cells; follow-ups to send: {per_style} ({} already on disk",
            self.failures, self.cells, self.done
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

    /// The follow-ups sent, per style, against those planned.
    pub fn sent_line(&self, styles: &[FeedbackStyle]) -> String {
        styles
            .iter()
            .map(|s| {
                format!(
                    "{} {}/{}",
                    s.as_str(),
                    self.sent.get(s).copied().unwrap_or(0),
                    self.planned.get(s).copied().unwrap_or(0)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The names of the styles asked, for the summary.
pub fn style_names(styles: &[FeedbackStyle]) -> String {
    styles
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The summary of a feedback round: what it sent per style, not how the follow-ups scored
/// (scoring is build's: collect never scores its own answers).
pub(super) fn render(report: &super::Report, styles: &[FeedbackStyle]) -> String {
    let mut out = String::new();
    let round = |m: &super::ModelSummary| m.feedback.clone().unwrap_or_default();
    let planned: u64 = report
        .models
        .iter()
        .map(|m| round(m).planned.values().sum::<u64>())
        .sum();
    if planned == 0 && report.fatal.is_none() && !report.interrupted {
        out.push_str(&format!(
            "collect --feedback: nothing to send: every failed first-round sample has its follow-ups ({})\n",
            style_names(styles)
        ));
        for m in &report.models {
            let r = round(m);
            match &m.failure {
                Some(f) => out.push_str(&format!(
                    "  {}: not collected: {}\n",
                    m.name,
                    crate::term::escape_controls(f)
                )),
                None => out.push_str(&format!(
                    "  {}: {} failed first-round samples in {} cells; {} follow-ups on disk\n",
                    m.name, r.failures, r.cells, r.done
                )),
            }
        }
        return out;
    }
    let sent: u64 = report.models.iter().map(|m| m.samples).sum();
    out.push_str(&format!(
        "collect --feedback {}: {sent} follow-ups in {:.1} s ({}/s){}\n",
        report.run_id,
        report.seconds,
        super::per_second(sent as f64 / report.seconds.max(1e-9)),
        if report.interrupted {
            " — interrupted"
        } else {
            ""
        }
    ));
    for m in &report.models {
        for w in &m.warnings {
            out.push_str(&format!(
                "  {}: WARNING {}\n",
                m.name,
                crate::term::escape_controls(w)
            ));
        }
        if let Some(f) = &m.failure {
            out.push_str(&format!(
                "  {}: not collected: {}\n",
                m.name,
                crate::term::escape_controls(f)
            ));
            continue;
        }
        let r = round(m);
        let kinds = super::kinds_text(&m.error_kinds);
        let more = match m.not_completions {
            0 => String::new(),
            n => format!(
                " and {n} answered but not a chat completion (build counts them as transport errors too)"
            ),
        };
        out.push_str(&format!(
            "  {}: follow-ups sent: {}, for {} failed first-round samples ({} already on disk); {} kept as transport errors{kinds}{more}; {} HTTP attempts ({} retries, on {} follow-ups); feedback runs {}/{} written; {:.1} s\n",
            m.name,
            r.sent_line(styles),
            r.failures,
            r.done,
            m.errors,
            m.attempts,
            m.attempts.saturating_sub(m.samples),
            m.retried,
            m.cells_done,
            m.cells_planned,
            m.seconds
        ));
    }
    out.push_str(
        "collect --feedback: which follow-ups passed is build's to say: run `callcheck build` and read routing.html\n",
    );
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

    /// A cell with a pass, two failures and a transport error: each failure is planned once per
    /// style, in sample order with its position; a follow-up already on disk is not planned
    /// again, and a feedback run never counts as first-round samples.
    #[test]
    fn failures_without_a_follow_up_of_a_style_are_planned() {
        let tmp = tempfile::tempdir().unwrap();
        let (task, row) = weather_cell();
        let wrong = crate::corrupt::corruptions(&task, Label::WrongTool, 512)
            .unwrap()
            .remove(0)
            .reply;
        let wires = [
            Wire::Reply(crate::corrupt::gold(&task)),
            Wire::Reply(crate::reply::Reply::text("It is probably sunny.")),
            Wire::Status(503, "{\"error\": {\"message\": \"busy\"}}".into()),
            Wire::Reply(wrong),
        ];
        let spec = |run_id: &'static str| spec(&row, &task, run_id);
        write_run(tmp.path(), spec("r1"), &wires).unwrap();
        let styles = [FeedbackStyle::Error, FeedbackStyle::Retry];
        let planned = plan_cell(tmp.path(), "m", &task, &styles, false);
        assert_eq!((planned.failures, planned.done), (2, 0));
        assert!(planned.warnings.is_empty(), "{:?}", planned.warnings);
        let shown = |p: &CellFeedback| -> Vec<(FeedbackStyle, String, u32, Label)> {
            p.plans
                .iter()
                .flat_map(|p| {
                    p.items
                        .iter()
                        .map(|i| (p.style, i.parent.sample.clone(), i.position, i.label))
                })
                .collect()
        };
        use FeedbackStyle::*;
        assert_eq!(
            shown(&planned),
            [
                (Error, "001".into(), 1, Label::NoCall),
                (Error, "003".into(), 3, Label::WrongTool),
                (Retry, "001".into(), 1, Label::NoCall),
                (Retry, "003".into(), 3, Label::WrongTool),
            ]
        );
        // Each body, built when its cell is sent, is the follow-up of its parent.
        let r1 = runs::cell_runs(tmp.path(), "m", &task.id).runs.remove(0);
        let want = |sample: &str| {
            let t = r1.read_sample(sample).unwrap().transcript();
            let body = crate::follow_up::follow_up(
                &task,
                t.request.as_ref().unwrap(),
                &crate::score::parse(&t).unwrap(),
                &crate::score::score(&task, &t),
                Retry,
            )
            .unwrap();
            Ok(bytes::Bytes::from(serde_json::to_vec(&body).unwrap()))
        };
        assert_eq!(
            bodies(tmp.path(), "m", &task, &planned.plans[1]),
            [want("001"), want("003")]
        );
        // A parent gone since the plan is said, not sent.
        let mut stale = planned.plans[1].clone();
        stale.items[0].parent.run = "r0".into();
        assert_eq!(
            bodies(tmp.path(), "m", &task, &stale),
            [Err("r0/001: no longer in the cell".into()), want("003")]
        );

        // A retry follow-up of 001 on disk: only 003 is left for that style.
        let dir = write_run(tmp.path(), spec("r2-retry"), &wires[..1]).unwrap();
        let parent = ParentRef {
            run: "r1".into(),
            sample: "001".into(),
        };
        make_feedback(&dir, Retry, &[parent]);
        let planned = plan_cell(tmp.path(), "m", &task, &styles, false);
        assert_eq!((planned.failures, planned.done), (2, 1));
        assert_eq!(
            shown(&planned),
            [
                (Error, "001".into(), 1, Label::NoCall),
                (Error, "003".into(), 3, Label::WrongTool),
                (Retry, "003".into(), 3, Label::WrongTool),
            ]
        );
    }

    /// Turns a run written by `write_run` into a feedback run of `style` whose samples follow
    /// up `parents` (as `collect --feedback` writes them).
    fn make_feedback(dir: &Path, style: FeedbackStyle, parents: &[ParentRef]) {
        let mut cell: runs::CellInfo =
            serde_json::from_slice(&std::fs::read(dir.join("cell.json")).unwrap()).unwrap();
        cell.kind = RunKind::Feedback;
        cell.feedback = Some(runs::FeedbackInfo { style });
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
        let prose = || Wire::Reply(crate::reply::Reply::text("It is probably sunny."));
        write_run(tmp.path(), spec("r1"), &[prose(), prose()]).unwrap();
        let parent = |sample: &str| ParentRef {
            run: "r1".into(),
            sample: sample.into(),
        };
        // Error style: 000 answered, 001 kept as a 503.
        let busy = || Wire::Status(503, "{\"error\": {\"message\": \"busy\"}}".into());
        let dir = write_run(tmp.path(), spec("r2-error"), &[prose(), busy()]).unwrap();
        make_feedback(&dir, FeedbackStyle::Error, &[parent("000"), parent("001")]);
        let styles = [FeedbackStyle::Error];
        let keys = |p: &CellFeedback| -> Vec<String> {
            p.plans
                .iter()
                .flat_map(|p| p.items.iter().map(|i| i.parent.sample.clone()))
                .collect()
        };

        let without = plan_cell(tmp.path(), "m", &task, &styles, false);
        assert_eq!((without.failures, without.done, without.again), (2, 2, 0));
        assert!(without.plans.is_empty());

        let with = plan_cell(tmp.path(), "m", &task, &styles, true);
        assert_eq!((with.failures, with.done, with.again), (2, 1, 1));
        assert_eq!(keys(&with), ["001"]);
        assert_eq!(with.plans[0].items[0].position, 1);

        // Asked again and answered: done, the error kept beside it.
        let dir = write_run(tmp.path(), spec("r3-error"), &[prose()]).unwrap();
        make_feedback(&dir, FeedbackStyle::Error, &[parent("001")]);
        let again = plan_cell(tmp.path(), "m", &task, &styles, true);
        assert_eq!((again.failures, again.done, again.again), (2, 2, 0));
        assert!(again.plans.is_empty());
        assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    }
}
