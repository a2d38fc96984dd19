//! Where `build` keeps its verdict cache (SPEC §7): `./.callcheck-cache/` unless `--cache DIR`
//! moves it or `--no-cache` goes without. The folder is marked the way cargo's `target/` and
//! pytest's `.pytest_cache` are: a `CACHEDIR.TAG`, so backup tools skip it, and a `.gitignore`
//! of `*`, so nobody commits it by accident. The cache's contents are [`crate::pipeline::cache`]'s.

use crate::cli::BuildOpts;
use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The cache folder of a plain `callcheck build`, relative to where it runs.
pub const DEFAULT: &str = ".callcheck-cache";

/// The cache directory tag (<https://bford.info/cachedir/>): its first line is the signature
/// that tools look for, byte for byte.
pub const CACHEDIR_TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by callcheck (build's verdict cache).\n\
# For information about cache directory tags see https://bford.info/cachedir/\n";

/// Everything in the folder, so that git ignores the cache wherever it is put.
pub const GITIGNORE: &str = "# Created by callcheck: this folder is build's cache.\n*\n";

/// Whether the entry `name` of cache folder `dir` is one callcheck's cache wrote: one of the
/// two markers with the very text callcheck writes, a temporary file of a build writing the
/// cache, or the cache file: one that starts with the cache's own first bytes (or, for an
/// earlier version's JSON cache, its first key), or any file of that name in a folder callcheck
/// marked (`marked`: a damaged cache is still the cache, replaced at the next build). Only
/// regular files count: a link named like one is not callcheck's.
fn is_ours(dir: &Path, name: &str, marked: bool) -> bool {
    let path = dir.join(name);
    if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let holds = |text: &str| {
        crate::fsafe::read_own(&path, text.len() as u64).is_ok_and(|b| b == text.as_bytes())
    };
    let cache_file = |head: &[u8]| marked || crate::fsafe::starts_with(&path, head);
    match name {
        "verdicts.bin" => cache_file(crate::pipeline::cache::MAGIC_PREFIX),
        "verdicts.json" => cache_file(crate::pipeline::cache::OLD_FILE_HEAD),
        "CACHEDIR.TAG" => holds(CACHEDIR_TAG),
        ".gitignore" => holds(GITIGNORE),
        _ => name.starts_with(".verdicts.bin.tmp-"),
    }
}

/// A folder with more entries than this is not one callcheck made for its cache.
const MAX_ENTRIES: usize = 64;

/// The cache a build uses: `None` with `--no-cache`.
pub fn choose(opts: &BuildOpts) -> Option<PathBuf> {
    if opts.no_cache {
        return None;
    }
    Some(opts.cache.clone().unwrap_or_else(|| PathBuf::from(DEFAULT)))
}

/// Makes the cache folder ready for a build of `opts`: creates it with its markers, or adds
/// the markers to a folder that holds only a cache (one an earlier `--cache` made). A folder
/// holding anything else is refused, naming what it holds (a build would replace its
/// `verdicts.bin`); so is a cache inside `--runs` or `--tasks` (it would be committed with
/// them) or `--out` (it would be published). It never replaces a file, and does not write
/// through a symlink at the default place (a link there is someone else's).
pub fn prepare(dir: &Path, opts: &crate::pipeline::Inputs, given: bool) -> Result<()> {
    let fix = "pass --cache DIR to put the cache elsewhere, or --no-cache";
    let what = if given {
        format!("--cache {}", dir.display())
    } else {
        format!("the default cache {}", dir.display())
    };
    for (flag, p, why) in [
        (
            "--runs",
            &opts.runs,
            "it would be committed with the transcripts",
        ),
        (
            "--tasks",
            &opts.tasks,
            "it would be committed with the tasks",
        ),
    ] {
        if crate::pipeline::owned::within(dir, p) {
            bail!("{what} is inside {flag} {}: {why}; {fix}", p.display());
        }
    }
    if crate::pipeline::cache::inside(dir, &opts.out) {
        if given {
            // The build refuses it, naming --cache; nothing is made inside the site first.
            return Ok(());
        }
        bail!(
            "{what} is inside --out {}: it would be published; {fix}",
            opts.out.display()
        );
    }
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the cache folder {}", dir.display()))?;
        }
        Err(e) => bail!("cannot look at the cache folder {}: {e}", dir.display()),
        Ok(m) if m.file_type().is_symlink() && !given => bail!(
            "the default cache {} is a symlink, and callcheck does not write through a link it did not make; {fix}",
            dir.display()
        ),
        Ok(_) => {
            // A link the user named with --cache is followed, to a folder.
            let m = std::fs::metadata(dir)
                .with_context(|| format!("cannot look at the cache folder {}", dir.display()))?;
            if !m.is_dir() {
                bail!("the cache {} is not a folder; {fix}", dir.display());
            }
        }
    }
    let foreign = foreign_files(dir)?;
    if !foreign.is_empty() {
        const SHOWN: usize = 5;
        let mut names = foreign
            .iter()
            .take(SHOWN)
            .map(|n| crate::term::escape_controls(n).into_owned())
            .collect::<Vec<_>>()
            .join(", ");
        if foreign.len() > SHOWN {
            names.push_str(&format!(" and {} more", foreign.len() - SHOWN));
        }
        bail!(
            "the cache folder {} holds {} file{} callcheck's cache does not write ({names}): refusing to use it, as a build would replace them; pass --cache DIR naming an empty or new folder, or --no-cache",
            dir.display(),
            foreign.len(),
            if foreign.len() == 1 { "" } else { "s" }
        );
    }
    for (name, text) in [("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", GITIGNORE)] {
        let path = dir.join(name);
        // create_new: an existing file (or a symlink in its place) is left as it is.
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => f
                .write_all(text.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("cannot write {}", path.display())),
        }
    }
    Ok(())
}

/// The entries of `dir` that callcheck's cache does not write, sorted (at most
/// [`MAX_ENTRIES`] are looked at: a folder holding more is not a cache, and the rest are counted
/// as foreign).
fn foreign_files(dir: &Path) -> Result<Vec<String>> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    let mut foreign = Vec::new();
    let marked = is_ours(dir, "CACHEDIR.TAG", false);
    for (i, entry) in entries.enumerate() {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if i >= MAX_ENTRIES || !is_ours(dir, &name, marked) {
            foreign.push(name);
        }
    }
    foreign.sort();
    Ok(foreign)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn opts(args: &[&str]) -> BuildOpts {
        let cli = crate::cli::Cli::try_parse_from([&["callcheck", "build"], args].concat())
            .map_err(|e| e.to_string())
            .unwrap();
        match cli.command {
            crate::cli::Command::Build(o) => o,
            other => panic!("not a build: {other:?}"),
        }
    }

    /// The inputs of a build in `dir` (its runs, tasks and site there), its cache elsewhere.
    fn beside(dir: &Path) -> crate::pipeline::Inputs {
        let at = |name: &str| dir.join(name).to_string_lossy().into_owned();
        let (runs, tasks, out) = (at("runs"), at("tasks"), at("site"));
        super::super::build::inputs(&opts(&["--runs", &runs, "--tasks", &tasks, "--out", &out]))
    }

    #[test]
    fn the_plain_command_uses_the_default_cache_and_the_flags_move_or_drop_it() {
        assert_eq!(choose(&opts(&[])), Some(PathBuf::from(".callcheck-cache")));
        assert_eq!(choose(&opts(&["--cache", "c"])), Some(PathBuf::from("c")));
        assert_eq!(choose(&opts(&["--no-cache"])), None);
        let both =
            crate::cli::Cli::try_parse_from(["callcheck", "build", "--cache", "c", "--no-cache"])
                .unwrap_err();
        assert_eq!(both.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn the_tag_starts_with_the_standard_signature() {
        assert!(CACHEDIR_TAG.starts_with("Signature: 8a477f597d28d172789f06886806bc55\n"));
    }

    #[test]
    fn a_new_cache_folder_gets_both_markers() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        prepare(&dir, &beside(tmp.path()), true).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("CACHEDIR.TAG")).unwrap(),
            CACHEDIR_TAG
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(".gitignore")).unwrap(),
            GITIGNORE
        );
    }

    #[test]
    fn an_earlier_cache_gets_the_markers_and_keeps_its_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        std::fs::create_dir(&dir).unwrap();
        let old = [crate::pipeline::cache::MAGIC_PREFIX, b"12\n..."].concat();
        std::fs::write(dir.join("verdicts.bin"), &old).unwrap();
        std::fs::write(dir.join(".verdicts.bin.tmp-12"), b"").unwrap();
        prepare(&dir, &beside(tmp.path()), true).unwrap();
        assert_eq!(std::fs::read(dir.join("verdicts.bin")).unwrap(), old);
        assert_eq!(
            std::fs::read_to_string(dir.join("CACHEDIR.TAG")).unwrap(),
            CACHEDIR_TAG
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(".gitignore")).unwrap(),
            GITIGNORE
        );
        // Used again as it is: every file is one the cache writes.
        prepare(&dir, &beside(tmp.path()), true).unwrap();
    }

    #[test]
    fn a_folder_with_other_files_is_refused_and_gets_no_marker() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        std::fs::create_dir(&dir).unwrap();
        // Files named as the cache's, but not its: another program's verdicts, a .gitignore
        // of the user's, a link.
        std::fs::write(dir.join("verdicts.bin"), b"theirs").unwrap();
        std::fs::write(dir.join(".gitignore"), b"mine\n").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("x"), dir.join("CACHEDIR.TAG")).unwrap();
        let e = prepare(&dir, &beside(tmp.path()), true).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the cache folder {} holds 3 files callcheck's cache does not write (.gitignore, CACHEDIR.TAG, verdicts.bin): refusing to use it, as a build would replace them; pass --cache DIR naming an empty or new folder, or --no-cache",
                dir.display()
            )
        );
        assert_eq!(std::fs::read(dir.join("verdicts.bin")).unwrap(), b"theirs");
        assert_eq!(std::fs::read(dir.join(".gitignore")).unwrap(), b"mine\n");
    }

    #[test]
    fn a_cache_inside_the_runs_or_the_tasks_is_refused_before_anything_is_made() {
        let tmp = tempfile::tempdir().unwrap();
        let o = beside(tmp.path());
        for (flag, dir) in [("--runs", &o.runs), ("--tasks", &o.tasks)] {
            let cache = dir.join(".cache");
            let e = prepare(&cache, &o, true).unwrap_err().to_string();
            let start = format!(
                "--cache {} is inside {flag} {}: it would be committed",
                cache.display(),
                dir.display()
            );
            assert!(e.starts_with(&start), "{e}");
            assert!(!cache.exists());
        }
    }

    #[test]
    fn a_file_in_the_caches_place_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        std::fs::write(&dir, b"x").unwrap();
        let e = prepare(&dir, &beside(tmp.path()), true).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the cache {} is not a folder; pass --cache DIR to put the cache elsewhere, or --no-cache",
                dir.display()
            )
        );
        assert_eq!(std::fs::read(&dir).unwrap(), b"x");
    }

    #[test]
    fn a_symlink_at_the_default_place_is_refused_and_one_named_is_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        let link = tmp.path().join(DEFAULT);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = prepare(&link, &beside(tmp.path()), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the default cache {} is a symlink, and callcheck does not write through a link it did not make; pass --cache DIR to put the cache elsewhere, or --no-cache",
                link.display()
            )
        );
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
        prepare(&link, &beside(tmp.path()), true).unwrap();
        assert_eq!(
            std::fs::read_to_string(target.join("CACHEDIR.TAG")).unwrap(),
            CACHEDIR_TAG
        );
    }

    #[test]
    fn the_default_cache_inside_the_site_is_refused_before_anything_is_made() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().to_path_buf();
        let dir = out.join(DEFAULT);
        let o = super::super::build::inputs(&opts(&[
            "--out",
            out.to_str().unwrap(),
            "--runs",
            "/nowhere/runs",
        ]));
        let e = prepare(&dir, &o, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the default cache {} is inside --out {}: it would be published; pass --cache DIR to put the cache elsewhere, or --no-cache",
                dir.display(),
                out.display()
            )
        );
        assert!(!dir.exists());
    }
}
