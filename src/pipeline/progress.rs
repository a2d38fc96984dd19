//! What a long build shows while it works, on a terminal only: the runs read and scored (with
//! the samples and pages so far), then the summary pages being written — an indicatif bar, as
//! collect shows its samples. When stderr is not a terminal (a pipe, a log, CI) nothing is
//! drawn and build's output is its summary lines alone.

use indicatif::ProgressBar;
use std::sync::atomic::{AtomicU64, Ordering};

/// The bar of one build; hidden unless stderr is a terminal.
pub struct Progress {
    bar: ProgressBar,
    samples: AtomicU64,
    pages: AtomicU64,
}

impl Progress {
    /// A bar over `runs` run folders.
    pub fn start(runs: usize) -> Progress {
        let bar = crate::term::progress_bar(
            runs as u64,
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs scored · {msg}",
            false,
        );
        Progress {
            bar,
            samples: AtomicU64::new(0),
            pages: AtomicU64::new(0),
        }
    }

    /// One run folder scored, with its samples and its pages (written, or kept in place).
    pub fn run_done(&self, samples: usize, pages: usize) {
        let s = self.samples.fetch_add(samples as u64, Ordering::Relaxed) + samples as u64;
        let p = self.pages.fetch_add(pages as u64, Ordering::Relaxed) + pages as u64;
        self.bar
            .set_message(format!("{s} samples, {p} sample pages"));
        self.bar.inc(1);
    }

    /// The runs are done; the summary pages (matrix, models, tasks, tags, labels) follow.
    pub fn summary_pages(&self) {
        let (s, p) = (
            self.samples.load(Ordering::Relaxed),
            self.pages.load(Ordering::Relaxed),
        );
        self.bar.set_message(format!(
            "{s} samples, {p} sample pages; writing the summary pages"
        ));
    }

    /// Prints `f`'s lines above the bar, which is drawn again below them.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Removes the bar: build's summary lines follow.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    /// A build that stops on an error leaves no bar above its message.
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}
