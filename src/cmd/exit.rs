//! The exit codes of the `callcheck` binary, in one place: scripts and CI steps read them, so
//! each one means one thing.

/// The command did what it was asked and found nothing to fail on.
pub const SUCCESS: i32 = 0;
/// The work failed (an input could not be read, a collection stopped) or found what it was
/// asked to fail on (`compare --fail-on regression`, `tasks lint` problems).
pub const FAILURE: i32 = 1;
/// Bad usage: clap's own code for a command line it refuses, and `compare`'s for inputs it
/// cannot compare.
pub const USAGE: i32 = 2;
/// Stopped by a second Ctrl-C (128 + SIGINT, as shells report it).
pub const INTERRUPTED: i32 = 130;
