//! The verdict thresholds (SPEC §6): the rate a reader needs to rely on (`build --reliable-at`,
//! 0.9 unless given) and the fixed 0.5 below which a rate is `broken`. Carried by the
//! [`super::Matrix`] a build made, so every verdict the site and its exports show, and every
//! sentence that explains them, uses the same value.

use super::interval::Interval;

/// The default of `build --reliable-at`.
pub const DEFAULT_RELIABLE_AT: f64 = 0.9;

/// Upper bound below which a rate is `broken`, whatever `--reliable-at` says.
pub const BROKEN_UPPER: f64 = 0.5;

/// The thresholds one build judges every interval by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Lower bound at or above which a rate is `reliable`; an upper bound below it is
    /// `unreliable`. Strictly between 0 and 1 ([`Thresholds::new`]).
    reliable_at: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            reliable_at: DEFAULT_RELIABLE_AT,
        }
    }
}

impl Thresholds {
    /// Thresholds reliable at `p`: a usage error unless 0 < p < 1 (at 0 every rate would be
    /// reliable, at 1 none could ever be).
    pub fn new(p: f64) -> Result<Thresholds, String> {
        if p.is_finite() && p > 0.0 && p < 1.0 {
            Ok(Thresholds { reliable_at: p })
        } else {
            Err(format!(
                "{p} is not a rate strictly between 0 and 1 (e.g. 0.9, the default, or 0.95)"
            ))
        }
    }

    /// Parses `--reliable-at`: a decimal rate such as `0.95`.
    pub fn parse(s: &str) -> Result<Thresholds, String> {
        let p: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a number: give a rate such as 0.9 or 0.95"))?;
        Thresholds::new(p)
    }

    /// The rate a reader wants to rely on.
    pub fn reliable_at(self) -> f64 {
        self.reliable_at
    }

    /// The upper bound below which a rate is `broken`: 0.5, or the reliable threshold when that
    /// is lower, so that `broken` stays a stronger `unreliable`.
    pub fn broken_below(self) -> f64 {
        BROKEN_UPPER.min(self.reliable_at)
    }

    /// The verdict on an interval (none: no scored sample, `uncertain`).
    pub fn verdict(self, iv: Option<&Interval>) -> Reliability {
        match iv {
            Some(iv) if iv.lower >= self.reliable_at => Reliability::Reliable,
            Some(iv) if iv.upper < self.broken_below() => Reliability::Broken,
            Some(iv) if iv.upper < self.reliable_at => Reliability::Unreliable,
            _ => Reliability::Uncertain,
        }
    }

    /// The fewest samples, all passing, whose interval (`kind`) reaches `reliable` in one cell:
    /// 35 for Wilson at 0.9. The lower bound of n/n grows with n, so doubling then bisecting
    /// finds it in a few dozen intervals; `None` past about four million samples (a threshold a
    /// hair below 1, where an exact interval's quantile takes long to compute).
    pub fn fewest_samples(self, kind: crate::stats::IntervalKind) -> Option<u64> {
        let reaches = |n: u64| {
            super::interval::interval(kind, n, n).is_some_and(|iv| iv.lower >= self.reliable_at)
        };
        let mut hi = 1u64;
        while !reaches(hi) {
            if hi >= 1 << 22 {
                return None;
            }
            hi *= 2;
        }
        // Invariant: `hi` reaches it; every n < `lo` does not.
        let mut lo = hi / 2 + 1;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if reaches(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Some(hi)
    }

    /// The reliable threshold as the pages write it: `90 %`, `95 %`, `97.5 %`.
    pub fn reliable_percent(self) -> String {
        percent_text(self.reliable_at)
    }

    /// The broken threshold as the pages write it (`50 %`).
    pub fn broken_percent(self) -> String {
        percent_text(self.broken_below())
    }
}

/// `p` as a percentage with at most two decimals and no trailing zeros.
fn percent_text(p: f64) -> String {
    let s = format!("{:.2}", p * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} %")
}

impl std::fmt::Display for Thresholds {
    /// The value as `--reliable-at` takes it (`0.9`): clap shows it as the default.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.reliable_at)
    }
}

/// The colour a rate gets, and the word that says it without colour. The thresholds are the
/// build's ([`Thresholds`]: `--reliable-at`, 0.9 unless given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reliability {
    /// The interval's lower bound is at least the reliable threshold.
    Reliable,
    /// The interval straddles the reliable threshold (or there is no scored sample at all).
    Uncertain,
    /// The interval's upper bound is below the reliable threshold: it cannot be relied on
    /// (SPEC §6, revised).
    Unreliable,
    /// The interval's upper bound is below 0.5: a stronger `unreliable`.
    Broken,
}

impl Reliability {
    pub fn as_str(self) -> &'static str {
        match self {
            Reliability::Reliable => "reliable",
            Reliability::Uncertain => "uncertain",
            Reliability::Unreliable => "unreliable",
            Reliability::Broken => "broken",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::IntervalKind;

    fn iv(lower: f64, upper: f64) -> Interval {
        Interval { lower, upper }
    }

    #[test]
    fn the_default_judges_at_ninety_and_fifty() {
        let t = Thresholds::default();
        assert_eq!(t.verdict(Some(&iv(0.9, 1.0))), Reliability::Reliable);
        assert_eq!(t.verdict(Some(&iv(0.89, 1.0))), Reliability::Uncertain);
        assert_eq!(t.verdict(Some(&iv(0.0, 0.49))), Reliability::Broken);
        assert_eq!(t.verdict(Some(&iv(0.0, 0.5))), Reliability::Unreliable);
        assert_eq!(t.verdict(Some(&iv(0.51, 0.89))), Reliability::Unreliable);
        assert_eq!(t.verdict(Some(&iv(0.2, 0.9))), Reliability::Uncertain);
        assert_eq!(t.verdict(None), Reliability::Uncertain);
        assert_eq!(t.reliable_percent(), "90 %");
        assert_eq!(t.broken_percent(), "50 %");
        assert_eq!(t.to_string(), "0.9");
        // Wilson: n / (n + 1.96²) ≥ 0.9 from n = 35; Clopper–Pearson: 0.025^(1/n) ≥ 0.9 from 36.
        assert_eq!(t.fewest_samples(IntervalKind::Wilson), Some(35));
        assert_eq!(t.fewest_samples(IntervalKind::ClopperPearson), Some(36));
        assert_eq!(
            Thresholds::new(0.5)
                .unwrap()
                .fewest_samples(IntervalKind::Wilson),
            Some(4)
        );
    }

    #[test]
    fn another_threshold_moves_reliable_and_unreliable_but_not_broken() {
        let t = Thresholds::new(0.95).unwrap();
        assert_eq!(t.verdict(Some(&iv(0.92, 1.0))), Reliability::Uncertain);
        assert_eq!(t.verdict(Some(&iv(0.95, 1.0))), Reliability::Reliable);
        assert_eq!(t.verdict(Some(&iv(0.6, 0.94))), Reliability::Unreliable);
        assert_eq!(t.verdict(Some(&iv(0.1, 0.49))), Reliability::Broken);
        assert_eq!(t.reliable_percent(), "95 %");
        let low = Thresholds::new(0.5).unwrap();
        assert_eq!(low.verdict(Some(&iv(0.52, 0.7))), Reliability::Reliable);
        assert_eq!(low.verdict(Some(&iv(0.3, 0.49))), Reliability::Broken);
        // Below 0.5, broken follows the threshold down, so it still implies unreliable.
        let lower = Thresholds::new(0.3).unwrap();
        assert_eq!(lower.verdict(Some(&iv(0.35, 0.45))), Reliability::Reliable);
        assert_eq!(lower.verdict(Some(&iv(0.2, 0.4))), Reliability::Uncertain);
        assert_eq!(lower.verdict(Some(&iv(0.1, 0.29))), Reliability::Broken);
        assert_eq!(lower.broken_percent(), "30 %");
        assert_eq!(
            Thresholds::parse("0.975").unwrap().reliable_percent(),
            "97.5 %"
        );
    }

    #[test]
    fn only_rates_strictly_between_zero_and_one_are_thresholds() {
        for bad in ["0", "1", "-0.1", "1.5", "NaN", "inf", "90", ""] {
            assert!(Thresholds::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Thresholds::parse("ninety").unwrap_err(),
            "\"ninety\" is not a number: give a rate such as 0.9 or 0.95"
        );
        assert_eq!(
            Thresholds::parse("1").unwrap_err(),
            "1 is not a rate strictly between 0 and 1 (e.g. 0.9, the default, or 0.95)"
        );
    }
}
