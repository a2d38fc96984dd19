//! `callcheck collect`: typed options in, a collection run on a tokio runtime, a summary out.

use crate::cli::CollectOpts;
use crate::collect::client::RetryPolicy;
use crate::collect::{self, Options, Shard};
use anyhow::{Context, Result, bail};

/// The threads that write samples to disk (tokio's blocking pool, 512 by default). The disk is
/// what they wait for, so more of them add nothing but memory: with `--jobs 64` the pool grew to
/// 130-150 threads, each with its own allocator heap (issue 46). Sixteen leave writes flowing
/// while finishing runs wait for their sync (a group `syncfs` can take a second on a busy disk).
const BLOCKING_THREADS: usize = 16;

/// Turns transparent huge pages off for this process. mimalloc asks for them on its arenas, and
/// with them a thread's heap, however little it holds, is backed by 2 MiB pages: collect's many
/// threads each write a few KB, so most of that was waste (issue 46: 4 rows, k = 60, `--jobs 64`
/// peaked at 221 MB with them and 68 MB without, the thread count unchanged; mimalloc arrived
/// after ad88b06, whose glibc heaps peaked at 40 MB). build, whose few threads hold hundreds of
/// MB of live data, keeps them.
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integers and changes only this
    // process's memory policy; it cannot fail in a way that matters (an old kernel without it
    // returns EINVAL, and collect then runs as before).
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

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
        review: o.review.is_some(),
        history: o.feedback_history,
    };
    no_huge_pages();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
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
