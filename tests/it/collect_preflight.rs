//! Collect's preflight against the real mock binary over loopback: the results land in every
//! `cell.json` of the row under `server.preflight`; a server that drops the tools from the
//! prompt (`ignore_tools`) makes collect warn loudly but still collect; a refused tool_choice is
//! recorded with its status and error message; a model id the server does not list stops that
//! row only; `--no-preflight` skips all of it.

use crate::support::collect::*;
use callcheck::runs;
use callcheck::server::CHECKS;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A mock config: the built-in-like honest model, one whose template drops the tools, one that
/// refuses `required` and the named form like a vLLM without the right flags.
const MOCK: &str = r#"
[[model]]
name = "honest"

[[model]]
name = "deaf"
ignore_tools = true

[[model]]
name = "picky"
refuse_tool_choice = ["required", "named"]
"#;

fn run(
    dir: &Path,
    url: &str,
    rows: &[(&str, &str, bool, usize)],
    extra: &[&str],
) -> (std::process::Output, PathBuf) {
    let cfg = dir.join("callcheck.toml");
    std::fs::write(&cfg, models_config(url, rows, "")).unwrap();
    let runs = dir.join("runs");
    let mut a = ONE_CELL.to_vec();
    a.extend_from_slice(extra);
    (collect_in(&cfg, &corpus(), &runs, &a, &[]), runs)
}

/// `server.preflight` of every finished run of a model row.
fn preflights(runs_root: &Path, model: &str) -> Vec<Value> {
    runs::scan(runs_root)
        .runs
        .iter()
        .filter(|r| r.model == model)
        .map(|r| r.cell.server["preflight"].clone())
        .collect()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_honest_server_passes_every_check_and_the_results_are_in_cell_json() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = start_mock(tmp.path(), Some(MOCK), &corpus());
    let (out, runs) = run(
        tmp.path(),
        &mock.url,
        &[
            ("plain", "honest", false, 4),
            ("streamed", "honest", true, 4),
        ],
        &[],
    );
    ok(&out);
    assert!(!stderr(&out).contains("WARNING"), "{}", stderr(&out));
    for row in ["plain", "streamed"] {
        let all = preflights(&runs, row);
        assert_eq!(all.len(), 1, "{row}: one finished run");
        let p = &all[0];
        let keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, CHECKS, "{row}: one entry per check, in order");
        for (k, c) in p.as_object().unwrap() {
            assert_eq!(c["ok"], true, "{row} {k}: {c}");
            assert_eq!(c["status"], 200, "{row} {k}: {c}");
        }
        let tools = p["tools_in_prompt"]["detail"].as_str().unwrap();
        assert!(tools.contains("the tools reach the prompt"), "{tools}");
        assert!(
            p["tool_choice_named"]["detail"]
                .as_str()
                .unwrap()
                .contains("enforced: called get_weather"),
            "{p}"
        );
        assert!(
            p["stream"]["detail"]
                .as_str()
                .unwrap()
                .contains("SSE stream"),
            "{p}"
        );
    }
    // The probes are not samples: the mock's log holds the 2 rows × 3 samples only.
    let log = std::fs::read_to_string(&mock.log).unwrap();
    assert_eq!(log.lines().count(), 6, "{log}");
    assert!(!log.contains("preflight"), "{log}");
}

#[test]
fn a_server_that_drops_the_tools_gets_a_loud_warning_and_is_still_collected() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = start_mock(tmp.path(), Some(MOCK), &corpus());
    let (out, runs) = run(
        tmp.path(),
        &mock.url,
        &[("deaf", "deaf", false, 4), ("honest", "honest", false, 4)],
        // --quiet: the warning must come through anyway.
        &["--quiet"],
    );
    ok(&out);
    let err = stderr(&out);
    let warning = err
        .lines()
        .find(|l| l.starts_with("WARNING deaf: preflight tools_in_prompt:"))
        .unwrap_or_else(|| panic!("no tools warning in:\n{err}"));
    assert!(
        warning.contains("drops the tools") && warning.contains("no_call for the wrong reason"),
        "{warning}"
    );
    assert!(!err.contains("WARNING honest"), "{err}");
    let p = &preflights(&runs, "deaf")[0];
    assert_eq!(p["tools_in_prompt"]["ok"], false, "{p}");
    // The other checks still pass: the requests are accepted, the calls never come.
    assert_eq!(p["tool_choice_auto"]["ok"], true, "{p}");
    assert!(
        p["tool_choice_required"]["detail"]
            .as_str()
            .unwrap()
            .contains("not enforced"),
        "{p}"
    );
    // And the row was collected: three samples, every one of them prose (what the warning
    // predicted), since the model never saw the tool.
    let task = callcheck::task::load(&corpus().join("basic/basic-weather-city.json")).unwrap();
    let scan = runs::scan(&runs);
    let run = scan.runs.iter().find(|r| r.model == "deaf").unwrap();
    assert_eq!(run.samples.len(), 3);
    for s in &run.samples {
        let t = run.read_sample(s).unwrap().transcript();
        let v = callcheck::score::score(&task[0], &t);
        assert_eq!(
            v.label().map(|l| l.as_str()),
            Some("no_call"),
            "{}",
            v.detail
        );
    }
}

#[test]
fn a_refused_tool_choice_is_recorded_with_its_status_and_message() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = start_mock(tmp.path(), Some(MOCK), &corpus());
    let (out, runs) = run(tmp.path(), &mock.url, &[("picky", "picky", false, 4)], &[]);
    ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains("WARNING picky: preflight tool_choice_required: refused: HTTP 400"),
        "{err}"
    );
    let p = &preflights(&runs, "picky")[0];
    for k in ["tool_choice_required", "tool_choice_named"] {
        assert_eq!(p[k]["ok"], false, "{k}: {p}");
        assert_eq!(p[k]["status"], 400, "{k}: {p}");
        let d = p[k]["detail"].as_str().unwrap();
        assert!(d.contains("is not supported by this server"), "{k}: {d}");
    }
    assert_eq!(p["tool_choice_auto"]["ok"], true, "{p}");
    assert_eq!(p["tools_in_prompt"]["ok"], true, "{p}");
    // The summary repeats the warnings.
    assert!(
        err.contains("  picky: WARNING preflight tool_choice_named: refused: HTTP 400"),
        "{err}"
    );
}

#[test]
fn a_model_id_the_server_does_not_list_stops_that_row_only() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = start_mock(tmp.path(), Some(MOCK), &corpus());
    let (out, runs) = run(
        tmp.path(),
        &mock.url,
        &[("typo", "honset", false, 4), ("honest", "honest", false, 4)],
        &[],
    );
    assert!(
        !out.status.success(),
        "a row that was not collected fails the command"
    );
    let err = stderr(&out);
    assert!(
        err.contains("typo: not collected: the served model id \"honset\" is not among the models")
            && err.contains("(honest, deaf, picky)"),
        "{err}"
    );
    assert!(
        !runs.join("typo").exists(),
        "nothing is written for the stopped row"
    );
    assert_eq!(
        preflights(&runs, "honest").len(),
        1,
        "the other row is collected"
    );

    // Without the preflight, the same row is collected, and every sample is the server's 404
    // (an error, not a model failure); its cell.json carries no preflight. A row with no
    // scored sample fails the command, saying what the server answered.
    let tmp2 = tempfile::tempdir().unwrap();
    let (out, runs) = run(
        tmp2.path(),
        &mock.url,
        &[("typo", "honset", false, 4)],
        &["--no-preflight", "--retries", "0"],
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("typo: no scored sample") && err.contains("HTTP 404 on every request"),
        "{err}"
    );
    assert_eq!(preflights(&runs, "typo"), vec![Value::Null]);
    let scan = runs::scan(&runs);
    let run = &scan.runs[0];
    for s in &run.samples {
        let files = run.read_sample(s).unwrap();
        assert_eq!(files.transcript().meta.unwrap().status, Some(404));
    }
}
