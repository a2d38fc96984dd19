//! Writes a synthetic runs/ tree (and the tasks it was collected for) for build's benchmarks:
//! `cargo run --release --example synth -- --samples 100000 --out /tmp/synth`, then
//! `callcheck build --tasks /tmp/synth/tasks --runs /tmp/synth/runs --out /tmp/synth/site`.
//! With `--fixture`, writes the small tree the snapshot tests read instead.

use anyhow::{Context, Result};
use callcheck::synth::{SynthOpts, generate, write_fixture};
use clap::Parser;
use std::path::PathBuf;

#[derive(Parser)]
struct Opts {
    /// Samples to write (rounded up to whole cells).
    #[arg(long, default_value_t = 10_000)]
    samples: usize,
    /// Where to write `tasks/` and `runs/` (or, with --fixture, the runs/ folder itself).
    #[arg(long)]
    out: PathBuf,
    /// Template tasks, cloned under new ids as needed.
    #[arg(long, default_value = "tests/fixtures/runs-tasks")]
    tasks: PathBuf,
    #[arg(long, default_value_t = 20)]
    models: usize,
    #[arg(long, default_value_t = 10)]
    k: usize,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Model ids the rows serve (row i serves id i mod N): rows sharing one are compared, as
    /// collect's rows of one served model are. Without it each row serves its own.
    #[arg(long)]
    served: Option<usize>,
    /// Write the snapshot tests' fixture tree to --out.
    #[arg(long)]
    fixture: bool,
}

fn main() -> Result<()> {
    let o = Opts::parse();
    let tasks = callcheck::task::load(&o.tasks).map_err(|e| anyhow::anyhow!("{e}"))?;
    if o.out.exists() {
        anyhow::bail!("{} exists: choose a new folder", o.out.display());
    }
    if o.fixture {
        return write_fixture(&o.out, &tasks);
    }
    let templates = tasks
        .into_iter()
        .map(|t| {
            let bytes =
                std::fs::read(&t.file).with_context(|| format!("reading {}", t.file.display()))?;
            Ok((t, bytes))
        })
        .collect::<Result<Vec<_>>>()?;
    let n = generate(
        &o.out,
        &templates,
        &SynthOpts {
            samples: o.samples,
            models: o.models,
            k: o.k,
            seed: o.seed,
            served: o.served,
        },
    )?;
    eprintln!("wrote {n} samples under {}", o.out.display());
    Ok(())
}
