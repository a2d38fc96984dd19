//! Real bytes from llama.cpp's `llama-server` (tests/fixtures/real/llama-server/) as scorer
//! fixtures: every capture is scored against the fixture task its request was built from
//! (tests/fixtures/real/tasks/) and must get exactly the outcome, label and stage its
//! `expect.json` states. These are the quirks of a real server and a real (tiny) model: calls
//! repeated three times, calls left in `content` under `tool_choice: "none"`, `finish_reason:
//! "length"` beside structured calls with partial arguments, prose forever under "required".

use callcheck::score;
use callcheck::task::{self, Task};
use callcheck::taxonomy::Label;
use callcheck::transcript::{Meta, Transcript};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real")
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

struct Capture {
    name: String,
    dir: PathBuf,
    expect: Expect,
    transcript: Transcript,
    /// The response file, for the `check` CLI.
    response: PathBuf,
}

fn tasks() -> BTreeMap<String, Task> {
    let loaded = task::load(&root().join("tasks")).unwrap_or_else(|e| panic!("{e}"));
    loaded.into_iter().map(|t| (t.id.clone(), t)).collect()
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
fn captures() -> Vec<Capture> {
    let base = root().join("llama-server");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&base)
        .unwrap_or_else(|e| panic!("{}: {e}", base.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("request.json").is_file())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().to_string();
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
            let body = std::fs::read(&response).unwrap();
            // `bad-json` sent a body that is not JSON on purpose: its request is unknown to the
            // scorer, as it would be in a transcript whose request.json does not parse.
            let request: Option<Value> =
                serde_json::from_slice(&std::fs::read(dir.join("request.json")).unwrap()).ok();
            let meta = status_from_notes(&dir).map(|status| Meta {
                status: Some(status),
                streamed,
                ..Meta::default()
            });
            Capture {
                name,
                dir,
                expect,
                transcript: Transcript {
                    request,
                    body,
                    streamed,
                    meta,
                },
                response,
            }
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
    let mut failures = Vec::new();
    for c in &captures {
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
        } else if v.detail.trim().is_empty() {
            failures.push(format!("{}: empty detail", c.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} real captures disagree with their expect.json:\n{}",
        failures.len(),
        captures.len(),
        failures.join("\n")
    );
}

/// The specific quirks, asserted on the verdict's content and not only its label: a failure
/// could reach the right label for the wrong reason.
#[test]
fn the_quirks_are_scored_for_the_right_reason() {
    let tasks = tasks();
    let by_name: BTreeMap<String, Capture> = captures()
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
        let e = &c.expect;
        assert!(
            e.why.trim().len() > 20,
            "{}: `why` must say what the case proves",
            c.name
        );
        match e.outcome.as_str() {
            "pass" => assert_eq!((&e.label, &e.stage), (&None, &None), "{}", c.name),
            "error" => {
                assert_eq!(e.label, None, "{}", c.name);
                assert_eq!(e.stage.as_deref(), Some("transport"), "{}", c.name);
            }
            "fail" => {
                assert!(
                    Label::parse(e.label.as_deref().unwrap_or("")).is_some(),
                    "{}: bad label",
                    c.name
                );
                assert!(
                    ["parse", "structure", "schema", "semantic"]
                        .contains(&e.stage.as_deref().unwrap_or("")),
                    "{}: stage",
                    c.name
                );
            }
            other => panic!("{}: outcome {other:?}", c.name),
        }
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
