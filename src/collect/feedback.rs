//! Planning the feedback round (SPEC §11, `collect --feedback`): which first-round samples of a
//! cell failed under the current checkers and have no follow-up of a style yet, and the
//! follow-up request of each ([`crate::feedback::follow_up`]). The requests are sent by the
//! same pipeline as first-round samples (`collect::launch_model`) and written as run folders
//! of kind `feedback`, one per cell and style in a collection.
//!
//! Resuming is by content, not by name: a follow-up exists when a finished feedback run of that
//! style in the cell holds a sample whose `meta.json` names the parent. An interrupted
//! collection leaves only temporary folders (removed, and their follow-ups planned again).

use crate::feedback::{self, NoFollowUp};
use crate::runs::{self, FeedbackStyle, RunKind};
use crate::task::Task;
use crate::taxonomy::{Label, Outcome};
use crate::transcript::{Meta, ParentRef};
use std::collections::BTreeSet;
use std::path::Path;

/// One follow-up to send.
#[derive(Debug, Clone)]
pub struct FollowUp {
    /// The failed sample it follows up.
    pub parent: ParentRef,
    /// The parent's position among the cell's first-round samples, in run order: the sample
    /// number sent in collect's sample header, so a scripted server answers the follow-up of
    /// the same parent the same way whatever the run ids.
    pub position: u32,
    /// The parent's label under the current checkers.
    pub label: Label,
    /// The request body, as it will be sent and kept.
    pub body: bytes::Bytes,
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
    /// Samples that could not be read or followed up, one line each.
    pub warnings: Vec<String>,
}

/// The parents already followed up in `cell`'s finished feedback runs, by style.
pub fn followed_up(scan: &runs::Scan) -> (BTreeSet<(FeedbackStyle, ParentRef)>, Vec<String>) {
    let mut done = BTreeSet::new();
    let mut warnings = Vec::new();
    for r in scan
        .runs
        .iter()
        .filter(|r| r.cell.kind == RunKind::Feedback)
    {
        let Some(info) = &r.cell.feedback else {
            warnings.push(format!(
                "{}: a feedback run without its style in cell.json",
                r.dir.display()
            ));
            continue;
        };
        for s in &r.samples {
            let path = r.sample_dir(s).join("meta.json");
            let parent = runs::read_bounded(&path, runs::MAX_SAMPLE_FILE)
                .ok()
                .and_then(|b| serde_json::from_slice::<Meta>(&b).ok())
                .and_then(|m| m.parent);
            match parent {
                Some(p) => {
                    done.insert((info.style, p));
                }
                None => warnings.push(format!(
                    "{}: a feedback sample whose meta.json names no parent",
                    path.display()
                )),
            }
        }
    }
    (done, warnings)
}

/// Plans the feedback round of one cell: scores its first-round samples against `task` and
/// builds, for each failure (neither a pass nor a transport error) and each style of
/// `styles` it has no follow-up of, the follow-up request.
pub fn plan_cell(root: &Path, model: &str, task: &Task, styles: &[FeedbackStyle]) -> CellFeedback {
    let scan = runs::cell_runs(root, model, &task.id);
    let mut out = CellFeedback {
        warnings: scan
            .skipped
            .iter()
            .map(|s| format!("{}: {}", s.path.display(), s.reason))
            .collect(),
        ..CellFeedback::default()
    };
    let (done, w) = followed_up(&scan);
    out.warnings.extend(w);
    let mut plans: Vec<FeedbackPlan> = styles
        .iter()
        .map(|&style| FeedbackPlan {
            style,
            items: Vec::new(),
        })
        .collect();
    let mut position: u32 = 0;
    for r in scan.runs.iter().filter(|r| r.cell.kind == RunKind::Samples) {
        for s in &r.samples {
            let here = position;
            position = position.saturating_add(1);
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
            out.failures += 1;
            let parent = ParentRef {
                run: r.run_id.clone(),
                sample: s.clone(),
            };
            for plan in &mut plans {
                if done.contains(&(plan.style, parent.clone())) {
                    out.done += 1;
                    continue;
                }
                let Some(request) = &t.request else {
                    out.warnings.push(format!(
                        "{}: {}: not followed up",
                        r.sample_dir(s).display(),
                        NoFollowUp::BadRequest
                    ));
                    break;
                };
                match feedback::follow_up(task, request, completion, &verdict, plan.style) {
                    Ok(body) => match serde_json::to_vec(&body) {
                        Ok(bytes) => plan.items.push(FollowUp {
                            parent: parent.clone(),
                            position: here,
                            label,
                            body: bytes.into(),
                        }),
                        Err(e) => out.warnings.push(format!(
                            "{}: cannot encode its follow-up ({e})",
                            r.sample_dir(s).display()
                        )),
                    },
                    Err(e) => {
                        out.warnings.push(format!(
                            "{}: {e}: not followed up",
                            r.sample_dir(s).display()
                        ));
                        break;
                    }
                }
            }
        }
    }
    plans.retain(|p| !p.items.is_empty());
    out.plans = plans;
    out
}
