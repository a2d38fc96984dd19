//! `callcheck export preference` through the real binary, on the demo's runs: KTO lines from
//! real failures carry the build's labels, DPO pairs from synthetic failures each `check` as
//! their label, both files have the columns TRL's trainers read, re-running is byte-identical,
//! no planted key reaches a line, and the README's loading snippet matches what is written.

use callcheck::score::score;
use callcheck::taxonomy::{Label, Outcome};
use callcheck::transcript::Transcript;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const BIN: &str = env!("CARGO_BIN_EXE_callcheck");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One demo collection (mock + collect + build) shared by the tests of this file.
struct Demo {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Demo {
    fn runs(&self) -> PathBuf {
        self.root.join("runs")
    }
    fn site(&self) -> PathBuf {
        self.root.join("site")
    }
}

fn demo() -> &'static Demo {
    static DEMO: OnceLock<Demo> = OnceLock::new();
    DEMO.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let out = Command::new(BIN)
            .current_dir(repo())
            .args(["demo", "--quiet", "--runs"])
            .arg(root.join("runs"))
            .arg("--out")
            .arg(root.join("site"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "demo failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Demo { _dir: dir, root }
    })
}

fn export(args: &[&str], runs: &Path, out: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(repo())
        .args(["export", "preference"])
        .args(args)
        .arg("--runs")
        .arg(runs)
        .arg("--out")
        .arg(out);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "export failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn read_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'));
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("line {} does not parse: {e}", i + 1))
        })
        .collect()
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

/// A list of chat messages as TRL's conversational format has them: objects with a string
/// `role` and a `content` key (string or null); assistant tool calls with string arguments.
fn assert_messages(v: &Value, what: &str) {
    let list = v
        .as_array()
        .unwrap_or_else(|| panic!("{what} is not a list"));
    assert!(!list.is_empty(), "{what} is empty");
    for m in list {
        assert!(
            m["role"].is_string(),
            "{what}: a message without a role: {m}"
        );
        let content = m
            .get("content")
            .unwrap_or_else(|| panic!("{what}: a message without content: {m}"));
        assert!(content.is_string() || content.is_null(), "{what}: {m}");
        if let Some(calls) = m.get("tool_calls") {
            for c in calls.as_array().unwrap() {
                assert_eq!(c["type"], "function", "{what}: {c}");
                assert!(
                    c["function"]["arguments"].is_string(),
                    "{what}: arguments must be a string: {c}"
                );
            }
        }
    }
}

/// The completion side: exactly one assistant message.
fn assert_assistant(v: &Value, what: &str) {
    assert_messages(v, what);
    let list = v.as_array().unwrap();
    assert_eq!(list.len(), 1, "{what}: one message");
    assert_eq!(list[0]["role"], "assistant", "{what}");
}

fn assert_tools(v: &Value) {
    for t in v.as_array().expect("tools is a list") {
        assert_eq!(t["type"], "function");
        assert!(t["function"]["name"].is_string(), "{t}");
    }
}

/// The build's label per permalink, from data/samples.csv (`pass`, `error` or the label).
fn samples_csv(site: &Path) -> BTreeMap<String, (String, String)> {
    let mut r = csv::Reader::from_path(site.join("data").join("samples.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    let (p, o, l) = (col("permalink"), col("outcome"), col("label"));
    // First-round samples only: a feedback sample (SPEC §11, `round` 1) is no example of its own.
    let round = col("round");
    r.records()
        .filter(|rec| rec.as_ref().map_or(true, |rec| &rec[round] != "1"))
        .map(|rec| {
            let rec = rec.unwrap();
            (rec[p].to_string(), (rec[o].to_string(), rec[l].to_string()))
        })
        .collect()
}

fn without_ids(m: &Value) -> Value {
    let mut m = m.clone();
    if let Some(calls) = m.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for c in calls {
            c.as_object_mut().unwrap().remove("id");
        }
    }
    m
}

#[test]
fn kto_from_real_runs_has_each_distinct_failure_once_with_the_builds_label() {
    let d = demo();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("kto.jsonl");
    let o = export(
        &["--format", "kto", "--source", "real"],
        &d.runs(),
        &out,
        &[],
    );
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    eprintln!("{stderr}");
    let lines = read_lines(&out);
    let csv = samples_csv(&d.site());
    let tasks = callcheck::task::load(&repo().join("tasks")).unwrap();

    let mut gold_tasks = BTreeSet::new();
    let mut negatives: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    let mut per_label: BTreeMap<String, usize> = BTreeMap::new();
    let mut raw_markup = false;
    for l in &lines {
        // TRL's unpaired preference columns, plus our metadata under its own key.
        assert_eq!(
            keys(l),
            BTreeSet::from(["prompt", "completion", "label", "tools", "callcheck"])
        );
        assert_messages(&l["prompt"], "prompt");
        assert_assistant(&l["completion"], "completion");
        assert_tools(&l["tools"]);
        let label = l["label"].as_bool().expect("label is a boolean");
        let meta = &l["callcheck"];
        let task = meta["task"].as_str().unwrap().to_string();
        match (label, meta["source"].as_str().unwrap()) {
            (true, "gold") => {
                assert!(gold_tasks.insert(task.clone()), "two gold lines for {task}");
                assert!(meta["permalink"].is_null() && meta["label"].is_null());
            }
            (true, "real") => {
                let p = meta["permalink"].as_str().unwrap();
                assert_eq!(csv[p].0, "pass", "{p}");
            }
            (false, "real") => {
                // A real negative: the build gave its sample exactly this label.
                let p = meta["permalink"].as_str().unwrap();
                assert!(p.starts_with(&format!("t/{}/{task}/", meta["model"].as_str().unwrap())));
                let (outcome, csv_label) = &csv[p];
                assert_eq!(outcome, "fail", "{p}");
                assert_eq!(meta["label"].as_str().unwrap(), csv_label, "{p}");
                assert!(
                    meta["stage"].is_string() && meta["detail"].is_string(),
                    "{p}"
                );
                *per_label.entry(csv_label.clone()).or_default() += 1;
                let content = l["completion"][0]["content"].as_str().unwrap_or_default();
                raw_markup |= content.contains("<tool_call>");
                // The export's identity of a completion: the message without call ids, and
                // the finish_reason (the same `{` cut at the limit and closed early are two
                // lessons).
                negatives
                    .entry((meta["model"].as_str().unwrap().into(), task))
                    .or_default()
                    .push(json!([
                        without_ids(&l["completion"][0]),
                        meta["finish_reason"]
                    ]));
            }
            other => panic!("unexpected line kind {other:?}: {}", l["callcheck"]),
        }
    }
    // A gold positive for every task of the corpus.
    let all: BTreeSet<String> = tasks.iter().map(|t| t.id.clone()).collect();
    assert_eq!(gold_tasks, all);
    // Each distinct failing completion of a cell once.
    for (cell, list) in &negatives {
        let distinct: BTreeSet<String> = list.iter().map(|m| m.to_string()).collect();
        assert_eq!(
            distinct.len(),
            list.len(),
            "a repeated negative in {cell:?}"
        );
    }
    // Nothing labelled is lost except repeats: every failed sample of the build is a line, or
    // its cell has a line with the same label.
    let mut failed = 0;
    let lines_by_permalink: BTreeSet<&str> = lines
        .iter()
        .filter_map(|l| l["callcheck"]["permalink"].as_str())
        .collect();
    let cell_labels: BTreeSet<(String, String, String)> = lines
        .iter()
        .filter(|l| l["label"] == false)
        .map(|l| {
            let m = &l["callcheck"];
            (
                m["model"].as_str().unwrap().into(),
                m["task"].as_str().unwrap().into(),
                m["label"].as_str().unwrap().into(),
            )
        })
        .collect();
    for (p, (outcome, label)) in &csv {
        if outcome != "fail" {
            continue;
        }
        failed += 1;
        if !lines_by_permalink.contains(p.as_str()) {
            let parts: Vec<&str> = p.split('/').collect();
            assert!(
                cell_labels.contains(&(parts[1].into(), parts[2].into(), label.clone())),
                "{p} ({label}) has no line and no repeat in its cell"
            );
        }
    }
    let n_neg: usize = per_label.values().sum();
    eprintln!(
        "demo: {failed} failed samples, {n_neg} negatives after folding repeats, {} gold positives, {} real positives; per label {per_label:?}",
        gold_tasks.len(),
        lines.len() - n_neg - gold_tasks.len()
    );
    assert!(failed > 0 && n_neg > 0 && n_neg <= failed);
    assert_eq!(
        per_label.keys().cloned().collect::<BTreeSet<_>>(),
        Label::ALL
            .iter()
            .map(|l| l.as_str().to_string())
            .collect::<BTreeSet<_>>(),
        "the demo shows every label"
    );
    // Model text as it came: a call left in content keeps its markup, never HTML-escaped.
    assert!(
        raw_markup,
        "no negative kept its <tool_call> markup verbatim"
    );
    assert!(stderr.contains("by label:") && stderr.contains("by model:"));
    assert!(stderr.contains("transport errors left out"));

    // The same runs and flags give the same bytes.
    let again = tmp.path().join("again.jsonl");
    export(
        &["--format", "kto", "--source", "real"],
        &d.runs(),
        &again,
        &[],
    );
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&again).unwrap());

    // With --keep-repeats, exactly the build's failed samples: one line each, none other.
    let all = tmp.path().join("all.jsonl");
    export(
        &["--format", "kto", "--source", "real", "--keep-repeats"],
        &d.runs(),
        &all,
        &[],
    );
    let failed_lines: BTreeSet<String> = read_lines(&all)
        .iter()
        .filter(|l| l["label"] == false)
        .map(|l| l["callcheck"]["permalink"].as_str().unwrap().to_string())
        .collect();
    let failed_csv: BTreeSet<String> = csv
        .iter()
        .filter(|(_, (o, _))| o == "fail")
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(failed_lines, failed_csv);
}

#[test]
fn max_per_label_caps_every_label_and_keeps_the_same_ones() {
    let d = demo();
    let tmp = tempfile::tempdir().unwrap();
    let count = |path: &Path| {
        let mut n: BTreeMap<String, usize> = BTreeMap::new();
        for l in read_lines(path) {
            if let Some(label) = l["callcheck"]["label"].as_str() {
                *n.entry(label.to_string()).or_default() += 1;
            }
        }
        n
    };
    let full = tmp.path().join("full.jsonl");
    export(
        &["--format", "kto", "--source", "both"],
        &d.runs(),
        &full,
        &[],
    );
    let uncapped = count(&full);
    let capped_path = tmp.path().join("capped.jsonl");
    let o = export(
        &[
            "--format",
            "kto",
            "--source",
            "both",
            "--max-per-label",
            "3",
        ],
        &d.runs(),
        &capped_path,
        &[],
    );
    let capped = count(&capped_path);
    assert_eq!(
        uncapped.keys().collect::<Vec<_>>(),
        capped.keys().collect::<Vec<_>>()
    );
    for (label, n) in &uncapped {
        assert_eq!(capped[label], (*n).min(3), "{label}");
    }
    assert!(String::from_utf8_lossy(&o.stderr).contains("cut by --max-per-label"));
    let again = tmp.path().join("again.jsonl");
    export(
        &[
            "--format",
            "kto",
            "--source",
            "both",
            "--max-per-label",
            "3",
        ],
        &d.runs(),
        &again,
        &[],
    );
    assert_eq!(
        std::fs::read(&capped_path).unwrap(),
        std::fs::read(&again).unwrap()
    );
}

/// The response body `callcheck check` reads for one exported assistant message.
fn response_of(message: &Value, finish_reason: &Value) -> Value {
    json!({"choices": [{"index": 0, "message": message, "finish_reason": finish_reason}]})
}

#[test]
fn dpo_synthetic_pairs_every_applicable_label_and_each_rejected_checks_as_its_label() {
    let d = demo();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("dpo.jsonl");
    let o = export(
        &["--format", "dpo", "--source", "synthetic"],
        &d.runs(),
        &out,
        &[],
    );
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    let lines = read_lines(&out);
    let tasks = callcheck::task::load(&repo().join("tasks")).unwrap();
    let by_id: BTreeMap<&str, &callcheck::task::Task> =
        tasks.iter().map(|t| (t.id.as_str(), t)).collect();

    // What applies, from the corruption families themselves.
    let mut applicable = BTreeSet::new();
    for t in &tasks {
        for l in Label::ALL {
            if callcheck::corrupt::corruptions(t, l, 512).is_ok_and(|v| !v.is_empty()) {
                applicable.insert((t.id.clone(), l.as_str().to_string()));
            }
        }
    }
    let dropped: usize = stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_suffix(" synthetic variants dropped: they did not score as their label")
        })
        .expect("the summary counts dropped variants")
        .parse()
        .unwrap();

    let mut pairs = BTreeSet::new();
    let mut one_per_label: BTreeMap<String, (String, Value, Value)> = BTreeMap::new();
    for l in &lines {
        assert_eq!(
            keys(l),
            BTreeSet::from(["prompt", "chosen", "rejected", "tools", "callcheck"])
        );
        assert_messages(&l["prompt"], "prompt");
        assert_assistant(&l["chosen"], "chosen");
        assert_assistant(&l["rejected"], "rejected");
        assert_tools(&l["tools"]);
        let meta = &l["callcheck"];
        assert_eq!(meta["source"], "synthetic");
        let task = meta["task"].as_str().unwrap();
        let label = meta["label"].as_str().unwrap();
        assert!(
            pairs.insert((task.to_string(), label.to_string())),
            "two pairs for {task} {label}"
        );
        // `check`, in process: the rejected message scores as exactly the pair's label, and
        // the chosen one passes.
        let t = by_id[task];
        let verdict = |m: &Value| {
            let body = response_of(m, &meta["finish_reason"]);
            score(
                t,
                &Transcript {
                    request: None,
                    body: serde_json::to_vec(&body).unwrap(),
                    streamed: false,
                    meta: None,
                },
            )
        };
        let v = verdict(&l["rejected"][0]);
        assert_eq!(
            v.outcome,
            Outcome::Fail(Label::parse(label).unwrap()),
            "{task} {}: {}",
            meta["variant"],
            v.detail
        );
        assert_eq!(meta["stage"].as_str(), v.stage.map(|s| s.as_str()));
        let chosen = score(
            t,
            &Transcript {
                request: None,
                body: serde_json::to_vec(&response_of(&l["chosen"][0], &json!(null))).unwrap(),
                streamed: false,
                meta: None,
            },
        );
        assert_eq!(
            chosen.outcome,
            Outcome::Pass,
            "{task} chosen: {}",
            chosen.detail
        );
        one_per_label.entry(label.to_string()).or_insert_with(|| {
            (
                task.to_string(),
                l["rejected"][0].clone(),
                meta["finish_reason"].clone(),
            )
        });
    }
    // One pair per applicable label of every task, short of the variants the export dropped
    // (and said so).
    assert!(pairs.is_subset(&applicable));
    for (task, label) in applicable.difference(&pairs) {
        assert!(
            stderr.contains(&format!("dropped {task}: {label}/")),
            "{task} has no {label} pair and the summary does not say it was dropped"
        );
    }
    if dropped == 0 {
        assert_eq!(pairs, applicable);
    }
    eprintln!(
        "demo corpus: {} synthetic pairs over {} tasks, {dropped} variants dropped",
        pairs.len(),
        tasks.len()
    );

    // And a few through the real binary: one rejected message per label.
    for (label, (task, message, finish)) in &one_per_label {
        let resp = tmp.path().join(format!("{label}.json"));
        std::fs::write(
            &resp,
            serde_json::to_vec(&response_of(message, finish)).unwrap(),
        )
        .unwrap();
        let o = Command::new(BIN)
            .args(["check", "--task"])
            .arg(&by_id[task.as_str()].file)
            .arg("--response")
            .arg(&resp)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "check printed no JSON ({e}): {}",
                String::from_utf8_lossy(&o.stderr)
            )
        });
        assert_eq!(v["label"].as_str(), Some(label.as_str()), "{task}: {v}");
    }
    assert_eq!(one_per_label.len(), Label::ALL.len());

    let again = tmp.path().join("again.jsonl");
    export(
        &["--format", "dpo", "--source", "synthetic"],
        &d.runs(),
        &again,
        &[],
    );
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&again).unwrap());
}

#[test]
fn no_planted_key_reaches_the_export() {
    let d = demo();
    let tmp = tempfile::tempdir().unwrap();
    let key = format!("sk-export-{:016x}", rand::random::<u64>());
    let var = "CALLCHECK_EXPORT_TEST_KEY";
    let planted = "planted-cell-secret-0b5e";
    // A copy of one failing cell of the demo, as if its row had named a key variable and its
    // server had echoed the key into a reply; and a hand-made cell.json holding a secret.
    let scan = callcheck::runs::scan(&d.runs());
    let csv = samples_csv(&d.site());
    let run = scan
        .runs
        .iter()
        .find(|r| {
            r.cell.kind.is_samples()
                && r.task_id.starts_with("basic-")
                && r.samples.iter().any(|s| {
                    let p = format!("t/{}/{}/{}/{s}.html", r.model, r.task_id, r.run_id);
                    csv[&p].1 == "no_call"
                })
        })
        .expect("a no_call failure on a basic task in the demo");
    let runs = tmp.path().join("runs");
    let dest = runs.join(&run.model).join(&run.task_id).join(&run.run_id);
    copy_tree(&run.dir, &dest);
    let mut cell: Value =
        serde_json::from_slice(&std::fs::read(dest.join("cell.json")).unwrap()).unwrap();
    cell["model"]["api_key_env"] = json!(var);
    cell["model"]["api_key"] = json!(planted);
    cell["server"]["echo"] = json!(planted);
    std::fs::write(dest.join("cell.json"), serde_json::to_vec(&cell).unwrap()).unwrap();
    let mut echoed = 0;
    for s in &run.samples {
        let p = format!("t/{}/{}/{}/{s}.html", run.model, run.task_id, run.run_id);
        if csv[&p].1 != "no_call" {
            continue;
        }
        let f = dest.join("samples").join(s).join("response.json");
        let mut body: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        let content = body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string();
        body["choices"][0]["message"]["content"] =
            json!(format!("{content} (authenticated with {key})"));
        std::fs::write(&f, serde_json::to_vec(&body).unwrap()).unwrap();
        echoed += 1;
    }
    assert!(echoed > 0);
    for (format, source) in [("kto", "real"), ("dpo", "both")] {
        let out = tmp.path().join(format!("{format}.jsonl"));
        let o = export(
            &["--format", format, "--source", source],
            &runs,
            &out,
            &[(var, key.as_str())],
        );
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(
            !text.contains(&key),
            "{format}: the echoed key is in the file"
        );
        assert!(
            !text.contains(planted),
            "{format}: cell.json's secret is in the file"
        );
        assert!(
            text.contains("(authenticated with [REDACTED])"),
            "{format}: the echoing negative is missing"
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !stderr.contains(&key) && stderr.contains("redacted"),
            "{stderr}"
        );
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(from).unwrap();
        let target = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn the_readme_snippet_loads_what_the_export_writes() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Train on your failures"))
        .expect("README has a \"Train on your failures\" section");
    // The commands shown write the files the Python snippet loads.
    let outs: BTreeSet<String> = section
        .lines()
        .filter(|l| l.trim_start().starts_with("callcheck export preference"))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let i = words.iter().position(|w| *w == "--out")?;
            words.get(i + 1).map(|s| s.to_string())
        })
        .collect();
    assert!(outs.len() >= 2, "{outs:?}");
    let loaded: BTreeSet<String> = section
        .match_indices("data_files=\"")
        .map(|(i, m)| {
            let rest = &section[i + m.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        })
        .collect();
    assert_eq!(
        outs, loaded,
        "the snippet loads other files than the commands write"
    );
    // The columns it names are the columns written.
    let d = demo();
    let tmp = tempfile::tempdir().unwrap();
    for (format, cols) in [
        (
            "kto",
            ["prompt", "completion", "label", "tools", "callcheck"],
        ),
        (
            "dpo",
            ["prompt", "chosen", "rejected", "tools", "callcheck"],
        ),
    ] {
        let out = tmp.path().join("x.jsonl");
        export(
            &["--format", format, "--source", "both"],
            &d.runs(),
            &out,
            &[],
        );
        let first = read_lines(&out).remove(0);
        assert_eq!(keys(&first), BTreeSet::from(cols));
        let shown = format!(
            "[{}]",
            cols.iter()
                .map(|c| format!("'{c}'"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(
            section.contains(&shown),
            "the README does not show the {format} columns as {shown}"
        );
    }
}

#[test]
fn a_label_that_does_not_exist_is_refused_with_the_list() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x.jsonl");
    let o = Command::new(BIN)
        .current_dir(repo())
        .args([
            "export",
            "preference",
            "--format",
            "kto",
            "--source",
            "synthetic",
        ])
        .args(["--labels", "no_call,escaping-error", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("--labels") && stderr.contains("\"escaping-error\""),
        "{stderr}"
    );
    assert!(stderr.contains("escaping_error"), "{stderr}");
    assert!(!out.exists());
}
