//! The floors written in `src/lib.rs` hold in the code: every `crate::…` path outside a unit
//! test names a module on a lower floor than its own (or its own folder), and every module of
//! the crate has a floor.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Imports that still point up, each with the change that removes it. Empty is the goal; a
/// new entry needs a reason here.
const KNOWN: &[(&str, &str)] = &[];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The floors table of `src/lib.rs`'s module doc: module → floor.
fn floors() -> BTreeMap<String, u32> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut floors = BTreeMap::new();
    for line in lib.lines() {
        let Some(row) = line.strip_prefix("//! | ") else {
            continue;
        };
        let mut cells = row.split(" | ");
        let Some(Ok(floor)) = cells.next().map(|c| c.trim().parse::<u32>()) else {
            continue;
        };
        let modules = cells.next().unwrap_or_default();
        for m in modules.split('`').skip(1).step_by(2) {
            assert!(
                floors.insert(m.to_string(), floor).is_none(),
                "{m} is on two floors in src/lib.rs"
            );
        }
    }
    floors
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file that the library builds with: unit tests (from the first `#[cfg(test)]`)
/// and comments are left out.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a piece of code names through `crate::` (in a path or a braced list).
fn named(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(list) = rest.strip_prefix('{') {
            let end = list.find('}').unwrap_or(list.len());
            for item in list[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != "self" {
                    out.push(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

#[test]
fn every_import_points_down_a_floor() {
    let floors = floors();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut wrong = Vec::new();
    let mut unplaced = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let module = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(&own) = floors.get(&module) else {
            unplaced.push(module);
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for target in named(&code(&text)) {
            if target == module {
                continue;
            }
            let Some(&theirs) = floors.get(&target) else {
                wrong.push(format!("{rel}: crate::{target} has no floor"));
                continue;
            };
            let known = KNOWN
                .iter()
                .any(|(from, to)| *from == module && *to == target);
            if theirs >= own && !known {
                wrong.push(format!(
                    "{rel}: {module} (floor {own}) imports {target} (floor {theirs})"
                ));
            }
        }
    }
    unplaced.sort();
    unplaced.dedup();
    assert!(
        unplaced.is_empty(),
        "modules without a floor in src/lib.rs: {unplaced:?}"
    );
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "imports that point up or sideways:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scan_sees_paths_and_braced_lists_but_not_comments_or_unit_tests() {
    let text = "use crate::{json, stats::Interval};\n// crate::site in a comment\nfn f() { crate::task::load(); }\n#[cfg(test)]\nmod tests { use crate::cmd; }\n";
    assert_eq!(named(&code(text)), ["json", "stats", "task"]);
    // The table has every floor from the vocabulary to the subcommands.
    let floors = floors();
    assert_eq!(floors.get("taxonomy"), Some(&0));
    assert!(floors["cmd"] > floors["cli"] && floors["cli"] > floors["pipeline"]);
}
