//! `callcheck compare A B | --baseline PATH [--fail-on regression]` (SPEC §9): the per-tag
//! table of two rows, or of every row against a baseline collection, in the terminal; with
//! `--fail-on regression`, a CI gate. Never touches the network. A thin adapter: loading,
//! pairing, statistics and the table live in [`crate::compare`].

use crate::cli::{CompareOpts, FailOn};
use crate::compare::{self, comparisons, infos, load_baseline, load_runs, table};
use crate::stats::IntervalKind;
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
    let tasks = crate::task::load(&o.corpus.tasks)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot load the tasks from {}", o.corpus.tasks.display()))?;
    let current = load_runs(&o.corpus.runs, &tasks, IntervalKind::Wilson)
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
        &crate::stats::compare::Memo::default(),
    )?;
    // `compare A B` shows that pair only (the build shows every pair), `--baseline` every row
    // against the baseline: each is the family its gate decided in, as on the pages.
    if let Some((a, b)) = explicit.first() {
        all.retain(|c| c.why == "--compare" && &c.a_row == a && &c.b_row == b);
    } else {
        all.retain(|c| c.why == "baseline");
        if all.is_empty() {
            bail!(
                "no row of {} is also in the baseline {}",
                o.corpus.runs.display(),
                baseline.as_ref().map_or("", |b| b.source.as_str())
            );
        }
    }
    if let Some(base) = &baseline {
        let left = compare::unpaired(&current.matrix, base);
        if !left.is_empty() {
            println!(
                "not compared (no row of that name in the baseline {}): {}",
                base.source,
                left.join(", ")
            );
        }
    }
    for c in &all {
        // Settings and row names come from servers and runs: shown, never obeyed.
        println!("{}", crate::term::escape_lines(&table::table(c)));
    }
    let failures: Vec<String> = all
        .iter()
        .flat_map(|c| {
            c.gate_failures(o.allow_missing)
                .into_iter()
                .map(move |f| format!("{} {f}", c.b))
        })
        .collect();
    // Missing tasks the gate was told to allow are still named: they were not compared.
    let allowed: Vec<String> = all
        .iter()
        .filter(|c| o.allow_missing && !c.missing.is_empty())
        .map(|c| format!("{} {}", c.b, c.missing_note()))
        .collect();
    let family = all.first().map(|c| c.family.describe()).unwrap_or_default();
    println!(
        "gate: {family}: {}",
        match (failures.is_empty(), allowed.is_empty()) {
            (true, true) => "no significant regression, nothing unmeasured or missing".to_string(),
            (true, false) => format!(
                "no significant regression, nothing unmeasured; not compared, allowed by --allow-missing: {}",
                allowed.join("; ")
            ),
            (false, _) => format!("FAILS on {}: {}", failures.len(), failures.join("; ")),
        }
    );
    Ok(match o.fail_on {
        Some(FailOn::Regression) if !failures.is_empty() => super::exit::FAILURE,
        _ => super::exit::SUCCESS,
    })
}
