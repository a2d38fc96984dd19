//! Which samples followed each failure up: a feedback or review sample's `meta.json` names its
//! parent (`parent`: run and sample of the same model and task, SPEC §11), so the link from a
//! follow-up to its failure is on the follow-up's own page; the other way, a failure's section
//! needs the follow-ups before its run's page is rendered, and first-round runs are scored (and
//! rendered) alongside the feedback runs, in parallel. This pre-pass reads only the follow-up
//! runs' `meta.json` files (small, bounded, regular files only), before any run is scored.

use super::read::RunInput;
use std::collections::BTreeMap;

/// The most bytes of one `meta.json` read for its parent (collect writes a few hundred).
const MAX_META: u64 = 1 << 20;

/// A run's follow-ups: by the name of the sample followed up, each (run, sample) that followed
/// it up, in `runs/` order.
pub type OfRun = BTreeMap<String, Vec<(String, String)>>;

/// Every run's follow-ups, by the run's path relative to the runs root (`<model>/<task>/<run>`).
#[derive(Debug, Default)]
pub struct FollowUps(BTreeMap<String, OfRun>);

impl FollowUps {
    /// The follow-ups of the samples of the run at `rel` ([`crate::runs::RunDir::rel`]).
    pub fn of(&self, rel: &str) -> Option<&OfRun> {
        self.0.get(rel)
    }
}

/// Reads the parents of every sample of every follow-up run (feedback or review). A `meta.json`
/// that cannot be read or names no parent links nothing (scoring reports damage); names are
/// kept only when both are folder names as collect writes them, since they become links.
pub fn read(runs: &[RunInput]) -> FollowUps {
    let mut all: BTreeMap<String, OfRun> = BTreeMap::new();
    for r in runs.iter().filter(|r| !r.run.cell.kind.is_samples()) {
        for name in &r.run.samples {
            let Ok(bytes) =
                crate::runs::read_bounded(&r.run.sample_dir(name).join("meta.json"), MAX_META)
            else {
                continue;
            };
            let Some(parent) = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|m| m.get("parent").cloned())
            else {
                continue;
            };
            let field = |k: &str| parent.get(k).and_then(|v| v.as_str()).map(str::to_string);
            let (Some(run), Some(sample)) = (field("run"), field("sample")) else {
                continue;
            };
            if ![&run, &sample].iter().all(|n| crate::names::folder_name(n)) {
                continue;
            }
            all.entry(format!("{}/{}/{}", r.run.model, r.run.task_id, run))
                .or_default()
                .entry(sample)
                .or_default()
                .push((r.run.run_id.clone(), name.clone()));
        }
    }
    FollowUps(all)
}

/// What a run's page shows of its follow-ups, hashed: the cache keeps it with the run's record,
/// and a run whose follow-ups changed (a new feedback round) has its page rendered again. `""`
/// for a run nothing followed up.
pub fn fingerprint(of_run: Option<&OfRun>) -> String {
    match of_run {
        None => String::new(),
        Some(m) => {
            let mut s = String::new();
            for (parent, children) in m {
                for (run, sample) in children {
                    s.push_str(&format!("{parent}\t{run}\t{sample}\n"));
                }
            }
            crate::task::sha256_hex(s.as_bytes())
        }
    }
}
