//! Corrupted variants of a task's gold reply, one family per label: negative examples in the
//! spirit of the HiTEC paper ("Enhancing Tool Learning in LLMs with Hierarchical Error
//! Checklists"). The mutation test scores every variant and demands exactly its label; the mock
//! server's injector serves them so a demo matrix shows every label with believable rates.
//!
//! Variants are built by rule from the task (its gold calls, schemas and predicates), never by
//! asking the scorer, so the test that scores them can fail.

use crate::json::{pointer_token, values_equal};
use crate::reply::{Reply, ReplyCall};
use crate::task::{Expect, ExpectedCall, Predicate, Task, Test};
use crate::taxonomy::Label;
use serde_json::{Map, Value};

/// One corrupted reply, named for reports (`truncation/length`).
#[derive(Debug, Clone)]
pub struct Corruption {
    pub name: String,
    pub reply: Reply,
}

fn text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn gold_calls(task: &Task) -> Vec<(String, Value)> {
    task.expected_calls()
        .iter()
        .map(|c| (c.tool.clone(), c.gold.clone()))
        .collect()
}

fn reply_of(calls: &[(String, Value)]) -> Reply {
    Reply::calls(
        calls
            .iter()
            .map(|(n, a)| ReplyCall {
                name: n.clone(),
                arguments: text(a),
            })
            .collect(),
    )
}

fn reply_of_text(calls: &[(String, String)]) -> Reply {
    Reply::calls(
        calls
            .iter()
            .map(|(n, a)| ReplyCall {
                name: n.clone(),
                arguments: a.clone(),
            })
            .collect(),
    )
}

/// The reply a perfectly conforming model gives.
pub fn gold(task: &Task) -> Reply {
    match &task.expect {
        Expect::NoCall => Reply::text(
            "Happy to help! No tool is needed for this one: here is the answer in plain words.",
        ),
        Expect::Calls { .. } => reply_of(&gold_calls(task)),
        Expect::StructuredOutput { gold, .. } => Reply::text(text(gold)),
    }
}

/// The schema that governs the payload of expected call `i` (or the structured output).
fn payload_schema(task: &Task, call: Option<&ExpectedCall>) -> Option<Value> {
    match (call, &task.expect) {
        (Some(c), _) => task.tool(&c.tool).map(|t| t.schema.raw.clone()),
        (None, Expect::StructuredOutput { schema, .. }) => schema.as_ref().map(|s| s.raw.clone()),
        _ => None,
    }
}

/// A payload (one call's arguments or the structured output) with its schema, and a way to put a
/// changed payload back into a whole reply.
struct Target {
    payload: Value,
    schema: Option<Value>,
    /// Expected-call index, or `None` for a structured output.
    call: Option<usize>,
}

fn targets(task: &Task) -> Vec<Target> {
    match &task.expect {
        Expect::Calls { calls, .. } => calls
            .iter()
            .enumerate()
            .map(|(i, c)| Target {
                payload: c.gold.clone(),
                schema: payload_schema(task, Some(c)),
                call: Some(i),
            })
            .collect(),
        Expect::StructuredOutput { gold, .. } => vec![Target {
            payload: gold.clone(),
            schema: payload_schema(task, None),
            call: None,
        }],
        Expect::NoCall => Vec::new(),
    }
}

/// A reply in which the target's payload text is replaced and everything else is gold.
fn with_payload_text(task: &Task, t: &Target, payload: String) -> Reply {
    match t.call {
        Some(i) => {
            let calls: Vec<(String, String)> = gold_calls(task)
                .into_iter()
                .enumerate()
                .map(|(j, (n, a))| {
                    if j == i {
                        (n, payload.clone())
                    } else {
                        (n, text(&a))
                    }
                })
                .collect();
            reply_of_text(&calls)
        }
        None => Reply::text(payload),
    }
}

fn with_payload(task: &Task, t: &Target, payload: &Value) -> Reply {
    with_payload_text(task, t, text(payload))
}

// ---- schema lookups (local refs only, as the scorer) ----

fn deref<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    let mut cur = s;
    for _ in 0..16 {
        match cur
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|p| root.pointer(p))
        {
            Some(next) => cur = next,
            None => break,
        }
    }
    cur
}

fn types_of(root: &Value, s: &Value) -> Vec<String> {
    let s = deref(root, s);
    let mut out = Vec::new();
    match s.get("type") {
        Some(Value::String(t)) => out.push(t.clone()),
        Some(Value::Array(ts)) => {
            out.extend(ts.iter().filter_map(Value::as_str).map(str::to_string))
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(bs) = s.get(key).and_then(Value::as_array) {
            for b in bs {
                out.extend(types_of(root, b));
            }
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        out.extend(e.iter().map(|v| crate::json::type_name(v).to_string()));
    }
    if out.iter().any(|t| t == "integer") {
        out.push("number".into());
    }
    out.sort();
    out.dedup();
    out
}

/// A place in a payload, with the schema that governs it.
struct Leaf<'a> {
    path: String,
    value: &'a Value,
    schema: &'a Value,
}

/// Every value in the payload that a plain (no union) schema governs, depth first.
fn leaves<'a>(
    root: &'a Value,
    schema: &'a Value,
    value: &'a Value,
    path: String,
    out: &mut Vec<Leaf<'a>>,
) {
    let s = deref(root, schema);
    if s.get("anyOf").is_some() || s.get("oneOf").is_some() {
        return;
    }
    match value {
        Value::Object(obj) => {
            let Some(props) = s.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (k, v) in obj {
                if let Some(ps) = props.get(k) {
                    let p = format!("{path}/{}", pointer_token(k));
                    out.push(Leaf {
                        path: p.clone(),
                        value: v,
                        schema: ps,
                    });
                    leaves(root, ps, v, p, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items").filter(|i| i.is_object()) {
                for (i, v) in items.iter().enumerate() {
                    let p = format!("{path}/{i}");
                    out.push(Leaf {
                        path: p.clone(),
                        value: v,
                        schema: is,
                    });
                    leaves(root, is, v, p, out);
                }
            }
        }
        _ => {}
    }
}

/// The object schemas in a payload that define a closed set of keys: (pointer, schema).
fn closed_objects<'a>(
    root: &'a Value,
    schema: &'a Value,
    value: &'a Value,
) -> Vec<(String, &'a Value)> {
    let mut places = vec![Leaf {
        path: String::new(),
        value,
        schema,
    }];
    leaves(root, schema, value, String::new(), &mut places);
    places
        .into_iter()
        .filter_map(|l| {
            let s = deref(root, l.schema);
            let closed = l.value.is_object()
                && s.get("properties").is_some_and(Value::is_object)
                && !s.get("additionalProperties").is_some_and(Value::is_object)
                && s.get("patternProperties").is_none()
                && s.get("anyOf").is_none()
                && s.get("oneOf").is_none()
                && s.get("allOf").is_none();
            closed.then_some((l.path, s))
        })
        .collect()
}

fn set(payload: &Value, path: &str, v: Value) -> Value {
    let mut out = payload.clone();
    crate::json::replace_at(&mut out, path, v);
    out
}

fn split_pointer(path: &str) -> (&str, String) {
    match path.rfind('/') {
        Some(i) => (
            &path[..i],
            path[i + 1..].replace("~1", "/").replace("~0", "~"),
        ),
        None => ("", path.to_string()),
    }
}

fn remove(payload: &Value, path: &str) -> Value {
    let mut out = payload.clone();
    let (parent, key) = split_pointer(path);
    if let Some(Value::Object(m)) = out.pointer_mut(parent) {
        m.shift_remove(&key);
    }
    out
}

fn insert(payload: &Value, path: &str, v: Value) -> Value {
    let mut out = payload.clone();
    let (parent, key) = split_pointer(path);
    if let Some(Value::Object(m)) = out.pointer_mut(parent) {
        m.insert(key, v);
    }
    out
}

/// Python's repr of a JSON value (single-quoted strings, True/False/None).
pub fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => {
            if *b {
                "True".into()
            } else {
                "False".into()
            }
        }
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_str(s),
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{}: {}", py_str(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn py_str(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// `{'city': 'Paris'}`: JSON with Python's string quoting (the literals stay JSON's).
fn python_quoted(v: &Value) -> String {
    match v {
        Value::String(s) => py_str(s),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(python_quoted).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{}: {}", py_str(k), python_quoted(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => text(other),
    }
}

/// JSON text with every `\n` escape inside a string written as a raw newline, or `None` when
/// there is none. Lexical, so an escaped backslash followed by `n` (`C:\\new`) is left alone.
fn raw_newlines(json: &str) -> Option<String> {
    let mut out = String::with_capacity(json.len());
    let (mut in_str, mut changed) = (false, false);
    let mut chars = json.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                in_str = !in_str;
                out.push(c);
            }
            '\\' if in_str => match chars.next() {
                Some('n') => {
                    out.push('\n');
                    changed = true;
                }
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => out.push('\\'),
            },
            _ => out.push(c),
        }
    }
    changed.then_some(out)
}

/// JSON text with every escaped backslash inside a string written once (`"C:\\Users"` for
/// `"C:\\\\Users"`), the way a model copies a Windows path or a regex. Only when the result is
/// not valid JSON (some `\\U`, `\\d` is left an invalid escape); otherwise `None`, since a text
/// whose single backslashes all happen to be valid escapes parses to a different value, which
/// only a round-trip predicate can catch.
fn single_backslashes(json: &str) -> Option<String> {
    let chars: Vec<char> = json.chars().collect();
    let mut out = String::with_capacity(json.len());
    let (mut in_str, mut changed) = (false, false);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            in_str = !in_str;
        } else if c == '\\' && in_str {
            let next = chars.get(i + 1).copied();
            if next == Some('\\') {
                // A backslash before a quote in the value: halving it would end the string early,
                // which is not this mangling.
                let after = (chars.get(i + 2), chars.get(i + 3));
                if matches!(after, (Some('"'), _) | (Some('\\'), Some('"'))) {
                    return None;
                }
                out.push('\\');
                changed = true;
            } else {
                out.push('\\');
                out.extend(next);
            }
            i += 2;
            continue;
        }
        out.push(c);
        i += 1;
    }
    (changed && serde_json::from_str::<Value>(&out).is_err()).then_some(out)
}

/// The first half of a payload (at least one character, never all of it): what a token budget
/// leaves of a call cut mid-emission.
fn cut_half(s: &str) -> String {
    let n = s.chars().count();
    s.chars()
        .take((n / 2).clamp(1.min(n), n.saturating_sub(1).max(1)))
        .collect()
}

fn has_strings(v: &Value) -> bool {
    match v {
        Value::String(_) => true,
        Value::Array(a) => a.iter().any(has_strings),
        Value::Object(o) => !o.is_empty() || o.values().any(has_strings),
        _ => false,
    }
}

/// Every corrupted variant of the gold reply that should earn `label`, or why none applies.
/// `max_tokens` is the budget of the request the reply answers (truncation reaches it).
/// What every label's family of corruptions reads: the task, its gold calls and the tools it
/// offers.
struct Gold<'a> {
    task: &'a Task,
    calls: Vec<(String, Value)>,
    offered: Vec<&'a str>,
    structured: bool,
    /// The budget of the request the reply answers (truncation reaches it).
    max_tokens: u64,
}

/// Every corrupted variant of the gold reply that should earn `label`, or why none applies.
/// `max_tokens` is the budget of the request the reply answers (truncation reaches it).
pub fn corruptions(task: &Task, label: Label, max_tokens: u64) -> Result<Vec<Corruption>, String> {
    let mut out: Vec<Corruption> = Vec::new();
    let mut add = |name: &str, reply: Reply| {
        out.push(Corruption {
            name: format!("{label}/{name}"),
            reply,
        })
    };
    if let Expect::NoCall = task.expect {
        if label != Label::SpuriousCall {
            return Err("the task expects no call, so only spurious_call can fail it".into());
        }
        let (name, args) = match task.tools.first() {
            Some(t) => (t.name.clone(), "{}".to_string()),
            None => (
                "web_search".to_string(),
                "{\"query\": \"hello\"}".to_string(),
            ),
        };
        add(
            "called_anyway",
            reply_of_text(&[(name.clone(), args.clone())]),
        );
        add(
            "text_call",
            Reply::text(format!(
                "<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {args}}}\n</tool_call>"
            )),
        );
        return Ok(out);
    }
    let g = Gold {
        task,
        calls: gold_calls(task),
        offered: task.tools.iter().map(|t| t.name.as_str()).collect(),
        structured: task.is_structured_output(),
        max_tokens,
    };
    match label {
        Label::NoCall => no_call(&g, &mut add),
        Label::WrongTool => wrong_tool(&g, &mut add)?,
        Label::MalformedJson => malformed_json(&g, &mut add),
        Label::EscapingError => escaping_error(&g, &mut add),
        Label::Truncation => truncation(&g, &mut add),
        Label::ParallelCollapse => parallel_collapse(&g, &mut add),
        Label::SpuriousCall => spurious_call(&g, &mut add)?,
        Label::SchemaViolation
        | Label::HallucinatedParam
        | Label::MissingRequired
        | Label::TypeCoercion => schema_family(task, label, &mut out),
    }
    // Whatever a task's own predicates declare for this label.
    predicate_variants(task, label, &mut out);
    if out.is_empty() {
        return Err(why_not(task, label));
    }
    Ok(out)
}

/// The four schema-stage labels: the first target (a call's arguments, or the structured
/// output) whose schema admits the label's corruptions gives them.
fn schema_family(task: &Task, label: Label, out: &mut Vec<Corruption>) {
    for t in targets(task).into_iter() {
        let Some(root) = &t.schema else { continue };
        let mut ls = Vec::new();
        leaves(root, root, &t.payload, String::new(), &mut ls);
        let before = out.len();
        match label {
            Label::SchemaViolation => schema_violation(label, task, &t, root, &ls, out),
            Label::HallucinatedParam => hallucinated_param(label, task, &t, root, out),
            Label::MissingRequired => missing_required(label, task, &t, root, ls, out),
            Label::TypeCoercion => type_coercion(label, task, &t, root, &ls, out),
            _ => {}
        }
        if out.len() > before {
            break;
        }
    }
}

/// `no_call`: prose, prose that names the tool, and the calls left in `content` in each text
/// form a server's tool parser can miss.
fn no_call(g: &Gold, add: &mut dyn FnMut(&str, Reply)) {
    let (calls, structured) = (&g.calls, g.structured);
    let n = calls.len();
    add(
        "prose",
        Reply::text(
            "I'm sorry, I can't look that up right now. Is there anything else I can help with?",
        ),
    );
    if !structured {
        let first = &calls[0].0;
        add(
            "prose_mentions_tool",
            Reply::text(format!(
                "I could use the {first} tool for this, but I'd rather confirm the details with you first."
            )),
        );
        let hermes: Vec<String> = calls
            .iter()
            .map(|(n, a)| {
                format!(
                    "<tool_call>\n{{\"name\": \"{n}\", \"arguments\": {}}}\n</tool_call>",
                    text(a)
                )
            })
            .collect();
        add("hermes_in_content", Reply::text(hermes.join("\n")));
        let mistral: Vec<Value> = calls
            .iter()
            .map(|(n, a)| serde_json::json!({"name": n, "arguments": a}))
            .collect();
        add(
            "mistral_in_content",
            Reply::text(format!("[TOOL_CALLS]{}", text(&Value::Array(mistral)))),
        );
        let py: Vec<String> = calls
            .iter()
            .map(|(n, a)| {
                let kw: Vec<String> = a
                    .as_object()
                    .map(|o| {
                        o.iter()
                            .map(|(k, v)| format!("{k}={}", py_repr(v)))
                            .collect()
                    })
                    .unwrap_or_default();
                format!("{n}({})", kw.join(", "))
            })
            .collect();
        if calls.iter().all(|(_, a)| {
            a.as_object().is_some_and(|o| {
                o.keys()
                    .all(|k| k.chars().all(|c| c.is_alphanumeric() || c == '_'))
            })
        }) {
            add(
                "pythonic_in_content",
                Reply::text(format!("[{}]", py.join(", "))),
            );
        }
        if n == 1 {
            add(
                "llama_json_in_content",
                Reply::text(text(
                    &serde_json::json!({"name": calls[0].0, "parameters": calls[0].1}),
                )),
            );
        }
    }
}

/// `wrong_tool`: a tool that was not offered (instead, or besides), another offered tool, one
/// tool used for two.
fn wrong_tool(g: &Gold, add: &mut dyn FnMut(&str, Reply)) -> Result<(), String> {
    let (calls, offered, structured) = (&g.calls, &g.offered, g.structured);
    if structured {
        return Err("a structured-output task offers no tool to get wrong".into());
    }
    let mut renamed = calls.clone();
    let mut fake = format!("{}_v2", calls[0].0);
    while offered.contains(&fake.as_str()) {
        fake.push('2');
    }
    renamed[0].0 = fake.clone();
    add("not_offered", reply_of(&renamed));
    // The right calls and one more to a tool that was never offered: still wrong_tool.
    let mut added = calls.clone();
    added.push((fake, calls[0].1.clone()));
    add("addition_not_offered", reply_of(&added));
    let expected: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
    if let Some(other) = offered.iter().find(|o| !expected.contains(o)) {
        let mut other_calls = calls.clone();
        other_calls[0].0 = other.to_string();
        add("other_offered", reply_of(&other_calls));
    }
    if let Some(j) = calls.iter().position(|(nm, _)| *nm != calls[0].0) {
        let mut twice = calls.clone();
        twice[j].0 = calls[0].0.clone();
        add("one_tool_for_two", reply_of(&twice));
    }
    Ok(())
}

/// `malformed_json`: arguments (or structured output) that no repair makes parse, and a call
/// with no name.
fn malformed_json(g: &Gold, add: &mut dyn FnMut(&str, Reply)) {
    let (task, calls, structured) = (g.task, &g.calls, g.structured);
    for t in targets(task).into_iter().take(1) {
        let good = text(&t.payload);
        add(
            "unbalanced",
            with_payload_text(task, &t, good[..good.len() - 1].to_string()),
        );
        add(
            "trailing_text",
            with_payload_text(task, &t, format!("{good}\n<|eot_id|>")),
        );
        if let Some(k) = t.payload.as_object().and_then(|o| o.keys().next())
            && k.chars().all(|c| c.is_alphanumeric() || c == '_')
        {
            let unquoted = good.replacen(&format!("\"{k}\":"), &format!("{k}:"), 1);
            add("unquoted_key", with_payload_text(task, &t, unquoted));
        }
        if structured {
            add("fenced", Reply::text(format!("```json\n{good}\n```")));
            add(
                "prose_before",
                Reply::text(format!("Here is the result you asked for:\n{good}")),
            );
        } else {
            let mut nameless: Vec<(String, String)> =
                calls.iter().map(|(n, a)| (n.clone(), text(a))).collect();
            nameless[0].0 = String::new();
            add("nameless_call", reply_of_text(&nameless));
        }
    }
}

/// `escaping_error`: the payload mangled by each escaping mistake the repairs of the parse
/// stage undo.
fn escaping_error(g: &Gold, add: &mut dyn FnMut(&str, Reply)) {
    let task = g.task;
    for t in targets(task).into_iter().take(1) {
        let good = text(&t.payload);
        add(
            "double_encoded",
            with_payload_text(task, &t, text(&Value::String(good.clone()))),
        );
        let once = text(&Value::String(good.clone()));
        let escaped = once[1..once.len() - 1].to_string();
        // `{}` (a parameterless call) has no quote to escape: the "corruption" would be
        // the gold text itself.
        if escaped != good {
            add("extra_escaping_level", with_payload_text(task, &t, escaped));
        }
        if has_strings(&t.payload) {
            add(
                "python_quotes",
                with_payload_text(task, &t, python_quoted(&t.payload)),
            );
        }
        if let Some(raw) = raw_newlines(&good) {
            add("raw_newline", with_payload_text(task, &t, raw));
        }
        if let Some(single) = single_backslashes(&good) {
            add("single_backslashes", with_payload_text(task, &t, single));
        }
        if good.contains('\'') {
            add(
                "escaped_apostrophe",
                with_payload_text(task, &t, good.replace('\'', "\\'")),
            );
        }
        if let Some(c) = good.chars().find(|c| (*c as u32) > 0xFFFF) {
            let mut buf = [0u16; 2];
            let high = c.encode_utf16(&mut buf)[0];
            add(
                "lone_surrogate",
                with_payload_text(task, &t, good.replacen(c, &format!("\\u{high:04x}"), 1)),
            );
        }
    }
}

/// `truncation`: the payload cut at the token budget, with and without servers' `tool_calls`
/// finish reason, and calls missing at the budget.
fn truncation(g: &Gold, add: &mut dyn FnMut(&str, Reply)) {
    let (task, calls, structured, max_tokens) = (g.task, &g.calls, g.structured, g.max_tokens);
    let n = calls.len();
    for t in targets(task).into_iter().take(1) {
        let good = text(&t.payload);
        let half = cut_half(&good);
        let cut = match t.call {
            Some(_) => {
                let mut r = reply_of_text(&[(calls[0].0.clone(), half.clone())]);
                r.finish_reason = "length".into();
                r
            }
            None => {
                let mut r = Reply::text(half.clone());
                r.finish_reason = "length".into();
                r
            }
        };
        let mut cut = cut;
        cut.completion_tokens = max_tokens;
        add("length", cut.clone());
        if !structured {
            let mut bug = cut;
            bug.finish_reason = "tool_calls".into();
            add("budget_reached_finish_tool_calls", bug);
        }
    }
    if n >= 2 {
        let mut r = reply_of(&calls[..1]);
        r.finish_reason = "length".into();
        r.completion_tokens = max_tokens;
        add("calls_missing", r);
    }
}

/// `parallel_collapse`: calls dropped, or fused into one.
fn parallel_collapse(g: &Gold, add: &mut dyn FnMut(&str, Reply)) {
    let calls = &g.calls;
    let n = calls.len();
    if n >= 2 {
        add("dropped", reply_of(&calls[..1]));
        if calls.iter().all(|(nm, _)| *nm == calls[0].0) {
            let mut fused = Map::new();
            for (_, a) in calls {
                for (k, v) in a.as_object().into_iter().flatten() {
                    fused
                        .entry(k.clone())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Some(Value::Array(vs)) = fused.get_mut(k) {
                        vs.push(v.clone());
                    }
                }
            }
            add(
                "fused",
                reply_of(&[(calls[0].0.clone(), Value::Object(fused))]),
            );
        }
    }
}

/// `spurious_call`: the right calls and one more.
fn spurious_call(g: &Gold, add: &mut dyn FnMut(&str, Reply)) -> Result<(), String> {
    let (calls, offered, structured) = (&g.calls, &g.offered, g.structured);
    if structured {
        return Err("a structured-output task offers no tool to call spuriously".into());
    }
    let mut more = calls.clone();
    if let Some(last) = calls.last() {
        more.push(last.clone());
    }
    add("extra_call", reply_of(&more));
    // The right calls plus one to a neighbouring offered tool: an addition, not a
    // wrong tool (SPEC §2.1, stage 3).
    let expected: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
    if let Some(other) = offered.iter().find(|o| !expected.contains(o)) {
        let mut added = calls.clone();
        added.push((other.to_string(), calls[0].1.clone()));
        add("addition_other_offered", reply_of(&added));
    }
    Ok(())
}

/// `schema_violation` at one target: an enum near miss, a value wrapped in an array, a number out
/// of range, a string off its pattern.
fn schema_violation(
    label: Label,
    task: &Task,
    t: &Target,
    root: &Value,
    ls: &[Leaf],
    out: &mut Vec<Corruption>,
) {
    if let Some(l) = ls.iter().find(|l| {
        let s = deref(root, l.schema);
        l.value.is_string()
            && s.get("enum")
                .and_then(Value::as_array)
                .is_some_and(|e| e.iter().all(Value::is_string))
    }) {
        let v = l.value.as_str().unwrap_or_default();
        let mut miss: String = v
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    c.to_uppercase().next().unwrap_or(c)
                } else {
                    c
                }
            })
            .collect();
        let allowed = deref(root, l.schema)
            .get("enum")
            .cloned()
            .unwrap_or_default();
        if allowed
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(&miss)))
            || miss == v
        {
            miss = format!("{v}-x");
        }
        out.push(Corruption {
            name: format!("{label}/enum_near_miss"),
            reply: with_payload(task, t, &set(&t.payload, &l.path, Value::String(miss))),
        });
    }
    if let Some(l) = ls.iter().find(|l| {
        let ty = types_of(root, l.schema);
        !ty.is_empty()
            && !ty.contains(&"array".to_string())
            && deref(root, l.schema).get("enum").is_none()
    }) {
        // A scalar or object wrapped in an array is not a lossless encoding of anything.
        let wrapped = Value::Array(vec![l.value.clone()]);
        out.push(Corruption {
            name: format!("{label}/wrapped_in_array"),
            reply: with_payload(task, t, &set(&t.payload, &l.path, wrapped)),
        });
    }
    if let Some((l, v)) = ls
        .iter()
        .find_map(|l| out_of_range(deref(root, l.schema), l.value).map(|v| (l, v)))
    {
        out.push(Corruption {
            name: format!("{label}/out_of_range"),
            reply: with_payload(task, t, &set(&t.payload, &l.path, v)),
        });
    }
    if let Some((l, v)) = ls
        .iter()
        .find_map(|l| pattern_mismatch(deref(root, l.schema), l.value).map(|v| (l, v)))
    {
        out.push(Corruption {
            name: format!("{label}/pattern_mismatch"),
            reply: with_payload(task, t, &set(&t.payload, &l.path, v)),
        });
    }
}

/// `hallucinated_param` at one target: an undeclared key, at the top and nested.
fn hallucinated_param(
    label: Label,
    task: &Task,
    t: &Target,
    root: &Value,
    out: &mut Vec<Corruption>,
) {
    for (path, s) in closed_objects(root, root, &t.payload).into_iter().take(2) {
        let props = s.get("properties").and_then(Value::as_object);
        let key = ["note", "verbose", "extra_context", "confidence"]
            .into_iter()
            .find(|k| props.is_none_or(|p| !p.contains_key(*k)));
        if let Some(key) = key {
            let p = format!("{path}/{key}");
            let name = if path.is_empty() {
                "top_level"
            } else {
                "nested"
            };
            out.push(Corruption {
                name: format!("{label}/{name}"),
                reply: with_payload(
                    task,
                    t,
                    &insert(&t.payload, &p, Value::String("as requested".into())),
                ),
            });
        }
    }
}

/// `missing_required` at one target: the first required key present, removed.
fn missing_required(
    label: Label,
    task: &Task,
    t: &Target,
    root: &Value,
    ls: Vec<Leaf>,
    out: &mut Vec<Corruption>,
) {
    let mut places = vec![Leaf {
        path: String::new(),
        value: &t.payload,
        schema: root,
    }];
    places.extend(ls.into_iter().filter(|l| l.value.is_object()));
    for l in places {
        let s = deref(root, l.schema);
        let req = s.get("required").and_then(Value::as_array).and_then(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .find(|k| l.value.get(*k).is_some())
        });
        if let Some(k) = req {
            let p = format!("{}/{}", l.path, pointer_token(k));
            let name = if l.path.is_empty() {
                "top_level"
            } else {
                "nested"
            };
            out.push(Corruption {
                name: format!("{label}/{name}"),
                reply: with_payload(task, t, &remove(&t.payload, &p)),
            });
            break;
        }
    }
}

/// `type_coercion` at one target: each lossless wrong-type encoding of a value.
fn type_coercion(
    label: Label,
    task: &Task,
    t: &Target,
    root: &Value,
    ls: &[Leaf],
    out: &mut Vec<Corruption>,
) {
    let canonical = regex::Regex::new(r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?$").ok();
    for l in ls {
        let ty = types_of(root, l.schema);
        let no_string = !ty.is_empty() && !ty.contains(&"string".to_string());
        let coerced = match l.value {
            Value::Number(n) if no_string => {
                Some(("number_as_string", Value::String(n.to_string())))
            }
            Value::Bool(b) if no_string => Some(("bool_as_string", Value::String(b.to_string()))),
            Value::Object(_) | Value::Array(_) if no_string => {
                Some(("json_text_for_structure", Value::String(text(l.value))))
            }
            Value::String(s)
                if ty == ["string"] && canonical.as_ref().is_some_and(|re| re.is_match(s)) =>
            {
                serde_json::from_str::<serde_json::Number>(s)
                    .ok()
                    .map(|n| ("number_for_string", Value::Number(n)))
            }
            _ => None,
        };
        if let Some((name, v)) = coerced
            && !out.iter().any(|c| c.name.ends_with(name))
        {
            out.push(Corruption {
                name: format!("{label}/{name}"),
                reply: with_payload(task, t, &set(&t.payload, &l.path, v)),
            });
        }
    }
}
/// A number of the right type just outside the schema's bounds (maximum first), or `None`.
fn out_of_range(s: &Value, v: &Value) -> Option<Value> {
    if !v.is_number() {
        return None;
    }
    let bound = |key: &str| s.get(key).and_then(Value::as_number).map(|n| n.to_string());
    // Past an inclusive bound by one; an exclusive bound is itself out of range.
    let (lit, step) = if let Some(m) = bound("maximum") {
        (m, 1)
    } else if let Some(m) = bound("exclusiveMaximum") {
        (m, 0)
    } else if let Some(m) = bound("minimum") {
        (m, -1)
    } else {
        (bound("exclusiveMinimum")?, 0)
    };
    let text = match lit.parse::<i128>() {
        Ok(i) => (i + step).to_string(),
        Err(_) => {
            let f = lit.parse::<f64>().ok()? + step as f64;
            format!("{f:?}")
        }
    };
    serde_json::from_str::<serde_json::Number>(&text)
        .ok()
        .map(Value::Number)
}

/// A string the schema's `pattern` rejects, or `None` when the value is not a patterned string.
fn pattern_mismatch(s: &Value, v: &Value) -> Option<Value> {
    if !v.is_string() {
        return None;
    }
    let re = regex::Regex::new(s.get("pattern").and_then(Value::as_str)?).ok()?;
    ["N/A", "zzz", "?", ""]
        .into_iter()
        .find(|c| !re.is_match(c))
        .map(|c| Value::String(c.into()))
}

/// The schema governing the value at `path` in a payload (through `$ref`, `properties` and
/// `items`), or `None` when the path leaves the schema.
fn schema_at<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = deref(root, root);
    for tok in path.split('/').skip(1) {
        let tok = tok.replace("~1", "/").replace("~0", "~");
        let next = match cur.get("properties").and_then(|p| p.get(&tok)) {
            Some(next) => next,
            None => cur.get("items").filter(|i| i.is_object())?,
        };
        cur = deref(root, next);
    }
    Some(cur)
}

/// Values a model might invent for an argument nobody asked for, most plausible first: the
/// schema's own default, const or first enum value, then a plain value of each type.
fn invented_values(schema: Option<&Value>) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(s) = schema {
        out.extend(s.get("default").cloned());
        out.extend(s.get("const").cloned());
        out.extend(
            s.get("enum")
                .and_then(Value::as_array)
                .and_then(|e| e.first())
                .cloned(),
        );
    }
    out.extend([
        serde_json::json!("unrequested"),
        serde_json::json!("2025-01-31"),
        serde_json::json!("2025-01-31T09:00"),
        serde_json::json!("09:00"),
        serde_json::json!("user@example.com"),
        serde_json::json!(true),
        serde_json::json!(1),
        serde_json::json!(["user@example.com"]),
        serde_json::json!(["unrequested"]),
        serde_json::json!([1]),
        serde_json::json!({}),
        Value::Null,
    ]);
    out
}

/// The compiled schema of a target's payload: its tool's parameters, or the structured output's.
fn target_schema(task: &Task, t: &Target) -> Option<std::sync::Arc<crate::task::Schema>> {
    match (t.call, &task.expect) {
        (Some(i), _) => task
            .expected_calls()
            .get(i)
            .and_then(|c| task.tool(&c.tool))
            .map(|tool| tool.schema.clone()),
        (None, Expect::StructuredOutput { schema, .. }) => schema.clone(),
        _ => None,
    }
}

fn why_not(task: &Task, label: Label) -> String {
    let n = task.expected_calls().len();
    match label {
        Label::ParallelCollapse if task.is_structured_output() => {
            "a structured-output task expects no call, so nothing can collapse".into()
        }
        Label::ParallelCollapse if n < 2 => {
            "only one call is expected, so nothing can collapse".into()
        }
        Label::SchemaViolation => "no argument has a type or enum to violate".into(),
        Label::HallucinatedParam => "no object in the schema defines a closed set of keys".into(),
        Label::MissingRequired => "the schema requires no argument".into(),
        Label::TypeCoercion => {
            "no argument has a type that a lossless string or number encoding could mimic".into()
        }
        Label::EscapingError => "the payload has nothing to escape".into(),
        _ => format!("no corruption rule produces {label} for this task"),
    }
}

/// A value at the predicate's path that fails it (`Some(None)`: remove the value), keeping the
/// value's JSON type except where the realistic slip changes it (`null` → `"null"`). `absent`
/// is handled by the caller, which needs the schema to invent a valid value.
fn violate(p: &Predicate, current: Option<&Value>) -> Option<Option<Value>> {
    match (&p.test, current) {
        (Test::Present, Some(_)) => Some(None),
        (Test::Equals(want), _) => Some(Some(near_miss(want))),
        (Test::OneOf(allowed), _) => {
            let first = allowed.first()?;
            let mut candidate = near_miss(first);
            while allowed.iter().any(|a| values_equal(a, &candidate)) {
                candidate = near_miss(&candidate);
            }
            Some(Some(candidate))
        }
        (Test::Matches(re), _) => ["", "?", "0", "zzz", "N/A"]
            .into_iter()
            .find(|c| !re.is_match(c))
            .map(|c| Some(Value::String(c.into()))),
        (Test::Len(b), Some(Value::String(s))) => {
            let chars: Vec<char> = s.chars().collect();
            match (b.min, b.max) {
                (Some(lo), _) if lo > 0 => Some(Some(Value::String(
                    chars.iter().take(lo as usize - 1).collect(),
                ))),
                (_, Some(hi)) => Some(Some(Value::String(
                    s.repeat(hi as usize / chars.len().max(1) + 2),
                ))),
                _ => None,
            }
        }
        (Test::Len(b), Some(Value::Array(a))) => match (b.min, b.max) {
            (Some(lo), _) if lo > 0 => Some(Some(Value::Array(
                a.iter().take(lo as usize - 1).cloned().collect(),
            ))),
            (_, Some(hi)) if !a.is_empty() => Some(Some(Value::Array(
                a.iter().cycle().take(hi as usize + 1).cloned().collect(),
            ))),
            _ => None,
        },
        _ => None,
    }
}

/// A value that differs from `v` the way real outputs differ: non-ASCII text lost, escapes
/// doubled, a number rounded through a float, `null` written as the string `"null"`.
fn near_miss(v: &Value) -> Value {
    match v {
        Value::String(s) => {
            let out = if !s.is_ascii() {
                s.chars()
                    .map(|c| if c.is_ascii() { c } else { '?' })
                    .collect()
            } else if s.contains('\n') {
                s.replace('\n', "\\n")
            } else if s.contains('\\') {
                s.replace('\\', "\\\\")
            } else if s.contains('"') {
                s.replace('"', "")
            } else {
                format!("{s}x")
            };
            Value::String(out)
        }
        Value::Number(n) => {
            let lit = n.to_string();
            let via_float = lit.parse::<f64>().ok().map(|f| format!("{f:e}"));
            if let Some(f) =
                via_float.and_then(|f| serde_json::from_str::<serde_json::Number>(&f).ok())
                && !crate::json::numbers_equal(&f, n)
            {
                return Value::Number(f);
            }
            match lit.parse::<i128>() {
                Ok(i) => Value::Number(
                    serde_json::from_str(&(i + 1).to_string()).unwrap_or_else(|_| n.clone()),
                ),
                Err(_) => Value::Number(
                    serde_json::from_str(&format!("{lit}1")).unwrap_or_else(|_| n.clone()),
                ),
            }
        }
        Value::Bool(b) => Value::Bool(!b),
        // The slip a model makes with null is writing it as a string.
        Value::Null => Value::String("null".into()),
        // A collection differs by its first element, the way a rounded id or a mangled string
        // differs inside an otherwise intact list.
        Value::Array(a) => match a.split_first() {
            Some((first, rest)) => {
                let mut out = vec![near_miss(first)];
                out.extend(rest.iter().cloned());
                Value::Array(out)
            }
            None => Value::Array(vec![Value::Null]),
        },
        Value::Object(o) => {
            let mut out = o.clone();
            match o.iter().next() {
                Some((k, v)) => {
                    out.insert(k.clone(), near_miss(v));
                }
                None => {
                    out.insert("unrequested".into(), Value::Null);
                }
            }
            Value::Object(out)
        }
    }
}

fn predicate_variants(task: &Task, label: Label, out: &mut Vec<Corruption>) {
    let ts = targets(task);
    let where_of = |t: &Target| -> Vec<Predicate> {
        match (&task.expect, t.call) {
            (Expect::Calls { calls, .. }, Some(i)) => calls[i].where_.clone(),
            (Expect::StructuredOutput { where_, .. }, None) => where_.clone(),
            _ => Vec::new(),
        }
    };
    for t in &ts {
        for (k, p) in where_of(t).iter().enumerate() {
            if p.label != label {
                continue;
            }
            let which = t
                .call
                .map(|i| format!("call{}", i + 1))
                .unwrap_or_else(|| "output".into());
            // A round trip fails on every family of mangling that can touch its text: one
            // variant each, so each family is proven to be caught.
            if let Test::Roundtrip(r) = &p.test {
                for m in r.applicable() {
                    let Some(mangled) = m.apply(&r.text) else {
                        continue;
                    };
                    if let Some(payload) = with_text_at(task, t, &p.path, &r.text, &mangled) {
                        out.push(Corruption {
                            name: format!("{label}/predicate_{which}_{k}_{}", m.name()),
                            reply: with_payload(task, t, &payload),
                        });
                    }
                }
                continue;
            }
            let change = if matches!(p.test, Test::Absent) && t.payload.pointer(&p.path).is_none() {
                // An invented value the schema accepts, so only the predicate can catch it.
                let schema = target_schema(task, t);
                let raw = t.schema.as_ref();
                invented_values(raw.and_then(|r| schema_at(r, &p.path)))
                    .into_iter()
                    .find(|v| {
                        schema.as_ref().is_none_or(|s| {
                            s.validator
                                .is_valid(&insert(&t.payload, &p.path, v.clone()))
                        })
                    })
                    .map(Some)
            } else {
                violate(p, t.payload.pointer(&p.path))
            };
            let Some(change) = change else {
                continue;
            };
            let payload = match change {
                Some(v) if t.payload.pointer(&p.path).is_some() => set(&t.payload, &p.path, v),
                Some(v) => insert(&t.payload, &p.path, v),
                None => remove(&t.payload, &p.path),
            };
            out.push(Corruption {
                name: format!("{label}/predicate_{which}_{k}"),
                reply: with_payload(task, t, &payload),
            });
        }
    }
    if let Expect::Calls { across, .. } = &task.expect {
        for (k, p) in across.iter().enumerate() {
            if p.label != label || !matches!(p.test, Test::Distinct) {
                continue;
            }
            let Some(first) = ts.first().and_then(|t| t.payload.pointer(&p.path)).cloned() else {
                continue;
            };
            let calls: Vec<(String, Value)> = gold_calls(task)
                .into_iter()
                .map(|(n, a)| (n, set(&a, &p.path, first.clone())))
                .collect();
            out.push(Corruption {
                name: format!("{label}/across_{k}_not_distinct"),
                reply: reply_of(&calls),
            });
        }
    }
}

/// The target's payload with `text` at `path` replaced by `replacement` (inside a longer gold
/// value, only that text), when the result still passes the schema: a variant meant for a
/// predicate must not be caught by an earlier stage.
fn with_text_at(
    task: &Task,
    t: &Target,
    path: &str,
    text: &str,
    replacement: &str,
) -> Option<Value> {
    let current = t.payload.pointer(path)?.as_str()?;
    let value = if current.contains(text) {
        current.replacen(text, replacement, 1)
    } else {
        replacement.to_string()
    };
    let payload = set(&t.payload, path, Value::String(value));
    let schema = target_schema(task, t);
    schema
        .is_none_or(|s| s.validator.is_valid(&payload))
        .then_some(payload)
}

/// Replies that are *not* escaping failures on a task with `roundtrip` predicates (SPEC §2.1):
/// the text intact with words appended, and a different text. Each must pass conformance (the
/// difference is value accuracy's business). Empty for a task without such a predicate.
pub fn roundtrip_survivors(task: &Task) -> Vec<Corruption> {
    let mut out = Vec::new();
    for t in targets(task) {
        let preds = match (&task.expect, t.call) {
            (Expect::Calls { calls, .. }, Some(i)) => calls[i].where_.clone(),
            (Expect::StructuredOutput { where_, .. }, None) => where_.clone(),
            _ => Vec::new(),
        };
        let which = t
            .call
            .map(|i| format!("call{}", i + 1))
            .unwrap_or_else(|| "output".into());
        for (k, p) in preds.iter().enumerate() {
            let Test::Roundtrip(r) = &p.test else {
                continue;
            };
            let appended = format!("{}, Hauptstraße 5, 10115 Berlin", r.text);
            let variants = [
                ("appended_suffix", appended.as_str()),
                ("different_text", "a different text altogether"),
            ];
            for (name, replacement) in variants {
                if let Some(payload) = with_text_at(task, &t, &p.path, &r.text, replacement) {
                    out.push(Corruption {
                        name: format!("pass/roundtrip_{which}_{k}_{name}"),
                        reply: with_payload(task, &t, &payload),
                    });
                }
            }
        }
    }
    out
}
