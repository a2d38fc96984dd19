//! Value accuracy and BFCL-style accuracy on the site: per cell on the task page, pooled by task
//! on the tag and model pages, only for tasks that come from BFCL or list acceptable values
//! (`accept`). The corpus is tests/fixtures/value-tasks (three tasks in the shape `callcheck
//! import bfcl` gives, not BFCL's data) plus one hand-written task without `accept`; the runs
//! are written here, reply by reply, so every count is known. The expected intervals were
//! computed apart from callcheck (Wilson per cell; Wilson on n/deff with t at C−1 df pooled).

#[path = "site_support/mod.rs"]
mod site_support;

use scraper::{Html, Selector};
use serde_json::{Value, json};
use site_support::*;
use std::path::Path;

/// What one sample's model answered.
enum Reply {
    /// Tool calls: (tool, arguments).
    Calls(Vec<(&'static str, Value)>),
    /// Prose, no call.
    Prose,
}

fn weather(city: &str) -> Reply {
    Reply::Calls(vec![("weather_get", json!({ "city": city }))])
}

fn response(model: &str, reply: &Reply) -> Value {
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
fn write_run(
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

/// The text of each `<td>` of the table row whose header is `name`, in the table that follows
/// the element with id `section` (the first such row).
fn row(page: &str, section: &str, name: &str) -> Vec<String> {
    let tr = Selector::parse("tr").unwrap();
    let th = Selector::parse("th").unwrap();
    let td = Selector::parse("td").unwrap();
    let start = page
        .find(&format!("id=\"{section}\""))
        .unwrap_or_else(|| panic!("no #{section}"));
    // The rows after the section's heading: parse only that part of the page.
    let part = Html::parse_fragment(&page[start..]);
    let found = part
        .select(&tr)
        .find(|r| {
            r.select(&th)
                .next()
                .is_some_and(|h| h.text().collect::<String>().trim() == name)
        })
        .unwrap_or_else(|| panic!("no row {name:?} after #{section}"));
    found
        .select(&td)
        .map(|c| {
            c.text()
                .collect::<Vec<_>>()
                .join(" ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn build_fixture(tmp: &Path) -> std::path::PathBuf {
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

#[test]
fn value_and_bfcl_style_accuracy_per_cell_tag_and_model() {
    let tmp = tempfile::tempdir().unwrap();
    let out = build_fixture(tmp.path());

    // Task page, one row per model: conformance, value accuracy, BFCL-style, labels.
    let task = read(&out, "tasks/bfcl-fixture-weather.html");
    let m1 = row(&task, "results", "m1");
    assert!(m1[0].contains("4/5 · 80 % [38–96 %]"), "{m1:?}");
    assert_eq!(m1[1], "3/4 · 75 % [30–95 %]");
    assert_eq!(m1[2], "3/5 · 60 % [23–88 %]");
    let m2 = row(&task, "results", "m2");
    assert!(m2[0].contains("3/4 · 75 % [30–95 %]"), "{m2:?}");
    assert_eq!(m2[1], "0/3 · 0 % [0–56 %]");
    assert_eq!(m2[2], "0/4 · 0 % [0–49 %]");
    assert!(task.contains("<b>Value accuracy</b>: of the samples that passed conformance"));
    assert!(task.contains("<b>BFCL-style accuracy</b>: the share of all scored samples"));
    // A question that expects no call has no value to compare; BFCL-style is its pass rate.
    let irrelevance = read(&out, "tasks/bfcl-fixture-irrelevance.html");
    let m1 = row(&irrelevance, "results", "m1");
    assert_eq!(m1[1], "– no passing sample with a value to compare");
    assert_eq!(m1[2], "2/3 · 67 % [21–94 %]");

    // Model pages: pooled over the model's BFCL tasks with the interval by task.
    let model = read(&out, "models/m1.html");
    let all = row(&model, "values", "all such tasks");
    assert_eq!(all[0], "3", "tasks: {all:?}");
    assert!(all[1].contains("9/11 · 82 % [52–95 %]"), "{all:?}");
    assert_eq!(all[2], "6/7 · 86 % [49–97 %] 2 tasks");
    assert_eq!(all[3], "8/11 · 73 % [43–90 %] 3 tasks");
    // The hand-written task's tags (enum, integer) are not among them: no row of its own.
    let section = &model[model.find("id=\"values\"").unwrap()..model.find("id=\"tasks\"").unwrap()];
    assert!(section.contains(">simple-python</a>"), "{section}");
    assert!(
        !section.contains(">enum</a>") && !section.contains(">integer</a>"),
        "{section}"
    );
    let model = read(&out, "models/m2.html");
    let all = row(&model, "values", "all such tasks");
    assert!(all[1].contains("6/7 · 86 % [49–97 %]"), "{all:?}");
    // Two tasks that disagree (0/3 and 3/3): the interval by task says little, where treating
    // the six samples as independent would claim [19–81 %].
    assert_eq!(all[2], "3/6 · 50 % [0–100 %] 2 tasks · design effect 6.00");
    assert_eq!(all[3], "3/7 · 43 % [0–100 %] 2 tasks · design effect 6.86");
    let parallel = row(&model, "values", "parallel");
    assert_eq!(parallel[2], "3/3 · 100 % [44–100 %] 1 task");

    // Tag pages: per model over the tag's tasks.
    let tag = read(&out, "tags/simple-python.html");
    let m1 = row(&tag, "values", "m1");
    assert_eq!(m1[0], "1");
    assert!(m1[1].contains("4/5 · 80 % [38–96 %]"), "{m1:?}");
    assert_eq!(m1[2], "3/4 · 75 % [30–95 %] 1 task");
    assert_eq!(m1[3], "3/5 · 60 % [23–88 %] 1 task");
    let m2 = row(&tag, "values", "m2");
    assert_eq!(m2[2], "0/3 · 0 % [0–56 %] 1 task");
    assert!(tag.contains("Over this shape's 1 task that come from BFCL"));
    let tag = read(&out, "tags/bfcl.html");
    assert!(tag.contains("Over this shape's 3 tasks"));
    assert_eq!(
        row(&tag, "values", "m1")[3],
        "8/11 · 73 % [43–90 %] 3 tasks"
    );
    let tag = read(&out, "tags/irrelevance.html");
    assert_eq!(
        row(&tag, "values", "m1")[2],
        "– no passing sample with a value to compare"
    );

    // data/matrix.json carries the same pooled figures.
    let matrix: Value = serde_json::from_str(&read(&out, "data/matrix.json")).unwrap();
    let m2 = &matrix["models"][1];
    assert_eq!(m2["model"], "m2");
    let values = &m2["values_by_task"];
    assert_eq!(values["value_accuracy"]["count"], 3);
    assert_eq!(values["value_accuracy"]["of"], 6);
    assert_eq!(values["value_accuracy"]["tasks"], 2);
    assert_eq!(values["value_accuracy"]["design_effect"], 6.0);
    assert_eq!(values["bfcl_style"]["of"], 7);
    assert_eq!(values["conformance"]["passes"], 6);
    assert_eq!(m2["tags"]["parallel"]["values_by_task"]["bfcl_style"]["count"], 3);
    let m1 = &matrix["models"][0];
    assert_eq!(m1["values_by_task"]["bfcl_style"]["tasks"], 3);
    assert!(m1["tags"]["enum"].get("values_by_task").is_none());

    // The hand-written task, and a tag only it has, show none of it.
    for page in ["tasks/convert-currency.html", "tags/enum.html"] {
        let html = read(&out, page);
        assert!(!html.contains("BFCL-style"), "{page}");
        assert!(!html.contains("id=\"values\""), "{page}");
    }
}

#[test]
fn a_corpus_without_accept_shows_no_value_accuracy() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let mut pages = 0;
    for (path, bytes) in tree(&out) {
        if !path.ends_with(".html") || path.starts_with("t/") {
            continue;
        }
        pages += 1;
        let html = String::from_utf8(bytes).unwrap();
        assert!(!html.contains("BFCL-style"), "{path}");
        assert!(!html.contains("id=\"values\""), "{path}");
    }
    assert!(pages > 10, "only {pages} pages");
    assert!(!read(&out, "data/matrix.json").contains("values_by_task"));
}
