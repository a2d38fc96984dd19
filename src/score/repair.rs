//! The escaping repairs of SPEC §2.1 stage 2. Arguments that fail to parse but parse after
//! exactly one of these repairs were mangled by quoting or escaping (`escaping_error`, a reroll);
//! anything else that fails is `malformed_json`.
//!
//! Each repair is lexical: it walks the text keeping track of whether it is inside a
//! double-quoted string, and returns `None` when it found nothing to change, so that a repair
//! never gets credit for text it did not touch.

use crate::json::{Place, StringScanner};
use serde_json::Value;

/// One repair, by name (shown in details).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    InvalidEscape,
    RawControlChar,
    InnerQuotes,
    ExtraEscapingLevel,
    PythonQuotes,
    LoneSurrogate,
}

impl Repair {
    pub const ALL: [Repair; 6] = [
        Repair::InvalidEscape,
        Repair::RawControlChar,
        Repair::InnerQuotes,
        Repair::ExtraEscapingLevel,
        Repair::PythonQuotes,
        Repair::LoneSurrogate,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            Repair::InvalidEscape => {
                "an invalid escape sequence (\\', \\x41, \\a…) inside a string"
            }
            Repair::RawControlChar => "a raw control character (newline, tab…) inside a string",
            Repair::InnerQuotes => "unescaped double quotes inside a string",
            Repair::ExtraEscapingLevel => "one extra level of escaping ({\\\"key\\\": …})",
            Repair::PythonQuotes => "Python-style single-quoted strings",
            Repair::LoneSurrogate => "a lone UTF-16 surrogate escape",
        }
    }

    pub fn apply(self, text: &str) -> Option<String> {
        match self {
            Repair::InvalidEscape => fix_invalid_escapes(text),
            Repair::RawControlChar => escape_control_chars(text),
            Repair::InnerQuotes => escape_inner_quotes(text),
            Repair::ExtraEscapingLevel => remove_escaping_level(text),
            Repair::PythonQuotes => python_quotes(text),
            Repair::LoneSurrogate => replace_lone_surrogates(text),
        }
    }
}

/// The first repair after which `text` parses to a value `accept` takes, with that value.
pub fn find_repair(text: &str, accept: impl Fn(&Value) -> bool) -> Option<(Repair, Value)> {
    Repair::ALL.into_iter().find_map(|r| {
        let fixed = r.apply(text)?;
        let v: Value = serde_json::from_str(&fixed).ok()?;
        accept(&v).then_some((r, v))
    })
}

fn fix_invalid_escapes(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let mut scan = StringScanner::default();
    let mut changed = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if scan.step(c) != Place::Escape {
            out.push(c);
            i += 1;
            continue;
        }
        // The escape's characters after the backslash, kept or rewritten, are fed to the
        // scanner too, so that it knows where the string goes on.
        let next = chars.get(i + 1).copied();
        let hex = |from: usize, n: usize| {
            chars.len() >= from + n && chars[from..from + n].iter().all(char::is_ascii_hexdigit)
        };
        let taken = match next {
            Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => {
                out.push('\\');
                out.push(next.unwrap_or_default());
                2
            }
            Some('u') if hex(i + 2, 4) => {
                out.extend(&chars[i..i + 6]);
                6
            }
            Some('\'') => {
                out.push('\'');
                changed = true;
                2
            }
            Some('x') if hex(i + 2, 2) => {
                out.push_str("\\u00");
                out.extend(&chars[i + 2..i + 4]);
                changed = true;
                4
            }
            Some(_) => {
                // Keep the backslash as a literal one (Windows paths: C:\Users): the next
                // character is read again as text.
                out.push_str("\\\\");
                changed = true;
                scan.step('\\');
                1
            }
            None => {
                out.push('\\');
                1
            }
        };
        for &c in &chars[i + 1..i + taken] {
            scan.step(c);
        }
        i += taken;
    }
    changed.then_some(out)
}

fn escape_control_chars(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 8);
    let mut scan = StringScanner::default();
    let mut changed = false;
    for c in text.chars() {
        if scan.step(c) == Place::Inside && (c as u32) < 0x20 {
            changed = true;
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                other => out.push_str(&format!("\\u{:04x}", other as u32)),
            }
            continue;
        }
        out.push(c);
    }
    changed.then_some(out)
}

/// A `"` inside a string that is not followed by `,` `:` `}` `]` or the end is taken to be
/// part of the string's text.
fn escape_inner_quotes(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let mut scan = StringScanner::default();
    let mut changed = false;
    for (i, &c) in chars.iter().enumerate() {
        if scan.step(c) == Place::Closes {
            let next = chars[i + 1..].iter().find(|x| !x.is_whitespace());
            if !matches!(next, None | Some(',' | ':' | '}' | ']')) {
                scan.reopen();
                changed = true;
                out.push_str("\\\"");
                continue;
            }
        }
        out.push(c);
    }
    changed.then_some(out)
}

/// `{\"city\": \"Paris\"}`: the payload was escaped once more than it should be.
fn remove_escaping_level(text: &str) -> Option<String> {
    if !text.contains("\\\"") {
        return None;
    }
    let quoted = format!("\"{text}\"");
    match serde_json::from_str::<Value>(&quoted) {
        Ok(Value::String(s)) => Some(s),
        _ => None,
    }
}

fn python_quotes(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let mut i = 0;
    let mut changed = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            // Copy a double-quoted string through unchanged.
            out.push(c);
            i += 1;
            while i < chars.len() {
                let d = chars[i];
                out.push(d);
                i += 1;
                if d == '\\' {
                    if let Some(&e) = chars.get(i) {
                        out.push(e);
                        i += 1;
                    }
                } else if d == '"' {
                    break;
                }
            }
            continue;
        }
        if c == '\'' {
            changed = true;
            out.push('"');
            i += 1;
            while i < chars.len() {
                let d = chars[i];
                i += 1;
                match d {
                    '\\' if chars.get(i) == Some(&'\'') => {
                        out.push('\'');
                        i += 1;
                    }
                    '\\' => {
                        out.push('\\');
                        if let Some(&e) = chars.get(i) {
                            out.push(e);
                            i += 1;
                        }
                    }
                    '"' => out.push_str("\\\""),
                    '\'' => break,
                    other => out.push(other),
                }
            }
            out.push('"');
            continue;
        }
        out.push(c);
        i += 1;
    }
    changed.then_some(out)
}

fn hex4(chars: &[char], at: usize) -> Option<u32> {
    let s: String = chars.get(at..at + 4)?.iter().collect();
    if s.len() != 4 {
        return None;
    }
    u32::from_str_radix(&s, 16).ok()
}

fn replace_lone_surrogates(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut changed = false;
    while i < chars.len() {
        if chars[i] == '\\' {
            if chars.get(i + 1) == Some(&'u')
                && let Some(code) = hex4(&chars, i + 2)
            {
                let high = (0xD800..0xDC00).contains(&code);
                let low = (0xDC00..0xE000).contains(&code);
                let paired_low = chars.get(i + 6) == Some(&'\\')
                    && chars.get(i + 7) == Some(&'u')
                    && hex4(&chars, i + 8).is_some_and(|c| (0xDC00..0xE000).contains(&c));
                if high && paired_low {
                    out.extend(&chars[i..i + 12]);
                    i += 12;
                    continue;
                }
                if high || low {
                    out.push_str("\\ufffd");
                    changed = true;
                    i += 6;
                    continue;
                }
            }
            // Copy an escape pair whole so `\\ud83d` (an escaped backslash) is left alone.
            out.push('\\');
            if let Some(&e) = chars.get(i + 1) {
                out.push(e);
            }
            i += 2;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repaired(text: &str) -> Option<Repair> {
        assert!(
            serde_json::from_str::<Value>(text).is_err(),
            "{text} should not parse as is"
        );
        find_repair(text, Value::is_object).map(|(r, _)| r)
    }

    #[test]
    fn each_repair_fixes_its_own_mangling() {
        assert_eq!(repaired(r#"{"q": "it\'s"}"#), Some(Repair::InvalidEscape));
        assert_eq!(
            repaired(r#"{"path": "C:\Users\bob"}"#),
            Some(Repair::InvalidEscape)
        );
        assert_eq!(
            repaired("{\"text\": \"line one\nline two\"}"),
            Some(Repair::RawControlChar)
        );
        assert_eq!(
            repaired(r#"{"code": "print("hi")"}"#),
            Some(Repair::InnerQuotes)
        );
        assert_eq!(
            repaired(r#"{\"city\": \"Paris\"}"#),
            Some(Repair::ExtraEscapingLevel)
        );
        assert_eq!(repaired("{'city': 'Paris'}"), Some(Repair::PythonQuotes));
        assert_eq!(repaired(r#"{"e": "\ud83d"}"#), Some(Repair::LoneSurrogate));
    }

    #[test]
    fn structural_damage_is_not_repaired() {
        assert_eq!(repaired(r#"{"city": "Paris""#), None);
        assert_eq!(repaired(r#"{city: "Paris"}"#), None);
        assert_eq!(repaired(r#"{"city": "Paris"} and more"#), None);
        assert_eq!(repaired(r#"{"a": 1,, "b": 2}"#), None);
    }

    #[test]
    fn a_paired_surrogate_is_left_alone() {
        assert_eq!(replace_lone_surrogates(r#"{"e": "\ud83d\ude00"}"#), None);
        assert_eq!(replace_lone_surrogates(r#"{"e": "\\ud83d"}"#), None);
    }
}
