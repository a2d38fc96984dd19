//! "Destroy nothing" (SPEC §12), through the real binary: for each writing command (`build`,
//! `build --cache`, `import bfcl`, `export preference`, `collect` against the mock), sentinel
//! files in every plausible place — inside and beside the output, a `runs/` kept inside the
//! site, symlinks in the output pointing outside — are byte-identical afterwards, or the command
//! refused with a message naming them. Plus the readers: a FIFO among the transcripts, `/dev/zero`
//! as a response, a zip whose entries add up to more than the importer reads.

use crate::support::site::{build, build_ok, copy_tree, fixture_runs, fixture_tasks, tree};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_callcheck");

/// Writes a sentinel file with bytes of its own at `path` (creating folders), and returns it.
fn sentinel(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("sentinel {}\n", path.display())).unwrap();
    path.to_path_buf()
}

/// The bytes of each file, read now: compared with what they are after a command.
fn bytes_of(paths: &[PathBuf]) -> BTreeMap<PathBuf, Vec<u8>> {
    paths
        .iter()
        .map(|p| (p.clone(), std::fs::read(p).unwrap()))
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn refused(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(1), "not refused: {}", stderr(o));
    stderr(o)
}

/// A symlink at `link` to `to`.
fn symlink(to: &Path, link: &Path) {
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(to, link).unwrap();
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Runs the binary, killing it when it has not finished in `secs` (a hang is a failure, not a
/// test that never ends).
fn run_within(args: &[&str], secs: u64) -> Output {
    let child = Command::new(BIN)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            // SAFETY: the child this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("callcheck {args:?} still running after {secs} s");
        }
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn build_replaces_its_own_site_and_refuses_every_other_file_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let marker = std::fs::read_to_string(out.join(".callcheck-site")).unwrap();
    assert!(marker.starts_with("callcheck-site 1\n"), "{marker}");
    let site = tree(&out);
    // Beside the site: never touched by a build that succeeds.
    let beside = [
        sentinel(&tmp.path().join("notes.txt")),
        sentinel(&tmp.path().join("site.bak/index.html")),
    ];
    let before = bytes_of(&beside);
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    assert_eq!(tree(&out), site, "a rebuild writes the same site");
    assert_eq!(bytes_of(&beside), before);

    // Inside the site, a file no build wrote: refused, named, and kept.
    let notes = sentinel(&out.join("notes.txt"));
    let mine = sentinel(&out.join("models/mine.html"));
    let kept = bytes_of(&[notes.clone(), mine.clone()]);
    let err = refused(&build(&fixture_tasks(), &fixture_runs(), &out, &[], &[]));
    assert!(
        err.contains(&format!(
            "error: --out {} is a callcheck site that also holds 1 file callcheck did not write: notes.txt: refusing to replace it",
            out.display()
        )),
        "{err}"
    );
    assert_eq!(bytes_of(&[notes.clone(), mine.clone()]), kept);
    std::fs::remove_file(&notes).unwrap();
    // A file shaped like a page is not in the set the marker names: refused too.
    let written: u64 = marker
        .lines()
        .find_map(|l| l.strip_prefix("files "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    let err = refused(&build(&fixture_tasks(), &fixture_runs(), &out, &[], &[]));
    assert!(
        err.contains(&format!(
            "is a callcheck site whose files changed since the build that wrote them ({} found, {written} written)",
            written + 1
        )),
        "{err}"
    );
    assert_eq!(std::fs::read(&mine).unwrap(), kept[&mine]);
    std::fs::remove_file(&mine).unwrap();

    // A symlink in the site pointing outside: refused with its path; its target untouched.
    let outside = sentinel(&tmp.path().join("outside/data.txt"));
    symlink(&tmp.path().join("outside"), &out.join("t/elsewhere"));
    let target = bytes_of(std::slice::from_ref(&outside));
    let err = refused(&build(&fixture_tasks(), &fixture_runs(), &out, &[], &[]));
    assert!(err.contains("t/elsewhere (a symlink)"), "{err}");
    assert_eq!(bytes_of(std::slice::from_ref(&outside)), target);
    std::fs::remove_file(out.join("t/elsewhere")).unwrap();

    // The issue's runs/ kept inside the published site: as --runs, refused before anything;
    // as a passenger of a full rebuild, refused listing it.
    let runs = out.join("runs");
    copy_tree(&fixture_runs(), &runs);
    let kept_runs = tree(&runs);
    let err = refused(&build(&fixture_tasks(), &runs, &out, &[], &[]));
    assert!(
        err.contains(&format!(
            "error: --runs {} is inside --out {}: a build replaces --out",
            runs.display(),
            out.display()
        )),
        "{err}"
    );
    let err = refused(&build(&fixture_tasks(), &fixture_runs(), &out, &[], &[]));
    assert!(
        err.contains("is a callcheck site that also holds") && err.contains("runs/alpha/"),
        "{err}"
    );
    assert_eq!(tree(&runs), kept_runs);
    let err = refused(&build(&runs, &fixture_runs(), &out, &[], &[]));
    assert!(err.contains("error: --tasks"), "{err}");
    std::fs::remove_dir_all(&runs).unwrap();
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    assert_eq!(tree(&out), site);
}

#[test]
fn a_folder_that_is_not_a_site_is_refused_whatever_its_manifest_says() {
    let tmp = tempfile::tempdir().unwrap();
    // The issue's first reproduction: any data/manifest.json used to make a folder a site.
    let other = tmp.path().join("other");
    let files = [
        sentinel(&other.join("data/manifest.json")),
        sentinel(&other.join("src/important.rs")),
    ];
    std::fs::write(&files[0], "{}").unwrap();
    let before = bytes_of(&files);
    let err = refused(&build(&fixture_tasks(), &fixture_runs(), &other, &[], &[]));
    assert!(
        err.contains(&format!(
            "error: --out {} holds files that are not a callcheck site (1 file callcheck did not write: src/important.rs)",
            other.display()
        )),
        "{err}"
    );
    assert_eq!(bytes_of(&files), before);
    // --out as a symlink to a folder: refused, the folder untouched.
    let link = tmp.path().join("link");
    symlink(&other, &link);
    let err = refused(&build(&fixture_tasks(), &fixture_runs(), &link, &[], &[]));
    assert!(err.contains("is a symlink (to "), "{err}");
    assert_eq!(bytes_of(&files), before);
}

#[test]
fn a_site_of_an_earlier_version_is_updated_only_when_it_holds_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let site = tree(&out);
    // Before the marker existed: recognised by its manifest and its files.
    std::fs::remove_file(out.join(".callcheck-site")).unwrap();
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    assert_eq!(tree(&out), site, "updated, and marked");
    std::fs::remove_file(out.join(".callcheck-site")).unwrap();
    let notes = sentinel(&out.join("notes.txt"));
    let err = refused(&build(&fixture_tasks(), &fixture_runs(), &out, &[], &[]));
    assert!(
        err.contains(&format!(
            "error: --out {0} is a site an earlier callcheck wrote, but it also holds 1 file callcheck did not write: notes.txt: refusing to replace it. Move it aside and build again: `mv {0} {0}.before`",
            out.display()
        )),
        "{err}"
    );
    assert!(notes.exists());
}

#[test]
fn an_in_place_rebuild_touches_nothing_it_did_not_write() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    let cache = tmp.path().join("cache");
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    let c = ["--cache", s(&cache)];
    build_ok(&fixture_tasks(), &runs, &out, &c, &[]);
    // A publisher's files in the site, a runs/ copy and a symlink out: an in-place rebuild
    // (the cache vouches for the site) writes only its own pages, so all stay as they are.
    let kept = [
        sentinel(&out.join("notes.txt")),
        sentinel(&out.join("runs/alpha/contact-card/r0001/cell.json")),
        sentinel(&tmp.path().join("outside/data.txt")),
    ];
    symlink(&tmp.path().join("outside"), &out.join("t/elsewhere"));
    let before = bytes_of(&kept);
    // One run less: its pages (the build's own) go, nothing else does.
    std::fs::remove_dir_all(runs.join("gamma/convert-currency/r0001")).unwrap();
    let err = build_ok(&fixture_tasks(), &runs, &out, &c, &[]);
    assert!(err.contains("site updated in place"), "{err}");
    assert!(
        !out.join("t/gamma/convert-currency/r0001/index.html")
            .exists()
    );
    assert_eq!(bytes_of(&kept), before);
    assert!(
        std::fs::symlink_metadata(out.join("t/elsewhere"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn leftovers_of_killed_builds_are_cleared_only_when_proven_a_builds_and_not_running() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    // Processes that have ended: their ids name no live build.
    let ended = || {
        let mut c = Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    };
    let (dead_pid, dead_2, dead_3) = (ended(), ended(), ended());
    // A live callcheck (the mock server) that has an id of its own.
    let live = crate::support::collect::start_mock(tmp.path(), None, &fixture_tasks());
    let live_pid = live.child.id();

    // What a build killed mid-way leaves: its temporary folder (marked from its start) and
    // the previous site moved aside.
    let tmp_dead = tmp.path().join(format!(".site.tmp-{dead_pid}"));
    std::fs::create_dir_all(tmp_dead.join("t/alpha")).unwrap();
    std::fs::copy(
        out.join(".callcheck-site"),
        tmp_dead.join(".callcheck-site"),
    )
    .unwrap();
    std::fs::write(tmp_dead.join("t/alpha/x.html"), "<p>").unwrap();
    let old_dead = tmp.path().join(format!(".site.old-{dead_pid}"));
    copy_tree(&out, &old_dead);
    // A live build's, and folders named like a build's that no marker proves are one.
    let tmp_live = tmp.path().join(format!(".site.tmp-{live_pid}"));
    copy_tree(&tmp_dead, &tmp_live);
    let unmarked = sentinel(&tmp.path().join(format!(".site.tmp-{dead_2}/mine.txt")));
    let foreign = sentinel(&tmp.path().join(format!(".site.old-{dead_3}/notes.txt")));
    let kept = bytes_of(&[unmarked.clone(), foreign.clone()]);

    let err = build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    assert!(!tmp_dead.exists() && !old_dead.exists(), "{err}");
    assert!(
        err.contains(&format!(
            "removed {}, left by an interrupted build",
            tmp_dead.display()
        )),
        "{err}"
    );
    assert!(tmp_live.join("t/alpha/x.html").exists(), "a live build's");
    assert_eq!(bytes_of(&[unmarked.clone(), foreign.clone()]), kept);
    assert!(
        err.contains(&format!(
            "warning: left {} (named like an interrupted build's, but no .callcheck-site inside: not a build's)",
            unmarked.parent().unwrap().display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "warning: left {}",
            foreign.parent().unwrap().display()
        )),
        "{err}"
    );
    drop(live);
}

/// A BFCL data folder holding the fixture's simple_python questions under the ids given (each
/// a copy of the first question).
fn bfcl_data(dir: &Path, ids: &[&str]) -> PathBuf {
    let data = dir.join("bfcl_eval/data");
    std::fs::create_dir_all(data.join("possible_answer")).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bfcl/bfcl_eval/data");
    let q = std::fs::read_to_string(fixture.join("BFCL_v4_simple_python.json")).unwrap();
    let a = std::fs::read_to_string(fixture.join("possible_answer/BFCL_v4_simple_python.json"))
        .unwrap();
    let first = |text: &str| -> serde_json::Value {
        serde_json::from_str(text.lines().next().unwrap()).unwrap()
    };
    let (q, a) = (first(&q), first(&a));
    let (mut qs, mut as_) = (String::new(), String::new());
    for id in ids {
        let mut q = q.clone();
        q["id"] = (*id).into();
        let mut a = a.clone();
        a["id"] = (*id).into();
        qs.push_str(&format!("{q}\n"));
        as_.push_str(&format!("{a}\n"));
    }
    std::fs::write(data.join("BFCL_v4_simple_python.json"), qs).unwrap();
    std::fs::write(data.join("possible_answer/BFCL_v4_simple_python.json"), as_).unwrap();
    data
}

#[test]
fn import_gives_every_bfcl_id_a_distinct_lint_valid_task_id_and_says_which_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let long = format!("simple_python_{}", "x".repeat(200));
    let ids = [
        "simple_python_0",
        "simple-python-0",
        "Simple_Python_0",
        long.as_str(),
        "simple_python_a/b",
    ];
    let data = bfcl_data(tmp.path(), &ids);
    let out = tmp.path().join("tasks");
    let o = run_within(
        &["import", "bfcl", "--from", s(&data), "--out", s(&out)],
        60,
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{text}{}", stderr(&o));
    assert!(text.contains("| simple_python | 5 | "), "{text}");
    let written: Vec<String> = std::fs::read_dir(out.join("simple_python"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written.len(), 5, "{written:?}");
    // The first in byte order keeps its id; the others are told apart by a hash.
    assert!(
        out.join("simple_python/bfcl-Simple-Python-0.json")
            .is_file()
    );
    let renamed: Vec<&str> = text.lines().filter(|l| l.starts_with("renamed ")).collect();
    assert_eq!(renamed.len(), 4, "{text}");
    assert!(
        text.contains("renamed simple_python_0 (simple_python) to bfcl-simple-python-0-")
            && text.contains(
                "its id would be the same as Simple_Python_0's (bfcl-Simple-Python-0), up to case"
            ),
        "{text}"
    );
    assert!(
        text.contains(
            "renamed simple_python_a/b (simple_python) to bfcl-simple-python-a-b: its id holds characters a task id cannot"
        ),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "renamed {long} (simple_python) to bfcl-simple-python-xxx"
        )),
        "{text}"
    );
    // What was written passes lint, and the same data gives the same files.
    let lint = Command::new(BIN)
        .args(["tasks", "lint", "--tasks", s(&out)])
        .output()
        .unwrap();
    assert!(lint.status.success(), "{}", stderr(&lint));
    let first = tree(&out);
    let again = run_within(
        &["import", "bfcl", "--from", s(&data), "--out", s(&out)],
        60,
    );
    assert!(again.status.success());
    assert_eq!(tree(&out), first);
}

#[test]
fn import_never_writes_through_a_symlink_in_its_output() {
    let tmp = tempfile::tempdir().unwrap();
    let data = bfcl_data(tmp.path(), &["simple_python_0", "simple_python_1"]);
    let out = tmp.path().join("tasks");
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    symlink(&elsewhere, &out.join("simple_python"));
    let o = run_within(
        &["import", "bfcl", "--from", s(&data), "--out", s(&out)],
        60,
    );
    let err = refused(&o);
    assert!(
        err.contains(&format!(
            "{} is a symlink: callcheck does not write through a symlink in its output",
            out.join("simple_python").display()
        )),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    // A symlinked task file is replaced by the task; the file it pointed at is untouched.
    std::fs::remove_file(out.join("simple_python")).unwrap();
    let target = sentinel(&tmp.path().join("outside.json"));
    symlink(
        &target,
        &out.join("simple_python/bfcl-simple-python-0.json"),
    );
    let before = bytes_of(std::slice::from_ref(&target));
    let o = run_within(
        &["import", "bfcl", "--from", s(&data), "--out", s(&out)],
        60,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(bytes_of(std::slice::from_ref(&target)), before);
    let written = out.join("simple_python/bfcl-simple-python-0.json");
    assert!(std::fs::symlink_metadata(&written).unwrap().is_file());
}

/// `export preference --format kto` of the fixture tasks' runs in `runs` into `out`.
fn export_kto(runs: &Path, out: &Path) -> Output {
    let args = ["export", "preference", "--format", "kto", "--tasks"];
    let (tasks, runs, out) = (fixture_tasks(), s(runs).to_owned(), s(out).to_owned());
    let rest = [s(&tasks), "--runs", &runs, "--out", &out];
    run_within(&[&args[..], &rest[..]].concat(), 120)
}

#[test]
fn export_replaces_a_symlink_at_its_output_and_keeps_what_it_pointed_at() {
    let tmp = tempfile::tempdir().unwrap();
    let target = sentinel(&tmp.path().join("keep.jsonl"));
    let before = bytes_of(std::slice::from_ref(&target));
    let out = tmp.path().join("export.jsonl");
    symlink(&target, &out);
    let o = export_kto(&fixture_runs(), &out);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(bytes_of(std::slice::from_ref(&target)), before);
    assert!(std::fs::symlink_metadata(&out).unwrap().is_file());
    assert!(!std::fs::read(&out).unwrap().is_empty());
}

#[test]
fn collect_never_writes_through_a_symlinked_folder_in_runs() {
    use crate::support::collect::*;
    let tmp = tempfile::tempdir().unwrap();
    let tasks = tmp.path().join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    std::fs::copy(
        corpus().join("basic/basic-weather-city.json"),
        tasks.join("basic-weather-city.json"),
    )
    .unwrap();
    let rows = [("g", "mock-good", false, 2)];
    let (_mock, cfg) = mock_and_config(tmp.path(), None, &tasks, &rows);
    let runs = tmp.path().join("runs");
    let elsewhere = tmp.path().join("elsewhere");
    let kept = sentinel(&elsewhere.join("notes.txt"));
    symlink(&elsewhere, &runs.join("g"));
    let before = bytes_of(std::slice::from_ref(&kept));
    let o = collect_in(&cfg, &tasks, &runs, &["--k", "3"], &[]);
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(!o.status.success(), "{text}");
    assert!(
        text.contains(&format!("{} is a symlink", runs.join("g").display())),
        "{text}"
    );
    assert_eq!(bytes_of(std::slice::from_ref(&kept)), before);
    let names: Vec<_> = std::fs::read_dir(&elsewhere)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["notes.txt"]);
}

#[test]
fn a_fifo_among_the_transcripts_is_skipped_with_its_reason_not_waited_on() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    let response = runs.join("alpha/contact-card/r0001/samples/000/response.json");
    std::fs::remove_file(&response).unwrap();
    mkfifo(&response);
    let out = tmp.path().join("site");
    let o = run_within(
        &[
            "build",
            "--tasks",
            s(&fixture_tasks()),
            "--runs",
            s(&runs),
            "--out",
            s(&out),
        ],
        120,
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(
            "skipped alpha/contact-card/r0001/samples/000: sample not readable: response.json is a FIFO, not a regular file"
        ),
        "{err}"
    );
}

#[test]
fn check_reads_a_response_that_is_a_device_as_an_error_that_says_so() {
    let task = fixture_tasks().join("contact-card.json");
    let o = run_within(
        &["check", "--task", s(&task), "--response", "/dev/zero"],
        30,
    );
    let err = refused(&o);
    assert_eq!(
        err,
        "error: cannot read the response /dev/zero: /dev/zero is a device, not a regular file\n"
    );
}

#[test]
fn a_zip_whose_entries_add_up_past_the_bound_is_refused_without_reading_them_all() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let wheel = tmp.path().join("bfcl_eval-0-py3-none-any.whl");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
    // Stored, not deflated: compressing 144 MiB takes a minute in a debug build, and what is
    // bounded is what the entries hold, however they are packed. (The compressible 3 MB wheel
    // of the issue is measured for memory outside the test suite.)
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    // Three entries of 48 MiB each: every one under the per-file bound, together over 128 MiB.
    let block = vec![b' '; 1 << 20];
    for cat in ["simple_python", "simple_java", "simple_javascript"] {
        zip.start_file(format!("bfcl_eval/data/BFCL_v4_{cat}.json"), opts)
            .unwrap();
        for _ in 0..48 {
            zip.write_all(&block).unwrap();
        }
    }
    zip.finish().unwrap();
    let out = tmp.path().join("tasks");
    let o = run_within(
        &["import", "bfcl", "--from", s(&wheel), "--out", s(&out)],
        120,
    );
    let err = refused(&o);
    assert!(
        err.contains("bfcl_eval/data/BFCL_v4_simple_javascript.json: the data files together are larger than 128 MB: not BFCL's data"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn demo_refuses_a_site_folder_it_may_not_replace_before_collecting_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    let notes = sentinel(&out.join("notes.txt"));
    let runs = tmp.path().join("runs");
    let tasks = crate::support::site::repo().join("tasks");
    let demo = |runs: &Path| {
        let args = [
            "demo",
            "--tasks",
            s(&tasks),
            "--runs",
            s(runs),
            "--out",
            s(&out),
        ];
        run_within(&args, 60)
    };
    let err = refused(&demo(&runs));
    assert!(
        err.contains(&format!(
            "error: --out {} holds files that are not a callcheck site (1 file callcheck did not write: notes.txt)",
            out.display()
        )),
        "{err}"
    );
    assert!(!runs.exists(), "nothing collected");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        format!("sentinel {}\n", notes.display())
    );
    let inside = out.join("runs");
    let err = refused(&demo(&inside));
    assert!(
        err.contains(&format!(
            "error: --runs {} is inside --out {}",
            inside.display(),
            out.display()
        )),
        "{err}"
    );
    assert!(!inside.exists());
}

// ---- issue 40: read only what is ours ----

/// A string found nowhere in callcheck's fixtures: wherever it shows up, a link was followed.
const MARKER: &str = "MARKER-4f1c-outside-runs";

/// Every file under `dir` (or `dir` itself) whose bytes hold `needle`, as paths.
fn holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            std::fs::read(e.path())
                .unwrap()
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
        })
        .map(|e| e.into_path())
        .collect()
}

/// A committed `runs/` is input from whoever can open a pull request: a link in it to any file
/// of the machine that builds (`/proc/self/environ`, a key file) is never read. Each kind of
/// link (a transcript, a meta.json, a cell.json, a sample folder, a run folder, a model
/// folder, the samples/ folder) is skipped with its reason, named on stderr, and the file it
/// points at reaches neither the site, nor the export, nor the cache.
#[test]
fn a_symlink_in_runs_is_skipped_by_name_and_what_it_points_at_is_never_published() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    // Outside runs/: files that would be scored and shown if read, each holding the marker.
    let outside = tmp.path().join("outside");
    let sample = "alpha/contact-card/r0001/samples/000";
    let completion = std::fs::read_to_string(runs.join(sample).join("response.json"))
        .unwrap()
        .replace("Ada Lovelace", MARKER);
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("response.json"), &completion).unwrap();
    std::fs::write(
        outside.join("meta.json"),
        format!(r#"{{"status": 200, "headers": {{"server": "{MARKER}"}}, "streamed": false}}"#),
    )
    .unwrap();
    let cell = std::fs::read_to_string(runs.join("beta/contact-card/r0001/cell.json"))
        .unwrap()
        .replace("VLLM_API_KEY", MARKER);
    std::fs::write(outside.join("cell.json"), &cell).unwrap();
    // A whole sample, run and model folder, copies of real ones with the marker in.
    let copy_marked = |from: &Path, to: &Path| {
        copy_tree(from, to);
        for f in walkdir::WalkDir::new(to).into_iter().filter_map(|e| e.ok()) {
            if f.file_type().is_file() {
                let text = std::fs::read_to_string(f.path()).unwrap();
                std::fs::write(f.path(), text.replace("Ada Lovelace", MARKER)).unwrap();
            }
        }
    };
    copy_marked(&runs.join(sample), &outside.join("sample"));
    copy_marked(&runs.join("alpha/contact-card/r0001"), &outside.join("run"));
    copy_marked(&runs.join("alpha"), &outside.join("model"));
    copy_marked(
        &runs.join("beta/contact-card/r0001/samples"),
        &outside.join("samples"),
    );

    let link = |rel: &str, to: &Path| {
        let at = runs.join(rel);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
            std::fs::remove_dir_all(&at).unwrap();
        } else if std::fs::symlink_metadata(&at).is_ok() {
            std::fs::remove_file(&at).unwrap();
        }
        symlink(to, &at);
    };
    link(
        &format!("{sample}/response.json"),
        &outside.join("response.json"),
    );
    link(
        "alpha/contact-card/r0001/samples/001/meta.json",
        &outside.join("meta.json"),
    );
    link(
        "alpha/contact-card/r0001/samples/009",
        &outside.join("sample"),
    );
    link("alpha/contact-card/r0009", &outside.join("run"));
    link("delta", &outside.join("model"));
    link(
        "beta/contact-card/r0001/cell.json",
        &outside.join("cell.json"),
    );
    link(
        "beta/convert-currency/r0001/samples",
        &outside.join("samples"),
    );

    let out = tmp.path().join("site");
    let cache = tmp.path().join("cache");
    let err = build_ok(&fixture_tasks(), &runs, &out, &["--cache", s(&cache)], &[]);
    for said in [
        "skipped alpha/contact-card/r0001/samples/000: sample not readable: response.json is a symlink",
        "skipped alpha/contact-card/r0001/samples/001: meta.json is not readable (meta.json is a symlink",
        "skipped alpha/contact-card/r0001/samples/009: a symlink",
        "skipped alpha/contact-card/r0009: a symlink",
        "skipped delta: a symlink",
        "skipped beta/contact-card/r0001: cannot read cell.json: cell.json is a symlink",
        "skipped beta/convert-currency/r0001: samples/ is a symlink",
    ] {
        assert!(err.contains(said), "{said:?} not in:\n{err}");
    }
    // A rebuild from the cache says the same.
    let again = build_ok(&fixture_tasks(), &runs, &out, &["--cache", s(&cache)], &[]);
    for said in ["skipped delta: a symlink", "response.json is a symlink"] {
        assert!(again.contains(said), "{said:?} not in:\n{again}");
    }
    let export = tmp.path().join("export.jsonl");
    let o = export_kto(&runs, &export);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    for said in [
        "runs/delta: a symlink",
        "alpha/contact-card/r0001/samples/000: response.json is a symlink",
    ] {
        assert!(err.contains(said), "{said:?} not in:\n{err}");
    }
    for place in [&out, &cache, &export] {
        assert_eq!(
            holding(place, MARKER),
            Vec::<PathBuf>::new(),
            "{}",
            place.display()
        );
    }
    // Real samples of the same runs are there: only the links were left out.
    assert!(out.join("t/alpha/contact-card/r0001/002.html").is_file());
    assert!(!out.join("t/delta").exists());
}

/// `collect --feedback` builds each follow-up from its parent's files: a parent whose
/// `request.json` is a link is not followed up (said, by name), and the file it points at is
/// neither sent to the server nor copied into runs/.
#[test]
fn a_feedback_parent_whose_request_is_a_symlink_is_not_followed_up() {
    use crate::support::collect::*;
    let tmp = tempfile::tempdir().unwrap();
    // Every answer calls a tool the task does not offer: every first-round sample fails.
    let server = gateway(|_| Reply::json(200, completion(50, Some(("delete_everything", "{}")))));
    let cfg = row_config(tmp.path(), &server.url, "");
    let runs = tmp.path().join("runs");
    ok(&collect_in(&cfg, &corpus(), &runs, &ONE_CELL, &[]));
    let run = std::fs::read_dir(runs.join("row/basic-weather-city"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .unwrap();
    let request = run.join("samples/000/request.json");
    let outside = tmp.path().join("outside.json");
    let sent = std::fs::read_to_string(&request).unwrap();
    let mut forged: serde_json::Value = serde_json::from_str(&sent).unwrap();
    forged["messages"][0]["content"] = MARKER.into();
    std::fs::write(&outside, forged.to_string()).unwrap();
    std::fs::remove_file(&request).unwrap();
    symlink(&outside, &request);
    server.seen.lock().unwrap().clear();

    let o = collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-weather-city", "--feedback=retry"],
        &[],
    );
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains("samples/000: cannot read (request.json is a symlink"),
        "{text}"
    );
    let seen = server.seen.lock().unwrap();
    let chats: Vec<&Vec<u8>> = seen
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .map(|r| &r.body)
        .collect();
    assert_eq!(chats.len(), 2, "the two other parents are followed up");
    for body in chats {
        assert!(!String::from_utf8_lossy(body).contains(MARKER));
    }
    assert_eq!(holding(&runs, MARKER), Vec::<PathBuf>::new());
}

/// `callcheck build` in `dir` with its default cache (`dir/.callcheck-cache`), as a user types
/// it in a collection's folder.
fn plain_build(dir: &Path, runs: &Path, out: &Path) -> String {
    let o = Command::new(BIN)
        .current_dir(dir)
        .args([
            "build",
            "--tasks",
            s(&fixture_tasks()),
            "--runs",
            s(runs),
            "--out",
            s(out),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stderr(&o)
}

/// A transcript edited where it lies (by `sed -i`, which renames a new file into the sample's
/// folder; by a write in place of the same size with its modification time set back), or
/// changed by a `git checkout` of another version, is scored again by a plain build: each
/// build equals one without the cache, byte for byte, and differs from the build before.
#[test]
fn an_edited_transcript_is_scored_again_by_a_plain_build() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    let (out, fresh) = (tmp.path().join("site"), tmp.path().join("fresh"));
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .current_dir(tmp.path())
            .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
    };
    git(&["init", "-q"]);
    git(&["add", "runs"]);
    git(&["commit", "-qm", "first"]);
    plain_build(tmp.path(), &runs, &out);
    let mut before = tree(&out);
    // A plain build over the site, and one without the cache over a copy of the same site (so
    // that both tell the same changes since the previous build).
    let rebuild = |what: &str| {
        let _ = std::fs::remove_dir_all(&fresh);
        copy_tree(&out, &fresh);
        plain_build(tmp.path(), &runs, &out);
        build_ok(&fixture_tasks(), &runs, &fresh, &["--no-cache"], &[]);
        let site = tree(&out);
        assert!(
            site == tree(&fresh),
            "{what}: the plain build is not the fresh one"
        );
        site
    };
    let samples = runs.join("alpha/contact-card/r0001/samples");
    // sed -i: the name no longer matches what the task asks (escaping_error where it passed).
    let o = Command::new("sed")
        .args([
            "-i",
            r#"s/Ada Lovelace\\"/Ada Lovelacf\\"/"#,
            s(&samples.join("000/response.json")),
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let after = rebuild("sed -i");
    assert!(after != before, "the edit changes the site");
    before = after;
    // A write in place, same size, modification time set back: only the change time says.
    let file = samples.join("001/response.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    let edited = text.replacen(r#"Ada Lovelace\""#, r#"Ada Lovelacf\""#, 1);
    assert_eq!(edited.len(), text.len());
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.write_all(edited.as_bytes()).unwrap();
        f.set_modified(mtime).unwrap();
    }
    let after = rebuild("a write in place");
    assert!(after != before, "the edit changes the site");
    // Both edits committed, then the first version checked out again.
    git(&["commit", "-qam", "second"]);
    git(&["checkout", "-q", "HEAD~1", "--", "runs"]);
    rebuild("git checkout");
    assert_eq!(
        std::fs::read(samples.join("000/response.json")).unwrap(),
        std::fs::read(fixture_runs().join("alpha/contact-card/r0001/samples/000/response.json"))
            .unwrap()
    );
}

/// A cache folder is used only when it is absent, empty or holds only what callcheck's cache
/// writes (its own marker, its own cache file): a `.callcheck-cache` or a `--cache` folder
/// holding anyone else's files is refused, naming them, and they are kept byte for byte; a
/// cache inside `--runs`, `--tasks` or `--out` is refused before anything is made there.
#[test]
fn a_cache_folder_holding_someone_elses_files_is_refused_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    let tasks = tmp.path().join("tasks");
    copy_tree(&fixture_tasks(), &tasks);
    let out = tmp.path().join("site");
    let build_in = |args: &[&str]| {
        Command::new(BIN)
            .current_dir(tmp.path())
            .args([
                "build",
                "--tasks",
                s(&tasks),
                "--runs",
                s(&runs),
                "--out",
                s(&out),
            ])
            .args(args)
            .output()
            .unwrap()
    };
    // Another tool's folder of the same name: its verdicts in JSON and in a binary file.
    let theirs = [
        sentinel(&tmp.path().join(".callcheck-cache/verdicts.json")),
        sentinel(&tmp.path().join(".callcheck-cache/verdicts.bin")),
    ];
    let kept = bytes_of(&theirs);
    let err = refused(&build_in(&[]));
    assert!(
        err.contains(&format!(
            "error: the cache folder {} holds 2 files callcheck's cache does not write (verdicts.bin, verdicts.json): refusing to use it, as a build would replace them",
            Path::new(".callcheck-cache").display()
        )),
        "{err}"
    );
    assert_eq!(bytes_of(&theirs), kept);
    assert!(!out.exists(), "nothing built");
    // The same with --cache naming such a folder.
    let other = sentinel(&tmp.path().join("elsewhere/notes.txt"));
    let err = refused(&build_in(&["--cache", s(other.parent().unwrap())]));
    assert!(
        err.contains("holds 1 file callcheck's cache does not write (notes.txt)"),
        "{err}"
    );
    assert!(!other.parent().unwrap().join("CACHEDIR.TAG").exists());
    // Inside what the build reads: refused, nothing made there.
    for (flag, inside) in [
        ("--runs", runs.join(".cache")),
        ("--tasks", tasks.join("cache")),
    ] {
        let err = refused(&build_in(&["--cache", s(&inside)]));
        assert!(
            err.contains(&format!(
                "error: --cache {} is inside {flag} {}",
                inside.display(),
                if flag == "--runs" {
                    runs.display()
                } else {
                    tasks.display()
                }
            )),
            "{err}"
        );
        assert!(!inside.exists());
    }
    // A folder callcheck's cache made is used, as is an empty one.
    std::fs::remove_dir_all(tmp.path().join(".callcheck-cache")).unwrap();
    let first = build_in(&[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let again = build_in(&[]);
    assert!(
        stderr(&again).contains("36 of 36 samples' verdicts reused"),
        "{}",
        stderr(&again)
    );
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = build_in(&["--cache", s(&empty)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(empty.join("verdicts.bin").is_file());
}

/// What is left beside the site, in the cache or inside the site by builds that were killed:
/// temporary folders, temporary cache files, temporary pages.
fn leftovers(dir: &Path, out: &Path, cache: &Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".site."))
        .collect();
    for (place, files) in [(cache, false), (out, true)] {
        for e in walkdir::WalkDir::new(place)
            .into_iter()
            .filter_map(|e| e.ok())
        {
            let name = e.file_name().to_string_lossy();
            if name.contains(".tmp-") || (!files && name.starts_with(".verdicts")) {
                found.push(e.path().display().to_string());
            }
        }
    }
    found
}

/// kill -9 at random moments of a build over its previous site: the site is always the old
/// build or the new one, byte for byte (or, when the kill fell while a committed update was
/// being moved in, that update is finished by the next build before anything else), and the
/// next build leaves no leftover beside the site, in it or in the cache. 20 kills of in-place
/// builds (the cache vouches for the site), 10 of builds that write beside and swap.
#[test]
fn a_build_killed_at_any_moment_leaves_the_old_site_or_the_new_one() {
    use rand::{RngExt, SeedableRng};
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    let held = tmp.path().join("held");
    let later = runs.join("gamma/convert-currency/r0001");
    std::fs::rename(&later, &held).unwrap();
    let (out, cache) = (tmp.path().join("site"), tmp.path().join("cache"));
    let (site_old, cache_old) = (tmp.path().join("site-old"), tmp.path().join("cache-old"));
    build_ok(&fixture_tasks(), &runs, &out, &["--cache", s(&cache)], &[]);
    copy_tree(&out, &site_old);
    copy_tree(&cache, &cache_old);
    let old = tree(&out);
    // The new site: the held-back run added, built over the old site (so that its changes page
    // counts the same three samples).
    copy_tree(&held, &later);
    let reference = tmp.path().join("reference");
    copy_tree(&site_old, &reference);
    build_ok(&fixture_tasks(), &runs, &reference, &["--no-cache"], &[]);
    let new = tree(&reference);
    assert_ne!(old, new);
    // And once more over the new site: what any build after the new one writes (nothing
    // changed since, so no changes page).
    build_ok(&fixture_tasks(), &runs, &reference, &["--no-cache"], &[]);
    let renew = tree(&reference);
    // How long an uninterrupted in-place build takes here: the kills fall anywhere in it.
    let restore = || {
        for d in [&out, &cache] {
            if d.exists() {
                std::fs::remove_dir_all(d).unwrap();
            }
        }
        copy_tree(&site_old, &out);
        copy_tree(&cache_old, &cache);
    };
    let args = |in_place: bool| -> Vec<String> {
        let mut a: Vec<String> = ["build", "--tasks", s(&fixture_tasks()), "--runs", s(&runs)]
            .iter()
            .map(|x| x.to_string())
            .collect();
        a.extend(["--out".into(), s(&out).into()]);
        if in_place {
            a.extend(["--cache".into(), s(&cache).into()]);
        } else {
            a.push("--no-cache".into());
        }
        a
    };
    restore();
    let started = std::time::Instant::now();
    let err = build_ok(&fixture_tasks(), &runs, &out, &["--cache", s(&cache)], &[]);
    let took = started.elapsed();
    assert!(err.contains("site updated in place"), "{err}");
    assert!(
        tree(&out) == new,
        "an uninterrupted in-place build writes the new site"
    );

    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(40);
    let mut seen = BTreeMap::<&str, usize>::new();
    for kill in 0..30 {
        let in_place = kill < 20;
        restore();
        let at = took.mul_f64(rng.random_range(0.0..1.2));
        let mut child = Command::new(BIN)
            .args(args(in_place))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        child.kill().unwrap();
        child.wait().unwrap();
        let now = tree(&out);
        let committed = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .any(|p| p.join(".callcheck-update").is_file());
        let state = if now == old {
            "old"
        } else if now == new {
            "new"
        } else if committed {
            "committed, to finish"
        } else {
            panic!("kill {kill} at {at:?}: the site is neither the old build nor the new one");
        };
        *seen.entry(state).or_default() += 1;
        // The next build finishes or clears what the killed one left, then builds.
        let o = Command::new(BIN).args(args(in_place)).output().unwrap();
        assert!(o.status.success(), "kill {kill}: {}", stderr(&o));
        // Over the old site, the new one; over the new one (finished or to finish), the new
        // one built again.
        let after = tree(&out);
        let new = if state == "old" { &new } else { &renew };
        if after != *new {
            let differ: Vec<&String> = new
                .keys()
                .chain(after.keys())
                .filter(|k| new.get(*k) != after.get(*k))
                .collect();
            panic!(
                "kill {kill} at {at:?} ({state}): the next build's site is not the new one: {differ:?}\n{}",
                stderr(&o)
            );
        }
        assert_eq!(
            leftovers(tmp.path(), &out, &cache),
            Vec::<String>::new(),
            "kill {kill}"
        );
    }
    eprintln!("states right after the 30 kills: {seen:?}");
}

/// `import bfcl` deletes only what an earlier import wrote, as it wrote it (recorded with each
/// file's sha256 in its output folder): another tool's JSON whose `source.suite` is `bfcl`
/// stays, wherever it lies, and so does an imported task edited since, with a line saying why.
#[test]
fn import_removes_only_the_unchanged_files_its_earlier_run_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tasks");
    let import = |ids: &[&str]| {
        let data = bfcl_data(&tmp.path().join(format!("data-{}", ids.len())), ids);
        let o = run_within(
            &["import", "bfcl", "--from", s(&data), "--out", s(&out)],
            60,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    import(&["simple_python_0", "simple_python_1", "simple_python_2"]);
    // Another tool's data beside the imports, shaped like them; an imported task edited.
    let theirs = [
        out.join("simple_python/other-tool.json"),
        out.join("elsewhere/cache.json"),
    ];
    for p in &theirs {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(
            p,
            r#"{"id": "x", "source": {"suite": "bfcl", "tool": "other"}}"#,
        )
        .unwrap();
    }
    let edited = out.join("simple_python/bfcl-simple-python-2.json");
    let mut text = std::fs::read_to_string(&edited).unwrap();
    text.push(' ');
    std::fs::write(&edited, &text).unwrap();
    let kept = bytes_of(&[theirs[0].clone(), theirs[1].clone(), edited.clone()]);

    let said = import(&["simple_python_0"]);
    let gone = out.join("simple_python/bfcl-simple-python-1.json");
    assert!(!gone.exists(), "{said}");
    assert!(
        said.contains(&format!(
            "removed {} (an earlier BFCL import wrote it and this one no longer produces it)",
            gone.display()
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "kept {}: an earlier BFCL import wrote it, but it changed since; remove it by hand if it is not wanted",
            edited.display()
        )),
        "{said}"
    );
    assert_eq!(
        bytes_of(&[theirs[0].clone(), theirs[1].clone(), edited.clone()]),
        kept
    );
    // A third import has nothing of the second's to remove, and keeps the edited file still.
    let said = import(&["simple_python_0"]);
    assert!(!said.contains("removed"), "{said}");
    assert_eq!(
        bytes_of(&[theirs[0].clone(), theirs[1].clone(), edited.clone()]),
        kept
    );
}

/// A key in `base_url`'s query string (Azure's `?api-key=…`) or its userinfo is used to reach
/// the server and kept nowhere else: not in runs/, not on any page or data file of the site,
/// not on the terminal.
#[test]
fn a_key_in_the_base_urls_query_or_userinfo_reaches_only_the_server() {
    use crate::support::collect::*;
    const KEY: &str = "QUERYKEY7c1e";
    const PASSWORD: &str = "PASSWORD9d2f";
    let tmp = tempfile::tempdir().unwrap();
    let server = loopback(|req| {
        if req.path.starts_with("/v1/models") {
            Reply::json(200, SERVED_LIST)
        } else {
            Reply::json(
                200,
                completion(50, Some(("get_weather", r#"{"city": "Paris"}"#))),
            )
        }
    });
    let base = server
        .url
        .replace("http://", &format!("http://user:{PASSWORD}@"));
    let cfg = row_config(
        tmp.path(),
        &format!("{base}?api-key={KEY}&api-version=2024-10-21"),
        "",
    );
    let runs = tmp.path().join("runs");
    let o = collect_in(&cfg, &corpus(), &runs, &ONE_CELL, &[]);
    let said = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(o.status.success(), "{said}");
    // The key was sent where the server expects it, with the path in front of the query.
    let seen = server.seen.lock().unwrap();
    let chats: Vec<&str> = seen
        .iter()
        .filter(|r| sample_of(r).is_some())
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(chats.len(), 3, "{said}");
    for p in chats {
        assert_eq!(
            p,
            format!("/v1/chat/completions?api-key={KEY}&api-version=2024-10-21")
        );
    }
    drop(seen);
    let out = tmp.path().join("site");
    build_ok(&corpus(), &runs, &out, &[], &[]);
    for secret in [KEY, PASSWORD] {
        assert!(!said.contains(secret), "{secret} on the terminal:\n{said}");
        assert_eq!(holding(&runs, secret), Vec::<PathBuf>::new());
        assert_eq!(holding(&out, secret), Vec::<PathBuf>::new());
    }
    // What is kept says there was a key, and where.
    let cell = walkdir::WalkDir::new(&runs)
        .into_iter()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name() == "cell.json")
        .unwrap();
    let text = std::fs::read_to_string(cell.path()).unwrap();
    assert!(
        text.contains("?api-key=REDACTED&api-version=REDACTED"),
        "{text}"
    );
}

/// A run of `model` on the corpus task `task`, one sample per response body, with the task's
/// request: the shape collect writes.
fn run_of(runs: &Path, model: &str, task: &str, responses: &[Vec<u8>]) -> PathBuf {
    let tasks = callcheck::task::load(&crate::support::collect::corpus()).unwrap();
    let t = tasks.iter().find(|t| t.id == task).unwrap();
    let run = runs.join(model).join(task).join("r0001");
    for (i, body) in responses.iter().enumerate() {
        let dir = run.join(format!("samples/{i:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        let request =
            serde_json::json!({"model": model, "messages": t.messages, "tools": t.tools_json});
        std::fs::write(dir.join("request.json"), request.to_string()).unwrap();
        std::fs::write(dir.join("response.json"), body).unwrap();
        std::fs::write(
            dir.join("meta.json"),
            r#"{"status": 200, "headers": {}, "streamed": false}"#,
        )
        .unwrap();
    }
    let cell = serde_json::json!({
        "format_version": 1, "callcheck_version": "0.1.0",
        "model": {"name": model, "base_url": "http://127.0.0.1:8000/v1"},
        "task": {"id": task, "sha256": t.sha256}, "k": responses.len(), "run_id": "r0001",
    });
    std::fs::write(run.join("cell.json"), cell.to_string()).unwrap();
    run
}

/// A chat completion holding `calls` calls of get_weather (300,000 take 15 MB).
fn many_calls(calls: usize) -> Vec<u8> {
    let call = r#"{"function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}"#;
    let mut body = br#"{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":["#.to_vec();
    for i in 0..calls {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(call.as_bytes());
    }
    body.extend_from_slice(
        br#"]},"finish_reason":"tool_calls"}],"usage":{"completion_tokens":9}}"#,
    );
    body
}

/// An answer of 300,000 calls is read up to the calls callcheck takes from one answer: the
/// verdict is the label of what was read, its detail says how many the answer held, and no
/// page passes 2 MB (a run's page shows the transcripts that fit and says which it left off).
/// The memory this costs is measured by bench/many_calls.sh (floor: 300 MB).
#[test]
fn an_answer_of_300000_calls_is_read_up_to_its_bound_and_no_page_passes_2_mb() {
    let tmp = tempfile::tempdir().unwrap();
    let big = many_calls(300_000);
    let file = tmp.path().join("response.json");
    std::fs::write(&file, &big).unwrap();
    let task = crate::support::collect::corpus().join("basic/basic-weather-city.json");
    let o = run_within(&["check", "--task", s(&task), "--response", s(&file)], 120);
    let verdict: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(verdict["label"], "spurious_call", "{verdict}");
    assert_eq!(verdict["stage"], "structure");
    let cut = "the answer holds 300000 tool calls: the first 256 were read and scored, the other 299744 only counted";
    assert!(
        verdict["detail"].as_str().unwrap().contains(cut),
        "{}",
        verdict["detail"]
    );
    assert_eq!(verdict["calls"].as_array().unwrap().len(), 256);
    assert!(
        o.stdout.len() < 1 << 20,
        "{} bytes of verdict",
        o.stdout.len()
    );

    // Such an answer and two of a megabyte of prose each: more than one page holds.
    let prose = format!(
        r#"{{"object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"{}"}},"finish_reason":"stop"}}],"usage":{{"completion_tokens":9}}}}"#,
        "It is sunny in Paris. ".repeat(50_000)
    );
    let runs = tmp.path().join("runs");
    run_of(
        &runs,
        "m",
        "basic-weather-city",
        &[big, prose.clone().into(), prose.into()],
    );
    let out = tmp.path().join("site");
    build_ok(&crate::support::collect::corpus(), &runs, &out, &[], &[]);
    for (rel, bytes) in tree(&out) {
        assert!(bytes.len() <= 2_000_000, "{rel} is {} bytes", bytes.len());
    }
    let page =
        std::fs::read_to_string(out.join("t/m/basic-weather-city/r0001/index.html")).unwrap();
    assert!(page.contains(cut), "the run's page says what was cut");
    assert!(
        page.contains("This sample&#39;s transcript is left off this page")
            && page.contains("runs/m/basic-weather-city/r0001/samples/002/"),
        "the run's page says which transcript it left off"
    );
    let csv = std::fs::read_to_string(out.join("data/samples.csv")).unwrap();
    let row = csv
        .lines()
        .find(|l| l.starts_with("t/m/basic-weather-city/r0001/000.html,"))
        .unwrap();
    assert!(row.contains(",spurious_call,"), "{row}");
}

/// The low findings of issue 40, one part each: a model id with a newline reaches the terminal
/// escaped (a line of its own starting `::error::` would be a GitHub workflow command); a raw
/// ESC a server sent reaches samples.csv escaped; `build --previous` reads a bounded line; a
/// cache record whose checksum holds but which does not decode is a miss, not a failure of
/// every build; `import bfcl` prints task ids escaped; `tasks lint` names a FIFO and a symlink
/// loop with what they are.
#[test]
fn server_text_is_escaped_for_every_sink_and_odd_inputs_are_named() {
    use crate::support::collect::*;
    let tmp = tempfile::tempdir().unwrap();

    // The terminal: a row whose model id the server does not list, the list forging a line.
    let server = loopback(|req| {
        if req.path.starts_with("/v1/models") {
            Reply::json(
                200,
                r#"{"object":"list","data":[{"id":"other\n::error::forged"}]}"#,
            )
        } else {
            Reply::json(200, completion(50, None))
        }
    });
    let cfg = row_config(tmp.path(), &server.url, "");
    let o = collect_in(&cfg, &corpus(), &tmp.path().join("runs"), &ONE_CELL, &[]);
    let said = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(said.contains("not collected"), "{said}");
    assert!(said.contains("other\\n::error::forged"), "{said}");
    assert!(
        !said.lines().any(|l| l.starts_with("::error::forged")),
        "{said}"
    );

    // samples.csv: a server's error body with a raw ESC and BEL, quoted in the detail.
    let runs = tmp.path().join("runs-csv");
    let run = run_of(
        &runs,
        "m",
        "basic-weather-city",
        &[b"\x1b]0;owned\x07 upstream failed".to_vec()],
    );
    std::fs::write(
        run.join("samples/000/meta.json"),
        r#"{"status": 502, "headers": {}}"#,
    )
    .unwrap();
    let out = tmp.path().join("site");
    build_ok(&corpus(), &runs, &out, &[], &[]);
    let csv = std::fs::read(out.join("data/samples.csv")).unwrap();
    assert!(
        !csv.iter().any(|&b| b == 0x1b || b == 0x07),
        "a raw control character"
    );
    assert!(String::from_utf8_lossy(&csv).contains("\\e]0;owned\\x07 upstream failed"));

    // --previous: one line of 3 MB is refused after the bound, said.
    let previous = tmp.path().join("previous.csv");
    std::fs::write(
        &previous,
        format!("permalink,outcome,label\n{}\n", "x".repeat(3 << 20)),
    )
    .unwrap();
    let o = build(
        &corpus(),
        &runs,
        &tmp.path().join("site-2"),
        &["--previous", s(&previous)],
        &[],
    );
    let err = refused(&o);
    assert!(
        err.contains("a line longer than 1048576 bytes: not a samples.csv"),
        "{err}"
    );

    // A cache record whose checksum holds and that does not decode: each verdict's outcome
    // renamed to one no callcheck knows, the checksum made again.
    let (cached, cache) = (tmp.path().join("site-cached"), tmp.path().join("cache"));
    let c = ["--cache", s(&cache)];
    build_ok(&fixture_tasks(), &fixture_runs(), &cached, &c, &[]);
    let file = cache.join("verdicts.bin");
    let mut bytes = std::fs::read(&file).unwrap();
    let body_end = bytes.len() - 4;
    let mut renamed = 0;
    for i in 0..body_end.saturating_sub(5) {
        if &bytes[i..i + 5] == b"\x04pass" {
            bytes[i + 4] = b'z';
            renamed += 1;
        }
    }
    assert!(renamed > 0);
    let sum = crc32fast::hash(&bytes[..body_end]);
    bytes[body_end..].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let err = build_ok(&fixture_tasks(), &fixture_runs(), &cached, &c, &[]);
    assert!(err.contains("site updated in place"), "{err}");
    let fresh = tmp.path().join("site-fresh");
    copy_tree(&cached, &fresh);
    build_ok(
        &fixture_tasks(),
        &fixture_runs(),
        &fresh,
        &["--no-cache"],
        &[],
    );
    assert!(
        tree(&cached) == tree(&fresh),
        "the build from the damaged cache is the fresh one"
    );

    // import bfcl: an id with an ESC and a BEL is printed escaped.
    let data = bfcl_data(tmp.path(), &["simple_python_\u{1b}[2J\u{7}"]);
    let o = run_within(
        &[
            "import",
            "bfcl",
            "--from",
            s(&data),
            "--out",
            s(&tmp.path().join("tasks")),
        ],
        60,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!o.stdout.iter().any(|&b| b == 0x1b || b == 0x07));
    assert!(String::from_utf8_lossy(&o.stdout).contains("simple_python_\\e[2J\\x07"));

    // tasks lint: a FIFO and a symlink loop in a task folder are named, as is a FIFO given.
    let tasks = tmp.path().join("lint");
    copy_tree(&fixture_tasks(), &tasks);
    mkfifo(&tasks.join("fifo.json"));
    symlink(&tasks.join("b.json"), &tasks.join("a.json"));
    symlink(&tasks.join("a.json"), &tasks.join("b.json"));
    let lint = |path: &Path| run_within(&["tasks", "lint", "--tasks", s(path)], 30);
    let err = refused(&lint(&tasks));
    for said in [
        format!(
            "{}: not read: it is a FIFO, not a regular file",
            tasks.join("fifo.json").display()
        ),
        format!(
            "{}: not read: it is a symlink loop",
            tasks.join("a.json").display()
        ),
        format!(
            "{}: not read: it is a symlink loop",
            tasks.join("b.json").display()
        ),
    ] {
        assert!(err.contains(&said), "{said:?} not in {err}");
    }
    let err = refused(&lint(&tasks.join("fifo.json")));
    assert!(
        err.contains("fifo.json: is a FIFO: give a task file or a folder of them"),
        "{err}"
    );
}
