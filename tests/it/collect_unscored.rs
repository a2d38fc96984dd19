//! Rows that never scored and the summary's counts, against the real collect binary and a
//! loopback server: a base_url without /v1 (HTTP 404 on every request) fails the collection
//! with what the server answered and the likely cause; a re-run over complete cells of errors
//! says so and points at --retry-errors; attempts, retries and samples kept as errors are
//! counted apart and add up; a resume with nothing left says so.

use crate::support::collect::*;
use std::path::{Path, PathBuf};

fn config(dir: &Path, base_url: &str) -> PathBuf {
    row_config(dir, base_url, "timeout_secs = 10\n")
}

fn run(cfg: &Path, runs: &Path, extra: &[&str]) -> (bool, String) {
    let mut a = ONE_CELL.to_vec();
    a.extend_from_slice(extra);
    let out = collect_in(cfg, &corpus(), runs, &a, &[]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_base_url_without_v1_fails_with_what_the_server_answered_and_why() {
    let tmp = tempfile::tempdir().unwrap();
    // A server whose routes live under /v1: everything else is a 404.
    let server = loopback(|req| {
        if req.path.starts_with("/v1/") {
            Reply::json(200, completion(10, None))
        } else {
            Reply::json(404, r#"{"detail":"Not Found"}"#)
        }
    });
    let root = server.url.strip_suffix("/v1").unwrap().to_string();
    let cfg = config(tmp.path(), &root);
    let runs = tmp.path().join("runs");
    let (ok, err) = run(&cfg, &runs, &[]);
    assert!(!ok, "an all-error row must fail the collection: {err}");
    assert!(err.contains("HTTP 404 on every request"), "{err}");
    assert!(err.contains("base_url should end in /v1"), "{err}");
    assert!(err.contains("3 kept as transport errors"), "{err}");

    // Again: the cell is complete, with errors only.
    let (ok, err) = run(&cfg, &runs, &[]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("nothing to collect: all 1 cells complete"),
        "{err}"
    );
    assert!(
        err.contains("1 of the 1 complete cells hold only transport errors; --retry-errors"),
        "{err}"
    );
    assert!(err.contains("base_url should end in /v1"), "{err}");

    // Fixed, with --retry-errors: the samples are asked again and the row scores.
    let cfg = config(tmp.path(), &server.url);
    let (ok, err) = run(&cfg, &runs, &["--retry-errors"]);
    assert!(ok, "{err}");
    assert!(
        err.contains("3 samples written, 0 kept as transport errors"),
        "{err}"
    );
}

#[test]
fn the_summary_counts_attempts_retries_and_errors_apart() {
    let tmp = tempfile::tempdir().unwrap();
    // Each sample's first attempt is refused with a 503 (retried), sample 2 is then a 404
    // for good (kept as an error); the others are answered.
    let server = gateway(|req| {
        let tag = req
            .headers
            .get("x-callcheck-sample")
            .cloned()
            .unwrap_or_default();
        let parts: Vec<&str> = tag.rsplitn(3, '/').collect();
        match parts.as_slice() {
            ["0", _, _] => Reply::json(503, r#"{"error":{"message":"busy"}}"#),
            [_, "2", _] => Reply::json(404, r#"{"error":{"message":"gone"}}"#),
            _ => Reply::json(200, completion(10, None)),
        }
    });
    let cfg = config(tmp.path(), &server.url);
    let runs = tmp.path().join("runs");
    let (ok, err) = run(&cfg, &runs, &["--no-preflight"]);
    assert!(ok, "two of three samples scored: {err}");
    assert!(
        err.contains(
            "row: 3 samples written, 1 kept as transport errors (HTTP 404 × 1); 6 HTTP attempts (3 retries, on 3 samples)"
        ),
        "{err}"
    );
    // Nothing left: said in words, not as 0/0 at 0.00/s.
    let (ok, err) = run(&cfg, &runs, &["--no-preflight"]);
    assert!(ok, "{err}");
    assert!(
        err.contains("nothing to collect: all 1 cells complete"),
        "{err}"
    );
    assert!(!err.contains("0.00/s"), "{err}");
    assert!(!err.contains("hold only transport errors"), "{err}");
}

#[test]
fn a_row_seed_gives_each_sample_its_own_recorded_seed_reproducibly() {
    let tmp = tempfile::tempdir().unwrap();
    let server = gateway(|_| Reply::json(200, completion(10, None)));
    let cfg = row_config(
        tmp.path(),
        &server.url,
        "[model.params]\nseed = 7\ntemperature = 0.7\n",
    );
    let seeds_in = |runs: &Path| -> Vec<i64> {
        let mut out = Vec::new();
        for r in callcheck::runs::scan(runs).runs {
            for s in &r.samples {
                let req: serde_json::Value =
                    serde_json::from_slice(&r.read_sample(s).unwrap().request).unwrap();
                out.push(req["seed"].as_i64().unwrap());
            }
        }
        out
    };
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    for runs in [&a, &b] {
        let (ok, err) = run(&cfg, runs, &["--no-preflight"]);
        assert!(ok, "{err}");
    }
    let seeds = seeds_in(&a);
    let expected: Vec<i64> = (0..3)
        .map(|i| callcheck::request::sample_seed(7, "basic-weather-city", i))
        .collect();
    assert_eq!(seeds, expected);
    assert_eq!(
        seeds
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        3,
        "one seed per sample"
    );
    assert_eq!(seeds_in(&b), seeds, "a re-collection sends the same seeds");
}
