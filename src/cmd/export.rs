//! `callcheck export preference`: read runs/ and tasks/, re-score, and write labelled examples
//! for TRL's KTO or DPO trainers (the work is in [`crate::export::preference`]; this is the
//! edge: flags in, one file out, a summary on stderr).

use crate::cli::{ExportCommand, PreferenceFormat, PreferenceOpts, PreferenceSource};
use crate::export::preference::{self, Format, Options, Sources};
use crate::runs;
use crate::taxonomy::Label;
use anyhow::{Context, Result, bail};
use std::collections::BTreeSet;
use std::path::Path;

pub fn run(command: &ExportCommand) -> Result<()> {
    match command {
        ExportCommand::Preference(o) => preference_export(o),
    }
}

fn parse_labels(labels: &[String]) -> Result<BTreeSet<Label>> {
    labels
        .iter()
        .map(|s| {
            Label::parse(s.trim()).ok_or_else(|| {
                let all: Vec<&str> = Label::ALL.iter().map(|l| l.as_str()).collect();
                anyhow::anyhow!(
                    "--labels: {s:?} is not a label; the labels are {}",
                    all.join(", ")
                )
            })
        })
        .collect()
}

/// The values of the key variables the runs name (`api_key_env` in cell.json), when they are
/// set now: a server may have echoed its key into a response, and no line may carry it.
fn secrets_in_env(scan: &runs::Scan) -> Vec<String> {
    let names: BTreeSet<&str> = scan
        .runs
        .iter()
        .filter_map(|r| r.cell.model.get("api_key_env").and_then(|v| v.as_str()))
        .collect();
    let mut values: Vec<String> = names
        .into_iter()
        .filter_map(|n| std::env::var(n).ok())
        .filter(|v| !v.is_empty())
        .collect();
    // Longest first, so a key that contains another is replaced whole.
    values.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    values.dedup();
    values
}

/// Writes `bytes` beside `out` and renames it into place, so a reader never sees half a file and
/// a symlink at `out` is replaced, never written through (SPEC §12).
fn write_atomically(out: &Path, bytes: &[u8]) -> Result<()> {
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    crate::fsafe::replace_file(out, bytes)
        .with_context(|| format!("cannot move the export into {}", out.display()))?;
    Ok(())
}

fn preference_export(o: &PreferenceOpts) -> Result<()> {
    let opts = Options {
        format: match o.format {
            PreferenceFormat::Kto => Format::Kto,
            PreferenceFormat::Dpo => Format::Dpo,
        },
        sources: match o.source {
            PreferenceSource::Real => Sources::Real,
            PreferenceSource::Synthetic => Sources::Synthetic,
            PreferenceSource::Both => Sources::Both,
        },
        models: o.models.as_ref().map(|m| m.iter().cloned().collect()),
        labels: o.labels.as_deref().map(parse_labels).transpose()?,
        max_per_label: o.max_per_label,
        keep_repeats: o.keep_repeats,
    };
    if o.out.is_dir() {
        bail!(
            "--out {} is a folder; name the .jsonl file to write",
            o.out.display()
        );
    }
    let tasks = crate::task::load(&o.corpus.tasks)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot load the tasks from {}", o.corpus.tasks.display()))?;
    let wants_real = matches!(opts.sources, Sources::Real | Sources::Both);
    let scan = if wants_real {
        if !o.corpus.runs.is_dir() {
            bail!(
                "no runs folder at {} (run `callcheck collect` first, pass --runs, or export --source synthetic)",
                o.corpus.runs.display()
            );
        }
        let scan = runs::scan(&o.corpus.runs);
        for s in &scan.skipped {
            eprintln!("skipped {}: {}", s.path.display(), s.reason);
        }
        scan
    } else {
        runs::Scan::default()
    };
    if let Some(models) = &opts.models {
        let present: BTreeSet<&str> = scan.runs.iter().map(|r| r.model.as_str()).collect();
        for m in models {
            if wants_real && !present.contains(m.as_str()) {
                eprintln!(
                    "warning: --models {m}: no runs of that row under {}",
                    o.corpus.runs.display()
                );
            }
        }
    }
    let secrets = secrets_in_env(&scan);
    let harvest = preference::harvest(&tasks, &scan.runs, &opts);
    for (dir, why) in &harvest.unreadable {
        eprintln!(
            "skipped {}: {}",
            dir.display(),
            crate::term::escape_controls(why)
        );
    }
    let mut lines = preference::lines(&harvest, opts.format);
    let redacted: usize = lines
        .iter_mut()
        .map(|l| preference::redact(l, &secrets))
        .sum();
    let bytes = preference::serialize(&lines);
    write_atomically(&o.out, &bytes)?;
    print_summary(o, &opts, &harvest, lines.len(), redacted);
    Ok(())
}

fn print_summary(
    o: &PreferenceOpts,
    opts: &Options,
    h: &preference::Harvest,
    n_lines: usize,
    redacted: usize,
) {
    let c = &h.counts;
    let format = match opts.format {
        Format::Kto => "kto",
        Format::Dpo => "dpo",
    };
    eprintln!("wrote {}: {n_lines} lines ({format})", o.out.display());
    for (what, counts) in preference::tallies(h, opts.format) {
        let mut counts: Vec<(&String, &usize)> = counts.iter().collect();
        if what == "label" {
            // The taxonomy's own order, positives last.
            counts.sort_by_key(|(k, _)| Label::parse(k).map_or(usize::MAX, |l| l as usize));
        }
        let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
        eprintln!("  by {what}: {}", parts.join(", "));
    }
    if matches!(opts.sources, Sources::Real | Sources::Both) {
        eprintln!(
            "  read {} samples: {} transport errors left out, {} repeated failing completions and {} repeated passing ones folded, {} passes with arguments other than the gold not used",
            c.samples,
            c.transport_errors,
            c.duplicate_negatives,
            c.duplicate_positives,
            c.passes_not_gold
        );
        for (why, n) in &c.unusable {
            eprintln!("  {n} samples not usable: {why}");
        }
        if c.unknown_task_runs > 0 {
            eprintln!(
                "  {} runs of tasks not in the corpus left out",
                c.unknown_task_runs
            );
        }
    }
    if matches!(opts.sources, Sources::Synthetic | Sources::Both) {
        eprintln!(
            "  {} synthetic variants dropped: they did not score as their label",
            c.dropped_synthetic.len()
        );
        for d in &c.dropped_synthetic {
            eprintln!("    dropped {d}");
        }
    }
    for (label, n) in &c.capped {
        eprintln!("  {n} {label} negatives cut by --max-per-label");
    }
    if redacted > 0 {
        eprintln!("  {redacted} occurrences of an API key (from the runs' api_key_env) redacted");
    }
}
