//! Stage 5, write: pages go into a temporary folder beside `--out`, written by one thread while
//! the others score and render, and the folder is swapped into place at the end, so a failed
//! build leaves the previous site as it was. Only a folder [`super::owned`] says is the build's
//! own is replaced; the site written carries the marker that says so for the next build.

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
    /// The temporary folder swapped into place at the end; `None` when updating `out` in place.
    tmp: Option<(PathBuf, PathBuf, String)>,
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
        let thread = std::thread::spawn(move || write_pages(&root, previous.as_deref(), false, rx));
        Ok(SiteWriter {
            out: out.to_path_buf(),
            tmp: Some((tmp, parent, name)),
            tx: Some(tx),
            thread: Some(thread),
            files: Mutex::new(FileSet::default()),
        })
    }

    /// Updates the site in `out` in place (an incremental build over the site the previous build
    /// wrote, whose marker names `files`): each file is replaced atomically, and only the files
    /// sent are touched.
    pub fn in_place(out: &Path, files: FileSet) -> SiteWriter {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Page>(QUEUE);
        let root = out.to_path_buf();
        let thread = std::thread::spawn(move || write_pages(&root, None, true, rx));
        SiteWriter {
            out: out.to_path_buf(),
            tmp: None,
            tx: Some(tx),
            thread: Some(thread),
            files: Mutex::new(files),
        }
    }

    fn files(&self) -> Result<std::sync::MutexGuard<'_, FileSet>> {
        self.files
            .lock()
            .map_err(|_| anyhow::anyhow!("a page writer failed"))
    }

    /// True when the site is updated in place.
    pub fn is_in_place(&self) -> bool {
        self.tmp.is_none()
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

    /// Writes one summary file now (in place: only when its bytes changed, atomically). The page
    /// writer must have been drained.
    pub fn summary_file(&self, path: &str, bytes: &[u8]) -> Result<()> {
        match &self.tmp {
            None => {
                let p = self.out.join(path);
                if holds(&p, bytes) {
                    return Ok(());
                }
                if !write_atomic(&self.out, path, bytes)? {
                    self.files()?.add(path);
                }
                Ok(())
            }
            Some((tmp, _, _)) => {
                let p = tmp.join(path);
                if let Some(d) = p.parent() {
                    std::fs::create_dir_all(d)
                        .with_context(|| format!("cannot create {}", d.display()))?;
                }
                std::fs::write(&p, bytes)
                    .with_context(|| format!("cannot write {}", p.display()))?;
                self.files()?.add(path);
                Ok(())
            }
        }
    }

    /// Removes `stale` files (in place: the previous build's files this one does not have),
    /// carries the publisher's files over, and swaps the new site into place. Returns the
    /// carried files' count and bytes.
    pub fn finish(mut self, stale: &[String]) -> Result<(usize, u64)> {
        self.drain()?;
        let Some((tmp, parent, name)) = self.tmp.take() else {
            let mut files = *self.files()?;
            for path in stale {
                let p = self.out.join(path);
                match std::fs::remove_file(&p) {
                    Ok(()) => files.remove(path),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(e).with_context(|| format!("cannot remove {}", p.display()));
                    }
                }
            }
            let marker = files.marker();
            if !holds(&self.out.join(owned::MARKER), &marker) {
                write_atomic(&self.out, owned::MARKER, &marker)?;
            }
            return Ok(carried_size(&self.out));
        };
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
    /// A build that failed half-way leaves no temporary folder behind.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some((tmp, _, _)) = &self.tmp {
            let _ = std::fs::remove_dir_all(tmp);
        }
    }
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
    in_place: bool,
    rx: Receiver<Page>,
) -> Result<FileSet> {
    // Only to skip redundant mkdir calls; its order never reaches the output.
    let mut made: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    let mut written = FileSet::default();
    for (rel, bytes) in rx {
        if in_place {
            // In place, the folders are the site's: each is looked at (a symlinked one refused)
            // the first time a page goes into it.
            if let Some(parent) = Path::new(&rel).parent()
                && !made.contains(parent)
            {
                crate::fsafe::create_dirs_within(root, parent)?;
                made.insert(parent.to_path_buf());
            }
            let path = root.join(&rel);
            if !crate::fsafe::replace_file(&path, &bytes)
                .with_context(|| format!("cannot write {}", path.display()))?
            {
                written.add(&rel);
            }
            continue;
        }
        let path = root.join(&rel);
        if let Some(parent) = path.parent()
            && !made.contains(parent)
        {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
            made.insert(parent.to_path_buf());
        }
        written.add(&rel);
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

fn swap(tmp: &Path, out: &Path, parent: &Path, name: &str) -> Result<()> {
    if std::fs::symlink_metadata(out).is_ok() {
        // Looked at again now, not only when the build began: a file added since is not
        // removed with the previous site.
        owned::inspect(out)?;
        let old = parent.join(owned::old_name(name, std::process::id()));
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

#[cfg(test)]
mod tests {
    use super::holds;

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
