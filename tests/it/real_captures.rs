//! Real bytes from llama.cpp's `llama-server` (tests/fixtures/real/llama-server/) as scorer
//! fixtures: every capture is scored against the fixture task its request was built from
//! (tests/fixtures/real/tasks/) and must get exactly the outcome, label and stage its
//! `expect.json` states. These are the quirks of a real server and a real (tiny) model: calls
//! repeated three times, calls left in `content` under `tool_choice: "none"`, `finish_reason:
//! "length"` beside structured calls with partial arguments, prose forever under "required".

use crate::support::fixture::{Case, UnparsedRequest, load_case, sorted_entries};
use callcheck::score;
use callcheck::task::Task;
use callcheck::transcript::Meta;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real")
}

fn tasks() -> BTreeMap<String, Task> {
    crate::support::fixture::tasks(&root().join("tasks"))
}

/// The HTTP status capture.sh wrote into `notes.md` (`- HTTP status: 400`).
fn status_from_notes(dir: &Path) -> Option<u16> {
    let notes = std::fs::read_to_string(dir.join("notes.md")).ok()?;
    notes
        .lines()
        .find_map(|l| l.strip_prefix("- HTTP status: "))
        .and_then(|s| s.trim().parse().ok())
}

/// Every capture folder (a folder holding a `request.json`), in name order.
fn captures() -> Vec<Case> {
    sorted_entries(&root().join("llama-server"))
        .into_iter()
        .filter(|p| p.join("request.json").is_file())
        .map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().to_string();
            // `bad-json` sent a body that is not JSON on purpose: its request is unknown to the
            // scorer, as it would be in a transcript whose request.json does not parse.
            let mut c = load_case(&dir, name, UnparsedRequest::Unknown);
            // capture.sh writes no meta.json: the status it saw is in notes.md.
            if c.transcript.meta.is_none() {
                c.transcript.meta = status_from_notes(&dir).map(|status| Meta {
                    status: Some(status),
                    streamed: c.transcript.streamed,
                    ..Meta::default()
                });
            }
            c
        })
        .collect()
}

#[test]
fn every_real_capture_gets_exactly_its_expected_outcome_label_and_stage() {
    let tasks = tasks();
    let captures = captures();
    assert!(
        captures.len() >= 30,
        "only {} captures found under {}",
        captures.len(),
        root().display()
    );
    crate::support::fixture::assert_every_case_scores_as_expected(
        &tasks,
        &captures,
        "real captures",
        |_, _, v| {
            if v.detail.trim().is_empty() {
                vec!["the detail is empty".to_string()]
            } else {
                Vec::new()
            }
        },
    );
}

/// The specific quirks, asserted on the verdict's content and not only its label: a failure
/// could reach the right label for the wrong reason.
#[test]
fn the_quirks_are_scored_for_the_right_reason() {
    let tasks = tasks();
    let by_name: BTreeMap<String, Case> = captures()
        .into_iter()
        .map(|c| (c.name.clone(), c))
        .collect();
    let verdict = |name: &str| {
        let c = &by_name[name];
        score::score(&tasks[&c.expect.task], &c.transcript)
    };

    // Three identical calls, structured by the server; the streamed copy reassembles the same.
    for name in ["auto-call", "auto-call-stream", "auto-call-single"] {
        let v = verdict(name);
        assert_eq!(v.calls.len(), 3, "{name}: {}", v.detail);
        assert!(
            v.calls
                .iter()
                .all(|c| c.name.as_deref() == Some("get_weather")
                    && c.arguments.as_ref().and_then(|a| a.get("city"))
                        == Some(&Value::from("Paris"))),
            "{name}: {:?}",
            v.calls
        );
        assert!(v.detail.contains("3 were emitted"), "{name}: {}", v.detail);
    }

    // finish_reason "length" beside structured calls: the third call's arguments are cut.
    for name in ["required-call", "required-call-stream"] {
        let v = verdict(name);
        assert!(v.cut, "{name}");
        assert_eq!(v.finish_reason.as_deref(), Some("length"), "{name}");
        assert_eq!(v.calls.len(), 3, "{name}");
        assert_eq!(v.fail_call, Some(2), "{name}: {}", v.detail);
        assert!(v.detail.contains("at byte"), "{name}: {}", v.detail);
    }

    // A call cut inside its arguments is reported as a structured call with arguments "{".
    for name in ["truncated-call-args", "truncated-call-args-stream"] {
        let v = verdict(name);
        assert_eq!(v.calls.len(), 1, "{name}");
        assert_eq!(v.calls[0].name.as_deref(), Some("get_weather"), "{name}");
        assert_eq!(v.calls[0].arguments_raw.as_deref(), Some("{"), "{name}");
    }

    // A call cut before its name is complete stays in content as text.
    let v = verdict("truncated-call-name");
    assert!(v.cut);
    assert!(
        v.detail.contains("call's text does not parse"),
        "{}",
        v.detail
    );

    // Under tool_choice "none" the call is left in content, with a tool name that is not
    // offered (the grammar that constrains names is off).
    let v = verdict("none-call");
    assert!(v.detail.contains("\"Paris\""), "{}", v.detail);
    assert!(v.detail.contains("<tool_call>"), "{}", v.detail);

    // Structured output enforced by grammar: pretty-printed, and the value is the gold one.
    for name in ["json-schema", "json-schema-stream"] {
        let v = verdict(name);
        assert_eq!(
            v.output,
            Some(serde_json::json!({"city": "Paris", "country": "France"})),
            "{name}"
        );
    }

    // Structured output with strict json_schema: types, enums and required are enforced by the
    // grammar, `uniqueItems` and `pattern` are not, so the violations reach the wire.
    for (name, keyword, path) in [
        ("collect-so-unique-items", "uniqueItems", "/topics"),
        ("collect-so-pattern", "pattern", "/start_time"),
    ] {
        let v = verdict(name);
        assert_eq!(v.finish_reason.as_deref(), Some("stop"), "{name}");
        assert_eq!(
            v.schema_keyword.as_deref(),
            Some(keyword),
            "{name}: {}",
            v.detail
        );
        assert_eq!(v.fail_path.as_deref(), Some(path), "{name}: {}", v.detail);
    }

    // Prose before the calls: llama-server fills content beside tool_calls.
    let v = verdict("collect-parallel-duplicate");
    assert_eq!(v.calls.len(), 3);
    assert!(v.extra_prose, "{}", v.detail);

    // Prose until max_tokens under "required": cut, no call.
    for name in ["required", "named", "parallel-3", "no-args"] {
        let v = verdict(name);
        assert!(v.cut && v.calls.is_empty(), "{name}: {}", v.detail);
        assert!(
            v.detail.contains("no call was emitted"),
            "{name}: {}",
            v.detail
        );
    }
}

/// Each fixture task reproduces the requests it stands for: the messages (after a system
/// prompt a model row would add), the tools, tool_choice and response_format are those sent.
#[test]
fn fixture_tasks_match_the_requests_they_score() {
    let tasks = tasks();
    let mut used = BTreeSet::new();
    for c in captures() {
        used.insert(c.expect.task.clone());
        let Some(req) = &c.transcript.request else {
            assert_eq!(
                c.name, "bad-json",
                "only bad-json has a request that is not JSON"
            );
            continue;
        };
        let t = &tasks[&c.expect.task];
        let mut messages = req["messages"].as_array().unwrap().clone();
        if messages.first().map(|m| m["role"] == "system") == Some(true)
            && t.messages.first().map(|m| m["role"] == "system") != Some(true)
        {
            messages.remove(0);
        }
        assert_eq!(messages, t.messages, "{}: messages", c.name);
        let tools = req.get("tools").cloned().unwrap_or(Value::Array(vec![]));
        assert_eq!(
            tools,
            Value::Array(t.tools_json.clone()),
            "{}: tools",
            c.name
        );
        assert_eq!(
            req.get("tool_choice"),
            t.tool_choice.as_ref(),
            "{}: tool_choice",
            c.name
        );
        assert_eq!(
            req.get("response_format"),
            t.response_format.as_ref(),
            "{}: response_format",
            c.name
        );
    }
    let unused: Vec<_> = tasks.keys().filter(|k| !used.contains(*k)).collect();
    assert!(
        unused.is_empty(),
        "fixture tasks no capture uses: {unused:?}"
    );
}

#[test]
fn expectations_are_well_formed() {
    for c in captures() {
        crate::support::fixture::assert_well_formed(&c.name, &c.expect);
    }
}

/// `callcheck check` (what a user runs on a transcript) agrees with the library on every
/// capture.
#[test]
fn the_check_command_agrees_on_every_capture() {
    let bin = env!("CARGO_BIN_EXE_callcheck");
    for c in captures() {
        let task_file = root().join("tasks").join(format!("{}.json", c.expect.task));
        let mut cmd = Command::new(bin);
        cmd.arg("check")
            .arg("--task")
            .arg(&task_file)
            .arg("--response")
            .arg(&c.response);
        if c.transcript.request.is_some() {
            cmd.arg("--request").arg(c.dir.join("request.json"));
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}: check failed: {}",
            c.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["outcome"], c.expect.outcome.as_str(), "{}", c.name);
        assert_eq!(v["label"].as_str(), c.expect.label.as_deref(), "{}", c.name);
        assert_eq!(v["stage"].as_str(), c.expect.stage.as_deref(), "{}", c.name);
    }
}
