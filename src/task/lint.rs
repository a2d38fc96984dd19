//! `callcheck tasks lint` and `callcheck tasks list`: checking a corpus and showing its coverage.

use super::{Expect, Task};
use crate::reply;
use crate::request::{Asking, chat_request};
use crate::score::score;
use crate::taxonomy::Outcome;
use crate::transcript::Transcript;
use std::collections::BTreeMap;

/// The budget used when a task's gold call is checked: the defaults a model row would send.
pub const LINT_MAX_TOKENS: u64 = 1024;

/// Problems with one loaded task beyond what loading checks: the gold answer must pass the
/// task's own schema and predicates, sent both as a JSON body and as a stream.
pub fn lint_task(task: &Task) -> Vec<String> {
    let mut problems = Vec::new();
    if task.description.trim().is_empty() {
        problems.push(
            "the description is empty: say what the task probes and why it matters".to_string(),
        );
    }
    if task.tags.is_empty() {
        problems.push("the task has no tags".to_string());
    }
    let mut asking = Asking {
        model: "lint".into(),
        ..Asking::default()
    };
    asking
        .params
        .insert("max_tokens".into(), LINT_MAX_TOKENS.into());
    let gold = crate::corrupt::gold(task);
    for stream in [false, true] {
        asking.stream = stream;
        let request = chat_request(task, &asking);
        let body = if stream {
            reply::render_sse(&gold, "lint", 100, true, 1)
        } else {
            reply::render_json(&gold, "lint", 100, 1)
        };
        let v = score(
            task,
            &Transcript {
                request: Some(request),
                body,
                streamed: stream,
                meta: None,
            },
        );
        if v.outcome != Outcome::Pass {
            let what = match &task.expect {
                Expect::StructuredOutput { .. } => "the gold output",
                Expect::NoCall => "a prose answer",
                Expect::Calls { .. } => "the gold calls",
            };
            problems.push(format!(
                "{what} fail{} the task's own checks ({}): {} at stage {}: {}",
                if what.ends_with('s') { "" } else { "s" },
                if stream { "streamed" } else { "JSON body" },
                v.outcome.name(),
                v.stage.map(|s| s.as_str()).unwrap_or("-"),
                v.detail
            ));
            break;
        }
        if v.value_match == Some(false) {
            problems.push(
                "the gold answer does not equal itself after a round trip: check number literals"
                    .to_string(),
            );
            break;
        }
    }
    problems
}

/// The corpus's coverage as a markdown table: every tag, how many tasks carry it, and which.
pub fn coverage_table(tasks: &[Task]) -> String {
    let mut by_tag: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for t in tasks {
        for tag in &t.tags {
            by_tag.entry(tag.as_str()).or_default().push(t.id.as_str());
        }
    }
    let mut out = String::from("| tag | tasks | ids |\n|---|---:|---|\n");
    for (tag, ids) in &by_tag {
        out.push_str(&format!("| {tag} | {} | {} |\n", ids.len(), ids.join(", ")));
    }
    let kinds = [
        (
            "calls",
            tasks
                .iter()
                .filter(|t| matches!(t.expect, Expect::Calls { .. }))
                .count(),
        ),
        (
            "no call",
            tasks
                .iter()
                .filter(|t| matches!(t.expect, Expect::NoCall))
                .count(),
        ),
        (
            "structured output",
            tasks.iter().filter(|t| t.is_structured_output()).count(),
        ),
    ];
    out.push_str(&format!(
        "\n{} tasks: {}.\n",
        tasks.len(),
        kinds
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out
}
