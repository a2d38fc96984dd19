//! Shared helpers for the collect and mock integration tests: start the real mock binary on an
//! ephemeral loopback port, run the real collect binary, read the mock's log and the runs tree.
#![allow(dead_code)]

use callcheck::mock::SentRecord;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_callcheck");

pub fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks")
}

/// A running `callcheck mock` child, killed on drop.
pub struct Mock {
    pub child: Child,
    /// Kept open: the mock must not lose its stdout while it runs.
    _stdout: BufReader<std::process::ChildStdout>,
    pub url: String,
    pub log: PathBuf,
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the mock binary with an optional config, logging what it sends into `dir`.
pub fn start_mock(dir: &Path, config: Option<&str>, tasks: &Path) -> Mock {
    let log = dir.join("mock-log.jsonl");
    let mut cmd = Command::new(BIN);
    cmd.args(["mock", "--port", "0", "--tasks"])
        .arg(tasks)
        .arg("--log")
        .arg(&log);
    if let Some(c) = config {
        let p = dir.join("mock.toml");
        std::fs::write(&p, c).unwrap();
        cmd.arg("--config").arg(p);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    let mut stdout = BufReader::new(stdout);
    stdout.read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("callcheck mock listening on ")
        .unwrap_or_else(|| panic!("unexpected first line from mock: {line:?}"))
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    Mock {
        child,
        _stdout: stdout,
        url,
        log,
    }
}

/// Runs collect with the given arguments (plus env), returning its output.
pub fn collect(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("collect").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

pub fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "collect failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reads the mock's log: (served model id, task, sample, attempt) → what was sent.
pub fn read_log(path: &Path) -> BTreeMap<(String, String, u64, u32), SentRecord> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let r: SentRecord = serde_json::from_str(line).unwrap();
        let key = (r.model.clone(), r.task.clone(), r.sample, r.attempt);
        assert!(
            out.insert(key.clone(), r).is_none(),
            "the mock answered {key:?} twice"
        );
    }
    out
}

pub fn sha(bytes: &[u8]) -> String {
    callcheck::task::sha256_hex(bytes)
}

/// Every file under `root`, relative path → bytes.
pub fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() {
            let rel = e
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.insert(rel, std::fs::read(e.path()).unwrap());
        }
    }
    out
}

/// A hash of one directory's whole content (names and bytes).
pub fn dir_hash(dir: &Path) -> String {
    let mut all = Vec::new();
    for (name, bytes) in files(dir) {
        all.extend_from_slice(name.as_bytes());
        all.push(0);
        all.extend_from_slice(sha(&bytes).as_bytes());
        all.push(b'\n');
    }
    sha(&all)
}

/// Finished run directories (`runs/<model>/<task>/<run-id>`, no dot-names) → content hash.
pub fn finished_runs(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    for r in callcheck::runs::scan(root).runs {
        out.insert(r.dir.clone(), dir_hash(&r.dir));
    }
    out
}

/// A models config for the given rows: (name, served model, stream, concurrency).
pub fn models_config(url: &str, rows: &[(&str, &str, bool, usize)], extra: &str) -> String {
    let mut s = String::new();
    for (name, model, stream, conc) in rows {
        s.push_str(&format!(
            "[[model]]\nname = \"{name}\"\nbase_url = \"{url}\"\nmodel = \"{model}\"\nstream = {stream}\nconcurrency = {conc}\ntimeout_secs = 20\n{extra}[model.params]\ntemperature = 0.7\nmax_tokens = 512\n\n"
        ));
    }
    s
}
