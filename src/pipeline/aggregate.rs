//! Stage 3, aggregate: scored samples → the [`Matrix`] (cells, totals, intervals), what the
//! runs' `cell.json` files say about each model, and what changed since the previous build.

use super::read::RunInput;
use crate::report::{self, Matrix, Scored, TaskInfo};
use crate::site::ModelInfo;
use crate::site::data::{self, Changes};
use crate::stats::IntervalKind;
use crate::task::Task;
use std::collections::{BTreeMap, BTreeSet};

/// Everything the summary pages are rendered from, apart from the inputs themselves.
#[derive(Debug)]
pub struct Aggregates {
    pub matrix: Matrix,
    pub models: BTreeMap<String, ModelInfo>,
    /// Present only when some sample moved, appeared or disappeared since the previous build.
    pub changes: Option<Changes>,
    /// Task id → sha256 of its file, for the manifest.
    pub task_hashes: BTreeMap<String, String>,
}

/// What is known of the previous build's outcomes.
pub enum Previous {
    /// Nothing (no previous site, or its export unreadable): no changes page.
    Unknown,
    /// Each sample's outcome by permalink, from its samples.csv.
    Outcomes(BTreeMap<String, String>),
    /// What changed, told run by run from the verdict cache.
    Told(Changes),
}

/// Aggregates the scored samples (in any order: the matrix sorts them).
pub fn aggregate(
    scored: Vec<Scored>,
    tasks: &[Task],
    runs: &[RunInput],
    previous: Previous,
    interval: IntervalKind,
    thresholds: crate::stats::Thresholds,
) -> Aggregates {
    let infos: Vec<TaskInfo> = tasks.iter().map(TaskInfo::of).collect();
    let matrix = report::aggregate_at(scored, infos, interval, thresholds);
    let changes = match previous {
        Previous::Unknown => None,
        Previous::Outcomes(p) => Some(data::changes(&p, &matrix)),
        Previous::Told(c) => Some(c),
    }
    .filter(|c| !c.is_empty());
    Aggregates {
        models: model_info(runs),
        changes,
        task_hashes: tasks
            .iter()
            .map(|t| (t.id.clone(), t.sha256.clone()))
            .collect(),
        matrix,
    }
}

/// What the runs' `cell.json` files say about each model: its entries, servers, versions, runs.
pub fn model_info(runs: &[RunInput]) -> BTreeMap<String, ModelInfo> {
    let mut out: BTreeMap<String, ModelInfo> = BTreeMap::new();
    let mut versions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in runs.iter().map(|r| &r.run) {
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
