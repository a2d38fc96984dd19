//! `callcheck tasks lint` and `callcheck tasks list`.

use crate::cli::{ListOpts, TasksCommand, TasksOpts};
use crate::corrupt::corruptions;
use crate::lint;
use crate::request::{Asking, chat_request};
use crate::task::{self, Task};
use crate::taxonomy::Label;
use anyhow::{Result, bail};
use std::collections::BTreeMap;

pub fn run(cmd: &TasksCommand) -> Result<()> {
    match cmd {
        TasksCommand::Lint(o) => lint_all(o),
        TasksCommand::List(o) => list(o),
    }
}

fn list(o: &ListOpts) -> Result<()> {
    let tasks = task::load(&o.tasks.tasks)?;
    if o.labels {
        print!("{}", labels_table(&tasks));
    } else {
        print!("{}", lint::coverage_table(&tasks));
    }
    Ok(())
}

/// For each task, the number of corrupted variants per label (`–` where none applies), then the
/// labels that cannot apply grouped by the reason `corruptions` gives, as markdown.
pub fn labels_table(tasks: &[Task]) -> String {
    let mut out = String::from("| task |");
    for l in Label::ALL {
        out.push_str(&format!(" {l} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(Label::ALL.len()));
    out.push('\n');
    // (label, reason) → task ids, in label order then reason order.
    let mut why: BTreeMap<(Label, String), Vec<&str>> = BTreeMap::new();
    let mut applicable = 0;
    for t in tasks {
        // The budget the lint uses, raised by the task's own request fields, as collect sends it.
        let mut asking = Asking::default();
        asking
            .params
            .insert("max_tokens".into(), lint::LINT_MAX_TOKENS.into());
        let budget = chat_request(t, &asking)
            .get("max_tokens")
            .and_then(|v| v.as_u64())
            .unwrap_or(lint::LINT_MAX_TOKENS);
        out.push_str(&format!("| {} |", t.id));
        for l in Label::ALL {
            match corruptions(t, l, budget) {
                Ok(vs) => {
                    applicable += 1;
                    out.push_str(&format!(" {} |", vs.len()));
                }
                Err(reason) => {
                    why.entry((l, reason)).or_default().push(t.id.as_str());
                    out.push_str(" – |");
                }
            }
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "\n{applicable} of {} task × label pairs have corrupted variants.\n",
        tasks.len() * Label::ALL.len()
    ));
    // Labels that fail for the same reason on the same tasks share a row.
    let mut rows: BTreeMap<(String, Vec<&str>), Vec<Label>> = BTreeMap::new();
    for ((l, reason), ids) in why {
        rows.entry((reason, ids)).or_default().push(l);
    }
    let mut rows: Vec<_> = rows.into_iter().collect();
    rows.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
    if !rows.is_empty() {
        out.push_str("\n| labels | why they cannot apply | tasks |\n|---|---|---|\n");
        for ((reason, ids), labels) in &rows {
            let labels: Vec<&str> = labels.iter().map(|l| l.as_str()).collect();
            out.push_str(&format!(
                "| {} | {reason} | {} ({}) |\n",
                labels.join(", "),
                ids.join(", "),
                ids.len()
            ));
        }
    }
    out
}

fn lint_all(o: &TasksOpts) -> Result<()> {
    let tasks = task::load(&o.tasks)?;
    let mut problems = 0;
    for t in &tasks {
        for p in lint::lint_task(t) {
            eprintln!("{}: {} ({})", t.file.display(), p, t.id);
            problems += 1;
        }
    }
    if problems > 0 {
        bail!(
            "{problems} problem{} in {} tasks",
            if problems == 1 { "" } else { "s" },
            tasks.len()
        );
    }
    println!("{} tasks ok", tasks.len());
    Ok(())
}
