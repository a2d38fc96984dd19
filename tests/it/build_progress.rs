//! `callcheck build` shows its progress (runs scored, samples, pages, then the summary pages)
//! on a terminal, and nothing of it when stderr is a pipe. The terminal is a real
//! pseudo-terminal, made by util-linux's `script`.

use crate::support::site::*;
use std::process::Command;

#[test]
fn a_build_into_a_pipe_prints_its_summary_lines_and_no_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let err = build_ok(
        &fixture_tasks(),
        &fixture_runs(),
        &tmp.path().join("site"),
        &[],
        &[],
    );
    assert!(!err.contains('\r') && !err.contains('\x1b'), "{err:?}");
    assert!(!err.contains("runs scored"), "{err}");
    let last = err.lines().last().unwrap();
    assert!(last.starts_with("built "), "{err}");
}

#[test]
fn a_build_on_a_terminal_shows_the_runs_scored_then_clears_the_bar() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    let command = shlex::try_join([
        env!("CARGO_BIN_EXE_callcheck"),
        "build",
        "--no-cache",
        "--tasks",
        fixture_tasks().to_str().unwrap(),
        "--runs",
        fixture_runs().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .unwrap();
    // `script` runs the command on a pseudo-terminal and copies what it wrote to stdout.
    let o = Command::new("script")
        .args(["--quiet", "--return", "--command", &command, "/dev/null"])
        .env("COLUMNS", "120")
        .env("LINES", "40")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux's script runs");
    let shown = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{shown}");
    let n_runs = 12;
    assert!(
        shown.contains(&format!("/{n_runs} runs scored")),
        "no progress on a terminal: {shown:?}"
    );
    // The bar is cleared (an erase-line sequence) before the summary line.
    let built = shown.find("built ").expect("the summary line");
    assert!(shown[..built].contains("\x1b[2K"), "{shown:?}");
    assert!(out.join("index.html").is_file());
}
