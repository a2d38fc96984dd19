//! The build pipeline, one stage per module, in the order data flows: [`read`] the corpus and
//! `runs/` → [`score`] each transcript → [`aggregate`] into the matrix → [`render`] the pages →
//! [`write`] the site. Never touches the network; the same inputs give a byte-identical site
//! whatever the thread count.
//!
//! Samples stream: each run folder is read, scored and its pages rendered and queued for the
//! writer while other runs are in flight, so only the aggregates' share of each sample (a
//! [`Scored`]) outlives its run.

pub mod aggregate;
pub mod cache;
pub mod read;
pub mod render;
pub mod score;
pub mod write;

use crate::cli::BuildOpts;
use crate::report::Scored;
use crate::site::export::SkippedInput;
use crate::task::Task;
use anyhow::{Result, bail};
use rayon::prelude::*;
use read::{Inputs, RunInput};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::mpsc::SyncSender;
use write::{Page, SiteWriter};

/// What a build did, for the summary line.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub runs: usize,
    pub samples: usize,
    pub passes: u64,
    pub fails: u64,
    pub errors: u64,
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
}

/// `p` relative to `root`, `/`-separated (published: never a local path).
pub fn rel(root: &Path, p: &Path) -> String {
    let r = p.strip_prefix(root).unwrap_or(p);
    let parts: Vec<String> = r
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// One run folder after scoring: what the aggregates, the manifest and the cache keep of it.
#[derive(Debug, Default)]
pub struct RunOutcome {
    pub scored: Vec<Scored>,
    /// sha256 of the run folder's listing (cell.json and every sample file read, with their
    /// sha256), for the manifest.
    pub listing_sha256: String,
    /// Samples taken from the cache.
    pub reused: usize,
    pub skipped: Vec<SkippedInput>,
    /// Bytes of transcripts read (or, for a sample taken from the cache, that it holds).
    pub bytes: u64,
    /// Pages of the run's samples, and their bytes.
    pub pages: (usize, u64),
    /// What the cache keeps of the run for the next build.
    pub cached: cache::CachedRun,
}

/// How a run's samples are taken: all read and scored, or from the previous build where
/// nothing changed.
pub struct Reuse<'a> {
    /// The previous build's record of this run, when its `cell.json` and task are unchanged.
    pub prior: Option<&'a cache::CachedRun>,
    /// The previous build's pages are in the site being written (an in-place update), so an
    /// unchanged sample needs neither its page rendered nor written.
    pub in_place: bool,
    /// Keep a record of the run for the next build.
    pub record: bool,
}

/// Reads, scores and renders the samples of one run folder, queueing each page for the writer;
/// samples the cache vouches for are taken from it instead.
pub fn run_samples(
    runs_root: &Path,
    input: &RunInput,
    task: &Task,
    reuse: &Reuse,
    pages: &SyncSender<Page>,
) -> Result<RunOutcome> {
    let run = &input.run;
    let mut out = RunOutcome::default();
    out.cached.cell_sha256 = run.cell_sha256.clone();
    out.cached.task_sha256 = task.sha256.clone();
    let key = |name: &str| crate::report::SampleKey {
        model: run.model.clone(),
        task: run.task_id.clone(),
        run: run.run_id.clone(),
        sample: name.to_string(),
    };
    // The run's request, from its first sample: each page whose request is the same bytes links
    // to it on the run's page instead of repeating it.
    let reference: Option<render::RunRequest> = run.samples.first().and_then(|first| {
        let dir = run.sample_dir(first);
        Some(render::RunRequest {
            sample: first.clone(),
            bytes: std::fs::read(dir.join("request.json")).ok()?,
            streamed: dir.join("response.sse").is_file(),
        })
    });
    let mut fresh = false;
    for name in &run.samples {
        let prior = reuse
            .prior
            .filter(|_| reuse.in_place)
            .and_then(|p| p.samples.get(name));
        // Unchanged files (same size, time and inode as when hashed): not even read.
        if let Some(c) = prior
            && cache::signature(&run.dir, &c.files).as_ref() == Some(&c.signature)
            && let Some(scored) = c.scored.scored(key(name))
        {
            out.reused += 1;
            out.keep(scored, c.clone());
            continue;
        }
        let sample = match read::read_sample(runs_root, run, name) {
            Ok(s) => s,
            Err(skipped) => {
                out.skipped.push(skipped);
                continue;
            }
        };
        let transcript_sha256 = cache::transcript_sha256(&sample.files);
        let signature = if reuse.record {
            cache::signature(&run.dir, &sample.files).unwrap_or_default()
        } else {
            Vec::new()
        };
        // Same bytes (read again, e.g. after a fresh clone of runs/): the same verdict and page.
        if let Some(c) = prior.filter(|c| c.transcript_sha256 == transcript_sha256)
            && let Some(scored) = c.scored.scored(sample.key.clone())
        {
            let mut c = c.clone();
            c.signature = signature;
            c.files = sample.files;
            out.reused += 1;
            out.keep(scored, c);
            continue;
        }
        fresh = true;
        let (verdict, scored) = score::score_sample(task, input.task_changed, &sample);
        let same_request = reference
            .as_ref()
            .is_some_and(|r| r.bytes == sample.request_raw);
        let (path, html) = render::sample_page(
            task,
            &run.cell,
            input.task_changed,
            &sample,
            same_request,
            &verdict,
        )?;
        let page_sha256 = if reuse.record {
            crate::task::sha256_hex(html.as_bytes())
        } else {
            String::new()
        };
        let page_len = html.len() as u64;
        if !(reuse.in_place && prior.is_some_and(|c| c.page_sha256 == page_sha256)) {
            pages
                .send((path, html.into_bytes()))
                .map_err(|_| anyhow::anyhow!("the page writer stopped"))?;
        }
        let record = cache::CachedSample {
            signature,
            transcript_sha256,
            files: sample.files,
            bytes: sample.bytes,
            page_sha256,
            page_len,
            scored: cache::CachedScored::of(&scored),
        };
        out.keep(scored, record);
    }
    match &reference {
        // Unchanged in place: the run's page is already there.
        Some(_)
            if reuse.in_place && !fresh && reuse.prior.is_some_and(|p| p.run_page.is_some()) =>
        {
            out.cached.run_page = reuse.prior.and_then(|p| p.run_page);
        }
        Some(r) => {
            let (path, html) = render::run_page(task, run, r)?;
            out.cached.run_page = Some(html.len() as u64);
            pages
                .send((path, html.into_bytes()))
                .map_err(|_| anyhow::anyhow!("the page writer stopped"))?;
        }
        None => {}
    }
    let listing = crate::site::export::run_listing(
        std::iter::once(("cell.json", run.cell_sha256.as_str())).chain(
            out.cached
                .samples
                .values()
                .flat_map(|c| c.files.iter().map(|(f, h)| (f.as_str(), h.as_str()))),
        ),
    );
    out.listing_sha256 = crate::task::sha256_hex(listing.as_bytes());
    if let Some(n) = out.cached.run_page {
        out.pages.0 += 1;
        out.pages.1 += n;
    }
    if !reuse.record {
        out.cached.samples.clear();
    }
    Ok(out)
}

impl RunOutcome {
    fn keep(&mut self, scored: Scored, record: cache::CachedSample) {
        self.bytes += record.bytes;
        self.pages.0 += 1;
        self.pages.1 += record.page_len;
        self.cached
            .samples
            .insert(scored.key.sample.clone(), record);
        self.scored.push(scored);
    }
}

/// Runs the whole build and reports what it read and skipped on stderr.
pub fn build(opts: &BuildOpts) -> Result<Summary> {
    let inputs = read::read(opts)?;
    if !write::replaceable(&opts.out)? {
        bail!(
            "--out {} holds files that are not a callcheck site; refusing to replace it (choose an empty or new folder)",
            opts.out.display()
        );
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
    say_what_was_read(opts, &inputs);
    let Inputs {
        tasks,
        runs,
        mut skipped,
        previous,
        changed_tasks: _,
    } = inputs;

    let prior = opts.cache.as_deref().map(cache::load).unwrap_or_default();
    // The previous build's pages can be kept where they are only when the site in --out is
    // still exactly the one it wrote.
    let in_place = prior.site.as_ref().is_some_and(|s| {
        s.out == opts.out
            && std::fs::read(opts.out.join("data").join("manifest.json"))
                .is_ok_and(|m| crate::task::sha256_hex(&m) == s.manifest_sha256)
    });
    let mut site = if in_place {
        SiteWriter::in_place(&opts.out)
    } else {
        SiteWriter::begin(&opts.out)?
    };
    let tx = site.sender()?;
    let record = opts.cache.is_some();
    let outcomes: Vec<Result<RunOutcome>> =
        runs.par_iter()
            .map_with(tx, |tx, r| {
                let path = rel(&opts.runs, &r.run.dir);
                let task = &tasks[r.task];
                let reuse = Reuse {
                    prior: prior.runs.get(&path).filter(|c| {
                        c.cell_sha256 == r.run.cell_sha256 && c.task_sha256 == task.sha256
                    }),
                    in_place,
                    record,
                };
                run_samples(&opts.runs, r, task, &reuse, tx)
            })
            .collect();
    // All senders are gone once the map is done; the writer drains and ends.
    site.drain()?;
    let mut scored = Vec::new();
    let mut transcripts = BTreeMap::new();
    let mut read_bytes = 0u64;
    let mut pages = (0usize, 0u64);
    let mut reused = 0;
    let mut next = cache::CacheFile {
        identity: cache::identity(),
        ..Default::default()
    };
    for (o, r) in outcomes.into_iter().zip(&runs) {
        let o = o?;
        scored.extend(o.scored);
        transcripts.insert(rel(&opts.runs, &r.run.dir), o.listing_sha256);
        skipped.extend(o.skipped);
        read_bytes += o.bytes;
        reused += o.reused;
        pages.0 += o.pages.0;
        pages.1 += o.pages.1;
        if record {
            next.runs.insert(rel(&opts.runs, &r.run.dir), o.cached);
        }
    }
    skipped.sort();
    for s in &skipped {
        eprintln!("skipped {}: {}", s.path, s.reason);
    }
    let n_samples = scored.len();
    let agg = aggregate::aggregate(scored, &tasks, &runs, previous.as_ref(), opts.interval);
    let files = render::summary(&agg, &tasks, &skipped, &transcripts)?;
    // In place, the previous build's files this one does not have are removed.
    let stale: Vec<String> = if in_place {
        let now: std::collections::BTreeSet<&str> = files.iter().map(|f| f.0.as_str()).collect();
        let mut stale: Vec<String> = prior
            .site
            .iter()
            .flat_map(|s| s.summary_files.keys())
            .filter(|f| !now.contains(f.as_str()))
            .cloned()
            .collect();
        for (path, run) in &prior.runs {
            let page_now = next.runs.get(path).is_some_and(|r| r.run_page.is_some());
            if run.run_page.is_some()
                && !page_now
                && let Some((model, rest)) = path.split_once('/')
            {
                stale.push(format!("t/{model}/{rest}/index.html"));
            }
            for sample in run.samples.keys() {
                let alive = next
                    .runs
                    .get(path)
                    .is_some_and(|r| r.samples.contains_key(sample));
                if !alive && let Some((model, rest)) = path.split_once('/') {
                    stale.push(format!("t/{model}/{rest}/{sample}.html"));
                }
            }
        }
        stale
    } else {
        Vec::new()
    };
    let (carried, carried_bytes) = site.finish(&files, &stale)?;
    if let Some(dir) = &opts.cache {
        let manifest = files
            .iter()
            .find(|f| f.0 == "data/manifest.json")
            .map(|f| crate::task::sha256_hex(&f.1))
            .unwrap_or_default();
        next.site = Some(cache::CachedSite {
            out: opts.out.clone(),
            manifest_sha256: manifest,
            summary_files: files
                .iter()
                .map(|f| (f.0.clone(), f.1.len() as u64))
                .collect(),
        });
        cache::save(dir, &next)?;
    }
    let (passes, fails, errors) = agg.matrix.outcome_counts();
    Ok(Summary {
        runs: runs.len(),
        samples: n_samples,
        passes,
        fails,
        errors,
        cells: agg.matrix.cells.len(),
        skipped: skipped.len(),
        files: pages.0 + files.len() + carried,
        bytes: pages.1 + files.iter().map(|f| f.1.len() as u64).sum::<u64>() + carried_bytes,
        read_bytes,
        reused,
        in_place,
    })
}

/// The "read …" lines: run folders, samples, models, and tasks whose file changed.
fn say_what_was_read(opts: &BuildOpts, inputs: &Inputs) {
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
