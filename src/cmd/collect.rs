//! `callcheck collect`: typed options in, a collection run on a tokio runtime, a summary out.

use crate::cli::CollectOpts;
use crate::collect::client::RetryPolicy;
use crate::collect::{self, Options, Shard};
use anyhow::{Context, Result, bail};

pub fn run(o: &CollectOpts) -> Result<()> {
    let shard = match &o.shard {
        Some(s) => Some(
            s.parse::<Shard>()
                .map_err(|e| anyhow::anyhow!("--shard {e}"))?,
        ),
        None => None,
    };
    let opts = Options {
        config: o.config.clone(),
        config_text: None,
        tasks: o.corpus.tasks.clone(),
        runs: o.corpus.runs.clone(),
        k: o.k,
        allow_anecdote: o.allow_anecdote,
        models: o.models.clone(),
        only: o.only.clone(),
        shard,
        jobs: o.jobs,
        retry: RetryPolicy {
            retries: o.retries,
            base_ms: o.backoff_ms,
            ..RetryPolicy::default()
        },
        retry_errors: o.retry_errors,
        quiet: o.quiet,
        preflight: !o.no_preflight,
        verbose: o.verbose,
        feedback: o.feedback.clone(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = rt.block_on(async {
        let (tx, mut rx) = tokio::sync::watch::channel(false);
        let signal_tx = tx.clone();
        // Ctrl-C: stop launching (or stop the preflight), drop what is in flight, print the
        // summary. A second Ctrl-C exits at once: unfinished runs are temporary folders, which
        // the next collect removes, so nothing unfinished can pass for finished.
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                let _ = signal_tx.send(true);
                if tokio::signal::ctrl_c().await.is_ok() {
                    eprintln!("collect: second Ctrl-C, exiting now");
                    std::process::exit(super::exit::INTERRUPTED);
                }
            }
        });
        let r = collect::collect(&opts, tx).await;
        rx.mark_unchanged();
        r
    })?;
    // Leftover tasks (a stopped stream's body reader) must not hold the process open.
    rt.shutdown_background();
    if !o.quiet || report.interrupted || report.fatal.is_some() {
        eprint!("{}", crate::term::escape_lines(&report.render()));
    }
    if let Some(f) = &report.fatal {
        bail!("collection stopped: {f}");
    }
    if report.interrupted {
        bail!(
            "interrupted: the cells in flight were discarded; run the same command again to resume"
        );
    }
    let failed: Vec<&str> = report
        .models
        .iter()
        .filter(|m| m.failure.is_some())
        .map(|m| m.name.as_str())
        .collect();
    if !failed.is_empty() {
        bail!("not collected: {}", failed.join(", "));
    }
    // A row of transport errors only has nothing to score: a success it is not.
    let unscored: Vec<String> = report
        .models
        .iter()
        .filter(|m| m.never_scored())
        .map(|m| format!("{}: {}", m.name, m.diagnosis()))
        .collect();
    if !unscored.is_empty() {
        bail!("{}", unscored.join("\n"));
    }
    Ok(())
}
