//! callcheck's build script: one hash of every source file, template and locked dependency, so
//! that an in-place rebuild (`build --cache`) never keeps a summary page drawn by other code.
//! The hash identifies code, not data: it never reaches the site.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

fn main() {
    let mut files = Vec::new();
    for dir in ["src", "templates"] {
        println!("cargo::rerun-if-changed={dir}");
        walk(Path::new(dir), &mut files);
    }
    println!("cargo::rerun-if-changed=Cargo.lock");
    files.push(PathBuf::from("Cargo.lock"));
    files.sort();
    // SipHash with fixed keys: the same sources give the same hash on every machine.
    let mut h = std::hash::DefaultHasher::new();
    env!("CARGO_PKG_VERSION").hash(&mut h);
    for f in &files {
        f.to_string_lossy().hash(&mut h);
        std::fs::read(f).unwrap_or_default().hash(&mut h);
    }
    println!("cargo::rustc-env=CALLCHECK_SOURCE_HASH={:016x}", h.finish());
    corpus();
}

/// The task corpus, built into the binary so that an installed `callcheck demo` (from a wheel
/// or a container, with no checkout beside it) has tasks to collect: `OUT_DIR/corpus.rs` lists
/// every file under tasks/ as (path relative to tasks/, its bytes).
fn corpus() {
    println!("cargo::rerun-if-changed=tasks");
    let mut files = Vec::new();
    walk(Path::new("tasks"), &mut files);
    files.sort();
    let root = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let mut list = String::from("&[\n");
    for f in &files {
        let rel: Vec<String> = f
            .strip_prefix("tasks")
            .unwrap_or(f)
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let abs = Path::new(&root).join(f);
        list.push_str(&format!(
            "    ({:?}, include_bytes!({:?}) as &[u8]),\n",
            rel.join("/"),
            abs.to_string_lossy()
        ));
    }
    list.push_str("]\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("corpus.rs");
    if let Err(e) = std::fs::write(&out, list) {
        panic!("cannot write {}: {e}", out.display());
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}
