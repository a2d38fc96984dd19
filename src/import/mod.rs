//! Importing other suites' questions as callcheck tasks (SPEC §10).

pub mod bfcl;
pub mod source;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A task file larger than this is not an import of ours (BFCL's largest is a few hundred KB),
/// so it is not read at all when looking for stale imports.
const MAX_TASK_BYTES: u64 = 16 << 20;

/// The task files under `out` that an earlier import of `suite` wrote and this one did not
/// produce (a category left out, a task now skipped, an entry gone from the data), sorted. A
/// file counts only when it is a JSON task whose `source.suite` is `suite`: hand-written tasks,
/// other suites' imports and anything that does not parse are never listed.
pub fn stale_imports(out: &Path, suite: &str, produced: &BTreeSet<PathBuf>) -> Vec<PathBuf> {
    let mut stale = Vec::new();
    for e in walkdir::WalkDir::new(out).sort_by_file_name() {
        let Ok(e) = e else { continue };
        let path = e.path();
        if !e.file_type().is_file()
            || path.extension().is_none_or(|x| x != "json")
            || produced.contains(path)
            || !e.metadata().is_ok_and(|m| m.len() <= MAX_TASK_BYTES)
        {
            continue;
        }
        let Ok(bytes) = crate::fsafe::read_bounded(path, MAX_TASK_BYTES) else {
            continue;
        };
        let Ok(task) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            continue;
        };
        if task.pointer("/source/suite").and_then(|s| s.as_str()) == Some(suite) {
            stale.push(path.to_path_buf());
        }
    }
    stale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_of_the_suite_that_were_not_produced_are_stale() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("simple_python");
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let kept = write("bfcl-a.json", r#"{"source": {"suite": "bfcl"}}"#);
        let gone = write("bfcl-b.json", r#"{"source": {"suite": "bfcl"}}"#);
        write("mine.json", r#"{"id": "mine"}"#);
        write("other.json", r#"{"source": {"suite": "other"}}"#);
        write("broken.json", "{not json");
        write("notes.txt", r#"{"source": {"suite": "bfcl"}}"#);
        let produced = BTreeSet::from([kept]);
        assert_eq!(stale_imports(tmp.path(), "bfcl", &produced), vec![gone]);
        assert!(stale_imports(&tmp.path().join("missing"), "bfcl", &produced).is_empty());
    }
}
