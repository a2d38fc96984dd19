//! Which summary pages an in-place rebuild may leave as the previous build wrote them.
//!
//! The pages of a model, a task, a tag or a label (with their charts) are drawn in groups, and
//! each group gets a key: a hash of the code that draws it, of what every page may show (the
//! models, the tasks' files, the interval method), of what the page shows of the comparisons
//! (a model's and a task's "Comparisons" block) and of the listings of exactly the run folders
//! its figures come from (a listing names every file of a run with its sha256, so it changes
//! whenever a verdict can). A model's group depends on the runs under `runs/<model>/`, a task's
//! on those under `runs/*/<task>/`, a tag's on those of its tasks, a label's on the runs of the
//! cells where the label occurs. After one run folder arrives, one model page, one task page,
//! that task's tag pages and the pages of the labels its samples carry are drawn again (and the
//! model and task pages whose comparison verdicts moved); every other group stays. The index,
//! the exports, the comparison pages and the manifest, which show every cell, are always drawn.

use super::SiteInput;
use crate::taxonomy::Label;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// A group's key: sha256 of everything its files are drawn from.
pub type Key = [u8; 32];

/// What the build knows of the groups of the site it updates.
pub trait Groups: Sync {
    /// True when group `name` was drawn from inputs with this `key` by the previous build and
    /// its files are still in the site as written then: they stay, and are not drawn again.
    fn keep(&self, name: &str, key: &Key) -> bool;
    /// Group `name` was drawn from inputs with `key` into `files` (paths relative to the site).
    fn drawn(&self, name: &str, key: Key, files: Vec<String>);
}

/// The keys of one build's groups.
pub(crate) struct Keys {
    global: Key,
    /// Model → task → hash of the listings of the run folders under `runs/<model>/<task>/`
    /// (nested, so that a lookup borrows its names).
    cells: BTreeMap<String, BTreeMap<String, Key>>,
}

/// Adds `s` to `h` so that no two sequences of fields hash alike.
fn field(h: &mut Sha256, s: &[u8]) {
    h.update((s.len() as u64).to_le_bytes());
    h.update(s);
}

impl Keys {
    pub(crate) fn of(input: &SiteInput) -> Keys {
        let m = input.matrix;
        let mut g = Sha256::new();
        field(&mut g, env!("CALLCHECK_SOURCE_HASH").as_bytes());
        field(&mut g, format!("{:?}", m.method).as_bytes());
        // Every page's verdicts (and the words that explain them) follow `--reliable-at`.
        field(&mut g, format!("{:?}", m.thresholds).as_bytes());
        field(&mut g, b"models");
        for mv in &m.models {
            field(&mut g, mv.name.as_bytes());
        }
        field(&mut g, b"tasks");
        for (id, sha) in input.task_hashes {
            field(&mut g, id.as_bytes());
            field(&mut g, sha.as_bytes());
        }
        // The comparisons are not hashed here: what a page shows of them is its "Comparisons"
        // block, hashed into the keys of the model and task pages that carry one. (Hashing them
        // whole made every group depend on every sample of a compared row: one new run in such
        // a row drew every page again.)
        let mut cells: BTreeMap<String, BTreeMap<String, Sha256>> = BTreeMap::new();
        for (path, listing) in input.transcripts {
            let mut parts = path.splitn(3, '/');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(model), Some(task), Some(run)) => {
                    let h = cells
                        .entry(model.into())
                        .or_default()
                        .entry(task.into())
                        .or_default();
                    field(h, run.as_bytes());
                    field(h, listing.as_bytes());
                }
                // Never produced by a scan; should it be, every group depends on it.
                _ => {
                    field(&mut g, path.as_bytes());
                    field(&mut g, listing.as_bytes());
                }
            }
        }
        Keys {
            global: g.finalize().into(),
            cells: cells
                .into_iter()
                .map(|(model, tasks)| {
                    let tasks = tasks
                        .into_iter()
                        .map(|(task, h)| (task, h.finalize().into()))
                        .collect();
                    (model, tasks)
                })
                .collect(),
        }
    }

    fn start(&self, kind: &str, name: &str) -> Sha256 {
        let mut h = Sha256::new();
        h.update(self.global);
        field(&mut h, kind.as_bytes());
        field(&mut h, name.as_bytes());
        h
    }

    fn cell(&self, h: &mut Sha256, model: &str, task: &str) {
        if let Some(c) = self.cells.get(model).and_then(|t| t.get(task)) {
            field(h, model.as_bytes());
            field(h, task.as_bytes());
            h.update(c);
        }
    }

    /// A model's page and charts: its runs, and its block of comparisons.
    pub(crate) fn model(&self, input: &SiteInput, model: &str) -> Key {
        let mut h = self.start("model", model);
        field(
            &mut h,
            super::pages::compare::block(input.comparisons, 1, Some(model), None).as_bytes(),
        );
        for t in &input.matrix.tasks {
            self.cell(&mut h, model, &t.id);
        }
        h.finalize().into()
    }

    /// A task's page: its runs, every model's, and its block of comparisons.
    pub(crate) fn task(&self, input: &SiteInput, task: &str) -> Key {
        let mut h = self.start("task", task);
        field(
            &mut h,
            super::pages::compare::block(input.comparisons, 1, None, Some(task)).as_bytes(),
        );
        for mv in &input.matrix.models {
            self.cell(&mut h, &mv.name, task);
        }
        h.finalize().into()
    }

    /// A tag's page and chart: the runs of its tasks.
    pub(crate) fn tag(&self, input: &SiteInput, tag: &str) -> Key {
        let mut h = self.start("tag", tag);
        for t in input
            .matrix
            .tasks
            .iter()
            .filter(|t| t.tags.iter().any(|x| x == tag))
        {
            for mv in &input.matrix.models {
                self.cell(&mut h, &mv.name, &t.id);
            }
        }
        h.finalize().into()
    }

    /// A label's page: the runs of the cells where it occurs.
    pub(crate) fn label(&self, input: &SiteInput, label: Label) -> Key {
        let mut h = self.start("label", label.as_str());
        for c in input.matrix.cells.values() {
            if c.labels.contains_key(&label) {
                self.cell(&mut h, &c.model, &c.task);
            }
        }
        h.finalize().into()
    }
}
