//! Text a server controls (model ids, error bodies, settings), made safe to print on a
//! terminal (SPEC §12): control characters are shown as visible escapes instead of being
//! obeyed.
//!
//! A model id such as `m\e]0;title\a\e[2J` sets the window title and clears the screen when
//! printed raw; a carriage return or a newline lets a server forge a line of callcheck's own
//! output; a bidirectional override reorders what follows it. Every print of such text goes
//! through [`escape_controls`] (one value on one line) or [`escape_lines`] (a block whose own
//! newlines are callcheck's).

use std::borrow::Cow;
use std::fmt::Write;

/// True for a character that a terminal would obey rather than show: C0 controls, DEL, C1
/// controls (`\u{9b}` is a one-byte CSI to some terminals) and the bidirectional overrides
/// and isolates.
fn is_control(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every control character written visibly: `\e` for ESC, `\n`, `\r`, `\t`, `\xNN`
/// for the other C0 controls and DEL, `\u{NN}` for the rest. Borrowed when there is none.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// Like [`escape_controls`], but newlines are kept: for a block of several lines callcheck
/// composed, whose values may hold anything.
pub fn escape_lines(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// JSON text (as serde_json writes it) made safe to print: serde escapes C0 controls but
/// writes DEL, C1 controls and the bidirectional overrides raw, so each of those becomes its
/// `\uXXXX` escape. They can only stand inside strings, where the escape means the same
/// character: the JSON's value is unchanged and a terminal shows them instead of obeying them.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    // A raw C0 character in serde's output is whitespace between tokens (pretty printing):
    // inside strings serde has escaped them all already.
    let wanted = |c: char| is_control(c) && (c as u32) >= 0x20;
    if !json.chars().any(wanted) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if wanted(c) {
            // Every such character is in the BMP: four hex digits say it.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn escape(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    let wanted = |c: char| is_control(c) && !(keep_newlines && c == '\n');
    if !s.chars().any(wanted) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if !wanted(c) {
            out.push(c);
            continue;
        }
        match c {
            '\u{1b}' => out.push_str("\\e"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_model_id_is_shown_not_obeyed() {
        assert_eq!(
            escape_controls("m\u{1b}]0;title\u{7}\u{1b}[2J"),
            "m\\e]0;title\\x07\\e[2J"
        );
        assert_eq!(
            escape_controls("a\u{9b}31mb\u{7f}\u{0}\r\n\tc\u{202e}d"),
            "a\\u{9b}31mb\\x7f\\x00\\r\\n\\tc\\u{202e}d"
        );
    }

    /// DEL, C1 and the bidi overrides, which serde_json writes raw, become `\uXXXX`: the
    /// printed JSON holds no character a terminal obeys and still parses to the same value.
    #[test]
    fn json_is_printed_with_del_c1_and_bidi_escaped_and_its_value_kept() {
        let value = serde_json::json!({
            "detail": "a\u{9b}31mb\u{7f}c\u{202e}d\u{1b}[2J\n",
            "n": 1
        });
        let raw = serde_json::to_string(&value).unwrap();
        assert!(raw.contains('\u{9b}') && raw.contains('\u{7f}'), "{raw}");
        let shown = escape_json(&raw);
        assert_eq!(
            shown,
            r#"{"detail":"a\u009b31mb\u007fc\u202ed\u001b[2J\n","n":1}"#
        );
        assert!(!shown.chars().any(is_control), "{shown}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&shown).unwrap(),
            value
        );
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&escape_json(&pretty)).unwrap(),
            value
        );
        assert!(matches!(escape_json("{\"a\": \"ü\"}"), Cow::Borrowed(_)));
    }

    #[test]
    fn plain_text_is_borrowed_and_lines_are_kept_where_asked() {
        assert!(matches!(
            escape_controls("qwen3-8b: ü 日本 \\e"),
            Cow::Borrowed(_)
        ));
        assert_eq!(escape_lines("a\u{1b}[2J\nb\r\n"), "a\\e[2J\nb\\r\n");
        assert!(matches!(escape_lines("a\nb\n"), Cow::Borrowed(_)));
    }
}
