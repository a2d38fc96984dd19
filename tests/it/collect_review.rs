//! `collect --review checklist` (SPEC §11, HiTEC-ICL's second round), the real binary against
//! the real mock over loopback: one review per first-round sample that got an answer, passes
//! included, each request exactly the one `follow_up::review` builds from its parent's files;
//! a scripted reviewer with known keep and fix probabilities gives fixed and broken counts that
//! a recount from runs/ confirms and whose intervals cover the truth; nothing asked twice;
//! kill -9 at random moments loses and duplicates nothing.

use crate::support::collect::*;
use callcheck::runs::{FeedbackStyle, History, RunKind};
use callcheck::stats::interval::{IntervalKind, interval};
use callcheck::taxonomy::{Label, Outcome};
use callcheck::transcript::ParentRef;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Fails with `type_coercion` or `no_call`; under review keeps a correct call 80 % of the
/// time (breaks it otherwise), fixes every `type_coercion` and no `no_call`.
const REVIEWER: &str = r#"
seed = 11
[[model]]
name = "reviewer"
[model.labels]
type_coercion = 0.25
no_call = 0.15
[model.review]
keep = 0.8
fix = 0.0
labels = { type_coercion = 1.0 }
"#;

const KEEP: f64 = 0.8;

type Key = (String, String, ParentRef);

/// Every answered first-round sample (pass or failure), by (row, task, parent): its outcome.
fn answered(runs: &Path, tasks: &[callcheck::task::Task]) -> BTreeMap<Key, Outcome> {
    let mut out = BTreeMap::new();
    for r in callcheck::runs::scan(runs).runs {
        if r.cell.kind != RunKind::Samples {
            continue;
        }
        let task = tasks.iter().find(|t| t.id == r.task_id).unwrap();
        for s in &r.samples {
            let t = r.read_sample(s).unwrap().transcript();
            let o = callcheck::score::score(task, &t).outcome;
            if o != Outcome::Error {
                let parent = ParentRef {
                    run: r.run_id.clone(),
                    sample: s.clone(),
                };
                out.insert((r.model.clone(), r.task_id.clone(), parent), o);
            }
        }
    }
    out
}

/// Every review on disk: its verdict and request; panics on a duplicate or a run not whole.
fn reviews(runs: &Path, tasks: &[callcheck::task::Task]) -> BTreeMap<Key, (Outcome, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for r in callcheck::runs::scan(runs).runs {
        if r.cell.kind != RunKind::Review {
            continue;
        }
        assert_eq!(r.cell.k as usize, r.samples.len(), "{}", r.dir.display());
        let info = r.cell.feedback.as_ref().unwrap();
        assert_eq!(
            (info.style, info.history),
            (FeedbackStyle::Checklist, History::AsProduced)
        );
        let task = tasks.iter().find(|t| t.id == r.task_id).unwrap();
        for s in &r.samples {
            let files = r.read_sample(s).unwrap();
            let t = files.transcript();
            let parent = t.meta.as_ref().unwrap().parent.clone().unwrap();
            let verdict = callcheck::score::score(task, &t).outcome;
            let key = (r.model.clone(), r.task_id.clone(), parent);
            let again = out.insert(key.clone(), (verdict, files.request.clone()));
            assert!(again.is_none(), "asked twice: {key:?}");
        }
    }
    out
}

/// The review request `collect --review` must have sent for a parent.
fn expected_request(runs: &Path, key: &Key) -> Vec<u8> {
    let (model, task_id, parent) = key;
    let run = callcheck::runs::cell_runs(runs, model, task_id)
        .runs
        .into_iter()
        .find(|r| r.run_id == parent.run)
        .unwrap();
    let t = run.read_sample(&parent.sample).unwrap().transcript();
    let completion = callcheck::score::parse(&t).unwrap();
    let body = callcheck::follow_up::review(
        t.request.as_ref().unwrap(),
        &completion,
        History::AsProduced,
    )
    .unwrap();
    serde_json::to_vec(&body).unwrap()
}

#[test]
fn every_answer_is_reviewed_once_and_fixed_and_broken_counts_cover_the_truth() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let rows = [
        ("r-json", "reviewer", false, 4),
        ("r-sse", "reviewer", true, 4),
    ];
    let (_mock, cfg) = mock_and_config(tmp.path(), Some(REVIEWER), &corpus(), &rows);
    let runs = tmp.path().join("runs");
    let only = ["--only", "basic-*", "--k", "20"];
    ok(&collect_in(&cfg, &corpus(), &runs, &only, &[]));
    let first = answered(&runs, &tasks);
    let out = collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-*", "--review"],
        &[],
    );
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    for row in ["r-json", "r-sse"] {
        let n = first.keys().filter(|k| k.0 == row).count();
        let plan = format!(
            "review {row}: {n} answered first-round samples in 3 cells; follow-ups to send: review {n} (0 already on disk)\n"
        );
        assert!(err.contains(&plan), "{plan}\n{err}");
        let sent = format!(
            "  {row}: follow-ups sent: review {n}/{n}, for {n} answered first-round samples (0 already on disk); 0 kept as transport errors; {n} HTTP attempts (0 retries, on 0 follow-ups); follow-up runs 3/3 written;"
        );
        assert!(err.contains(&sent), "{sent}\n{err}");
    }
    assert!(
        !err.contains("preflight"),
        "no probe in a review round: {err}"
    );

    let got = reviews(&runs, &tasks);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        first.keys().collect::<Vec<_>>()
    );
    // Byte for byte the request review() builds; outcomes as the character says, and the
    // counts a recount gives.
    let (mut kept, mut broken, mut fixed, mut repeated) = (0u64, 0u64, 0u64, 0u64);
    for (key, (outcome, request)) in &got {
        assert_eq!(
            String::from_utf8_lossy(request),
            String::from_utf8_lossy(&expected_request(&runs, key)),
            "{key:?}"
        );
        match (first[key], outcome) {
            (Outcome::Pass, Outcome::Pass) => kept += 1,
            (Outcome::Pass, Outcome::Fail(_)) => broken += 1,
            (Outcome::Fail(Label::TypeCoercion), o) => {
                assert_eq!(*o, Outcome::Pass, "{key:?}");
                fixed += 1;
            }
            (Outcome::Fail(l), o) => {
                assert_eq!(*o, Outcome::Fail(l), "{key:?}: repeated");
                repeated += 1;
            }
            (p, o) => panic!("{key:?}: {p:?} then {o:?}"),
        }
    }
    assert!(
        fixed >= 5 && repeated >= 3,
        "{fixed} fixed, {repeated} repeated"
    );
    let passes = kept + broken;
    let iv = interval(IntervalKind::Wilson, broken, passes).unwrap();
    eprintln!(
        "review: {passes} passing answers, {broken} broken (truth {:.2}; 95 % interval {:.3}–{:.3}), {fixed} fixed, {repeated} repeated",
        1.0 - KEEP,
        iv.lower,
        iv.upper
    );
    assert!(broken > 0 && kept > 0);
    assert!(
        iv.lower <= 1.0 - KEEP && 1.0 - KEEP <= iv.upper,
        "the broken share's interval misses the truth"
    );

    // Nothing is asked again; review runs never count towards k, nor as feedback.
    let before = finished_runs(&runs);
    let again = collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-*", "--review"],
        &[],
    );
    ok(&again);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains(
            "collect --review: nothing to send: every first-round sample it applies to has its follow-ups (review; history as-produced)\n"
        ),
        "{err}"
    );
    ok(&collect_in(&cfg, &corpus(), &runs, &only, &[]));
    let feedback = collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-*", "--feedback", "retry"],
        &[],
    );
    ok(&feedback);
    let after = finished_runs(&runs);
    for (d, h) in &before {
        assert_eq!(after.get(d), Some(h), "{}", d.display());
    }
    assert_eq!(reviews(&runs, &tasks).len(), got.len());

    let bad = collect_in(&cfg, &corpus(), &runs, &["--review", "loud"], &[]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn killed_at_random_points_the_review_round_resumes_with_nothing_lost_or_duplicated() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let slow = format!(
        "{REVIEWER}[model.faults]\nlatency = 1.0\nlatency_ms = [20, 60]\nhttp_503 = 0.05\n"
    );
    let rows = [("s", "reviewer", true, 2)];
    let (_mock, cfg) = mock_and_config(tmp.path(), Some(&slow), &corpus(), &rows);
    let runs = tmp.path().join("runs");
    ok(&collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-*", "--k", "8", "--retries", "8"],
        &[],
    ));
    let first = answered(&runs, &tasks);
    let args = collect_argv(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-*", "--review", "--retries", "8"],
    );
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(31);
    let mut kills = 0;
    for _ in 0..3 {
        let before = finished_runs(&runs);
        let mut child = spawn_quiet(&args);
        let target = finished_run_count(&runs) + rng.random_range(0..=1usize);
        wait_for_runs(&mut child, &runs, target, Duration::from_secs(300));
        std::thread::sleep(Duration::from_millis(rng.random_range(0..20)));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            kills += 1;
        }
        child.wait().unwrap();
        let after = finished_runs(&runs);
        for (d, h) in &before {
            assert_eq!(after.get(d), Some(h), "{}", d.display());
        }
        reviews(&runs, &tasks);
    }
    assert!(kills >= 1, "no kill landed");
    assert!(
        reviews(&runs, &tasks).len() < first.len(),
        "the kills came too late"
    );
    ok(&Command::new(BIN).args(&args).output().unwrap());
    let got = reviews(&runs, &tasks);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        first.keys().collect::<Vec<_>>()
    );
}

/// A row behind a server that refuses a history with invalid JSON arguments, as vLLM does:
/// follow-ups sent as produced after a broken call are refused with HTTP 400 and vLLM's body,
/// kept as transport errors; the same follow-ups sanitised are answered; both histories are
/// recorded in cell.json, in runs of their own.
#[test]
fn a_refusing_server_refuses_as_produced_histories_and_answers_sanitised_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let refusing = r#"
seed = 4
[[model]]
name = "broken"
refuse_invalid_json_history = true
[model.labels]
malformed_json = 0.6
[model.feedback]
fix = 1.0
[model.review]
keep = 1.0
fix = 1.0
"#;
    let rows = [("v", "broken", false, 4)];
    let (_mock, cfg) = mock_and_config(tmp.path(), Some(refusing), &corpus(), &rows);
    let runs = tmp.path().join("runs");
    let only = ["--only", "basic-weather-city", "--k", "10"];
    ok(&collect_in(&cfg, &corpus(), &runs, &only, &[]));
    let first = answered(&runs, &tasks);
    let malformed = first
        .values()
        .filter(|o| **o == Outcome::Fail(Label::MalformedJson))
        .count() as u64;
    // The parents whose calls carry arguments that do not parse (a nameless call with good
    // arguments is a malformed_json the server does not refuse).
    let refusable = |key: &Key| {
        let run = callcheck::runs::cell_runs(&runs, &key.0, &key.1)
            .runs
            .into_iter()
            .find(|r| r.run_id == key.2.run)
            .unwrap();
        let t = run.read_sample(&key.2.sample).unwrap().transcript();
        let c = callcheck::score::parse(&t).unwrap();
        c.tool_calls.iter().any(|call| match &call.arguments {
            callcheck::score::wire::WireArgs::Text(a) => {
                serde_json::from_str::<serde_json::Value>(a).is_err()
            }
            _ => false,
        })
    };
    let broken = first.keys().filter(|k| refusable(k)).count() as u64;
    assert!(broken >= 3, "{first:?}");
    for history in ["as-produced", "sanitised"] {
        let out = collect_in(
            &cfg,
            &corpus(),
            &runs,
            &[
                "--only",
                "basic-weather-city",
                "--feedback",
                "error",
                "--review",
                "--feedback-history",
                history,
                "--retries",
                "0",
            ],
            &[],
        );
        // As produced, the refused follow-ups are the round's only transport errors; the
        // passing parents' reviews are answered, so the row scores.
        ok(&out);
    }
    let mut seen: BTreeMap<(RunKind, History), (u64, u64)> = BTreeMap::new();
    for r in callcheck::runs::scan(&runs).runs {
        if r.cell.kind == RunKind::Samples {
            continue;
        }
        let history = r.cell.feedback.as_ref().unwrap().history;
        assert_eq!(
            r.run_id.ends_with("-sanitised"),
            history == History::Sanitised,
            "{}",
            r.run_id
        );
        let task = &tasks.iter().find(|t| t.id == r.task_id).unwrap();
        for s in &r.samples {
            let files = r.read_sample(s).unwrap();
            let t = files.transcript();
            let meta = t.meta.as_ref().unwrap();
            let parent = meta.parent.clone().unwrap();
            let parent_broken = refusable(&(r.model.clone(), r.task_id.clone(), parent));
            let e = seen.entry((r.cell.kind, history)).or_default();
            if parent_broken && history == History::AsProduced {
                assert_eq!(meta.status, Some(400), "{}", r.dir.display());
                let body: serde_json::Value = serde_json::from_slice(&files.response).unwrap();
                assert_eq!(body["object"], "error");
                assert_eq!(body["code"], 400);
                assert!(
                    body["message"]
                        .as_str()
                        .unwrap()
                        .contains("are not valid JSON"),
                    "{body}"
                );
                e.0 += 1;
            } else {
                assert_eq!(meta.status, Some(200), "{}", r.dir.display());
                assert_eq!(
                    callcheck::score::score(task, &t).outcome,
                    Outcome::Pass,
                    "{}",
                    r.dir.display()
                );
                e.1 += 1;
            }
        }
    }
    let n = broken;
    let all = first.len() as u64;
    assert_eq!(
        seen,
        BTreeMap::from([
            ((RunKind::Feedback, History::AsProduced), (n, malformed - n)),
            ((RunKind::Feedback, History::Sanitised), (0, malformed)),
            ((RunKind::Review, History::AsProduced), (n, all - n)),
            ((RunKind::Review, History::Sanitised), (0, all)),
        ])
    );
}
