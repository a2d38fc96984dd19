//! `callcheck check`: one verdict, as JSON, for one transcript.

use crate::cli::CheckOpts;
use crate::score::score;
use crate::transcript::{Meta, Transcript, looks_like_sse};
use anyhow::{Context, Result};

pub fn run(opts: &CheckOpts) -> Result<()> {
    let bytes = std::fs::read(&opts.task)
        .with_context(|| format!("cannot read the task {}", opts.task.display()))?;
    let task = crate::task::parse_task(&opts.task, &bytes).map_err(crate::task::TaskErrors)?;
    let body = std::fs::read(&opts.response)
        .with_context(|| format!("cannot read the response {}", opts.response.display()))?;
    let streamed = opts.response.extension().is_some_and(|e| e == "sse") || looks_like_sse(&body);
    let request = match &opts.request {
        Some(p) => Some(read_json(p, "request")?),
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
            request,
            body,
            streamed,
            meta,
        },
    );
    println!("{}", serde_json::to_string(&verdict.to_json())?);
    Ok(())
}

fn read_json(path: &std::path::Path, what: &str) -> Result<serde_json::Value> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("the {what} {} is not JSON", path.display()))
}
