//! `callcheck check` through the real binary: one JSON verdict on stdout, exit 0 whatever the
//! verdict, and a non-zero exit with a message naming the file when an input is unusable.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scorer")
}

fn task(id: &str) -> PathBuf {
    fixtures().join("tasks").join(format!("{id}.json"))
}

fn case(rel: &str) -> PathBuf {
    fixtures().join("cases").join(rel)
}

fn check(args: &[&Path]) -> Output {
    let flags = ["--task", "--response", "--request", "--meta"];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_callcheck"));
    cmd.arg("check");
    for (flag, path) in flags.iter().zip(args) {
        cmd.arg(flag).arg(path);
    }
    cmd.output().expect("the callcheck binary runs")
}

/// Stdout must be exactly one JSON object (and nothing else) with the documented keys.
fn verdict(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8");
    let values: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}"));
    assert_eq!(values.len(), 1, "stdout holds one JSON value: {stdout}");
    assert_eq!(stdout.trim_end().lines().count(), 1, "one line: {stdout}");
    let v = values.into_iter().next().unwrap();
    for key in ["outcome", "label", "stage", "detail", "calls"] {
        assert!(v.get(key).is_some(), "{key} missing from {v}");
    }
    assert!(v["calls"].is_array(), "{v}");
    assert!(!v["detail"].as_str().unwrap_or("").is_empty(), "{v}");
    v
}

fn failure_message(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "expected a failure, got exit 0 and stdout {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(out.stdout.is_empty(), "no verdict is printed on failure");
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn a_json_pass_with_its_request_prints_a_null_label() {
    let dir = case("pass/vllm-plain-call");
    let out = check(&[
        &task("fx-weather"),
        &dir.join("response.json"),
        &dir.join("request.json"),
    ]);
    let v = verdict(&out);
    assert_eq!(v["outcome"], "pass");
    assert!(v["label"].is_null() && v["stage"].is_null(), "{v}");
    assert_eq!(v["calls"][0]["name"], "get_weather");
    assert_eq!(v["calls"][0]["source"], "tool_calls");
    assert_eq!(v["calls"][0]["arguments"]["city"], "Paris");
}

#[test]
fn a_streamed_failure_with_request_and_meta_exits_zero_with_its_label() {
    // A stream whose usage chunk shows the request's max_tokens: only the request reveals it.
    let dir = case("truncation/usage-chunk-at-max-tokens-streamed");
    let with_request = check(&[
        &task("fx-search"),
        &dir.join("response.sse"),
        &dir.join("request.json"),
    ]);
    let v = verdict(&with_request);
    assert_eq!(v["outcome"], "fail");
    assert_eq!(v["label"], "truncation");
    assert_eq!(v["stage"], "parse");
    assert_eq!(v["cut"], true);
    assert!(
        v["detail"].as_str().unwrap().contains("at byte"),
        "{}",
        v["detail"]
    );
    // Without the request the budget is unknown: the cut arguments are malformed instead.
    let without = verdict(&check(&[&task("fx-search"), &dir.join("response.sse")]));
    assert_eq!(without["label"], "malformed_json");
}

#[test]
fn an_sse_case_with_meta_scores_the_doubled_name() {
    let dir = case("wrong_tool/name-repeated-in-every-delta");
    let tmp = tempfile::tempdir().unwrap();
    let meta = tmp.path().join("meta.json");
    std::fs::write(
        &meta,
        r#"{"status": 200, "streamed": true, "ttfb_ms": 41.5}"#,
    )
    .unwrap();
    let v = verdict(&check(&[
        &task("fx-weather"),
        &dir.join("response.sse"),
        &dir.join("request.json"),
        &meta,
    ]));
    assert_eq!(v["label"], "wrong_tool");
    assert_eq!(
        v["calls"][0]["name"],
        "get_weatherget_weatherget_weatherget_weather"
    );
}

#[test]
fn an_error_prints_a_null_label_and_exits_zero() {
    let dir = case("error/http-400-auto-tool-choice-refused");
    let v = verdict(&check(&[
        &task("fx-weather"),
        &dir.join("response.json"),
        &dir.join("request.json"),
        &dir.join("meta.json"),
    ]));
    assert_eq!(v["outcome"], "error");
    assert!(v["label"].is_null(), "{v}");
    assert_eq!(v["stage"], "transport");
    assert!(v["detail"].as_str().unwrap().starts_with("HTTP 400"), "{v}");
    assert_eq!(v["calls"], serde_json::json!([]));
}

#[test]
fn a_stream_is_sniffed_when_the_file_name_does_not_say() {
    let tmp = tempfile::tempdir().unwrap();
    let renamed = tmp.path().join("body.txt");
    std::fs::copy(
        case("no_call/pythonic-call-list-streamed/response.sse"),
        &renamed,
    )
    .unwrap();
    let v = verdict(&check(&[&task("fx-weather"), &renamed]));
    assert_eq!(v["label"], "no_call");
    assert_eq!(v["calls"][0]["source"], "pythonic");
}

#[test]
fn an_unreadable_response_names_the_file() {
    let missing = fixtures().join("cases/no-such-case/response.json");
    let msg = failure_message(&check(&[&task("fx-weather"), &missing]));
    assert!(msg.contains("no-such-case/response.json"), "{msg}");
    assert!(msg.contains("cannot read the response"), "{msg}");
}

#[test]
fn a_malformed_task_names_the_file_and_the_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("broken-task.json");
    std::fs::write(
        &bad,
        r#"{"id": "x", "title": "t", "messages": [], "expect": {"no_call": true}, "colour": 1}"#,
    )
    .unwrap();
    let msg = failure_message(&check(&[&bad, &case("pass/vllm-plain-call/response.json")]));
    assert!(msg.contains("broken-task.json"), "{msg}");
    assert!(msg.contains("colour"), "{msg}");

    let not_json = tmp.path().join("not-json.json");
    std::fs::write(&not_json, "{\"id\": ").unwrap();
    let msg = failure_message(&check(&[
        &not_json,
        &case("pass/vllm-plain-call/response.json"),
    ]));
    assert!(msg.contains("not-json.json"), "{msg}");
}

#[test]
fn a_request_that_is_not_json_is_ignored_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let request = tmp.path().join("request.json");
    std::fs::write(&request, "not json").unwrap();
    // The request is what reveals the budget here: without it the cut arguments are malformed
    // (see above), so the verdict shows the request really was left out.
    let dir = case("truncation/usage-chunk-at-max-tokens-streamed");
    let out = check(&[&task("fx-search"), &dir.join("response.sse"), &request]);
    let v = verdict(&out);
    assert_eq!(v["label"], "malformed_json", "{v}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning") && stderr.contains(&*request.to_string_lossy()),
        "{stderr}"
    );
    assert!(stderr.contains("ignored"), "{stderr}");
    // A JSON value that is not an object is no request either.
    std::fs::write(&request, "[1, 2]").unwrap();
    let out = check(&[&task("fx-search"), &dir.join("response.sse"), &request]);
    assert_eq!(verdict(&out)["label"], "malformed_json");
    assert!(String::from_utf8_lossy(&out.stderr).contains("ignored"));
    // A request file that does not exist is a typo, not optional context: an error.
    let missing = tmp.path().join("no-such-request.json");
    let msg = failure_message(&check(&[
        &task("fx-search"),
        &dir.join("response.sse"),
        &missing,
    ]));
    assert!(msg.contains("no-such-request.json"), "{msg}");
}

#[test]
fn a_task_is_found_by_its_id_in_the_tasks_folder() {
    let dir = case("pass/vllm-plain-call");
    let tasks = fixtures().join("tasks");
    let run = |task_arg: &str, tasks_dir: &Path| {
        Command::new(env!("CARGO_BIN_EXE_callcheck"))
            .arg("check")
            .args(["--task", task_arg, "--tasks"])
            .arg(tasks_dir)
            .arg("--response")
            .arg(dir.join("response.json"))
            .output()
            .expect("the callcheck binary runs")
    };
    let v = verdict(&run("fx-weather", &tasks));
    assert_eq!(v["outcome"], "pass", "{v}");
    // The same verdict as through the file.
    let by_file = verdict(&check(&[&task("fx-weather"), &dir.join("response.json")]));
    assert_eq!(v, by_file);
    // An id the corpus does not hold names the id and the folder.
    let msg = failure_message(&run("fx-no-such-task", &tasks));
    assert!(
        msg.contains("fx-no-such-task") && msg.contains(&*tasks.to_string_lossy()),
        "{msg}"
    );
    // The corpus is the default --tasks: run from the repository, a corpus id resolves.
    let out = Command::new(env!("CARGO_BIN_EXE_callcheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["check", "--task", "basic-weather-city", "--response"])
        .arg(dir.join("response.json"))
        .output()
        .unwrap();
    assert!(verdict(&out)["outcome"].is_string());
}

#[test]
fn an_unusable_meta_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let response = case("pass/vllm-plain-call/response.json");

    let meta = tmp.path().join("meta.json");
    std::fs::write(&meta, r#"{"status": "two hundred"}"#).unwrap();
    let good_request = case("pass/vllm-plain-call/request.json");
    let msg = failure_message(&check(&[
        &task("fx-weather"),
        &response,
        &good_request,
        &meta,
    ]));
    assert!(msg.contains(&*meta.to_string_lossy()), "{msg}");
}

/// The verdict quotes the model (here a tool name holding DEL, a one-byte CSI and a bidi
/// override, which serde writes raw): stdout holds none of them raw, and the JSON still says
/// exactly what the model sent (SPEC §12).
#[test]
fn a_verdict_quoting_terminal_controls_prints_them_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "get_weather\u{7f}\u{9b}2J\u{202e}x";
    let response = serde_json::json!({
        "id": "x",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": "c1",
                    "type": "function",
                    "function": {"name": name, "arguments": "{\"city\": \"Paris\"}"}
                }]
            }
        }]
    });
    let path = tmp.path().join("response.json");
    std::fs::write(&path, serde_json::to_vec(&response).unwrap()).unwrap();
    let weather = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/basic/basic-weather-city.json");
    let out = check(&[&weather, &path]);
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    for c in ['\u{7f}', '\u{9b}', '\u{202e}'] {
        assert!(!stdout.contains(c), "{c:?} printed raw: {stdout:?}");
    }
    assert!(
        stdout.contains(r"get_weather\u007f\u009b2J\u202ex"),
        "{stdout}"
    );
    let v = verdict(&out);
    assert_eq!(v["label"], "wrong_tool", "{v}");
    assert_eq!(v["calls"][0]["name"], name, "{v}");
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .starts_with(&format!("call 1 ({name}) names ")),
        "{v}"
    );
}
