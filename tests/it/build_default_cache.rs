//! The plain `callcheck build` is the incremental one (SPEC §7): it keeps its cache in
//! `./.callcheck-cache/` (marked with a CACHEDIR.TAG and a `.gitignore` of `*`), `--cache DIR`
//! moves it, `--no-cache` goes without; the site is byte-identical either way and never holds
//! the cache.

use crate::support::site::*;
use std::path::Path;
use std::process::{Command, Output};

/// `callcheck build --out site` with the fixture corpus, run in `cwd`, plus `extra`.
fn build_in(cwd: &Path, runs: &Path, out: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_callcheck"))
        .current_dir(cwd)
        .arg("build")
        .arg("--tasks")
        .arg(fixture_tasks())
        .arg("--runs")
        .arg(runs)
        .args(["--out", out])
        .args(extra)
        .output()
        .expect("the callcheck binary runs")
}

fn ok(o: Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "build failed: {err}");
    err
}

/// The sample count of build's summary line (`built …: N samples …`).
fn samples(stderr: &str) -> usize {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("built "))
        .unwrap_or_else(|| panic!("no summary line in {stderr}"));
    let after = line.split(": ").nth(1).unwrap();
    after.split(' ').next().unwrap().parse().unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

fn assert_same_site(a: &Path, b: &Path, what: &str) {
    let (a, b) = (tree(a), tree(b));
    let differ: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .collect();
    assert!(differ.is_empty(), "{what}: the sites differ in {differ:?}");
    assert!(a.len() > 50, "{what}: only {} files", a.len());
}

#[test]
fn a_plain_build_keeps_a_marked_cache_in_the_working_folder_and_reuses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let first = ok(build_in(cwd, &fixture_runs(), "site", &[]));
    let n = samples(&first);
    assert!(
        first.contains(&format!(
            "cache .callcheck-cache: 0 of {n} samples' verdicts reused"
        )),
        "{first}"
    );
    let cache = cwd.join(".callcheck-cache");
    assert_eq!(
        names(&cache),
        [".gitignore", "CACHEDIR.TAG", "verdicts.bin"]
    );
    let tag = std::fs::read_to_string(cache.join("CACHEDIR.TAG")).unwrap();
    assert_eq!(
        tag.lines().next(),
        Some("Signature: 8a477f597d28d172789f06886806bc55")
    );
    assert_eq!(
        std::fs::read_to_string(cache.join(".gitignore")).unwrap(),
        "# Created by callcheck: this folder is build's cache.\n*\n"
    );
    assert_eq!(names(cwd), [".callcheck-cache", "site"]);

    // The same command again takes every verdict from the cache and leaves the site as it is.
    let before = tree(&cwd.join("site"));
    let second = ok(build_in(cwd, &fixture_runs(), "site", &[]));
    assert!(
        second.contains(&format!(
            "cache .callcheck-cache: {n} of {n} samples' verdicts reused"
        )),
        "{second}"
    );
    assert!(second.contains("site updated in place"), "{second}");
    assert_eq!(tree(&cwd.join("site")), before);
    // Nothing of the cache is published.
    assert!(
        before
            .keys()
            .all(|k| !k.contains("verdicts") && !k.ends_with("CACHEDIR.TAG")),
        "{:?}",
        before.keys().collect::<Vec<_>>()
    );
}

#[test]
fn the_default_cache_gives_the_site_no_cache_gives_before_and_after_a_new_run() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let runs = cwd.join("runs");
    copy_tree(&fixture_runs(), &runs);
    // A run folder that arrives later, as a collect would add it.
    let later = runs.join("gamma/weather-parallel-3/r0001");
    let held = cwd.join("held");
    copy_tree(&later, &held);
    std::fs::remove_dir_all(&later).unwrap();

    ok(build_in(cwd, &runs, "site", &[]));
    let none = ok(build_in(cwd, &runs, "site-no-cache", &["--no-cache"]));
    assert!(!none.contains("cache "), "{none}");
    assert_same_site(&cwd.join("site"), &cwd.join("site-no-cache"), "first build");

    std::fs::copy(cwd.join("site/data/samples.csv"), cwd.join("previous.csv")).unwrap();
    copy_tree(&held, &later);
    let again = ok(build_in(cwd, &runs, "site", &[]));
    let n = samples(&again);
    let reused: usize = again
        .split("cache .callcheck-cache: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no cache line in {again}"));
    assert!(0 < reused && reused < n, "{again}");
    // A fresh build without a cache, against the same previous outcomes, is the same site.
    ok(build_in(
        cwd,
        &runs,
        "site-fresh",
        &["--no-cache", "--previous", "previous.csv"],
    ));
    assert_same_site(
        &cwd.join("site"),
        &cwd.join("site-fresh"),
        "after a new run",
    );
    // --no-cache never made a cache folder of its own: the only one is the default's.
    assert_eq!(
        names(cwd),
        [
            ".callcheck-cache",
            "held",
            "previous.csv",
            "runs",
            "site",
            "site-fresh",
            "site-no-cache"
        ]
    );
}

#[test]
fn cache_dir_moves_it_and_no_cache_writes_none() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let err = ok(build_in(
        cwd,
        &fixture_runs(),
        "site",
        &["--cache", "elsewhere/c"],
    ));
    assert!(err.contains("cache elsewhere/c: 0 of "), "{err}");
    assert_eq!(
        names(&cwd.join("elsewhere/c")),
        [".gitignore", "CACHEDIR.TAG", "verdicts.bin"]
    );
    ok(build_in(cwd, &fixture_runs(), "site2", &["--no-cache"]));
    assert_eq!(names(cwd), ["elsewhere", "site", "site2"]);

    let both = build_in(
        cwd,
        &fixture_runs(),
        "site3",
        &["--cache", "c", "--no-cache"],
    );
    assert_eq!(both.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&both.stderr)
            .contains("the argument '--cache <DIR>' cannot be used with '--no-cache'"),
        "{}",
        String::from_utf8_lossy(&both.stderr)
    );
}

#[test]
fn a_site_built_into_the_working_folder_refuses_the_default_cache_inside_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("site");
    std::fs::create_dir(&cwd).unwrap();
    let o = build_in(&cwd, &fixture_runs(), ".", &[]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "error: the default cache .callcheck-cache is inside --out .: it would be published; pass --cache DIR to put the cache elsewhere, or --no-cache\n"
    );
    assert!(names(&cwd).is_empty());
}

#[test]
fn a_folder_of_other_files_named_as_the_cache_is_refused_and_left_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let mine = cwd.join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "keep\n").unwrap();
    let o = build_in(cwd, &fixture_runs(), "site", &["--cache", "mine"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        "error: the cache folder mine holds 1 file callcheck's cache does not write (notes.txt): refusing to use it, as a build would replace them; pass --cache DIR naming an empty or new folder, or --no-cache\n"
    );
    assert_eq!(names(&mine), ["notes.txt"]);
    assert_eq!(
        std::fs::read_to_string(mine.join("notes.txt")).unwrap(),
        "keep\n"
    );
    assert!(!cwd.join("site").exists());
}
