//! One sample as collect wrote it and build reads it: the request sent, the bytes received and
//! what the HTTP exchange looked like (`meta.json`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One attempt at a request (collect retries only failures before the model could answer: never
/// after a body byte, never after its own timeout).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// HTTP status, when a response head arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What went wrong, when the attempt failed before the body (connection refused, timeout…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Milliseconds the client waited before this attempt (jittered backoff).
    #[serde(default)]
    pub backoff_ms: u64,
    /// Milliseconds from sending to the first byte of the body, when it came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb_ms: Option<f64>,
}

/// `meta.json`: how the exchange went. Everything is optional so that older or hand-made
/// transcripts still load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// HTTP status of the attempt whose body was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Selected response headers (content-type, server, request ids), lowercase names.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Every attempt, in order; the last one produced the kept bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// Milliseconds to the first byte of the body of the kept attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb_ms: Option<f64>,
    /// Milliseconds from the first attempt's send to the last byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_ms: Option<f64>,
    /// Why the exchange failed, when no complete response arrived (after retries, or a body cut).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// True when the response was requested as an SSE stream.
    #[serde(default)]
    pub streamed: bool,
    /// The endpoint (base URL, password redacted) that answered the kept attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// When the first attempt was sent, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// How many times the row's API key, echoed by the server, was replaced with
    /// `[REDACTED]` in this sample's response bytes, headers and errors before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted_secrets: Option<u64>,
    /// For a sample of a feedback run (SPEC §11): the failed sample it follows up, of the same
    /// model and task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentRef>,
}

/// The sample a feedback sample follows up: its run folder and sample folder under the same
/// `runs/<model>/<task-id>/`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ParentRef {
    pub run: String,
    pub sample: String,
}

/// One sample: request, raw response and metadata.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    /// The exact request body sent, when known (gives `max_tokens` and the tools as sent).
    /// Shared: the samples of a run usually send the same request, which is parsed once.
    pub request: Option<std::sync::Arc<Value>>,
    /// The response bytes exactly as received.
    pub body: Vec<u8>,
    /// Whether `body` is an SSE stream (`response.sse`) rather than a JSON body.
    pub streamed: bool,
    pub meta: Option<Meta>,
}

impl Transcript {
    /// The token budget the request gave the model, from `max_completion_tokens` or `max_tokens`.
    pub fn max_tokens(&self) -> Option<u64> {
        let r = self.request.as_ref()?;
        r.get("max_completion_tokens")
            .and_then(Value::as_u64)
            .or_else(|| r.get("max_tokens").and_then(Value::as_u64))
    }
}

/// Guesses whether bytes are an SSE stream: used by `callcheck check` when the file name does
/// not say (`.sse`).
pub fn looks_like_sse(body: &[u8]) -> bool {
    let start = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(body.len());
    let rest = &body[start..];
    rest.starts_with(b"data:")
        || rest.starts_with(b"event:")
        || rest.starts_with(b":")
        || rest.starts_with(b"id:")
}
