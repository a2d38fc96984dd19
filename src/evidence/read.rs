//! Reading: the task corpus, the finished run folders under `runs/`, the previous build's
//! outcomes, and then (one run at a time, while scoring) each sample's files, parsed once.

use super::samples_csv;
use super::{SkippedInput, Sources, rel};
use crate::report::SampleKey;
use crate::runs::{self, RunDir, SampleFiles};
use crate::task::Task;
use crate::transcript::Transcript;
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::Path;

/// Everything the build starts from, before any sample is read.
#[derive(Debug)]
pub struct Loaded {
    /// The corpus, sorted by id.
    pub tasks: Vec<Task>,
    /// The run folders to score, in `runs/` order, each with the index of its task in `tasks`.
    pub runs: Vec<RunInput>,
    /// Inputs that were not read, and why (paths relative to the runs root).
    pub skipped: Vec<SkippedInput>,
    /// The previous build's outcome per permalink, for the changes page.
    pub previous: Option<BTreeMap<String, String>>,
    /// Task id → how many of its runs were collected for an earlier version of its file.
    pub changed_tasks: BTreeMap<String, usize>,
    /// The task folders listed, for the next build's cache.
    pub listings: Vec<runs::Listing>,
}

/// One run folder to score.
#[derive(Debug)]
pub struct RunInput {
    pub run: RunDir,
    /// Index into [`Loaded::tasks`].
    pub task: usize,
    /// The task file changed since the run was collected.
    pub task_changed: bool,
}

impl Loaded {
    /// Samples in all the runs to score.
    pub fn samples(&self) -> usize {
        self.runs.iter().map(|r| r.run.samples.len()).sum()
    }
}

/// Reads the corpus and scans `runs/`; no sample file is opened yet. Folders that look as
/// `known` saw them are not listed again.
/// With `previous_csv` false the previous build's outcomes are not read from the site (the
/// cache knows them).
pub fn read(opts: &Sources, previous_csv: bool, known: &dyn runs::Known) -> Result<Loaded> {
    // The corpus is read while the runs are scanned, and the previous export (for the changes
    // page) meanwhile; their errors are told in that order.
    let (tasks, (previous, scan)) = rayon::join(
        || crate::task::load(opts.tasks),
        || {
            rayon::join(
                || {
                    if previous_csv {
                        read_previous(opts)
                    } else {
                        Ok(None)
                    }
                },
                || runs::scan_with(opts.runs, known),
            )
        },
    );
    let mut tasks = tasks
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot load the tasks from {}", opts.tasks.display()))?;
    tasks.sort_by(|a, b| a.id.cmp(&b.id));
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
    let runs::Scan {
        runs: scanned,
        skipped: scan_skipped,
        listings,
    } = scan;
    let previous = previous?;
    let mut skipped: Vec<SkippedInput> = scan_skipped
        .iter()
        .map(|s| SkippedInput {
            path: rel(opts.runs, &s.path),
            reason: s.reason.clone(),
        })
        .collect();
    let by_id: BTreeMap<&str, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    let mut runs = Vec::with_capacity(scanned.len());
    let mut changed_tasks: BTreeMap<String, usize> = BTreeMap::new();
    for run in scanned {
        let Some(&task) = by_id.get(run.task_id.as_str()) else {
            skipped.push(SkippedInput {
                path: rel(opts.runs, &run.dir),
                // No local path here: the reason is published on the site.
                reason: format!("task {:?} is not in the task corpus", run.task_id),
            });
            continue;
        };
        if !run.cell.kind.is_samples() && run.cell.feedback.is_none() {
            skipped.push(SkippedInput {
                path: rel(opts.runs, &run.dir),
                reason: "a feedback or review run whose cell.json names no feedback style (\"feedback\": {\"style\": \"error\"|\"checklist\"|\"retry\"})".into(),
            });
            continue;
        }
        let task_changed = run.cell.task.sha256 != tasks[task].sha256;
        if task_changed {
            *changed_tasks.entry(run.task_id.clone()).or_default() += 1;
        }
        runs.push(RunInput {
            run,
            task,
            task_changed,
        });
    }
    let samples: usize = runs.iter().map(|r| r.run.samples.len()).sum();
    if samples == 0 && !opts.allow_empty {
        bail!(
            "no sample to build in {} ({} run director{} skipped): collect first, check --runs, or pass --allow-empty to build an empty site",
            opts.runs.display(),
            skipped.len(),
            if skipped.len() == 1 { "y" } else { "ies" }
        );
    }
    Ok(Loaded {
        tasks,
        runs,
        skipped,
        previous,
        changed_tasks,
        listings,
    })
}

/// The most bytes read of a previous build's `samples.csv`.
const MAX_PREVIOUS_CSV: u64 = 1 << 30;

/// The previous build's outcomes: from `--previous` (an error when unreadable) or from the
/// samples.csv already in `--out` (whole or split by model; silently absent, or a warning when
/// unreadable).
pub fn read_previous(opts: &Sources) -> Result<Option<BTreeMap<String, String>>> {
    let paths = match &opts.previous {
        Some(p) => vec![p.to_path_buf()],
        None => samples_csv::site_samples_csvs(opts.out),
    };
    if paths.is_empty() {
        return Ok(None);
    }
    let mut all = BTreeMap::new();
    for path in paths {
        // A regular file only (a FIFO given as --previous is an error that says so, not a
        // wait), streamed with a bound on the whole file (a site holds at most 1 GB on Pages)
        // and on each line (one is a few hundred bytes): a CSV parser holds a record whole, and
        // a 1 GB line took 4 GB. The site's own file is never read through a link; a file named
        // by --previous is the user's to name.
        let shown = path.display().to_string();
        let opened = if opts.previous.is_some() {
            crate::fsafe::open_shown(&path, &shown)
        } else {
            crate::fsafe::open_own(&path, &shown)
        };
        let opened = opened.and_then(|f| match f.metadata()?.len() {
            n if n > MAX_PREVIOUS_CSV => Err(std::io::Error::other(format!(
                "{shown} is {n} bytes, more than the {} MiB of a site's samples.csv",
                MAX_PREVIOUS_CSV >> 20
            ))),
            _ => Ok(f),
        });
        let read = opened.map(|f| {
            let bounded = crate::fsafe::LineBound::new(
                std::io::Read::take(f, MAX_PREVIOUS_CSV),
                samples_csv::MAX_CSV_LINE,
                "a samples.csv",
            );
            samples_csv::read_previous(std::io::BufReader::new(bounded))
        });
        match read {
            Ok(Ok(p)) => all.extend(p),
            Ok(Err(e)) if opts.previous.is_some() => {
                bail!(
                    "--previous {}: not a samples.csv this build can read: {e}",
                    path.display()
                )
            }
            Ok(Err(e)) => {
                eprintln!(
                    "warning: {} is not a samples.csv this build can read ({e}); no changes page",
                    path.display()
                );
                return Ok(None);
            }
            Err(e) if opts.previous.is_some() => {
                bail!("--previous {}: cannot read: {e}", path.display())
            }
            Err(_) => return Ok(None),
        }
    }
    Ok(Some(all))
}

/// One sample's files, read and parsed once: the raw bytes stay for display and hashing, the
/// parsed request and meta serve the scorer and the page.
#[derive(Debug)]
pub struct Sample {
    pub key: SampleKey,
    /// What the scorer reads: the parsed request and meta, and the response bytes.
    pub transcript: Transcript,
    /// `request.json` exactly as sent (the curl block shows it).
    pub request_raw: Vec<u8>,
    /// The files read, relative to the run folder (`samples/000/request.json`…), with their
    /// sha256, for the run's listing in the manifest.
    pub files: Vec<(String, String)>,
    /// Bytes read.
    pub bytes: u64,
    /// What is wrong with a damaged request.json or meta.json (the sample is scored anyway).
    pub damage: Vec<String>,
    /// How its folder and files looked when they were read (the cache's key of the sample).
    pub stats: runs::SampleStats,
}

/// Reads sample `name` of `run`; an unreadable sample becomes a skipped input.
/// `previous`, a sample of the same run read before it: when its request is the same bytes, its
/// parse and digest are taken rather than made again.
pub fn read_sample(
    runs_root: &Path,
    run: &RunDir,
    name: &str,
    previous: Option<&Sample>,
) -> std::result::Result<Sample, SkippedInput> {
    let files = run.read_sample(name).map_err(|e| SkippedInput {
        path: rel(runs_root, &run.sample_dir(name)),
        reason: format!("sample not readable: {e}"),
    })?;
    Ok(parse_sample(run, name, files, previous))
}

/// Parses the files of one sample. A request or meta that does not parse is left out (scoring
/// then falls back to the task), never an error: the sample is still data. The request of
/// `previous` is reused when it is the same bytes and parsed.
pub fn parse_sample(
    run: &RunDir,
    name: &str,
    files: SampleFiles,
    previous: Option<&Sample>,
) -> Sample {
    let same = previous.filter(|p| p.request_raw == files.request);
    let (request_parsed, meta_parsed, damage) =
        files.parse_with(same.and_then(|p| p.transcript.request.clone()));
    let request_sha = same
        .and_then(|p| p.files.first())
        .map(|(_, sha)| sha.clone());
    let SampleFiles {
        request,
        response,
        streamed,
        meta,
        meta_error: _,
        stats,
    } = files;
    let base = format!("samples/{name}");
    let sha = crate::task::sha256_hex;
    // The listing's first entry is the request's, in every sample.
    let request_sha = request_sha.unwrap_or_else(|| sha(&request));
    let mut listed = vec![(format!("{base}/request.json"), request_sha)];
    let response_name = if streamed {
        "response.sse"
    } else {
        "response.json"
    };
    listed.push((format!("{base}/{response_name}"), sha(&response)));
    if !meta.is_empty() {
        listed.push((format!("{base}/meta.json"), sha(&meta)));
    }
    let bytes = (request.len() + response.len() + meta.len()) as u64;
    Sample {
        key: SampleKey {
            model: run.model.clone(),
            task: run.task_id.clone(),
            run: run.run_id.clone(),
            sample: name.to_string(),
        },
        transcript: Transcript {
            request: request_parsed,
            body: response,
            streamed,
            meta: meta_parsed,
        },
        request_raw: request,
        files: listed,
        bytes,
        damage,
        stats,
    }
}
