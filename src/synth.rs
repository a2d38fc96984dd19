//! Synthetic runs/ trees, written the way collect writes them (SPEC §4, [`crate::runs::CellInfo`]),
//! for build's benchmarks and tests: realistic bytes (vLLM-like JSON bodies and SSE streams from
//! [`crate::reply`]), every label (from [`crate::corrupt`]), transport errors and cut streams.
//! Deterministic: the same options write the same files.

use crate::corrupt::{corruptions, gold};
use crate::reply::{Reply, render_json, render_sse};
use crate::request::{Asking, chat_request};
use crate::runs::{CellInfo, FORMAT_VERSION, TaskRef};
use crate::task::Task;
use crate::taxonomy::Label;
use anyhow::{Context, Result};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The token budget every synthetic request gives (a truncation reaches it).
pub const MAX_TOKENS: u64 = 512;

/// What one sample's wire exchange looks like.
#[derive(Debug, Clone)]
pub enum Wire {
    /// A complete reply, JSON or SSE.
    Reply(Reply),
    /// An HTTP error status with a body.
    Status(u16, String),
    /// A stream cut after `keep` bytes (no `[DONE]`, no finish_reason).
    Cut(Reply, usize),
}

/// A model row as collect records it.
#[derive(Debug, Clone)]
pub struct ModelRow {
    /// The row name (a path segment).
    pub name: String,
    pub served: String,
    pub stream: bool,
}

impl ModelRow {
    /// The model entry written to cell.json: redacted, naming the key's variable only.
    pub fn entry(&self) -> Value {
        json!({
            "name": self.name,
            "base_url": "http://127.0.0.1:8000/v1",
            "model": self.served,
            "api_key_env": "VLLM_API_KEY",
            "stream": self.stream,
            "temperature": 0.7,
            "max_tokens": MAX_TOKENS,
            "concurrency": 4,
        })
    }

    pub fn asking(&self) -> Asking {
        let mut a = Asking {
            model: self.served.clone(),
            stream: self.stream,
            ..Asking::default()
        };
        a.params.insert("temperature".into(), json!(0.7));
        a.params.insert("max_tokens".into(), json!(MAX_TOKENS));
        a
    }
}

/// One run directory to write.
pub struct RunSpec<'a> {
    pub model: &'a ModelRow,
    pub task: &'a Task,
    /// What cell.json records as the task's sha256 (pass another one to simulate a task edited
    /// after collection).
    pub task_sha256: &'a str,
    pub run_id: &'a str,
    pub server: Value,
    /// Seeds the response ids and stream chunking.
    pub seed: u64,
}

/// Writes one finished run directory: cell.json and `samples/NNN/{request.json,
/// response.json|response.sse, meta.json}`, one sample per wire exchange.
pub fn write_run(runs: &Path, spec: RunSpec, wires: &[Wire]) -> Result<PathBuf> {
    let RunSpec {
        model,
        task,
        task_sha256,
        run_id,
        server,
        seed,
    } = spec;
    let dir = runs.join(&model.name).join(&task.id).join(run_id);
    let asking = model.asking();
    let request = chat_request(task, &asking);
    let request_bytes = serde_json::to_vec_pretty(&request)?;
    for (i, w) in wires.iter().enumerate() {
        let sdir = dir.join("samples").join(format!("{i:03}"));
        std::fs::create_dir_all(&sdir).with_context(|| format!("creating {}", sdir.display()))?;
        std::fs::write(sdir.join("request.json"), &request_bytes)?;
        let s = seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
        let ttfb = 80.0 + (s % 400) as f64;
        let (status, body, error) = match w {
            Wire::Reply(r) => (
                200,
                if model.stream {
                    render_sse(r, &model.served, 90, true, s)
                } else {
                    render_json(r, &model.served, 90, s)
                },
                None,
            ),
            Wire::Status(code, msg) => (
                *code,
                serde_json::to_vec(
                    &json!({"error": {"message": msg, "type": "server_error", "code": code}}),
                )?,
                Some(format!("HTTP {code} after 3 attempts")),
            ),
            Wire::Cut(r, keep) => {
                let full = render_sse(r, &model.served, 90, true, s);
                let keep = (*keep).min(full.len());
                (
                    200,
                    full[..keep].to_vec(),
                    Some("connection closed before the stream ended".to_string()),
                )
            }
        };
        let streamed = model.stream || matches!(w, Wire::Cut(..));
        let name = if streamed {
            "response.sse"
        } else {
            "response.json"
        };
        std::fs::write(sdir.join(name), &body)?;
        let mut meta = json!({
            "status": status,
            "headers": {"content-type": if streamed {"text/event-stream"} else {"application/json"}, "server": "uvicorn"},
            "attempts": [{"status": status, "backoff_ms": 0, "ttfb_ms": ttfb}],
            "ttfb_ms": ttfb,
            "total_ms": ttfb + 250.0 + (body.len() / 40) as f64,
            "streamed": streamed,
        });
        if let Some(e) = error {
            meta["error"] = json!(e);
        }
        std::fs::write(sdir.join("meta.json"), serde_json::to_vec_pretty(&meta)?)?;
    }
    let cell = CellInfo {
        format_version: FORMAT_VERSION,
        callcheck_version: env!("CARGO_PKG_VERSION").to_string(),
        model: model.entry().into(),
        task: TaskRef {
            id: task.id.clone(),
            sha256: task_sha256.to_string(),
        },
        k: wires.len() as u32,
        run_id: run_id.to_string(),
        server: server.into(),
        started: "2026-01-01T00:00:00Z".into(),
        ended: "2026-01-01T00:05:00Z".into(),
        kind: Default::default(),
        feedback: None,
    };
    std::fs::write(dir.join("cell.json"), serde_json::to_vec_pretty(&cell)?)?;
    Ok(dir)
}

/// The labels a task can be failed with, each with its corrupted replies.
pub fn failure_menu(task: &Task) -> Vec<(Label, Vec<Reply>)> {
    Label::ALL
        .iter()
        .filter_map(|l| {
            let list = corruptions(task, *l, MAX_TOKENS).ok()?;
            (!list.is_empty()).then(|| (*l, list.into_iter().map(|c| c.reply).collect()))
        })
        .collect()
}

/// The server object a synthetic run records.
pub fn server_info(served: &str) -> Value {
    json!({"models": [served], "version": "0.11.0", "kind": "vllm"})
}

/// Options of a synthetic tree.
#[derive(Debug, Clone)]
pub struct SynthOpts {
    /// Total samples wanted (rounded up to whole cells).
    pub samples: usize,
    pub models: usize,
    pub k: usize,
    pub seed: u64,
    /// How many model ids the rows serve: row `i` serves id `i mod served`, so rows sharing an
    /// id are paired for comparison (SPEC §9); `None`, each row its own id (no comparison).
    pub served: Option<usize>,
}

/// Writes `out/tasks/` (copies of the template tasks, renamed `<id>-NNN` as needed) and
/// `out/runs/`. Returns the number of samples written.
pub fn generate(out: &Path, templates: &[(Task, Vec<u8>)], o: &SynthOpts) -> Result<usize> {
    anyhow::ensure!(!templates.is_empty(), "no template tasks");
    let per_task = o.models * o.k;
    let n_tasks = o.samples.div_ceil(per_task.max(1)).max(1);
    let tasks_dir = out.join("tasks");
    std::fs::create_dir_all(&tasks_dir)?;
    let mut tasks = Vec::new();
    for j in 0..n_tasks {
        let (t, bytes) = &templates[j % templates.len()];
        let mut v: Value = serde_json::from_slice(bytes)?;
        let id = format!("{}-{:03}", t.id, j / templates.len());
        v["id"] = json!(id);
        let text = serde_json::to_vec_pretty(&v)?;
        let file = tasks_dir.join(format!("{id}.json"));
        std::fs::write(&file, &text)?;
        let task = crate::task::parse_task(&file, &text)
            .map_err(|e| anyhow::anyhow!("{}", crate::task::TaskErrors(e)))?;
        tasks.push((task, j % templates.len()));
    }
    let menus: Vec<Vec<(Label, Vec<Reply>)>> =
        templates.iter().map(|(t, _)| failure_menu(t)).collect();
    let golds: Vec<Reply> = templates.iter().map(|(t, _)| gold(t)).collect();
    let models: Vec<ModelRow> = (0..o.models)
        .map(|i| ModelRow {
            name: format!("model-{i:02}"),
            served: format!(
                "org/served-model-{:02}",
                o.served.map_or(i, |s| i % s.max(1))
            ),
            stream: i % 2 == 1,
        })
        .collect();
    let runs = out.join("runs");
    let cells: Vec<(usize, usize)> = (0..o.models)
        .flat_map(|m| (0..tasks.len()).map(move |t| (m, t)))
        .collect();
    cells.par_iter().try_for_each(|&(m, t)| -> Result<()> {
        let model = &models[m];
        let (task, tpl) = &tasks[t];
        let seed = o.seed ^ ((m as u64) << 32) ^ t as u64;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        // Models range from strong to weak; each task has its own difficulty.
        let strength = 0.97 - 0.6 * (m as f64 / o.models.max(1) as f64);
        let difficulty = rng.random_range(0.0..0.3);
        let p_pass = (strength - difficulty).clamp(0.05, 0.99);
        let menu = &menus[*tpl];
        let wires: Vec<Wire> = (0..o.k)
            .map(|_| {
                let roll: f64 = rng.random_range(0.0..1.0);
                if roll < 0.01 {
                    Wire::Status(503, "the model is overloaded".into())
                } else if roll < 0.02 && model.stream {
                    Wire::Cut(golds[*tpl].clone(), 300)
                } else if roll < 0.02 + p_pass || menu.is_empty() {
                    Wire::Reply(golds[*tpl].clone())
                } else {
                    let (_, replies) = &menu[rng.random_range(0..menu.len())];
                    Wire::Reply(replies[rng.random_range(0..replies.len())].clone())
                }
            })
            .collect();
        write_run(
            &runs,
            RunSpec {
                model,
                task,
                task_sha256: &task.sha256,
                run_id: "r0001",
                server: server_info(&model.served),
                seed,
            },
            &wires,
        )?;
        Ok(())
    })?;
    Ok(cells.len() * o.k)
}

/// The first corrupted reply for `label` on `task` (the fixture picks by label, not at random).
fn failing(task: &Task, label: Label) -> Result<Wire> {
    let list = corruptions(task, label, MAX_TOKENS)
        .map_err(|e| anyhow::anyhow!("{}: no {label} corruption: {e}", task.id))?;
    let first = list
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("{}: no {label} corruption", task.id))?;
    Ok(Wire::Reply(first.reply))
}

/// One run of the fixture tree: which row (alpha, beta, gamma), which task, and its samples.
struct FixtureRun<'t> {
    row: usize,
    task: &'t Task,
    run_id: &'static str,
    /// The task's sha256 as `cell.json` records it, when not the task's own (a run collected
    /// before the task file was last edited).
    task_sha256: Option<&'static str>,
    wires: Vec<Wire>,
}

/// The fixture's runs, row by row, in the order they are written (each takes the next seed).
fn fixture_runs<'t>(find: &dyn Fn(&str) -> Result<&'t Task>) -> Result<Vec<FixtureRun<'t>>> {
    use Label::*;
    let (cc, wx) = (find("convert-currency")?, find("weather-parallel-3")?);
    let (hi, so) = (find("no-tool-greeting")?, find("contact-card")?);
    let g = |t: &Task| Wire::Reply(gold(t));
    const STALE: &str = "0000000000000000000000000000000000000000000000000000000000000000";
    let run = |row, task, run_id, wires| FixtureRun {
        row,
        task,
        run_id,
        task_sha256: None,
        wires,
    };
    let (alpha, beta, gamma) = (0, 1, 2);
    Ok(vec![
        run(
            alpha,
            cc,
            "r0001",
            vec![g(cc), g(cc), failing(cc, TypeCoercion)?],
        ),
        run(alpha, cc, "r0002", vec![g(cc), failing(cc, MalformedJson)?]),
        run(alpha, wx, "r0001", vec![g(wx), g(wx), g(wx)]),
        run(alpha, hi, "r0001", vec![g(hi), g(hi), g(hi)]),
        run(alpha, so, "r0001", vec![g(so), g(so), g(so)]),
        run(
            beta,
            cc,
            "r0001",
            vec![
                failing(cc, HallucinatedParam)?,
                failing(cc, MissingRequired)?,
                Wire::Cut(gold(cc), 300),
            ],
        ),
        run(
            beta,
            wx,
            "r0001",
            vec![
                failing(wx, ParallelCollapse)?,
                failing(wx, Truncation)?,
                g(wx),
            ],
        ),
        run(beta, hi, "r0001", vec![failing(hi, SpuriousCall)?; 5]),
        // Collected before the task file was last edited.
        FixtureRun {
            task_sha256: Some(STALE),
            ..run(
                beta,
                so,
                "r0001",
                vec![
                    failing(so, MalformedJson)?,
                    failing(so, EscapingError)?,
                    failing(so, SchemaViolation)?,
                ],
            )
        },
        run(
            gamma,
            cc,
            "r0001",
            vec![
                failing(cc, WrongTool)?,
                failing(cc, NoCall)?,
                Wire::Status(503, "the model is overloaded".into()),
            ],
        ),
        run(
            gamma,
            wx,
            "r0001",
            vec![failing(wx, EscapingError)?, g(wx), g(wx)],
        ),
        run(gamma, hi, "r0001", vec![g(hi), g(hi)]),
    ])
}

/// Writes the small fixture tree the snapshot tests read (`tests/fixtures/runs/`), for the
/// tasks of `tests/fixtures/runs-tasks/`: three models, every label, a transport error, a cut
/// stream, a cell with two runs, a cell with too few samples, a task edited after collection,
/// and three things build must skip or ignore (a retired task, a newer format, an unfinished
/// write).
pub fn write_fixture(runs: &Path, tasks: &[Task]) -> Result<()> {
    let find = |id: &str| {
        tasks
            .iter()
            .find(|t| t.id == id)
            .ok_or_else(|| anyhow::anyhow!("fixture task {id} missing"))
    };
    let cc = find("convert-currency")?;
    let row = |name: &str, stream: bool| ModelRow {
        name: name.into(),
        served: format!("org/{name}-7b-instruct"),
        stream,
    };
    let rows = [row("alpha", false), row("beta", true), row("gamma", false)];
    let [alpha, beta, _] = &rows;
    let g = |t: &Task| Wire::Reply(gold(t));
    let mut seed = 0;
    let mut run =
        |m: &ModelRow, t: &Task, id: &str, sha: &str, wires: Vec<Wire>| -> Result<PathBuf> {
            seed += 1;
            write_run(
                runs,
                RunSpec {
                    model: m,
                    task: t,
                    task_sha256: sha,
                    run_id: id,
                    server: server_info(&m.served),
                    seed,
                },
                &wires,
            )
        };
    for r in fixture_runs(&find)? {
        let sha = r.task_sha256.unwrap_or(&r.task.sha256);
        run(&rows[r.row], r.task, r.run_id, sha, r.wires)?;
    }

    // A run for a task that is no longer in the corpus: skipped, named.
    let mut retired = cc.clone();
    retired.id = "retired-task".into();
    run(
        alpha,
        &retired,
        "r0001",
        &cc.sha256,
        vec![g(cc), g(cc), g(cc)],
    )?;
    // A run written by a newer callcheck: skipped, named.
    let newer = run(beta, cc, "r0002", &cc.sha256, vec![g(cc)])?;
    let cell_path = newer.join("cell.json");
    let mut cell: Value = serde_json::from_slice(&crate::runs::read_bounded(
        &cell_path,
        crate::runs::MAX_CELL_FILE,
    )?)?;
    cell["format_version"] = json!(FORMAT_VERSION + 1);
    std::fs::write(&cell_path, serde_json::to_vec_pretty(&cell)?)?;
    // An unfinished write: ignored silently.
    let partial = runs
        .join("gamma")
        .join("convert-currency")
        .join(".tmp-r0002");
    std::fs::create_dir_all(partial.join("samples").join("000"))?;
    std::fs::write(
        partial.join("samples").join("000").join("request.json"),
        "{}",
    )?;
    Ok(())
}
