//! Reading a chat-completions response the way an OpenAI client library would: a JSON body, or
//! an SSE stream whose `tool_calls` deltas are reassembled by `index` with string fields
//! concatenated (so a server that repeats the name in every delta yields a doubled name, which
//! is what its clients see). Anything that is not a complete model response is a
//! [`TransportFailure`].

use super::chunk::{ArgsView, CallView, ChoiceView, ChunkView, error_message, usage};
use serde_json::Value;
use std::collections::BTreeMap;

/// The arguments of a call as they arrived.
#[derive(Debug, Clone, PartialEq)]
pub enum WireArgs {
    /// No `arguments` field at all (some servers drop the `{}` of a no-argument call).
    Absent,
    /// The normal case: a string, to be parsed as JSON.
    Text(String),
    /// A protocol deviation: a JSON value (usually an object) instead of a string.
    Json(Value),
}

/// A structured call from `message.tool_calls` or reassembled from stream deltas.
#[derive(Debug, Clone, PartialEq)]
pub struct WireCall {
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: WireArgs,
}

/// What the server said, reduced to what scoring needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    pub content: Option<String>,
    pub tool_calls: Vec<WireCall>,
    /// The deprecated `message.function_call`, which clients using `tools` do not read.
    pub function_call: Option<WireCall>,
    pub finish_reason: Option<String>,
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens`: what the request cost to read (a follow-up carries the whole
    /// conversation again).
    pub prompt_tokens: Option<u64>,
    /// Observations about protocol deviations that decide nothing by themselves.
    pub notes: Vec<String>,
    /// The protocol deviations absorbed in reading the calls (a `tool_calls` object for a
    /// list, a missing `arguments` key or `index`, a null name…): SPEC §2.1 has every verdict's
    /// detail name them, never absorb them silently.
    pub deviations: Vec<String>,
    /// How many tool calls the answer held, when that was more than the [`MAX_CALLS`] read.
    pub calls_cut: Option<usize>,
}

/// No complete model response: the server's or the network's fault, never the model's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportFailure(pub String);

/// One SSE event: where it starts in the body and its `data` payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub offset: usize,
    pub data: String,
}

/// Splits an SSE body into events following the WHATWG event-stream rules: lines end in LF,
/// CRLF or CR; `data:` lines of one event are joined with LF; a blank line dispatches; comments
/// and other fields are skipped; an event not terminated by a blank line before the end of the
/// stream is discarded, as a browser or client library would (the connection was cut inside it).
///
/// Written by hand rather than with an SSE crate because the transcript page needs each event's
/// byte offset and the scorer needs the discard-at-EOF rule to be explicit.
pub fn sse_events(body: &[u8]) -> (Vec<SseEvent>, Option<SseEvent>) {
    // Lines are split on the raw bytes (the separators are ASCII) and each line is decoded on
    // its own, so offsets stay byte offsets into the body even when it holds invalid UTF-8.
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    let mut start = 0usize;
    let mut pos = 0usize;
    // A body that is valid UTF-8 as a whole (nearly every one) is validated once; its lines,
    // cut at ASCII separators, are then slices of it.
    let text = std::str::from_utf8(body).ok();
    while pos < body.len() {
        let line_start = pos;
        pos = memchr::memchr2(b'\n', b'\r', &body[pos..]).map_or(body.len(), |i| pos + i);
        let line: std::borrow::Cow<'_, str> = match text.and_then(|t| t.get(line_start..pos)) {
            Some(t) => t.into(),
            None => String::from_utf8_lossy(&body[line_start..pos]),
        };
        match body.get(pos) {
            Some(b'\r') if body.get(pos + 1) == Some(&b'\n') => pos += 2,
            Some(_) => pos += 1,
            None => {}
        }
        if line.is_empty() {
            if let Some(d) = data.take() {
                events.push(SseEvent {
                    offset: start,
                    data: d,
                });
            }
            start = pos;
            continue;
        }
        if data.is_none() {
            start = line_start;
        }
        let Some(field) = line.strip_prefix("data") else {
            continue;
        };
        let value = match field.strip_prefix(':') {
            Some(v) => v.strip_prefix(' ').unwrap_or(v),
            None if field.is_empty() => "",
            None => continue, // a field named e.g. "database": not data
        };
        match &mut data {
            Some(d) => {
                d.push('\n');
                d.push_str(value);
            }
            None => data = Some(value.to_string()),
        }
    }
    // Whatever is still pending was never dispatched by a blank line.
    let partial = data.map(|d| SseEvent {
        offset: start,
        data: d,
    });
    (events, partial)
}

fn wire_call(
    v: &Value,
    notes: &mut Vec<String>,
    deviations: &mut Vec<String>,
    i: usize,
) -> WireCall {
    let func = v.get("function").unwrap_or(&Value::Null);
    let name = func.get("name").and_then(Value::as_str).map(str::to_string);
    if func.get("name").is_some_and(Value::is_null) {
        deviations.push(format!("call {}: function.name is null", i + 1));
    }
    let arguments = match func.get("arguments") {
        None => {
            deviations.push(format!("call {}: no arguments key (taken as {{}})", i + 1));
            WireArgs::Absent
        }
        Some(Value::Null) => {
            deviations.push(format!("call {}: arguments is null (taken as {{}})", i + 1));
            WireArgs::Absent
        }
        Some(Value::String(s)) => {
            if s.is_empty() {
                deviations.push(format!(
                    "call {}: arguments is an empty string (taken as {{}})",
                    i + 1
                ));
            }
            WireArgs::Text(s.clone())
        }
        Some(other) => {
            let what = format!(
                "call {}: arguments sent as a JSON {} instead of a string (protocol deviation)",
                i + 1,
                crate::json::type_name(other)
            );
            deviations.push(what.clone());
            notes.push(what);
            WireArgs::Json(other.clone())
        }
    };
    WireCall {
        id: v.get("id").and_then(Value::as_str).map(str::to_string),
        name,
        arguments,
    }
}

const CALLS_OBJECT: &str = "tool_calls is a JSON object, not a list: read as the one call it holds";

/// The `tool_calls` value of a message or a delta as a list: a JSON object (TGI has streamed
/// one) is read as the one call it holds, and the deviation recorded.
fn tool_call_list<'a>(v: Option<&'a Value>, deviations: &mut Vec<String>) -> &'a [Value] {
    match v {
        Some(Value::Array(items)) => items,
        Some(one @ Value::Object(_)) => {
            if !deviations.iter().any(|d| d == CALLS_OBJECT) {
                deviations.push(CALLS_OBJECT.to_string());
            }
            std::slice::from_ref(one)
        }
        _ => &[],
    }
}

/// The most tool calls taken from one answer: the rest are counted, said in the verdict's
/// detail, and neither scored nor shown. A model that answers one question with 300,000 calls
/// has failed it whatever they hold, and reading each into memory and onto a page cost 730 MB
/// and a 275 MB page (SPEC §12, turn 5). BFCL's largest parallel questions ask for a handful.
pub const MAX_CALLS: usize = 256;

/// Bodies at least this large are read without a tree of every element of their arrays
/// ([`bounded_value`]); smaller ones (nearly all) the plain way.
const BOUNDED_FROM: usize = 1 << 20;

/// What [`bounded_value`] left out: each array it cut, by its path, with its length.
type Cuts = Vec<(String, usize)>;

/// The JSON text `raw` as a value whose arrays hold at most [`MAX_CALLS`] elements each: the
/// elements past that are checked as JSON and counted, never built. A body's size no longer
/// decides how much memory its tree takes (a 24 MB answer of 300,000 calls was 730 MB).
fn bounded_value(
    raw: &serde_json::value::RawValue,
    path: &str,
    cuts: &mut Cuts,
) -> serde_json::Result<Value> {
    use serde::de::{Deserializer as _, IgnoredAny, SeqAccess, Visitor};
    use serde_json::value::RawValue;
    let text = raw.get();
    match text.trim_start().as_bytes().first() {
        Some(b'{') => {
            let fields: BTreeMap<String, &RawValue> = serde_json::from_str(text)?;
            let mut m = serde_json::Map::new();
            for (k, v) in fields {
                let at = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                m.insert(k, bounded_value(v, &at, cuts)?);
            }
            Ok(Value::Object(m))
        }
        Some(b'[') => {
            struct Head<'a>(std::marker::PhantomData<&'a ()>);
            impl<'de> Visitor<'de> for Head<'de> {
                type Value = (Vec<&'de RawValue>, usize);
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a JSON array")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                    let mut kept = Vec::new();
                    let mut n = 0;
                    while kept.len() < MAX_CALLS {
                        match seq.next_element::<&'de RawValue>()? {
                            Some(v) => kept.push(v),
                            None => return Ok((kept, n)),
                        }
                        n += 1;
                    }
                    while seq.next_element::<IgnoredAny>()?.is_some() {
                        n += 1;
                    }
                    Ok((kept, n))
                }
            }
            let mut de = serde_json::Deserializer::from_str(text);
            let (kept, n) = de.deserialize_seq(Head(std::marker::PhantomData))?;
            de.end()?;
            if n > kept.len() {
                cuts.push((path.to_string(), n));
            }
            let items = kept
                .iter()
                .enumerate()
                .map(|(i, v)| bounded_value(v, &format!("{path}[{i}]"), cuts))
                .collect::<serde_json::Result<Vec<Value>>>()?;
            Ok(Value::Array(items))
        }
        _ => serde_json::from_str(text),
    }
}

/// Reads a non-streamed chat-completions body.
pub fn parse_body(body: &[u8]) -> Result<Completion, TransportFailure> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(TransportFailure("empty response body".into()));
    }
    let not_json = |e: serde_json::Error| {
        TransportFailure(format!("the body is not a JSON chat completion: {e}"))
    };
    let mut cuts = Cuts::new();
    let v: Value = if body.len() < BOUNDED_FROM {
        serde_json::from_slice(body).map_err(not_json)?
    } else {
        let raw: &serde_json::value::RawValue = serde_json::from_slice(body).map_err(not_json)?;
        bounded_value(raw, "", &mut cuts).map_err(not_json)?
    };
    if let Some(msg) = error_message(&v) {
        return Err(TransportFailure(format!(
            "the server answered with an error object: {}",
            crate::json::clip(&msg, 300)
        )));
    }
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| {
            TransportFailure("the body has no choices[0]: not a chat completion".into())
        })?;
    let message = choice.get("message").unwrap_or(&Value::Null);
    let mut c = Completion {
        content: message
            .get("content")
            .and_then(Value::as_str)
            .map(str::to_string),
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        completion_tokens: usage(&v, "completion_tokens"),
        prompt_tokens: usage(&v, "prompt_tokens"),
        ..Completion::default()
    };
    let mut notes = Vec::new();
    let mut deviations = Vec::new();
    let calls = tool_call_list(message.get("tool_calls"), &mut deviations);
    // How many calls the answer holds: what a bounded reading counted, or the list's length.
    let held = cuts
        .iter()
        .find(|(path, _)| path == "choices[0].message.tool_calls")
        .map_or(calls.len(), |(_, n)| *n);
    c.tool_calls = calls
        .iter()
        .take(MAX_CALLS)
        .enumerate()
        .map(|(i, x)| wire_call(x, &mut notes, &mut deviations, i))
        .collect();
    if held > MAX_CALLS {
        deviations.push(calls_cut(held));
        c.calls_cut = Some(held);
    }
    for (path, n) in cuts
        .iter()
        .filter(|(p, _)| p != "choices[0].message.tool_calls")
    {
        notes.push(format!(
            "{path} holds {n} items: the first {MAX_CALLS} were read, the rest only counted"
        ));
    }
    c.notes.append(&mut notes);
    c.deviations = deviations;
    if let Some(fc) = message.get("function_call").filter(|f| !f.is_null()) {
        let wrapped = serde_json::json!({"function": fc});
        // The deprecated field is scored only when nothing else is there, and then as a
        // call the client would not execute: its own deviations are beside the point.
        c.function_call = Some(wire_call(&wrapped, &mut c.notes, &mut Vec::new(), 0));
    }
    Ok(c)
}

/// The deviation that says an answer held more calls than are read.
fn calls_cut(held: usize) -> String {
    format!(
        "the answer holds {held} tool calls: the first {MAX_CALLS} were read and scored, the other {} only counted",
        held - MAX_CALLS
    )
}

/// A call being reassembled from stream deltas.
#[derive(Default)]
struct Partial {
    id: Option<String>,
    name: Option<String>,
    args_text: Option<String>,
    args_json: Option<Value>,
    name_deltas: usize,
    /// A delta for this call came without `index` (placed by its position in the delta).
    unindexed: bool,
    /// A delta set `name` to null.
    null_name: bool,
}

fn append(slot: &mut Option<String>, piece: &str) {
    slot.get_or_insert_with(String::new).push_str(piece);
}

/// Reads an SSE stream of chat-completion chunks.
pub fn parse_stream(body: &[u8]) -> Result<Completion, TransportFailure> {
    read_stream(body, Read::Fast)
}

/// How a stream's chunks are read: the fast way where it can ([`ChunkView::fast`]), or every
/// chunk the reference way (for the tests that hold the two to the same answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Fast,
    #[cfg_attr(not(test), allow(dead_code))]
    Reference,
}

fn read_stream(body: &[u8], read: Read) -> Result<Completion, TransportFailure> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(TransportFailure(
            "empty response body (the stream sent nothing)".into(),
        ));
    }
    let (events, partial) = sse_events(body);
    if events.is_empty() {
        return Err(TransportFailure(
            "the stream holds no complete SSE event".into(),
        ));
    }
    let mut stream = Assembly::default();
    for (n, ev) in events.iter().enumerate() {
        let data = ev.data.trim();
        if data == "[DONE]" {
            stream.done = true;
            continue;
        }
        if data.is_empty() {
            continue;
        }
        // The fast reading where it can, the reference where it cannot ([`super::chunk`]).
        let parsed: Value;
        let chunk = match ChunkView::fast(data).filter(|_| read == Read::Fast) {
            Some(chunk) => chunk,
            None => {
                parsed = serde_json::from_str(data).map_err(|e| {
                    TransportFailure(format!(
                        "SSE event {} (byte {}) is not JSON: {e}",
                        n + 1,
                        ev.offset
                    ))
                })?;
                ChunkView::of_value(&parsed)
            }
        };
        stream.take(chunk, ev.offset)?;
    }
    stream.finish(partial.map(|p| p.offset))
}

/// A stream being read: what its chunks have said so far, the calls still in pieces.
#[derive(Default)]
struct Assembly {
    /// Content, finish reason, usage, notes and deviations as far as read.
    said: Completion,
    calls: BTreeMap<u64, Partial>,
    /// Indices of the calls past [`MAX_CALLS`]: counted, their deltas not kept.
    beyond: std::collections::BTreeSet<u64>,
    /// `[DONE]` arrived.
    done: bool,
    /// Some chunk carried the first choice.
    saw_choice: bool,
}

impl Assembly {
    /// One chunk's usage and first choice; an error event ends the stream's reading.
    fn take(&mut self, chunk: ChunkView<'_>, offset: usize) -> Result<(), TransportFailure> {
        if let Some(msg) = chunk.error {
            return Err(TransportFailure(format!(
                "the stream carried an error event at byte {offset}: {}",
                crate::json::clip(&msg, 300)
            )));
        }
        if let Some(t) = chunk.completion_tokens {
            self.said.completion_tokens = Some(t);
        }
        if let Some(t) = chunk.prompt_tokens {
            self.said.prompt_tokens = Some(t);
        }
        for choice in chunk.choices.into_iter().filter(|c| c.first) {
            self.take_choice(choice);
        }
        Ok(())
    }

    fn take_choice(&mut self, choice: ChoiceView<'_>) {
        self.saw_choice = true;
        if let Some(fr) = choice.finish_reason {
            self.said.finish_reason = Some(fr.into_owned());
        }
        if let Some(s) = &choice.content {
            append(&mut self.said.content, s);
        }
        let deviations = &mut self.said.deviations;
        if choice.calls_object && !deviations.iter().any(|d| d == CALLS_OBJECT) {
            deviations.push(CALLS_OBJECT.to_string());
        }
        for (pos, tc) in choice.calls.into_iter().enumerate() {
            self.take_call_delta(pos, tc);
        }
    }

    /// One delta of a call, at position `pos` in its chunk (where a delta without `index`
    /// places it).
    fn take_call_delta(&mut self, pos: usize, tc: CallView<'_>) {
        let idx = tc.index.unwrap_or(pos as u64);
        // Past MAX_CALLS calls, the deltas of further ones are counted, not kept.
        if self.calls.len() >= MAX_CALLS && !self.calls.contains_key(&idx) {
            self.beyond.insert(idx);
            return;
        }
        let p = self.calls.entry(idx).or_default();
        p.unindexed |= tc.index.is_none();
        if let Some(id) = &tc.id {
            append(&mut p.id, id);
        }
        p.null_name |= tc.name_null;
        if let Some(name) = &tc.name {
            if !name.is_empty() {
                p.name_deltas += 1;
            }
            append(&mut p.name, name);
        }
        match tc.arguments {
            ArgsView::Text(s) => append(&mut p.args_text, &s),
            ArgsView::Missing => {}
            ArgsView::Json(other) => p.args_json = Some(other),
        }
    }

    /// The completion the whole stream said, or why it said none: cut before its end
    /// (`cut_off_at`, the offset of an event cut off, says where), or no choice at all.
    fn finish(self, cut_off_at: Option<usize>) -> Result<Completion, TransportFailure> {
        let Assembly {
            said: mut c,
            calls,
            beyond,
            done,
            saw_choice,
        } = self;
        if !done && c.finish_reason.is_none() {
            let cut = match cut_off_at {
                Some(at) => format!(" (an event starting at byte {at} was cut off)"),
                None => String::new(),
            };
            return Err(TransportFailure(format!(
                "the stream ended with neither a finish_reason nor [DONE]: the connection was cut{cut}"
            )));
        }
        // Like a body whose `choices` is empty: the stream ended properly but no model output
        // ever arrived (only usage chunks, or a bare [DONE]).
        if !saw_choice {
            return Err(TransportFailure(
                "the stream carried no choice at all (only usage chunks or [DONE]): no model output"
                    .into(),
            ));
        }
        c.tool_calls = calls
            .into_values()
            .enumerate()
            .map(|(i, p)| p.joined(i, &mut c.notes, &mut c.deviations))
            .collect();
        c.calls_cut = (!beyond.is_empty()).then(|| MAX_CALLS + beyond.len());
        if let Some(held) = c.calls_cut {
            c.deviations.push(calls_cut(held));
        }
        if !done {
            c.notes
                .push("the stream ended without [DONE] after its finish_reason".into());
        }
        Ok(c)
    }
}

impl Partial {
    /// The call its deltas make, the `i`th of the answer; what the deltas did out of the
    /// protocol's way is said in `notes` and `deviations`.
    fn joined(self, i: usize, notes: &mut Vec<String>, deviations: &mut Vec<String>) -> WireCall {
        let p = self;
        if p.name_deltas > 1 {
            notes.push(format!(
                "call {}: the name was sent in {} deltas, so clients concatenate it",
                i + 1,
                p.name_deltas
            ));
        }
        if p.unindexed {
            deviations.push(format!(
                "call {}: tool_calls deltas without index (placed by their position in the delta)",
                i + 1
            ));
        }
        if p.null_name && p.name.as_deref().is_none_or(str::is_empty) {
            deviations.push(format!("call {}: function.name is null", i + 1));
        }
        let arguments = match (p.args_text, p.args_json) {
            (Some(t), None) if !t.is_empty() => WireArgs::Text(t),
            (None, Some(j)) => {
                let what = format!(
                    "call {}: arguments sent as a JSON value instead of a string (protocol deviation)",
                    i + 1
                );
                deviations.push(what.clone());
                notes.push(what);
                WireArgs::Json(j)
            }
            (Some(t), Some(j)) => {
                let what = format!(
                    "call {}: arguments sent partly as a JSON value; kept as text",
                    i + 1
                );
                deviations.push(what.clone());
                notes.push(what);
                WireArgs::Text(format!("{t}{j}"))
            }
            (None, None) => {
                deviations.push(format!(
                    "call {}: no arguments were streamed (taken as {{}})",
                    i + 1
                ));
                WireArgs::Absent
            }
            (Some(t), None) => {
                deviations.push(format!(
                    "call {}: the streamed arguments are an empty string (taken as {{}})",
                    i + 1
                ));
                WireArgs::Text(t)
            }
        };
        WireCall {
            id: p.id,
            name: p.name,
            arguments,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More calls than are read from one answer: the first MAX_CALLS are kept, the others
    /// counted and said, in a small body, a large one (read without building every element)
    /// and a stream alike.
    #[test]
    fn an_answer_is_read_up_to_max_calls_and_says_how_many_it_held() {
        let call = r#"{"type":"function","function":{"name":"f","arguments":"{}"}}"#;
        let body = |n: usize, pad: usize| {
            let calls = vec![call; n].join(",");
            format!(
                r#"{{"choices":[{{"index":0,"message":{{"content":null,"tool_calls":[{calls}]}},"finish_reason":"tool_calls"}}],"logprobs":[{}],"pad":"{}"}}"#,
                vec!["1"; 300].join(","),
                "x".repeat(pad)
            )
        };
        let said = |n: usize| {
            format!(
                "the answer holds {n} tool calls: the first {MAX_CALLS} were read and scored, the other {} only counted",
                n - MAX_CALLS
            )
        };
        for (n, pad) in [(300, 0), (300, 2 << 20), (MAX_CALLS, 2 << 20)] {
            let c = parse_body(body(n, pad).as_bytes()).unwrap();
            assert_eq!(c.tool_calls.len(), n.min(MAX_CALLS), "{n} {pad}");
            assert_eq!(c.tool_calls[0].name.as_deref(), Some("f"));
            assert_eq!(c.calls_cut, (n > MAX_CALLS).then_some(n));
            assert_eq!(
                c.deviations.contains(&said(n)),
                n > MAX_CALLS,
                "{:?}",
                c.deviations
            );
            // Another array cut when the body is read bounded: a note, not a deviation.
            let logprobs = c
                .notes
                .iter()
                .any(|n| n.starts_with("logprobs holds 300 items"));
            assert_eq!(logprobs, pad > 0, "{:?}", c.notes);
        }
        let mut sse = String::new();
        for i in 0..300 {
            sse.push_str(&format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{i},\"function\":{{\"name\":\"f\",\"arguments\":\"{{}}\"}}}}]}}}}]}}\n\n"
            ));
        }
        sse.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n");
        let c = parse_stream(sse.as_bytes()).unwrap();
        assert_eq!(c.tool_calls.len(), MAX_CALLS);
        assert_eq!(c.calls_cut, Some(300));
        assert!(c.deviations.contains(&said(300)), "{:?}", c.deviations);
    }

    #[test]
    fn every_fixture_stream_reads_the_same_fast_and_the_reference_way() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut streams = 0;
        for e in walkdir::WalkDir::new(&root).sort_by_file_name() {
            let e = e.unwrap();
            if e.path().extension().is_some_and(|x| x == "sse") {
                let body = std::fs::read(e.path()).unwrap();
                assert_eq!(
                    read_stream(&body, Read::Fast),
                    read_stream(&body, Read::Reference),
                    "{}",
                    e.path().display()
                );
                streams += 1;
            }
        }
        assert!(streams > 100, "only {streams} streams");
    }

    #[test]
    fn sse_events_split_on_blank_lines_and_discard_a_cut_event() {
        let body = b"data: {\"a\":1}\n\n: comment\n\ndata: x\r\ndata: y\r\n\r\ndata: [DONE]\n\ndata: {\"cut";
        let (ev, partial) = sse_events(body);
        let data: Vec<_> = ev.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["{\"a\":1}", "x\ny", "[DONE]"]);
        assert_eq!(ev[1].offset, 26);
        assert_eq!(partial.map(|p| p.data), Some("{\"cut".to_string()));
    }

    #[test]
    fn offsets_are_byte_offsets_even_after_invalid_utf8() {
        // Two invalid bytes in a comment would become two 3-byte U+FFFD in a lossy copy.
        let mut body = b": \xff\xfe\n\n".to_vec();
        let at = body.len();
        body.extend_from_slice(b"data: {\"error\": {\"message\": \"boom\"}}\n\n");
        let (ev, _) = sse_events(&body);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].offset, at);
        let e = parse_stream(&body).unwrap_err();
        assert!(e.0.contains(&format!("at byte {at}")), "{}", e.0);
    }

    #[test]
    fn a_stream_without_any_choice_is_a_transport_failure() {
        let body = "data: {\"choices\":[],\"usage\":{\"completion_tokens\":0}}\n\ndata: [DONE]\n\n";
        let e = parse_stream(body.as_bytes()).unwrap_err();
        assert!(e.0.contains("no choice"), "{}", e.0);
        assert!(parse_stream(b"data: [DONE]\n\n").is_err());
    }

    #[test]
    fn stream_reassembles_calls_by_index() {
        let body = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"b\",\"function\":{\"name\":\"t2\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"t1\",\"arguments\":\"{\\\"x\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}},{\"index\":1,\"function\":{\"arguments\":null}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"completion_tokens\":12}}\n\n",
            "data: [DONE]\n\n"
        );
        let c = parse_stream(body.as_bytes()).unwrap();
        assert_eq!(c.tool_calls.len(), 2);
        assert_eq!(c.tool_calls[0].name.as_deref(), Some("t1"));
        assert_eq!(
            c.tool_calls[0].arguments,
            WireArgs::Text("{\"x\":1}".into())
        );
        assert_eq!(c.tool_calls[1].arguments, WireArgs::Text(String::new()));
        assert_eq!(c.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(c.completion_tokens, Some(12));
    }

    #[test]
    fn a_cut_stream_is_a_transport_failure() {
        let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"choices\":[{\"ind";
        let e = parse_stream(body.as_bytes()).unwrap_err();
        assert!(e.0.contains("connection was cut"), "{}", e.0);
    }
}
