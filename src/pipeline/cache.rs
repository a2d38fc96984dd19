//! The verdict cache (`build --cache DIR`): what the previous build learnt about each sample, so
//! that a rebuild after a collect re-reads, re-scores and re-renders only the samples that are
//! new or changed, draws again only the summary pages whose inputs changed
//! ([`crate::site::reuse`]), takes the comparisons' pooled statistics whose counts did not
//! change ([`crate::stats::compare::Memo`]), and rewrites only the pages whose bytes changed.
//!
//! A sample's verdict is reused when its transcript (sha256 of its files), its task (sha256 of
//! the task file), its run's `cell.json` and the build's code (the scoring rules and the page
//! renderer: [`identity`]) are all unchanged. Reading a transcript to hash it is skipped when
//! the sample's folder and each file read from it have the same size, modification and change
//! times and inode as when they were hashed ([`crate::runs::SampleLook`], what `git status`
//! trusts for its index), so a transcript edited in place is read again; a stat taken at the
//! tick the build began is not trusted (the next build reads that file and compares its hash).
//! A fresh clone of `runs/` changes every stat, and then the files are read and hashed, and the
//! verdicts still reused.
//!
//! The cache lives outside the published site (never under `--out`); losing it only costs time.

use crate::evidence::cache::{CachedScored, Sha256};
use crate::runs::{FileStat, RunLook};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The cache file inside the cache folder: [`MAGIC`], then in postcard (a compact binary serde
/// format) the identity, the task folders' listings, the number of runs, per run its path and
/// its record's length then the record, and the site;
/// last, the CRC-32 of everything before it, so a damaged file is never trusted for a verdict
/// (the cache is a local file, read back by the build that wrote it: a checksum against damage,
/// computed at 10+ GB/s, where a sha256 of a 100,000-sample cache took 20 ms each way).
/// A 100,000-sample cache is about 29 MB, read and written in a few hundredths of a second.
const FILE: &str = "verdicts.bin";

/// The first bytes of the cache file; a file that does not start with them is not read.
const MAGIC: &[u8] = b"callcheck verdict cache 16\n";

/// The first bytes of every version's cache file: what tells callcheck's `verdicts.bin` from
/// another program's file of that name ([`crate::cmd`]'s cache folder check).
pub const MAGIC_PREFIX: &[u8] = b"callcheck verdict cache ";

/// The cache file of earlier versions (JSON), removed when a new one is written.
const OLD_FILE: &str = "verdicts.json";

/// How an earlier version's cache file starts (its first key).
pub const OLD_FILE_HEAD: &[u8] = b"{\"identity\":";

/// The largest cache file read (about eight million samples' worth).
const MAX_FILE: u64 = 2 << 30;

/// The sources whose change invalidates every cached verdict and page: the scoring rules (their
/// hash is published in the manifest) and everything that renders a sample's page.
const RENDERER: &[&str] = &[
    env!("CARGO_PKG_VERSION"),
    include_str!("../site/pages/run.rs"),
    include_str!("../site/html.rs"),
    include_str!("../../templates/sample.html"),
    include_str!("../../templates/run.html"),
    include_str!("../../templates/stub.html"),
    include_str!("../../templates/base.html"),
    include_str!("../site/card.rs"),
    include_str!("../site/marks.rs"),
    include_str!("../site/matrix.rs"),
    include_str!("../evidence/read.rs"),
    include_str!("../evidence/score.rs"),
    include_str!("../hitec.rs"),
];

/// What a cached verdict was computed with: the scoring rules and the page renderer.
pub fn identity() -> String {
    let mut all = crate::site::data::rules_sha256().into_bytes();
    for s in RENDERER {
        all.extend_from_slice(crate::task::sha256_hex(s.as_bytes()).as_bytes());
    }
    crate::task::sha256_hex(&all)
}

/// The cache as a build writes it at its end ([`save_runs`]).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CacheFile {
    pub identity: String,
    /// The site the previous build wrote, when it wrote one.
    pub site: Option<CachedSite>,
    /// Task folders' listings, by `<model>/<task-id>`, with how each folder looked.
    pub listings: BTreeMap<String, (FileStat, Vec<String>)>,
    /// By run folder, relative to the runs root.
    pub runs: BTreeMap<String, CachedRun>,
}

/// The site a build left in `--out`: a rebuild updates it in place only when its manifest is
/// still the one written then (nobody replaced or half-rewrote the site since).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CachedSite {
    pub out: PathBuf,
    pub manifest_sha256: String,
    /// Every file of the site that is not a sample's page, with its size.
    pub summary_files: BTreeMap<String, u64>,
    /// Whether the index drew the matrix (run pages link their cell there, else on a tag page).
    pub matrix_on_index: bool,
    /// The base address the pages' link cards were written with (`build --site-url`): with
    /// another, every page changes.
    pub site_url: Option<String>,
    /// The groups of summary pages ([`crate::site::reuse`]) by name: what they were drawn from,
    /// and their files.
    pub groups: BTreeMap<String, CachedGroup>,
    /// The samples of its matrix (the rows of its samples.csv).
    pub samples: u64,
    /// Its pooled comparisons ([`crate::stats::compare::Memo`]).
    pub pooled: crate::stats::compare::Remembered,
}

/// A group of summary files ([`crate::site::reuse`]) as the previous build drew them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CachedGroup {
    /// The key of the inputs they were drawn from.
    pub key: Sha256,
    /// Relative to the site, with their sizes.
    pub files: Vec<(String, u64)>,
}

/// The groups of summary pages of one build: those the previous build drew into the site being
/// updated in place (checked against the files on disk when asked for), and those this build
/// draws or keeps, for the next.
pub struct GroupBook {
    site: PathBuf,
    prior: BTreeMap<String, CachedGroup>,
    next: std::sync::Mutex<BTreeMap<String, CachedGroup>>,
    kept: std::sync::atomic::AtomicUsize,
}

impl GroupBook {
    /// `prior`: the previous build's groups, when the site in `site` is still the one it wrote
    /// (else empty: every group is drawn).
    pub fn new(site: &Path, prior: BTreeMap<String, CachedGroup>) -> GroupBook {
        GroupBook {
            site: site.to_path_buf(),
            prior,
            next: Default::default(),
            kept: Default::default(),
        }
    }

    /// How many groups were kept as they were, of how many.
    pub fn kept(&self) -> (usize, usize) {
        (
            self.kept.load(std::sync::atomic::Ordering::Relaxed),
            self.next().len(),
        )
    }

    fn next(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, CachedGroup>> {
        // Poisoned only by a panic elsewhere, which fails the build anyway.
        self.next.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The groups of this build, for the cache, with the size of each file drawn (taken from
    /// `written`, every summary file written); the files of the groups kept are added to
    /// `written`, as files of this build's site.
    pub fn finish(self, written: &mut BTreeMap<String, u64>) -> BTreeMap<String, CachedGroup> {
        let mut groups = self.next.into_inner().unwrap_or_else(|e| e.into_inner());
        for g in groups.values_mut() {
            for (path, size) in &mut g.files {
                match written.get(path) {
                    Some(n) => *size = *n,
                    None => {
                        written.insert(path.clone(), *size);
                    }
                }
            }
        }
        groups
    }
}

impl crate::site::reuse::Groups for GroupBook {
    fn keep(&self, name: &str, key: &crate::site::reuse::Key) -> bool {
        let Some(g) = self.prior.get(name).filter(|g| g.key.0 == *key) else {
            return false;
        };
        // The files are where the previous build wrote them, with their sizes (the site's
        // manifest already vouched that nobody rewrote the site since).
        let intact = g.files.iter().all(|(path, size)| {
            std::fs::symlink_metadata(self.site.join(path))
                .is_ok_and(|m| m.is_file() && m.len() == *size)
        });
        if intact {
            self.next().insert(name.to_string(), g.clone());
            self.kept.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        intact
    }

    fn drawn(&self, name: &str, key: crate::site::reuse::Key, files: Vec<String>) {
        let files = files.into_iter().map(|f| (f, 0)).collect();
        self.next().insert(
            name.to_string(),
            CachedGroup {
                key: Sha256(key),
                files,
            },
        );
    }
}

/// One run folder's samples, valid for one `cell.json` and one version of the task file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CachedRun {
    /// What the scan read of the run, while its folders look the same ([`crate::runs::Known`]).
    /// First: the scan decodes it alone ([`Prior::folders`]).
    pub folders: Option<CachedFolders>,
    pub cell_sha256: String,
    pub task_sha256: String,
    /// sha256 of the run's listing, as in the manifest.
    pub listing_sha256: String,
    /// The size of the run's page (`index.html`), when it has one.
    pub run_page: Option<u64>,
    /// What the run's page shows of the samples that followed its failures up
    /// ([`crate::evidence::follow_ups::fingerprint`]): the page stands only while they are the same.
    pub follow_ups_sha256: String,
    /// By sample folder name.
    pub samples: BTreeMap<String, CachedSample>,
    /// The record is the previous build's, unchanged: the next cache copies its bytes from the
    /// previous cache ([`save_runs`]) and `samples` is left empty.
    #[serde(skip)]
    pub verbatim: bool,
}

/// A run's folders as the scan saw them: how they looked, and what it read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CachedFolders {
    pub look: RunLook,
    pub seen: crate::runs::SeenRun,
}

/// One sample: what its files hashed to, its verdict and its page. Kept small: a build holds
/// one of these per sample.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CachedSample {
    /// sha256 over the sample's file hashes.
    #[serde(rename = "t")]
    pub transcript_sha256: Sha256,
    #[serde(rename = "b")]
    pub bytes: u64,
    #[serde(rename = "l")]
    pub page_len: u64,
    /// What is wrong with a damaged request.json or meta.json, reported on every build.
    #[serde(rename = "dm", default)]
    pub damage: Vec<String>,
    /// How its folder and files looked when they were hashed, when a later build may trust
    /// that (`None`: the next build reads and hashes them).
    #[serde(rename = "lk", default)]
    pub look: Option<crate::runs::SampleLook>,
    /// Filled in when the cache is saved (from the matrix, so a build holds each detail once).
    #[serde(rename = "v")]
    pub scored: Option<Box<CachedScored>>,
}

impl CachedSample {
    /// Whether its verdict is there and names outcomes this build knows.
    pub fn decodes(&self) -> bool {
        self.scored.as_ref().is_some_and(|s| s.decodes())
    }
}

/// The previous build's cache as read at the start of a build: its bytes, and where each run's
/// record lies in them. A run's record is decoded only when its run is built ([`Prior::run`]),
/// so a 300,000-sample rebuild holds the compact bytes, not 300,000 decoded records at once.
#[derive(Debug, Default)]
pub struct Prior {
    /// The site the previous build wrote, when it wrote one.
    pub site: Option<CachedSite>,
    bytes: Vec<u8>,
    /// By run folder, relative to the runs root: where its record lies in `bytes`.
    runs: BTreeMap<String, std::ops::Range<usize>>,
    /// The task folders' listings ([`CacheFile::listings`]).
    listings: BTreeMap<String, (FileStat, Vec<String>)>,
}

impl crate::runs::Known for Prior {
    fn listing(&self, rel: &str, look: &FileStat) -> Option<Vec<String>> {
        self.listings
            .get(rel)
            .filter(|(l, _)| l == look)
            .map(|(_, names)| names.clone())
    }

    fn run(&self, rel: &str, look: &RunLook) -> Option<crate::runs::SeenRun> {
        self.folders(rel)
            .filter(|f| f.look == *look)
            .map(|f| f.seen)
    }
}

impl Prior {
    /// The previous build's record of the run at `path`; `None` when it had none (or, should a
    /// record whose checksum matched not decode, when it cannot be used: the run is built anew).
    pub fn run(&self, path: &str) -> Option<CachedRun> {
        let range = self.runs.get(path)?.clone();
        postcard::from_bytes(self.bytes.get(range)?).ok()
    }

    /// What the previous build's scan read of the run at `path`, without the rest of its
    /// record (the first field of a record, decoded alone).
    pub fn folders(&self, path: &str) -> Option<CachedFolders> {
        let range = self.runs.get(path)?.clone();
        postcard::take_from_bytes::<Option<CachedFolders>>(self.bytes.get(range)?)
            .ok()?
            .0
    }

    /// The bytes of the previous build's record of the run at `path`.
    fn record(&self, path: &str) -> Option<&[u8]> {
        self.bytes.get(self.runs.get(path)?.clone())
    }

    /// The run folders the previous build had.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.runs.keys().map(String::as_str)
    }
}

impl CachedRun {
    /// The pages this record says the run had in the site: its page and its samples' stubs,
    /// relative to the site root (`path` is the run folder, relative to the runs root).
    pub fn pages(&self, path: &str) -> Vec<String> {
        let mut pages = Vec::with_capacity(self.samples.len() + 1);
        if self.run_page.is_some() {
            pages.push(format!("t/{path}/index.html"));
        }
        pages.extend(self.samples.keys().map(|n| format!("t/{path}/{n}.html")));
        pages
    }
}

/// Reads the cache in `dir`; a missing, unreadable or outdated cache is an empty one (said on
/// stderr when it exists but cannot be used).
pub fn load(dir: &Path) -> Prior {
    clear_leftovers(dir);
    let path = dir.join(FILE);
    let bytes = match crate::runs::read_bounded(&path, MAX_FILE) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Prior::default(),
        Err(e) => {
            eprintln!(
                "note: the cache {} is not readable ({e}): everything is scored again",
                path.display()
            );
            return Prior::default();
        }
    };
    match index(bytes) {
        Ok((identity, prior)) if identity == self::identity() => prior,
        Ok(_) => {
            eprintln!(
                "note: the cache in {} was made by another version of the scoring rules or pages: everything is scored again",
                dir.display()
            );
            Prior::default()
        }
        Err(e) => {
            eprintln!(
                "note: the cache {} is not readable ({e}): everything is scored again",
                path.display()
            );
            Prior::default()
        }
    }
}

/// Removes the temporary cache files (`.verdicts.bin.tmp-<pid>`) of builds that were killed
/// before they renamed theirs into place: only regular files (a link is removed, never
/// followed), only those of a process that is not a running build.
fn clear_leftovers(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{FILE}.tmp-");
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(&prefix)
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let mine = pid == std::process::id() as i32;
        if (mine || !super::owned::live_build(pid))
            && e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink())
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Checks the cache file's bytes and finds each run's record in them: the identity it was made
/// with, and the cache.
fn index(bytes: Vec<u8>) -> Result<(String, Prior), String> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or("it is not a cache this version of callcheck writes")?;
    let (body, sum) = body
        .split_at_checked(body.len().saturating_sub(4))
        .ok_or("it is cut short")?;
    let mut h = crc32fast::Hasher::new();
    h.update(MAGIC);
    h.update(body);
    if sum != h.finalize().to_le_bytes() {
        return Err("it is cut short or damaged (its checksum differs)".into());
    }
    let broken = |e: postcard::Error| format!("it is damaged ({e})");
    let start = MAGIC.len();
    let at = |rest: &[u8]| start + body.len() - rest.len();
    let (identity, rest) = postcard::take_from_bytes::<String>(body).map_err(broken)?;
    let (listings, rest) = postcard::take_from_bytes(rest).map_err(broken)?;
    let (n, mut rest) = postcard::take_from_bytes::<u64>(rest).map_err(broken)?;
    let mut runs = BTreeMap::new();
    for _ in 0..n {
        let ((path, len), more) =
            postcard::take_from_bytes::<(String, u64)>(rest).map_err(broken)?;
        let from = at(more);
        let len = usize::try_from(len).map_err(|_| "a record is too long")?;
        let record = more.get(..len).ok_or("a record runs past the end")?;
        runs.insert(path, from..from + record.len());
        rest = &more[len..];
    }
    let (site, rest) = postcard::take_from_bytes::<Option<CachedSite>>(rest).map_err(broken)?;
    if !rest.is_empty() {
        return Err("it has bytes after its end".into());
    }
    Ok((
        identity,
        Prior {
            site,
            bytes,
            runs,
            listings,
        },
    ))
}

/// A cache file being written: the runs first ([`save_runs`]), then the site ([`Saving::finish`]),
/// which is known only once the summary files are written; the two overlap in a build.
pub struct Saving {
    dir: PathBuf,
    tmp: TempFile,
    w: Summed,
}

/// A temporary file, removed when dropped unless kept: a build that fails before the cache is
/// finished leaves the old cache as it was.
struct TempFile(Option<PathBuf>);

impl TempFile {
    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The cache file being written, and the CRC-32 of what went into it so far.
struct Summed {
    w: std::io::BufWriter<std::fs::File>,
    h: crc32fast::Hasher,
}

impl std::io::Write for Summed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.w.write(buf)?;
        self.h.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

/// Starts writing the cache into `dir` (atomically: a temporary file renamed over the old one
/// by [`Saving::finish`]) with its runs. Each run is completed by `fill` (its samples' verdicts,
/// its folders) just before it is written, and those dropped right after: the cache's copy of
/// them never exists for all runs at once. A [`CachedRun::verbatim`] record is copied
/// from `prior`, the cache it was read from.
pub fn save_runs(
    dir: &Path,
    cache: &mut CacheFile,
    prior: &Prior,
    mut fill: impl FnMut(&str, &mut CachedRun),
) -> anyhow::Result<Saving> {
    use anyhow::Context;
    use std::io::Write;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = dir.join(format!(".{FILE}.tmp-{}", std::process::id()));
    // Created anew, never through a file or symlink already there (SPEC §12): a leftover of a
    // killed build with this process's id is removed first (a symlink itself, not its target).
    if std::fs::symlink_metadata(&tmp).is_ok_and(|m| !m.is_dir()) {
        std::fs::remove_file(&tmp).with_context(|| format!("cannot clear {}", tmp.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    let mut saving = Saving {
        dir: dir.to_path_buf(),
        tmp: TempFile(Some(tmp)),
        w: Summed {
            w: std::io::BufWriter::new(file),
            h: crc32fast::Hasher::new(),
        },
    };
    let w = &mut saving.w;
    (|| -> anyhow::Result<()> {
        w.write_all(MAGIC)?;
        postcard::to_io(&cache.identity, &mut *w)?;
        postcard::to_io(&cache.listings, &mut *w)?;
        // A verbatim record whose bytes are not in `prior` (never the case: it was decoded
        // from them) is left out, and its run read again by the next build.
        let copied = |path: &str, run: &CachedRun| run.verbatim.then(|| prior.record(path));
        let n = cache
            .runs
            .iter()
            .filter(|(path, run)| copied(path, run) != Some(None))
            .count();
        postcard::to_io(&(n as u64), &mut *w)?;
        for (path, run) in cache.runs.iter_mut() {
            // Each record behind its length: a build decodes only the runs it looks at.
            match copied(path, run) {
                Some(Some(record)) => {
                    postcard::to_io(&(path, record.len() as u64), &mut *w)?;
                    w.write_all(record)?;
                }
                Some(None) => {}
                None => {
                    fill(path, run);
                    let record = postcard::to_io(&*run, Vec::new())?;
                    postcard::to_io(&(path, record.len() as u64), &mut *w)?;
                    w.write_all(&record)?;
                    for s in run.samples.values_mut() {
                        s.scored = None;
                    }
                    run.folders = None;
                }
            }
        }
        Ok(())
    })()
    .with_context(|| format!("cannot write {}", saving.tmp.path().display()))?;
    Ok(saving)
}

impl Saving {
    /// Writes the site's record and puts the cache in place.
    pub fn finish(self, site: &Option<CachedSite>) -> anyhow::Result<()> {
        use anyhow::Context;
        use std::io::Write;
        let Saving { dir, mut tmp, w } = self;
        (|| -> anyhow::Result<()> {
            let Summed { mut w, h } = postcard::to_io(site, w)?;
            w.write_all(&h.finalize().to_le_bytes())?;
            w.flush()?;
            Ok(())
        })()
        .with_context(|| format!("cannot write {}", tmp.path().display()))?;
        let file = dir.join(FILE);
        std::fs::rename(tmp.path(), &file)
            .with_context(|| format!("cannot write {}", file.display()))?;
        tmp.0 = None;
        // An earlier version's cache, never read again (a file of that name that is not one
        // stays).
        let old = dir.join(OLD_FILE);
        if crate::fsafe::starts_with(&old, OLD_FILE_HEAD) {
            let _ = std::fs::remove_file(old);
        }
        Ok(())
    }
}

/// The disk's time now, as a file created in the cache folder `dir` says: what the looks this
/// build records are compared with ([`crate::runs::FileStat::settled_before`]), read from the
/// file system rather than a clock. `None` when no file can be made there (the build then
/// records no look, and the next one reads and hashes every file).
pub fn disk_now(dir: &Path) -> Option<crate::runs::DiskTime> {
    use std::os::unix::fs::MetadataExt;
    let path = dir.join(format!(".{FILE}.tmp-{}", std::process::id()));
    if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_dir()) {
        std::fs::remove_file(&path).ok()?;
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .ok()?;
    let m = file.metadata();
    let _ = std::fs::remove_file(&path);
    m.ok().map(|m| (m.ctime(), m.ctime_nsec()))
}

/// True when `cache` lies inside the site folder `out` (it would be published).
pub fn inside(cache: &Path, out: &Path) -> bool {
    super::owned::lexically_within(cache, out)
}
