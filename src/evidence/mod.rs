//! Evidence: from a `runs/` tree (or a built site's `data/samples.csv`) to scored samples. The
//! one way from what collect wrote to what the reports count: the build reads and scores
//! through it while it renders pages; a comparison's baseline, a `build --baseline` and a
//! `compare` read whole collections through [`score_runs`]; `export preference` and collect's
//! follow-up rounds, which need the transcript beside its verdict, read one sample at a time
//! through [`judge`]. Nothing above climbs into the build's pipeline or the site to get
//! samples.
//!
//! - [`read`]: the corpus, the run folders, each sample's files parsed once, what was skipped.
//! - [`score`]: one sample against its task, with the current checkers, and what aggregation
//!   keeps of it ([`crate::report::Scored`]).
//! - [`samples_csv`]: a built site's `samples.csv` read back.
//! - [`cache`]: what the verdict cache keeps of a scored sample, and a transcript's identity.
//! - [`follow_ups`]: which samples followed each failure up, read before any run is scored.

pub mod cache;
pub mod follow_ups;
pub mod read;
pub mod samples_csv;
pub mod score;

use crate::report::Scored;
use crate::runs::{self, RunDir};
use crate::score::Verdict;
use crate::score::wire::{Completion, TransportFailure};
use crate::task::Task;
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Where a build's evidence comes from.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    /// The task corpus: a folder of task files, or one file.
    pub tasks: &'a Path,
    /// The `runs/` tree collect wrote.
    pub runs: &'a Path,
    /// The site being built, whose `samples.csv` holds the previous build's outcomes.
    pub out: &'a Path,
    /// Another build's `samples.csv` to read the previous outcomes from instead.
    pub previous: Option<&'a Path>,
    /// An empty `runs/` is an empty site rather than an error.
    pub allow_empty: bool,
}

/// A skipped input, as the exports and the index page show it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SkippedInput {
    /// Relative to the runs root, `/`-separated.
    pub(crate) path: String,
    pub(crate) reason: String,
}

/// `p` relative to `root`, `/`-separated (published: never a local path).
pub fn rel(root: &Path, p: &Path) -> String {
    let r = p.strip_prefix(root).unwrap_or(p);
    let parts: Vec<String> = r
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// What the `cell.json` files of a row's runs say about it: how it was collected, shown on its
/// page and compared between rows.
#[derive(Debug, Clone, Default)]
pub struct Provenance {
    /// The distinct model entries used (already redacted by collect), in run order.
    pub(crate) entries: Vec<serde_json::Value>,
    /// The distinct `server` objects recorded.
    pub(crate) servers: Vec<serde_json::Value>,
    /// callcheck versions that collected the runs, sorted.
    pub(crate) versions: Vec<String>,
    /// (task, run id, k, started, ended), sorted.
    pub(crate) runs: Vec<(String, String, u32, String, String)>,
}

/// What the runs' `cell.json` files say about each row: its entries, servers, versions, runs.
pub fn provenance<'a>(runs: impl Iterator<Item = &'a RunDir>) -> BTreeMap<String, Provenance> {
    let mut out: BTreeMap<String, Provenance> = BTreeMap::new();
    let mut versions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in runs {
        let info = out.entry(r.model.clone()).or_default();
        if !info.entries.contains(&*r.cell.model) {
            info.entries.push((*r.cell.model).clone());
        }
        if !r.cell.server.is_null() && !info.servers.contains(&*r.cell.server) {
            info.servers.push((*r.cell.server).clone());
        }
        versions
            .entry(r.model.clone())
            .or_default()
            .insert(r.cell.callcheck_version.clone());
        info.runs.push((
            r.task_id.clone(),
            r.run_id.clone(),
            r.cell.k,
            r.cell.started.clone(),
            r.cell.ended.clone(),
        ));
    }
    for (m, v) in versions {
        if let Some(i) = out.get_mut(&m) {
            i.versions = v.into_iter().collect();
            i.runs.sort();
        }
    }
    out
}

/// A whole `runs/` tree's first-round samples, scored.
#[derive(Debug)]
pub struct Scanned {
    /// In `runs/` order, then sample order.
    pub samples: Vec<Scored>,
    /// The run folders scored (first-round runs of tasks in the corpus), in `runs/` order.
    pub runs: Vec<RunDir>,
    /// Run folders and samples that were not read: unreadable, or a task not in the corpus.
    pub left_out: usize,
}

/// Reads and scores a `runs/` tree's first-round samples with the current checkers, as a build
/// scores them. Follow-up rounds (SPEC §11) are no sample of their cell and are left out, as a
/// build's rates leave them out.
pub fn score_runs(root: &Path, tasks: &[Task]) -> Scanned {
    let by_id: BTreeMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let scan = runs::scan(root);
    let mut left_out = scan.skipped.len();
    let mut kept = Vec::new();
    for r in scan.runs {
        if r.cell.kind != runs::RunKind::Samples {
            continue;
        }
        match by_id.get(r.task_id.as_str()) {
            Some(task) => kept.push((r, *task)),
            None => left_out += 1,
        }
    }
    let jobs: Vec<(&RunDir, &Task, &str)> = kept
        .iter()
        .flat_map(|(r, task)| r.samples.iter().map(move |s| (r, *task, s.as_str())))
        .collect();
    let scored: Vec<Option<Scored>> = jobs
        .par_iter()
        .map(|(r, task, sample)| judge(r, sample, task).ok().map(|j| j.scored(task)))
        .collect();
    left_out += scored.iter().filter(|s| s.is_none()).count();
    Scanned {
        samples: scored.into_iter().flatten().collect(),
        runs: kept.into_iter().map(|(r, _)| r).collect(),
        left_out,
    }
}

/// One sample read and scored as a build scores it: the sample as read, its full verdict and
/// its response as parsed, what a reader of the transcript itself needs. What aggregation keeps
/// of it ([`Judged::scored`]) is computed only when asked for: it scores a failure a second
/// time, mended.
#[derive(Debug)]
pub struct Judged {
    pub sample: read::Sample,
    pub verdict: Verdict,
    pub completion: Result<Completion, TransportFailure>,
    /// The run was collected for another version of the task's file.
    pub task_changed: bool,
}

impl Judged {
    /// What aggregation keeps of the sample ([`Scored`]), as a build computes it.
    pub fn scored(&self, task: &Task) -> Scored {
        score::scored_of(
            task,
            self.task_changed,
            &self.sample,
            &self.verdict,
            &self.completion,
        )
    }
}

/// Reads sample `name` of `run` and scores it against `task` with the current checkers. Only
/// the sample's files being unreadable is an error: a damaged transcript is scored.
pub fn judge(run: &RunDir, name: &str, task: &Task) -> std::io::Result<Judged> {
    let files = run.read_sample(name)?;
    let sample = read::parse_sample(run, name, files, None);
    let (verdict, completion) = score::verdict_of(task, &sample);
    Ok(Judged {
        task_changed: run.cell.task.sha256 != task.sha256,
        sample,
        verdict,
        completion,
    })
}
