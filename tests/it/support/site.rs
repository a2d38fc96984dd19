//! Helpers shared by the `site_*` integration tests: run the real binary's `build`, read back
//! the tree it wrote.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A synthetic collection in `dir` (`tasks/` and `runs/`) drawn from the fixture tasks, as
/// examples/synth.rs draws one; returns its number of samples.
pub fn synth_tree(dir: &Path, opts: &callcheck::synth::SynthOpts) -> usize {
    let templates: Vec<_> = callcheck::task::load(&fixture_tasks())
        .unwrap()
        .into_iter()
        .map(|t| {
            let b = std::fs::read(&t.file).unwrap();
            (t, b)
        })
        .collect();
    callcheck::synth::generate(dir, &templates, opts).unwrap()
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture_runs() -> PathBuf {
    repo().join("tests/fixtures/runs")
}

pub fn fixture_tasks() -> PathBuf {
    repo().join("tests/fixtures/runs-tasks")
}

/// Runs `callcheck build` and returns its output; `envs` are added to the environment.
pub fn build(
    tasks: &Path,
    runs: &Path,
    out: &Path,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_callcheck"));
    c.arg("build")
        .arg("--tasks")
        .arg(tasks)
        .arg("--runs")
        .arg(runs)
        .arg("--out")
        .arg(out)
        .args(extra);
    // A build that names no cache builds without one, as before the default cache: the tests'
    // builds share no `./.callcheck-cache` (tests/it/build_default_cache.rs tests that one).
    if !extra.iter().any(|a| *a == "--cache" || *a == "--no-cache") {
        c.arg("--no-cache");
    }
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("the callcheck binary runs")
}

/// Builds and asserts success, returning stderr.
pub fn build_ok(
    tasks: &Path,
    runs: &Path,
    out: &Path,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> String {
    let o = build(tasks, runs, out, extra, envs);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "build failed: {err}");
    err
}

/// Every file under `dir`, by `/`-separated relative path.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() {
            let rel = e.path().strip_prefix(dir).unwrap();
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.insert(rel.join("/"), std::fs::read(e.path()).unwrap());
        }
    }
    out
}

pub fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// Resolves a relative link from the page at `from` (site-relative) to a site-relative path,
/// or None when it climbs above the root.
pub fn resolve(from: &str, link: &str) -> Option<String> {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for seg in link.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

/// Copies a folder tree.
pub fn copy_tree(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(from).unwrap();
        let dest = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Chromium on PATH; a failure (never a silent pass) when it is absent.
pub fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "chromium is not installed (apt-get install -y chromium); these tests need it{}",
        if std::env::var_os("CALLCHECK_REQUIRE_CHROMIUM").is_some() {
            " and CALLCHECK_REQUIRE_CHROMIUM is set"
        } else {
            ""
        }
    );
}

// ---- a corpus with BFCL-style tasks, and runs written reply by reply ----

/// What one sample's model answered.
pub enum Reply {
    /// Tool calls: (tool, arguments).
    Calls(Vec<(&'static str, Value)>),
    /// Prose, no call.
    Prose,
}

pub fn weather(city: &str) -> Reply {
    Reply::Calls(vec![("weather_get", json!({ "city": city }))])
}

pub fn response(model: &str, reply: &Reply) -> Value {
    let message = match reply {
        Reply::Prose => json!({"role": "assistant", "content": "I cannot say for sure."}),
        Reply::Calls(calls) => json!({
            "role": "assistant",
            "content": null,
            "tool_calls": calls.iter().enumerate().map(|(i, (name, args))| json!({
                "id": format!("call_{i}"),
                "type": "function",
                "function": {"name": name, "arguments": args.to_string()},
            })).collect::<Vec<_>>(),
        }),
    };
    let finish = match reply {
        Reply::Prose => "stop",
        Reply::Calls(_) => "tool_calls",
    };
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    })
}

/// Writes one finished run of `model` on `task`, one sample per reply.
pub fn write_run(
    runs: &Path,
    tasks: &[callcheck::task::Task],
    model: &str,
    task: &str,
    replies: &[Reply],
) {
    let t = tasks
        .iter()
        .find(|t| t.id == task)
        .unwrap_or_else(|| panic!("no task {task}"));
    let run = runs.join(model).join(task).join("r0001");
    let served = format!("org/{model}");
    for (i, reply) in replies.iter().enumerate() {
        let dir = run.join("samples").join(format!("{i:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        let request = json!({"model": served, "messages": t.messages, "tools": t.tools_json});
        std::fs::write(dir.join("request.json"), request.to_string()).unwrap();
        std::fs::write(
            dir.join("response.json"),
            response(&served, reply).to_string(),
        )
        .unwrap();
        let meta = json!({"status": 200, "headers": {}, "attempts": [{"status": 200, "backoff_ms": 0, "ttfb_ms": 10.0}], "ttfb_ms": 10.0, "total_ms": 20.0, "streamed": false});
        std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    }
    let cell = json!({
        "format_version": 1, "callcheck_version": "0.1.0",
        "model": {"name": model, "base_url": "http://127.0.0.1:8000/v1", "model": served},
        "task": {"id": task, "sha256": t.sha256},
        "k": replies.len(), "run_id": "r0001",
        "started": "2026-01-01T00:00:00Z", "ended": "2026-01-01T00:01:00Z",
    });
    std::fs::write(run.join("cell.json"), cell.to_string()).unwrap();
}

/// A site whose corpus has value accuracy to show: tests/fixtures/value-tasks (three tasks in
/// the shape `callcheck import bfcl` gives) and the hand-written convert-currency, with runs of
/// two models written reply by reply (tests/it/site_values.rs asserts every count), built into
/// `tmp/site`.
pub fn value_fixture_site(tmp: &Path) -> PathBuf {
    let tasks_dir = tmp.join("tasks");
    copy_tree(&repo().join("tests/fixtures/value-tasks"), &tasks_dir);
    std::fs::copy(
        fixture_tasks().join("convert-currency.json"),
        tasks_dir.join("convert-currency.json"),
    )
    .unwrap();
    let tasks = callcheck::task::load(&tasks_dir).unwrap_or_else(|e| panic!("{e}"));
    let runs = tmp.join("runs");
    let both = || {
        Reply::Calls(vec![
            ("weather_get", json!({"city": "Tokyo"})),
            ("weather_get", json!({"city": "paris"})),
        ])
    };
    // m1 on the single call: three accepted spellings, a wrong city (a pass, no value match)
    // and prose (no_call): conformance 4/5, value 3/4, BFCL-style 3/5.
    write_run(
        &runs,
        &tasks,
        "m1",
        "bfcl-fixture-weather",
        &[
            weather("Paris"),
            weather("paris, france"),
            Reply::Calls(vec![(
                "weather_get",
                json!({"city": "Paris", "unit": "celsius"}),
            )]),
            weather("London"),
            Reply::Prose,
        ],
    );
    write_run(
        &runs,
        &tasks,
        "m1",
        "bfcl-fixture-parallel",
        &[both(), both(), both()],
    );
    // Irrelevance: two answers in prose pass, a call is spurious_call; nothing to compare.
    write_run(
        &runs,
        &tasks,
        "m1",
        "bfcl-fixture-irrelevance",
        &[Reply::Prose, Reply::Prose, weather("Paris")],
    );
    let currency = || {
        Reply::Calls(vec![(
            "convert_currency",
            json!({"amount": 1250, "from": "EUR", "to": "JPY"}),
        )])
    };
    write_run(
        &runs,
        &tasks,
        "m1",
        "convert-currency",
        &[currency(), currency(), currency()],
    );
    // m2: the wrong city every time it calls (value 0/3), prose once; the parallel task right.
    write_run(
        &runs,
        &tasks,
        "m2",
        "bfcl-fixture-weather",
        &[
            weather("London"),
            weather("London"),
            weather("London"),
            Reply::Prose,
        ],
    );
    write_run(
        &runs,
        &tasks,
        "m2",
        "bfcl-fixture-parallel",
        &[both(), both(), both()],
    );
    let out = tmp.join("site");
    build_ok(&tasks_dir, &runs, &out, &[], &[]);
    out
}
