//! Semantic predicates (SPEC §2.1, stage 5): properties of conformance that a JSON Schema
//! cannot state, each naming the label its failure implies.

use crate::json::{clip, preview, show_pointer, values_equal};
use crate::taxonomy::Label;
use regex::Regex;
use serde_json::Value;

/// Length bounds for an array or a string (in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LenBound {
    pub min: Option<u64>,
    pub max: Option<u64>,
}

/// What a predicate tests at its path.
#[derive(Debug, Clone)]
pub enum Test {
    /// Exactly this JSON value (numbers by exact mathematical value).
    Equals(Value),
    /// One of these values.
    OneOf(Vec<Value>),
    /// A string the regex finds a match in (anchor it to test the whole string).
    Matches(Regex),
    /// An array or string whose length is within the bounds.
    Len(LenBound),
    /// The path resolves.
    Present,
    /// The path does not resolve.
    Absent,
    /// Across calls: the values at the path differ pairwise.
    Distinct,
}

/// One predicate of a task: a JSON Pointer, a test and the label its failure implies.
#[derive(Debug, Clone)]
pub struct Predicate {
    pub path: String,
    pub test: Test,
    pub label: Label,
    /// The predicate as written in the task file, for display.
    pub source: Value,
}

impl Predicate {
    /// Evaluates a per-call (`where`) predicate against one call's arguments. `Err` is the
    /// human-readable reason it failed.
    pub fn check(&self, args: &Value) -> Result<(), String> {
        let at = args.pointer(&self.path);
        let p = show_pointer(&self.path);
        match (&self.test, at) {
            (Test::Present, Some(_)) | (Test::Absent, None) => Ok(()),
            (Test::Present, None) => Err(format!("{p} is absent but must be present")),
            (Test::Absent, Some(v)) => Err(format!("{p} must be absent, found {}", preview(v, 60))),
            (_, None) => Err(format!("{p} is absent")),
            (Test::Equals(want), Some(got)) => {
                if values_equal(want, got) {
                    Ok(())
                } else {
                    Err(format!(
                        "{p} must equal {} exactly, got {}",
                        preview(want, 80),
                        preview(got, 80)
                    ))
                }
            }
            (Test::OneOf(allowed), Some(got)) => {
                if allowed.iter().any(|w| values_equal(w, got)) {
                    Ok(())
                } else {
                    Err(format!(
                        "{p} must be one of {}, got {}",
                        preview(&Value::Array(allowed.clone()), 80),
                        preview(got, 60)
                    ))
                }
            }
            (Test::Matches(re), Some(Value::String(s))) => {
                if re.is_match(s) {
                    Ok(())
                } else {
                    Err(format!(
                        "{p} does not match /{}/: {}",
                        re.as_str(),
                        preview(&Value::String(s.clone()), 80)
                    ))
                }
            }
            (Test::Matches(re), Some(other)) => Err(format!(
                "{p} must be a string matching /{}/, got {}",
                re.as_str(),
                preview(other, 60)
            )),
            (Test::Len(b), Some(v)) => {
                let len = match v {
                    Value::String(s) => s.chars().count() as u64,
                    Value::Array(a) => a.len() as u64,
                    other => {
                        return Err(format!(
                            "{p} must be a string or array for a length test, got {}",
                            preview(other, 60)
                        ));
                    }
                };
                if b.min.is_some_and(|m| len < m) || b.max.is_some_and(|m| len > m) {
                    Err(format!(
                        "{p} has length {len}, outside {}",
                        describe_bound(b)
                    ))
                } else {
                    Ok(())
                }
            }
            (Test::Distinct, Some(_)) => Ok(()),
        }
    }

    /// Evaluates an `across` predicate over every matched call's arguments, in expected order.
    pub fn check_across(&self, all_args: &[&Value]) -> Result<(), String> {
        match &self.test {
            Test::Distinct => {
                let p = show_pointer(&self.path);
                for (i, a) in all_args.iter().enumerate() {
                    for (j, b) in all_args.iter().enumerate().skip(i + 1) {
                        match (a.pointer(&self.path), b.pointer(&self.path)) {
                            (Some(x), Some(y)) if values_equal(x, y) => {
                                return Err(format!(
                                    "{p} must differ across calls, but calls {} and {} both have {}",
                                    i + 1,
                                    j + 1,
                                    clip(&preview(x, 60), 60)
                                ));
                            }
                            _ => {}
                        }
                    }
                }
                Ok(())
            }
            // Any other test across calls applies to each call in turn.
            _ => {
                for (i, a) in all_args.iter().enumerate() {
                    self.check(a).map_err(|e| format!("call {}: {e}", i + 1))?;
                }
                Ok(())
            }
        }
    }

    /// A short description for pages: `/city distinct → parallel_collapse`.
    pub fn describe(&self) -> String {
        let p = show_pointer(&self.path);
        let t = match &self.test {
            Test::Equals(v) => format!("equals {}", preview(v, 60)),
            Test::OneOf(v) => format!("one of {}", preview(&Value::Array(v.clone()), 60)),
            Test::Matches(r) => format!("matches /{}/", r.as_str()),
            Test::Len(b) => format!("length {}", describe_bound(b)),
            Test::Present => "present".to_string(),
            Test::Absent => "absent".to_string(),
            Test::Distinct => "distinct across calls".to_string(),
        };
        format!("{p} {t} → {}", self.label)
    }
}

fn describe_bound(b: &LenBound) -> String {
    match (b.min, b.max) {
        (Some(lo), Some(hi)) => format!("[{lo}, {hi}]"),
        (Some(lo), None) => format!("≥ {lo}"),
        (None, Some(hi)) => format!("≤ {hi}"),
        (None, None) => "unbounded".to_string(),
    }
}
