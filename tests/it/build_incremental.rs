//! `callcheck build --cache DIR`: a rebuild after a new run folder arrives takes the unchanged
//! samples' verdicts from the cache, leaves their pages untouched, and gives exactly the site a
//! fresh build of the same runs gives; the cache never lands in the site.

use crate::support::site::*;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn inodes(dir: &Path) -> std::collections::BTreeMap<String, u64> {
    tree(dir)
        .into_keys()
        .map(|k| {
            let ino = std::fs::metadata(dir.join(&k)).unwrap().ino();
            (k, ino)
        })
        .collect()
}

/// The fixture runs built into `<dir>/site` with the cache in `<dir>/cache`: the two paths and
/// what the build said.
fn cached_fixture_build(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let (out, cache) = (dir.join("site"), dir.join("cache"));
    let err = build_ok(
        &fixture_tasks(),
        &fixture_runs(),
        &out,
        &["--cache", cache.to_str().unwrap()],
        &[],
    );
    (out, cache, err)
}

/// Asserts that the site in `out`, built with the flags `extra`, is byte for byte what a fresh
/// build of `runs` with them writes against the same previous samples.csv (`previous`), so that
/// both write the same changes page, and that there is one when some sample `moved`.
fn assert_as_fresh(
    tasks: &Path,
    runs: &Path,
    out: &Path,
    previous: &Path,
    (moved, what): (bool, &str),
    extra: &[&str],
) {
    let fresh = previous.with_extension("fresh");
    let args = [&["--previous", previous.to_str().unwrap()][..], extra].concat();
    build_ok(tasks, runs, &fresh, &args, &[]);
    let (a, b) = (tree(out), tree(&fresh));
    let differ: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .collect();
    assert!(differ.is_empty(), "a rebuild {what} differs: {differ:?}");
    assert_eq!(
        b.contains_key("changes.html"),
        moved,
        "{what}: the changes page"
    );
}

/// A copy of the site's samples.csv, the previous outcomes of the next build.
fn keep_csv(out: &Path, to: &Path) -> std::path::PathBuf {
    std::fs::copy(out.join("data/samples.csv"), to).unwrap();
    to.to_path_buf()
}

/// The run folder that arrives later in these tests, as a collect would add it.
const LATER: &str = "gamma/weather-parallel-3/r0001";

/// A copy of the fixture runs in `tmp` with [`LATER`] held back: the runs and where the held
/// run waits.
fn runs_before_later(tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let runs = tmp.join("runs");
    copy_tree(&fixture_runs(), &runs);
    let held = tmp.join("held");
    std::fs::rename(runs.join(LATER), &held).unwrap();
    (runs, held)
}

#[test]
fn an_incremental_rebuild_equals_a_fresh_build_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let (runs, held) = runs_before_later(tmp.path());
    let later = LATER;

    let out = tmp.path().join("site");
    let cache = tmp.path().join("cache");
    let cache_arg = cache.to_str().unwrap();
    let err = build_ok(&fixture_tasks(), &runs, &out, &["--cache", cache_arg], &[]);
    assert!(
        err.contains("0 of 33 samples' verdicts reused, 0 of 23 model, task, tag and label pages kept; site written afresh"),
        "{err}"
    );
    assert!(cache.join("verdicts.bin").is_file());
    let before = inodes(&out);
    let previous_csv = keep_csv(&out, &tmp.path().join("previous.csv"));

    std::fs::rename(&held, runs.join(later)).unwrap();
    let err = build_ok(&fixture_tasks(), &runs, &out, &["--cache", cache_arg], &[]);
    // Drawn again: the new run's model (gamma), its task, the task's tag (parallel) and the page
    // of the label its failures carry; the other 19 groups of pages stay as they were.
    assert!(
        err.contains("33 of 36 samples' verdicts reused, 19 of 23 model, task, tag and label pages kept; site updated in place"),
        "{err}"
    );
    let incremental = tree(&out);
    // Three samples were added: the changes page says so, as a fresh build's does.
    assert_as_fresh(
        &fixture_tasks(),
        &runs,
        &out,
        &previous_csv,
        (true, "after a run folder arrived"),
        &[],
    );

    // The unchanged samples' pages were not rewritten; the new run's were written.
    let after = inodes(&out);
    let kept = before
        .iter()
        .filter(|(k, _)| k.starts_with("t/"))
        .filter(|(k, ino)| after.get(*k) == Some(ino))
        .count();
    let sample_pages = before.keys().filter(|k| k.starts_with("t/")).count();
    assert_eq!(kept, sample_pages, "an unchanged page was rewritten");
    assert!(after.keys().any(|k| k.starts_with(&format!("t/{later}/"))));
    // The cache is beside the site, never in it.
    assert!(!incremental.keys().any(|k| k.contains("verdicts")));

    // Touching the run's folder, or writing a transcript's same bytes again, says the run may
    // have changed: its files are read and hashed again and, being the same bytes, keep their
    // verdicts; the site is unchanged.
    let previous_csv2 = keep_csv(&out, &tmp.path().join("previous2.csv"));
    let run_dir = runs.join("alpha/contact-card/r0001");
    let f = run_dir.join("samples/000/response.json");
    let same = std::fs::read(&f).unwrap();
    let touch = || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::File::open(&run_dir)
            .unwrap()
            .set_times(std::fs::FileTimes::new().set_modified(std::time::SystemTime::now()))
            .unwrap();
    };
    std::fs::write(&f, &same).unwrap();
    touch();
    let err = build_ok(&fixture_tasks(), &runs, &out, &["--cache", cache_arg], &[]);
    assert!(
        err.contains("36 of 36 samples' verdicts reused, 23 of 23 model, task, tag and label pages kept; site updated in place"),
        "{err}"
    );
    assert_as_fresh(
        &fixture_tasks(),
        &runs,
        &out,
        &previous_csv2,
        (false, "over a touched run"),
        &[],
    );

    // A transcript and the cell.json written in place inside the finished run, the run's
    // folders untouched: each file's own look changed, so both are read and scored again at
    // once (SPEC §12, turn 5), and the manifest names the run's new bytes, as a fresh build's.
    let previous_csv3 = keep_csv(&out, &tmp.path().join("previous3.csv"));
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&f, b"{\"not\": \"a completion\"}").unwrap();
    let cell = run_dir.join("cell.json");
    let mut cell_bytes = std::fs::read(&cell).unwrap();
    cell_bytes.push(b'\n');
    std::fs::write(&cell, cell_bytes).unwrap();
    let err = build_ok(&fixture_tasks(), &runs, &out, &["--cache", cache_arg], &[]);
    // Drawn again: the sample's model, task and tag (the cell has no failure, before or after),
    // and the pages of the three labels other rows failed contact-card with: each shows how
    // often a fallback to alpha passed that task (SPEC §11), and alpha's passes there changed.
    assert!(
        err.contains("33 of 36 samples' verdicts reused, 17 of 23 model, task, tag and label pages kept; site updated in place"),
        "{err}"
    );
    let run_sha = |site: &Path| {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(site.join("data/manifest.json")).unwrap())
                .unwrap();
        m["runs"]["alpha/contact-card/r0001"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let fresh = tmp.path().join("fresh-edited");
    build_ok(&fixture_tasks(), &runs, &fresh, &[], &[]);
    assert_eq!(run_sha(&out), run_sha(&fresh));
    let csv = std::fs::read_to_string(out.join("data/samples.csv")).unwrap();
    let row = csv
        .lines()
        .find(|l| l.starts_with("t/alpha/contact-card/r0001/000.html,"))
        .unwrap();
    assert!(row.contains(",error,"), "{row}");
    // The changes page lists the sample that moved from pass to error.
    let changes = std::fs::read_to_string(out.join("changes.html")).unwrap();
    assert!(
        changes.contains("t/alpha/contact-card/r0001/000.html"),
        "{changes}"
    );
    assert_as_fresh(
        &fixture_tasks(),
        &runs,
        &out,
        &previous_csv3,
        (true, "over an edited file"),
        &[],
    );

    // A removed run folder disappears from an in-place rebuild too, and its three samples are
    // counted as removed, as a fresh build counts them.
    let previous_csv4 = keep_csv(&out, &tmp.path().join("previous4.csv"));
    std::fs::remove_dir_all(runs.join(later)).unwrap();
    build_ok(&fixture_tasks(), &runs, &out, &["--cache", cache_arg], &[]);
    assert!(
        !tree(&out)
            .keys()
            .any(|k| k.starts_with(&format!("t/{later}/")))
    );
    assert_as_fresh(
        &fixture_tasks(),
        &runs,
        &out,
        &previous_csv4,
        (true, "after a run folder left"),
        &[],
    );
}

#[test]
fn a_rebuild_over_a_site_whose_matrix_moved_is_a_fresh_one() {
    // 30 models x 101 tasks = 3,030 cells: the matrix is drawn on the tag pages; without the
    // last model, 2,929 cells, on the index. Every run page links its cell where the matrix is,
    // so when the last model arrives the site is built beside, none of its pages kept; the
    // site in --out is still the cache's, so what changed is told from the cache, and must be
    // what a fresh build reading the previous samples.csv says.
    let tmp = tempfile::tempdir().unwrap();
    let synth = tmp.path().join("synth");
    let opts = callcheck::synth::SynthOpts {
        samples: 3_030,
        models: 30,
        k: 1,
        seed: 7,
        served: None,
    };
    assert_eq!(synth_tree(&synth, &opts), 3_030);
    let (tasks, runs) = (synth.join("tasks"), synth.join("runs"));
    let held = tmp.path().join("model-29");
    std::fs::rename(runs.join("model-29"), &held).unwrap();
    let out = tmp.path().join("site");
    let cache = tmp.path().join("cache");
    let cache_arg = ["--cache", cache.to_str().unwrap()];
    build_ok(&tasks, &runs, &out, &cache_arg, &[]);
    assert!(read(&out, "index.html").contains("id=\"c~"));
    let previous = keep_csv(&out, &tmp.path().join("previous.csv"));

    std::fs::rename(&held, runs.join("model-29")).unwrap();
    let err = build_ok(&tasks, &runs, &out, &cache_arg, &[]);
    assert!(
        err.contains("0 of 3030 samples' verdicts reused, 0 of 147 model, task, tag and label pages kept; site written afresh"),
        "{err}"
    );
    assert!(!read(&out, "index.html").contains("id=\"c~"));
    // The changes page says the last model's 101 samples are new, as a fresh build's does.
    let changes = read(&out, "changes.html");
    assert!(
        changes.contains("(2929 samples): 0 samples changed outcome, 101 new, 0 no longer present"),
        "{changes}"
    );
    assert_as_fresh(
        &tasks,
        &runs,
        &out,
        &previous,
        (true, "after the matrix moved"),
        &[],
    );
}

#[test]
fn a_cache_inside_the_site_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    let o = build(
        &fixture_tasks(),
        &fixture_runs(),
        &out,
        &["--cache", out.join("cache").to_str().unwrap()],
        &[],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("would be published"));
}

#[test]
fn a_damaged_or_foreign_cache_costs_only_time() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, cache, _) = cached_fixture_build(tmp.path());
    let cache_arg = cache.to_str().unwrap();
    let file = cache.join("verdicts.bin");
    let good = std::fs::read(&file).unwrap();
    let fresh = tree(&out);
    // Cut short, one byte flipped (in a detail, say: it would still decode), another program's
    // file, an earlier version's JSON cache: each is said, everything is scored again, and the
    // site is the same.
    let mut flipped = good.clone();
    let i = good.len() / 2;
    flipped[i] ^= 0xff;
    let cases: [(&str, Vec<u8>); 4] = [
        ("cut short", good[..good.len() / 3].to_vec()),
        ("one byte changed", flipped),
        ("not ours", b"PK\x03\x04 a zip file".to_vec()),
        ("json", b"{\"identity\": \"x\", \"runs\": {}}".to_vec()),
    ];
    for (what, bytes) in cases {
        std::fs::write(&file, &bytes).unwrap();
        let err = build_ok(
            &fixture_tasks(),
            &fixture_runs(),
            &out,
            &["--cache", cache_arg],
            &[],
        );
        assert!(
            err.contains("note: the cache") && err.contains("everything is scored again"),
            "{what}: {err}"
        );
        assert!(
            err.contains("0 of 36 samples' verdicts reused"),
            "{what}: {err}"
        );
        assert_eq!(tree(&out), fresh, "{what}: the site differs");
        // The build wrote a good cache again.
        assert!(
            std::fs::read(&file)
                .unwrap()
                .starts_with(b"callcheck verdict cache")
        );
    }
}

#[test]
fn the_same_site_named_another_way_is_still_updated_in_place() {
    // `--out site` from the folder above it, `--out ./site/`, or its absolute path: one site,
    // recognised by the cache each time (before, another spelling silently rebuilt it all).
    let tmp = tempfile::tempdir().unwrap();
    let (out, cache, err) = cached_fixture_build(tmp.path());
    let cache_arg = cache.to_str().unwrap();
    assert!(err.contains("site written afresh"), "{err}");
    let fresh = tree(&out);
    for spelling in ["site", "./site/", "../site"] {
        let cwd = if spelling == "../site" {
            std::fs::create_dir_all(tmp.path().join("elsewhere")).unwrap();
            tmp.path().join("elsewhere")
        } else {
            tmp.path().to_path_buf()
        };
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_callcheck"))
            .current_dir(&cwd)
            .arg("build")
            .arg("--tasks")
            .arg(fixture_tasks())
            .arg("--runs")
            .arg(fixture_runs())
            .args(["--out", spelling, "--cache", cache_arg])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{spelling}: {err}");
        assert!(
            err.contains("36 of 36 samples' verdicts reused, 23 of 23 model, task, tag and label pages kept; site updated in place"),
            "{spelling}: {err}"
        );
        assert_eq!(tree(&out), fresh, "{spelling}: the site differs");
    }
}

#[test]
fn a_rebuild_with_comparisons_equals_a_fresh_build_byte_for_byte() {
    // Two comparisons: alpha against beta does not change when gamma's run arrives, so its
    // pooled statistics come from the cache; alpha against gamma is computed again.
    let tmp = tempfile::tempdir().unwrap();
    let (runs, held) = runs_before_later(tmp.path());
    let (out, cache) = (tmp.path().join("site"), tmp.path().join("cache"));
    let pairs = ["--compare", "alpha:beta", "--compare", "alpha:gamma"];
    let with_cache = [&["--cache", cache.to_str().unwrap()][..], &pairs[..]].concat();
    build_ok(&fixture_tasks(), &runs, &out, &with_cache, &[]);
    let before = tree(&out);
    let previous = keep_csv(&out, &tmp.path().join("previous.csv"));
    std::fs::rename(&held, runs.join(LATER)).unwrap();
    build_ok(&fixture_tasks(), &runs, &out, &with_cache, &[]);
    assert_as_fresh(
        &fixture_tasks(),
        &runs,
        &out,
        &previous,
        (true, "with comparisons"),
        &pairs,
    );
    // Both comparisons are there, and the one with gamma changed with gamma's new samples.
    let after = tree(&out);
    let page = "compare/alpha--gamma.html";
    assert!(after.contains_key("compare/alpha--beta.html") && after.contains_key(page));
    assert_ne!(before.get(page), after.get(page));
}

/// A failure's section links the samples that followed it up, though its run is scored and
/// rendered before (or beside) the feedback runs: when a feedback round arrives after a cached
/// build, the run it follows up is rendered again (its own samples unchanged) and its page is
/// the one a fresh build writes.
#[test]
fn a_new_follow_up_run_renders_its_parents_page_again() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = std::process::Command::new(env!("CARGO_BIN_EXE_callcheck"))
        .current_dir(tmp.path())
        .args(["demo", "--quiet", "--tasks"])
        .arg(repo().join("tasks"))
        .output()
        .unwrap();
    assert!(
        demo.status.success(),
        "{}",
        String::from_utf8_lossy(&demo.stderr)
    );
    let runs = tmp.path().join("runs");
    // A feedback run (named after its style) and the parent its first sample names.
    let feedback = walk_runs(&runs)
        .into_iter()
        .find(|r| r.file_name().unwrap().to_string_lossy().ends_with("-error"))
        .expect("the demo has a feedback round in the error style");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(feedback.join("samples/000/meta.json")).unwrap())
            .unwrap();
    let (parent_run, parent_sample) = (
        meta["parent"]["run"].as_str().unwrap().to_string(),
        meta["parent"]["sample"].as_str().unwrap().to_string(),
    );
    let rel = feedback.strip_prefix(&runs).unwrap().to_path_buf();
    let task_dir = rel.parent().unwrap().to_string_lossy().into_owned();
    let run_name = rel.file_name().unwrap().to_string_lossy().into_owned();
    let parent_page = format!("t/{task_dir}/{parent_run}/index.html");
    let link = format!("<a href=\"../{run_name}/index.html#s-000\">");

    let held = tmp.path().join("held");
    std::fs::rename(&feedback, &held).unwrap();
    let (out, cache) = (tmp.path().join("site2"), tmp.path().join("cache"));
    let cached = ["--cache", cache.to_str().unwrap()];
    let tasks = repo().join("tasks");
    build_ok(&tasks, &runs, &out, &cached, &[]);
    let before = read(&out, &parent_page);
    assert!(
        !before.contains(&link),
        "{parent_page} links a run not yet there"
    );

    std::fs::rename(&held, &feedback).unwrap();
    build_ok(&tasks, &runs, &out, &cached, &[]);
    let after = read(&out, &parent_page);
    let section = after
        .split(&format!("id=\"s-{parent_sample}\""))
        .nth(1)
        .and_then(|s| s.split("</section>").next())
        .unwrap();
    assert!(
        section.contains(&link),
        "{parent_page}#s-{parent_sample}: {section}"
    );
    let fresh = tmp.path().join("fresh");
    build_ok(&tasks, &runs, &fresh, &["--no-cache"], &[]);
    assert_eq!(after, read(&fresh, &parent_page));
}

/// Every run folder under `runs` (`<model>/<task>/<run>`), sorted.
fn walk_runs(runs: &Path) -> Vec<std::path::PathBuf> {
    let dirs = |d: &Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect()
    };
    let mut found = Vec::new();
    for model in dirs(runs) {
        for task in dirs(&model) {
            found.extend(dirs(&task));
        }
    }
    found.sort();
    found
}
