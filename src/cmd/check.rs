//! `callcheck check`: one verdict, as JSON, for one transcript.

use crate::cli::CheckOpts;
use crate::score::score;
use crate::task::Task;
use crate::transcript::{Meta, Transcript, looks_like_sse};
use anyhow::{Context, Result, bail};

pub fn run(opts: &CheckOpts) -> Result<()> {
    let task = load_task(opts)?;
    // Bounded as build bounds a transcript's file, and a regular file only: `/dev/zero` or a
    // FIFO is an error that says what it is, not a read without end.
    let body = crate::fsafe::read_bounded(&opts.response, crate::runs::MAX_SAMPLE_FILE)
        .with_context(|| format!("cannot read the response {}", opts.response.display()))?;
    let streamed = opts.response.extension().is_some_and(|e| e == "sse") || looks_like_sse(&body);
    // The request is optional context (the budget, the tools as sent): one that cannot be
    // read as a JSON object is left out, and the verdict is still given.
    let request = match &opts.request {
        Some(p) => match read_json(p, "request") {
            Ok(v) if v.is_object() => Some(v),
            Ok(_) => {
                eprintln!(
                    "warning: the request {} is not a JSON object, so it was ignored: scored with the task's tools and no known token budget",
                    p.display()
                );
                None
            }
            Err(e) if p.is_file() => {
                eprintln!(
                    "warning: {e:#}, so it was ignored: scored with the task's tools and no known token budget"
                );
                None
            }
            Err(e) => return Err(e),
        },
        None => None,
    };
    let meta: Option<Meta> = match &opts.meta {
        Some(p) => Some(
            serde_json::from_value(read_json(p, "meta")?)
                .with_context(|| format!("{} is not a meta.json", p.display()))?,
        ),
        None => None,
    };
    let verdict = score(
        &task,
        &Transcript {
            request: request.map(std::sync::Arc::new),
            body,
            streamed,
            meta,
        },
    );
    // The detail quotes the model: shown, never obeyed by the terminal (SPEC §12).
    let json = serde_json::to_string(&verdict.to_json())?;
    println!("{}", crate::term::escape_json(&json));
    Ok(())
}

/// The task named by `--task`: a file when one exists at that path, else a task id looked up
/// in `--tasks`.
fn load_task(opts: &CheckOpts) -> Result<Task> {
    if opts.task.is_file() {
        let bytes = crate::fsafe::read_bounded(&opts.task, crate::task::MAX_TASK_FILE)
            .with_context(|| format!("cannot read the task {}", opts.task.display()))?;
        return crate::task::parse_task(&opts.task, &bytes)
            .map_err(|e| crate::task::TaskErrors(e).into());
    }
    let id = opts.task.to_string_lossy();
    // Something that looks like a path is reported as a missing file, not as an unknown id.
    let looks_like_path = id.contains('/') || id.contains('\\') || id.ends_with(".json");
    if looks_like_path {
        bail!(
            "cannot read the task {}: no such file (pass a task file, or a task id with --tasks)",
            opts.task.display()
        );
    }
    let tasks = crate::task::load(&opts.corpus.tasks).with_context(|| {
        format!(
            "{id:?} is not a task file, so it was looked up as a task id in {}, which does not load",
            opts.corpus.tasks.display()
        )
    })?;
    match tasks.into_iter().find(|t| t.id == id) {
        Some(t) => Ok(t),
        None => bail!(
            "no task file {id:?} and no task with the id {id:?} in {} (pass a task file, or --tasks with the corpus that holds it)",
            opts.corpus.tasks.display()
        ),
    }
}

fn read_json(path: &std::path::Path, what: &str) -> Result<serde_json::Value> {
    let bytes = crate::fsafe::read_bounded(path, crate::runs::MAX_SAMPLE_FILE)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("the {what} {} is not JSON", path.display()))
}
