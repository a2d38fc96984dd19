//! The in-repo OpenAI-compatible mock server (SPEC §8): `/v1/chat/completions` (JSON and SSE,
//! written event by event), `/v1/models` and `/version`, on 127.0.0.1, serving scripted models
//! (replayed fixtures, a gold-reply corrupter, transport faults).
//!
//! How a request is matched to its task: by content — the request's messages (less a leading
//! system message a model row may add), tools, tool_choice and response_format are looked up
//! against the task corpus given with `--tasks`. When that fails, the task id from collect's
//! `x-callcheck-sample: <task>/<sample>/<attempt>` header is used. The same header gives the
//! sample index within the cell and the attempt number, so each answer depends only on
//! (seed, model, task, sample index) — and each fault also on the attempt — never on arrival
//! order. Without the header, samples are numbered per (model, task) in arrival order.
//!
//! The server is served by hand over hyper (not `axum::serve`) so that a fault can close a
//! connection before any byte of the response: axum's router still does the routing.

pub mod config;
pub mod feedback;
pub mod respond;
pub mod stream_bugs;

use crate::task::Task;
use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use axum::routing::{get, post};
use bytes::Bytes;
pub use config::MockConfig;
use respond::{Answer, SampleKey, TaskIndex, error_body};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot};

/// Everything the mock serves from.
pub struct MockState {
    config: MockConfig,
    tasks: Vec<Task>,
    index: TaskIndex,
    /// Arrival counters for requests without a sample header.
    arrivals: Mutex<HashMap<(String, String), u64>>,
    log: Option<Mutex<std::fs::File>>,
}

/// One line of the mock's log: what it sent for one request.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct SentRecord {
    pub model: String,
    pub task: String,
    pub sample: u64,
    pub attempt: u32,
    pub status: u16,
    /// `gold`, a corruption's name, `garbage`, `drop`, `http_503`…; `(cut)` when cut.
    pub what: String,
    /// sha256 of the body bytes actually written (for a drop: of nothing).
    pub sha256: String,
    pub bytes: u64,
}

impl MockState {
    /// A mock serving `config`'s models and recognising requests against `tasks`.
    pub fn new(config: MockConfig, tasks: Vec<Task>) -> MockState {
        MockState {
            index: TaskIndex::new(&tasks),
            config,
            tasks,
            arrivals: Mutex::new(HashMap::new()),
            log: None,
        }
    }

    /// Appends one JSON line per response to `path` ([`SentRecord`]).
    pub fn with_log(mut self, path: &std::path::Path) -> std::io::Result<MockState> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        self.log = Some(Mutex::new(f));
        Ok(self)
    }

    fn record(&self, r: &SentRecord) {
        if let Some(log) = &self.log
            && let Ok(mut f) = log.lock()
            && let Ok(mut line) = serde_json::to_vec(r)
        {
            line.push(b'\n');
            let _ = f.write_all(&line);
        }
    }
}

/// A running mock; dropping it leaves the server running until the runtime ends.
pub struct MockHandle {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    join: tokio::task::JoinHandle<()>,
}

impl MockHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>/v1`, what a model entry's `base_url` takes.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Stops accepting connections and waits for the accept loop to end.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.join).await;
    }
}

/// Closes the connection a request arrived on, before any byte of a response.
#[derive(Clone)]
struct Killer(Arc<Notify>);

/// Starts serving on `listener` (bind it to 127.0.0.1; port 0 for an ephemeral one).
pub fn serve(state: MockState, listener: TcpListener) -> std::io::Result<MockHandle> {
    let addr = listener.local_addr()?;
    let state = Arc::new(state);
    let router = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/models", get(models))
        .route("/version", get(version))
        .fallback(not_found)
        .with_state(state);
    let (tx, mut rx) = oneshot::channel::<()>();
    let join = tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                _ = &mut rx => break,
                acc = listener.accept() => match acc {
                    Ok(a) => a,
                    Err(_) => {
                        // Out of file descriptors and the like: wait, do not spin.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            let router = router.clone();
            tokio::spawn(async move {
                let kill = Arc::new(Notify::new());
                let k = Killer(kill.clone());
                let svc = hyper_util::service::TowerToHyperService::new(router);
                let svc = hyper::service::service_fn(
                    move |mut req: hyper::Request<hyper::body::Incoming>| {
                        req.extensions_mut().insert(k.clone());
                        hyper::service::Service::call(&svc, req)
                    },
                );
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
                tokio::select! {
                    _ = conn => {}
                    // Dropping the connection closes the socket with nothing more written.
                    _ = kill.notified() => {}
                }
            });
        }
    });
    Ok(MockHandle {
        addr,
        shutdown: Some(tx),
        join,
    })
}

fn json_response(status: u16, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut()
        .insert(header::SERVER, HeaderValue::from_static("callcheck-mock"));
    r
}

fn authorized(state: &MockState, headers: &HeaderMap) -> bool {
    match &state.config.api_key {
        None => true,
        Some(key) => headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|v| v == key),
    }
}

fn unauthorized() -> Response<Body> {
    json_response(
        401,
        error_body("mock: missing or wrong API key", "AuthenticationError", 401),
    )
}

async fn not_found() -> Response<Body> {
    json_response(404, error_body("mock: no such route", "NotFoundError", 404))
}

async fn models(State(state): State<Arc<MockState>>, headers: HeaderMap) -> Response<Body> {
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    let data: Vec<Value> = state
        .config
        .models
        .iter()
        .map(|m| json!({"id": m.name, "object": "model", "created": 1_767_225_600u64, "owned_by": "callcheck-mock", "root": m.name, "parent": null, "max_model_len": 32768}))
        .collect();
    json_response(
        200,
        serde_json::to_vec(&json!({"object": "list", "data": data})).unwrap_or_default(),
    )
}

async fn version(State(state): State<Arc<MockState>>, headers: HeaderMap) -> Response<Body> {
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    json_response(
        200,
        serde_json::to_vec(
            &json!({"version": concat!("callcheck-mock ", env!("CARGO_PKG_VERSION"))}),
        )
        .unwrap_or_default(),
    )
}

/// `<task>/<sample>/<attempt>` from collect's sample header.
fn parse_sample_header(headers: &HeaderMap) -> Option<(String, u64, u32)> {
    let v = headers.get(crate::request::SAMPLE_HEADER)?.to_str().ok()?;
    let mut it = v.rsplitn(3, '/');
    let attempt = it.next()?.parse().ok()?;
    let sample = it.next()?.parse().ok()?;
    let task = it.next()?.to_string();
    Some((task, sample, attempt))
}

fn sha_hex(bytes: &[u8]) -> String {
    crate::task::sha256_hex(bytes)
}

async fn chat(
    State(state): State<Arc<MockState>>,
    Extension(killer): Extension<Killer>,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    let (request, model) = match admit(&state, &body) {
        Ok(admitted) => admitted,
        Err(refused) => return refused.response(),
    };
    // A preflight probe (`collect::preflight`): answered from the request alone, and not
    // logged, since the log records samples.
    if let Some(check) = headers
        .get(crate::request::PREFLIGHT_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        return probe_response(&state, model, &request, check);
    }
    let arrival = match Arrival::place(&state, model, &headers, &request) {
        Ok(arrival) => arrival,
        Err(unknown) => return unknown.response(),
    };
    let task = &state.tasks[arrival.task];
    let Arrival {
        sample, attempt, ..
    } = arrival;
    let key = SampleKey {
        model: model.name.clone(),
        task: task.id.clone(),
        sample: match &arrival.follow_up {
            Some(f) => feedback::fault_sample(state.config.seed, sample, f),
            None => sample,
        },
        attempt,
    };
    let mut plan = respond::plan(&state.config, model, task, &key, &request);
    if let Some(f) = &arrival.follow_up {
        answer_follow_up(&state, model, task, sample, f, &request, &mut plan);
    }
    if plan.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(plan.delay_ms)).await;
    }
    let sending = Sending {
        state: state.clone(),
        killer,
        rec: SentRecord {
            model: key.model,
            task: key.task,
            sample,
            attempt,
            status: 200,
            what: String::new(),
            sha256: sha_hex(b""),
            bytes: 0,
        },
        event_delay_ms: plan.event_delay_ms,
    };
    sending.send(plan.answer).await
}

/// The request read and its model found, or the error response a server gives instead: a body
/// that is not JSON, a model it does not serve, a request the model's server refuses.
fn admit<'a>(state: &'a MockState, body: &[u8]) -> Result<(Value, &'a config::MockModel), Refusal> {
    let request: Value = serde_json::from_slice(body).map_err(|e| {
        Refusal::new(
            400,
            error_body(
                &format!("mock: the body is not JSON: {e}"),
                "BadRequestError",
                400,
            ),
        )
    })?;
    let model_name = request.get("model").and_then(Value::as_str).unwrap_or("");
    let Some(model) = state.config.models.iter().find(|m| m.name == model_name) else {
        return Err(Refusal::new(
            404,
            error_body(
                &format!("The model `{model_name}` does not exist."),
                "NotFoundError",
                404,
            ),
        ));
    };
    if let Some(body) = respond::refusal(model, &request) {
        return Err(Refusal::new(400, body));
    }
    if model.refuse_invalid_json_history
        && let Some(body) = respond::history_refusal(&request)
    {
        return Err(Refusal::new(400, body));
    }
    Ok((request, model))
}

/// The answer to a preflight probe named `check` (the header's `<check>/<n>`).
fn probe_response(
    state: &MockState,
    model: &config::MockModel,
    request: &Value,
    check: &str,
) -> Response<Body> {
    let check = check.rsplit_once('/').map_or(check, |(c, _)| c).to_string();
    let (content_type, pieces) = respond::probe_answer(&state.config, model, request, &check);
    let mut r = Response::new(if pieces.len() == 1 {
        Body::from(pieces.concat())
    } else {
        Body::from_stream(futures_util::stream::iter(
            pieces
                .into_iter()
                .map(|p| Ok::<Bytes, std::io::Error>(Bytes::from(p))),
        ))
    });
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r.headers_mut()
        .insert(header::SERVER, HeaderValue::from_static("callcheck-mock"));
    r
}

/// Which sample a request is: its task found by content (a follow-up's by the request it
/// follows up), its sample and attempt from collect's header, or counted in order of arrival
/// when the header is absent or names another task.
struct Arrival {
    /// Index into the mock's tasks.
    task: usize,
    /// The request is a follow-up of the feedback or review round.
    follow_up: Option<feedback::FollowUp>,
    sample: u64,
    attempt: u32,
}

impl Arrival {
    fn place(
        state: &MockState,
        model: &config::MockModel,
        headers: &HeaderMap,
        request: &Value,
    ) -> Result<Arrival, Refusal> {
        let header = parse_sample_header(headers);
        // A follow-up of the feedback round: no task's request as a whole, a task's before its
        // last assistant turn (`mock::feedback`).
        let follow_up = feedback::read(
            request,
            headers
                .get(crate::request::FEEDBACK_HEADER)
                .and_then(|v| v.to_str().ok()),
        )
        .filter(|f| {
            state.index.find(request, None).is_none()
                && state.index.find(&f.original, None).is_some()
        });
        let found = match &follow_up {
            Some(f) => state
                .index
                .find(&f.original, header.as_ref().map(|h| h.0.as_str())),
            None => state
                .index
                .find(request, header.as_ref().map(|h| h.0.as_str())),
        };
        let Some(ti) = found else {
            return Err(Refusal::new(
                400,
                error_body(
                    "mock: this request matches no task of the mock's corpus (start it with --tasks)",
                    "BadRequestError",
                    400,
                ),
            ));
        };
        let task = &state.tasks[ti];
        let (sample, attempt) = match &header {
            Some((t, s, a)) if *t == task.id => (*s, *a),
            _ => {
                let mut arrivals = match state.arrivals.lock() {
                    Ok(a) => a,
                    Err(p) => p.into_inner(),
                };
                let n = arrivals
                    .entry((model.name.clone(), task.id.clone()))
                    .or_insert(0);
                let s = *n;
                *n += 1;
                (s, 0)
            }
        };
        Ok(Arrival {
            task: ti,
            follow_up,
            sample,
            attempt,
        })
    }
}

/// An error status with its JSON body: the mock's answer to a request it will not serve.
struct Refusal {
    status: u16,
    body: Vec<u8>,
}

impl Refusal {
    fn new(status: u16, body: Vec<u8>) -> Refusal {
        Refusal { status, body }
    }

    fn response(self) -> Response<Body> {
        json_response(self.status, self.body)
    }
}

/// An answer on its way out, with the log line that records what was actually written.
struct Sending {
    state: Arc<MockState>,
    killer: Killer,
    rec: SentRecord,
    /// Pause between a streamed body's pieces.
    event_delay_ms: u64,
}

impl Sending {
    async fn send(mut self, answer: Answer) -> Response<Body> {
        match answer {
            Answer::Status { status, body } => {
                self.rec.status = status;
                self.rec.what = format!("http_{status}");
                self.rec.sha256 = sha_hex(&body);
                self.rec.bytes = body.len() as u64;
                self.state.record(&self.rec);
                json_response(status, body)
            }
            Answer::Drop => {
                self.rec.status = 0;
                self.rec.what = "drop".into();
                self.state.record(&self.rec);
                self.killer.0.notify_one();
                std::future::pending::<()>().await;
                json_response(500, Vec::new())
            }
            Answer::Body {
                content_type,
                pieces,
                cut,
                what,
            } => {
                self.rec.what = what;
                let request_id = self.request_id();
                let body = if pieces.len() == 1 && cut.is_none() {
                    // One piece: a plain body with a content-length, as servers send JSON.
                    let b = pieces.into_iter().next().unwrap_or_default();
                    self.rec.sha256 = sha_hex(&b);
                    self.rec.bytes = b.len() as u64;
                    self.state.record(&self.rec);
                    Body::from(b)
                } else {
                    self.stream(pieces, cut)
                };
                let mut r = Response::new(body);
                let h = r.headers_mut();
                if let Ok(v) = HeaderValue::from_str(content_type) {
                    h.insert(header::CONTENT_TYPE, v);
                }
                h.insert(header::SERVER, HeaderValue::from_static("callcheck-mock"));
                if let Ok(v) = HeaderValue::from_str(&request_id) {
                    h.insert("x-request-id", v);
                }
                r
            }
        }
    }

    /// The `x-request-id` header: derived from the sample, so a replay sends the same one.
    fn request_id(&self) -> String {
        let r = &self.rec;
        format!(
            "mock-{:016x}",
            respond::derive_seed(
                self.state.config.seed,
                &[
                    &r.model,
                    &r.task,
                    &r.sample.to_string(),
                    &r.attempt.to_string()
                ]
            )
        )
    }

    /// The pieces written one by one (`event_delay_ms` apart), up to `cut` when set; the log
    /// line is written once the last piece is, with the hash and size of what was sent, and a
    /// cut body then has its connection closed.
    fn stream(self, pieces: Vec<Vec<u8>>, cut: Option<usize>) -> Body {
        let Sending {
            state,
            killer,
            rec,
            event_delay_ms: event_delay,
        } = self;
        let send = cut.unwrap_or(pieces.len()).min(pieces.len());
        let stream = futures_util::stream::unfold(
            (
                pieces.into_iter().take(send),
                Sha256::new(),
                0u64,
                Some(rec),
                killer,
            ),
            move |(mut it, mut sha, mut n, mut rec, killer)| {
                let state = state.clone();
                async move {
                    match it.next() {
                        Some(p) => {
                            if event_delay > 0 && n > 0 {
                                tokio::time::sleep(Duration::from_millis(event_delay)).await;
                            }
                            sha.update(&p);
                            n += p.len() as u64;
                            Some((
                                Ok::<Bytes, std::io::Error>(Bytes::from(p)),
                                (it, sha, n, rec, killer),
                            ))
                        }
                        None => {
                            if let Some(mut r) = rec.take() {
                                r.sha256 = crate::task::hex(&sha.clone().finalize());
                                r.bytes = n;
                                state.record(&r);
                            }
                            if cut.is_some() {
                                // Let the pieces already written reach the socket, then
                                // close it: no finish chunk, no [DONE], no final chunk.
                                tokio::time::sleep(Duration::from_millis(30)).await;
                                killer.0.notify_one();
                                std::future::pending::<()>().await;
                            }
                            None
                        }
                    }
                }
            },
        );
        Body::from_stream(stream)
    }
}

/// Replaces a planned answer's reply by the model's answer to a follow-up (its `feedback` or
/// `review` character; a model without one answers as to a first request). Faults stay as
/// drawn: an error status, a dropped connection, garbage or a cut body is no model's answer.
fn answer_follow_up(
    state: &MockState,
    model: &config::MockModel,
    task: &Task,
    parent_sample: u64,
    f: &feedback::FollowUp,
    request: &Value,
    plan: &mut respond::Plan,
) {
    if (f.review && model.review.is_none()) || (!f.review && model.feedback.is_none()) {
        return;
    }
    let Answer::Body {
        cut: None, what, ..
    } = &plan.answer
    else {
        return;
    };
    if what == "garbage" {
        return;
    }
    let max_tokens = request
        .get("max_completion_tokens")
        .and_then(Value::as_u64)
        .or_else(|| request.get("max_tokens").and_then(Value::as_u64))
        .unwrap_or(4096);
    let seed = state.config.seed;
    let (mut reply, mut what) = match (&model.review, &model.feedback) {
        (Some(b), _) if f.review => {
            feedback::review_answer(seed, model, b, task, parent_sample, f, max_tokens)
        }
        (_, Some(b)) => feedback::answer(seed, model, b, task, parent_sample, f, max_tokens),
        _ => return,
    };
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    if stream && model.stream_drops_parallel && reply.tool_calls.len() > 1 {
        reply.tool_calls.truncate(1);
        what.push_str("; the stream dropped every call after the first");
    }
    let render_seed = respond::derive_seed(
        state.config.seed,
        &[
            "render-feedback",
            &model.name,
            &task.id,
            &parent_sample.to_string(),
            f.ask(),
        ],
    );
    let prompt_tokens = crate::reply::estimate_tokens(
        &serde_json::to_string(request.get("messages").unwrap_or(&Value::Null)).unwrap_or_default(),
    );
    let (content_type, pieces) = if stream {
        let usage = request
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true);
        (
            "text/event-stream; charset=utf-8",
            crate::reply::render_sse_events(&reply, &model.name, prompt_tokens, usage, render_seed)
                .into_iter()
                .map(String::into_bytes)
                .collect(),
        )
    } else {
        (
            "application/json",
            vec![crate::reply::render_json(
                &reply,
                &model.name,
                prompt_tokens,
                render_seed,
            )],
        )
    };
    plan.answer = Answer::Body {
        content_type,
        pieces,
        cut: None,
        what,
    };
}

/// Loads the corpus for the mock: every task under `path`, or none (with a warning) when the
/// folder does not exist, so `callcheck mock` starts anywhere.
pub fn load_tasks(path: &std::path::Path) -> anyhow::Result<(Vec<Task>, Option<String>)> {
    if !path.exists() {
        return Ok((
            Vec::new(),
            Some(format!(
                "no task corpus at {}: every chat request will get HTTP 400 (pass --tasks)",
                path.display()
            )),
        ));
    }
    Ok((crate::task::load(path)?, None))
}

/// Where the built-in fixtures of a replay model would be looked up, for messages.
pub fn describe(config: &MockConfig) -> String {
    config
        .models
        .iter()
        .map(|m| match &m.replay {
            Some(d) => format!("{} (replay {})", m.name, d.display()),
            None => m.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}
