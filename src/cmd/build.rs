//! `callcheck build`: re-score every transcript under runs/ with the current checkers and write
//! the static site (the pipeline is [`crate::pipeline`]); prints one summary line.

use crate::cli::BuildOpts;
use crate::pipeline::{Inputs, Summary, build};
use crate::site;
use anyhow::Result;

/// The library's inputs from the command line: the cache is `./.callcheck-cache` unless moved
/// or refused (the plain command is the incremental one), and the pipeline sees only where it
/// is.
pub fn inputs(opts: &BuildOpts) -> Inputs {
    Inputs {
        tasks: opts.corpus.tasks.clone(),
        runs: opts.corpus.runs.clone(),
        out: opts.out.clone(),
        interval: opts.interval,
        reliable_at: opts.reliable_at,
        previous: opts.previous.clone(),
        cache: super::cache_dir::choose(opts),
        compare: opts.compare.clone(),
        baseline: opts.baseline.clone(),
        allow_empty: opts.allow_empty,
        site_url: opts.site_url.clone(),
    }
}

pub fn run(opts: &BuildOpts) -> Result<()> {
    let inputs = inputs(opts);
    if let Some(dir) = &inputs.cache {
        super::cache_dir::prepare(dir, &inputs, opts.cache.is_some())?;
    }
    summarise(&inputs)
}

/// Builds and prints what the build did.
pub fn summarise(opts: &Inputs) -> Result<()> {
    let s = build(opts)?;
    if let Some(c) = &opts.cache {
        eprintln!(
            "cache {}: {} of {} samples' verdicts reused, {} of {} model, task, tag and label pages kept; site {}",
            c.display(),
            s.reused,
            s.samples,
            s.pages_kept.0,
            s.pages_kept.1,
            if s.in_place {
                "updated in place"
            } else {
                "written afresh"
            }
        );
    }
    eprintln!(
        "built {}: {} samples ({} of transcripts) in {} cells from {} runs ({}); {} skipped; {} files, {}",
        opts.out.display(),
        s.samples,
        site::html::bytes(s.read_bytes),
        s.cells,
        s.runs,
        outcomes(&s),
        s.skipped,
        s.files,
        site::html::bytes(s.bytes)
    );
    Ok(())
}

/// The samples by outcome, for the summary line. With feedback or review rounds the first
/// round and the follow-ups are counted apart: a follow-up the server refused (HTTP 500 on a
/// history it cannot parse) is a transport error of its round, and a count of the first round
/// alone would say "0 transport errors" while some were.
fn outcomes(s: &Summary) -> String {
    let (fp, ff, fe) = s.follow_ups;
    if fp + ff + fe == 0 {
        return format!(
            "{} passed, {} failed, {} transport errors: no complete chat completion received",
            s.passes, s.fails, s.errors
        );
    }
    format!(
        "first round: {} passed, {} failed, {} transport errors; follow-ups: {fp} passed, {ff} failed, {fe} transport errors; a transport error is no complete chat completion received",
        s.passes, s.fails, s.errors
    )
}
