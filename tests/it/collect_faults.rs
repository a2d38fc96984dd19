//! Collection under ~20 % injected transport faults: it completes; faults that struck before the
//! first body byte were retried (every attempt in meta.json, matching the mock's log); streams
//! and bodies cut mid-way are kept exactly as received and not retried; nothing is lost or
//! duplicated.

use crate::support::collect::*;
use callcheck::transcript::Meta;

/// 20 % of attempts fault: 4 % each of 429, 500, 503 and dropped connections (before any
/// byte), 4 % cut mid-body (after some bytes), plus latency.
fn mock_config() -> String {
    let mut s = String::from("seed = 3\n");
    for n in 1..=4 {
        s.push_str(&format!("[[model]]\nname = \"faulty-{n}\"\n{MODEL}"));
    }
    s
}

const MODEL: &str = r#"
[model.labels]
malformed_json = 0.1
[model.faults]
latency = 0.2
latency_ms = [1, 10]
http_429 = 0.04
http_500 = 0.04
http_503 = 0.04
drop = 0.04
cut = 0.04
"#;

#[test]
fn transport_faults_are_retried_before_the_first_byte_and_kept_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = start_mock(tmp.path(), Some(&mock_config()), &corpus());
    let rows = [
        ("json-a", "faulty-1", false, 4),
        ("sse-a", "faulty-2", true, 4),
        ("json-b", "faulty-3", false, 4),
        ("sse-b", "faulty-4", true, 4),
    ];
    let cfg = tmp.path().join("callcheck.toml");
    std::fs::write(&cfg, models_config(&mock.url, &rows, "")).unwrap();
    let runs = tmp.path().join("runs");
    let k = 12;
    let out = collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--k", &k.to_string(), "--backoff-ms", "2", "--retries", "6"],
        &[],
    );
    ok(&out);
    let log = read_log(&mock.log);
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let scan = callcheck::runs::scan(&runs);
    assert!(scan.skipped.is_empty());
    assert_eq!(scan.runs.len(), rows.len() * tasks.len());

    let (mut retried, mut cut, mut total) = (0, 0, 0);
    for r in &scan.runs {
        assert_eq!(r.samples.len(), k, "{}", r.dir.display());
        for s in &r.samples {
            total += 1;
            let files = r.read_sample(s).unwrap();
            let meta: Meta = serde_json::from_slice(&files.meta).unwrap();
            let n = meta.attempts.len();
            assert!(n >= 1);
            let i: u64 = s.parse().unwrap();
            let served = r.cell.model["model"].as_str().unwrap().to_string();
            let rec = &log[&(served.clone(), r.task_id.clone(), i, n as u32 - 1)];
            assert_eq!(sha(&files.response), rec.sha256, "{} {s}", r.dir.display());
            for (a, att) in meta.attempts[..n - 1].iter().enumerate() {
                let prior = &log[&(served.clone(), r.task_id.clone(), i, a as u32)];
                assert!(
                    prior.what == "drop" || [429, 500, 503].contains(&prior.status),
                    "{} {s}: attempt {a} was retried after {prior:?}",
                    r.dir.display()
                );
                let e = att.error.as_deref().unwrap_or("");
                if prior.what == "drop" {
                    assert!(
                        e.contains("before the first byte") || e.contains("request failed"),
                        "{e}"
                    );
                } else {
                    assert_eq!(att.status, Some(prior.status));
                    assert!(e.starts_with(&format!("HTTP {}", prior.status)), "{e}");
                }
            }
            if n > 1 {
                retried += 1;
                assert!(meta.attempts[1..].iter().all(|a| a.backoff_ms >= 1));
            }
            if rec.what.contains("(cut)") {
                cut += 1;
                // Kept as received, flagged, never retried after bytes arrived.
                assert!(!files.response.is_empty());
                let err = meta.error.as_deref().unwrap_or("");
                assert!(err.contains("kept as received"), "{err}");
                assert_eq!(meta.status, Some(200));
                if files.streamed {
                    assert!(!files.response.ends_with(b"data: [DONE]\n\n"));
                }
                let v = callcheck::score::score(
                    tasks.iter().find(|t| t.id == r.task_id).unwrap(),
                    &files.transcript(),
                );
                assert_eq!(v.outcome, callcheck::taxonomy::Outcome::Error);
            } else if rec.status == 200 {
                assert!(meta.error.is_none(), "{:?}", meta.error);
            }
        }
    }
    assert_eq!(total, rows.len() * tasks.len() * k);
    // With these rates and this many samples both kinds of fault must have struck.
    assert!(retried >= 3, "only {retried} samples were retried");
    assert!(cut >= 1, "no sample was cut");
    eprintln!("{total} samples, {retried} retried, {cut} cut");
}
