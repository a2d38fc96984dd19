//! `callcheck plan [--config callcheck.toml] [--tasks tasks] [--k 3] [--baseline] [--detect 20]`
//! (SPEC §9): what the gate will be able to see, before choosing k. Reads the config and the
//! tasks, asks no server. A thin adapter over [`crate::compare::plan`].

use crate::cli::PlanOpts;
use crate::compare::plan::{families, plan_family, render};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;

pub fn run(o: &PlanOpts) -> Result<()> {
    if o.k == 0 {
        bail!("--k 0: a plan needs at least one sample per cell");
    }
    let detect = match o.detect {
        Some(d) if !(d > 0.0 && d <= 100.0) => {
            bail!("--detect {d}: give a drop in percentage points, above 0 and at most 100")
        }
        d => d.map(|d| d / 100.0),
    };
    let config = crate::collect::config::load(&o.config)?;
    let mut tasks = crate::task::load(&o.tasks)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot load the tasks from {}", o.tasks.display()))?;
    crate::task::only(&mut tasks, o.only.as_deref(), &o.tasks)?;
    if tasks.is_empty() {
        bail!("no tasks in {}: pass --tasks DIR", o.tasks.display());
    }
    let mut entries: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for m in &config.models {
        if o.models.as_ref().is_some_and(|w| !w.contains(&m.name)) {
            continue;
        }
        entries.insert(m.name.clone(), serde_json::to_value(m)?);
    }
    if let Some(wanted) = &o.models {
        for w in wanted {
            if !entries.contains_key(w) {
                bail!(
                    "--models: no model named {w:?} in {} (models: {})",
                    o.config.display(),
                    config
                        .models
                        .iter()
                        .map(|m| m.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
    }
    let infos = crate::compare::infos(&tasks);
    let mut planned = families(&entries, o.baseline);
    let mut note = String::new();
    if planned.is_empty() {
        // No pair in the config: the gate a CI run has is the baseline's.
        note = format!(
            "{} forms no pair (no two rows serve one model id, no variant_of): planned for `compare --baseline`, every row against its baseline row\n",
            o.config.display()
        );
        planned = families(&entries, true);
    }
    let k = u64::from(o.k);
    let out: Vec<_> = planned
        .into_iter()
        .map(|(comparisons, command)| plan_family(comparisons, command, &infos, k, detect))
        .collect();
    print!(
        "{note}{}",
        crate::term::escape_lines(&render(
            &out,
            &o.config.display().to_string(),
            entries.len(),
            &infos,
            k,
            detect
        ))
    );
    Ok(())
}
