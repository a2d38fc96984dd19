//! Reading a collection to compare: a `runs/` tree (scanned and scored with the build's own
//! read and score stages) or a published site's `data/samples.csv`.
//!
//! Reading a `runs/` tree here is a small loader of its own (scan → score → aggregate) rather
//! than the build's pipeline, which renders pages as it scores; the two can share one reader
//! once the build's is a library.

use super::pair::RowSettings;
use crate::report::{self, Matrix, SampleKey, Scored, TaskInfo};
use crate::runs;
use crate::stats::IntervalKind;
use crate::task::Task;
use crate::taxonomy::{Label, Outcome};
use anyhow::{Context, Result, bail};
use rayon::prelude::*;
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

/// Reads and scores a `runs/` tree with the current checkers. Runs of tasks that are not in the
/// corpus and samples that cannot be read are left out (counted in the warning).
pub fn load_runs(root: &Path, tasks: &[Task], kind: IntervalKind) -> Result<Collection> {
    if !root.is_dir() {
        bail!("no runs folder at {}", root.display());
    }
    let by_id: BTreeMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let scan = runs::scan(root);
    let mut rows: BTreeMap<String, RowSettings> = BTreeMap::new();
    let mut jobs = Vec::new();
    let mut left_out = scan.skipped.len();
    for r in &scan.runs {
        // A feedback round (SPEC §11) is no sample of its cell: a baseline's rates leave it
        // out, as a build's do.
        if !r.cell.kind.is_samples() {
            continue;
        }
        let Some(task) = by_id.get(r.task_id.as_str()) else {
            left_out += 1;
            continue;
        };
        rows.entry(r.model.clone()).or_insert_with(|| RowSettings {
            entry: (*r.cell.model).clone(),
            server: (*r.cell.server).clone(),
        });
        for s in &r.samples {
            jobs.push((r, *task, s.as_str()));
        }
    }
    let scored: Vec<Option<Scored>> = jobs
        .par_iter()
        .map(|(r, task, sample)| {
            // The build's own read and score stages, so a baseline is scored exactly as a build
            // scores its runs.
            let files = r.read_sample(sample).ok()?;
            let parsed = crate::pipeline::read::parse_sample(r, sample, files, None);
            let task_changed = r.cell.task.sha256 != task.sha256;
            Some(crate::pipeline::score::score_sample(task, task_changed, &parsed).1)
        })
        .collect();
    left_out += scored.iter().filter(|s| s.is_none()).count();
    if left_out > 0 {
        eprintln!(
            "note: {left_out} run folder(s) or sample(s) under {} were not read (unreadable, or a task not in the corpus); `callcheck build` lists them",
            root.display()
        );
    }
    Ok(Collection {
        source: root.display().to_string(),
        matrix: report::aggregate(scored.into_iter().flatten().collect(), infos(tasks), kind),
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
        samples.extend(read_samples_csv(p)?);
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

/// The longest line read from a baseline samples.csv. Its lines carry a sample's key, outcome,
/// label and a detail callcheck shortens; 1 MiB is thousands of times a real one.
pub const MAX_CSV_LINE: usize = 1 << 20;

/// The most read from one baseline samples.csv (a site splits its export by model well before).
const MAX_CSV_BYTES: u64 = 4 << 30;

/// One samples.csv file's rows, as bare samples (outcome only).
fn read_samples_csv(path: &Path) -> Result<Vec<Scored>> {
    // Readers open regular files only and say what they found (SPEC §12).
    if let Some(what) = crate::fsafe::not_file_or_folder(path) {
        bail!(
            "{} {what}, not a samples.csv file (pass a callcheck site's data/samples.csv, the site folder, or a runs/ folder)",
            path.display()
        );
    }
    let file = crate::fsafe::open_regular(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    // Streamed, with a bound on the whole file and on each line (SPEC §12): a samples.csv line
    // is a few hundred bytes, so one past MAX_CSV_LINE is not a samples.csv, and reading it
    // whole would hold it in memory.
    let bounded = crate::fsafe::LineBound::new(
        std::io::Read::take(file, MAX_CSV_BYTES),
        MAX_CSV_LINE,
        "a samples.csv",
    );
    let mut r = csv::ReaderBuilder::new().from_reader(std::io::BufReader::new(bounded));
    let headers = r
        .headers()
        .with_context(|| format!("{}: not a CSV file", path.display()))?
        .clone();
    let col = |name: &str| {
        headers.iter().position(|h| h == name).with_context(|| {
            format!(
                "{}: no {name:?} column: pass a callcheck site's data/samples.csv, the site folder, or a runs/ folder",
                path.display()
            )
        })
    };
    let (cm, ct, cr, cs, co, cl) = (
        col("model")?,
        col("task")?,
        col("run")?,
        col("sample")?,
        col("outcome")?,
        col("label")?,
    );
    // A published site's feedback samples (SPEC §11; `round` 1) are in no rate; a samples.csv
    // of an earlier callcheck has no `round` column and only first-round samples.
    let round = headers.iter().position(|h| h == "round");
    let mut samples = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let rec = rec.with_context(|| format!("{}: row {}", path.display(), i + 2))?;
        let get = |c: usize| rec.get(c).unwrap_or("").to_string();
        if round.is_some_and(|c| !matches!(rec.get(c), None | Some("" | "0"))) {
            continue;
        }
        let outcome = match get(co).as_str() {
            "pass" => Outcome::Pass,
            "error" => Outcome::Error,
            "fail" => match Label::parse(&get(cl)) {
                Some(l) => Outcome::Fail(l),
                None => bail!(
                    "{}: row {}: {:?} is not a label",
                    path.display(),
                    i + 2,
                    get(cl)
                ),
            },
            other => bail!(
                "{}: row {}: outcome {other:?} is not pass, fail or error",
                path.display(),
                i + 2
            ),
        };
        // samples.csv does not carry the answer, so no two baseline answers are compared.
        let key = SampleKey {
            model: get(cm),
            task: get(ct),
            run: get(cr),
            sample: get(cs),
        };
        samples.push(Scored::bare(key, outcome));
    }
    Ok(samples)
}

/// Reads a baseline: a `runs/` tree, a site folder (its `data/samples.csv`, whole or split by
/// model) or a samples.csv.
pub fn load_baseline(path: &Path, tasks: &[Task], kind: IntervalKind) -> Result<Collection> {
    let csvs: Vec<PathBuf> = if path.is_dir() {
        let in_site = crate::site::data::site_samples_csvs(path);
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
