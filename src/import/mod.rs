//! Importing other suites' questions as callcheck tasks (SPEC §10).

pub mod bfcl;
pub mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A task file larger than this is not an import of ours (BFCL's largest is a few hundred KB),
/// so it is not read at all when looking for stale imports.
const MAX_TASK_BYTES: u64 = 16 << 20;

/// The record an import keeps in its output folder: the files it wrote, each with its sha256
/// (as `build` records its site), so that the next import removes only those, and only while
/// they are as it wrote them. Not a `.json` file: a task folder's loader never reads it.
pub const RECORD: &str = ".callcheck-import";

/// The record's first line, then one `<sha256>  <path>` line per file (`sha256sum`'s format),
/// paths relative to the output folder, `/`-separated.
fn record_header(suite: &str) -> String {
    format!("callcheck-import {suite} 1")
}

/// The most bytes read of a record (BFCL's ~5,000 tasks take about 500 KB).
const MAX_RECORD: u64 = 64 << 20;

/// The files an earlier import of `suite` recorded in `out`, with their sha256, by path
/// relative to `out`. Empty when there is no record, or one that is not this suite's.
pub fn recorded(out: &Path, suite: &str) -> BTreeMap<String, String> {
    let Ok(bytes) = crate::fsafe::read_own(&out.join(RECORD), MAX_RECORD) else {
        return BTreeMap::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    if lines.next() != Some(record_header(suite).as_str()) {
        return BTreeMap::new();
    }
    lines
        .filter_map(|l| l.split_once("  "))
        .filter(|(sha, rel)| sha.len() == 64 && safe_rel(rel))
        .map(|(sha, rel)| (rel.to_string(), sha.to_string()))
        .collect()
}

/// A recorded path that stays inside the output folder: plain segments only.
fn safe_rel(rel: &str) -> bool {
    !rel.is_empty()
        && rel
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != ".." && !seg.contains('\\'))
}

/// `path` relative to `out`, `/`-separated: how the record names it.
pub fn relative(out: &Path, path: &Path) -> String {
    let r = path.strip_prefix(out).unwrap_or(path);
    let parts: Vec<String> = r
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

/// The record's bytes for the files an import wrote (`written`: path relative to `out`, sha256).
pub fn record(suite: &str, written: &BTreeMap<String, String>) -> Vec<u8> {
    let mut text = format!("{}\n", record_header(suite));
    for (rel, sha) in written {
        text.push_str(&format!("{sha}  {rel}\n"));
    }
    text.into_bytes()
}

/// What an earlier import recorded and this one did not produce (`produced`: relative paths).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stale {
    /// Still as the earlier import wrote them: to remove.
    pub unchanged: Vec<PathBuf>,
    /// Changed since (or no longer a regular file): kept, and said.
    pub changed: Vec<PathBuf>,
}

/// Sorts the files `recorded` lists that this import did not produce into those still as the
/// earlier import wrote them and those changed since; a file gone already is neither.
pub fn stale_imports(
    out: &Path,
    recorded: &BTreeMap<String, String>,
    produced: &BTreeSet<String>,
) -> Stale {
    let mut stale = Stale::default();
    for (rel, sha) in recorded.iter().filter(|(rel, _)| !produced.contains(*rel)) {
        let path = out.join(rel);
        let Ok(m) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let same = m.is_file()
            && crate::fsafe::read_own(&path, MAX_TASK_BYTES)
                .is_ok_and(|b| crate::task::sha256_hex(&b) == *sha);
        if same {
            stale.unchanged.push(path);
        } else {
            stale.changed.push(path);
        }
    }
    stale
}

/// Task files under `out` that look like an import of `suite` (a JSON task whose
/// `source.suite` is `suite`) but that no record names and this import did not produce: an
/// import before records existed, or another tool's. Never removed; listed so the user can.
pub fn unrecorded_imports(out: &Path, suite: &str, known: &BTreeSet<String>) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for e in walkdir::WalkDir::new(out).sort_by_file_name() {
        let Ok(e) = e else { continue };
        let path = e.path();
        let rel = relative(out, path);
        if !e.file_type().is_file()
            || path.extension().is_none_or(|x| x != "json")
            || known.contains(&rel)
            || !e.metadata().is_ok_and(|m| m.len() <= MAX_TASK_BYTES)
        {
            continue;
        }
        let Ok(bytes) = crate::fsafe::read_own(path, MAX_TASK_BYTES) else {
            continue;
        };
        let Ok(task) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            continue;
        };
        if task.pointer("/source/suite").and_then(|s| s.as_str()) == Some(suite) {
            found.push(path.to_path_buf());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_recorded_files_not_produced_are_stale_and_only_unchanged_ones_removable() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("simple_python");
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            std::fs::write(dir.join(name), text).unwrap();
            (
                format!("simple_python/{name}"),
                crate::task::sha256_hex(text.as_bytes()),
            )
        };
        let kept = write("bfcl-a.json", r#"{"source": {"suite": "bfcl"}}"#);
        let gone = write("bfcl-b.json", r#"{"source": {"suite": "bfcl"}}"#);
        let edited = write("bfcl-c.json", r#"{"source": {"suite": "bfcl"}}"#);
        std::fs::write(dir.join("bfcl-c.json"), "edited").unwrap();
        let theirs = write("other.json", r#"{"source": {"suite": "bfcl"}}"#);
        let written = BTreeMap::from([kept.clone(), gone.clone(), edited.clone()]);
        std::fs::write(tmp.path().join(RECORD), record("bfcl", &written)).unwrap();
        let read = recorded(tmp.path(), "bfcl");
        assert_eq!(read, written);
        assert!(recorded(tmp.path(), "other-suite").is_empty());
        let produced = BTreeSet::from([kept.0.clone()]);
        assert_eq!(
            stale_imports(tmp.path(), &read, &produced),
            Stale {
                unchanged: vec![tmp.path().join(&gone.0)],
                changed: vec![tmp.path().join(&edited.0)],
            }
        );
        let known: BTreeSet<String> = read.keys().cloned().collect();
        assert_eq!(
            unrecorded_imports(tmp.path(), "bfcl", &known),
            vec![tmp.path().join(&theirs.0)]
        );
        // A record naming a path outside the folder is not taken.
        let outside = format!("{}\n{}  ../x.json\n", record_header("bfcl"), "0".repeat(64));
        std::fs::write(tmp.path().join(RECORD), outside).unwrap();
        assert!(recorded(tmp.path(), "bfcl").is_empty());
    }
}
