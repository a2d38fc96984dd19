//! Stage 4, schema: every violation of a matched call's arguments (or a structured output)
//! against its JSON Schema, each given the label that SPEC §2.1's precedence assigns.
//!
//! jsonschema decides validity. Two questions it cannot answer are answered here:
//! - which keys are *hallucinated*: a key the governing object schema does not define, even
//!   where `additionalProperties: true` would let it through, so the schema has to be walked
//!   along the instance (through `$ref`, `allOf` and the best-fitting `anyOf`/`oneOf` branch);
//! - which type errors are *lossless coercions*: proven by coercing the value and validating the
//!   whole instance again.

use crate::json::{pointer_push, preview, show_pointer, type_name};
use crate::task::Schema;
use crate::taxonomy::Label;
use regex::Regex;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One violation, labelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub label: Label,
    /// JSON Pointer into the arguments.
    pub path: String,
    /// The JSON Schema keyword (or `properties` for a hallucinated key).
    pub keyword: String,
    pub detail: String,
    /// The offending value is empty (`""`, `[]`, `{}`): HiTEC's "empty parameter value".
    pub empty_value: bool,
}

/// Every violation of `instance` against `schema`, hallucinated keys and missing required
/// properties first, then coercible type errors, then the rest. Empty when valid.
pub fn violations(schema: &Schema, instance: &Value) -> Vec<Violation> {
    let walker = Walker { root: &schema.raw };
    let mut found = Found::default();
    walker.walk(&schema.raw, instance, String::new(), 0, &mut found);

    let mut out = Vec::new();
    for (path, defined) in &found.hallucinated {
        let key = path.rsplit('/').next().unwrap_or(path);
        let key = key.replace("~1", "/").replace("~0", "~");
        let defined = if defined.is_empty() {
            "none".to_string()
        } else {
            defined.join(", ")
        };
        out.push(Violation {
            label: Label::HallucinatedParam,
            path: path.clone(),
            keyword: "properties".into(),
            detail: format!(
                "argument {:?} at {} is not defined by the schema (defined there: {defined})",
                key,
                show_pointer(path)
            ),
            empty_value: false,
        });
    }
    for path in &found.missing {
        out.push(Violation {
            label: Label::MissingRequired,
            path: path.clone(),
            keyword: "required".into(),
            detail: format!("required argument {} is absent", show_pointer(path)),
            empty_value: false,
        });
    }

    let errors = errors(schema, instance);
    for e in &errors {
        let already = match e.keyword.as_str() {
            "required" | "dependentRequired" => !found.missing.is_empty(),
            "additionalProperties" | "unevaluatedProperties" => !found.hallucinated.is_empty(),
            _ => false,
        };
        if already {
            continue;
        }
        let label = match e.keyword.as_str() {
            "required" | "dependentRequired" => Label::MissingRequired,
            "additionalProperties" | "unevaluatedProperties" => Label::HallucinatedParam,
            _ => Label::SchemaViolation,
        };
        let value = instance.pointer(&e.path);
        if label == Label::SchemaViolation
            && let Some(c) = coercion(schema, &walker, instance, &e.path, &errors)
        {
            out.push(c);
            continue;
        }
        out.push(Violation {
            label,
            path: e.path.clone(),
            keyword: e.keyword.clone(),
            detail: format!(
                "{}: {} (keyword {})",
                show_pointer(&e.path),
                e.message,
                e.keyword
            ),
            empty_value: value.is_some_and(is_empty_value),
        });
    }
    // Precedence, then the place in the document: the choice never depends on error order.
    out.sort_by(|a, b| {
        precedence(a.label)
            .cmp(&precedence(b.label))
            .then_with(|| a.path.cmp(&b.path))
    });
    out.dedup_by(|a, b| a.label == b.label && a.path == b.path);
    out
}

/// hallucinated_param > missing_required > type_coercion > schema_violation.
pub fn precedence(l: Label) -> u8 {
    match l {
        Label::HallucinatedParam => 0,
        Label::MissingRequired => 1,
        Label::TypeCoercion => 2,
        _ => 3,
    }
}

pub fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

struct SchemaError {
    path: String,
    keyword: String,
    message: String,
    /// For a `type` error, the type(s) the schema declares there (`number`, `null or integer`).
    wants: Option<String>,
}

fn errors(schema: &Schema, instance: &Value) -> Vec<SchemaError> {
    schema
        .validator
        .iter_errors(instance)
        .map(|e| SchemaError {
            path: e.instance_path().as_str().to_string(),
            keyword: e.kind().keyword().to_string(),
            message: crate::json::clip(&e.to_string(), 200),
            wants: match e.kind() {
                jsonschema::error::ValidationErrorKind::Type { kind } => Some(match kind {
                    jsonschema::error::TypeKind::Single(t) => t.to_string(),
                    jsonschema::error::TypeKind::Multiple(ts) => ts
                        .iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(" or "),
                }),
                _ => None,
            },
        })
        .collect()
}

fn under(path: &str, prefix: &str) -> bool {
    path == prefix || path.starts_with(&format!("{prefix}/"))
}

/// The lossless coercions of SPEC §2.1: what a value of the wrong type may be an encoding of.
fn coercions(v: &Value) -> Vec<(Value, &'static str)> {
    let mut out = Vec::new();
    match v {
        Value::String(s) => {
            // A JSON number, written as JSON writes one (compiled once, not per string).
            static CANONICAL: std::sync::LazyLock<Option<Regex>> = std::sync::LazyLock::new(|| {
                Regex::new(r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$").ok()
            });
            if CANONICAL.as_ref().is_some_and(|re| re.is_match(s))
                && let Ok(n) = serde_json::from_str::<serde_json::Number>(s)
            {
                out.push((Value::Number(n), "a string holding a number"));
            }
            match s.as_str() {
                "true" => out.push((Value::Bool(true), "a string holding a boolean")),
                "false" => out.push((Value::Bool(false), "a string holding a boolean")),
                "null" => out.push((Value::Null, "the string \"null\"")),
                _ => {}
            }
            let t = s.trim();
            if (t.starts_with('{') || t.starts_with('['))
                && let Ok(parsed) = serde_json::from_str::<Value>(t)
                && (parsed.is_object() || parsed.is_array())
            {
                let what = if parsed.is_object() {
                    "a string holding JSON text of an object"
                } else {
                    "a string holding JSON text of an array"
                };
                out.push((parsed, what));
            }
        }
        Value::Number(n) => out.push((
            Value::String(n.to_string()),
            "a number where a string belongs",
        )),
        _ => {}
    }
    out
}

/// Tries to prove that the error(s) at `path` come from a lossless encoding of a valid value:
/// coerce the value there (or a leaf below it) and validate again; the coercion counts when no
/// error is left at or below `path`, none appears elsewhere, and no key there becomes
/// hallucinated or missing.
fn coercion(
    schema: &Schema,
    walker: &Walker,
    instance: &Value,
    path: &str,
    before: &[SchemaError],
) -> Option<Violation> {
    let at = instance.pointer(path)?;
    let mut spots = vec![path.to_string()];
    leaves(at, path.to_string(), &mut spots, 32);
    let outside_before = before.iter().filter(|e| !under(&e.path, path)).count();
    for spot in spots {
        let Some(original) = instance.pointer(&spot) else {
            continue;
        };
        for (coerced, what) in coercions(original) {
            let mut copy = instance.clone();
            if !crate::json::replace_at(&mut copy, &spot, coerced.clone()) {
                continue;
            }
            let after = errors(schema, &copy);
            if after.iter().any(|e| under(&e.path, path)) || after.len() > outside_before {
                continue;
            }
            let mut found = Found::default();
            walker.walk(&schema.raw, &copy, String::new(), 0, &mut found);
            if found.hallucinated.keys().any(|p| under(p, &spot))
                || found.missing.iter().any(|p| under(p, &spot))
            {
                continue;
            }
            // Name the type the schema declares there (`number` for "300000", not the
            // coerced value's own `integer`); a union without a type error of its own at
            // that place falls back to the coerced value's type.
            let wants = before
                .iter()
                .find(|e| e.path == spot && e.wants.is_some())
                .and_then(|e| e.wants.clone())
                .unwrap_or_else(|| type_name(&coerced).to_string());
            return Some(Violation {
                label: Label::TypeCoercion,
                path: spot.clone(),
                keyword: "type".into(),
                detail: format!(
                    "{} is {} ({}); the schema wants {wants} there, and the coerced value {} validates",
                    show_pointer(&spot),
                    preview(original, 60),
                    what,
                    preview(&coerced, 60)
                ),
                empty_value: false,
            });
        }
    }
    None
}

fn leaves(v: &Value, path: String, out: &mut Vec<String>, max: usize) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if out.len() >= max {
                    return;
                }
                let p = pointer_push(&path, k);
                if matches!(x, Value::String(_) | Value::Number(_)) {
                    out.push(p.clone());
                }
                leaves(x, p, out, max);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                if out.len() >= max {
                    return;
                }
                let p = format!("{path}/{i}");
                if matches!(x, Value::String(_) | Value::Number(_)) {
                    out.push(p.clone());
                }
                leaves(x, p, out, max);
            }
        }
        _ => {}
    }
}

#[derive(Default)]
struct Found {
    /// Pointer of each hallucinated key → the keys defined at that place.
    hallucinated: BTreeMap<String, Vec<String>>,
    missing: BTreeSet<String>,
}

/// Walks a schema along an instance.
struct Walker<'a> {
    root: &'a Value,
}

const MAX_DEPTH: usize = 128;

impl<'a> Walker<'a> {
    /// Follows a local `$ref` (`#`, `#/$defs/x`, `#/definitions/x`).
    fn deref(&self, r: &str) -> Option<&'a Value> {
        let frag = r.strip_prefix('#')?;
        let frag = frag.replace("%25", "%").replace("%22", "\"");
        self.root.pointer(&frag)
    }

    /// The schemas that jointly govern `inst` at this place: the schema itself, what its `$ref`
    /// points to, its `allOf` members and the best-fitting `anyOf`/`oneOf` branch, flattened.
    fn views(&self, schema: &'a Value, inst: &Value, out: &mut Vec<&'a Value>, hops: usize) {
        if hops > 32 || !schema.is_object() {
            return;
        }
        out.push(schema);
        if let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.deref(r))
        {
            self.views(target, inst, out, hops + 1);
        }
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            for s in all {
                self.views(s, inst, out, hops + 1);
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = schema.get(key).and_then(Value::as_array)
                && let Some(best) = self.best_branch(branches, inst, hops)
            {
                self.views(best, inst, out, hops + 1);
            }
        }
    }

    fn best_branch(&self, branches: &'a [Value], inst: &Value, hops: usize) -> Option<&'a Value> {
        let mut best: Option<(i64, &'a Value)> = None;
        for b in branches {
            let mut vs = Vec::new();
            self.views(b, inst, &mut vs, hops + 1);
            if vs.iter().any(|v| !type_allows(v, inst)) {
                continue;
            }
            let mut score = 0i64;
            if let Some(obj) = inst.as_object() {
                let defined: BTreeSet<&str> = vs
                    .iter()
                    .filter_map(|v| v.get("properties").and_then(Value::as_object))
                    .flat_map(|p| p.keys().map(String::as_str))
                    .collect();
                score += obj.keys().filter(|k| defined.contains(k.as_str())).count() as i64 * 2;
                score -= obj.keys().filter(|k| !defined.contains(k.as_str())).count() as i64;
                let missing = vs
                    .iter()
                    .filter_map(|v| v.get("required").and_then(Value::as_array))
                    .flatten()
                    .filter_map(Value::as_str)
                    .filter(|r| !obj.contains_key(*r))
                    .count();
                score -= missing as i64 * 2;
                for v in &vs {
                    if let Some(props) = v.get("properties").and_then(Value::as_object) {
                        for (k, s) in props {
                            if let (Some(c), Some(x)) = (s.get("const"), obj.get(k)) {
                                score += if crate::json::values_equal(c, x) {
                                    4
                                } else {
                                    -4
                                };
                            }
                        }
                    }
                }
            }
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, b));
            }
        }
        best.map(|(_, b)| b)
    }

    fn walk(&self, schema: &'a Value, inst: &Value, path: String, depth: usize, found: &mut Found) {
        if depth > MAX_DEPTH {
            return;
        }
        let mut vs = Vec::new();
        self.views(schema, inst, &mut vs, 0);
        match inst {
            Value::Object(obj) => self.walk_object(&vs, obj, &path, depth, found),
            Value::Array(items) => {
                for v in &vs {
                    let prefix = v
                        .get("prefixItems")
                        .and_then(Value::as_array)
                        .or_else(|| v.get("items").and_then(Value::as_array));
                    let rest = v.get("items").filter(|i| i.is_object());
                    for (i, x) in items.iter().enumerate() {
                        let sub = prefix.and_then(|p| p.get(i)).or(
                            if prefix.is_some_and(|p| i < p.len()) {
                                None
                            } else {
                                rest
                            },
                        );
                        if let Some(s) = sub {
                            self.walk(s, x, format!("{path}/{i}"), depth + 1, found);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn walk_object(
        &self,
        vs: &[&'a Value],
        obj: &serde_json::Map<String, Value>,
        path: &str,
        depth: usize,
        found: &mut Found,
    ) {
        let mut defined: BTreeMap<&str, Vec<&'a Value>> = BTreeMap::new();
        let mut patterns: Vec<(Regex, &'a Value)> = Vec::new();
        let mut additional: Vec<&'a Value> = Vec::new();
        let mut required: BTreeSet<&str> = BTreeSet::new();
        let (mut closed, mut open) = (false, false);
        for v in vs {
            if let Some(props) = v.get("properties").and_then(Value::as_object) {
                closed = true;
                for (k, s) in props {
                    defined.entry(k.as_str()).or_default().push(s);
                }
            }
            if let Some(pp) = v.get("patternProperties").and_then(Value::as_object) {
                for (pat, s) in pp {
                    if let Ok(re) = Regex::new(pat) {
                        patterns.push((re, s));
                    }
                }
            }
            for key in ["additionalProperties", "unevaluatedProperties"] {
                match v.get(key) {
                    Some(Value::Bool(false)) => closed = true,
                    // `{}` admits anything, exactly like `true`: it does not make a typed map.
                    Some(Value::Object(m)) if m.is_empty() => {}
                    Some(s @ Value::Object(_)) => {
                        open = true;
                        additional.push(s);
                    }
                    _ => {}
                }
            }
            if let Some(req) = v.get("required").and_then(Value::as_array) {
                required.extend(req.iter().filter_map(Value::as_str));
            }
        }
        // A typed map (additionalProperties is a schema) defines no closed set of keys.
        let closed = closed && !open;
        for (k, x) in obj {
            let p = pointer_push(path, k);
            if let Some(subs) = defined.get(k.as_str()) {
                for s in subs {
                    self.walk(s, x, p.clone(), depth + 1, found);
                }
                continue;
            }
            let matching: Vec<&'a Value> = patterns
                .iter()
                .filter(|(re, _)| re.is_match(k))
                .map(|(_, s)| *s)
                .collect();
            if !matching.is_empty() {
                for s in matching {
                    self.walk(s, x, p.clone(), depth + 1, found);
                }
                continue;
            }
            if closed {
                found
                    .hallucinated
                    .insert(p, defined.keys().map(|k| k.to_string()).collect());
                continue;
            }
            for s in &additional {
                self.walk(s, x, p.clone(), depth + 1, found);
            }
        }
        for r in required {
            if !obj.contains_key(r) {
                found.missing.insert(pointer_push(path, r));
            }
        }
    }
}

/// Whether a schema's `type` (if any) admits the instance.
fn type_allows(schema: &Value, inst: &Value) -> bool {
    let allowed: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return true,
    };
    let actual = type_name(inst);
    allowed
        .iter()
        .any(|t| *t == actual || (*t == "number" && actual == "integer"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(schema: Value, inst: Value) -> Vec<(Label, String)> {
        let s = Schema::compile(&schema).unwrap();
        violations(&s, &inst)
            .into_iter()
            .map(|v| (v.label, v.path))
            .collect()
    }

    fn weather() -> Value {
        json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 10}}, "required": ["city"]})
    }

    #[test]
    fn valid_arguments_have_no_violations() {
        assert!(labels(weather(), json!({"city": "Paris", "days": 3})).is_empty());
        assert!(labels(weather(), json!({"city": "Paris", "days": 3.0})).is_empty());
    }

    #[test]
    fn a_hallucinated_key_wins_even_where_additional_properties_allow_it() {
        let mut s = weather();
        s["additionalProperties"] = json!(true);
        assert_eq!(
            labels(s, json!({"city": "Paris", "units": "metric", "days": "3"}))[0],
            (Label::HallucinatedParam, "/units".into())
        );
    }

    #[test]
    fn an_empty_additional_properties_schema_is_like_true() {
        let mut s = weather();
        s["additionalProperties"] = json!({});
        assert_eq!(
            labels(s, json!({"city": "Paris", "units": "metric"}))[0],
            (Label::HallucinatedParam, "/units".into())
        );
    }

    #[test]
    fn free_form_and_typed_maps_define_no_closed_set() {
        let s = json!({"type": "object", "properties": {"tags": {"type": "object"}, "env": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}}});
        assert!(labels(s, json!({"tags": {"anything": 1}, "env": {"PATH": "/bin"}})).is_empty());
    }

    #[test]
    fn a_coercion_detail_names_the_schema_type_not_the_value_type() {
        let detail = |schema: Value, inst: Value| {
            let s = Schema::compile(&schema).unwrap();
            violations(&s, &inst)
                .into_iter()
                .map(|v| (v.label, v.detail))
                .next()
                .unwrap()
        };
        let (label, d) = detail(
            json!({"type": "object", "properties": {"amount": {"type": "number"}}}),
            json!({"amount": "300000"}),
        );
        assert_eq!(label, Label::TypeCoercion);
        assert!(d.contains("wants number there"), "{d}");
        let (_, d) = detail(
            json!({"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}),
            json!({"n": "7"}),
        );
        // The set is listed in the validator's (fixed) type order.
        assert!(d.contains("wants null or integer there"), "{d}");
    }

    #[test]
    fn coercions_are_proven_by_revalidation() {
        assert_eq!(
            labels(weather(), json!({"city": "Paris", "days": "3"})),
            vec![(Label::TypeCoercion, "/days".into())]
        );
        // "30" coerces to 30, which breaks the maximum: not a lossless encoding of a valid value.
        assert_eq!(
            labels(weather(), json!({"city": "Paris", "days": "30"}))[0].0,
            Label::SchemaViolation
        );
        assert_eq!(
            labels(weather(), json!({"city": "Paris", "days": "three"}))[0].0,
            Label::SchemaViolation
        );
        assert_eq!(
            labels(weather(), json!({"city": 75001}))[0].0,
            Label::TypeCoercion
        );
        assert_eq!(
            labels(weather(), json!({"city": ["Paris"]}))[0].0,
            Label::SchemaViolation
        );
        let flag = json!({"type": "object", "properties": {"on": {"type": "boolean"}}});
        assert_eq!(
            labels(flag.clone(), json!({"on": "true"}))[0].0,
            Label::TypeCoercion
        );
        assert_eq!(
            labels(flag.clone(), json!({"on": "yes"}))[0].0,
            Label::SchemaViolation
        );
        assert_eq!(labels(flag, json!({"on": 1}))[0].0, Label::SchemaViolation);
    }

    #[test]
    fn a_json_encoded_object_string_is_a_coercion() {
        let s = json!({"type": "object", "properties": {"filter": {"type": "object", "properties": {"min": {"type": "integer"}}, "required": ["min"]}}, "required": ["filter"]});
        assert_eq!(
            labels(s.clone(), json!({"filter": "{\"min\": 3}"})),
            vec![(Label::TypeCoercion, "/filter".into())]
        );
        // JSON text of an object that would itself be missing a required key does not count.
        assert_eq!(
            labels(s, json!({"filter": "{\"max\": 3}"}))[0].0,
            Label::SchemaViolation
        );
    }

    #[test]
    fn missing_required_outranks_coercion_and_walks_refs() {
        let s = json!({
            "type": "object",
            "$defs": {"addr": {"type": "object", "properties": {"zip": {"type": "string"}, "street": {"type": "string"}}, "required": ["zip"]}},
            "properties": {"to": {"$ref": "#/$defs/addr"}, "n": {"type": "integer"}},
            "required": ["to"]
        });
        let got = labels(s, json!({"to": {"street": "Main"}, "n": "4"}));
        assert_eq!(got[0], (Label::MissingRequired, "/to/zip".into()));
        assert_eq!(got[1], (Label::TypeCoercion, "/n".into()));
    }

    #[test]
    fn union_branches_are_chosen_by_fit() {
        let s = json!({"type": "object", "properties": {"shape": {"oneOf": [
            {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"], "additionalProperties": false},
            {"type": "object", "properties": {"kind": {"const": "rect"}, "w": {"type": "number"}, "h": {"type": "number"}}, "required": ["kind", "w", "h"], "additionalProperties": false}
        ]}}});
        assert!(
            labels(
                s.clone(),
                json!({"shape": {"kind": "rect", "w": 1, "h": 2}})
            )
            .is_empty()
        );
        assert_eq!(
            labels(
                s.clone(),
                json!({"shape": {"kind": "rect", "w": 1, "h": 2, "r": 3}})
            )[0],
            (Label::HallucinatedParam, "/shape/r".into())
        );
        assert_eq!(
            labels(s, json!({"shape": {"kind": "circle"}}))[0],
            (Label::MissingRequired, "/shape/r".into())
        );
    }

    #[test]
    fn a_recursive_schema_terminates() {
        let s = json!({"$defs": {"node": {"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["name"]}}, "$ref": "#/$defs/node"});
        assert!(
            labels(
                s.clone(),
                json!({"name": "a", "children": [{"name": "b", "children": []}]})
            )
            .is_empty()
        );
        assert_eq!(
            labels(
                s,
                json!({"name": "a", "children": [{"children": [], "x": 1}]})
            )[0],
            (Label::HallucinatedParam, "/children/0/x".into())
        );
    }
}
