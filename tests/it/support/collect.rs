//! Shared helpers for the collect and mock integration tests: start the real mock binary on an
//! ephemeral loopback port, run the real collect binary, read the mock's log and the runs tree.

use callcheck::mock::SentRecord;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_callcheck");

pub fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks")
}

/// A running `callcheck mock` child, killed on drop.
pub struct Mock {
    pub child: Child,
    /// Kept open: the mock must not lose its stdout while it runs.
    _stdout: BufReader<std::process::ChildStdout>,
    pub url: String,
    pub log: PathBuf,
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the mock binary with an optional config, logging what it sends into `dir`.
pub fn start_mock(dir: &Path, config: Option<&str>, tasks: &Path) -> Mock {
    let log = dir.join("mock-log.jsonl");
    let mut cmd = Command::new(BIN);
    cmd.args(["mock", "--port", "0", "--tasks"])
        .arg(tasks)
        .arg("--log")
        .arg(&log);
    if let Some(c) = config {
        let p = dir.join("mock.toml");
        std::fs::write(&p, c).unwrap();
        cmd.arg("--config").arg(p);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    let mut stdout = BufReader::new(stdout);
    stdout.read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("callcheck mock listening on ")
        .unwrap_or_else(|| panic!("unexpected first line from mock: {line:?}"))
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    Mock {
        child,
        _stdout: stdout,
        url,
        log,
    }
}

/// Runs collect with the given arguments (plus env), returning its output.
pub fn collect(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("collect").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

pub fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "collect failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reads the mock's log: (served model id, task, sample, attempt) → what was sent.
pub fn read_log(path: &Path) -> BTreeMap<(String, String, u64, u32), SentRecord> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let r: SentRecord = serde_json::from_str(line).unwrap();
        let key = (r.model.clone(), r.task.clone(), r.sample, r.attempt);
        assert!(
            out.insert(key.clone(), r).is_none(),
            "the mock answered {key:?} twice"
        );
    }
    out
}

pub fn sha(bytes: &[u8]) -> String {
    callcheck::task::sha256_hex(bytes)
}

/// Every file under `root`, relative path → bytes.
pub fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() {
            let rel = e
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.insert(rel, std::fs::read(e.path()).unwrap());
        }
    }
    out
}

/// A hash of one directory's whole content (names and bytes).
pub fn dir_hash(dir: &Path) -> String {
    let mut all = Vec::new();
    for (name, bytes) in files(dir) {
        all.extend_from_slice(name.as_bytes());
        all.push(0);
        all.extend_from_slice(sha(&bytes).as_bytes());
        all.push(b'\n');
    }
    sha(&all)
}

/// Finished run directories (`runs/<model>/<task>/<run-id>`, no dot-names) → content hash.
pub fn finished_runs(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    for r in callcheck::runs::scan(root).runs {
        out.insert(r.dir.clone(), dir_hash(&r.dir));
    }
    out
}

/// A models config for the given rows: (name, served model, stream, concurrency).
pub fn models_config(url: &str, rows: &[(&str, &str, bool, usize)], extra: &str) -> String {
    let mut s = String::new();
    for (name, model, stream, conc) in rows {
        s.push_str(&format!(
            "[[model]]\nname = \"{name}\"\nbase_url = \"{url}\"\nmodel = \"{model}\"\nstream = {stream}\nconcurrency = {conc}\ntimeout_secs = 20\n{extra}[model.params]\ntemperature = 0.7\nmax_tokens = 512\n\n"
        ));
    }
    s
}

/// One request a [`Loopback`] server received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

/// What a [`Loopback`] server answers.
pub enum Reply {
    /// A whole response with a Content-Length.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// A chunked 200 response: `prefix`, then `chunk` over and over until the client leaves.
    Endless { prefix: Vec<u8>, chunk: Vec<u8> },
    /// Accept the request and never answer (until the client leaves).
    Stall,
}

impl Reply {
    pub fn json(status: u16, body: impl Into<Vec<u8>>) -> Reply {
        Reply::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into(),
        }
    }
}

/// A hand-rolled HTTP/1.1 server on an ephemeral loopback port, for endpoints the mock will
/// not imitate (hostile sizes, stalls, echoed secrets). Every request is logged in `seen`.
pub struct Loopback {
    /// `http://127.0.0.1:PORT/v1`
    pub url: String,
    pub seen: std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
}

pub fn loopback<F>(handler: F) -> Loopback
where
    F: Fn(&Seen) -> Reply + Send + Sync + 'static,
{
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let handler = std::sync::Arc::new(handler);
    let log = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let handler = handler.clone();
            let log = log.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut parts = line.split_whitespace();
                    let method = parts.next().unwrap_or_default().to_string();
                    let path = parts.next().unwrap_or_default().to_string();
                    let mut headers = BTreeMap::new();
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        let h = h.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = h.split_once(':') {
                            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                        }
                    }
                    let len: usize = headers
                        .get("content-length")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    let mut body = vec![0; len];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let req = Seen {
                        method,
                        path,
                        headers,
                        body,
                    };
                    log.lock().unwrap().push(req.clone());
                    match handler(&req) {
                        Reply::Full {
                            status,
                            headers,
                            body,
                        } => {
                            let mut head = format!(
                                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n",
                                body.len()
                            );
                            for (k, v) in headers {
                                head.push_str(&format!("{k}: {v}\r\n"));
                            }
                            head.push_str("\r\n");
                            if conn.write_all(head.as_bytes()).is_err()
                                || conn.write_all(&body).is_err()
                            {
                                return;
                            }
                        }
                        Reply::Endless { prefix, chunk } => {
                            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                            let frame = |b: &[u8]| {
                                let mut f = format!("{:x}\r\n", b.len()).into_bytes();
                                f.extend_from_slice(b);
                                f.extend_from_slice(b"\r\n");
                                f
                            };
                            if conn.write_all(head.as_bytes()).is_err()
                                || conn.write_all(&frame(&prefix)).is_err()
                            {
                                return;
                            }
                            let framed = frame(&chunk);
                            while conn.write_all(&framed).is_ok() {}
                            return;
                        }
                        Reply::Stall => {
                            let mut sink = [0u8; 64];
                            // Returns when the client closes the connection.
                            while reader.get_mut().read(&mut sink).unwrap_or(0) > 0 {}
                            return;
                        }
                    }
                }
            });
        }
    });
    Loopback {
        url: format!("http://127.0.0.1:{port}/v1"),
        seen,
    }
}

/// A minimal chat completion: prose, or one call of `tool` with `args` (JSON text).
pub fn completion(prompt_tokens: u64, call: Option<(&str, &str)>) -> String {
    let msg = match call {
        None => r#"{"role":"assistant","content":"It is sunny."}"#.to_string(),
        Some((tool, args)) => format!(
            r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":"c1","type":"function","function":{{"name":"{tool}","arguments":{}}}}}]}}"#,
            serde_json::to_string(args).unwrap()
        ),
    };
    format!(
        r#"{{"id":"x","object":"chat.completion","choices":[{{"index":0,"message":{msg},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":{prompt_tokens},"completion_tokens":5}}}}"#
    )
}

/// The binary's arguments for `collect --config CFG --tasks TASKS --runs RUNS EXTRA…`, for
/// tests that start the process themselves (to interrupt or kill it) or run it several times.
pub fn collect_argv(cfg: &Path, tasks: &Path, runs: &Path, extra: &[&str]) -> Vec<String> {
    let mut a = vec![
        "collect".to_string(),
        "--config".into(),
        cfg.to_string_lossy().into_owned(),
        "--tasks".into(),
        tasks.to_string_lossy().into_owned(),
        "--runs".into(),
        runs.to_string_lossy().into_owned(),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// Runs `collect --config CFG --tasks TASKS --runs RUNS EXTRA…` with `env` added.
pub fn collect_in(
    cfg: &Path,
    tasks: &Path,
    runs: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(collect_argv(cfg, tasks, runs, extra));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Finished run folders under a runs root (`<model>/<task>/<run-id>`, no dot-names): they
/// appear by a rename, whole, so counting them is an event a test can wait for.
pub fn finished_run_count(root: &Path) -> usize {
    walkdir::WalkDir::new(root)
        .min_depth(3)
        .max_depth(3)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_dir() && !e.file_name().to_string_lossy().starts_with('.'))
        .count()
}

/// What [`wait_for_runs`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// `root` holds the runs waited for; the child is still running.
    Reached,
    /// The child exited first (the collection was done).
    Exited,
}

/// Waits until `root` holds at least `n` finished runs or `child` exits, polling. A test that
/// acts on a collection at some point (Ctrl-C, kill -9) waits for an event, not for a time, so a
/// loaded machine makes it slower, never wrong; `limit` is a generous bound whose passing fails
/// the test with what it waited for.
pub fn wait_for_runs(
    child: &mut Child,
    root: &Path,
    n: usize,
    limit: std::time::Duration,
) -> Waited {
    let t0 = std::time::Instant::now();
    loop {
        if finished_run_count(root) >= n {
            return Waited::Reached;
        }
        if child.try_wait().unwrap().is_some() {
            return Waited::Exited;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "collect had written {} of the {n} finished runs waited for under {} after {limit:?}: is the machine overloaded, or is collect stuck?",
                finished_run_count(root),
                root.display()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Starts the mock (scripted by `mock_config`, over `tasks`) and writes `dir/callcheck.toml`
/// asking it for `rows` (as [`models_config`]): the set-up of most collect tests.
pub fn mock_and_config(
    dir: &Path,
    mock_config: Option<&str>,
    tasks: &Path,
    rows: &[(&str, &str, bool, usize)],
) -> (Mock, PathBuf) {
    let mock = start_mock(dir, mock_config, tasks);
    let cfg = dir.join("callcheck.toml");
    std::fs::write(&cfg, models_config(&mock.url, rows, "")).unwrap();
    (mock, cfg)
}

/// The model id a [`gateway`] serves and a [`row_config`] asks for.
pub const SERVED: &str = "served";

/// What a [`gateway`] answers to `GET /v1/models`.
pub const SERVED_LIST: &str = r#"{"object":"list","data":[{"id":"served"}]}"#;

/// One cell, three samples, short backoffs: the collect arguments of the loopback tests.
pub const ONE_CELL: [&str; 6] = [
    "--k",
    "3",
    "--backoff-ms",
    "5",
    "--only",
    "basic-weather-city",
];

/// A loopback OpenAI-compatible server that serves the one model [`SERVED`]: `GET /v1/models`
/// lists it, every other request is answered by `chat`.
pub fn gateway<F>(chat: F) -> Loopback
where
    F: Fn(&Seen) -> Reply + Send + Sync + 'static,
{
    loopback(move |req| {
        if req.path == "/v1/models" {
            Reply::json(200, SERVED_LIST)
        } else {
            chat(req)
        }
    })
}

/// The sample number a request carries in collect's sample header (`<task>/<sample>/<attempt>`).
pub fn sample_of(req: &Seen) -> Option<usize> {
    req.headers
        .get("x-callcheck-sample")
        .and_then(|t| t.split('/').nth(1))
        .and_then(|i| i.parse().ok())
}

/// Writes `dir/callcheck.toml` with one row `row` asking `base_url` for [`SERVED`], followed by
/// `lines` (more keys of the row, then any of its tables).
pub fn row_config(dir: &Path, base_url: &str, lines: &str) -> PathBuf {
    let cfg = dir.join("callcheck.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[model]]\nname = \"row\"\nbase_url = \"{base_url}\"\nmodel = \"{SERVED}\"\n{lines}"
        ),
    )
    .unwrap();
    cfg
}

/// Starts the binary with `args`, its output discarded: a collect a test will kill.
pub fn spawn_quiet(args: &[String]) -> Child {
    Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Runs `build --cache cache --tasks <corpus> --runs RUNS --out OUT` in `dir` (the cache beside
/// the site, in `dir`): what collect tests check their runs against.
pub fn build_in(dir: &Path, runs: &Path, out: &Path) -> Output {
    Command::new(BIN)
        .current_dir(dir)
        .args(["build", "--cache", "cache", "--tasks"])
        .arg(corpus())
        .arg("--runs")
        .arg(runs)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}
