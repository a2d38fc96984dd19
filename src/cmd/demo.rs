//! `callcheck demo`: the whole product offline — the in-repo mock server on an ephemeral
//! loopback port with three scripted models served as four rows, a collection of the task corpus, a build of the
//! site. No GPU, no network. A second run resumes the collection (nothing left to ask) and
//! rebuilds the same site.

use crate::cli::DemoOpts;
use crate::collect::client::RetryPolicy;
use crate::collect::{self, Options};
use crate::mock::{self, MockConfig, MockState};
use crate::pipeline::Inputs;
use anyhow::{Context, Result, bail};
use std::path::Path;

/// The demo's models: (row name, served model id on the mock, streamed, what it is).
const ROWS: [(&str, &str, bool, &str); 4] = [
    (
        "mock-good",
        "mock-good",
        false,
        "near-perfect: a failure now and then",
    ),
    (
        "mock-good-stream",
        "mock-good",
        true,
        "the same model streamed: the mock's streaming path drops every parallel call after the first and the {} of parameterless calls (server bugs; the build compares it with mock-good)",
    ),
    (
        "mock-sloppy",
        "mock-sloppy",
        false,
        "about half its samples fail, across every label; behind a server that refuses a history with arguments that are not JSON, as vLLM does",
    ),
    (
        "mock-flaky-stream",
        "mock-flaky",
        true,
        "streamed, behind a server with transport faults",
    ),
];

/// The demo's models config: four rows on the mock, one per scripted model and `mock-good`
/// streamed too. The mock decides what each served model does (see `MockConfig::builtin`).
pub fn demo_config(base_url: &str) -> String {
    let mut toml = String::from(
        "# callcheck demo: three scripted models on the in-repo mock server, four rows.\n",
    );
    for (name, model, stream, what) in ROWS {
        toml.push_str(&format!(
            r#"
# {what}
[[model]]
name = "{name}"
base_url = "{base_url}"
model = "{model}"
stream = {stream}
concurrency = 16
timeout_secs = 30
[model.params]
temperature = 0.7
max_tokens = 1024
seed = 1
"#
        ));
    }
    toml
}

pub fn run(o: &DemoOpts) -> Result<()> {
    let tasks = load_corpus(o)?;
    // What the build at the end would refuse is refused before anything is collected: runs/
    // inside the site, or a --out that is not a site a build wrote (SPEC §12).
    if crate::pipeline::owned::within(&o.corpus.runs, &o.out) {
        bail!(
            "--runs {} is inside --out {}: a build replaces --out, so the runs must lie outside it",
            o.corpus.runs.display(),
            o.out.display()
        );
    }
    crate::pipeline::owned::inspect(&o.out)?;
    let (report, rounds) = collect_on_mock(o, tasks)?;
    let all = std::iter::once(("", &report)).chain(rounds.iter().map(|(w, r)| (*w, r)));
    for (what, report) in all {
        if !o.quiet {
            eprint!("{what}{}", crate::term::escape_lines(&report.render()));
        }
        if report.interrupted {
            bail!("interrupted: run `callcheck demo` again to resume");
        }
        if let Some(f) = &report.fatal {
            bail!("collection stopped: {f}");
        }
    }

    let build = Inputs {
        tasks: o.corpus.tasks.clone(),
        runs: o.corpus.runs.clone(),
        out: o.out.clone(),
        interval: Default::default(),
        reliable_at: Default::default(),
        previous: None,
        // The demo writes runs/ and site/ only: no cache folder beside them.
        cache: None,
        compare: Vec::new(),
        baseline: None,
        allow_empty: false,
        site_url: None,
    };
    crate::cmd::build::summarise(&build)?;
    let index = o.out.join("index.html");
    let shown = std::fs::canonicalize(&index).unwrap_or(index);
    println!("The demo site is at {}", shown.display());
    println!("Open it in a browser: file://{}", shown.display());
    println!(
        "or serve it: python3 -m http.server -d {} 8000",
        display(&o.out)
    );
    Ok(())
}

/// The task corpus the demo collects; written to ./tasks first when callcheck was installed
/// without a checkout (a wheel, a container), where the build after the collection reads it
/// too.
fn load_corpus(o: &DemoOpts) -> Result<Vec<crate::task::Task>> {
    if o.corpus.tasks == Path::new("tasks")
        && std::fs::symlink_metadata(&o.corpus.tasks)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        let n = super::builtin_tasks::extract(&o.corpus.tasks)?;
        eprintln!("demo: no tasks/ here: wrote callcheck's own corpus ({n} tasks) to tasks/");
    }
    // The demo is nothing without the corpus: say so before starting anything.
    let tasks = crate::task::load(&o.corpus.tasks).map_err(|e| {
        anyhow::anyhow!(
            "{e}\nthe demo collects the task corpus at {}: run it from the repository's root, or pass --tasks DIR",
            o.corpus.tasks.display()
        )
    })?;
    if tasks.is_empty() {
        bail!("no tasks in {}: pass --tasks DIR", o.corpus.tasks.display());
    }
    Ok(tasks)
}

/// The first round and the follow-up rounds after it (each with the words that introduce its
/// summary), collected from the mock on an ephemeral loopback port, stopped by Ctrl-C.
fn collect_on_mock(
    o: &DemoOpts,
    tasks: Vec<crate::task::Task>,
) -> Result<(collect::Report, Vec<(&'static str, collect::Report)>)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let collected = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .context("cannot listen on 127.0.0.1")?;
        let handle = mock::serve(MockState::new(MockConfig::builtin(), tasks), listener)?;
        eprintln!("demo: mock server on {}", handle.base_url());
        let opts = first_round(o, &handle.base_url());
        let (tx, _rx) = tokio::sync::watch::channel(false);
        let signal_tx = tx.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                let _ = signal_tx.send(true);
            }
        });
        let report = collect::collect(&opts, tx.clone()).await;
        // Then the follow-up rounds (SPEC §11), one after the other while nothing stopped.
        let mut rounds = Vec::new();
        if matches!(&report, Ok(r) if !r.interrupted && r.fatal.is_none()) {
            for (what, round) in follow_up_rounds(&opts) {
                let r = collect::collect(&round, tx.clone()).await?;
                let stopped = r.interrupted || r.fatal.is_some();
                rounds.push((what, r));
                if stopped {
                    break;
                }
            }
        }
        handle.shutdown().await;
        report.map(|r| (r, rounds))
    })?;
    rt.shutdown_background();
    Ok(collected)
}

/// The demo's first round: the corpus from the demo's rows on the mock at `base_url`.
fn first_round(o: &DemoOpts, base_url: &str) -> Options {
    Options {
        config: "demo.toml (in memory)".into(),
        config_text: Some(demo_config(base_url)),
        tasks: o.corpus.tasks.clone(),
        runs: o.corpus.runs.clone(),
        k: o.k,
        allow_anecdote: false,
        models: None,
        only: None,
        shard: None,
        jobs: None,
        retry: RetryPolicy {
            base_ms: 20,
            ..RetryPolicy::default()
        },
        retry_errors: false,
        preflight: true,
        verbose: false,
        quiet: o.quiet,
        feedback: None,
        review: false,
        history: crate::runs::History::AsProduced,
    }
}

/// The demo's follow-up rounds after the first (SPEC §11), each with the words that introduce
/// its summary: feedback in every style for every row, as produced; the same again sanitised
/// for the row whose server refuses broken histories, so both histories sit side by side; and
/// a review round (HiTEC-ICL's second round) for a good row and a sloppy one.
fn follow_up_rounds(first: &Options) -> Vec<(&'static str, Options)> {
    use crate::runs::{FeedbackStyle, History};
    let feedback = Some(FeedbackStyle::ALL.to_vec());
    vec![
        (
            "feedback round: ",
            Options {
                feedback: feedback.clone(),
                ..first.clone()
            },
        ),
        (
            "feedback round, sanitised history: ",
            Options {
                feedback,
                history: History::Sanitised,
                models: Some(vec!["mock-sloppy".into()]),
                ..first.clone()
            },
        ),
        (
            "review round: ",
            Options {
                review: true,
                models: Some(vec!["mock-good".into(), "mock-sloppy".into()]),
                ..first.clone()
            },
        ),
    ]
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_demo_config_parses_into_its_four_rows() {
        let text = super::demo_config("http://127.0.0.1:9/v1");
        let c = crate::collect::config::parse("demo.toml".as_ref(), &text).unwrap();
        let rows: Vec<(&str, &str, bool)> = c
            .models
            .iter()
            .map(|m| (m.name.as_str(), m.model.as_str(), m.stream))
            .collect();
        assert_eq!(
            rows,
            [
                ("mock-good", "mock-good", false),
                ("mock-good-stream", "mock-good", true),
                ("mock-sloppy", "mock-sloppy", false),
                ("mock-flaky-stream", "mock-flaky", true)
            ]
        );
    }
}
