//! The terminal table of a comparison (what `callcheck compare` prints).

use super::{Comparison, Direction};

/// Signed points with one decimal: `−8.5`.
fn points(x: f64) -> String {
    let v = (x * 1000.0).round() / 10.0;
    if v == 0.0 {
        "0.0".into()
    } else {
        format!("{v:+.1}")
    }
}

/// The per-tag table of one comparison, for the terminal.
pub fn table(c: &Comparison) -> String {
    let mut out = format!(
        "A = {}, B = {} (compared because: {}); B − A in percentage points with its 95 % interval; Holm p over every pooled comparison shown\n",
        c.a,
        c.b,
        if c.why == "--compare" {
            "asked for"
        } else {
            &c.why
        },
    );
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
    let width = c
        .pooled_rows()
        .map(|r| r.scope.chars().count())
        .max()
        .unwrap_or(7)
        .max(7);
    out.push_str(&format!(
        "  {:<width$}  {:>5}  {:>7}  {:>7}  {:>24}  {:<27}  {:>6}\n",
        "scope", "tasks", "A", "B", "B − A [95 %]", "verdict", "Holm p"
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
            "  {:<width$}  {:>5}  {:>6.1}%  {:>6.1}%  {:>24}  {:<27}  {:>6.4}{}\n",
            r.scope,
            p.tasks,
            p.a_rate * 100.0,
            p.b_rate * 100.0,
            diff,
            r.direction.as_str(),
            r.holm_p,
            if r.regression() { "  REGRESSION" } else { "" }
        ));
    }
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
    out
}
