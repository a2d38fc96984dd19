//! Preflight: a few cheap probes before a model row's cells, to catch a server set up so that
//! every sample would fail for the wrong reason — a model id it does not serve, tools its chat
//! template drops from the prompt, a `tool_choice` or streaming it refuses.
//!
//! The checks, in the order they are recorded under `server.preflight` in every `cell.json` of
//! the row (each `{"ok": bool, "status": HTTP status or null, "detail": text}`):
//! - `models`: `GET /v1/models` answers with a model list;
//! - `model_id`: the row's served model id is in that list (missing: the row is not collected,
//!   since every sample would be a 404, or, on servers that answer any name, another model);
//! - `tools_in_prompt`: the same request with and without the tool differ in
//!   `usage.prompt_tokens` (equal: the tools never reach the model, so every cell would be
//!   `no_call` for the wrong reason — the loudest warning collect gives);
//! - `tool_choice_auto`, `tool_choice_required`, `tool_choice_named`, `stream`: the request is
//!   accepted (a 2xx with a complete response) or refused (status and the error's message),
//!   with what the answer held, since acceptance is not enforcement (llama-server accepts the
//!   named form and ignores it).
//!
//! Every read is bounded: at most `client::PREFLIGHT_MAX_BODY` bytes, within [`PROBE_TIMEOUT`]
//! (or the row's `timeout_secs` when shorter), retried at most [`PROBE_MAX_RETRIES`] times and
//! never more than `--retries`. The model list is kept as a bounded [`ModelList`] summary, not
//! as the body the server sent.
//!
//! Probes ask for [`PROBE_MAX_TOKENS`] tokens with one tiny fixed tool, with the row's system
//! prompt, sampling parameters and extra fields, so they see the server the way samples will.
//! Only a missing model id stops a row (an unreachable endpoint already has); every other
//! failed check is a warning on stderr, and the results travel with the data so a reader of
//! the site sees them next to the matrix.

use crate::collect::client::{Endpoint, Exchange, RetryPolicy};
use crate::collect::config::ModelEntry;
use crate::score::wire::{self, Completion};
use crate::server::listed_model_ids;
use serde_json::{Map, Value, json};
use std::time::{Duration, Instant};

/// The completion budget of every probe: enough to see a call start, cheap on a CPU.
pub const PROBE_MAX_TOKENS: u64 = 16;

/// The probes' tool: small, so the prompt stays short, and obvious, so a model calls it.
pub const PROBE_TOOL: &str = "get_weather";

/// The probes' question.
pub const PROBE_QUESTION: &str = "What is the weather in Paris?";

/// Probes are retried like samples (before the first body byte only), but less patiently:
/// at most this many times, and never more than `--retries`.
pub const PROBE_MAX_RETRIES: u32 = 2;

/// Each preflight request's own timeout (the row's `timeout_secs` when that is shorter): a
/// 16-token answer or a model list takes seconds, and a stalled server must not cost the row's
/// full sample timeout per probe before the first sample. Not shorter: on 2 busy CPU cores,
/// llama-server with two slots took up to 57 s to answer a probe queued behind other rows'.
/// Once a probe has timed out, the row's remaining probes are not sent (see [`run`]).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// The most model ids a [`ModelList`] keeps (plus the row's own id, wherever it was listed).
pub const MAX_IDS: usize = 64;

/// The longest model id kept, in characters.
const MAX_ID_CHARS: usize = 256;

/// The retry policy of the probes under collect's own.
pub fn probe_retry(collect: &RetryPolicy) -> RetryPolicy {
    RetryPolicy {
        retries: collect.retries.min(PROBE_MAX_RETRIES),
        base_ms: collect.base_ms.min(250),
        cap_ms: 2_000,
    }
}

/// What one endpoint's `GET /models` listed, bounded: what `cell.json` keeps instead of the
/// body (`server.endpoints[].models`), so a server listing millions of models costs a few KB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelList {
    /// Up to [`MAX_IDS`] ids in the order listed, plus the row's served id if it was listed
    /// anywhere (so the model_id check and a reader agree).
    pub ids: Vec<String>,
    /// How many ids were read (a lower bound when `truncated`).
    pub count: usize,
    /// The body was cut at the preflight's cap, its timeout or a broken connection: ids past
    /// the cut were never read.
    pub truncated: bool,
    /// The start of the body when it held no model list (an error page, say).
    pub excerpt: Option<String>,
}

impl ModelList {
    /// Reads the ids from a (possibly cut) `/models` body. A complete body is parsed as JSON;
    /// a cut one is scanned for `"id": "…"` pairs, since the ids before the cut still count.
    pub fn read(body: &[u8], cut: bool, served: &str) -> ModelList {
        let parsed = if cut {
            None
        } else {
            serde_json::from_slice::<Value>(body).ok()
        };
        let all: Option<Vec<String>> = match &parsed {
            Some(v) => v.get("data").and_then(Value::as_array).map(|data| {
                data.iter()
                    .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_string))
                    .collect()
            }),
            None if cut && body.windows(6).any(|w| w == b"\"data\"") => {
                Some(scan_ids(&String::from_utf8_lossy(body)))
            }
            None => None,
        };
        match all {
            Some(all) => {
                let count = all.len();
                let mut ids: Vec<String> = all
                    .iter()
                    .take(MAX_IDS)
                    .map(|i| crate::json::clip(i, MAX_ID_CHARS))
                    .collect();
                if !ids.iter().any(|i| i == served) && all.iter().any(|i| i == served) {
                    ids.push(served.to_string());
                }
                ModelList {
                    ids,
                    count,
                    truncated: cut,
                    excerpt: None,
                }
            }
            None => ModelList {
                ids: Vec::new(),
                count: 0,
                truncated: cut,
                excerpt: Some(excerpt(body)),
            },
        }
    }

    /// A few words for the progress line.
    pub fn describe(&self) -> String {
        match (&self.excerpt, self.truncated) {
            (Some(_), true) => "no model list (body cut at the preflight's cap)".into(),
            (Some(_), false) => "no model list".into(),
            (None, true) => format!(
                "at least {} model ids (body cut at the preflight's cap)",
                self.count
            ),
            (None, false) => format!("{} model ids", self.count),
        }
    }

    /// Records the summary in one endpoint's object of `server.endpoints[]`.
    pub fn insert_into(&self, endpoint: &mut Map<String, Value>) {
        let v = match &self.excerpt {
            None => json!({"ids": self.ids, "count": self.count, "truncated": self.truncated}),
            Some(e) => json!({"excerpt": e, "truncated": self.truncated}),
        };
        endpoint.insert("models".into(), v);
    }
}

/// The `"id": "…"` values in a cut JSON text, in order (JSON string escapes decoded).
fn scan_ids(text: &str) -> Vec<String> {
    static ID: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r#""id"\s*:\s*("(?:[^"\\]|\\.)*")"#).ok());
    let Some(re) = ID.as_ref() else {
        return Vec::new();
    };
    re.captures_iter(text)
        .filter_map(|c| c.get(1))
        .filter_map(|m| serde_json::from_str::<String>(m.as_str()).ok())
        .collect()
}

/// How many characters of an error body a check keeps.
const EXCERPT: usize = 160;

/// The result of one check, as recorded in `cell.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The check passed (for a probe: the request was accepted and answered completely).
    pub ok: bool,
    /// The HTTP status the check rests on, when one arrived.
    pub status: Option<u16>,
    /// What was observed, for people.
    pub detail: String,
}

impl Check {
    fn new(ok: bool, status: Option<u16>, detail: impl Into<String>) -> Check {
        Check {
            ok,
            status,
            detail: detail.into(),
        }
    }

    fn to_json(&self) -> Value {
        json!({"ok": self.ok, "status": self.status, "detail": self.detail})
    }
}

/// Every check of one row, in order, and whether the row must be skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preflight {
    pub checks: Vec<(&'static str, Check)>,
    /// Why the row must not be collected (its model id is not served), when it must not.
    pub stop: Option<String>,
}

impl Preflight {
    /// The object written under `server.preflight`: one entry per check, in check order.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        for (name, c) in &self.checks {
            m.insert((*name).to_string(), c.to_json());
        }
        Value::Object(m)
    }

    /// One line per failed check, for stderr and the summary.
    pub fn warnings(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|(_, c)| !c.ok)
            .map(|(name, c)| format!("preflight {name}: {}", c.detail))
            .collect()
    }

    /// The result of one check by name.
    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|(n, _)| *n == name).map(|(_, c)| c)
    }
}

/// A row's preflight in one line (collect without `--verbose`): what `GET /models` said per
/// replica, then how many checks passed and which did not (each has its own WARNING line).
pub fn one_line(gets: &[String], p: Option<&Preflight>, secs: f64) -> String {
    let mut parts: Vec<String> = gets.to_vec();
    if let Some(p) = p {
        let failed: Vec<&str> = p
            .checks
            .iter()
            .filter(|(_, c)| !c.ok)
            .map(|(n, _)| *n)
            .collect();
        let n = p.checks.len();
        let mut s = format!("{} of {n} checks passed", n - failed.len());
        if !failed.is_empty() {
            s.push_str(&format!(
                " ({} did not: see the WARNING lines)",
                failed.join(", ")
            ));
        }
        s.push_str(&format!(" in {secs:.1} s"));
        parts.push(s);
    }
    if parts.is_empty() {
        parts.push(format!("done in {secs:.1} s"));
    }
    parts.join("; ")
}

/// The probes' tool definition.
pub fn probe_tool() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": PROBE_TOOL,
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"]
            }
        }
    })
}

/// The body of one probe, built as `request::chat_request` builds a sample's (the row's system
/// prompt, parameters and extra fields), with the completion budget cut to
/// [`PROBE_MAX_TOKENS`] under whichever key the row uses.
pub fn probe_body(
    entry: &ModelEntry,
    with_tool: bool,
    tool_choice: Option<Value>,
    stream: bool,
) -> Value {
    let asking = entry.asking();
    let mut body = Map::new();
    body.insert("model".into(), Value::String(asking.model.clone()));
    let mut messages = Vec::new();
    if let Some(system) = &asking.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": PROBE_QUESTION}));
    body.insert("messages".into(), Value::Array(messages));
    if with_tool {
        body.insert("tools".into(), json!([probe_tool()]));
    }
    if let Some(tc) = tool_choice {
        body.insert("tool_choice".into(), tc);
    }
    for (k, v) in asking.params.iter().chain(asking.extra.iter()) {
        body.insert(k.clone(), v.clone());
    }
    let budget_key = if body.contains_key("max_completion_tokens") {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body.insert(budget_key.into(), json!(PROBE_MAX_TOKENS));
    body.insert("stream".into(), Value::Bool(stream));
    if stream && !body.contains_key("stream_options") {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
}

/// The `models` and `model_id` checks from what `Endpoint::server_info` gathered, and the
/// reason to stop when a model list that could be read does not hold the served id.
pub fn models_checks(server: &Value, model_id: &str) -> (Check, Check, Option<String>) {
    let read = ModelLists::read(server, model_id);
    let (id_check, stop) = read.model_id_check(model_id);
    (read.models_check(), id_check, stop)
}

/// What the replicas' `GET /models` answers said of the served model id.
struct ModelLists {
    /// Replicas whose model list was read.
    lists: usize,
    /// Replicas whose whole list was read and lacks the id, with the ids they list.
    missing_from: Vec<(String, Vec<String>)>,
    /// Replicas whose list could not be read, each with why.
    unreadable: Vec<String>,
    /// Replicas whose list was cut before the id showed.
    cut_lists: Vec<String>,
    /// The first status a replica answered with.
    status: Option<u16>,
}

impl ModelLists {
    fn read(server: &Value, model_id: &str) -> ModelLists {
        let replicas = server
            .get("endpoints")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut read = ModelLists {
            lists: 0,
            missing_from: Vec::new(),
            unreadable: Vec::new(),
            cut_lists: Vec::new(),
            status: None,
        };
        for r in &replicas {
            let url = r.get("base_url").and_then(Value::as_str).unwrap_or("?");
            let s = r
                .get("models_status")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok());
            read.status = read.status.or(s);
            if let Some(e) = r.get("models_error").and_then(Value::as_str) {
                read.unreadable.push(format!("{url}: {e}"));
                continue;
            }
            let ids = listed_model_ids(r);
            let cut = r
                .pointer("/models/truncated")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            match (s, ids) {
                (Some(200), Some(ids)) => {
                    read.lists += 1;
                    if !ids.iter().any(|i| i == model_id) {
                        if cut {
                            // Not among the ids before the cut: it may be after it.
                            read.cut_lists.push(url.to_string());
                        } else {
                            read.missing_from.push((url.to_string(), ids));
                        }
                    }
                }
                (s, _) => read.unreadable.push(format!(
                    "{url}: HTTP {} without a model list ({})",
                    s.map_or("?".to_string(), |s| s.to_string()),
                    match r.pointer("/models/excerpt").and_then(Value::as_str) {
                        Some(e) => e.to_string(),
                        None => {
                            crate::json::preview(r.get("models").unwrap_or(&Value::Null), EXCERPT)
                        }
                    }
                )),
            }
        }
        read
    }

    /// The `models` check: every replica answered with a model list.
    fn models_check(&self) -> Check {
        let (lists, status) = (self.lists, self.status);
        if self.unreadable.is_empty() && lists > 0 {
            Check::new(
                true,
                status,
                format!(
                    "GET /models answered with a model list ({lists} endpoint{})",
                    if lists == 1 { "" } else { "s" }
                ),
            )
        } else if self.unreadable.is_empty() {
            Check::new(false, status, "no endpoint was asked")
        } else {
            Check::new(false, status, self.unreadable.join("; "))
        }
    }

    /// The `model_id` check, and the reason to stop when a whole list lacks the id.
    fn model_id_check(&self, model_id: &str) -> (Check, Option<String>) {
        let status = self.status;
        if let Some((url, ids)) = self.missing_from.first() {
            let detail = format!(
                "the served model id {model_id:?} is not among the models {url} serves ({})",
                if ids.is_empty() {
                    "none listed".to_string()
                } else {
                    ids.join(", ")
                }
            );
            (Check::new(false, status, detail.clone()), Some(detail))
        } else if let Some(url) = self.cut_lists.first() {
            (
                Check::new(
                    false,
                    status,
                    format!(
                        "cannot tell whether {model_id:?} is served: {url}/models listed more than \
                         the preflight reads ({} bytes) and the ids before the cut do not include it",
                        crate::collect::client::PREFLIGHT_MAX_BODY
                    ),
                ),
                None,
            )
        } else if self.lists > 0 {
            (
                Check::new(true, status, format!("{model_id:?} is listed by /models")),
                None,
            )
        } else {
            (
                Check::new(
                    false,
                    status,
                    format!("cannot tell whether {model_id:?} is served: no model list was read"),
                ),
                None,
            )
        }
    }
}

/// The message of an error body, or the start of the body itself.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let msg = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("detail"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let s = msg.unwrap_or_else(|| text.trim().to_string());
    if s.is_empty() {
        "(empty body)".into()
    } else {
        crate::json::clip(&s, EXCERPT)
    }
}

/// A probe's exchange read as a completion: `Err` is the failed check.
fn answered(ex: &Exchange) -> Result<Completion, Check> {
    let status = ex.meta.status;
    match status {
        None => {
            return Err(Check::new(
                false,
                None,
                format!(
                    "no answer: {}",
                    ex.meta.error.as_deref().unwrap_or("no response")
                ),
            ));
        }
        Some(s) if !(200..300).contains(&s) => {
            return Err(Check::new(
                false,
                status,
                format!("refused: HTTP {s}: {}", excerpt(&ex.response)),
            ));
        }
        Some(_) => {}
    }
    let parsed = if ex.sse {
        wire::parse_stream(&ex.response)
    } else {
        wire::parse_body(&ex.response)
    };
    match (parsed, &ex.meta.error) {
        (Ok(c), None) => Ok(c),
        (Err(wire::TransportFailure(why)), _) => Err(Check::new(
            false,
            status,
            format!(
                "HTTP {} but no complete response: {why}",
                status.unwrap_or(0)
            ),
        )),
        (Ok(_), Some(e)) => Err(Check::new(
            false,
            status,
            format!("HTTP {} but the body failed: {e}", status.unwrap_or(0)),
        )),
    }
}

/// What an accepted answer held, in a few words.
fn answer_summary(c: &Completion) -> String {
    let finish = c.finish_reason.as_deref().unwrap_or("none");
    if c.tool_calls.is_empty() && finish == "length" {
        format!("no call in {PROBE_MAX_TOKENS} tokens (finish_reason length)")
    } else if c.tool_calls.is_empty() {
        format!("no call (finish_reason {finish})")
    } else {
        let names: Vec<&str> = c
            .tool_calls
            .iter()
            .map(|t| t.name.as_deref().unwrap_or("(no name)"))
            .collect();
        format!("called {} (finish_reason {finish})", names.join(", "))
    }
}

/// A `tool_choice` or streaming probe: accepted or refused, and what came back.
/// `forced` is the tool the request forces (required, named), when it forces one.
pub fn acceptance_check(ex: &Exchange, forced: Option<&str>) -> Check {
    let c = match answered(ex) {
        Ok(c) => c,
        Err(check) => return check,
    };
    let status = ex.meta.status;
    let code = status.unwrap_or(0);
    let summary = answer_summary(&c);
    let detail = match forced {
        Some(tool) if !c.tool_calls.iter().any(|t| t.name.as_deref() == Some(tool)) => {
            format!("accepted (HTTP {code}) but not enforced from the first token: {summary}")
        }
        Some(_) => format!("accepted (HTTP {code}) and enforced: {summary}"),
        None if ex.sse => format!("accepted (HTTP {code}, an SSE stream): {summary}"),
        None => format!("accepted (HTTP {code}): {summary}"),
    };
    Check::new(true, status, detail)
}

fn prompt_tokens(ex: &Exchange) -> Option<u64> {
    serde_json::from_slice::<Value>(&ex.response)
        .ok()?
        .pointer("/usage/prompt_tokens")?
        .as_u64()
}

/// The tools comparison: the same request with and without the tool.
pub fn tools_check(with: &Exchange, without: &Exchange) -> Check {
    let status = with.meta.status;
    if let Err(c) = answered(with) {
        return Check::new(
            false,
            c.status,
            format!(
                "cannot tell: the request with the tool failed: {}",
                c.detail
            ),
        );
    }
    if let Err(c) = answered(without) {
        return Check::new(
            false,
            c.status,
            format!(
                "cannot tell: the request without the tool failed: {}",
                c.detail
            ),
        );
    }
    match (prompt_tokens(with), prompt_tokens(without)) {
        (Some(a), Some(b)) if a > b => Check::new(
            true,
            status,
            format!("prompt_tokens {a} with the tool, {b} without: the tools reach the prompt"),
        ),
        (Some(a), Some(b)) if a == b => Check::new(
            false,
            status,
            format!(
                "prompt_tokens {a} with the tool and {b} without: the server drops the tools \
                 from the prompt (a chat template without tool support?), so every cell of this \
                 row would be no_call for the wrong reason"
            ),
        ),
        (Some(a), Some(b)) => Check::new(
            false,
            status,
            format!(
                "prompt_tokens {a} with the tool but {b} without: fewer with the tool, which no template explains"
            ),
        ),
        _ => Check::new(
            false,
            status,
            "cannot tell: no usage.prompt_tokens in the answers, so whether the tools reach \
             the prompt is unknown",
        ),
    }
}

fn encode(v: &Value) -> bytes::Bytes {
    bytes::Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

/// Runs every check for one row. `server` is what `Endpoint::server_info` returned for it;
/// `retry` is collect's policy (the probes take at most [`PROBE_MAX_RETRIES`] of it);
/// `progress` hears one line per probe: what it asked and how long it took.
pub async fn run(
    endpoint: &Endpoint,
    entry: &ModelEntry,
    server: &Value,
    retry: &RetryPolicy,
    progress: &(dyn Fn(String) + Sync),
) -> Preflight {
    let (models, model_id, stop) = models_checks(server, &entry.model);
    let mut p = Preflight {
        checks: vec![("models", models), ("model_id", model_id)],
        stop,
    };
    if p.stop.is_some() {
        return p;
    }
    let prober = Prober {
        endpoint,
        policy: probe_retry(retry),
        timeout: endpoint.probe_timeout(PROBE_TIMEOUT),
        progress,
    };
    // Sequential on purpose: the probes are few, and a small server (llama-server with two
    // slots on a CPU) should not see a burst before the collection proper. A probe that got no
    // answer in time means a stalled server: the rest are not sent, so a stalled row costs one
    // probe's timeouts, not seven.
    let with = prober
        .send("tools", probe_body(entry, true, None, false), false)
        .await;
    let mut is_stalled = timed_out(&with);
    let without = if is_stalled {
        None
    } else {
        Some(
            prober
                .send("no-tools", probe_body(entry, false, None, false), false)
                .await,
        )
    };
    is_stalled |= without.as_ref().is_some_and(timed_out);
    // With the first request failed, tools_check reports that failure and never reads the
    // second, so the first stands in for the one not sent.
    p.checks.push((
        "tools_in_prompt",
        tools_check(&with, without.as_ref().unwrap_or(&with)),
    ));
    let named = json!({"type": "function", "function": {"name": PROBE_TOOL}});
    for (name, tc, forced, stream) in [
        ("tool_choice_auto", json!("auto"), None, false),
        (
            "tool_choice_required",
            json!("required"),
            Some(PROBE_TOOL),
            false,
        ),
        ("tool_choice_named", named, Some(PROBE_TOOL), false),
        ("stream", json!("auto"), None, true),
    ] {
        if is_stalled {
            p.checks.push((name, prober.stalled(name)));
            continue;
        }
        let ex = prober
            .send(name, probe_body(entry, true, Some(tc), stream), stream)
            .await;
        is_stalled |= timed_out(&ex);
        p.checks.push((name, acceptance_check(&ex, forced)));
    }
    p
}

/// How one row's probes are sent: its endpoint, the probes' own retries and timeout, and who
/// hears a line per probe.
struct Prober<'a> {
    endpoint: &'a Endpoint,
    policy: RetryPolicy,
    timeout: Duration,
    progress: &'a (dyn Fn(String) + Sync),
}

impl Prober<'_> {
    /// Sends the probe `name`, and says what came back and how long it took.
    async fn send(&self, name: &'static str, body: Value, stream: bool) -> Exchange {
        let t0 = Instant::now();
        let ex = self
            .endpoint
            .probe(&encode(&body), name, stream, &self.policy, self.timeout)
            .await;
        let how = match (ex.meta.status, &ex.meta.error) {
            (_, Some(e)) => e.clone(),
            (Some(s), None) => format!("HTTP {s}"),
            (None, None) => "no answer".into(),
        };
        (self.progress)(format!(
            "probe {name}: {how} in {:.1} s",
            t0.elapsed().as_secs_f64()
        ));
        ex
    }

    /// The check of a probe not sent because an earlier one got no answer in time.
    fn stalled(&self, name: &str) -> Check {
        Check::new(
            false,
            None,
            format!(
                "not probed: an earlier probe got no answer within {} s, so the server looks stalled ({name} skipped)",
                self.timeout.as_secs()
            ),
        )
    }
}

/// A probe that got no response head within its timeout.
fn timed_out(ex: &Exchange) -> bool {
    ex.meta.status.is_none()
        && ex
            .meta
            .error
            .as_deref()
            .is_some_and(|e| e.contains("timed out"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::listed_models_text;
    use crate::transcript::Meta;

    fn entry(extra_toml: &str) -> ModelEntry {
        let text = format!(
            "[[model]]\nname = \"r\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n{extra_toml}"
        );
        crate::collect::config::parse(std::path::Path::new("t.toml"), &text)
            .unwrap()
            .models
            .remove(0)
    }

    fn ex(status: Option<u16>, body: &str, sse: bool) -> Exchange {
        Exchange {
            response: body.as_bytes().to_vec(),
            sse,
            meta: Meta {
                status,
                ..Meta::default()
            },
        }
    }

    fn completion(prompt_tokens: u64, calls: &str) -> String {
        format!(
            r#"{{"choices":[{{"index":0,"message":{{"role":"assistant","content":"x"{calls}}},"finish_reason":"length"}}],"usage":{{"prompt_tokens":{prompt_tokens},"completion_tokens":16}}}}"#
        )
    }

    #[test]
    fn probe_bodies_keep_the_row_but_cut_the_budget() {
        let e = entry(
            "system = \"be careful\"\nstream = true\n[model.params]\nmax_tokens = 256\ntemperature = 0.7\n[model.extra]\nchat_template_kwargs = {enable_thinking = false}\n",
        );
        let b = probe_body(&e, true, Some(json!("required")), false);
        assert_eq!(b["max_tokens"], json!(16));
        assert_eq!(b["temperature"], json!(0.7));
        assert_eq!(b["messages"][0]["content"], json!("be careful"));
        assert_eq!(b["messages"][1]["content"], json!(PROBE_QUESTION));
        assert_eq!(b["tools"][0]["function"]["name"], json!(PROBE_TOOL));
        assert_eq!(b["tool_choice"], json!("required"));
        assert_eq!(
            b["stream"],
            json!(false),
            "the probe's stream, not the row's"
        );
        assert_eq!(b["chat_template_kwargs"]["enable_thinking"], json!(false));
        let b = probe_body(&e, false, None, true);
        assert!(b.get("tools").is_none() && b.get("tool_choice").is_none());
        assert_eq!(b["stream_options"]["include_usage"], json!(true));
        let e = entry("[model.params]\nmax_completion_tokens = 300\n");
        let b = probe_body(&e, true, None, false);
        assert_eq!(b["max_completion_tokens"], json!(16));
        assert!(b.get("max_tokens").is_none());
    }

    #[test]
    fn equal_prompt_tokens_mean_the_tools_were_dropped() {
        let with = ex(Some(200), &completion(228, ""), false);
        let without = ex(Some(200), &completion(37, ""), false);
        let c = tools_check(&with, &without);
        assert!(c.ok, "{c:?}");
        assert!(
            c.detail.contains("228") && c.detail.contains("37"),
            "{}",
            c.detail
        );
        let same = ex(Some(200), &completion(37, ""), false);
        let c = tools_check(&same, &without);
        assert!(!c.ok);
        assert!(c.detail.contains("drops the tools"), "{}", c.detail);
        let no_usage = ex(
            Some(200),
            r#"{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}"#,
            false,
        );
        let c = tools_check(&no_usage, &without);
        assert!(!c.ok && c.detail.starts_with("cannot tell"), "{}", c.detail);
        let refused = ex(
            Some(400),
            r#"{"error":{"message":"tools are not supported"}}"#,
            false,
        );
        let c = tools_check(&refused, &without);
        assert!(
            !c.ok && c.detail.contains("tools are not supported"),
            "{}",
            c.detail
        );
        assert_eq!(c.status, Some(400));
    }

    #[test]
    fn acceptance_records_refusals_and_what_came_back() {
        let refused = ex(
            Some(400),
            r#"{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","code":400}"#,
            false,
        );
        let c = acceptance_check(&refused, None);
        assert!(!c.ok);
        assert_eq!(c.status, Some(400));
        assert!(
            c.detail
                .starts_with("refused: HTTP 400: \"auto\" tool choice requires"),
            "{}",
            c.detail
        );

        let call = r#","tool_calls":[{"id":"a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]"#;
        let c = acceptance_check(
            &ex(Some(200), &completion(10, call), false),
            Some(PROBE_TOOL),
        );
        assert!(
            c.ok && c.detail.contains("enforced: called get_weather"),
            "{}",
            c.detail
        );
        let c = acceptance_check(&ex(Some(200), &completion(10, ""), false), Some(PROBE_TOOL));
        assert!(c.ok && c.detail.contains("not enforced"), "{}", c.detail);

        // llama-cpp-python's auto + stream: HTTP 200 and nothing.
        let c = acceptance_check(&ex(Some(200), "", true), None);
        assert!(
            !c.ok && c.detail.contains("no complete response"),
            "{}",
            c.detail
        );
        let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
        let c = acceptance_check(&ex(Some(200), sse, true), None);
        assert!(c.ok && c.detail.contains("SSE stream"), "{}", c.detail);

        let mut gone = ex(None, "", false);
        gone.meta.error = Some("no response after 3 attempts: cannot connect".into());
        let c = acceptance_check(&gone, None);
        assert!(!c.ok && c.status.is_none() && c.detail.contains("cannot connect"));
    }

    #[test]
    fn a_model_list_without_the_id_stops_the_row() {
        let server = json!({"endpoints": [{"base_url": "http://h/v1", "models_status": 200,
            "models": {"object": "list", "data": [{"id": "qwen"}, {"id": "llama"}]}}]});
        let (m, id, stop) = models_checks(&server, "qwen");
        assert!(m.ok && id.ok && stop.is_none(), "{m:?} {id:?}");
        let (m, id, stop) = models_checks(&server, "mistral");
        assert!(m.ok && !id.ok);
        let stop = stop.unwrap();
        assert!(
            stop.contains("\"mistral\"") && stop.contains("qwen, llama"),
            "{stop}"
        );
        // A server without /models: a warning, not a stop.
        let server = json!({"endpoints": [{"base_url": "http://h/v1", "models_status": 404,
            "models": {"detail": "Not Found"}}]});
        let (m, id, stop) = models_checks(&server, "qwen");
        assert!(!m.ok && !id.ok && stop.is_none());
        assert_eq!(m.status, Some(404));
        assert!(m.detail.contains("HTTP 404"), "{}", m.detail);
    }

    #[test]
    fn a_model_list_is_kept_bounded_in_both_shapes() {
        let mut body = String::from(r#"{"object":"list","data":["#);
        for i in 0..100 {
            body.push_str(&format!(r#"{{"id":"m{i}"}},"#));
        }
        body.push_str(r#"{"id":"served"}]}"#);
        // Whole: every id counted, MAX_IDS kept, the served id kept wherever it was listed.
        let l = ModelList::read(body.as_bytes(), false, "served");
        assert_eq!(l.count, 101);
        assert!(!l.truncated);
        assert_eq!(l.ids.len(), MAX_IDS + 1);
        assert_eq!(l.ids.last().map(String::as_str), Some("served"));
        // Cut mid-way: the ids before the cut, escapes decoded, marked truncated.
        let cut = br#"{"object":"list","data":[{"id":"a\"b"},{"id" : "c"},{"id":"d"#;
        let l = ModelList::read(cut, true, "served");
        assert_eq!(l.ids, vec!["a\"b".to_string(), "c".to_string()]);
        assert!(l.truncated && l.count == 2);
        // No list at all: an excerpt, no ids.
        let l = ModelList::read(b"<html>Not Found</html>", false, "served");
        assert_eq!(l.excerpt.as_deref(), Some("<html>Not Found</html>"));
        let mut m = Map::new();
        ModelList::read(body.as_bytes(), false, "served").insert_into(&mut m);
        let ep = Value::Object(m);
        assert_eq!(listed_model_ids(&ep).map(|v| v.len()), Some(MAX_IDS + 1));
        let text = listed_models_text(&ep).unwrap();
        assert!(text.ends_with("served (+36 more)"), "{text}");
        // The whole body older collections stored reads the same way.
        let old = json!({"models": {"object": "list", "data": [{"id": "x"}, {"id": "y"}]}});
        assert_eq!(listed_models_text(&old).as_deref(), Some("x, y"));
    }

    #[test]
    fn probes_never_retry_more_than_collect_does() {
        let p = |r| {
            probe_retry(&RetryPolicy {
                retries: r,
                base_ms: 500,
                cap_ms: 30_000,
            })
            .retries
        };
        assert_eq!((p(0), p(1), p(4)), (0, 1, PROBE_MAX_RETRIES));
    }

    #[test]
    fn the_record_has_one_entry_per_check_in_order() {
        let p = Preflight {
            checks: vec![
                ("models", Check::new(true, Some(200), "a")),
                ("tools_in_prompt", Check::new(false, Some(200), "b")),
            ],
            stop: None,
        };
        assert_eq!(
            serde_json::to_string(&p.to_json()).unwrap(),
            r#"{"models":{"ok":true,"status":200,"detail":"a"},"tools_in_prompt":{"ok":false,"status":200,"detail":"b"}}"#
        );
        assert_eq!(
            p.warnings(),
            vec!["preflight tools_in_prompt: b".to_string()]
        );
    }
}
