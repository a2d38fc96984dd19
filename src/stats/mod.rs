//! The statistics, on the ground floor: pure functions of counts, with reference values in their
//! tests, imported by every floor above and importing none of them (as criterion keeps its
//! `stats/`).
//!
//! - [`interval`]: binomial intervals for one rate (Wilson, Clopper–Pearson) and how they print.
//! - [`thresholds`]: the verdict a rate's interval earns at the build's `--reliable-at`.
//! - [`compare`]: two rows over the same tasks — the pooled interval for these tasks, the
//!   difference interval.
//! - [`gate`]: the CI gate — its exact test of that difference, the family it corrects over
//!   (pooled rows and tasks), and the power it has, simulated for the test actually run.
//! - [`direction`]: what an interval of a difference says.

pub mod compare;
pub mod direction;
pub mod gate;
pub mod interval;
pub mod thresholds;

pub use direction::Direction;
pub use interval::{Interval, IntervalKind};
pub use thresholds::{BROKEN_UPPER, Reliability, Thresholds};
