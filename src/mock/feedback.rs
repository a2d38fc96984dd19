//! How the mock's scripted models answer a follow-up of the feedback round (SPEC §11).
//!
//! A follow-up is a request whose messages are a task's request followed by an assistant turn
//! and its feedback (`tool` or `user` messages), while the whole request is no task's. Its
//! style comes from collect's `x-callcheck-feedback: <style>/<label>` header, or else from the
//! feedback's wording ([`crate::follow_up::style_of`]); the parent's label from the header only.
//!
//! A model with a `feedback` setting fixes its answer (the task's gold reply) with probability
//! [`FeedbackBehaviour::fix_probability`] of (style, label), and otherwise repeats its mistake:
//! another answer with the parent's label from the corrupter, or, when none applies or the
//! label is unknown, the assistant message it was shown, sent back as it was. The draw depends
//! on the mock's seed, the model, the task, the parent's sample number and the style only, so
//! a collection under any concurrency, run ids or retries gets the same answers. Transport
//! faults are drawn as for any sample, for a sample number derived from the same identity. A
//! model without a `feedback` setting answers a follow-up as it answers a first request.
//!
//! Configuring a model that fixes exactly the labels it is told to, with a set probability
//! (what part of the routing tests need):
//!
//! ```toml
//! [[model]]
//! name = "fixer"
//! labels = { type_coercion = 0.3, wrong_tool = 0.3 }
//! [model.feedback]
//! fix = 0.0                           # every other label: repeated
//! labels = { type_coercion = 0.8 }    # fixed 80 % of the time, whatever the style
//! [model.feedback.styles.retry]
//! labels = { type_coercion = 0.5 }    # ...but 50 % under the retry style
//! ```

use super::config::MockModel;
use crate::corrupt::{corruptions, gold};
use crate::follow_up::read_follow_up;
use crate::reply::{Reply, ReplyCall};
use crate::runs::FeedbackStyle;
use crate::task::Task;
use crate::taxonomy::Label;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A model's character under feedback: the probability that its follow-up is right.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct FeedbackBehaviour {
    /// When nothing more specific is set.
    #[serde(default)]
    pub fix: f64,
    /// Per label of the failure fed back.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, f64>,
    /// Per style (`error`, `checklist`, `retry`): settings that win over the ones above.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub styles: BTreeMap<String, StyleBehaviour>,
}

/// The settings of one style.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct StyleBehaviour {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, f64>,
}

impl FeedbackBehaviour {
    /// P(fixed | style, label), the most specific setting first: the style's label, the
    /// style's `fix`, the label, `fix`. An unknown style or label takes the general settings.
    pub fn fix_probability(&self, style: Option<FeedbackStyle>, label: Option<Label>) -> f64 {
        let style = style.and_then(|s| self.styles.get(s.as_str()));
        let label = label.map(Label::as_str);
        let by_label = |m: &BTreeMap<String, f64>| label.and_then(|l| m.get(l).copied());
        style
            .and_then(|s| by_label(&s.labels).or(s.fix))
            .or_else(|| by_label(&self.labels))
            .unwrap_or(self.fix)
    }

    /// Checks names and probabilities; the message names the key.
    pub fn check(&self) -> Result<(), String> {
        let prob = |key: String, p: f64| {
            if (0.0..=1.0).contains(&p) {
                Ok(())
            } else {
                Err(format!("key `{key}`: {p} is not a probability"))
            }
        };
        let labels = |prefix: &str, m: &BTreeMap<String, f64>| {
            for (l, p) in m {
                if Label::parse(l).is_none() {
                    return Err(format!("key `{prefix}labels.{l}`: not a label"));
                }
                prob(format!("{prefix}labels.{l}"), *p)?;
            }
            Ok(())
        };
        prob("feedback.fix".into(), self.fix)?;
        labels("feedback.", &self.labels)?;
        for (s, b) in &self.styles {
            if !FeedbackStyle::ALL.iter().any(|f| f.as_str() == s) {
                return Err(format!(
                    "key `feedback.styles.{s}`: not a style (error, checklist, retry)"
                ));
            }
            if let Some(f) = b.fix {
                prob(format!("feedback.styles.{s}.fix"), f)?;
            }
            labels(&format!("feedback.styles.{s}."), &b.labels)?;
        }
        Ok(())
    }
}

/// A model's character under review (HiTEC-ICL's second round, `collect --review`): how
/// often it keeps a correct call, and how often it fixes a failed one.
///
/// ```toml
/// [model.review]
/// keep = 0.9                          # a passing answer stays right 90 % of the time
/// fix = 0.3                           # a failed one is fixed 30 % of the time...
/// labels = { type_coercion = 0.8 }    # ...but 80 % after a type_coercion
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReviewBehaviour {
    /// P(the final answer passes | the first answer passed). The rest of the time the review
    /// breaks it ([`BREAKS`]).
    #[serde(default = "always")]
    pub keep: f64,
    /// P(the final answer passes | the first answer failed), when nothing more specific.
    #[serde(default)]
    pub fix: f64,
    /// Per label of the first answer's failure.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, f64>,
}

fn always() -> f64 {
    1.0
}

/// How a review breaks a correct answer, in order of preference: the first label with a
/// corruption for the task (a call task always has `no_call`, a no-call task `spurious_call`),
/// so that P(broken | passed) is exactly `1 - keep` on every task.
pub const BREAKS: [Label; 4] = [
    Label::HallucinatedParam,
    Label::TypeCoercion,
    Label::NoCall,
    Label::SpuriousCall,
];

impl ReviewBehaviour {
    /// P(the final answer passes | the first answer's label; `None`: it passed).
    pub fn pass_probability(&self, label: Option<Label>) -> f64 {
        match label {
            None => self.keep,
            Some(l) => self.labels.get(l.as_str()).copied().unwrap_or(self.fix),
        }
    }

    /// Checks names and probabilities; the message names the key.
    pub fn check(&self) -> Result<(), String> {
        let prob = |key: &str, p: f64| {
            if (0.0..=1.0).contains(&p) {
                Ok(())
            } else {
                Err(format!("key `{key}`: {p} is not a probability"))
            }
        };
        prob("review.keep", self.keep)?;
        prob("review.fix", self.fix)?;
        for (l, p) in &self.labels {
            if Label::parse(l).is_none() {
                return Err(format!("key `review.labels.{l}`: not a label"));
            }
            prob(&format!("review.labels.{l}"), *p)?;
        }
        Ok(())
    }
}

/// A request read as a follow-up.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowUp {
    /// The request the parent was: the messages before the assistant turn.
    pub original: Value,
    /// The assistant turn fed back.
    pub assistant: Value,
    pub style: Option<FeedbackStyle>,
    /// The parent's label (from the header; `None` when it passed or is unknown).
    pub label: Option<Label>,
    /// A review request (`review/<label>` header, or its wording).
    pub review: bool,
    /// The header says the parent passed (`review/pass`).
    pub passed: bool,
}

impl FollowUp {
    /// The round's name in seeds: the style, or `review`.
    pub fn ask(&self) -> &'static str {
        if self.review {
            "review"
        } else {
            self.style.map_or("", |s| s.as_str())
        }
    }
}

/// The follow-up in `request`, when it is shaped like one (the caller checks that the whole
/// request is no task's and its original is one). `header` is collect's feedback header.
pub fn read(request: &Value, header: Option<&str>) -> Option<FollowUp> {
    let (n, worded) = read_follow_up(request)?;
    let messages = request.get("messages")?.as_array()?;
    let mut original = request.clone();
    original["messages"] = Value::Array(messages[..n].to_vec());
    let split = header.and_then(|h| h.split_once('/'));
    let (style, label) = match split {
        Some((s, l)) => (
            FeedbackStyle::ALL.into_iter().find(|f| f.as_str() == s),
            Label::parse(l),
        ),
        None => (None, None),
    };
    let review = split.map_or_else(
        || crate::follow_up::is_review(request),
        |(s, _)| s == "review",
    );
    Some(FollowUp {
        original,
        assistant: messages[n].clone(),
        style: if review { None } else { style.or(worded) },
        label,
        review,
        passed: review && split.is_some_and(|(_, l)| l == "pass"),
    })
}

/// The sample number a follow-up's transport faults are drawn for: derived from the parent's
/// number and the style, so a follow-up's luck on the wire is its own, not its parent's.
pub fn fault_sample(seed: u64, parent_sample: u64, f: &FollowUp) -> u64 {
    super::respond::derive_seed(
        seed,
        &["feedback-sample", &parent_sample.to_string(), f.ask()],
    )
}

/// The reply of a model with a `review` setting to one review request, and what it is for the
/// log (`review kept`, `review broke <corruption>`, `review fixed`, `review repeated`). The
/// draw depends on the mock's seed, the model, the task and the parent's sample number only.
pub fn review_answer(
    seed: u64,
    model: &MockModel,
    behaviour: &ReviewBehaviour,
    task: &Task,
    parent_sample: u64,
    f: &FollowUp,
    max_tokens: u64,
) -> (Reply, String) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(super::respond::derive_seed(
        seed,
        &["review", &model.name, &task.id, &parent_sample.to_string()],
    ));
    let parent = if f.passed { None } else { f.label };
    let right = rng.random::<f64>() < behaviour.pass_probability(parent);
    match (f.passed, right) {
        (true, true) => (gold(task), "review kept".into()),
        (false, true) => (gold(task), "review fixed".into()),
        (true, false) => {
            for label in BREAKS {
                if let Ok(list) = corruptions(task, label, max_tokens)
                    && !list.is_empty()
                {
                    let c = &list[rng.random_range(0..list.len())];
                    return (c.reply.clone(), format!("review broke {}", c.name));
                }
            }
            (echo(&f.assistant), "review echoed".into())
        }
        (false, false) => (echo(&f.assistant), "review repeated".into()),
    }
}

/// The reply of a model with a `feedback` setting to one follow-up, and what it is for the
/// log (`feedback fixed`, `feedback repeated <corruption>`, `feedback echoed`).
pub fn answer(
    seed: u64,
    model: &MockModel,
    behaviour: &FeedbackBehaviour,
    task: &Task,
    parent_sample: u64,
    f: &FollowUp,
    max_tokens: u64,
) -> (Reply, String) {
    let style = f.ask();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(super::respond::derive_seed(
        seed,
        &[
            "feedback",
            &model.name,
            &task.id,
            &parent_sample.to_string(),
            style,
        ],
    ));
    let p = behaviour.fix_probability(f.style, f.label);
    if rng.random::<f64>() < p {
        return (gold(task), "feedback fixed".into());
    }
    if let Some(label) = f.label
        && let Ok(list) = corruptions(task, label, max_tokens)
        && !list.is_empty()
    {
        let c = &list[rng.random_range(0..list.len())];
        return (c.reply.clone(), format!("feedback repeated {}", c.name));
    }
    (echo(&f.assistant), "feedback echoed".into())
}

/// The assistant message shown, answered again as it was.
fn echo(assistant: &Value) -> Reply {
    let calls: Vec<ReplyCall> = assistant
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|c| ReplyCall {
                    name: c
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    arguments: c
                        .pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    let content = assistant
        .get("content")
        .and_then(Value::as_str)
        .map(str::to_string);
    if calls.is_empty() {
        return Reply::text(content.unwrap_or_default());
    }
    let mut r = Reply::calls(calls);
    r.content = content.filter(|c| !c.is_empty());
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header names style and label; without it the style is read from the wording and
    /// the label is unknown.
    #[test]
    fn a_follow_up_is_read_with_or_without_the_header() {
        use serde_json::json;
        let request = json!({"model": "m", "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "It is sunny."},
            {"role": "user", "content": crate::follow_up::RETRY},
        ], "tools": []});
        let f = read(&request, Some("checklist/no_call")).unwrap();
        assert_eq!(
            f.original,
            json!({"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": []})
        );
        assert_eq!(
            f.assistant,
            json!({"role": "assistant", "content": "It is sunny."})
        );
        assert_eq!(f.style, Some(FeedbackStyle::Checklist));
        assert_eq!(f.label, Some(Label::NoCall));
        assert!(!f.review);
        let f = read(&request, None).unwrap();
        assert_eq!((f.style, f.label), (Some(FeedbackStyle::Retry), None));
        assert_eq!(echo(&f.assistant), Reply::text("It is sunny."));
        let first = json!({"messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(read(&first, None), None);
    }

    #[test]
    fn the_most_specific_setting_wins() {
        let b: FeedbackBehaviour = toml::from_str(
            r#"
fix = 0.1
labels = { type_coercion = 0.8 }
[styles.retry]
labels = { type_coercion = 0.5 }
[styles.checklist]
fix = 0.3
"#,
        )
        .unwrap();
        b.check().unwrap();
        let p = |s, l| b.fix_probability(s, l);
        use FeedbackStyle::*;
        assert_eq!(p(Some(Retry), Some(Label::TypeCoercion)), 0.5);
        assert_eq!(p(Some(Retry), Some(Label::WrongTool)), 0.1);
        assert_eq!(p(Some(Error), Some(Label::TypeCoercion)), 0.8);
        assert_eq!(p(Some(Checklist), Some(Label::TypeCoercion)), 0.3);
        assert_eq!(p(None, None), 0.1);
        for (text, needle) in [
            ("fix = 2.0", "feedback.fix"),
            ("labels = { nope = 0.1 }", "feedback.labels.nope"),
            ("[styles.loud]\nfix = 0.1", "feedback.styles.loud"),
            (
                "[styles.retry]\nlabels = { no_call = -1.0 }",
                "feedback.styles.retry.labels.no_call",
            ),
        ] {
            let b: FeedbackBehaviour = toml::from_str(text).unwrap();
            let e = b.check().unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
    }
}
