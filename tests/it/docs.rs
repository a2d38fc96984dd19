//! The README and the other documents are tested like code: every models config they show parses
//! as `callcheck collect` would parse it, every `callcheck` command line they show is accepted by
//! the real command-line parser with the flags written, the files those commands name exist, and
//! the two commands of a fresh machine are the ones `.ci/run` runs.

use callcheck::cli::Cli;
use callcheck::collect::config;
use clap::Parser;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The fenced code blocks of a markdown text: (info string, first line number, body).
fn fences(md: &str) -> Vec<(String, usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, String)> = None;
    for (i, line) in md.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("```") {
            match open.take() {
                None => open = Some((rest.trim().to_string(), i + 2, String::new())),
                Some(block) => out.push(block),
            }
        } else if let Some((_, _, body)) = open.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    assert!(open.is_none(), "an unclosed code fence");
    out
}

/// Inline code spans (which may wrap over a line break), outside fenced blocks.
fn inline_spans(md: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut in_fence = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// A documented command found in a file: where, and the words after `callcheck`.
#[derive(Debug)]
struct Shown {
    place: String,
    args: Vec<String>,
    /// From an inline code span in prose, which may name a subcommand without its required
    /// arguments (`callcheck check`): its subcommand and flags must exist, nothing more.
    partial: bool,
}

/// The `callcheck` invocations in one shell line: split at `&&`, `||`, `;` and `|`, comments
/// dropped, `if`/`then`/`else` skipped; `callcheck …`, `./target/release/callcheck …` and
/// `cargo run [--release] -- …` all count.
fn invocations(line: &str, place: &str, partial: bool, out: &mut Vec<Shown>) {
    let line = match line.find(" #") {
        Some(i) => &line[..i],
        None => line,
    };
    let line = line.trim().trim_start_matches('#').trim();
    for segment in line.split("&&").flat_map(|s| s.split("||")) {
        for part in segment.split([';', '|']) {
            let Some(words) = shlex::split(part) else {
                continue;
            };
            let words: Vec<String> = words
                .into_iter()
                .skip_while(|w| matches!(w.as_str(), "if" | "then" | "else" | "do" | "!"))
                .filter(|w| w != "…")
                .collect();
            let Some(first) = words.first() else { continue };
            let args = if Path::new(first)
                .file_name()
                .is_some_and(|n| n == "callcheck")
            {
                words[1..].to_vec()
            } else if words.len() > 2 && words[0] == "cargo" && words[1] == "run" {
                match words.iter().position(|w| w == "--") {
                    Some(i) => words[i + 1..].to_vec(),
                    None => continue,
                }
            } else {
                continue;
            };
            out.push(Shown {
                place: place.to_string(),
                args,
                partial,
            });
        }
    }
}

/// Every `callcheck` command shown in the documents and examples a user reads.
fn shown_commands() -> Vec<Shown> {
    let mut out = Vec::new();
    let markdown = [
        "README.md",
        "docs/try-on-cpu.md",
        "docs/data.md",
        "tasks/README.md",
        "scripts/real-server/README.md",
    ];
    for file in markdown {
        let md = read(file);
        for (info, first, body) in fences(&md) {
            if !matches!(info.as_str(), "" | "sh" | "bash" | "console" | "shell") {
                continue;
            }
            for (j, line) in body.lines().enumerate() {
                invocations(line, &format!("{file}:{}", first + j), false, &mut out);
            }
        }
        for span in inline_spans(&md) {
            invocations(&span, &format!("{file}: `{span}`"), true, &mut out);
        }
    }
    // Commands in the examples' comments and in the workflow's `run:` steps.
    for file in [
        "examples/llama-server.toml",
        "examples/github-pages.yml",
        "examples/github-actions-shards.yml",
        "examples/k8s-indexed-job.yaml",
    ] {
        for (i, line) in read(file).lines().enumerate() {
            let line = line.trim_start();
            let line = line.strip_prefix("run:").unwrap_or(line);
            // A YAML list item (the Kubernetes Job's `args`).
            let line = line.strip_prefix("- ").unwrap_or(line);
            invocations(line, &format!("{file}:{}", i + 1), false, &mut out);
        }
    }
    out
}

#[test]
fn every_documented_command_parses_with_the_flags_shown() {
    let shown = shown_commands();
    let mut problems = Vec::new();
    for s in &shown {
        let argv = std::iter::once("callcheck".to_string()).chain(s.args.iter().cloned());
        if let Err(e) = Cli::try_parse_from(argv) {
            use clap::error::ErrorKind::*;
            // `callcheck --version` and `--help` are commands that print and exit.
            if matches!(e.kind(), DisplayVersion | DisplayHelp) {
                continue;
            }
            let incomplete = matches!(
                e.kind(),
                MissingRequiredArgument
                    | MissingSubcommand
                    | DisplayHelpOnMissingArgumentOrSubcommand
            );
            if s.partial && incomplete {
                continue;
            }
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            problems.push(format!(
                "{}: callcheck {}: {first}",
                s.place,
                s.args.join(" ")
            ));
        }
        // A repository file a command names must exist.
        for a in &s.args {
            let looks_like_repo_path = ["examples/", "tasks/", "docs/", "scripts/"]
                .iter()
                .any(|p| a.starts_with(p));
            if looks_like_repo_path && !repo().join(a).exists() {
                problems.push(format!("{}: names {a}, which does not exist", s.place));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The extraction finds what is there: every subcommand appears somewhere.
    for sub in ["demo", "collect", "build", "check", "tasks", "mock"] {
        assert!(
            shown
                .iter()
                .any(|s| s.args.first().is_some_and(|a| a == sub)),
            "no documented `callcheck {sub}` found among {} commands",
            shown.len()
        );
    }
    assert!(shown.len() >= 15, "only {} commands found", shown.len());
}

#[test]
fn the_extraction_rejects_what_clap_rejects() {
    // A control: a misspelt flag and a missing subcommand are caught.
    let mut out = Vec::new();
    invocations(
        "cargo run --release -- collect --modles a && callcheck --help-me",
        "control",
        false,
        &mut out,
    );
    assert_eq!(out.len(), 2);
    for s in out {
        let argv = std::iter::once("callcheck".to_string()).chain(s.args);
        assert!(Cli::try_parse_from(argv).is_err());
    }
}

#[test]
fn the_two_fresh_machine_commands_are_what_ci_runs() {
    let readme = read("README.md");
    let section = readme
        .split("## On a fresh machine")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README has an 'On a fresh machine' section");
    let blocks: Vec<String> = fences(section)
        .into_iter()
        .map(|(_, _, body)| body.trim().to_string())
        .collect();
    assert_eq!(
        blocks,
        ["cargo run --release -- demo", "cargo test --locked"]
    );
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == "cargo test --locked"),
        ".ci/run does not run the README's test command"
    );
    assert!(
        ci.contains("cargo run --locked -- demo"),
        ".ci/run does not run the demo"
    );
}

#[test]
fn every_models_config_shown_parses() {
    let readme = read("README.md");
    let tomls: Vec<(usize, String)> = fences(&readme)
        .into_iter()
        .filter(|(info, _, _)| info == "toml")
        .map(|(_, line, body)| (line, body))
        .collect();
    assert!(!tomls.is_empty(), "the README shows no callcheck.toml");
    for (line, body) in &tomls {
        let c = config::parse(Path::new("README.md"), body)
            .unwrap_or_else(|e| panic!("README.md:{line}: {e}"));
        // The vLLM example shows variants of one served model: streamed, and with a prompt.
        assert!(c.models.len() >= 3, "README.md:{line}");
        assert!(c.models.iter().any(|m| m.stream));
        assert!(c.models.iter().any(|m| m.system.is_some()));
        assert!(c.models.iter().any(|m| m.api_key_env.is_some()));
        let served: std::collections::BTreeSet<&str> =
            c.models.iter().map(|m| m.model.as_str()).collect();
        assert_eq!(
            served.len(),
            1,
            "README.md:{line}: rows of one served model"
        );
    }
    for entry in std::fs::read_dir(repo().join("examples")).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            let c = config::load(&p).unwrap_or_else(|e| panic!("{e}"));
            assert!(!c.models.is_empty());
        }
    }
}

#[test]
fn local_links_in_the_readme_resolve() {
    let readme = read("README.md");
    let mut n = 0;
    for piece in readme.split("](").skip(1) {
        let target = piece.split(')').next().unwrap_or_default();
        if target.starts_with("http") || target.starts_with('#') {
            continue;
        }
        n += 1;
        assert!(
            repo().join(target).exists(),
            "README.md links to {target}, which does not exist"
        );
    }
    assert!(n >= 6, "only {n} local links found");
}

/// The CPU guide and the README give the whole corpus's figures as `68 tasks × 3 rows × k = 3 =
/// 612 samples` (or one row's, without the rows): the task count must be the corpus's, and the
/// arithmetic right, so a task added to `tasks/` without the guide's figures fails here (issue
/// 46: the guide said 59 tasks while the corpus had 68).
#[test]
fn the_cpu_guides_corpus_figures_match_the_corpus() {
    let corpus = callcheck::task::load(&repo().join("tasks")).unwrap().len();
    let figures =
        regex::Regex::new(r"(\d+) tasks × (?:(\d+) rows × )?k = (\d+) = ([\d,]+) samples").unwrap();
    for file in ["docs/try-on-cpu.md", "README.md"] {
        // Figures may wrap over a line break.
        let text = read(file).split_whitespace().collect::<Vec<_>>().join(" ");
        let mut found = 0;
        for c in figures.captures_iter(&text) {
            let num = |i: usize| -> usize {
                c.get(i)
                    .map_or(1, |m| m.as_str().replace(',', "").parse().unwrap())
            };
            let (tasks, rows, k, samples) = (num(1), num(2), num(3), num(4));
            assert_eq!(
                tasks, corpus,
                "{file}: {:?} names {tasks} tasks, the corpus under tasks/ has {corpus}",
                &c[0]
            );
            assert_eq!(
                tasks * rows * k,
                samples,
                "{file}: {:?} does not add up",
                &c[0]
            );
            found += 1;
        }
        assert!(
            found >= 1,
            "{file}: no figure of the form `N tasks × k = 3 = M samples` found"
        );
    }
    let readme = read("README.md");
    assert!(
        readme.contains(&format!("{corpus} tasks under [`tasks/`](tasks/)")),
        "README.md's task corpus section must say `{corpus} tasks under [`tasks/`](tasks/)`"
    );
}
