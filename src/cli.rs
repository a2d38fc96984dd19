//! The command line (SPEC §7), parsed once into typed options.

use crate::stats::IntervalKind;
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
    /// Export scored transcripts for other tools (failures as training data).
    Export {
        #[command(subcommand)]
        command: ExportCommand,
    },
    /// Convert another suite's questions into task files (SPEC §10).
    Import {
        #[command(subcommand)]
        command: ImportCommand,
    },
    /// Did B help or hurt against A: the per-tag table of two rows, or of every row against a
    /// baseline collection (exit 1 with --fail-on regression when one is significantly worse).
    Compare(CompareOpts),
    /// Before collecting: what the gate will be able to see for a config, its tasks and k — the
    /// drop each tag detects, the k from which one broken task is caught, the k a drop needs.
    /// Sends nothing.
    Plan(PlanOpts),
    /// Print a shell completion script (e.g. `callcheck completions bash > ~/.local/share/bash-completion/completions/callcheck`).
    Completions(CompletionsOpts),
}

#[derive(Debug, Args)]
pub struct CompletionsOpts {
    /// The shell the script is for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct CompareOpts {
    #[command(flatten)]
    pub corpus: CorpusArgs,
    /// The baseline row (A).
    #[arg(value_name = "A")]
    pub a: Option<String>,
    /// The row compared with it (B).
    #[arg(value_name = "B")]
    pub b: Option<String>,
    /// Compare every row with the same-named row of this collection instead: a runs/ folder, a
    /// site folder or its data/samples.csv.
    #[arg(long, value_name = "PATH")]
    pub baseline: Option<PathBuf>,
    /// Exit 1 when a tag, the overall rate, the transport-error rate or a single task is
    /// significantly worse (corrected over the gate's family), or something is unmeasured or
    /// missing.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub fail_on: Option<FailOn>,
    /// Tasks A has and B does not are listed but do not fail the gate.
    #[arg(long)]
    pub allow_missing: bool,
}

#[derive(Debug, Args)]
pub struct PlanOpts {
    /// The models config (TOML, `[[model]]` entries) collect will ask.
    #[arg(long, default_value = "callcheck.toml")]
    pub config: PathBuf,
    /// The task corpus collect will ask.
    #[arg(long, default_value = "tasks")]
    pub tasks: PathBuf,
    /// Samples per cell collect will take.
    #[arg(long, default_value_t = 3)]
    pub k: u32,
    /// Only these models (names from the config, comma-separated), as collect --models.
    #[arg(long, value_delimiter = ',')]
    pub models: Option<Vec<String>>,
    /// Only tasks whose id matches this glob, as collect --only.
    #[arg(long, value_name = "TASK-GLOB")]
    pub only: Option<String>,
    /// Plan the gate of `compare --baseline` (every row against its same-named baseline row,
    /// one family) instead of the pairs the config forms.
    #[arg(long)]
    pub baseline: bool,
    /// Also print the k each row needs to detect a drop of this many points (e.g. 20).
    #[arg(long, value_name = "POINTS")]
    pub detect: Option<f64>,
}

/// What fails `callcheck compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// A tag, the overall rate, the transport-error rate or a task significantly worse after
    /// the family's correction; a task B could not score; a task of A missing from B.
    Regression,
}

#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// Labelled negatives and gold positives as JSON Lines for TRL's KTO or DPO trainers.
    Preference(PreferenceOpts),
}

#[derive(Debug, Args)]
pub struct PreferenceOpts {
    #[command(flatten)]
    pub corpus: CorpusArgs,
    /// kto: one line per example (prompt, completion, label); dpo: one line per negative, paired
    /// with the same model's passing answer to its feedback or review round when there is one,
    /// else with the task's gold reply, and one per correct call a review broke, paired with
    /// that correct answer (prompt, chosen, rejected; `callcheck.chosen` says which). Both
    /// carry `tools` and `callcheck`.
    #[arg(long, value_enum)]
    pub format: PreferenceFormat,
    /// Real failures from runs/, synthetic ones from the corruption families, or both.
    #[arg(long, value_enum, default_value_t = PreferenceSource::Real)]
    pub source: PreferenceSource,
    /// Only these model rows (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub models: Option<Vec<String>>,
    /// Only negatives with these labels (comma-separated, e.g. escaping_error,truncation).
    #[arg(long, value_delimiter = ',')]
    pub labels: Option<Vec<String>>,
    /// At most N negatives per label, chosen by a hash of their content (deterministic).
    /// Positives are not capped.
    #[arg(long, value_name = "N")]
    pub max_per_label: Option<usize>,
    /// Keep every failing sample, even one whose reply repeats another of its cell (by default
    /// each distinct failing reply of a model × task cell is written once).
    #[arg(long)]
    pub keep_repeats: bool,
    /// The JSON Lines file to write (replaced atomically).
    #[arg(long, value_name = "FILE.jsonl")]
    pub out: PathBuf,
}

/// The trainer layout of `export preference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PreferenceFormat {
    Kto,
    Dpo,
}

/// Where `export preference` takes its negatives from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PreferenceSource {
    Real,
    Synthetic,
    Both,
}

#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// The Berkeley Function Calling Leaderboard's single-turn AST categories.
    Bfcl(ImportBfclOpts),
}

#[derive(Debug, Args)]
pub struct ImportBfclOpts {
    /// The bfcl-eval wheel (`pip download --no-deps bfcl-eval`), an extracted `bfcl_eval/data`
    /// folder, or a checkout of BFCL's repository.
    #[arg(long)]
    pub from: PathBuf,
    /// Where the task files go (one folder per category).
    #[arg(long, default_value = "tasks/bfcl")]
    pub out: PathBuf,
    /// Only these categories (comma-separated, BFCL's names: simple_python, live_multiple…).
    /// BFCL tasks an earlier import left in --out that this one does not produce (other
    /// categories included) are removed, and listed.
    #[arg(long, value_delimiter = ',')]
    pub categories: Option<Vec<String>>,
}

#[derive(Debug, Args)]
pub struct DemoOpts {
    #[command(flatten)]
    pub corpus: CorpusArgs,
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
    #[command(flatten)]
    pub corpus: CorpusArgs,
    /// The models config (TOML, `[[model]]` entries).
    #[arg(long, default_value = "callcheck.toml")]
    pub config: PathBuf,
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
    /// Retries per sample for failures before the model could answer (connection, 429, 5xx;
    /// a follow-up's HTTP 500 is a refusal, not retried). A sample that outlives timeout_secs
    /// is kept as callcheck's timeout, never asked again.
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
    /// Print every preflight request on its own line (by default, one line per model).
    #[arg(long, short)]
    pub verbose: bool,
    /// The feedback round (SPEC §11) instead of first-round samples: for each failed sample,
    /// one follow-up per style that it has none of yet (error, checklist, retry; all three when
    /// the flag is given alone).
    #[arg(long, value_name = "STYLE,…", value_parser = feedback_style, value_delimiter = ',',
          num_args = 0..=1, default_missing_value = "error,checklist,retry")]
    pub feedback: Option<Vec<crate::runs::FeedbackStyle>>,
    /// The review round (SPEC §11, HiTEC-ICL's second round) instead of first-round samples:
    /// after every first-round sample that got an answer, passes included, one request with
    /// the local checklist of the offered tools asking for the final call. `checklist` is the
    /// one review style.
    #[arg(long, value_name = "STYLE", value_parser = ["checklist"], num_args = 0..=1,
          default_missing_value = "checklist")]
    pub review: Option<String>,
    /// How a follow-up (feedback or review) carries the model's answer back: `as-produced`
    /// (the arguments as the model wrote them, what OpenAI's SDK, LangChain and pydantic-ai
    /// send) or `sanitised` (arguments that are not valid JSON replaced with `{}`, the
    /// original quoted in the feedback).
    #[arg(long, value_name = "HISTORY", value_parser = feedback_history, default_value = "as-produced")]
    pub feedback_history: crate::runs::History,
}

/// A history mode by its name in `cell.json` (SPEC §11).
fn feedback_history(s: &str) -> Result<crate::runs::History, String> {
    crate::runs::History::ALL
        .into_iter()
        .find(|h| h.as_str() == s.trim())
        .ok_or_else(|| format!("{s:?} is not a history (as-produced, sanitised)"))
}

/// A feedback style by its name in `cell.json` (SPEC §11).
fn feedback_style(s: &str) -> Result<crate::runs::FeedbackStyle, String> {
    crate::runs::FeedbackStyle::ALL
        .into_iter()
        .find(|f| f.as_str() == s.trim())
        .ok_or_else(|| format!("{s:?} is not a feedback style (error, checklist, retry)"))
}

#[derive(Debug, Args)]
pub struct MockOpts {
    #[command(flatten)]
    pub corpus: TasksOpts,
    /// The port on 127.0.0.1 (0 picks a free one; the address is printed).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// The mock's config (TOML); built-in models when absent.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Append one JSON line per response sent (model, task, sample, attempt, sha256 of the bytes).
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Print the built-in config (or the one given) as TOML and exit.
    #[arg(long)]
    pub print_config: bool,
}

#[derive(Debug, Args)]
pub struct CheckOpts {
    #[command(flatten)]
    pub corpus: TasksOpts,
    /// The task: a task file, or a task id (as every page shows it) looked up in --tasks.
    #[arg(long)]
    pub task: PathBuf,
    /// The response: a JSON body, or an SSE stream (`.sse`, or sniffed from its first bytes).
    #[arg(long)]
    pub response: PathBuf,
    /// The request that was sent (gives max_tokens and the tools as sent). Optional context: a
    /// file that is not a JSON object is ignored with a warning, and the task's tools are used.
    #[arg(long)]
    pub request: Option<PathBuf>,
    /// The sample's meta.json (gives the HTTP status).
    #[arg(long)]
    pub meta: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct BuildOpts {
    #[command(flatten)]
    pub corpus: CorpusArgs,
    /// Where the site goes. Built in a temporary folder beside it and swapped into place.
    #[arg(long, default_value = "site")]
    pub out: PathBuf,
    /// The 95 % binomial interval shown with every rate.
    #[arg(long, value_enum, default_value_t = IntervalKind::Wilson)]
    pub interval: IntervalKind,
    /// The rate a verdict must reach to read `reliable` (interval lower bound ≥ P; upper bound
    /// < P is `unreliable`; `broken` stays below 0.5), strictly between 0 and 1.
    #[arg(long, value_name = "P", default_value_t = crate::stats::Thresholds::default(),
          value_parser = crate::stats::Thresholds::parse)]
    pub reliable_at: crate::stats::Thresholds,
    /// The previous build's data/samples.csv, to list what changed (default: the one in --out).
    #[arg(long, value_name = "SAMPLES-CSV")]
    pub previous: Option<PathBuf>,
    /// Where build keeps each sample's verdict between builds, so a rebuild re-scores and
    /// rewrites only what changed [default: ./.callcheck-cache, marked with a CACHEDIR.TAG and a
    /// .gitignore]. Outside --out. A finished run is read again only when its folder or samples/
    /// changed: after editing a transcript inside one, touch the run's folder.
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    pub cache: Option<PathBuf>,
    /// Build without a cache: every sample is scored and every page written (the same site).
    #[arg(long)]
    pub no_cache: bool,
    /// Also compare row B against row A (repeatable); rows serving the same model id and
    /// `variant_of` rows are compared without it.
    #[arg(long, value_name = "A:B")]
    pub compare: Vec<String>,
    /// Compare every row with the same-named row of this collection: a runs/ folder, a site
    /// folder or its data/samples.csv.
    #[arg(long, value_name = "PATH")]
    pub baseline: Option<PathBuf>,
    /// Build even when runs/ holds no sample (an empty site); without it that is an error.
    #[arg(long)]
    pub allow_empty: bool,
    /// The address the site is published at (e.g. https://you.github.io/conformance/): shared
    /// links' cards then carry their page's full address (og:url). The site's own links stay
    /// relative.
    #[arg(long, value_name = "URL")]
    pub site_url: Option<String>,
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

/// The task corpus, for the commands that read tasks only.
#[derive(Debug, Clone, Args)]
pub struct TasksOpts {
    /// The task corpus: a folder of task files (or one file).
    #[arg(long, default_value = "tasks")]
    pub tasks: PathBuf,
}

/// The task corpus and the runs collected for it, as every command that reads or writes both
/// takes them.
#[derive(Debug, Clone, Args)]
pub struct CorpusArgs {
    /// The task corpus: a folder of task files (or one file).
    #[arg(long, default_value = "tasks")]
    pub tasks: PathBuf,
    /// The runs/ tree collect writes and build reads.
    #[arg(long, default_value = "runs")]
    pub runs: PathBuf,
}
