//! The standard mechanical repair per label (SPEC §11), what a caller can do to a failed answer
//! without asking anyone: coerce a value to its declared type (`type_coercion`), drop the
//! arguments the schema does not declare (`hallucinated_param`), undo the escaping damage that
//! `escaping_error` names ([`super::repair`]). Labels with no mechanical repair get none.
//!
//! The repaired answer is scored again by the same decision procedure, so "repair works" means
//! exactly "the repaired call passes every stage", not "the repair changed something".

use super::repair::find_repair;
use super::wire::{Completion, WireArgs};
use super::{Verdict, parse, score_parsed};
use crate::task::{Expect, Task};
use crate::taxonomy::Label;
use crate::transcript::Transcript;
use serde_json::Value;

/// How deep a schema's `$ref`s and a value's nesting are followed: schemas and arguments come
/// from servers and task files, and a reference cycle must not recurse forever.
const MAX_DEPTH: usize = 64;

/// What the caller does to an answer that failed with a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mend {
    /// Turn each value of a wrong type into its declared type, where that is lossless.
    Coerce,
    /// Remove every argument the governing object schema does not declare.
    DropUndeclared,
    /// Parse the arguments after the escaping repair that makes them parse.
    Unescape,
}

impl Mend {
    /// The standard repair for `label`, if it has one.
    pub fn for_label(label: Label) -> Option<Mend> {
        match label {
            Label::TypeCoercion => Some(Mend::Coerce),
            Label::HallucinatedParam => Some(Mend::DropUndeclared),
            Label::EscapingError => Some(Mend::Unescape),
            _ => None,
        }
    }

    /// In words, for pages.
    pub fn describe(self) -> &'static str {
        match self {
            Mend::Coerce => "coerce each value to its declared type",
            Mend::DropUndeclared => "drop the arguments the schema does not declare",
            Mend::Unescape => "apply the JSON escaping repair",
        }
    }
}

/// The verdict on `t` after the standard repair of the label `verdict` gave it; `None` when the
/// label has no mechanical repair, or the repair finds nothing to change (then the answer is
/// what it was: still failing).
pub fn repaired(task: &Task, t: &Transcript, verdict: &Verdict) -> Option<Verdict> {
    repaired_parsed(task, t, parse(t).as_ref().ok(), verdict)
}

/// [`repaired`] of a response already parsed (`completion`, `None` when it did not parse).
pub fn repaired_parsed(
    task: &Task,
    t: &Transcript,
    completion: Option<&Completion>,
    verdict: &Verdict,
) -> Option<Verdict> {
    let mend = Mend::for_label(verdict.label()?)?;
    let fixed = mend_completion(task, t.request.as_deref(), completion?, mend)?;
    Some(score_parsed(task, t, &Ok(fixed)))
}

/// The completion with `mend` applied to every call's arguments (or to the structured output),
/// or `None` when nothing changed.
pub fn mend_completion(
    task: &Task,
    request: Option<&Value>,
    c: &Completion,
    mend: Mend,
) -> Option<Completion> {
    let mut out = c.clone();
    let mut changed = false;
    if let Expect::StructuredOutput { schema, .. } = &task.expect {
        let sent = request.and_then(|r| {
            r.get("response_format")
                .and_then(crate::task::response_format_schema)
        });
        let schema = sent.or(schema.as_ref().map(|s| &s.raw))?;
        let text = c.content.as_deref()?;
        let fixed = mend_text(text.trim(), schema, mend)?;
        out.content = Some(fixed.to_string());
        return Some(out);
    }
    for call in &mut out.tool_calls {
        let Some(name) = call.name.as_deref() else {
            continue;
        };
        let Some(schema) = tool_schema(task, request, name) else {
            continue;
        };
        let fixed = match &call.arguments {
            WireArgs::Text(text) => mend_text(text, &schema, mend),
            WireArgs::Json(v) => mend_value(v.clone(), &schema, mend),
            WireArgs::Absent => None,
        };
        if let Some(v) = fixed {
            call.arguments = WireArgs::Text(v.to_string());
            changed = true;
        }
    }
    changed.then_some(out)
}

/// The parameters schema of tool `name` as the request sent it, else the task's.
fn tool_schema(task: &Task, request: Option<&Value>, name: &str) -> Option<Value> {
    let sent = request
        .and_then(|r| r.get("tools"))
        .and_then(Value::as_array)
        .and_then(|tools| {
            tools
                .iter()
                .find(|t| t.pointer("/function/name").and_then(Value::as_str) == Some(name))
        })
        .and_then(|t| t.pointer("/function/parameters"))
        .cloned();
    sent.or_else(|| task.tool(name).map(|t| t.schema.raw.clone()))
}

/// Arguments text after `mend`, when it changed them.
fn mend_text(text: &str, schema: &Value, mend: Mend) -> Option<Value> {
    match mend {
        Mend::Unescape => match serde_json::from_str::<Value>(text) {
            // Parsed, but to a string holding the object: the payload was encoded twice.
            Ok(Value::String(inner)) => serde_json::from_str::<Value>(&inner)
                .ok()
                .filter(Value::is_object),
            Ok(_) => None,
            Err(_) => find_repair(text, Value::is_object).map(|(_, v)| v),
        },
        _ => mend_value(serde_json::from_str(text).ok()?, schema, mend),
    }
}

/// The value after `mend` against `schema`, when it changed.
pub fn mend_value(mut v: Value, schema: &Value, mend: Mend) -> Option<Value> {
    let changed = match mend {
        Mend::Coerce => coerce(&mut v, schema, schema, 0),
        Mend::DropUndeclared => drop_undeclared(&mut v, schema, schema, 0),
        Mend::Unescape => false,
    };
    changed.then_some(v)
}

/// `schema` with a local `$ref` (`#/…`) followed, as far as [`MAX_DEPTH`] allows.
fn resolve<'a>(mut schema: &'a Value, root: &'a Value) -> &'a Value {
    for _ in 0..MAX_DEPTH {
        let Some(r) = schema.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p)) else {
            break;
        };
        schema = target;
    }
    schema
}

/// The types `schema` declares (`type` as a string or a list); empty when it declares none.
fn declared_types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|x| x.fract() == 0.0),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        _ => true,
    }
}

/// The lossless coercions of SPEC §2.1's `type_coercion`, towards one of `types`.
fn coerced(v: &Value, types: &[&str]) -> Option<Value> {
    for t in types {
        let c = match (t, v) {
            (&("integer" | "number"), Value::String(s)) => {
                serde_json::from_str::<Value>(s).ok().filter(|n| {
                    // Canonical literals only ("42", not "042" or " 42"), as SPEC §2.1 says.
                    let canonical = n.to_string();
                    n.is_number() && has_type(n, t) && canonical.as_str() == s.as_str()
                })
            }
            (&"boolean", Value::String(s)) => match s.as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            (&"null", Value::String(s)) if s == "null" => Some(Value::Null),
            (&("object" | "array"), Value::String(s)) => serde_json::from_str::<Value>(s)
                .ok()
                .filter(|x| has_type(x, t)),
            (&"string", Value::Number(n)) => Some(Value::String(n.to_string())),
            _ => None,
        };
        if c.is_some() {
            return c;
        }
    }
    None
}

fn coerce(v: &mut Value, schema: &Value, root: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let schema = resolve(schema, root);
    let mut changed = false;
    let types = declared_types(schema);
    if !types.is_empty()
        && !types.iter().any(|t| has_type(v, t))
        && let Some(c) = coerced(v, &types)
    {
        *v = c;
        changed = true;
    }
    match v {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, x) in map.iter_mut() {
                    if let Some(s) = props.get(k) {
                        changed |= coerce(x, s, root, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items").filter(|s| s.is_object()) {
                for x in items.iter_mut() {
                    changed |= coerce(x, s, root, depth + 1);
                }
            }
        }
        _ => {}
    }
    changed
}

fn drop_undeclared(v: &mut Value, schema: &Value, root: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let schema = resolve(schema, root);
    let mut changed = false;
    match v {
        Value::Object(map) => {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                return false;
            };
            // A typed map or pattern-keyed properties declare no closed set of keys (as the
            // scorer's `hallucinated_param` rule reads them): nothing there is dropped.
            let closed = !schema
                .get("additionalProperties")
                .is_some_and(Value::is_object)
                && schema.get("patternProperties").is_none();
            if closed {
                let before = map.len();
                map.retain(|k, _| props.contains_key(k));
                changed |= map.len() != before;
            }
            for (k, x) in map.iter_mut() {
                if let Some(s) = props.get(k) {
                    changed |= drop_undeclared(x, s, root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items").filter(|s| s.is_object()) {
                for x in items.iter_mut() {
                    changed |= drop_undeclared(x, s, root, depth + 1);
                }
            }
        }
        _ => {}
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "ok": {"type": "boolean"},
                "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}},
                "name": {"type": "string"}
            },
            "required": ["n"],
            "$defs": {"tag": {"type": "object", "properties": {"id": {"type": "integer"}}}}
        })
    }

    #[test]
    fn coercion_turns_lossless_encodings_into_the_declared_type_only() {
        let v = json!({"n": "42", "ok": "true", "tags": [{"id": "7"}], "name": 3});
        assert_eq!(
            mend_value(v, &schema(), Mend::Coerce),
            Some(json!({"n": 42, "ok": true, "tags": [{"id": 7}], "name": "3"}))
        );
        // "yes" is not a lossless boolean, "4.5" not an integer: nothing to coerce.
        let v = json!({"n": "4.5", "ok": "yes"});
        assert_eq!(mend_value(v, &schema(), Mend::Coerce), None);
        // A JSON-encoded array where the array belongs.
        let v = json!({"n": 1, "tags": "[{\"id\": 2}]"});
        assert_eq!(
            mend_value(v, &schema(), Mend::Coerce),
            Some(json!({"n": 1, "tags": [{"id": 2}]}))
        );
    }

    #[test]
    fn dropping_removes_undeclared_keys_at_any_depth_but_not_in_open_maps() {
        let v = json!({"n": 1, "unit": "c", "tags": [{"id": 1, "colour": "red"}]});
        assert_eq!(
            mend_value(v, &schema(), Mend::DropUndeclared),
            Some(json!({"n": 1, "tags": [{"id": 1}]}))
        );
        let open = json!({"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}});
        assert_eq!(
            mend_value(json!({"a": 1, "b": "x"}), &open, Mend::DropUndeclared),
            None
        );
    }

    #[test]
    fn unescaping_parses_what_one_repair_fixes_and_double_encoded_payloads() {
        let s = schema();
        assert_eq!(
            mend_text(r#"{'n': 1}"#, &s, Mend::Unescape),
            Some(json!({"n": 1}))
        );
        assert_eq!(
            mend_text(r#""{\"n\": 2}""#, &s, Mend::Unescape),
            Some(json!({"n": 2}))
        );
        assert_eq!(mend_text(r#"{"n": 1"#, &s, Mend::Unescape), None);
    }

    #[test]
    fn a_ref_cycle_ends() {
        let s = json!({"$ref": "#", "type": "object"});
        assert_eq!(mend_value(json!({"a": 1}), &s, Mend::DropUndeclared), None);
    }
}
