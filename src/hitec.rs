//! The HiTEC view (SPEC §2.3): callcheck's labels read as the eight global error types of the
//! HiTEC paper ("Enhancing Tool Learning in LLMs with Hierarchical Error Checklists"), and its
//! two metrics, F1 Name and F1 Name + Parameter, computed from emitted calls against gold calls.

use crate::json::values_equal;
use crate::score::Verdict;
use crate::score::extract::Source;
use crate::task::Task;
use crate::taxonomy::{Label, Outcome};
use serde::Serialize;
use serde_json::Value;

/// HiTEC's global error types, numbered as in the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum HitecError {
    WrongToolName = 0,
    MissingRequiredParameter = 1,
    InvalidParameterType = 2,
    EmptyParameterValue = 3,
    RedundantParameter = 4,
    InvalidOutputFormat = 5,
    RedundantInformation = 6,
    WrongNumberOfTools = 7,
}

impl HitecError {
    pub const ALL: [HitecError; 8] = [
        HitecError::WrongToolName,
        HitecError::MissingRequiredParameter,
        HitecError::InvalidParameterType,
        HitecError::EmptyParameterValue,
        HitecError::RedundantParameter,
        HitecError::InvalidOutputFormat,
        HitecError::RedundantInformation,
        HitecError::WrongNumberOfTools,
    ];

    pub fn number(self) -> u8 {
        self as u8
    }

    pub fn name(self) -> &'static str {
        match self {
            HitecError::WrongToolName => "wrong tool name",
            HitecError::MissingRequiredParameter => "missing required parameter",
            HitecError::InvalidParameterType => "invalid parameter type",
            HitecError::EmptyParameterValue => "empty parameter value",
            HitecError::RedundantParameter => "redundant parameter",
            HitecError::InvalidOutputFormat => "invalid output format",
            HitecError::RedundantInformation => "redundant information",
            HitecError::WrongNumberOfTools => "wrong number of tools",
        }
    }

    /// The callcheck labels that map to this error, as the crosswalk table states it.
    pub fn labels(self) -> &'static str {
        match self {
            HitecError::WrongToolName => "wrong_tool",
            HitecError::MissingRequiredParameter => "missing_required",
            HitecError::InvalidParameterType => "type_coercion, schema_violation with a type error",
            HitecError::EmptyParameterValue => {
                "schema_violation or a semantic failure on an empty value"
            }
            HitecError::RedundantParameter => "hallucinated_param",
            HitecError::InvalidOutputFormat => "malformed_json, escaping_error, truncation",
            HitecError::RedundantInformation => "not a failure here: calls with extra prose",
            HitecError::WrongNumberOfTools => "parallel_collapse, spurious_call",
        }
    }
}

/// The HiTEC error a verdict maps to, if any. An empty value takes precedence over the label's
/// default mapping, as the paper counts it apart. `no_call` and schema violations that are
/// neither type errors nor empty values (enum, pattern, range) have no HiTEC counterpart.
pub fn crosswalk(v: &Verdict) -> Option<HitecError> {
    let label = v.outcome.label()?;
    if v.empty_value
        && (label == Label::SchemaViolation || v.stage == Some(crate::taxonomy::Stage::Semantic))
    {
        return Some(HitecError::EmptyParameterValue);
    }
    Some(match label {
        Label::WrongTool => HitecError::WrongToolName,
        Label::MissingRequired => HitecError::MissingRequiredParameter,
        Label::TypeCoercion => HitecError::InvalidParameterType,
        Label::SchemaViolation if v.schema_keyword.as_deref() == Some("type") => {
            HitecError::InvalidParameterType
        }
        Label::HallucinatedParam => HitecError::RedundantParameter,
        Label::MalformedJson | Label::EscapingError | Label::Truncation => {
            HitecError::InvalidOutputFormat
        }
        Label::ParallelCollapse | Label::SpuriousCall => HitecError::WrongNumberOfTools,
        _ => return None,
    })
}

/// Precision, recall and F1 of emitted calls against gold calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct F1 {
    pub true_positives: u64,
    pub emitted: u64,
    pub gold: u64,
}

impl F1 {
    pub fn precision(&self) -> Option<f64> {
        (self.emitted > 0).then(|| self.true_positives as f64 / self.emitted as f64)
    }
    pub fn recall(&self) -> Option<f64> {
        (self.gold > 0).then(|| self.true_positives as f64 / self.gold as f64)
    }
    pub fn f1(&self) -> Option<f64> {
        let (p, r) = (
            self.precision().unwrap_or(0.0),
            self.recall().unwrap_or(0.0),
        );
        if self.emitted == 0 && self.gold == 0 {
            return None;
        }
        Some(if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        })
    }
    fn add(&mut self, o: F1) {
        self.true_positives += o.true_positives;
        self.emitted += o.emitted;
        self.gold += o.gold;
    }
}

/// F1 Name and F1 Name + Parameter, micro-averaged over samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Metrics {
    pub name: F1,
    pub name_and_parameters: F1,
}

/// The counts for one sample. Only calls a client would execute count as emitted (structured
/// `tool_calls`); calls left in content are a conformance failure and count as none. Error
/// samples and structured-output tasks count nothing.
pub fn sample_metrics(task: &Task, v: &Verdict) -> Metrics {
    if v.outcome == Outcome::Error || task.is_structured_output() {
        return Metrics::default();
    }
    let emitted: Vec<(&str, Option<&Value>)> = v
        .calls
        .iter()
        .filter(|c| c.source == Source::ToolCalls)
        .map(|c| (c.name.as_deref().unwrap_or(""), c.arguments.as_ref()))
        .collect();
    let gold: Vec<(&str, &Value)> = task
        .expected_calls()
        .iter()
        .map(|c| (c.tool.as_str(), &c.gold))
        .collect();
    let count = |exact: bool| {
        let mut used = vec![false; gold.len()];
        let mut tp = 0;
        for (name, args) in &emitted {
            let hit = gold.iter().enumerate().position(|(i, (g, ga))| {
                !used[i] && g == name && (!exact || args.is_some_and(|a| values_equal(a, ga)))
            });
            if let Some(i) = hit {
                used[i] = true;
                tp += 1;
            }
        }
        F1 {
            true_positives: tp,
            emitted: emitted.len() as u64,
            gold: gold.len() as u64,
        }
    };
    Metrics {
        name: count(false),
        name_and_parameters: count(true),
    }
}

/// Sums sample metrics.
pub fn total<'a>(items: impl IntoIterator<Item = &'a Metrics>) -> Metrics {
    let mut m = Metrics::default();
    for x in items {
        m.name.add(x.name);
        m.name_and_parameters.add(x.name_and_parameters);
    }
    m
}
