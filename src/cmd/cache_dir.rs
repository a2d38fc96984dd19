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

/// The files a cache folder holds when only callcheck wrote to it (the cache file, its
/// predecessor, its temporary files and the two markers).
fn is_ours(name: &str) -> bool {
    matches!(
        name,
        "verdicts.bin" | "verdicts.json" | "CACHEDIR.TAG" | ".gitignore"
    ) || name.starts_with(".verdicts.bin.tmp-")
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

/// Makes the cache folder ready for a build writing its site to `out`: creates it with its
/// markers, or adds the markers to a folder that holds only a cache (one an earlier `--cache`
/// made). It never writes a marker into a folder holding anything else, never replaces a file,
/// and does not write through a symlink at the default place (a link there is someone else's).
pub fn prepare(dir: &Path, out: &Path, given: bool) -> Result<()> {
    let fix = "pass --cache DIR to put the cache elsewhere, or --no-cache";
    if crate::pipeline::cache::inside(dir, out) {
        if given {
            // The build refuses it, naming --cache; nothing is made inside the site first.
            return Ok(());
        }
        bail!(
            "the default cache {} is inside --out {}: it would be published; {fix}",
            dir.display(),
            out.display()
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
    if !only_cache_files(dir)? {
        return Ok(());
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

/// Whether every entry of `dir` is one callcheck's cache writes (an empty folder included).
fn only_cache_files(dir: &Path) -> Result<bool> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for (i, entry) in entries.enumerate() {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        if i >= MAX_ENTRIES || !entry.file_name().to_str().is_some_and(is_ours) {
            return Ok(false);
        }
    }
    Ok(true)
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
        prepare(&dir, &tmp.path().join("site"), true).unwrap();
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
        std::fs::write(tmp.path().join("verdicts.bin"), b"old").unwrap();
        std::fs::write(tmp.path().join(".gitignore"), b"mine\n").unwrap();
        prepare(tmp.path(), &tmp.path().join("..").join("site"), true).unwrap();
        assert_eq!(
            std::fs::read(tmp.path().join("verdicts.bin")).unwrap(),
            b"old"
        );
        // An existing marker is never replaced.
        assert_eq!(
            std::fs::read(tmp.path().join(".gitignore")).unwrap(),
            b"mine\n"
        );
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("CACHEDIR.TAG")).unwrap(),
            CACHEDIR_TAG
        );
    }

    #[test]
    fn a_folder_with_other_files_gets_no_marker() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("notes.txt"), b"keep").unwrap();
        prepare(tmp.path(), &tmp.path().join("site"), true).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["notes.txt"]);
    }

    #[test]
    fn a_file_in_the_caches_place_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        std::fs::write(&dir, b"x").unwrap();
        let e = prepare(&dir, &tmp.path().join("site"), true).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the cache {} is not a folder; pass --cache DIR to put the cache elsewhere, or --no-cache",
                dir.display()
            )
        );
        assert_eq!(std::fs::read(&dir).unwrap(), b"x");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_at_the_default_place_is_refused_and_one_named_is_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        let link = tmp.path().join(DEFAULT);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = prepare(&link, &tmp.path().join("site"), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the default cache {} is a symlink, and callcheck does not write through a link it did not make; pass --cache DIR to put the cache elsewhere, or --no-cache",
                link.display()
            )
        );
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
        prepare(&link, &tmp.path().join("site"), true).unwrap();
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
        let e = prepare(&dir, &out, false).unwrap_err();
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
