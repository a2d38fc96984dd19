//! The follow-up request of the feedback round (SPEC §11): from a failed first-round sample —
//! the request as sent, the answer as received, its verdict — and a style, the body a
//! framework would send next. A pure function; `collect --feedback` sends what it returns.
//!
//! The body is the parent's request as sent, byte for byte in every field but `messages`
//! (`tools`, `tool_choice`, `response_format`, sampling parameters, `stream`, `stream_options`,
//! the parent's own `seed`), whose messages are the parent's followed by:
//!
//! 1. **The assistant message exactly as the model sent it**, read the way the OpenAI client
//!    libraries read it: `choices[0].message` of a JSON body, or a stream's deltas assembled
//!    by `index` with string fields concatenated (so a streamed answer and the same answer
//!    unstreamed give the same message). It holds `content` as received (`null` when the
//!    model sent none beside its calls) and `tool_calls`, each `{id, type: "function",
//!    function: {name, arguments}}` with the server's id. The arguments go back as the string
//!    the model produced, broken or not (a `malformed_json`, `escaping_error` or cut
//!    `truncation` is sent back as it was: that is what the model has to repair); an object
//!    sent where the string belongs is sent back as its compact JSON text; absent arguments
//!    as `"{}"` (how clients and the scorer read them). A call with no id gets
//!    `call` + its five-digit position (`call00000`, `call00001`…): deterministic, nine
//!    alphanumeric characters as Mistral's templates demand. A call with no name gets `""`.
//!    What clients do not send back is dropped: `reasoning_content`, the deprecated
//!    `function_call`, `refusal`, logprobs. A call left in `content` (`<tool_call>…`, a
//!    pythonic list) stays in `content`: no client extracted it, so there is no call id.
//!    An answer with neither calls nor text (an empty cut answer) is sent as `content: ""`,
//!    since an assistant message with neither is refused by the API.
//! 2. **The feedback.** When the assistant message has `tool_calls`: one `tool` message per
//!    call, in the calls' order, with its `tool_call_id` (the API wants every call answered).
//!    The failing call (the verdict's `fail_call`; the first call when the verdict names none,
//!    as for `parallel_collapse` or a `spurious_call` on a task that needs no call) gets the
//!    feedback, every other call [`NOT_EXECUTED`]. Otherwise (prose, a call left in text, a
//!    structured-output answer) the feedback is one `user` message.
//!
//! Styles: `error` says what the validator found, in the verdict's own detail, and what to do
//! for that label ([`advice`]); `checklist` is HiTEC-ICL's local checklist, derived from the
//! offered tools' schemas (or the `response_format` schema) and never pointing at the error
//! ([`checklist`]); `retry` is [`RETRY`]. The rules per label are in docs/data.md.

use crate::runs::FeedbackStyle;
use crate::score::Verdict;
use crate::score::extract::Source;
use crate::score::wire::{Completion, WireArgs};
use crate::task::{Expect, Task};
use crate::taxonomy::{Label, Outcome};
use serde_json::{Map, Value, json};

/// The whole feedback of the `retry` style.
pub const RETRY: &str = "That did not work; try again.";

/// What a call of the same turn that was not the failing one is answered with.
pub const NOT_EXECUTED: &str = "not executed: another call of this turn was rejected";

/// The first line of every `checklist` feedback (the mock recognises the style by it).
pub const CHECKLIST_HEAD: &str =
    "Check your last answer against this checklist, then answer the request again.";

/// The first words of every `error` feedback.
pub const ERROR_HEAD: &str = "Validation error";

/// Why no follow-up can be built for a sample.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoFollowUp {
    #[error("the sample passed: there is nothing to feed back")]
    Passed,
    #[error("the sample is a transport error, not the model's failure")]
    TransportError,
    #[error("its request.json is not a JSON object with a `messages` list")]
    BadRequest,
}

/// Whether a follow-up can be built on `request` (the parent's `request.json`): a JSON object
/// with a `messages` list. `collect --feedback` plans with this and builds the body only when
/// it sends it, so planning a large tree holds no bodies.
pub fn check_request(request: &Value) -> Result<(), NoFollowUp> {
    match request.get("messages") {
        Some(Value::Array(_)) if request.is_object() => Ok(()),
        _ => Err(NoFollowUp::BadRequest),
    }
}

/// The follow-up request body for one failed sample.
///
/// `request` is the parent's `request.json` as sent, `completion` its response as the client
/// read it (`score::parse`), `verdict` its verdict under the current checkers.
pub fn follow_up(
    task: &Task,
    request: &Value,
    completion: &Completion,
    verdict: &Verdict,
    style: FeedbackStyle,
) -> Result<Value, NoFollowUp> {
    let label = match verdict.outcome {
        Outcome::Pass => return Err(NoFollowUp::Passed),
        Outcome::Error => return Err(NoFollowUp::TransportError),
        Outcome::Fail(l) => l,
    };
    let mut body = request.as_object().cloned().ok_or(NoFollowUp::BadRequest)?;
    let mut messages = body
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .ok_or(NoFollowUp::BadRequest)?;
    let (assistant, ids) = assistant_message(completion);
    messages.push(assistant);
    let text = feedback_text(task, request, verdict, label, style);
    if ids.is_empty() {
        messages.push(json!({"role": "user", "content": text}));
    } else {
        let failing = failing_position(verdict).filter(|&p| p < ids.len());
        for (position, id) in ids.iter().enumerate() {
            let content = if position == failing.unwrap_or(0) {
                text.as_str()
            } else {
                NOT_EXECUTED
            };
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
        }
    }
    // `insert` on a present key keeps its place: the body's fields stay in the parent's order.
    body.insert("messages".into(), Value::Array(messages));
    Ok(Value::Object(body))
}

/// The id a call without one is given: deterministic, 9 alphanumeric characters.
pub fn generated_id(position: usize) -> String {
    format!("call{position:05}")
}

/// The assistant message as a client library would send it back, and its call ids in order.
pub fn assistant_message(c: &Completion) -> (Value, Vec<String>) {
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    let mut ids = Vec::new();
    let calls: Vec<Value> = c
        .tool_calls
        .iter()
        .enumerate()
        .map(|(position, call)| {
            let id = match call.id.as_deref() {
                Some(id) if !id.is_empty() => id.to_string(),
                _ => generated_id(position),
            };
            ids.push(id.clone());
            let arguments = match &call.arguments {
                WireArgs::Text(s) => s.clone(),
                WireArgs::Json(v) => serde_json::to_string(v).unwrap_or_default(),
                WireArgs::Absent => "{}".into(),
            };
            json!({
                "id": id,
                "type": "function",
                "function": {"name": call.name.clone().unwrap_or_default(), "arguments": arguments},
            })
        })
        .collect();
    let content = match &c.content {
        Some(s) => Value::String(s.clone()),
        None if calls.is_empty() => Value::String(String::new()),
        None => Value::Null,
    };
    m.insert("content".into(), content);
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    (Value::Object(m), ids)
}

/// The position in `tool_calls` of the call the verdict blames, when it blames a structured
/// call.
fn failing_position(v: &Verdict) -> Option<usize> {
    let call = v.calls.get(v.fail_call?)?;
    (call.source == Source::ToolCalls).then_some(call.index)
}

/// The feedback of one style for one failure.
pub fn feedback_text(
    task: &Task,
    request: &Value,
    verdict: &Verdict,
    label: Label,
    style: FeedbackStyle,
) -> String {
    match style {
        FeedbackStyle::Retry => RETRY.to_string(),
        FeedbackStyle::Checklist => checklist(request),
        FeedbackStyle::Error => {
            let (what, todo) = advice(task, verdict, label);
            let detail = verdict.detail.trim();
            if detail.is_empty() {
                format!("{ERROR_HEAD}: {what}.\n{todo}")
            } else {
                format!("{ERROR_HEAD}: {what}: {detail}\n{todo}")
            }
        }
    }
}

/// For the `error` style: what went wrong, in a few plain words, and what to do about it.
pub fn advice(task: &Task, verdict: &Verdict, label: Label) -> (&'static str, &'static str) {
    let structured = task.is_structured_output();
    match label {
        Label::NoCall if verdict.detail.contains("as text") => (
            "the call was written as text in your message, so no tool was called",
            "Call the tool through a tool call, not as text in the message.",
        ),
        Label::NoCall => (
            "no tool was called",
            "Call the tool the request needs, with its arguments, through a tool call.",
        ),
        Label::WrongTool => (
            "that tool does not do what the request asks",
            "Call the offered tool that does what the user asked.",
        ),
        Label::MalformedJson if structured => (
            "the answer is not valid JSON",
            "Answer with one JSON value that follows the response schema, and nothing else.",
        ),
        Label::MalformedJson => (
            "the arguments are not a valid JSON object",
            "Call the tool again with its arguments as one valid JSON object.",
        ),
        Label::SchemaViolation => (
            "a value does not satisfy the schema",
            "Correct the value so that it satisfies the schema (allowed values, format, range) and answer again.",
        ),
        Label::HallucinatedParam => (
            "an argument is not defined by the tool",
            "Call the tool again using only the parameters its schema defines.",
        ),
        Label::MissingRequired => (
            "a required argument is missing",
            "Call the tool again with every required argument.",
        ),
        Label::TypeCoercion => (
            "a value has the wrong JSON type",
            "Give every value the type the schema declares: numbers and booleans unquoted, objects and arrays as JSON, not as strings.",
        ),
        Label::EscapingError => (
            "the JSON is broken by its quoting or escaping",
            "Answer again with standard JSON string escaping.",
        ),
        Label::Truncation => (
            "the answer was cut off before it was complete",
            "Answer again, complete and more concisely.",
        ),
        Label::ParallelCollapse => (
            "the request needs more calls than you made",
            "Make every call the request needs, each as its own tool call, in this one turn.",
        ),
        Label::SpuriousCall if matches!(task.expect, Expect::NoCall) => (
            "this request needs no tool call",
            "Answer the user in text, without calling a tool.",
        ),
        Label::SpuriousCall => (
            "you made more calls than the request asks for",
            "Make only the calls the request asks for.",
        ),
    }
}

/// HiTEC-ICL's local checklist of what the request offered, derived from the schemas of its
/// `tools` (or of its `response_format` for a structured-output request): per tool its
/// required arguments and each argument's type, allowed values, format, pattern and range;
/// then the checks every call must pass. It never says which check failed.
pub fn checklist(request: &Value) -> String {
    let mut out = String::from(CHECKLIST_HEAD);
    let tools = request
        .get("tools")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty());
    if let Some(tools) = tools {
        out.push_str("\nThe tools you may call:");
        for t in tools {
            let f = t.get("function").unwrap_or(t);
            let name = f.get("name").and_then(Value::as_str).unwrap_or("?");
            out.push_str(&format!("\n- {name}"));
            describe_object(f.get("parameters"), "  ", &mut out);
        }
        out.push_str(concat!(
            "\nChecks:",
            "\n1. If the request needs a tool, call it through a tool call, not as text in your message; if it needs none, answer in text.",
            "\n2. Call the tool whose purpose matches the request, by its exact name.",
            "\n3. Give every required argument.",
            "\n4. Give each argument the declared type: numbers and booleans unquoted, objects and arrays as JSON, not as strings.",
            "\n5. Use only allowed values: the listed values, formats, patterns and ranges.",
            "\n6. Use only the arguments the tool declares.",
            "\n7. Write the arguments as one valid JSON object, with standard escaping.",
            "\n8. Make one call per action the request asks for, all in this turn.",
        ));
    } else if let Some(schema) = request
        .pointer("/response_format/json_schema/schema")
        .or_else(|| request.pointer("/response_format/schema"))
    {
        out.push_str("\nThe answer must be JSON following this schema:");
        describe_object(Some(schema), "", &mut out);
        out.push_str(concat!(
            "\nChecks:",
            "\n1. Answer with one JSON value and nothing else.",
            "\n2. Give every required field, with the declared type.",
            "\n3. Use only allowed values: the listed values, formats, patterns and ranges.",
            "\n4. Use only the fields the schema declares.",
        ));
    } else {
        out.push_str(concat!(
            "\nChecks:",
            "\n1. Answer the request completely.",
            "\n2. Call a tool only when the request needs one.",
        ));
    }
    out
}

/// One line per property of an object schema, nested objects indented below their property.
fn describe_object(schema: Option<&Value>, indent: &str, out: &mut String) {
    let Some(props) = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
    else {
        return;
    };
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !required.is_empty() {
        out.push_str(&format!("\n{indent}required: {}", required.join(", ")));
    }
    // Nesting is bounded: a recursive schema ($ref to itself) is described one level deep.
    let deeper = indent.len() < 8;
    for (name, p) in props {
        out.push_str(&format!("\n{indent}- {name}: {}", describe_value(p)));
        if deeper {
            let nested = match p.get("type").and_then(Value::as_str) {
                Some("object") => Some(p),
                Some("array") => p.get("items"),
                _ => None,
            };
            if nested.is_some_and(|n| n.get("properties").is_some()) {
                describe_object(nested, &format!("{indent}  "), out);
            }
        }
    }
}

/// A property's type and constraints in a few words: `integer, 5 to 480`.
fn describe_value(p: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    match p.get("type") {
        Some(Value::String(t)) if t == "array" => {
            let item = p
                .pointer("/items/type")
                .and_then(Value::as_str)
                .map(|t| format!("array of {t}"))
                .unwrap_or_else(|| "array".into());
            parts.push(item);
        }
        Some(Value::String(t)) => parts.push(t.clone()),
        Some(Value::Array(ts)) => parts.push(
            ts.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" or "),
        ),
        _ if p.get("anyOf").or_else(|| p.get("oneOf")).is_some() => {
            parts.push("one of several shapes".into())
        }
        _ if p.get("$ref").is_some() => parts.push("see its definition".into()),
        _ => parts.push("any JSON value".into()),
    }
    if let Some(e) = p.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = e.iter().map(|v| v.to_string()).collect();
        parts.push(format!("one of {}", values.join(", ")));
    }
    if let Some(c) = p.get("const") {
        parts.push(format!("exactly {c}"));
    }
    if let Some(f) = p.get("format").and_then(Value::as_str) {
        parts.push(format!("format {f}"));
    }
    if let Some(pat) = p.get("pattern").and_then(Value::as_str) {
        parts.push(format!("matching {pat}"));
    }
    let bound = |k: &str| p.get(k).map(|v| v.to_string());
    match (bound("minimum"), bound("maximum")) {
        (Some(a), Some(b)) => parts.push(format!("{a} to {b}")),
        (Some(a), None) => parts.push(format!("at least {a}")),
        (None, Some(b)) => parts.push(format!("at most {b}")),
        (None, None) => {}
    }
    match (bound("minLength"), bound("maxLength")) {
        (Some(a), Some(b)) => parts.push(format!("{a} to {b} characters")),
        (Some(a), None) => parts.push(format!("at least {a} characters")),
        (None, Some(b)) => parts.push(format!("at most {b} characters")),
        (None, None) => {}
    }
    match (bound("minItems"), bound("maxItems")) {
        (Some(a), Some(b)) => parts.push(format!("{a} to {b} items")),
        (Some(a), None) => parts.push(format!("at least {a} items")),
        (None, Some(b)) => parts.push(format!("at most {b} items")),
        (None, None) => {}
    }
    parts.join(", ")
}

/// The style of a feedback text this module wrote (the mock reads a follow-up by it).
pub fn style_of(text: &str) -> Option<FeedbackStyle> {
    if text == RETRY {
        Some(FeedbackStyle::Retry)
    } else if text.starts_with(CHECKLIST_HEAD) {
        Some(FeedbackStyle::Checklist)
    } else if text.starts_with(ERROR_HEAD) {
        Some(FeedbackStyle::Error)
    } else {
        None
    }
}

/// For a request shaped like a follow-up (its messages end with an assistant turn and
/// `tool` or `user` messages after it): how many messages the original request had, and the
/// feedback's style when this module wrote it. A first-round request of a task with history
/// has that shape too: a caller tells them apart by whether the whole request is a task's.
pub fn read_follow_up(request: &Value) -> Option<(usize, Option<FeedbackStyle>)> {
    let messages = request.get("messages")?.as_array()?;
    let role = |m: &Value| m.get("role").and_then(Value::as_str).map(str::to_string);
    let last = messages.last()?;
    if !matches!(role(last).as_deref(), Some("tool") | Some("user")) {
        return None;
    }
    let assistant = messages
        .iter()
        .rposition(|m| role(m).as_deref() == Some("assistant"))?;
    let after = &messages[assistant + 1..];
    if after.is_empty() {
        return None;
    }
    let style = after
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_str))
        .find_map(style_of);
    Some((assistant, style))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::{Reply, render_json, render_sse};
    use crate::request::{Asking, sample_request};
    use crate::transcript::Transcript;

    fn task(path: &str) -> Task {
        crate::task::load(std::path::Path::new(path))
            .unwrap()
            .remove(0)
    }

    fn asking(stream: bool) -> Asking {
        let mut params = Map::new();
        params.insert("temperature".into(), json!(0.7));
        params.insert("max_tokens".into(), json!(1024));
        params.insert("seed".into(), json!(1));
        Asking {
            model: "m".into(),
            system: None,
            stream,
            params,
            extra: Map::new(),
        }
    }

    /// A sample as collect would keep it: the request and the reply rendered on the wire.
    fn sample(task: &Task, reply: &Reply, stream: bool) -> (Value, Transcript) {
        let request = sample_request(task, &asking(stream), 0);
        let body = if stream {
            render_sse(reply, "m", 100, true, 3)
        } else {
            render_json(reply, "m", 100, 3)
        };
        let t = Transcript {
            request: Some(std::sync::Arc::new(request.clone())),
            body,
            streamed: stream,
            meta: None,
        };
        (request, t)
    }

    /// The follow-ups of every style, after checking that each is the parent's request with
    /// only its messages extended; returns the messages added, per style.
    fn follow_ups(task: &Task, request: &Value, t: &Transcript) -> (Verdict, Value) {
        let completion = crate::score::parse(t).unwrap();
        let verdict = crate::score::score(task, t);
        let mut added = Map::new();
        for style in FeedbackStyle::ALL {
            let body = follow_up(task, request, &completion, &verdict, style).unwrap();
            let sent = request["messages"].as_array().unwrap();
            let messages = body["messages"].as_array().unwrap();
            assert_eq!(&messages[..sent.len()], &sent[..]);
            // Every other field as the parent's, in the parent's order.
            let mut same = body.clone();
            same["messages"] = request["messages"].clone();
            assert_eq!(
                serde_json::to_string(&same).unwrap(),
                serde_json::to_string(request).unwrap()
            );
            added.insert(
                style.as_str().into(),
                Value::Array(messages[sent.len()..].to_vec()),
            );
        }
        (verdict, Value::Object(added))
    }

    /// For each label, the first corruption of the corrupter on a task where it applies: the
    /// messages every style appends, byte for byte.
    #[test]
    fn each_label_and_style_gives_the_exact_follow_up() {
        let calendar = task("tasks/basic/basic-calendar-event.json");
        let parallel = task("tasks/parallel/weather-parallel-3.json");
        let nocall = task("tasks/nocall/nocall-small-talk.json");
        for label in Label::ALL {
            let t = match label {
                Label::ParallelCollapse => &parallel,
                Label::SpuriousCall => &nocall,
                _ => &calendar,
            };
            let corruption = crate::corrupt::corruptions(t, label, 1024)
                .unwrap()
                .remove(0);
            let (request, transcript) = sample(t, &corruption.reply, false);
            let (verdict, added) = follow_ups(t, &request, &transcript);
            assert_eq!(verdict.label(), Some(label), "{}", corruption.name);
            let shown = json!({
                "task": t.id,
                "corruption": corruption.name,
                "detail": verdict.detail,
                "added": added,
            });
            insta::assert_snapshot!(
                format!("follow_up_{label}"),
                serde_json::to_string_pretty(&shown).unwrap()
            );
        }
    }

    /// A streamed answer is assembled from its deltas as clients do: the same assistant
    /// message as the JSON body of the same reply (but for the server's ids), and each call
    /// of a parallel turn answered by id, the failing one with the feedback.
    #[test]
    fn a_streamed_parallel_answer_is_assembled_and_every_call_answered() {
        let t = task("tasks/parallel/weather-parallel-3.json");
        let gold = crate::corrupt::gold(&t);
        // The second call breaks its arguments: it is the failing one, not the first.
        let mut reply = gold.clone();
        reply.tool_calls[1].arguments = r#"{"city": "Tokyo""#.into();
        let (request, streamed) = sample(&t, &reply, true);
        let (_, plain) = sample(&t, &reply, false);
        let c_stream = crate::score::parse(&streamed).unwrap();
        let c_plain = crate::score::parse(&plain).unwrap();
        let (m_stream, ids) = assistant_message(&c_stream);
        let (m_plain, _) = assistant_message(&c_plain);
        let strip = |mut m: Value| {
            for c in m["tool_calls"].as_array_mut().unwrap() {
                c["id"] = json!("");
            }
            m
        };
        // The stream's role chunk carries `content: ""`, which clients keep; the body says null.
        assert_eq!(m_stream["content"], json!(""));
        assert_eq!(m_plain["content"], Value::Null);
        let mut m_plain = m_plain;
        m_plain["content"] = json!("");
        assert_eq!(strip(m_stream.clone()), strip(m_plain));
        assert_eq!(ids.len(), 3);
        assert!(
            ids.iter().all(|i| i.starts_with("chatcmpl-tool-")),
            "{ids:?}"
        );
        let (verdict, added) = follow_ups(&t, &request, &streamed);
        assert_eq!(verdict.label(), Some(Label::MalformedJson));
        let error = added["error"].as_array().unwrap();
        assert_eq!(error[0], m_stream);
        let tools: Vec<(&str, &str)> = error[1..]
            .iter()
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap(),
                    m["content"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(tools[0], (ids[0].as_str(), NOT_EXECUTED));
        assert_eq!(tools[1].0, ids[1]);
        assert_eq!(
            tools[1].1,
            format!(
                "{ERROR_HEAD}: the arguments are not a valid JSON object: {}\nCall the tool again with its arguments as one valid JSON object.",
                verdict.detail
            )
        );
        assert_eq!(tools[2], (ids[2].as_str(), NOT_EXECUTED));
        insta::assert_snapshot!(
            "follow_up_streamed_parallel",
            serde_json::to_string_pretty(&added).unwrap()
        );
    }

    /// What servers send besides the API's shape: no ids, an object for arguments, no
    /// arguments at all, text beside the calls, reasoning and the deprecated function_call.
    #[test]
    fn calls_without_ids_or_string_arguments_are_sent_back_as_clients_read_them() {
        let t = task("tasks/parallel/weather-parallel-3.json");
        let request = sample_request(&t, &asking(false), 0);
        let body = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "Let me check.", "reasoning_content": "think",
        "function_call": {"name": "get_weather", "arguments": "{}"},
        "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"id": "", "type": "function", "function": {"name": "get_weather"}},
            {"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\"}"}}
        ]}}]});
        let tr = Transcript {
            request: Some(std::sync::Arc::new(request.clone())),
            body: serde_json::to_vec(&body).unwrap(),
            streamed: false,
            meta: None,
        };
        let c = crate::score::parse(&tr).unwrap();
        let (m, ids) = assistant_message(&c);
        assert_eq!(ids, ["call00000", "call00001", "abc123XYZ"]);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"call00000","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call00001","type":"function","function":{"name":"get_weather","arguments":"{}"}},{"id":"abc123XYZ","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Tokyo\"}"}}]}"#
        );
        // The same bytes every time: the ids are generated from positions only.
        assert_eq!(assistant_message(&c).0, m);
    }

    /// A call left in content stays in content (no client extracted it) and its feedback is
    /// a user message; so is a structured-output answer's.
    #[test]
    fn answers_without_structured_calls_get_a_user_message() {
        let t = task("tasks/basic/basic-weather-city.json");
        let reply = Reply::text(
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        );
        let (request, tr) = sample(&t, &reply, false);
        let (verdict, added) = follow_ups(&t, &request, &tr);
        assert_eq!(verdict.label(), Some(Label::NoCall));
        let retry = added["retry"].as_array().unwrap();
        assert_eq!(
            serde_json::to_string(retry).unwrap(),
            r#"[{"role":"assistant","content":"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},{"role":"user","content":"That did not work; try again."}]"#
        );
        let error = added["error"][1]["content"].as_str().unwrap();
        assert_eq!(
            error,
            format!(
                "Validation error: the call was written as text in your message, so no tool was called: {}\nCall the tool through a tool call, not as text in the message.",
                verdict.detail
            )
        );

        let so = task("tasks/so/so-invoice-extract.json");
        let corruption = crate::corrupt::corruptions(&so, Label::SchemaViolation, 1024)
            .unwrap()
            .remove(0);
        let (request, tr) = sample(&so, &corruption.reply, false);
        let (verdict, added) = follow_ups(&so, &request, &tr);
        assert_eq!(verdict.label(), Some(Label::SchemaViolation));
        insta::assert_snapshot!(
            "follow_up_structured_output",
            serde_json::to_string_pretty(&added).unwrap()
        );
    }

    #[test]
    fn passes_and_transport_errors_get_no_follow_up() {
        let t = task("tasks/basic/basic-weather-city.json");
        let (request, tr) = sample(&t, &crate::corrupt::gold(&t), false);
        let c = crate::score::parse(&tr).unwrap();
        let v = crate::score::score(&t, &tr);
        for style in FeedbackStyle::ALL {
            assert_eq!(
                follow_up(&t, &request, &c, &v, style),
                Err(NoFollowUp::Passed)
            );
        }
        let bad = crate::score::Verdict::new(Outcome::Error, None, "cut".into());
        assert_eq!(
            follow_up(&t, &request, &c, &bad, FeedbackStyle::Retry),
            Err(NoFollowUp::TransportError)
        );
        let fail = crate::score::Verdict::new(Outcome::Fail(Label::NoCall), None, String::new());
        assert_eq!(
            follow_up(&t, &json!([1]), &c, &fail, FeedbackStyle::Retry),
            Err(NoFollowUp::BadRequest)
        );
        // What planning checks is what building refuses.
        assert_eq!(check_request(&json!([1])), Err(NoFollowUp::BadRequest));
        assert_eq!(
            check_request(&json!({"messages": {}})),
            Err(NoFollowUp::BadRequest)
        );
        assert_eq!(check_request(&request), Ok(()));
    }

    /// The mock reads a follow-up's style back from the text this module wrote.
    #[test]
    fn a_follow_up_is_recognised_with_its_style() {
        let t = task("tasks/basic/basic-calendar-event.json");
        let corruption = crate::corrupt::corruptions(&t, Label::TypeCoercion, 1024)
            .unwrap()
            .remove(0);
        let (request, tr) = sample(&t, &corruption.reply, false);
        let c = crate::score::parse(&tr).unwrap();
        let v = crate::score::score(&t, &tr);
        let n = request["messages"].as_array().unwrap().len();
        assert_eq!(read_follow_up(&request), None);
        for style in FeedbackStyle::ALL {
            let body = follow_up(&t, &request, &c, &v, style).unwrap();
            assert_eq!(read_follow_up(&body), Some((n, Some(style))));
        }
    }
}
