//! What `build` owns in `--out` (SPEC §12): a site it wrote carries the marker
//! [`MARKER`], which names the set of files that build wrote; the next build replaces the folder
//! only when the folder holds exactly those files (or is empty, absent, or a site an earlier
//! callcheck wrote before there was a marker, recognised strictly), and refuses, listing what it
//! found, otherwise. It also clears what interrupted builds left beside `--out`, when its marker
//! proves the leftover is a build's and no live build is writing it.
//!
//! The marker holds a digest of the set, not the list: a list would add tens of bytes per sample
//! to every published site (megabytes at 300,000 samples), where the digest is one line. The
//! digest is the XOR of each path's (truncated) sha256, so an in-place build updates it by the
//! files it adds and removes without listing the site again.

use crate::fsafe::not_regular;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// The marker's file name, at the site's root.
pub const MARKER: &str = ".callcheck-site";

/// The file that commits an in-place build's update, at the root of the folder it was staged
/// in beside `--out` ([`super::write`]): once it is there, the update is finished by whichever
/// build comes next, never thrown away.
pub const UPDATE: &str = ".callcheck-update";

/// The marker's first line: its format. No other program writes this line into this file.
pub const MARKER_FORMAT: &str = "callcheck-site 1";

/// The most bytes read of a marker (it is a few lines).
const MAX_MARKER: u64 = 4096;

/// The folders of a site (every earlier version's too): any other folder is not callcheck's.
const SITE_DIRS: [&str; 8] = [
    "charts", "compare", "data", "labels", "models", "t", "tags", "tasks",
];

/// The extensions of the files a build writes.
const SITE_EXTS: [&str; 6] = ["html", "svg", "json", "csv", "js", "css"];

/// The keys an earlier version's `data/manifest.json` has (`transcripts` before it was `runs`;
/// `reliable_at` since `build --reliable-at`).
const MANIFEST_KEYS: [&str; 8] = [
    "callcheck_version",
    "scoring_rules_sha256",
    "scoring_rules_files",
    "interval",
    "reliable_at",
    "tasks",
    "runs",
    "transcripts",
];

/// The set of files a build wrote, as one digest: how many, and the XOR of the first 16 bytes
/// of each `/`-separated path's sha256.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileSet {
    pub count: u64,
    pub xor: u128,
}

impl FileSet {
    fn hash(path: &str) -> u128 {
        use sha2::Digest;
        let h = sha2::Sha256::digest(path.as_bytes());
        let mut head = [0u8; 16];
        head.copy_from_slice(&h[..16]);
        u128::from_be_bytes(head)
    }

    /// A file written that was not there before.
    pub fn add(&mut self, path: &str) {
        self.count += 1;
        self.xor ^= Self::hash(path);
    }

    /// A file of the set removed.
    pub fn remove(&mut self, path: &str) {
        self.count = self.count.saturating_sub(1);
        self.xor ^= Self::hash(path);
    }

    pub fn union(&mut self, other: FileSet) {
        self.count += other.count;
        self.xor ^= other.xor;
    }

    /// The marker's bytes.
    pub fn marker(&self) -> Vec<u8> {
        format!(
            "{MARKER_FORMAT}\n\
             # This folder is a site written by `callcheck build`. The next build replaces the files\n\
             # it wrote, and only when the folder holds nothing else; the line below identifies them.\n\
             files {} {:032x}\n",
            self.count, self.xor
        )
        .into_bytes()
    }

    /// The set a marker names; `None` when the bytes are not a marker of this format.
    fn parse(bytes: &[u8]) -> Option<FileSet> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        if lines.next()? != MARKER_FORMAT {
            return None;
        }
        let line = lines.find(|l| l.starts_with("files "))?;
        let mut parts = line.split(' ').skip(1);
        let count = parts.next()?.parse().ok()?;
        let xor = u128::from_str_radix(parts.next()?, 16).ok()?;
        Some(FileSet { count, xor })
    }
}

/// What `--out` holds, as far as replacing it goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Site {
    /// Absent, empty, or holding only a publisher's carried files.
    Fresh,
    /// A site a build wrote, with the marker naming exactly the files found.
    Marked(FileSet),
    /// A site an earlier callcheck wrote before the marker existed, recognised strictly.
    Legacy,
}

/// One thing found in the folder that is not a folder: its path relative to it and what it is
/// (`None`: a regular file).
pub(super) struct Found {
    pub rel: String,
    pub kind: Option<&'static str>,
}

/// Every non-folder entry under `dir`, sorted by path; symlinks are listed, never followed.
pub(super) fn list(dir: &Path) -> Result<Vec<Found>> {
    let mut found = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, prefix)) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).with_context(|| format!("cannot list {}", d.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("cannot list {}", d.display()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let ft = e
                .file_type()
                .with_context(|| format!("cannot look at {}", e.path().display()))?;
            if ft.is_dir() {
                stack.push((e.path(), rel));
            } else {
                found.push(Found {
                    rel,
                    kind: not_regular(&ft),
                });
            }
        }
    }
    found.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(found)
}

/// Whether `rel` is a path a build writes (any version's): a known top-level file or one in a
/// site folder, named as callcheck names files, with a site file's extension.
fn site_shaped(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    let Some(file) = parts.last() else {
        return false;
    };
    let named = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'~'))
    };
    if parts.len() == 1 {
        return *file == ".nojekyll" || *file == MARKER || (named(file) && has_site_ext(file));
    }
    SITE_DIRS.contains(&parts[0]) && parts.iter().all(|p| named(p)) && has_site_ext(file)
}

fn has_site_ext(file: &str) -> bool {
    file.rsplit_once('.')
        .is_some_and(|(_, ext)| SITE_EXTS.contains(&ext))
}

/// An in-place build's temporary file (`<page>.tmp-<pid>`) left by a build that was killed:
/// its own, and removed with the site.
fn interrupted_write(rel: &str) -> bool {
    rel.rsplit_once(".tmp-").is_some_and(|(page, pid)| {
        site_shaped(page)
            && pid
                .parse::<i32>()
                .is_ok_and(|pid| !live_build(pid) || pid == std::process::id() as i32)
    })
}

/// Whether `--out`'s `data/manifest.json` is one an earlier callcheck wrote: a JSON object with
/// only a manifest's keys, its version, tasks and runs among them.
fn legacy_manifest(dir: &Path) -> bool {
    let Ok(bytes) = crate::fsafe::read_own(&dir.join("data").join("manifest.json"), 256 << 20)
    else {
        return false;
    };
    let Ok(serde_json::Value::Object(m)) = serde_json::from_slice::<serde_json::Value>(&bytes)
    else {
        return false;
    };
    m.keys().all(|k| MANIFEST_KEYS.contains(&k.as_str()))
        && m.get("callcheck_version").is_some_and(|v| v.is_string())
        && m.get("tasks").is_some_and(|v| v.is_object())
        && (m.get("runs").or_else(|| m.get("transcripts"))).is_some_and(|v| v.is_object())
}

/// The marker in `dir`, when there is one of this format.
pub fn marker(dir: &Path) -> Option<FileSet> {
    let bytes = crate::fsafe::read_own(&dir.join(MARKER), MAX_MARKER).ok()?;
    FileSet::parse(&bytes)
}

/// Looks at everything in `out` and says whether a build may replace it; when not, the error
/// lists what was found (a few paths and the count) and the fix.
pub fn inspect(out: &Path) -> Result<Site> {
    let meta = match std::fs::symlink_metadata(out) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Site::Fresh),
        Err(e) => return Err(e).with_context(|| format!("cannot look at --out {}", out.display())),
    };
    if meta.file_type().is_symlink() {
        let to = std::fs::read_link(out)
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        bail!(
            "--out {} is a symlink (to {to}): callcheck does not replace a folder through a symlink; pass the folder itself",
            out.display()
        );
    }
    if !meta.is_dir() {
        bail!("--out {} exists and is not a folder", out.display());
    }
    let found = list(out)?;
    let carried = |f: &Found| f.kind.is_none() && super::write::CARRIED.contains(&f.rel.as_str());
    let is_marker = |f: &Found| f.kind.is_none() && f.rel == MARKER;
    let theirs: Vec<&Found> = found
        .iter()
        .filter(|f| !carried(f) && !is_marker(f) && !interrupted_write(&f.rel))
        .collect();
    let marked = found.iter().any(is_marker);
    if theirs.is_empty() && !marked {
        return Ok(Site::Fresh);
    }
    let foreign: Vec<&Found> = theirs
        .iter()
        .copied()
        .filter(|f| f.kind.is_some() || !site_shaped(&f.rel))
        .collect();
    if marked {
        return marked_site(out, &theirs, &foreign);
    }
    if foreign.is_empty() && legacy_manifest(out) {
        return Ok(Site::Legacy);
    }
    if legacy_manifest(out) {
        bail!(
            "--out {} is a site an earlier callcheck wrote, but it also holds {}: refusing to replace it. Move it aside and build again: `mv {} {}.before`",
            out.display(),
            listing(&foreign),
            out.display(),
            out.display()
        );
    }
    let shown: Vec<&Found> = if foreign.is_empty() { theirs } else { foreign };
    bail!(
        "--out {} holds files that are not a callcheck site ({}): refusing to replace it (choose an empty or new folder)",
        out.display(),
        listing(&shown)
    )
}

/// A marked `--out`: its marker must be this callcheck's and its files the ones the marker
/// lists, with nothing foreign among them.
fn marked_site(out: &Path, theirs: &[&Found], foreign: &[&Found]) -> Result<Site> {
    let Some(set) = marker(out) else {
        bail!(
            "--out {}: {MARKER} is not a marker this callcheck wrote; refusing to replace the folder (choose an empty or new folder)",
            out.display()
        );
    };
    let mut now = FileSet::default();
    for f in theirs {
        now.add(&f.rel);
    }
    if foreign.is_empty() && now == set {
        return Ok(Site::Marked(set));
    }
    if foreign.is_empty() {
        bail!(
            "--out {} is a callcheck site whose files changed since the build that wrote them ({} found, {} written): refusing to replace it, as what was added cannot be told from what build wrote. Move it aside (`mv {} {}.before`) and build again",
            out.display(),
            theirs.len(),
            set.count,
            out.display(),
            out.display()
        );
    }
    bail!(
        "--out {} is a callcheck site that also holds {}: refusing to replace it. Move them out of the site (or choose another --out) and build again",
        out.display(),
        listing(foreign)
    );
}

/// "3 files: a, b (a FIFO), c" — the first few of what was found, and how many in all.
fn listing(found: &[&Found]) -> String {
    const SHOWN: usize = 5;
    let mut s = format!(
        "{} file{} callcheck did not write: ",
        found.len(),
        if found.len() == 1 { "" } else { "s" }
    );
    let names: Vec<String> = found
        .iter()
        .take(SHOWN)
        .map(|f| match f.kind {
            Some(k) => format!("{} ({})", f.rel, k.trim_start_matches("is ")),
            None => f.rel.clone(),
        })
        .collect();
    s.push_str(&names.join(", "));
    if found.len() > SHOWN {
        s.push_str(&format!(" and {} more", found.len() - SHOWN));
    }
    s
}

/// Whether `pid` is a callcheck build still running (not one that was killed, nor another
/// program that now has its id). Where it cannot be told, it is taken as running.
pub fn live_build(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only asks whether the process exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !alive {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(comm) => comm.trim().starts_with("callcheck"),
        Err(_) => true,
    }
}

/// The name of a temporary folder a build writes its site into, beside `--out` `name`.
pub fn tmp_name(name: &str, pid: u32) -> String {
    format!(".{name}.tmp-{pid}")
}

/// The name the previous site is moved to while the new one takes its place.
pub fn old_name(name: &str, pid: u32) -> String {
    format!(".{name}.old-{pid}")
}

/// The folders interrupted builds left beside `--out` `name` in `parent`
/// (`.name.tmp-<pid>`, `.name.old-<pid>`) whose build is not running, sorted.
pub fn leftovers(parent: &Path, name: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let tmp = format!(".{name}.tmp-");
    let old = format!(".{name}.old-");
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter_map(|n| {
            let pid = n.strip_prefix(&tmp).or_else(|| n.strip_prefix(&old))?;
            let pid = pid.parse::<i32>().ok()?;
            // A leftover with this process's id is another's that had it before: not running.
            (pid == std::process::id() as i32 || !live_build(pid)).then(|| parent.join(n))
        })
        .collect();
    found.sort();
    found
}

/// Removes the folders interrupted builds left beside `--out` ([`leftovers`]): only those whose
/// marker proves they are a build's and that hold nothing but a site's files, and an empty one
/// (a removal killed at its very end), never one holding a committed update ([`UPDATE`]: the
/// next build finishes it). Returns what was removed and what was left (with why), for the
/// build to say.
pub fn clear_interrupted(parent: &Path, name: &str) -> (Vec<PathBuf>, Vec<(PathBuf, String)>) {
    let (mut removed, mut left) = (Vec::new(), Vec::new());
    for path in leftovers(parent, name) {
        if std::fs::symlink_metadata(path.join(UPDATE)).is_ok() {
            left.push((
                path,
                "it holds an update committed to the site, to finish".into(),
            ));
            continue;
        }
        let empty = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir())
            && std::fs::read_dir(&path).is_ok_and(|mut d| d.next().is_none());
        let proven = if empty {
            Ok(())
        } else {
            leftover_is_a_build(&path)
        };
        match proven {
            Ok(()) => match remove_marker_last(&path) {
                Ok(()) => removed.push(path),
                Err(e) => left.push((path, format!("cannot remove it: {e}"))),
            },
            Err(why) => left.push((path, why)),
        }
    }
    (removed, left)
}

/// Removes a folder a build wrote, its marker last: a removal killed half-way leaves a folder
/// that still proves it is a build's, and the next build finishes removing it. Links inside are
/// removed, never followed.
pub fn remove_marker_last(dir: &Path) -> std::io::Result<()> {
    let with_path = |p: &Path, e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))
    };
    for e in std::fs::read_dir(dir).map_err(|e| with_path(dir, e))? {
        let e = e.map_err(|e| with_path(dir, e))?;
        if e.file_name() == MARKER {
            continue;
        }
        let p = e.path();
        if e.file_type().map_err(|e| with_path(&p, e))?.is_dir() {
            std::fs::remove_dir_all(&p).map_err(|e| with_path(&p, e))?;
        } else {
            std::fs::remove_file(&p).map_err(|e| with_path(&p, e))?;
        }
    }
    match std::fs::remove_file(dir.join(MARKER)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(with_path(&dir.join(MARKER), e)),
    }
    std::fs::remove_dir(dir).map_err(|e| with_path(dir, e))
}

/// A site being written, an update being staged and a previous site moved aside all carry a
/// marker until they are removed (removal takes it last), so a leftover is known by it and by
/// holding nothing but a site's files (what a half-finished removal leaves included).
fn leftover_is_a_build(path: &Path) -> std::result::Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("not a folder".into());
    }
    if marker(path).is_none() {
        return Err(format!("no {MARKER} inside: not a build's"));
    }
    let found = list(path).map_err(|e| format!("{e:#}"))?;
    let foreign: Vec<&Found> = found
        .iter()
        .filter(|f| {
            f.kind.is_some()
                || !(site_shaped(&f.rel) || super::write::CARRIED.contains(&f.rel.as_str()))
        })
        .collect();
    if !foreign.is_empty() {
        return Err(format!("it holds {}", listing(&foreign)));
    }
    Ok(())
}

/// Whether `inner` is `outer` or lies inside it, however either is spelt (relative, with `..`,
/// through a symlink).
pub fn within(inner: &Path, outer: &Path) -> bool {
    if lexically_within(inner, outer) {
        return true;
    }
    match (std::fs::canonicalize(inner), std::fs::canonicalize(outer)) {
        (Ok(i), Ok(o)) => i.starts_with(o),
        _ => false,
    }
}

/// Whether `inner` is `outer` or lies inside it as spelt: both made absolute and their `.` and
/// `..` resolved without touching the file system (either may not exist yet). A symlink is not
/// followed; [`within`] also compares the canonical paths.
pub fn lexically_within(inner: &Path, outer: &Path) -> bool {
    let lexical = |p: &Path| {
        std::path::absolute(p)
            .map(|a| normalise(&a))
            .unwrap_or_else(|_| p.to_path_buf())
    };
    lexical(inner).starts_with(lexical(outer))
}

fn normalise(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_names_the_set_whatever_the_order_and_reads_back() {
        let mut a = FileSet::default();
        for p in ["index.html", "t/m/t/r1/000.html", "data/manifest.json"] {
            a.add(p);
        }
        let mut b = FileSet::default();
        for p in [
            "data/manifest.json",
            "index.html",
            "t/m/t/r1/000.html",
            "x.html",
        ] {
            b.add(p);
        }
        assert_ne!(a, b);
        b.remove("x.html");
        assert_eq!(a, b);
        assert_eq!(a.count, 3);
        assert_eq!(FileSet::parse(&a.marker()), Some(a));
        assert_eq!(FileSet::parse(b"files 3 00"), None, "no format line");
        assert!(a.marker().starts_with(b"callcheck-site 1\n"));
    }

    #[test]
    fn site_shaped_paths_are_the_ones_a_build_writes() {
        for p in [
            "index.html",
            ".nojekyll",
            "style.css",
            "data/matrix.json",
            "charts/models/a.svg",
            "t/m/task-1/r0001/000.html",
            "compare/a--b.html",
            "tags/~x.html",
        ] {
            assert!(site_shaped(p), "{p}");
        }
        for p in [
            "src/important.rs",
            "runs/m/t/r1/cell.json.bak",
            "notes.txt",
            "data/.hidden.json",
            "t/m/t/r1/000.html.orig",
            "runs/m/t/r1/cell.json",
        ] {
            assert!(!site_shaped(p), "{p}");
        }
    }

    /// A leftover is removed marker-last, so one whose removal was killed half-way still
    /// proves it is a build's and is removed by the next build; an empty one (killed between
    /// the marker and the folder) goes too; one without a marker that holds files stays.
    #[test]
    fn a_half_removed_leftover_is_still_recognised_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dead = 0x7fff_fff1;
        let half = tmp.path().join(old_name("site", dead));
        std::fs::create_dir_all(half.join("t/m")).unwrap();
        std::fs::write(half.join(MARKER), FileSet::default().marker()).unwrap();
        std::fs::write(half.join("t/m/a.html"), "a").unwrap();
        // What a removal killed after the pages and before the marker leaves: the marker.
        let empty = tmp.path().join(tmp_name("site", dead));
        std::fs::create_dir(&empty).unwrap();
        let theirs = tmp.path().join(tmp_name("site", dead + 1));
        std::fs::create_dir(&theirs).unwrap();
        std::fs::write(theirs.join("notes.txt"), "keep").unwrap();
        let (removed, left) = clear_interrupted(tmp.path(), "site");
        assert_eq!(removed, [half.clone(), empty.clone()]);
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].0, theirs);
        assert!(theirs.join("notes.txt").exists());
        // The marker goes last: a folder whose pages are gone still has it.
        std::fs::create_dir_all(half.join("t")).unwrap();
        std::fs::write(half.join(MARKER), FileSet::default().marker()).unwrap();
        remove_marker_last(&half).unwrap();
        assert!(!half.exists());
    }

    #[test]
    fn within_sees_through_dots_and_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("site");
        std::fs::create_dir_all(site.join("runs")).unwrap();
        std::os::unix::fs::symlink(site.join("runs"), tmp.path().join("link")).unwrap();
        assert!(within(&site.join("runs"), &site));
        assert!(within(&tmp.path().join("link"), &site));
        assert!(within(&site.join("x/../runs"), &site));
        assert!(!within(&tmp.path().join("runs"), &site));
        assert!(!within(&tmp.path().join("site2"), &site));
    }
}
