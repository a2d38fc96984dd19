//! One module per subcommand: each turns typed options into work and reports.

pub mod build;
pub mod builtin_tasks;
pub mod cache_dir;
pub mod check;
pub mod collect;
pub mod compare;
pub mod completions;
pub mod demo;
pub mod exit;
pub mod export;
pub mod import;
pub mod mock;
pub mod plan;
pub mod tasks;
