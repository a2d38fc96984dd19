//! `callcheck import bfcl`: another suite's questions as task files, with a summary of what was
//! imported, repaired, skipped and left out.

use crate::cli::{ImportBfclOpts, ImportCommand};
use crate::import::{self, bfcl, source};
use anyhow::{Context, Result, anyhow};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub fn run(cmd: &ImportCommand) -> Result<()> {
    match cmd {
        ImportCommand::Bfcl(o) => import_bfcl(o),
    }
}

/// Per category: imported, of which repaired, and skipped.
#[derive(Default)]
struct Counts {
    imported: usize,
    repaired: usize,
    skipped: usize,
}

fn import_bfcl(o: &ImportBfclOpts) -> Result<()> {
    let data = source::read(&o.from)?;
    let result = bfcl::convert(&data, o.categories.as_deref()).map_err(|e| anyhow!(e))?;
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create {}", o.out.display()))?;
    // What the earlier import wrote, read before anything is written.
    let earlier = import::recorded(&o.out, "bfcl");
    let mut tally = Tally::default();
    for t in &result.tasks {
        write_task(&o.out, t)?;
        if let Some(why) = &t.renamed {
            println!(
                "renamed {} ({}) to {}: {}",
                show(&t.bfcl_id),
                t.category,
                t.id,
                show(why)
            );
        }
        tally.imported(t);
    }
    for s in &result.skipped {
        println!(
            "skipped {} ({}): {}",
            show(&s.bfcl_id),
            s.category,
            show(&s.reason)
        );
        tally.counts.entry(s.category.as_str()).or_default().skipped += 1;
    }
    // What the earlier import wrote and this one no longer produces would otherwise stay in the
    // corpus, collected and scored as if it were current: removed, but only when it is still
    // the file that import wrote (its record says so, with each file's hash).
    let stale = import::stale_imports(&o.out, &earlier, &tally.produced);
    remove_stale(&o.out, &stale)?;
    let record = o.out.join(import::RECORD);
    crate::fsafe::replace_file(&record, &import::record("bfcl", &tally.written))
        .with_context(|| format!("cannot write {}", record.display()))?;
    // Files shaped like an import that no record names (an import made before records, or
    // another tool's): never removed, said.
    let known: BTreeSet<String> = earlier
        .keys()
        .chain(tally.produced.iter())
        .cloned()
        .collect();
    say_unrecorded(&import::unrecorded_imports(&o.out, "bfcl", &known));
    println!(
        "\nBFCL {} from {} into {}:",
        result.version,
        data.origin,
        o.out.display()
    );
    print_table(&tally.counts);
    if !stale.unchanged.is_empty() {
        println!(
            "removed {} task file{} of an earlier import",
            stale.unchanged.len(),
            if stale.unchanged.len() == 1 { "" } else { "s" }
        );
    }
    for (cat, why) in &result.not_imported {
        println!("not imported: {cat}: {why}");
    }
    Ok(())
}

/// BFCL's text (ids, skip reasons) as the terminal shows it: control characters escaped.
fn show(s: &str) -> String {
    crate::term::escape_controls(s).into_owned()
}

/// What this import produced: counts per category, and each file written with its hash (the
/// record the next import reads).
#[derive(Default)]
struct Tally<'a> {
    counts: BTreeMap<&'a str, Counts>,
    /// Paths relative to `--out`.
    produced: BTreeSet<String>,
    /// Path relative to `--out` → sha256 of the bytes.
    written: BTreeMap<String, String>,
}

impl<'a> Tally<'a> {
    fn imported(&mut self, t: &'a bfcl::Imported) {
        let rel = format!("{}/{}.json", t.category, t.id);
        self.produced.insert(rel.clone());
        self.written.insert(rel, crate::task::sha256_hex(&t.bytes));
        let c = self.counts.entry(t.category.as_str()).or_default();
        c.imported += 1;
        c.repaired += usize::from(t.repaired);
    }
}

/// Writes one task file under `out/<category>/`, unless it already holds the same bytes (so a
/// re-import touches nothing).
fn write_task(out: &Path, t: &bfcl::Imported) -> Result<()> {
    // Inside --out, a symlinked category folder is refused and a symlinked task file is
    // replaced, never written through (SPEC §12).
    crate::fsafe::create_dirs_within(out, Path::new(&t.category))
        .with_context(|| format!("cannot write the {} tasks", t.category))?;
    let path = out.join(format!("{}/{}.json", t.category, t.id));
    let same = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
        && crate::fsafe::read_own(&path, t.bytes.len() as u64).is_ok_and(|b| b == t.bytes);
    if !same {
        crate::fsafe::replace_file(&path, &t.bytes)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Removes the earlier import's files this one no longer produces and nobody changed; says
/// which changed ones it keeps.
fn remove_stale(out: &Path, stale: &import::Stale) -> Result<()> {
    for path in &stale.unchanged {
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove the stale import {}", path.display()))?;
        println!(
            "removed {} (an earlier BFCL import wrote it and this one no longer produces it)",
            path.display()
        );
        // A category folder left empty goes too; one holding anything else stays.
        if let Some(dir) = path.parent()
            && dir != out
        {
            let _ = std::fs::remove_dir(dir);
        }
    }
    for path in &stale.changed {
        println!(
            "kept {}: an earlier BFCL import wrote it, but it changed since; remove it by hand if it is not wanted",
            path.display()
        );
    }
    Ok(())
}

/// Says which files look like an import that no record names (the first ten of them).
fn say_unrecorded(unrecorded: &[PathBuf]) {
    if unrecorded.is_empty() {
        return;
    }
    println!(
        "left {} file{} that look{} like a BFCL import but that no import recorded (an import made before callcheck kept a record, or another tool's): remove by hand those that are stale",
        unrecorded.len(),
        if unrecorded.len() == 1 { "" } else { "s" },
        if unrecorded.len() == 1 { "s" } else { "" }
    );
    for p in unrecorded.iter().take(10) {
        println!("  {}", p.display());
    }
    if unrecorded.len() > 10 {
        println!("  and {} more", unrecorded.len() - 10);
    }
}

/// The summary table: a row per category in BFCL's order, then the total.
fn print_table(counts: &BTreeMap<&str, Counts>) {
    println!("| category | imported | repaired | skipped |\n|---|---:|---:|---:|");
    let mut total = Counts::default();
    for cat in bfcl::CATEGORIES {
        if let Some(c) = counts.get(cat) {
            println!(
                "| {cat} | {} | {} | {} |",
                c.imported, c.repaired, c.skipped
            );
            total.imported += c.imported;
            total.repaired += c.repaired;
            total.skipped += c.skipped;
        }
    }
    println!(
        "| all | {} | {} | {} |",
        total.imported, total.repaired, total.skipped
    );
}
