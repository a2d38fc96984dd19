//! The mock's streaming-path server bugs (issue 30) through the real binaries over loopback: a
//! scripted model with vLLM hermes' and xlam's empty-argument bugs (#28806, #47901) is
//! collected as two rows, streamed and not, on the corpus's `empty-` tasks; the streamed row's
//! verdicts name the dropped `{}`, and `compare` isolates the lost arguments to
//! `stream: false → true` on the one task where a call follows a parameterless one.

use crate::support::collect::*;
use callcheck::score::score;
use callcheck::taxonomy::{Label, Outcome};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;

const MOCK: &str = r#"seed = 7

[[model]]
name = "mock-vllm-hermes"
stream_bugs = ["drop_empty_arguments", "drop_arguments_after_empty"]
"#;

const ROWS: [(&str, &str, bool, usize); 2] = [
    ("hermes", "mock-vllm-hermes", false, 4),
    ("hermes-stream", "mock-vllm-hermes", true, 4),
];

#[test]
fn the_empty_argument_bugs_show_on_the_streamed_row_and_compare_isolates_them() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = tmp.path().join("tasks");
    std::fs::create_dir(&tasks).unwrap();
    let mut ids = Vec::new();
    for e in std::fs::read_dir(corpus().join("empty")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, tasks.join(p.file_name().unwrap())).unwrap();
        ids.push(p.file_stem().unwrap().to_string_lossy().into_owned());
    }
    ids.sort();
    assert_eq!(
        ids,
        [
            "empty-after-args",
            "empty-all-optional",
            "empty-parallel",
            "empty-server-time",
            "empty-then-args"
        ]
    );
    let mock = start_mock(tmp.path(), Some(MOCK), &tasks);
    let cfg = tmp.path().join("callcheck.toml");
    std::fs::write(&cfg, models_config(&mock.url, &ROWS, "")).unwrap();
    let runs = tmp.path().join("runs");
    ok(&collect_in(
        &cfg,
        &tasks,
        &runs,
        &["--k", "5", "--backoff-ms", "5"],
        &[],
    ));

    // Every verdict, by (row, task): the JSON path passes everything; the stream loses the
    // arguments of the call after the parameterless one, and passes the rest with the dropped
    // `{}` named in the detail.
    let loaded = callcheck::task::load(&tasks).unwrap();
    let mut verdicts: BTreeMap<(String, String), Vec<(Outcome, String)>> = BTreeMap::new();
    for r in callcheck::runs::scan(&runs).runs {
        let task = loaded.iter().find(|t| t.id == r.task_id).unwrap();
        for s in &r.samples {
            let v = score(task, &r.read_sample(s).unwrap().transcript());
            verdicts
                .entry((r.model.clone(), r.task_id.clone()))
                .or_default()
                .push((v.outcome, v.detail));
        }
    }
    assert_eq!(verdicts.len(), 10);
    for ((row, task), vs) in &verdicts {
        assert_eq!(vs.len(), 5, "{row}/{task}");
        for (outcome, detail) in vs {
            let want = if row == "hermes-stream" && task == "empty-then-args" {
                Outcome::Fail(Label::MissingRequired)
            } else {
                Outcome::Pass
            };
            assert_eq!(*outcome, want, "{row}/{task}: {detail}");
            // Every task has a call whose arguments are `{}`: the stream drops it, and the
            // detail says so; the JSON path sends it.
            let names_the_drop = detail.contains("no arguments were streamed (taken as {})");
            assert_eq!(
                names_the_drop,
                row == "hermes-stream",
                "{row}/{task}: {detail}"
            );
            if *outcome != Outcome::Pass {
                assert!(
                    detail.contains("call 2 (get_weather)") && detail.contains("city"),
                    "{detail}"
                );
            }
        }
    }

    // compare: the two rows differ by `stream` alone, and only empty-then-args is worse.
    let o = Command::new(BIN)
        .current_dir(tmp.path())
        .args(["build", "--tasks"])
        .arg(&tasks)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("site/data/compare.json")).unwrap())
            .unwrap();
    let c = &doc["comparisons"][0];
    assert_eq!(doc["comparisons"].as_array().unwrap().len(), 1, "{doc:#}");
    assert_eq!(
        c["settings"],
        serde_json::json!([{"setting": "stream", "a": "false", "b": "true"}])
    );
    for cell in c["cells"].as_array().unwrap() {
        let want = if cell["task"] == "empty-then-args" {
            "worse"
        } else {
            "no_evidence"
        };
        assert_eq!(cell["direction"], want, "{cell}");
    }
    let gained: Vec<&Value> = c["labels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["b"].as_u64().unwrap_or(0) > 0)
        .collect();
    assert_eq!(gained.len(), 1, "{}", c["labels"]);
    assert_eq!(gained[0]["label"], "missing_required");
    assert_eq!(gained[0]["b"], 5);
    let o = Command::new(BIN)
        .current_dir(tmp.path())
        .args(["compare", "hermes", "hermes-stream", "--tasks"])
        .arg(&tasks)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("differs: stream: false → true"), "{out}");
}
