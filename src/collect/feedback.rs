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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{ModelRow, RunSpec, Wire, write_run};

    /// A cell with a pass, two failures and a transport error: each failure is planned once per
    /// style, in sample order with its position; a follow-up already on disk is not planned
    /// again, and a feedback run never counts as first-round samples.
    #[test]
    fn failures_without_a_follow_up_of_a_style_are_planned() {
        let tmp = tempfile::tempdir().unwrap();
        let task = crate::task::load(Path::new("tasks/basic/basic-weather-city.json"))
            .unwrap()
            .remove(0);
        let row = ModelRow {
            name: "m".into(),
            served: "m".into(),
            stream: false,
        };
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
        let spec = |run_id: &'static str| RunSpec {
            model: &row,
            task: &task,
            task_sha256: &task.sha256,
            run_id,
            server: serde_json::Value::Null,
            seed: 1,
        };
        write_run(tmp.path(), spec("r1"), &wires).unwrap();
        let styles = [FeedbackStyle::Error, FeedbackStyle::Retry];
        let planned = plan_cell(tmp.path(), "m", &task, &styles);
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
        // Each body is the follow-up of its parent, as sent.
        let r1 = runs::cell_runs(tmp.path(), "m", &task.id).runs.remove(0);
        let t = r1.read_sample("003").unwrap().transcript();
        let want = crate::feedback::follow_up(
            &task,
            t.request.as_ref().unwrap(),
            &crate::score::parse(&t).unwrap(),
            &crate::score::score(&task, &t),
            Retry,
        )
        .unwrap();
        assert_eq!(
            planned.plans[1].items[1].body,
            serde_json::to_vec(&want).unwrap()
        );

        // A retry follow-up of 001 on disk: only 003 is left for that style.
        let dir = write_run(tmp.path(), spec("r2-retry"), &wires[..1]).unwrap();
        let mut cell: runs::CellInfo =
            serde_json::from_slice(&std::fs::read(dir.join("cell.json")).unwrap()).unwrap();
        cell.kind = RunKind::Feedback;
        cell.feedback = Some(runs::FeedbackInfo { style: Retry });
        std::fs::write(dir.join("cell.json"), serde_json::to_vec(&cell).unwrap()).unwrap();
        let meta_path = dir.join("samples/000/meta.json");
        let mut meta: Meta = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
        meta.parent = Some(ParentRef {
            run: "r1".into(),
            sample: "001".into(),
        });
        std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
        let planned = plan_cell(tmp.path(), "m", &task, &styles);
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
}
