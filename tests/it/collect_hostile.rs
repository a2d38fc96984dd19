//! Hostile or misconfigured endpoints against the real collect binary, served by a hand-rolled
//! loopback server (`crate::support::collect::loopback`): a huge and an endless `/v1/models` are read
//! up to the preflight's cap and kept as a bounded summary; Ctrl-C stops a stalled preflight at
//! once; the preflight honours `--retries` and reports its own probe timeout.

use crate::support::collect::*;
use callcheck::collect::client::PREFLIGHT_MAX_BODY;
use callcheck::runs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A chat handler for an honest server: the tools count in prompt_tokens, prose answers.
fn chat(req: &Seen) -> Reply {
    let with_tools = String::from_utf8_lossy(&req.body).contains("\"tools\"");
    Reply::json(200, completion(if with_tools { 80 } else { 30 }, None))
}

fn config(dir: &Path, url: &str, timeout_secs: u64) -> PathBuf {
    row_config(dir, url, &format!("timeout_secs = {timeout_secs}\n"))
}

/// Runs collect over one cell with `extra` flags and `env`.
fn run(cfg: &Path, runs: &Path, extra: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut a = ONE_CELL.to_vec();
    a.extend_from_slice(extra);
    collect_in(cfg, &corpus(), runs, &a, env)
}

fn cell_json_sizes(root: &Path) -> Vec<u64> {
    runs::scan(root)
        .runs
        .iter()
        .map(|r| std::fs::metadata(r.dir.join("cell.json")).unwrap().len())
        .collect()
}

/// A model list whose first entry is the served id, then `n` more ids.
fn big_list(n: usize) -> Vec<u8> {
    let mut s = String::from(r#"{"object":"list","data":[{"id":"served","object":"model"}"#);
    for i in 0..n {
        s.push_str(&format!(
            r#",{{"id":"junk-{i:08}","object":"model","owned_by":"x"}}"#
        ));
    }
    s.push_str("]}");
    s.into_bytes()
}

fn check_bounded_summary(runs_root: &Path) {
    let all = runs::scan(runs_root).runs;
    assert_eq!(all.len(), 1, "one finished cell");
    let ep = &all[0].cell.server["endpoints"][0];
    let models = &ep["models"];
    assert_eq!(models["truncated"], true, "{models}");
    let ids = models["ids"].as_array().unwrap();
    assert!(
        ids.len() <= callcheck::collect::preflight::MAX_IDS + 1,
        "{}",
        ids.len()
    );
    assert_eq!(ids[0], "served");
    assert!(models["count"].as_u64().unwrap() > 1000, "{models}");
    assert!(models.get("data").is_none(), "no raw body: {models}");
    let p = &all[0].cell.server["preflight"];
    assert_eq!(p["model_id"]["ok"], true, "{p}");
    for size in cell_json_sizes(runs_root) {
        assert!(size < 32 * 1024, "cell.json is {size} bytes");
    }
}

#[test]
fn an_oversized_model_list_is_read_up_to_the_cap_and_summarised() {
    let tmp = tempfile::tempdir().unwrap();
    // ~60 MB, as in the report that found it.
    let list = big_list(1_000_000);
    assert!(list.len() > 50 << 20);
    let server = loopback(move |req| match req.path.as_str() {
        "/v1/models" => Reply::json(200, list.clone()),
        _ if req.method == "POST" => chat(req),
        _ => Reply::json(404, "{}"),
    });
    let cfg = config(tmp.path(), &server.url, 20);
    let runs = tmp.path().join("runs");
    let t0 = Instant::now();
    let out = run(&cfg, &runs, &[], &[]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("preflight row: GET ") && err.contains("body cut at the preflight's cap"),
        "{err}"
    );
    check_bounded_summary(&runs);
    eprintln!(
        "oversized list: collect took {:.1} s, cell.json {:?} bytes (cap {PREFLIGHT_MAX_BODY} bytes)",
        t0.elapsed().as_secs_f64(),
        cell_json_sizes(&runs)
    );
}

#[test]
fn an_endless_model_list_is_cut_at_the_cap_not_at_the_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let server = loopback(|req| match req.path.as_str() {
        "/v1/models" => Reply::Endless {
            prefix: br#"{"object":"list","data":[{"id":"served"}"#.to_vec(),
            chunk: br#",{"id":"again","object":"model"}"#.repeat(64),
        },
        _ if req.method == "POST" => chat(req),
        _ => Reply::json(404, "{}"),
    });
    // A row timeout far longer than the test may take: the cap must end the read.
    let cfg = config(tmp.path(), &server.url, 120);
    let runs = tmp.path().join("runs");
    let t0 = Instant::now();
    let out = run(&cfg, &runs, &[], &[]);
    ok(&out);
    let secs = t0.elapsed().as_secs_f64();
    assert!(secs < 15.0, "took {secs:.1} s");
    check_bounded_summary(&runs);
}

#[test]
fn a_model_list_cut_before_the_served_id_is_a_warning_not_a_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let server = loopback(|req| match req.path.as_str() {
        "/v1/models" => Reply::Endless {
            prefix: br#"{"object":"list","data":[{"id":"other"}"#.to_vec(),
            chunk: br#",{"id":"again"}"#.repeat(64),
        },
        _ if req.method == "POST" => chat(req),
        _ => Reply::json(404, "{}"),
    });
    let cfg = config(tmp.path(), &server.url, 20);
    let runs = tmp.path().join("runs");
    let out = run(&cfg, &runs, &[], &[]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot tell whether \"served\" is served"),
        "{err}"
    );
    assert_eq!(runs::scan(&runs).runs.len(), 1, "the row was collected");
}

#[test]
fn ctrl_c_stops_a_stalled_preflight_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let server = loopback(|_| Reply::Stall);
    let cfg = config(tmp.path(), &server.url, 120);
    let runs = tmp.path().join("runs");
    let child = Command::new(BIN)
        .args(collect_argv(&cfg, &corpus(), &runs, &ONE_CELL))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the preflight is stalled on its first request.
    let t0 = Instant::now();
    while server.seen.lock().unwrap().is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no request came");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let sent = Instant::now();
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    // "At once" against the 120 s the stalled request would take: 10 s leaves room for a
    // loaded machine to schedule the exit.
    assert!(
        took < Duration::from_secs(10),
        "took {took:?} after Ctrl-C: {err}"
    );
    assert!(err.contains("interrupted during the preflight"), "{err}");
    assert!(runs::scan(&runs).runs.is_empty());
}

#[test]
fn the_preflight_honours_retries_and_reports_its_own_timeout() {
    let probes = |server: &Loopback| {
        server
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.headers.contains_key("x-callcheck-preflight"))
            .count()
    };
    // Probes refused with a retryable 503 (samples answered): one attempt each under
    // --retries 0, where the preflight used to make three whatever --retries said.
    let tmp = tempfile::tempdir().unwrap();
    let busy = gateway(|req| {
        if req.headers.contains_key("x-callcheck-preflight") {
            Reply::json(503, r#"{"error":{"message":"busy"}}"#)
        } else {
            chat(req)
        }
    });
    let cfg = config(tmp.path(), &busy.url, 10);
    let out = run(&cfg, &tmp.path().join("runs"), &["--retries", "0"], &[]);
    ok(&out);
    assert_eq!(probes(&busy), 6, "one attempt per probe under --retries 0");

    // Probes that stall: the first one times out (after the row's 1 s, shorter than the
    // preflight's own), says which timeout fired, and the other probes are not sent.
    let tmp = tempfile::tempdir().unwrap();
    let stalled = gateway(|req| {
        if req.headers.contains_key("x-callcheck-preflight") {
            Reply::Stall
        } else {
            chat(req)
        }
    });
    let cfg = config(tmp.path(), &stalled.url, 1);
    let t0 = Instant::now();
    // --verbose: each probe on its own line, the stalled one with its timeout.
    let out = run(
        &cfg,
        &tmp.path().join("runs"),
        &["--retries", "0", "--verbose"],
        &[],
    );
    ok(&out);
    let secs = t0.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(probes(&stalled), 1, "{err}");
    assert!(
        err.contains("preflight row: probe tools: no response after 1 attempt: timed out after 1 s (the preflight's probe timeout)"),
        "{err}"
    );
    assert!(
        err.contains("preflight stream: not probed: an earlier probe got no answer within 1 s"),
        "{err}"
    );
    assert!(secs < 8.0, "took {secs:.1} s");
}

#[test]
fn a_key_the_server_echoes_is_redacted_from_everything_collect_prints_and_stores() {
    const KEY: &str = "sk-callcheck-test-0123456789abcdef";
    let tmp = tempfile::tempdir().unwrap();
    // A gateway that echoes the bearer token: in a 401 body, in a header, in a completion.
    let server = loopback(|req| {
        let auth = req
            .headers
            .get("authorization")
            .cloned()
            .unwrap_or_default();
        let echo = |status: u16, body: String| Reply::Full {
            status,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("x-request-id".into(), auth.clone()),
            ],
            body: body.into_bytes(),
        };
        if req.path == "/v1/models" {
            return echo(
                401,
                format!(r#"{{"error":{{"message":"invalid key: {auth}"}}}}"#),
            );
        }
        if req.headers.contains_key("x-callcheck-preflight") {
            return echo(
                400,
                format!(r#"{{"error":{{"message":"refused for {auth}"}}}}"#),
            );
        }
        let tag = req
            .headers
            .get("x-callcheck-sample")
            .cloned()
            .unwrap_or_default();
        if tag.ends_with("/1/0") {
            return echo(
                401,
                format!(r#"{{"error":{{"message":"invalid key: {auth}"}}}}"#),
            );
        }
        let body = completion(10, None).replace("It is sunny.", &format!("Your key is {auth}"));
        echo(200, body)
    });
    let cfg = row_config(
        tmp.path(),
        &server.url,
        "api_key_env = \"CALLCHECK_TEST_KEY\"\ntimeout_secs = 10\n",
    );
    let runs = tmp.path().join("runs");
    let out = run(&cfg, &runs, &[], &[("CALLCHECK_TEST_KEY", KEY)]);
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{printed}");
    // The server did get the key, and did echo it.
    assert!(
        server.seen.lock().unwrap().iter().all(|r| r
            .headers
            .get("authorization")
            .map(String::as_str)
            == Some(&format!("Bearer {KEY}"))),
    );
    assert!(!printed.contains(KEY), "printed: {printed}");
    assert!(
        printed.contains("[REDACTED]"),
        "the warnings show where: {printed}"
    );
    let stored = files(&runs);
    assert!(!stored.is_empty());
    for (name, bytes) in &stored {
        assert!(
            !String::from_utf8_lossy(bytes).contains(KEY),
            "{name} holds the key"
        );
    }
    let run = &runs::scan(&runs).runs[0];
    let mut redacted = 0;
    for s in &run.samples {
        let dir = run.sample_dir(s);
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
        // Body, header and (for the 401) the error text each held it once.
        let n = meta["redacted_secrets"].as_u64().unwrap_or(0);
        assert!(n >= 2, "{meta}");
        assert_eq!(
            meta["headers"]["x-request-id"], "Bearer [REDACTED]",
            "{meta}"
        );
        let body = std::fs::read_to_string(dir.join("response.json")).unwrap();
        assert!(body.contains("[REDACTED]"), "{body}");
        redacted += n;
    }
    assert!(redacted >= 6);
    let cell = std::fs::read_to_string(run.dir.join("cell.json")).unwrap();
    assert!(cell.contains("[REDACTED]"), "{cell}");
}
