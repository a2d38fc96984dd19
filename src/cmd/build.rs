//! `callcheck build`: re-score every transcript under runs/ with the current checkers and write
//! the static site (the pipeline is [`crate::pipeline`]); prints one summary line.

use crate::cli::BuildOpts;
use crate::site;
use anyhow::Result;

pub use crate::pipeline::{Summary, build};

pub fn run(opts: &BuildOpts) -> Result<()> {
    // The plain command is the incremental one: the cache is `./.callcheck-cache` unless moved
    // or refused, and the pipeline sees only where it is.
    let cache = super::cache_dir::choose(opts);
    if let Some(dir) = &cache {
        super::cache_dir::prepare(dir, &opts.out, opts.cache.is_some())?;
    }
    let opts = &BuildOpts {
        cache,
        ..opts.clone()
    };
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
        "built {}: {} samples ({} of transcripts) in {} cells from {} runs ({} passed, {} failed, {} transport errors: no complete chat completion received); {} skipped; {} files, {}",
        opts.out.display(),
        s.samples,
        site::html::bytes(s.read_bytes),
        s.cells,
        s.runs,
        s.passes,
        s.fails,
        s.errors,
        s.skipped,
        s.files,
        site::html::bytes(s.bytes)
    );
    Ok(())
}
