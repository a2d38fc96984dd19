//! The scorer's conformance suite: every case under `tests/fixtures/scorer/cases/<label>/<case>/`
//! is scored against its fixture task and must get exactly the outcome, label and stage its
//! `expect.json` states, with a detail a person can act on.

use crate::support::fixture::{Case, UnparsedRequest, load_case, sorted_entries};
use callcheck::score::{Verdict, wire};
use callcheck::task::Task;
use callcheck::taxonomy::{Label, Stage};
use callcheck::transcript::Transcript;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scorer")
}

fn tasks() -> BTreeMap<String, Task> {
    crate::support::fixture::tasks(&root().join("tasks"))
}

/// Every case, named `<label>/<case-name>`, in name order.
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for folder in sorted_entries(&root().join("cases")) {
        let folder_name = folder.file_name().unwrap().to_string_lossy().to_string();
        for dir in sorted_entries(&folder) {
            let name = format!(
                "{folder_name}/{}",
                dir.file_name().unwrap().to_string_lossy()
            );
            out.push(load_case(&dir, name, UnparsedRequest::Panic));
        }
    }
    out
}

/// The folder a case is filed under: its label, `pass` or `error`.
fn folder(c: &Case) -> &str {
    c.dir
        .parent()
        .and_then(Path::file_name)
        .and_then(|f| f.to_str())
        .unwrap()
}

/// The content of the response, for structured-output cases (what the scorer parses).
fn content(t: &Transcript) -> Option<String> {
    let c = if t.streamed {
        wire::parse_stream(&t.body)
    } else {
        wire::parse_body(&t.body)
    };
    c.ok().and_then(|c| c.content)
}

/// Checks that a failure's detail is actionable: non-empty, a byte offset for a payload that
/// does not parse, the JSON path for a schema-stage failure.
fn detail_problems(task: &Task, t: &Transcript, v: &Verdict) -> Vec<String> {
    let mut problems = Vec::new();
    if v.detail.trim().is_empty() {
        problems.push("the detail is empty".to_string());
    }
    if v.label().is_none() {
        return problems;
    }
    if v.stage == Some(Stage::Parse) {
        let unparseable = match v.fail_call {
            Some(i) => v.calls[i]
                .arguments_raw
                .as_deref()
                .is_some_and(|raw| serde_json::from_str::<Value>(raw).is_err()),
            // Structured output: content that holds an attempted JSON value and fails to parse.
            None if task.is_structured_output() => content(t).is_some_and(|c| {
                (c.contains('{') || c.contains('['))
                    && serde_json::from_str::<Value>(c.trim()).is_err()
            }),
            None => false,
        };
        if unparseable && !v.detail.contains("at byte ") {
            problems.push(format!(
                "a parse-stage failure of unparseable JSON must name the byte offset: {:?}",
                v.detail
            ));
        }
    }
    if v.empty_value && !v.detail.contains("empty value") {
        problems.push(format!(
            "a failure on an empty value must say so (HiTEC 3): {:?}",
            v.detail
        ));
    }
    if v.stage == Some(Stage::Schema) {
        match &v.fail_path {
            None => problems.push("a schema-stage failure has no fail_path".into()),
            Some(p) => {
                let shown = if p.is_empty() { "/" } else { p.as_str() };
                if !v.detail.contains(shown) {
                    problems.push(format!(
                        "a schema-stage failure must name the JSON path {shown}: {:?}",
                        v.detail
                    ));
                }
            }
        }
    }
    problems
}

#[test]
fn every_case_gets_exactly_its_expected_outcome_label_and_stage() {
    let tasks = tasks();
    let cases = cases();
    assert!(
        !cases.is_empty(),
        "no cases found under {}",
        root().display()
    );
    crate::support::fixture::assert_every_case_scores_as_expected(
        &tasks,
        &cases,
        "cases",
        |task, c, v| detail_problems(task, &c.transcript, v),
    );
}

#[test]
fn expectations_are_well_formed_and_filed_under_their_label() {
    let tasks = tasks();
    for c in cases() {
        let e = &c.expect;
        crate::support::fixture::assert_well_formed(&c.name, e);
        assert!(tasks.contains_key(&e.task), "{}: unknown task", c.name);
        // A pass or an error has no label (checked above): it is filed under its outcome.
        let label = e.label.as_deref().unwrap_or(&e.outcome);
        assert_eq!(folder(&c), label, "{}: filed under the wrong label", c.name);
    }
}

/// The suite cannot silently shrink: the acceptance bar of issue 2.
#[test]
fn the_suite_keeps_its_minimums() {
    let cases = cases();
    let mut per_label: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &cases {
        *per_label.entry(folder(c)).or_default() += 1;
    }
    for l in Label::ALL {
        let n = per_label.get(l.as_str()).copied().unwrap_or(0);
        assert!(n >= 10, "only {n} cases for {l} (at least 10 required)");
    }
    let passes = per_label.get("pass").copied().unwrap_or(0);
    assert!(passes >= 15, "only {passes} passes (at least 15 required)");
    let errors = per_label.get("error").copied().unwrap_or(0);
    assert!(
        errors >= 8,
        "only {errors} error cases (at least 8 required)"
    );
    let streamed = cases.iter().filter(|c| c.transcript.streamed).count();
    assert!(
        streamed * 3 >= cases.len(),
        "only {streamed} of {} cases are streamed (at least a third required)",
        cases.len()
    );
    // Every stage that can decide a failure is exercised.
    let stages: std::collections::BTreeSet<_> = cases
        .iter()
        .filter_map(|c| c.expect.stage.clone())
        .collect();
    for s in Stage::ALL {
        assert!(stages.contains(s.as_str()), "no case decided at stage {s}");
    }
}

/// SPEC §11 over the whole suite: the stages whose rules never consult the expected calls give
/// visible failures, the semantic stage (the task's predicates) silent ones, a pass none; the
/// structure stage depends on the request and is asserted label by label in `score_visible`.
#[test]
fn visibility_follows_the_stage_that_decided() {
    let tasks = tasks();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for c in cases() {
        let v = callcheck::score::score(&tasks[&c.expect.task], &c.transcript);
        let want = match v.stage {
            None => false,
            Some(Stage::Transport | Stage::Parse | Stage::Schema) => true,
            Some(Stage::Semantic) => false,
            Some(Stage::Structure) => continue,
        };
        assert_eq!(
            v.visible, want,
            "{}: {:?} at {:?}",
            c.name, v.outcome, v.stage
        );
        *seen
            .entry(v.stage.map_or("pass", |s| s.as_str()))
            .or_default() += 1;
    }
    // Every kind of stage was met, so the check above proved something of each.
    for s in ["pass", "transport", "parse", "schema", "semantic"] {
        assert!(
            seen.get(s).copied().unwrap_or(0) > 0,
            "no case decided at {s}"
        );
    }
}
