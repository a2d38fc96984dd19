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
    /// Ask every model every task k times and record the raw exchanges under runs/.
    Collect(CollectOpts),
    /// Serve the in-repo OpenAI-compatible mock server on 127.0.0.1.
    Mock(MockOpts),
    /// The whole product offline: the mock server, a collection of the corpus, a build of the site.
    Demo(DemoOpts),
}

#[derive(Debug, Args)]
pub struct DemoOpts {
    /// The task corpus to collect.
    #[arg(long, default_value = "tasks")]
    pub tasks: PathBuf,
    /// Where runs are written (a second demo resumes what is there).
    #[arg(long, default_value = "runs")]
    pub runs: PathBuf,
    /// Where the site goes.
    #[arg(long, default_value = "site")]
    pub out: PathBuf,
    /// Samples per cell.
    #[arg(long, default_value_t = 5)]
    pub k: u32,
    /// No progress bar and no collection summary.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct CollectOpts {
    /// The models config (TOML, `[[model]]` entries).
    #[arg(long, default_value = "callcheck.toml")]
    pub config: PathBuf,
    /// A task file or a folder of them.
    #[arg(long, default_value = "tasks")]
    pub tasks: PathBuf,
    /// Where runs are written.
    #[arg(long, default_value = "runs")]
    pub runs: PathBuf,
    /// Samples per cell (model × task).
    #[arg(long, default_value_t = 3)]
    pub k: u32,
    /// Allow --k below 3 (too few samples for a rate).
    #[arg(long)]
    pub allow_anecdote: bool,
    /// Only these models (names from the config, comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub models: Option<Vec<String>>,
    /// Only tasks whose id matches this glob.
    #[arg(long, value_name = "TASK-GLOB")]
    pub only: Option<String>,
    /// Collect only part I of N (1-based) of the cells, split by a hash of model and task.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Requests in flight across all models (default: the sum of the models' concurrency).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Retries per sample for failures before the first byte of the body (transport, 429, 5xx).
    #[arg(long, default_value_t = 4)]
    pub retries: u32,
    /// The first retry's backoff ceiling in milliseconds (doubling, jittered, capped at 30 s).
    #[arg(long, default_value_t = 500)]
    pub backoff_ms: u64,
    /// Ask again for samples whose exchange failed (they no longer count towards k).
    #[arg(long)]
    pub retry_errors: bool,
    /// No progress bar and no summary (errors and preflight warnings are still printed).
    #[arg(long, short)]
    pub quiet: bool,
    /// Skip the preflight probes (models list, model id, tools in the prompt, tool_choice and
    /// streaming support) run once per model before its cells.
    #[arg(long)]
    pub no_preflight: bool,
}

#[derive(Debug, Args)]
pub struct MockOpts {
    /// The port on 127.0.0.1 (0 picks a free one; the address is printed).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// The mock's config (TOML); built-in models when absent.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The task corpus the mock recognises requests by.
    #[arg(long, default_value = "tasks")]
    pub tasks: PathBuf,
    /// Append one JSON line per response sent (model, task, sample, attempt, sha256 of the bytes).
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Print the built-in config (or the one given) as TOML and exit.
    #[arg(long)]
    pub print_config: bool,
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
    /// The previous build's data/samples.csv, to list what changed (default: the one in --out).
    #[arg(long, value_name = "SAMPLES-CSV")]
    pub previous: Option<PathBuf>,
    /// Build even when runs/ holds no sample (an empty site); without it that is an error.
    #[arg(long)]
    pub allow_empty: bool,
}

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Check every task: schemas compile, gold calls pass their own checks, ids are unique.
    Lint(TasksOpts),
    /// Print the corpus's coverage: tag × count, as a markdown table.
    List(ListOpts),
}

#[derive(Debug, Args)]
pub struct ListOpts {
    #[command(flatten)]
    pub tasks: TasksOpts,
    /// Instead of tags: for each task, how many corrupted variants each label has (the mutation
    /// test's coverage), and why the others cannot apply.
    #[arg(long)]
    pub labels: bool,
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
