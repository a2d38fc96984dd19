//! `callcheck demo`, the real binary: the mock on loopback, a collection of the whole corpus at
//! k = 5 for four rows (three scripted models, one of them also streamed), a build; then a second demo that resumes (nothing left to
//! ask) and rebuilds the same site, byte for byte.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_callcheck");

const LABELS: [&str; 11] = [
    "no_call",
    "wrong_tool",
    "malformed_json",
    "schema_violation",
    "hallucinated_param",
    "missing_required",
    "type_coercion",
    "escaping_error",
    "truncation",
    "parallel_collapse",
    "spurious_call",
];

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tasks")
}

fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(root).unwrap().display().to_string();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

fn demo(dir: &Path) -> (String, String) {
    let out = Command::new(BIN)
        .current_dir(dir)
        .args(["demo", "--tasks"])
        .arg(corpus())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "demo failed:\n{stderr}");
    (stdout, stderr)
}

#[test]
fn demo_collects_builds_and_a_second_run_gives_the_same_site() {
    let tmp = tempfile::tempdir().unwrap();
    let n_tasks = callcheck::task::load(&corpus()).unwrap().len();
    let (stdout, stderr) = demo(tmp.path());
    let site = tmp.path().join("site");
    let runs = tmp.path().join("runs");
    assert!(
        stderr.contains("demo: mock server on http://127.0.0.1:"),
        "{stderr}"
    );
    let index = std::fs::canonicalize(site.join("index.html")).unwrap();
    assert!(
        stdout.contains(&format!("file://{}", index.display())),
        "the demo does not say where its site is: {stdout}"
    );

    // Every model × task cell holds k = 5 samples, each recorded whole.
    let scan = callcheck::runs::scan(&runs);
    assert!(scan.skipped.is_empty(), "{:?}", scan.skipped);
    let mut per_cell: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in scan.runs.iter().filter(|r| r.cell.kind.is_samples()) {
        *per_cell
            .entry((r.model.clone(), r.task_id.clone()))
            .or_default() += r.samples.len();
    }
    assert_eq!(per_cell.len(), 4 * n_tasks);
    assert!(per_cell.values().all(|&n| n == 5), "{per_cell:?}");
    let models: BTreeSet<&str> = per_cell.keys().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        models,
        BTreeSet::from([
            "mock-flaky-stream",
            "mock-good",
            "mock-good-stream",
            "mock-sloppy"
        ])
    );

    feedback_round_follows_every_failure_in_character(&scan);

    // Every label occurs in the matrix, and the near-perfect model is near perfect.
    let matrix: Value =
        serde_json::from_slice(&std::fs::read(site.join("data/matrix.json")).unwrap()).unwrap();
    let cells = matrix["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4 * n_tasks);
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for c in cells {
        for (label, n) in c["label_counts"].as_object().unwrap() {
            *counts.entry(label.clone()).or_default() += n.as_u64().unwrap();
        }
    }
    for l in LABELS {
        assert!(
            counts.get(l).copied().unwrap_or(0) > 0,
            "no {l} in the demo: {counts:?}"
        );
    }
    let model = |name: &str| {
        matrix["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["model"] == name)
            .unwrap_or_else(|| panic!("{name} not in matrix.json"))
            .clone()
    };
    assert!(model("mock-good")["rate"].as_f64().unwrap() > 0.95);
    assert!(model("mock-sloppy")["rate"].as_f64().unwrap() < 0.8);
    assert!(model("mock-flaky-stream")["errors"].as_u64().unwrap() > 0);
    // At k = 5 no single cell can be `reliable` (5/5 is [57–100 %]), but a call shape pooled
    // over its tasks can: the models × tags table shows both ends.
    let pooled: BTreeSet<String> = matrix["models"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tags"].as_object().unwrap().values())
        .map(|t| t["by_task"]["verdict"].as_str().unwrap().to_string())
        .collect();
    assert!(
        pooled.contains("reliable") && pooled.contains("broken"),
        "pooled verdicts on the demo: {pooled:?}"
    );
    // The preflight ran against the mock and is on the model's page.
    assert!(
        std::fs::read_to_string(site.join("models/mock-good.html"))
            .unwrap()
            .contains("Preflight")
    );

    // A second demo: nothing new is collected, and the site is the same.
    let runs_before = tree(&runs);
    let site_before = tree(&site);
    let (_, stderr2) = demo(tmp.path());
    assert!(
        stderr2.contains("nothing to collect: all ") && stderr2.contains(" cells complete"),
        "{stderr2}"
    );
    assert!(runs_before == tree(&runs), "the second demo changed runs/");
    let site_after = tree(&site);
    assert_eq!(
        site_before.keys().collect::<Vec<_>>(),
        site_after.keys().collect::<Vec<_>>()
    );
    for (k, v) in &site_before {
        assert!(site_after[k] == *v, "{k} differs after the second demo");
    }
}

/// The demo's feedback round (SPEC §11): every visible first-round failure has one follow-up
/// per style (and, on the row behind the refusing server, one per style and history), and the
/// scripted models answer in character; the refusing row refuses as-produced follow-ups after
/// broken arguments and answers sanitised ones; two rows have a review of every answer.
/// Prints the fix rates per row and style.
fn feedback_round_follows_every_failure_in_character(scan: &callcheck::runs::Scan) {
    use callcheck::runs::{FeedbackStyle, History, RunKind};
    use callcheck::taxonomy::{Label, Outcome};
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let task = |id: &str| tasks.iter().find(|t| t.id == id).unwrap();
    let mut parents: BTreeMap<(String, String, String, String), Label> = BTreeMap::new();
    let mut reviewable = 0;
    for r in scan.runs.iter().filter(|r| r.cell.kind == RunKind::Samples) {
        for s in &r.samples {
            let t = r.read_sample(s).unwrap().transcript();
            let v = callcheck::score::score(task(&r.task_id), &t);
            let answered = v.outcome != Outcome::Error;
            if answered {
                reviewable += usize::from(["mock-good", "mock-sloppy"].contains(&r.model.as_str()));
            }
            if let Outcome::Fail(l) = v.outcome
                && callcheck::follow_up::visible(&v)
            {
                parents.insert(
                    (
                        r.model.clone(),
                        r.task_id.clone(),
                        r.run_id.clone(),
                        s.clone(),
                    ),
                    l,
                );
            }
        }
    }
    // (row, style, argument label or not) → (follow-ups, passes)
    let mut rates: BTreeMap<(String, FeedbackStyle, bool), (u32, u32)> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut reviews = 0;
    let mut refused: BTreeMap<History, u32> = BTreeMap::new();
    for r in scan.runs.iter().filter(|r| r.cell.kind == RunKind::Review) {
        reviews += r.samples.len();
    }
    for r in scan
        .runs
        .iter()
        .filter(|r| r.cell.kind == RunKind::Feedback)
    {
        let info = r.cell.feedback.as_ref().unwrap();
        let (style, history) = (info.style, info.history);
        for s in &r.samples {
            let t = r.read_sample(s).unwrap().transcript();
            let p = t.meta.as_ref().unwrap().parent.clone().unwrap();
            let key = (r.model.clone(), r.task_id.clone(), p.run, p.sample);
            let label = parents[&key];
            assert!(
                seen.insert((key, style, history)),
                "a parent followed up twice"
            );
            if t.meta.as_ref().unwrap().status == Some(400) {
                assert_eq!(r.model, "mock-sloppy");
                *refused.entry(history).or_default() += 1;
            }
            if history == History::Sanitised {
                continue;
            }
            let outcome = callcheck::score::score(task(&r.task_id), &t).outcome;
            let argument = matches!(
                label,
                Label::TypeCoercion
                    | Label::MissingRequired
                    | Label::HallucinatedParam
                    | Label::SchemaViolation
            );
            let e = rates.entry((r.model.clone(), style, argument)).or_default();
            e.0 += 1;
            e.1 += u32::from(outcome == Outcome::Pass);
        }
    }
    let sloppy = parents.keys().filter(|k| k.0 == "mock-sloppy").count();
    assert_eq!(seen.len(), 3 * parents.len() + 3 * sloppy);
    assert_eq!(reviews, reviewable);
    eprintln!("refused follow-ups by history: {refused:?}; reviews: {reviews}");
    assert!(refused.get(&History::AsProduced).copied().unwrap_or(0) >= 3);
    assert_eq!(refused.get(&History::Sanitised), None);
    let rate = |row: &str, style, argument: Option<bool>| {
        let (n, k) = rates
            .iter()
            .filter(|((m, s, a), _)| m == row && *s == style && argument.is_none_or(|x| x == *a))
            .fold((0, 0), |(n, k), (_, (n2, k2))| (n + n2, k + k2));
        eprintln!("feedback {row} {style:?} argument labels {argument:?}: {k}/{n}");
        f64::from(k) / f64::from(n.max(1))
    };
    for row in [
        "mock-good",
        "mock-good-stream",
        "mock-sloppy",
        "mock-flaky-stream",
    ] {
        for style in FeedbackStyle::ALL {
            rate(row, style, None);
        }
    }
    // The good model fixes most errors it is told about; the sloppy one repeats most.
    assert!(rate("mock-good", FeedbackStyle::Error, None) > 0.6);
    assert!(rate("mock-sloppy", FeedbackStyle::Error, None) < 0.6);
    assert!(
        rate("mock-sloppy", FeedbackStyle::Retry, None)
            < rate("mock-sloppy", FeedbackStyle::Error, None)
    );
    // A checklist helps the sloppy model on its arguments, not on the rest.
    assert!(
        rate("mock-sloppy", FeedbackStyle::Checklist, Some(true))
            > rate("mock-sloppy", FeedbackStyle::Checklist, Some(false)) + 0.2
    );
}

#[test]
fn demo_without_a_checkout_writes_the_built_in_corpus_to_tasks_and_runs_it() {
    // As `uvx callcheck demo` runs it: an empty folder, no --tasks.
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .current_dir(tmp.path())
        .args(["demo", "--quiet", "--k", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let n_tasks = callcheck::task::load(&corpus()).unwrap().len();
    assert!(
        stderr.starts_with(&format!(
            "demo: no tasks/ here: wrote callcheck's own corpus ({n_tasks} tasks) to tasks/\n"
        )),
        "{stderr}"
    );
    assert!(tree(&tmp.path().join("tasks")) == tree(&corpus()));
    let mut names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // runs/ and site/ beside it, and no cache folder: the demo builds without one.
    assert_eq!(names, ["runs", "site", "tasks"]);
    let matrix: Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("site/data/matrix.json")).unwrap())
            .unwrap();
    let cells = matrix["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4 * n_tasks);
    assert!(cells.iter().all(|c| c["k"] == 3), "{:?}", cells[0]);
}

#[test]
fn demo_with_a_missing_corpus_says_where_to_run_it_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .current_dir(tmp.path())
        .args(["demo", "--tasks", "my-tasks"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("run it from the repository's root, or pass --tasks DIR"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("mock server on"),
        "started the mock anyway: {stderr}"
    );
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}
