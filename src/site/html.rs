//! HTML text helpers shared by the page renderers: escaping, relative links, and JSON pretty-printed
//! as HTML with one value marked in place (the transcript page's `#fail` anchor).

use serde_json::Value;
use std::fmt::Write;

/// Escapes text for element content only (`&`, `<`, `>`): quotes need no escaping there, and
/// leaving them alone keeps JSON-heavy transcript pages a third smaller. Never use it for
/// attribute values. Control characters are written visibly ([`is_hidden`]).
pub(crate) fn text_into(out: &mut String, s: &str) {
    escape_with(out, s, &TEXT);
}

/// The bytes that end a run of text copied as it is: `&`, `<`, `>`, the ASCII control
/// characters but newline and tab, DEL, and 0xC2, which leads the UTF-8 of a C1 control
/// (U+0080–U+009F); with `quotes`, `"` and `'` as well.
const fn stops(quotes: bool) -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = b != b'\n' as usize && b != b'\t' as usize;
        b += 1;
    }
    t[0x7f] = true;
    t[0xc2] = true;
    t[b'&' as usize] = true;
    t[b'<' as usize] = true;
    t[b'>' as usize] = true;
    t[b'"' as usize] = quotes;
    t[b'\'' as usize] = quotes;
    t
}

const TEXT: [bool; 256] = stops(false);
const ATTRIBUTE: [bool; 256] = stops(true);

/// Copies `s` onto `out` in runs, escaping what `stop` marks (a lone 0xC2 byte leads an
/// ordinary character, and is copied).
fn escape_with(out: &mut String, s: &str, stop: &[bool; 256]) {
    let bytes = s.as_bytes();
    out.reserve(s.len());
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !stop[b as usize] {
            i += 1;
            continue;
        }
        let (len, with): (usize, &str) = match b {
            b'&' => (1, "&amp;"),
            b'<' => (1, "&lt;"),
            b'>' => (1, "&gt;"),
            b'"' => (1, "&quot;"),
            b'\'' => (1, "&#39;"),
            0xc2 if matches!(bytes.get(i + 1), Some(0x80..=0x9f)) => (2, ""),
            0xc2 => {
                i += 1;
                continue;
            }
            _ => (1, ""),
        };
        out.push_str(&s[run..i]);
        if with.is_empty() {
            // A control character: ASCII, or the C1 one whose UTF-8 is C2 xx.
            let c = s[i..].chars().next().unwrap_or_default();
            visible(out, c);
        } else {
            out.push_str(with);
        }
        i += len;
        run = i;
    }
    out.push_str(&s[run..]);
}

/// A control character other than a newline or a tab: a terminal escape, a NUL, a carriage
/// return, DEL, a C1 control. A page never carries one raw: a browser draws nothing (or a
/// blank) for it, so a garbage response would look cleaner than it is.
pub(crate) fn is_hidden(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// `s` with its control characters written visibly ([`is_hidden`]), nothing else changed: for
/// text a script puts on a page (a browser draws a raw one as nothing there too).
pub(crate) fn visible_text(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(is_hidden) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_hidden(c) {
            visible(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// Writes a control character as JSON would escape it (`\u001b`): visible, and read the same
/// way as the JSON around it.
fn visible(out: &mut String, c: char) {
    let _ = write!(out, "\\u{:04x}", c as u32);
}

/// The escaper of every `{{ value }}` in the templates (named in `askama.toml`): askama's HTML
/// escaping, with control characters written visibly as well, so that no
/// field (a detail, a header, an error) can carry a raw one onto a page.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Visible;

impl askama::filters::Escaper for Visible {
    fn write_escaped_str<W: Write>(&self, mut dest: W, s: &str) -> std::fmt::Result {
        // Between control characters, askama's own escaping, byte for byte.
        let mut start = 0;
        for (i, c) in s.char_indices().filter(|(_, c)| is_hidden(*c)) {
            askama::filters::Html.write_escaped_str(&mut dest, &s[start..i])?;
            write!(dest, "\\u{:04x}", c as u32)?;
            start = i + c.len_utf8();
        }
        askama::filters::Html.write_escaped_str(&mut dest, &s[start..])
    }
}

/// [`text_into`], returning a new string.
pub(crate) fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 16);
    text_into(&mut out, s);
    out
}

/// Escapes text for HTML element content and quoted attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    escape_into(&mut out, s);
    out
}

/// Escapes `s` onto `out`.
pub(crate) fn escape_into(out: &mut String, s: &str) {
    escape_with(out, s, &ATTRIBUTE);
}

/// The prefix that leads from a page at `depth` folders below the site root back to the root:
/// `""`, `"../"`, `"../../"`… Every link on the site is relative, so the site works from the file
/// system and from a GitHub Pages project path alike.
pub(crate) fn root(depth: usize) -> String {
    "../".repeat(depth)
}

/// The depth of a page from its path relative to the site root (`models/x.html` → 1).
pub(crate) fn depth_of(path: &str) -> usize {
    path.matches('/').count()
}

/// The anchor id of a model × task cell on the index page. `~` cannot occur in model or task
/// names (SPEC §4), so the id is unambiguous.
pub(crate) fn cell_id(model: &str, task: &str) -> String {
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
pub(crate) fn json_html(v: &Value, mark: Option<&str>) -> String {
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

/// One tab per level, shown two columns wide (`tab-size` in style.css): a byte a level where two
/// spaces took two, in every laid-out body of every sample. A JSON text holds no raw tab (a
/// string escapes it), so a tab in a laid-out value is always indentation.
fn indent(out: &mut String, n: usize) {
    for _ in 0..n {
        out.push('\t');
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
            let members = o
                .iter()
                .map(|(k, x)| (crate::json::pointer_push(path, k), Some(k), x));
            write_members(out, ('{', '}'), members, o.len(), level, target);
        }
        Value::Array(a) if !a.is_empty() => {
            let items = a
                .iter()
                .enumerate()
                .map(|(i, x)| (format!("{path}/{i}"), None, x));
            write_members(out, ('[', ']'), items, a.len(), level, target);
        }
        other => scalar(out, other),
    }
    if mark_here {
        out.push_str("</mark>");
    }
}

/// The `n` members of an object (each with its key) or items of an array, one a line between
/// the brackets, each with its JSON pointer; the one at `target` is marked with its key.
fn write_members<'v>(
    out: &mut String,
    (open, close): (char, char),
    members: impl Iterator<Item = (String, Option<&'v String>, &'v Value)>,
    n: usize,
    level: usize,
    target: Option<&str>,
) {
    out.push(open);
    out.push('\n');
    for (i, (p, key, x)) in members.enumerate() {
        indent(out, level + 1);
        let mark = target == Some(p.as_str());
        if mark {
            out.push_str("<mark id=\"fail\">");
        }
        if let Some(k) = key {
            scalar(out, &Value::String(k.clone()));
            out.push_str(": ");
        }
        write_value(out, x, &p, level + 1, target, mark);
        if mark {
            out.push_str("</mark>");
        }
        if i + 1 < n {
            out.push(',');
        }
        out.push('\n');
    }
    indent(out, level);
    out.push(close);
}

/// Valid JSON text laid out as serde_json's pretty printer would (two-space indent, `": "`,
/// empty containers on one line), changing nothing but the whitespace between tokens: every
/// string, number and key is kept as written, in its order, duplicates too (a parsed and
/// re-printed value would lose those, and a server's `1.0`, `\u00e9` or repeated key is
/// evidence). The caller checks that the text is JSON.
pub(crate) fn json_reindent(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len() + s.len() / 2);
    let mut level = 0usize;
    let mut i = 0;
    let newline = |out: &mut String, level: usize| {
        out.push('\n');
        indent(out, level);
    };
    while i < b.len() {
        match b[i] {
            b'"' => {
                // A string, copied whole (escapes included) up to its closing quote.
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
                out.push_str(&s[start..i]);
                continue;
            }
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                let mut j = i + 1;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                out.push(open as char);
                if b.get(j) == Some(&close) {
                    out.push(close as char);
                    i = j + 1;
                    continue;
                }
                level += 1;
                newline(&mut out, level);
            }
            close @ (b'}' | b']') => {
                level = level.saturating_sub(1);
                newline(&mut out, level);
                out.push(close as char);
            }
            b',' => {
                out.push(',');
                newline(&mut out, level);
            }
            b':' => out.push_str(": "),
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => {
                // A number or a literal: up to the next structural byte or whitespace.
                let start = i;
                while i < b.len() && !b"{}[],:\" \t\n\r".contains(&b[i]) {
                    i += 1;
                }
                out.push_str(&s[start..i]);
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Quotes a string for a POSIX shell: single quotes, with each `'` written as `'\''`.
pub(crate) fn shell_quote(s: &str) -> String {
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
pub(crate) fn bytes(n: u64) -> String {
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
    use proptest::prelude::*;
    use serde_json::json;

    /// Escaping character by character, as the runs must.
    fn escaped_by_char(s: &str, quotes: bool) -> String {
        let mut out = String::new();
        for c in s.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '"' if quotes => out.push_str("&quot;"),
                '\'' if quotes => out.push_str("&#39;"),
                c if c.is_control() && c != '\n' && c != '\t' => {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                }
                c => out.push(c),
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Text mixing what is escaped, the C1 controls and the characters whose UTF-8 starts
        /// with the same byte (U+00A0–U+00BF: C2 A0–BF), and any character.
        #[test]
        fn escaping_in_runs_is_escaping_by_character(
            s in "([&<>\"'\n\t\u{0}-\u{1f}\u{7f}-\u{bf}a-zé中]|\\PC){0,40}"
        ) {
            let (mut text, mut attribute) = (String::from("x"), String::from("x"));
            text_into(&mut text, &s);
            escape_into(&mut attribute, &s);
            prop_assert_eq!(text, format!("x{}", escaped_by_char(&s, false)));
            prop_assert_eq!(attribute, format!("x{}", escaped_by_char(&s, true)));
        }
    }

    #[test]
    fn pretty_json_matches_serde_layout_when_nothing_is_marked() {
        let v = json!({"a": [1, {"b": "x<y"}], "c": {}, "d": []});
        // serde's layout, a tab a level (shown two columns wide).
        let mut plain = Vec::new();
        let tabs = serde_json::ser::PrettyFormatter::with_indent(b"\t");
        serde::Serialize::serialize(
            &v,
            &mut serde_json::Serializer::with_formatter(&mut plain, tabs),
        )
        .unwrap();
        let plain = String::from_utf8(plain).unwrap();
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
    fn control_characters_are_written_visibly_everywhere() {
        let garbage = "a\u{1b}[31mred\u{0}\r\u{7f}\u{85}\tb\nc";
        let want = "a\\u001b[31mred\\u0000\\u000d\\u007f\\u0085\tb\nc";
        assert_eq!(text(garbage), want);
        assert_eq!(escape(garbage), want);
        assert_eq!(visible_text(garbage), want);
        assert_eq!(visible_text("<&>"), "<&>");
        let mut via_template = String::new();
        askama::filters::Escaper::write_escaped_str(
            &Visible,
            &mut via_template,
            &format!("<{garbage}\"'&>"),
        )
        .unwrap();
        assert_eq!(via_template, format!("&#60;{want}&#34;&#39;&#38;&#62;"));
    }

    #[test]
    fn reindented_json_is_serdes_layout_with_every_token_kept() {
        let compact = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[]},"finish_reason":"tool_calls"}],"usage":{},"n":1.50,"s":"a, b: {c}\"\\"}"#;
        let v: Value = serde_json::from_str(compact).unwrap();
        // serde's layout with a tab a level (what `indent` writes).
        let mut pretty = Vec::new();
        let tabs = serde_json::ser::PrettyFormatter::with_indent(b"\t");
        serde::Serialize::serialize(
            &v,
            &mut serde_json::Serializer::with_formatter(&mut pretty, tabs),
        )
        .unwrap();
        assert_eq!(json_reindent(compact), String::from_utf8(pretty).unwrap());
        // Whitespace already there is replaced, not added to; what serde would rewrite is kept.
        let odd = "{ \"k\" : \"\\u00e9\" ,\n \"k\": 1e2 , \"e\":[ ] }";
        assert_eq!(
            json_reindent(odd),
            "{\n\t\"k\": \"\\u00e9\",\n\t\"k\": 1e2,\n\t\"e\": []\n}"
        );
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
