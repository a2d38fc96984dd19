//! What an interval or a test of a difference says, in the words pages and the terminal use.

use crate::stats::interval::Interval;
use serde::Serialize;

/// What an interval of a difference says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The whole interval is above 0: B passes more often than A.
    Better,
    /// The whole interval is below 0: B passes less often than A.
    Worse,
    /// The interval contains 0 (or there is nothing to compare).
    NoEvidence,
}

impl Direction {
    /// Decided by the interval, never by the bare difference.
    pub fn of(iv: Option<&Interval>) -> Direction {
        match iv {
            Some(iv) if iv.lower > 0.0 => Direction::Better,
            Some(iv) if iv.upper < 0.0 => Direction::Worse,
            _ => Direction::NoEvidence,
        }
    }

    /// The word shown on pages and in the terminal.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Better => "better",
            Direction::Worse => "worse",
            Direction::NoEvidence => "no evidence of a difference",
        }
    }

    /// A short class name for styling.
    pub fn class(self) -> &'static str {
        match self {
            Direction::Better => "better",
            Direction::Worse => "worse",
            Direction::NoEvidence => "none",
        }
    }
}
