//! The build pipeline, in the order data flows: read the corpus and `runs/` and score each
//! transcript ([`crate::evidence`]) → [`aggregate`] into the matrix → [`render`] the pages →
//! [`write`] the site. Never touches the network; the same inputs give a byte-identical site
//! whatever the thread count.
//!
//! Samples stream: each run folder is read, scored and its pages rendered and queued for the
//! writer while other runs are in flight, so only the aggregates' share of each sample (a
//! [`Scored`]) outlives its run.

pub mod aggregate;
pub mod cache;
pub mod owned;
pub mod progress;
pub mod render;
pub mod run;
pub mod write;

use crate::evidence::{SkippedInput, read};
use crate::stats::{IntervalKind, Thresholds};
use crate::task::Task;
use anyhow::{Result, bail};
use rayon::prelude::*;
use read::{Loaded, RunInput};
use run::{Reuse, RunOutcome, run_samples};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use write::SiteWriter;

/// What a build reads, where it writes and how it scores: `callcheck build`'s options as the
/// library takes them (`cmd/build.rs` makes them from the command line; the demo and the tests
/// make them directly).
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The task corpus: a folder of task files, or one file.
    pub tasks: PathBuf,
    /// The `runs/` tree collect wrote.
    pub runs: PathBuf,
    /// Where the site goes.
    pub out: PathBuf,
    /// The binomial interval shown with every rate.
    pub interval: IntervalKind,
    /// The verdicts' thresholds.
    pub reliable_at: Thresholds,
    /// The previous build's `data/samples.csv`, to list what changed (default: the one in `out`).
    pub previous: Option<PathBuf>,
    /// The verdict cache's folder; `None` builds without one.
    pub cache: Option<PathBuf>,
    /// Extra comparisons, as `A:B`.
    pub compare: Vec<String>,
    /// Another collection each row is compared with.
    pub baseline: Option<PathBuf>,
    /// An empty `runs/` is an empty site rather than an error.
    pub allow_empty: bool,
    /// Where the site is published, for the cards' full addresses.
    pub site_url: Option<String>,
}

impl Inputs {
    /// Where this build's evidence comes from.
    pub fn sources(&self) -> crate::evidence::Sources<'_> {
        crate::evidence::Sources {
            tasks: &self.tasks,
            runs: &self.runs,
            out: &self.out,
            previous: self.previous.as_deref(),
            allow_empty: self.allow_empty,
        }
    }
}

/// What a build did, for the summary line.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub runs: usize,
    pub samples: usize,
    /// First-round samples by outcome.
    pub passes: u64,
    pub fails: u64,
    pub errors: u64,
    /// Follow-ups (feedback and review rounds) by outcome: (passes, failures, errors).
    pub follow_ups: (u64, u64, u64),
    pub cells: usize,
    pub skipped: usize,
    pub files: usize,
    pub bytes: u64,
    /// Bytes of transcript files read.
    pub read_bytes: u64,
    /// Samples whose verdict came from the cache (`--cache`), and whether the site was updated
    /// in place rather than rebuilt beside it.
    pub reused: usize,
    pub in_place: bool,
    /// Groups of summary pages (a model's, a task's, a tag's or a label's page with its charts)
    /// left as the previous build wrote them, of how many (with `--cache`).
    pub pages_kept: (usize, usize),
}

/// Runs the whole build and reports what it read and skipped on stderr.
pub fn build(opts: &Inputs) -> Result<Summary> {
    // What the site is built from never lies inside what it replaces (SPEC §12).
    for (flag, p) in [("--runs", &opts.runs), ("--tasks", &opts.tasks)] {
        if owned::within(p, &opts.out) {
            bail!(
                "{flag} {} is inside --out {}: a build replaces --out, so its inputs must lie outside it; move them beside the site",
                p.display(),
                opts.out.display()
            );
        }
    }
    // Before anything looks at --out: an update an interrupted in-place build committed is
    // finished, so the site is the one that build wrote, whole (SPEC §12, turn 5).
    for tmp in write::finish_interrupted(&opts.out)? {
        eprintln!(
            "finished the update of {} that an interrupted build committed in {}",
            opts.out.display(),
            tmp.display()
        );
    }
    let site_url = opts
        .site_url
        .as_deref()
        .map(crate::site::card::site_url)
        .transpose()
        .map_err(|e| {
            anyhow::anyhow!(
                "--site-url {:?}: {e}; give the address the site is published at, e.g. https://you.github.io/conformance/",
                opts.site_url.as_deref().unwrap_or_default()
            )
        })?;
    if let Some(c) = &opts.cache {
        for (flag, p) in [("--runs", &opts.runs), ("--tasks", &opts.tasks)] {
            if owned::within(c, p) {
                bail!(
                    "--cache {} is inside {flag} {}: it would be committed with them; put it beside them",
                    c.display(),
                    p.display()
                );
            }
        }
    }
    if let Some(c) = &opts.cache
        && cache::inside(c, &opts.out)
    {
        bail!(
            "--cache {} is inside --out {}: it would be published; put it beside the site",
            c.display(),
            opts.out.display()
        );
    }
    // The previous build as its cache tells it, when the site in --out is still the one it
    // wrote (nobody rebuilt or replaced it since): that build's outcomes, for the changes page,
    // are then the cache's, and the 'previous' samples.csv in the site need not be read.
    let mut prior = opts.cache.as_deref().map(cache::load).unwrap_or_default();
    // Before anything under runs/ is looked at: the looks recorded must have been settled
    // before it.
    let stamp = opts.cache.as_deref().and_then(cache::disk_now);
    // The previous build's pooled comparisons, whatever becomes of the rest of its cache: they
    // are functions of their counts alone.
    let memo = crate::stats::compare::Memo::new(
        prior.site.as_mut().map(|s| std::mem::take(&mut s.pooled)),
    );
    let out_identity = write::canonical_out(&opts.out);
    // A site this build may update in place carries its marker (then nothing else is looked
    // at: the cache vouches that the site is the one it wrote); any other --out is looked at
    // whole before anything is read, and refused unless it is a build's own.
    let marked = owned::marker(&opts.out);
    let inspected = match marked {
        Some(_) if prior.site.is_some() => None,
        _ => Some(owned::inspect(&opts.out)?),
    };
    let site_current = prior.site.as_ref().is_some_and(|s| {
        marked.is_some()
            && s.out == out_identity
            && crate::fsafe::read_own(&opts.out.join("data").join("manifest.json"), 256 << 20)
                .is_ok_and(|m| crate::task::sha256_hex(&m) == s.manifest_sha256)
    });
    let changes_told = site_current && opts.previous.is_none();
    let inputs = read::read(&opts.sources(), !changes_told, &prior)?;
    say_what_was_read(opts, &inputs);
    // Comparisons (SPEC §9): the flags are checked and the baseline read before any work.
    let explicit = crate::compare::parse_pairs(&opts.compare)?;
    let baseline = match &opts.baseline {
        Some(p) => Some(crate::compare::load_baseline(
            p,
            &inputs.tasks,
            opts.interval,
        )?),
        None => None,
    };
    let Loaded {
        tasks,
        runs,
        mut skipped,
        previous,
        changed_tasks: _,
        listings,
    } = inputs;

    // The matrix's models are those with a sample; its tasks are the whole corpus.
    let cells = runs
        .iter()
        .filter(|r| !r.run.samples.is_empty())
        .map(|r| r.run.model.as_str())
        .collect::<BTreeSet<&str>>()
        .len()
        * tasks.len();
    let matrix_on_index = crate::site::matrix::index_draws_matrix(cells);
    // The previous build's pages can be kept where they are only when the site in --out is
    // still exactly the one it wrote. (Run pages link their cell where it is drawn: when that
    // moved, every run page changes.)
    let in_place = site_current
        && prior
            .site
            .as_ref()
            .is_some_and(|s| s.matrix_on_index == matrix_on_index && s.site_url == site_url);
    // Not in place, nothing of the previous build is reused (its outcomes may still be told).
    let mut prior = if in_place || changes_told {
        prior
    } else {
        cache::Prior::default()
    };
    let mut site = match marked {
        Some(files) if in_place => SiteWriter::in_place(&opts.out, files)?,
        _ => {
            if inspected.is_none() {
                owned::inspect(&opts.out)?;
            }
            SiteWriter::begin(&opts.out)?
        }
    };
    let tx = site.sender()?;
    let record = opts.cache.is_some();
    // Each run decodes its own record of the previous cache when it is built, so the records
    // are never all decoded at once. In place, the pages of the previous build's record that
    // this build does not write again are removed at the end.
    let progress = progress::Progress::start(runs.len());
    let outcomes: Vec<Result<RunOutcome>> = runs
        .par_iter()
        .map_with(tx, |tx, r| {
            let task = &tasks[r.task];
            let path = r.run.rel();
            let prior = prior.run(&path);
            let reuse = Reuse {
                prior,
                in_place,
                record,
                cells,
                changes: changes_told,
                site_url: site_url.as_deref(),
                stamp,
            };
            let outcome = run_samples(&opts.runs, r, task, reuse, tx);
            if let Ok(o) = &outcome {
                progress.run_done(o.scored.len(), o.pages.0);
            }
            outcome
        })
        .collect();
    progress.summary_pages();
    // All senders are gone once the map is done; the writer drains and ends.
    site.drain()?;
    let mut scored = Vec::with_capacity(
        outcomes
            .iter()
            .map(|o| o.as_ref().map_or(0, |o| o.scored.len()))
            .sum(),
    );
    let mut transcripts = BTreeMap::new();
    let mut read_bytes = 0u64;
    let mut pages = (0usize, 0u64);
    let mut reused = 0;
    let mut next = cache::CacheFile {
        identity: cache::identity(),
        ..Default::default()
    };
    if record {
        // Only listings whose look a later build may trust.
        next.listings = listings
            .into_iter()
            .filter(|l| stamp.is_some_and(|st| l.look.settled_before(st)))
            .map(|l| (l.rel, (l.look, l.names)))
            .collect();
    }
    let mut run_stale: Vec<String> = Vec::new();
    let mut run_changes = Vec::new();
    let mut changes_unknown = false;
    for (o, r) in outcomes.into_iter().zip(&runs) {
        let mut o = o?;
        run_stale.append(&mut o.stale);
        run_changes.push(o.changes);
        changes_unknown |= o.changes_unknown;
        scored.extend(o.scored);
        let path = r.run.rel();
        skipped.extend(o.skipped);
        read_bytes += o.bytes;
        reused += o.reused;
        pages.0 += o.pages.0;
        pages.1 += o.pages.1;
        if record {
            next.runs.insert(path.clone(), o.cached);
        }
        transcripts.insert(path, o.listing_sha256);
    }
    // The pages of runs the previous build had and this one has not; then the previous cache's
    // bytes are no longer needed.
    let now: BTreeSet<String> = runs.iter().map(|r| r.run.rel()).collect();
    for path in prior.paths().filter(|p| in_place && !now.contains(*p)) {
        run_stale.extend(prior.run(path).map(|c| c.pages(path)).unwrap_or_default());
    }
    drop(now);
    // The previous cache's bytes stay until the next cache has copied its unchanged records.
    let mut prior_site = prior.site.take();
    // The summary pages' groups are recorded for the next build when there is a cache, and
    // those of the previous build kept where their inputs did not change (in place only: a site
    // built beside the previous one holds none of its files).
    let groups = record.then(|| {
        let prior = prior_site
            .as_mut()
            .filter(|_| in_place)
            .map(|s| std::mem::take(&mut s.groups))
            .unwrap_or_default();
        cache::GroupBook::new(&opts.out, prior)
    });
    skipped.sort();
    progress.suspend(|| {
        for s in &skipped {
            eprintln!("skipped {}: {}", s.path, s.reason);
        }
    });
    let n_samples = scored.len();
    // A record the cache could not read back: the previous outcomes come from the site, which
    // an in-place build has not touched yet (its update is staged beside it).
    let previous = match (changes_told && changes_unknown, previous) {
        (true, _) => read::read_previous(&opts.sources())?,
        (false, p) => p,
    };
    let changes_told = changes_told && !changes_unknown;
    let previous = match (changes_told, previous) {
        (true, _) => aggregate::Previous::Told(crate::site::data::Changes::gather(
            prior_site.as_ref().map_or(0, |s| s.samples),
            run_changes,
        )),
        (false, Some(p)) => aggregate::Previous::Outcomes(p),
        (false, None) => aggregate::Previous::Unknown,
    };
    let agg = aggregate::aggregate(
        scored,
        &tasks,
        &runs,
        previous,
        opts.interval,
        opts.reliable_at,
    );
    let comparisons = crate::compare::comparisons(
        &agg.matrix,
        &crate::compare::row_settings(&agg.models),
        &explicit,
        baseline.as_ref(),
        &agg.matrix.tasks,
        &memo,
    )?;
    let pooled = memo.remembered();
    let (mut files, manifest, saving) = write_summary(
        opts,
        &site,
        &agg,
        &tasks,
        &skipped,
        &transcripts,
        &comparisons,
        groups
            .as_ref()
            .map(|g| g as &dyn crate::site::reuse::Groups),
        &mut next,
        &prior,
        &runs,
        stamp,
    )?;
    drop(prior);
    let pages_kept = groups.as_ref().map(|g| g.kept()).unwrap_or_default();
    let groups = groups.map(|g| g.finish(&mut files)).unwrap_or_default();
    // In place, the previous build's files this one does not have are removed.
    let stale: Vec<String> = if in_place {
        let now: BTreeSet<&str> = files.keys().map(String::as_str).collect();
        let mut stale: Vec<String> = prior_site
            .iter()
            .flat_map(|s| s.summary_files.keys())
            .filter(|f| !now.contains(f.as_str()))
            .cloned()
            .collect();
        stale.extend(run_stale);
        stale
    } else {
        Vec::new()
    };
    let (carried, carried_bytes) = site.finish(&stale)?;
    progress.finish();
    if let Some(saving) = saving {
        saving.finish(&Some(cache::CachedSite {
            // Named again now that the site exists (a folder that did not exist at the start
            // could only be named absolutely, not resolved).
            out: write::canonical_out(&opts.out),
            manifest_sha256: manifest,
            summary_files: files.clone(),
            matrix_on_index,
            site_url: site_url.clone(),
            groups,
            samples: n_samples as u64,
            pooled,
        }))?;
    }
    let (passes, fails, errors) = agg.matrix.outcome_counts();
    let summary = Summary {
        runs: runs.len(),
        samples: n_samples,
        passes,
        fails,
        errors,
        follow_ups: agg.matrix.follow_up_counts(),
        cells: agg.matrix.cells.len(),
        skipped: skipped.len(),
        files: pages.0 + files.len() + carried,
        bytes: pages.1 + files.values().sum::<u64>() + carried_bytes,
        read_bytes,
        reused,
        in_place,
        pages_kept,
    };
    // The build's state is millions of small allocations; freeing them one by one took a tenth
    // of a rebuild's wall time (BFCL-shaped, 35,000 runs), after the site was done. They are
    // freed on a thread of their own: a caller that goes on gets the memory back, and a
    // process that exits does not wait for it.
    let state = (
        (agg, runs, tasks, transcripts, skipped, files),
        (comparisons, next, prior_site),
    );
    let _ = std::thread::Builder::new()
        .name("free".into())
        .spawn(move || drop(state));
    Ok(summary)
}

/// Stage 4 and 5 for everything but the samples' pages: renders and writes the summary files
/// while the cache's runs are written. Returns each summary file's size, the manifest's sha256
/// and the cache, still to be finished with the site's record.
#[allow(clippy::too_many_arguments)]
fn write_summary(
    opts: &Inputs,
    site: &SiteWriter,
    agg: &aggregate::Aggregates,
    tasks: &[Task],
    skipped: &[SkippedInput],
    transcripts: &BTreeMap<String, String>,
    comparisons: &[crate::compare::Comparison],
    groups: Option<&dyn crate::site::reuse::Groups>,
    next: &mut cache::CacheFile,
    prior: &cache::Prior,
    runs: &[RunInput],
    stamp: Option<crate::runs::DiskTime>,
) -> Result<(BTreeMap<String, u64>, String, Option<cache::Saving>)> {
    // Each summary file is written as it is rendered; only its name, size and (the manifest's)
    // hash are kept. Meanwhile the cache's runs are written: each run's verdicts are taken from
    // the matrix as the run is written out, so the cache's copy of them never exists for all
    // samples at once.
    let written: std::sync::Mutex<(BTreeMap<String, u64>, String)> = Default::default();
    let sink = |(path, bytes): crate::site::File| {
        site.summary_file(&path, &bytes)
            .map_err(|e| crate::site::SiteError::Write(format!("{e:#}")))?;
        let mut w = written
            .lock()
            .map_err(|_| crate::site::SiteError::Write("a page writer failed".into()))?;
        if path == "data/manifest.json" {
            w.1 = crate::task::sha256_hex(&bytes);
        }
        w.0.insert(path, bytes.len() as u64);
        Ok(())
    };
    let (rendered, saving) = rayon::join(
        || {
            // Checked when the build began.
            let site_url = opts
                .site_url
                .as_deref()
                .and_then(|u| crate::site::card::site_url(u).ok());
            render::summary(
                agg,
                tasks,
                skipped,
                transcripts,
                comparisons,
                groups,
                site_url.as_deref(),
                &sink,
            )
        },
        || {
            let Some(dir) = &opts.cache else {
                return Ok(None);
            };
            // Where each run's samples and folder are, made when a run is first filled: a
            // rebuild that copies every record from the previous cache fills none.
            let mut index: Option<RunIndex> = None;
            cache::save_runs(dir, next, prior, |path, run| {
                let (by_run, run_dirs) = index.get_or_insert_with(|| run_index(&agg.matrix, runs));
                // What the scan read, for the next scan: taken from the run as it is written, so
                // that no second copy of it lives through the build.
                run.folders = run_dirs.get(path).and_then(|r| {
                    Some(cache::CachedFolders {
                        look: r
                            .look
                            .filter(|l| stamp.is_some_and(|st| l.settled_before(st)))?,
                        seen: crate::runs::SeenRun {
                            cell_json: r.cell_json.clone(),
                            cell_sha256: r.cell_sha256.clone(),
                            samples: r.samples.clone(),
                        },
                    })
                });
                let Some((feedback, range)) = by_run.get(path) else {
                    return;
                };
                let of = if *feedback {
                    &agg.matrix.feedback
                } else {
                    &agg.matrix.samples
                };
                for sc in &of[range.clone()] {
                    if let Some(c) = run.samples.get_mut(&sc.key.sample) {
                        c.scored = Some(Box::new(cache::CachedScored::of(sc)));
                    }
                }
            })
            .map(Some)
        },
    );
    rendered?;
    let saving = saving?;
    let (files, manifest) = written
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a page writer failed"))?;
    Ok((files, manifest, saving))
}

/// Per run folder (relative to the runs root): where its samples are in the matrix (whether
/// among the feedback samples, and their range), and its folder as scanned.
type RunIndex<'a> = (
    BTreeMap<String, (bool, std::ops::Range<usize>)>,
    BTreeMap<String, &'a crate::runs::RunDir>,
);

fn run_index<'a>(matrix: &crate::report::Matrix, runs: &'a [RunInput]) -> RunIndex<'a> {
    // The matrix's samples are in key order, so each run's are consecutive; so are the
    // feedback samples'.
    let mut by_run = BTreeMap::new();
    for (feedback, samples) in [(false, &matrix.samples), (true, &matrix.feedback)] {
        let mut at = 0;
        for run in samples.chunk_by(|a, b| {
            let (a, b) = (&a.key, &b.key);
            a.run == b.run && a.task == b.task && a.model == b.model
        }) {
            by_run.insert(run[0].key.run_folder(), (feedback, at..at + run.len()));
            at += run.len();
        }
    }
    let run_dirs = runs.iter().map(|r| (r.run.rel(), &r.run)).collect();
    (by_run, run_dirs)
}

/// The "read …" lines: run folders, samples, models, and tasks whose file changed.
fn say_what_was_read(opts: &Inputs, inputs: &Loaded) {
    let models: BTreeSet<&str> = inputs.runs.iter().map(|r| r.run.model.as_str()).collect();
    eprintln!(
        "read {} run director{} from {}: {} samples, {} model{}",
        inputs.runs.len(),
        if inputs.runs.len() == 1 { "y" } else { "ies" },
        opts.runs.display(),
        inputs.samples(),
        models.len(),
        if models.len() == 1 { "" } else { "s" }
    );
    for (t, n) in &inputs.changed_tasks {
        eprintln!(
            "note: task {t} changed since {n} of its run{} {} collected: scored against the tools as sent, flagged on its pages",
            if *n == 1 { "" } else { "s" },
            if *n == 1 { "was" } else { "were" }
        );
    }
}
