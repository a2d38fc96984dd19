//! Helpers shared by the `site_*` integration tests: run the real binary's `build`, read back
//! the tree it wrote.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture_runs() -> PathBuf {
    repo().join("tests/fixtures/runs")
}

pub fn fixture_tasks() -> PathBuf {
    repo().join("tests/fixtures/runs-tasks")
}

/// Runs `callcheck build` and returns its output; `envs` are added to the environment.
pub fn build(
    tasks: &Path,
    runs: &Path,
    out: &Path,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_callcheck"));
    c.arg("build")
        .arg("--tasks")
        .arg(tasks)
        .arg("--runs")
        .arg(runs)
        .arg("--out")
        .arg(out)
        .args(extra);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("the callcheck binary runs")
}

/// Builds and asserts success, returning stderr.
pub fn build_ok(
    tasks: &Path,
    runs: &Path,
    out: &Path,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> String {
    let o = build(tasks, runs, out, extra, envs);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "build failed: {err}");
    err
}

/// Every file under `dir`, by `/`-separated relative path.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() {
            let rel = e.path().strip_prefix(dir).unwrap();
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.insert(rel.join("/"), std::fs::read(e.path()).unwrap());
        }
    }
    out
}

pub fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// Resolves a relative link from the page at `from` (site-relative) to a site-relative path,
/// or None when it climbs above the root.
pub fn resolve(from: &str, link: &str) -> Option<String> {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for seg in link.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

/// Copies a folder tree.
pub fn copy_tree(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(from).unwrap();
        let dest = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Chromium on PATH; a failure (never a silent pass) when it is absent.
pub fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "chromium is not installed (apt-get install -y chromium); these tests need it{}",
        if std::env::var_os("CALLCHECK_REQUIRE_CHROMIUM").is_some() {
            " and CALLCHECK_REQUIRE_CHROMIUM is set"
        } else {
            ""
        }
    );
}
