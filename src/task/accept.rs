//! The values a task accepts for a call's arguments (SPEC §3's `accept`): per parameter, the
//! listed values matched by their rule (`exact`, or BFCL's normalisation in [`bfcl`]) and
//! whether it may be left out. A property of the task, checked by the task loader against the
//! task's own gold call and used by value accuracy (`crate::score::value`).

pub mod bfcl;

use super::{Accept, ExpectedCall, Rule};
use crate::json::{preview, values_equal};
use serde_json::Value;
use std::collections::BTreeMap;

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
