//! Stage 3, aggregate: scored samples → the [`Matrix`] (cells, totals, intervals), what the
//! runs' `cell.json` files say about each model, and what changed since the previous build.

use crate::evidence::Provenance;
use crate::evidence::read::RunInput;
use crate::report::{self, Matrix, Scored, TaskInfo};
use crate::site::data::{self, Changes};
use crate::stats::IntervalKind;
use crate::task::Task;
use std::collections::BTreeMap;

/// Everything the summary pages are rendered from, apart from the inputs themselves.
#[derive(Debug)]
pub struct Aggregates {
    pub matrix: Matrix,
    pub models: BTreeMap<String, Provenance>,
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
        models: crate::evidence::provenance(runs.iter().map(|r| &r.run)),
        changes,
        task_hashes: tasks
            .iter()
            .map(|t| (t.id.clone(), t.sha256.clone()))
            .collect(),
        matrix,
    }
}
