//! The permalink page of one sample (`t/<model>/<task>/<run>/<NNN>.html`): what was sent, what
//! came back, the calls the scorer extracted, every stage's verdict, the failing argument marked
//! in place (`#fail`), and a "copy as curl" block with the key left to an environment variable.
//!
//! Kept lean (a shared stylesheet, no inline styles, tools shown by reference when they are the
//! task's own), because there is one of these per sample and the site must fit GitHub Pages.

use super::html::{cell_id, json_html, root, shell_quote, text, text_into};
use crate::report::SampleKey;
use crate::runs::{CellInfo, SampleFiles};
use crate::score::Verdict;
use crate::score::extract::Source;
use crate::score::wire::sse_events;
use crate::task::{Expect, Task};
use crate::taxonomy::{Outcome, Stage};
use crate::transcript::Meta;
use askama::Template;
use serde_json::Value;

/// The most response bytes shown on one page; beyond it the page says how much was left out.
/// A runaway generation can be megabytes, and the raw file is in runs/ anyway.
const MAX_SHOWN: usize = 256 * 1024;

/// Everything one sample page is made from.
pub struct SampleContext<'a> {
    pub key: &'a SampleKey,
    pub task: &'a Task,
    pub cell: &'a CellInfo,
    pub files: &'a SampleFiles,
    /// `request.json` parsed (None when it does not parse).
    pub request: Option<&'a Value>,
    pub meta: Option<&'a Meta>,
    pub verdict: &'a Verdict,
    pub task_changed: bool,
}

struct StageRow {
    name: &'static str,
    /// `pass`, `fail`, `error`, `not reached` or `n/a`.
    state: &'static str,
    /// CSS class for the state: `pass`, `fail`, `error`, `nr` (not reached), `na`.
    class: &'static str,
    detail: String,
    /// This row carries the `#fail` anchor (no argument to mark).
    anchor: bool,
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

#[derive(Template)]
#[template(path = "transcript.html")]
struct Page<'a> {
    title: String,
    root: String,
    key: &'a SampleKey,
    task_title: &'a str,
    outcome: &'static str,
    outcome_kind: &'static str,
    label: Option<&'static str>,
    stage: Option<&'static str>,
    detail: &'a str,
    cell_id: String,
    task_changed: bool,
    stages: Vec<StageRow>,
    calls: Vec<CallView>,
    output: Option<String>,
    /// Escaped HTML: the message content.
    content: Option<String>,
    notes: &'a [String],
    finish_reason: String,
    messages: Vec<MessageView>,
    tools_same: bool,
    tool_names: Vec<String>,
    tools_sent: Option<String>,
    params: Option<String>,
    meta_rows: Vec<(String, String)>,
    streamed: bool,
    response: String,
    response_note: Option<String>,
    curl: String,
}

fn stage_rows(task: &Task, v: &Verdict, anchor_on_stage: bool) -> Vec<StageRow> {
    let no_call_task = matches!(task.expect, Expect::NoCall);
    Stage::ALL
        .into_iter()
        .map(|s| {
            // Tasks that expect no call stop at extract: only transport and structure apply.
            let applies = !no_call_task || matches!(s, Stage::Transport | Stage::Structure);
            let (state, detail, anchor) = match (v.outcome, v.stage) {
                (_, Some(d)) if d == s => (
                    if v.outcome == Outcome::Error {
                        "error"
                    } else {
                        "fail"
                    },
                    v.detail.clone(),
                    anchor_on_stage,
                ),
                (_, Some(d)) if s > d => ("not reached", String::new(), false),
                _ if !applies => ("n/a", String::new(), false),
                (Outcome::Pass, _) if s == Stage::Semantic || no_call_task => {
                    ("pass", v.detail.clone(), false)
                }
                _ => ("pass", String::new(), false),
            };
            let class = match state {
                "not reached" => "nr",
                "n/a" => "na",
                other => other,
            };
            StageRow {
                name: s.as_str(),
                state,
                class,
                detail,
                anchor,
            }
        })
        .collect()
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
        Some(Value::String(s)) => text(s),
        _ => {
            // Tool results, multi-part content, assistant tool calls: show the message whole.
            let mut rest = m.clone();
            if let Some(o) = rest.as_object_mut() {
                o.remove("role");
            }
            json_html(&rest, None)
        }
    };
    MessageView { role, content }
}

/// The name of the environment variable holding the model's key, read from the (redacted)
/// model entry's `api_key_env` (the field collect writes): a variable's name, never a value.
/// Other fields are not guessed at: a hand-made `cell.json` with a key in some other field must
/// not put it on a published page.
pub fn key_variable(model: &Value) -> Option<String> {
    let v = model.get("api_key_env")?.as_str()?;
    let v = v.strip_prefix('$').unwrap_or(v);
    let ok = !v.is_empty()
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !v.starts_with(|c: char| c.is_ascii_digit());
    ok.then(|| v.to_string())
}

fn curl(cell: &CellInfo, request: &[u8]) -> String {
    // The first replica when the entry lists several.
    let base = cell
        .model
        .get("base_url")
        .and_then(Value::as_str)
        .or_else(|| cell.model.get("base_urls")?.get(0)?.as_str())
        .unwrap_or("$BASE_URL");
    let url = format!("{}/chat/completions", base.trim_end_matches('/'));
    let mut s = format!(
        "curl -sS {} \\\n  -H 'Content-Type: application/json' \\\n",
        shell_quote(&url)
    );
    match key_variable(&cell.model) {
        // Double quotes so the shell expands the variable; its name is [A-Za-z0-9_] only.
        Some(var) => s.push_str(&format!("  -H \"Authorization: Bearer ${var}\" \\\n")),
        None => {
            s.push_str("  # the model entry names no API key variable: no Authorization header\n")
        }
    }
    s.push_str("  --data-binary ");
    s.push_str(&shell_quote(String::from_utf8_lossy(request).trim_end()));
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
        rows.push(("time to first byte".into(), format!("{t:.0} ms")));
    }
    if let Some(t) = m.total_ms {
        rows.push(("total time".into(), format!("{t:.0} ms")));
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

fn response_view(files: &SampleFiles) -> (String, Option<String>) {
    let body = &files.response;
    let shown = &body[..body.len().min(MAX_SHOWN)];
    let cut_note = (body.len() > MAX_SHOWN).then(|| {
        format!(
            "{} of {} bytes shown; the rest is in the sample's response file",
            MAX_SHOWN,
            body.len()
        )
    });
    if files.streamed {
        let (events, partial) = sse_events(shown);
        // vLLM repeats the same envelope (id, object, created, model, `"choices":[`) in every
        // chunk; it is shown once and elided from each line, which keeps every byte of
        // information and halves the page.
        let prefix = common_prefix(
            events
                .iter()
                .map(|e| e.data.as_str())
                .filter(|d| d.starts_with('{')),
        );
        let mut s = String::with_capacity(shown.len());
        if !prefix.is_empty() {
            s.push_str("every JSON event's data begins with: ");
            text_into(&mut s, prefix);
            s.push_str("\n\n offset  data\n");
        }
        for e in &events {
            s.push_str(&format!("{:>7}  ", e.offset));
            match e.data.strip_prefix(prefix) {
                Some(rest) if !prefix.is_empty() => {
                    s.push('…');
                    text_into(&mut s, rest);
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
        (s, note)
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(v) if cut_note.is_none() => (json_html(&v, None), None),
            _ => (text(&String::from_utf8_lossy(shown)), cut_note),
        }
    }
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

/// Renders the page for one sample.
pub fn render(cx: &SampleContext) -> Result<String, askama::Error> {
    let v = cx.verdict;
    let key = cx.key;
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
    // that did not parse). Parsed again here: the verdict keeps only what it decided on.
    let completion = if cx.files.streamed {
        crate::score::wire::parse_stream(&cx.files.response)
    } else {
        crate::score::wire::parse_body(&cx.files.response)
    };
    let mut content_anchor = false;
    let content = completion
        .ok()
        .and_then(|c| c.content)
        .filter(|c| !c.trim().is_empty())
        // When the structured output parsed, it is shown above; the content would repeat it.
        .filter(|_| v.output.is_none())
        .map(|c| {
            // A structured output that could not be read is the failure itself.
            content_anchor = cx.task.is_structured_output()
                && v.output.is_none()
                && v.outcome.label().is_some()
                && !call_anchor;
            let shown = crate::json::clip(&c, MAX_SHOWN);
            if content_anchor {
                format!("<mark id=\"fail\">{}</mark>", text(&shown))
            } else {
                text(&shown)
            }
        });
    // Every page of a failed or errored sample has exactly one `#fail` anchor: on the failing
    // argument when there is one, else on the deciding stage.
    let anchor_on_stage =
        v.outcome != Outcome::Pass && !call_anchor && !output_anchor && !content_anchor;
    let stages = stage_rows(cx.task, v, anchor_on_stage);

    let messages = cx
        .request
        .and_then(|r| r.get("messages"))
        .and_then(Value::as_array)
        .map(|ms| ms.iter().map(message_view).collect())
        .unwrap_or_default();
    let tools_sent = cx.request.and_then(|r| r.get("tools"));
    let tools_same = match tools_sent {
        Some(Value::Array(t)) => *t == cx.task.tools_json,
        None => cx.task.tools_json.is_empty(),
        Some(_) => false,
    };
    let tool_names = cx.task.tools.iter().map(|t| t.name.clone()).collect();
    let params = cx.request.and_then(|r| r.as_object()).map(|o| {
        let mut rest = o.clone();
        rest.remove("messages");
        rest.remove("tools");
        json_html(&Value::Object(rest), None)
    });
    let (response, response_note) = response_view(cx.files);

    let page = Page {
        title: format!("{} · {} · {}/{}", key.model, key.task, key.run, key.sample),
        root: root(4),
        key,
        task_title: &cx.task.title,
        outcome: v.outcome.name(),
        outcome_kind: v.outcome.kind(),
        label: v.outcome.label().map(|l| l.as_str()),
        stage: v.stage.map(Stage::as_str),
        detail: &v.detail,
        cell_id: cell_id(&key.model, &key.task),
        task_changed: cx.task_changed,
        stages,
        calls,
        output,
        content,
        notes: &v.notes,
        finish_reason: v
            .finish_reason
            .clone()
            .unwrap_or_else(|| "absent".to_string()),
        messages,
        tools_same,
        tool_names,
        tools_sent: match tools_sent {
            Some(t) if !tools_same => Some(json_html(t, None)),
            _ => None,
        },
        params,
        meta_rows: meta_rows(cx.meta),
        streamed: cx.files.streamed,
        response,
        response_note,
        curl: text(&curl(cx.cell, &cx.files.request)),
    };
    page.render()
}

#[cfg(test)]
mod tests {
    use super::key_variable;
    use serde_json::json;

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
}
