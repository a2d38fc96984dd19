//! What the mock answers, decided purely from (seed, model, task, sample index, attempt) and
//! the request: no clock, no arrival order, so a collection under any concurrency gets the same
//! bytes and a test can recompute them.

use crate::corrupt::{corruptions, gold};
use crate::mock::config::{MockConfig, MockModel};
use crate::mock::stream_bugs;
use crate::reply::{Reply, render_json, render_sse_events};
use crate::task::Task;
use crate::taxonomy::Label;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::PathBuf;

/// Which sample of which cell a request is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SampleKey {
    pub model: String,
    pub task: String,
    /// Index of the sample within its cell (over all run directories).
    pub sample: u64,
    /// 0 for the first attempt.
    pub attempt: u32,
}

/// The answer, before it meets the socket.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// An HTTP error status with an error body.
    Status { status: u16, body: Vec<u8> },
    /// Close the connection before any byte of the response.
    Drop,
    /// HTTP 200: these pieces written one by one; when `cut` is set, the connection is closed
    /// after that many pieces (the rest are never sent).
    Body {
        content_type: &'static str,
        pieces: Vec<Vec<u8>>,
        cut: Option<usize>,
        /// What the answer is, for the log: `gold`, a corruption's name, `garbage`, a fixture.
        what: String,
    },
}

/// How long to wait before the head, and what to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub delay_ms: u64,
    pub answer: Answer,
    pub event_delay_ms: u64,
}

/// A seed from the mock's seed and the identity of what is being decided.
pub fn derive_seed(seed: u64, parts: &[&str]) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_be_bytes());
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b)
}

/// An OpenAI-style error body.
pub fn error_body(message: &str, kind: &str, code: u16) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    )
    .unwrap_or_default()
}

/// Recognises a task from a request's content: the messages (with or without a leading system
/// message that the model row added), tools, tool_choice and response_format, exactly as
/// `request::chat_request` copies them from the task.
#[derive(Debug, Default)]
pub struct TaskIndex {
    /// Content key → tasks with that content (several when copies differ only in id).
    by_content: HashMap<String, Vec<usize>>,
    by_id: HashMap<String, usize>,
}

fn content_key(
    messages: &[Value],
    tools: Option<&Value>,
    tc: Option<&Value>,
    rf: Option<&Value>,
) -> String {
    serde_json::to_string(&json!([messages, tools, tc, rf])).unwrap_or_default()
}

impl TaskIndex {
    pub fn new(tasks: &[Task]) -> TaskIndex {
        let mut ix = TaskIndex::default();
        for (i, t) in tasks.iter().enumerate() {
            let tools = (!t.tools_json.is_empty()).then(|| Value::Array(t.tools_json.clone()));
            // A task's own `request` fields may override tool_choice / response_format.
            let tc = t.request.get("tool_choice").or(t.tool_choice.as_ref());
            let rf = t
                .request
                .get("response_format")
                .or(t.response_format.as_ref());
            ix.by_content
                .entry(content_key(&t.messages, tools.as_ref(), tc, rf))
                .or_default()
                .push(i);
            ix.by_id.insert(t.id.clone(), i);
        }
        ix
    }

    /// The task a request is for: by content first, then by the id a sample header names.
    pub fn find(&self, request: &Value, header_task: Option<&str>) -> Option<usize> {
        let by_header = header_task.and_then(|t| self.by_id.get(t).copied());
        let messages = request.get("messages").and_then(Value::as_array);
        if let Some(m) = messages {
            let tools = request.get("tools");
            let tc = request.get("tool_choice");
            let rf = request.get("response_format");
            let mut keys = vec![content_key(m, tools, tc, rf)];
            if m.first()
                .and_then(|x| x.get("role"))
                .and_then(Value::as_str)
                == Some("system")
            {
                keys.push(content_key(&m[1..], tools, tc, rf));
            }
            for k in keys {
                if let Some(found) = self.by_content.get(&k) {
                    // Copies of a task that differ only in id: the header says which.
                    return Some(match by_header {
                        Some(h) if found.contains(&h) => h,
                        _ => found[0],
                    });
                }
            }
        }
        by_header
    }
}

/// Splits an SSE fixture into its events (each keeps its blank-line terminator).
fn split_events(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'\n' && bytes[i + 1] == b'\n' {
            out.push(bytes[start..i + 2].to_vec());
            start = i + 2;
            i += 2;
        } else {
            i += 1;
        }
    }
    if start < bytes.len() {
        out.push(bytes[start..].to_vec());
    }
    out
}

/// The fixture files of one task for a replay model, in name order.
pub fn fixtures(dir: &std::path::Path, task_id: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join(task_id))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json" || x == "sse"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The reply the injector gives for one sample, and its name (`gold` or a corruption's).
pub fn injected_reply(
    config: &MockConfig,
    model: &MockModel,
    task: &Task,
    sample: u64,
    max_tokens: u64,
) -> (Reply, String) {
    let s = sample.to_string();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(derive_seed(
        config.seed,
        &["reply", &model.name, &task.id, &s],
    ));
    let u: f64 = rng.random();
    let mut acc = 0.0;
    for label in Label::ALL {
        let p = model.labels.get(label.as_str()).copied().unwrap_or(0.0);
        if p <= 0.0 {
            continue;
        }
        acc += p;
        if u < acc {
            if let Ok(list) = corruptions(task, label, max_tokens)
                && !list.is_empty()
            {
                let c = &list[rng.random_range(0..list.len())];
                return (c.reply.clone(), c.name.clone());
            }
            break;
        }
    }
    (gold(task), "gold".into())
}

/// What a model that never sees the tools answers (`ignore_tools`).
const PROSE_WITHOUT_TOOLS: &str =
    "I can't look that up myself, but here is what I know about it in general.";

/// The kind of a request's `tool_choice` (`auto`, `required`, `none`, `named`; `None` when it
/// is absent), or the message a server gives a value it cannot read.
pub fn tool_choice_kind(request: &Value) -> Result<Option<&'static str>, String> {
    match request.get("tool_choice") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => Ok(Some("auto")),
            "required" => Ok(Some("required")),
            "none" => Ok(Some("none")),
            other => Err(format!("Invalid tool_choice: {other}")),
        },
        Some(v)
            if v.pointer("/function/name")
                .and_then(Value::as_str)
                .is_some() =>
        {
            Ok(Some("named"))
        }
        Some(v) => Err(format!(
            "Invalid tool_choice: {}",
            crate::json::preview(v, 100)
        )),
    }
}

/// The HTTP 400 body for a request whose `tool_choice` this model's server refuses
/// (`refuse_tool_choice`) or cannot read, in vLLM's words where vLLM has some.
pub fn refusal(model: &MockModel, request: &Value) -> Option<Vec<u8>> {
    let message = match tool_choice_kind(request) {
        Err(e) => e,
        Ok(Some(kind)) if model.refuse_tool_choice.iter().any(|k| k == kind) => match kind {
            "auto" => "\"auto\" tool choice requires --enable-auto-tool-choice and \
                       --tool-call-parser to be set"
                .to_string(),
            k => format!("mock: tool_choice {k:?} is not supported by this server"),
        },
        Ok(_) => return None,
    };
    Some(error_body(&message, "BadRequestError", 400))
}

/// vLLM's refusal of a history whose assistant tool call carries arguments that are not JSON
/// (its chat path runs an unguarded `json.loads` on each; HTTP 400 with its error body, see
/// shared WIRE.md): the body, or `None` when every such argument string parses.
pub fn history_refusal(request: &Value) -> Option<Vec<u8>> {
    let messages = request.get("messages")?.as_array()?;
    let broken = messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.pointer("/function/arguments").and_then(Value::as_str))
        .find_map(|a| serde_json::from_str::<Value>(a).err())?;
    // Python's json.loads words its errors as "Expecting ',' delimiter: line 1 column 17
    // (char 16)"; serde_json's line and column say the same place.
    let message = format!(
        "1 validation error for ChatCompletionRequest: the arguments of an assistant tool call are not valid JSON: {}: line {} column {}",
        python_json_error(&broken),
        broken.line(),
        broken.column()
    );
    serde_json::to_vec(&json!({
        "object": "error",
        "message": message,
        "type": "BadRequestError",
        "param": null,
        "code": 400
    }))
    .ok()
}

/// The kind of a JSON error in the words of Python's `json` module.
fn python_json_error(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Eof => "Unterminated string or object",
        _ => "Expecting value",
    }
}

/// The answer to a preflight probe (`collect::preflight`): a model that honours its tools
/// calls the offered (or named) tool unless `tool_choice` is `none`, and counts the tools in
/// `prompt_tokens`; with `ignore_tools` it neither sees nor calls them. Probes are never
/// faulted: they test the server's setup, not its luck. Returns the content type and the
/// pieces to write (SSE events, or one JSON body).
pub fn probe_answer(
    config: &MockConfig,
    model: &MockModel,
    request: &Value,
    check: &str,
) -> (&'static str, Vec<Vec<u8>>) {
    let tools = request
        .get("tools")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty() && !model.ignore_tools);
    let first_tool = tools
        .and_then(|t| t.first())
        .and_then(|t| t.pointer("/function/name"))
        .and_then(Value::as_str);
    let named = request
        .pointer("/tool_choice/function/name")
        .and_then(Value::as_str);
    let calls = match (first_tool, tool_choice_kind(request)) {
        (None, _) | (_, Ok(Some("none"))) => None,
        (Some(first), _) => Some(named.unwrap_or(first)),
    };
    let reply = match calls {
        Some(name) => Reply::calls(vec![crate::reply::ReplyCall {
            name: name.to_string(),
            arguments: r#"{"city": "Paris"}"#.to_string(),
        }]),
        None if tools.is_none() && request.get("tools").is_some() => {
            Reply::text(PROSE_WITHOUT_TOOLS)
        }
        None => Reply::text("The weather in Paris is mild today."),
    };
    let mut prompt =
        serde_json::to_string(request.get("messages").unwrap_or(&Value::Null)).unwrap_or_default();
    if let Some(t) = tools {
        prompt.push_str(&serde_json::to_string(t).unwrap_or_default());
    }
    let prompt_tokens = crate::reply::estimate_tokens(&prompt);
    let seed = derive_seed(config.seed, &["probe", &model.name, check]);
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        let usage = request
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true);
        (
            "text/event-stream; charset=utf-8",
            render_sse_events(&reply, &model.name, prompt_tokens, usage, seed)
                .into_iter()
                .map(String::into_bytes)
                .collect(),
        )
    } else {
        (
            "application/json",
            vec![render_json(&reply, &model.name, prompt_tokens, seed)],
        )
    }
}

fn request_max_tokens(request: &Value) -> u64 {
    request
        .get("max_completion_tokens")
        .and_then(Value::as_u64)
        .or_else(|| request.get("max_tokens").and_then(Value::as_u64))
        .unwrap_or(4096)
}

/// Decides the answer for one request to a known model and task: a fault drawn from the
/// model's fault rates, else its body (replayed or generated), cut short when the fault
/// drawn is a cut.
pub fn plan(
    config: &MockConfig,
    model: &MockModel,
    task: &Task,
    key: &SampleKey,
    request: &Value,
) -> Plan {
    let s = key.sample.to_string();
    let a = key.attempt.to_string();
    let mut frng = Xoshiro256PlusPlus::seed_from_u64(derive_seed(
        config.seed,
        &["fault", &model.name, &task.id, &s, &a],
    ));
    let f = &model.faults;
    let delay_ms = if f.latency > 0.0 && frng.random::<f64>() < f.latency {
        frng.random_range(f.latency_ms[0]..=f.latency_ms[1])
    } else {
        0
    };
    let fault = drawn_fault(f, &mut frng);
    let answer = |answer| Plan {
        delay_ms,
        answer,
        event_delay_ms: model.event_delay_ms,
    };
    if let Some(instead) = fault_answer(fault, &mut frng) {
        return answer(instead);
    }
    let body = match &model.replay {
        Some(dir) => match replayed(dir, &task.id, key.sample) {
            Ok(body) => body,
            Err(unreadable) => return answer(unreadable),
        },
        None => generated(config, model, task, key, request),
    };
    if fault == "cut" {
        answer(body.cut_short(&mut frng))
    } else {
        answer(Answer::Body {
            content_type: body.content_type,
            pieces: body.pieces,
            cut: None,
            what: body.what,
        })
    }
}

/// Which fault the model's rates draw for one request (`""`: none): one uniform draw against
/// the rates stacked in this order.
fn drawn_fault(f: &super::config::Faults, frng: &mut Xoshiro256PlusPlus) -> &'static str {
    let u: f64 = frng.random();
    let mut acc = 0.0;
    for (name, p) in [
        ("429", f.http_429),
        ("500", f.http_500),
        ("503", f.http_503),
        ("drop", f.drop),
        ("cut", f.cut),
        ("garbage", f.garbage),
    ] {
        acc += p;
        if p > 0.0 && u < acc {
            return name;
        }
    }
    ""
}

/// What a fault sends in place of the model's answer; `None` for no fault and for a cut,
/// which cuts the answer itself.
fn fault_answer(fault: &str, frng: &mut Xoshiro256PlusPlus) -> Option<Answer> {
    let status = |status, message: &str, kind: &str| Answer::Status {
        status,
        body: error_body(message, kind, status),
    };
    Some(match fault {
        "429" => status(429, "mock: rate limited, try again", "RateLimitError"),
        "500" => status(500, "mock: internal server error", "InternalServerError"),
        "503" => status(503, "mock: service unavailable", "ServiceUnavailableError"),
        "drop" => Answer::Drop,
        "garbage" => {
            let n = frng.random_range(16..256usize);
            let bytes: Vec<u8> = (0..n).map(|_| frng.random::<u8>()).collect();
            Answer::Body {
                content_type: "application/json",
                pieces: vec![bytes],
                cut: None,
                what: "garbage".into(),
            }
        }
        _ => return None,
    })
}

/// A model's answer as it goes on the wire, before any cut.
struct Rendered {
    content_type: &'static str,
    /// Written one by one: one JSON body, or SSE events.
    pieces: Vec<Vec<u8>>,
    /// What the answer is, for the log.
    what: String,
}

impl Rendered {
    /// The answer cut short: a stream closed before its finish chunk (keeping the role chunk
    /// and some of the payload), a single JSON body after some of its bytes.
    fn cut_short(self, frng: &mut Xoshiro256PlusPlus) -> Answer {
        let Rendered {
            content_type,
            pieces,
            what,
        } = self;
        if pieces.len() >= 3 {
            let finish = pieces
                .iter()
                .position(|p| {
                    p.windows(16).any(|w| w == b"\"finish_reason\":")
                        && !p.windows(21).any(|w| w == b"\"finish_reason\":null")
                })
                .unwrap_or(pieces.len() - 1);
            let cut = frng.random_range(1..=finish.max(1));
            return Answer::Body {
                content_type,
                pieces,
                cut: Some(cut),
                what: format!("{what} (cut)"),
            };
        }
        let body = pieces.concat();
        let n = frng.random_range(1..body.len().max(2));
        Answer::Body {
            content_type,
            pieces: vec![
                body[..n.min(body.len())].to_vec(),
                body[n.min(body.len())..].to_vec(),
            ],
            cut: Some(1),
            what: format!("{what} (cut)"),
        }
    }
}

/// A replaying model's answer: the task's fixture picked by sample, or the error status a
/// missing or unreadable fixture gets.
fn replayed(dir: &std::path::Path, task_id: &str, sample: u64) -> Result<Rendered, Answer> {
    let files = fixtures(dir, task_id);
    if files.is_empty() {
        return Err(Answer::Status {
            status: 404,
            body: error_body(
                &format!(
                    "mock: no fixtures for task {} under {}",
                    task_id,
                    dir.display()
                ),
                "NotFoundError",
                404,
            ),
        });
    }
    let file = &files[(sample % files.len() as u64) as usize];
    // Bounded, a regular file only (SPEC §12); one that cannot be read is a 500 saying
    // why, not an empty answer passed off as the fixture.
    let bytes = crate::fsafe::read_bounded(file, super::config::MAX_FIXTURE_FILE).map_err(|e| {
        Answer::Status {
            status: 500,
            body: error_body(
                &format!("mock: cannot read fixture {}: {e}", file.display()),
                "InternalServerError",
                500,
            ),
        }
    })?;
    let what = format!("fixture {}", file.display());
    Ok(if file.extension().is_some_and(|x| x == "sse") {
        Rendered {
            content_type: "text/event-stream; charset=utf-8",
            pieces: split_events(&bytes),
            what,
        }
    } else {
        Rendered {
            content_type: "application/json",
            pieces: vec![bytes],
            what,
        }
    })
}

/// A scripted model's answer: the gold reply with what its rates inject (prose when it
/// ignores the tools offered), rendered as a JSON body or, for a streamed request, as SSE
/// events carrying the model's stream bugs.
fn generated(
    config: &MockConfig,
    model: &MockModel,
    task: &Task,
    key: &SampleKey,
    request: &Value,
) -> Rendered {
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let offered_tools = request
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let (reply, what) = if model.ignore_tools && offered_tools {
        (
            Reply::text(PROSE_WITHOUT_TOOLS),
            "tools ignored".to_string(),
        )
    } else {
        injected_reply(config, model, task, key.sample, request_max_tokens(request))
    };
    let s = key.sample.to_string();
    let render_seed = derive_seed(config.seed, &["render", &model.name, &task.id, &s]);
    let prompt_tokens = crate::reply::estimate_tokens(
        &serde_json::to_string(request.get("messages").unwrap_or(&Value::Null)).unwrap_or_default(),
    );
    let (reply, what) = if stream && model.stream_drops_parallel && reply.tool_calls.len() > 1 {
        let mut r = reply;
        r.tool_calls.truncate(1);
        (
            r,
            format!("{what}; the stream dropped every call after the first"),
        )
    } else {
        (reply, what)
    };
    if !stream {
        return Rendered {
            content_type: "application/json",
            pieces: vec![render_json(&reply, &key.model, prompt_tokens, render_seed)],
            what,
        };
    }
    let usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    let (reply, mut done) = stream_bugs::reply_as_streamed(&model.stream_bugs, reply);
    let events = render_sse_events(&reply, &key.model, prompt_tokens, usage, render_seed);
    let (events, more) = stream_bugs::events_as_streamed(&model.stream_bugs, &reply, events);
    done.extend(more);
    let what = std::iter::once(what.as_str())
        .chain(done)
        .collect::<Vec<_>>()
        .join("; ");
    Rendered {
        content_type: "text/event-stream; charset=utf-8",
        pieces: events.into_iter().map(String::into_bytes).collect(),
        what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_fixtures_split_into_events() {
        let ev = split_events(b"data: {}\n\ndata: [DONE]\n\n");
        assert_eq!(
            ev,
            vec![b"data: {}\n\n".to_vec(), b"data: [DONE]\n\n".to_vec()]
        );
        assert_eq!(split_events(b"data: x"), vec![b"data: x".to_vec()]);
    }

    #[test]
    fn tool_choice_is_refused_as_configured_or_when_unreadable() {
        let req = |tc: Value| json!({"model": "m", "messages": [], "tool_choice": tc});
        assert_eq!(tool_choice_kind(&json!({})), Ok(None));
        assert_eq!(
            tool_choice_kind(&req(json!("required"))),
            Ok(Some("required"))
        );
        let named = req(json!({"type": "function", "function": {"name": "f"}}));
        assert_eq!(tool_choice_kind(&named), Ok(Some("named")));
        let model = MockModel {
            name: "m".into(),
            refuse_tool_choice: vec!["auto".into(), "named".into()],
            ..MockModel::default()
        };
        let body = |b: Option<Vec<u8>>| b.map(|b| String::from_utf8(b).unwrap());
        assert!(
            body(refusal(&model, &req(json!("auto"))))
                .unwrap()
                .contains("--enable-auto-tool-choice")
        );
        assert!(
            body(refusal(&model, &named))
                .unwrap()
                .contains("\\\"named\\\"")
        );
        assert_eq!(refusal(&model, &req(json!("required"))), None);
        assert!(
            body(refusal(&MockModel::default(), &req(json!("sometimes"))))
                .unwrap()
                .contains("Invalid tool_choice: sometimes")
        );
    }

    #[test]
    fn seeds_separate_their_parts() {
        assert_ne!(derive_seed(1, &["ab", "c"]), derive_seed(1, &["a", "bc"]));
        assert_eq!(derive_seed(1, &["a"]), derive_seed(1, &["a"]));
        assert_ne!(derive_seed(1, &["a"]), derive_seed(2, &["a"]));
    }
}
