//! The scorer never panics on what a server can send: arbitrary bytes, arbitrary JSON in every
//! place of a completion, streamed or not, and hostile inputs (10,000 levels of nesting, huge
//! strings, invalid UTF-8). Every input yields exactly one consistent verdict.

use callcheck::request::{Asking, chat_request};
use callcheck::score::{Verdict, score};
use callcheck::task::{self, Task};
use callcheck::taxonomy::{Outcome, Stage};
use callcheck::transcript::{Meta, Transcript};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::OnceLock;

fn tasks() -> &'static [Task] {
    static TASKS: OnceLock<Vec<Task>> = OnceLock::new();
    TASKS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scorer/tasks");
        task::load(&dir).unwrap_or_else(|e| panic!("{e}"))
    })
}

fn task_named(id: &str) -> &'static Task {
    tasks()
        .iter()
        .find(|t| t.id == id)
        .unwrap_or_else(|| panic!("no fixture task {id}"))
}

/// A request as collect would send it, with a small budget so the cut rules are exercised.
fn request(t: &Task, stream: bool, max_tokens: u64) -> Value {
    let mut params = Map::new();
    params.insert("max_tokens".into(), json!(max_tokens));
    chat_request(
        t,
        &Asking {
            model: "m".into(),
            system: None,
            stream,
            params,
            extra: Map::new(),
        },
    )
}

/// Exactly one outcome, and every field agrees with it.
fn consistent(v: &Verdict) -> Result<(), String> {
    let stage_ok = match v.outcome {
        Outcome::Pass => v.stage.is_none(),
        Outcome::Error => v.stage == Some(Stage::Transport),
        Outcome::Fail(_) => v.stage.is_some_and(|s| s != Stage::Transport),
    };
    if !stage_ok {
        return Err(format!("outcome {:?} with stage {:?}", v.outcome, v.stage));
    }
    if v.detail.trim().is_empty() {
        return Err(format!("empty detail for {:?}", v.outcome));
    }
    if v.fail_call.is_some_and(|i| i >= v.calls.len()) {
        return Err(format!(
            "fail_call {:?} of {} calls",
            v.fail_call,
            v.calls.len()
        ));
    }
    let j = v.to_json();
    let kind = j["outcome"].as_str().unwrap_or("");
    if !["pass", "fail", "error"].contains(&kind) || (kind == "fail") == j["label"].is_null() {
        return Err(format!("inconsistent JSON verdict: {j}"));
    }
    Ok(())
}

fn run(t: &Task, body: Vec<u8>, streamed: bool, request: Option<Value>) -> Verdict {
    let v = score(
        t,
        &Transcript {
            request: request.map(std::sync::Arc::new),
            body,
            streamed,
            meta: None,
        },
    );
    if let Err(e) = consistent(&v) {
        panic!("{} (task {}): {}", e, t.id, v.detail);
    }
    v
}

// ---- strategies ----

fn json_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        // Literals no double holds: long integers, long fractions, big exponents.
        "-?[1-9][0-9]{0,40}(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,4})?"
            .prop_filter_map("parses", |s| serde_json::from_str::<Value>(&s).ok()),
    ]
}

/// Strings that poke at escaping: quotes, backslashes, control characters, surrogates' text.
fn nasty_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\\\\"'{}\\[\\]:,a-z0-9 \\n\\t\\x00-\\x1f\u{fffd}\u{1f44b}]{0,40}",
        Just("\\ud83d".to_string()),
        Just("{\"city\": \"Paris\"}".to_string()),
        Just("true".to_string()),
        Just("42".to_string()),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        json_number(),
        nasty_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        "[a-z_]{1,8}",
                        Just("city".to_string()),
                        Just("days".to_string()),
                        Just("name".to_string()),
                        Just("arguments".to_string()),
                        Just("function".to_string()),
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Text that looks like argument JSON, broken in every way a model breaks it.
fn json_ish_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[\\\\\"'{}\\[\\]:,a-z0-9 \\n\\t.eE+-]{0,60}",
        json_value().prop_map(|v| v.to_string()),
        (json_value(), 0usize..64).prop_map(|(v, cut)| {
            let s = v.to_string();
            s.chars().take(cut).collect()
        }),
        json_value().prop_map(|v| format!("{v}{v}")),
        "\\[[a-z_]{1,12}\\(([a-z]{1,5}=[^)]{0,20})?\\)\\]",
        "<tool_call>[^<]{0,40}(</tool_call>)?",
        "\\[TOOL_CALLS\\][^\\n]{0,40}",
    ]
}

fn tool_name() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("get_weather")),
        Just(json!("get_time")),
        Just(json!("")),
        Just(Value::Null),
        "[a-z_.:]{1,20}".prop_map(Value::String),
        json_value(),
    ]
}

/// A completion body with arbitrary values in content, name and arguments.
fn body_with(content: &Value, calls: &[(Value, Value)], finish: &str, tokens: u64) -> Vec<u8> {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": args}})
        })
        .collect();
    serde_json::to_vec(&json!({
        "id": "chatcmpl-x", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": tool_calls}, "finish_reason": finish}],
        "usage": {"completion_tokens": tokens}
    }))
    .unwrap()
}

/// The same as a stream, every string split at `cut`, arbitrary values in every delta.
fn stream_with(content: &Value, calls: &[(Value, Value)], finish: &str, cut: usize) -> Vec<u8> {
    let mut events =
        vec![json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})];
    let split = |v: &Value| -> Vec<Value> {
        match v {
            Value::String(s) => {
                let at = s
                    .char_indices()
                    .map(|(i, _)| i)
                    .nth(cut % (s.chars().count() + 1))
                    .unwrap_or(s.len());
                vec![json!(&s[..at]), json!(&s[at..])]
            }
            other => vec![other.clone()],
        }
    };
    for piece in split(content) {
        events.push(json!({"choices": [{"index": 0, "delta": {"content": piece}}]}));
    }
    for (i, (name, args)) in calls.iter().enumerate() {
        events.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": "x", "function": {"name": name}}]}}]}));
        for piece in split(args) {
            events.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}}]}));
        }
    }
    events.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}));
    let mut out = String::new();
    for e in events {
        out.push_str(&format!("data: {e}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        t in 0usize..64,
        streamed in any::<bool>(),
    ) {
        let t = &tasks()[t % tasks().len()];
        run(t, bytes, streamed, None);
    }

    #[test]
    fn arbitrary_sse_framing_never_panics(
        events in prop::collection::vec((
            prop_oneof![Just("data: "), Just("data:"), Just(": "), Just("event: "), Just("")],
            prop_oneof![
                json_value().prop_map(|v| v.to_string().into_bytes()),
                prop::collection::vec(any::<u8>(), 0..40),
                Just(b"[DONE]".to_vec()),
            ],
            prop_oneof![Just("\n\n"), Just("\r\n\r\n"), Just("\n"), Just("\r"), Just("")],
        ), 0..12),
        t in 0usize..64,
    ) {
        let mut body = Vec::new();
        for (prefix, data, end) in events {
            body.extend_from_slice(prefix.as_bytes());
            body.extend_from_slice(&data);
            body.extend_from_slice(end.as_bytes());
        }
        let t = &tasks()[t % tasks().len()];
        run(t, body, true, None);
    }

    #[test]
    fn an_arbitrary_json_body_never_panics(v in json_value(), t in 0usize..64, streamed in any::<bool>()) {
        let t = &tasks()[t % tasks().len()];
        let body = if streamed { format!("data: {v}\n\ndata: [DONE]\n\n") } else { v.to_string() };
        run(t, body.into_bytes(), streamed, None);
    }

    #[test]
    fn arbitrary_values_in_content_names_and_arguments_never_panic(
        content in prop_oneof![json_value(), json_ish_text().prop_map(Value::String), nasty_string().prop_map(Value::String)],
        calls in prop::collection::vec((
            tool_name(),
            prop_oneof![json_ish_text().prop_map(Value::String), json_value()],
        ), 0..4),
        finish in prop_oneof![Just("stop"), Just("tool_calls"), Just("length"), Just("function_call")],
        tokens in 0u64..40,
        cut in 0usize..80,
        t in 0usize..64,
        with_request in any::<bool>(),
    ) {
        let t = &tasks()[t % tasks().len()];
        let request = with_request.then(|| request(t, false, 24));
        run(t, body_with(&content, &calls, finish, tokens), false, request.clone());
        run(t, stream_with(&content, &calls, finish, cut), true, request);
    }
}

// ---- hostile inputs ----

const DEEP: usize = 10_000;

fn deep_array() -> String {
    format!("{}{}", "[".repeat(DEEP), "]".repeat(DEEP))
}

fn deep_object() -> String {
    format!("{}1{}", "{\"a\":".repeat(DEEP), "}".repeat(DEEP))
}

/// Scores on a thread with the 2 MiB stack rayon gives its workers, where build scores.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .expect("scoring panicked or overflowed its stack");
}

#[test]
fn ten_thousand_levels_of_nesting_do_not_overflow_the_stack() {
    on_small_stack(|| {
        // One task of each kind: a call, parallel calls, no call, structured output.
        let kinds = ["fx-weather", "fx-parallel-3", "fx-no-call", "fx-person"];
        for nested in [deep_array(), deep_object()] {
            for t in kinds.map(task_named) {
                // The whole body, both ways.
                let v = run(t, nested.clone().into_bytes(), false, None);
                assert_eq!(v.outcome, Outcome::Error, "{}", v.detail);
                let sse = format!("data: {nested}\n\ndata: [DONE]\n\n");
                assert_eq!(run(t, sse.into_bytes(), true, None).outcome, Outcome::Error);
                // As arguments, as content, as a text call, as a pythonic argument.
                let args = json!(nested);
                run(
                    t,
                    body_with(
                        &json!(null),
                        &[(json!("get_weather"), args.clone())],
                        "tool_calls",
                        5,
                    ),
                    false,
                    None,
                );
                run(
                    t,
                    stream_with(
                        &json!(null),
                        &[(json!("get_weather"), args)],
                        "tool_calls",
                        7,
                    ),
                    true,
                    None,
                );
                for content in [
                    nested.clone(),
                    format!("<tool_call>{nested}</tool_call>"),
                    format!("[TOOL_CALLS]{nested}"),
                    format!("[get_weather(city={nested})]"),
                    format!("Here: {nested}"),
                    format!("```json\n{nested}\n```"),
                ] {
                    run(t, body_with(&json!(content), &[], "stop", 5), false, None);
                    run(t, body_with(&json!(content), &[], "length", 5), false, None);
                }
            }
        }
    });
}

#[test]
fn huge_strings_are_scored() {
    on_small_stack(|| {
        let big = "x".repeat(2 << 20);
        // A 2 MiB prose answer to a no-call task is a pass.
        let v = run(
            task_named("fx-no-call"),
            body_with(&json!(big), &[], "stop", 5),
            false,
            None,
        );
        assert_eq!(v.outcome, Outcome::Pass, "{}", v.detail);
        // A 2 MiB code argument is a pass; with invalid escapes throughout, escaping_error.
        let code = json!({"code": big}).to_string();
        let v = run(
            task_named("fx-code"),
            body_with(
                &json!(null),
                &[(json!("run_python"), json!(code))],
                "tool_calls",
                5,
            ),
            false,
            None,
        );
        assert_eq!(v.outcome, Outcome::Pass, "{}", v.detail);
        let mangled = format!("{{\"code\": \"{}\"}}", "it\\'s ".repeat(200_000));
        let v = run(
            task_named("fx-code"),
            body_with(
                &json!(null),
                &[(json!("run_python"), json!(mangled))],
                "tool_calls",
                5,
            ),
            false,
            None,
        );
        assert_eq!(
            v.label().map(|l| l.as_str()),
            Some("escaping_error"),
            "{}",
            v.detail
        );
        // Streamed in 100,000 small events.
        let stream = stream_with(
            &json!(null),
            &[(json!("run_python"), json!(code))],
            "tool_calls",
            3,
        );
        let v = run(task_named("fx-code"), stream, true, None);
        assert_eq!(v.outcome, Outcome::Pass, "{}", v.detail);
        let mut many = String::new();
        for _ in 0..100_000 {
            many.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ab\"}}]}\n\n");
        }
        many.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
        let v = run(task_named("fx-no-call"), many.into_bytes(), true, None);
        assert_eq!(v.outcome, Outcome::Pass, "{}", v.detail);
    });
}

#[test]
fn many_calls_are_scored() {
    let weather = |city: &str| {
        (
            json!("get_weather"),
            json!(json!({"city": city}).to_string()),
        )
    };
    let t = task_named("fx-parallel-3");
    for n in [8usize, 9, 40, 1000] {
        let calls: Vec<_> = (0..n).map(|i| weather(&format!("City {i}"))).collect();
        let v = run(
            t,
            body_with(&json!(null), &calls, "tool_calls", 5),
            false,
            None,
        );
        assert_eq!(
            v.label().map(|l| l.as_str()),
            Some("spurious_call"),
            "{n}: {}",
            v.detail
        );
    }
}

#[test]
fn invalid_utf8_in_a_stream_is_survived() {
    let t = task_named("fx-no-call");
    let ok_end = b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    // In a comment line: ignored.
    let mut body = b": \xff\xfe\xc3\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Paris\"}}]}\n\n".to_vec();
    body.extend_from_slice(ok_end);
    assert_eq!(run(t, body, true, None).outcome, Outcome::Pass);
    // Inside a content string: read as U+FFFD, still prose.
    let mut body =
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Par\xe9is \xf0\x9f\"}}]}\n\n"
            .to_vec();
    body.extend_from_slice(ok_end);
    let v = run(t, body, true, None);
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.detail);
    // Inside the arguments of a call: the value carries U+FFFD, the call is still scored.
    let mut body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Par\xffis\\\"}\"}}]}}]}\n\n".to_vec();
    body.extend_from_slice(ok_end);
    let v = run(task_named("fx-weather"), body, true, None);
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.detail);
    assert_eq!(
        v.calls[0].arguments.as_ref().unwrap()["city"],
        "Par\u{fffd}is"
    );
    // As a whole event: not JSON, a transport error.
    let mut body = b"data: \xff\xfe\xfd\n\n".to_vec();
    body.extend_from_slice(ok_end);
    assert_eq!(run(t, body, true, None).outcome, Outcome::Error);
    // In a non-streamed body, invalid UTF-8 makes the body unreadable JSON: error.
    let body = b"{\"choices\":[{\"index\":0,\"message\":{\"content\":\"Par\xffis\"},\"finish_reason\":\"stop\"}]}".to_vec();
    assert_eq!(run(t, body, false, None).outcome, Outcome::Error);
}

#[test]
fn hostile_request_schemas_do_not_break_scoring() {
    let t = task_named("fx-weather");
    let body = body_with(
        &json!(null),
        &[(
            json!("get_weather"),
            json!("{\"city\": \"Paris\", \"x\": {\"y\": [1, 2]}}"),
        )],
        "tool_calls",
        5,
    );
    for params in [
        json!({"$ref": "#"}),
        json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
        json!({"$ref": "https://example.com/schema.json"}),
        json!({"type": "object", "properties": {"city": {"$ref": "#/properties/city"}}}),
        json!({"anyOf": [{"$ref": "#"}, {"type": "object", "properties": {"x": {"$ref": "#"}}}]}),
        json!("not a schema"),
        json!(42),
    ] {
        let mut request = request(t, false, 512);
        request["tools"] = json!([{"type": "function", "function": {"name": "get_weather", "parameters": params}}]);
        let meta = Meta {
            status: Some(200),
            ..Meta::default()
        };
        let v = score(
            t,
            &Transcript {
                request: Some(std::sync::Arc::new(request)),
                body: body.clone(),
                streamed: false,
                meta: Some(meta),
            },
        );
        consistent(&v).unwrap_or_else(|e| panic!("{params}: {e}"));
    }
}
