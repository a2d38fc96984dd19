//! Crash safety: kill -9 the collect process at random moments, resume each time, and check that
//! finished run directories are never modified, unfinished ones are never counted, and every
//! cell ends with exactly k samples. A moment is a random number of finished runs plus a few
//! random milliseconds, so the kills land mid-collection whatever the machine's load.

use crate::support::collect::*;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

const K: u32 = 4;
/// Cells per row: copies of the corpus's first task under new ids, so the test's length does
/// not depend on the corpus.
const COPIES: usize = 8;

const MOCK: &str = r#"
seed = 11
[[model]]
name = "slow"
[model.labels]
no_call = 0.1
truncation = 0.1
[model.faults]
latency = 1.0
latency_ms = [20, 60]
http_503 = 0.05
"#;

/// Samples per cell across finished run dirs (what a resume counts).
fn counts(root: &std::path::Path) -> BTreeMap<(String, String), u32> {
    let mut out = BTreeMap::new();
    for r in callcheck::runs::scan(root).runs {
        assert_eq!(r.cell.k as usize, r.samples.len(), "{}", r.dir.display());
        *out.entry((r.model.clone(), r.task_id.clone())).or_default() += r.samples.len() as u32;
    }
    out
}

#[test]
fn killed_at_random_points_resumes_to_exactly_k() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks_dir = tmp.path().join("tasks");
    std::fs::create_dir(&tasks_dir).unwrap();
    let all = callcheck::task::load(&corpus()).unwrap();
    let first: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&all[0].file).unwrap()).unwrap();
    for n in 0..COPIES {
        let mut t = first.clone();
        let id = format!("{}-copy{n}", all[0].id);
        t["id"] = id.clone().into();
        // Distinct content, so the mock tells the copies apart by their messages too.
        if let Some(c) = t["messages"][0]["content"].as_str() {
            t["messages"][0]["content"] = format!("{c} (#{n})").into();
        }
        std::fs::write(
            tasks_dir.join(format!("{id}.json")),
            serde_json::to_vec_pretty(&t).unwrap(),
        )
        .unwrap();
    }
    let n_tasks = COPIES;
    let rows = [
        ("a", "slow", false, 2),
        ("b", "slow", true, 2),
        ("c", "slow", false, 3),
    ];
    let (_mock, cfg) = mock_and_config(tmp.path(), Some(MOCK), &tasks_dir, &rows);
    let runs = tmp.path().join("runs");
    let k = K.to_string();
    let args = collect_argv(
        &cfg,
        &tasks_dir,
        &runs,
        &["--k", &k, "--backoff-ms", "5", "--quiet"],
    );

    let seed: u64 = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("CRASH_SEED={seed}");
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(seed);

    let mut finished: BTreeMap<std::path::PathBuf, String> = BTreeMap::new();
    let mut kills = 0;
    // Kills that struck with some runs finished and others not: the interesting ones.
    let mut mid_kills = 0;
    let mut rounds = 0;
    while kills < 12 {
        rounds += 1;
        assert!(
            rounds < 60,
            "the collection never got far enough to be killed 12 times"
        );
        let mut child = spawn_quiet(&args);
        // The moment: after a random number (0 to 3) of runs more than the tree holds, then a
        // random few milliseconds, so the kill lands in the preflight, between cells or in the
        // middle of a sample's files. Counted in events, not in time: a loaded machine makes
        // the test slower, never blind (with fixed times it killed only during start-up).
        let target = finished_run_count(&runs) + rng.random_range(0..=3usize);
        let mut exited =
            wait_for_runs(&mut child, &runs, target, Duration::from_secs(300)) == Waited::Exited;
        let t0 = Instant::now();
        let wait = Duration::from_millis(rng.random_range(0..40));
        while !exited && t0.elapsed() < wait {
            exited = child.try_wait().unwrap().is_some();
            std::thread::sleep(Duration::from_millis(1));
        }
        if exited {
            // It finished before the kill: start over from scratch so the kills keep coming.
            let status = child.wait().unwrap();
            assert!(status.success());
        } else {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            kills += 1;
        }
        // No finished run was modified or removed; the new ones are remembered.
        let now = finished_runs(&runs);
        for (dir, hash) in &finished {
            assert_eq!(
                now.get(dir),
                Some(hash),
                "{} changed after a kill",
                dir.display()
            );
        }
        finished = now;
        if !exited && !finished.is_empty() {
            mid_kills += 1;
        }
        // Nothing unfinished is counted, and no cell holds more than k.
        for (cell, n) in counts(&runs) {
            assert!(n <= K, "{cell:?} holds {n} > {K} samples");
        }
        if exited {
            // Keep the finished tree's guarantees but make room for more kills.
            for (cell, n) in counts(&runs) {
                assert_eq!(n, K, "{cell:?}");
            }
            std::fs::remove_dir_all(&runs).unwrap();
            finished.clear();
        }
    }
    // A last, uninterrupted run completes everything.
    let out = Command::new(BIN).args(&args).output().unwrap();
    ok(&out);
    let now = finished_runs(&runs);
    for (dir, hash) in &finished {
        assert_eq!(now.get(dir), Some(hash), "{} changed", dir.display());
    }
    let c = counts(&runs);
    assert_eq!(c.len(), rows.len() * n_tasks);
    for (cell, n) in &c {
        assert_eq!(*n, K, "{cell:?}");
    }
    // No temporary folder is left behind.
    for e in walkdir::WalkDir::new(&runs) {
        let e = e.unwrap();
        assert!(
            !e.file_name().to_string_lossy().starts_with(".tmp-"),
            "{} left behind",
            e.path().display()
        );
    }
    let out = Command::new(BIN).args(&args).output().unwrap();
    ok(&out);
    assert_eq!(
        finished_runs(&runs),
        now,
        "a complete tree was changed by a resume"
    );
    eprintln!("{kills} kills ({mid_kills} mid-collection) in {rounds} rounds");
    assert!(
        mid_kills >= 3,
        "only {mid_kills} kills struck mid-collection"
    );
}
