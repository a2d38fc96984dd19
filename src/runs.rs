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
use std::collections::BTreeMap;
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
    /// ([`scan`] interns them).
    pub model: Arc<Value>,
    pub task: TaskRef,
    /// Samples in this run directory.
    pub k: u32,
    pub run_id: String,
    /// What the server said about itself: `/v1/models`, a version if it has one, preflight.
    #[serde(default)]
    pub server: Arc<Value>,
    /// UTC timestamps, RFC 3339.
    #[serde(default)]
    pub started: String,
    #[serde(default)]
    pub ended: String,
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
}

/// True for names collect may use as path segments (SPEC §4).
pub use crate::task::is_path_safe;

fn sorted_dirs(dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if !e.file_type()?.is_dir() {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        out.push((name, e.path()));
    }
    out.sort();
    Ok(out)
}

/// Reads every finished run directory under `root`, in sorted order. Unfinished writes
/// (dot-names) are ignored silently; anything else unreadable is reported in `skipped`.
///
/// The model folders are listed in order first, then each task folder's runs (each a
/// `cell.json` to read and a listing) on all cores: a BFCL-sized `runs/` is tens of thousands
/// of them.
pub fn scan(root: &Path) -> Scan {
    use rayon::prelude::*;
    enum Found {
        Skipped(Skipped),
        Task(String, String, PathBuf),
    }
    let skip = |path: PathBuf, reason: String| Found::Skipped(Skipped { path, reason });
    let mut found = Vec::new();
    let models = match sorted_dirs(root) {
        Ok(m) => m,
        Err(e) => {
            let mut scan = Scan::default();
            scan.skipped.push(Skipped {
                path: root.to_path_buf(),
                reason: format!("cannot read: {e}"),
            });
            return scan;
        }
    };
    for (model, mdir) in models {
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
        for (task_id, tdir) in tasks {
            if task_id.starts_with('.') {
                continue;
            }
            found.push(Found::Task(model.clone(), task_id, tdir));
        }
    }
    // Each task folder's runs are listed and read on all cores (a BFCL-sized `runs/` has tens
    // of thousands of task folders); the results keep the folders' order.
    type Read = (Option<(RunDir, String, String)>, Vec<Skipped>);
    let read: Vec<Vec<Read>> = found
        .into_par_iter()
        .map(|f| match f {
            Found::Skipped(s) => vec![(None, vec![s])],
            Found::Task(model, task_id, tdir) => {
                let runs = match sorted_dirs(&tdir) {
                    Ok(r) => r,
                    Err(e) => {
                        let reason = format!("cannot read: {e}");
                        return vec![(None, vec![Skipped { path: tdir, reason }])];
                    }
                };
                let mut out = Vec::with_capacity(runs.len());
                for (run_id, rdir) in runs {
                    if run_id.starts_with('.') {
                        continue;
                    }
                    // A run id becomes a path segment of every permalink
                    // (t/<model>/<task>/<run>/): a hand-made folder named otherwise would
                    // become an unencoded href.
                    if !is_path_safe(&run_id) {
                        let reason =
                            "not a valid run id: a run folder's name must match [A-Za-z0-9._-]+";
                        out.push((
                            None,
                            vec![Skipped {
                                path: rdir,
                                reason: reason.into(),
                            }],
                        ));
                        continue;
                    }
                    let mut skipped = Vec::new();
                    match read_run(&model, &task_id, &run_id, &rdir, &mut skipped) {
                        Ok(r) => {
                            // The keys the model entry and server description are shared by.
                            let (model_key, server_key) =
                                (r.cell.model.to_string(), r.cell.server.to_string());
                            out.push((Some((r, model_key, server_key)), skipped));
                        }
                        Err(reason) => {
                            skipped.push(Skipped { path: rdir, reason });
                            out.push((None, skipped));
                        }
                    }
                }
                out
            }
        })
        .collect();
    let mut scan = Scan::default();
    // One copy of each model entry and server description: tens of thousands of runs share a
    // handful (a parsed entry costs kilobytes).
    let mut shared: BTreeMap<String, Arc<Value>> = BTreeMap::new();
    let mut intern = |v: &mut Arc<Value>, key: String| {
        *v = shared.entry(key).or_insert_with(|| v.clone()).clone();
    };
    for (run, skipped) in read.into_iter().flatten() {
        if let Some((mut run, model, server)) = run {
            intern(&mut run.cell.model, model);
            intern(&mut run.cell.server, server);
            scan.runs.push(run);
        }
        scan.skipped.extend(skipped);
    }
    scan
}

/// A run folder; its sample folders whose names cannot be a permalink's last segment are
/// reported in `skipped`.
fn read_run(
    model: &str,
    task_id: &str,
    run_id: &str,
    dir: &Path,
    skipped: &mut Vec<Skipped>,
) -> Result<RunDir, String> {
    let cell_path = dir.join("cell.json");
    let bytes = read_bounded(&cell_path, MAX_CELL_FILE)
        .map_err(|e| format!("cannot read cell.json: {e}"))?
        .0;
    // The version first (every other field ignored, no tree built), then the whole file
    // straight into its struct: a BFCL-sized `runs/` has tens of thousands of these.
    #[derive(serde::Deserialize)]
    struct Version {
        format_version: Option<Value>,
    }
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
    let cell: CellInfo = serde_json::from_slice(&bytes).map_err(|e| format!("cell.json: {e}"))?;
    if cell.task.id != task_id {
        return Err(format!(
            "cell.json is for task {:?} but sits under {task_id:?}",
            cell.task.id
        ));
    }
    let sdir = dir.join("samples");
    let mut samples: Vec<String> = sorted_dirs(&sdir)
        .map_err(|e| format!("cannot read samples/: {e}"))?
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !n.starts_with('.'))
        .collect();
    // A sample's folder name is the last segment of its permalink and an anchor of its run's
    // page: a hand-made folder named otherwise would become an unencoded href.
    samples.retain(|n| {
        let ok = crate::task::is_path_safe(n);
        if !ok {
            skipped.push(Skipped {
                path: sdir.join(n),
                reason: "not a valid sample folder name: it must match [A-Za-z0-9._-]+".into(),
            });
        }
        ok
    });
    samples.sort();
    Ok(RunDir {
        model: model.into(),
        task_id: task_id.into(),
        run_id: run_id.into(),
        dir: dir.to_path_buf(),
        cell,
        cell_sha256: crate::task::sha256_hex(&bytes),
        samples,
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
}

/// The most bytes read of one sample file: twice what collect keeps of a response body. A
/// larger file was not written by collect, and the sample is reported, not read.
pub const MAX_SAMPLE_FILE: u64 = 64 << 20;

/// The most bytes read of a `cell.json`.
pub const MAX_CELL_FILE: u64 = 16 << 20;

/// A file's size, modification and change times and inode, as `stat` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileStat {
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: i64,
    /// The change time: set by the kernel whenever the file (or a folder's listing) changes,
    /// never by a program (`touch`, `rsync -a` and `tar -x` set the modification time only).
    pub ctime: i64,
    pub ctime_nsec: i64,
    pub ino: u64,
}

impl FileStat {
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

/// Reads a whole file of at most `max` bytes (a larger one is an error that says so), with how
/// it looked when opened.
pub fn read_bounded(path: &Path, max: u64) -> std::io::Result<(Vec<u8>, FileStat)> {
    let f = std::fs::File::open(path)?;
    let stat = FileStat::of(&f.metadata()?);
    if stat.size > max {
        return Err(std::io::Error::other(format!(
            "{} is {} bytes, more than the {} MiB callcheck reads of one file (collect never writes one that large)",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            stat.size,
            max >> 20
        )));
    }
    // A file that grew since it was opened is read up to the bound, no further.
    match read_capped(f, max, stat.size as usize + 1)? {
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
    use std::io::Read;
    let mut bytes = Vec::with_capacity(capacity);
    r.take(max + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

impl RunDir {
    pub fn sample_dir(&self, sample: &str) -> PathBuf {
        self.dir.join("samples").join(sample)
    }

    /// Reads one sample's bytes (each file at most [`MAX_SAMPLE_FILE`]).
    pub fn read_sample(&self, sample: &str) -> std::io::Result<SampleFiles> {
        let d = self.sample_dir(sample);
        let read = |name: &str| read_bounded(&d.join(name), MAX_SAMPLE_FILE);
        let (request, _) = read("request.json")?;
        let ((response, _), streamed) = match read("response.sse") {
            Ok(b) => (b, true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (read("response.json")?, false),
            Err(e) => return Err(e),
        };
        let mut meta_error = None;
        let meta = match read("meta.json") {
            Ok((b, _)) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            // A meta.json that cannot be read (a folder, too large) is damage, not a reason to
            // drop the sample: it is scored without it, and reported.
            Err(e) => {
                meta_error = Some(e.to_string());
                Vec::new()
            }
        };
        Ok(SampleFiles {
            request,
            response,
            streamed,
            meta,
            meta_error,
        })
    }
}

impl SampleFiles {
    /// The request and meta parsed, each once, and what is damaged in them, one line each: a
    /// `request.json` or a `meta.json` that does not parse is left out (scoring then falls back
    /// to the task's tools; without meta the HTTP status is unknown), never an error: the sample
    /// is still scored, and the build reports it like a skipped input so nobody mistakes it
    /// for intact.
    pub fn parse(&self) -> (Option<Value>, Option<Meta>, Vec<String>) {
        let mut damage = Vec::new();
        let request = serde_json::from_slice::<Value>(&self.request)
            .map_err(|e| {
                damage.push(format!(
                    "request.json is not JSON ({e}): scored anyway, against the task's tools as they are now"
                ))
            })
            .ok();
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
    for (run_id, rdir) in runs {
        if run_id.starts_with('.') {
            continue;
        }
        match read_run(model, task_id, &run_id, &rdir, &mut scan.skipped) {
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
    std::fs::create_dir_all(root)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(root.join(LOCK_FILE))?;
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
        std::fs::create_dir_all(tmp.join("samples"))?;
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
