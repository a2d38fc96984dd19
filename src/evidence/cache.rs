//! The verdict record: what the verdict cache (`build --cache DIR`, written by the build's
//! pipeline) keeps of one scored sample, and the identity of the transcript it was scored
//! from. A [`Scored`] goes in ([`CachedScored::of`]) and comes back out
//! ([`CachedScored::into_scored`]) unchanged; a record naming an outcome this build does not
//! know is not trusted ([`CachedScored::decodes`]). The cache file, its runs and the pages it
//! vouches for are the pipeline's (`pipeline/cache.rs`).

use crate::report::{SampleKey, Scored};
use crate::taxonomy::{Label, Outcome, Stage};
use serde::{Deserialize, Serialize};
use sha2::Digest;

/// A feedback sample's style, history, and parent run and sample folder.
pub type CachedFeedback = (
    crate::runs::FeedbackStyle,
    crate::runs::History,
    Option<(String, String)>,
);

/// [`Scored`] without its key (the key is where the sample sits). Short field names: the cache
/// holds one per sample.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CachedScored {
    /// `pass`, `error` or the label.
    #[serde(rename = "o")]
    pub outcome: String,
    #[serde(rename = "st")]
    pub stage: Option<Stage>,
    #[serde(rename = "d")]
    pub detail: String,
    /// F1 counts: name (true positives, emitted, gold), then name and parameters.
    #[serde(rename = "f")]
    pub metrics: [u64; 6],
    #[serde(rename = "h")]
    pub hitec: Option<crate::hitec::HitecError>,
    #[serde(rename = "vm")]
    pub value_match: Option<bool>,
    #[serde(rename = "xp")]
    pub extra_prose: bool,
    #[serde(rename = "tc")]
    pub task_changed: bool,
    #[serde(rename = "tf")]
    pub ttfb_ms: Option<f64>,
    #[serde(rename = "tt")]
    pub total_ms: Option<f64>,
    #[serde(rename = "ct")]
    pub completion_tokens: Option<u64>,
    #[serde(rename = "pt")]
    pub prompt_tokens: Option<u64>,
    #[serde(rename = "hs")]
    pub refused_status: Option<u16>,
    #[serde(rename = "r")]
    pub response: u128,
    /// A feedback sample's style, history, and parent run and sample (SPEC §11).
    #[serde(rename = "fb")]
    pub feedback: Option<CachedFeedback>,
    /// The follow-up is a review round's (SPEC §11).
    #[serde(rename = "rv")]
    pub review: bool,
    /// The outcome after the label's mechanical repair, named as `outcome` is.
    #[serde(rename = "rp")]
    pub repaired: Option<String>,
    /// A router could tell the sample failed (SPEC §11).
    #[serde(rename = "vi")]
    pub visible: bool,
}

/// An outcome by the name the cache keeps: `pass`, `error` or a label.
fn outcome_of(name: &str) -> Option<Outcome> {
    Some(match name {
        "pass" => Outcome::Pass,
        "error" => Outcome::Error,
        l => Outcome::Fail(Label::parse(l)?),
    })
}

impl CachedScored {
    /// Whether it names outcomes this build knows.
    pub fn decodes(&self) -> bool {
        outcome_of(&self.outcome).is_some()
            && self
                .repaired
                .as_deref()
                .is_none_or(|r| outcome_of(r).is_some())
    }

    pub fn of(s: &Scored) -> CachedScored {
        CachedScored {
            outcome: s.outcome.name().to_string(),
            stage: s.stage,
            detail: s.detail.clone(),
            metrics: {
                let (a, b) = (&s.metrics.name, &s.metrics.name_and_parameters);
                [
                    a.true_positives,
                    a.emitted,
                    a.gold,
                    b.true_positives,
                    b.emitted,
                    b.gold,
                ]
            },
            hitec: s.hitec,
            value_match: s.value_match,
            extra_prose: s.extra_prose,
            task_changed: s.task_changed,
            ttfb_ms: s.ttfb_ms,
            total_ms: s.total_ms,
            completion_tokens: s.completion_tokens,
            prompt_tokens: s.prompt_tokens,
            refused_status: s.refused_status,
            response: s.response,
            feedback: s.feedback.as_ref().map(|f| {
                (
                    f.style,
                    f.history,
                    f.parent.as_ref().map(|p| (p.run.clone(), p.sample.clone())),
                )
            }),
            review: s.feedback.as_ref().is_some_and(|f| f.review),
            repaired: s.repaired.map(|o| o.name().to_string()),
            visible: s.visible,
        }
    }

    /// Back to a [`Scored`]; `None` when the outcome is not one this build knows.
    pub fn into_scored(self, key: SampleKey) -> Option<Scored> {
        let outcome = outcome_of(&self.outcome)?;
        let repaired = match &self.repaired {
            Some(r) => Some(outcome_of(r)?),
            None => None,
        };
        Some(Scored {
            key,
            outcome,
            stage: self.stage,
            detail: self.detail,
            metrics: {
                let f = |i: usize| crate::hitec::F1 {
                    true_positives: self.metrics[i],
                    emitted: self.metrics[i + 1],
                    gold: self.metrics[i + 2],
                };
                crate::hitec::Metrics {
                    name: f(0),
                    name_and_parameters: f(3),
                }
            },
            hitec: self.hitec,
            value_match: self.value_match,
            extra_prose: self.extra_prose,
            task_changed: self.task_changed,
            ttfb_ms: self.ttfb_ms,
            total_ms: self.total_ms,
            completion_tokens: self.completion_tokens,
            prompt_tokens: self.prompt_tokens,
            refused_status: self.refused_status,
            response: self.response,
            feedback: self.feedback.map(|(style, history, parent)| {
                Box::new(crate::report::FeedbackOf {
                    style,
                    history,
                    review: self.review,
                    parent: parent
                        .map(|(run, sample)| crate::transcript::ParentRef { run, sample }),
                })
            }),
            repaired,
            visible: self.visible,
        })
    }
}

/// A sha256 held as its 32 bytes (a cache holds one per sample).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sha256(pub [u8; 32]);

impl Serialize for Sha256 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Sha256 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <[u8; 32]>::deserialize(d).map(Sha256)
    }
}

/// sha256 over a sample's file hashes, in order: the transcript's identity.
pub fn transcript_sha256(files: &[(String, String)]) -> Sha256 {
    let mut h = sha2::Sha256::new();
    for (name, sha) in files {
        h.update(name.as_bytes());
        h.update(b" ");
        h.update(sha.as_bytes());
        h.update(b"\n");
    }
    Sha256(h.finalize().into())
}
