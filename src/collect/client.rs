//! The HTTP client: one chat-completions exchange, recorded byte for byte, with retries only
//! for failures before the model could answer (SPEC §4, issues 4 and 46).
//!
//! The request body is sent exactly as given; the response body is kept exactly as received,
//! however it ends. A retry is a fresh attempt at the same request — a new draw of the model —
//! so it is only made when the server refused or never took the attempt: a connection that
//! failed, 429, a 5xx status. Once a body byte has arrived, the sample is what it is. And once
//! the row's `timeout_secs` has run out, the sample is callcheck's timeout: the model may well
//! have been writing a long answer, and asking again would replace it by whichever answer
//! finishes in time (a bias toward short answers, on exactly the long-argument tasks), so the
//! timeout is kept as the sample's outcome, a transport error named as callcheck's own.

use crate::collect::config::{ModelEntry, redact_url};
use crate::request::{FEEDBACK_HEADER, PREFLIGHT_HEADER, SAMPLE_HEADER};
use crate::transcript::{Attempt, Meta};
use rand::RngExt;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, USER_AGENT};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Response headers worth keeping in meta.json. Everything else (cookies above all) is dropped.
const KEPT_HEADERS: [&str; 10] = [
    "content-type",
    "content-length",
    "transfer-encoding",
    "server",
    "date",
    "x-request-id",
    "request-id",
    "openai-processing-ms",
    "openai-model",
    "retry-after",
];

/// A response body larger than this is cut and marked: no tool call needs it, and an endless
/// stream must not exhaust memory.
const MAX_BODY: usize = 32 << 20;

/// The cap on every preflight read (`GET /models`, `GET /version`, the probes' answers): the
/// model ids and a 16-token answer are what matter, and a hostile or broken endpoint (a model
/// list of millions of entries, an endless body) must cost neither memory nor disk.
pub const PREFLIGHT_MAX_BODY: usize = 1 << 20;

/// How hard to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub retries: u32,
    /// The first backoff's ceiling; each retry doubles it (full jitter).
    pub base_ms: u64,
    /// No backoff is longer than this.
    pub cap_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            retries: 4,
            base_ms: 500,
            cap_ms: 30_000,
        }
    }
}

impl RetryPolicy {
    /// Full-jitter exponential backoff before retry number `n` (1-based), at least `floor_ms`
    /// (a server's Retry-After).
    fn backoff_ms(&self, n: u32, floor_ms: u64) -> u64 {
        let ceiling = self
            .base_ms
            .saturating_mul(1u64 << (n.saturating_sub(1)).min(20))
            .min(self.cap_ms);
        let jittered = if ceiling == 0 {
            0
        } else {
            rand::rng().random_range(ceiling / 2..=ceiling)
        };
        jittered.max(floor_ms.min(self.cap_ms))
    }
}

/// What one exchange produced: the bytes to keep and how it went.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub response: Vec<u8>,
    /// The body is an SSE stream (by its content-type, else by what was asked).
    pub sse: bool,
    pub meta: Meta,
}

impl Exchange {
    /// True when no complete model response arrived (transport failure, non-2xx, cut body).
    pub fn is_error(&self) -> bool {
        self.meta.error.is_some() || self.meta.status.is_none_or(|s| !(200..300).contains(&s))
    }
}

/// What replaces an echoed API key in everything collect keeps or prints.
pub const REDACTED: &str = "[REDACTED]";

/// Keys shorter than this are not searched for in what servers send: a placeholder such as
/// `none` or `EMPTY` (vLLM's documented dummy key) would otherwise be cut out of model text.
pub const MIN_SECRET_LEN: usize = 8;

/// Finds the row's API key in bytes a server sent and replaces it with [`REDACTED`]: some
/// gateways echo the bearer token in a 401 body, a header or a streamed answer, and callcheck
/// promises the key never reaches runs/, logs or the terminal. The key is found as sent, JSON-
/// escaped, and split across the events of a stream (`collect::secret`).
#[derive(Clone)]
pub struct Redactor {
    /// The key as a literal pattern.
    key: regex::bytes::Regex,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redactor(..)")
    }
}

impl Redactor {
    /// A redactor for `key`, or `None` when the key is too short to be told from text.
    pub fn new(key: &str) -> Option<Redactor> {
        if key.chars().count() < MIN_SECRET_LEN {
            return None;
        }
        let key = regex::bytes::Regex::new(&regex::escape(key)).ok()?;
        Some(Redactor { key })
    }

    /// Replaces every occurrence in `bytes` (a body, a stream, any text); returns how many
    /// there were, a key split across events counting once.
    pub fn bytes(&self, bytes: &mut Vec<u8>) -> u64 {
        crate::collect::secret::redact(bytes, &self.key, REDACTED)
    }

    /// Replaces every occurrence in `text`; returns how many there were.
    pub fn text(&self, text: &mut String) -> u64 {
        let mut b = std::mem::take(text).into_bytes();
        let n = self.bytes(&mut b);
        *text = String::from_utf8_lossy(&b).into_owned();
        n
    }

    /// Replaces every occurrence in a JSON value's strings (and object keys).
    pub fn json(&self, v: &mut Value) -> u64 {
        let Ok(mut text) = serde_json::to_vec(v) else {
            return 0;
        };
        let n = self.bytes(&mut text);
        if n > 0
            && let Ok(clean) = serde_json::from_slice(&text)
        {
            *v = clean;
        }
        n
    }

    /// Redacts one exchange's kept bytes, headers and errors, recording the count in its meta.
    fn exchange(&self, ex: &mut Exchange) {
        let mut n = self.bytes(&mut ex.response);
        for v in ex.meta.headers.values_mut() {
            n += self.text(v);
        }
        if let Some(e) = ex.meta.error.as_mut() {
            n += self.text(e);
        }
        for a in &mut ex.meta.attempts {
            if let Some(e) = a.error.as_mut() {
                n += self.text(e);
            }
        }
        if n > 0 {
            ex.meta.redacted_secrets = Some(n);
        }
    }
}

/// One model row's endpoints, with a pooled connection per replica.
#[derive(Debug)]
pub struct Endpoint {
    client: reqwest::Client,
    urls: Vec<String>,
    next: AtomicUsize,
    auth: Option<HeaderValue>,
    /// The key's redactor, when the row has a key long enough to look for.
    secret: Option<Redactor>,
    timeout: Duration,
    stream: bool,
}

/// Why an endpoint could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error(
        "model {model:?}: the environment variable {var} named by api_key_env is not set (or not valid UTF-8)"
    )]
    MissingKey { model: String, var: String },
    #[error("model {model:?}: the API key in {var} cannot be sent as an HTTP header")]
    BadKey { model: String, var: String },
    #[error("model {model:?}: cannot build an HTTP client: {source}")]
    Client {
        model: String,
        source: reqwest::Error,
    },
}

/// The text of an error and its causes, with no URL in it (a URL may carry a password).
fn describe(e: reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_body() || e.is_decode() {
        "body failed"
    } else {
        "request failed"
    };
    let e = e.without_url();
    let mut out = kind.to_string();
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(&e);
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

fn kept_headers(h: &HeaderMap) -> BTreeMap<String, String> {
    KEPT_HEADERS
        .iter()
        .filter_map(|name| {
            h.get(*name).map(|v| {
                (
                    name.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into(),
                )
            })
        })
        .collect()
}

fn is_loopback(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| match u.host_str() {
        Some("localhost") => true,
        Some(h) => h
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback()),
        None => false,
    })
}

/// How the body of one attempt ended.
enum BodyEnd {
    Complete,
    /// The deadline (callcheck's own timeout) passed.
    TimedOut,
    /// The connection failed, or the body outgrew its cap; the text says which.
    Broken(String),
}

impl Endpoint {
    /// Sets up the client for one model row, reading its API key from the environment.
    pub fn new(entry: &ModelEntry) -> Result<Endpoint, EndpointError> {
        let mut secret = None;
        let auth = match &entry.api_key_env {
            None => None,
            Some(var) => {
                let key = std::env::var(var).map_err(|_| EndpointError::MissingKey {
                    model: entry.name.clone(),
                    var: var.clone(),
                })?;
                let mut v =
                    HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
                        EndpointError::BadKey {
                            model: entry.name.clone(),
                            var: var.clone(),
                        }
                    })?;
                // Keeps the value out of any Debug output, hyper's included.
                v.set_sensitive(true);
                secret = Redactor::new(key.trim());
                Some(v)
            }
        };
        let urls = entry.urls();
        let mut b = reqwest::Client::builder()
            .pool_max_idle_per_host(entry.concurrency.max(1))
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(entry.timeout_secs.clamp(1, 30)));
        // A proxy from the environment must not see loopback traffic (the mock, a local vLLM).
        if urls.iter().all(|u| is_loopback(u)) {
            b = b.no_proxy();
        }
        let client = b.build().map_err(|source| EndpointError::Client {
            model: entry.name.clone(),
            source,
        })?;
        Ok(Endpoint {
            client,
            urls,
            next: AtomicUsize::new(0),
            auth,
            secret,
            timeout: Duration::from_secs(entry.timeout_secs),
            stream: entry.stream,
        })
    }

    fn headers(&self, stream: bool) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(
            ACCEPT,
            HeaderValue::from_static(if stream {
                "text/event-stream"
            } else {
                "application/json"
            }),
        );
        h.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("callcheck/", env!("CARGO_PKG_VERSION"))),
        );
        if let Some(a) = &self.auth {
            h.insert(AUTHORIZATION, a.clone());
        }
        h
    }

    /// Sends one chat-completions request (retrying before the first body byte only) and
    /// returns what to keep. Never fails: a failure is an [`Exchange`] whose meta says why.
    /// `tag` is `<task-id>/<sample index>`, sent in [`SAMPLE_HEADER`] with the attempt number.
    /// The row's key redactor, when it has a key worth looking for.
    pub fn redactor(&self) -> Option<&Redactor> {
        self.secret.as_ref()
    }

    pub async fn chat(&self, body: &bytes::Bytes, tag: &str, policy: &RetryPolicy) -> Exchange {
        self.chat_tagged(body, tag, None, policy).await
    }

    /// [`Endpoint::chat`] for a follow-up of the feedback round: `feedback` (`<style>/<label>`)
    /// goes in [`FEEDBACK_HEADER`].
    pub async fn chat_tagged(
        &self,
        body: &bytes::Bytes,
        tag: &str,
        feedback: Option<&str>,
        policy: &RetryPolicy,
    ) -> Exchange {
        let limits = Limits {
            timeout: self.timeout,
            max_body: MAX_BODY,
            what: "timeout_secs",
        };
        let mut ex = self
            .exchange(Outgoing {
                body,
                tag_header: SAMPLE_HEADER,
                tag,
                feedback,
                stream: self.stream,
                policy,
                limits,
            })
            .await;
        if let Some(r) = &self.secret {
            r.exchange(&mut ex);
        }
        ex
    }

    /// The timeout of the preflight's requests: its own short one, or the row's when shorter.
    pub fn probe_timeout(&self, probe: Duration) -> Duration {
        probe.min(self.timeout)
    }

    /// Sends one preflight probe the way [`Endpoint::chat`] sends a sample (same recording),
    /// tagged with [`PREFLIGHT_HEADER`]; `stream` is the probe's, not the row's. The probe has
    /// its own `timeout` and reads at most [`PREFLIGHT_MAX_BODY`] bytes.
    pub async fn probe(
        &self,
        body: &bytes::Bytes,
        check: &str,
        stream: bool,
        policy: &RetryPolicy,
        timeout: Duration,
    ) -> Exchange {
        let limits = Limits {
            timeout: self.probe_timeout(timeout),
            max_body: PREFLIGHT_MAX_BODY,
            what: "the preflight's probe timeout",
        };
        let mut ex = self
            .exchange(Outgoing {
                body,
                tag_header: PREFLIGHT_HEADER,
                tag: check,
                feedback: None,
                stream,
                policy,
                limits,
            })
            .await;
        if let Some(r) = &self.secret {
            r.exchange(&mut ex);
        }
        ex
    }

    /// Sends `out`, retrying before the first body byte only, and keeps what came back.
    async fn exchange(&self, out: Outgoing<'_>) -> Exchange {
        let started = Instant::now();
        let mut meta = Meta {
            streamed: out.stream,
            started: Some(crate::collect::clock::rfc3339_now()),
            ..Meta::default()
        };
        let mut retry_after_ms = 0;
        let mut attempt_no = 0u32;
        loop {
            let mut attempt = Attempt::default();
            if attempt_no > 0 {
                let wait = out.policy.backoff_ms(attempt_no, retry_after_ms);
                attempt.backoff_ms = wait;
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            match self.attempt(&out, &mut meta, attempt, attempt_no).await {
                Step::Again { retry_after } => {
                    // A head's `retry-after` holds until another head replaces it.
                    retry_after_ms = retry_after.unwrap_or(retry_after_ms);
                    attempt_no += 1;
                }
                Step::Failed => return self.failed(meta, started, out.stream),
                Step::Answered { response, sse } => {
                    meta.total_ms = Some(ms(started.elapsed()));
                    return Exchange {
                        response,
                        sse,
                        meta,
                    };
                }
            }
        }
    }

    /// One attempt at `out` (number `attempt_no`), recorded in `meta`: what comes next.
    async fn attempt(
        &self,
        out: &Outgoing<'_>,
        meta: &mut Meta,
        mut attempt: Attempt,
        attempt_no: u32,
    ) -> Step {
        let last = attempt_no >= out.policy.retries;
        let sent = Instant::now();
        let deadline = tokio::time::Instant::now() + out.limits.timeout;
        let resp = match self.head(out, meta, attempt_no, deadline).await {
            Ok(r) => r,
            Err(no_head) => {
                let again = matches!(no_head, NoHead::Failed(_)) && !last;
                attempt.error = Some(no_head.into_error());
                meta.attempts.push(attempt);
                return if again {
                    Step::Again { retry_after: None }
                } else {
                    Step::Failed
                };
            }
        };
        let status = resp.status().as_u16();
        attempt.status = Some(status);
        let headers = kept_headers(resp.headers());
        let retry_after = retry_after_ms(resp.headers());
        let again = Step::Again {
            retry_after: Some(retry_after),
        };
        let sse = answer_is_sse(resp.headers(), out.stream);
        let retryable_status = out.retryable(status);
        let (bytes, end, ttfb) = read_body(resp, deadline, sent, out.limits.max_body).await;
        attempt.ttfb_ms = ttfb.map(ms);
        if retryable_status && !last {
            // The status came with the head, before any body byte: the server refused this
            // attempt, so asking again cannot double a sample.
            attempt.error = Some(self.refusal(status, &bytes));
            meta.attempts.push(attempt);
            return again;
        }
        // A connection lost between the head and the body's first byte: nothing of the
        // answer arrived, so asking again cannot double a sample. (The budget running out
        // there is callcheck's own timeout, kept below like one later in the body.)
        if let BodyEnd::Broken(why) = &end
            && bytes.is_empty()
        {
            attempt.error = Some(format!("{why} before the first byte of the body"));
            meta.attempts.push(attempt);
            if last {
                meta.status = Some(status);
                meta.headers = headers;
                return Step::Failed;
            }
            return again;
        }
        meta.status = Some(status);
        meta.headers = headers;
        meta.ttfb_ms = attempt.ttfb_ms;
        match out.body_error(&end, bytes.len()) {
            Some(e) => {
                attempt.error = Some(e.clone());
                meta.error = Some(e);
            }
            None if retryable_status => {
                meta.error = Some(format!(
                    "HTTP {status} after {} attempts",
                    meta.attempts.len() + 1
                ));
            }
            None => {}
        }
        meta.attempts.push(attempt);
        Step::Answered {
            response: bytes,
            sse,
        }
    }

    /// Sends one attempt's request to the next replica and waits for the response head until
    /// `deadline`.
    async fn head(
        &self,
        out: &Outgoing<'_>,
        meta: &mut Meta,
        attempt_no: u32,
        deadline: tokio::time::Instant,
    ) -> Result<reqwest::Response, NoHead> {
        let replica = self.next.fetch_add(1, Ordering::Relaxed) % self.urls.len().max(1);
        let base = self.urls.get(replica).cloned().unwrap_or_default();
        meta.endpoint = Some(redact_url(&base));
        let mut headers = self.headers(out.stream);
        if let Ok(v) = HeaderValue::from_str(&format!("{}/{attempt_no}", out.tag)) {
            headers.insert(out.tag_header, v);
        }
        if let Some(v) = out.feedback.and_then(|f| HeaderValue::from_str(f).ok()) {
            headers.insert(FEEDBACK_HEADER, v);
        }
        let req = self
            .client
            .post(crate::endpoint::join(&base, "chat/completions"))
            .headers(headers)
            .body(out.body.clone())
            .send();
        match tokio::time::timeout_at(deadline, req).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(NoHead::Failed(describe(e))),
            Err(_) => Err(NoHead::TimedOut(format!(
                "timed out after {} s ({}) waiting for the response head{}",
                out.limits.timeout.as_secs(),
                out.limits.what,
                out.kept()
            ))),
        }
    }

    /// A refused attempt's error: the status and the start of its body, the row's key
    /// redacted before it is clipped (a clip could cut an echoed key in two, and a piece of it
    /// would no longer be found in the error text).
    fn refusal(&self, status: u16, body: &[u8]) -> String {
        let mut shown = body.to_vec();
        if let Some(r) = &self.secret {
            r.bytes(&mut shown);
        }
        format!(
            "HTTP {status}: {}",
            crate::json::clip(&String::from_utf8_lossy(&shown), 200)
        )
    }

    fn failed(&self, mut meta: Meta, started: Instant, stream: bool) -> Exchange {
        let n = meta.attempts.len();
        let last = meta
            .attempts
            .last()
            .and_then(|a| a.error.clone())
            .unwrap_or_else(|| "no response".into());
        meta.error = Some(format!(
            "no response after {n} attempt{}: {last}",
            if n == 1 { "" } else { "s" }
        ));
        meta.total_ms = Some(ms(started.elapsed()));
        Exchange {
            response: Vec::new(),
            sse: stream,
            meta,
        }
    }

    /// What the servers say about themselves, per replica: `/v1/models` as a bounded summary
    /// (`preflight::ModelList`: the ids, how many, whether the body was cut) and, where there
    /// is one, vLLM's `/version`. Every read is capped at [`PREFLIGHT_MAX_BODY`] bytes and
    /// `timeout`; `progress` hears one line per request with how long it took. `Err` when no
    /// replica can be reached at all.
    pub async fn server_info(
        &self,
        model_id: &str,
        timeout: Duration,
        progress: &(dyn Fn(String) + Sync),
    ) -> Result<Value, String> {
        let timeout = self.probe_timeout(timeout);
        let mut replicas = Vec::new();
        let mut reached = false;
        let mut last_error = String::new();
        for base in &self.urls {
            let mut r = serde_json::Map::new();
            let shown = redact_url(base);
            r.insert("base_url".into(), json!(shown));
            let t0 = Instant::now();
            match self
                .get_bounded(&crate::endpoint::join(base, "models"), timeout)
                .await
            {
                Ok(mut got) => {
                    if let Some(s) = &self.secret {
                        s.bytes(&mut got.body);
                    }
                    reached = true;
                    r.insert("models_status".into(), json!(got.status));
                    let list =
                        crate::collect::preflight::ModelList::read(&got.body, got.cut, model_id);
                    progress(format!(
                        "GET {}: HTTP {}, {} in {:.1} s",
                        crate::endpoint::join(&shown, "models"),
                        got.status,
                        list.describe(),
                        t0.elapsed().as_secs_f64()
                    ));
                    list.insert_into(&mut r);
                }
                Err(mut e) => {
                    if let Some(s) = &self.secret {
                        s.text(&mut e);
                    }
                    progress(format!(
                        "GET {}: {e} ({:.1} s)",
                        crate::endpoint::join(&shown, "models"),
                        t0.elapsed().as_secs_f64()
                    ));
                    last_error = e.clone();
                    r.insert("models_error".into(), json!(e));
                }
            }
            if let Ok(got) = self
                .get_bounded(&crate::endpoint::join_root(base, "version"), timeout)
                .await
                && got.status == 200
                && !got.cut
                && let Ok(mut v) = serde_json::from_slice::<Value>(&got.body)
            {
                if let Some(s) = &self.secret {
                    s.json(&mut v);
                }
                // A version is a few fields; anything bigger is not one worth keeping whole.
                let v = if serde_json::to_string(&v).map_or(usize::MAX, |s| s.len()) <= 2048 {
                    v
                } else {
                    json!(crate::json::preview(&v, 200))
                };
                r.insert("version".into(), v);
            }
            replicas.push(Value::Object(r));
        }
        if reached {
            Ok(json!({ "endpoints": replicas }))
        } else {
            Err(last_error)
        }
    }

    /// A GET whose body is read up to [`PREFLIGHT_MAX_BODY`] bytes and `timeout` in all: an
    /// endless or huge body is cut (and said to be), never held whole.
    async fn get_bounded(&self, url: &str, timeout: Duration) -> Result<Bounded, String> {
        let mut req = self.client.get(url);
        if let Some(a) = &self.auth {
            req = req.header(AUTHORIZATION, a.clone());
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let resp = match tokio::time::timeout_at(deadline, req.send()).await {
            Ok(r) => r.map_err(describe)?,
            Err(_) => {
                return Err(format!(
                    "timed out after {} s (the preflight's probe timeout) waiting for the response head",
                    timeout.as_secs()
                ));
            }
        };
        let status = resp.status().as_u16();
        let (body, end, _) = read_body(resp, deadline, Instant::now(), PREFLIGHT_MAX_BODY).await;
        let cut = match end {
            BodyEnd::Complete => false,
            BodyEnd::TimedOut if body.is_empty() => {
                return Err(format!(
                    "HTTP {status}, then timed out after {} s (the preflight's probe timeout) before any body byte",
                    timeout.as_secs()
                ));
            }
            BodyEnd::Broken(why) if body.is_empty() => {
                return Err(format!("HTTP {status}, then {why} before any body byte"));
            }
            BodyEnd::TimedOut | BodyEnd::Broken(_) => true,
        };
        Ok(Bounded { status, body, cut })
    }
}

/// One chat-completions request to send: the body and how it is tagged, read and retried.
struct Outgoing<'a> {
    body: &'a bytes::Bytes,
    /// [`SAMPLE_HEADER`] or [`PREFLIGHT_HEADER`], carrying `<tag>/<attempt>`.
    tag_header: &'static str,
    tag: &'a str,
    /// `<style>/<label>` of a follow-up, sent in [`FEEDBACK_HEADER`].
    feedback: Option<&'a str>,
    stream: bool,
    policy: &'a RetryPolicy,
    limits: Limits,
}

impl Outgoing<'_> {
    /// What a sample's error adds when callcheck's own timeout ended it (a probe's says
    /// which timeout fired, and that is all it needs).
    fn kept(&self) -> &'static str {
        if self.tag_header == SAMPLE_HEADER {
            ": callcheck's own timeout, kept as the sample's outcome, not asked again"
        } else {
            ""
        }
    }

    /// Whether a status is worth asking again. A follow-up of the feedback round that the
    /// server answers with HTTP 500 was refused for its content (llama-server and vLLM refuse
    /// a history whose call arguments are not JSON, with 500 or 400): asking again gets the
    /// same refusal, four more times. Gateways' 502–504 and 429 stay transient for follow-ups
    /// too.
    fn retryable(&self, status: u16) -> bool {
        let follow_up = self.feedback.is_some();
        status == 429 || (status >= 500 && !(follow_up && status == 500))
    }

    /// The error a body's end says beside what was received: callcheck's own timeout, or a
    /// connection lost mid-body (kept as received); `None` for a complete body.
    fn body_error(&self, end: &BodyEnd, received: usize) -> Option<String> {
        match end {
            BodyEnd::Complete => None,
            BodyEnd::TimedOut => Some(format!(
                "timed out after {} s ({}) with {received} bytes of the body received{}",
                self.limits.timeout.as_secs(),
                self.limits.what,
                self.kept()
            )),
            BodyEnd::Broken(why) => Some(format!(
                "{why} after {received} bytes of the body: kept as received"
            )),
        }
    }
}

/// Why an attempt got no response head.
enum NoHead {
    /// The request failed (connection refused, reset…): asking again cannot double a sample.
    Failed(String),
    /// callcheck's own budget ran out while the server was (perhaps) generating: an outcome
    /// of the sample, not a reason to draw again (see the module's doc).
    TimedOut(String),
}

impl NoHead {
    fn into_error(self) -> String {
        match self {
            NoHead::Failed(e) | NoHead::TimedOut(e) => e,
        }
    }
}

/// A response's `retry-after` (in seconds) as milliseconds; 0 when absent or not a number.
fn retry_after_ms(headers: &HeaderMap) -> u64 {
    headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(0, |s| s.saturating_mul(1000))
}

/// Whether an answer is an SSE stream: as its content type says, else as the request asked.
fn answer_is_sse(headers: &HeaderMap, asked_stream: bool) -> bool {
    match headers.get(CONTENT_TYPE).map(|v| v.as_bytes()) {
        Some(ct) if ct.starts_with(b"text/event-stream") => true,
        Some(ct) if ct.windows(4).any(|w| w == b"json") => false,
        _ => asked_stream,
    }
}

/// What one attempt leads to.
enum Step {
    /// Ask again (the attempt got nothing that could double a sample); `retry_after` is the
    /// head's `retry-after` in ms when a head arrived.
    Again { retry_after: Option<u64> },
    /// Give up: the last attempt failed, or callcheck's own timeout fired before the head.
    Failed,
    /// An answer to keep, complete or not.
    Answered { response: Vec<u8>, sse: bool },
}

/// How long one exchange may take and how much of its body is kept.
#[derive(Debug, Clone, Copy)]
struct Limits {
    timeout: Duration,
    max_body: usize,
    /// Which setting the timeout is, for the message when it fires.
    what: &'static str,
}

/// A capped GET's answer.
struct Bounded {
    status: u16,
    body: Vec<u8>,
    /// The body was cut (at the cap, a broken connection or the deadline).
    cut: bool,
}

/// Reads a body to its end, its deadline, or a broken connection, keeping every byte received.
async fn read_body(
    mut resp: reqwest::Response,
    deadline: tokio::time::Instant,
    sent: Instant,
    max_body: usize,
) -> (Vec<u8>, BodyEnd, Option<Duration>) {
    let mut out: Vec<u8> = Vec::new();
    let mut ttfb = None;
    loop {
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                if ttfb.is_none() {
                    ttfb = Some(sent.elapsed());
                }
                let room = max_body.saturating_sub(out.len());
                if chunk.len() > room {
                    out.extend_from_slice(&chunk[..room]);
                    return (
                        out,
                        BodyEnd::Broken(format!("body larger than {max_body} bytes, cut")),
                        ttfb,
                    );
                }
                out.extend_from_slice(&chunk);
            }
            Ok(Ok(None)) => return (out, BodyEnd::Complete, ttfb),
            Ok(Err(e)) => return (out, BodyEnd::Broken(describe(e)), ttfb),
            Err(_) => return (out, BodyEnd::TimedOut, ttfb),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echoed_key_is_redacted_as_sent_and_as_json_escapes_it() {
        let r = Redactor::new("sk-a/b\"c-123").unwrap();
        let mut b = br#"{"m":"sk-a/b\"c-123 and sk-a/b"c-123"}"#.to_vec();
        assert_eq!(r.bytes(&mut b), 2);
        assert_eq!(b, br#"{"m":"[REDACTED] and [REDACTED]"}"#.to_vec());
        let mut v = json!({"detail": "Bearer sk-a/b\"c-123"});
        assert_eq!(r.json(&mut v), 1);
        assert_eq!(v, json!({"detail": "Bearer [REDACTED]"}));
        // A placeholder key is not a secret to cut out of model text.
        assert!(Redactor::new("EMPTY").is_none());
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            retries: 5,
            base_ms: 100,
            cap_ms: 1000,
        };
        for _ in 0..50 {
            let b1 = p.backoff_ms(1, 0);
            assert!((50..=100).contains(&b1), "{b1}");
            let b3 = p.backoff_ms(3, 0);
            assert!((200..=400).contains(&b3), "{b3}");
            assert!(p.backoff_ms(30, 0) <= 1000);
            assert_eq!(p.backoff_ms(1, 700).max(700), p.backoff_ms(1, 700));
        }
    }
}
