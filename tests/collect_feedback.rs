//! `collect --feedback` (SPEC §11), the real binary against the real mock over loopback: one
//! follow-up per failed first-round sample and style, each request exactly the one
//! `feedback::follow_up` builds from its parent's files, answered by a scripted model that
//! fixes exactly the labels it is told to; nothing asked twice; kill -9 at random moments
//! loses and duplicates nothing.

mod collect_support;

use callcheck::runs::{FeedbackStyle, RunKind};
use callcheck::taxonomy::{Label, Outcome};
use callcheck::transcript::ParentRef;
use collect_support::*;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Fails with `type_coercion` or `wrong_tool` (where the task allows), fixes every
/// `type_coercion` it is told about in the `error` and `checklist` styles and none under
/// `retry`, and repeats every `wrong_tool`.
const FIXER: &str = r#"
seed = 5
[[model]]
name = "fixer"
[model.labels]
type_coercion = 0.3
wrong_tool = 0.3
[model.feedback]
fix = 0.0
labels = { type_coercion = 1.0 }
[model.feedback.styles.retry]
labels = { type_coercion = 0.0 }
"#;

type Key = (String, String, ParentRef, FeedbackStyle);

/// Every first-round failure, by (row, task, parent), with its label.
fn failures(
    runs: &Path,
    tasks: &[callcheck::task::Task],
) -> BTreeMap<(String, String, ParentRef), Label> {
    let mut out = BTreeMap::new();
    for r in callcheck::runs::scan(runs).runs {
        if r.cell.kind != RunKind::Samples {
            continue;
        }
        let task = tasks.iter().find(|t| t.id == r.task_id).unwrap();
        for s in &r.samples {
            let t = r.read_sample(s).unwrap().transcript();
            if let Outcome::Fail(l) = callcheck::score::score(task, &t).outcome {
                let parent = ParentRef {
                    run: r.run_id.clone(),
                    sample: s.clone(),
                };
                out.insert((r.model.clone(), r.task_id.clone(), parent), l);
            }
        }
    }
    out
}

/// Every follow-up on disk, with its verdict; panics on a duplicate or a run that is not whole.
fn follow_ups(runs: &Path, tasks: &[callcheck::task::Task]) -> BTreeMap<Key, (Outcome, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for r in callcheck::runs::scan(runs).runs {
        if r.cell.kind != RunKind::Feedback {
            continue;
        }
        assert_eq!(r.cell.k as usize, r.samples.len(), "{}", r.dir.display());
        let style = r.cell.feedback.as_ref().unwrap().style;
        let task = tasks.iter().find(|t| t.id == r.task_id).unwrap();
        for s in &r.samples {
            let files = r.read_sample(s).unwrap();
            let t = files.transcript();
            let parent = t.meta.as_ref().unwrap().parent.clone().unwrap();
            let verdict = callcheck::score::score(task, &t).outcome;
            let key = (r.model.clone(), r.task_id.clone(), parent, style);
            let again = out.insert(key.clone(), (verdict, files.request.clone()));
            assert!(again.is_none(), "asked twice: {key:?}");
        }
    }
    out
}

/// The follow-up request `collect --feedback` must have sent for a parent.
fn expected_request(runs: &Path, task: &callcheck::task::Task, key: &Key) -> Vec<u8> {
    let (model, task_id, parent, style) = key;
    let run = callcheck::runs::cell_runs(runs, model, task_id)
        .runs
        .into_iter()
        .find(|r| r.run_id == parent.run)
        .unwrap();
    let t = run.read_sample(&parent.sample).unwrap().transcript();
    let completion = callcheck::score::parse(&t).unwrap();
    let verdict = callcheck::score::score(task, &t);
    let body = callcheck::feedback::follow_up(
        task,
        t.request.as_ref().unwrap(),
        &completion,
        &verdict,
        *style,
    )
    .unwrap();
    serde_json::to_vec(&body).unwrap()
}

#[test]
fn every_failure_is_followed_up_once_per_style_as_the_model_character_says() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let mock = start_mock(tmp.path(), Some(FIXER), &corpus());
    let cfg = tmp.path().join("callcheck.toml");
    let rows = [("f-json", "fixer", false, 4), ("f-sse", "fixer", true, 4)];
    std::fs::write(&cfg, models_config(&mock.url, &rows, "")).unwrap();
    let runs = tmp.path().join("runs");
    let only = ["--only", "basic-*", "--k", "8"];
    ok(&collect_in(&cfg, &corpus(), &runs, &only, &[]));
    let failed = failures(&runs, &tasks);
    let by_label = |l: Label| failed.values().filter(|&&x| x == l).count();
    assert!(by_label(Label::TypeCoercion) >= 3, "{failed:?}");
    assert!(by_label(Label::WrongTool) >= 3, "{failed:?}");
    assert_eq!(
        by_label(Label::TypeCoercion) + by_label(Label::WrongTool),
        failed.len()
    );

    let out = collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-*", "--feedback"],
        &[],
    );
    ok(&out);
    let got = follow_ups(&runs, &tasks);
    let mut want: Vec<Key> = Vec::new();
    for (model, task, parent) in failed.keys() {
        for style in FeedbackStyle::ALL {
            want.push((model.clone(), task.clone(), parent.clone(), style));
        }
    }
    want.sort();
    assert_eq!(got.keys().cloned().collect::<Vec<_>>(), want);
    for (key, (outcome, request)) in &got {
        let task = tasks.iter().find(|t| t.id == key.1).unwrap();
        assert_eq!(
            String::from_utf8_lossy(request),
            String::from_utf8_lossy(&expected_request(&runs, task, key)),
            "{key:?}"
        );
        let parent_label = failed[&(key.0.clone(), key.1.clone(), key.2.clone())];
        let expected = match (parent_label, key.3) {
            (Label::TypeCoercion, FeedbackStyle::Retry) => Outcome::Fail(Label::TypeCoercion),
            (Label::TypeCoercion, _) => Outcome::Pass,
            (l, _) => Outcome::Fail(l),
        };
        assert_eq!(*outcome, expected, "{key:?}");
    }

    // Nothing is asked again, by either round; feedback runs never count towards k.
    let before = finished_runs(&runs);
    let again = collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-*", "--feedback"],
        &[],
    );
    ok(&again);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("nothing to collect: all 6 cells complete"),
        "{err}"
    );
    let first = collect_in(&cfg, &corpus(), &runs, &only, &[]);
    ok(&first);
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(
        err.contains("nothing to collect: all 6 cells complete"),
        "{err}"
    );
    assert_eq!(finished_runs(&runs), before);

    let bad = collect_in(&cfg, &corpus(), &runs, &["--feedback", "loud"], &[]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("\"loud\" is not a feedback style (error, checklist, retry)"),
        "{err}"
    );
}

/// `collect --feedback retry` asks one style only; a later `--feedback` adds the others.
#[test]
fn styles_are_collected_apart_and_completed_later() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let mock = start_mock(tmp.path(), Some(FIXER), &corpus());
    let cfg = tmp.path().join("callcheck.toml");
    std::fs::write(
        &cfg,
        models_config(&mock.url, &[("f", "fixer", false, 4)], ""),
    )
    .unwrap();
    let runs = tmp.path().join("runs");
    ok(&collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-weather-*", "--k", "10"],
        &[],
    ));
    let failed = failures(&runs, &tasks);
    assert!(!failed.is_empty());
    let args = ["--only", "basic-weather-*", "--feedback", "retry"];
    ok(&collect_in(&cfg, &corpus(), &runs, &args, &[]));
    let got = follow_ups(&runs, &tasks);
    assert_eq!(got.len(), failed.len());
    assert!(got.keys().all(|k| k.3 == FeedbackStyle::Retry));
    let retry_runs = finished_runs(&runs);
    ok(&collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-weather-*", "--feedback"],
        &[],
    ));
    assert_eq!(follow_ups(&runs, &tasks).len(), 3 * failed.len());
    let after = finished_runs(&runs);
    for (d, h) in &retry_runs {
        assert_eq!(after.get(d), Some(h), "{}", d.display());
    }
}

const SLOW: &str = r#"
seed = 3
[[model]]
name = "slow"
[model.labels]
no_call = 0.2
type_coercion = 0.2
truncation = 0.1
[model.feedback]
fix = 0.5
[model.faults]
latency = 1.0
latency_ms = [20, 60]
http_503 = 0.05
"#;

#[test]
fn killed_at_random_points_the_feedback_round_resumes_with_nothing_lost_or_duplicated() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let mock = start_mock(tmp.path(), Some(SLOW), &corpus());
    let cfg = tmp.path().join("callcheck.toml");
    std::fs::write(
        &cfg,
        models_config(&mock.url, &[("s", "slow", true, 2)], ""),
    )
    .unwrap();
    let runs = tmp.path().join("runs");
    let only = ["--only", "basic-*", "--k", "12"];
    ok(&collect_in(&cfg, &corpus(), &runs, &only, &[]));
    let failed = failures(&runs, &tasks);
    assert!(failed.len() >= 6, "{failed:?}");
    let args = collect_argv(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-*", "--feedback", "--retries", "8"],
    );
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(29);
    let mut kills = 0;
    for _ in 0..6 {
        let before = finished_runs(&runs);
        let mut child = Command::new(BIN)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.random_range(100..700)));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            kills += 1;
        }
        child.wait().unwrap();
        // What was finished before is as it was; whatever is finished now is whole.
        let after = finished_runs(&runs);
        for (d, h) in &before {
            assert_eq!(after.get(d), Some(h), "{}", d.display());
        }
        follow_ups(&runs, &tasks);
    }
    assert!(
        kills >= 1,
        "no kill landed: the round is too short to test anything"
    );
    let partial = follow_ups(&runs, &tasks).len();
    assert!(
        partial < 3 * failed.len(),
        "the kills came too late to test anything"
    );
    ok(&Command::new(BIN).args(&args).output().unwrap());
    let got = follow_ups(&runs, &tasks);
    let mut want: Vec<Key> = Vec::new();
    for (model, task, parent) in failed.keys() {
        for style in FeedbackStyle::ALL {
            want.push((model.clone(), task.clone(), parent.clone(), style));
        }
    }
    want.sort();
    assert_eq!(got.keys().cloned().collect::<Vec<_>>(), want);
    for e in walkdir::WalkDir::new(&runs) {
        let e = e.unwrap();
        assert!(
            !e.file_name().to_string_lossy().starts_with(".tmp-"),
            "{}",
            e.path().display()
        );
    }
}
