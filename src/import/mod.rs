//! Importing other suites' questions as callcheck tasks (SPEC §10).

pub mod bfcl;
pub mod source;
