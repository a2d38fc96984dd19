//! The task corpus through the real binary: `tasks lint` passes on it, `tasks/README.md` carries
//! the current output of `tasks list` and `tasks list --labels`, and every area of the corpus
//! keeps the coverage the issue asked for.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn callcheck(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_callcheck"))
        .args(args)
        .output()
        .expect("the callcheck binary runs")
}

fn tasks_dir() -> String {
    repo().join("tasks").to_string_lossy().into_owned()
}

/// The text between `<!-- begin: NAME -->` and `<!-- end: NAME -->` in the README.
fn block<'a>(readme: &'a str, name: &str) -> &'a str {
    let begin = format!("<!-- begin: {name} -->\n");
    let end = format!("<!-- end: {name} -->");
    let start = readme
        .find(&begin)
        .unwrap_or_else(|| panic!("tasks/README.md has no {begin:?} marker"))
        + begin.len();
    let stop = readme[start..]
        .find(&end)
        .unwrap_or_else(|| panic!("tasks/README.md has no {end:?} marker"))
        + start;
    &readme[start..stop]
}

fn assert_block_current(name: &str, args: &[&str]) {
    let out = callcheck(args);
    assert!(
        out.status.success(),
        "callcheck {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = String::from_utf8(out.stdout).expect("utf-8 output");
    assert!(fresh.contains("| "), "callcheck {args:?} printed no table");
    let readme =
        std::fs::read_to_string(repo().join("tasks/README.md")).expect("tasks/README.md exists");
    let stored = block(&readme, name);
    assert!(
        stored == fresh,
        "tasks/README.md's {name:?} table is out of date with the corpus; replace the block \
         between its markers with the output of `callcheck {}`:\n{fresh}",
        args.join(" ")
    );
}

#[test]
fn lint_passes_on_the_whole_corpus() {
    let dir = tasks_dir();
    let out = callcheck(&["tasks", "lint", "--tasks", &dir]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "tasks lint failed:\n{}{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let n = callcheck::task::load(Path::new(&dir))
        .expect("the corpus loads")
        .len();
    assert_eq!(stdout.trim(), format!("{n} tasks ok"));
}

#[test]
fn the_readme_coverage_table_is_current() {
    assert_block_current("tasks list", &["tasks", "list", "--tasks", &tasks_dir()]);
}

#[test]
fn the_readme_labels_table_is_current() {
    assert_block_current(
        "tasks list --labels",
        &["tasks", "list", "--labels", "--tasks", &tasks_dir()],
    );
}

#[test]
fn every_area_keeps_its_coverage() {
    let tasks = callcheck::task::load(&repo().join("tasks")).expect("the corpus loads");
    assert!(
        (45..=75).contains(&tasks.len()),
        "the corpus should hold 45–75 tasks, it holds {}",
        tasks.len()
    );
    // The minimum number of tasks per area tag (issue 3).
    let minimums = [
        ("single-call", 3),
        ("type-coercion", 4),
        ("int64", 3),
        ("enum", 4),
        ("nested", 4),
        ("ref", 4),
        ("unicode-escaping", 6),
        ("parallel", 5),
        ("no-call", 5),
        ("similar-tools", 3),
        ("tool-choice", 3),
        ("optional", 3),
        ("long-args", 2),
        ("structured-output", 4),
        ("multi-turn", 3),
        // Issue 30: the shapes the most reported streaming bugs need.
        ("empty-args", 5),
        ("multi-tool", 4),
        ("tight-budget", 2),
    ];
    let mut short = Vec::new();
    for (tag, min) in minimums {
        let n = tasks
            .iter()
            .filter(|t| t.tags.iter().any(|x| x == tag))
            .count();
        if n < min {
            short.push(format!("{tag}: {n} < {min}"));
        }
    }
    assert!(short.is_empty(), "areas below their minimum: {short:?}");
    // Every task is tagged with at least one area, so the coverage table accounts for it.
    let areas: Vec<&str> = minimums.iter().map(|(t, _)| *t).collect();
    for t in &tasks {
        assert!(
            t.tags.iter().any(|x| areas.contains(&x.as_str())),
            "{} has no area tag: {:?}",
            t.id,
            t.tags
        );
    }
}

#[test]
fn lint_names_a_misspelt_type_at_its_path_and_nothing_that_follows() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("weather-typo.json");
    std::fs::write(
        &file,
        r#"{"id": "weather-typo", "title": "t", "tags": ["single-call"], "description": "d",
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
                {"type": "object", "properties": {"city": {"type": "strnig"}}, "required": ["city"]}}}],
            "expect": {"calls": [{"tool": "get_weather", "gold": {"city": "Paris"}}]}}"#,
    )
    .unwrap();
    let out = callcheck(&["tasks", "lint", "--tasks", &tmp.path().to_string_lossy()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("weather-typo.json"), "{stderr}");
    assert!(
        stderr.contains("tools[0].function.parameters.properties.city.type"),
        "{stderr}"
    );
    assert!(
        stderr.contains("did you mean \"string\"") && stderr.contains("allowed there are"),
        "{stderr}"
    );
    // The tool did not compile: that it is then "not offered" is no second problem.
    assert!(!stderr.contains("not among the offered tools"), "{stderr}");
    assert!(stderr.contains("1 problem"), "{stderr}");
}
