//! What collect refuses and what it never writes: secrets, hostile names, bad configs, too few
//! samples; and that shards split a collection into trees that merge by plain copying.

use crate::support::collect::*;
use std::path::Path;

fn all_bytes_under(root: &Path) -> Vec<(String, Vec<u8>)> {
    files(root).into_iter().collect()
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn the_api_key_never_reaches_disk_or_output() {
    let tmp = tempfile::tempdir().unwrap();
    let key = format!("sk-callcheck-{:016x}", rand::random::<u64>());
    let mock = start_mock(
        tmp.path(),
        Some(&format!(
            "api_key = \"{key}\"\n[[model]]\nname = \"m\"\n[model.faults]\nhttp_503 = 0.2\ncut = 0.1\n"
        )),
        &corpus(),
    );
    // The password in a URL is a secret too.
    let url_with_password = mock.url.replace("http://", "http://bob:hunter2pass@");
    let cfg = tmp.path().join("callcheck.toml");
    std::fs::write(
        &cfg,
        format!(
            "{}[[model]]\nname = \"wrong-key\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"CALLCHECK_TEST_WRONG_KEY\"\n",
            models_config(&url_with_password, &[("right-key", "m", true, 4)], "api_key_env = \"CALLCHECK_TEST_KEY\"\n"),
            mock.url
        ),
    )
    .unwrap();
    let runs = tmp.path().join("runs");
    let wrong = format!("{key}-but-wrong");
    let out = collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--k", "6", "--backoff-ms", "1"],
        &[
            ("CALLCHECK_TEST_KEY", &key),
            ("CALLCHECK_TEST_WRONG_KEY", &wrong),
        ],
    );
    // The wrong key's row holds 401s only: nothing of it can be scored, which fails the
    // collection with what the server answered and what to check.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("wrong-key: no scored sample")
            && err.contains("HTTP 401 on every request")
            && err.contains("check the variable CALLCHECK_TEST_WRONG_KEY"),
        "{err}"
    );
    assert!(!err.contains("right-key: no scored sample"), "{err}");
    let scan = callcheck::runs::scan(&runs);
    let mut checked = 0;
    for r in &scan.runs {
        for s in &r.samples {
            let meta: callcheck::transcript::Meta =
                serde_json::from_slice(&r.read_sample(s).unwrap().meta).unwrap();
            if r.model == "right-key" {
                // The right key was sent: the mock let every request through.
                assert_ne!(meta.status, Some(401));
            } else {
                assert_eq!(meta.status, Some(401));
            }
            checked += 1;
        }
    }
    assert!(checked > 0);
    let mut everything = all_bytes_under(tmp.path().join("runs").as_path());
    everything.push(("stdout".into(), out.stdout.clone()));
    everything.push(("stderr".into(), out.stderr.clone()));
    assert!(everything.len() > 5);
    for (name, bytes) in &everything {
        // The header in any recorded form; the bare word is not a secret (the corpus has a
        // payment-authorization tool).
        for secret in [
            key.as_str(),
            "hunter2pass",
            "Bearer",
            "authorization:",
            "Authorization:",
            "\"authorization\"",
            "\"Authorization\"",
        ] {
            assert!(!contains(bytes, secret), "{secret:?} found in {name}");
        }
    }
    // The variable's name is kept, so the run says where the key came from.
    let cell = std::fs::read_to_string(scan.runs[0].dir.join("cell.json")).unwrap();
    assert!(cell.contains("CALLCHECK_TEST_"));
}

fn run_config(text: &str, tasks: &Path) -> (std::process::Output, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("callcheck.toml");
    std::fs::write(&cfg, text).unwrap();
    let runs = tmp.path().join("runs");
    let out = collect_in(&cfg, tasks, &runs, &[], &[]);
    (out, tmp)
}

#[test]
fn hostile_model_names_are_refused_before_anything_is_written() {
    for name in ["../x", "a/b", "", "..", ".hidden", "a b"] {
        let text = format!(
            "[[model]]\nname = \"{name}\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n"
        );
        let (out, tmp) = run_config(&text, &corpus());
        assert!(!out.status.success(), "{name:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("key `name`"), "{name:?}: {err}");
        assert!(err.contains("callcheck.toml"), "{err}");
        // Nothing written anywhere: not even the runs folder.
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["callcheck.toml"], "{name:?}");
        assert!(!tmp.path().parent().unwrap().join("x").exists());
    }
}

#[test]
fn hostile_task_ids_are_refused_with_the_file_named() {
    for id in ["../x", "a/b", ""] {
        let tmp = tempfile::tempdir().unwrap();
        let tasks = tmp.path().join("tasks");
        std::fs::create_dir(&tasks).unwrap();
        let mut t: serde_json::Value = serde_json::from_slice(
            &std::fs::read(callcheck::task::load(&corpus()).unwrap()[0].file.clone()).unwrap(),
        )
        .unwrap();
        t["id"] = id.into();
        std::fs::write(tasks.join("evil.json"), serde_json::to_vec(&t).unwrap()).unwrap();
        let (out, dir) = run_config(
            "[[model]]\nname = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
            &tasks,
        );
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("evil.json"), "{id:?}: {err}");
        assert!(!dir.path().join("runs").exists());
    }
}

#[test]
fn config_errors_name_the_file_the_entry_and_the_key() {
    let good = "[[model]]\nname = \"qwen\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"Qwen/Qwen3-8B\"\n";
    for (text, needle) in [
        (
            format!("{good}temprature = 0.7\n"),
            "model[0] \"qwen\": key `temprature`: unknown field",
        ),
        (
            format!("{good}concurrency = 0\n"),
            "key `concurrency`: must be at least 1",
        ),
        (
            format!("{good}timeout_secs = \"soon\"\n"),
            "key `timeout_secs`",
        ),
        (
            good.replace("model = \"Qwen/Qwen3-8B\"\n", ""),
            "key `model`: missing field",
        ),
        (
            format!("{good}[model.params]\nstream = true\n"),
            "key `params.stream`",
        ),
        (format!("{good}{}", good), "key `name`: \"qwen\" is already"),
        ("[[model]\n".to_string(), "not valid TOML"),
    ] {
        let (out, _tmp) = run_config(&text, &corpus());
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("callcheck.toml"), "{err}");
        assert!(err.contains(needle), "wanted {needle:?} in {err}");
    }
    // A key variable that is not set is named, before any request.
    let (out, _tmp) = run_config(
        &format!("{good}api_key_env = \"CALLCHECK_SURELY_UNSET\"\n"),
        &corpus(),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CALLCHECK_SURELY_UNSET"));
}

#[test]
fn too_few_samples_are_refused_unless_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let rows = [("g", "mock-good", false, 2)];
    let (_mock, cfg) = mock_and_config(tmp.path(), None, &corpus(), &rows);
    let runs = tmp.path().join("runs");
    let out = collect_in(&cfg, &corpus(), &runs, &["--k", "2"], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-anecdote"));
    assert!(!runs.exists());
    ok(&collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--k", "2", "--allow-anecdote"],
        &[],
    ));
    let scan = callcheck::runs::scan(&runs);
    assert!(scan.runs.iter().all(|r| r.samples.len() == 2));
}

#[test]
fn shards_split_cells_and_their_trees_merge_by_copying() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = start_mock(tmp.path(), None, &corpus());
    let rows: Vec<(String, &str, bool, usize)> = (0..8)
        .map(|i| (format!("row{i}"), "mock-good", false, 2))
        .collect();
    let rows_ref: Vec<(&str, &str, bool, usize)> = rows
        .iter()
        .map(|(a, b, c, d)| (a.as_str(), *b, *c, *d))
        .collect();
    let cfg = tmp.path().join("callcheck.toml");
    std::fs::write(&cfg, models_config(&mock.url, &rows_ref, "")).unwrap();
    let n_tasks = callcheck::task::load(&corpus()).unwrap().len();
    let mut merged = std::collections::BTreeMap::new();
    let mut cells_seen = std::collections::BTreeSet::new();
    for shard in ["1/3", "2/3", "3/3"] {
        let runs = tmp.path().join(format!("runs-{}", &shard[..1]));
        ok(&collect_in(
            &cfg,
            &corpus(),
            &runs,
            &["--shard", shard, "--quiet"],
            &[],
        ));
        for r in callcheck::runs::scan(&runs).runs {
            assert!(
                r.run_id.contains(&format!("-s{}of3-", &shard[..1])),
                "{}",
                r.run_id
            );
            assert!(
                cells_seen.insert((r.model.clone(), r.task_id.clone())),
                "a cell collected by two shards"
            );
            assert_eq!(
                callcheck::collect::shard_of(&r.model, &r.task_id, 3).to_string(),
                shard[..1]
            );
        }
        for (name, bytes) in files(&runs) {
            if name != callcheck::runs::LOCK_FILE {
                assert!(merged.insert(name, bytes).is_none(), "paths collide");
            }
        }
    }
    assert_eq!(cells_seen.len(), 8 * n_tasks);
    let out = collect(&["--shard", "4/3", "--config", cfg.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--shard"));
}

#[test]
fn row_names_too_long_or_differing_only_in_case_are_refused_up_front() {
    let row = |name: &str| {
        format!(
            "[[model]]\nname = \"{name}\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n"
        )
    };
    let long = "r".repeat(250);
    let (out, tmp) = run_config(&row(&long), &corpus());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("250 bytes long") && err.contains("at most 120"),
        "{err}"
    );
    assert!(!tmp.path().join("runs").exists(), "nothing written");
    let (out, tmp) = run_config(&format!("{}{}", row("Qwen3"), row("qwen3")), &corpus());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("differs only in case"), "{err}");
    assert!(!tmp.path().join("runs").exists(), "nothing written");
}

#[test]
fn tasks_lint_refuses_task_ids_too_long_or_differing_only_in_case() {
    let base: serde_json::Value = serde_json::from_slice(
        &std::fs::read(callcheck::task::load(&corpus()).unwrap()[0].file.clone()).unwrap(),
    )
    .unwrap();
    let lint = |ids: &[&str]| {
        let tmp = tempfile::tempdir().unwrap();
        let tasks = tmp.path().join("tasks");
        std::fs::create_dir(&tasks).unwrap();
        for (i, id) in ids.iter().enumerate() {
            let mut t = base.clone();
            t["id"] = serde_json::json!(id);
            std::fs::write(tasks.join(format!("t{i}.json")), t.to_string()).unwrap();
        }
        let out = std::process::Command::new(BIN)
            .args(["tasks", "lint", "--tasks"])
            .arg(&tasks)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, err) = lint(&["weather-a", "weather-b"]);
    assert!(ok, "control: two distinct ids lint clean: {err}");
    let long = "t".repeat(300);
    let (ok, err) = lint(&[&long]);
    assert!(
        !ok && err.contains("300 bytes long") && err.contains("t0.json"),
        "{err}"
    );
    let (ok, err) = lint(&["Weather-A", "weather-a"]);
    assert!(!ok && err.contains("differs only in case"), "{err}");
}

/// collect's lock file is opened for writing: a symlink or a FIFO named `.collect.lock` in
/// runs/ is refused with what it is and the fix, and what the symlink points at is untouched
/// (SPEC §12), whether it exists or not.
#[test]
fn a_symlinked_or_fifo_lock_file_is_refused_and_its_target_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("callcheck.toml");
    // Never asked: the lock comes before any request.
    std::fs::write(
        &cfg,
        models_config("http://127.0.0.1:9/v1", &[("row", "m", false, 1)], ""),
    )
    .unwrap();
    let runs = tmp.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let lock = runs.join(".collect.lock");
    let outside = tmp.path().join("precious.txt");
    std::fs::write(&outside, b"mine").unwrap();
    let args = ["--only", "basic-weather-city", "--no-preflight"];
    let refused = |what: &str| {
        let out = collect_in(&cfg, &corpus(), &runs, &args, &[]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "cannot lock {}: {} {what}, not a lock file collect made: remove it (collect makes its lock file itself)",
                runs.display(),
                lock.display()
            )),
            "{err}"
        );
    };
    std::os::unix::fs::symlink(&outside, &lock).unwrap();
    refused("is a symlink");
    assert_eq!(std::fs::read(&outside).unwrap(), b"mine");
    // A dangling one: nothing is created where it points.
    let nowhere = tmp.path().join("nowhere");
    std::fs::remove_file(&lock).unwrap();
    std::os::unix::fs::symlink(&nowhere, &lock).unwrap();
    refused("is a symlink");
    assert!(!nowhere.exists());
    std::fs::remove_file(&lock).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&lock)
            .status()
            .unwrap()
            .success()
    );
    refused("is a FIFO or a socket");
    assert_eq!(callcheck::runs::scan(&runs).runs.len(), 0);
}
