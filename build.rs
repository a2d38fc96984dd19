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
