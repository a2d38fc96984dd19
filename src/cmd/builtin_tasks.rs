//! callcheck's own task corpus (the repository's tasks/), built into the binary so that
//! `callcheck demo` works where it is installed without a checkout: `uvx callcheck demo` in an
//! empty folder writes the corpus to `./tasks` and collects it.

use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::Path;

/// Every file of the corpus: its path relative to tasks/ (`/`-separated) and its bytes.
pub const FILES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/corpus.rs"));

/// Writes the corpus into `dir`, which must not exist yet (nothing is overwritten; the folder
/// is made by this call, so no symlink inside it is followed). Returns the number of task files.
pub fn extract(dir: &Path) -> Result<usize> {
    if std::fs::symlink_metadata(dir).is_ok() {
        bail!(
            "{} already exists: the built-in tasks are written only to a new folder",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut tasks = 0;
    for (rel, bytes) in FILES {
        let path = rel
            .split('/')
            .fold(dir.to_path_buf(), |p, part| p.join(part));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| f.write_all(bytes))
            .with_context(|| format!("cannot write {}", path.display()))?;
        tasks += usize::from(rel.ends_with(".json"));
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_corpus_is_the_repositorys_tasks_folder_byte_for_byte() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks");
        let mut on_disk: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(&root)
            .sort_by_file_name()
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                let rel = e.path().strip_prefix(&root).unwrap();
                let rel: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                (rel.join("/"), std::fs::read(e.path()).unwrap())
            })
            .collect();
        on_disk.sort();
        let built_in: Vec<(String, Vec<u8>)> = FILES
            .iter()
            .map(|(p, b)| (p.to_string(), b.to_vec()))
            .collect();
        assert_eq!(built_in, on_disk);
    }

    #[test]
    fn extracting_writes_a_corpus_that_loads_and_refuses_an_existing_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("tasks");
        let n = extract(&dir).unwrap();
        let loaded = crate::task::load(&dir).unwrap();
        assert_eq!(loaded.len(), n);
        assert_eq!(
            n,
            FILES.iter().filter(|(p, _)| p.ends_with(".json")).count()
        );
        let e = extract(&dir).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} already exists: the built-in tasks are written only to a new folder",
                dir.display()
            )
        );
    }
}
