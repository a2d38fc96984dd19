//! Value accuracy: whether a passing sample's arguments are among the values a task accepts.
//!
//! Conformance decides the label; this only says whether the values were right (SPEC §2.1, last
//! paragraph). A task's expected call either lists its acceptable values per parameter
//! (`accept`, SPEC §3) — matched by its rule, `exact` or BFCL's — or has only its gold call,
//! which the arguments must then equal exactly.

pub mod bfcl;

use super::Call;
use crate::json::{preview, values_equal};
use crate::task::{Accept, ExpectedCall, Rule};
use serde_json::Value;
use std::collections::BTreeMap;

/// Whether the emitted calls of a passing sample carry acceptable values.
///
/// With `accept` on any expected call, calls are paired the way BFCL's
/// `parallel_function_checker_no_order` (`eval_checker/ast_eval/ast_checker.py`) pairs them:
/// each expected call in order takes the first unused emitted call of its tool whose arguments
/// it accepts — greedily, so the number agrees with BFCL's even where a cleverer pairing would
/// have succeeded. Without `accept`, each call's arguments must equal the gold call it was
/// matched to by the scorer.
pub fn value_match(expected: &[ExpectedCall], calls: &[Call]) -> bool {
    if expected.iter().all(|e| e.accept.is_none()) {
        return calls.iter().all(|c| match (c.matched, &c.arguments) {
            (Some(e), Some(a)) => expected.get(e).is_some_and(|e| values_equal(&e.gold, a)),
            _ => false,
        });
    }
    if calls.len() != expected.len() {
        return false;
    }
    let mut used = vec![false; calls.len()];
    for e in expected {
        let found = calls.iter().enumerate().position(|(i, c)| {
            !used[i]
                && c.name.as_deref() == Some(e.tool.as_str())
                && c.arguments.as_ref().is_some_and(|a| call_accepts(e, a))
        });
        match found {
            Some(i) => used[i] = true,
            None => return false,
        }
    }
    true
}

/// One call's arguments against one expected call: its `accept`, or else its gold exactly.
pub fn call_accepts(e: &ExpectedCall, args: &Value) -> bool {
    match &e.accept {
        Some(a) => accepts(a, args).is_ok(),
        None => values_equal(&e.gold, args),
    }
}

/// Whether `args` is acceptable: every argument is a listed parameter with an acceptable value,
/// and every listed parameter left out may be left out. The error says which parameter fails.
///
/// This is the per-parameter part of BFCL's `simple_function_checker`: an argument that its
/// possible answer does not list is unexpected, and one it lists without `""` is required.
pub fn accepts(accept: &BTreeMap<String, Accept>, args: &Value) -> Result<(), String> {
    let Some(obj) = args.as_object() else {
        return Err("the arguments are not an object".into());
    };
    for (name, v) in obj {
        let Some(a) = accept.get(name) else {
            return Err(format!("{name:?} is not among the accepted parameters"));
        };
        let ok = match a.rule {
            Rule::Exact => a.values.iter().any(|x| values_equal(x, v)),
            Rule::Bfcl => bfcl::param_accepts(a, v),
        };
        if !ok {
            return Err(format!(
                "{name:?}: {} is not an accepted value",
                preview(v, 80)
            ));
        }
    }
    for (name, a) in accept {
        if !obj.contains_key(name) && !a.omit {
            return Err(format!("{name:?} is left out, which is not accepted"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::BfclLanguage;
    use serde_json::json;

    fn exact(values: Vec<Value>, omit: bool) -> Accept {
        Accept {
            values,
            omit,
            rule: Rule::Exact,
            bfcl_type: None,
            bfcl_items: None,
            language: BfclLanguage::Python,
        }
    }

    #[test]
    fn exact_rule_lists_values_and_omission() {
        let mut a = BTreeMap::new();
        a.insert(
            "city".to_string(),
            exact(vec![json!("Paris"), json!("paris")], false),
        );
        a.insert("unit".to_string(), exact(vec![json!("c")], true));
        assert!(accepts(&a, &json!({"city": "Paris"})).is_ok());
        assert!(accepts(&a, &json!({"city": "paris", "unit": "c"})).is_ok());
        assert!(accepts(&a, &json!({"city": "PARIS"})).is_err());
        assert!(accepts(&a, &json!({"unit": "c"})).is_err());
        let e = accepts(&a, &json!({"city": "Paris", "extra": 1})).unwrap_err();
        assert!(e.contains("extra"), "{e}");
    }
}
