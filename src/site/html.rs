//! HTML text helpers shared by the page renderers: escaping, relative links, and JSON pretty-printed
//! as HTML with one value marked in place (the transcript page's `#fail` anchor).

use serde_json::Value;
use std::fmt::Write;

/// Escapes text for element content only (`&`, `<`, `>`): quotes need no escaping there, and
/// leaving them alone keeps JSON-heavy transcript pages a third smaller. Never use it for
/// attribute values.
pub fn text_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
}

/// [`text_into`], returning a new string.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 16);
    text_into(&mut out, s);
    out
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    escape_into(&mut out, s);
    out
}

/// Escapes `s` onto `out`.
pub fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// The prefix that leads from a page at `depth` folders below the site root back to the root:
/// `""`, `"../"`, `"../../"`… Every link on the site is relative, so the site works from the file
/// system and from a GitHub Pages project path alike.
pub fn root(depth: usize) -> String {
    "../".repeat(depth)
}

/// The depth of a page from its path relative to the site root (`models/x.html` → 1).
pub fn depth_of(path: &str) -> usize {
    path.matches('/').count()
}

/// The anchor id of a model × task cell on the index page. `~` cannot occur in model or task
/// names (SPEC §4), so the id is unambiguous.
pub fn cell_id(model: &str, task: &str) -> String {
    format!("c~{model}~{task}")
}

/// A file-name-safe slug for a free-form name (tags are not restricted like ids are): the name
/// itself when it is path-safe, otherwise its safe characters plus a short hash, so that two
/// tags never share a file.
pub fn slug(name: &str) -> String {
    if crate::task::is_path_safe(name) {
        return name.to_string();
    }
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let hash = crate::task::sha256_hex(name.as_bytes());
    format!("{safe}-{}", &hash[..10])
}

/// JSON pretty-printed as HTML element content (two-space indent, serde_json's layout), with the value at
/// JSON Pointer `mark` wrapped in `<mark id="fail">`. When `mark` does not exist in `v` (a missing
/// required key), its nearest existing ancestor is marked instead, so the anchor always lands.
pub fn json_html(v: &Value, mark: Option<&str>) -> String {
    let target = mark.map(|m| nearest_existing(v, m));
    let mut out = String::new();
    write_value(&mut out, v, "", 0, target.as_deref(), false);
    out
}

/// The longest prefix of `pointer` that resolves in `v`.
fn nearest_existing(v: &Value, pointer: &str) -> String {
    let mut p = pointer.to_string();
    loop {
        if v.pointer(&p).is_some() {
            return p;
        }
        match p.rfind('/') {
            Some(i) => p.truncate(i),
            None => return String::new(),
        }
    }
}

fn indent(out: &mut String, n: usize) {
    for _ in 0..n {
        out.push_str("  ");
    }
}

fn scalar(out: &mut String, v: &Value) {
    text_into(out, &serde_json::to_string(v).unwrap_or_default());
}

fn write_value(
    out: &mut String,
    v: &Value,
    path: &str,
    level: usize,
    target: Option<&str>,
    marked: bool,
) {
    // The root is marked here; object members are marked with their key, by the caller.
    let mark_here = !marked && target == Some(path) && path.is_empty();
    if mark_here {
        out.push_str("<mark id=\"fail\">");
    }
    let inside = target.is_some_and(|t| t.starts_with(path));
    let target = if inside { target } else { None };
    match v {
        Value::Object(o) if !o.is_empty() => {
            out.push_str("{\n");
            let n = o.len();
            for (i, (k, x)) in o.iter().enumerate() {
                let p = crate::json::pointer_push(path, k);
                indent(out, level + 1);
                let mark_member = target == Some(p.as_str());
                if mark_member {
                    out.push_str("<mark id=\"fail\">");
                }
                scalar(out, &Value::String(k.clone()));
                out.push_str(": ");
                write_value(out, x, &p, level + 1, target, mark_member);
                if mark_member {
                    out.push_str("</mark>");
                }
                if i + 1 < n {
                    out.push(',');
                }
                out.push('\n');
            }
            indent(out, level);
            out.push('}');
        }
        Value::Array(a) if !a.is_empty() => {
            out.push_str("[\n");
            let n = a.len();
            for (i, x) in a.iter().enumerate() {
                let p = format!("{path}/{i}");
                indent(out, level + 1);
                let mark_item = target == Some(p.as_str());
                if mark_item {
                    out.push_str("<mark id=\"fail\">");
                }
                write_value(out, x, &p, level + 1, target, mark_item);
                if mark_item {
                    out.push_str("</mark>");
                }
                if i + 1 < n {
                    out.push(',');
                }
                out.push('\n');
            }
            indent(out, level);
            out.push(']');
        }
        other => scalar(out, other),
    }
    if mark_here {
        out.push_str("</mark>");
    }
}

/// Quotes a string for a POSIX shell: single quotes, with each `'` written as `'\''`.
pub fn shell_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Formats a byte count for people: `812 B`, `14.2 KB`, `3.1 MB`.
pub fn bytes(n: u64) -> String {
    let mut s = String::new();
    if n < 1000 {
        let _ = write!(s, "{n} B");
    } else if n < 1_000_000 {
        let _ = write!(s, "{:.1} KB", n as f64 / 1000.0);
    } else {
        let _ = write!(s, "{:.1} MB", n as f64 / 1_000_000.0);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pretty_json_matches_serde_layout_when_nothing_is_marked() {
        let v = json!({"a": [1, {"b": "x<y"}], "c": {}, "d": []});
        let plain = serde_json::to_string_pretty(&v).unwrap();
        assert_eq!(json_html(&v, None), text(&plain));
        assert!(json_html(&v, None).contains("x&lt;y"));
    }

    #[test]
    fn marks_a_member_an_item_or_the_nearest_ancestor() {
        let v = json!({"a": [1, 2], "o": {"k": true}});
        assert!(json_html(&v, Some("/a/1")).contains("<mark id=\"fail\">2</mark>"));
        assert!(json_html(&v, Some("/o/k")).contains("<mark id=\"fail\">\"k\": true</mark>"));
        // A missing key marks its parent object (the member "o" with its value).
        let h = json_html(&v, Some("/o/missing"));
        assert!(h.contains("<mark id=\"fail\">\"o\": {"), "{h}");
        assert_eq!(h.matches("id=\"fail\"").count(), 1);
        // A path that shares a prefix but is another key is not marked.
        let w = json!({"ab": 1, "a": 2});
        let h = json_html(&w, Some("/a"));
        assert!(h.contains("<mark id=\"fail\">\"a\": 2</mark>"), "{h}");
        assert!(json_html(&v, Some("")).starts_with("<mark id=\"fail\">{"));
    }

    #[test]
    fn shell_quoting_survives_single_quotes() {
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn slugs_are_safe_and_distinct() {
        assert_eq!(slug("parallel"), "parallel");
        let a = slug("a b");
        let b = slug("a/b");
        assert_ne!(a, b);
        assert!(crate::task::is_path_safe(&a));
    }
}
