//! The `error` style's feedback (SPEC §11): what a validator in front of the model says about a
//! *visible* failure, worded as frameworks word it, from the request (its tools, schemas,
//! `tool_choice`, `response_format`) and the answer alone — never from the task's expected
//! calls, which no validator in front of a model has.
//!
//! The wording follows the messages users of OpenAI-compatible servers meet: pydantic's
//! validation errors (`1 validation error for get_weather` / `city` / `  Field required
//! [type=missing, input_value={...}, input_type=dict]`, the text LangChain and pydantic-ai
//! send back for a tool call whose arguments fail the tool's model), pydantic's
//! `Invalid JSON: <parser message> [type=json_invalid, ...]` (its parser, jiter, words errors
//! as serde_json does, so serde_json's message is the one a user would see), LangChain's
//! `X is not a valid tool, try one of [a, b].` for a name that was not offered, and
//! pydantic-ai's closing `Fix the errors and try again.`. The report's own detail is never
//! copied: 13 of 39 answers to it repeated it back (issue 46).

use crate::score::Verdict;
use crate::score::wire::{Completion, WireArgs};
use crate::taxonomy::Label;
use serde_json::Value;

/// The last line of every `error` feedback (pydantic-ai's words; the mock recognises the style
/// by it).
pub const ERROR_TAIL: &str = "Fix the errors and try again.";

/// The `error` feedback for a failure with `label`. A silent failure (one only the task's
/// expected calls reveal) gets no feedback at all (`collect --feedback` never sends one); asked
/// anyway, this says only what the request shows.
pub fn message(
    request: &Value,
    completion: &Completion,
    verdict: &Verdict,
    label: Label,
) -> String {
    if !super::visible(verdict) {
        // Only the answer key knows what is wrong: a validator would have let it through.
        return format!("The answer was not accepted.\n{ERROR_TAIL}");
    }
    let body = match label {
        Label::MalformedJson | Label::EscapingError => invalid_json(completion, verdict),
        Label::Truncation => {
            let mut s = String::from(
                "The response is incomplete: generation stopped at the max_tokens limit (finish_reason \"length\").",
            );
            if answer_text(completion, verdict).is_some_and(|t| !parses(t)) {
                s.push('\n');
                s.push_str(&invalid_json(completion, verdict));
            }
            s
        }
        Label::NoCall => {
            "Plain text responses are not permitted, please include your response in a tool call."
                .to_string()
        }
        Label::WrongTool => wrong_tool(request, verdict),
        Label::SpuriousCall => {
            "Tool calls are not permitted for this request (tool_choice is \"none\"): answer in text."
                .to_string()
        }
        _ => schema(request, verdict),
    };
    format!("{body}\n{ERROR_TAIL}")
}

/// The arguments text of the failing call, or a structured-output answer's content.
fn answer_text<'a>(completion: &'a Completion, verdict: &'a Verdict) -> Option<&'a str> {
    match failing(verdict) {
        Some(c) => c.arguments_raw.as_deref(),
        None => completion
            .tool_calls
            .first()
            .and_then(|c| match &c.arguments {
                WireArgs::Text(s) => Some(s.as_str()),
                _ => None,
            })
            .or(completion.content.as_deref()),
    }
}

fn parses(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok()
}

/// The call the verdict blames, or the first.
fn failing(verdict: &Verdict) -> Option<&crate::score::Call> {
    verdict
        .fail_call
        .and_then(|i| verdict.calls.get(i))
        .or_else(|| verdict.calls.first())
}

/// `1 validation error for <tool>` (or `for the response` for a structured-output answer).
fn heading(verdict: &Verdict) -> String {
    match failing(verdict).and_then(|c| c.name.as_deref()) {
        Some(name) if !name.is_empty() => format!("1 validation error for {name}"),
        _ => "1 validation error for the response".to_string(),
    }
}

fn invalid_json(completion: &Completion, verdict: &Verdict) -> String {
    let text = answer_text(completion, verdict).unwrap_or("");
    let why = match serde_json::from_str::<Value>(text) {
        Err(e) => format!("Invalid JSON: {e}"),
        Ok(v) if !v.is_object() && failing(verdict).is_some() => {
            format!(
                "Input should be an object [type=dict_type, input_value={}, input_type={}]",
                repr(&v),
                py_type(&v)
            )
        }
        Ok(_) => "Invalid JSON: the string escaping does not decode".to_string(),
    };
    let why = if why.starts_with("Invalid JSON") {
        format!(
            "{why} [type=json_invalid, input_value={}, input_type=str]",
            repr_str(text)
        )
    } else {
        why
    };
    format!("{}\n  {why}", heading(verdict))
}

/// LangChain's message for a name that was not offered; the request's `tool_choice` for a
/// name it forbids.
fn wrong_tool(request: &Value, verdict: &Verdict) -> String {
    let name = failing(verdict)
        .and_then(|c| c.name.clone())
        .unwrap_or_default();
    let offered = offered_names(request);
    if let Some(named) = request
        .pointer("/tool_choice/function/name")
        .and_then(Value::as_str)
        && named != name
        && offered.iter().any(|o| o == &name)
    {
        return format!("tool_choice requires a call to {named}, not {name}.");
    }
    format!(
        "{name} is not a valid tool, try one of [{}].",
        offered.join(", ")
    )
}

/// The names of the tools the request offered, in its order.
pub fn offered_names(request: &Value) -> Vec<String> {
    request
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t.pointer("/function/name").or_else(|| t.get("name")))
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A schema-stage failure as pydantic words it: the field's location, the message for the
/// schema keyword that failed, the value and its type.
fn schema(request: &Value, verdict: &Verdict) -> String {
    let call = failing(verdict);
    let args = match call {
        Some(c) => c.arguments.clone(),
        None => verdict.output.clone(),
    }
    .unwrap_or(Value::Null);
    let pointer = verdict.fail_path.clone().unwrap_or_default();
    let loc = location(&pointer);
    let keyword = verdict.schema_keyword.as_deref().unwrap_or("");
    let root = match call.and_then(|c| c.name.as_deref()) {
        Some(name) => tool_parameters(request, name),
        None => request
            .pointer("/response_format/json_schema/schema")
            .or_else(|| request.pointer("/response_format/schema"))
            .cloned(),
    };
    let field = root.as_ref().and_then(|r| schema_at(r, &pointer));
    let value = args.pointer(&pointer);
    let (message, kind) = keyword_message(field, keyword);
    // A missing field shows the object it is missing from, as pydantic does.
    let shown = if keyword == "required" {
        parent(&pointer).and_then(|p| args.pointer(&p)).cloned()
    } else {
        value.cloned()
    }
    .unwrap_or(Value::Null);
    format!(
        "{}\n{loc}\n  {message} [type={kind}, input_value={}, input_type={}]",
        heading(verdict),
        repr(&shown),
        py_type(&shown)
    )
}

/// Pydantic's message and error type for a failed JSON Schema `keyword`, with the bounds and
/// allowed values read from the field's schema.
fn keyword_message(field: Option<&Value>, keyword: &str) -> (String, String) {
    match keyword {
        "required" => ("Field required".to_string(), "missing".to_string()),
        "properties" | "additionalProperties" => (
            "Extra inputs are not permitted".to_string(),
            "extra_forbidden".to_string(),
        ),
        "type" => {
            let want = field
                .and_then(|f| f.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let (word, kind) = match want {
                "integer" => ("a valid integer", "int_type"),
                "number" => ("a valid number", "float_type"),
                "boolean" => ("a valid boolean", "bool_type"),
                "string" => ("a valid string", "string_type"),
                "array" => ("a valid list", "list_type"),
                "object" => ("a valid dictionary", "dict_type"),
                "null" => ("None", "none_required"),
                _ => ("of the declared type", "type_error"),
            };
            (format!("Input should be {word}"), kind.to_string())
        }
        "enum" => {
            let allowed: Vec<String> = field
                .and_then(|f| f.get("enum"))
                .and_then(Value::as_array)
                .map(|e| e.iter().map(repr).collect())
                .unwrap_or_default();
            (
                format!("Input should be {}", or_list(&allowed)),
                "enum".into(),
            )
        }
        "const" => (
            format!(
                "Input should be {}",
                field
                    .and_then(|f| f.get("const"))
                    .map(repr)
                    .unwrap_or_default()
            ),
            "literal_error".into(),
        ),
        "pattern" => (
            format!(
                "String should match pattern '{}'",
                bound(field, "pattern").unwrap_or_default()
            ),
            "string_pattern_mismatch".into(),
        ),
        "minimum" => limit(
            field,
            keyword,
            "greater than or equal to",
            "greater_than_equal",
        ),
        "maximum" => limit(field, keyword, "less than or equal to", "less_than_equal"),
        "exclusiveMinimum" => limit(field, keyword, "greater than", "greater_than"),
        "exclusiveMaximum" => limit(field, keyword, "less than", "less_than"),
        "minLength" => count(
            field,
            keyword,
            "String should have at least",
            "characters",
            "string_too_short",
        ),
        "maxLength" => count(
            field,
            keyword,
            "String should have at most",
            "characters",
            "string_too_long",
        ),
        "minItems" => count(
            field,
            keyword,
            "List should have at least",
            "items after validation",
            "too_short",
        ),
        "maxItems" => count(
            field,
            keyword,
            "List should have at most",
            "items after validation",
            "too_long",
        ),
        "format" => (
            format!(
                "Value error, not a valid {}",
                bound(field, "format").unwrap_or_else(|| "value".into())
            ),
            "value_error".into(),
        ),
        other => (
            format!("Value error, the value does not satisfy `{other}` of the schema"),
            "value_error".into(),
        ),
    }
}

fn limit(field: Option<&Value>, keyword: &str, words: &str, kind: &str) -> (String, String) {
    (
        format!(
            "Input should be {words} {}",
            bound(field, keyword).unwrap_or_default()
        ),
        kind.to_string(),
    )
}

fn count(
    field: Option<&Value>,
    keyword: &str,
    head: &str,
    unit: &str,
    kind: &str,
) -> (String, String) {
    (
        format!(
            "{head} {} {unit}",
            bound(field, keyword).unwrap_or_default()
        ),
        kind.to_string(),
    )
}

/// A schema keyword's value as text (a string without its quotes).
fn bound(field: Option<&Value>, keyword: &str) -> Option<String> {
    field.and_then(|f| f.get(keyword)).map(|v| match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    })
}

/// `'a', 'b' or 'c'`, as pydantic lists allowed values.
fn or_list(values: &[String]) -> String {
    match values {
        [] => "one of the allowed values".to_string(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// A JSON Pointer as pydantic's location: `/a/0/b` → `a.0.b`; the root → `value`.
fn location(pointer: &str) -> String {
    let segments: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    if segments.is_empty() {
        "value".to_string()
    } else {
        segments.join(".")
    }
}

/// The pointer of the object holding `pointer`'s last segment.
fn parent(pointer: &str) -> Option<String> {
    pointer.rsplit_once('/').map(|(p, _)| p.to_string())
}

/// The parameters schema of the offered tool `name`.
fn tool_parameters(request: &Value, name: &str) -> Option<Value> {
    request
        .get("tools")?
        .as_array()?
        .iter()
        .map(|t| t.get("function").unwrap_or(t))
        .find(|f| f.get("name").and_then(Value::as_str) == Some(name))?
        .get("parameters")
        .cloned()
}

/// The sub-schema describing the value at `pointer`, through `properties` and `items`.
fn schema_at<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    let mut at = root;
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        at = match at.get("properties").and_then(|p| p.get(&seg)) {
            Some(s) => s,
            None if seg.parse::<usize>().is_ok() => at.get("items")?,
            None => return None,
        };
    }
    Some(at)
}

/// A value as Python shows it in pydantic's messages (`'Paris'`, `3`, `True`, `{'a': 1}`),
/// bounded: a long value is cut with `...`, as pydantic cuts it.
fn repr(v: &Value) -> String {
    let s = match v {
        Value::Null => "None".to_string(),
        Value::Bool(true) => "True".to_string(),
        Value::Bool(false) => "False".to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => return repr_str(s),
        Value::Array(a) => format!("[{}]", a.iter().map(repr).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{}: {}", repr_str(k), repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    shorten(s)
}

/// A string as Python's `repr` shows it, bounded.
fn repr_str(s: &str) -> String {
    let escaped = s
        .replace('\\', "\\\\")
        .replace('\'', "\\'")
        .replace('\n', "\\n");
    shorten(format!("'{escaped}'"))
}

/// Pydantic cuts a long input_value in its middle; so does this, on a character boundary.
fn shorten(s: String) -> String {
    const MAX: usize = 100;
    let n = s.chars().count();
    if n <= MAX {
        return s;
    }
    let head: String = s.chars().take(48).collect();
    let tail: String = s.chars().skip(n - 47).collect();
    format!("{head}...{tail}")
}

/// The Python type name pydantic gives a JSON value.
fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_locations_read_as_pydantic_prints_them() {
        assert_eq!(location("/a/0/b~1c"), "a.0.b/c");
        assert_eq!(location(""), "value");
        assert_eq!(
            repr(&serde_json::json!({"city": "Paris", "n": 3, "ok": true, "x": null})),
            "{'city': 'Paris', 'n': 3, 'ok': True, 'x': None}"
        );
        assert_eq!(repr_str("it's"), r"'it\'s'");
        let long = "x".repeat(300);
        let short = repr_str(&long);
        assert_eq!(short.chars().count(), 98);
        assert!(short.contains("..."));
        assert_eq!(
            or_list(&["'a'".into(), "'b'".into(), "'c'".into()]),
            "'a', 'b' or 'c'"
        );
    }
}
