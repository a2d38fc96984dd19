//! Collect every task × the three built-in mock models × k=3 through the real binaries over
//! loopback, then check the runs/ tree is exactly SPEC §4's, that every byte on disk is what the
//! mock sent (by its log, and by recomputing the deterministic replies), that a second run adds
//! nothing, and that a larger --k adds one run directory holding only the missing samples.

use crate::support::collect::*;
use callcheck::collect::config;
use callcheck::mock::MockConfig;
use callcheck::mock::respond::{self, Answer, SampleKey};
use callcheck::request::sample_request;
use callcheck::score::score;
use callcheck::taxonomy::{Label, Outcome};
use callcheck::transcript::Meta;
use std::collections::{BTreeMap, BTreeSet};

const ROWS: [(&str, &str, bool, usize); 3] = [
    ("good", "mock-good", false, 8),
    ("sloppy", "mock-sloppy", false, 8),
    ("flaky.stream", "mock-flaky", true, 8),
];

fn names(dir: &std::path::Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn every_task_every_model_k3_is_collected_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = start_mock(tmp.path(), None, &corpus());
    let cfg_text = models_config(&mock.url, &ROWS, "");
    let cfg_path = tmp.path().join("callcheck.toml");
    std::fs::write(&cfg_path, &cfg_text).unwrap();
    let runs = tmp.path().join("runs");
    let run = |k: &str| {
        collect_in(
            &cfg_path,
            &corpus(),
            &runs,
            &["--k", k, "--backoff-ms", "5"],
            &[],
        )
    };
    let out = run("3");
    ok(&out);

    let tasks = callcheck::task::load(&corpus()).unwrap();
    let cfg = config::load(&cfg_path).unwrap();
    let log = read_log(&mock.log);
    let mock_cfg = MockConfig::builtin();

    // The tree, exactly.
    let mut top = names(&runs);
    assert!(top.remove(callcheck::runs::LOCK_FILE));
    assert_eq!(
        top,
        ROWS.iter()
            .map(|r| r.0.to_string())
            .collect::<BTreeSet<_>>()
    );
    let mut labels_seen = BTreeSet::new();
    let mut samples = 0;
    let run_id_shape = regex::Regex::new(r"^\d{8}T\d{6}Z-s1of1-[0-9a-f]{8}$").unwrap();
    for entry in &cfg.models {
        let mdir = runs.join(&entry.name);
        assert_eq!(
            names(&mdir),
            tasks.iter().map(|t| t.id.clone()).collect::<BTreeSet<_>>()
        );
        let mock_model = mock_cfg
            .models
            .iter()
            .find(|m| m.name == entry.model)
            .unwrap();
        for task in &tasks {
            let cdir = mdir.join(&task.id);
            let run_ids = names(&cdir);
            assert_eq!(run_ids.len(), 1, "{}: {run_ids:?}", cdir.display());
            let run_id = run_ids.iter().next().unwrap();
            assert!(run_id_shape.is_match(run_id), "run id {run_id}");
            let rdir = cdir.join(run_id);
            assert_eq!(
                names(&rdir),
                ["cell.json", "samples"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            );
            let cell: callcheck::runs::CellInfo =
                serde_json::from_slice(&std::fs::read(rdir.join("cell.json")).unwrap()).unwrap();
            assert_eq!(cell.format_version, callcheck::runs::FORMAT_VERSION);
            assert_eq!(cell.k, 3);
            assert_eq!(&cell.run_id, run_id);
            assert_eq!(cell.task.id, task.id);
            assert_eq!(cell.task.sha256, task.sha256);
            assert_eq!(*cell.model, entry.redacted());
            assert_eq!(
                cell.server["endpoints"][0]["models"]["ids"][1],
                "mock-sloppy"
            );
            assert!(
                cell.server["endpoints"][0]["version"]["version"]
                    .as_str()
                    .unwrap()
                    .starts_with("callcheck-mock")
            );
            assert!(cell.started <= cell.ended && cell.started.ends_with('Z'));
            assert_eq!(
                names(&rdir.join("samples")),
                ["000", "001", "002"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            );
            for i in 0..3u64 {
                let request = sample_request(task, &entry.asking(), i as u32);
                let request_bytes = serde_json::to_vec(&request).unwrap();
                samples += 1;
                let sdir = rdir.join("samples").join(format!("{i:03}"));
                let files = names(&sdir);
                let meta: Meta =
                    serde_json::from_slice(&std::fs::read(sdir.join("meta.json")).unwrap())
                        .unwrap();
                let ct = meta
                    .headers
                    .get("content-type")
                    .cloned()
                    .unwrap_or_default();
                let resp_name = if ct.starts_with("text/event-stream") {
                    "response.sse"
                } else {
                    "response.json"
                };
                assert_eq!(
                    files,
                    ["meta.json", "request.json", resp_name]
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                    "{}",
                    sdir.display()
                );
                // The request exactly as built for this row and task.
                assert_eq!(
                    std::fs::read(sdir.join("request.json")).unwrap(),
                    request_bytes
                );
                // The response exactly as the mock sent it on the kept attempt.
                let body = std::fs::read(sdir.join(resp_name)).unwrap();
                let attempt = meta.attempts.len() as u32 - 1;
                let rec = log
                    .get(&(entry.model.clone(), task.id.clone(), i, attempt))
                    .unwrap_or_else(|| {
                        panic!("no log for {} {} {i} {attempt}", entry.model, task.id)
                    });
                assert_eq!(sha(&body), rec.sha256, "{}", sdir.display());
                assert_eq!(body.len() as u64, rec.bytes);
                assert_eq!(meta.streamed, entry.stream);
                assert!(meta.ttfb_ms.is_some() && meta.total_ms.is_some());
                assert_eq!(
                    meta.headers.get("server").map(String::as_str),
                    Some("callcheck-mock")
                );
                // Earlier attempts were refused before any body byte, and the mock logged them.
                for (n, a) in meta.attempts[..attempt as usize].iter().enumerate() {
                    let r = &log[&(entry.model.clone(), task.id.clone(), i, n as u32)];
                    assert!(
                        r.what == "drop" || [429, 500, 503].contains(&r.status),
                        "attempt {n} retried after {r:?}"
                    );
                    assert!(a.error.is_some());
                }
                // The mock is deterministic: rows without faults recompute to the same bytes.
                if mock_model.faults == Default::default() {
                    let key = SampleKey {
                        model: entry.model.clone(),
                        task: task.id.clone(),
                        sample: i,
                        attempt: 0,
                    };
                    let plan = respond::plan(&mock_cfg, mock_model, task, &key, &request);
                    let Answer::Body { pieces, .. } = plan.answer else {
                        panic!("no body")
                    };
                    assert_eq!(pieces.concat(), body);
                }
                // And what the mock meant is what the scorer reads back.
                let transcript = callcheck::runs::scan(&runs)
                    .runs
                    .into_iter()
                    .find(|r| r.dir == rdir)
                    .unwrap()
                    .read_sample(&format!("{i:03}"))
                    .unwrap()
                    .transcript();
                let v = score(task, &transcript);
                let expected = if rec.what == "gold" {
                    Outcome::Pass
                } else if rec.what.contains("(cut)") || rec.what == "garbage" || rec.status != 200 {
                    Outcome::Error
                } else {
                    let label = Label::parse(rec.what.split('/').next().unwrap()).unwrap();
                    labels_seen.insert(label);
                    Outcome::Fail(label)
                };
                assert_eq!(
                    v.outcome,
                    expected,
                    "{} sample {i}: {}",
                    rdir.display(),
                    rec.what
                );
            }
        }
    }
    assert_eq!(samples, tasks.len() * 3 * 3);
    assert!(!labels_seen.is_empty());
    let scan = callcheck::runs::scan(&runs);
    assert!(scan.skipped.is_empty(), "{:?}", scan.skipped);
    assert_eq!(scan.runs.len(), tasks.len() * 3);

    // A second run finds every cell complete: nothing is asked, nothing changes.
    let before = files(&runs);
    let log_len = std::fs::read(&mock.log).unwrap().len();
    ok(&run("3"));
    assert_eq!(files(&runs), before);
    assert_eq!(std::fs::read(&mock.log).unwrap().len(), log_len);

    // --k 5 adds one run per cell with the two missing samples, numbered 3 and 4 in the cell.
    ok(&run("5"));
    let after = files(&runs);
    for (name, bytes) in &before {
        assert_eq!(after.get(name), Some(bytes), "{name} changed");
    }
    let scan = callcheck::runs::scan(&runs);
    assert_eq!(scan.runs.len(), tasks.len() * 3 * 2);
    let mut per_cell: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for r in &scan.runs {
        per_cell
            .entry((r.model.clone(), r.task_id.clone()))
            .or_default()
            .push(r.samples.len());
    }
    for (cell, sizes) in &per_cell {
        let mut s = sizes.clone();
        s.sort();
        assert_eq!(s, vec![2, 3], "{cell:?}");
    }
    let log = read_log(&mock.log);
    for entry in &cfg.models {
        for task in &tasks {
            for i in 3..5u64 {
                assert!(
                    log.keys()
                        .any(|(m, t, s, _)| m == &entry.model && t == &task.id && *s == i),
                    "sample {i} of {} {} never asked",
                    entry.name,
                    task.id
                );
            }
            assert!(
                !log.keys()
                    .any(|(m, t, s, _)| m == &entry.model && t == &task.id && *s >= 5)
            );
        }
    }
}
