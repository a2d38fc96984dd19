//! `callcheck build`: read runs/ and tasks/, re-score every transcript with the current checkers,
//! aggregate, and write the static site. Never touches the network; the same inputs give a
//! byte-identical site whatever the thread count.
//!
//! The site is written into a temporary folder beside `--out` and swapped into place at the end,
//! so a failed build leaves the previous site as it was.

use crate::cli::BuildOpts;
use crate::report::{self, SampleKey, Scored, TaskInfo};
use crate::runs::{self, RunDir};
use crate::score::score;
use crate::site::export::{self, SkippedInput};
use crate::site::{self, ModelInfo, SiteInput, transcript};
use crate::task::{Task, sha256_hex};
use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Files a publisher keeps in the site folder by hand; they are carried into each new build.
const CARRIED: [&str; 4] = ["CNAME", "README.md", ".gitignore", ".gitkeep"];

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
}

pub fn run(opts: &BuildOpts) -> Result<()> {
    let s = build(opts)?;
    eprintln!(
        "built {}: {} samples ({} of transcripts) in {} cells from {} runs ({} passed, {} failed, {} transport errors); {} skipped; {} files, {}",
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

/// One sample to score: which run, which sample folder.
struct Job<'a> {
    run: &'a RunDir,
    task: &'a Task,
    task_changed: bool,
    sample: &'a str,
}

/// A scored sample and the hashes of the files it was read from.
struct Done {
    scored: Scored,
    hashes: Vec<(String, String)>,
    bytes: u64,
    /// Damaged files of the sample (scored anyway), reported like skipped inputs.
    damaged: Vec<SkippedInput>,
}

fn rel(root: &Path, p: &Path) -> String {
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

/// True when `dir` may be replaced: absent, empty, a previous build, or holding only the
/// carried files.
fn replaceable(dir: &Path) -> Result<bool> {
    if !dir.exists() {
        return Ok(true);
    }
    if !dir.is_dir() {
        bail!("--out {} exists and is not a folder", dir.display());
    }
    if dir.join("data").join("manifest.json").is_file() {
        return Ok(true);
    }
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if !CARRIED.contains(&name.as_str()) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A rendered page on its way to the writer thread: where it goes, its bytes, and the same
/// page in the previous site when that one is byte-identical.
type Page = (PathBuf, String, Option<PathBuf>);

/// Writes pages one at a time. On this kind of machine (and on many network or virtualised file
/// systems) creating files from several threads at once is several times *slower* than from
/// one: the creates serialise on the directory and journal locks and the threads then fight
/// over them. So scoring and rendering run on all cores and a single thread does the writes.
///
/// A page identical to the previous site's is hard-linked rather than written: the new site's
/// bytes are the same either way, but a link allocates no inode now and frees no data block
/// when the previous site is removed after the swap, which on ext4 is most of the cost of
/// rebuilding a large site (its inode allocator slows down after mass deletions, and freeing
/// blocks waits on the journal). Where links are not supported, the page is written.
fn writer(rx: std::sync::mpsc::Receiver<Page>) -> Result<()> {
    // Only to skip redundant mkdir calls; its order never reaches the output.
    let mut made: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    for (path, html, same) in rx {
        if let Some(parent) = path.parent()
            && !made.contains(parent)
        {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
            made.insert(parent.to_path_buf());
        }
        if let Some(old) = same
            && std::fs::hard_link(&old, &path).is_ok()
        {
            continue;
        }
        std::fs::write(&path, html).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn process(
    job: &Job,
    tmp: &Path,
    runs_root: &Path,
    previous_site: Option<&Path>,
    pages: &std::sync::mpsc::SyncSender<Page>,
) -> Result<std::result::Result<Done, SkippedInput>> {
    let dir = job.run.sample_dir(job.sample);
    let files = match job.run.read_sample(job.sample) {
        Ok(f) => f,
        Err(e) => {
            return Ok(Err(SkippedInput {
                path: rel(runs_root, &dir),
                reason: format!("sample not readable: {e}"),
            }));
        }
    };
    let base = rel(runs_root, &dir);
    let mut hashes = vec![(format!("{base}/request.json"), sha256_hex(&files.request))];
    let response = if files.streamed {
        "response.sse"
    } else {
        "response.json"
    };
    hashes.push((format!("{base}/{response}"), sha256_hex(&files.response)));
    if !files.meta.is_empty() {
        hashes.push((format!("{base}/meta.json"), sha256_hex(&files.meta)));
    }
    let bytes = (files.request.len() + files.response.len() + files.meta.len()) as u64;
    let damaged = files.damage().into_iter().map(|reason| SkippedInput {
        path: base.clone(),
        reason,
    });
    let t = files.transcript();
    let verdict = score(job.task, &t);
    let key = SampleKey {
        model: job.run.model.clone(),
        task: job.run.task_id.clone(),
        run: job.run.run_id.clone(),
        sample: job.sample.to_string(),
    };
    let html = transcript::render(&transcript::SampleContext {
        key: &key,
        task: job.task,
        cell: &job.run.cell,
        files: &files,
        request: t.request.as_ref(),
        meta: t.meta.as_ref(),
        verdict: &verdict,
        task_changed: job.task_changed,
    })
    .with_context(|| format!("rendering the page of {base}"))?;
    let permalink = key.permalink();
    let same = previous_site
        .map(|p| p.join(&permalink))
        .filter(|old| std::fs::read(old).is_ok_and(|b| b == html.as_bytes()));
    pages
        .send((tmp.join(&permalink), html, same))
        .map_err(|_| anyhow::anyhow!("the page writer stopped"))?;
    let metrics = crate::hitec::sample_metrics(job.task, &verdict);
    Ok(Ok(Done {
        scored: Scored {
            key,
            outcome: verdict.outcome,
            stage: verdict.stage,
            hitec: crate::hitec::crosswalk(&verdict),
            value_match: verdict.value_match,
            extra_prose: verdict.extra_prose,
            task_changed: job.task_changed,
            response: crate::report::distinct::fingerprint(&files.response, files.streamed),
            metrics,
            detail: verdict.detail,
        },
        hashes,
        bytes,
        damaged: damaged.collect(),
    }))
}

/// Runs the whole build and reports what it read and skipped on stderr.
pub fn build(opts: &BuildOpts) -> Result<Summary> {
    let tasks = crate::task::load(&opts.tasks)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot load the tasks from {}", opts.tasks.display()))?;
    eprintln!(
        "read {} task{} from {}",
        tasks.len(),
        if tasks.len() == 1 { "" } else { "s" },
        opts.tasks.display()
    );
    if !opts.runs.is_dir() {
        bail!(
            "no runs folder at {} (run `callcheck collect` first, or pass --runs)",
            opts.runs.display()
        );
    }
    if !replaceable(&opts.out)? {
        bail!(
            "--out {} holds files that are not a callcheck site; refusing to replace it (choose an empty or new folder)",
            opts.out.display()
        );
    }
    // Read the previous build's outcomes before anything can replace them.
    let previous_csv = match &opts.previous {
        Some(p) => p.clone(),
        None => opts.out.join("data").join("samples.csv"),
    };
    let previous = match std::fs::read(&previous_csv) {
        Ok(bytes) => match export::read_previous(&bytes) {
            Ok(p) => Some(p),
            Err(e) if opts.previous.is_some() => {
                bail!(
                    "--previous {}: not a samples.csv this build can read: {e}",
                    previous_csv.display()
                )
            }
            Err(e) => {
                eprintln!(
                    "warning: {} is not a samples.csv this build can read ({e}); no changes page",
                    previous_csv.display()
                );
                None
            }
        },
        Err(e) if opts.previous.is_some() => {
            bail!("--previous {}: cannot read: {e}", previous_csv.display())
        }
        Err(_) => None,
    };

    let by_id: BTreeMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let scan = runs::scan(&opts.runs);
    let mut skipped: Vec<SkippedInput> = scan
        .skipped
        .iter()
        .map(|s| SkippedInput {
            path: rel(&opts.runs, &s.path),
            reason: s.reason.clone(),
        })
        .collect();
    let mut jobs = Vec::new();
    let mut used_runs: Vec<&RunDir> = Vec::new();
    let mut changed: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &scan.runs {
        let Some(task) = by_id.get(r.task_id.as_str()) else {
            skipped.push(SkippedInput {
                path: rel(&opts.runs, &r.dir),
                // No local path here: the reason is published on the site.
                reason: format!("task {:?} is not in the task corpus", r.task_id),
            });
            continue;
        };
        let task_changed = r.cell.task.sha256 != task.sha256;
        if task_changed {
            *changed.entry(task.id.as_str()).or_default() += 1;
        }
        used_runs.push(r);
        for s in &r.samples {
            jobs.push(Job {
                run: r,
                task,
                task_changed,
                sample: s,
            });
        }
    }
    if jobs.is_empty() && !opts.allow_empty {
        bail!(
            "no sample to build in {} ({} run director{} skipped): collect first, check --runs, or pass --allow-empty to build an empty site",
            opts.runs.display(),
            skipped.len(),
            if skipped.len() == 1 { "y" } else { "ies" }
        );
    }
    let models: BTreeSet<&str> = used_runs.iter().map(|r| r.model.as_str()).collect();
    eprintln!(
        "read {} run director{} from {}: {} samples, {} model{}",
        used_runs.len(),
        if used_runs.len() == 1 { "y" } else { "ies" },
        opts.runs.display(),
        jobs.len(),
        models.len(),
        if models.len() == 1 { "" } else { "s" }
    );
    for (t, n) in &changed {
        eprintln!(
            "note: task {t} changed since {n} of its run{} {} collected: scored against the tools as sent, flagged on its pages",
            if *n == 1 { "" } else { "s" },
            if *n == 1 { "was" } else { "were" }
        );
    }

    // A previous build's pages can be reused when identical (see `writer`).
    let previous_site = opts
        .out
        .join("data")
        .join("manifest.json")
        .is_file()
        .then_some(opts.out.as_path());
    let (tmp, parent, name) = temp_dir(&opts.out)?;
    let result = (|| -> Result<Summary> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Page>(512);
        let written = std::thread::spawn(move || writer(rx));
        let done: Vec<Result<std::result::Result<Done, SkippedInput>>> = jobs
            .par_iter()
            .map_with(tx, |tx, j| process(j, &tmp, &opts.runs, previous_site, tx))
            .collect();
        // All senders are gone once the map is done; the writer drains and ends.
        match written.join() {
            Ok(r) => r?,
            Err(_) => bail!("the page writer panicked"),
        }
        let mut scored = Vec::with_capacity(done.len());
        let mut transcripts = BTreeMap::new();
        let mut read_bytes = 0u64;
        for d in done {
            match d? {
                Ok(d) => {
                    skipped.extend(d.damaged);
                    scored.push(d.scored);
                    transcripts.extend(d.hashes);
                    read_bytes += d.bytes;
                }
                Err(s) => skipped.push(s),
            }
        }
        skipped.sort();
        for s in &skipped {
            eprintln!("skipped {}: {}", s.path, s.reason);
        }
        let infos: Vec<TaskInfo> = tasks
            .iter()
            .map(|t| TaskInfo {
                id: t.id.clone(),
                title: t.title.clone(),
                tags: t.tags.clone(),
            })
            .collect();
        let n_samples = scored.len();
        let matrix = report::aggregate(scored, infos, opts.interval);
        let changes = previous
            .as_ref()
            .map(|p| export::changes(p, &matrix))
            .filter(|c| !c.is_empty());
        let model_info = model_info(&used_runs);
        let task_hashes: BTreeMap<String, String> = tasks
            .iter()
            .map(|t| (t.id.clone(), t.sha256.clone()))
            .collect();
        let files = site::render_site(&SiteInput {
            matrix: &matrix,
            tasks: &tasks,
            models: &model_info,
            skipped: &skipped,
            changes: changes.as_ref(),
            task_hashes: &task_hashes,
            transcripts: &transcripts,
        })?;
        for (path, bytes) in &files {
            let p = tmp.join(path);
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d)
                    .with_context(|| format!("cannot create {}", d.display()))?;
            }
            std::fs::write(&p, bytes).with_context(|| format!("cannot write {}", p.display()))?;
        }
        for c in CARRIED {
            let from = opts.out.join(c);
            if from.is_file() {
                std::fs::copy(&from, tmp.join(c))
                    .with_context(|| format!("cannot carry {} over", from.display()))?;
            }
        }
        let (passes, fails, errors) = matrix.outcome_counts();
        let (n_files, bytes) = tree_size(&tmp)?;
        Ok(Summary {
            runs: used_runs.len(),
            samples: n_samples,
            passes,
            fails,
            errors,
            cells: matrix.cells.len(),
            skipped: skipped.len(),
            files: n_files,
            bytes,
            read_bytes,
        })
    })();
    match result {
        Ok(summary) => {
            swap(&tmp, &opts.out, &parent, &name)?;
            Ok(summary)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

fn model_info(runs: &[&RunDir]) -> BTreeMap<String, ModelInfo> {
    let mut out: BTreeMap<String, ModelInfo> = BTreeMap::new();
    let mut versions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in runs {
        let info = out.entry(r.model.clone()).or_default();
        if !info.entries.contains(&r.cell.model) {
            info.entries.push(r.cell.model.clone());
        }
        if !r.cell.server.is_null() && !info.servers.contains(&r.cell.server) {
            info.servers.push(r.cell.server.clone());
        }
        versions
            .entry(r.model.clone())
            .or_default()
            .insert(r.cell.callcheck_version.clone());
        info.runs.push((
            r.task_id.clone(),
            r.run_id.clone(),
            r.cell.k,
            r.cell.started.clone(),
            r.cell.ended.clone(),
        ));
    }
    for (m, v) in versions {
        if let Some(i) = out.get_mut(&m) {
            i.versions = v.into_iter().collect();
            i.runs.sort();
        }
    }
    out
}

/// The temporary folder beside `out` (same file system, so the final rename is atomic), emptied
/// if a crashed build left one behind.
fn temp_dir(out: &Path) -> Result<(PathBuf, PathBuf, String)> {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "site".into());
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).with_context(|| format!("cannot clear {}", tmp.display()))?;
    }
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    Ok((tmp, parent, name))
}

fn swap(tmp: &Path, out: &Path, parent: &Path, name: &str) -> Result<()> {
    if out.exists() {
        let old = parent.join(format!(".{name}.old-{}", std::process::id()));
        if old.exists() {
            std::fs::remove_dir_all(&old)
                .with_context(|| format!("cannot clear {}", old.display()))?;
        }
        std::fs::rename(out, &old)
            .with_context(|| format!("cannot move the previous site {} aside", out.display()))?;
        if let Err(e) = std::fs::rename(tmp, out) {
            // Put the previous site back: never leave no site at all.
            let _ = std::fs::rename(&old, out);
            return Err(e)
                .with_context(|| format!("cannot move the new site into {}", out.display()));
        }
        std::fs::remove_dir_all(&old)
            .with_context(|| format!("cannot remove the previous site at {}", old.display()))?;
    } else {
        std::fs::rename(tmp, out)
            .with_context(|| format!("cannot move the new site into {}", out.display()))?;
    }
    Ok(())
}

fn tree_size(dir: &Path) -> Result<(usize, u64)> {
    let mut n = 0;
    let mut bytes = 0;
    for e in walkdir::WalkDir::new(dir) {
        let e = e.with_context(|| format!("cannot read {}", dir.display()))?;
        if e.file_type().is_file() {
            n += 1;
            bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    Ok((n, bytes))
}
