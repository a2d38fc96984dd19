//! `callcheck import bfcl`: the Berkeley Function Calling Leaderboard's single-turn AST
//! categories as callcheck tasks, sent the way BFCL's function-calling handlers send them.
//!
//! Facts taken from BFCL's source (bfcl-eval): the data layout and category names
//! (`constants/category_mapping.py`, `constants/eval_config.py`, `utils.py::load_dataset_entry`),
//! the language hints and the Java/JavaScript parameter rewriting
//! (`utils.py::_func_doc_language_specific_pre_processing`), the conversion of function docs to
//! OpenAI tools (`model_handler/utils.py::convert_to_tool` and `_cast_to_openai_type`, with
//! `constants/type_mappings.py::GORILLA_TO_OPENAPI`), the messages (`base_handler.py::
//! inference_single_turn_FC` sends `question[0]` as it is), and the checker's rules
//! (`eval_checker/ast_eval/ast_checker.py`, reproduced in `task::accept::bfcl`).

use super::source::DataFiles;
use crate::task::accept::bfcl::param_accepts;
use crate::task::{Accept, BfclLanguage, Rule, Schema};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The single-turn AST categories, in BFCL's order (`SINGLE_TURN_CATEGORY`).
pub const CATEGORIES: [&str; 13] = [
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
];

/// Why a category BFCL ships is not imported.
pub fn not_imported_reason(category: &str) -> &'static str {
    if category.starts_with("multi_turn") {
        "multi-turn: needs BFCL's executable API classes and their state between turns"
    } else if category.starts_with("memory") {
        "memory: needs BFCL's memory backends and its prerequisite conversations"
    } else if category.starts_with("web_search") {
        "web search: needs a live search tool whose results are fed back between turns"
    } else if category == "format_sensitivity" {
        "format sensitivity: re-asks other categories' questions in prompt formats for prompting (non-function-calling) models; no questions of its own"
    } else {
        "not one of BFCL's single-turn AST categories"
    }
}

/// BFCL's licence, from the wheel's metadata (`License: Apache 2.0`) and data README.
pub const LICENCE: &str = "Apache-2.0";

/// One imported task: where it goes and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    pub id: String,
    /// BFCL's id of the entry.
    pub bfcl_id: String,
    pub category: String,
    pub bytes: Vec<u8>,
    pub repaired: bool,
    /// Why the id is not BFCL's id as [`task_id`] spells it (too long, characters a task id
    /// cannot hold, or it would collide with another's), for the summary.
    pub renamed: Option<String>,
}

/// One entry not imported, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub bfcl_id: String,
    pub category: String,
    pub reason: String,
}

/// The result of converting the data: tasks, skips, and categories left out.
#[derive(Debug, Default)]
pub struct Import {
    pub tasks: Vec<Imported>,
    pub skipped: Vec<Skipped>,
    /// Categories present in the data and not imported, with the reason.
    pub not_imported: Vec<(String, &'static str)>,
    /// `BFCL_v4 (bfcl-eval 2026.3.23)`.
    pub version: String,
}

fn language(category: &str) -> BfclLanguage {
    // utils.py: is_java is "java" in the category and not is_js; is_js is "javascript" in it.
    if category.contains("javascript") {
        BfclLanguage::Javascript
    } else if category.contains("java") {
        BfclLanguage::Java
    } else {
        BfclLanguage::Python
    }
}

/// The categories present in the data: `BFCL_v4_simple_python.json` → (`BFCL_v4`, `simple_python`).
pub fn categories_in(data: &DataFiles) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for name in data.files.keys() {
        if name.contains('/') {
            continue;
        }
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        // BFCL_v4_<category>: the prefix is the first two underscore-separated parts.
        let mut parts = stem.splitn(3, '_');
        if let (Some(a), Some(b), Some(cat)) = (parts.next(), parts.next(), parts.next()) {
            out.push((format!("{a}_{b}"), cat.to_string()));
        }
    }
    out
}

/// Converts the chosen categories (all single-turn AST categories when `only` is `None`).
pub fn convert(data: &DataFiles, only: Option<&[String]>) -> Result<Import, String> {
    let present = categories_in(data);
    let mut prefixes: Vec<&str> = present.iter().map(|(p, _)| p.as_str()).collect();
    prefixes.sort();
    prefixes.dedup();
    let prefix = match prefixes.as_slice() {
        [p] => p.to_string(),
        [] => {
            return Err(format!(
                "{}: no BFCL_v*_<category>.json data files",
                data.origin
            ));
        }
        many => {
            return Err(format!(
                "{}: data files of several versions ({}): pass a folder holding one",
                data.origin,
                many.join(", ")
            ));
        }
    };
    if let Some(only) = only {
        for c in only {
            if !CATEGORIES.contains(&c.as_str()) {
                return Err(format!(
                    "--categories: {c:?} is not a single-turn AST category; choose among {}",
                    CATEGORIES.join(", ")
                ));
            }
        }
    }
    let version = match &data.package_version {
        Some(v) => format!("{prefix} (bfcl-eval {v})"),
        None => prefix.clone(),
    };
    let mut out = Import {
        version: version.clone(),
        ..Import::default()
    };
    for (_, cat) in &present {
        if !CATEGORIES.contains(&cat.as_str()) {
            out.not_imported
                .push((cat.clone(), not_imported_reason(cat)));
        }
    }
    // Every category's entries first: a task id is chosen knowing every other (ids that would
    // collide are told apart, whatever category they are in).
    let mut chosen = Vec::new();
    for cat in CATEGORIES {
        if only.is_some_and(|o| !o.iter().any(|c| c == cat)) {
            continue;
        }
        let file = format!("{prefix}_{cat}.json");
        let Some(bytes) = data.files.get(&file) else {
            if only.is_some() {
                return Err(format!("{}: no {file} in the data", data.origin));
            }
            continue;
        };
        chosen.push((cat, file.clone(), read_lines(bytes, &file)?));
    }
    let sources: Vec<(&str, &str)> = chosen
        .iter()
        .flat_map(|(cat, _, entries)| {
            entries
                .iter()
                .filter_map(move |e| Some((*cat, e.get("id")?.as_str()?)))
        })
        .collect();
    let mut ids = assign_ids(&sources).into_iter();
    for (cat, file, entries) in chosen {
        let answers: BTreeMap<String, Value> =
            match data.files.get(&format!("possible_answer/{file}")) {
                Some(b) => read_lines(b, &format!("possible_answer/{file}"))?
                    .into_iter()
                    .filter_map(|a| Some((a.get("id")?.as_str()?.to_string(), a)))
                    .collect(),
                None => BTreeMap::new(),
            };
        for entry in &entries {
            let bfcl_id = entry
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            // The ids were assigned to the entries that have one, in this same order.
            let id = match entry.get("id").and_then(Value::as_str) {
                Some(_) => ids.next(),
                None => None,
            };
            let converted = match id {
                Some(id) => convert_entry(cat, &version, entry, answers.get(&bfcl_id), id),
                None => Err("the entry has no id".to_string()),
            };
            match converted {
                Ok(t) => out.tasks.push(t),
                Err(reason) => out.skipped.push(Skipped {
                    bfcl_id,
                    category: cat.to_string(),
                    reason,
                }),
            }
        }
    }
    Ok(out)
}

/// A BFCL data file: one JSON object per line.
fn read_lines(bytes: &[u8], file: &str) -> Result<Vec<Value>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("{file}: not UTF-8: {e}"))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{file}: line {}: not JSON: {e}", i + 1))
        })
        .collect()
}

/// `simple_python_13` → `bfcl-simple-python-13`.
pub fn task_id(bfcl_id: &str) -> String {
    format!("bfcl-{}", bfcl_id.replace('_', "-"))
}

/// A task id for each `(category, BFCL id)`, in order: [`task_id`]'s, made lint-valid and
/// distinct. A character a task id cannot hold becomes `-`; an id longer than
/// [`crate::names::MAX_NAME_BYTES`] is cut and ends with a hash of its source; ids that would be
/// the same up to case (`simple_python_0` and `simple-python-0` both give
/// `bfcl-simple-python-0`) keep it for the first source in byte order and end with a hash of
/// their source for the others. Deterministic: the same sources give the same ids. Each id
/// comes with why it differs from [`task_id`]'s, when it does.
pub fn assign_ids(sources: &[(&str, &str)]) -> Vec<(String, Option<String>)> {
    use sha2::Digest;
    let max = crate::names::MAX_NAME_BYTES;
    let hash = |cat: &str, bfcl_id: &str, n: usize| {
        let mut h = sha2::Sha256::new();
        h.update(cat.as_bytes());
        h.update([0]);
        h.update(bfcl_id.as_bytes());
        if n > 0 {
            h.update(n.to_string().as_bytes());
        }
        crate::task::hex(&h.finalize()[..4])
    };
    // `stem` with `-<suffix>` at its end, cut so that the whole fits.
    let with_suffix = |stem: &str, suffix: &str| {
        let room = max - suffix.len() - 1;
        let cut = &stem[..stem.len().min(room)];
        format!("{}-{suffix}", cut.trim_end_matches(['-', '.']))
    };
    let mut out: Vec<(String, Option<String>)> = sources
        .iter()
        .map(|(cat, bfcl_id)| {
            let natural = task_id(bfcl_id);
            let clean: String = natural
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            let mut why = (clean != natural)
                .then(|| "its id holds characters a task id cannot: each became '-'".to_string());
            let id = if clean.len() > max {
                why = Some(format!(
                    "its id gives {} bytes, more than the {max} a task id may have: cut, with a hash of the source",
                    clean.len()
                ));
                with_suffix(&clean, &hash(cat, bfcl_id, 0))
            } else {
                clean
            };
            (id, why)
        })
        .collect();
    // Collisions up to case: the first source in byte order keeps the id.
    let mut by_key: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, (id, _)) in out.iter().enumerate() {
        by_key
            .entry(crate::names::case_key(id))
            .or_default()
            .push(i);
    }
    let mut taken: std::collections::BTreeSet<String> = by_key.keys().cloned().collect();
    for group in by_key.values().filter(|g| g.len() > 1) {
        let mut group = group.clone();
        group.sort_by(|&a, &b| (sources[a].1, sources[a].0).cmp(&(sources[b].1, sources[b].0)));
        let keeper = group[0];
        for &i in &group[1..] {
            let (cat, bfcl_id) = sources[i];
            let mut n = 0;
            let id = loop {
                let id = with_suffix(&out[i].0, &hash(cat, bfcl_id, n));
                if taken.insert(crate::names::case_key(&id)) {
                    break id;
                }
                n += 1;
            };
            out[i] = (
                id,
                Some(format!(
                    "its id would be the same as {}'s ({}), up to case: a hash of the source tells them apart",
                    sources[keeper].1, out[keeper].0
                )),
            );
        }
    }
    out
}

/// `convert_to_tool`: dots in a function name become underscores for OpenAI-compatible
/// endpoints ("OAI does not support "." in the function name").
pub fn tool_name(name: &str) -> String {
    name.replace('.', "_")
}

fn append(obj: &mut Map<String, Value>, key: &str, text: &str) {
    let old = obj
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    obj.insert(key.to_string(), Value::String(old + text));
}

fn type_of(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("")
}

/// `_func_doc_language_specific_pre_processing`: the language hint on every function, and for
/// Java and JavaScript every parameter sent as a string in the language's syntax.
fn language_pre_processing(f: &mut Map<String, Value>, lang: BfclLanguage) {
    let hint = match lang {
        BfclLanguage::Java => " Note that the provided function is in Java 8 SDK syntax.",
        BfclLanguage::Javascript => " Note that the provided function is in JavaScript syntax.",
        BfclLanguage::Python => " Note that the provided function is in Python 3 syntax.",
    };
    append(f, "description", hint);
    if lang == BfclLanguage::Python {
        return;
    }
    let Some(props) = f
        .get_mut("parameters")
        .and_then(|p| p.get_mut("properties"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for (_, p) in props.iter_mut() {
        let Some(p) = p.as_object_mut() else {
            continue;
        };
        let t = p
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let item_type = p
            .get("items")
            .map(|i| type_of(i).to_string())
            .unwrap_or_default();
        let lang_name = if lang == BfclLanguage::Java {
            "Java"
        } else {
            "JavaScript"
        };
        if t == "any" {
            append(
                p,
                "description",
                &format!(
                    " This parameter can be of any type of {lang_name} object in string representation."
                ),
            );
        } else {
            append(
                p,
                "description",
                &format!(" This is {lang_name} {t} type parameter in string representation."),
            );
        }
        let is_list = match lang {
            BfclLanguage::Java => t == "ArrayList" || t == "Array",
            _ => t == "array",
        };
        if is_list {
            append(
                p,
                "description",
                &format!(
                    " The list elements are of type {item_type}; they are not in string representation."
                ),
            );
            p.remove("items");
        }
        if lang == BfclLanguage::Javascript && t == "dict" && p.contains_key("properties") {
            let schema = p
                .get("properties")
                .map(|x| x.to_string())
                .unwrap_or_default();
            append(
                p,
                "description",
                &format!(
                    " The dictionary entries have the following schema; they are not in string representation. {}",
                    python_json_dumps(&schema)
                ),
            );
            p.remove("properties");
        }
        p.insert("type".into(), Value::String("string".into()));
    }
}

/// Python's `json.dumps` puts a space after `:` and `,`; serde_json's compact form does not.
/// Re-spaced outside strings so the description reads as BFCL sends it.
fn python_json_dumps(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() + compact.len() / 8);
    let mut scan = crate::json::StringScanner::default();
    for c in compact.chars() {
        out.push(c);
        if scan.step(c) == crate::json::Place::Outside && (c == ':' || c == ',') {
            out.push(' ');
        }
    }
    out
}

/// `GORILLA_TO_OPENAPI`: BFCL's doc types as JSON Schema types. `any` is sent as a string, as
/// BFCL's table says; a type not in the table is sent as a string too.
pub fn openapi_type(t: &str) -> &'static str {
    match t {
        "integer" | "byte" | "short" | "long" | "Bigint" => "integer",
        "number" | "float" | "double" => "number",
        "boolean" | "bool" => "boolean",
        "array" | "list" | "tuple" | "ArrayList" | "Array" | "Queue" | "Stack" => "array",
        "dict" | "object" | "HashMap" | "Hashtable" => "object",
        _ => "string",
    }
}

/// `_cast_to_openai_type`: types mapped at every depth of `properties`, items two levels deep,
/// and floats marked (`"format": "float"` and a sentence in the description).
fn cast_properties(props: &mut Map<String, Value>) {
    for (_, p) in props.iter_mut() {
        let Some(p) = p.as_object_mut() else {
            continue;
        };
        match p.get("type").and_then(Value::as_str).map(String::from) {
            None => {
                p.insert("type".into(), Value::String("string".into()));
            }
            Some(t) => {
                if t == "float" {
                    p.insert("format".into(), Value::String("float".into()));
                    append(p, "description", " This is a float type value.");
                }
                p.insert("type".into(), Value::String(openapi_type(&t).into()));
            }
        }
        let t = type_of(&Value::Object(p.clone())).to_string();
        if t != "array" && t != "object" {
            continue;
        }
        if let Some(inner) = p.get_mut("properties").and_then(Value::as_object_mut) {
            cast_properties(inner);
        } else if let Some(items) = p.get_mut("items").and_then(Value::as_object_mut) {
            let it = openapi_type(items.get("type").and_then(Value::as_str).unwrap_or(""));
            items.insert("type".into(), Value::String(it.into()));
            if it == "array" {
                if let Some(inner) = items.get_mut("items").and_then(Value::as_object_mut) {
                    let t2 = openapi_type(inner.get("type").and_then(Value::as_str).unwrap_or(""));
                    inner.insert("type".into(), Value::String(t2.into()));
                }
            } else if it == "object"
                && let Some(inner) = items.get_mut("properties").and_then(Value::as_object_mut)
            {
                cast_properties(inner);
            }
        }
    }
}

/// One BFCL function doc as the OpenAI tool BFCL's OpenAI-compatible handler sends.
pub fn to_tool(function: &Value, lang: BfclLanguage) -> Result<Value, String> {
    let Some(mut f) = function.as_object().cloned() else {
        return Err("a function doc is not an object".into());
    };
    let Some(name) = f.get("name").and_then(Value::as_str).map(String::from) else {
        return Err("a function doc has no name".into());
    };
    language_pre_processing(&mut f, lang);
    f.insert("name".into(), Value::String(tool_name(&name)));
    let params = f
        .entry("parameters")
        .or_insert_with(|| json!({"type": "object", "properties": {}}));
    let Some(params) = params.as_object_mut() else {
        return Err(format!("{name}: parameters is not an object"));
    };
    params.insert("type".into(), Value::String("object".into()));
    match params.get_mut("properties").and_then(Value::as_object_mut) {
        Some(props) => cast_properties(props),
        None => {
            params.insert("properties".into(), json!({}));
        }
    }
    Ok(json!({"type": "function", "function": Value::Object(f)}))
}

fn props_of(function: &Value) -> Option<&Map<String, Value>> {
    function
        .pointer("/parameters/properties")
        .and_then(Value::as_object)
}

fn required_of(function: &Value) -> Vec<String> {
    function
        .pointer("/parameters/required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Shape tags of the corpus (tasks/README.md) for a category.
fn shape_tags(category: &str) -> &'static [&'static str] {
    match category.trim_start_matches("live_") {
        "simple" | "simple_python" | "simple_java" | "simple_javascript" => &["single-call"],
        "multiple" => &["similar-tools"],
        "parallel" => &["parallel"],
        "parallel_multiple" => &["parallel", "similar-tools"],
        "irrelevance" => &["no-call"],
        _ => &[],
    }
}

fn first_user_text(messages: &[Value]) -> String {
    messages
        .iter()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|m| m.get("content").and_then(Value::as_str))
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn clip_words(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    match cut.rfind(' ') {
        Some(i) if i > max / 2 => format!("{}…", &cut[..i]),
        _ => format!("{cut}…"),
    }
}

/// One parameter's possible answer split into BFCL's values and its optional marker `""`.
fn split_answer(values: &[Value]) -> (Vec<Value>, bool, bool) {
    let omit = values.iter().any(|v| v.as_str() == Some(""));
    let first_is_omit = values.first().is_some_and(|v| v.as_str() == Some(""));
    let kept = values
        .iter()
        .filter(|v| v.as_str() != Some(""))
        .cloned()
        .collect();
    (kept, omit, first_is_omit)
}

/// A dictionary possible answer (`{"key": [values…]}`) as one concrete dictionary: each key's
/// first value, keys whose first value is `""` left out.
fn first_of_dict(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter_map(|(k, vals)| match vals {
                    Value::Array(a) => match a.first() {
                        Some(Value::String(s)) if s.is_empty() => None,
                        Some(x) => Some((k.clone(), x.clone())),
                        None => None,
                    },
                    other => Some((k.clone(), other.clone())),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The concrete argument a possible value stands for: dictionaries (and lists of them) are
/// written in the possible-answer form, every other value as it is.
fn python_candidate(v: &Value, bfcl_type: &str, items: Option<&str>) -> Value {
    match (bfcl_type, v) {
        ("dict", Value::Object(_)) => first_of_dict(v),
        ("array" | "tuple", Value::Array(a)) if items == Some("dict") => {
            Value::Array(a.iter().map(first_of_dict).collect())
        }
        _ => v.clone(),
    }
}

fn number_text(v: &Value) -> String {
    v.to_string()
}

/// A Java value as source text that BFCL's `java_type_converter` reads back.
fn java_text(v: &Value, t: &str, items: Option<&str>) -> Option<String> {
    Some(match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(_) => match t {
            "long" => format!("{}L", number_text(v)),
            "float" => format!("{}f", number_text(v)),
            _ => number_text(v),
        },
        Value::Array(a) => {
            let elem = |e: &Value, quote: bool| -> Option<String> {
                match (e, items) {
                    (Value::String(s), _) if quote => Some(format!("\"{s}\"")),
                    (Value::String(s), _) => Some(s.clone()),
                    (x, Some(i)) => java_text(x, i, None),
                    (x, None) => java_text(x, "any", None),
                }
            };
            match t {
                "ArrayList" => {
                    // parse_arraylist strips the quotes of String and char elements and reads
                    // untyped elements with parse_java_value, which needs them quoted too.
                    let quote = !matches!(items, Some("any"));
                    let parts: Option<Vec<String>> = a.iter().map(|e| elem(e, quote)).collect();
                    format!("new ArrayList<>(Arrays.asList({}))", parts?.join(", "))
                }
                "Array" => {
                    // parse_array keeps a typed element's text as it is, quotes included.
                    let quote = items.is_none();
                    let parts: Option<Vec<String>> = a.iter().map(|e| elem(e, quote)).collect();
                    let java_type = match items {
                        Some("integer") => "int",
                        Some("String") => "String",
                        Some(
                            other @ ("long" | "float" | "double" | "boolean" | "char" | "byte"
                            | "short"),
                        ) => other,
                        _ => "Object",
                    };
                    format!("new {java_type}[]{{{}}}", parts?.join(", "))
                }
                _ => return None,
            }
        }
        Value::Object(m) => {
            let mut puts = String::new();
            for (k, val) in m {
                let text = match val {
                    Value::String(s) => format!("\"{s}\""),
                    other => java_text(other, "any", None)?,
                };
                puts.push_str(&format!("put(\"{k}\", {text}); "));
            }
            format!("new HashMap<String, Object>() {{{{ {puts}}}}}")
        }
        Value::Null => return None,
    })
}

/// A JavaScript value as source text that BFCL's `js_type_converter` reads back.
fn js_text(v: &Value, t: &str) -> Option<String> {
    Some(match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(_) => {
            if t == "Bigint" {
                format!("{}n", number_text(v))
            } else {
                number_text(v)
            }
        }
        Value::Array(a) => {
            let parts: Option<Vec<String>> = a.iter().map(js_element).collect();
            format!("[{}]", parts?.join(", "))
        }
        Value::Object(m) => {
            let mut parts = Vec::new();
            for (k, val) in m {
                parts.push(format!("{k}: {}", js_element(val)?));
            }
            format!("{{{}}}", parts.join(", "))
        }
        Value::Null => return None,
    })
}

fn js_element(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(format!("\"{s}\"")),
        other => js_text(other, "any"),
    }
}

/// The parameter's type and item type in BFCL's function doc.
fn doc_types(doc: &Value) -> (String, Option<String>) {
    let t = type_of(doc).to_string();
    let items = doc
        .get("items")
        .and_then(|i| i.get("type"))
        .and_then(Value::as_str)
        .map(String::from);
    (t, items)
}

/// Converts one BFCL entry to a task file, or says why it cannot be.
fn convert_entry(
    category: &str,
    version: &str,
    entry: &Value,
    answer: Option<&Value>,
    (id, renamed): (String, Option<String>),
) -> Result<Imported, String> {
    let bfcl_id = entry
        .get("id")
        .and_then(Value::as_str)
        .ok_or("the entry has no id")?;
    if !crate::task::is_path_safe(&id) {
        return Err(format!("its id gives {id:?}, which is not a valid task id"));
    }
    let lang = language(category);
    let messages = single_turn(entry)?;
    let functions = entry
        .get("function")
        .and_then(Value::as_array)
        .ok_or("the entry has no function docs")?;
    let mut tools = tools_sent(functions, lang)?;

    let mut repairs: Vec<String> = Vec::new();
    let kind = EntryKind::of(category);
    let expect = match kind {
        EntryKind::Irrelevance => json!({"no_call": true}),
        EntryKind::Relevance => {
            let (tool, gold) = relevance_example(&tools)?;
            json!({"calls": [{"tool": tool, "gold": gold}], "any_call": true})
        }
        EntryKind::Calls => {
            let answer = answer.ok_or("no possible answer for this entry")?;
            let truths = answer
                .get("ground_truth")
                .and_then(Value::as_array)
                .filter(|g| !g.is_empty())
                .ok_or("its possible answer has no ground truth")?;
            let mut calls = Vec::new();
            for (i, truth) in truths.iter().enumerate() {
                calls.push(expected_call(
                    i,
                    truth,
                    functions,
                    &mut tools,
                    lang,
                    &mut repairs,
                )?);
            }
            json!({"calls": calls, "order": "any"})
        }
    };

    let user = first_user_text(&messages);
    let title = format!("BFCL {bfcl_id}: {}", clip_words(&user, 60));
    let mut tags = vec!["bfcl".to_string(), category.replace('_', "-")];
    tags.extend(shape_tags(category).iter().map(|s| s.to_string()));
    let mut description = format!(
        "From the [Berkeley Function Calling Leaderboard](https://gorilla.cs.berkeley.edu/leaderboard.html) (BFCL), category `{category}`, entry `{bfcl_id}`, data {version}. BFCL's data is licensed {LICENCE}. The tools are sent as BFCL's function-calling handler sends them to OpenAI-compatible endpoints. {}",
        kind.what()
    );
    let mut source = json!({
        "suite": "bfcl",
        "id": bfcl_id,
        "category": category,
        "version": version,
    });
    if !repairs.is_empty() {
        description.push_str("\n\nRepaired on import:\n");
        for r in &repairs {
            description.push_str(&format!("\n- {r}"));
        }
        source["repairs"] = json!(repairs);
    }
    let task = json!({
        "id": id,
        "title": title,
        "tags": tags,
        "description": description,
        "source": source,
        "messages": messages,
        "tools": tools,
        "expect": expect,
    });
    let mut bytes = serde_json::to_vec_pretty(&task).map_err(|e| e.to_string())?;
    bytes.push(b'\n');
    passes_lint(&id, &bytes)?;
    Ok(Imported {
        id,
        bfcl_id: bfcl_id.to_string(),
        category: category.to_string(),
        bytes,
        repaired: !repairs.is_empty(),
        renamed,
    })
}

/// What a BFCL category's entries expect of the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    /// `*irrelevance`: no offered function fits; the right answer calls nothing.
    Irrelevance,
    /// `live_relevance`: some offered function fits; any schema-valid call is right.
    Relevance,
    /// Every other category: the ground truth's calls, with BFCL's possible answers.
    Calls,
}

impl EntryKind {
    fn of(category: &str) -> EntryKind {
        if category.ends_with("irrelevance") {
            EntryKind::Irrelevance
        } else if category == "live_relevance" {
            EntryKind::Relevance
        } else {
            EntryKind::Calls
        }
    }

    /// The task description's sentence on how the answer is judged.
    fn what(self) -> &'static str {
        match self {
            EntryKind::Irrelevance => {
                "None of the offered functions fits the request: the right answer calls nothing."
            }
            EntryKind::Relevance => {
                "Some offered function fits the request: any call to an offered tool that passes its schema is right (BFCL's relevance check); the expected call is an example."
            }
            EntryKind::Calls => {
                "Value accuracy uses BFCL's possible answers (`accept`) with BFCL's checker rules."
            }
        }
    }
}

/// The entry's messages: a single-turn category sends its one turn.
fn single_turn(entry: &Value) -> Result<Vec<Value>, String> {
    let turns = entry
        .get("question")
        .and_then(Value::as_array)
        .ok_or("the entry has no question")?;
    if turns.len() != 1 {
        return Err(format!(
            "its question has {} turns; a single-turn category sends only the first",
            turns.len()
        ));
    }
    Ok(turns[0]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or("the question's turn holds no messages")?
        .clone())
}

/// The entry's function docs as the tools BFCL's handler sends, each name used once.
fn tools_sent(functions: &[Value], lang: BfclLanguage) -> Result<Vec<Value>, String> {
    let mut tools = Vec::new();
    for f in functions {
        tools.push(to_tool(f, lang)?);
    }
    let mut names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
        .collect();
    names.sort();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return Err("two function docs share a tool name once dots become underscores".into());
    }
    Ok(tools)
}

/// Every imported task passes `tasks lint`; one that would not is skipped with lint's reason.
fn passes_lint(id: &str, bytes: &[u8]) -> Result<(), String> {
    let path = std::path::PathBuf::from(format!("{id}.json"));
    let parsed = crate::task::parse_task(&path, bytes).map_err(|es| {
        format!(
            "the converted task does not load: {}",
            es.iter()
                .map(|e| format!("{}: {}", e.path, e.problem))
                .collect::<Vec<_>>()
                .join("; ")
        )
    })?;
    if let Some(p) = crate::lint::lint_task(&parsed).into_iter().next() {
        return Err(format!("the converted task fails lint: {p}"));
    }
    Ok(())
}

/// One ground-truth entry (`{"func": {"param": [values…]}}`) as an expected call with its gold
/// and `accept`. Mechanical repairs are made to `tools` and recorded in `repairs`.
fn expected_call(
    index: usize,
    truth: &Value,
    functions: &[Value],
    tools: &mut [Value],
    lang: BfclLanguage,
    repairs: &mut Vec<String>,
) -> Result<Value, String> {
    let (fname, params) = truth
        .as_object()
        .filter(|m| m.len() == 1)
        .and_then(|m| m.iter().next())
        .ok_or_else(|| format!("ground truth {index} is not one {{function: params}} entry"))?;
    let params = params
        .as_object()
        .ok_or_else(|| format!("ground truth {index}'s parameters are not an object"))?;
    // find_description: the doc with the ground truth's (dotted) name.
    let doc = functions
        .iter()
        .find(|f| f.get("name").and_then(Value::as_str) == Some(fname.as_str()))
        .ok_or_else(|| format!("its ground truth calls {fname}, which the entry does not offer"))?;
    let tool = tool_name(fname);
    let tool_index = tools
        .iter()
        .position(|t| t.pointer("/function/name").and_then(Value::as_str) == Some(tool.as_str()))
        .ok_or_else(|| format!("{tool} is not among the tools"))?;
    let doc_props = props_of(doc).cloned().unwrap_or_default();
    let required = required_of(doc);
    let mut accept = Map::new();
    let mut gold = Map::new();
    for (pname, values) in params {
        let Some(pdoc) = doc_props.get(pname) else {
            repairs.push(format!(
                "the ground truth of {fname} gives `{pname}`, which its function doc does not define: left out of the expected call"
            ));
            continue;
        };
        let Some(values) = values.as_array() else {
            return Err(format!(
                "the possible answer of {fname}.{pname} is not a list"
            ));
        };
        let (t, items) = doc_types(pdoc);
        let (mut kept, omit, first_is_omit) = split_answer(values);
        let param = GoldParam {
            fname,
            pname,
            tool: &tool,
            tool_index,
            t,
            items,
            lang,
            values,
            omit,
            required: required.iter().any(|r| r == pname),
            prop_pointer: format!(
                "/function/parameters/properties/{}",
                crate::json::pointer_token(pname)
            ),
        };
        param.repair_dicts(&mut kept, repairs);
        if kept.is_empty() && !omit {
            return Err(format!(
                "its possible answer for {fname}.{pname} lists no value"
            ));
        }
        if kept.is_empty() && param.required {
            return Err(format!(
                "its possible answer only allows leaving out {fname}.{pname}, which the schema requires"
            ));
        }
        let chosen = if first_is_omit && !param.required {
            None
        } else {
            param.choose(tools, &mut kept, repairs)?
        };
        if let Some(c) = chosen {
            gold.insert(pname.clone(), c);
        }
        accept.insert(pname.clone(), param.accept_entry(kept));
    }
    let gold = Value::Object(gold);
    let sent = tools[tool_index]
        .pointer("/function/parameters")
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let schema = Schema::compile(&sent)
        .map_err(|e| format!("the schema of {tool} does not compile: {e}"))?;
    if let Some(e) = schema.validator.iter_errors(&gold).next() {
        return Err(format!(
            "its ground truth for {tool} does not fit the schema sent: {e} at {}",
            e.instance_path()
        ));
    }
    Ok(json!({"tool": tool, "gold": gold, "accept": accept}))
}

/// One parameter of a ground-truth call being converted: its possible answers, its type in
/// BFCL's doc, and where its schema sits in the tool sent.
struct GoldParam<'a> {
    /// The function's name in BFCL (dotted), and the tool's as sent.
    fname: &'a str,
    pname: &'a str,
    tool: &'a str,
    tool_index: usize,
    /// BFCL's type for it, and its item type.
    t: String,
    items: Option<String>,
    lang: BfclLanguage,
    /// BFCL's possible answers as given (`""` for "may be left out").
    values: &'a [Value],
    omit: bool,
    required: bool,
    /// Its property in the tool sent, as a JSON pointer.
    prop_pointer: String,
}

/// What [`GoldParam::pick`] found: the candidate chosen, whether BFCL's checker accepted any
/// candidate, and the first schema error met (for the skip reason).
type Picked = (Option<Value>, bool, Option<String>);

impl GoldParam<'_> {
    /// A dictionary's possible answers in the shape BFCL's `dict_checker` can match
    /// ([`repair_dict_answer`]), the repair recorded.
    fn repair_dicts(&self, kept: &mut Vec<Value>, repairs: &mut Vec<String>) {
        let (t, items) = (self.t.as_str(), self.items.as_deref());
        let dict_like = matches!(t, "dict" | "HashMap")
            || (matches!(t, "array" | "tuple") && items == Some("dict"));
        if !dict_like {
            return;
        }
        let mut changed = false;
        *kept = kept
            .iter()
            .map(|v| repair_dict_answer(v, &mut changed))
            .collect();
        if changed {
            repairs.push(format!(
                "{}.{}: BFCL compares the values inside its dictionary literally, but its possible answer nests lists of alternatives there (or a bare value where a list belongs): each replaced by its first alternative (or wrapped in a list)",
                self.fname, self.pname
            ));
        }
    }

    fn accept_of(&self, kept: &[Value]) -> Accept {
        Accept {
            values: kept.to_vec(),
            omit: self.omit,
            rule: Rule::Bfcl,
            bfcl_type: Some(self.t.clone()),
            bfcl_items: self.items.clone(),
            language: self.lang,
        }
    }

    /// The possible answers as the model would send them in this language.
    fn candidates(&self, kept: &[Value]) -> Vec<Value> {
        let (t, items) = (self.t.as_str(), self.items.as_deref());
        kept.iter()
            .filter_map(|v| match self.lang {
                BfclLanguage::Python => Some(python_candidate(v, t, items)),
                BfclLanguage::Java => java_text(&first_of_dict(v), t, items).map(Value::String),
                BfclLanguage::Javascript => js_text(&first_of_dict(v), t).map(Value::String),
            })
            .collect()
    }

    /// The first candidate BFCL's checker accepts and the schema sent allows, and the first
    /// schema error met, for the skip reason.
    fn pick(&self, tools: &[Value], kept: &[Value]) -> Picked {
        let a = self.accept_of(kept);
        let prop = tools[self.tool_index].pointer(&self.prop_pointer).cloned();
        let compiled = prop.as_ref().map(Schema::compile);
        let mut any_accepted = false;
        let mut schema_error = None;
        for c in self.candidates(kept) {
            if !param_accepts(&a, &c) {
                continue;
            }
            any_accepted = true;
            match &compiled {
                Some(Ok(s)) => {
                    let error = s
                        .validator
                        .iter_errors(&c)
                        .next()
                        .map(|e| format!("{} at {}", e, e.instance_path()));
                    match error {
                        None => return (Some(c), true, None),
                        Some(e) => {
                            schema_error.get_or_insert(e);
                        }
                    }
                }
                Some(Err(e)) => {
                    schema_error.get_or_insert_with(|| format!("the schema does not compile: {e}"));
                }
                None => return (Some(c), true, None),
            }
        }
        (None, any_accepted, schema_error)
    }

    /// The gold value (`None`: left out), after the repairs that let a possible answer fit
    /// the schema sent (an array's enum moved to its items, an enum member's spelling), or
    /// why no possible answer can be the gold.
    fn choose(
        &self,
        tools: &mut [Value],
        kept: &mut Vec<Value>,
        repairs: &mut Vec<String>,
    ) -> Result<Option<Value>, String> {
        let (fname, pname) = (self.fname, self.pname);
        let (mut found, mut any_accepted, mut schema_error) = self.pick(tools, kept);
        if found.is_none()
            && let Some(note) =
                move_array_enum(&mut tools[self.tool_index], &self.prop_pointer, pname)
        {
            (found, any_accepted, schema_error) = self.pick(tools, kept);
            if found.is_some() {
                repairs.push(format!("{}: {note}", self.tool));
            }
        }
        if found.is_none()
            && let Some((spelling, note)) =
                enum_spelling(tools[self.tool_index].pointer(&self.prop_pointer), kept)
        {
            let mut widened = kept.clone();
            if !param_accepts(&self.accept_of(kept), &spelling) {
                widened.push(spelling.clone());
            }
            let (f, _, _) = self.pick(tools, &widened);
            if f.is_some() {
                *kept = widened;
                found = f;
                repairs.push(format!("{fname}.{pname}: {note}"));
            }
        }
        match found {
            Some(c) => Ok(Some(c)),
            None if self.omit && !self.required => Ok(None),
            None if !any_accepted => Err(format!(
                "BFCL's own checker accepts none of its possible answers for {fname}.{pname} ({})",
                crate::json::preview(&Value::Array(self.values.to_vec()), 80)
            )),
            None => Err(format!(
                "none of its possible answers for {fname}.{pname} ({}) fits the schema sent: {}",
                crate::json::preview(&Value::Array(self.values.to_vec()), 80),
                schema_error.unwrap_or_default()
            )),
        }
    }

    /// The parameter's `accept` entry in the task file.
    fn accept_entry(&self, kept: Vec<Value>) -> Value {
        let mut entry = Map::new();
        entry.insert("values".into(), Value::Array(kept));
        if self.omit {
            entry.insert("omit".into(), Value::Bool(true));
        }
        entry.insert("rule".into(), json!("bfcl"));
        entry.insert("type".into(), Value::String(self.t.clone()));
        if let Some(i) = &self.items {
            entry.insert("items".into(), Value::String(i.clone()));
        }
        if self.lang != BfclLanguage::Python {
            entry.insert(
                "language".into(),
                json!(if self.lang == BfclLanguage::Java {
                    "java"
                } else {
                    "javascript"
                }),
            );
        }
        Value::Object(entry)
    }
}

/// A dictionary possible answer (or a list of them) in the shape BFCL's `dict_checker` can
/// match: each key's value a list of alternatives, and every alternative a concrete value —
/// a dictionary of alternatives nested inside becomes its first alternatives.
fn repair_dict_answer(v: &Value, changed: &mut bool) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(|x| repair_dict_answer(x, changed)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, alts)| {
                    let alts = match alts {
                        Value::Array(a) => a.clone(),
                        other => {
                            *changed = true;
                            vec![other.clone()]
                        }
                    };
                    let alts = alts
                        .iter()
                        .map(|x| concrete(x, changed))
                        .collect::<Vec<_>>();
                    (k.clone(), Value::Array(alts))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A possible-answer dictionary (every value a list) as its first alternatives, at any depth.
fn concrete(v: &Value, changed: &mut bool) -> Value {
    match v {
        Value::Object(m) if !m.is_empty() && m.values().all(Value::is_array) => {
            *changed = true;
            Value::Object(
                m.iter()
                    .filter_map(|(k, alts)| {
                        let first = alts.as_array()?.first()?;
                        if first.as_str() == Some("") {
                            return None;
                        }
                        Some((k.clone(), concrete(first, changed)))
                    })
                    .collect(),
            )
        }
        other => other.clone(),
    }
}

/// BFCL's docs sometimes put a list of allowed strings as `enum` on an array property, which no
/// array can satisfy; the enum belongs to the items. Moves it there.
fn move_array_enum(tool: &mut Value, prop_pointer: &str, pname: &str) -> Option<String> {
    let prop = tool.pointer_mut(prop_pointer)?.as_object_mut()?;
    if prop.get("type").and_then(Value::as_str) != Some("array") {
        return None;
    }
    let items = prop.get("items")?.as_object()?;
    if items.contains_key("enum") {
        return None;
    }
    let en = prop.remove("enum")?;
    if let Some(items) = prop.get_mut("items").and_then(Value::as_object_mut) {
        items.insert("enum".into(), en);
    }
    Some(format!(
        "the `enum` of `{pname}` sat on the array, which no array satisfies: moved to its items"
    ))
}

/// A possible answer that is not among a string enum, but whose text is one of its members
/// under BFCL's normalisation (`openai` for `OpenAI`, `true` for `"True"`, `2` for `"2"`): that
/// member, and the repair's note.
fn enum_spelling(prop: Option<&Value>, kept: &[Value]) -> Option<(Value, String)> {
    let members = prop?.get("enum")?.as_array()?;
    for v in kept {
        let text = match v {
            Value::String(s) => s.clone(),
            // Python's str(): True, False, 2, 2.5.
            Value::Bool(true) => "True".into(),
            Value::Bool(false) => "False".into(),
            Value::Number(n) => n.to_string(),
            _ => continue,
        };
        let key = crate::task::accept::bfcl::standardize(&text);
        if let Some(m) = members
            .iter()
            .filter_map(Value::as_str)
            .find(|m| crate::task::accept::bfcl::standardize(m) == key)
        {
            return Some((
                Value::String(m.to_string()),
                format!(
                    "the possible answer {} is not among the enum of the schema sent; its spelling there, {m:?}, is the gold and is accepted",
                    crate::json::preview(v, 40)
                ),
            ));
        }
    }
    None
}

/// An example call for a relevance task: the first tool for which arguments built from its
/// schema (required parameters only: a default, the first enum value, or a plain value of the
/// type) pass that schema.
fn relevance_example(tools: &[Value]) -> Result<(String, Value), String> {
    for t in tools {
        let (Some(name), Some(params)) = (
            t.pointer("/function/name").and_then(Value::as_str),
            t.pointer("/function/parameters"),
        ) else {
            continue;
        };
        let args = example_value(params, 0);
        if Schema::compile(params).is_ok_and(|s| s.validator.is_valid(&args)) {
            return Ok((name.to_string(), args));
        }
    }
    Err(
        "no offered tool has arguments that can be built from its schema for the example call"
            .into(),
    )
}

fn example_value(schema: &Value, depth: usize) -> Value {
    if let Some(d) = schema.get("default") {
        return d.clone();
    }
    if let Some(e) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return e.clone();
    }
    match type_of(schema) {
        "integer" => json!(1),
        "number" => json!(1.0),
        "boolean" => json!(true),
        "array" => json!([]),
        "object" if depth < 8 => {
            let mut m = Map::new();
            let props = schema.get("properties").and_then(Value::as_object);
            for r in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let sub = props.and_then(|p| p.get(r)).cloned().unwrap_or(json!({}));
                m.insert(r.to_string(), example_value(&sub, depth + 1));
            }
            Value::Object(m)
        }
        "object" => json!({}),
        _ => json!("example"),
    }
}

#[cfg(test)]
mod tests {
    use super::assign_ids;

    #[test]
    fn ids_are_distinct_up_to_case_lint_valid_and_the_same_every_time() {
        let long = format!("simple_python_{}", "x".repeat(300));
        let sources = [
            ("simple_python", "simple_python_0"),
            ("simple_python", "simple-python-0"),
            ("simple_python", "Simple_Python_0"),
            ("simple_python", long.as_str()),
            ("simple_python", "a b/c"),
            ("parallel", "simple_python_0"),
            ("simple_python", "simple_python_1"),
        ];
        let ids = assign_ids(&sources);
        assert_eq!(ids, assign_ids(&sources), "deterministic");
        let keys: std::collections::BTreeSet<String> = ids
            .iter()
            .map(|(id, _)| crate::names::case_key(id))
            .collect();
        assert_eq!(keys.len(), sources.len(), "{ids:?}");
        for (id, _) in &ids {
            assert!(crate::task::is_path_safe(id), "{id}");
            assert!(id.len() <= crate::names::MAX_NAME_BYTES, "{id}");
        }
        // The first source in byte order keeps its id; an untroubled one is never renamed.
        assert_eq!(ids[2], ("bfcl-Simple-Python-0".to_string(), None));
        assert_eq!(ids[6], ("bfcl-simple-python-1".to_string(), None));
        assert!(ids[0].0.starts_with("bfcl-simple-python-0-") && ids[0].1.is_some());
        assert_ne!(ids[0].0, ids[5].0, "the same BFCL id in two categories");
        assert_eq!(ids[4].0, "bfcl-a-b-c");
        assert_eq!(ids[3].0.len(), crate::names::MAX_NAME_BYTES);
        assert!(ids[3].1.as_deref().unwrap().contains("more than the 120"));
    }
}
