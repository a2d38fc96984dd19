//! Stage 5, write: pages go into a temporary folder beside `--out`, written by one thread while
//! the others score and render, and the folder is swapped into place at the end (one atomic
//! exchange), so a failed or killed build leaves the previous site as it was. Only a folder
//! [`super::owned`] says is the build's own is replaced; the site written carries the marker
//! that says so for the next build.
//!
//! An in-place build (the cache vouches for the site in `--out`) stages the files it changes in
//! that temporary folder too, and touches the site only once everything is written: it then
//! commits the update (a file listing what to remove and the marker to write, renamed into
//! place), moves the staged files in and removes the stale ones. A build killed before the
//! commit leaves the site as it was (the staging is removed by the next build); one killed
//! after it leaves an update that the next build finishes before anything else
//! ([`finish_interrupted`]).

use super::owned::{self, FileSet};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender};
use std::thread::JoinHandle;

/// Files a publisher keeps in the site folder by hand; they are carried into each new build.
pub const CARRIED: [&str; 4] = ["CNAME", "README.md", ".gitignore", ".gitkeep"];

/// Pages waiting for the writer thread at most; bounds the memory held by rendered pages.
const QUEUE: usize = 512;

/// A rendered page on its way to the writer thread: where it goes (relative to the site root),
/// and its bytes.
pub type Page = (String, Vec<u8>);

/// The folder `out` names, however it was spelt (`site`, `./site`, an absolute path, a link to
/// it): what the cache records, so that the next build recognises its own site and updates it
/// in place. A folder that does not exist yet is named absolutely.
pub fn canonical_out(out: &Path) -> PathBuf {
    std::fs::canonicalize(out)
        .or_else(|_| std::path::absolute(out))
        .unwrap_or_else(|_| out.to_path_buf())
}

/// A site being written: where its files go and the thread that writes them.
pub struct SiteWriter {
    out: PathBuf,
    /// The temporary folder beside `out` (its path, `out`'s parent and name): swapped into
    /// place at the end, or, in place, where the changed files are staged.
    tmp: Option<(PathBuf, PathBuf, String)>,
    /// The site in `out` is updated in place (its changed files staged in `tmp`).
    in_place: bool,
    tx: Option<SyncSender<Page>>,
    thread: Option<JoinHandle<Result<FileSet>>>,
    /// The files of the site that this build wrote (and, in place, that the previous builds
    /// wrote and this one kept): what the marker names.
    files: Mutex<FileSet>,
}

impl SiteWriter {
    /// Starts a site that will replace `out`. A previous build's pages (when `out` is one) are
    /// reused where identical (see [`write_pages`]).
    /// `out` must have been found replaceable ([`owned::inspect`]); it is looked at again just
    /// before the swap.
    pub fn begin(out: &Path) -> Result<SiteWriter> {
        let previous = out
            .join("data")
            .join("manifest.json")
            .is_file()
            .then(|| out.to_path_buf());
        let (tmp, parent, name) = temp_dir(out)?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Page>(QUEUE);
        let root = tmp.clone();
        let thread = std::thread::spawn(move || write_pages(&root, previous.as_deref(), None, rx));
        Ok(SiteWriter {
            out: out.to_path_buf(),
            tmp: Some((tmp, parent, name)),
            in_place: false,
            tx: Some(tx),
            thread: Some(thread),
            files: Mutex::new(FileSet::default()),
        })
    }

    /// Updates the site in `out` in place (an incremental build over the site the previous build
    /// wrote, whose marker names `files`): the files sent are staged beside it and moved in
    /// only by [`SiteWriter::finish`], after the update is committed; nothing else is touched.
    pub fn in_place(out: &Path, files: FileSet) -> Result<SiteWriter> {
        let (tmp, parent, name) = temp_dir(out)?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Page>(QUEUE);
        let (root, site) = (tmp.clone(), out.to_path_buf());
        let thread = std::thread::spawn(move || write_pages(&root, None, Some(&site), rx));
        Ok(SiteWriter {
            out: out.to_path_buf(),
            tmp: Some((tmp, parent, name)),
            in_place: true,
            tx: Some(tx),
            thread: Some(thread),
            files: Mutex::new(files),
        })
    }

    fn files(&self) -> Result<std::sync::MutexGuard<'_, FileSet>> {
        self.files
            .lock()
            .map_err(|_| anyhow::anyhow!("a page writer failed"))
    }

    /// A handle the scoring threads send their pages through.
    pub fn sender(&self) -> Result<SyncSender<Page>> {
        self.tx
            .clone()
            .ok_or_else(|| anyhow::anyhow!("the page writer has stopped"))
    }

    /// Waits for every queued page to be written.
    pub fn drain(&mut self) -> Result<()> {
        self.tx = None;
        let written = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r?,
            Some(Err(_)) => bail!("the page writer panicked"),
            None => return Ok(()),
        };
        self.files()?.union(written);
        Ok(())
    }

    /// Writes one summary file now (in place: staged, only when its bytes changed). The page
    /// writer must have been drained.
    pub fn summary_file(&self, path: &str, bytes: &[u8]) -> Result<()> {
        let Some((tmp, _, _)) = &self.tmp else {
            bail!("the site's temporary folder is gone");
        };
        if self.in_place && holds(&self.out.join(path), bytes) {
            return Ok(());
        }
        let p = tmp.join(path);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        std::fs::write(&p, bytes).with_context(|| format!("cannot write {}", p.display()))?;
        // In place, a file the site already has stays in the set the marker names.
        if !(self.in_place && std::fs::symlink_metadata(self.out.join(path)).is_ok()) {
            self.files()?.add(path);
        }
        Ok(())
    }

    /// Removes `stale` files (in place: the previous build's files this one does not have),
    /// carries the publisher's files over, and swaps the new site into place. Returns the
    /// carried files' count and bytes.
    pub fn finish(mut self, stale: &[String]) -> Result<(usize, u64)> {
        self.drain()?;
        let Some((tmp, parent, name)) = self.tmp.take() else {
            bail!("the site's temporary folder is gone");
        };
        if self.in_place {
            let mut files = *self.files()?;
            let stale: Vec<&String> = stale
                .iter()
                .filter(|p| std::fs::symlink_metadata(self.out.join(p)).is_ok())
                .collect();
            for path in &stale {
                files.remove(path);
            }
            let committed = commit(&tmp, &stale, &files);
            if let Err(e) = committed {
                let _ = owned::remove_marker_last(&tmp);
                return Err(e);
            }
            apply_update(&tmp, &self.out)?;
            return Ok(carried_size(&self.out));
        }
        let files = *self.files()?;
        let result = (|| {
            for c in CARRIED {
                let from = self.out.join(c);
                // A carried file is a publisher's regular file; a symlink there was refused.
                if std::fs::symlink_metadata(&from).is_ok_and(|m| m.is_file()) {
                    std::fs::copy(&from, tmp.join(c))
                        .with_context(|| format!("cannot carry {} over", from.display()))?;
                }
            }
            std::fs::write(tmp.join(owned::MARKER), files.marker())
                .with_context(|| format!("cannot write {}", tmp.join(owned::MARKER).display()))?;
            Ok(carried_size(&tmp))
        })();
        let size = match result {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        if let Err(e) = swap(&tmp, &self.out, &parent, &name) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        Ok(size)
    }
}

impl Drop for SiteWriter {
    /// A build that failed half-way leaves no temporary folder behind (an in-place update not
    /// yet committed is dropped with it: the site was not touched).
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some((tmp, _, _)) = &self.tmp
            && std::fs::symlink_metadata(tmp.join(owned::UPDATE)).is_err()
        {
            let _ = std::fs::remove_dir_all(tmp);
        }
    }
}

/// The folder `out` is in, and its name there: where its temporary folders go.
fn beside(out: &Path) -> (PathBuf, String) {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "site".into());
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    (parent, name)
}

/// The first line of [`owned::UPDATE`].
const UPDATE_FORMAT: &str = "callcheck-update 1";

/// Commits an in-place update staged in `tmp`: the files of the site to remove (`stale`,
/// relative) and the marker the updated site carries (naming `files`), written to a temporary
/// file renamed to [`owned::UPDATE`]. From then on the update is finished, by this build or
/// the next ([`finish_interrupted`]).
fn commit(tmp: &Path, stale: &[&String], files: &FileSet) -> Result<()> {
    let mut text = format!("{UPDATE_FORMAT}\n");
    for path in stale {
        text.push_str(&format!("remove {path}\n"));
    }
    text.push_str(&String::from_utf8_lossy(&files.marker()));
    let path = tmp.join(owned::UPDATE);
    crate::fsafe::replace_file(&path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The most bytes read of an [`owned::UPDATE`] file (a line per stale page).
const MAX_UPDATE: u64 = 256 << 20;

/// Finishes the committed update staged in `tmp` on the site `out`: moves every staged file into
/// place (each an atomic rename over the page it replaces), removes the stale files, writes the
/// marker, then removes the staging folder, its marker last. Each step can be done again, so a
/// build killed half-way through is finished by the next one.
fn apply_update(tmp: &Path, out: &Path) -> Result<()> {
    let path = tmp.join(owned::UPDATE);
    let bytes = crate::fsafe::read_own(&path, MAX_UPDATE)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let text = String::from_utf8(bytes)
        .ok()
        .filter(|t| t.starts_with(UPDATE_FORMAT))
        .with_context(|| format!("{} is not an update callcheck wrote", path.display()))?;
    let (remove, marker) = match text.split_once(&format!("\n{}", owned::MARKER_FORMAT)) {
        Some((head, tail)) => (head, format!("{}{tail}", owned::MARKER_FORMAT)),
        None => bail!("{} names no marker", path.display()),
    };
    // The staged files (the build wrote only regular files there), each moved over its page.
    let staged: Vec<String> = owned::list(tmp)?
        .into_iter()
        .filter(|f| f.kind.is_none() && f.rel != owned::MARKER && f.rel != owned::UPDATE)
        .map(|f| f.rel)
        .collect();
    for rel in &staged {
        if let Some(d) = Path::new(rel).parent() {
            crate::fsafe::create_dirs_within(out, d)?;
        }
        let (from, to) = (tmp.join(rel), out.join(rel));
        std::fs::rename(&from, &to).with_context(|| format!("cannot write {}", to.display()))?;
    }
    for rel in remove.lines().filter_map(|l| l.strip_prefix("remove ")) {
        let p = out.join(rel);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove {}", p.display())),
        }
    }
    if !holds(&out.join(owned::MARKER), marker.as_bytes()) {
        write_atomic(out, owned::MARKER, marker.as_bytes())?;
    }
    owned::remove_marker_last(tmp).with_context(|| format!("cannot remove {}", tmp.display()))?;
    Ok(())
}

/// Finishes what in-place builds of `out` committed and did not finish (killed while moving
/// their files in): called by a build before it looks at `out` at all. Returns the updates
/// finished, for the build to say.
pub fn finish_interrupted(out: &Path) -> Result<Vec<PathBuf>> {
    let (parent, name) = beside(out);
    let mut finished = Vec::new();
    for tmp in owned::leftovers(&parent, &name) {
        if std::fs::symlink_metadata(tmp.join(owned::UPDATE)).is_ok_and(|m| m.is_file())
            && owned::marker(&tmp).is_some()
        {
            apply_update(&tmp, out).with_context(|| {
                format!(
                    "cannot finish the update of {} an interrupted build committed in {}",
                    out.display(),
                    tmp.display()
                )
            })?;
            finished.push(tmp);
        }
    }
    Ok(finished)
}

/// The publisher's files carried in `dir`: count and bytes.
fn carried_size(dir: &Path) -> (usize, u64) {
    CARRIED
        .iter()
        .filter_map(|c| std::fs::metadata(dir.join(c)).ok().filter(|m| m.is_file()))
        .fold((0, 0), |(n, b), m| (n + 1, b + m.len()))
}

/// Whether the file at `path` holds exactly `bytes`: its size first, then its contents a block
/// at a time (a 19 MB export is compared without being held twice).
fn holds(path: &Path, bytes: &[u8]) -> bool {
    use std::io::Read;
    // A symlink holds nothing of the site's: it is replaced, never read through.
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(mut f) = crate::fsafe::open_own(path, "") else {
        return false;
    };
    if !f
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64)
    {
        return false;
    }
    let mut block = vec![0u8; 1 << 16];
    let mut rest = bytes;
    loop {
        match f.read(&mut block) {
            Ok(0) => return rest.is_empty(),
            Ok(n) => match rest.split_at_checked(n) {
                Some((head, tail)) if head == &block[..n] => rest = tail,
                _ => return false,
            },
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Replaces `root/rel` with `bytes` through a temporary file and a rename, so that a reader (or
/// a crash) never sees it half-written; a symlinked folder on the way is refused, and a symlink
/// at the file itself is replaced, not followed. Returns whether a file was there before.
fn write_atomic(root: &Path, rel: &str, bytes: &[u8]) -> Result<bool> {
    let rel = Path::new(rel);
    if let Some(d) = rel.parent() {
        crate::fsafe::create_dirs_within(root, d)?;
    }
    let path = root.join(rel);
    crate::fsafe::replace_file(&path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

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
fn write_pages(
    root: &Path,
    previous: Option<&Path>,
    site: Option<&Path>,
    rx: Receiver<Page>,
) -> Result<FileSet> {
    // Only to skip redundant mkdir calls; its order never reaches the output.
    let mut made: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    let mut written = FileSet::default();
    for (rel, bytes) in rx {
        let path = root.join(&rel);
        // In place, a page staged for a file the site already has stays in the set its marker
        // names; a new one joins it.
        let new = site.is_none_or(|s| std::fs::symlink_metadata(s.join(&rel)).is_err());
        if let Some(parent) = path.parent()
            && !made.contains(parent)
        {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
            made.insert(parent.to_path_buf());
        }
        if new {
            written.add(&rel);
        }
        if let Some(old) = previous.map(|p| p.join(&rel))
            && std::fs::symlink_metadata(&old).is_ok_and(|m| m.is_file())
            // At most the new file's size (+1) is read: a longer one differs anyway.
            && crate::fsafe::read_own(&old, bytes.len() as u64).is_ok_and(|b| b == bytes)
            && std::fs::hard_link(&old, &path).is_ok()
        {
            continue;
        }
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(written)
}

/// The temporary folder beside `out` (same file system, so the final rename is atomic), emptied
/// if a crashed build left one behind.
fn temp_dir(out: &Path) -> Result<(PathBuf, PathBuf, String)> {
    let (parent, name) = beside(out);
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    // What builds killed half-way left here (their own, proven by the marker; never a live
    // build's).
    let (removed, left) = owned::clear_interrupted(&parent, &name);
    for r in removed {
        eprintln!("removed {}, left by an interrupted build", r.display());
    }
    for (l, why) in left {
        eprintln!(
            "warning: left {} (named like an interrupted build's, but {why})",
            l.display()
        );
    }
    let tmp = parent.join(owned::tmp_name(&name, std::process::id()));
    std::fs::create_dir(&tmp).with_context(|| {
        format!(
            "cannot create {} (a folder of that name that is not a build's is left alone: move it away)",
            tmp.display()
        )
    })?;
    // Marked from the start, so that a build killed half-way leaves a folder the next one can
    // prove is a build's.
    std::fs::write(tmp.join(owned::MARKER), FileSet::default().marker())
        .with_context(|| format!("cannot write {}", tmp.join(owned::MARKER).display()))?;
    Ok((tmp, parent, name))
}

/// Exchanges the folders at `a` and `b` in one step (Linux's `renameat2` with
/// `RENAME_EXCHANGE`): at every moment each path names one whole folder. `Ok(false)` where the
/// file system cannot.
fn exchange(a: &Path, b: &Path) -> std::io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &Path| {
            std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other)
        };
        let (ca, cb) = (c(a)?, c(b)?);
        // SAFETY: two valid C strings, relative to the working directory.
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                ca.as_ptr(),
                libc::AT_FDCWD,
                cb.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        if rc == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => Ok(false),
            _ => Err(e),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (a, b);
        Ok(false)
    }
}

fn swap(tmp: &Path, out: &Path, parent: &Path, name: &str) -> Result<()> {
    if std::fs::symlink_metadata(out).is_ok() {
        // Looked at again now, not only when the build began: a file added since is not
        // removed with the previous site.
        owned::inspect(out)?;
        // One exchange: `out` is the previous site until it is the new one, never neither. The
        // previous site, now at `tmp`, is removed marker-last (a removal killed half-way is
        // finished by the next build).
        if exchange(tmp, out)
            .with_context(|| format!("cannot move the new site into {}", out.display()))?
        {
            return owned::remove_marker_last(tmp)
                .with_context(|| format!("cannot remove the previous site at {}", tmp.display()));
        }
        let old = parent.join(owned::old_name(name, std::process::id()));
        std::fs::rename(out, &old)
            .with_context(|| format!("cannot move the previous site {} aside", out.display()))?;
        if let Err(e) = std::fs::rename(tmp, out) {
            // Put the previous site back: never leave no site at all.
            let _ = std::fs::rename(&old, out);
            return Err(e)
                .with_context(|| format!("cannot move the new site into {}", out.display()));
        }
        owned::remove_marker_last(&old)
            .with_context(|| format!("cannot remove the previous site at {}", old.display()))?;
    } else {
        std::fs::rename(tmp, out)
            .with_context(|| format!("cannot move the new site into {}", out.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An update committed by a build killed while moving its files in (one page moved, one
    /// still staged) is finished by the next build: every staged page moved in, the stale page
    /// removed, the marker written, the staging folder gone. One never committed is not
    /// applied: the site stays as it was and the staging is cleared as a leftover.
    #[test]
    fn a_committed_update_is_finished_and_an_uncommitted_one_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("site");
        for (rel, text) in [
            ("index.html", "old index"),
            ("t/m/a.html", "old a"),
            ("t/m/b.html", "b"),
        ] {
            crate::fsafe::create_dirs_within(
                tmp.path(),
                Path::new("site").join(rel).parent().unwrap(),
            )
            .unwrap();
            std::fs::write(out.join(rel), text).unwrap();
        }
        let mut files = FileSet::default();
        for rel in ["index.html", "t/m/a.html", "t/m/b.html"] {
            files.add(rel);
        }
        std::fs::write(out.join(owned::MARKER), files.marker()).unwrap();
        // Staged by a build (a process id no build has), committed, half moved in.
        let staging = tmp.path().join(owned::tmp_name("site", 0x7fff_fff0));
        std::fs::create_dir_all(staging.join("t/m")).unwrap();
        std::fs::write(staging.join(owned::MARKER), FileSet::default().marker()).unwrap();
        std::fs::write(staging.join("t/m/a.html"), "new a").unwrap();
        std::fs::write(staging.join("t/m/c.html"), "new c").unwrap();
        let mut after = files;
        after.add("t/m/c.html");
        after.remove("t/m/b.html");
        let stale = "t/m/b.html".to_string();
        commit(&staging, &[&stale], &after).unwrap();
        std::fs::write(out.join("index.html"), "new index").unwrap(); // moved in before the kill
        let finished = finish_interrupted(&out).unwrap();
        assert_eq!(finished, std::slice::from_ref(&staging));
        assert!(!staging.exists());
        let read = |rel: &str| std::fs::read_to_string(out.join(rel)).ok();
        assert_eq!(read("index.html").as_deref(), Some("new index"));
        assert_eq!(read("t/m/a.html").as_deref(), Some("new a"));
        assert_eq!(read("t/m/c.html").as_deref(), Some("new c"));
        assert_eq!(read("t/m/b.html"), None);
        assert_eq!(owned::marker(&out), Some(after));
        assert_eq!(owned::inspect(&out).unwrap(), owned::Site::Marked(after));
        // Finished already: nothing left to do.
        assert!(finish_interrupted(&out).unwrap().is_empty());

        // Staged, never committed: not applied, and cleared with the other leftovers.
        std::fs::create_dir_all(staging.join("t/m")).unwrap();
        std::fs::write(staging.join(owned::MARKER), FileSet::default().marker()).unwrap();
        std::fs::write(staging.join("t/m/a.html"), "newer a").unwrap();
        assert!(finish_interrupted(&out).unwrap().is_empty());
        assert_eq!(read("t/m/a.html").as_deref(), Some("new a"));
        let (removed, left) = owned::clear_interrupted(tmp.path(), "site");
        assert_eq!((removed, left), (vec![staging.clone()], vec![]));
    }

    #[test]
    fn holds_tells_a_file_with_the_same_bytes_from_any_other() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("samples.csv");
        // Longer than one block, so the comparison crosses block boundaries.
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        assert!(!holds(&p, &bytes), "no file");
        std::fs::write(&p, &bytes).unwrap();
        assert!(holds(&p, &bytes));
        let mut other = bytes.clone();
        other[150_000] ^= 1;
        assert!(!holds(&p, &other), "one byte differs, past the first block");
        assert!(!holds(&p, &bytes[..bytes.len() - 1]), "shorter");
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(!holds(&p, &longer), "longer");
        assert!(!holds(tmp.path(), b""), "a folder");
        std::fs::write(&p, b"").unwrap();
        assert!(holds(&p, b""));
    }
}
