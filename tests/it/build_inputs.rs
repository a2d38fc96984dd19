//! What `callcheck build` says about inputs that are not what collect writes: an empty runs/
//! (an error unless --allow-empty), a hand-made run folder whose name cannot be a path segment
//! (skipped with a warning, never linked), and a sample whose meta.json or request.json is
//! damaged (reported, and still scored), and a sample file far larger than collect ever writes
//! (reported, never read).

use crate::support::site::*;

#[test]
fn an_empty_runs_folder_is_an_error_unless_allowed() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let out = tmp.path().join("site");
    let o = build(&fixture_tasks(), &runs, &out, &[], &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("no sample to build in") && err.contains("--allow-empty"),
        "{err}"
    );
    assert!(!out.exists(), "nothing built");
    let err = build_ok(&fixture_tasks(), &runs, &out, &["--allow-empty"], &[]);
    assert!(err.contains("0 samples"), "{err}");
    assert!(out.join("index.html").is_file());
}

#[test]
fn a_run_folder_with_a_name_outside_the_safe_set_is_skipped_and_never_linked() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    let good = runs.join("alpha/convert-currency/r0001");
    let bad_name = "r 0003<b>";
    copy_tree(&good, &runs.join("alpha/convert-currency").join(bad_name));
    let out = tmp.path().join("site");
    let err = build_ok(&fixture_tasks(), &runs, &out, &[], &[]);
    assert!(
        err.contains(&format!(
            "skipped alpha/convert-currency/{bad_name}: not a valid run id"
        )),
        "{err}"
    );
    for (path, bytes) in tree(&out) {
        assert!(!path.contains("r 0003"), "{path}");
        if path.ends_with(".html") {
            assert!(
                !String::from_utf8_lossy(&bytes).contains("href=\"r 0003"),
                "{path} links the bad run"
            );
        }
    }
}

#[test]
fn damaged_meta_and_request_files_are_reported_and_the_sample_still_scored() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    let sample = runs.join("alpha/convert-currency/r0001/samples/000");
    std::fs::write(sample.join("meta.json"), b"{\"status\": 200, trunc").unwrap();
    std::fs::write(sample.join("request.json"), b"\x00\x01 not json").unwrap();
    let out = tmp.path().join("site");
    let err = build_ok(&fixture_tasks(), &runs, &out, &[], &[]);
    let prefix = "skipped alpha/convert-currency/r0001/samples/000: ";
    assert!(
        err.contains(&format!("{prefix}meta.json is not valid")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{prefix}request.json is not JSON")),
        "{err}"
    );
    // Still scored: its transcript page and its row in samples.csv exist.
    assert!(
        out.join("t/alpha/convert-currency/r0001/000.html")
            .is_file()
    );
    let csv = read(&out, "data/samples.csv");
    assert!(
        csv.lines()
            .any(|l| l.contains("alpha,convert-currency,r0001,000")),
        "{csv}"
    );
    // An intact sample is not reported.
    assert!(!err.contains("r0001/samples/001: "), "{err}");
}

#[test]
fn a_meta_json_that_cannot_be_read_is_reported_and_the_sample_still_scored() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    let sample = runs.join("alpha/convert-currency/r0001/samples/002");
    // A folder where the file should be: it opens, but does not read.
    std::fs::remove_file(sample.join("meta.json")).unwrap();
    std::fs::create_dir(sample.join("meta.json")).unwrap();
    let out = tmp.path().join("site");
    let err = build_ok(&fixture_tasks(), &runs, &out, &[], &[]);
    assert!(
        err.contains(
            "skipped alpha/convert-currency/r0001/samples/002: meta.json is not readable ("
        ),
        "{err}"
    );
    assert!(
        out.join("t/alpha/convert-currency/r0001/002.html")
            .is_file()
    );
    let csv = read(&out, "data/samples.csv");
    assert!(csv.contains("alpha,convert-currency,r0001,002"), "{csv}");
}

#[test]
fn a_sample_file_larger_than_collect_writes_is_reported_and_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    let sample = runs.join("alpha/convert-currency/r0001/samples/001");
    let response = ["response.json", "response.sse"]
        .iter()
        .map(|n| sample.join(n))
        .find(|p| p.is_file())
        .unwrap();
    // 65 MiB, sparse: no disk is used, and a build that read it whole would hold it all.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&response)
        .unwrap()
        .set_len(65 << 20)
        .unwrap();
    let out = tmp.path().join("site");
    let err = build_ok(&fixture_tasks(), &runs, &out, &[], &[]);
    let name = response.file_name().unwrap().to_string_lossy();
    assert!(
        err.contains(&format!(
            "skipped alpha/convert-currency/r0001/samples/001: sample not readable: {name} is 68157440 bytes, more than the 64 MiB callcheck reads of one file"
        )),
        "{err}"
    );
    // The run's other samples are built; the oversized one has no page and no row.
    assert!(
        out.join("t/alpha/convert-currency/r0001/000.html")
            .is_file()
    );
    assert!(!out.join("t/alpha/convert-currency/r0001/001.html").exists());
    let csv = read(&out, "data/samples.csv");
    assert!(csv.contains("alpha,convert-currency,r0001,000"), "{csv}");
    assert!(!csv.contains("alpha,convert-currency,r0001,001"), "{csv}");
}
