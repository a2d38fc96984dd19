//! Reading BFCL's data files from wherever they are: the `bfcl-eval` wheel (a zip), an extracted
//! `bfcl_eval/data` folder, or a checkout of BFCL's repository.

use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest data file read (BFCL's largest is ~8 MB): a bound on what a damaged or hostile
/// archive can make us hold in memory.
const MAX_FILE: u64 = 64 << 20;

/// The most bytes read of all data files together: a dozen entries each under [`MAX_FILE`]
/// would otherwise add up to gigabytes (a zip of compressible entries is a few MB on disk).
const MAX_TOTAL: u64 = 128 << 20;

/// BFCL's data files, by their path relative to the data folder
/// (`BFCL_v4_simple_python.json`, `possible_answer/BFCL_v4_simple_python.json`).
#[derive(Debug, Default)]
pub struct DataFiles {
    pub files: BTreeMap<String, Vec<u8>>,
    /// The `bfcl-eval` package version, when the source says it (wheel metadata, pyproject.toml).
    pub package_version: Option<String>,
    /// Where the data was found, for messages.
    pub origin: String,
}

/// True for the data files the importer reads: `BFCL_*.json` in the data folder or in its
/// `possible_answer/`.
fn wanted(rel: &str) -> bool {
    let (dir, name) = match rel.rsplit_once('/') {
        Some((d, n)) => (d, n),
        None => ("", rel),
    };
    (dir.is_empty() || dir == "possible_answer")
        && name.starts_with("BFCL_")
        && name.ends_with(".json")
}

/// Reads the data from a wheel, a data folder or a repository checkout.
pub fn read(path: &Path) -> Result<DataFiles> {
    if path.is_file() {
        return read_zip(path);
    }
    // Something that is there but neither a file nor a folder is named for what it is.
    if let Ok(m) = std::fs::metadata(path)
        && let Some(what) = crate::fsafe::not_regular(&m.file_type())
        && !m.is_dir()
    {
        bail!(
            "{} {what}; pass the bfcl-eval wheel, its bfcl_eval/data folder or a checkout of BFCL's repository",
            path.display()
        );
    }
    if let Err(e) = std::fs::metadata(path)
        && e.raw_os_error() == Some(libc::ELOOP)
    {
        bail!("{} is a symlink loop", path.display());
    }
    if !path.is_dir() {
        bail!(
            "{}: no such file or folder; pass the bfcl-eval wheel (pip download --no-deps bfcl-eval), its bfcl_eval/data folder or a checkout of BFCL's repository",
            path.display()
        );
    }
    let candidates = [
        path.to_path_buf(),
        path.join("bfcl_eval/data"),
        path.join("berkeley-function-call-leaderboard/bfcl_eval/data"),
        path.join("data"),
    ];
    let Some(dir) = candidates.iter().find(|d| has_data(d)) else {
        bail!(
            "{}: no BFCL data files (BFCL_v*_*.json) here, nor under bfcl_eval/data or berkeley-function-call-leaderboard/bfcl_eval/data",
            path.display()
        );
    };
    read_dir(dir)
}

fn has_data(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten().any(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("BFCL_") && n.ends_with(".json")
        })
    })
}

/// Reads one data file of at most [`MAX_FILE`] bytes, and at most what is `left` of
/// [`MAX_TOTAL`] (which it then takes).
fn read_bounded(r: impl Read, what: &str, left: &mut u64) -> Result<Vec<u8>> {
    let cap = MAX_FILE.min(*left);
    match crate::fsafe::read_capped(r, cap, 0).with_context(|| format!("cannot read {what}"))? {
        Some(buf) => {
            *left -= buf.len() as u64;
            Ok(buf)
        }
        None if cap < MAX_FILE => bail!(
            "{what}: the data files together are larger than {} MB: not BFCL's data",
            MAX_TOTAL >> 20
        ),
        None => bail!(
            "{what} is larger than {} MB: not a BFCL data file",
            MAX_FILE >> 20
        ),
    }
}

fn read_dir(dir: &Path) -> Result<DataFiles> {
    let mut out = DataFiles {
        origin: dir.display().to_string(),
        ..DataFiles::default()
    };
    let mut left = MAX_TOTAL;
    for sub in ["", "possible_answer"] {
        let d = if sub.is_empty() {
            dir.to_path_buf()
        } else {
            dir.join(sub)
        };
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut names: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        names.sort();
        for p in names {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let rel = if sub.is_empty() {
                name
            } else {
                format!("{sub}/{name}")
            };
            if !wanted(&rel) || !p.is_file() {
                continue;
            }
            let f = crate::fsafe::open_regular(&p)
                .with_context(|| format!("cannot open {}", p.display()))?;
            out.files
                .insert(rel, read_bounded(f, &p.display().to_string(), &mut left)?);
        }
    }
    // An installed package has its metadata beside the package folder; a checkout has
    // pyproject.toml two levels up from the data.
    let pkg_root = dir.parent().and_then(Path::parent);
    if let Some(root) = pkg_root {
        if let Ok(text) = crate::fsafe::read_bounded(&root.join("pyproject.toml"), 1 << 20)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
        {
            out.package_version = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("version"))
                .and_then(|r| r.trim().strip_prefix('='))
                .map(|v| v.trim().trim_matches('"').to_string());
        }
        if out.package_version.is_none()
            && let Ok(rd) = std::fs::read_dir(root)
        {
            let mut metas: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().is_some_and(|n| {
                        n.to_string_lossy().starts_with("bfcl_eval-")
                            && n.to_string_lossy().ends_with(".dist-info")
                    })
                })
                .collect();
            metas.sort();
            if let Some(m) = metas.first()
                && let Ok(text) = crate::fsafe::read_bounded(&m.join("METADATA"), 1 << 20)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
            {
                out.package_version = metadata_version(&text);
            }
        }
    }
    Ok(out)
}

fn metadata_version(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_string())
}

fn read_zip(path: &Path) -> Result<DataFiles> {
    let f = crate::fsafe::open_regular(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let mut left = MAX_TOTAL;
    let mut zip = zip::ZipArchive::new(f).with_context(|| {
        format!(
            "{} is not a zip archive: pass the bfcl-eval wheel (.whl), its bfcl_eval/data folder or a checkout of BFCL's repository",
            path.display()
        )
    })?;
    let mut out = DataFiles {
        origin: path.display().to_string(),
        ..DataFiles::default()
    };
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .with_context(|| format!("{}: cannot read entry {i}", path.display()))?;
        let name = entry
            .name()
            .with_context(|| format!("{}: entry {i} has an unreadable name", path.display()))?
            .to_string();
        if name.ends_with(".dist-info/METADATA") {
            let text = read_bounded(
                &mut entry,
                &format!("{}: {name}", path.display()),
                &mut left,
            )?;
            out.package_version = metadata_version(&String::from_utf8_lossy(&text));
            continue;
        }
        let Some(rel) = name.strip_prefix("bfcl_eval/data/") else {
            continue;
        };
        if !wanted(rel) {
            continue;
        }
        let rel = rel.to_string();
        let bytes = read_bounded(
            &mut entry,
            &format!("{}: {name}", path.display()),
            &mut left,
        )?;
        out.files.insert(rel, bytes);
    }
    if out.files.is_empty() {
        bail!(
            "{}: no bfcl_eval/data/BFCL_*.json inside: is this the bfcl-eval wheel?",
            path.display()
        );
    }
    Ok(out)
}
