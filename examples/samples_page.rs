//! Writes the triage page (samples.html, samples.js, data/samples.js and the stylesheet) for a
//! synthetic matrix of `--samples` samples, without a runs/ tree: bench/samples.sh opens it in
//! Chromium to measure its weight and time to first render at 100,000 and 300,000 samples.
//! The data is the same encoder `build` uses (site::samples_page); details vary the way real
//! ones do (a few templates with tool names, paths and byte offsets), so the table of distinct
//! details grows as it would.

use anyhow::{Context, Result};
use callcheck::report::{SampleKey, Scored, TaskInfo, aggregate};
use callcheck::stats::IntervalKind;
use callcheck::taxonomy::{Label, Outcome, Stage};
use clap::Parser;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use std::path::PathBuf;

#[derive(Parser)]
struct Opts {
    #[arg(long, default_value_t = 100_000)]
    samples: usize,
    #[arg(long, default_value_t = 20)]
    models: usize,
    #[arg(long, default_value_t = 10)]
    k: usize,
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

const TAGS: [&str; 8] = [
    "parallel",
    "nested",
    "enum",
    "int64",
    "unicode-escaping",
    "no-call",
    "ref",
    "multi-turn",
];

fn main() -> Result<()> {
    let o = Opts::parse();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(o.seed);
    let n_tasks = o.samples.div_ceil(o.models * o.k).max(1);
    let tasks: Vec<TaskInfo> = (0..n_tasks)
        .map(|i| TaskInfo {
            id: format!("task-{i:05}"),
            title: format!("Synthetic task {i}"),
            tags: vec![TAGS[i % TAGS.len()].to_string()],
            bfcl_scored: false,
        })
        .collect();
    let mut samples = Vec::with_capacity(o.samples);
    'all: for m in 0..o.models {
        let model = format!("model-{m:02}");
        // Each model has its own pass rate, each task its own difficulty.
        let skill: f64 = 0.5 + 0.5 * rng.random::<f64>();
        for (t, task) in tasks.iter().enumerate() {
            let p = skill * (1.0 - 0.6 * ((t * 7919) % 97) as f64 / 97.0);
            for s in 0..o.k {
                if samples.len() == o.samples {
                    break 'all;
                }
                let u: f64 = rng.random();
                let (outcome, stage, detail) = if u < p {
                    (
                        Outcome::Pass,
                        None,
                        "the output parses, validates and meets every predicate".to_string(),
                    )
                } else if u > 0.98 {
                    (
                        Outcome::Error,
                        Some(Stage::Transport),
                        format!("HTTP 503 after {} attempts", 1 + s % 3),
                    )
                } else {
                    let l = Label::ALL[rng.random_range(0..Label::ALL.len())];
                    let detail = match rng.random_range(0..4) {
                        0 => format!(
                            "call 1 (get_item_{}): the arguments do not parse: key must be a string at byte {}",
                            t % 50,
                            rng.random_range(1..400)
                        ),
                        1 => format!(
                            "call 1 (lookup): /items/{}/id: \"{}\" is not of type \"integer\"",
                            rng.random_range(0..9),
                            rng.random_range(0..100_000)
                        ),
                        2 => format!(
                            "call 1 (search_{}): the arguments are double-encoded: a JSON string whose content is the arguments object",
                            t % 30
                        ),
                        _ => format!(
                            "call {} names \"tool_{}\", which was not offered (offered: tool_a, tool_b)",
                            1 + s % 3,
                            rng.random_range(0..500)
                        ),
                    };
                    (Outcome::Fail(l), Some(Stage::Parse), detail)
                };
                let key = SampleKey {
                    model: model.clone(),
                    task: task.id.clone(),
                    run: "20260101T000000Z-s1of1-0123abcd".into(),
                    sample: format!("{s:03}"),
                };
                samples.push(Scored {
                    stage,
                    detail,
                    ..Scored::bare(key, outcome)
                });
            }
        }
    }
    let m = aggregate(samples, tasks, IntervalKind::Wilson);
    let files = callcheck::site::samples_page(&m).map_err(|e| anyhow::anyhow!("{e}"))?;
    for (path, bytes) in files {
        let p = o.out.join(path);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(&p, bytes).with_context(|| format!("writing {}", p.display()))?;
    }
    std::fs::write(
        o.out.join("style.css"),
        include_str!("../src/site/style.css"),
    )?;
    eprintln!(
        "wrote the samples page for {} samples under {}",
        m.samples.len(),
        o.out.display()
    );
    Ok(())
}
