//! Reading a collection to compare: a `runs/` tree or a published site's `data/samples.csv`,
//! both through [`crate::evidence`], aggregated into a matrix with each row's settings.

use super::pair::RowSettings;
use crate::report::{self, Matrix, TaskInfo};
use crate::stats::IntervalKind;
use crate::task::Task;
use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A collection read for comparing: its matrix and what each row was collected with.
#[derive(Debug, Clone)]
pub struct Collection {
    /// Where it was read from, for messages and pages.
    pub source: String,
    pub matrix: Matrix,
    /// Per row; empty for a baseline read from a samples.csv (it records no settings).
    pub rows: BTreeMap<String, RowSettings>,
}

/// The task infos of a corpus (what aggregation and comparison need).
pub fn infos(tasks: &[Task]) -> Vec<TaskInfo> {
    tasks.iter().map(TaskInfo::of).collect()
}

/// Reads and scores a `runs/` tree with the current checkers ([`crate::evidence`]). Runs of
/// tasks that are not in the corpus and samples that cannot be read are left out (counted in
/// the warning).
pub fn load_runs(root: &Path, tasks: &[Task], kind: IntervalKind) -> Result<Collection> {
    if !root.is_dir() {
        bail!("no runs folder at {}", root.display());
    }
    let scanned = crate::evidence::score_runs(root, tasks);
    let mut rows: BTreeMap<String, RowSettings> = BTreeMap::new();
    for r in &scanned.runs {
        rows.entry(r.model.clone()).or_insert_with(|| RowSettings {
            entry: (*r.cell.model).clone(),
            server: (*r.cell.server).clone(),
        });
    }
    if scanned.left_out > 0 {
        eprintln!(
            "note: {} run folder(s) or sample(s) under {} were not read (unreadable, or a task not in the corpus); `callcheck build` lists them",
            scanned.left_out,
            root.display()
        );
    }
    Ok(Collection {
        source: root.display().to_string(),
        matrix: report::aggregate(scanned.samples, infos(tasks), kind),
        rows,
    })
}

/// Reads a published site's `data/samples.csv` (or the per-model files it is split into): each
/// sample's outcome as that build scored it.
pub fn load_samples_csvs(
    paths: &[PathBuf],
    tasks: &[Task],
    kind: IntervalKind,
) -> Result<Collection> {
    let mut samples = Vec::new();
    for p in paths {
        samples.extend(crate::evidence::samples_csv::read_scored(p)?);
    }
    let source = match paths {
        [one] => one.display().to_string(),
        _ => paths
            .first()
            .and_then(|p| p.parent())
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
    };
    Ok(Collection {
        source,
        matrix: report::aggregate(samples, infos(tasks), kind),
        rows: BTreeMap::new(),
    })
}

/// Reads a baseline: a `runs/` tree, a site folder (its `data/samples.csv`, whole or split by
/// model) or a samples.csv.
pub fn load_baseline(path: &Path, tasks: &[Task], kind: IntervalKind) -> Result<Collection> {
    let csvs: Vec<PathBuf> = if path.is_dir() {
        let in_site = crate::evidence::samples_csv::site_samples_csvs(path);
        if in_site.is_empty() {
            return load_runs(path, tasks, kind);
        }
        in_site
    } else if path.is_file() {
        vec![path.to_path_buf()]
    } else if let Some(what) = crate::fsafe::not_file_or_folder(path) {
        bail!(
            "--baseline {} {what}; pass a runs/ folder, a site folder or its data/samples.csv",
            path.display()
        );
    } else {
        bail!(
            "--baseline {}: no such file or folder (pass a runs/ folder, a site folder or its data/samples.csv)",
            path.display()
        );
    };
    load_samples_csvs(&csvs, tasks, kind)
}
