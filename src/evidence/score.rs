//! Scoring: one sample's transcript against its task, with the current checkers. The full
//! [`Verdict`] lives only until the sample's page is rendered; [`Scored`] is what aggregation
//! keeps.

use super::read::Sample;
use crate::report::Scored;
use crate::score::wire::{Completion, TransportFailure};
use crate::score::{Verdict, parse, score_parsed};
use crate::task::Task;

/// Scores one sample: the verdict for its page, the little that aggregation keeps, and the
/// response as read (the sample's page shows its content): the response is parsed once for
/// the verdict, the page and the reports.
pub fn score_read(
    task: &Task,
    task_changed: bool,
    sample: &Sample,
) -> (Verdict, Scored, Result<Completion, TransportFailure>) {
    let (verdict, parsed) = verdict_of(task, sample);
    let scored = scored_of(task, task_changed, sample, &verdict, &parsed);
    (verdict, scored, parsed)
}

/// The sample's verdict under the current checkers, and its response as parsed for it.
pub fn verdict_of(task: &Task, sample: &Sample) -> (Verdict, Result<Completion, TransportFailure>) {
    let t = &sample.transcript;
    let parsed = parse(t);
    (score_parsed(task, t, &parsed), parsed)
}

/// What aggregation keeps of a sample scored by [`verdict_of`]: besides the verdict's own
/// fields, the times and tokens, the response's fingerprint and the outcome after the label's
/// mechanical repair (a second scoring, of the mended response).
pub fn scored_of(
    task: &Task,
    task_changed: bool,
    sample: &Sample,
    verdict: &Verdict,
    parsed: &Result<Completion, TransportFailure>,
) -> Scored {
    let t = &sample.transcript;
    // Latency and size for the reports: times from meta.json, tokens from the response's usage.
    let completion_tokens = parsed.as_ref().ok().and_then(|c| c.completion_tokens);
    let (ttfb_ms, total_ms) = t
        .meta
        .as_ref()
        .map_or((None, None), |m| (m.ttfb_ms, m.total_ms));
    Scored {
        key: sample.key.clone(),
        outcome: verdict.outcome,
        stage: verdict.stage,
        hitec: crate::hitec::crosswalk(verdict),
        value_match: verdict.value_match,
        extra_prose: verdict.extra_prose,
        task_changed,
        metrics: crate::hitec::sample_metrics(task, verdict),
        detail: verdict.detail.clone(),
        ttfb_ms,
        total_ms,
        completion_tokens,
        prompt_tokens: parsed.as_ref().ok().and_then(|c| c.prompt_tokens),
        refused_status: t
            .meta
            .as_ref()
            .and_then(|m| m.status)
            .filter(|s| !(200..300).contains(s)),
        response: crate::report::distinct::fingerprint_parsed(parsed, &t.body),
        // Set by the caller, which knows the run: a sample does not know its round.
        feedback: None,
        repaired: crate::score::mend::repaired_parsed(task, t, parsed.as_ref().ok(), verdict)
            .map(|v| v.outcome),
        visible: verdict.visible,
    }
}

/// The round a sample of `run` belongs to: `None` for a first-round sample, else the feedback
/// style of its run and the parent its `meta.json` names (SPEC §11).
pub fn feedback_of(
    run: &crate::runs::RunDir,
    sample: &Sample,
) -> Option<Box<crate::report::FeedbackOf>> {
    if run.cell.kind.is_samples() {
        return None;
    }
    // [`super::read::read`] leaves out feedback runs that name no style.
    let settings = run.cell.feedback.as_ref()?;
    Some(Box::new(crate::report::FeedbackOf {
        style: settings.style,
        history: settings.history,
        review: run.cell.kind == crate::runs::RunKind::Review,
        parent: sample
            .transcript
            .meta
            .as_ref()
            .and_then(|m| m.parent.clone()),
    }))
}
