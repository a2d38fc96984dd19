//! `callcheck tasks lint` and `callcheck tasks list`: checking a corpus and showing its coverage.

use crate::reply;
use crate::request::{Asking, chat_request};
use crate::score::score;
use crate::task::{Expect, Predicate, Task, Test};
use crate::taxonomy::Label;
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
    problems.extend(predicate_problems(task));
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
                request: Some(std::sync::Arc::new(request)),
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

/// Predicates written against SPEC §2.1's intent: `escaping_error` declared through `equals` on
/// a string (a different value is not an escaping failure: `roundtrip` is the test), and a
/// `roundtrip` text the prompt does not spell out verbatim (it cannot be a round trip of
/// anything the model was given).
fn predicate_problems(task: &Task) -> Vec<String> {
    let mut preds: Vec<(String, &Predicate)> = Vec::new();
    match &task.expect {
        Expect::Calls { calls, across, .. } => {
            for (i, c) in calls.iter().enumerate() {
                preds.extend(
                    c.where_
                        .iter()
                        .enumerate()
                        .map(|(k, p)| (format!("expect.calls[{i}].where[{k}]"), p)),
                );
            }
            preds.extend(
                across
                    .iter()
                    .enumerate()
                    .map(|(k, p)| (format!("expect.across[{k}]"), p)),
            );
        }
        Expect::StructuredOutput { where_, .. } => preds.extend(
            where_
                .iter()
                .enumerate()
                .map(|(k, p)| (format!("expect.structured_output.where[{k}]"), p)),
        ),
        Expect::NoCall => {}
    }
    let prompt: String = task
        .messages
        .iter()
        .filter_map(|m| m.get("content").and_then(|c| c.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    for (at, p) in preds {
        match &p.test {
            Test::Equals(v) if v.is_string() && p.label == Label::EscapingError => {
                out.push(format!(
                    "{at}: `equals` on a text declares escaping_error, but a different text is a value miss, not an escaping failure: write `\"roundtrip\": {v}` (SPEC §2.1)"
                ));
            }
            Test::Roundtrip(r) if !prompt.contains(r.text.as_str()) => {
                out.push(format!(
                    "{at}: the roundtrip text is not spelled out verbatim in the task's messages, so a model cannot round-trip it: {}",
                    crate::json::preview(&serde_json::Value::String(r.text.clone()), 60)
                ));
            }
            _ => {}
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::parse_task;
    use std::path::Path;

    fn task_with(prompt: &str, predicate: &str) -> Result<Task, Vec<crate::task::TaskError>> {
        let text = format!(
            r#"{{"id": "t", "title": "t", "tags": ["x"], "description": "d",
                "messages": [{{"role": "user", "content": {prompt}}}],
                "tools": [{{"type": "function", "function": {{"name": "send", "parameters":
                    {{"type": "object", "properties": {{"text": {{"type": "string"}}}}, "required": ["text"]}}}}}}],
                "expect": {{"calls": [{{"tool": "send", "gold": {{"text": "Grüße"}}, "where": [{predicate}]}}]}}}}"#
        );
        parse_task(Path::new("t.json"), text.as_bytes())
    }

    #[test]
    fn equals_on_a_text_declaring_escaping_error_asks_for_roundtrip() {
        let t = task_with(
            r#""Send: Grüße""#,
            r#"{"path": "/text", "equals": "Grüße", "label": "escaping_error"}"#,
        )
        .unwrap();
        let p = lint_task(&t);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].contains("expect.calls[0].where[0]") && p[0].contains("\"roundtrip\": \"Grüße\""),
            "{p:?}"
        );
        // equals stays right for anything but escaping_error on a text.
        let ok = task_with(
            r#""Send: Grüße""#,
            r#"{"path": "/text", "equals": "Grüße", "label": "schema_violation"}"#,
        )
        .unwrap();
        assert!(lint_task(&ok).is_empty(), "{:?}", lint_task(&ok));
    }

    #[test]
    fn a_roundtrip_text_must_be_spelled_out_in_the_prompt() {
        let t = task_with(
            r#""Send a greeting""#,
            r#"{"path": "/text", "roundtrip": "Grüße", "label": "escaping_error"}"#,
        )
        .unwrap();
        let p = lint_task(&t);
        assert!(
            p.iter().any(|x| x.contains("not spelled out verbatim")),
            "{p:?}"
        );
        let ok = task_with(
            r#""Send: Grüße""#,
            r#"{"path": "/text", "roundtrip": "Grüße", "label": "escaping_error"}"#,
        )
        .unwrap();
        assert!(lint_task(&ok).is_empty(), "{:?}", lint_task(&ok));
    }

    #[test]
    fn a_misspelt_type_is_named_at_its_path_and_nothing_follows_from_it() {
        let text = r#"{"id": "t", "title": "t", "tags": ["x"], "description": "d",
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
                {"type": "object", "properties": {"city": {"type": "strnig"}}, "required": ["city"]}}}],
            "expect": {"calls": [{"tool": "get_weather", "gold": {"city": "Paris"}}]}}"#;
        let errs = parse_task(Path::new("t.json"), text.as_bytes()).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(
            errs[0].path,
            "tools[0].function.parameters.properties.city.type"
        );
        let p = &errs[0].problem;
        assert!(p.contains("\"strnig\" is not a JSON Schema type"), "{p}");
        assert!(p.contains("did you mean \"string\""), "{p}");
        assert!(
            p.contains("allowed there are \"array\", \"boolean\""),
            "{p}"
        );
        assert!(!p.contains("anyOf"), "{p}");
        // A property that is *called* type is not the keyword.
        let prop = text.replace(
            r#"{"city": {"type": "strnig"}}"#,
            r#"{"city": {"type": "string"}, "type": 5}"#,
        );
        let errs = parse_task(Path::new("t.json"), prop.as_bytes()).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].path, "tools[0].function.parameters.properties.type");
        assert!(!errs[0].problem.contains("JSON Schema type"), "{errs:?}");
    }

    #[test]
    fn a_roundtrip_on_a_text_nothing_can_mangle_is_refused_at_its_path() {
        let errs = task_with(
            r#""Send: Paris""#,
            r#"{"path": "/text", "roundtrip": "Paris", "label": "escaping_error"}"#,
        )
        .unwrap_err();
        assert!(
            errs.iter()
                .any(|e| e.path.ends_with("where[0].roundtrip") && e.problem.contains("use equals")),
            "{errs:?}"
        );
    }
}
