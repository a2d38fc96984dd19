//! `callcheck compare A B | --baseline PATH [--fail-on regression]` (SPEC §9): the per-tag
//! table of two rows, or of every row against a baseline collection, in the terminal; with
//! `--fail-on regression`, a CI gate. Never touches the network. A thin adapter: loading,
//! pairing, statistics and the table live in [`crate::compare`].

use crate::cli::{CompareOpts, FailOn, IntervalKind};
use crate::compare::{self, comparisons, infos, load_baseline, load_runs, table};
use anyhow::{Context, Result, bail};

/// Runs the command; returns the exit code (0 fine, 1 a regression under `--fail-on`).
/// Errors are usage errors or unreadable inputs, which `main` maps to exit code 2.
pub fn run(o: &CompareOpts) -> Result<i32> {
    let explicit = match (&o.a, &o.b, &o.baseline) {
        (Some(a), Some(b), None) => vec![(a.clone(), b.clone())],
        (None, None, Some(_)) => Vec::new(),
        (_, _, Some(_)) => bail!("give either two rows (compare A B) or --baseline PATH, not both"),
        _ => bail!("give two rows to compare (compare A B) or --baseline PATH"),
    };
    let tasks = crate::task::load(&o.tasks)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot load the tasks from {}", o.tasks.display()))?;
    let current = load_runs(&o.runs, &tasks, IntervalKind::Wilson)
        .map_err(|e| anyhow::anyhow!("{e:#} (pass --runs, or run `callcheck collect` first)"))?;
    let baseline = match &o.baseline {
        Some(p) => Some(load_baseline(p, &tasks, IntervalKind::Wilson)?),
        None => None,
    };
    let infos = infos(&tasks);
    let mut all = comparisons(
        &current.matrix,
        &current.rows,
        &explicit,
        baseline.as_ref(),
        &infos,
    )?;
    // `compare A B` shows that pair only (the build shows every pair); Holm then runs over the
    // comparisons shown, which is the family the gate decides on.
    if let Some((a, b)) = explicit.first() {
        all.retain(|c| c.why == "--compare" && &c.a_row == a && &c.b_row == b);
    } else {
        all.retain(|c| c.why == "baseline");
        if all.is_empty() {
            bail!(
                "no row of {} is also in the baseline {}",
                o.runs.display(),
                baseline.as_ref().map_or("", |b| b.source.as_str())
            );
        }
    }
    let family = compare::correct(&mut all);
    for c in &all {
        println!("{}", table::table(c));
    }
    let regressions: Vec<String> = all
        .iter()
        .flat_map(|c| {
            c.pooled_rows()
                .filter(|r| r.regression())
                .map(move |r| format!("{} {}", c.b, r.scope))
        })
        .collect();
    println!(
        "{family} pooled comparison{} (overall and per tag, the task as the unit), Holm-corrected at {} %: {}",
        if family == 1 { "" } else { "s" },
        (compare::ALPHA * 100.0).round(),
        if regressions.is_empty() {
            "no significant regression".to_string()
        } else {
            format!(
                "{} significantly worse: {}",
                regressions.len(),
                regressions.join("; ")
            )
        }
    );
    Ok(match o.fail_on {
        Some(FailOn::Regression) if !regressions.is_empty() => 1,
        _ => 0,
    })
}
