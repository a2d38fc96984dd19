//! Finding an API key in what a server sent, whole or in pieces, and cutting it out of the raw
//! bytes (SPEC §12).
//!
//! A gateway that echoes the bearer token into a streamed answer does not send it whole: a
//! streamed answer is many `data:` events, each carrying a fragment of the content, the
//! arguments or the reasoning, and the key may be cut anywhere. A reader (build, a browser, a
//! person) rejoins the fragments, so searching the raw bytes for the key finds nothing while
//! the published text holds it whole. This module therefore searches the *decoded* text the
//! way a reader rejoins it, one channel per JSON path (`choices[0]/delta/content`,
//! `choices[0]/delta/tool_calls[1]/function/arguments`, …, array elements named by their own
//! `index` field where they carry one, as streamed tool calls do), and edits the raw events
//! where the pieces lie: the first piece becomes the replacement, later pieces become empty
//! strings, so the rejoined text reads `…[REDACTED]…` once, every event stays valid JSON and
//! valid SSE, and every byte outside the edited string literals is kept as received.
//!
//! JSON-escaped forms are found too: string literals are decoded (`\u0073k-…` is `sk-…`), and
//! the decoded text is searched again with its own escapes undone, because tool-call arguments
//! are JSON inside a JSON string. Whatever is not JSON (a cut body, an HTML error page, an SSE
//! comment) is searched as raw bytes, with the same unescaping.

use regex::bytes::Regex;
use std::ops::Range;

/// JSON nested deeper than this is not walked (a hostile body must not overflow the stack);
/// it is still searched as raw bytes.
const MAX_DEPTH: usize = 128;

/// Replaces every occurrence of the key `key` matches (a literal pattern) in `body` with
/// `replacement`, whole or split across SSE events, plain or JSON-escaped; returns how many
/// occurrences there were (a key split across ten events is one).
pub fn redact(body: &mut Vec<u8>, key: &Regex, replacement: &str) -> u64 {
    let mut n = 0;
    let segments = match parse(body, 0) {
        Some((node, end)) if body[end..].iter().all(u8::is_ascii_whitespace) => {
            // One JSON document: each string stands alone.
            let mut s = Vec::new();
            collect_strings(&node, body, &mut String::new(), &mut s, true);
            s
        }
        _ => sse_segments(body),
    };
    let mut edits = Vec::new();
    for channel in group(segments) {
        n += channel_edits(body, &channel, key, replacement, &mut edits);
    }
    if !edits.is_empty() {
        *body = apply(body, edits);
    }
    // Anything outside a JSON string: event names, comments, a body that is not JSON at all.
    let whole = Segment {
        channel: String::new(),
        span: 0..body.len(),
        literal: false,
    };
    let mut edits = Vec::new();
    n += channel_edits(body, &[whole], key, replacement, &mut edits);
    if !edits.is_empty() {
        *body = apply(body, edits);
    }
    n
}

/// A run of bytes in the body whose decoded text belongs to one channel.
#[derive(Debug, Clone)]
struct Segment {
    /// The JSON path the text sits at; segments of one channel are rejoined in body order.
    channel: String,
    /// The bytes in the body: a string literal's inside (between its quotes), or raw text.
    span: Range<usize>,
    /// A JSON string literal's inside (decoded), or raw text (taken as is).
    literal: bool,
}

/// Groups segments by channel, keeping body order within each (channels in order of first
/// appearance, so the result does not depend on any hash order).
fn group(segments: Vec<Segment>) -> Vec<Vec<Segment>> {
    let mut order: Vec<String> = Vec::new();
    let mut by: std::collections::BTreeMap<String, Vec<Segment>> = Default::default();
    for s in segments {
        if !by.contains_key(&s.channel) {
            order.push(s.channel.clone());
        }
        by.entry(s.channel.clone()).or_default().push(s);
    }
    order.into_iter().filter_map(|c| by.remove(&c)).collect()
}

/// The segments of an SSE body: every string in every `data:` line's JSON, by path; a `data:`
/// payload that is not JSON is one raw segment of its own channel.
fn sse_segments(body: &[u8]) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < body.len() {
        let end = body[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(body.len(), |p| start + p);
        let mut line = start..end;
        if body[line.clone()].ends_with(b"\r") {
            line.end -= 1;
        }
        if body[line.clone()].starts_with(b"data:") {
            let mut p = line.start + 5;
            if body.get(p) == Some(&b' ') {
                p += 1;
            }
            let payload = &body[p..line.end];
            match parse(&body[..line.end], p) {
                Some((node, e)) if body[e..line.end].iter().all(u8::is_ascii_whitespace) => {
                    collect_strings(&node, body, &mut String::new(), &mut out, false);
                }
                _ if payload != b"[DONE]" => out.push(Segment {
                    channel: "\u{0}raw data".into(),
                    span: p..line.end,
                    literal: false,
                }),
                _ => {}
            }
        }
        start = end + 1;
    }
    out
}

/// A parsed JSON value that remembers where its strings are.
#[derive(Debug)]
enum Node {
    /// A string: the span of its inside, between the quotes.
    Str(Range<usize>),
    /// An object: each member's key (the inside of its literal) and value.
    Obj(Vec<(Range<usize>, Node)>),
    Arr(Vec<Node>),
    /// A number: its text.
    Num(Range<usize>),
    /// `true`, `false` or `null`.
    Lit,
}

/// Every string of `node` as a segment at its path. Object keys are segments of their own
/// (a key is never rejoined with another); with `alone`, every string is (a non-streamed body
/// has no fragments to rejoin).
fn collect_strings(
    node: &Node,
    body: &[u8],
    path: &mut String,
    out: &mut Vec<Segment>,
    alone: bool,
) {
    match node {
        Node::Str(span) => out.push(Segment {
            channel: if alone {
                format!("{path}@{}", span.start)
            } else {
                path.clone()
            },
            span: span.clone(),
            literal: true,
        }),
        Node::Obj(members) => {
            for (k, v) in members {
                out.push(Segment {
                    channel: format!("\u{0}key@{}", k.start),
                    span: k.clone(),
                    literal: true,
                });
                let len = path.len();
                path.push('/');
                path.push_str(&String::from_utf8_lossy(&body[k.clone()]));
                collect_strings(v, body, path, out, alone);
                path.truncate(len);
            }
        }
        Node::Arr(items) => {
            for (i, v) in items.iter().enumerate() {
                // Streamed tool calls name their call by `index`, not by their place in the
                // delta's array: two calls interleave, each in position 0 of its own events.
                let at = match v {
                    Node::Obj(m) => m
                        .iter()
                        .find(|(k, _)| &body[k.clone()] == b"index")
                        .and_then(|(_, v)| match v {
                            Node::Num(r) => std::str::from_utf8(&body[r.clone()])
                                .ok()?
                                .parse::<u64>()
                                .ok(),
                            _ => None,
                        }),
                    _ => None,
                }
                // As build reads it: a call without an `index` is the one at its position.
                .unwrap_or(i as u64)
                .to_string();
                let len = path.len();
                path.push('[');
                path.push_str(&at);
                path.push(']');
                collect_strings(v, body, path, out, alone);
                path.truncate(len);
            }
        }
        Node::Num(_) | Node::Lit => {}
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// Parses one JSON value of `b` starting at `i` (after whitespace); returns it and the offset
/// after it, or `None` when it is not JSON (or nests deeper than [`MAX_DEPTH`]).
fn parse(b: &[u8], i: usize) -> Option<(Node, usize)> {
    value(b, skip_ws(b, i), 0)
}

fn value(b: &[u8], i: usize, depth: usize) -> Option<(Node, usize)> {
    if depth > MAX_DEPTH {
        return None;
    }
    match *b.get(i)? {
        b'"' => {
            let end = string_end(b, i)?;
            Some((Node::Str(i + 1..end - 1), end))
        }
        b'{' => {
            let mut members = Vec::new();
            let mut j = skip_ws(b, i + 1);
            if b.get(j) == Some(&b'}') {
                return Some((Node::Obj(members), j + 1));
            }
            loop {
                if b.get(j) != Some(&b'"') {
                    return None;
                }
                let kend = string_end(b, j)?;
                let key = j + 1..kend - 1;
                j = skip_ws(b, kend);
                if b.get(j) != Some(&b':') {
                    return None;
                }
                let (v, after) = value(b, skip_ws(b, j + 1), depth + 1)?;
                members.push((key, v));
                j = skip_ws(b, after);
                match b.get(j)? {
                    b',' => j = skip_ws(b, j + 1),
                    b'}' => return Some((Node::Obj(members), j + 1)),
                    _ => return None,
                }
            }
        }
        b'[' => {
            let mut items = Vec::new();
            let mut j = skip_ws(b, i + 1);
            if b.get(j) == Some(&b']') {
                return Some((Node::Arr(items), j + 1));
            }
            loop {
                let (v, after) = value(b, j, depth + 1)?;
                items.push(v);
                j = skip_ws(b, after);
                match b.get(j)? {
                    b',' => j = skip_ws(b, j + 1),
                    b']' => return Some((Node::Arr(items), j + 1)),
                    _ => return None,
                }
            }
        }
        b't' if b[i..].starts_with(b"true") => Some((Node::Lit, i + 4)),
        b'f' if b[i..].starts_with(b"false") => Some((Node::Lit, i + 5)),
        b'n' if b[i..].starts_with(b"null") => Some((Node::Lit, i + 4)),
        b'-' | b'0'..=b'9' => {
            let end = b[i..]
                .iter()
                .position(|c| !matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                .map_or(b.len(), |p| i + p);
            Some((Node::Num(i..end), end))
        }
        _ => None,
    }
}

/// The offset after the closing quote of the string literal opening at `i`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'"' => return Some(j + 1),
            b'\\' => j += 2,
            c if c < 0x20 => return None,
            _ => j += 1,
        }
    }
    None
}

/// Walks `text` undoing JSON string escapes, leniently: a valid escape (`\n`, `\"`, `\u0073`,
/// a surrogate pair) yields its character, anything else (a lone backslash, a lone surrogate,
/// plain bytes) yields itself. `f` hears each unit's source range and its decoded bytes.
fn unescape(text: &[u8], mut f: impl FnMut(Range<usize>, &[u8])) {
    let mut i = 0;
    let mut buf = [0u8; 4];
    while i < text.len() {
        if text[i] == b'\\' {
            let simple = match text.get(i + 1) {
                Some(b'"') => Some(b'"'),
                Some(b'\\') => Some(b'\\'),
                Some(b'/') => Some(b'/'),
                Some(b'b') => Some(8),
                Some(b'f') => Some(12),
                Some(b'n') => Some(b'\n'),
                Some(b'r') => Some(b'\r'),
                Some(b't') => Some(b'\t'),
                _ => None,
            };
            if let Some(c) = simple {
                f(i..i + 2, &[c]);
                i += 2;
                continue;
            }
            if let Some(hi) = hex4(text, i) {
                let decoded = if (0xD800..0xDC00).contains(&hi) {
                    hex4(text, i + 6)
                        .filter(|lo| (0xDC00..0xE000).contains(lo))
                        .and_then(|lo| {
                            char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                        })
                        .map(|c| (c, 12))
                } else {
                    char::from_u32(hi).map(|c| (c, 6))
                };
                if let Some((c, len)) = decoded {
                    f(i..i + len, c.encode_utf8(&mut buf).as_bytes());
                    i += len;
                    continue;
                }
            }
        }
        f(i..i + 1, &text[i..i + 1]);
        i += 1;
    }
}

/// The value of a `\uXXXX` escape at `i`, if there is one.
fn hex4(text: &[u8], i: usize) -> Option<u32> {
    if text.get(i) != Some(&b'\\') || text.get(i + 1) != Some(&b'u') {
        return None;
    }
    let h = std::str::from_utf8(text.get(i + 2..i + 6)?).ok()?;
    u32::from_str_radix(h, 16).ok()
}

/// Undoes escapes in `text`, keeping for each decoded byte nothing but the decoded text.
fn decoded(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    unescape(text, |_, d| out.extend_from_slice(d));
    out
}

/// Maps ranges of `text`'s decoded form back to ranges of `text` (each grown to whole escapes).
/// `ranges` are sorted and disjoint.
fn to_source(text: &[u8], ranges: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    let mut at = 0; // decoded offset of the unit being walked
    let mut r = 0;
    let mut start = None;
    unescape(text, |src, d| {
        let unit = at..at + d.len();
        at = unit.end;
        while let Some(want) = ranges.get(r) {
            if start.is_none() {
                if want.start < unit.end {
                    start = Some(src.start);
                } else {
                    return;
                }
            }
            if want.end <= unit.end {
                if let Some(s) = start.take() {
                    out.push(s..src.end);
                }
                r += 1;
            } else {
                return;
            }
        }
    });
    out
}

/// Where `key` occurs in `text`, as written or with JSON escapes undone, as sorted, merged
/// ranges of `text`.
fn occurrences(text: &[u8], key: &Regex) -> Vec<Range<usize>> {
    let mut found: Vec<Range<usize>> = key.find_iter(text).map(|m| m.range()).collect();
    if text.contains(&b'\\') {
        let plain = decoded(text);
        let hits: Vec<Range<usize>> = key.find_iter(&plain).map(|m| m.range()).collect();
        found.extend(to_source(text, &hits));
    }
    found.sort_by_key(|r| (r.start, r.end));
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(found.len());
    for r in found {
        match merged.last_mut() {
            Some(last) if r.start < last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// Finds the key in one channel's rejoined text and adds the raw edits that cut it out: the
/// first piece of each occurrence becomes `replacement`, the others become empty. Returns the
/// number of occurrences.
fn channel_edits(
    body: &[u8],
    channel: &[Segment],
    key: &Regex,
    replacement: &str,
    edits: &mut Vec<(Range<usize>, Vec<u8>)>,
) -> u64 {
    // The rejoined text and where each segment starts in it.
    let mut text = Vec::new();
    let mut starts = Vec::with_capacity(channel.len());
    for s in channel {
        let at = text.len();
        let raw = &body[s.span.clone()];
        if s.literal {
            unescape(raw, |_, d| text.extend_from_slice(d));
        } else {
            text.extend_from_slice(raw);
        }
        starts.push(at..text.len());
    }
    let hits = occurrences(&text, key);
    for hit in &hits {
        let mut first = true;
        for (s, at) in channel.iter().zip(&starts) {
            let (lo, hi) = (hit.start.max(at.start), hit.end.min(at.end));
            if lo >= hi {
                continue;
            }
            let local = lo - at.start..hi - at.start;
            let raw = if s.literal {
                to_source(&body[s.span.clone()], &[local])
                    .pop()
                    .unwrap_or(0..0)
            } else {
                local
            };
            let with = if first {
                replacement.as_bytes().to_vec()
            } else {
                Vec::new()
            };
            first = false;
            edits.push((s.span.start + raw.start..s.span.start + raw.end, with));
        }
    }
    hits.len() as u64
}

/// `body` with each range replaced (ranges disjoint, in any order).
fn apply(body: &[u8], mut edits: Vec<(Range<usize>, Vec<u8>)>) -> Vec<u8> {
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = Vec::with_capacity(body.len());
    let mut at = 0;
    for (r, with) in edits {
        if r.start < at {
            continue;
        }
        out.extend_from_slice(&body[at..r.start]);
        out.extend_from_slice(&with);
        at = r.end;
    }
    out.extend_from_slice(&body[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::wire;
    use serde_json::{Value, json};

    const KEY: &str = "sk-callcheck-test-0123456789abcdef";

    fn key() -> Regex {
        Regex::new(&regex::escape(KEY)).unwrap()
    }

    /// Where a piece of streamed text goes in a chunk.
    #[derive(Clone, Copy)]
    enum Channel {
        Content,
        Reasoning,
        /// `tool_calls[].function.arguments` of the call with this `index`.
        Args(u64),
        Name,
    }

    /// One SSE event carrying `piece` in `channel`, the way vLLM writes it; with `escape_all`
    /// every character of the piece is written as a `\uXXXX` escape (a server whose JSON
    /// writer escapes everything).
    fn event(channel: Channel, piece: &str, escape_all: bool) -> String {
        const MARK: &str = "\u{1}PIECE\u{1}";
        let delta = match channel {
            Channel::Content => json!({"content": MARK}),
            Channel::Reasoning => json!({"reasoning_content": MARK}),
            Channel::Args(i) => {
                json!({"tool_calls": [{"index": i, "function": {"arguments": MARK}}]})
            }
            Channel::Name => json!({"tool_calls": [{"index": 0, "function": {"name": MARK}}]}),
        };
        let chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
        let literal = if escape_all {
            let mut l = String::new();
            for u in piece.encode_utf16() {
                l.push_str(&format!("\\u{u:04x}"));
            }
            l
        } else {
            let q = serde_json::to_string(piece).unwrap();
            q[1..q.len() - 1].to_string()
        };
        let mark = serde_json::to_string(MARK).unwrap();
        let text = serde_json::to_string(&chunk)
            .unwrap()
            .replace(&mark[1..mark.len() - 1], &literal);
        format!("data: {text}\n\n")
    }

    const HEAD: &str = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
    const FINISH: &str = "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    const DONE: &str = "data: [DONE]\n\n";

    /// A stream of `text` cut at `cuts` (sorted offsets), each piece one event in `channel`.
    fn stream(
        text: &str,
        cuts: &[usize],
        channel: Channel,
        escape_all: bool,
    ) -> (String, Vec<String>) {
        let mut events = vec![HEAD.to_string()];
        let mut at = 0;
        for &c in cuts.iter().chain(std::iter::once(&text.len())) {
            events.push(event(channel, &text[at..c], escape_all));
            at = c;
        }
        events.push(FINISH.to_string());
        events.push(DONE.to_string());
        (events.concat(), events)
    }

    /// The stream after redaction, checked: one occurrence; the key nowhere in the bytes or
    /// in what a reader rejoins; every event still JSON; events that held no piece of the key
    /// byte-identical. Returns the rejoined completion.
    fn redacted(events: &[String], pieces_at: &[bool]) -> wire::Completion {
        let mut body = events.concat().into_bytes();
        assert_eq!(redact(&mut body, &key(), "[REDACTED]"), 1);
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(!text.contains(KEY), "{text}");
        let (after, partial) = wire::sse_events(&body);
        assert!(partial.is_none());
        assert_eq!(after.len(), events.len());
        for (i, (ev, orig)) in after.iter().zip(events).enumerate() {
            if ev.data != "[DONE]" {
                serde_json::from_str::<Value>(&ev.data).unwrap();
            }
            if !pieces_at[i] {
                assert_eq!(format!("data: {}\n\n", ev.data), *orig, "event {i} changed");
            }
        }
        let c = wire::parse_stream(&body).unwrap();
        assert!(!format!("{c:?}").contains(KEY), "{c:?}");
        c
    }

    /// Which events (HEAD first) hold part of `text[key_at..key_at + KEY.len()]` for `cuts`.
    fn holding(text_len: usize, cuts: &[usize], key_at: usize) -> Vec<bool> {
        let mut out = vec![false];
        let mut at = 0;
        for &c in cuts.iter().chain(std::iter::once(&text_len)) {
            out.push(at < key_at + KEY.len() && c > key_at);
            at = c;
        }
        out.push(false);
        out.push(false);
        out
    }

    /// Every way of cutting `len` characters around the key into `n` events that the tests
    /// below try: for two and three events every split point (and pair of split points) inside
    /// the key; for ten, nine cuts one character apart and three apart, slid over every start.
    fn cut_sets(key_at: usize, n: usize, text_len: usize) -> Vec<Vec<usize>> {
        let inside = key_at + 1..key_at + KEY.len();
        let sets: Vec<Vec<usize>> = match n {
            2 => inside.clone().map(|c| vec![c]).collect(),
            3 => inside
                .clone()
                .flat_map(|a| (a + 1..key_at + KEY.len()).map(move |b| vec![a, b]))
                .collect(),
            _ => [1, 3]
                .iter()
                .flat_map(|&step| {
                    (key_at + 1 - step..key_at + KEY.len())
                        .map(move |s| (0..n - 1).map(|i| s + i * step).collect::<Vec<_>>())
                })
                .filter(|cuts| cuts.iter().all(|&c| c > 0 && c < text_len))
                .collect(),
        };
        // Every split point inside the key is tried, with n events each time.
        for c in inside {
            assert!(
                sets.iter().any(|s| s.contains(&c)),
                "split point {c} of {n} events"
            );
        }
        assert!(sets.iter().all(|s| s.len() == n - 1));
        sets
    }

    #[test]
    fn a_key_split_across_content_events_is_cut_where_its_pieces_lie() {
        let text = format!("Your key is {KEY}, keep it safe.");
        let key_at = text.find(KEY).unwrap();
        let want = text.replace(KEY, "[REDACTED]");
        for n in [2, 3, 10] {
            for cuts in cut_sets(key_at, n, text.len()) {
                for escape_all in [false, true] {
                    let (_, events) = stream(&text, &cuts, Channel::Content, escape_all);
                    let c = redacted(&events, &holding(text.len(), &cuts, key_at));
                    assert_eq!(c.content.as_deref(), Some(want.as_str()), "{cuts:?}");
                }
            }
        }
    }

    #[test]
    fn a_key_split_across_reasoning_events_is_cut_too() {
        let text = format!("The user sent {KEY} as the header.");
        let key_at = text.find(KEY).unwrap();
        for n in [2, 3, 10] {
            for cuts in cut_sets(key_at, n, text.len()) {
                let (_, events) = stream(&text, &cuts, Channel::Reasoning, false);
                let mut body = events.concat().into_bytes();
                assert_eq!(redact(&mut body, &key(), "[REDACTED]"), 1, "{cuts:?}");
                let mut joined = String::new();
                for ev in wire::sse_events(&body).0 {
                    if let Ok(v) = serde_json::from_str::<Value>(&ev.data)
                        && let Some(r) = v["choices"][0]["delta"]["reasoning_content"].as_str()
                    {
                        joined.push_str(r);
                    }
                }
                assert_eq!(joined, text.replace(KEY, "[REDACTED]"), "{cuts:?}");
            }
        }
    }

    #[test]
    fn a_key_split_across_argument_fragments_is_cut_even_when_the_arguments_escape_it() {
        // The arguments are JSON inside a JSON string: a model (or server) that writes `s` as
        // `\u0073` hides the key from a search of the decoded stream, not from the parsed value.
        for (args, escaped) in [
            (format!(r#"{{"note": "{KEY}"}}"#), false),
            (format!(r#"{{"note": "\u0073{}"}}"#, &KEY[1..]), true),
        ] {
            let key_at = if escaped {
                args.find("\\u0073").unwrap()
            } else {
                args.find(KEY).unwrap()
            };
            for n in [2, 3, 10] {
                for cuts in cut_sets(key_at, n, args.len()) {
                    let (_, events) = stream(&args, &cuts, Channel::Args(0), false);
                    let c = redacted(&events, &vec![true; events.len()]);
                    let wire::WireArgs::Text(got) = &c.tool_calls[0].arguments else {
                        panic!("{c:?}");
                    };
                    let v: Value = serde_json::from_str(got).unwrap();
                    assert_eq!(v, json!({"note": "[REDACTED]"}), "{cuts:?} {got}");
                }
            }
        }
    }

    #[test]
    fn interleaved_calls_are_rejoined_by_their_index() {
        // Call 1 carries the key in two pieces with an event of call 0 between them; call 0's
        // text would join the pieces wrongly if calls were rejoined by position.
        let events = vec![
            HEAD.to_string(),
            event(
                Channel::Args(1),
                &format!("{{\"k\": \"{}", &KEY[..10]),
                false,
            ),
            event(Channel::Args(0), "{\"city\": \"Paris\"}", false),
            event(Channel::Args(1), &format!("{}\"}}", &KEY[10..]), false),
            FINISH.to_string(),
            DONE.to_string(),
        ];
        let c = redacted(&events, &[false, true, false, true, false, false]);
        assert_eq!(c.tool_calls.len(), 2);
        assert_eq!(
            c.tool_calls[1].arguments,
            wire::WireArgs::Text("{\"k\": \"[REDACTED]\"}".into())
        );
    }

    #[test]
    fn a_tool_name_repeated_in_pieces_is_cut() {
        let key_at = 0;
        for cuts in cut_sets(key_at, 2, KEY.len()) {
            let (_, events) = stream(KEY, &cuts, Channel::Name, false);
            let c = redacted(&events, &vec![true; events.len()]);
            assert_eq!(c.tool_calls[0].name.as_deref(), Some("[REDACTED]"));
        }
    }

    #[test]
    fn an_escaped_key_in_a_body_is_cut_and_the_rest_kept_byte_for_byte() {
        let body = format!(
            "{{\"choices\": [{{\"message\": {{\"content\": \"k\\u00e9y: \\u0073{} \\/ ok\"}}}}],\n \"usage\": {{\"completion_tokens\": 5}}}}",
            &KEY[1..]
        );
        let mut b = body.clone().into_bytes();
        assert_eq!(redact(&mut b, &key(), "[REDACTED]"), 1);
        assert_eq!(
            String::from_utf8(b).unwrap(),
            body.replace(&format!("\\u0073{}", &KEY[1..]), "[REDACTED]")
        );
    }

    #[test]
    fn keys_outside_json_strings_are_cut_from_the_raw_bytes() {
        // An HTML error page, an SSE comment, an event name: no JSON to decode.
        for raw in [
            format!("<html>bad key {KEY}</html>"),
            format!(": ping {KEY}\n\ndata: [DONE]\n\n"),
            format!("event: {KEY}\ndata: {{\"a\": 1}}\n\n"),
            format!("data: not json {KEY}\n\n"),
            format!("{{\"cut\": \"\\u0073{}", &KEY[1..]),
        ] {
            let mut b = raw.clone().into_bytes();
            assert_eq!(redact(&mut b, &key(), "[REDACTED]"), 1, "{raw}");
            let s = String::from_utf8(b).unwrap();
            assert!(s.contains("[REDACTED]") && !s.contains(&KEY[1..]), "{s}");
        }
    }

    #[test]
    fn text_without_the_key_is_left_alone() {
        let (body, _) = stream("no secret here \\u0073k-", &[3, 9], Channel::Content, true);
        let mut b = body.clone().into_bytes();
        assert_eq!(redact(&mut b, &key(), "[REDACTED]"), 0);
        assert_eq!(b, body.into_bytes());
        // Deep nesting is not walked, and does not crash.
        let mut deep = "[".repeat(100_000).into_bytes();
        assert_eq!(redact(&mut deep, &key(), "[REDACTED]"), 0);
    }
}
