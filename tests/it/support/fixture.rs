//! Helpers shared by the scorer's fixture suites (`scorer_fixtures`, `real_captures`): a case
//! folder read into a [`Transcript`] and its `expect.json`, and the check that every case scores
//! exactly as it expects.

// Each test file is its own crate and uses only part of this module.

use callcheck::score::{self, Verdict};
use callcheck::task::{self, Task};
use callcheck::taxonomy::Label;
use callcheck::transcript::{Meta, Transcript};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A case's `expect.json`: the verdict it must get and why.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub task: String,
    pub outcome: String,
    pub label: Option<String>,
    pub stage: Option<String>,
    pub why: String,
    /// Texts the verdict's detail must contain: the deviation or the circumstance a case is
    /// about, named (optional; most cases assert label and stage only).
    #[serde(default)]
    pub detail: Vec<String>,
}

/// One case folder, read.
pub struct Case {
    /// The folder's name (with its parent's for nested suites), for messages.
    pub name: String,
    pub dir: PathBuf,
    pub expect: Expect,
    pub transcript: Transcript,
    /// The response file (`response.json` or `response.sse`), for the `check` CLI.
    pub response: PathBuf,
}

/// What a `request.json` that is not JSON means in a suite.
#[derive(Clone, Copy)]
pub enum UnparsedRequest {
    /// A mistake in the fixture: the test panics, naming the file.
    Panic,
    /// A request sent as it is on purpose: the scorer does not know it, as it would not know
    /// the request of a transcript whose request.json does not parse.
    Unknown,
}

/// The fixture tasks in `dir`, by id.
pub fn tasks(dir: &Path) -> BTreeMap<String, Task> {
    let loaded = task::load(dir).unwrap_or_else(|e| panic!("{e}"));
    loaded.into_iter().map(|t| (t.id.clone(), t)).collect()
}

/// The entries of `dir`, in name order.
pub fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path()
        })
        .collect();
    out.sort();
    out
}

/// The JSON in `path`, `None` when there is no such file; a file that is not JSON panics.
pub fn read_json(path: &Path) -> Option<Value> {
    let bytes = std::fs::read(path).ok()?;
    Some(
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display())),
    )
}

/// Reads the case in `dir`: `expect.json`, exactly one of `response.json` and `response.sse`,
/// and the optional `request.json` and `meta.json`.
pub fn load_case(dir: &Path, name: String, unparsed_request: UnparsedRequest) -> Case {
    let expect: Expect = serde_json::from_slice(
        &std::fs::read(dir.join("expect.json"))
            .unwrap_or_else(|e| panic!("{name}: no expect.json: {e}")),
    )
    .unwrap_or_else(|e| panic!("{name}: bad expect.json: {e}"));
    let (response, streamed) = match (
        dir.join("response.json").is_file(),
        dir.join("response.sse").is_file(),
    ) {
        (true, false) => (dir.join("response.json"), false),
        (false, true) => (dir.join("response.sse"), true),
        _ => panic!("{name}: needs exactly one of response.json and response.sse"),
    };
    let body = std::fs::read(&response).unwrap_or_else(|e| panic!("{}: {e}", response.display()));
    let request = match unparsed_request {
        UnparsedRequest::Panic => read_json(&dir.join("request.json")),
        UnparsedRequest::Unknown => std::fs::read(dir.join("request.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok()),
    };
    let meta: Option<Meta> = read_json(&dir.join("meta.json")).map(|v| {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("{name}: bad meta.json: {e}"))
    });
    Case {
        name,
        dir: dir.to_path_buf(),
        expect,
        transcript: Transcript {
            request: request.map(std::sync::Arc::new),
            body,
            streamed,
            meta,
        },
        response,
    }
}

/// Asserts that `expect.json` is consistent: a `why` that says something, no label or stage on
/// a pass, the transport stage alone on an error, a known label and a deciding stage on a
/// failure.
pub fn assert_well_formed(name: &str, e: &Expect) {
    assert!(
        e.why.trim().len() > 20,
        "{name}: `why` must say what the case proves"
    );
    match e.outcome.as_str() {
        "pass" => assert_eq!((&e.label, &e.stage), (&None, &None), "{name}"),
        "error" => {
            assert_eq!(e.label, None, "{name}");
            assert_eq!(e.stage.as_deref(), Some("transport"), "{name}");
        }
        "fail" => {
            assert!(
                Label::parse(e.label.as_deref().unwrap_or("")).is_some(),
                "{name}: bad label"
            );
            assert!(
                ["parse", "structure", "schema", "semantic"]
                    .contains(&e.stage.as_deref().unwrap_or("")),
                "{name}: a failure's stage must be parse, structure, schema or semantic"
            );
        }
        other => panic!("{name}: outcome {other:?}"),
    }
}

/// Scores every case against its task and asserts that each gets exactly the outcome, label
/// and stage of its `expect.json`. A case that does is then given to `problems`, the further
/// checks of a suite, whose findings are failures too. `what` names the cases in the message.
pub fn assert_every_case_scores_as_expected(
    tasks: &BTreeMap<String, Task>,
    cases: &[Case],
    what: &str,
    mut problems: impl FnMut(&Task, &Case, &Verdict) -> Vec<String>,
) {
    let mut failures = Vec::new();
    for c in cases {
        let task = tasks
            .get(&c.expect.task)
            .unwrap_or_else(|| panic!("{}: unknown fixture task {}", c.name, c.expect.task));
        let v = score::score(task, &c.transcript);
        let got = (
            v.outcome.kind().to_string(),
            v.label().map(|l| l.as_str().to_string()),
            v.stage.map(|s| s.as_str().to_string()),
        );
        let want = (
            c.expect.outcome.clone(),
            c.expect.label.clone(),
            c.expect.stage.clone(),
        );
        if got != want {
            failures.push(format!(
                "{}\n    expected {} / {} / {}\n    got      {} / {} / {}\n    detail: {}\n    why: {}",
                c.dir.display(),
                want.0,
                want.1.as_deref().unwrap_or("null"),
                want.2.as_deref().unwrap_or("null"),
                got.0,
                got.1.as_deref().unwrap_or("null"),
                got.2.as_deref().unwrap_or("null"),
                v.detail,
                c.expect.why
            ));
            continue;
        }
        for want in &c.expect.detail {
            if !v.detail.contains(want.as_str()) {
                failures.push(format!(
                    "{}\n    the detail does not name {want:?}: {}",
                    c.dir.display(),
                    v.detail
                ));
            }
        }
        for p in problems(task, c, &v) {
            failures.push(format!("{}\n    {p}", c.dir.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} {what} disagree with their expect.json:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
