//! SPEC §11's visible and silent failures: for each label, the scorer's `visible` against the
//! marking SPEC gives the rule of §2.1 that decided it — visible when the rule reads only the
//! request (tools, schemas, `tool_choice`, budget, `response_format`) and the response, silent
//! when it consults the task's expected calls or predicates. Each case is a response written by
//! hand against a fixture task, sent with the request a collection would send.

use crate::support::fixture::tasks;
use callcheck::score::{self, Verdict};
use callcheck::task::Task;
use callcheck::taxonomy::{Label, Outcome, Stage};
use callcheck::transcript::{Meta, Transcript};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

fn task(id: &str) -> Task {
    let all = tasks(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scorer/tasks"));
    all.get(id)
        .cloned()
        .unwrap_or_else(|| panic!("no fixture task {id}"))
}

/// The request a collection sends for `t`, with `tool_choice` as given (the task's own when
/// `None`) and a budget of 64 tokens.
fn request(t: &Task, tool_choice: Option<Value>) -> Value {
    let mut r = json!({
        "model": "m",
        "messages": t.messages,
        "tools": t.tools_json,
        "max_tokens": 64,
    });
    if let Some(tc) = tool_choice.or_else(|| t.tool_choice.clone()) {
        r["tool_choice"] = tc;
    }
    if let Some(rf) = &t.response_format {
        r["response_format"] = rf.clone();
    }
    r
}

/// One call in the wire form of `tool_calls`.
fn call(name: &str, arguments: &str) -> Value {
    json!({"id": format!("call_{name}"), "type": "function",
           "function": {"name": name, "arguments": arguments}})
}

/// Scores `message` (finishing with `finish`) on task `id` sent with `tool_choice`.
fn scored(id: &str, tool_choice: Option<Value>, message: Value, finish: &str) -> Verdict {
    let t = task(id);
    let body = json!({
        "id": "x", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}
    });
    let transcript = Transcript {
        request: Some(Arc::new(request(&t, tool_choice))),
        body: serde_json::to_vec(&body).unwrap(),
        streamed: false,
        meta: None,
    };
    score::score(&t, &transcript)
}

fn calls(cs: Vec<Value>) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": cs})
}

fn prose(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// Asserts the verdict's label, stage and visibility together: a case that drifted to another
/// rule would prove nothing about this one.
fn assert_seen(v: &Verdict, label: Label, stage: Stage, visible: bool) {
    assert_eq!(
        (v.outcome, v.stage, v.visible),
        (Outcome::Fail(label), Some(stage), visible),
        "{}",
        v.detail
    );
}

fn required() -> Option<Value> {
    Some(json!("required"))
}

fn named(f: &str) -> Option<Value> {
    Some(json!({"type": "function", "function": {"name": f}}))
}

#[test]
fn a_pass_is_no_failure_to_see() {
    let v = scored(
        "fx-weather",
        None,
        calls(vec![call("get_weather", r#"{"city":"Paris"}"#)]),
        "tool_calls",
    );
    assert_eq!((v.outcome, v.visible), (Outcome::Pass, false));
}

#[test]
fn a_transport_error_is_visible() {
    let t = task("fx-weather");
    let transcript = Transcript {
        request: Some(Arc::new(request(&t, None))),
        body: br#"{"error": {"message": "upstream failed", "code": 500}}"#.to_vec(),
        streamed: false,
        meta: Some(Meta {
            status: Some(500),
            ..Meta::default()
        }),
    };
    let v = score::score(&t, &transcript);
    assert_eq!(
        (v.outcome, v.stage, v.visible),
        (Outcome::Error, Some(Stage::Transport), true)
    );
}

#[test]
fn malformed_json_is_visible() {
    let v = scored(
        "fx-weather",
        None,
        calls(vec![call("get_weather", r#"{"city": "Paris""#)]),
        "tool_calls",
    );
    assert_seen(&v, Label::MalformedJson, Stage::Parse, true);
}

#[test]
fn truncation_is_visible_even_where_its_rule_counts_expected_calls() {
    // Cut with a broken call.
    let v = scored(
        "fx-weather",
        None,
        calls(vec![call("get_weather", r#"{"city": "Pa"#)]),
        "length",
    );
    assert_seen(&v, Label::Truncation, Stage::Parse, true);
    // Cut with two complete calls of the three expected: the sub-rule counts the task's calls,
    // but the router reads the cut off the response.
    let v = scored(
        "fx-parallel-3",
        None,
        calls(vec![
            call("get_weather", r#"{"city":"Paris"}"#),
            call("get_weather", r#"{"city":"Tokyo"}"#),
        ]),
        "length",
    );
    assert_seen(&v, Label::Truncation, Stage::Parse, true);
}

#[test]
fn escaping_error_is_visible_at_parse_and_silent_from_a_round_trip_predicate() {
    let v = scored(
        "fx-weather",
        None,
        calls(vec![call("get_weather", r#"{"city": "Par\'is"}"#)]),
        "tool_calls",
    );
    assert_seen(&v, Label::EscapingError, Stage::Parse, true);
    // Valid JSON, valid schema, the escapes left literal as text: only the task's round-trip
    // predicate knows which text the prompt spelled out.
    let v = scored(
        "fx-unicode",
        None,
        calls(vec![call(
            "send_message",
            r#"{"to":"Lea","text":"Gr\\u00fc\\u00dfe aus \\u6771\\u4eac \\ud83d\\udc4b \\u2014 \\u00e7a va?"}"#,
        )]),
        "tool_calls",
    );
    assert_seen(&v, Label::EscapingError, Stage::Semantic, false);
}

#[test]
fn schema_stage_labels_are_visible() {
    let w = |args: &str| {
        scored(
            "fx-weather",
            None,
            calls(vec![call("get_weather", args)]),
            "tool_calls",
        )
    };
    assert_seen(
        &w(r#"{"city":"Paris","unit":"kelvin"}"#),
        Label::SchemaViolation,
        Stage::Schema,
        true,
    );
    assert_seen(
        &w(r#"{"unit":"celsius"}"#),
        Label::MissingRequired,
        Stage::Schema,
        true,
    );
    assert_seen(
        &w(r#"{"city":"Paris","country":"FR"}"#),
        Label::HallucinatedParam,
        Stage::Schema,
        true,
    );
    assert_seen(
        &w(r#"{"city":"Paris","days":"3"}"#),
        Label::TypeCoercion,
        Stage::Schema,
        true,
    );
}

#[test]
fn type_coercion_from_an_exactness_predicate_is_silent() {
    // A valid integer that lost precision: the schema says integer and is satisfied; only the
    // task's `equals` knows the value.
    let v = scored(
        "fx-int64",
        None,
        calls(vec![call(
            "get_order",
            r#"{"order_id":9223372036854775806}"#,
        )]),
        "tool_calls",
    );
    assert_seen(&v, Label::TypeCoercion, Stage::Semantic, false);
}

#[test]
fn no_call_is_visible_only_when_the_request_demands_a_call() {
    let answer = || prose("It is probably mild in Paris this time of year.");
    assert_seen(
        &scored("fx-weather", None, answer(), "stop"),
        Label::NoCall,
        Stage::Structure,
        false,
    );
    assert_seen(
        &scored("fx-weather", Some(json!("auto")), answer(), "stop"),
        Label::NoCall,
        Stage::Structure,
        false,
    );
    assert_seen(
        &scored("fx-weather", required(), answer(), "stop"),
        Label::NoCall,
        Stage::Structure,
        true,
    );
    assert_seen(
        &scored("fx-weather", named("get_weather"), answer(), "stop"),
        Label::NoCall,
        Stage::Structure,
        true,
    );
    // A call left as text in content is no call to the client's runtime: the same marking.
    let text = || {
        prose(r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#)
    };
    assert_seen(
        &scored("fx-weather", None, text(), "stop"),
        Label::NoCall,
        Stage::Structure,
        false,
    );
    assert_seen(
        &scored("fx-weather", required(), text(), "stop"),
        Label::NoCall,
        Stage::Structure,
        true,
    );
}

#[test]
fn wrong_tool_is_visible_for_a_name_not_offered_or_forbidden_and_silent_among_offered_tools() {
    let v = scored(
        "fx-weather",
        None,
        calls(vec![call("get_forecast", r#"{"city":"Paris"}"#)]),
        "tool_calls",
    );
    assert_seen(&v, Label::WrongTool, Stage::Structure, true);
    // get_time is offered: only the answer key says get_weather was wanted.
    let v = scored(
        "fx-weather",
        None,
        calls(vec![call("get_time", r#"{"tz":"Europe/Paris"}"#)]),
        "tool_calls",
    );
    assert_seen(&v, Label::WrongTool, Stage::Structure, false);
    // The same call, when tool_choice names get_weather: the request forbids get_time.
    let v = scored(
        "fx-weather",
        named("get_weather"),
        calls(vec![call("get_time", r#"{"tz":"Europe/Paris"}"#)]),
        "tool_calls",
    );
    assert_seen(&v, Label::WrongTool, Stage::Structure, true);
    // The fixture task that names get_time itself.
    let v = scored(
        "fx-forced",
        None,
        calls(vec![call("get_weather", r#"{"city":"Tokyo"}"#)]),
        "tool_calls",
    );
    assert_seen(&v, Label::WrongTool, Stage::Structure, true);
}

#[test]
fn parallel_collapse_is_silent_whether_structural_or_from_a_predicate() {
    let v = scored(
        "fx-parallel-3",
        None,
        calls(vec![call("get_weather", r#"{"city":"Paris"}"#)]),
        "tool_calls",
    );
    assert_seen(&v, Label::ParallelCollapse, Stage::Structure, false);
    let v = scored(
        "fx-parallel-3",
        required(),
        calls(vec![
            call("get_weather", r#"{"city":"Paris"}"#),
            call("get_weather", r#"{"city":"Paris"}"#),
            call("get_weather", r#"{"city":"Lima"}"#),
        ]),
        "tool_calls",
    );
    assert_seen(&v, Label::ParallelCollapse, Stage::Semantic, false);
}

#[test]
fn spurious_call_is_visible_only_when_tool_choice_forbids_the_call() {
    let weather = || calls(vec![call("get_weather", r#"{"city":"Paris"}"#)]);
    assert_seen(
        &scored("fx-no-call", None, weather(), "tool_calls"),
        Label::SpuriousCall,
        Stage::Structure,
        false,
    );
    assert_seen(
        &scored("fx-no-call", Some(json!("none")), weather(), "tool_calls"),
        Label::SpuriousCall,
        Stage::Structure,
        true,
    );
    // An addition on a call task: the count is the task's.
    let v = scored(
        "fx-weather",
        None,
        calls(vec![
            call("get_weather", r#"{"city":"Paris"}"#),
            call("get_time", r#"{"tz":"Europe/Paris"}"#),
        ]),
        "tool_calls",
    );
    assert_seen(&v, Label::SpuriousCall, Stage::Structure, false);
    // The same addition when tool_choice names get_weather: get_time is forbidden.
    let v = scored(
        "fx-weather",
        named("get_weather"),
        calls(vec![
            call("get_weather", r#"{"city":"Paris"}"#),
            call("get_time", r#"{"tz":"Europe/Paris"}"#),
        ]),
        "tool_calls",
    );
    assert_seen(&v, Label::SpuriousCall, Stage::Structure, true);
}
