//! The terminal table of a comparison (what `callcheck compare` prints).

use super::{Comparison, Direction};
use crate::stats::interval::points;

/// The per-tag table of one comparison, for the terminal.
pub fn table(c: &Comparison) -> String {
    let mut out = format!(
        "A = {}, B = {} (compared because: {}); B − A in percentage points over these tasks (each weighing the same) with its 95 % interval (uncorrected); Holm p: the gate's one-sided p of a drop of that difference, corrected over the gate's family (below)\n",
        c.a,
        c.b,
        if c.why == "--compare" {
            "asked for"
        } else {
            &c.why
        },
    );
    out.push_str(&settings_lines(c));
    out.push_str(&pooled_table(c));
    out.push_str(&label_lines(c));
    out.push_str(&coverage_lines(c));
    out.push_str(&format!(
        "  detects: the smallest drop from {:.0} % on each of these tasks that the gate catches with 80 % power at these sample counts and this row's level in the family (simulated for the test run; a row passing everything shows smaller drops); `nothing`: not even a fall to 0 could be; Holm p `–`: the row cannot reach significance at its share, whatever its outcome\n",
        100.0 * crate::stats::gate::REFERENCE_RATE
    ));
    out.push_str(&per_task_lines(c));
    out.push_str(&format!("  {}\n", c.family.single_task(c.k())));
    out
}

/// The settings that differ between the two rows, as far as they were recorded.
fn settings_lines(c: &Comparison) -> String {
    let mut out = String::new();
    if !c.settings_known {
        out.push_str(
            "  settings that differ: not recorded (a samples.csv baseline holds outcomes only)\n",
        );
    } else if c.settings.is_empty() {
        out.push_str("  settings that differ: none recorded\n");
    } else {
        for s in &c.settings {
            let short = |v: &str| {
                let one: String = v.split_whitespace().collect::<Vec<_>>().join(" ");
                if one.chars().count() > 40 {
                    format!("{}…", one.chars().take(39).collect::<String>())
                } else {
                    one
                }
            };
            out.push_str(&format!(
                "  differs: {}: {} → {}\n",
                s.setting,
                short(&s.a),
                short(&s.b)
            ));
        }
    }
    out
}

/// The pooled rows (overall, each tag, transport errors), a line each under their heading.
fn pooled_table(c: &Comparison) -> String {
    let mut out = String::new();
    let width = c
        .pooled_rows()
        .map(|r| r.scope.chars().count())
        .max()
        .unwrap_or(7)
        .max(7);
    out.push_str(&format!(
        "  {:<width$}  {:>5}  {:>7}  {:>7}  {:>24}  {:<27}  {:>6}  {:>8}\n",
        "scope", "tasks", "A", "B", "B − A [95 %]", "uncorrected", "Holm p", "detects"
    ));
    for r in c.pooled_rows() {
        let p = &r.pooled;
        let diff = format!(
            "{} [{}, {}]",
            points(p.difference),
            points(p.interval.lower),
            points(p.interval.upper)
        );
        out.push_str(&format!(
            "  {:<width$}  {:>5}  {:>6.1}%  {:>6.1}%  {:>24}  {:<27}  {:>6}  {:>8}{}\n",
            r.scope,
            p.tasks,
            p.a_rate * 100.0,
            p.b_rate * 100.0,
            diff,
            r.direction.as_str(),
            if r.gate.in_family {
                format!("{:.4}", r.holm_p)
            } else {
                "–".to_string()
            },
            super::drop_text(r.detectable_drop),
            if r.regression() { "  REGRESSION" } else { "" }
        ));
    }
    out
}

/// The labels B gained and lost against A.
fn label_lines(c: &Comparison) -> String {
    let mut out = String::new();
    if !c.labels.is_empty() {
        let gained: Vec<String> = c
            .labels
            .iter()
            .filter(|l| l.b > l.a)
            .map(|l| format!("{} {} ({} → {})", l.b - l.a, l.label.as_str(), l.a, l.b))
            .collect();
        let lost: Vec<String> = c
            .labels
            .iter()
            .filter(|l| l.b < l.a)
            .map(|l| format!("{} {} ({} → {})", l.a - l.b, l.label.as_str(), l.a, l.b))
            .collect();
        if !gained.is_empty() {
            out.push_str(&format!("  B gained: {}\n", gained.join(", ")));
        }
        if !lost.is_empty() {
            out.push_str(&format!("  B lost: {}\n", lost.join(", ")));
        }
    }
    out
}

/// The tasks and tags one side could not measure, and so are not compared.
fn coverage_lines(c: &Comparison) -> String {
    let mut out = String::new();
    if !c.unmeasured.is_empty() {
        out.push_str(&format!(
            "  unmeasured (B could not score: every sample a transport error): {}\n",
            c.unmeasured.join(", ")
        ));
    }
    if !c.missing.is_empty() {
        out.push_str(&format!(
            "  missing (A has them, B has no sample): {}\n",
            c.missing.join(", ")
        ));
    }
    if !c.missing_tags.is_empty() {
        out.push_str(&format!(
            "  missing tags (every task of theirs A scored, B has no sample of; not compared): {}\n",
            c.missing_tags.join(", ")
        ));
    }
    out
}

/// The per-task count of worse and better, then each task the gate calls a regression.
fn per_task_lines(c: &Comparison) -> String {
    let mut out = String::new();
    let worse_cells = c
        .cells
        .iter()
        .filter(|x| x.direction == Direction::Worse)
        .count();
    let better_cells = c
        .cells
        .iter()
        .filter(|x| x.direction == Direction::Better)
        .count();
    out.push_str(&format!(
        "  per task ({} compared, Newcombe interval, uncorrected): {worse_cells} worse, {better_cells} better\n",
        c.compared_cells()
    ));
    for x in c.regressed_tasks() {
        out.push_str(&format!(
            "  task {}: {}/{} → {}/{}, p = {}, Holm p {:.4}  REGRESSION\n",
            x.task,
            x.a_passes,
            x.a_scored,
            x.b_passes,
            x.b_scored,
            super::p_text(x.p_value),
            x.gate.adjusted
        ));
    }
    out
}
