//! Ctrl-C: collect stops launching, drops the cells in flight without leaving anything that
//! looks finished, prints its summary and exits non-zero; running it again completes the rest.
//! The signal comes when the first run is finished (an event in runs/), not after a fixed time.

use crate::support::collect::*;
use std::process::{Command, Stdio};
use std::time::Duration;

const MOCK: &str = r#"
[[model]]
name = "slow"
[model.faults]
latency = 1.0
latency_ms = [30, 60]
"#;

#[test]
fn ctrl_c_discards_the_cells_in_flight_and_resume_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let rows: Vec<(String, &str, bool, usize)> = (0..4)
        .map(|i| (format!("r{i}"), "slow", i % 2 == 1, 1))
        .collect();
    let rows: Vec<(&str, &str, bool, usize)> = rows
        .iter()
        .map(|(a, b, c, d)| (a.as_str(), *b, *c, *d))
        .collect();
    let (_mock, cfg) = mock_and_config(tmp.path(), Some(MOCK), &corpus(), &rows);
    let runs = tmp.path().join("runs");
    let args = collect_argv(&cfg, &corpus(), &runs, &["--k", "10"]);
    let mut child = Command::new(BIN)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ctrl-C once a cell is finished, with the others in flight: after an event, not after a
    // time, so a loaded machine cannot make it land in the preflight or after the end.
    assert_eq!(
        wait_for_runs(&mut child, &runs, 1, Duration::from_secs(300)),
        Waited::Reached,
        "collect ended before Ctrl-C"
    );
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(err.contains("r0: "), "no summary: {err}");
    // Nothing unfinished is left, and what is finished is whole.
    for e in walkdir::WalkDir::new(&runs) {
        let e = e.unwrap();
        assert!(
            !e.file_name().to_string_lossy().starts_with(".tmp-"),
            "{}",
            e.path().display()
        );
    }
    let before = finished_runs(&runs);
    for r in callcheck::runs::scan(&runs).runs {
        assert_eq!(r.samples.len(), r.cell.k as usize);
    }
    let total: usize = callcheck::runs::scan(&runs)
        .runs
        .iter()
        .map(|r| r.samples.len())
        .sum();
    assert!(
        total < 4 * tasks.len() * 10,
        "the interrupt came too late to test anything"
    );
    ok(&Command::new(BIN).args(&args).output().unwrap());
    let after = finished_runs(&runs);
    for (d, h) in &before {
        assert_eq!(after.get(d), Some(h));
    }
    let mut per_cell = std::collections::BTreeMap::new();
    for r in callcheck::runs::scan(&runs).runs {
        *per_cell.entry((r.model, r.task_id)).or_insert(0) += r.samples.len();
    }
    assert_eq!(per_cell.len(), 4 * tasks.len());
    assert!(per_cell.values().all(|&n| n == 10));
}
