//! The command line (SPEC §7), parsed once into typed options.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "callcheck",
    version,
    about = "Measures how reliably models emit tool calls and structured output on the wire."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Score one transcript and print the verdict as JSON.
    Check(CheckOpts),
    /// Re-score every transcript under runs/ and render the static site (never touches the network).
    Build(BuildOpts),
    /// Check or list the task corpus.
    Tasks {
        #[command(subcommand)]
        command: TasksCommand,
    },
}

#[derive(Debug, Args)]
pub struct CheckOpts {
    /// The task file.
    #[arg(long)]
    pub task: PathBuf,
    /// The response: a JSON body, or an SSE stream (`.sse`, or sniffed from its first bytes).
    #[arg(long)]
    pub response: PathBuf,
    /// The request that was sent (gives max_tokens and the tools as sent).
    #[arg(long)]
    pub request: Option<PathBuf>,
    /// The sample's meta.json (gives the HTTP status).
    #[arg(long)]
    pub meta: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BuildOpts {
    /// The task corpus: a folder of task files (or one file).
    #[arg(long, default_value = "tasks")]
    pub tasks: PathBuf,
    /// The runs/ tree written by collect.
    #[arg(long, default_value = "runs")]
    pub runs: PathBuf,
    /// Where the site goes. Built in a temporary folder beside it and swapped into place.
    #[arg(long, default_value = "site")]
    pub out: PathBuf,
    /// The 95 % binomial interval shown with every rate.
    #[arg(long, value_enum, default_value_t = IntervalKind::Wilson)]
    pub interval: IntervalKind,
}

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Check every task: schemas compile, gold calls pass their own checks, ids are unique.
    Lint(TasksOpts),
    /// Print the corpus's coverage: tag × count, as a markdown table.
    List(TasksOpts),
}

#[derive(Debug, Args)]
pub struct TasksOpts {
    /// A task file or a folder of them.
    #[arg(long, default_value = "tasks")]
    pub tasks: PathBuf,
}

/// Which binomial interval to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum IntervalKind {
    #[default]
    Wilson,
    ClopperPearson,
}
