//! Prints SPEC §9's whole grid for the comparison statistics and the gate, as
//! docs/compare-grid.md reports it: coverage at every setting, family-wise false alarms with 16
//! and 64 tags, power before and after single tasks had a voice, one broken task over
//! callcheck's corpus, and the printed detectable drop of every row of the demo's comparison
//! against the gate's simulated power there. Exits 1 when a setting misses its floor.
//!
//! A minute in a release build on two shared cores, far too long for the test suite (which
//! checks the corners, `tests/it/compare_stats.rs`):
//!
//! ```sh
//! cargo run --release --locked --example compare-grid
//! cargo run --release --locked --example compare-grid -- --datasets 400 --families 100 --runs 200
//! ```
//!
//! `--datasets` (coverage, default 1,000 per setting), `--families` (false alarms, default 500
//! per setting) and `--runs` (power, default 1,000 per figure) trade precision for time.

mod grid;

use std::process::ExitCode;

fn main() -> ExitCode {
    let (mut datasets, mut families, mut runs) = (1000usize, 500usize, 1000usize);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse::<usize>().ok());
        let slot = match pair[0].as_str() {
            "--datasets" => &mut datasets,
            "--families" => &mut families,
            "--runs" => &mut runs,
            _ => usage(&pair[0]),
        };
        *slot = value.filter(|v| *v > 0).unwrap_or_else(|| usage(&pair[0]));
    }
    let started = std::time::Instant::now();
    let (table, mut failures) = grid::grid(datasets, families, |_, _| true, &[16, 64]);
    let (power, pf) = grid::power_table(runs);
    failures.extend(pf);
    let (corpus, cf) = grid::corpus_table(runs);
    failures.extend(cf);
    let (demo, df) = grid::demo_table(runs, |_| true);
    failures.extend(df);
    println!("{table}\n{power}\n{corpus}\n{demo}");
    eprintln!(
        "compare-grid: {datasets} datasets, {families} families, {runs} runs per figure; {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("compare-grid: below the floor:\n{}", failures.join("\n"));
        ExitCode::FAILURE
    }
}

fn usage(flag: &str) -> ! {
    eprintln!(
        "compare-grid: bad argument {flag}; usage: compare-grid [--datasets N] [--families N] [--runs N] (positive counts)"
    );
    std::process::exit(2)
}
