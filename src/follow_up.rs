//! The follow-up requests of the feedback and review rounds (SPEC §11): from a first-round
//! sample — the request as sent, the answer as received, its verdict — and a style and
//! history, the body a framework would send next. Pure functions; `collect --feedback` and
//! `collect --review` send what they return.
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
//! Styles: `error` is what a validator in front of the model says, in pydantic's and
//! LangChain's words, from the request and the answer only ([`validator`]); `checklist` is
//! HiTEC-ICL's local checklist, derived from the offered tools' schemas (or the
//! `response_format` schema) and never pointing at the error ([`checklist`]); `retry` is
//! [`RETRY`]. Only a *visible* failure ([`visible`]) gets a follow-up: a router never learns of
//! a silent one. The rules per label are in docs/data.md.
//!
//! History (`--feedback-history`): `as-produced` sends the arguments as the model wrote them;
//! `sanitised` replaces arguments that are not valid JSON with `{}` and quotes the original
//! text at the head of the feedback, which servers that parse the history (vLLM,
//! llama-server) accept.
//!
//! The review round's request ([`review`], SPEC §11) shares the first part: after *every*
//! answered sample, the same assistant message, then the local checklist and "check your call
//! against it and give the final call", as HiTEC-ICL's second round.

mod validator;

use crate::runs::{FeedbackStyle, History};
use crate::score::Verdict;
use crate::score::extract::Source;
use crate::score::wire::{Completion, WireArgs};
use crate::taxonomy::{Label, Outcome};
use serde_json::{Map, Value, json};

pub use validator::ERROR_TAIL;

/// The whole feedback of the `retry` style.
pub const RETRY: &str = "That did not work; try again.";

/// What a call of the same turn that was not the failing one is answered with.
pub const NOT_EXECUTED: &str = "not executed: another call of this turn was rejected";

/// The first line of every `checklist` feedback (the mock recognises the style by it).
pub const CHECKLIST_HEAD: &str =
    "Check your last answer against this checklist, then answer the request again.";

/// What each call of the reviewed answer is answered with: it has not run, it is reviewed
/// first (the API wants every call answered before the next user message).
pub const REVIEW_PENDING: &str = "not executed yet: the call is reviewed first";

/// The first line of every review request's checklist message.
pub const REVIEW_HEAD: &str =
    "Before your answer is used, review it against the checklist of the tools you were offered.";

/// The last line of every review request: HiTEC-ICL's ask for the final call.
pub const REVIEW_TAIL: &str = "Check your call against it and give the final call.";

/// Why no follow-up can be built for a sample.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoFollowUp {
    #[error("the sample passed: there is nothing to feed back")]
    Passed,
    #[error("the sample is a transport error, not the model's failure")]
    TransportError,
    #[error("its request.json is not a JSON object with a `messages` list")]
    BadRequest,
    #[error(
        "the failure is silent (only the task's expected calls reveal it): a router sends nothing"
    )]
    Silent,
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

/// Whether a failure is *visible* (SPEC §11): decided from what a router has — the request's
/// tools, schemas and `tool_choice`, and the response — without the task's expected calls, as
/// the scorer marks it ([`Verdict::visible`]). A pass or a transport error is no failure: false.
pub fn visible(verdict: &Verdict) -> bool {
    matches!(verdict.outcome, Outcome::Fail(_)) && verdict.visible
}

/// The follow-up request body for one visibly failed sample.
///
/// `request` is the parent's `request.json` as sent, `completion` its response as the client
/// read it (`score::parse`), `verdict` its verdict under the current checkers.
pub fn follow_up(
    request: &Value,
    completion: &Completion,
    verdict: &Verdict,
    style: FeedbackStyle,
    history: History,
) -> Result<Value, NoFollowUp> {
    let label = match verdict.outcome {
        Outcome::Pass => return Err(NoFollowUp::Passed),
        Outcome::Error => return Err(NoFollowUp::TransportError),
        Outcome::Fail(l) => l,
    };
    let (mut body, mut messages) = parent_messages(request)?;
    if !visible(verdict) {
        return Err(NoFollowUp::Silent);
    }
    let (assistant, ids, quoted) = assistant_message(completion, history);
    messages.push(assistant);
    let text = format!(
        "{quoted}{}",
        feedback_text(request, completion, verdict, label, style)
    );
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

/// The review request of HiTEC-ICL's second round (SPEC §11, `collect --review checklist`) for
/// one first-round sample that got an answer, passing or not: the parent's request, the
/// assistant message as produced (or sanitised), each of its calls answered
/// [`REVIEW_PENDING`] (none has run), then one `user` message: the local checklist of the
/// offered tools, pointing at nothing, and [`REVIEW_TAIL`]. The reply is the final answer.
pub fn review(
    request: &Value,
    completion: &Completion,
    history: History,
) -> Result<Value, NoFollowUp> {
    let (mut body, mut messages) = parent_messages(request)?;
    let (assistant, ids, quoted) = assistant_message(completion, history);
    messages.push(assistant);
    for id in &ids {
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": REVIEW_PENDING}));
    }
    let checks = checklist_body(request);
    messages.push(json!({
        "role": "user",
        "content": format!("{quoted}{REVIEW_HEAD}{checks}\n{REVIEW_TAIL}"),
    }));
    body.insert("messages".into(), Value::Array(messages));
    Ok(Value::Object(body))
}

/// The parent's body and its messages.
fn parent_messages(request: &Value) -> Result<(Map<String, Value>, Vec<Value>), NoFollowUp> {
    let body = request.as_object().cloned().ok_or(NoFollowUp::BadRequest)?;
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .ok_or(NoFollowUp::BadRequest)?;
    Ok((body, messages))
}

/// The id a call without one is given: deterministic, 9 alphanumeric characters.
pub fn generated_id(position: usize) -> String {
    format!("call{position:05}")
}

/// The assistant message as a client library would send it back, its call ids in order, and,
/// for a `sanitised` history, the text that quotes what was replaced (empty when nothing was),
/// to go before the feedback.
pub fn assistant_message(c: &Completion, history: History) -> (Value, Vec<String>, String) {
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    let mut ids = Vec::new();
    let mut quoted = String::new();
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
            let name = call.name.clone().unwrap_or_default();
            let mut arguments = match &call.arguments {
                WireArgs::Text(s) => s.clone(),
                WireArgs::Json(v) => serde_json::to_string(v).unwrap_or_default(),
                WireArgs::Absent => "{}".into(),
            };
            if history == History::Sanitised
                && serde_json::from_str::<Value>(&arguments).is_err()
            {
                quoted.push_str(&format!(
                    "The arguments of your call {id} ({name}) were not valid JSON; they are shown as {{}} above. You wrote:\n{arguments}\n\n"
                ));
                arguments = "{}".into();
            }
            json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
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
    (Value::Object(m), ids, quoted)
}

/// The position in `tool_calls` of the call the verdict blames, when it blames a structured
/// call.
fn failing_position(v: &Verdict) -> Option<usize> {
    let call = v.calls.get(v.fail_call?)?;
    (call.source == Source::ToolCalls).then_some(call.index)
}

/// The feedback of one style for one failure. None carries what only the task's expected
/// calls know.
pub fn feedback_text(
    request: &Value,
    completion: &Completion,
    verdict: &Verdict,
    label: Label,
    style: FeedbackStyle,
) -> String {
    match style {
        FeedbackStyle::Retry => RETRY.to_string(),
        FeedbackStyle::Checklist => checklist(request),
        FeedbackStyle::Error => validator::message(request, completion, verdict, label),
    }
}

/// HiTEC-ICL's local checklist of what the request offered, derived from the schemas of its
/// `tools` (or of its `response_format` for a structured-output request): per tool its
/// required arguments and each argument's type, allowed values, format, pattern and range;
/// then the checks every call must pass. It never says which check failed.
pub fn checklist(request: &Value) -> String {
    format!("{CHECKLIST_HEAD}{}", checklist_body(request))
}

/// The checklist without its first line: the offered tools described, then the checks.
fn checklist_body(request: &Value) -> String {
    let mut out = String::new();
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
    // A sanitised history's quote of the replaced arguments may come first.
    if text.ends_with(RETRY) {
        Some(FeedbackStyle::Retry)
    } else if text.starts_with(CHECKLIST_HEAD) || text.contains(&format!("\n{CHECKLIST_HEAD}")) {
        Some(FeedbackStyle::Checklist)
    } else if text.ends_with(ERROR_TAIL) {
        Some(FeedbackStyle::Error)
    } else {
        None
    }
}

/// True when `request` is a review request this module wrote: its last message is a `user`
/// message ending with [`REVIEW_TAIL`] (the mock answers it in character).
pub fn is_review(request: &Value) -> bool {
    request
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .is_some_and(|t| t.ends_with(REVIEW_TAIL))
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
    use crate::task::Task;
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
        follow_ups_with(task, request, t, History::AsProduced)
    }

    fn follow_ups_with(
        task: &Task,
        request: &Value,
        t: &Transcript,
        history: History,
    ) -> (Verdict, Value) {
        let completion = crate::score::parse(t).unwrap();
        let verdict = crate::score::score(task, t);
        let mut added = Map::new();
        for style in FeedbackStyle::ALL {
            let body = follow_up(request, &completion, &verdict, style, history).unwrap();
            same_but_messages(request, &body);
            let sent = request["messages"].as_array().unwrap();
            let messages = body["messages"].as_array().unwrap();
            added.insert(
                style.as_str().into(),
                Value::Array(messages[sent.len()..].to_vec()),
            );
        }
        (verdict, Value::Object(added))
    }

    /// The body is the parent's request with only its messages extended: every other field
    /// as the parent's, in the parent's order.
    fn same_but_messages(request: &Value, body: &Value) {
        let sent = request["messages"].as_array().unwrap();
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(&messages[..sent.len()], &sent[..]);
        let mut same = body.clone();
        same["messages"] = request["messages"].clone();
        assert_eq!(
            serde_json::to_string(&same).unwrap(),
            serde_json::to_string(request).unwrap()
        );
    }

    /// A task whose `tool_choice` is set to `choice` (so that a `no_call` or `spurious_call`
    /// is visible to a router).
    fn with_choice(mut t: Task, choice: Value) -> Task {
        t.tool_choice = Some(choice);
        t
    }

    /// For each label, the first corruption of the corrupter on a task where it applies: the
    /// messages every style appends, byte for byte; where the failure is silent (only the
    /// answer key shows it), that no style sends anything.
    #[test]
    fn each_label_and_style_gives_the_exact_follow_up() {
        let calendar = task("tasks/basic/basic-calendar-event.json");
        let parallel = task("tasks/parallel/weather-parallel-3.json");
        let nocall = task("tasks/nocall/nocall-small-talk.json");
        let required = with_choice(calendar.clone(), json!("required"));
        let none = with_choice(nocall.clone(), json!("none"));
        for label in Label::ALL {
            let t = match label {
                Label::ParallelCollapse => &parallel,
                Label::SpuriousCall => &none,
                Label::NoCall => &required,
                _ => &calendar,
            };
            let corruption = crate::corrupt::corruptions(t, label, 1024)
                .unwrap()
                .remove(0);
            let (request, transcript) = sample(t, &corruption.reply, false);
            let verdict = crate::score::score(t, &transcript);
            assert_eq!(verdict.label(), Some(label), "{}", corruption.name);
            let added = if visible(&verdict) {
                follow_ups(t, &request, &transcript).1
            } else {
                let c = crate::score::parse(&transcript).unwrap();
                for style in FeedbackStyle::ALL {
                    assert_eq!(
                        follow_up(&request, &c, &verdict, style, History::AsProduced),
                        Err(NoFollowUp::Silent),
                        "{label}"
                    );
                }
                json!("silent: no follow-up")
            };
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
        let (m_stream, ids, _) = assistant_message(&c_stream, History::AsProduced);
        let (m_plain, _, _) = assistant_message(&c_plain, History::AsProduced);
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
            "1 validation error for get_weather\n  Invalid JSON: EOF while parsing an object at line 1 column 16 [type=json_invalid, input_value='{\"city\": \"Tokyo\"', input_type=str]\nFix the errors and try again."
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
        let (m, ids, quoted) = assistant_message(&c, History::AsProduced);
        assert_eq!(quoted, "");
        assert_eq!(ids, ["call00000", "call00001", "abc123XYZ"]);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"call00000","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call00001","type":"function","function":{"name":"get_weather","arguments":"{}"}},{"id":"abc123XYZ","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Tokyo\"}"}}]}"#
        );
        // The same bytes every time: the ids are generated from positions only.
        assert_eq!(assistant_message(&c, History::AsProduced).0, m);
    }

    /// A call left in content stays in content (no client extracted it) and its feedback is
    /// a user message; so is a structured-output answer's. (A `no_call` is visible only when
    /// `tool_choice` demands a call.)
    #[test]
    fn answers_without_structured_calls_get_a_user_message() {
        let t = with_choice(
            task("tasks/basic/basic-weather-city.json"),
            json!("required"),
        );
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
            "Plain text responses are not permitted, please include your response in a tool call.\nFix the errors and try again."
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
        let h = History::AsProduced;
        for style in FeedbackStyle::ALL {
            assert_eq!(
                follow_up(&request, &c, &v, style, h),
                Err(NoFollowUp::Passed)
            );
        }
        let bad = crate::score::Verdict::new(Outcome::Error, None, "cut".into());
        assert_eq!(
            follow_up(&request, &c, &bad, FeedbackStyle::Retry, h),
            Err(NoFollowUp::TransportError)
        );
        let fail =
            crate::score::Verdict::new(Outcome::Fail(Label::MalformedJson), None, String::new());
        assert_eq!(
            follow_up(&json!([1]), &c, &fail, FeedbackStyle::Retry, h),
            Err(NoFollowUp::BadRequest)
        );
        assert_eq!(review(&json!([1]), &c, h), Err(NoFollowUp::BadRequest));
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
            for history in History::ALL {
                let body = follow_up(&request, &c, &v, style, history).unwrap();
                assert_eq!(read_follow_up(&body), Some((n, Some(style))));
            }
        }
    }

    /// `sanitised` replaces arguments that are not JSON with `{}` and quotes them at the head
    /// of the feedback, in every style; arguments that are JSON go back as produced.
    #[test]
    fn a_sanitised_history_replaces_broken_arguments_and_quotes_them() {
        let t = task("tasks/parallel/weather-parallel-3.json");
        let mut reply = crate::corrupt::gold(&t);
        reply.tool_calls[1].arguments = r#"{"city": "Tokyo""#.into();
        let (request, tr) = sample(&t, &reply, false);
        let (verdict, added) = follow_ups_with(&t, &request, &tr, History::Sanitised);
        assert_eq!(verdict.label(), Some(Label::MalformedJson));
        let (_, produced) = follow_ups(&t, &request, &tr);
        for style in FeedbackStyle::ALL {
            let m = &added[style.as_str()];
            let calls = m[0]["tool_calls"].as_array().unwrap();
            assert_eq!(calls[1]["function"]["arguments"], json!("{}"));
            assert_eq!(
                calls[0]["function"]["arguments"],
                produced[style.as_str()][0]["tool_calls"][0]["function"]["arguments"]
            );
            let id = calls[1]["id"].as_str().unwrap();
            let feedback = m[2]["content"].as_str().unwrap();
            let quote = format!(
                "The arguments of your call {id} (get_weather) were not valid JSON; they are shown as {{}} above. You wrote:\n{{\"city\": \"Tokyo\"\n\n"
            );
            assert!(feedback.starts_with(&quote), "{feedback}");
            assert_eq!(
                &feedback[quote.len()..],
                produced[style.as_str()][2]["content"].as_str().unwrap()
            );
            assert_eq!(style_of(feedback), Some(style));
        }
        insta::assert_snapshot!(
            "follow_up_sanitised",
            serde_json::to_string_pretty(&added["retry"]).unwrap()
        );
    }

    /// The review request (HiTEC-ICL's second round) for each label's first corruption and for
    /// a passing answer, byte for byte: the assistant message, each call answered as pending,
    /// the checklist pointing at nothing and the ask for the final call; a sanitised history
    /// for a broken one.
    #[test]
    fn each_label_and_a_pass_give_the_exact_review_request() {
        let calendar = task("tasks/basic/basic-calendar-event.json");
        let parallel = task("tasks/parallel/weather-parallel-3.json");
        let nocall = task("tasks/nocall/nocall-small-talk.json");
        let mut cases: Vec<(String, &Task, Reply)> =
            vec![("pass".into(), &calendar, crate::corrupt::gold(&calendar))];
        for label in Label::ALL {
            let t = match label {
                Label::ParallelCollapse => &parallel,
                Label::SpuriousCall => &nocall,
                _ => &calendar,
            };
            let c = crate::corrupt::corruptions(t, label, 1024)
                .unwrap()
                .remove(0);
            cases.push((label.as_str().into(), t, c.reply));
        }
        for (name, t, reply) in cases {
            let (request, tr) = sample(t, &reply, false);
            let c = crate::score::parse(&tr).unwrap();
            let verdict = crate::score::score(t, &tr);
            let want = if name == "pass" {
                None
            } else {
                Label::parse(&name)
            };
            assert_eq!(verdict.label(), want, "{name}");
            let mut added = Map::new();
            for history in History::ALL {
                let body = review(&request, &c, history).unwrap();
                same_but_messages(&request, &body);
                let n = request["messages"].as_array().unwrap().len();
                let messages = body["messages"].as_array().unwrap();
                let last = messages.last().unwrap();
                assert_eq!(last["role"], "user");
                let text = last["content"].as_str().unwrap();
                assert!(text.ends_with(REVIEW_TAIL), "{text}");
                assert!(is_review(&body));
                assert_eq!(read_follow_up(&body).map(|r| r.0), Some(n));
                added.insert(
                    history.as_str().into(),
                    Value::Array(messages[n..].to_vec()),
                );
            }
            let added = if added["as-produced"] == added["sanitised"] {
                json!({"either history": added["as-produced"]})
            } else {
                Value::Object(added)
            };
            insta::assert_snapshot!(
                format!("review_{name}"),
                serde_json::to_string_pretty(&json!({"task": t.id, "added": added})).unwrap()
            );
        }
    }

    /// SPEC §11's marking: which failures a router can see from the request and the answer.
    #[test]
    fn a_failure_is_visible_only_when_the_request_and_the_answer_show_it() {
        let calendar = task("tasks/basic/basic-calendar-event.json");
        let parallel = task("tasks/parallel/weather-parallel-3.json");
        let nocall = task("tasks/nocall/nocall-small-talk.json");
        let seen = |t: &Task, reply: &Reply| {
            let (_, tr) = sample(t, reply, false);
            visible(&crate::score::score(t, &tr))
        };
        for label in [
            Label::MalformedJson,
            Label::EscapingError,
            Label::Truncation,
            Label::SchemaViolation,
            Label::MissingRequired,
            Label::HallucinatedParam,
            Label::TypeCoercion,
        ] {
            for c in crate::corrupt::corruptions(&calendar, label, 1024).unwrap() {
                assert!(seen(&calendar, &c.reply), "{}", c.name);
            }
        }
        let prose = Reply::text("I cannot help with that.");
        assert!(!seen(&calendar, &prose), "no_call under auto");
        for choice in [
            json!("required"),
            json!({"type": "function", "function": {"name": "create_event"}}),
        ] {
            assert!(seen(&with_choice(calendar.clone(), choice), &prose));
        }
        for c in crate::corrupt::corruptions(&parallel, Label::ParallelCollapse, 1024).unwrap() {
            assert!(!seen(&parallel, &c.reply), "{}", c.name);
        }
        for c in crate::corrupt::corruptions(&nocall, Label::SpuriousCall, 1024).unwrap() {
            assert!(!seen(&nocall, &c.reply), "{} under auto", c.name);
            let none = with_choice(nocall.clone(), json!("none"));
            assert!(seen(&none, &c.reply), "{} under none", c.name);
        }
        for c in crate::corrupt::corruptions(&calendar, Label::WrongTool, 1024).unwrap() {
            let (request, _) = sample(&calendar, &c.reply, false);
            let offered = validator::offered_names(&request);
            let unoffered = c
                .reply
                .tool_calls
                .iter()
                .any(|x| !offered.contains(&x.name));
            assert_eq!(seen(&calendar, &c.reply), unoffered, "{}", c.name);
        }
    }
}
