//! BFCL's AST checker rules for one parameter, so that callcheck's value accuracy on an imported
//! task agrees with what BFCL's own checker says about the same output, quirks included.
//!
//! Written from the rules of `bfcl_eval/eval_checker/ast_eval/ast_checker.py` (type checking,
//! `standardize_string`, `string_checker`, `list_checker`, `dict_checker`, `list_dict_checker`),
//! `bfcl_eval/constants/type_mappings.py` (the Java and JavaScript type tables) and the two
//! value parsers `eval_checker/ast_eval/type_convertor/java_type_converter.py` and
//! `js_type_converter.py`. Values are JSON; Python's semantics are reproduced where they matter:
//! `json.loads` gives an `int` for `5` and a `float` for `5.0`, `==` compares `1 == 1.0 == True`,
//! and a string iterates as its characters.

use crate::task::{Accept, BfclLanguage};
use regex::Regex;
use serde_json::{Map, Number, Value};
use std::sync::LazyLock;

/// The Python type of a value as BFCL's checker sees it after `json.loads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PyType {
    Str,
    Int,
    Float,
    Bool,
    List,
    Dict,
    None,
}

fn py_type(v: &Value) -> PyType {
    match v {
        Value::String(_) => PyType::Str,
        Value::Bool(_) => PyType::Bool,
        Value::Array(_) => PyType::List,
        Value::Object(_) => PyType::Dict,
        Value::Null => PyType::None,
        Value::Number(n) => {
            if n.to_string().contains(['.', 'e', 'E']) {
                PyType::Float
            } else {
                PyType::Int
            }
        }
    }
}

/// A type name of BFCL's function docs, per language, as the checker converts it
/// (`PYTHON_TYPE_MAPPING` in ast_checker.py; `JAVA_TYPE_CONVERSION`, `JS_TYPE_CONVERSION` in
/// type_mappings.py). `None` where BFCL's table has no entry (its checker would raise).
fn converted_type(lang: BfclLanguage, t: &str) -> Option<PyType> {
    use PyType::*;
    Some(match lang {
        BfclLanguage::Python => match t {
            "string" | "any" => Str,
            "integer" => Int,
            "float" => Float,
            "boolean" => Bool,
            "array" | "tuple" => List,
            "dict" => Dict,
            _ => return Option::None,
        },
        BfclLanguage::Java => match t {
            "byte" | "short" | "integer" | "long" => Int,
            "float" | "double" => Float,
            "boolean" => Bool,
            "char" | "String" | "any" => Str,
            "Array" | "ArrayList" | "Queue" | "Stack" => List,
            "HashMap" | "Hashtable" => Dict,
            // `Set` converts to Python's set, which no JSON value is.
            _ => return Option::None,
        },
        BfclLanguage::Javascript => match t {
            "String" | "any" => Str,
            "integer" | "Bigint" => Int,
            "float" => Float,
            "Boolean" => Bool,
            "dict" => Dict,
            "array" => List,
            _ => return Option::None,
        },
    })
}

/// BFCL's possible-answer list for a parameter: the values, and `""` when it may be left out.
fn possible_answers(a: &Accept) -> Vec<Value> {
    let mut out = a.values.clone();
    if a.omit {
        out.push(Value::String(String::new()));
    }
    out
}

/// Whether BFCL's `simple_function_checker` accepts `value` for a parameter (the body of its
/// loop over the model's parameters).
pub fn param_accepts(a: &Accept, value: &Value) -> bool {
    let Some(t) = a.bfcl_type.as_deref() else {
        return false;
    };
    let Some(expected) = converted_type(a.language, t) else {
        return false;
    };
    let possible = possible_answers(a);
    let nested_list = matches!(t, "Array" | "ArrayList" | "array");
    let (value, nested) = match a.language {
        BfclLanguage::Java | BfclLanguage::Javascript => {
            // Java and JavaScript arguments are sent as strings in the language's syntax.
            let Value::String(s) = value else {
                return false;
            };
            let items = if nested_list {
                a.bfcl_items.as_deref()
            } else {
                None
            };
            let nested = match items {
                Some(i) => match converted_type(a.language, i) {
                    Some(n) => Some(n),
                    None => return false,
                },
                None if nested_list => return false,
                None => None,
            };
            let converted = match a.language {
                BfclLanguage::Java => java::convert(s, t, items),
                _ => js::convert(s, t, items),
            };
            match converted {
                Some(v) => (v, nested),
                None => return false,
            }
        }
        BfclLanguage::Python => {
            let nested = if matches!(t, "array" | "tuple") {
                match a
                    .bfcl_items
                    .as_deref()
                    .map(|i| converted_type(a.language, i))
                {
                    Some(Some(n)) => Some(n),
                    _ => return false,
                }
            } else {
                None
            };
            // "Allow python auto conversion from int to float" — at the top level only.
            let v = if t == "float" && py_type(value) == PyType::Int {
                value
                    .as_f64()
                    .and_then(Number::from_f64)
                    .map(Value::Number)
                    .unwrap_or_else(|| value.clone())
            } else {
                value.clone()
            };
            (v, nested)
        }
    };
    let Some(is_variable) = type_check(&value, &possible, expected, nested) else {
        return false;
    };
    if !is_variable {
        if expected == PyType::Dict {
            return dict_check(&value, &possible);
        } else if expected == PyType::List && nested == Some(PyType::Dict) {
            return list_dict_check(&value, &possible);
        } else if expected == PyType::Str {
            return string_check(&value, &possible);
        } else if expected == PyType::List {
            return list_check(&value, &possible);
        }
    }
    py_in(&value, &possible)
}

/// The type of the first possible answer that is not the optional marker `""`.
fn possible_answer_type(possible: &[Value]) -> Option<PyType> {
    possible
        .iter()
        .find(|p| p.as_str() != Some(""))
        .map(py_type)
}

/// BFCL's `type_checker`: `None` when the type is wrong, else whether the value is taken for a
/// "variable" (the possible answers are of another type than the doc's, so they are compared
/// as they are, without normalisation). Nested types are checked one level deep, and an int is
/// not accepted where the items are floats.
fn type_check(
    value: &Value,
    possible: &[Value],
    expected: PyType,
    nested: Option<PyType>,
) -> Option<bool> {
    let pat = possible_answer_type(possible);
    let is_variable = pat.is_some_and(|p| p != expected);
    let vt = py_type(value);
    if vt == expected {
        let Some(nested) = nested else {
            return Some(is_variable);
        };
        for item in possible {
            let mut flag = true;
            if let Value::Array(item) = item {
                for vi in value.as_array().into_iter().flatten() {
                    if type_check(vi, item, nested, None).is_none() {
                        flag = false;
                        break;
                    }
                }
            }
            if flag {
                return Some(is_variable);
            }
        }
        return None;
    }
    if pat == Some(vt) {
        return Some(true);
    }
    None
}

/// BFCL's `standardize_string`: spaces and `,./-_*^` removed, lower case, `'` made `"`.
pub fn standardize(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .collect::<String>()
        .to_lowercase()
        .replace('\'', "\"")
}

fn std_value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(standardize(s)),
        other => other.clone(),
    }
}

/// Python's iteration over a possible answer: a list's elements, a string's characters.
fn py_iter(v: &Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(a) => Some(a.clone()),
        Value::String(s) => Some(s.chars().map(|c| Value::String(c.to_string())).collect()),
        _ => None,
    }
}

fn py_len(v: &Value) -> Option<usize> {
    match v {
        Value::Array(a) => Some(a.len()),
        Value::String(s) => Some(s.chars().count()),
        Value::Object(o) => Some(o.len()),
        _ => None,
    }
}

fn string_check(value: &Value, possible: &[Value]) -> bool {
    let Value::String(s) = value else {
        return false;
    };
    let s = standardize(s);
    possible
        .iter()
        .filter_map(Value::as_str)
        .any(|p| standardize(p) == s)
}

/// BFCL's `list_checker`: string elements normalised, then the whole list must equal one
/// possible answer element by element, in order.
fn list_check(value: &Value, possible: &[Value]) -> bool {
    let Value::Array(items) = value else {
        return false;
    };
    let model = Value::Array(items.iter().map(std_value).collect());
    possible.iter().any(|p| match py_iter(p) {
        Some(elems) => py_eq(&model, &Value::Array(elems.iter().map(std_value).collect())),
        None => false,
    })
}

/// BFCL's `dict_checker`: every key the model gave must be in one possible dictionary with a
/// (normalised) acceptable value, and every key it left out must list `""`. Values inside are
/// compared with Python's `==`, so there an int equals a float and nothing is parsed further.
fn dict_check(value: &Value, possible: &[Value]) -> bool {
    let Value::Object(model) = value else {
        return false;
    };
    'answers: for answer in possible {
        if answer.as_str() == Some("") {
            continue;
        }
        let Value::Object(answer) = answer else {
            continue;
        };
        for (k, v) in model {
            let Some(allowed) = answer.get(k).and_then(py_iter) else {
                continue 'answers;
            };
            let allowed: Vec<Value> = allowed.iter().map(std_value).collect();
            if !py_in(&std_value(v), &allowed) {
                continue 'answers;
            }
        }
        for (k, allowed) in answer {
            if !model.contains_key(k)
                && !py_in(
                    &Value::String(String::new()),
                    &py_iter(allowed).unwrap_or_default(),
                )
            {
                continue 'answers;
            }
        }
        return true;
    }
    false
}

/// BFCL's `list_dict_checker`: a list of dictionaries against each possible list, same length,
/// dictionary by dictionary in order.
fn list_dict_check(value: &Value, possible: &[Value]) -> bool {
    let Value::Array(model) = value else {
        return false;
    };
    possible.iter().any(|answer| {
        py_len(answer) == Some(model.len())
            && py_iter(answer).is_some_and(|dicts| {
                model
                    .iter()
                    .zip(&dicts)
                    .all(|(m, d)| dict_check(m, std::slice::from_ref(d)))
            })
    })
}

fn py_in(v: &Value, list: &[Value]) -> bool {
    list.iter().any(|x| py_eq(v, x))
}

/// Python's `==` on values from `json.loads`: numbers (and booleans, which are 0 and 1) by
/// value, lists element by element, dictionaries by keys and values.
fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        (Value::Number(_) | Value::Bool(_), Value::Number(_) | Value::Bool(_)) => {
            match (py_number(a), py_number(b)) {
                (Some(x), Some(y)) => match (x, y) {
                    (PyNum::Int(i), PyNum::Int(j)) => i == j,
                    (x, y) => x.as_f64() == y.as_f64(),
                },
                _ => a == b,
            }
        }
        _ => a == b,
    }
}

#[derive(Clone, Copy)]
enum PyNum {
    Int(i128),
    Float(f64),
}

impl PyNum {
    fn as_f64(self) -> f64 {
        match self {
            PyNum::Int(i) => i as f64,
            PyNum::Float(f) => f,
        }
    }
}

fn py_number(v: &Value) -> Option<PyNum> {
    match v {
        Value::Bool(b) => Some(PyNum::Int(i128::from(*b))),
        Value::Number(n) => {
            if py_type(v) == PyType::Int {
                n.to_string().parse().ok().map(PyNum::Int)
            } else {
                n.as_f64().map(PyNum::Float)
            }
        }
        _ => None,
    }
}

/// A Python `int` as JSON.
fn int_value(digits: &str) -> Option<Value> {
    digits
        .parse::<i128>()
        .ok()
        .and_then(|i| serde_json::from_str::<Value>(&i.to_string()).ok())
}

/// A Python `float` as JSON (`None` for inf and nan, which JSON cannot hold).
fn float_value(text: &str) -> Option<Value> {
    text.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map(Value::Number)
}

/// What BFCL's Java and JavaScript converters do with a number literal: where `pattern` matches
/// `s`, the number read from `s` less its `suffix` letters (`10L`, `1.5f`, `7n`) by `read`;
/// else, or where it does not read, the string as it came.
fn literal(pattern: &Regex, s: &str, suffix: usize, read: fn(&str) -> Option<Value>) -> Value {
    let text = || Value::String(s.to_string());
    if pattern.is_match(s) {
        read(&s[..s.len() - suffix]).unwrap_or_else(text)
    } else {
        text()
    }
}

/// `true` and `false` as JSON booleans, anything else as the string: both converters' rule.
fn boolean(s: &str) -> Value {
    match s {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(s.to_string()),
    }
}

/// Python's `int(s)` then `float(s)`, else the string: how BFCL's parsers read an untyped value.
fn int_or_float_or_string(s: &str) -> Value {
    let t = s.trim().replace('_', "");
    let t = t.strip_prefix('+').unwrap_or(&t);
    if !t.is_empty()
        && t.trim_start_matches('-')
            .bytes()
            .all(|b| b.is_ascii_digit())
        && let Some(v) = int_value(t)
    {
        return v;
    }
    if let Some(v) = float_value(t) {
        return v;
    }
    Value::String(s.to_string())
}

/// Python's `s[1:-1]`.
fn strip_ends(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() < 2 {
        String::new()
    } else {
        chars[1..chars.len() - 1].iter().collect()
    }
}

fn re(pattern: &str) -> Regex {
    // The patterns are constants of this file; a bad one is a programming error caught by the
    // unit tests, never by user input.
    Regex::new(pattern).unwrap_or_else(|e| panic!("bad built-in pattern {pattern}: {e}"))
}

/// `java_type_converter.py`, as a function from the model's string to a JSON value.
pub mod java {
    use super::*;

    static INT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+$"));
    static FLOAT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$"));
    static DOUBLE: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$"));
    static LONG: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+[lL]$"));
    static AS_LIST: LazyLock<Regex> =
        LazyLock::new(|| re(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)"));
    static ADDS: LazyLock<Regex> =
        LazyLock::new(|| re(r"(?s)new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}"));
    static ADD: LazyLock<Regex> = LazyLock::new(|| re(r"add\((.+?)\)"));
    static EMPTY_LIST: LazyLock<Regex> = LazyLock::new(|| re(r"new\s+ArrayList<\w*>\(\)"));
    static ARRAY: LazyLock<Regex> = LazyLock::new(|| re(r"new\s+\w+\[\]\s*\{(.*?)\}"));
    static MAP: LazyLock<Regex> =
        LazyLock::new(|| re(r"(?s)new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}"));
    static PUT: LazyLock<Regex> = LazyLock::new(|| re(r#"put\("(.*?)",\s*(.*?)\)"#));
    static EMPTY_MAP: LazyLock<Regex> = LazyLock::new(|| re(r"new\s+HashMap<.*?>\s*\(\)"));

    /// `java_type_converter(value, expected_type, nested_type)`; `None` where BFCL raises.
    pub fn convert(s: &str, t: &str, nested: Option<&str>) -> Option<Value> {
        let text = || Value::String(s.to_string());
        Some(match t {
            "byte" | "short" | "integer" => literal(&INT, s, 0, int_value),
            "float" => literal(&FLOAT, s, 1, float_value),
            "double" => literal(&DOUBLE, s, 0, float_value),
            "long" => literal(&LONG, s, 1, int_value),
            "boolean" => boolean(s),
            // BFCL's char pattern `^\'.$\'` can never match, and both branches return the text.
            "char" | "String" | "any" => text(),
            "ArrayList" => array_list(s, nested)?,
            "Array" => array(s, nested)?,
            "HashMap" => hash_map(s),
            _ => return None,
        })
    }

    fn element(e: &str, nested: Option<&str>) -> Option<Value> {
        match nested {
            Some("char") | Some("String") => Some(Value::String(strip_ends(e))),
            Some(n) => convert(e, n, None),
            None => Some(value(e)),
        }
    }

    fn array_list(s: &str, nested: Option<&str>) -> Option<Value> {
        if let Some(c) = AS_LIST.captures(s) {
            let items: Option<Vec<Value>> =
                c[1].split(',').map(|e| element(e.trim(), nested)).collect();
            return Some(Value::Array(items?));
        }
        if let Some(c) = ADDS.captures(s) {
            let items: Option<Vec<Value>> = ADD
                .captures_iter(&c[1])
                .map(|m| element(m[1].trim(), nested))
                .collect();
            return Some(Value::Array(items?));
        }
        if EMPTY_LIST.is_match(s) {
            return Some(Value::Array(Vec::new()));
        }
        Some(Value::String(s.to_string()))
    }

    fn array(s: &str, nested: Option<&str>) -> Option<Value> {
        let Some(c) = ARRAY.captures(s) else {
            return Some(Value::String(s.to_string()));
        };
        let items: Option<Vec<Value>> = c[1]
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(|x| match nested {
                Some(n) => convert(x, n, None),
                None => Some(value(x)),
            })
            .collect();
        Some(Value::Array(items?))
    }

    fn hash_map(s: &str) -> Value {
        if let Some(c) = MAP.captures(s) {
            let mut m = Map::new();
            if !c[1].trim().is_empty() {
                for p in PUT.captures_iter(&c[1]) {
                    m.insert(p[1].to_string(), value(p[2].trim()));
                }
            }
            return Value::Object(m);
        }
        if EMPTY_MAP.is_match(s) {
            return Value::Object(Map::new());
        }
        Value::String(s.to_string())
    }

    /// `parse_java_value`: a value read without knowing its type.
    pub fn value(s: &str) -> Value {
        match s {
            "true" => return Value::Bool(true),
            "false" => return Value::Bool(false),
            _ => {}
        }
        if s.starts_with('"') && s.ends_with('"') {
            return Value::String(strip_ends(s));
        }
        if LONG.is_match(s)
            && let Some(v) = int_value(&s[..s.len() - 1])
        {
            return v;
        }
        if FLOAT.is_match(s)
            && let Some(v) = float_value(&s[..s.len() - 1])
        {
            return v;
        }
        int_or_float_or_string(s)
    }
}

/// `js_type_converter.py`, as a function from the model's string to a JSON value.
pub mod js {
    use super::*;

    static INT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+$"));
    static FLOAT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+(\.\d+)?$"));
    static BIGINT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+n$"));
    static ARRAY_2D: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"^(?:\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\))",
        )
    });
    static INNER: LazyLock<Regex> = LazyLock::new(|| re(r"\[(.*?)\]"));
    static ARRAY: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:\[(.*?)\]|\bnew\s+Array\((.*?)\))"));
    static DICT: LazyLock<Regex> = LazyLock::new(|| re(r"^\{(.*?)\}"));

    fn quoted(s: &str) -> bool {
        (s.starts_with('"') && s.ends_with('"')) || (s.starts_with('\'') && s.ends_with('\''))
    }

    /// `js_type_converter(value, expected_type, nested_type)`; `None` where BFCL raises.
    pub fn convert(s: &str, t: &str, nested: Option<&str>) -> Option<Value> {
        let text = || Value::String(s.to_string());
        Some(match t {
            "String" => {
                if quoted(s) {
                    Value::String(strip_ends(s))
                } else {
                    text()
                }
            }
            "integer" => literal(&INT, s, 0, int_value),
            "float" => literal(&FLOAT, s, 0, float_value),
            "Bigint" => literal(&BIGINT, s, 1, int_value),
            "Boolean" => boolean(s),
            "dict" => dict(s),
            "array" => array(s, nested),
            "any" => text(),
            _ => return None,
        })
    }

    /// `parse_js_collection(code, "array", nested_type)`; on any failure, the text itself.
    pub fn array(code: &str, nested: Option<&str>) -> Value {
        let code = code.trim();
        let text = || Value::String(code.to_string());
        if let Some(m) = ARRAY_2D.find(code) {
            let mut out = Vec::new();
            for (idx, c) in INNER.captures_iter(m.as_str()).enumerate() {
                let mut inner = c[1].trim();
                if idx == 0 && inner.starts_with('[') {
                    inner = &inner[1..];
                }
                out.push(Value::Array(
                    inner.split(',').map(|e| value(e.trim())).collect(),
                ));
            }
            return Value::Array(out);
        }
        let Some(c) = ARRAY.captures(code) else {
            return text();
        };
        let body = c
            .get(1)
            .or_else(|| c.get(2))
            .map(|g| g.as_str().trim())
            .unwrap_or("");
        let elements: Vec<&str> = if body.is_empty() {
            Vec::new()
        } else {
            body.split(',').collect()
        };
        let items: Option<Vec<Value>> = elements
            .iter()
            .map(|e| match nested {
                // BFCL passes "String" as the nested type of a quoted element, which only
                // matters for arrays of arrays; the element's own conversion is the same.
                Some(n) => convert(e.trim(), n, None),
                None => Some(value(e.trim())),
            })
            .collect();
        match items {
            Some(items) => Value::Array(items),
            None => text(),
        }
    }

    /// `parse_js_collection(code, "dict")`.
    pub fn dict(code: &str) -> Value {
        let code = code.trim();
        if code == "{}" {
            return Value::Object(Map::new());
        }
        let Some(c) = DICT.captures(code) else {
            return Value::String(code.to_string());
        };
        let mut m = Map::new();
        for (key, val) in pairs(&c[1]) {
            let key = key.trim().trim_matches(['\'', '"']).to_string();
            let val = val.trim();
            let v = if val.starts_with('[') && val.ends_with(']') {
                array(val, None)
            } else if val.starts_with('{') && val.ends_with('}') {
                dict(val)
            } else {
                value(val.trim_matches(['\'', '"']))
            };
            m.insert(key, v);
        }
        Value::Object(m)
    }

    /// `re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", content)`, by hand because the
    /// `regex` crate has no look-ahead: a value runs to the first comma after which another
    /// `key:` follows before any further comma, or to the end.
    fn pairs(content: &str) -> Vec<(String, String)> {
        let s: Vec<char> = content.chars().collect();
        let n = s.len();
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < n {
            let Some(colon) = (pos..n).find(|&i| s[i] == ':') else {
                break;
            };
            if colon == pos {
                pos += 1;
                continue;
            }
            let key: String = s[pos..colon].iter().collect();
            let mut q = colon + 1;
            while q < n && s[q].is_whitespace() {
                q += 1;
            }
            let mut end = n;
            let mut next = n;
            for e in q..n {
                if s[e] != ',' {
                    continue;
                }
                let mut r = e + 1;
                while r < n && s[r].is_whitespace() {
                    r += 1;
                }
                let next_comma = (e + 1..n).find(|&i| s[i] == ',').unwrap_or(n);
                // Some ':' at least two characters after the comma, with no comma before it.
                if let Some(j) = (e + 2..next_comma).find(|&i| s[i] == ':') {
                    end = e;
                    // `\s*` is greedy but gives back one space when the ':' follows it directly.
                    next = if j > r { r } else { j - 1 };
                    break;
                }
            }
            out.push((key, s[q..end].iter().collect()));
            pos = next.max(colon + 1);
        }
        out
    }

    /// `parse_js_value`.
    pub fn value(s: &str) -> Value {
        let s = s.trim();
        match s {
            "true" => return Value::Bool(true),
            "false" => return Value::Bool(false),
            _ => {}
        }
        if quoted(s) {
            return Value::String(strip_ends(s));
        }
        int_or_float_or_string(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn accept(
        values: Value,
        omit: bool,
        t: &str,
        items: Option<&str>,
        lang: BfclLanguage,
    ) -> Accept {
        Accept {
            values: values.as_array().cloned().unwrap_or_default(),
            omit,
            rule: crate::task::Rule::Bfcl,
            bfcl_type: Some(t.into()),
            bfcl_items: items.map(String::from),
            language: lang,
        }
    }
    fn py(values: Value, t: &str) -> Accept {
        accept(values, false, t, None, BfclLanguage::Python)
    }

    #[test]
    fn strings_are_normalised_as_bfcl_does() {
        let a = py(json!(["New York, NY"]), "string");
        assert!(param_accepts(&a, &json!("new york ny")));
        assert!(param_accepts(&a, &json!("NEW-YORK/NY.")));
        assert!(!param_accepts(&a, &json!("New York City")));
        assert_eq!(standardize("It's 3*4^2 a_b"), "it\"s342ab");
    }

    #[test]
    fn int_is_a_float_at_the_top_level_only() {
        assert!(param_accepts(&py(json!([5.0]), "float"), &json!(5)));
        let list = accept(
            json!([[1.0, 2.0]]),
            false,
            "array",
            Some("float"),
            BfclLanguage::Python,
        );
        assert!(param_accepts(&list, &json!([1.0, 2.0])));
        assert!(
            !param_accepts(&list, &json!([1, 2])),
            "ints inside a float list are refused"
        );
        // ...but a float for an integer is refused at the top level.
        assert!(!param_accepts(&py(json!([5]), "integer"), &json!(5.0)));
    }

    #[test]
    fn lists_are_ordered_and_dicts_keyed() {
        let list = accept(
            json!([["a", "b"]]),
            false,
            "array",
            Some("string"),
            BfclLanguage::Python,
        );
        assert!(param_accepts(&list, &json!(["A", "b"])));
        assert!(!param_accepts(&list, &json!(["b", "a"])));
        let d = py(json!([{"city": ["Paris"], "unit": ["c", ""]}]), "dict");
        assert!(param_accepts(&d, &json!({"city": "paris"})));
        assert!(param_accepts(&d, &json!({"city": "Paris", "unit": "C"})));
        assert!(
            !param_accepts(&d, &json!({"unit": "c"})),
            "city is not optional"
        );
        assert!(!param_accepts(&d, &json!({"city": "Paris", "x": 1})));
    }

    #[test]
    fn java_values_are_parsed_from_their_source_text() {
        let l = accept(json!([42]), false, "long", None, BfclLanguage::Java);
        assert!(param_accepts(&l, &json!("42L")));
        assert!(!param_accepts(&l, &json!("42")));
        assert!(
            !param_accepts(&l, &json!(42)),
            "Java arguments must be strings"
        );
        let m = accept(
            json!([{"limit": [50], "schemaFilter": ["public"]}]),
            false,
            "HashMap",
            None,
            BfclLanguage::Java,
        );
        assert!(param_accepts(
            &m,
            &json!(
                "new HashMap<String, Object>() {{ put(\"limit\", 50); put(\"schemaFilter\", \"public\"); }}"
            )
        ));
        let al = accept(
            json!([[101, 202]]),
            false,
            "ArrayList",
            Some("long"),
            BfclLanguage::Java,
        );
        assert!(param_accepts(
            &al,
            &json!("new ArrayList<>(Arrays.asList(101L, 202L))")
        ));
        assert_eq!(
            java::convert("new int[]{1, 2, 3}", "Array", None),
            Some(json!([1, 2, 3]))
        );
        assert_eq!(java::convert("3e3F", "float", None), Some(json!(3000.0)));
    }

    #[test]
    fn javascript_values_are_parsed_from_their_source_text() {
        assert_eq!(
            js::dict("{'key1': 123, 'key2': 'value', 'key3': false}"),
            json!({"key1": 123, "key2": "value", "key3": false})
        );
        let d = js::dict(
            r#"{"initialState": initialStateObject, "reducers": reducersMap, "middlewares": ["loggerMiddleware"], "enhancers": ["applyMiddleware", "myMiddleWare"]}"#,
        );
        assert_eq!(d["middlewares"], json!(["loggerMiddleware"]));
        assert_eq!(d["enhancers"], json!(["applyMiddleware", "myMiddleWare"]));
        assert_eq!(d["reducers"], json!("reducersMap"));
        assert_eq!(
            js::array(" [ [ 1, 2 ], [ 3,   4], [5, 6]]", Some("array")),
            json!([[1, 2], [3, 4], [5, 6]])
        );
        assert_eq!(
            js::array("new Array(4, 5, 6)", Some("integer")),
            json!([4, 5, 6])
        );
        let f = accept(json!([4.0]), false, "float", None, BfclLanguage::Javascript);
        assert!(param_accepts(&f, &json!("4")));
        assert!(param_accepts(&f, &json!("4.0")));
    }

    #[test]
    fn python_equality_holds_across_int_float_and_bool() {
        assert!(py_eq(&json!(1), &json!(1.0)));
        assert!(py_eq(&json!(true), &json!(1)));
        assert!(!py_eq(&json!("1"), &json!(1)));
    }
}
