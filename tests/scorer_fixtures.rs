//! The scorer's conformance suite: every case under `tests/fixtures/scorer/cases/<label>/<case>/`
//! is scored against its fixture task and must get exactly the outcome, label and stage its
//! `expect.json` states, with a detail a person can act on.

use callcheck::score::{self, Verdict, wire};
use callcheck::task::{self, Task};
use callcheck::taxonomy::{Label, Stage};
use callcheck::transcript::{Meta, Transcript};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scorer")
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    task: String,
    outcome: String,
    label: Option<String>,
    stage: Option<String>,
    why: String,
}

struct Case {
    /// `<label>/<case-name>`, for messages.
    name: String,
    folder: String,
    dir: PathBuf,
    expect: Expect,
    transcript: Transcript,
}

fn tasks() -> BTreeMap<String, Task> {
    let loaded = task::load(&root().join("tasks")).unwrap_or_else(|e| panic!("{e}"));
    loaded.into_iter().map(|t| (t.id.clone(), t)).collect()
}

fn read_json(path: &Path) -> Option<Value> {
    let bytes = std::fs::read(path).ok()?;
    Some(
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display())),
    )
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let base = root().join("cases");
    let mut folders: Vec<_> = std::fs::read_dir(&base)
        .unwrap_or_else(|e| panic!("{}: {e}", base.display()))
        .map(|e| e.unwrap().path())
        .collect();
    folders.sort();
    for folder in folders {
        let mut dirs: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        dirs.sort();
        for dir in dirs {
            let folder_name = folder.file_name().unwrap().to_string_lossy().to_string();
            let name = format!(
                "{folder_name}/{}",
                dir.file_name().unwrap().to_string_lossy()
            );
            let expect: Expect = serde_json::from_value(
                read_json(&dir.join("expect.json"))
                    .unwrap_or_else(|| panic!("{name}: no expect.json")),
            )
            .unwrap_or_else(|e| panic!("{name}: bad expect.json: {e}"));
            let (body, streamed) = match (
                std::fs::read(dir.join("response.json")),
                std::fs::read(dir.join("response.sse")),
            ) {
                (Ok(b), Err(_)) => (b, false),
                (Err(_), Ok(b)) => (b, true),
                _ => panic!("{name}: needs exactly one of response.json and response.sse"),
            };
            let meta: Option<Meta> = read_json(&dir.join("meta.json")).map(|v| {
                serde_json::from_value(v).unwrap_or_else(|e| panic!("{name}: bad meta.json: {e}"))
            });
            let request = read_json(&dir.join("request.json"));
            out.push(Case {
                name,
                folder: folder_name,
                dir,
                expect,
                transcript: Transcript {
                    request,
                    body,
                    streamed,
                    meta,
                },
            });
        }
    }
    out
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
    let mut failures = Vec::new();
    for c in &cases {
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
        for p in detail_problems(task, &c.transcript, &v) {
            failures.push(format!("{}\n    {p}", c.dir.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases disagree with their expect.json:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn expectations_are_well_formed_and_filed_under_their_label() {
    let tasks = tasks();
    for c in cases() {
        let e = &c.expect;
        assert!(
            e.why.trim().len() > 20,
            "{}: `why` must say what the case proves",
            c.name
        );
        assert!(tasks.contains_key(&e.task), "{}: unknown task", c.name);
        match e.outcome.as_str() {
            "pass" => {
                assert_eq!(c.folder, "pass", "{}", c.name);
                assert_eq!((&e.label, &e.stage), (&None, &None), "{}", c.name);
            }
            "error" => {
                assert_eq!(c.folder, "error", "{}", c.name);
                assert_eq!(e.label, None, "{}", c.name);
                assert_eq!(e.stage.as_deref(), Some("transport"), "{}", c.name);
            }
            "fail" => {
                let label = e.label.as_deref().unwrap_or("");
                assert!(Label::parse(label).is_some(), "{}: bad label", c.name);
                assert_eq!(c.folder, label, "{}: filed under the wrong label", c.name);
                let stage = e.stage.as_deref().unwrap_or("");
                assert!(
                    ["parse", "structure", "schema", "semantic"].contains(&stage),
                    "{}: a failure's stage must be parse, structure, schema or semantic",
                    c.name
                );
            }
            other => panic!("{}: outcome {other:?}", c.name),
        }
    }
}

/// The suite cannot silently shrink: the acceptance bar of issue 2.
#[test]
fn the_suite_keeps_its_minimums() {
    let cases = cases();
    let mut per_label: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &cases {
        *per_label.entry(c.folder.as_str()).or_default() += 1;
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
