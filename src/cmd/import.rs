//! `callcheck import bfcl`: another suite's questions as task files, with a summary of what was
//! imported, repaired, skipped and left out.

use crate::cli::{ImportBfclOpts, ImportCommand};
use crate::import::{self, bfcl, source};
use anyhow::{Context, Result, anyhow};
use std::collections::{BTreeMap, BTreeSet};

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
    let mut counts: BTreeMap<&str, Counts> = BTreeMap::new();
    let mut produced = BTreeSet::new();
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create {}", o.out.display()))?;
    for t in &result.tasks {
        // Inside --out, a symlinked category folder is refused and a symlinked task file is
        // replaced, never written through (SPEC §12).
        crate::fsafe::create_dirs_within(&o.out, std::path::Path::new(&t.category))
            .with_context(|| format!("cannot write the {} tasks", t.category))?;
        let path = o.out.join(&t.category).join(format!("{}.json", t.id));
        produced.insert(path.clone());
        // Unchanged files are left alone, so a re-import touches nothing.
        let same = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
            && crate::fsafe::read_bounded(&path, t.bytes.len() as u64).is_ok_and(|b| b == t.bytes);
        if !same {
            crate::fsafe::replace_file(&path, &t.bytes)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        if let Some(why) = &t.renamed {
            println!("renamed {} ({}) to {}: {why}", t.bfcl_id, t.category, t.id);
        }
        let c = counts.entry(t.category.as_str()).or_default();
        c.imported += 1;
        c.repaired += usize::from(t.repaired);
    }
    for s in &result.skipped {
        println!("skipped {} ({}): {}", s.bfcl_id, s.category, s.reason);
        counts.entry(s.category.as_str()).or_default().skipped += 1;
    }
    // What an earlier import wrote and this one no longer produces would otherwise stay in the
    // corpus, collected and scored as if it were current: only BFCL imports are removed.
    let stale = import::stale_imports(&o.out, "bfcl", &produced);
    for path in &stale {
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove the stale import {}", path.display()))?;
        println!(
            "removed {} (an earlier BFCL import this one no longer produces)",
            path.display()
        );
        // A category folder left empty goes too; one holding anything else stays.
        if let Some(dir) = path.parent()
            && dir != o.out
        {
            let _ = std::fs::remove_dir(dir);
        }
    }
    println!(
        "\nBFCL {} from {} into {}:",
        result.version,
        data.origin,
        o.out.display()
    );
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
    if !stale.is_empty() {
        println!(
            "removed {} task file{} of an earlier import",
            stale.len(),
            if stale.len() == 1 { "" } else { "s" }
        );
    }
    for (cat, why) in &result.not_imported {
        println!("not imported: {cat}: {why}");
    }
    Ok(())
}
