//! Semantic predicates (SPEC §2.1, stage 5): properties of conformance that a JSON Schema
//! cannot state, each naming the label its failure implies.

use crate::json::{clip, preview, show_pointer, values_equal};
use crate::taxonomy::Label;
use regex::{Regex, RegexBuilder};
use serde_json::Value;

/// Length bounds for an array or a string (in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LenBound {
    pub min: Option<u64>,
    pub max: Option<u64>,
}

/// What a predicate tests at its path.
#[derive(Debug, Clone)]
pub enum Test {
    /// Exactly this JSON value (numbers by exact mathematical value).
    Equals(Value),
    /// One of these values.
    OneOf(Vec<Value>),
    /// A string the regex finds a match in (anchor it to test the whole string).
    Matches(Regex),
    /// An array or string whose length is within the bounds.
    Len(LenBound),
    /// The path resolves.
    Present,
    /// The path does not resolve.
    Absent,
    /// Across calls: the values at the path differ pairwise.
    Distinct,
    /// A text the prompt spells out verbatim survived the wire: fails only on a mangled
    /// rendering of it (SPEC §2.1, `roundtrip`).
    Roundtrip(Roundtrip),
}

/// One predicate of a task: a JSON Pointer, a test and the label its failure implies.
#[derive(Debug, Clone)]
pub struct Predicate {
    pub path: String,
    pub test: Test,
    pub label: Label,
    /// The predicate as written in the task file, for display.
    pub source: Value,
}

impl Predicate {
    /// Evaluates a per-call (`where`) predicate against one call's arguments. `Err` is the
    /// human-readable reason it failed.
    pub fn check(&self, args: &Value) -> Result<(), String> {
        let at = args.pointer(&self.path);
        let p = show_pointer(&self.path);
        match (&self.test, at) {
            (Test::Present, Some(_)) | (Test::Absent, None) => Ok(()),
            (Test::Present, None) => Err(format!("{p} is absent but must be present")),
            (Test::Absent, Some(v)) => Err(format!("{p} must be absent, found {}", preview(v, 60))),
            (_, None) => Err(format!("{p} is absent")),
            (Test::Equals(want), Some(got)) => {
                if values_equal(want, got) {
                    Ok(())
                } else {
                    Err(format!(
                        "{p} must equal {} exactly, got {}",
                        preview(want, 80),
                        preview(got, 80)
                    ))
                }
            }
            (Test::OneOf(allowed), Some(got)) => {
                if allowed.iter().any(|w| values_equal(w, got)) {
                    Ok(())
                } else {
                    Err(format!(
                        "{p} must be one of {}, got {}",
                        preview(&Value::Array(allowed.clone()), 80),
                        preview(got, 60)
                    ))
                }
            }
            (Test::Matches(re), Some(Value::String(s))) => {
                if re.is_match(s) {
                    Ok(())
                } else {
                    Err(format!(
                        "{p} does not match /{}/: {}",
                        re.as_str(),
                        preview(&Value::String(s.clone()), 80)
                    ))
                }
            }
            (Test::Matches(re), Some(other)) => Err(format!(
                "{p} must be a string matching /{}/, got {}",
                re.as_str(),
                preview(other, 60)
            )),
            (Test::Len(b), Some(v)) => {
                let len = match v {
                    Value::String(s) => s.chars().count() as u64,
                    Value::Array(a) => a.len() as u64,
                    other => {
                        return Err(format!(
                            "{p} must be a string or array for a length test, got {}",
                            preview(other, 60)
                        ));
                    }
                };
                if b.min.is_some_and(|m| len < m) || b.max.is_some_and(|m| len > m) {
                    Err(format!(
                        "{p} has length {len}, outside {}",
                        describe_bound(b)
                    ))
                } else {
                    Ok(())
                }
            }
            (Test::Distinct, Some(_)) => Ok(()),
            (Test::Roundtrip(r), Some(got)) => match r.mangled_in(got) {
                None => Ok(()),
                Some(how) => {
                    // Two normalisation forms print alike: name them.
                    let forms = match (how, got.as_str()) {
                        (Mangling::Normalisation, Some(g)) => format!(
                            " (the value is {}, the text {})",
                            form_of(g),
                            form_of(&r.text)
                        ),
                        _ => String::new(),
                    };
                    Err(format!(
                        "{p} holds a mangled rendering of the text the prompt spells out ({}): got {}, the text is {}{forms}",
                        how.describe(),
                        preview(got, 80),
                        preview(&Value::String(r.text.clone()), 80)
                    ))
                }
            },
        }
    }

    /// Evaluates an `across` predicate over every matched call's arguments, in expected order.
    pub fn check_across(&self, all_args: &[&Value]) -> Result<(), String> {
        match &self.test {
            Test::Distinct => {
                let p = show_pointer(&self.path);
                for (i, a) in all_args.iter().enumerate() {
                    for (j, b) in all_args.iter().enumerate().skip(i + 1) {
                        match (a.pointer(&self.path), b.pointer(&self.path)) {
                            (Some(x), Some(y)) if values_equal(x, y) => {
                                return Err(format!(
                                    "{p} must differ across calls, but calls {} and {} both have {}",
                                    i + 1,
                                    j + 1,
                                    clip(&preview(x, 60), 60)
                                ));
                            }
                            _ => {}
                        }
                    }
                }
                Ok(())
            }
            // Any other test across calls applies to each call in turn.
            _ => {
                for (i, a) in all_args.iter().enumerate() {
                    self.check(a).map_err(|e| format!("call {}: {e}", i + 1))?;
                }
                Ok(())
            }
        }
    }

    /// A short description for pages: `/city distinct → parallel_collapse`.
    pub fn describe(&self) -> String {
        let p = show_pointer(&self.path);
        let t = match &self.test {
            Test::Equals(v) => format!("equals {}", preview(v, 60)),
            Test::OneOf(v) => format!("one of {}", preview(&Value::Array(v.clone()), 60)),
            Test::Matches(r) => format!("matches /{}/", r.as_str()),
            Test::Len(b) => format!("length {}", describe_bound(b)),
            Test::Present => "present".to_string(),
            Test::Absent => "absent".to_string(),
            Test::Distinct => "distinct across calls".to_string(),
            Test::Roundtrip(r) => format!(
                "round-trips {}",
                preview(&Value::String(r.text.clone()), 60)
            ),
        };
        format!("{p} {t} → {}", self.label)
    }
}

fn describe_bound(b: &LenBound) -> String {
    match (b.min, b.max) {
        (Some(lo), Some(hi)) => format!("[{lo}, {hi}]"),
        (Some(lo), None) => format!("≥ {lo}"),
        (None, Some(hi)) => format!("≤ {hi}"),
        (None, None) => "unbounded".to_string(),
    }
}

/// One way a wire mangles text (SPEC §2.1, `roundtrip`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mangling {
    /// UTF-8 bytes read as Latin-1 or cp1252 (`Ã¼` for `ü`).
    Mojibake,
    /// Non-ASCII characters replaced by U+FFFD (or by the `?` of an encoder to a code page).
    ReplacementCharacter,
    /// Escapes left as literal text (`\u00fc`, `\n`, `\"`).
    LiteralEscape,
    /// Backslash sequences that were text applied as escapes (a path's `\t` become a tab).
    AppliedEscape,
    /// HTML entities (`&amp;`, `&#39;`).
    HtmlEntity,
    /// Another Unicode normalisation form (NFC for NFD, or the reverse).
    Normalisation,
}

impl Mangling {
    pub const ALL: [Mangling; 6] = [
        Mangling::Mojibake,
        Mangling::ReplacementCharacter,
        Mangling::LiteralEscape,
        Mangling::AppliedEscape,
        Mangling::HtmlEntity,
        Mangling::Normalisation,
    ];

    /// A short name, for variant names and details.
    pub fn name(self) -> &'static str {
        match self {
            Mangling::Mojibake => "mojibake",
            Mangling::ReplacementCharacter => "replacement_character",
            Mangling::LiteralEscape => "literal_escape",
            Mangling::AppliedEscape => "applied_escape",
            Mangling::HtmlEntity => "html_entity",
            Mangling::Normalisation => "normalisation",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Mangling::Mojibake => "mojibake: its UTF-8 read as Latin-1/cp1252",
            Mangling::ReplacementCharacter => "U+FFFD (or ?) where its non-ASCII characters were",
            Mangling::LiteralEscape => "escapes left as literal text, such as \\u00fc, \\n or \\\"",
            Mangling::AppliedEscape => {
                "backslash sequences of the text applied as escapes, such as a path's \\t become a tab"
            }
            Mangling::HtmlEntity => "HTML entities, such as &amp; or &#39;",
            Mangling::Normalisation => "another Unicode normalisation form (NFC/NFD)",
        }
    }

    /// The whole text rendered with this mangling (every unit it applies to), or `None` when
    /// the text has nothing this mangling changes. Used to generate failures on purpose.
    pub fn apply(self, text: &str) -> Option<String> {
        let out = match self {
            Mangling::Normalisation => {
                let nfc = nfc(text);
                if nfc != text { nfc } else { nfd(text) }
            }
            _ => units(self, text)
                .into_iter()
                .map(|(lit, alts)| alts.into_iter().next().unwrap_or(lit))
                .collect(),
        };
        (out != text).then_some(out)
    }
}

/// `roundtrip: S`: the expected text and, per mangling that can apply to it, a regex that finds
/// a rendering of it in which some units were mangled that way and the rest left intact.
#[derive(Debug, Clone)]
pub struct Roundtrip {
    pub text: String,
    finders: Vec<(Mangling, Regex)>,
    /// Every character-level mangling at once: a rendering that mixes families.
    mixed: Option<Regex>,
}

impl Roundtrip {
    /// Compiles the finders for `text`. `Err` when no mangling can apply: the predicate could
    /// never fail, which is a task written wrong (`equals` is the exact test).
    pub fn new(text: &str) -> Result<Roundtrip, String> {
        let mut finders = Vec::new();
        for m in Mangling::ALL {
            if m == Mangling::Normalisation {
                continue;
            }
            let us = units(m, text);
            if us.iter().all(|(_, alts)| alts.is_empty()) {
                continue;
            }
            if let Some(re) = finder(&us) {
                finders.push((m, re));
            }
        }
        let mixed_units = mixed_units(text);
        let mixed = finder(&mixed_units);
        let r = Roundtrip {
            text: text.to_string(),
            finders,
            mixed,
        };
        if r.applicable().is_empty() {
            return Err(format!(
                "{:?} has nothing a wire can mangle (no non-ASCII character, backslash, quote, control character or HTML-special character), so a roundtrip test on it can never fail: use equals",
                clip(text, 60)
            ));
        }
        Ok(r)
    }

    /// The manglings that can apply to this text.
    pub fn applicable(&self) -> Vec<Mangling> {
        let mut out: Vec<Mangling> = self.finders.iter().map(|(m, _)| *m).collect();
        if nfc(&self.text) != nfd(&self.text) {
            out.push(Mangling::Normalisation);
        }
        out
    }

    /// The mangling found in `got` when it holds a mangled rendering of the text instead of
    /// the text itself; `None` when it holds the text intact (with anything around it), or a
    /// different text, or is not a string at all (the schema judges types).
    pub fn mangled_in(&self, got: &Value) -> Option<Mangling> {
        let Value::String(got) = got else {
            return None;
        };
        if got.contains(self.text.as_str()) {
            return None;
        }
        for (m, re) in &self.finders {
            if re.is_match(got) {
                return Some(*m);
            }
        }
        if nfc(got).contains(nfc(&self.text).as_str()) {
            return Some(Mangling::Normalisation);
        }
        // A rendering that mixes families (mojibake in one place, an entity in another) is
        // reported as the first family that applies to the text.
        match &self.mixed {
            Some(re) if re.is_match(got) => self.finders.first().map(|(m, _)| *m),
            _ => None,
        }
    }
}

/// The normalisation form a text is in, for details.
fn form_of(s: &str) -> &'static str {
    if nfc(s) == s {
        "NFC"
    } else if nfd(s) == s {
        "NFD"
    } else {
        "in neither NFC nor NFD"
    }
}

fn nfc(s: &str) -> String {
    icu_normalizer::ComposingNormalizerBorrowed::new_nfc()
        .normalize(s)
        .into_owned()
}

fn nfd(s: &str) -> String {
    icu_normalizer::DecomposingNormalizerBorrowed::new_nfd()
        .normalize(s)
        .into_owned()
}

/// A regex that matches the units in order, each as written or as one of its manglings.
fn finder(units: &[(String, Vec<String>)]) -> Option<Regex> {
    let mut pat = String::new();
    for (lit, alts) in units {
        if alts.is_empty() {
            pat.push_str(&regex::escape(lit));
        } else {
            pat.push_str("(?:");
            pat.push_str(&regex::escape(lit));
            for a in alts {
                pat.push('|');
                pat.push_str(&regex::escape(a));
            }
            pat.push(')');
        }
    }
    // The texts are a task's (at most a few kilobytes); the limit keeps a huge one from
    // failing the load: without a finder that family is simply not looked for.
    RegexBuilder::new(&pat).size_limit(1 << 24).build().ok()
}

/// Character-level manglings of every family together (applied escapes excepted: they work on
/// backslash sequences, not characters).
fn mixed_units(text: &str) -> Vec<(String, Vec<String>)> {
    text.chars()
        .map(|c| {
            let mut alts = Vec::new();
            for m in [
                Mangling::Mojibake,
                Mangling::ReplacementCharacter,
                Mangling::LiteralEscape,
                Mangling::HtmlEntity,
            ] {
                for a in char_manglings(m, c) {
                    if !alts.contains(&a) {
                        alts.push(a);
                    }
                }
            }
            (c.to_string(), alts)
        })
        .collect()
}

/// The text cut into the units a mangling works on, each with its mangled renderings (the
/// first being the most common one).
fn units(m: Mangling, text: &str) -> Vec<(String, Vec<String>)> {
    if m == Mangling::AppliedEscape {
        return backslash_units(text);
    }
    text.chars()
        .map(|c| (c.to_string(), char_manglings(m, c)))
        .collect()
}

/// Backslash sequences that are text (`C:\temp`, `\u00fc` in a regex) and what they become
/// when a parser applies them as escapes, or drops the backslash of one it does not know.
fn backslash_units(text: &str) -> Vec<(String, Vec<String>)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' || i + 1 >= chars.len() {
            out.push((c.to_string(), Vec::new()));
            i += 1;
            continue;
        }
        let e = chars[i + 1];
        if e == 'u'
            && i + 6 <= chars.len()
            && let Some(ch) =
                u32::from_str_radix(&chars[i + 2..i + 6].iter().collect::<String>(), 16)
                    .ok()
                    .and_then(char::from_u32)
        {
            let lit: String = chars[i..i + 6].iter().collect();
            let dropped: String = chars[i + 1..i + 6].iter().collect();
            out.push((lit, vec![ch.to_string(), dropped]));
            i += 6;
            continue;
        }
        let applied = match e {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'b' => Some('\u{8}'),
            'f' => Some('\u{c}'),
            '0' => Some('\0'),
            '\\' | '"' | '/' | '\'' => Some(e),
            _ => None,
        };
        let mut alts = Vec::new();
        if let Some(a) = applied {
            alts.push(a.to_string());
        }
        if !alts.contains(&e.to_string()) {
            alts.push(e.to_string());
        }
        out.push((format!("\\{e}"), alts));
        i += 2;
    }
    out
}

/// The renderings of one character under a character-level mangling (empty: it is left as is).
fn char_manglings(m: Mangling, c: char) -> Vec<String> {
    let code = c as u32;
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: String| {
        if s != c.to_string() && !out.contains(&s) {
            out.push(s);
        }
    };
    match m {
        Mangling::Mojibake if !c.is_ascii() => {
            let mut buf = [0u8; 4];
            let bytes = c.encode_utf8(&mut buf).as_bytes();
            push(bytes.iter().map(|b| cp1252(*b)).collect());
            push(bytes.iter().map(|b| char::from(*b)).collect());
        }
        Mangling::ReplacementCharacter if !c.is_ascii() => {
            // A decoder's U+FFFD (one per bad byte or one per character), or the `?` an
            // encoder to a legacy code page writes (one per character or per UTF-16 unit).
            for n in 1..=c.len_utf8() {
                push("\u{fffd}".repeat(n));
            }
            for n in 1..=c.len_utf16() {
                push("?".repeat(n));
            }
        }
        Mangling::LiteralEscape => match c {
            '\n' => push("\\n".into()),
            '\t' => push("\\t".into()),
            '\r' => push("\\r".into()),
            '"' => push("\\\"".into()),
            '\'' => push("\\'".into()),
            '\\' => push("\\\\".into()),
            '/' => push("\\/".into()),
            _ if c.is_control() || !c.is_ascii() => {
                let mut units = [0u16; 2];
                let utf16 = c.encode_utf16(&mut units);
                let lower: String = utf16.iter().map(|u| format!("\\u{u:04x}")).collect();
                push(lower.clone());
                push(lower.to_uppercase().replace("\\U", "\\u"));
                if code > 0xFFFF {
                    push(format!("\\U{code:08x}"));
                }
                if code < 0x100 {
                    push(format!("\\x{code:02x}"));
                }
            }
            _ => {}
        },
        Mangling::HtmlEntity => {
            let named = match c {
                '&' => Some("&amp;"),
                '<' => Some("&lt;"),
                '>' => Some("&gt;"),
                '"' => Some("&quot;"),
                '\'' => Some("&#39;"),
                '\u{a0}' => Some("&nbsp;"),
                _ => None,
            };
            if let Some(n) = named {
                push(n.into());
            }
            if named.is_some() || !c.is_ascii() {
                push(format!("&#{code};"));
                push(format!("&#x{code:x};"));
                push(format!("&#x{code:X};"));
                push(format!("&#{code:03};"));
                if c == '\'' {
                    push("&apos;".into());
                }
            }
        }
        _ => {}
    }
    out
}

/// One byte read as Windows-1252 (the five bytes it leaves undefined read as Latin-1, as
/// Windows' own decoder does).
fn cp1252(b: u8) -> char {
    const HIGH: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž',
        '\u{8f}', '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}',
        'ž', 'Ÿ',
    ];
    match b {
        0x80..=0x9f => HIGH[(b - 0x80) as usize],
        _ => char::from(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rt(s: &str) -> Roundtrip {
        Roundtrip::new(s).unwrap()
    }

    #[test]
    fn the_text_intact_or_a_different_text_passes() {
        let r = rt("Müller & Söhne GmbH");
        assert_eq!(r.mangled_in(&json!("Müller & Söhne GmbH")), None);
        assert_eq!(
            r.mangled_in(&json!("Müller & Söhne GmbH, Hauptstraße 5, Berlin")),
            None
        );
        assert_eq!(r.mangled_in(&json!("ACME Corp")), None);
        assert_eq!(r.mangled_in(&json!(42)), None);
    }

    #[test]
    fn every_mangling_is_found() {
        let r = rt("Müller & Söhne GmbH");
        assert_eq!(
            r.mangled_in(&json!("MÃ¼ller & SÃ¶hne GmbH")),
            Some(Mangling::Mojibake)
        );
        assert_eq!(
            r.mangled_in(&json!("M\u{fffd}ller & S\u{fffd}\u{fffd}hne GmbH")),
            Some(Mangling::ReplacementCharacter)
        );
        assert_eq!(
            r.mangled_in(&json!("M\\u00fcller & S\\u00F6hne GmbH")),
            Some(Mangling::LiteralEscape)
        );
        assert_eq!(
            r.mangled_in(&json!("Müller &amp; Söhne GmbH")),
            Some(Mangling::HtmlEntity)
        );
        assert_eq!(
            r.mangled_in(&json!("Mu\u{308}ller & So\u{308}hne GmbH")),
            Some(Mangling::Normalisation)
        );
        // Mixed: mojibake in one word, an entity in another, with text after it.
        assert!(
            r.mangled_in(&json!("MÃ¼ller &amp; Söhne GmbH (Berlin)"))
                .is_some()
        );
        let path = rt("C:\\temp\\new_report.txt");
        assert_eq!(
            path.mangled_in(&json!("C:\temp\new_report.txt")),
            Some(Mangling::AppliedEscape)
        );
        assert_eq!(
            path.mangled_in(&json!("C:\\\\temp\\\\new_report.txt")),
            Some(Mangling::LiteralEscape)
        );
        assert_eq!(
            path.mangled_in(&json!("C:temp\new_report.txt")),
            Some(Mangling::AppliedEscape)
        );
        let quoted = rt("say \"hi\"\nbye");
        assert_eq!(
            quoted.mangled_in(&json!("say \\\"hi\\\"\\nbye")),
            Some(Mangling::LiteralEscape)
        );
        let emoji = rt("hi 👋");
        assert_eq!(
            emoji.mangled_in(&json!("hi \\ud83d\\udc4b")),
            Some(Mangling::LiteralEscape)
        );
        assert_eq!(
            emoji.mangled_in(&json!("hi ðŸ‘‹")),
            Some(Mangling::Mojibake)
        );
    }

    #[test]
    fn apply_renders_each_family_and_the_renderings_are_found() {
        for text in [
            "Grüße aus 東京 👋 — ça va?",
            "C:\\Users\\renee\\AppData\\Local\\Temp\\new_report.txt",
            "SELECT 'O''Brien' AS \"n\";\nGO",
            "/Users/zoe/Documents/Re\u{301}sume\u{301} 2025.pdf",
        ] {
            let r = rt(text);
            assert!(!r.applicable().is_empty(), "{text}");
            for m in r.applicable() {
                let mangled = m.apply(text).unwrap();
                assert_eq!(
                    r.mangled_in(&json!(mangled)),
                    Some(m),
                    "{text} under {m:?}: {mangled}"
                );
            }
        }
    }

    #[test]
    fn a_text_with_nothing_to_mangle_is_refused() {
        assert!(Roundtrip::new("Paris").is_err());
        assert!(Roundtrip::new("Paris, France").is_err());
        assert!(Roundtrip::new("Zoë").is_ok());
    }
}
