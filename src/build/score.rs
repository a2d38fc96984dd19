//! Stage 2, score: one sample's transcript against its task, with the current checkers. The full
//! [`Verdict`] lives only until the sample's page is rendered; [`Scored`] is what aggregation
//! keeps.

use super::read::Sample;
use crate::report::Scored;
use crate::score::{Verdict, score};
use crate::task::Task;

/// Scores one sample: the verdict for its page, and the little that aggregation keeps.
pub fn score_sample(task: &Task, task_changed: bool, sample: &Sample) -> (Verdict, Scored) {
    let verdict = score(task, &sample.transcript);
    let scored = Scored {
        key: sample.key.clone(),
        outcome: verdict.outcome,
        stage: verdict.stage,
        hitec: crate::hitec::crosswalk(&verdict),
        value_match: verdict.value_match,
        extra_prose: verdict.extra_prose,
        task_changed,
        metrics: crate::hitec::sample_metrics(task, &verdict),
        detail: verdict.detail.clone(),
    };
    (verdict, scored)
}
