//! One module per subcommand: each turns typed options into work and reports.

pub mod build;
pub mod check;
pub mod collect;
pub mod compare;
pub mod demo;
pub mod export;
pub mod import;
pub mod mock;
pub mod tasks;
