//! The triage page's data, `data/samples.js`: every sample in a compact columnar encoding,
//! loaded by `samples.html` with `<script src>` (a `fetch` of local JSON is blocked from
//! `file://`, and a script is not), then filtered and rendered page by page by `samples.js`.
//!
//! Size matters at 300,000 samples, so nothing is repeated per sample that can be shared:
//! samples are in key order, so model, task and run are stored once per run directory (`runs`),
//! and each sample carries only its folder name (an index into `names`), one outcome character
//! and the index of its detail in a table of distinct details (clipped to [`DETAIL_CHARS`]).

use crate::report::Matrix;
use crate::taxonomy::{Label, Outcome};
use serde_json::json;
use std::collections::BTreeMap;

/// Details longer than this are clipped in the index (the transcript page has the whole text).
pub const DETAIL_CHARS: usize = 200;

/// The outcome codes, in order: `a` = pass, `b`… = the labels in taxonomy order, then error.
pub fn outcome_names() -> Vec<&'static str> {
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
    index: BTreeMap<String, usize>,
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
pub fn samples_js(m: &Matrix) -> Vec<u8> {
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
    // Per run directory: model, task, run name, number of samples.
    let (mut rm, mut rt, mut rr, mut rn) = (Vec::new(), Vec::new(), Vec::new(), Vec::<u64>::new());
    let mut s = Vec::with_capacity(m.samples.len());
    let mut o = String::with_capacity(m.samples.len());
    let mut d = Vec::with_capacity(m.samples.len());
    let mut last: Option<(&str, &str, &str)> = None;
    for x in &m.samples {
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
            last = Some(key);
        }
        if let Some(n) = rn.last_mut() {
            *n += 1;
        }
        s.push(names.id(&x.key.sample));
        o.push(outcome_code(x.outcome));
        // Shown by the page's script as text: its control characters visibly, as on the pages.
        d.push(details.id(&super::html::visible_text(&crate::json::clip(
            &x.detail,
            DETAIL_CHARS,
        ))));
    }
    let doc = json!({
        "outcomes": outcome_names(),
        "models": models,
        "tasks": m.tasks.iter().map(|t| &t.id).collect::<Vec<_>>(),
        "tags": m.tags,
        "taskTags": task_tags,
        "runNames": run_names.list,
        "names": names.list,
        "details": details.list,
        "runs": {"m": rm, "t": rt, "r": rr, "n": rn},
        "s": s,
        "o": o,
        "d": d,
    });
    let mut out = b"window.CALLCHECK_SAMPLES = ".to_vec();
    out.extend(serde_json::to_vec(&doc).unwrap_or_default());
    out.extend_from_slice(b";\n");
    out
}
