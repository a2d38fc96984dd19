//! Collect's progress off a terminal: one plain line at a steady interval, so a CI log or a
//! redirected long collection shows it moving (SPEC §7).
//!
//! On a terminal the progress bar redraws in place; in a pipe it would be noise (or, hidden as
//! it is there, nothing at all for a 26-minute collection). A line every [`DEFAULT_EVERY`] is
//! enough to tell a slow collection from a stuck one without flooding the log; the interval is
//! set by [`EVERY_VAR`] (seconds, fractions allowed), which is how tests make it short.

use std::time::Duration;

/// How often a progress line is printed off a terminal, unless [`EVERY_VAR`] says otherwise.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(30);

/// The environment variable that sets the interval in seconds (`0` turns the lines off).
pub const EVERY_VAR: &str = "CALLCHECK_PROGRESS_SECS";

/// Where a collection stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Counts {
    pub cells_done: u64,
    pub cells_total: u64,
    pub samples: u64,
    pub samples_total: u64,
    /// Samples kept as transport errors so far.
    pub errors: u64,
}

/// The interval for progress lines, or `None` for none: on a terminal (the bar shows progress
/// there), under `--quiet`, or when [`EVERY_VAR`] is `0`. An unreadable value of the variable
/// falls back to the default and says so once.
pub fn every(quiet: bool, on_terminal: bool) -> Option<Duration> {
    if quiet || on_terminal {
        return None;
    }
    let Ok(v) = std::env::var(EVERY_VAR) else {
        return Some(DEFAULT_EVERY);
    };
    match v.trim().parse::<f64>() {
        Ok(0.0) => None,
        Ok(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s.clamp(0.05, 86_400.0))),
        _ => {
            eprintln!(
                "warning: {EVERY_VAR}={:?} is not a number of seconds; progress every {} s",
                crate::term::escape_controls(&v),
                DEFAULT_EVERY.as_secs()
            );
            Some(DEFAULT_EVERY)
        }
    }
}

/// A duration for people: `42 s`, `3 min 5 s`, `2 h 10 min`.
fn span(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// One progress line: cells and samples done of their totals, errors, the rate so far and the
/// time left at that rate.
pub fn line(c: &Counts, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        c.samples as f64 / secs
    } else {
        0.0
    };
    let left = c.samples_total.saturating_sub(c.samples);
    let eta = if left == 0 {
        "none left".to_string()
    } else if rate > 0.0 {
        format!("about {} left", span(left as f64 / rate))
    } else {
        "time left unknown (no sample yet)".to_string()
    };
    format!(
        "progress: cells {}/{}, samples {}/{}, {} transport error{}, {:.2} samples/s, {eta} ({} elapsed)",
        c.cells_done,
        c.cells_total,
        c.samples,
        c.samples_total,
        c.errors,
        if c.errors == 1 { "" } else { "s" },
        rate,
        span(secs)
    )
}

/// Prints a progress line every `every` until dropped.
pub struct Ticker(Option<tokio::task::JoinHandle<()>>);

impl Ticker {
    /// Starts printing (when `every` is set) what `counts` says, timed from `started`.
    pub fn start(
        every: Option<Duration>,
        started: std::time::Instant,
        counts: impl Fn() -> Counts + Send + 'static,
    ) -> Ticker {
        let Some(every) = every else {
            return Ticker(None);
        };
        Ticker(Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick is immediate: nothing has happened yet.
            tick.tick().await;
            loop {
                tick.tick().await;
                eprintln!("{}", line(&counts(), started.elapsed()));
            }
        })))
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_where_the_collection_stands_and_how_long_is_left() {
        let c = Counts {
            cells_done: 3,
            cells_total: 40,
            samples: 12,
            samples_total: 120,
            errors: 1,
        };
        assert_eq!(
            line(&c, Duration::from_secs(24)),
            "progress: cells 3/40, samples 12/120, 1 transport error, 0.50 samples/s, about 3 min 36 s left (24 s elapsed)"
        );
        let none = Counts {
            samples: 0,
            errors: 0,
            cells_done: 0,
            ..c
        };
        assert_eq!(
            line(&none, Duration::from_secs(4000)),
            "progress: cells 0/40, samples 0/120, 0 transport errors, 0.00 samples/s, time left unknown (no sample yet) (1 h 6 min elapsed)"
        );
    }

    #[test]
    fn no_lines_on_a_terminal_or_when_quiet() {
        assert_eq!(every(true, false), None);
        assert_eq!(every(false, true), None);
    }
}
