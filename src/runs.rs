//! The `runs/` tree (SPEC §4): the raw material collect writes and build reads.
//!
//! ```text
//! runs/<model>/<task-id>/<run-id>/
//!     cell.json
//!     samples/<NNN>/request.json
//!     samples/<NNN>/response.json | response.sse
//!     samples/<NNN>/meta.json
//! ```
//!
//! A run directory is written under `.tmp-<run-id>` and renamed into place when complete, so
//! anything whose name starts with a dot is an unfinished write and is never read.

use crate::transcript::{Meta, Transcript};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The newest format this build of callcheck reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// `cell.json`: what was asked, by whom, of which server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellInfo {
    pub format_version: u32,
    /// The callcheck version that collected the run.
    pub callcheck_version: String,
    /// The model entry used, secrets redacted (it names the key's variable, never its value).
    /// Shared: every run of a model carries the same entry, and a build holds one copy of it
    /// ([`shared_value`]).
    #[serde(deserialize_with = "shared_value")]
    pub model: Arc<Value>,
    pub task: TaskRef,
    /// Samples in this run directory.
    pub k: u32,
    pub run_id: String,
    /// What the server said about itself: `/v1/models`, a version if it has one, preflight.
    /// Shared like `model`.
    #[serde(default, deserialize_with = "shared_value")]
    pub server: Arc<Value>,
    /// UTC timestamps, RFC 3339.
    #[serde(default)]
    pub started: String,
    #[serde(default)]
    pub ended: String,
    /// What kind of run this is: the first round of a cell (absent in `cell.json`), a
    /// feedback round over failed samples of earlier runs, or a review round over answered
    /// ones (SPEC §11).
    #[serde(default, skip_serializing_if = "RunKind::is_samples")]
    pub kind: RunKind,
    /// For a feedback or review run: how the feedback was worded and the history sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<FeedbackInfo>,
}

/// A model entry or server description of a `cell.json`, parsed once per distinct text: the
/// tens of thousands of run folders of a collection share a handful of them, and parsing each
/// copy again (then dropping it for the one kept) was 7 % of a rebuild's CPU, most of it in
/// touching fresh memory. One copy is shared while anything holds it; the text is checked as
/// JSON either way. The addresses it records are redacted as it is read
/// ([`crate::endpoint::redact_entry`]): a `cell.json` written by hand, or by a callcheck that
/// kept a key in a URL's query, never puts one on a page.
fn shared_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Arc<Value>, D::Error> {
    use std::collections::HashMap;
    use std::sync::{Mutex, Weak};
    /// The values parsed, by their text; entries no longer held are dropped as it grows.
    static SHARED: Mutex<Option<HashMap<Box<str>, Weak<Value>>>> = Mutex::new(None);
    const PRUNE_AT: usize = 4096;
    let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
    let text = raw.get();
    let held = |shared: &mut HashMap<Box<str>, Weak<Value>>| shared.get(text)?.upgrade();
    if let Ok(mut shared) = SHARED.lock()
        && let Some(v) = held(shared.get_or_insert_default())
    {
        return Ok(v);
    }
    let mut parsed: Value = serde_json::from_str(text).map_err(serde::de::Error::custom)?;
    crate::endpoint::redact_entry(&mut parsed);
    let value: Arc<Value> = Arc::new(parsed);
    if let Ok(mut guard) = SHARED.lock() {
        let shared = guard.get_or_insert_default();
        if shared.len() >= PRUNE_AT {
            shared.retain(|_, v| v.strong_count() > 0);
        }
        shared.insert(text.into(), Arc::downgrade(&value));
    }
    Ok(value)
}

/// The kind of a run folder (`cell.json`'s `kind`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// First-round samples of the task (every run before SPEC §11; `kind` absent).
    #[default]
    Samples,
    /// Follow-ups: each sample answers one failed sample of the same model and task, with that
    /// failure fed back (SPEC §11). Its `meta.json` names the parent.
    Feedback,
    /// The review round (SPEC §11, HiTEC-ICL's second round): each sample answers one
    /// first-round sample that got an answer, passing or not, with the local checklist and a
    /// request for the final call. Its `meta.json` names the parent; `feedback` in `cell.json`
    /// gives the checklist's style and the history.
    Review,
}

impl RunKind {
    pub fn is_samples(&self) -> bool {
        *self == RunKind::Samples
    }
}

/// A feedback or review run's settings (`cell.json`'s `feedback`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedbackInfo {
    /// `error`, `checklist` or `retry` (SPEC §11); a review run's is `checklist`.
    pub style: FeedbackStyle,
    /// How the model's answer went back in the history (absent in runs collected before it
    /// could be chosen: those were sent as produced).
    #[serde(default)]
    pub history: History,
}

/// How a follow-up carries the model's answer back (SPEC §11, `--feedback-history`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum History {
    /// The arguments exactly as the model produced them, broken or not: what OpenAI's SDK,
    /// LangChain and pydantic-ai send, and what vLLM and llama-server refuse when an argument
    /// string is not JSON.
    #[default]
    AsProduced,
    /// Arguments that are not valid JSON replaced with `{}`, the model's original text quoted
    /// in the feedback instead: what a router that cleans the history sends.
    Sanitised,
}

impl History {
    pub const ALL: [History; 2] = [History::AsProduced, History::Sanitised];

    pub fn as_str(&self) -> &'static str {
        match self {
            History::AsProduced => "as-produced",
            History::Sanitised => "sanitised",
        }
    }
}

/// How the failure is fed back to the model (SPEC §11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeedbackStyle {
    /// What a framework's validator says: the detail in plain words, and what to do.
    Error,
    /// HiTEC-ICL's second round: the local checklist of the offered tools.
    Checklist,
    /// A generic "That did not work; try again."
    Retry,
}

impl FeedbackStyle {
    pub const ALL: [FeedbackStyle; 3] = [
        FeedbackStyle::Error,
        FeedbackStyle::Checklist,
        FeedbackStyle::Retry,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            FeedbackStyle::Error => "error",
            FeedbackStyle::Checklist => "checklist",
            FeedbackStyle::Retry => "retry",
        }
    }
}

/// The task a cell was collected for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRef {
    pub id: String,
    /// sha256 of the task file when the run was collected.
    pub sha256: String,
}

/// One finished run directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub model: String,
    pub task_id: String,
    pub run_id: String,
    pub dir: PathBuf,
    pub cell: CellInfo,
    /// sha256 of `cell.json`'s bytes (the run's listing in the manifest starts with it).
    pub cell_sha256: String,
    /// Sample folder names (`000`, `001`…), sorted.
    pub samples: Vec<String>,
    /// How the run's folders looked just before they were read, when their listing held only
    /// sample folders (the next build may then take the listing and `cell.json` from its cache).
    pub look: Option<RunLook>,
    /// `cell.json` as read.
    pub cell_json: Vec<u8>,
}

/// How a run folder, its `cell.json` and its `samples/` folder looked (`lstat`: size,
/// modification and change times, inode).
///
/// A build with a cache lists a run and reads its `cell.json` again only when its look changed:
/// a run folder renamed into place or removed, a sample folder added or removed (`samples/`
/// changes), a `cell.json` replaced (the run's folder changes) or written in place (its own
/// look changes), a folder touched. A change time is set by the kernel and cannot be set back,
/// so even `rsync -a`, which restores modification times, shows. The files inside each sample's
/// folder have looks of their own ([`SampleLook`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunLook {
    pub run: FileStat,
    pub samples: FileStat,
    pub cell: FileStat,
}

impl RunLook {
    pub fn of(run_dir: &Path) -> Option<RunLook> {
        Some(RunLook {
            run: FileStat::look(run_dir)?,
            samples: FileStat::look(&run_dir.join("samples"))?,
            cell: FileStat::look(&run_dir.join("cell.json"))?,
        })
    }

    /// Whether a later build may trust this look ([`FileStat::settled_before`]).
    pub fn settled_before(&self, stamp: DiskTime) -> bool {
        [self.run, self.samples, self.cell]
            .iter()
            .all(|f| f.settled_before(stamp))
    }
}

/// A time as the file system keeps it (seconds and nanoseconds): a file's change time, or when a
/// build began as a file it created then says ([`DiskTime`] is never read from a clock, so a
/// build stays a function of its inputs).
pub type DiskTime = (i64, i64);

/// How one sample's folder and the files read from it looked (`lstat` and `fstat`: size, times,
/// inode), as one digest, with which files those were. A build with a cache takes a sample's
/// verdict without reading its files only when its look is the one recorded, so a transcript
/// edited in place (`sed -i`, an editor, a `git checkout`) is read and scored again: a write
/// changes a file's change time, a file renamed into the folder changes the folder's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleLook {
    /// `response.sse` was read, not `response.json`.
    pub streamed: bool,
    /// A `meta.json` was read.
    pub meta: bool,
    /// The first 16 bytes of the sha256 of the folder's and the files' [`FileStat`]s.
    pub digest: u128,
}

impl SampleLook {
    /// The names of the files a sample with this look was read from, in reading order.
    fn names(streamed: bool, meta: bool) -> impl Iterator<Item = &'static str> {
        let response = if streamed {
            "response.sse"
        } else {
            "response.json"
        };
        ["request.json", response, "meta.json"]
            .into_iter()
            .take(if meta { 3 } else { 2 })
    }

    fn digest(stats: &[FileStat]) -> u128 {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        for f in stats {
            for n in [
                f.size as i64,
                f.mtime,
                f.mtime_nsec,
                f.ctime,
                f.ctime_nsec,
                f.ino as i64,
            ] {
                h.update(n.to_le_bytes());
            }
        }
        let mut head = [0u8; 16];
        head.copy_from_slice(&h.finalize()[..16]);
        u128::from_le_bytes(head)
    }

    /// How sample folder `name` of the run's `samples/` folder (opened as `samples`) and the
    /// files a sample of this kind is read from look now, when each is a folder or a regular
    /// file (a link, a FIFO or a missing file is no look).
    pub fn now(
        samples: &crate::fsafe::DirAt,
        name: &str,
        streamed: bool,
        meta: bool,
    ) -> Option<SampleLook> {
        let mut stats = [FileStat::default(); 4];
        let mut n = 0;
        let mut path = String::with_capacity(name.len() + 16);
        path.push_str(name);
        let dir = samples.lstat(&path).ok().filter(|s| s.is_dir)?;
        stats[n] = dir.stat;
        n += 1;
        for file in Self::names(streamed, meta) {
            path.truncate(name.len());
            path.push('/');
            path.push_str(file);
            let s = samples.lstat(&path).ok().filter(|s| s.is_file)?;
            stats[n] = s.stat;
            n += 1;
        }
        Some(SampleLook {
            streamed,
            meta,
            digest: Self::digest(&stats[..n]),
        })
    }
}

/// The stats of a sample's folder and of the files read from it, taken as they were read
/// (the folder before its files, each file from the handle it was read through).
#[derive(Debug, Clone, Default)]
pub struct SampleStats {
    pub streamed: bool,
    pub meta: bool,
    /// The folder's, then each file's, in [`SampleLook`]'s order; empty when one was missing.
    pub stats: Vec<FileStat>,
}

impl SampleStats {
    /// The look a later build may trust, when every stat was settled before `stamp`.
    pub fn look(&self, stamp: DiskTime) -> Option<SampleLook> {
        let expected = 1 + SampleLook::names(self.streamed, self.meta).count();
        (self.stats.len() == expected && self.stats.iter().all(|f| f.settled_before(stamp))).then(
            || SampleLook {
                streamed: self.streamed,
                meta: self.meta,
                digest: SampleLook::digest(&self.stats),
            },
        )
    }
}

/// What an earlier scan read, for folders that look as they did then. A folder's listing
/// changes only with its times (adding, removing or renaming an entry sets them, and its change
/// time cannot be set back), and a finished run's `cell.json` is never modified (SPEC §4): a
/// `cell.json` replaced the way collect, git or an editor writes (renamed into place) changes
/// its run's folder.
pub trait Known: Sync {
    /// The folders in task folder `rel` (relative to the runs root) when it looked like `look`.
    fn listing(&self, rel: &str, look: &FileStat) -> Option<Vec<String>>;
    /// What was read of run folder `rel` when it looked like `look`.
    fn run(&self, rel: &str, look: &RunLook) -> Option<SeenRun>;
}

/// A run folder's `cell.json` and sample folders, as an earlier scan read them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SeenRun {
    pub cell_json: Vec<u8>,
    /// sha256 of `cell_json`.
    pub cell_sha256: String,
    pub samples: Vec<String>,
}

/// A scan with nothing known: everything is listed and read.
pub struct Unknown;

impl Known for Unknown {
    fn listing(&self, _: &str, _: &FileStat) -> Option<Vec<String>> {
        None
    }
    fn run(&self, _: &str, _: &RunLook) -> Option<SeenRun> {
        None
    }
}

/// A task folder's listing (its folders), with how the folder looked before it was listed.
#[derive(Debug, Clone)]
pub struct Listing {
    /// `<model>/<task-id>`, relative to the runs root.
    pub rel: String,
    pub look: FileStat,
    pub names: Vec<String>,
}

/// Something under `runs/` that was not read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
}

/// Everything found under a `runs/` root.
#[derive(Debug, Default)]
pub struct Scan {
    pub runs: Vec<RunDir>,
    pub skipped: Vec<Skipped>,
    /// The task folders listed, for the next build's cache.
    pub listings: Vec<Listing>,
}

/// True for names collect may use as path segments (SPEC §4).
pub use crate::task::is_path_safe;

/// Why a symlink found where `runs/` has a folder is skipped: it is never followed (SPEC §12,
/// turn 5).
pub const LINKED_FOLDER: &str = "a symlink, never followed: a link under runs/ could point at any folder of this machine; put the folder itself in its place";

/// The folders of a listing, sorted, and the symlinks found beside them (never followed, so
/// neither listed nor read: each is reported as skipped). Dot-names are unfinished writes and
/// are not reported.
#[derive(Debug, Default)]
struct Folders {
    dirs: Vec<(String, PathBuf)>,
    links: Vec<PathBuf>,
}

impl Folders {
    fn names(&self) -> Vec<String> {
        self.dirs.iter().map(|(n, _)| n.clone()).collect()
    }

    fn skipped_links(&self) -> impl Iterator<Item = Skipped> + '_ {
        self.links.iter().map(|p| Skipped {
            path: p.clone(),
            reason: LINKED_FOLDER.into(),
        })
    }
}

fn sorted_dirs(dir: &Path) -> std::io::Result<Folders> {
    let mut out = Folders::default();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let ft = e.file_type()?;
        if ft.is_symlink() && !e.file_name().as_encoded_bytes().starts_with(b".") {
            out.links.push(e.path());
        }
        if !ft.is_dir() {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        out.dirs.push((name, e.path()));
    }
    out.dirs.sort();
    out.links.sort();
    Ok(out)
}

/// Reads every finished run directory under `root`, in sorted order. Unfinished writes
/// (dot-names) are ignored silently; anything else unreadable is reported in `skipped`.
///
/// The model folders are listed in order first, then each task folder's runs (each a
/// `cell.json` to read and a listing) on all cores: a BFCL-sized `runs/` is tens of thousands
/// of them.
pub fn scan(root: &Path) -> Scan {
    scan_with(root, &Unknown)
}

/// [`scan`], except that a task folder or run folder that looks as `known` saw it is not listed
/// or read again.
pub fn scan_with(root: &Path, known: &dyn Known) -> Scan {
    use rayon::prelude::*;
    let found = match task_folders(root) {
        Ok(found) => found,
        Err(unreadable) => {
            let mut scan = Scan::default();
            scan.skipped.push(unreadable);
            return scan;
        }
    };
    // Each task folder's runs are listed and read on all cores (a BFCL-sized `runs/` has tens
    // of thousands of task folders); the results keep the folders' order.
    let read: Vec<(Vec<RunRead>, Option<Listing>)> = found
        .into_par_iter()
        .map(|f| match f {
            Found::Skipped(s) => (vec![(None, vec![s])], None),
            Found::Task(folder) => folder.read(known),
        })
        .collect();
    let mut scan = Scan::default();
    // Sized once: grown by doubling, a list of 35,000 runs is copied a dozen times, into fresh
    // memory each time.
    scan.runs
        .reserve(read.iter().map(|(runs, _)| runs.len()).sum());
    scan.listings.reserve(read.len());
    for (runs, listing) in read {
        scan.listings.extend(listing);
        for (run, skipped) in runs {
            scan.runs.extend(run);
            scan.skipped.extend(skipped);
        }
    }
    scan
}

/// What the listing of `runs/` and its model folders finds, in order.
enum Found {
    Skipped(Skipped),
    Task(TaskFolder),
}

/// A run read, or not, and what was skipped in reading it.
type RunRead = (Option<RunDir>, Vec<Skipped>);

/// The task folders under `root` (`<model>/<task>`), in sorted order, with what was skipped on
/// the way; an error when `root` itself cannot be read.
fn task_folders(root: &Path) -> Result<Vec<Found>, Skipped> {
    let skip = |path: PathBuf, reason: String| Found::Skipped(Skipped { path, reason });
    let models = sorted_dirs(root).map_err(|e| Skipped {
        path: root.to_path_buf(),
        reason: format!("cannot read: {e}"),
    })?;
    let mut found: Vec<Found> = models.skipped_links().map(Found::Skipped).collect();
    for (model, mdir) in models.dirs {
        if model.starts_with('.') {
            continue;
        }
        if !is_path_safe(&model) {
            found.push(skip(mdir, "not a valid model name".into()));
            continue;
        }
        let tasks = match sorted_dirs(&mdir) {
            Ok(t) => t,
            Err(e) => {
                found.push(skip(mdir, format!("cannot read: {e}")));
                continue;
            }
        };
        found.extend(tasks.skipped_links().map(Found::Skipped));
        for (task_id, tdir) in tasks.dirs {
            if task_id.starts_with('.') {
                continue;
            }
            found.push(Found::Task(TaskFolder {
                rel: format!("{model}/{task_id}"),
                model: model.clone(),
                task_id,
                dir: tdir,
            }));
        }
    }
    Ok(found)
}

/// One `<model>/<task>` folder of `runs/`.
struct TaskFolder {
    model: String,
    task_id: String,
    /// `<model>/<task>`, as `known` and the listings name it.
    rel: String,
    dir: PathBuf,
}

impl TaskFolder {
    /// Its runs, each read (or taken from `known` when it looks the same), and its listing to
    /// keep for the next build.
    fn read(self, known: &dyn Known) -> (Vec<RunRead>, Option<Listing>) {
        // How the folder looks before it is listed: a change made meanwhile shows at
        // the next build.
        let look = FileStat::look(&self.dir);
        // A listing with a link in it is not kept for the next build: each build
        // lists the folder again and says what it skipped.
        let mut links = Vec::new();
        let runs = match look.and_then(|l| known.listing(&self.rel, &l)) {
            Some(names) => names,
            None => match sorted_dirs(&self.dir) {
                Ok(r) => {
                    links.extend(r.skipped_links());
                    r.names()
                }
                Err(e) => {
                    let reason = format!("cannot read: {e}");
                    return (
                        vec![(
                            None,
                            vec![Skipped {
                                path: self.dir,
                                reason,
                            }],
                        )],
                        None,
                    );
                }
            },
        };
        let listing = look.filter(|_| links.is_empty()).map(|look| Listing {
            rel: self.rel.clone(),
            look,
            names: runs.clone(),
        });
        let mut out = Vec::with_capacity(runs.len() + 1);
        if !links.is_empty() {
            out.push((None, links));
        }
        out.extend(runs.iter().filter_map(|run_id| self.run(known, run_id)));
        (out, listing)
    }

    /// The run `run_id` of this folder; `None` for an unfinished write (a dot-name).
    fn run(&self, known: &dyn Known, run_id: &str) -> Option<RunRead> {
        let rdir = self.dir.join(run_id);
        if run_id.starts_with('.') {
            return None;
        }
        // A run id becomes a path segment of every permalink
        // (t/<model>/<task>/<run>/): a hand-made folder named otherwise would
        // become an unencoded href.
        if !is_path_safe(run_id) {
            let reason = "not a valid run id: a run folder's name must match [A-Za-z0-9._-]+";
            return Some((
                None,
                vec![Skipped {
                    path: rdir,
                    reason: reason.into(),
                }],
            ));
        }
        let mut skipped = Vec::new();
        let look = RunLook::of(&rdir);
        // What is known is taken only as a listing would have been: sample folder
        // names that can be a permalink's last segment.
        let seen = look
            .and_then(|l| known.run(&format!("{}/{run_id}", self.rel), &l))
            .filter(|s| {
                s.samples
                    .iter()
                    .all(|n| !n.starts_with('.') && is_path_safe(n))
            });
        let (model, task_id) = (&self.model, &self.task_id);
        Some(
            match read_run(model, task_id, run_id, &rdir, look, seen, &mut skipped) {
                Ok(r) => (Some(r), skipped),
                Err(reason) => {
                    skipped.push(Skipped { path: rdir, reason });
                    (None, skipped)
                }
            },
        )
    }
}

/// A run folder; its sample folders whose names cannot be a permalink's last segment are
/// reported in `skipped`. `look` is how its folders looked before anything was read, and `seen`
/// what an earlier scan read of it when they looked the same.
fn read_run(
    model: &str,
    task_id: &str,
    run_id: &str,
    dir: &Path,
    look: Option<RunLook>,
    seen: Option<SeenRun>,
    skipped: &mut Vec<Skipped>,
) -> Result<RunDir, String> {
    let (bytes, sha256, listed) = match seen {
        Some(SeenRun {
            cell_json,
            cell_sha256,
            samples,
        }) => (cell_json, cell_sha256, Some(samples)),
        None => {
            let bytes = read_bounded(&dir.join("cell.json"), MAX_CELL_FILE)
                .map_err(|e| format!("cannot read cell.json: {e}"))?;
            let sha256 = crate::task::sha256_hex(&bytes);
            (bytes, sha256, None)
        }
    };
    // The version first (every other field ignored, no tree built), then the whole file
    // straight into its struct: a BFCL-sized `runs/` has tens of thousands of these. Bytes an
    // earlier scan read (by this same callcheck: the cache is keyed by its build) passed the
    // version check then.
    #[derive(serde::Deserialize)]
    struct Version {
        format_version: Option<Value>,
    }
    if listed.is_none() {
        let version = serde_json::from_slice::<Version>(&bytes)
            .map_err(|e| format!("cell.json is not JSON: {e}"))?
            .format_version
            .as_ref()
            .and_then(Value::as_u64)
            .ok_or("cell.json has no format_version")?;
        if version > FORMAT_VERSION as u64 {
            return Err(format!(
                "cell.json has format_version {version}, newer than the {FORMAT_VERSION} this callcheck reads: upgrade callcheck to build it"
            ));
        }
    }
    let cell: CellInfo = serde_json::from_slice(&bytes).map_err(|e| format!("cell.json: {e}"))?;
    if cell.task.id != task_id {
        return Err(format!(
            "cell.json is for task {:?} but sits under {task_id:?}",
            cell.task.id
        ));
    }
    // The listing is kept for the next build only when it held nothing but sample folders.
    let (samples, clean) = match listed {
        Some(samples) => (samples, true),
        None => {
            let sdir = dir.join("samples");
            // Listed without following a link: samples/ itself must be a folder.
            if std::fs::symlink_metadata(&sdir).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(format!("samples/ {}", crate::fsafe::IS_SYMLINK));
            }
            let listed = sorted_dirs(&sdir).map_err(|e| format!("cannot read samples/: {e}"))?;
            let n = listed.dirs.len() + listed.links.len();
            skipped.extend(listed.skipped_links());
            let mut samples: Vec<String> = listed
                .names()
                .into_iter()
                .filter(|n| !n.starts_with('.'))
                .collect();
            // A sample's folder name is the last segment of its permalink and an anchor of its
            // run's page: a hand-made folder named otherwise would become an unencoded href.
            samples.retain(|n| {
                let ok = crate::task::is_path_safe(n);
                if !ok {
                    skipped.push(Skipped {
                        path: sdir.join(n),
                        reason: "not a valid sample folder name: it must match [A-Za-z0-9._-]+"
                            .into(),
                    });
                }
                ok
            });
            let clean = samples.len() == n;
            (samples, clean)
        }
    };
    Ok(RunDir {
        model: model.into(),
        task_id: task_id.into(),
        run_id: run_id.into(),
        dir: dir.to_path_buf(),
        cell,
        cell_sha256: sha256,
        samples,
        look: look.filter(|_| clean),
        cell_json: bytes,
    })
}

/// The raw files of one sample.
#[derive(Debug, Clone)]
pub struct SampleFiles {
    pub request: Vec<u8>,
    pub response: Vec<u8>,
    pub streamed: bool,
    pub meta: Vec<u8>,
    /// Why a `meta.json` that exists could not be read (the sample is scored without it).
    pub meta_error: Option<String>,
    /// How the folder and the files read looked (for the cache's [`SampleLook`]).
    pub stats: SampleStats,
}

/// The most bytes read of one sample file: twice what collect keeps of a response body. A
/// larger file was not written by collect, and the sample is reported, not read.
pub const MAX_SAMPLE_FILE: u64 = 64 << 20;

/// The most bytes read of a `cell.json`.
pub const MAX_CELL_FILE: u64 = 16 << 20;

pub use crate::fsafe::FileStat;

impl FileStat {
    /// Whether a later build may take this stat as proof that the file did not change: its
    /// change time is strictly before `stamp`, the disk's time when the build that took it
    /// began. A file changed later gets a later change time. One changed at the same tick as
    /// the build began could keep the change time the build saw (the kernel's clock is coarse),
    /// so its stat is not kept and the next build reads it and compares its hash (the "racy
    /// clean" case git's index knows). A change time of 0 is a file system that keeps none.
    pub fn settled_before(&self, stamp: DiskTime) -> bool {
        (self.ctime, self.ctime_nsec) < stamp && (self.ctime, self.ctime_nsec) != (0, 0)
    }

    /// `lstat` of `path`; `None` when it cannot be looked at.
    pub fn look(path: &Path) -> Option<FileStat> {
        std::fs::symlink_metadata(path)
            .ok()
            .map(|m| FileStat::of(&m))
    }

    pub fn of(m: &std::fs::Metadata) -> FileStat {
        use std::os::unix::fs::MetadataExt;
        FileStat {
            size: m.size(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
            ctime: m.ctime(),
            ctime_nsec: m.ctime_nsec(),
            ino: m.ino(),
        }
    }
}

/// Reads a whole file of at most `max` bytes (a larger one is an error that says so).
/// Anything but a regular file (a FIFO, a device, a symlink) is an error that says what it
/// is, and is never waited on nor followed ([`crate::fsafe::open_own`]).
pub fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    read_stat(path, max).map(|(bytes, _)| bytes)
}

/// [`read_bounded`], with the file's stat as it was opened.
fn read_stat(path: &Path, max: u64) -> std::io::Result<(Vec<u8>, FileStat)> {
    let shown = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let f = crate::fsafe::open_own(path, &shown)?;
    let m = f.metadata()?;
    let stat = FileStat::of(&m);
    let size = m.len();
    if size > max {
        return Err(std::io::Error::other(format!(
            "{} is {} bytes, more than the {} MiB callcheck reads of one file (collect never writes one that large)",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            size,
            max >> 20
        )));
    }
    // A file that grew since it was opened is read up to the bound, no further.
    match read_capped(f, max, size as usize + 1)? {
        Some(bytes) => Ok((bytes, stat)),
        None => Err(std::io::Error::other(format!(
            "{} grew past {} MiB while it was read",
            path.display(),
            max >> 20
        ))),
    }
}

/// Reads `r` to its end, or `None` when it holds more than `max` bytes (at most `max + 1` are
/// ever read). `capacity` is what to reserve first.
pub fn read_capped(
    r: impl std::io::Read,
    max: u64,
    capacity: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    crate::fsafe::read_capped(r, max, capacity)
}

impl RunDir {
    /// The run's folder relative to the runs root, `/`-separated: `<model>/<task>/<run>` (the
    /// key of its record in the cache and of its listing in the manifest).
    pub fn rel(&self) -> String {
        format!("{}/{}/{}", self.model, self.task_id, self.run_id)
    }

    pub fn sample_dir(&self, sample: &str) -> PathBuf {
        self.dir.join("samples").join(sample)
    }

    /// Reads one sample's bytes (each file at most [`MAX_SAMPLE_FILE`]).
    pub fn read_sample(&self, sample: &str) -> std::io::Result<SampleFiles> {
        let d = self.sample_dir(sample);
        // The folder is looked at before its files are read: a file renamed into it meanwhile
        // shows at the next build.
        let mut stats: Vec<FileStat> = FileStat::look(&d).into_iter().collect();
        let mut read = |name: &str| {
            let (bytes, stat) = read_stat(&d.join(name), MAX_SAMPLE_FILE)?;
            stats.push(stat);
            Ok::<_, std::io::Error>(bytes)
        };
        let request = read("request.json")?;
        let (response, streamed) = match read("response.sse") {
            Ok(b) => (b, true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (read("response.json")?, false),
            Err(e) => return Err(e),
        };
        let mut meta_error = None;
        let (meta, has_meta) = match read("meta.json") {
            Ok(b) => (b, true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), false),
            // A meta.json that cannot be read (a folder, too large) is damage, not a reason to
            // drop the sample: it is scored without it, and reported.
            Err(e) => {
                meta_error = Some(e.to_string());
                (Vec::new(), false)
            }
        };
        let stats = SampleStats {
            streamed,
            meta: has_meta,
            // A meta.json that could not be read leaves the look incomplete: never trusted.
            stats: if meta_error.is_some() {
                Vec::new()
            } else {
                stats
            },
        };
        Ok(SampleFiles {
            request,
            response,
            streamed,
            meta,
            meta_error,
            stats,
        })
    }
}

impl SampleFiles {
    /// The request and meta parsed, each once, and what is damaged in them, one line each: a
    /// `request.json` or a `meta.json` that does not parse is left out (scoring then falls back
    /// to the task's tools; without meta the HTTP status is unknown), never an error: the sample
    /// is still scored, and the build reports it like a skipped input so nobody mistakes it
    /// for intact.
    pub fn parse(&self) -> (Option<Arc<Value>>, Option<Meta>, Vec<String>) {
        self.parse_with(None)
    }

    /// [`SampleFiles::parse`], given the request already parsed from the same bytes (the
    /// samples of a run usually send the same request).
    pub fn parse_with(
        &self,
        request: Option<Arc<Value>>,
    ) -> (Option<Arc<Value>>, Option<Meta>, Vec<String>) {
        let mut damage = Vec::new();
        let request = match request {
            Some(v) => Some(v),
            None => serde_json::from_slice::<Value>(&self.request)
                .map(Arc::new)
                .map_err(|e| {
                    damage.push(format!(
                        "request.json is not JSON ({e}): scored anyway, against the task's tools as they are now"
                    ))
                })
                .ok(),
        };
        if let Some(e) = &self.meta_error {
            damage.push(format!(
                "meta.json is not readable ({e}): scored anyway, without the HTTP status and transport error it holds"
            ));
        }
        let meta = if self.meta.is_empty() {
            None
        } else {
            serde_json::from_slice::<Meta>(&self.meta)
                .map_err(|e| {
                    damage.push(format!(
                        "meta.json is not valid ({e}): scored anyway, without the HTTP status and transport error it holds"
                    ))
                })
                .ok()
        };
        (request, meta, damage)
    }

    /// The transcript the scorer reads ([`SampleFiles::parse`]).
    pub fn transcript(&self) -> Transcript {
        let (request, meta, _) = self.parse();
        Transcript {
            request,
            body: self.response.clone(),
            streamed: self.streamed,
            meta,
        }
    }
}

// ---- the writer (collect) ----

/// A model or task name that cannot become a folder under runs/.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} {name:?} cannot be used as a folder name under runs/: it must match [A-Za-z0-9._-]+ and not be . or .."
)]
pub struct UnsafeName {
    pub what: &'static str,
    pub name: String,
}

/// `runs/<model>/<task-id>`, after checking both names (SPEC §4): nothing a config or a task
/// says can make collect write outside `root`.
pub fn cell_dir(root: &Path, model: &str, task_id: &str) -> Result<PathBuf, UnsafeName> {
    for (what, name) in [("model name", model), ("task id", task_id)] {
        if !is_path_safe(name) || name.starts_with('.') {
            return Err(UnsafeName {
                what,
                name: name.to_string(),
            });
        }
    }
    Ok(root.join(model).join(task_id))
}

/// The finished run directories of one cell, sorted by run id (temporary `.tmp-*` folders are
/// never read; a folder that is not a readable run is reported in `skipped`).
pub fn cell_runs(root: &Path, model: &str, task_id: &str) -> Scan {
    let mut scan = Scan::default();
    let Ok(dir) = cell_dir(root, model, task_id) else {
        return scan;
    };
    // The model's and the task's folders are listed only when they are folders, not links.
    for at in [root.join(model), dir.clone()] {
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            scan.skipped.push(Skipped {
                path: at,
                reason: LINKED_FOLDER.into(),
            });
            return scan;
        }
    }
    let runs = match sorted_dirs(&dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return scan,
        Err(e) => {
            scan.skipped.push(Skipped {
                path: dir,
                reason: format!("cannot read: {e}"),
            });
            return scan;
        }
    };
    scan.skipped.extend(runs.skipped_links());
    for (run_id, rdir) in runs.dirs {
        if run_id.starts_with('.') {
            continue;
        }
        match read_run(
            model,
            task_id,
            &run_id,
            &rdir,
            None,
            None,
            &mut scan.skipped,
        ) {
            Ok(r) => scan.runs.push(r),
            Err(reason) => scan.skipped.push(Skipped { path: rdir, reason }),
        }
    }
    scan
}

/// Removes the unfinished writes (`.tmp-*`) left in a cell by a collect that was killed.
/// Only call this while holding the runs/ lock, so that no live writer owns them.
pub fn remove_stale_temps(cell: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    let entries = match std::fs::read_dir(cell) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    for e in entries {
        let e = e?;
        if e.file_name().to_string_lossy().starts_with(TMP_PREFIX) && e.file_type()?.is_dir() {
            std::fs::remove_dir_all(e.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// The prefix of a run directory being written.
pub const TMP_PREFIX: &str = ".tmp-";

/// The file collect locks for as long as it writes under a runs/ root: two collects writing the
/// same tree would both count a cell as missing and double its samples.
pub const LOCK_FILE: &str = ".collect.lock";

/// Holds the runs/ lock until dropped.
#[derive(Debug)]
pub struct RunsLock {
    _file: std::fs::File,
}

/// Takes the runs/ lock, creating `root` if needed; fails at once when another process holds it.
pub fn lock(root: &Path) -> std::io::Result<RunsLock> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(root)?;
    let path = root.join(LOCK_FILE);
    // The lock file is opened for writing: never through a symlink (O_NOFOLLOW: it could point
    // at any file of the user's, SPEC §12), and never waiting on a FIFO (O_NONBLOCK).
    let refused = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} {what}, not a lock file collect made: remove it (collect makes its lock file itself)",
                path.display()
            ),
        )
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused("is a symlink"),
            Some(libc::ENXIO) => refused("is a FIFO or a socket"),
            _ => e,
        })?;
    if let Some(what) = crate::fsafe::not_regular(&file.metadata()?.file_type()) {
        return Err(refused(what));
    }
    match file.try_lock() {
        Ok(()) => Ok(RunsLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(std::io::Error::new(
            std::io::ErrorKind::WouldBlock,
            format!(
                "another callcheck collect is writing to {} (it holds {})",
                root.display(),
                root.join(LOCK_FILE).display()
            ),
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// One sample as collect hands it to the writer.
#[derive(Debug, Clone)]
pub struct SampleOut {
    /// The request body exactly as sent.
    pub request: Vec<u8>,
    /// The response body exactly as received (empty when none arrived).
    pub response: Vec<u8>,
    /// Written as `response.sse` rather than `response.json`.
    pub sse: bool,
    pub meta: Meta,
}

/// A run directory being written: `.tmp-<run-id>` until [`RunWriter::finish`] renames it.
#[derive(Debug)]
pub struct RunWriter {
    cell: PathBuf,
    run_id: String,
    tmp: PathBuf,
    width: usize,
}

/// Group commit for `syncfs`: a caller needs one sync that *starts* after its writes; callers
/// that arrive while a sync runs share the next one, so a burst of finishing runs costs a couple
/// of syncs, not one each (each walks the whole filesystem's dirty inodes).
#[cfg(target_os = "linux")]
struct GroupSync {
    state: std::sync::Mutex<SyncState>,
    done: std::sync::Condvar,
}

#[cfg(target_os = "linux")]
#[derive(Default)]
struct SyncState {
    /// Syncs started so far (the generation of the latest).
    started: u64,
    /// The latest generation completed, and how it went.
    finished: u64,
    last_error: Option<String>,
    running: bool,
}

#[cfg(target_os = "linux")]
static GROUP_SYNC: GroupSync = GroupSync {
    state: std::sync::Mutex::new(SyncState {
        started: 0,
        finished: 0,
        last_error: None,
        running: false,
    }),
    done: std::sync::Condvar::new(),
};

#[cfg(target_os = "linux")]
impl GroupSync {
    fn sync(&self, dir: &Path) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let poisoned = |_| std::io::Error::other("sync lock poisoned");
        let mut st = self.state.lock().map_err(poisoned)?;
        let ticket = st.started + 1;
        loop {
            if st.finished >= ticket {
                return match &st.last_error {
                    None => Ok(()),
                    Some(e) => Err(std::io::Error::other(e.clone())),
                };
            }
            if st.running {
                st = self.done.wait(st).map_err(poisoned)?;
                continue;
            }
            st.running = true;
            st.started += 1;
            let generation = st.started;
            drop(st);
            let result = std::fs::File::open(dir).and_then(|f| {
                // SAFETY: syncfs only reads the descriptor, which `f` keeps open for the call.
                if unsafe { libc::syncfs(f.as_raw_fd()) } == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
            st = self.state.lock().map_err(poisoned)?;
            st.running = false;
            st.finished = generation;
            st.last_error = result.err().map(|e| e.to_string());
            self.done.notify_all();
        }
    }
}

/// Makes every file and folder under `dir` durable. On Linux one `syncfs` does it for the whole
/// filesystem: one journal commit per run instead of one fsync per file (four per sample), which
/// is what lets a collection write thousands of samples a second. Elsewhere, each file and
/// folder is synced in turn.
fn sync_tree(dir: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        GROUP_SYNC.sync(dir)
    }
    #[cfg(not(target_os = "linux"))]
    {
        for e in walkdir::WalkDir::new(dir).contents_first(true) {
            let e = e.map_err(std::io::Error::other)?;
            std::fs::File::open(e.path())?.sync_all()?;
        }
        Ok(())
    }
}

fn sync_dir(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

/// The folder name of sample `i` in a run of `k`: zero-padded so that names sort as numbers.
pub fn sample_name(i: u32, k: u32) -> String {
    let width = k.saturating_sub(1).to_string().len().max(3);
    format!("{i:0width$}")
}

impl RunWriter {
    /// Creates `<cell>/.tmp-<run-id>/samples/` for a run of `k` samples.
    pub fn create(cell: &Path, run_id: &str, k: u32) -> std::io::Result<RunWriter> {
        let tmp = cell.join(format!("{TMP_PREFIX}{run_id}"));
        // The model's and the task's folders under runs/ are made one level at a time and a
        // symlink there is refused, never written through (SPEC §12); runs/ itself is the
        // folder the user named.
        match (cell.parent(), cell.parent().and_then(Path::parent)) {
            (Some(model), Some(root)) if root.is_dir() => {
                let rel = Path::new(model.file_name().unwrap_or_default())
                    .join(cell.file_name().unwrap_or_default())
                    .join(format!("{TMP_PREFIX}{run_id}"))
                    .join("samples");
                crate::fsafe::create_dirs_within(root, &rel)?;
            }
            _ => std::fs::create_dir_all(tmp.join("samples"))?,
        }
        Ok(RunWriter {
            cell: cell.to_path_buf(),
            run_id: run_id.to_string(),
            tmp,
            width: k.saturating_sub(1).to_string().len().max(3),
        })
    }

    /// Writes sample `i` (made durable by [`RunWriter::finish`]).
    pub fn write_sample(&self, i: u32, s: &SampleOut) -> std::io::Result<()> {
        let dir = self
            .tmp
            .join("samples")
            .join(format!("{i:0width$}", width = self.width));
        std::fs::create_dir(&dir)?;
        std::fs::write(dir.join("request.json"), &s.request)?;
        let name = if s.sse {
            "response.sse"
        } else {
            "response.json"
        };
        std::fs::write(dir.join(name), &s.response)?;
        let mut meta = serde_json::to_vec_pretty(&s.meta).map_err(std::io::Error::other)?;
        meta.push(b'\n');
        // Synced with the whole run in `finish`, before the rename.
        std::fs::write(dir.join("meta.json"), &meta)
    }

    /// Writes `cell.json` and renames the run into place: from here on it is finished and never
    /// modified. Every file and folder is synced first, so that after a power cut a finished name
    /// never points at missing content (a rename lost to a power cut only means the run is
    /// collected again).
    pub fn finish(self, cell: &CellInfo) -> std::io::Result<PathBuf> {
        let mut bytes = serde_json::to_vec_pretty(cell).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        std::fs::write(self.tmp.join("cell.json"), &bytes)?;
        sync_tree(&self.tmp)?;
        let done = self.cell.join(&self.run_id);
        std::fs::rename(&self.tmp, &done)?;
        sync_dir(&self.cell)?;
        Ok(done)
    }

    /// Throws the unfinished run away.
    pub fn abandon(self) {
        let _ = std::fs::remove_dir_all(&self.tmp);
    }

    /// Where the run is being written.
    pub fn tmp_dir(&self) -> &Path {
        &self.tmp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A Known that serves what a first scan saw (or what a test makes it claim).
    #[derive(Default)]
    struct Seen {
        listings: BTreeMap<String, (FileStat, Vec<String>)>,
        runs: BTreeMap<String, (RunLook, SeenRun)>,
    }

    impl Known for Seen {
        fn listing(&self, rel: &str, look: &FileStat) -> Option<Vec<String>> {
            let (l, names) = self.listings.get(rel)?;
            (l == look).then(|| names.clone())
        }
        fn run(&self, rel: &str, look: &RunLook) -> Option<SeenRun> {
            let (l, seen) = self.runs.get(rel)?;
            (l == look).then(|| seen.clone())
        }
    }

    fn write_run(dir: &Path, samples: &[&str]) {
        let cell = serde_json::json!({
            "format_version": 1, "callcheck_version": "0.1.0",
            "model": {"name": "m"}, "task": {"id": "t", "sha256": "00"},
            "k": samples.len(), "run_id": dir.file_name().unwrap().to_str().unwrap(),
        });
        std::fs::create_dir_all(dir.join("samples")).unwrap();
        std::fs::write(dir.join("cell.json"), cell.to_string()).unwrap();
        for s in samples {
            std::fs::create_dir_all(dir.join("samples").join(s)).unwrap();
        }
    }

    /// The model entries and server descriptions of many cell.json files are one parsed copy
    /// per distinct text, each the value its text parses to; a malformed one is an error.
    #[test]
    fn cell_files_share_one_copy_of_each_model_entry_and_server() {
        let cell = |model: &str, server: &str, run: &str| {
            format!(
                r#"{{"format_version": 1, "callcheck_version": "0.1.0", "model": {model},
                "task": {{"id": "t", "sha256": "00"}}, "k": 3, "run_id": "{run}", "server": {server}}}"#
            )
        };
        let parse = |text: String| serde_json::from_str::<CellInfo>(&text);
        let entry =
            r#"{"name": "shared-m", "temperature": 0.70, "z": 1, "a": [12345678901234567890]}"#;
        let server = r#"{"models": ["org/m"], "kind": "vllm"}"#;
        let a = parse(cell(entry, server, "r1")).unwrap();
        let b = parse(cell(entry, server, "r2")).unwrap();
        let c = parse(cell(r#"{"name": "other-m"}"#, server, "r3")).unwrap();
        assert!(Arc::ptr_eq(&a.model, &b.model));
        assert!(Arc::ptr_eq(&a.server, &b.server));
        assert!(Arc::ptr_eq(&a.server, &c.server));
        assert!(!Arc::ptr_eq(&a.model, &c.model));
        assert_eq!(c.model["name"], "other-m");
        // The value its own text parses to: key order and the numbers' text kept.
        let direct: Value = serde_json::from_str(entry).unwrap();
        assert_eq!(*a.model, direct);
        assert_eq!(
            a.model.to_string(),
            r#"{"name":"shared-m","temperature":0.70,"z":1,"a":[12345678901234567890]}"#
        );
        assert_eq!((a.run_id.as_str(), b.run_id.as_str()), ("r1", "r2"));
        // Without a server, the default; a model entry that is not JSON fails the file.
        let none = r#"{"format_version": 1, "callcheck_version": "0.1.0", "model": {"name": "m"},
            "task": {"id": "t", "sha256": "00"}, "k": 3, "run_id": "r"}"#;
        assert!(
            serde_json::from_str::<CellInfo>(none)
                .unwrap()
                .server
                .is_null()
        );
        assert!(parse(cell(r#"{"name": }"#, server, "r4")).is_err());
        // Once nothing holds a value, the next file with its text gets a fresh copy.
        let held = Arc::downgrade(&c.model);
        drop(c);
        assert!(held.upgrade().is_none());
        let again = parse(cell(r#"{"name": "other-m"}"#, server, "r5")).unwrap();
        assert_eq!(again.model["name"], "other-m");
    }

    fn remember(scan: &Scan) -> Seen {
        let mut seen = Seen::default();
        for l in &scan.listings {
            seen.listings
                .insert(l.rel.clone(), (l.look, l.names.clone()));
        }
        for r in &scan.runs {
            let rel = r.rel();
            let read = SeenRun {
                cell_json: r.cell_json.clone(),
                cell_sha256: r.cell_sha256.clone(),
                samples: r.samples.clone(),
            };
            seen.runs.insert(rel, (r.look.unwrap(), read));
        }
        seen
    }

    /// A run's look changes with what changes its folders, never with a file in a sample's
    /// folder (SPEC §4: a finished run is never modified; touching the run folder says it was).
    #[test]
    fn a_run_look_follows_its_folders() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("r0001");
        write_run(&run, &["000"]);
        std::fs::write(run.join("samples/000/response.json"), "{}").unwrap();
        let first = RunLook::of(&run).unwrap();
        assert_eq!(RunLook::of(&run), Some(first), "nothing changed");
        let pause = || std::thread::sleep(std::time::Duration::from_millis(20));
        pause();
        std::fs::write(run.join("samples/000/response.json"), "{\"x\": 1}").unwrap();
        std::fs::write(run.join("samples/000/.new"), "{\"x\": 2}").unwrap();
        std::fs::rename(
            run.join("samples/000/.new"),
            run.join("samples/000/response.json"),
        )
        .unwrap();
        assert_eq!(
            RunLook::of(&run),
            Some(first),
            "inside a sample's folder: unseen"
        );
        pause();
        std::fs::create_dir(run.join("samples/001")).unwrap();
        let added = RunLook::of(&run).unwrap();
        assert_ne!(added, first, "a sample folder added");
        pause();
        std::fs::write(run.join(".cell.json.new"), "{}").unwrap();
        std::fs::rename(run.join(".cell.json.new"), run.join("cell.json")).unwrap();
        let replaced = RunLook::of(&run).unwrap();
        assert_ne!(replaced, added, "cell.json replaced");
        // `touch` of the run's folder, and `rsync -a` setting a modification time back: both
        // change its change time.
        pause();
        let dir = std::fs::File::open(&run).unwrap();
        let mtime = dir.metadata().unwrap().modified().unwrap();
        dir.set_times(std::fs::FileTimes::new().set_modified(mtime))
            .unwrap();
        assert_ne!(
            RunLook::of(&run).unwrap(),
            replaced,
            "times set, even to the same"
        );
        assert!(RunLook::of(&tmp.path().join("missing")).is_none());
    }

    /// A sample's look changes with any edit of a file read from it, even one that keeps the
    /// size, the inode and the modification time; a stat is trusted only when it was settled
    /// before the build began.
    #[test]
    fn a_sample_look_follows_every_edit_of_its_files() {
        let tmp = tempfile::tempdir().unwrap();
        let run_dir = tmp.path().join("m/t/r0001");
        write_run(&run_dir, &["000"]);
        let dir = run_dir.join("samples/000");
        std::fs::write(dir.join("request.json"), "{}").unwrap();
        std::fs::write(dir.join("response.json"), r#"{"a": 1}"#).unwrap();
        let samples = crate::fsafe::DirAt::open(&run_dir.join("samples")).unwrap();
        let now = |streamed, meta| SampleLook::now(&samples, "000", streamed, meta);
        let first = now(false, false).unwrap();
        assert_eq!(now(false, false), Some(first));
        assert_eq!(now(true, false), None, "no response.sse");
        assert_eq!(now(false, true), None, "no meta.json");
        // What a read records is the same look.
        let scan = scan(tmp.path());
        let files = scan.runs[0].read_sample("000").unwrap();
        let far = (i64::MAX, 0);
        assert_eq!(files.stats.look(far), Some(first));
        // Not settled before a stamp taken at its change time: not kept.
        let ctime = files
            .stats
            .stats
            .iter()
            .map(|f| (f.ctime, f.ctime_nsec))
            .max()
            .unwrap();
        assert_eq!(files.stats.look(ctime), None);
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Same size, same inode, modification time set back: the change time says.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("response.json"))
            .unwrap();
        let mtime = f.metadata().unwrap().modified().unwrap();
        std::io::Write::write_all(&mut &f, br#"{"a": 2}"#).unwrap();
        f.set_modified(mtime).unwrap();
        assert_ne!(now(false, false), Some(first));
        // A link in a file's place is no look.
        std::fs::remove_file(dir.join("request.json")).unwrap();
        std::os::unix::fs::symlink(dir.join("response.json"), dir.join("request.json")).unwrap();
        assert_eq!(now(false, false), None);
    }

    /// A folder that looks as an earlier scan saw it is taken from what that scan read (shown
    /// here by making it claim something the disk does not hold); a folder that changed since
    /// is listed and read again.
    #[test]
    fn a_scan_lists_again_only_the_folders_that_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write_run(&root.join("m/t/r0001"), &["000"]);
        let first = scan(root);
        assert_eq!(first.runs.len(), 1);
        assert_eq!(first.runs[0].samples, ["000"]);
        assert!(first.runs[0].look.is_some());
        assert_eq!(first.listings.len(), 1);
        assert_eq!(first.listings[0].names, ["r0001"]);

        let mut seen = remember(&first);
        seen.runs.get_mut("m/t/r0001").unwrap().1.samples = vec!["000".into(), "claimed".into()];
        let again = scan_with(root, &seen);
        assert_eq!(
            again.runs[0].samples,
            ["000", "claimed"],
            "taken from what was seen"
        );
        assert_eq!(again.runs[0].cell_sha256, first.runs[0].cell_sha256);

        // A known name that no listing would give (not a permalink segment) is not taken.
        seen.runs.get_mut("m/t/r0001").unwrap().1.samples = vec!["../x".into()];
        assert_eq!(scan_with(root, &seen).runs[0].samples, ["000"]);

        // A sample folder added: samples/ changed, so it is listed again.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::create_dir(root.join("m/t/r0001/samples/001")).unwrap();
        let again = scan_with(root, &seen);
        assert_eq!(again.runs[0].samples, ["000", "001"]);

        // The task folder: a claimed run is looked for while the folder looks the same...
        let mut seen = remember(&scan(root));
        seen.listings.get_mut("m/t").unwrap().1.push("r0002".into());
        let again = scan_with(root, &seen);
        assert_eq!(again.runs.len(), 1);
        assert_eq!(again.skipped.len(), 1, "{:?}", again.skipped);
        // ...and a run folder renamed into it (as collect finishes one) is found.
        std::thread::sleep(std::time::Duration::from_millis(20));
        write_run(&root.join("m/t/.tmp-r0003"), &["000"]);
        std::fs::rename(root.join("m/t/.tmp-r0003"), root.join("m/t/r0003")).unwrap();
        let again = scan_with(root, &seen);
        let ids: Vec<&str> = again.runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["r0001", "r0003"]);
        assert!(again.skipped.is_empty());

        // A listing holding something that is not a sample folder is never remembered.
        std::fs::create_dir(root.join("m/t/r0003/samples/.partial")).unwrap();
        let again = scan(root);
        assert!(again.runs[1].look.is_none());
        assert_eq!(again.runs[1].samples, ["000"]);
    }
}
