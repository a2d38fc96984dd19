//! `callcheck mock`: the in-repo OpenAI-compatible mock server, on 127.0.0.1 until Ctrl-C.

use crate::cli::MockOpts;
use crate::mock::{self, MockConfig, MockState};
use anyhow::{Context, Result};
use std::io::Write;

pub fn run(o: &MockOpts) -> Result<()> {
    let config = match &o.config {
        Some(p) => MockConfig::load(p)?,
        None => MockConfig::builtin(),
    };
    if o.print_config {
        print!("{}", config.to_toml());
        return Ok(());
    }
    let (tasks, warning) = mock::load_tasks(&o.corpus.tasks)?;
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    let n_tasks = tasks.len();
    let mut state = MockState::new(config.clone(), tasks);
    if let Some(log) = &o.log {
        state = state
            .with_log(log)
            .with_context(|| format!("cannot open the log {}", log.display()))?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", o.port))
            .await
            .with_context(|| format!("cannot listen on 127.0.0.1:{}", o.port))?;
        let handle = mock::serve(state, listener)?;
        // The first line is machine-read (tests, scripts): keep its shape.
        // Printing must not kill the server when nobody reads stdout any more.
        let mut out = std::io::stdout();
        let _ = writeln!(out, "callcheck mock listening on {}", handle.base_url());
        let _ = writeln!(out, "models: {}; {n_tasks} tasks", mock::describe(&config));
        let _ = out.flush();
        tokio::signal::ctrl_c()
            .await
            .context("cannot wait for Ctrl-C")?;
        handle.shutdown().await;
        Ok::<(), anyhow::Error>(())
    })
}
