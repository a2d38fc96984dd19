//! The two "past one machine" examples — a GitHub Actions matrix workflow and a Kubernetes
//! Indexed Job — read the way their engines will, and checked with collect's own shard
//! function: the shards they run cover every cell of a real config and the corpus exactly
//! once, and the workflow uploads one artifact per shard and merges them before building.
//!
//! There is no YAML parser among callcheck's dependencies; the few fields that decide the
//! split are read with anchored patterns, and a control shows that a wrong split is caught.

use callcheck::collect::{config, shard_of};
use regex::Regex;
use std::collections::BTreeSet;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn one(re: &str, text: &str, what: &str) -> Result<Vec<String>, String> {
    let re = Regex::new(re).unwrap();
    let all: Vec<_> = re.captures_iter(text).collect();
    match all.as_slice() {
        [c] => Ok(c
            .iter()
            .skip(1)
            .map(|m| m.map_or(String::new(), |m| m.as_str().to_string()))
            .collect()),
        [] => Err(format!("no {what}")),
        _ => Err(format!("{} {what}s, expected one", all.len())),
    }
}

/// The workflow's shards: (the `shard` matrix values, N of `--shard …/N`).
fn workflow_shards(yml: &str) -> Result<(Vec<u32>, u32), String> {
    let list = one(
        r"(?m)^\s+shard:\s*\[([^\]]*)\]\s*$",
        yml,
        "matrix shard list",
    )?;
    let shards = list[0]
        .split(',')
        .map(|s| s.trim().parse::<u32>().map_err(|e| format!("{s:?}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let n = one(
        r#"callcheck collect [^\n]*--shard "\$\{\{ matrix\.shard \}\}/(\d+)""#,
        yml,
        "collect command with --shard ${{ matrix.shard }}/N",
    )?;
    Ok((shards, n[0].parse().map_err(|e| format!("{e}"))?))
}

/// The Indexed Job's shards: (the shard of each completion index, N of `--shard …/N`).
fn job_shards(yaml: &str) -> Result<(Vec<u32>, u32), String> {
    let collect = yaml
        .split("\n---")
        .find(|d| d.contains("name: callcheck-collect\n"))
        .ok_or("no callcheck-collect Job")?;
    one(
        r"(?m)^\s+completionMode:\s*(Indexed)\s*$",
        collect,
        "completionMode: Indexed",
    )?;
    let completions: u32 = one(r"(?m)^\s+completions:\s*(\d+)\s*$", collect, "completions")?[0]
        .parse()
        .map_err(|e| format!("{e}"))?;
    let parallelism: u32 = one(r"(?m)^\s+parallelism:\s*(\d+)\s*$", collect, "parallelism")?[0]
        .parse()
        .map_err(|e| format!("{e}"))?;
    if parallelism != completions {
        return Err(format!(
            "parallelism {parallelism} != completions {completions}: shards would wait"
        ));
    }
    let expr = one(
        r#"--shard "\$\(\(JOB_COMPLETION_INDEX \+ (\d+)\)\)/(\d+)""#,
        collect,
        "--shard \"$((JOB_COMPLETION_INDEX + O))/N\"",
    )?;
    let offset: u32 = expr[0].parse().map_err(|e| format!("{e}"))?;
    let n: u32 = expr[1].parse().map_err(|e| format!("{e}"))?;
    // Kubernetes numbers completion indices 0 .. completions-1.
    Ok(((0..completions).map(|i| i + offset).collect(), n))
}

/// Every (row, task) cell of the example config and the corpus.
fn cells() -> Vec<(String, String)> {
    let cfg = config::load(&repo().join("examples/llama-server.toml")).unwrap();
    let tasks = callcheck::task::load(&repo().join("tasks")).unwrap();
    let mut out = Vec::new();
    for m in &cfg.models {
        for t in &tasks {
            out.push((m.name.clone(), t.id.clone()));
        }
    }
    out
}

/// Checks that running `--shard s/n` for each `s` of `shards` asks every cell exactly once.
fn covers_exactly_once(shards: &[u32], n: u32, cells: &[(String, String)]) -> Result<(), String> {
    for &s in shards {
        // collect refuses anything else, so such a job would collect nothing.
        if s == 0 || s > n {
            return Err(format!("--shard {s}/{n} is not a shard collect accepts"));
        }
    }
    let mut seen = BTreeSet::new();
    for &s in shards {
        let mine: Vec<_> = cells
            .iter()
            .filter(|(m, t)| shard_of(m, t, n) == s)
            .collect();
        if mine.is_empty() {
            return Err(format!("shard {s}/{n} has no cell"));
        }
        for c in mine {
            if !seen.insert(c) {
                return Err(format!("{c:?} is collected twice (shard {s} repeats)"));
            }
        }
    }
    let missed: Vec<_> = cells.iter().filter(|c| !seen.contains(c)).collect();
    if !missed.is_empty() {
        return Err(format!(
            "{} cells are never collected, e.g. {:?}",
            missed.len(),
            missed[0]
        ));
    }
    Ok(())
}

#[test]
fn the_workflow_matrix_covers_every_cell_once_and_merges_its_artifacts() {
    let yml = read("examples/github-actions-shards.yml");
    let (shards, n) = workflow_shards(&yml).unwrap();
    let cells = cells();
    covers_exactly_once(&shards, n, &cells).unwrap();
    eprintln!(
        "workflow: {} shards of {n} over {} cells",
        shards.len(),
        cells.len()
    );
    // One artifact per shard, all of them merged into runs/ before the build.
    let name = one(
        r"(?m)^\s+name:\s*(runs-shard-)\$\{\{ matrix\.shard \}\}\s*$",
        &yml,
        "per-shard artifact",
    )
    .unwrap();
    let pattern = one(r"(?m)^\s+pattern:\s*(\S+)\s*$", &yml, "download pattern").unwrap();
    assert_eq!(pattern[0], format!("{}*", name[0]));
    one(
        r"(?m)^\s+merge-multiple:\s*(true)\s*$",
        &yml,
        "merge-multiple: true",
    )
    .unwrap();
    one(
        r"(?m)^\s+needs:\s*(collect)\s*$",
        &yml,
        "build job needing collect",
    )
    .unwrap();
    // The build is the repository's action (action.yml) over the merged runs/, collecting
    // nothing itself (tests/it/action.rs checks the inputs it is given).
    one(
        r"(?m)^\s+uses: (\./)\n\s+with:\n\s+collect: \x22false\x22\n\s+tasks: tasks\n\s+runs: runs\n",
        &yml,
        "build over the merged runs/ with the action",
    )
    .unwrap();
}

#[test]
fn the_indexed_job_covers_every_cell_once() {
    let yaml = read("examples/k8s-indexed-job.yaml");
    let (shards, n) = job_shards(&yaml).unwrap();
    covers_exactly_once(&shards, n, &cells()).unwrap();
    // Each shard writes its own runs/ folder (collect locks the one it writes).
    one(
        r#"--runs "/runs/shard-\$\(\(JOB_COMPLETION_INDEX \+ 1\)\)""#,
        &yaml,
        "per-shard runs folder",
    )
    .unwrap();
    one(
        r"callcheck (build) --tasks tasks --runs /runs/all",
        &yaml,
        "build over the merged runs/",
    )
    .unwrap();
}

#[test]
fn a_wrong_split_is_caught() {
    let cells = cells();
    let yml = read("examples/github-actions-shards.yml");
    // 0-based shards, a missing shard, a repeated one, N out of step with the list.
    for (from, to) in [
        ("shard: [1, 2, 3, 4]", "shard: [0, 1, 2, 3]"),
        ("shard: [1, 2, 3, 4]", "shard: [1, 2, 3]"),
        ("shard: [1, 2, 3, 4]", "shard: [1, 2, 3, 3, 4]"),
        ("}}/4\"", "}}/5\""),
    ] {
        assert!(yml.contains(from));
        let (s, n) = workflow_shards(&yml.replace(from, to)).unwrap();
        assert!(covers_exactly_once(&s, n, &cells).is_err(), "{to} accepted");
    }
    let yaml = read("examples/k8s-indexed-job.yaml");
    for (from, to) in [
        (
            "JOB_COMPLETION_INDEX + 1))/4",
            "JOB_COMPLETION_INDEX + 0))/4",
        ),
        (
            "completions: 4\n  parallelism: 4",
            "completions: 3\n  parallelism: 3",
        ),
    ] {
        assert!(yaml.contains(from), "{from}");
        let (s, n) = job_shards(&yaml.replace(from, to)).unwrap();
        assert!(covers_exactly_once(&s, n, &cells).is_err(), "{to} accepted");
    }
    assert!(
        job_shards(&yaml.replace("completionMode: Indexed", "completionMode: NonIndexed")).is_err()
    );
}
