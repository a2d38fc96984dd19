//! `collect --feedback` (SPEC §11), the real binary against the real mock over loopback: one
//! follow-up per visibly failed first-round sample and style (a silent failure, which no
//! router sees, gets none), each request exactly the one `follow_up::follow_up` builds from
//! its parent's files, answered by a scripted model that fixes exactly the labels it is told
//! to; nothing asked twice; kill -9 at random moments loses and duplicates nothing.

use crate::support::collect::*;
use callcheck::runs::{FeedbackStyle, RunKind};
use callcheck::taxonomy::{Label, Outcome};
use callcheck::transcript::ParentRef;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Fails with `type_coercion` or `wrong_tool` (where the task allows; a name that was not
/// offered: visible) or `no_call` (prose under `tool_choice: "auto"`: silent), fixes every
/// `type_coercion` it is told about in the `error` and `checklist` styles and none under
/// `retry`, and repeats every `wrong_tool`.
const FIXER: &str = r#"
seed = 5
[[model]]
name = "fixer"
[model.labels]
type_coercion = 0.5
wrong_tool = 0.2
no_call = 0.15
[model.feedback]
fix = 0.0
labels = { type_coercion = 1.0 }
[model.feedback.styles.retry]
labels = { type_coercion = 0.0 }
"#;

type Key = (String, String, ParentRef, FeedbackStyle);

/// Every visible first-round failure, by (row, task, parent), with its label.
fn failures(
    runs: &Path,
    tasks: &[callcheck::task::Task],
) -> BTreeMap<(String, String, ParentRef), Label> {
    all_failures(runs, tasks)
        .into_iter()
        .filter(|(_, (_, seen))| *seen)
        .map(|(k, (l, _))| (k, l))
        .collect()
}

/// Every first-round failure, by (row, task, parent), with its label and whether a router
/// sees it.
fn all_failures(
    runs: &Path,
    tasks: &[callcheck::task::Task],
) -> BTreeMap<(String, String, ParentRef), (Label, bool)> {
    let mut out = BTreeMap::new();
    for r in callcheck::runs::scan(runs).runs {
        if r.cell.kind != RunKind::Samples {
            continue;
        }
        let task = tasks.iter().find(|t| t.id == r.task_id).unwrap();
        for s in &r.samples {
            let t = r.read_sample(s).unwrap().transcript();
            let v = callcheck::score::score(task, &t);
            if let Outcome::Fail(l) = v.outcome {
                let parent = ParentRef {
                    run: r.run_id.clone(),
                    sample: s.clone(),
                };
                let seen = callcheck::follow_up::visible(&v);
                out.insert((r.model.clone(), r.task_id.clone(), parent), (l, seen));
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

/// One follow-up per failure and style, sorted: what a complete round holds.
fn every_style_of(failed: &BTreeMap<(String, String, ParentRef), Label>) -> Vec<Key> {
    let mut want: Vec<Key> = Vec::new();
    for (model, task, parent) in failed.keys() {
        for style in FeedbackStyle::ALL {
            want.push((model.clone(), task.clone(), parent.clone(), style));
        }
    }
    want.sort();
    want
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
    let body = callcheck::follow_up::follow_up(
        t.request.as_ref().unwrap(),
        &completion,
        &verdict,
        *style,
        callcheck::runs::History::AsProduced,
    )
    .unwrap();
    serde_json::to_vec(&body).unwrap()
}

#[test]
fn every_failure_is_followed_up_once_per_style_as_the_model_character_says() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let rows = [("f-json", "fixer", false, 4), ("f-sse", "fixer", true, 4)];
    let (_mock, cfg) = mock_and_config(tmp.path(), Some(FIXER), &corpus(), &rows);
    let runs = tmp.path().join("runs");
    let only = ["--only", "basic-*", "--k", "8"];
    ok(&collect_in(&cfg, &corpus(), &runs, &only, &[]));
    let all = all_failures(&runs, &tasks);
    let failed = failures(&runs, &tasks);
    let by_label = |l: Label| failed.values().filter(|&&x| x == l).count();
    assert!(by_label(Label::TypeCoercion) >= 3, "{failed:?}");
    assert!(by_label(Label::WrongTool) >= 3, "{failed:?}");
    assert_eq!(
        by_label(Label::TypeCoercion) + by_label(Label::WrongTool),
        failed.len()
    );
    // A no_call under "auto" is silent: there must be some, left alone.
    let silent_of = |row: &str| all.iter().filter(|(k, v)| k.0 == row && !v.1).count();
    assert!(silent_of("f-json") + silent_of("f-sse") >= 2, "{all:?}");
    assert!(
        all.values().all(|v| v.1 == (v.0 != Label::NoCall)),
        "{all:?}"
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
    // The terminal says what the round planned and sent per style, and leaves passing to build.
    let err = String::from_utf8_lossy(&out.stderr);
    for (row, n) in ["f-json", "f-sse"].iter().map(|row| {
        let n = failed.keys().filter(|k| k.0 == *row).count();
        (row, n)
    }) {
        let cells = failed
            .keys()
            .filter(|k| k.0 == *row)
            .map(|k| &k.1)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let parents = format!(
            "{n} visible failures among the first-round samples ({} silent ones left alone: a router cannot see them)",
            silent_of(row)
        );
        let plan = format!(
            "feedback {row}: {parents} in {cells} cells; follow-ups to send: error {n}, checklist {n}, retry {n} (0 already on disk)\n"
        );
        assert!(err.contains(&plan), "{plan}\n{err}");
        let sent = format!(
            "  {row}: follow-ups sent: error {n}/{n}, checklist {n}/{n}, retry {n}/{n}, for {parents} (0 already on disk); 0 kept as transport errors; {} HTTP attempts (0 retries, on 0 follow-ups); follow-up runs {}/{} written;",
            3 * n,
            3 * cells,
            3 * cells
        );
        assert!(err.contains(&sent), "{sent}\n{err}");
    }
    let headline = err
        .lines()
        .find(|l| l.starts_with("collect --feedback 2"))
        .unwrap_or_else(|| panic!("no headline: {err}"));
    assert!(
        headline.contains(&format!(
            ": {} follow-ups (as-produced history) in ",
            got.len()
        )),
        "{headline}"
    );
    assert!(
        err.contains(
            "collect --feedback: which follow-ups passed is build's to say: run `callcheck build` and read routing.html"
        ),
        "{err}"
    );
    assert!(
        !err.contains("preflight"),
        "no probe in a feedback round: {err}"
    );
    assert!(!err.contains("samples written"), "{err}");
    let want = every_style_of(&failed);
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
        err.contains(
            "collect --feedback: nothing to send: every first-round sample it applies to has its follow-ups (error, checklist, retry; history as-produced)\n"
        ),
        "{err}"
    );
    let n = failed.keys().filter(|k| k.0 == "f-json").count();
    let cells = failed
        .keys()
        .filter(|k| k.0 == "f-json")
        .map(|k| &k.1)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    assert!(
        err.contains(&format!(
            "  f-json: {n} visible failures among the first-round samples ({} silent ones left alone: a router cannot see them) in {cells} cells; {} follow-ups on disk\n",
            silent_of("f-json"),
            3 * n
        )),
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
    let rows = [("f", "fixer", false, 4)];
    let (_mock, cfg) = mock_and_config(tmp.path(), Some(FIXER), &corpus(), &rows);
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
    let rows = [("s", "slow", true, 2)];
    let (_mock, cfg) = mock_and_config(tmp.path(), Some(SLOW), &corpus(), &rows);
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
        let mut child = spawn_quiet(&args);
        // After 0 or 1 more finished run and a few random milliseconds: an event, not a time,
        // so a loaded machine cannot push every kill into the start-up (the round has 9 runs).
        let target = finished_run_count(&runs) + rng.random_range(0..=1usize);
        wait_for_runs(&mut child, &runs, target, Duration::from_secs(300));
        std::thread::sleep(Duration::from_millis(rng.random_range(0..20)));
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
    let want = every_style_of(&failed);
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

/// `--retry-errors` asks a follow-up kept as a transport error again, as it does a first-round
/// sample: a loopback gateway refuses the first attempt of every follow-up with a 503 (kept, as
/// `--retries 0` says), and answers the second. Without the flag nothing is asked again.
#[test]
fn retry_errors_asks_a_follow_up_that_ended_as_a_transport_error_again() {
    use std::sync::{Arc, Mutex};
    let tmp = tempfile::tempdir().unwrap();
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let asked: Arc<Mutex<BTreeMap<String, u32>>> = Arc::default();
    let counter = asked.clone();
    let server = gateway(move |req| {
        if req.headers.contains_key("x-callcheck-feedback") {
            // `<task>/<sample>/<attempt>`: with `--retries 0` every attempt is the first.
            let tag = req.headers["x-callcheck-sample"].clone();
            let mut asked = counter.lock().unwrap();
            let n = asked.entry(tag).or_default();
            *n += 1;
            if *n == 1 {
                return Reply::json(503, r#"{"error":{"message":"busy"}}"#);
            }
        }
        // Broken arguments: a first-round `malformed_json`, visible, to follow up.
        Reply::json(
            200,
            completion(10, Some(("get_weather", r#"{"city": "Paris""#))),
        )
    });
    let cfg = row_config(tmp.path(), &server.url, "timeout_secs = 10\n");
    let runs = tmp.path().join("runs");
    let only = ["--only", "basic-weather-city", "--no-preflight"];
    let run_as = |extra: &[&str]| {
        let mut a = only.to_vec();
        a.extend_from_slice(extra);
        let out = collect_in(&cfg, &corpus(), &runs, &a, &[]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let run = |extra: &[&str]| {
        let (code, err) = run_as(extra);
        assert_eq!(code, Some(0), "{err}");
        err
    };
    run(&["--k", "3"]);
    // Every follow-up an error: nothing of the round can be scored, which is no success.
    let (code, err) = run_as(&["--feedback", "error", "--retries", "0"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("error: row: no scored sample: all 3 samples are transport errors (HTTP 503 on every request)"),
        "{err}"
    );
    assert!(
        err.contains("  row: follow-ups sent: error 3/3, for 3 visible failures among the first-round samples (0 silent ones left alone: a router cannot see them) (0 already on disk); 3 kept as transport errors (HTTP 503 × 3); 3 HTTP attempts (0 retries, on 0 follow-ups); follow-up runs 1/1 written;"),
        "{err}"
    );
    let first = follow_ups(&runs, &tasks);
    assert_eq!(first.len(), 3);
    assert!(
        first.values().all(|(o, _)| *o == Outcome::Error),
        "{first:?}"
    );

    // Without --retry-errors an error is a follow-up like any other: nothing is sent.
    let err = run(&["--feedback", "error"]);
    assert!(
        err.contains("collect --feedback: nothing to send: every first-round sample it applies to has its follow-ups (error; history as-produced)\n"),
        "{err}"
    );
    assert!(
        err.contains("  row: 3 visible failures among the first-round samples (0 silent ones left alone: a router cannot see them) in 1 cells; 3 follow-ups on disk\n"),
        "{err}"
    );
    assert_eq!(asked.lock().unwrap().values().sum::<u32>(), 3);

    // With it, each is asked again, with the same request, and answered; the errors stay.
    let err = run(&["--feedback", "error", "--retries", "0", "--retry-errors"]);
    assert!(
        err.contains("feedback row: 3 visible failures among the first-round samples (0 silent ones left alone: a router cannot see them) in 1 cells; follow-ups to send: error 3 (0 already on disk; 3 kept as transport errors, asked again)\n"),
        "{err}"
    );
    assert!(
        err.contains("  row: follow-ups sent: error 3/3, for 3 visible failures among the first-round samples (0 silent ones left alone: a router cannot see them) (0 already on disk); 0 kept as transport errors; 3 HTTP attempts"),
        "{err}"
    );
    assert_eq!(
        *asked.lock().unwrap(),
        (0..3)
            .map(|i| (format!("basic-weather-city/{i}/0"), 2))
            .collect::<BTreeMap<_, _>>()
    );
    let mut answered = 0;
    let mut requests: BTreeMap<ParentRef, Vec<Vec<u8>>> = BTreeMap::new();
    for r in callcheck::runs::scan(&runs).runs {
        if r.cell.kind != RunKind::Feedback {
            continue;
        }
        for s in &r.samples {
            let files = r.read_sample(s).unwrap();
            let t = files.transcript();
            let meta = t.meta.as_ref().unwrap();
            answered += usize::from(meta.status == Some(200));
            requests
                .entry(meta.parent.clone().unwrap())
                .or_default()
                .push(files.request.clone());
        }
    }
    assert_eq!(answered, 3);
    assert_eq!(requests.len(), 3);
    for (parent, sent) in &requests {
        assert_eq!(sent.len(), 2, "{parent:?}");
        assert_eq!(
            sent[0], sent[1],
            "{parent:?}: the same follow-up, asked again"
        );
    }

    // Answered now: nothing is asked a third time, with the flag or without.
    let err = run(&["--feedback", "error", "--retry-errors"]);
    assert!(err.contains("nothing to send"), "{err}");
    assert_eq!(asked.lock().unwrap().values().sum::<u32>(), 6);
}
