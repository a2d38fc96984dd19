//! Hostile or misconfigured endpoints against the real collect binary, served by a hand-rolled
//! loopback server (`collect_support::loopback`): a huge and an endless `/v1/models` are read
//! up to the preflight's cap and kept as a bounded summary; Ctrl-C stops a stalled preflight at
//! once; the preflight honours `--retries` and reports its own probe timeout.

mod collect_support;

use callcheck::collect::client::PREFLIGHT_MAX_BODY;
use callcheck::runs;
use collect_support::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A chat handler for an honest server: the tools count in prompt_tokens, prose answers.
fn chat(req: &Seen) -> Reply {
    let with_tools = String::from_utf8_lossy(&req.body).contains("\"tools\"");
    Reply::json(200, completion(if with_tools { 80 } else { 30 }, None))
}

fn config(dir: &Path, url: &str, timeout_secs: u64) -> PathBuf {
    let cfg = dir.join("callcheck.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[model]]\nname = \"row\"\nbase_url = \"{url}\"\nmodel = \"served\"\ntimeout_secs = {timeout_secs}\n"
        ),
    )
    .unwrap();
    cfg
}

fn args<'a>(cfg: &'a Path, runs: &'a Path, extra: &[&'a str]) -> Vec<String> {
    let mut a: Vec<String> = collect_args(cfg, &corpus(), runs);
    a.extend(
        ["--k", "3", "--backoff-ms", "5", "--only", "basic-weather-city"]
            .iter()
            .map(|s| s.to_string()),
    );
    a.extend(extra.iter().map(|s| s.to_string()));
    a
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
        s.push_str(&format!(r#",{{"id":"junk-{i:08}","object":"model","owned_by":"x"}}"#));
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
    let out = collect(&strs(&args(&cfg, &runs, &[])), &[]);
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
    let out = collect(&strs(&args(&cfg, &runs, &[])), &[]);
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
    let out = collect(&strs(&args(&cfg, &runs, &[])), &[]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot tell whether \"served\" is served"), "{err}");
    assert_eq!(runs::scan(&runs).runs.len(), 1, "the row was collected");
}

#[test]
fn ctrl_c_stops_a_stalled_preflight_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let server = loopback(|_| Reply::Stall);
    let cfg = config(tmp.path(), &server.url, 120);
    let runs = tmp.path().join("runs");
    let child = Command::new(BIN)
        .arg("collect")
        .args(args(&cfg, &runs, &[]))
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
    assert!(took < Duration::from_secs(3), "took {took:?} after Ctrl-C: {err}");
    assert!(err.contains("interrupted during the preflight"), "{err}");
    assert!(runs::scan(&runs).runs.is_empty());
}

#[test]
fn the_preflight_honours_retries_and_reports_its_own_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let server = loopback(|req| match req.path.as_str() {
        "/v1/models" => Reply::json(200, r#"{"object":"list","data":[{"id":"served"}]}"#),
        // Probes stall (each until its timeout); samples are answered.
        _ if req.headers.contains_key("x-callcheck-preflight") => Reply::Stall,
        _ if req.method == "POST" => chat(req),
        _ => Reply::json(404, "{}"),
    });
    let cfg = config(tmp.path(), &server.url, 1);
    let runs = tmp.path().join("runs");
    let t0 = Instant::now();
    let out = collect(&strs(&args(&cfg, &runs, &["--retries", "0"])), &[]);
    ok(&out);
    let secs = t0.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr);
    let probes = server
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.headers.contains_key("x-callcheck-preflight"))
        .count();
    assert_eq!(probes, 6, "one attempt per probe under --retries 0");
    assert!(
        err.contains("timed out after 1 s (the preflight's probe timeout)"),
        "{err}"
    );
    assert!(err.contains("preflight row: probe tool_choice_auto:"), "{err}");
    // Six probes of one second each, not 6 × 3 attempts.
    assert!(secs < 12.0, "took {secs:.1} s");
}
