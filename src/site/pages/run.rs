//! A run's page (`t/<model>/<task>/<run>/index.html`) and its samples' permalinks: each sample
//! is a section of the run's page (what came back, the calls the scorer extracted, every stage's
//! verdict, the failing argument marked in place as `#fail-<NNN>`), the request they sent is
//! shown once with a "copy as curl" block (the key left to an environment variable), and the
//! permalink `t/<model>/<task>/<run>/<NNN>.html` is a small page that sends the reader to the
//! sample's section, `#fail` to its failure (a refresh without JavaScript lands on the section).
//!
//! One page per run rather than per sample, and lean (a shared stylesheet, no inline styles, tools
//! shown by reference when they are the task's own): a BFCL-sized collection is hundreds of
//! thousands of samples, and its site must fit GitHub Pages' 1 GB.

use crate::report::SampleKey;
use crate::runs::CellInfo;
use crate::score::Verdict;
use crate::score::extract::Source;
use crate::score::wire::sse_events;
use crate::site::html::{json_html, json_reindent, root, shell_quote, text, text_into};
use crate::task::{Expect, Task};
use crate::taxonomy::{Outcome, Stage};
use crate::transcript::{Meta, Transcript};
use askama::Template;
use serde_json::Value;
use std::fmt::Write as _;

/// The most response bytes shown on one page; beyond it the page says how much was left out.
/// A runaway generation can be megabytes, and the raw file is in runs/ anyway.
const MAX_SHOWN: usize = 256 * 1024;

/// Everything one sample page is made from.
pub(crate) struct SampleContext<'a> {
    pub(crate) key: &'a SampleKey,
    pub(crate) task: &'a Task,
    pub(crate) cell: &'a CellInfo,
    /// The sample as the scorer read it: request and meta parsed (absent when they do not
    /// parse), the response bytes as received.
    pub(crate) transcript: &'a Transcript,
    /// `request.json` exactly as sent.
    pub(crate) request_raw: &'a [u8],
    /// What of the request differs from the run's (shown once, on the run page):
    /// [`request_changes`]; empty when nothing but the sample's own seed does.
    pub(crate) request_changes: &'a [String],
    pub(crate) verdict: &'a Verdict,
    pub(crate) task_changed: bool,
    /// The response as the scorer read it.
    pub(crate) completion: Option<&'a crate::score::wire::Completion>,
    /// Why the sample's transcript is left off its run's page (the page would pass its bound):
    /// the section then says so and shows only its verdict.
    pub(crate) left_off: Option<String>,
    /// The response's status and headers every sample of the run shares ([`shared_meta`]): the
    /// run's page shows them once, above the answers, and a section only its own.
    pub(crate) shared_meta: &'a [(String, String)],
    /// The ‹ and › most streams of the run share ([`shared_marks`]), said on the run's page.
    pub(crate) shared_marks: Option<&'a (String, String)>,
    /// The samples (run, sample) of the same model and task that followed this one up.
    pub(crate) follow_ups: &'a [(String, String)],
}

struct StageRow {
    /// The stage, or several consecutive stages with the same state (`transport, parse`).
    name: String,
    /// `pass`, `fail`, `error`, `not reached` or `n/a`.
    state: &'static str,
    /// CSS class for the state: `pass`, `fail`, `error`, `nr` (not reached), `na`.
    class: &'static str,
    detail: String,
}

struct CallView {
    number: usize,
    source: &'static str,
    name: String,
    matched: String,
    /// Escaped HTML: the arguments, pretty-printed, with the failure marked.
    body: String,
}

struct MessageView {
    role: String,
    /// Escaped HTML.
    content: String,
}

/// One sample's section of its run's page.
#[derive(Template)]
#[template(path = "sample.html")]
struct Section<'a> {
    root: String,
    key: &'a SampleKey,
    outcome: &'static str,
    outcome_kind: &'static str,
    label: Option<&'static str>,
    detail: &'a str,
    task_changed: bool,
    /// Every stage passed (or did not apply): said in a few words, not stage by stage.
    passed: bool,
    stages: Vec<StageRow>,
    /// The label and detail carry the sample's fail anchor (every sample that did not pass).
    fail_on_head: bool,
    /// A failed sample's one-line context, `model · task · run <id>`, under its heading: a
    /// permalink lands with it at the top of the screen. Empty on a pass.
    context: String,
    /// For a follow-up (a feedback or review round): the run and sample of the failure it
    /// follows up, linked beside its heading.
    /// The samples that followed this one up (run, sample), linked to their sections.
    follow_ups: &'a [(String, String)],
    parent: Option<(String, String)>,
    /// A schema-stage failure's violated sub-schema (escaped), with the pointer it sits at.
    sub_schema: Option<(String, String)>,
    calls: Vec<CallView>,
    output: Option<String>,
    /// Escaped HTML: the message content.
    content: Option<String>,
    notes: &'a [String],
    finish_reason: String,
    same_request: bool,
    /// The fields of the request that differ from the run's, by name (`messages, tools`).
    request_changes: String,
    before: Vec<MessageView>,
    after: Vec<MessageView>,
    tools_same: bool,
    tool_names: Vec<String>,
    tools_sent: Option<String>,
    params: Option<String>,
    meta_rows: Vec<(String, String)>,
    streamed: bool,
    response: String,
    response_note: Option<String>,
    /// The body is JSON laid out for reading, not the bytes as received.
    laid_out: bool,
    curl: String,
    /// Why the transcript is not shown here ([`SampleContext::left_off`]).
    left_off: Option<&'a str>,
}

/// A sample's permalink page: its title and summary for a shared link, and a redirect to its
/// section of the run's page.
#[derive(Template)]
#[template(path = "stub.html")]
struct Stub<'a> {
    title: String,
    /// The section's anchor on the run's page: `fail-NNN` (its head) for a sample that did not
    /// pass, so that `NNN.html` and `NNN.html#fail` both land on the failure, `s-NNN` otherwise.
    /// A refresh needs no script (a script cost each permalink a hundred bytes).
    anchor: String,
    sample: &'a str,
    /// Escaped HTML: the link card's tags ([`crate::site::card`]).
    card: String,
}

/// What a run's page shows of one sample above the sections: its name and outcome.
pub struct SampleMark {
    pub(crate) name: String,
    pub(crate) outcome: Outcome,
}

struct MarkView {
    name: String,
    outcome: &'static str,
    kind: &'static str,
    glyph: &'static str,
}

fn stage_rows(task: &Task, v: &Verdict) -> Vec<StageRow> {
    let no_call_task = matches!(task.expect, Expect::NoCall);
    Stage::ALL
        .into_iter()
        .map(|s| {
            // Tasks that expect no call stop at extract: only transport and structure apply.
            let applies = !no_call_task || matches!(s, Stage::Transport | Stage::Structure);
            let (state, detail) = match (v.outcome, v.stage) {
                (_, Some(d)) if d == s => (
                    if v.outcome == Outcome::Error {
                        "error"
                    } else {
                        "fail"
                    },
                    v.detail.clone(),
                ),
                (_, Some(d)) if s > d => ("not reached", String::new()),
                _ if !applies => ("n/a", String::new()),
                (Outcome::Pass, _) if s == Stage::Semantic || no_call_task => {
                    ("pass", v.detail.clone())
                }
                _ => ("pass", String::new()),
            };
            let class = match state {
                "not reached" => "nr",
                "n/a" => "na",
                other => other,
            };
            StageRow {
                name: s.as_str().to_string(),
                state,
                class,
                detail,
            }
        })
        .fold(Vec::new(), |mut rows: Vec<StageRow>, r| {
            // Consecutive stages with the same state and nothing to say share one row.
            match rows.last_mut() {
                Some(last)
                    if last.state == r.state && last.detail.is_empty() && r.detail.is_empty() =>
                {
                    last.name.push_str(", ");
                    last.name.push_str(&r.name);
                }
                _ => rows.push(r),
            }
            rows
        })
}

fn source_name(s: Source) -> &'static str {
    match s {
        Source::ToolCalls => "tool_calls",
        other => other.describe(),
    }
}

fn calls_view(task: &Task, v: &Verdict) -> (Vec<CallView>, bool) {
    let mut anchored = false;
    let calls = v
        .calls
        .iter()
        .map(|c| {
            let failing = v.fail_call == Some(c.index);
            let body = match (&c.arguments, failing) {
                (Some(args), true) => {
                    let mark = match (&v.fail_path, v.stage) {
                        (Some(p), _) => Some(p.as_str()),
                        // A wrong or unexpected tool: the name is the failure, marked below.
                        (None, Some(Stage::Structure)) => None,
                        (None, _) => Some(""),
                    };
                    if mark.is_some() {
                        anchored = true;
                    }
                    json_html(args, mark)
                }
                (Some(args), false) => json_html(args, None),
                (None, _) => {
                    let raw = c.arguments_raw.as_deref().unwrap_or("");
                    let mut s = String::new();
                    if failing {
                        anchored = true;
                        s.push_str("<mark id=\"fail\">");
                    }
                    text_into(&mut s, raw);
                    if failing {
                        s.push_str("</mark>");
                    }
                    s
                }
            };
            let mut name = c.name.clone().unwrap_or_else(|| "(no name)".into());
            if failing && !anchored {
                anchored = true;
                name = format!("<mark id=\"fail\">{}</mark>", text(&name));
            } else {
                name = text(&name);
            }
            let matched = match c.matched.and_then(|i| task.expected_calls().get(i)) {
                // The expected tool is named only where it is not the call's own (named above).
                Some(e) if c.name.as_deref() == Some(e.tool.as_str()) => {
                    format!("expected call {}", c.matched.map(|i| i + 1).unwrap_or(0))
                }
                Some(e) => format!(
                    "expected call {} ({})",
                    c.matched.map(|i| i + 1).unwrap_or(0),
                    e.tool
                ),
                None => "unmatched".to_string(),
            };
            CallView {
                number: c.index + 1,
                source: source_name(c.source),
                name,
                matched,
                body,
            }
        })
        .collect();
    (calls, anchored)
}

fn message_view(m: &Value) -> MessageView {
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    let content = match m.get("content") {
        Some(Value::String(s)) => {
            let html = text(s);
            if html.len() <= MAX_SHOWN {
                html
            } else {
                format!(
                    "{}\n… (the rest of this message, {} in all, is left off; the whole request is the sample's request.json)",
                    &html[..escaped_cut(&html, MAX_SHOWN)],
                    crate::site::html::bytes(s.len() as u64)
                )
            }
        }
        _ => {
            // Tool results, multi-part content, assistant tool calls: show the message whole,
            // up to the bound of what one message shows.
            let mut rest = m.clone();
            if let Some(o) = rest.as_object_mut() {
                o.remove("role");
            }
            bounded(json_html(&rest, None), "this message")
        }
    };
    MessageView { role, content }
}

/// Where to cut escaped text `html` to at most `max` bytes: on a character boundary and never
/// inside an entity (`&quot;`), whose `&` then starts the part left off.
fn escaped_cut(html: &str, max: usize) -> usize {
    let mut at = max.min(html.len());
    while !html.is_char_boundary(at) {
        at -= 1;
    }
    // An entity is at most six bytes (`&quot;`, `&#39;`): an `&` among the last five with no
    // `;` after it is one cut in two.
    let mut tail_from = at.saturating_sub(5);
    while !html.is_char_boundary(tail_from) {
        tail_from -= 1;
    }
    if let Some(amp) = html[tail_from..at].rfind('&')
        && !html[tail_from + amp..at].contains(';')
    {
        at = tail_from + amp;
    }
    at
}

/// `html` when it is at most [`MAX_SHOWN`] bytes; else a line saying `what` was left off.
fn bounded(html: String, what: &str) -> String {
    if html.len() <= MAX_SHOWN {
        return html;
    }
    format!(
        "({what}: {} of HTML, left off; the whole request is the sample's request.json)",
        crate::site::html::bytes(html.len() as u64)
    )
}

/// The views of `messages`, in order, while they add up to at most [`MAX_SHOWN`] bytes of HTML
/// (or one message); the rest are counted in one last view. A request is bounded only by the
/// 64 MiB callcheck reads of a file, a page by far less.
fn messages_view(messages: &[Value]) -> Vec<MessageView> {
    let mut views = Vec::new();
    let mut shown = 0;
    for (i, m) in messages.iter().enumerate() {
        let v = message_view(m);
        shown += v.content.len();
        if shown > MAX_SHOWN && i > 0 {
            views.push(MessageView {
                role: "…".into(),
                content: format!(
                    "{} more message{} left off: the whole request is the sample's request.json",
                    messages.len() - i,
                    if messages.len() - i == 1 { "" } else { "s" }
                ),
            });
            break;
        }
        views.push(v);
    }
    views
}

/// The top-level fields of a sample's request that differ from its run's (the first sample's),
/// by name and in order, leaving out `seed`: collect gives each sample of a row that sets one
/// its own, so that k samples are k draws, and that is not a difference worth a warning. A
/// request that is not a JSON object is named whole. Empty: the same request.
pub(crate) fn request_changes(
    reference: Option<&Value>,
    reference_raw: &[u8],
    request: Option<&Value>,
    raw: &[u8],
) -> Vec<String> {
    if reference_raw == raw {
        return Vec::new();
    }
    match (
        reference.and_then(Value::as_object),
        request.and_then(Value::as_object),
    ) {
        (Some(a), Some(b)) => {
            let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            names
                .into_iter()
                .filter(|k| k.as_str() != "seed" && a.get(*k) != b.get(*k))
                .cloned()
                .collect()
        }
        _ => vec!["the whole body (one of the two is not a JSON object)".into()],
    }
}

/// The name of the environment variable holding the model's key, read from the (redacted)
/// model entry's `api_key_env` (the field collect writes): a variable's name, never a value.
/// Other fields are not guessed at: a hand-made `cell.json` with a key in some other field must
/// not put it on a published page.
fn key_variable(model: &Value) -> Option<String> {
    let v = model.get("api_key_env")?.as_str()?;
    let v = v.strip_prefix('$').unwrap_or(v);
    let ok = !v.is_empty()
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !v.starts_with(|c: char| c.is_ascii_digit());
    ok.then(|| v.to_string())
}

/// "Copy as curl": the sample's request, replayable from a POSIX shell. Every line but the last
/// ends in a `\` continuation, so nothing (not even a comment) may sit between them: what the
/// block says about itself goes on comment lines before the command. The body is the request's
/// bytes exactly, single-quoted; a body a shell argument cannot carry (a NUL byte, or bytes that
/// are not UTF-8) is left to the sample's `request.json` instead.
pub(crate) fn curl(cell: &CellInfo, request: &[u8], streamed: bool) -> String {
    // The first replica when the entry lists several.
    let base = cell
        .model
        .get("base_url")
        .and_then(Value::as_str)
        .or_else(|| cell.model.get("base_urls")?.get(0)?.as_str());
    let mut s = String::new();
    let url = match base {
        Some(b) => shell_quote(&format!("{}/chat/completions", b.trim_end_matches('/'))),
        None => {
            s.push_str("# the model entry records no base URL: set BASE_URL first\n");
            "\"$BASE_URL/chat/completions\"".to_string()
        }
    };
    let key = key_variable(&cell.model);
    if key.is_none() {
        s.push_str("# the model entry names no API key variable: no Authorization header\n");
    }
    let body = std::str::from_utf8(request)
        .ok()
        .filter(|b| !b.contains('\0'));
    if request.len() > MAX_SHOWN {
        s.push_str(&format!(
            "# the request is {} bytes, more than a page shows: it is sent from the sample's request.json\n",
            request.len()
        ));
    } else if body.is_none() {
        s.push_str("# the request is not text a shell can quote: it is sent from the sample's request.json\n");
    }
    let body = body.filter(|_| request.len() <= MAX_SHOWN);
    // -N: print a stream's events as they arrive.
    s.push_str(if streamed {
        "curl -sS -N "
    } else {
        "curl -sS "
    });
    s.push_str(&url);
    s.push_str(" \\\n  -H 'Content-Type: application/json' \\\n");
    if let Some(var) = key {
        // Double quotes so the shell expands the variable; its name is [A-Za-z0-9_] only.
        s.push_str(&format!("  -H \"Authorization: Bearer ${var}\" \\\n"));
    }
    s.push_str("  --data-binary ");
    match body {
        Some(b) => s.push_str(&shell_quote(b)),
        None => s.push_str("@request.json"),
    }
    s.push('\n');
    s
}

fn meta_rows(meta: Option<&Meta>) -> Vec<(String, String)> {
    let Some(m) = meta else {
        return vec![("meta.json".into(), "absent or not readable".into())];
    };
    let mut rows = Vec::new();
    if let Some(s) = m.status {
        rows.push(("HTTP status".into(), s.to_string()));
    }
    if let Some(t) = m.ttfb_ms {
        rows.push(("first byte".into(), format!("{t:.0} ms")));
    }
    if let Some(t) = m.total_ms {
        rows.push(("total".into(), format!("{t:.0} ms")));
    }
    if m.attempts.len() > 1 {
        rows.push(("attempts".into(), m.attempts.len().to_string()));
    }
    if let Some(e) = &m.error {
        rows.push(("error".into(), e.clone()));
    }
    for (k, v) in &m.headers {
        rows.push((k.clone(), v.clone()));
    }
    rows
}

/// The rows of [`meta_rows`] that are the response's status or a header, with the same value in
/// every sample of a run of two or more (`content-type`, `server`, `HTTP status` 200, as a rule):
/// said once on the run's page instead of in each of its samples' sections. A row that differs in
/// one sample stays in every section; a sample without a meta.json shares nothing.
pub(crate) fn shared_meta<'m>(
    mut metas: impl Iterator<Item = Option<&'m Meta>>,
) -> Vec<(String, String)> {
    let Some(Some(first)) = metas.next() else {
        return Vec::new();
    };
    let per_sample = |m: &Meta| -> Vec<(String, String)> {
        let mut rows: Vec<(String, String)> = m
            .status
            .map(|s| ("HTTP status".into(), s.to_string()))
            .into_iter()
            .collect();
        rows.extend(m.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        rows
    };
    let mut shared = per_sample(first);
    let mut others = 0;
    for m in metas {
        let Some(m) = m else { return Vec::new() };
        let rows = per_sample(m);
        shared.retain(|r| rows.contains(r));
        others += 1;
    }
    if others == 0 {
        return Vec::new();
    }
    shared
}

/// The response as a page shows it: its HTML, a note on what was left out, and whether a JSON
/// body was laid out for reading ([`json_reindent`]).
///
/// `lay_out`: lay a JSON body out (a failure's, which a reader studies); a passing sample's says
/// nothing the output or calls above it do not, and is shown as received (most servers send
/// compact JSON: the layout doubled its lines' whitespace on every pass).
///
/// `shared`: the ‹ and › the run's page says once ([`shared_marks`]); a stream with the same
/// leaves them out of its legend.
fn response_view(
    t: &Transcript,
    lay_out: bool,
    shared: Option<&(String, String)>,
) -> (String, Option<String>, bool) {
    let body = &t.body;
    let shown = &body[..body.len().min(MAX_SHOWN)];
    let cut_note = (body.len() > MAX_SHOWN).then(|| {
        format!(
            "{} of {} bytes shown; the rest is in the sample's response file",
            MAX_SHOWN,
            body.len()
        )
    });
    if t.streamed {
        let (events, partial) = sse_events(shown);
        let (prefix, head, tail) = stream_affixes(&events);
        let mut s = String::with_capacity(shown.len() / 2);
        if !prefix.is_empty() {
            // The legend's words are on the run's page, once ("… = " the envelope).
            s.push_str("… = ");
            text_into(&mut s, prefix);
            let said = shared.is_some_and(|(h, t)| h == head && t == tail);
            if !head.is_empty() && !said {
                s.push_str("\n‹ = …");
                text_into(&mut s, head);
            }
            if !tail.is_empty() && !said {
                s.push_str("\n› = ");
                text_into(&mut s, tail);
            }
            s.push_str("\n\n");
        }
        // Each line starts with its event's byte offset ("SSE events, by byte offset"), as wide
        // as the largest: a column head and a fixed width cost every streamed sample ~50 bytes.
        let width = events.last().map_or(1, |e| e.offset.to_string().len());
        for e in &events {
            let _ = write!(s, "{:>width$}  ", e.offset);
            match e.data.strip_prefix(prefix) {
                Some(rest) if !prefix.is_empty() => {
                    // ‹ stands for the shared start and the frequent head together ("‹ = …{head}").
                    let (rest, h) = match rest.strip_prefix(head) {
                        Some(r) if !head.is_empty() => (r, true),
                        _ => (rest, false),
                    };
                    if !h {
                        s.push('…');
                    }
                    let (rest, t) = match rest.strip_suffix(tail) {
                        Some(r) if !tail.is_empty() => (r, true),
                        _ => (rest, false),
                    };
                    if h {
                        s.push('‹');
                    }
                    text_into(&mut s, rest);
                    if t {
                        s.push('›');
                    }
                }
                _ => text_into(&mut s, &e.data),
            }
            s.push('\n');
        }
        let note = match partial {
            Some(p) if cut_note.is_none() => Some(format!(
                "the stream ended inside an event at byte {} (not terminated by a blank line, so a client discards it): {}",
                p.offset,
                crate::json::clip(&p.data, 200)
            )),
            _ => cut_note,
        };
        if events.is_empty() {
            s = text(&String::from_utf8_lossy(shown));
        }
        (s, note, false)
    } else {
        // JSON is laid out for reading, every token as received; anything else (a cut body,
        // an HTML error page, bytes that are not UTF-8) is shown exactly as received.
        match std::str::from_utf8(shown)
            .ok()
            .filter(|_| cut_note.is_none() && lay_out)
            .filter(|b| serde_json::from_str::<serde::de::IgnoredAny>(b).is_ok())
        {
            Some(json) => (text(&json_reindent(json)), None, true),
            None => (text(&String::from_utf8_lossy(shown)), cut_note, false),
        }
    }
}

/// What a stream's view elides from its events' data: the envelope every JSON event begins with,
/// and past it the head and tail most chunks share (`""` where none is).
fn stream_affixes(events: &[crate::score::wire::SseEvent]) -> (&str, &str, &str) {
    // vLLM repeats the same envelope (id, object, created, model, `"choices":[`) in every
    // chunk; it is shown once and elided from each line, which keeps every byte of
    // information and halves the page.
    let prefix = common_prefix(
        events
            .iter()
            .map(|e| e.data.as_str())
            .filter(|d| d.starts_with('{')),
    );
    // Past the envelope, most chunks of a call also share how they begin (the delta's path
    // down to `"arguments":`) and end (`"finish_reason":null}]}`): each is shown once and
    // marked by ‹ and › in the lines that carry it, unless the stream itself uses those
    // marks (then nothing more is elided, so no line is ambiguous).
    let rests: Vec<&str> = events
        .iter()
        .filter_map(|e| e.data.strip_prefix(prefix).filter(|_| !prefix.is_empty()))
        .collect();
    let (head, tail) = if rests.iter().any(|r| r.contains(['‹', '›'])) {
        ("", "")
    } else {
        (frequent_affix(&rests, false), frequent_affix(&rests, true))
    };
    (prefix, head, tail)
}

/// The ‹ and › of a streamed sample's view (the head and tail most of its chunks share), when it
/// has both: a run whose streams all share theirs says them once on its page
/// ([`RunContext::shared_marks`]), not in every sample's legend.
pub(crate) fn stream_marks(t: &Transcript) -> Option<(String, String)> {
    if !t.streamed {
        return None;
    }
    let (events, _) = sse_events(&t.body[..t.body.len().min(MAX_SHOWN)]);
    let (prefix, head, tail) = stream_affixes(&events);
    (!prefix.is_empty() && !head.is_empty() && !tail.is_empty())
        .then(|| (head.to_string(), tail.to_string()))
}

/// The ‹ and › most streamed samples of a run share (the first of the most frequent, when two or
/// more share it): the run's page says them once, and a stream with the same leaves them out of
/// its legend (one with its own still gives them).
pub(crate) fn shared_marks<'t>(
    transcripts: impl Iterator<Item = &'t Transcript>,
) -> Option<(String, String)> {
    let mut counts: Vec<((String, String), usize)> = Vec::new();
    for marks in transcripts.filter_map(stream_marks) {
        match counts.iter_mut().find(|(m, _)| *m == marks) {
            Some((_, n)) => *n += 1,
            None => counts.push((marks, 1)),
        }
    }
    let best = counts.iter().map(|(_, n)| *n).max().filter(|n| *n >= 2)?;
    counts.into_iter().find(|(_, n)| *n == best).map(|(m, _)| m)
}

/// The prefix (or, with `suffix`, the suffix) most often shared by consecutive items, at least
/// 16 bytes long and cut at a character boundary, or `""` when no pair shares one.
fn frequent_affix<'s>(items: &[&'s str], suffix: bool) -> &'s str {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for w in items.windows(2) {
        let (a, b) = (w[0], w[1]);
        let affix = if suffix {
            let n = a
                .bytes()
                .rev()
                .zip(b.bytes().rev())
                .take_while(|(x, y)| x == y)
                .count();
            let mut start = a.len() - n;
            while !a.is_char_boundary(start) {
                start += 1;
            }
            &a[start..]
        } else {
            let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
            while !a.is_char_boundary(n) {
                n -= 1;
            }
            &a[..n]
        };
        // An item never disappears entirely behind its marks.
        if affix.len() >= 16 && affix.len() < a.len() && affix.len() < b.len() {
            *counts.entry(affix).or_default() += 1;
        }
    }
    // The most frequent; ties go to the longer, then to the smaller string (deterministic).
    counts
        .into_iter()
        .max_by(|x, y| {
            x.1.cmp(&y.1)
                .then(x.0.len().cmp(&y.0.len()))
                .then(y.0.cmp(x.0))
        })
        .map(|(a, _)| a)
        .unwrap_or("")
}

/// The longest common prefix of at least two strings, cut at a character boundary, or `""` when
/// it is too short to be worth eliding.
fn common_prefix<'s>(mut items: impl Iterator<Item = &'s str>) -> &'s str {
    let Some(first) = items.next() else {
        return "";
    };
    let mut len = first.len();
    let mut count = 1;
    for it in items {
        count += 1;
        len = first
            .bytes()
            .zip(it.bytes())
            .take(len)
            .take_while(|(a, b)| a == b)
            .count();
    }
    while !first.is_char_boundary(len) {
        len -= 1;
    }
    if count < 2 || len < 24 {
        ""
    } else {
        &first[..len]
    }
}

/// The request as the pages show it, in the order the model read it: the system prompt and
/// earlier turns (`before`), the tools (by reference when they are the task's), the user's
/// message and whatever follows it (`after`); then the other fields.
#[derive(Default)]
struct Sent {
    before: Vec<MessageView>,
    after: Vec<MessageView>,
    tools_same: bool,
    tool_names: Vec<String>,
    /// Escaped HTML, when the tools sent differ from the task's.
    tools_sent: Option<String>,
    /// Escaped HTML.
    params: Option<String>,
}

fn sent_view(task: &Task, request: Option<&Value>) -> Sent {
    let messages: &[Value] = request
        .and_then(|r| r.get("messages"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    // The conversation up to the user's last message is what the model was told before the
    // question; the tools it may call are shown between the two, as a chat template puts them.
    let split = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .unwrap_or(messages.len());
    let (before, after) = messages.split_at(split);
    let tools_sent = request.and_then(|r| r.get("tools"));
    let tools_same = match tools_sent {
        Some(Value::Array(t)) => *t == task.tools_json,
        None => task.tools_json.is_empty(),
        Some(_) => false,
    };
    let params = request.and_then(|r| r.as_object()).map(|o| {
        let mut rest = o.clone();
        rest.remove("messages");
        rest.remove("tools");
        bounded(json_html(&Value::Object(rest), None), "the other fields")
    });
    Sent {
        before: messages_view(before),
        after: messages_view(after),
        tools_same,
        tool_names: task.tools.iter().map(|t| t.name.clone()).collect(),
        tools_sent: match tools_sent {
            Some(t) if !tools_same => Some(bounded(json_html(t, None), "the tools sent")),
            _ => None,
        },
        params,
    }
}

/// Everything a run's page (`t/<model>/<task>/<run>/index.html`) is made from.
pub(crate) struct RunContext<'a> {
    pub(crate) task: &'a Task,
    pub(crate) cell: &'a CellInfo,
    pub(crate) model: &'a str,
    pub(crate) run: &'a str,
    /// Every scored sample, in order, and the HTML of their sections ([`render`]), concatenated.
    pub(crate) samples: &'a [SampleMark],
    pub(crate) sections: &'a str,
    /// The sample whose request is shown (the run's first), its bytes, and whether its response
    /// was a stream (for curl's `-N`); absent when no sample's request could be read.
    pub(crate) reference: Option<(&'a str, &'a [u8], bool)>,
    /// Models × tasks of the site: where the run's cell is drawn
    /// ([`crate::site::matrix::cell_href_in`]).
    pub(crate) cells: usize,
    /// The site's base address ([`crate::site::card::site_url`]), when known: the card's `og:url`.
    pub(crate) site_url: Option<&'a str>,
    /// The response's status and headers every sample shares ([`shared_meta`]).
    pub(crate) shared_meta: &'a [(String, String)],
    /// The ‹ and › most streams of the run share ([`shared_marks`]), said on the run's page.
    pub(crate) shared_marks: Option<&'a (String, String)>,
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunPage<'a> {
    title: String,
    root: String,
    /// Escaped HTML: the link card's tags ([`crate::site::card`]).
    card: String,
    /// The samples' outcomes in words, counted ([`outcome_counts`]).
    outcomes: String,
    model: &'a str,
    task: &'a str,
    task_title: &'a str,
    run: &'a str,
    /// Where the run's cell is drawn, relative to the site root.
    cell_href: String,
    shared_meta: &'a [(String, String)],
    /// Escaped: the ‹ and › legend lines every stream shares.
    shared_marks: Option<(String, String)>,
    k: usize,
    started: &'a str,
    ended: &'a str,
    version: &'a str,
    /// For a feedback run (SPEC §11): its style.
    feedback: Option<&'static str>,
    samples: Vec<MarkView>,
    sections: &'a str,
    reference: Option<&'a str>,
    before: Vec<MessageView>,
    after: Vec<MessageView>,
    tools_same: bool,
    tool_names: Vec<String>,
    tools_sent: Option<String>,
    curl: String,
}

/// A sample's section that shows its verdict only (label, detail, stages, the fail anchor on the
/// head), and why the rest is left off.
fn left_off(cx: &SampleContext, why: &str) -> Result<String, askama::Error> {
    let fail_on_head = cx.verdict.outcome != Outcome::Pass;
    Section {
        left_off: Some(why),
        ..Section::head(cx, stage_rows(cx.task, cx.verdict), fail_on_head)
    }
    .render()
}

impl<'a> Section<'a> {
    /// The head of a sample's section (what it is, its verdict, its stages, its meta) with
    /// nothing of its transcript: what [`render`] fills in.
    fn head(cx: &'a SampleContext, stages: Vec<StageRow>, fail_on_head: bool) -> Section<'a> {
        let v = cx.verdict;
        Section {
            root: root(4),
            key: cx.key,
            outcome: v.outcome.name(),
            outcome_kind: v.outcome.kind(),
            label: v.outcome.label().map(|l| l.as_str()),
            detail: &v.detail,
            task_changed: cx.task_changed,
            passed: v.outcome == Outcome::Pass,
            stages,
            fail_on_head,
            context: if fail_on_head {
                format!("{} · {} · run {}", cx.key.model, cx.key.task, cx.key.run)
            } else {
                String::new()
            },
            sub_schema: violated_schema(cx.task, v).map(|(at, schema)| {
                (
                    at,
                    text(&crate::json::clip(
                        &serde_json::to_string_pretty(schema).unwrap_or_default(),
                        MAX_SHOWN,
                    )),
                )
            }),
            follow_ups: cx.follow_ups,
            parent: cx
                .transcript
                .meta
                .as_ref()
                .and_then(|m| m.parent.as_ref())
                // Linked only when both are folder names (meta.json is the server's run's
                // record, not ours to trust as a path).
                .filter(|p| {
                    [&p.run, &p.sample]
                        .iter()
                        .all(|n| crate::names::folder_name(n))
                })
                .map(|p| (p.run.clone(), p.sample.clone())),
            calls: Vec::new(),
            output: None,
            content: None,
            notes: &v.notes,
            finish_reason: v
                .finish_reason
                .clone()
                .unwrap_or_else(|| "absent".to_string()),
            same_request: true,
            request_changes: String::new(),
            before: Vec::new(),
            after: Vec::new(),
            tools_same: true,
            tool_names: Vec::new(),
            tools_sent: None,
            params: None,
            meta_rows: {
                let mut rows = meta_rows(cx.transcript.meta.as_ref());
                rows.retain(|r| !cx.shared_meta.contains(r));
                // Each sample's own seed (the run's request shows the first's): what replays it.
                if let Some(seed) = cx.transcript.request.as_deref().and_then(|r| r.get("seed")) {
                    rows.push(("seed".into(), seed.to_string()));
                }
                rows
            },
            streamed: cx.transcript.streamed,
            response: String::new(),
            response_note: None,
            laid_out: false,
            curl: String::new(),
            left_off: None,
        }
    }
}

/// Renders a run's page: its samples' sections, then the request they sent (shown once) and
/// "copy as curl".
pub(crate) fn render_run(cx: &RunContext) -> Result<String, askama::Error> {
    let (request, curl_text) = match cx.reference {
        Some((_, bytes, streamed)) => (
            serde_json::from_slice::<Value>(bytes).ok(),
            text(&curl(cx.cell, bytes, streamed)),
        ),
        None => (None, String::new()),
    };
    let sent = if cx.reference.is_some() {
        sent_view(cx.task, request.as_ref())
    } else {
        Sent::default()
    };
    let title = format!("{} · {} · run {}", cx.model, cx.task.id, cx.run);
    let card = crate::site::card::render(
        &crate::site::card::Card {
            title: &title,
            description: &run_summary(cx),
            path: &format!("t/{}/{}/{}/index.html", cx.model, cx.task.id, cx.run),
            kind: "article",
        },
        cx.site_url,
    );
    RunPage {
        title,
        root: root(4),
        card,
        outcomes: outcome_counts(cx.samples),
        model: cx.model,
        task: &cx.task.id,
        task_title: &cx.task.title,
        run: cx.run,
        cell_href: crate::site::matrix::cell_href_in(
            cx.cells,
            &cx.task.tags,
            cx.model,
            &cx.task.id,
        ),
        k: cx.samples.len(),
        started: &cx.cell.started,
        ended: &cx.cell.ended,
        version: &cx.cell.callcheck_version,
        feedback: cx.cell.feedback.as_ref().map(|f| match cx.cell.kind {
            crate::runs::RunKind::Review => "review",
            _ => f.style.as_str(),
        }),
        samples: cx
            .samples
            .iter()
            .map(|m| MarkView {
                name: m.name.clone(),
                outcome: m.outcome.name(),
                kind: m.outcome.kind(),
                glyph: crate::site::marks::glyph(m.outcome),
            })
            .collect(),
        sections: cx.sections,
        shared_meta: cx.shared_meta,
        shared_marks: cx.shared_marks.map(|(h, t)| (text(h), text(t))),
        reference: cx.reference.map(|r| r.0),
        before: sent.before,
        after: sent.after,
        tools_same: sent.tools_same,
        tool_names: sent.tool_names,
        tools_sent: sent.tools_sent,
        curl: curl_text,
    }
    .render()
}

/// A run's samples' outcomes counted, in the taxonomy's order: `3 pass, 1 wrong_tool`.
fn outcome_counts(samples: &[SampleMark]) -> String {
    let mut counts: std::collections::BTreeMap<Outcome, usize> = Default::default();
    for m in samples {
        *counts.entry(m.outcome).or_default() += 1;
    }
    let outcomes: Vec<String> = counts
        .iter()
        .map(|(o, n)| format!("{n} {}", o.name()))
        .collect();
    outcomes.join(", ")
}

/// A run in a line, for its link card.
fn run_summary(cx: &RunContext) -> String {
    format!(
        "{} sample{} of {} on {}: {}",
        cx.samples.len(),
        if cx.samples.len() == 1 { "" } else { "s" },
        cx.model,
        cx.task.title,
        outcome_counts(cx.samples)
    )
}

/// The permalink page of a sample (`t/<model>/<task>/<run>/<NNN>.html`): a shared link's title
/// and card, and the way to the sample's section of the run's page. `site_url` is the site's
/// base address ([`crate::site::card::site_url`]), when known.
pub(crate) fn render_stub(
    key: &SampleKey,
    v: &Verdict,
    site_url: Option<&str>,
) -> Result<String, askama::Error> {
    let path = key.permalink();
    let card = crate::site::card::render(
        &crate::site::card::Card {
            // What a shared link is about: whose answer, to what, and what went wrong.
            title: &format!("{} · {} · {}", key.model, key.task, v.outcome.name()),
            description: &v.detail,
            path: &path,
            kind: "article",
        },
        site_url,
    );
    Stub {
        title: format!(
            "{} · {} · {}/{}: {}",
            key.model,
            key.task,
            key.run,
            key.sample,
            v.outcome.name()
        ),
        anchor: format!(
            "{}-{}",
            if v.outcome == Outcome::Pass {
                "s"
            } else {
                "fail"
            },
            key.sample
        ),
        sample: &key.sample,
        card,
    }
    .render()
}

/// The part of the schema a schema-stage failure violated, with the pointer it sits at: the
/// failing call's tool (or the structured output's) schema walked along the failing argument's
/// path through `properties`, `items` and local `$ref`s. `None` when the path leaves what
/// such a walk can follow (a combinator, a remote reference): the detail still names it.
fn violated_schema<'t>(task: &'t Task, v: &Verdict) -> Option<(String, &'t Value)> {
    if v.stage != Some(Stage::Schema) || v.outcome.label().is_none() {
        return None;
    }
    let path = v.fail_path.as_deref()?;
    let root = match v.fail_call {
        Some(i) => &task.tool(v.calls.get(i)?.name.as_deref()?)?.schema.raw,
        None => match &task.expect {
            Expect::StructuredOutput {
                schema: Some(schema),
                ..
            } => &schema.raw,
            _ => return None,
        },
    };
    let resolve = |mut s: &'t Value| {
        // A bounded number of local references: a cycle ends here, not in a loop.
        for _ in 0..8 {
            match s.get("$ref").and_then(Value::as_str) {
                Some(r) => s = root.pointer(r.strip_prefix('#')?)?,
                None => return Some(s),
            }
        }
        None
    };
    let mut at = resolve(root)?;
    // A missing argument's own schema: the path names the property that is absent.
    for seg in path.split('/').skip(1) {
        let key = seg.replace("~1", "/").replace("~0", "~");
        at = match at.get("properties").and_then(|p| p.get(&key)) {
            Some(p) => resolve(p)?,
            None if key.parse::<usize>().is_ok() => resolve(at.get("items")?)?,
            None => return None,
        };
    }
    Some((crate::json::show_pointer(path).to_string(), at))
}

/// Renders one sample's section of its run's page. Its failure anchor is `fail-<sample>`.
pub(crate) fn render(cx: &SampleContext) -> Result<String, askama::Error> {
    let v = cx.verdict;
    if let Some(why) = &cx.left_off {
        return left_off(cx, why);
    }
    let (calls, call_anchor) = calls_view(cx.task, v);
    let mut output_anchor = false;
    let output = v.output.as_ref().map(|o| {
        let mark = if v.fail_call.is_none() && v.outcome.label().is_some() {
            v.fail_path.as_deref()
        } else {
            None
        };
        output_anchor = mark.is_some();
        json_html(o, mark)
    });
    // The message content as the client sees it (prose, a call left in text, structured output
    // that did not parse), from the response as the scorer read it.
    let mut content_anchor = false;
    let content = cx
        .completion
        .and_then(|c| c.content.as_deref())
        .filter(|c| !c.trim().is_empty())
        // When the structured output parsed, it is shown above; the content would repeat it.
        .filter(|_| v.output.is_none())
        .map(|c| {
            // A structured output that could not be read is the failure itself.
            content_anchor = cx.task.is_structured_output()
                && v.output.is_none()
                && v.outcome.label().is_some()
                && !call_anchor;
            let shown = crate::json::clip(c, MAX_SHOWN);
            if content_anchor {
                format!("<mark id=\"fail\">{}</mark>", text(&shown))
            } else {
                text(&shown)
            }
        });
    // Every failed or errored sample has exactly one `#fail-<sample>` anchor, always the
    // section's head (label, context line, detail), so that a permalink lands with the sample's
    // own heading at the top of the screen and nothing of the sample before it above; the
    // failing argument is marked just below it.
    let fail_on_head = v.outcome != Outcome::Pass;
    let stages = stage_rows(cx.task, v);

    let same_request = cx.request_changes.is_empty();
    let sent = if same_request {
        Sent::default()
    } else {
        sent_view(cx.task, cx.transcript.request.as_deref())
    };
    let (response, response_note, laid_out) = response_view(
        cx.transcript,
        cx.verdict.outcome != Outcome::Pass,
        cx.shared_marks,
    );

    let section = Section {
        calls,
        output,
        content,
        same_request,
        request_changes: cx.request_changes.join(", "),
        before: sent.before,
        after: sent.after,
        tools_same: sent.tools_same,
        tool_names: sent.tool_names,
        tools_sent: sent.tools_sent,
        params: sent.params,
        response,
        response_note,
        laid_out,
        curl: if same_request {
            String::new()
        } else {
            text(&curl(cx.cell, cx.request_raw, cx.transcript.streamed))
        },
        ..Section::head(cx, stages, fail_on_head)
    };
    // The one mark the scorer's view placed loses its page-wide id: the head holds the
    // sample's anchor. Model text is escaped, so this markup can only be ours.
    let mut html = section.render()?;
    const MARK: &str = "<mark id=\"fail\">";
    if let Some(at) = (call_anchor || output_anchor || content_anchor)
        .then(|| html.find(MARK))
        .flatten()
    {
        html.replace_range(at..at + MARK.len(), "<mark>");
    }
    Ok(html)
}

#[cfg(test)]
mod tests {
    use super::{curl, escaped_cut, key_variable, text};
    use crate::runs::{CellInfo, TaskRef};
    use serde_json::{Value, json};
    use std::path::Path;
    use std::process::Command;

    #[test]
    fn escaped_text_is_cut_between_characters_and_never_inside_an_entity() {
        let html = text("ab<cd é <");
        assert_eq!(html, "ab&lt;cd é &lt;");
        for max in 0..=html.len() {
            let at = escaped_cut(&html, max);
            let kept = &html[..at];
            assert!(at <= max);
            assert_eq!(
                kept.matches('&').count(),
                kept.matches(';').count(),
                "{kept}"
            );
        }
        assert_eq!(escaped_cut(&html, 4), 2);
        assert_eq!(escaped_cut(&html, 8), 8);
    }

    #[test]
    fn the_curl_block_names_only_the_key_variable_collect_records() {
        assert_eq!(
            key_variable(&json!({"api_key_env": "VLLM_API_KEY"})).as_deref(),
            Some("VLLM_API_KEY")
        );
        // A key written into some other field of a hand-made cell.json is never echoed.
        assert_eq!(key_variable(&json!({"api_key": "sk_live_abc123"})), None);
        // Nor is a value that is not a variable name.
        assert_eq!(key_variable(&json!({"api_key_env": "sk-abc 123"})), None);
        assert_eq!(key_variable(&json!({"api_key_env": "1KEY"})), None);
    }

    fn cell(model: Value) -> CellInfo {
        CellInfo {
            format_version: 1,
            callcheck_version: "0".into(),
            model: model.into(),
            task: TaskRef {
                id: "t".into(),
                sha256: String::new(),
            },
            k: 1,
            run_id: "r".into(),
            server: Value::Null.into(),
            started: String::new(),
            ended: String::new(),
            kind: Default::default(),
            feedback: None,
        }
    }

    /// A `curl` that records what it was given: each argument on its own, so the test can
    /// check the body arrived whole (a broken continuation would leave it out, or run it as a
    /// command of its own).
    const STUB: &str = r#"#!/usr/bin/env bash
out="$STUB_OUT"
mkdir -p "$out"
while [ $# -gt 0 ]; do
  case "$1" in
    --data-binary) shift; printf '%s' "$1" > "$out/body" ;;
    -H) shift; printf '%s\n' "$1" >> "$out/headers" ;;
    -sS|-N) ;;
    *) printf '%s\n' "$1" >> "$out/urls" ;;
  esac
  shift
done
"#;

    fn run_in_bash(snippet: &str, dir: &Path) -> (Vec<u8>, String, String) {
        let check = Command::new("bash")
            .arg("-n")
            .arg("-c")
            .arg(snippet)
            .output()
            .expect("bash runs");
        assert!(
            check.status.success(),
            "bash -n rejects the snippet: {}\n{snippet}",
            String::from_utf8_lossy(&check.stderr)
        );
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let stub = bin.join("curl");
        std::fs::write(&stub, STUB).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = dir.join("out");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let run = Command::new("bash")
            .arg("-c")
            .arg(snippet)
            .env("PATH", path)
            .env("STUB_OUT", &out)
            .env("VLLM_API_KEY", "k-123")
            .env("BASE_URL", "http://example.test/v1")
            .output()
            .expect("bash runs");
        assert!(
            run.status.success(),
            "the snippet fails: {}\n{snippet}",
            String::from_utf8_lossy(&run.stderr)
        );
        let read = |n: &str| std::fs::read(out.join(n)).unwrap_or_default();
        (
            read("body"),
            String::from_utf8_lossy(&read("headers")).into_owned(),
            String::from_utf8_lossy(&read("urls")).into_owned(),
        )
    }

    #[test]
    fn copy_as_curl_is_valid_bash_and_sends_the_whole_body() {
        let hostile = "{\n  \"messages\": [{\"role\": \"user\", \"content\": \"it's $HOME `id` \\\\ \\\"q\\\" ! #x\\n\"}],\n  \"tools\": [] \n}\n";
        let plain = "{\"model\":\"m\",\"stream\":true}";
        let cases = [
            // key, base URL, streamed, body
            (
                json!({"api_key_env": "VLLM_API_KEY", "base_url": "http://127.0.0.1:8000/v1"}),
                false,
                hostile,
            ),
            (
                json!({"base_url": "http://127.0.0.1:8000/v1/"}),
                false,
                hostile,
            ),
            (
                json!({"base_urls": ["http://a.test/v1", "http://b.test/v1"]}),
                true,
                plain,
            ),
            (json!({}), true, plain),
            (
                json!({"api_key_env": "$VLLM_API_KEY", "base_url": "http://x.test/it's"}),
                true,
                "",
            ),
        ];
        for (i, (model, streamed, body)) in cases.into_iter().enumerate() {
            let tmp = tempfile::tempdir().unwrap();
            let snippet = curl(&cell(model.clone()), body.as_bytes(), streamed);
            let (got, headers, urls) = run_in_bash(&snippet, tmp.path());
            assert_eq!(
                got,
                body.as_bytes(),
                "case {i}: the body arrived altered\n{snippet}"
            );
            assert!(
                headers.contains("Content-Type: application/json"),
                "case {i}"
            );
            assert_eq!(
                headers.contains("Authorization: Bearer k-123"),
                model.get("api_key_env").is_some(),
                "case {i}: {headers}"
            );
            assert_eq!(urls.lines().count(), 1, "case {i}: {urls}");
            assert!(
                urls.trim_end().ends_with("/chat/completions"),
                "case {i}: {urls}"
            );
        }
    }

    #[test]
    fn a_body_no_shell_argument_can_carry_is_sent_from_its_file() {
        let snippet = curl(&cell(json!({})), b"{\"a\":\"\0\"}", false);
        assert!(snippet.contains("--data-binary @request.json"), "{snippet}");
        let check = Command::new("bash")
            .args(["-n", "-c", &snippet])
            .output()
            .unwrap();
        assert!(check.status.success());
    }

    #[test]
    fn the_stream_view_elides_repeats_and_keeps_every_byte() {
        let envelope = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":["#;
        let pieces = ["{\\\"a", "\\\":1", ",\\\"b\\\"", ":2}"];
        let mut datas = vec![format!(
            r#"{envelope}{{"index":0,"delta":{{"role":"assistant"}},"finish_reason":null}}]}}"#
        )];
        for p in pieces {
            datas.push(format!(
                r#"{envelope}{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":"{p}"}}}}]}},"logprobs":null,"finish_reason":null}}]}}"#
            ));
        }
        datas.push(format!(
            r#"{envelope}{{"index":0,"delta":{{}},"finish_reason":"tool_calls"}}]}}"#
        ));
        let body: String = datas
            .iter()
            .map(|d| format!("data: {d}\n\n"))
            .collect::<String>()
            + "data: [DONE]\n\n";
        let t = crate::transcript::Transcript {
            body: body.into_bytes(),
            streamed: true,
            ..Default::default()
        };
        let (view, _, _) = super::response_view(&t, true, None);
        let view = view
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        let legend = |mark: &str| {
            view.lines()
                .find_map(|l| l.strip_prefix(&format!("{mark} = ")))
                .unwrap_or("")
                .to_string()
        };
        let (head, tail) = (legend("‹"), legend("›"));
        assert!(!head.is_empty() && !tail.is_empty(), "{view}");
        let prefix = view
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("… = "))
            .unwrap()
            .to_string();
        let expanded: Vec<String> = view
            .lines()
            .skip_while(|l| !l.is_empty())
            .skip(1)
            .map(|l| {
                let d = l.trim_start().split_once("  ").unwrap().1;
                let d = d.replacen('‹', &head, 1).replacen('…', &prefix, 1);
                match d.strip_suffix('›') {
                    Some(x) => format!("{x}{tail}"),
                    None => d,
                }
            })
            .collect();
        let mut want = datas.clone();
        want.push("[DONE]".into());
        assert_eq!(expanded, want);
        // Most lines lost most of their bytes.
        assert!(
            view.len() < datas.iter().map(String::len).sum::<usize>() / 2,
            "{view}"
        );
    }
}
