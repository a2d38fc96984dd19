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
use crate::report::Scored;
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
    let site_url = check_places(opts)?;
    let mut before = Before::look(opts)?;
    let inputs = read::read(&opts.sources(), !before.changes_told, &before.prior)?;
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
        skipped,
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
    let (in_place, mut prior, mut site) =
        before.open_site(opts, matrix_on_index, site_url.as_deref())?;
    let (stamp, memo, changes_told) = (before.stamp, before.memo, before.changes_told);
    let record = opts.cache.is_some();
    let follow_ups = crate::evidence::follow_ups::read(&runs);
    let progress = progress::Progress::start(runs.len());
    let shared = Reuse {
        follow_ups: &follow_ups,
        prior: None,
        in_place,
        record,
        cells,
        changes: changes_told,
        site_url: site_url.as_deref(),
        stamp,
    };
    let outcomes = score_runs(opts, &runs, &tasks, &prior, &shared, &site, &progress)?;
    progress.summary_pages();
    // All senders are gone once the map is done; the writer drains and ends.
    site.drain()?;
    let g = Gathered::of(outcomes, &runs, record, listings, stamp, skipped)?;
    progress.suspend(|| {
        for s in &g.skipped {
            eprintln!("skipped {}: {}", s.path, s.reason);
        }
    });
    let ending = Ending {
        opts,
        in_place,
        record,
        stamp,
        matrix_on_index,
        changes_told,
        site_url,
    };
    let (sum, g) = ending.sum(
        g,
        &mut prior,
        &runs,
        &tasks,
        previous,
        (explicit, baseline, memo),
    )?;
    ending.write(site, &progress, prior, g, sum, runs, tasks)
}

/// What the end of a build needs to know of its start.
struct Ending<'a> {
    opts: &'a Inputs,
    in_place: bool,
    record: bool,
    stamp: Option<crate::runs::DiskTime>,
    matrix_on_index: bool,
    changes_told: bool,
    site_url: Option<String>,
}

/// The samples summed up: the matrix, the comparisons and what the summary pages keep.
struct Sum {
    agg: aggregate::Aggregates,
    comparisons: Vec<crate::compare::Comparison>,
    pooled: crate::stats::compare::Remembered,
    groups: Option<cache::GroupBook>,
    prior_site: Option<cache::CachedSite>,
    n_samples: usize,
}

impl Ending<'_> {
    /// Aggregates the samples, tells what changed and makes the comparisons; names the pages of
    /// the previous build that this one does not write again.
    #[allow(clippy::type_complexity)]
    fn sum(
        &self,
        mut g: Gathered,
        prior: &mut cache::Prior,
        runs: &[RunInput],
        tasks: &[Task],
        previous: Option<BTreeMap<String, String>>,
        (explicit, baseline, memo): (
            Vec<(String, String)>,
            Option<crate::compare::Collection>,
            crate::stats::compare::Memo,
        ),
    ) -> Result<(Sum, Gathered)> {
        let Ending {
            opts,
            in_place,
            record,
            ..
        } = *self;
        if in_place {
            g.gone_runs(prior, runs);
        }
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
        let n_samples = g.scored.len();
        let previous = self.previous(&mut g, previous, prior_site.as_ref())?;
        let agg = aggregate::aggregate(
            std::mem::take(&mut g.scored),
            tasks,
            runs,
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
        Ok((
            Sum {
                agg,
                comparisons,
                pooled,
                groups,
                prior_site,
                n_samples,
            },
            g,
        ))
    }

    /// What is known of the previous build's outcomes: told run by run from the cache, or read
    /// from its samples.csv.
    fn previous(
        &self,
        g: &mut Gathered,
        previous: Option<BTreeMap<String, String>>,
        prior_site: Option<&cache::CachedSite>,
    ) -> Result<aggregate::Previous> {
        let (opts, changes_told) = (self.opts, self.changes_told);
        // A record the cache could not read back: the previous outcomes come from the site, which
        // an in-place build has not touched yet (its update is staged beside it).
        let previous = match (changes_told && g.changes_unknown, previous) {
            (true, _) => read::read_previous(&opts.sources())?,
            (false, p) => p,
        };
        let changes_told = changes_told && !g.changes_unknown;
        let previous = match (changes_told, previous) {
            (true, _) => aggregate::Previous::Told(crate::site::data::Changes::gather(
                prior_site.map_or(0, |s| s.samples),
                std::mem::take(&mut g.run_changes),
            )),
            (false, Some(p)) => aggregate::Previous::Outcomes(p),
            (false, None) => aggregate::Previous::Unknown,
        };
        Ok(previous)
    }

    /// The cache's record of the site this build wrote.
    fn site_record(
        &self,
        manifest_sha256: String,
        files: &BTreeMap<String, u64>,
        groups: BTreeMap<String, cache::CachedGroup>,
        samples: usize,
        pooled: crate::stats::compare::Remembered,
    ) -> cache::CachedSite {
        cache::CachedSite {
            // Named again now that the site exists (a folder that did not exist at the start
            // could only be named absolutely, not resolved).
            out: write::canonical_out(&self.opts.out),
            manifest_sha256,
            summary_files: files.clone(),
            matrix_on_index: self.matrix_on_index,
            site_url: self.site_url.clone(),
            groups,
            samples: samples as u64,
            pooled,
        }
    }

    /// Writes the summary files and the cache, finishes the site and says what was done.
    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        site: SiteWriter,
        progress: &progress::Progress,
        prior: cache::Prior,
        mut g: Gathered,
        sum: Sum,
        runs: Vec<RunInput>,
        tasks: Vec<Task>,
    ) -> Result<Summary> {
        let Ending {
            opts,
            in_place,
            stamp,
            ..
        } = *self;
        let Sum {
            agg,
            comparisons,
            pooled,
            groups,
            prior_site,
            n_samples,
        } = sum;
        let (mut files, manifest, saving) = write_summary(
            opts,
            &site,
            &agg,
            &tasks,
            &g.skipped,
            &g.transcripts,
            &comparisons,
            groups
                .as_ref()
                .map(|g| g as &dyn crate::site::reuse::Groups),
            &mut g.next,
            &prior,
            &runs,
            stamp,
        )?;
        drop(prior);
        let pages_kept = groups.as_ref().map(|g| g.kept()).unwrap_or_default();
        let groups = groups.map(|g| g.finish(&mut files)).unwrap_or_default();
        // In place, the previous build's files this one does not have are removed.
        let stale = match in_place {
            true => stale_files(&files, prior_site.as_ref(), &mut g.run_stale),
            false => Vec::new(),
        };
        let (carried, carried_bytes) = site.finish(&stale)?;
        progress.finish();
        if let Some(saving) = saving {
            saving.finish(&Some(
                self.site_record(manifest, &files, groups, n_samples, pooled),
            ))?;
        }
        let summary = Summary::of(
            &agg.matrix,
            (runs.len(), n_samples),
            &g,
            (
                files.len() + carried,
                files.values().sum::<u64>() + carried_bytes,
            ),
            (in_place, pages_kept),
        );
        // The build's state is millions of small allocations; freeing them one by one took a tenth
        // of a rebuild's wall time (BFCL-shaped, 35,000 runs), after the site was done. They are
        // freed on a thread of their own: a caller that goes on gets the memory back, and a
        // process that exits does not wait for it.
        let state = ((agg, runs, tasks, g, files), (comparisons, prior_site));
        let _ = std::thread::Builder::new()
            .name("free".into())
            .spawn(move || drop(state));
        Ok(summary)
    }
}

impl Summary {
    /// What a build did: `runs` and samples read, the site's `summary` files and bytes besides
    /// the samples' pages, whether it was in place and the summary pages it kept.
    fn of(
        matrix: &crate::report::Matrix,
        (runs, samples): (usize, usize),
        g: &Gathered,
        summary: (usize, u64),
        (in_place, pages_kept): (bool, (usize, usize)),
    ) -> Summary {
        let (passes, fails, errors) = matrix.outcome_counts();
        Summary {
            runs,
            samples,
            passes,
            fails,
            errors,
            follow_ups: matrix.follow_up_counts(),
            cells: matrix.cells.len(),
            skipped: g.skipped.len(),
            files: g.pages.0 + summary.0,
            bytes: g.pages.1 + summary.1,
            read_bytes: g.read_bytes,
            reused: g.reused,
            in_place,
            pages_kept,
        }
    }
}

/// The previous build's files this one does not have: its summary files not written again,
/// then its run pages not written again.
fn stale_files(
    files: &BTreeMap<String, u64>,
    prior_site: Option<&cache::CachedSite>,
    run_stale: &mut Vec<String>,
) -> Vec<String> {
    let mut stale: Vec<String> = prior_site
        .iter()
        .flat_map(|s| s.summary_files.keys())
        .filter(|f| !files.contains_key(f.as_str()))
        .cloned()
        .collect();
    stale.append(run_stale);
    stale
}

/// Refuses a build whose inputs or cache lie where the site (or the committed inputs) would
/// take them along, finishes an update an interrupted build committed, and checks
/// `--site-url`, returning it as the cards use it.
fn check_places(opts: &Inputs) -> Result<Option<String>> {
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
    Ok(site_url)
}

/// What this build knows of the previous one before it reads anything under `runs/`.
struct Before {
    /// The previous build's cache (empty without one).
    prior: cache::Prior,
    /// The disk's time before anything under `runs/` was looked at.
    stamp: Option<crate::runs::DiskTime>,
    /// The previous build's pooled comparisons.
    memo: crate::stats::compare::Memo,
    /// The site's own files, when `--out` carries a build's marker.
    marked: Option<owned::FileSet>,
    /// `--out` looked at whole (when the cache did not vouch for it).
    inspected: Option<owned::Site>,
    /// The site in `--out` is still the one the cache's build wrote.
    site_current: bool,
    /// The previous outcomes come from the cache, not from the site's samples.csv.
    changes_told: bool,
}

impl Before {
    /// Whether the site in `--out` is updated in place, the previous cache as far as it is
    /// reused, and the site's writer.
    fn open_site(
        &mut self,
        opts: &Inputs,
        matrix_on_index: bool,
        site_url: Option<&str>,
    ) -> Result<(bool, cache::Prior, SiteWriter)> {
        let (site_current, changes_told) = (self.site_current, self.changes_told);
        let prior = std::mem::take(&mut self.prior);
        // The previous build's pages can be kept where they are only when the site in --out is
        // still exactly the one it wrote. (Run pages link their cell where it is drawn: when that
        // moved, every run page changes.)
        let in_place = site_current
            && prior.site.as_ref().is_some_and(|s| {
                s.matrix_on_index == matrix_on_index && s.site_url.as_deref() == site_url
            });
        // Not in place, nothing of the previous build is reused (its outcomes may still be told).
        let prior = if in_place || changes_told {
            prior
        } else {
            cache::Prior::default()
        };
        let site = match self.marked.take() {
            Some(files) if in_place => SiteWriter::in_place(&opts.out, files)?,
            _ => {
                if self.inspected.is_none() {
                    owned::inspect(&opts.out)?;
                }
                SiteWriter::begin(&opts.out)?
            }
        };
        Ok((in_place, prior, site))
    }

    fn look(opts: &Inputs) -> Result<Before> {
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
        Ok(Before {
            prior,
            stamp,
            memo,
            marked,
            inspected,
            site_current,
            changes_told,
        })
    }
}

/// Scores every run on the thread pool, each queueing its pages for the writer. Each run
/// decodes its own record of the previous cache when it is built, so the records are never all
/// decoded at once.
fn score_runs(
    opts: &Inputs,
    runs: &[RunInput],
    tasks: &[Task],
    prior: &cache::Prior,
    shared: &Reuse<'_>,
    site: &SiteWriter,
    progress: &progress::Progress,
) -> Result<Vec<Result<RunOutcome>>> {
    let tx = site.sender()?;
    Ok(runs
        .par_iter()
        .map_with(tx, |tx, r| {
            let reuse = Reuse {
                prior: prior.run(&r.run.rel()),
                ..*shared
            };
            let outcome = run_samples(&opts.runs, r, &tasks[r.task], reuse, tx);
            if let Ok(o) = &outcome {
                progress.run_done(o.scored.len(), o.pages.0);
            }
            outcome
        })
        .collect())
}

/// The runs' outcomes gathered, in `runs/` order.
struct Gathered {
    scored: Vec<Scored>,
    /// Run folder → sha256 of its listing, for the manifest.
    transcripts: BTreeMap<String, String>,
    read_bytes: u64,
    pages: (usize, u64),
    reused: usize,
    /// The next cache.
    next: cache::CacheFile,
    /// Pages of the runs' previous builds that this build does not write again.
    run_stale: Vec<String>,
    run_changes: Vec<crate::site::data::RunChanges>,
    changes_unknown: bool,
    /// Sorted.
    skipped: Vec<SkippedInput>,
}

impl Gathered {
    /// The pages of runs the previous build had and this one has not (in place).
    fn gone_runs(&mut self, prior: &cache::Prior, runs: &[RunInput]) {
        let now: BTreeSet<String> = runs.iter().map(|r| r.run.rel()).collect();
        for path in prior.paths().filter(|p| !now.contains(*p)) {
            self.run_stale
                .extend(prior.run(path).map(|c| c.pages(path)).unwrap_or_default());
        }
    }

    fn of(
        outcomes: Vec<Result<RunOutcome>>,
        runs: &[RunInput],
        record: bool,
        listings: Vec<crate::runs::Listing>,
        stamp: Option<crate::runs::DiskTime>,
        skipped: Vec<SkippedInput>,
    ) -> Result<Gathered> {
        let mut g = Gathered {
            scored: Vec::with_capacity(
                outcomes
                    .iter()
                    .map(|o| o.as_ref().map_or(0, |o| o.scored.len()))
                    .sum(),
            ),
            transcripts: BTreeMap::new(),
            read_bytes: 0,
            pages: (0, 0),
            reused: 0,
            next: cache::CacheFile {
                identity: cache::identity(),
                ..Default::default()
            },
            run_stale: Vec::new(),
            run_changes: Vec::new(),
            changes_unknown: false,
            skipped,
        };
        if record {
            // Only listings whose look a later build may trust.
            g.next.listings = listings
                .into_iter()
                .filter(|l| stamp.is_some_and(|st| l.look.settled_before(st)))
                .map(|l| (l.rel, (l.look, l.names)))
                .collect();
        }
        for (o, r) in outcomes.into_iter().zip(runs) {
            let mut o = o?;
            g.run_stale.append(&mut o.stale);
            g.run_changes.push(o.changes);
            g.changes_unknown |= o.changes_unknown;
            g.scored.extend(o.scored);
            let path = r.run.rel();
            g.skipped.extend(o.skipped);
            g.read_bytes += o.bytes;
            g.reused += o.reused;
            g.pages.0 += o.pages.0;
            g.pages.1 += o.pages.1;
            if record {
                g.next.runs.insert(path.clone(), o.cached);
            }
            g.transcripts.insert(path, o.listing_sha256);
        }
        g.skipped.sort();
        Ok(g)
    }
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
        || save_cache(opts, next, prior, agg, runs, stamp),
    );
    rendered?;
    let saving = saving?;
    let (files, manifest) = written
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a page writer failed"))?;
    Ok((files, manifest, saving))
}

/// Writes the cache's runs: each run's verdicts are taken from the matrix as the run is written
/// out, so the cache's copy of them never exists for all samples at once.
fn save_cache(
    opts: &Inputs,
    next: &mut cache::CacheFile,
    prior: &cache::Prior,
    agg: &aggregate::Aggregates,
    runs: &[RunInput],
    stamp: Option<crate::runs::DiskTime>,
) -> Result<Option<cache::Saving>> {
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
                c.scored = Some(Box::new(crate::evidence::cache::CachedScored::of(sc)));
            }
        }
    })
    .map(Some)
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
