//! Value accuracy: whether a passing sample's arguments are among the values a task accepts.
//!
//! Conformance decides the label; this only says whether the values were right (SPEC §2.1, last
//! paragraph). A task's expected call either lists its acceptable values per parameter
//! (`accept`, SPEC §3) — matched by its rule, `exact` or BFCL's — or has only its gold call,
//! which the arguments must then equal exactly.

use super::Call;
use crate::json::values_equal;
use crate::task::ExpectedCall;
use crate::task::accept::call_accepts;

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
