//! The statistics, on the ground floor: pure functions of counts, with reference values in their
//! tests, imported by every floor above and importing none of them (as criterion keeps its
//! `stats/`).
//!
//! - [`interval`]: binomial intervals for one rate (Wilson, Clopper–Pearson) and how they print.
//! - [`thresholds`]: the verdict a rate's interval earns at the build's `--reliable-at`.
//! - [`compare`]: two rows over the same tasks — the pooled interval for these tasks, the
//!   difference interval, the gate's exact test, Holm's correction, power.
//! - [`direction`]: what an interval of a difference says.

pub mod compare;
pub mod direction;
pub mod interval;
pub mod thresholds;

pub use direction::Direction;
pub use interval::{Interval, IntervalKind};
pub use thresholds::{BROKEN_UPPER, Reliability, Thresholds};
