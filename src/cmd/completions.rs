//! `callcheck completions SHELL`: the shell completion script, generated from the same clap
//! definition the binary parses with, so it never lags behind a new flag.

use crate::cli::{Cli, CompletionsOpts};
use anyhow::{Context, Result};
use clap::CommandFactory;
use std::io::Write;

/// Writes the script for `opts.shell` to stdout.
pub fn run(opts: &CompletionsOpts) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(opts.shell, &mut Cli::command(), "callcheck", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)
        .and_then(|()| out.flush())
        .context("cannot write the completion script to stdout")
}
