//! Binomial confidence intervals at 95 %: Wilson score (the default) and Clopper–Pearson (exact).
//!
//! A rate from k = 3 samples is almost meaningless on its own; every rate the site shows carries
//! one of these, so "3/3" reads as "somewhere between 44 % and 100 %", never as "100 %".

use serde::{Deserialize, Serialize};
use statrs::distribution::{Beta, ContinuousCDF, Normal};

/// Which binomial interval to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum IntervalKind {
    #[default]
    Wilson,
    ClopperPearson,
}

/// The confidence level of every interval on the site.
pub const CONFIDENCE: f64 = 0.95;

/// A two-sided interval for a proportion, both bounds in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lower: f64,
    pub upper: f64,
}

impl IntervalKind {
    /// The name used in the data exports and on pages.
    pub fn as_str(self) -> &'static str {
        match self {
            IntervalKind::Wilson => "wilson",
            IntervalKind::ClopperPearson => "clopper-pearson",
        }
    }

    /// How the method is named for people.
    pub fn title(self) -> &'static str {
        match self {
            IntervalKind::Wilson => "Wilson score",
            IntervalKind::ClopperPearson => "Clopper–Pearson (exact)",
        }
    }
}

/// The interval for `successes` out of `trials` at [`CONFIDENCE`], or `None` when there are no
/// trials (a cell whose every sample was a transport error has no rate at all).
pub fn interval(kind: IntervalKind, successes: u64, trials: u64) -> Option<Interval> {
    if trials == 0 {
        return None;
    }
    let x = successes.min(trials) as f64;
    let n = trials as f64;
    let alpha = 1.0 - CONFIDENCE;
    let iv = match kind {
        IntervalKind::Wilson => {
            let z = Normal::standard().inverse_cdf(1.0 - alpha / 2.0);
            let p = x / n;
            let z2 = z * z;
            let denom = 1.0 + z2 / n;
            let centre = (p + z2 / (2.0 * n)) / denom;
            let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
            // At x = 0 and x = n the bounds are exactly 0 and 1; the closed form leaves
            // rounding dust there.
            Interval {
                lower: if x == 0.0 { 0.0 } else { centre - half },
                upper: if x == n { 1.0 } else { centre + half },
            }
        }
        IntervalKind::ClopperPearson => {
            // The exact bounds are quantiles of Beta(x, n−x+1) and Beta(x+1, n−x); at x = 0 and
            // x = n one side is fixed at 0 or 1 (the Beta would have a zero shape parameter).
            let lower = if x == 0.0 {
                0.0
            } else {
                Beta::new(x, n - x + 1.0)
                    .map(|b| b.inverse_cdf(alpha / 2.0))
                    .unwrap_or(0.0)
            };
            let upper = if x == n {
                1.0
            } else {
                Beta::new(x + 1.0, n - x)
                    .map(|b| b.inverse_cdf(1.0 - alpha / 2.0))
                    .unwrap_or(1.0)
            };
            Interval { lower, upper }
        }
    };
    Some(Interval {
        lower: iv.lower.clamp(0.0, 1.0),
        upper: iv.upper.clamp(0.0, 1.0),
    })
}

/// Rounds to 4 decimals: every float in the exports goes through this, so that the last bits of
/// a platform's libm never reach the output.
pub fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// A difference of proportions in signed percentage points with one decimal and a real minus
/// sign: `+4.2`, `−8.5`, `0.0`. Rounded from the 4-decimal value, as every exported float is, so
/// the text matches `data/`'s numbers on every platform.
pub fn points(x: f64) -> String {
    let v = (round4(x) * 1000.0).round() / 10.0;
    if v == 0.0 {
        "0.0".into()
    } else if v < 0.0 {
        format!("−{:.1}", -v)
    } else {
        format!("+{v:.1}")
    }
}

/// A proportion as a whole percentage for pages: `67 %`. Rounds half away from zero on the
/// 4-decimal value, so the text is the same on every platform.
pub fn percent(x: f64) -> String {
    format!("{} %", (round4(x) * 100.0).round() as i64)
}

/// An interval for pages: `[21–94 %]`.
pub fn show(iv: &Interval) -> String {
    format!(
        "[{}–{} %]",
        (round4(iv.lower) * 100.0).round() as i64,
        (round4(iv.upper) * 100.0).round() as i64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-5
    }

    fn check(kind: IntervalKind, x: u64, n: u64, lo: f64, hi: f64) {
        let iv = interval(kind, x, n).unwrap();
        assert!(
            close(iv.lower, lo) && close(iv.upper, hi),
            "{kind:?} {x}/{n}: got [{}, {}], want [{lo}, {hi}]",
            iv.lower,
            iv.upper
        );
    }

    // Reference values: Wilson from the closed form with z = 1.959964 (e.g. R's
    // `prop.test(correct = FALSE)`, Newcombe 1998 table I); Clopper–Pearson from R's
    // `binom.test`.
    #[test]
    fn wilson_matches_known_values() {
        check(IntervalKind::Wilson, 0, 3, 0.0, 0.561497);
        check(IntervalKind::Wilson, 3, 3, 0.438503, 1.0);
        check(IntervalKind::Wilson, 5, 10, 0.236593, 0.763407);
        check(IntervalKind::Wilson, 81, 263, 0.255289, 0.366210);
        check(IntervalKind::Wilson, 1, 3, 0.061492, 0.792340);
    }

    #[test]
    fn clopper_pearson_matches_known_values() {
        check(IntervalKind::ClopperPearson, 0, 3, 0.0, 0.707598);
        check(IntervalKind::ClopperPearson, 3, 3, 0.292402, 1.0);
        check(IntervalKind::ClopperPearson, 5, 10, 0.187086, 0.812914);
        check(IntervalKind::ClopperPearson, 1, 3, 0.008403, 0.905700);
    }

    #[test]
    fn no_trials_has_no_interval_and_text_is_fixed() {
        assert_eq!(interval(IntervalKind::Wilson, 0, 0), None);
        let iv = interval(IntervalKind::Wilson, 3, 3).unwrap();
        assert_eq!(show(&iv), "[44–100 %]");
        assert_eq!(percent(2.0 / 3.0), "67 %");
    }

    #[test]
    fn points_are_signed_with_a_real_minus_and_no_signed_zero() {
        assert_eq!(points(0.0421), "+4.2");
        assert_eq!(points(-0.085), "−8.5");
        assert_eq!(points(0.0), "0.0");
        assert_eq!(points(-0.0004), "0.0");
        assert_eq!(points(1.0), "+100.0");
        // Rounded from the 4-decimal value data/ holds: 0.012 49996 is 0.0125 there, 1.3 here.
        assert_eq!(points(0.01249996), "+1.3");
    }
}
