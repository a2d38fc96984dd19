//! The failure taxonomy: the project's stable vocabulary (SPEC §2), imported by every stage.
//!
//! Labels are aggregated, published and used for routing; their string forms are part of the
//! data exports and the site's URLs, so they never change.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One of the eleven failure labels. Declaration order is the order used everywhere a list of
/// labels is shown (matrix columns, charts, CSV), so it is part of the output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    NoCall,
    WrongTool,
    MalformedJson,
    SchemaViolation,
    HallucinatedParam,
    MissingRequired,
    TypeCoercion,
    EscapingError,
    Truncation,
    ParallelCollapse,
    SpuriousCall,
}

/// What a caller can reasonably do about a failure (SPEC §2, "retry semantics").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Retry {
    /// A sampling artifact: asking the same model again is reasonable.
    Reroll,
    /// A capability gap: send the request to another model.
    Fallback,
    /// Mechanically fixable by the caller.
    Repair,
}

impl Label {
    pub const ALL: [Label; 11] = [
        Label::NoCall,
        Label::WrongTool,
        Label::MalformedJson,
        Label::SchemaViolation,
        Label::HallucinatedParam,
        Label::MissingRequired,
        Label::TypeCoercion,
        Label::EscapingError,
        Label::Truncation,
        Label::ParallelCollapse,
        Label::SpuriousCall,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Label::NoCall => "no_call",
            Label::WrongTool => "wrong_tool",
            Label::MalformedJson => "malformed_json",
            Label::SchemaViolation => "schema_violation",
            Label::HallucinatedParam => "hallucinated_param",
            Label::MissingRequired => "missing_required",
            Label::TypeCoercion => "type_coercion",
            Label::EscapingError => "escaping_error",
            Label::Truncation => "truncation",
            Label::ParallelCollapse => "parallel_collapse",
            Label::SpuriousCall => "spurious_call",
        }
    }

    pub fn parse(s: &str) -> Option<Label> {
        Label::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// The default retry semantics published next to each label.
    pub fn retry(self) -> Retry {
        match self {
            Label::MalformedJson
            | Label::SchemaViolation
            | Label::EscapingError
            | Label::Truncation => Retry::Reroll,
            Label::HallucinatedParam | Label::TypeCoercion => Retry::Repair,
            Label::NoCall
            | Label::WrongTool
            | Label::MissingRequired
            | Label::ParallelCollapse
            | Label::SpuriousCall => Retry::Fallback,
        }
    }

    /// What happened on the wire, in one sentence (the taxonomy table of SPEC §2).
    pub fn meaning(self) -> &'static str {
        match self {
            Label::NoCall => {
                "Answered in prose and called nothing (or wrote the call as text the server did not extract)."
            }
            Label::WrongTool => "Called a tool, but the wrong one, or one that was not offered.",
            Label::MalformedJson => "The arguments failed to parse as JSON at all.",
            Label::SchemaViolation => {
                "The arguments parsed but failed the JSON Schema (enum, pattern, range, non-coercible type…)."
            }
            Label::HallucinatedParam => "Passed an argument the schema does not define.",
            Label::MissingRequired => "A required argument is absent.",
            Label::TypeCoercion => {
                "The right field with the wrong type, losslessly: \"42\" for 42, \"true\" for true, a JSON-encoded string for an object."
            }
            Label::EscapingError => "Quoting or escaping mangled the payload.",
            Label::Truncation => "The call was cut off mid-emission.",
            Label::ParallelCollapse => {
                "N requested calls were emitted as fewer (fused or dropped)."
            }
            Label::SpuriousCall => {
                "Called a tool when none was needed, or made more calls than asked."
            }
        }
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Retry {
    pub fn as_str(self) -> &'static str {
        match self {
            Retry::Reroll => "reroll",
            Retry::Fallback => "fallback",
            Retry::Repair => "repair",
        }
    }
}

impl fmt::Display for Retry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The stage of the decision procedure (SPEC §2.1) that decided an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Transport,
    Parse,
    Structure,
    Schema,
    Semantic,
}

impl Stage {
    pub const ALL: [Stage; 5] = [
        Stage::Transport,
        Stage::Parse,
        Stage::Structure,
        Stage::Schema,
        Stage::Semantic,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Transport => "transport",
            Stage::Parse => "parse",
            Stage::Structure => "structure",
            Stage::Schema => "schema",
            Stage::Semantic => "semantic",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of one sample: it passed, it failed with exactly one label, or the HTTP exchange
/// produced no complete model response (`error`: not the model's failure, outside every rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    Pass,
    Fail(Label),
    Error,
}

impl Outcome {
    /// `"pass"`, `"fail"` or `"error"`: the `outcome` column of the exports.
    pub fn kind(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail(_) => "fail",
            Outcome::Error => "error",
        }
    }

    pub fn label(self) -> Option<Label> {
        match self {
            Outcome::Fail(l) => Some(l),
            _ => None,
        }
    }

    /// The short name shown on dots and in legends: `pass`, `error` or the label.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Error => "error",
            Outcome::Fail(l) => l.as_str(),
        }
    }

    pub fn is_scored(self) -> bool {
        !matches!(self, Outcome::Error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_names_round_trip_and_match_serde() {
        for l in Label::ALL {
            assert_eq!(Label::parse(l.as_str()), Some(l));
            let json = serde_json::to_string(&l).unwrap();
            assert_eq!(json, format!("\"{}\"", l.as_str()));
        }
        assert_eq!(Label::parse("pass"), None);
    }

    #[test]
    fn retry_defaults_follow_the_spec_table() {
        let reroll: Vec<_> = Label::ALL
            .iter()
            .filter(|l| l.retry() == Retry::Reroll)
            .map(|l| l.as_str())
            .collect();
        assert_eq!(
            reroll,
            [
                "malformed_json",
                "schema_violation",
                "escaping_error",
                "truncation"
            ]
        );
        let repair: Vec<_> = Label::ALL
            .iter()
            .filter(|l| l.retry() == Retry::Repair)
            .map(|l| l.as_str())
            .collect();
        assert_eq!(repair, ["hallucinated_param", "type_coercion"]);
    }
}
