//! `samples.html`, the triage page, and its data, `data/samples.js`: every sample in a compact
//! columnar encoding, loaded by `samples.html` with `<script src>` (a `fetch` of local JSON is
//! blocked from `file://`, and a script is not), then filtered and rendered page by page by
//! `samples.js`.
//!
//! Size matters at 300,000 samples, so nothing is repeated per sample that can be shared:
//! samples are in key order, so model, task and run are stored once per run directory (`runs`),
//! and each sample carries only its folder name (an index into `names`), one outcome character
//! and the index of its detail in a table of distinct details (clipped to [`DETAIL_CHARS`]).
//!
//! Feedback samples (SPEC §11) follow the first-round ones (`first` of them): their runs carry
//! their style (`runs.f`), and each its parent's index (`p`), so the page lists them apart,
//! by style, each linked to the failure it follows up.

use super::render;
use crate::report::Matrix;
use crate::runs::FeedbackStyle;
use crate::site::{File, SiteError};
use crate::taxonomy::{Label, Outcome};
use askama::Template;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};

/// The page's script, which filters and pages the samples in the browser.
const SAMPLES_JS: &str = include_str!("../samples.js");

#[derive(Template)]
#[template(path = "samples.html")]
struct SamplesPage {
    title: String,
    root: String,
    n_samples: usize,
    /// Feedback samples (SPEC §11), listed under the round filter.
    n_feedback: usize,
    styles: Vec<&'static str>,
    clip: usize,
}

/// The triage page and what it loads: `samples.html`, `samples.js` and `data/samples.js` (a
/// function of its own so the page benchmark, examples/samples_page.rs, renders exactly it).
pub fn samples_page(m: &Matrix) -> Result<Vec<File>, SiteError> {
    Ok(vec![
        ("samples.js".into(), SAMPLES_JS.as_bytes().to_vec()),
        ("data/samples.js".into(), samples_js(m)),
        (
            "samples.html".into(),
            render(
                "samples.html",
                &SamplesPage {
                    title: "every sample".into(),
                    root: String::new(),
                    n_samples: m.samples.len(),
                    n_feedback: m.feedback.len(),
                    styles: FeedbackStyle::ALL.iter().map(|st| st.as_str()).collect(),
                    clip: DETAIL_CHARS,
                },
            )?,
        ),
    ])
}

/// Details longer than this are clipped in the index (the transcript page has the whole text).
const DETAIL_CHARS: usize = 200;

/// The outcome codes, in order: `a` = pass, `b`… = the labels in taxonomy order, then error.
fn outcome_names() -> Vec<&'static str> {
    let mut v = vec!["pass"];
    v.extend(Label::ALL.iter().map(|l| l.as_str()));
    v.push("error");
    v
}

fn outcome_code(o: Outcome) -> char {
    let i = match o {
        Outcome::Pass => 0,
        Outcome::Fail(l) => 1 + Label::ALL.iter().position(|x| *x == l).unwrap_or(0),
        Outcome::Error => 1 + Label::ALL.len(),
    };
    char::from(b'a' + i as u8)
}

/// Interns strings in first-seen order (deterministic: samples come in key order).
#[derive(Default)]
struct Table {
    /// Looked up, never iterated: the ids are in `list`'s order.
    index: HashMap<String, usize>,
    list: Vec<String>,
}

impl Table {
    fn id(&mut self, s: &str) -> usize {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len();
        self.index.insert(s.to_string(), i);
        self.list.push(s.to_string());
        i
    }
}

/// `data/samples.js`: one assignment, `window.CALLCHECK_SAMPLES = {…};`.
fn samples_js(m: &Matrix) -> Vec<u8> {
    let models: Vec<&str> = m.models.iter().map(|mv| mv.name.as_str()).collect();
    let model_ix: BTreeMap<&str, usize> = models.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let task_ix: BTreeMap<&str, usize> = m
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    let tag_ix: BTreeMap<&str, usize> = m
        .tags
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    let task_tags: Vec<Vec<usize>> = m
        .tasks
        .iter()
        .map(|t| {
            t.tags
                .iter()
                .filter_map(|x| tag_ix.get(x.as_str()).copied())
                .collect()
        })
        .collect();
    let mut run_names = Table::default();
    let mut names = Table::default();
    let mut details = Table::default();
    details.id("");
    // Per run directory: model, task, run name, number of samples, and its round (0 for the
    // first round, 1 + the style's index for a feedback run).
    let (mut rm, mut rt, mut rr, mut rn) = (Vec::new(), Vec::new(), Vec::new(), Vec::<u64>::new());
    let mut rf = Vec::<usize>::new();
    let total = m.samples.len() + m.feedback.len();
    let mut s = Vec::with_capacity(total);
    let mut o = String::with_capacity(total);
    let mut d = Vec::with_capacity(total);
    let mut last: Option<(&str, &str, &str)> = None;
    // First-round samples first, then the feedback samples (SPEC §11), so that a page that
    // lists the first round reads the same indices as before.
    for x in m.samples.iter().chain(&m.feedback) {
        let key = (
            x.key.model.as_str(),
            x.key.task.as_str(),
            x.key.run.as_str(),
        );
        if last != Some(key) {
            rm.push(model_ix.get(key.0).copied().unwrap_or(0));
            rt.push(task_ix.get(key.1).copied().unwrap_or(0));
            rr.push(run_names.id(key.2));
            rn.push(0);
            rf.push(x.feedback.as_deref().map_or(0, |f| {
                1 + FeedbackStyle::ALL
                    .iter()
                    .position(|st| *st == f.style && !f.review)
                    .unwrap_or(FeedbackStyle::ALL.len())
            }));
            last = Some(key);
        }
        if let Some(n) = rn.last_mut() {
            *n += 1;
        }
        s.push(names.id(&x.key.sample));
        o.push(outcome_code(x.outcome));
        // Shown by the page's script as text: its control characters visibly, as on the pages.
        let clipped = crate::json::clip_cow(&x.detail, DETAIL_CHARS);
        d.push(details.id(&crate::site::html::visible_text(&clipped)));
    }
    // Per feedback sample: the index of the sample it follows up, or -1 when that is not a
    // first-round sample of this build.
    let parents: Vec<i64> = m
        .feedback
        .iter()
        .map(|x| m.parent_index(x).map_or(-1, |i| i as i64))
        .collect();
    let doc = json!({
        "outcomes": outcome_names(),
        "models": models,
        "tasks": m.tasks.iter().map(|t| &t.id).collect::<Vec<_>>(),
        "tags": m.tags,
        "taskTags": task_tags,
        "runNames": run_names.list,
        "names": names.list,
        "details": details.list,
        "runs": {"m": rm, "t": rt, "r": rr, "n": rn, "f": rf},
        "first": m.samples.len(),
        "styles": FeedbackStyle::ALL.iter().map(|st| st.as_str()).chain(["review"]).collect::<Vec<_>>(),
        "p": parents,
        "s": s,
        "o": o,
        "d": d,
    });
    let mut out = b"window.CALLCHECK_SAMPLES = ".to_vec();
    out.extend(serde_json::to_vec(&doc).unwrap_or_default());
    out.extend_from_slice(b";\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{FeedbackOf, SampleKey, Scored, TaskInfo, aggregate};
    use crate::stats::IntervalKind;
    use crate::transcript::ParentRef;
    use serde_json::Value;

    fn scored(run: &str, sample: &str, o: Outcome, fb: Option<(FeedbackStyle, &str)>) -> Scored {
        Scored {
            feedback: fb.map(|(style, parent)| {
                Box::new(FeedbackOf {
                    style,
                    review: false,
                    history: crate::runs::History::AsProduced,
                    parent: Some(ParentRef {
                        run: "r1".into(),
                        sample: parent.into(),
                    }),
                })
            }),
            ..Scored::bare(
                SampleKey {
                    model: "m".into(),
                    task: "t".into(),
                    run: run.into(),
                    sample: sample.into(),
                },
                o,
            )
        }
    }

    #[test]
    fn feedback_samples_follow_the_first_round_with_their_style_and_parent() {
        let nc = Outcome::Fail(Label::NoCall);
        let samples = vec![
            scored("r1", "000", Outcome::Pass, None),
            scored("r1", "001", nc, None),
            scored("r1", "002", nc, None),
            scored(
                "fb-c",
                "000",
                Outcome::Pass,
                Some((FeedbackStyle::Checklist, "002")),
            ),
            scored("fb-e", "000", nc, Some((FeedbackStyle::Error, "001"))),
            scored(
                "fb-e",
                "001",
                Outcome::Pass,
                Some((FeedbackStyle::Error, "009")),
            ),
        ];
        let tasks = vec![TaskInfo {
            id: "t".into(),
            title: String::new(),
            tags: vec![],
            bfcl_scored: false,
        }];
        let m = aggregate(samples, tasks, IntervalKind::Wilson);
        let js = String::from_utf8(samples_js(&m)).unwrap();
        let body = js
            .strip_prefix("window.CALLCHECK_SAMPLES = ")
            .and_then(|s| s.strip_suffix(";\n"))
            .unwrap();
        let d: Value = serde_json::from_str(body).unwrap();
        assert_eq!(d["first"], 3);
        assert_eq!(
            d["styles"],
            serde_json::json!(["error", "checklist", "retry", "review"])
        );
        // Outcomes: pass `a`, no_call `b`; the feedback samples in key order after the first round.
        assert_eq!(d["o"], "abbaba");
        // Runs in order: r1 (first round), fb-c (checklist), fb-e (error).
        assert_eq!(d["runs"]["n"], serde_json::json!([3, 1, 2]));
        assert_eq!(d["runs"]["f"], serde_json::json!([0, 2, 1]));
        // Parents: r1/002 is sample 2, r1/001 sample 1, r1/009 is not in the build.
        assert_eq!(d["p"], serde_json::json!([2, 1, -1]));
    }
}
