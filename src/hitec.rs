//! The HiTEC view (SPEC §2.3): callcheck's labels read as the eight global error types of the
//! HiTEC paper ("Enhancing Tool Learning in LLMs with Hierarchical Error Checklists"), and its
//! two metrics, F1 Name and F1 Name + Parameter, computed from emitted calls against gold calls.

use crate::score::Verdict;

/// The name a `[[model]]` row gives [`GLOBAL_CHECKLIST`] (`system_prompt = "hitec-global"`).
pub const GLOBAL_PROMPT_NAME: &str = "hitec-global";

/// HiTEC-ICL's global error checklist as a system prompt: the paper's eight global error
/// types, each turned into the check that avoids it, for every request whatever its tools. A
/// row with it and a review round (`collect --review checklist`) is the paper's full method;
/// with either alone, half of it.
pub const GLOBAL_CHECKLIST: &str = "\
When you call tools, check every call against these eight common errors before you answer:
0. Wrong tool name: call only a tool that was offered, by its exact name, and the one whose purpose matches the request.
1. Missing required parameter: give every parameter the tool marks as required.
2. Invalid parameter type: give each value the type its schema declares (numbers and booleans unquoted, arrays and objects as JSON, not as strings).
3. Empty parameter value: never leave a value empty (\"\", [], {}) when the request gives it.
4. Redundant parameter: use only the parameters the tool declares.
5. Invalid output format: make the call through the tool-call interface, its arguments one valid JSON object with standard escaping.
6. Redundant information: put nothing in a call but its name and arguments.
7. Wrong number of tools: make one call per action the request asks for, all of them and no more; call no tool when none is needed.";

/// The built-in system prompt a row names with `system_prompt`, or `None` for an unknown name.
pub fn system_prompt(name: &str) -> Option<&'static str> {
    (name == GLOBAL_PROMPT_NAME).then_some(GLOBAL_CHECKLIST)
}
use crate::score::extract::Source;
use crate::task::Task;
use crate::task::accept::call_accepts;
use crate::taxonomy::{Label, Outcome};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// HiTEC's global error types, numbered as in the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub name: F1,
    pub name_and_parameters: F1,
}

/// The counts for one sample. Only calls a client would execute count as emitted (structured
/// `tool_calls`); calls left in content are a conformance failure and count as none. A call's
/// parameters are right when its expected call accepts them: any value its `accept` lists, by
/// that list's rule (BFCL's for imported tasks), else the gold arguments exactly. Error
/// samples, structured-output tasks and tasks whose calls are only examples (`any_call`: no
/// gold call to compare with) count nothing.
pub fn sample_metrics(task: &Task, v: &Verdict) -> Metrics {
    if v.outcome == Outcome::Error || task.is_structured_output() || task.any_call {
        return Metrics::default();
    }
    let emitted: Vec<(&str, Option<&Value>)> = v
        .calls
        .iter()
        .filter(|c| c.source == Source::ToolCalls)
        .map(|c| (c.name.as_deref().unwrap_or(""), c.arguments.as_ref()))
        .collect();
    let gold = task.expected_calls();
    let count = |exact: bool| {
        let mut used = vec![false; gold.len()];
        let mut tp = 0;
        for (name, args) in &emitted {
            let hit = gold.iter().enumerate().position(|(i, g)| {
                !used[i] && g.tool == *name && (!exact || args.is_some_and(|a| call_accepts(g, a)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::Call;
    use crate::taxonomy::Stage;
    use serde_json::json;

    fn verdict(outcome: Outcome, stage: Option<Stage>) -> Verdict {
        Verdict::new(outcome, stage, "d".into())
    }

    fn failed(label: Label, stage: Stage) -> Verdict {
        verdict(Outcome::Fail(label), Some(stage))
    }

    fn schema_failure(label: Label, keyword: &str, empty: bool) -> Verdict {
        let mut v = failed(label, Stage::Schema);
        v.schema_keyword = Some(keyword.into());
        v.empty_value = empty;
        v
    }

    #[test]
    fn every_label_maps_as_the_crosswalk_table_says() {
        use HitecError::*;
        let cases = [
            (
                failed(Label::WrongTool, Stage::Structure),
                Some(WrongToolName),
            ),
            (
                schema_failure(Label::MissingRequired, "required", false),
                Some(MissingRequiredParameter),
            ),
            (
                schema_failure(Label::TypeCoercion, "type", false),
                Some(InvalidParameterType),
            ),
            (
                schema_failure(Label::HallucinatedParam, "properties", false),
                Some(RedundantParameter),
            ),
            (
                failed(Label::MalformedJson, Stage::Parse),
                Some(InvalidOutputFormat),
            ),
            (
                failed(Label::EscapingError, Stage::Parse),
                Some(InvalidOutputFormat),
            ),
            (
                failed(Label::Truncation, Stage::Parse),
                Some(InvalidOutputFormat),
            ),
            (
                failed(Label::ParallelCollapse, Stage::Structure),
                Some(WrongNumberOfTools),
            ),
            (
                failed(Label::SpuriousCall, Stage::Structure),
                Some(WrongNumberOfTools),
            ),
            // No HiTEC counterpart: answering in prose.
            (failed(Label::NoCall, Stage::Structure), None),
        ];
        for (v, want) in cases {
            assert_eq!(crosswalk(&v), want, "{:?}", v.outcome);
        }
    }

    #[test]
    fn schema_violation_maps_by_keyword_and_empty_value() {
        // A type error is HiTEC 2; enum, pattern, range have no counterpart.
        assert_eq!(
            crosswalk(&schema_failure(Label::SchemaViolation, "type", false)),
            Some(HitecError::InvalidParameterType)
        );
        for kw in ["enum", "pattern", "maximum", "minLength"] {
            assert_eq!(
                crosswalk(&schema_failure(Label::SchemaViolation, kw, false)),
                None,
                "{kw}"
            );
        }
        // An empty value is HiTEC 3, even when the keyword is `type` ([] for a string).
        assert_eq!(
            crosswalk(&schema_failure(Label::SchemaViolation, "minLength", true)),
            Some(HitecError::EmptyParameterValue)
        );
        assert_eq!(
            crosswalk(&schema_failure(Label::SchemaViolation, "type", true)),
            Some(HitecError::EmptyParameterValue)
        );
        // A semantic failure on an empty value, whatever label its predicate declares.
        let mut v = failed(Label::EscapingError, Stage::Semantic);
        v.empty_value = true;
        assert_eq!(crosswalk(&v), Some(HitecError::EmptyParameterValue));
        v.empty_value = false;
        assert_eq!(crosswalk(&v), Some(HitecError::InvalidOutputFormat));
        // Outside schema_violation and the semantic stage, an empty value changes nothing.
        let mut v = schema_failure(Label::MissingRequired, "required", true);
        v.empty_value = true;
        assert_eq!(crosswalk(&v), Some(HitecError::MissingRequiredParameter));
    }

    #[test]
    fn passes_errors_and_extra_prose_are_not_hitec_errors() {
        let mut pass = verdict(Outcome::Pass, None);
        pass.extra_prose = true;
        assert_eq!(crosswalk(&pass), None);
        assert_eq!(
            crosswalk(&verdict(Outcome::Error, Some(Stage::Transport))),
            None
        );
        let numbers: Vec<u8> = HitecError::ALL.iter().map(|e| e.number()).collect();
        assert_eq!(numbers, [0, 1, 2, 3, 4, 5, 6, 7]);
    }

    fn task(json: serde_json::Value) -> Task {
        crate::task::parse_task(std::path::Path::new("t.json"), json.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn call(index: usize, source: Source, name: &str, args: serde_json::Value) -> Call {
        Call {
            index,
            source,
            name: Some(name.into()),
            arguments_raw: Some(args.to_string()),
            arguments: Some(args),
            matched: None,
        }
    }

    fn weather_tools() -> serde_json::Value {
        json!([
            {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}
        ])
    }

    #[test]
    fn f1_counts_executable_calls_against_gold_calls() {
        let parallel = task(json!({
            "id": "p", "title": "p", "messages": [{"role": "user", "content": "x"}],
            "tools": weather_tools(),
            "expect": {"calls": [
                {"tool": "get_weather", "gold": {"city": "Paris"}},
                {"tool": "get_weather", "gold": {"city": "Tokyo"}},
                {"tool": "get_weather", "gold": {"city": "Lima"}}
            ]}
        }));
        // Emitted: Paris (exact), London (right name, wrong value), get_time (wrong name), and
        // a Lima call left in content, which a client never executes and so does not count.
        let mut v = failed(Label::WrongTool, Stage::Structure);
        v.calls = vec![
            call(
                0,
                Source::ToolCalls,
                "get_weather",
                json!({"city": "Paris"}),
            ),
            call(
                1,
                Source::ToolCalls,
                "get_weather",
                json!({"city": "London"}),
            ),
            call(2, Source::ToolCalls, "get_time", json!({"tz": "UTC"})),
            call(3, Source::Hermes, "get_weather", json!({"city": "Lima"})),
        ];
        let m = sample_metrics(&parallel, &v);
        // Name: 2 of 3 emitted hit a gold name, 2 of 3 gold names hit: P = R = F1 = 2/3.
        assert_eq!(
            m.name,
            F1 {
                true_positives: 2,
                emitted: 3,
                gold: 3
            }
        );
        assert_eq!(m.name.precision(), Some(2.0 / 3.0));
        assert_eq!(m.name.recall(), Some(2.0 / 3.0));
        assert!((m.name.f1().unwrap() - 2.0 / 3.0).abs() < 1e-12);
        // Name + parameters: only Paris is exact: P = R = F1 = 1/3.
        assert_eq!(m.name_and_parameters.true_positives, 1);
        assert!((m.name_and_parameters.f1().unwrap() - 1.0 / 3.0).abs() < 1e-12);

        // A spurious call on a no-call task: one emitted, no gold.
        let no_call = task(json!({
            "id": "n", "title": "n", "messages": [{"role": "user", "content": "x"}],
            "tools": weather_tools(), "expect": {"no_call": true}
        }));
        let mut s = failed(Label::SpuriousCall, Stage::Structure);
        s.calls = vec![call(
            0,
            Source::ToolCalls,
            "get_weather",
            json!({"city": "Paris"}),
        )];
        let n = sample_metrics(&no_call, &s);
        assert_eq!(
            n.name,
            F1 {
                true_positives: 0,
                emitted: 1,
                gold: 0
            }
        );
        assert_eq!(n.name.recall(), None);
        assert_eq!(n.name.f1(), Some(0.0));

        // Micro-averaged: TP 2, emitted 4, gold 3 → P = 1/2, R = 2/3, F1 = 4/7.
        let t = total([&m, &n]);
        assert_eq!(
            t.name,
            F1 {
                true_positives: 2,
                emitted: 4,
                gold: 3
            }
        );
        assert_eq!(t.name.precision(), Some(0.5));
        assert!((t.name.f1().unwrap() - 4.0 / 7.0).abs() < 1e-12);
        // Name + parameters: TP 1, emitted 4, gold 3 → P = 1/4, R = 1/3, F1 = 2/7.
        assert!((t.name_and_parameters.f1().unwrap() - 2.0 / 7.0).abs() < 1e-12);

        // Errors count nothing; nothing emitted and nothing expected has no F1.
        let e = sample_metrics(&parallel, &verdict(Outcome::Error, Some(Stage::Transport)));
        assert_eq!(e, Metrics::default());
        assert_eq!(
            sample_metrics(&no_call, &verdict(Outcome::Pass, None))
                .name
                .f1(),
            None
        );
        // A model that called nothing on a call task: recall 0, precision undefined, F1 0.
        let silent = sample_metrics(&parallel, &failed(Label::NoCall, Stage::Structure));
        assert_eq!(silent.name.precision(), None);
        assert_eq!(silent.name.recall(), Some(0.0));
        assert_eq!(silent.name.f1(), Some(0.0));
    }

    #[test]
    fn a_gold_call_is_matched_at_most_once() {
        let one = task(json!({
            "id": "o", "title": "o", "messages": [{"role": "user", "content": "x"}],
            "tools": weather_tools(),
            "expect": {"calls": [{"tool": "get_weather", "gold": {"city": "Paris"}}]}
        }));
        let mut v = failed(Label::SpuriousCall, Stage::Structure);
        v.calls = vec![
            call(
                0,
                Source::ToolCalls,
                "get_weather",
                json!({"city": "Paris"}),
            ),
            call(
                1,
                Source::ToolCalls,
                "get_weather",
                json!({"city": "Paris"}),
            ),
        ];
        let m = sample_metrics(&one, &v);
        assert_eq!(
            m.name,
            F1 {
                true_positives: 1,
                emitted: 2,
                gold: 1
            }
        );
        assert_eq!(m.name_and_parameters.true_positives, 1);
        // Numbers by exact value: 3 equals 3.0 for the parameter match.
        let days = task(json!({
            "id": "d", "title": "d", "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}],
            "expect": {"calls": [{"tool": "f", "gold": {"n": 3}}]}
        }));
        let mut p = verdict(Outcome::Pass, None);
        p.calls = vec![call(
            0,
            Source::ToolCalls,
            "f",
            serde_json::from_str("{\"n\": 3.0}").unwrap(),
        )];
        assert_eq!(
            sample_metrics(&days, &p).name_and_parameters.true_positives,
            1
        );
    }

    #[test]
    fn name_and_parameter_counts_any_value_that_accept_lists() {
        // BFCL's possible answers: "Paris" or "Paris, France" (BFCL's string rule: spaces and
        // `,./-_*^` removed, case folded); the unit may be left out.
        let t = task(json!({
            "id": "a", "title": "a", "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}}}],
            "expect": {"calls": [{"tool": "get_weather", "gold": {"city": "Paris"}, "accept": {
                "city": {"values": ["Paris", "Paris, France"], "rule": "bfcl", "type": "string"},
                "unit": {"values": ["celsius"], "omit": true, "rule": "bfcl", "type": "string"}
            }}]}
        }));
        let tp = |args: serde_json::Value| {
            let mut p = verdict(Outcome::Pass, None);
            p.calls = vec![call(0, Source::ToolCalls, "get_weather", args)];
            let m = sample_metrics(&t, &p);
            assert_eq!(m.name.true_positives, 1);
            m.name_and_parameters.true_positives
        };
        // Not the gold arguments, but acceptable: a true positive.
        assert_eq!(tp(json!({"city": "paris france"})), 1);
        assert_eq!(tp(json!({"city": "PARIS", "unit": "Celsius"})), 1);
        assert_eq!(tp(json!({"city": "Paris"})), 1);
        // A value no answer lists, a parameter no answer names: not one.
        assert_eq!(tp(json!({"city": "London"})), 0);
        assert_eq!(tp(json!({"city": "Paris", "unit": "kelvin"})), 0);
        assert_eq!(tp(json!({"city": "Paris", "country": "FR"})), 0);
    }
}
