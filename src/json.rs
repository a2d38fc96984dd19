//! JSON value helpers the scorer needs and serde_json does not give: equality of numbers by
//! exact mathematical value, JSON Pointer building, short previews for details, and a scanner
//! that tells where each character of JSON-like text sits (inside a string or not), for the
//! repairs that read text no JSON parser accepts.
//!
//! serde_json is built with `arbitrary_precision`, so a `Number` keeps the literal the model
//! wrote. That is what lets `9223372036854775807` differ from `9.223372036854776e18`.

use serde_json::{Number, Value};

/// A JSON number literal reduced to sign, significant digits and a power of ten, so that two
/// literals are equal exactly when their mathematical values are equal (`3` == `3.0` == `30e-1`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    /// Significant digits without leading or trailing zeros; empty for zero.
    digits: String,
    /// Value = 0.digits × 10^exp, i.e. the position of the decimal point.
    exp: i64,
}

fn decimal(literal: &str) -> Option<Decimal> {
    let (negative, rest) = match literal.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, literal.strip_prefix('+').unwrap_or(literal)),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !int_part
        .bytes()
        .chain(frac_part.bytes())
        .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let all: String = format!("{int_part}{frac_part}");
    let leading = all.len() - all.trim_start_matches('0').len();
    let digits = all
        .trim_start_matches('0')
        .trim_end_matches('0')
        .to_string();
    if digits.is_empty() {
        return Some(Decimal {
            negative: false,
            digits,
            exp: 0,
        });
    }
    let exp = int_part.len() as i64 - leading as i64 + exponent;
    Some(Decimal {
        negative,
        digits,
        exp,
    })
}

/// Numbers compared by mathematical value at full precision.
pub fn numbers_equal(a: &Number, b: &Number) -> bool {
    let (sa, sb) = (a.to_string(), b.to_string());
    match (decimal(&sa), decimal(&sb)) {
        (Some(da), Some(db)) => da == db,
        _ => sa == sb,
    }
}

/// JSON values compared exactly: same type, same strings, numbers by exact value, objects by
/// key set regardless of key order, arrays element-wise.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// True for an integer-valued number (`42`, `-7`, `3.0`, `1e3`).
pub fn is_integer(n: &Number) -> bool {
    match decimal(&n.to_string()) {
        Some(d) => d.digits.is_empty() || d.exp >= d.digits.len() as i64,
        None => false,
    }
}

/// Escapes one reference token for a JSON Pointer (RFC 6901).
pub fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Appends a token to a JSON Pointer.
pub fn pointer_push(base: &str, token: &str) -> String {
    format!("{base}/{}", pointer_token(token))
}

/// A pointer shown to people: the root is spelled `/` rather than the empty string.
pub fn show_pointer(p: &str) -> &str {
    if p.is_empty() { "/" } else { p }
}

/// A compact JSON rendering cut to `max` characters, for one-line details.
pub fn preview(v: &Value, max: usize) -> String {
    let s = serde_json::to_string(v).unwrap_or_default();
    clip(&s, max)
}

/// Cuts a string to at most `max` characters, marking the cut with an ellipsis.
pub fn clip(s: &str, max: usize) -> String {
    clip_cow(s, max).into_owned()
}

/// [`clip`], borrowing `s` when it is short enough (no more bytes than `max`: then no more
/// characters either, and nothing is counted).
pub fn clip_cow(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max || s.chars().count() <= max {
        return s.into();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out.into()
}

/// The JSON type name of a value, as JSON Schema spells it.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Replaces the value at `pointer` inside `root`; false when the pointer does not resolve.
pub fn replace_at(root: &mut Value, pointer: &str, new: Value) -> bool {
    match root.pointer_mut(pointer) {
        Some(slot) => {
            *slot = new;
            true
        }
        None => false,
    }
}

/// Where one character of JSON-like text sits, as [`StringScanner::step`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Outside every string.
    Outside,
    /// The `"` that opens a string.
    Opens,
    /// A character of a string's text that is not part of an escape.
    Inside,
    /// The backslash that starts an escape inside a string.
    Escape,
    /// The character right after that backslash.
    Escaped,
    /// The `"` that closes a string.
    Closes,
}

/// Reads JSON-like text one character at a time and says whether each one is inside a string:
/// the one state machine every repair of broken arguments (and BFCL's re-spacing) walks with,
/// so that none of them has its own idea of where a string ends. It does not validate anything.
#[derive(Debug, Clone, Copy, Default)]
pub struct StringScanner {
    in_string: bool,
    escaped: bool,
}

impl StringScanner {
    /// Where `c`, the next character, sits; moves past it.
    pub fn step(&mut self, c: char) -> Place {
        if !self.in_string {
            if c == '"' {
                self.in_string = true;
                return Place::Opens;
            }
            return Place::Outside;
        }
        if self.escaped {
            self.escaped = false;
            return Place::Escaped;
        }
        match c {
            '\\' => {
                self.escaped = true;
                Place::Escape
            }
            '"' => {
                self.in_string = false;
                Place::Closes
            }
            _ => Place::Inside,
        }
    }

    /// Takes back the close of the string just read: its `"` was part of the text (the
    /// inner-quotes repair decides that by what follows it).
    pub fn reopen(&mut self) {
        self.in_string = true;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_scanner_knows_strings_escapes_and_their_ends() {
        let text = r#"{"a\"b": "c\\", d: "e"}"#;
        let mut scan = StringScanner::default();
        let places: String = text
            .chars()
            .map(|c| match scan.step(c) {
                Place::Outside => '.',
                Place::Opens => '(',
                Place::Inside => 's',
                Place::Escape => '\\',
                Place::Escaped => 'e',
                Place::Closes => ')',
            })
            .collect();
        assert_eq!(places, r#".(s\es)..(s\e).....(s)."#);
        // A closing quote taken back leaves the scanner inside the string.
        let mut scan = StringScanner::default();
        for c in "\"ab".chars() {
            scan.step(c);
        }
        assert_eq!(scan.step('"'), Place::Closes);
        scan.reopen();
        assert_eq!(scan.step(','), Place::Inside);
        assert_eq!(scan.step('"'), Place::Closes);
        assert_eq!(scan.step(','), Place::Outside);
    }

    use super::*;
    use serde_json::json;

    fn n(s: &str) -> Number {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn numbers_compare_by_exact_value() {
        assert!(numbers_equal(&n("3"), &n("3.0")));
        assert!(numbers_equal(&n("30e-1"), &n("3")));
        assert!(numbers_equal(&n("0"), &n("-0.0")));
        assert!(numbers_equal(
            &n("9223372036854775807"),
            &n("9223372036854775807")
        ));
        assert!(!numbers_equal(
            &n("9.223372036854776e18"),
            &n("9223372036854775807")
        ));
        assert!(!numbers_equal(
            &n("9007199254740993"),
            &n("9007199254740992")
        ));
        assert!(numbers_equal(
            &n("-9223372036854775808"),
            &n("-9.223372036854775808e18")
        ));
        assert!(!numbers_equal(&n("1"), &n("-1")));
    }

    #[test]
    fn integer_valued_numbers() {
        assert!(is_integer(&n("3.0")));
        assert!(is_integer(&n("1e3")));
        assert!(is_integer(&n("0")));
        assert!(!is_integer(&n("3.5")));
        assert!(!is_integer(&n("1e-1")));
    }

    #[test]
    fn values_ignore_key_order_but_not_types() {
        assert!(values_equal(
            &json!({"a": 1, "b": [1.0]}),
            &json!({"b": [1], "a": 1.0})
        ));
        assert!(!values_equal(&json!({"a": "1"}), &json!({"a": 1})));
        assert!(!values_equal(&json!([1, 2]), &json!([2, 1])));
    }

    #[test]
    fn pointers_escape_tokens() {
        assert_eq!(pointer_push("/a", "b/c~d"), "/a/b~1c~0d");
        assert_eq!(show_pointer(""), "/");
    }
}
