//! Stage 1, extract: finding the calls a model made. Structured calls come from the wire; when
//! there are none, calls the server's tool parser failed to extract are looked for in `content`
//! (SPEC §2.1 and WIRE.md): hermes `<tool_call>` blocks, a bare JSON call object or list,
//! mistral `[TOOL_CALLS]`, llama `<|python_tag|>`, and a pythonic `[fn(a=1)]` list. Prose that
//! merely mentions a tool's name is not a call, and neither is example code: a fenced block
//! inside a longer answer is an example whatever it holds; only a fence that is the whole
//! content is looked into. Nor is a tool's definition quoted back (turn 5): an echo of the
//! `tools` entry, or of its function object with `parameters` that are a JSON Schema.

use super::wire::WireArgs;
use serde::Serialize;
use serde_json::{Map, Value};

/// Where a call was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `message.tool_calls` (or reassembled stream deltas): what a client executes.
    ToolCalls,
    /// `<tool_call>{…}</tool_call>` in content (Hermes, Qwen).
    Hermes,
    /// `[TOOL_CALLS][…]` in content (Mistral).
    Mistral,
    /// A bare JSON call object or list in content (Llama 3 JSON, fine-tunes).
    Json,
    /// `[fn(a=1)]` in content (Llama 3.2/4 pythonic).
    Pythonic,
    /// `<tool_call><function=NAME><parameter=KEY>…</parameter></function></tool_call>` in
    /// content (Qwen3-Coder and its kin).
    QwenXml,
    /// `<|python_tag|>` followed by a JSON or pythonic call in content (Llama 3.1).
    PythonTag,
    /// Only the deprecated `message.function_call`, which clients using `tools` do not read.
    FunctionCall,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::ToolCalls => "tool_calls",
            Source::Hermes => "hermes <tool_call> block in content",
            Source::Mistral => "mistral [TOOL_CALLS] in content",
            Source::Json => "bare JSON in content",
            Source::Pythonic => "pythonic call list in content",
            Source::QwenXml => {
                "Qwen3-Coder XML <tool_call><function=…><parameter=…> block in content"
            }
            Source::PythonTag => "llama <|python_tag|> call in content",
            Source::FunctionCall => "deprecated message.function_call, not tool_calls",
        }
    }
}

/// A call found in content.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCall {
    pub source: Source,
    pub name: Option<String>,
    pub args: WireArgs,
    /// When the call's envelope itself did not parse: why, and the text to attempt repairs on.
    pub broken: Option<Broken>,
    /// The text of the call as found in content.
    pub raw: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Broken {
    pub error: String,
    /// JSON text that repairs may be tried on (absent for pythonic calls).
    pub json_text: Option<String>,
}

/// Strips one markdown code fence, returning the inside; `None` when the text has no fence.
pub fn strip_fence(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
    let lang = &after[..body_start];
    if lang.trim().contains(char::is_whitespace) {
        return None;
    }
    let body = &after[body_start..];
    let close = body.find("```").unwrap_or(body.len());
    Some(&body[..close])
}

/// The fenced blocks of `text`: (start of the opening fence, start of the body, end of the
/// body, end of the closing fence). An opening fence starts a line, as in Markdown (three
/// backticks mid-sentence are prose naming them); its closing fence may end a line of code. An
/// opening fence never closed runs to the end (an answer cut inside its example).
fn fences(text: &str) -> Vec<(usize, usize, usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(open) = text[pos..].find("```").map(|i| i + pos) {
        let line_start = text[..open].rfind('\n').map(|i| i + 1).unwrap_or(0);
        if !text[line_start..open].trim().is_empty() {
            pos = open + 3;
            continue;
        }
        let after = open + 3;
        let body_start = text[after..]
            .find('\n')
            .map(|i| after + i + 1)
            .unwrap_or(text.len());
        match text[body_start..].find("```").map(|i| i + body_start) {
            Some(close) => {
                out.push((open, body_start, close, close + 3));
                pos = close + 3;
            }
            None => {
                out.push((open, body_start, text.len(), text.len()));
                break;
            }
        }
    }
    out
}

/// Where calls are looked for in `content` (SPEC §2.1, extract): the body of the one fence
/// that is the whole content (nothing but whitespace around it), or else the content with every
/// fenced block blanked out, because code fenced inside a longer answer is an example, whatever
/// it holds.
pub fn outside_examples(content: &str) -> std::borrow::Cow<'_, str> {
    let trimmed = content.trim();
    let found = fences(trimmed);
    match found.as_slice() {
        [] => std::borrow::Cow::Borrowed(content),
        [(0, body_start, body_end, end)] if *end == trimmed.len() => {
            std::borrow::Cow::Borrowed(&trimmed[*body_start..*body_end])
        }
        _ => {
            let mut out = String::with_capacity(trimmed.len());
            let mut at = 0;
            for (start, _, _, end) in &found {
                out.push_str(&trimmed[at..*start]);
                // A line break keeps the prose on either side apart.
                out.push('\n');
                at = *end;
            }
            out.push_str(&trimmed[at..]);
            std::borrow::Cow::Owned(out)
        }
    }
}

/// Name and arguments of a call-shaped JSON object: `{"name", "arguments"|"parameters"}`, or
/// the same wrapped as `{"type": "function", "function": {…}}`.
fn call_from_object(v: &Value) -> Option<(Option<String>, WireArgs)> {
    let obj = v.as_object()?;
    if let Some(f) = obj.get("function").filter(|f| f.is_object()) {
        return call_from_object(f);
    }
    if !obj.contains_key("name") {
        return None;
    }
    let name = obj.get("name").and_then(Value::as_str).map(str::to_string);
    let args = match obj.get("arguments").or_else(|| obj.get("parameters")) {
        None | Some(Value::Null) => WireArgs::Absent,
        Some(Value::String(s)) => WireArgs::Text(s.clone()),
        Some(other) => WireArgs::Json(other.clone()),
    };
    Some((name, args))
}

/// A bare JSON object is a call only when it names an offered tool (SPEC §2.1): `{"name":
/// "Ada", "arguments": …}` in an answer about a data format is not one; nor is a tool's
/// definition quoted back, which names an offered tool by construction.
fn is_call_shaped(v: &Value, tools: &[&str]) -> bool {
    let Some(obj) = v.as_object() else {
        return false;
    };
    if is_definition(v) {
        return false;
    }
    if let Some(f) = obj.get("function").filter(|f| f.is_object()) {
        return is_call_shaped(f, tools);
    }
    obj.get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| tools.contains(&n))
}

/// A tool's definition quoted back (SPEC §2.1, turn 5): the whole `{"type": "function",
/// "function": {…}}` entry of the request's `tools`, or the function object alone — a name, a
/// `description`, and `parameters` that are a JSON Schema rather than argument values. Small
/// models echo the definitions their chat template put in the prompt (SmolLM2-135M wrote
/// `schedule_transfer`'s entry back, byte for byte), and on a task that asks *about* a tool that
/// echo is the answer, not a call. An object with `arguments` is always a call attempt, and so
/// is `{"name": "get_weather", "parameters": {"city": "Paris"}}` (Llama 3's JSON form): its
/// `parameters` are values, not a schema.
pub fn is_definition(v: &Value) -> bool {
    // The entry holds the function object; one level down, no further.
    let entry = v.get("function").filter(|f| f.is_object());
    let Some(obj) = entry.unwrap_or(v).as_object() else {
        return false;
    };
    if obj.contains_key("arguments") {
        return false;
    }
    match obj.get("parameters") {
        Some(p) => is_object_schema(p),
        // A name and a description with nothing to pass: a parameterless tool's definition.
        None => obj.contains_key("name") && obj.get("description").is_some_and(Value::is_string),
    }
}

/// JSON Schema keywords an object schema of `parameters` carries; an object with any other key
/// is argument values, whatever its `type` says.
const SCHEMA_KEYWORDS: [&str; 22] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "description",
    "title",
    "$schema",
    "$id",
    "$ref",
    "$defs",
    "definitions",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "unevaluatedProperties",
    "strict",
];

/// `parameters` that are a JSON Schema: `type: "object"`, `properties` (when present) an object
/// of schemas, and no key that is not a schema keyword. A parameterless tool's `{"type":
/// "object"}` is one too; arguments that happen to hold a `type` key are not.
fn is_object_schema(p: &Value) -> bool {
    let Some(o) = p.as_object() else {
        return false;
    };
    o.get("type").and_then(Value::as_str) == Some("object")
        && o.get("properties").is_none_or(|props| {
            props
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_object))
        })
        && o.get("required").is_none_or(Value::is_array)
        && o.keys().all(|k| SCHEMA_KEYWORDS.contains(&k.as_str()))
}

/// How far [`first_level_keys`] reads: a definition's `name`, `description` and the start of
/// its `parameters` come first, and a bounded look keeps a scan of many candidates linear.
const KEYS_SCAN: usize = 4096;

/// The first-level keys of the JSON object `text` begins with (within its first [`KEYS_SCAN`]
/// bytes), each with the byte offset where its value starts; read leniently, so that an object
/// cut off mid-way (an answer stopped at `max_tokens`) still shows the keys written before the
/// cut.
fn first_level_keys(text: &str) -> Vec<(&str, usize)> {
    let b = &text.as_bytes()[..text.len().min(KEYS_SCAN)];
    let mut keys = Vec::new();
    if b.first() != Some(&b'{') {
        return keys;
    }
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                let end = i.min(b.len());
                i += 1;
                if depth == 1 {
                    let rest = text.get(i.min(text.len())..).unwrap_or("");
                    let after = rest.trim_start();
                    if let Some(value) = after.strip_prefix(':') {
                        let at = text.len() - value.trim_start().len();
                        if let Some(key) = text.get(start..end) {
                            keys.push((key, at));
                        }
                    }
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
        i += 1;
    }
    keys
}

/// A definition's beginning in text that does not parse (cut at the budget): read as far as it
/// goes, the object (or the entry's `function` object) has a `description` or schema-shaped
/// `parameters`, and no `arguments`.
fn begins_like_definition(text: &str) -> bool {
    let mut keys = first_level_keys(text);
    let mut text = text;
    // The entry's function object, one level down and no further: a hostile answer nesting
    // `{"function": {"function": …` a million deep costs one more scan, not a million frames.
    if let Some(&(_, at)) = keys.iter().find(|(k, _)| *k == "function")
        && text[at..].starts_with('{')
    {
        text = &text[at..];
        keys = first_level_keys(text);
    }
    if keys.iter().any(|(k, _)| *k == "arguments") {
        return false;
    }
    keys.iter().any(|(k, _)| *k == "description")
        || keys.iter().any(|&(k, at)| {
            k == "parameters"
                && first_level_keys(&text[at..]).iter().any(|&(pk, pat)| {
                    pk == "properties"
                        || (pk == "type" && text[at..][pat..].starts_with("\"object\""))
                })
        })
}

/// The tools whose definitions `content` quotes back (SPEC §2.1: a mention, not a call), in
/// the order they appear, each once: for the detail of an answer that called nothing, so a
/// reader sees why an echoed `{"name": …}` was not taken for a call.
pub fn quoted_definitions(content: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    // Nothing can be a definition without one of these words: most answers cost one search.
    if !(content.contains("\"parameters\"") || content.contains("\"description\"")) {
        return names;
    }
    let mut from = 0;
    while let Some(i) = content[from..].find('{').map(|i| i + from) {
        let tail = &content[i..];
        let head = tail[1..].trim_start();
        if !(head.starts_with("\"name\"") || head.starts_with("\"type\"")) {
            from = i + 1;
            continue;
        }
        let (name, next) = match first_json_value(tail) {
            Ok((v, used)) if is_definition(&v) => {
                let f = v.get("function").filter(|f| f.is_object()).unwrap_or(&v);
                (
                    f.get("name").and_then(Value::as_str).map(str::to_string),
                    i + used,
                )
            }
            // Past the whole value: re-reading each object nested in it would be quadratic,
            // and this only feeds a detail.
            Ok((_, used)) => (None, i + used.max(1)),
            Err(_) if begins_like_definition(tail) => (guess_name(tail), content.len()),
            Err(e) => (None, i + error_offset(tail, &e).max(1)),
        };
        if let Some(n) = name.filter(|n| !names.contains(n)) {
            names.push(n);
        }
        from = next;
    }
    names
}

/// Parses the first JSON value at the start of `text`, returning it and the bytes it used.
pub fn first_json_value(text: &str) -> Result<(Value, usize), serde_json::Error> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match stream.next() {
        Some(Ok(v)) => Ok((v, stream.byte_offset())),
        Some(Err(e)) => Err(e),
        None => serde_json::from_str::<Value>("").map(|v| (v, 0)),
    }
}

fn text_call(source: Source, v: &Value, raw: &str) -> TextCall {
    match call_from_object(v) {
        Some((name, args)) => TextCall {
            source,
            name,
            args,
            broken: None,
            raw: raw.to_string(),
        },
        None => TextCall {
            source,
            name: None,
            args: WireArgs::Absent,
            broken: None,
            raw: raw.to_string(),
        },
    }
}

fn broken_json(source: Source, text: &str, err: &serde_json::Error) -> TextCall {
    TextCall {
        source,
        name: guess_name(text),
        args: WireArgs::Absent,
        broken: Some(Broken {
            error: describe_json_error(text, err),
            json_text: Some(text.to_string()),
        }),
        raw: text.to_string(),
    }
}

/// The `"name": "…"` of a call whose JSON is broken, for display only.
fn guess_name(text: &str) -> Option<String> {
    let i = text.find("\"name\"")?;
    let rest = text[i + 6..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    let end = rest.find('"')?;
    Some(rest[..end].to_string())
}

/// A serde_json error with the byte offset it happened at, for details.
pub fn describe_json_error(text: &str, err: &serde_json::Error) -> String {
    let offset = byte_offset(text, err.line(), err.column());
    let msg = err.to_string();
    // serde_json appends " at line L column C"; replace it with the byte offset.
    let core = msg.split(" at line ").next().unwrap_or(&msg);
    format!("{core} at byte {offset}")
}

/// The byte offset in `text` where a serde_json error occurred, moved forward to a char boundary.
pub fn error_offset(text: &str, err: &serde_json::Error) -> usize {
    let mut at = byte_offset(text, err.line(), err.column()).min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return offset + column.saturating_sub(1).min(l.len());
        }
        offset += l.len();
    }
    offset
}

/// Looks for calls in `content`. `tools` are the offered tool names, used only to accept the
/// forms that are not self-evidently calls (a bare `fn(…)` or `{"name": "fn"}` alone).
pub fn text_calls(content: &str, tools: &[&str]) -> Vec<TextCall> {
    let scope = outside_examples(content);
    let content: &str = &scope;
    // Explicit call markup is a call whatever it names. A marker named in prose ("wrap each call in a <tool_call> tag") opens no call, so when a
    // marker yields nothing the other forms are still looked for.
    if content.contains("<tool_call>") {
        let found = hermes(content);
        if !found.is_empty() {
            return found;
        }
    }
    if let Some(i) = content.find("[TOOL_CALLS]") {
        let found = mistral(&content[i + "[TOOL_CALLS]".len()..], tools);
        if !found.is_empty() {
            return found;
        }
    }
    if let Some(i) = content.find(PYTHON_TAG) {
        let found = python_tag(&content[i + PYTHON_TAG.len()..]);
        if !found.is_empty() {
            return found;
        }
    }
    let body = content.trim();
    if body.starts_with('[') && looks_pythonic(&body[1..]) {
        match parse_pythonic_list(body) {
            // A list is a call only when it names an offered tool: `[print(x)]` in an answer
            // is not one.
            Ok(calls) if calls.iter().any(|(n, _, _)| tools.contains(&n.as_str())) => {
                return calls
                    .into_iter()
                    .map(|(name, args, raw)| TextCall {
                        source: Source::Pythonic,
                        name: Some(name),
                        args: WireArgs::Json(args),
                        broken: None,
                        raw,
                    })
                    .collect();
            }
            Ok(_) => {}
            // A list that does not parse is a broken call only when it names an offered tool:
            // "[Paris (France)] is the capital" is prose.
            Err(e) => {
                let name = pythonic_name(&body[1..]);
                if name.as_deref().is_some_and(|n| tools.contains(&n)) {
                    return vec![TextCall {
                        source: Source::Pythonic,
                        name,
                        args: WireArgs::Absent,
                        broken: Some(Broken {
                            error: e,
                            json_text: None,
                        }),
                        raw: body.to_string(),
                    }];
                }
            }
        }
    }
    if pythonic_name(body).is_some_and(|n| tools.contains(&n.as_str()))
        && let Ok(calls) = parse_pythonic_list(&format!("[{body}]"))
        && calls.len() == 1
    {
        return calls
            .into_iter()
            .map(|(n, args, raw)| TextCall {
                source: Source::Pythonic,
                name: Some(n),
                args: WireArgs::Json(args),
                broken: None,
                raw,
            })
            .collect();
    }
    json_calls(content, tools)
}

/// Llama 3.1's marker for a call in content.
const PYTHON_TAG: &str = "<|python_tag|>";

/// What follows `<|python_tag|>`: JSON call objects (separated by `;`) or a pythonic call,
/// up to an end-of-message token.
fn python_tag(after: &str) -> Vec<TextCall> {
    let end = after.find("<|e").unwrap_or(after.len());
    let mut rest = after[..end].trim();
    let mut out = Vec::new();
    if rest.starts_with('{') || rest.starts_with('[') {
        while !rest.is_empty() {
            match first_json_value(rest) {
                Ok((Value::Array(items), used)) => {
                    out.extend(
                        items
                            .iter()
                            .map(|v| text_call(Source::PythonTag, v, &rest[..used])),
                    );
                    rest = rest[used..]
                        .trim_start()
                        .trim_start_matches(';')
                        .trim_start();
                }
                Ok((v, used)) => {
                    out.push(text_call(Source::PythonTag, &v, &rest[..used]));
                    rest = rest[used..]
                        .trim_start()
                        .trim_start_matches(';')
                        .trim_start();
                }
                Err(e) => {
                    out.push(broken_json(Source::PythonTag, rest, &e));
                    break;
                }
            }
            if !(rest.starts_with('{') || rest.starts_with('[')) {
                break;
            }
        }
        return out;
    }
    if pythonic_name(rest).is_some() {
        let body = rest.trim_end_matches(';');
        return match parse_pythonic_list(&format!("[{body}]")) {
            Ok(calls) => calls
                .into_iter()
                .map(|(name, args, raw)| TextCall {
                    source: Source::PythonTag,
                    name: Some(name),
                    args: WireArgs::Json(args),
                    broken: None,
                    raw,
                })
                .collect(),
            Err(e) => vec![TextCall {
                source: Source::PythonTag,
                name: pythonic_name(rest),
                args: WireArgs::Absent,
                broken: Some(Broken {
                    error: e,
                    json_text: None,
                }),
                raw: rest.to_string(),
            }],
        };
    }
    out
}

fn hermes(content: &str) -> Vec<TextCall> {
    let mut out = Vec::new();
    let mut rest = content;
    while let Some(i) = rest.find("<tool_call>") {
        let after = &rest[i + "<tool_call>".len()..];
        let (inner, next, closed) = match after.find("</tool_call>") {
            Some(j) => (&after[..j], &after[j + "</tool_call>".len()..], true),
            None => (after, "", false),
        };
        let payload = inner.trim();
        let payload = strip_fence(payload).map(str::trim).unwrap_or(payload);
        rest = next;
        // An empty pair (`<tool_call></tool_call>`, prose explaining the format) is a mention
        // (SPEC §2.1); an empty payload with no closing tag is a call begun and cut right after
        // its tag.
        if payload.is_empty() && closed {
            continue;
        }
        if payload.starts_with(QWEN_FUNCTION) {
            out.push(qwen_xml(payload));
            continue;
        }
        // The tag named in prose, not followed by a JSON payload, is not a call.
        if !(payload.is_empty() || payload.starts_with('{') || payload.starts_with('[')) {
            continue;
        }
        match serde_json::from_str::<Value>(payload) {
            Ok(Value::Array(items)) => {
                out.extend(items.iter().map(|v| text_call(Source::Hermes, v, payload)))
            }
            Ok(v) => out.push(text_call(Source::Hermes, &v, payload)),
            Err(e) => out.push(broken_json(Source::Hermes, payload, &e)),
        }
    }
    out
}

/// The opening of a Qwen3-Coder XML call inside `<tool_call>`.
const QWEN_FUNCTION: &str = "<function=";

/// Qwen3-Coder's XML call form inside `<tool_call>`:
/// `<function=NAME><parameter=KEY>VALUE</parameter>…</function>` (vLLM's `qwen3_coder` tool
/// parser, llama.cpp's Qwen3-Coder chat format). Each value is taken as JSON when it parses,
/// else as text (SPEC §2.1); the line break the format puts on each side of a value is not
/// part of it. A form that stops before its `</function>` is a broken call, located by byte.
fn qwen_xml(payload: &str) -> TextCall {
    let broken = |name: Option<String>, error: String| TextCall {
        source: Source::QwenXml,
        name,
        args: WireArgs::Absent,
        broken: Some(Broken {
            error,
            json_text: None,
        }),
        raw: payload.to_string(),
    };
    let head = &payload[QWEN_FUNCTION.len()..];
    let Some(gt) = head.find('>') else {
        return broken(
            None,
            format!(
                "the <function= tag is not closed by '>' before the end at byte {}",
                payload.len()
            ),
        );
    };
    let name = head[..gt].trim().to_string();
    let mut at = QWEN_FUNCTION.len() + gt + 1;
    let mut args = Map::new();
    loop {
        let body = &payload[at..];
        let trimmed = body.trim_start();
        at += body.len() - trimmed.len();
        if trimmed.starts_with("</function>") {
            return TextCall {
                source: Source::QwenXml,
                name: Some(name),
                args: WireArgs::Json(Value::Object(args)),
                broken: None,
                raw: payload.to_string(),
            };
        }
        let Some(param) = trimmed.strip_prefix("<parameter=") else {
            let what = if trimmed.is_empty() {
                "the end"
            } else {
                "other text"
            };
            return broken(
                Some(name),
                format!("expected <parameter=…> or </function> at byte {at}, found {what}"),
            );
        };
        let Some(gt) = param.find('>') else {
            return broken(
                Some(name),
                format!("the <parameter= tag at byte {at} is not closed by '>'"),
            );
        };
        let key = param[..gt].trim().to_string();
        let value = &param[gt + 1..];
        let Some(end) = value.find("</parameter>") else {
            return broken(
                Some(name),
                format!("parameter {key:?} (byte {at}) has no </parameter>"),
            );
        };
        let text = &value[..end];
        let text = text.strip_prefix('\n').unwrap_or(text);
        let text = text.strip_suffix('\n').unwrap_or(text);
        let v = serde_json::from_str::<Value>(text).unwrap_or_else(|_| Value::String(text.into()));
        args.insert(key, v);
        at += "<parameter=".len() + gt + 1 + end + "</parameter>".len();
    }
}

fn mistral(after: &str, tools: &[&str]) -> Vec<TextCall> {
    let body = after.trim_start();
    if body.starts_with('[') || body.starts_with('{') {
        return match first_json_value(body) {
            Ok((Value::Array(items), _)) => items
                .iter()
                .map(|v| text_call(Source::Mistral, v, body))
                .collect(),
            Ok((v, _)) => vec![text_call(Source::Mistral, &v, body)],
            Err(e) => vec![broken_json(Source::Mistral, body, &e)],
        };
    }
    // The newer format: `[TOOL_CALLS]name[ARGS]{…}`, repeated for several calls.
    let mut out = Vec::new();
    for part in after.split("[TOOL_CALLS]") {
        let Some((name, args)) = part.split_once("[ARGS]") else {
            // Only a block that begins with an offered tool's name (cut before [ARGS]) is a
            // broken call; "[TOOL_CALLS] token" named in prose is not.
            let head = part.trim_start();
            if let Some(t) = tools
                .iter()
                .find(|t| !t.is_empty() && head.starts_with(**t))
            {
                out.push(TextCall {
                    source: Source::Mistral,
                    name: Some(t.to_string()),
                    args: WireArgs::Absent,
                    broken: Some(Broken {
                        error: format!(
                            "a [TOOL_CALLS] block naming {t} with neither a JSON list nor [ARGS] (it ends at byte {})",
                            part.len()
                        ),
                        json_text: None,
                    }),
                    raw: part.to_string(),
                });
            }
            continue;
        };
        let args = args.trim();
        out.push(TextCall {
            source: Source::Mistral,
            name: Some(name.trim().to_string()),
            args: WireArgs::Text(args.to_string()),
            broken: None,
            raw: part.to_string(),
        });
    }
    out
}

/// Bare JSON calls: the whole content (perhaps fenced) is a call object or a list of them, or a
/// call object sits inside prose.
fn json_calls(content: &str, tools: &[&str]) -> Vec<TextCall> {
    let body = content.trim();
    if body.starts_with('{') || body.starts_with('[') {
        match first_json_value(body) {
            Ok((Value::Array(items), _)) => {
                // A list of call objects, one of them naming an offered tool (a list where
                // another names an unoffered tool is still the model's call attempt).
                let shaped = |v: &Value| {
                    v.get("name").is_some_and(Value::is_string)
                        || v.get("function").is_some_and(Value::is_object)
                };
                if items.iter().all(shaped) && items.iter().any(|v| is_call_shaped(v, tools)) {
                    // Definitions quoted beside the calls (an echo of `tools`) are mentions.
                    return items
                        .iter()
                        .filter(|v| !is_definition(v))
                        .map(|v| text_call(Source::Json, v, body))
                        .collect();
                }
                return Vec::new();
            }
            Ok((v, _)) => {
                if is_call_shaped(&v, tools) {
                    return vec![text_call(Source::Json, &v, body)];
                }
                return Vec::new();
            }
            Err(e) => {
                if looks_like_broken_call(body, tools) {
                    return vec![broken_json(Source::Json, body, &e)];
                }
                return Vec::new();
            }
        }
    }
    // A call object after some prose ("Sure! {"name": …}").
    let mut from = 0;
    while let Some(i) = content[from..].find('{').map(|i| i + from) {
        let tail = &content[i..];
        if tail[1..].trim_start().starts_with("\"name\"") {
            match first_json_value(tail) {
                Ok((v, _)) if is_call_shaped(&v, tools) => {
                    return vec![text_call(Source::Json, &v, tail)];
                }
                // A definition quoted in prose: none of its inner objects is a call either.
                Ok((v, used)) if is_definition(&v) => {
                    from = i + used;
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    if looks_like_broken_call(tail, tools) {
                        return vec![broken_json(Source::Json, tail, &e)];
                    }
                    // Braces before the error belong to this value that does not parse: none
                    // of them starts a call, and retrying each would be quadratic.
                    from = i + error_offset(tail, &e).max(1);
                    continue;
                }
            }
        }
        from = i + 1;
    }
    Vec::new()
}

/// A bare object that does not parse is a broken call when it begins like one and names an
/// offered tool.
fn looks_like_broken_call(text: &str, tools: &[&str]) -> bool {
    let head: String = text.chars().take(200).collect();
    head.contains("\"name\"")
        && (head.contains("\"arguments\"") || head.contains("\"parameters\""))
        && guess_name(text).is_some_and(|n| tools.contains(&n.as_str()))
        && !begins_like_definition(text)
}

fn looks_pythonic(s: &str) -> bool {
    pythonic_name(s).is_some()
}

/// The identifier at the start of `s` when it is followed by `(`.
fn pythonic_name(s: &str) -> Option<String> {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '-'))
        .unwrap_or(s.len());
    let name = &s[..end];
    let first = name.chars().next()?;
    if !(first.is_alphabetic() || first == '_') {
        return None;
    }
    s[end..]
        .trim_start()
        .starts_with('(')
        .then(|| name.to_string())
}

/// Parses `[f(a=1, b="x"), g()]` into (name, arguments object, raw text) triples.
pub fn parse_pythonic_list(text: &str) -> Result<Vec<(String, Value, String)>, String> {
    let mut p = Py {
        s: text.as_bytes(),
        text,
        pos: 0,
    };
    p.ws();
    p.expect(b'[')?;
    let mut calls = Vec::new();
    loop {
        p.ws();
        if p.peek() == Some(b']') {
            p.pos += 1;
            break;
        }
        let start = p.pos;
        let name = p.ident()?;
        p.ws();
        p.expect(b'(')?;
        let mut args = Map::new();
        loop {
            p.ws();
            if p.peek() == Some(b')') {
                p.pos += 1;
                break;
            }
            let key = p.ident()?;
            p.ws();
            if p.peek() != Some(b'=') {
                return Err(format!(
                    "positional argument {key:?} at byte {}: pythonic calls must use keyword arguments",
                    p.pos
                ));
            }
            p.pos += 1;
            let v = p.value(0)?;
            args.insert(key, v);
            p.ws();
            match p.peek() {
                Some(b',') => p.pos += 1,
                Some(b')') => {}
                _ => return Err(p.err("',' or ')'")),
            }
        }
        calls.push((name, Value::Object(args), text[start..p.pos].to_string()));
        p.ws();
        match p.peek() {
            Some(b',') => p.pos += 1,
            Some(b']') => {}
            _ => return Err(p.err("',' or ']'")),
        }
    }
    p.ws();
    if p.pos != p.s.len() {
        return Err(format!(
            "unexpected text after the call list at byte {}",
            p.pos
        ));
    }
    Ok(calls)
}

/// A recursive-descent reader of the Python literal subset models use in pythonic calls.
struct Py<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Py<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }
    fn ws(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }
    fn err(&self, want: &str) -> String {
        match self.peek() {
            Some(_) => format!("expected {want} at byte {}", self.pos),
            None => format!("expected {want} at byte {} (end of text)", self.pos),
        }
    }
    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(&format!("'{}'", c as char)))
        }
    }
    fn ident(&mut self) -> Result<String, String> {
        let start = self.pos;
        while self.peek().is_some_and(|c| {
            c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'-' || c >= 0x80
        }) {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.err("a name"));
        }
        Ok(self.text[start..self.pos].to_string())
    }
    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > 64 {
            return Err(format!("nesting deeper than 64 at byte {}", self.pos));
        }
        self.ws();
        match self.peek() {
            Some(b'"') | Some(b'\'') => self.string().map(Value::String),
            Some(b'[') | Some(b'(') => {
                let close = if self.peek() == Some(b'[') {
                    b']'
                } else {
                    b')'
                };
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        return Ok(Value::Array(items));
                    }
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(c) if c == close => {}
                        _ => return Err(self.err("',' or a closing bracket")),
                    }
                }
            }
            Some(b'{') => {
                self.pos += 1;
                let mut map = Map::new();
                loop {
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        return Ok(Value::Object(map));
                    }
                    let key = match self.value(depth + 1)? {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    self.ws();
                    self.expect(b':')?;
                    let v = self.value(depth + 1)?;
                    map.insert(key, v);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {}
                        _ => return Err(self.err("',' or '}'")),
                    }
                }
            }
            Some(c) if c == b'-' || c == b'+' || c.is_ascii_digit() || c == b'.' => self.number(),
            Some(_) => {
                let start = self.pos;
                let word = self.ident()?;
                match word.as_str() {
                    "True" | "true" => Ok(Value::Bool(true)),
                    "False" | "false" => Ok(Value::Bool(false)),
                    "None" | "null" => Ok(Value::Null),
                    _ => Err(format!("{word:?} at byte {start} is not a literal")),
                }
            }
            None => Err(self.err("a value")),
        }
    }
    fn number(&mut self) -> Result<Value, String> {
        let start = self.pos;
        while self.peek().is_some_and(|c| {
            c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E' | b'_')
        }) {
            self.pos += 1;
        }
        let lit: String = self.text[start..self.pos]
            .chars()
            .filter(|c| *c != '_')
            .collect();
        let lit = lit.strip_prefix('+').unwrap_or(&lit).to_string();
        // Python allows `5.` and `.5`; JSON does not.
        let lit = if lit.ends_with('.') {
            format!("{lit}0")
        } else {
            lit
        };
        let lit = if let Some(r) = lit.strip_prefix("-.") {
            format!("-0.{r}")
        } else if let Some(r) = lit.strip_prefix('.') {
            format!("0.{r}")
        } else {
            lit
        };
        serde_json::from_str::<serde_json::Number>(&lit)
            .map(Value::Number)
            .map_err(|_| format!("{lit:?} at byte {start} is not a number"))
    }
    fn string(&mut self) -> Result<String, String> {
        let start = self.pos;
        let Some(q) = self.peek() else {
            return Err(self.err("a string"));
        };
        let triple = self.s[self.pos..].starts_with(&[q, q, q]);
        self.pos += if triple { 3 } else { 1 };
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(format!("string starting at byte {start} is never closed"));
            };
            if c == q && (!triple || self.s[self.pos..].starts_with(&[q, q, q])) {
                self.pos += if triple { 3 } else { 1 };
                return Ok(out);
            }
            if c == b'\\' {
                self.pos += 1;
                let Some(e) = self.peek() else { continue };
                self.pos += 1;
                match e {
                    b'n' => out.push('\n'),
                    b't' => out.push('\t'),
                    b'r' => out.push('\r'),
                    b'0' => out.push('\0'),
                    b'\\' => out.push('\\'),
                    b'\'' => out.push('\''),
                    b'"' => out.push('"'),
                    b'\n' => {}
                    b'x' | b'u' | b'U' => {
                        let n = match e {
                            b'x' => 2,
                            b'u' => 4,
                            _ => 8,
                        };
                        let hex = self.text.get(self.pos..self.pos + n).ok_or_else(|| {
                            format!("short \\{} escape at byte {}", e as char, self.pos)
                        })?;
                        let code = u32::from_str_radix(hex, 16).map_err(|_| {
                            format!("bad \\{} escape at byte {}", e as char, self.pos)
                        })?;
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        self.pos += n;
                    }
                    _ => {
                        // Python keeps an unknown escape as written.
                        out.push('\\');
                        self.pos -= 1;
                    }
                }
                continue;
            }
            if !triple && c == b'\n' {
                return Err(format!(
                    "newline inside the string starting at byte {start}"
                ));
            }
            // Copy one UTF-8 character.
            let ch = self.text[self.pos..].chars().next().unwrap_or('\u{fffd}');
            out.push(ch);
            self.pos += ch.len_utf8().max(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hermes_blocks_are_calls() {
        let c = text_calls(
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
            &[],
        );
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name.as_deref(), Some("get_weather"));
        assert_eq!(c[0].args, WireArgs::Json(json!({"city": "Paris"})));
    }

    #[test]
    fn pythonic_lists_parse_python_literals() {
        let calls = parse_pythonic_list(
            "[get_weather(city='Paris', days=3), f(flag=True, x=None, l=[1, 'a'], d={'k': 2.5})]",
        )
        .unwrap();
        assert_eq!(calls[0].0, "get_weather");
        assert_eq!(calls[0].1, json!({"city": "Paris", "days": 3}));
        assert_eq!(
            calls[1].1,
            json!({"flag": true, "x": null, "l": [1, "a"], "d": {"k": 2.5}})
        );
    }

    #[test]
    fn prose_mentioning_a_tool_is_not_a_call() {
        let tools = ["get_weather"];
        assert!(
            text_calls(
                "I could call get_weather for you, but I need a city.",
                &tools
            )
            .is_empty()
        );
        assert!(
            text_calls(
                "The get_weather tool (which takes a city) is available.",
                &tools
            )
            .is_empty()
        );
        assert!(text_calls("[]", &tools).is_empty());
        assert!(text_calls("{\"answer\": 42}", &tools).is_empty());
    }

    #[test]
    fn markers_named_in_prose_open_no_call() {
        let tools = ["get_weather"];
        for prose in [
            "Hermes-style models wrap each call in a <tool_call> tag.",
            "Mistral models start a call with the [TOOL_CALLS] token.",
            "[Paris (France)] is the capital of France.",
        ] {
            assert!(text_calls(prose, &tools).is_empty(), "{prose}");
        }
        // Cut right after the marker, or a pythonic list naming an offered tool: calls begun.
        let cut = text_calls("[TOOL_CALLS]get_weather", &tools);
        assert_eq!(cut.len(), 1);
        assert!(cut[0].broken.is_some());
        let py = text_calls("[get_weather(city=\"Pa", &tools);
        assert_eq!(py[0].name.as_deref(), Some("get_weather"));
        assert!(py[0].broken.is_some());
        let h = text_calls("<tool_call>\n{\"name\": \"get_weather\", \"argu", &tools);
        assert!(h[0].broken.is_some());
    }

    #[test]
    fn llama_json_with_parameters_and_mistral_lists() {
        let llama = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}";
        let c = text_calls(llama, &["get_weather"]);
        assert_eq!(c[0].args, WireArgs::Json(json!({"city": "Paris"})));
        // A bare object is a call only when it names an offered tool.
        assert!(text_calls(llama, &["get_time"]).is_empty());
        let m = text_calls(
            "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"x\": 1}}]",
            &[],
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].name.as_deref(), Some("b"));
        let n = text_calls("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", &[]);
        assert_eq!(n[0].args, WireArgs::Text("{\"city\": \"Paris\"}".into()));
    }

    #[test]
    fn fenced_examples_in_a_longer_answer_are_not_looked_into() {
        let tools = ["get_weather"];
        let call = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}";
        // The whole content one fence: looked into.
        assert_eq!(
            text_calls(&format!("\n```json\n{call}\n```\n"), &tools).len(),
            1
        );
        // A fence inside a longer answer: an example, whatever it holds, markup included.
        for inner in [
            call.to_string(),
            format!("<tool_call>\n{call}\n</tool_call>"),
            "[get_weather(city='Paris')]".to_string(),
        ] {
            let answer = format!("Like this:\n```\n{inner}\n```\nthen run it.");
            assert!(text_calls(&answer, &tools).is_empty(), "{answer}");
        }
        // Backticks named mid-sentence open no example.
        let named = format!("Wrap code in ``` fences. <tool_call>\n{call}\n</tool_call>");
        assert_eq!(text_calls(&named, &tools).len(), 1);
        // Cut inside an example: still an example.
        assert!(text_calls(&format!("Example:\n```python\nx = {call}"), &tools).is_empty());
        // Outside the example, a call is still found.
        let both = format!("```python\nprint(1)\n```\n<tool_call>\n{call}\n</tool_call>");
        assert_eq!(text_calls(&both, &tools).len(), 1);
    }

    #[test]
    fn markup_is_a_call_whatever_it_names_bare_forms_only_for_offered_tools() {
        let tools = ["get_weather"];
        let h = text_calls(
            "<tool_call>\n{\"name\": \"search_web\", \"arguments\": {}}\n</tool_call>",
            &tools,
        );
        assert_eq!(h[0].name.as_deref(), Some("search_web"));
        let p = text_calls(
            "<|python_tag|>brave_search.call(query=\"x\")<|eom_id|>",
            &tools,
        );
        assert_eq!(p[0].name.as_deref(), Some("brave_search.call"));
        let j = text_calls(
            "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": 1}}",
            &tools,
        );
        assert_eq!(j.len(), 2);
        assert!(text_calls("{\"name\": \"search_web\", \"arguments\": {}}", &tools).is_empty());
        assert!(text_calls("[search_web(query='x')]", &tools).is_empty());
        assert_eq!(text_calls("[get_weather(city='Paris')]", &tools).len(), 1);
    }

    #[test]
    fn a_broken_call_is_recognised_and_its_error_located() {
        let c = text_calls(
            "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1</tool_call>",
            &[],
        );
        assert_eq!(c[0].name.as_deref(), Some("f"));
        let b = c[0].broken.as_ref().unwrap();
        assert!(b.error.contains("at byte"), "{}", b.error);
    }

    #[test]
    fn qwen3_coder_xml_is_a_call_and_an_empty_pair_a_mention() {
        let c = text_calls(
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
            &[],
        );
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].source, Source::QwenXml);
        assert_eq!(c[0].name.as_deref(), Some("get_weather"));
        assert_eq!(
            c[0].args,
            WireArgs::Json(json!({"city": "Paris", "days": 3}))
        );
        assert_eq!(c[0].broken, None);
        let cut = text_calls(
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
            &[],
        );
        assert_eq!(cut[0].name.as_deref(), Some("get_weather"));
        assert_eq!(
            cut[0].broken.as_ref().map(|b| b.error.as_str()),
            Some("parameter \"city\" (byte 23) has no </parameter>")
        );
        let prose = "Calls go between <tool_call></tool_call> tags, one per call.";
        assert!(text_calls(prose, &["get_weather"]).is_empty());
        let tagged = text_calls("<|python_tag|>{\"name\": \"get_weather\"}", &[]);
        assert_eq!(tagged[0].source, Source::PythonTag);
        assert_eq!(tagged[0].args, WireArgs::Absent);
    }

    #[test]
    fn a_definition_quoted_back_is_a_mention_in_every_form() {
        let tools = ["schedule_transfer", "get_weather"];
        let function = r#"{"name": "schedule_transfer", "description": "Schedule a SEPA credit transfer from the company account.", "parameters": {"type": "object", "properties": {"amount": {"type": "number", "exclusiveMinimum": 0}, "iban": {"type": "string", "description": "No spaces."}}, "required": ["amount", "iban"], "additionalProperties": false}}"#;
        let entry = format!(r#"{{"type": "function", "function": {function}}}"#);
        for content in [
            entry.clone(),
            function.to_string(),
            format!("The tool is defined as {entry}, so it needs an IBAN."),
            format!("It is {function}."),
            format!("```json\n{entry}\n```"),
            format!("[{entry}]"),
            // Cut at the budget inside the echo.
            entry[..entry.len() - 60].to_string(),
            format!("Here it is: {}", &function[..120]),
            // A parameterless tool's definition: a name and a description.
            r#"{"name": "get_weather", "description": "Current weather."}"#.to_string(),
        ] {
            assert!(text_calls(&content, &tools).is_empty(), "{content}");
            assert_eq!(
                quoted_definitions(&content),
                vec![if content.contains("schedule_transfer") {
                    "schedule_transfer"
                } else {
                    "get_weather"
                }],
                "{content}"
            );
        }
        // Calls stay calls: arguments, Llama 3's `parameters` holding values, the tool_calls
        // entry shape, and a call beside an echoed definition.
        let calls = [
            r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#.to_string(),
            r#"{"name": "get_weather", "parameters": {"city": "Paris"}}"#.to_string(),
            r#"{"name": "get_weather", "parameters": {"type": "rain", "city": "Paris"}}"#
                .to_string(),
            r#"{"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}"#
                .to_string(),
            r#"{"name": "get_weather"}"#.to_string(),
            format!(r#"[{entry}, {{"name": "get_weather", "arguments": {{"city": "Paris"}}}}]"#),
            r#"{"name": "get_weather", "description": "x", "arguments": {"city": "Pa"#.to_string(),
        ];
        for content in &calls {
            let found = text_calls(content, &tools);
            assert_eq!(found.len(), 1, "{content}");
            assert_eq!(found[0].name.as_deref(), Some("get_weather"), "{content}");
            assert!(quoted_definitions(content).len() <= 1, "{content}");
        }
        assert!(quoted_definitions("just prose about \"parameters\"").is_empty());
        // Hostile nesting that no JSON parser takes: read without recursing, in linear time.
        let deep = format!(
            "{}\"name\": \"get_weather\", \"description\": \"x\", \"parameters\": {{",
            "{\"function\": ".repeat(200_000)
        );
        assert!(text_calls(&deep, &tools).is_empty());
        assert!(quoted_definitions(&deep).len() <= 1);
        let wide = "{\"type\": {\"type\": ".repeat(5_000);
        assert!(quoted_definitions(&format!("\"parameters\" {wide}")).is_empty());
    }
}
