//! `tasks/<task>.html`: what a task sends and expects, and each model's cell with every sample
//! linked.

use super::compare;
use crate::site::html::{escape, json_html, root};
use crate::site::matrix::cell_td;
use crate::site::text::label_summary;
use crate::site::{File, SiteError, SiteInput, value};
use crate::task::{Expect, Order, Task};
use askama::Template;
use serde_json::Value;

struct ExpectedView {
    tool: String,
    gold: String,
    predicates: Vec<String>,
    /// What `accept` lists, one line per parameter (empty without `accept`).
    accept: Vec<String>,
}

struct ResultRow {
    model: String,
    td: String,
    /// Value accuracy and BFCL-style accuracy `<td>`s, when the task reports values.
    value_tds: String,
    labels: String,
}

#[derive(Template)]
#[template(path = "task.html")]
struct TaskPage<'a> {
    title: String,
    root: String,
    task: &'a Task,
    description: String,
    changed: bool,
    messages: String,
    tools: String,
    tool_choice: Option<String>,
    response_format: Option<String>,
    request: Option<String>,
    /// A sentence, as HTML (tool names escaped, in `<code>`).
    expect_kind: String,
    expected: Vec<ExpectedView>,
    across: Vec<String>,
    results: Vec<ResultRow>,
    /// The task reports value accuracy and BFCL-style accuracy (it has `accept` or is BFCL's).
    bfcl_scored: bool,
    value_meaning: &'static str,
    bfcl_style_meaning: &'static str,
    /// The pre-rendered "Comparisons" block (empty without comparisons).
    comparisons: String,
}

/// What a call task expects, as a sentence: "3 calls to `get_weather`, in any order", "2 calls:
/// 1 to `a` and 1 to `b`, in this order". HTML, with the tool names escaped.
fn expected_sentence<'a>(tools: impl Iterator<Item = &'a str>, order: Order) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    let mut n = 0;
    for t in tools {
        n += 1;
        match counts.iter_mut().find(|(x, _)| *x == t) {
            Some((_, c)) => *c += 1,
            None => counts.push((t, 1)),
        }
    }
    let plural = |k: usize| if k == 1 { "call" } else { "calls" };
    let code = |t: &str| format!("<code>{}</code>", escape(t));
    let mut out = match counts.as_slice() {
        [] => return "No call is listed.".into(),
        [(t, k)] => format!("{k} {} to {}", plural(*k), code(t)),
        many => {
            let parts: Vec<String> = many
                .iter()
                .map(|(t, k)| format!("{k} to {}", code(t)))
                .collect();
            let (last, rest) = parts
                .split_last()
                .map_or((String::new(), &[][..]), |(l, r)| (l.clone(), r));
            format!("{n} calls: {} and {last}", rest.join(", "))
        }
    };
    if n > 1 {
        out.push_str(match order {
            Order::Any => ", in any order",
            Order::Strict => ", in this order",
        });
    }
    out.push('.');
    out
}

/// Renders task markdown and sanitises it: raw HTML, event handlers and `javascript:` links in a
/// task description never reach the page. Images are dropped too: the site stays
/// self-contained (no fetches a reader did not ask for, no links that can break).
pub(crate) fn markdown(text: &str) -> String {
    let parser = pulldown_cmark::Parser::new_ext(text, pulldown_cmark::Options::ENABLE_TABLES);
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, parser);
    ammonia::Builder::default()
        .rm_tags(["img"])
        .link_rel(Some("noopener noreferrer"))
        .clean(&out)
        .to_string()
}

/// `tasks/<task>.html`.
pub(crate) fn page(input: &SiteInput, task: &Task, files: &mut Vec<File>) -> Result<(), SiteError> {
    let m = input.matrix;
    let r = root(1);
    let mut results = Vec::new();
    let mut changed = false;
    let bfcl_scored = m.task(&task.id).is_some_and(|t| t.bfcl_scored);
    for mv in &m.models {
        if let Some(c) = m.cell(&mv.name, &task.id) {
            changed |= c.task_changed;
            let mut td = String::new();
            cell_td(m, c, &r, false, true, None, &mut td);
            let mut value_tds = String::new();
            if bfcl_scored {
                value::cell_tds(m, c, &mut value_tds);
            }
            results.push(ResultRow {
                model: mv.name.clone(),
                td,
                value_tds,
                labels: label_summary(c),
            });
        }
    }
    let (expect_kind, expected, across) = match &task.expect {
        Expect::NoCall => (
            "No tool call is needed: any call is <code>spurious_call</code>.".to_string(),
            vec![],
            vec![],
        ),
        Expect::Calls {
            calls,
            across,
            order,
        } => (
            expected_sentence(calls.iter().map(|c| c.tool.as_str()), *order),
            calls
                .iter()
                .map(|c| ExpectedView {
                    tool: c.tool.clone(),
                    gold: json_html(&c.gold, None),
                    predicates: c.where_.iter().map(|p| p.describe()).collect(),
                    accept: c.accept.as_ref().map(value::accept_lines).unwrap_or_default(),
                })
                .collect(),
            across.iter().map(|p| p.describe()).collect(),
        ),
        Expect::StructuredOutput { gold, where_, .. } => (
            "Structured output: JSON in the message content, valid against the schema sent in <code>response_format</code>.".to_string(),
            vec![ExpectedView {
                tool: "structured output".into(),
                gold: json_html(gold, None),
                predicates: where_.iter().map(|p| p.describe()).collect(),
                accept: Vec::new(),
            }],
            vec![],
        ),
    };
    let page = TaskPage {
        comparisons: compare::block(input.comparisons, 1, None, Some(&task.id)),
        title: format!("{} · {}", task.id, task.title),
        root: r,
        task,
        description: markdown(&task.description),
        changed,
        messages: json_html(&Value::Array(task.messages.clone()), None),
        tools: json_html(&Value::Array(task.tools_json.clone()), None),
        tool_choice: task.tool_choice.as_ref().map(|v| json_html(v, None)),
        response_format: task.response_format.as_ref().map(|v| json_html(v, None)),
        request: (!task.request.is_empty()).then(|| {
            json_html(
                &Value::Object(task.request.clone().into_iter().collect()),
                None,
            )
        }),
        expect_kind,
        expected,
        across,
        results,
        bfcl_scored,
        value_meaning: value::VALUE_MEANING,
        bfcl_style_meaning: value::BFCL_STYLE_MEANING,
    };
    let path = format!("tasks/{}.html", task.id);
    let cells: Vec<String> = input
        .matrix
        .models
        .iter()
        .filter_map(|mv| {
            let c = input.matrix.cell(&mv.name, &task.id)?;
            Some(format!("{} {}/{}", mv.name, c.passes, c.scored))
        })
        .collect();
    let html = super::carded(
        "task page",
        &page,
        &format!("Task {}: {}", task.id, task.title),
        &cells.join(" · "),
        &path,
        input.site_url,
    )?;
    files.push((path, html));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_calls_read_as_a_sentence() {
        let s = |tools: &[&str], o| expected_sentence(tools.iter().copied(), o);
        assert_eq!(
            s(&["get_weather"; 3], Order::Any),
            "3 calls to <code>get_weather</code>, in any order."
        );
        assert_eq!(
            s(&["get_weather"], Order::Any),
            "1 call to <code>get_weather</code>."
        );
        assert_eq!(
            s(&["a", "b<", "a"], Order::Strict),
            "3 calls: 2 to <code>a</code> and 1 to <code>b&lt;</code>, in this order."
        );
        assert_eq!(
            s(&["a", "b", "c"], Order::Any),
            "3 calls: 1 to <code>a</code>, 1 to <code>b</code> and 1 to <code>c</code>, in any order."
        );
    }
}
