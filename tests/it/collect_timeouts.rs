//! What collect asks again and what it keeps (issue 46), against the real binary and a loopback
//! server: a sample that outlives the row's `timeout_secs` is callcheck's own timeout, kept as
//! the sample's outcome and asked once — asking again would draw a new answer, and the ones
//! that come back in time are the short ones; a follow-up the server refuses with HTTP 500 for
//! its content is asked once too, while a gateway's 503 is still retried; and build counts the
//! follow-ups' transport errors apart from the first round's.

use crate::support::collect::*;
use callcheck::runs::RunKind;
use callcheck::taxonomy::Outcome;
use callcheck::transcript::Meta;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The chat requests a loopback server saw, by collect's sample header
/// (`<task>/<sample>/<attempt>`), with how many of each.
fn tags(server: &Loopback, feedback: bool) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for r in server.seen.lock().unwrap().iter() {
        if r.path != "/v1/chat/completions"
            || r.headers.contains_key("x-callcheck-feedback") != feedback
        {
            continue;
        }
        let tag = r.headers["x-callcheck-sample"].clone();
        *out.entry(tag).or_default() += 1;
    }
    out
}

/// Every sample of `kind` under `runs`, by sample folder name, with its meta.json and verdict.
fn samples(runs: &Path, kind: RunKind) -> BTreeMap<String, (Meta, callcheck::score::Verdict)> {
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let mut out = BTreeMap::new();
    for r in callcheck::runs::scan(runs).runs {
        if r.cell.kind != kind {
            continue;
        }
        let task = tasks.iter().find(|t| t.id == r.task_id).unwrap();
        for s in &r.samples {
            let files = r.read_sample(s).unwrap();
            let meta: Meta = serde_json::from_slice(&files.meta).unwrap();
            let v = callcheck::score::score(task, &files.transcript());
            out.insert(s.clone(), (meta, v));
        }
    }
    out
}

#[test]
fn a_sample_that_outlives_timeout_secs_is_kept_as_callchecks_timeout_and_asked_once() {
    let tmp = tempfile::tempdir().unwrap();
    // Sample 1's answer comes after 3 s, past the row's 1 s: a long answer still being
    // written. The others come at once.
    let server = gateway(|req| {
        if sample_of(req) == Some(1) {
            std::thread::sleep(Duration::from_secs(3));
        }
        Reply::json(200, completion(10, None))
    });
    let cfg = row_config(
        tmp.path(),
        &server.url,
        "timeout_secs = 1\nconcurrency = 1\n",
    );
    let runs = tmp.path().join("runs");
    let mut args = ONE_CELL.to_vec();
    args.push("--no-preflight");
    let out = collect_in(&cfg, &corpus(), &runs, &args, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "two of three samples scored: {err}");

    // Asked once: no second attempt at sample 1, whatever --retries says (4 by default).
    assert_eq!(
        tags(&server, false),
        (0..3)
            .map(|i| (format!("basic-weather-city/{i}/0"), 1))
            .collect::<BTreeMap<_, _>>(),
        "{err}"
    );
    // Counted in the errors, under callcheck's timeout, with no retry.
    assert!(
        err.contains("row: 3 samples written, 1 kept as transport errors (callcheck's timeout (timeout_secs) × 1); 3 HTTP attempts (0 retries, on 0 samples)"),
        "{err}"
    );

    // Kept: the sample is on disk as what happened, named as callcheck's own timeout.
    let kept = samples(&runs, RunKind::Samples);
    assert_eq!(kept.len(), 3);
    let (meta, v) = &kept["001"];
    assert_eq!(meta.status, None);
    assert_eq!(meta.attempts.len(), 1, "{meta:?}");
    let e = meta.error.as_deref().unwrap_or("");
    assert!(
        e.contains("timed out after 1 s (timeout_secs) waiting for the response head: callcheck's own timeout, kept as the sample's outcome, not asked again"),
        "{e}"
    );
    assert_eq!(v.outcome, Outcome::Error);
    assert!(
        v.detail.starts_with("callcheck's own timeout (the row's timeout_secs) ended the request before the response head arrived"),
        "{}",
        v.detail
    );
    for s in ["000", "002"] {
        assert_eq!(
            kept[s].1.outcome,
            Outcome::Fail(callcheck::taxonomy::Label::NoCall)
        );
    }
}

#[test]
fn a_follow_up_refused_with_500_is_asked_once_and_build_counts_it_apart() {
    let tmp = tempfile::tempdir().unwrap();
    // First-round samples are calls with broken arguments: visible failures (malformed_json)
    // to follow up (prose under tool_choice "auto" is a silent no_call, which no router
    // follows up). Follow-ups: parent 0's
    // is refused once with a gateway's 503 (transient: retried, then answered), the others
    // with llama-server's 500 for a history it cannot parse (a refusal of the content: asked
    // once, whatever --retries says).
    let asked: Arc<Mutex<BTreeMap<String, u32>>> = Arc::default();
    let counter = asked.clone();
    let server = gateway(move |req| {
        if req.headers.contains_key("x-callcheck-feedback") {
            let parent = sample_of(req);
            let mut asked = counter.lock().unwrap();
            let n = asked.entry(format!("{parent:?}")).or_default();
            *n += 1;
            return match (parent, *n) {
                (Some(0), 1) => Reply::json(503, r#"{"error":{"message":"busy"}}"#),
                (Some(0), _) => Reply::json(200, completion(10, None)),
                _ => Reply::json(
                    500,
                    r#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, column 15: syntax error while parsing object - unexpected end of input; expected '}'","type":"server_error"}}"#,
                ),
            };
        }
        Reply::json(
            200,
            completion(10, Some(("get_weather", r#"{"city": "Paris""#))),
        )
    });
    let cfg = row_config(tmp.path(), &server.url, "timeout_secs = 10\n");
    let runs = tmp.path().join("runs");
    let run = |extra: &[&str]| {
        let mut a = ONE_CELL.to_vec();
        a.push("--no-preflight");
        a.extend_from_slice(extra);
        let out = collect_in(&cfg, &corpus(), &runs, &a, &[]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[]);
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = run(&["--feedback", "retry"]);
    assert_eq!(code, Some(0), "one follow-up of three got an answer: {err}");

    // Parent 0: the 503 and the retry that was answered; parents 1 and 2: one 500 each.
    assert_eq!(
        tags(&server, true),
        BTreeMap::from([
            ("basic-weather-city/0/0".to_string(), 1),
            ("basic-weather-city/0/1".to_string(), 1),
            ("basic-weather-city/1/0".to_string(), 1),
            ("basic-weather-city/2/0".to_string(), 1),
        ]),
        "{err}"
    );
    assert!(
        err.contains("2 kept as transport errors (HTTP 500 × 2); 4 HTTP attempts (1 retries, on 1 follow-ups)"),
        "{err}"
    );
    let follow_ups = samples(&runs, RunKind::Feedback);
    let refused: Vec<&Meta> = follow_ups
        .values()
        .filter(|(m, _)| m.status == Some(500))
        .map(|(m, _)| m)
        .collect();
    assert_eq!(refused.len(), 2, "{follow_ups:?}");
    assert!(refused.iter().all(|m| m.attempts.len() == 1), "{refused:?}");

    // The build's summary: the first round had no transport error, the follow-ups two.
    let built = build_in(tmp.path(), &runs, &tmp.path().join("site"));
    let err = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "{err}");
    assert!(
        err.contains("6 samples (")
            && err.contains(" (first round: 0 passed, 3 failed, 0 transport errors; follow-ups: 0 passed, 1 failed, 2 transport errors; a transport error is no complete chat completion received); "),
        "{err}"
    );
}
