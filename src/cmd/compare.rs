//! `callcheck compare A B | --baseline PATH [--fail-on regression]` (SPEC §9): the per-tag
//! table of two rows, or of every row against a baseline collection, in the terminal; with
//! `--fail-on regression`, a CI gate. Also what `build --compare/--baseline` uses to find its
//! pairs and read a baseline. Never touches the network.
//!
//! Reading a `runs/` tree here is a small loader of its own (scan → score → aggregate) rather
//! than the build's pipeline, which renders pages as it scores; the two can share one reader
//! once the build's is a library.

use crate::cli::{CompareOpts, FailOn, IntervalKind};
use crate::report::compare::{self, Comparison, Direction, Pair, RowSettings, Side, settings_diff};
use crate::report::{self, Matrix, SampleKey, Scored, TaskInfo};
use crate::runs;
use crate::task::Task;
use crate::taxonomy::{Label, Outcome};
use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A collection read for comparing: its matrix and what each row was collected with.
#[derive(Debug, Clone)]
pub struct Collection {
    /// Where it was read from, for messages and pages.
    pub source: String,
    pub matrix: Matrix,
    /// Per row; empty for a baseline read from a samples.csv (it records no settings).
    pub rows: BTreeMap<String, RowSettings>,
}

/// The task infos of a corpus (what aggregation and comparison need).
pub fn infos(tasks: &[Task]) -> Vec<TaskInfo> {
    tasks.iter().map(TaskInfo::of).collect()
}

/// Reads and scores a `runs/` tree with the current checkers. Runs of tasks that are not in the
/// corpus and samples that cannot be read are left out (counted in the warning).
pub fn load_runs(root: &Path, tasks: &[Task], kind: IntervalKind) -> Result<Collection> {
    if !root.is_dir() {
        bail!("no runs folder at {}", root.display());
    }
    let by_id: BTreeMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let scan = runs::scan(root);
    let mut rows: BTreeMap<String, RowSettings> = BTreeMap::new();
    let mut jobs = Vec::new();
    let mut left_out = scan.skipped.len();
    for r in &scan.runs {
        let Some(task) = by_id.get(r.task_id.as_str()) else {
            left_out += 1;
            continue;
        };
        rows.entry(r.model.clone()).or_insert_with(|| RowSettings {
            entry: (*r.cell.model).clone(),
            server: (*r.cell.server).clone(),
        });
        for s in &r.samples {
            jobs.push((r, *task, s.as_str()));
        }
    }
    let scored: Vec<Option<Scored>> = jobs
        .par_iter()
        .map(|(r, task, sample)| {
            // The build's own read and score stages, so a baseline is scored exactly as a build
            // scores its runs.
            let files = r.read_sample(sample).ok()?;
            let parsed = crate::build::read::parse_sample(r, sample, files);
            let task_changed = r.cell.task.sha256 != task.sha256;
            Some(crate::build::score::score_sample(task, task_changed, &parsed).1)
        })
        .collect();
    left_out += scored.iter().filter(|s| s.is_none()).count();
    if left_out > 0 {
        eprintln!(
            "note: {left_out} run folder(s) or sample(s) under {} were not read (unreadable, or a task not in the corpus); `callcheck build` lists them",
            root.display()
        );
    }
    Ok(Collection {
        source: root.display().to_string(),
        matrix: report::aggregate(scored.into_iter().flatten().collect(), infos(tasks), kind),
        rows,
    })
}

/// Reads a published site's `data/samples.csv` (or the per-model files it is split into): each
/// sample's outcome as that build scored it.
pub fn load_samples_csvs(
    paths: &[PathBuf],
    tasks: &[Task],
    kind: IntervalKind,
) -> Result<Collection> {
    let mut samples = Vec::new();
    for p in paths {
        samples.extend(read_samples_csv(p)?);
    }
    let source = match paths {
        [one] => one.display().to_string(),
        _ => paths
            .first()
            .and_then(|p| p.parent())
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
    };
    Ok(Collection {
        source,
        matrix: report::aggregate(samples, infos(tasks), kind),
        rows: BTreeMap::new(),
    })
}

/// One samples.csv file's rows, as bare samples (outcome only).
fn read_samples_csv(path: &Path) -> Result<Vec<Scored>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    // A samples.csv is a row per sample; bound what is read from a file the user pointed at.
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, 4 << 30), &mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut r = csv::ReaderBuilder::new().from_reader(bytes.as_slice());
    let headers = r
        .headers()
        .with_context(|| format!("{}: not a CSV file", path.display()))?
        .clone();
    let col = |name: &str| {
        headers.iter().position(|h| h == name).with_context(|| {
            format!(
                "{}: no {name:?} column: pass a callcheck site's data/samples.csv, the site folder, or a runs/ folder",
                path.display()
            )
        })
    };
    let (cm, ct, cr, cs, co, cl) = (
        col("model")?,
        col("task")?,
        col("run")?,
        col("sample")?,
        col("outcome")?,
        col("label")?,
    );
    let mut samples = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let rec = rec.with_context(|| format!("{}: row {}", path.display(), i + 2))?;
        let get = |c: usize| rec.get(c).unwrap_or("").to_string();
        let outcome = match get(co).as_str() {
            "pass" => Outcome::Pass,
            "error" => Outcome::Error,
            "fail" => match Label::parse(&get(cl)) {
                Some(l) => Outcome::Fail(l),
                None => bail!(
                    "{}: row {}: {:?} is not a label",
                    path.display(),
                    i + 2,
                    get(cl)
                ),
            },
            other => bail!(
                "{}: row {}: outcome {other:?} is not pass, fail or error",
                path.display(),
                i + 2
            ),
        };
        // samples.csv does not carry the answer, so no two baseline answers are compared.
        let key = SampleKey {
            model: get(cm),
            task: get(ct),
            run: get(cr),
            sample: get(cs),
        };
        samples.push(Scored::bare(key, outcome));
    }
    Ok(samples)
}

/// Reads a baseline: a `runs/` tree, a site folder (its `data/samples.csv`, whole or split by
/// model) or a samples.csv.
pub fn load_baseline(path: &Path, tasks: &[Task], kind: IntervalKind) -> Result<Collection> {
    let csvs: Vec<PathBuf> = if path.is_dir() {
        let in_site = crate::site::export::site_samples_csvs(path);
        if in_site.is_empty() {
            return load_runs(path, tasks, kind);
        }
        in_site
    } else if path.is_file() {
        vec![path.to_path_buf()]
    } else {
        bail!(
            "--baseline {}: no such file or folder (pass a runs/ folder, a site folder or its data/samples.csv)",
            path.display()
        );
    };
    load_samples_csvs(&csvs, tasks, kind)
}

/// What each row of a build was collected with: the first model entry and server its runs
/// recorded.
pub fn row_settings(
    info: &BTreeMap<String, crate::site::ModelInfo>,
) -> BTreeMap<String, RowSettings> {
    info.iter()
        .map(|(name, i)| {
            (
                name.clone(),
                RowSettings {
                    entry: i.entries.first().cloned().unwrap_or_default(),
                    server: i.servers.first().cloned().unwrap_or_default(),
                },
            )
        })
        .collect()
}

/// Parses `--compare A:B` values.
pub fn parse_pairs(values: &[String]) -> Result<Vec<(String, String)>> {
    values
        .iter()
        .map(|v| match v.split_once(':') {
            Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_string(), b.to_string())),
            _ => bail!("--compare {v:?}: expected two row names as A:B"),
        })
        .collect()
}

/// The comparisons a build shows: every pair of rows of the collection (§9), then every row
/// against the same-named row of the baseline. Holm's correction is applied over all of them.
/// A `--compare` row that has no samples is an error naming it.
pub fn comparisons(
    current: &Matrix,
    rows: &BTreeMap<String, RowSettings>,
    explicit: &[(String, String)],
    baseline: Option<&Collection>,
    tasks: &[TaskInfo],
) -> Result<Vec<Comparison>> {
    let known = |r: &str| current.models.iter().any(|m| m.name == r);
    for (a, b) in explicit {
        for r in [a, b] {
            if !known(r) {
                bail!(
                    "{a}:{b}: no row named {r:?} in this collection (rows: {})",
                    current
                        .models
                        .iter()
                        .map(|m| m.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
    }
    // Rows with samples only: `model_info` and the matrix agree on that.
    let rows: BTreeMap<String, RowSettings> = current
        .models
        .iter()
        .map(|m| {
            (
                m.name.clone(),
                rows.get(&m.name).cloned().unwrap_or_default(),
            )
        })
        .collect();
    let mut out: Vec<Comparison> = compare::pairs(&rows, explicit)
        .iter()
        .map(|p: &Pair| {
            compare::compare(
                Side {
                    matrix: current,
                    row: &p.a,
                    linked: true,
                },
                Side {
                    matrix: current,
                    row: &p.b,
                    linked: true,
                },
                tasks,
                p.page(),
                p.why,
                settings_diff(rows.get(&p.a), rows.get(&p.b)),
            )
        })
        .collect();
    if let Some(base) = baseline {
        for m in &current.models {
            if !base.matrix.models.iter().any(|b| b.name == m.name) {
                continue;
            }
            let mut c = compare::compare(
                Side {
                    matrix: &base.matrix,
                    row: &m.name,
                    linked: false,
                },
                Side {
                    matrix: current,
                    row: &m.name,
                    linked: true,
                },
                tasks,
                format!("compare/baseline/{}.html", m.name),
                "baseline",
                settings_diff(base.rows.get(&m.name), rows.get(&m.name)),
            );
            c.a = format!("{} (baseline)", m.name);
            out.push(c);
        }
    }
    compare::correct(&mut out);
    Ok(out)
}

/// Signed points with one decimal: `−8.5`.
fn points(x: f64) -> String {
    let v = (x * 1000.0).round() / 10.0;
    if v == 0.0 {
        "0.0".into()
    } else {
        format!("{v:+.1}")
    }
}

/// The per-tag table of one comparison, for the terminal.
pub fn table(c: &Comparison) -> String {
    let mut out = format!(
        "A = {}, B = {} (compared because: {}); B − A in percentage points with its 95 % interval; Holm p over every pooled comparison shown\n",
        c.a,
        c.b,
        if c.why == "--compare" {
            "asked for"
        } else {
            &c.why
        },
    );
    if !c.settings_known {
        out.push_str(
            "  settings that differ: not recorded (a samples.csv baseline holds outcomes only)\n",
        );
    } else if c.settings.is_empty() {
        out.push_str("  settings that differ: none recorded\n");
    } else {
        for s in &c.settings {
            let short = |v: &str| {
                let one: String = v.split_whitespace().collect::<Vec<_>>().join(" ");
                if one.chars().count() > 40 {
                    format!("{}…", one.chars().take(39).collect::<String>())
                } else {
                    one
                }
            };
            out.push_str(&format!(
                "  differs: {}: {} → {}\n",
                s.setting,
                short(&s.a),
                short(&s.b)
            ));
        }
    }
    let width = c
        .pooled_rows()
        .map(|r| r.scope.chars().count())
        .max()
        .unwrap_or(7)
        .max(7);
    out.push_str(&format!(
        "  {:<width$}  {:>5}  {:>7}  {:>7}  {:>24}  {:<27}  {:>6}\n",
        "scope", "tasks", "A", "B", "B − A [95 %]", "verdict", "Holm p"
    ));
    for r in c.pooled_rows() {
        let p = &r.pooled;
        let diff = format!(
            "{} [{}, {}]",
            points(p.difference),
            points(p.interval.lower),
            points(p.interval.upper)
        );
        out.push_str(&format!(
            "  {:<width$}  {:>5}  {:>6.1}%  {:>6.1}%  {:>24}  {:<27}  {:>6.4}{}\n",
            r.scope,
            p.tasks,
            p.a_rate * 100.0,
            p.b_rate * 100.0,
            diff,
            r.direction.as_str(),
            r.holm_p,
            if r.regression() { "  REGRESSION" } else { "" }
        ));
    }
    if !c.labels.is_empty() {
        let gained: Vec<String> = c
            .labels
            .iter()
            .filter(|l| l.b > l.a)
            .map(|l| format!("{} {} ({} → {})", l.b - l.a, l.label.as_str(), l.a, l.b))
            .collect();
        let lost: Vec<String> = c
            .labels
            .iter()
            .filter(|l| l.b < l.a)
            .map(|l| format!("{} {} ({} → {})", l.a - l.b, l.label.as_str(), l.a, l.b))
            .collect();
        if !gained.is_empty() {
            out.push_str(&format!("  B gained: {}\n", gained.join(", ")));
        }
        if !lost.is_empty() {
            out.push_str(&format!("  B lost: {}\n", lost.join(", ")));
        }
    }
    let worse_cells = c
        .cells
        .iter()
        .filter(|x| x.direction == Direction::Worse)
        .count();
    let better_cells = c
        .cells
        .iter()
        .filter(|x| x.direction == Direction::Better)
        .count();
    out.push_str(&format!(
        "  per task ({} compared, Newcombe interval, uncorrected): {worse_cells} worse, {better_cells} better\n",
        c.compared_cells()
    ));
    out
}

/// Runs the command; returns the exit code (0 fine, 1 a regression under `--fail-on`).
/// Errors are usage errors or unreadable inputs, which `main` maps to exit code 2.
pub fn run(o: &CompareOpts) -> Result<i32> {
    let explicit = match (&o.a, &o.b, &o.baseline) {
        (Some(a), Some(b), None) => vec![(a.clone(), b.clone())],
        (None, None, Some(_)) => Vec::new(),
        (_, _, Some(_)) => bail!("give either two rows (compare A B) or --baseline PATH, not both"),
        _ => bail!("give two rows to compare (compare A B) or --baseline PATH"),
    };
    let tasks = crate::task::load(&o.tasks)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot load the tasks from {}", o.tasks.display()))?;
    let current = load_runs(&o.runs, &tasks, IntervalKind::Wilson)
        .map_err(|e| anyhow::anyhow!("{e:#} (pass --runs, or run `callcheck collect` first)"))?;
    let baseline = match &o.baseline {
        Some(p) => Some(load_baseline(p, &tasks, IntervalKind::Wilson)?),
        None => None,
    };
    let infos = infos(&tasks);
    let mut all = comparisons(
        &current.matrix,
        &current.rows,
        &explicit,
        baseline.as_ref(),
        &infos,
    )?;
    // `compare A B` shows that pair only (the build shows every pair); Holm then runs over the
    // comparisons shown, which is the family the gate decides on.
    if let Some((a, b)) = explicit.first() {
        all.retain(|c| c.why == "--compare" && &c.a_row == a && &c.b_row == b);
    } else {
        all.retain(|c| c.why == "baseline");
        if all.is_empty() {
            bail!(
                "no row of {} is also in the baseline {}",
                o.runs.display(),
                baseline.as_ref().map_or("", |b| b.source.as_str())
            );
        }
    }
    let family = compare::correct(&mut all);
    for c in &all {
        // Settings and row names come from servers and runs: shown, never obeyed.
        println!("{}", crate::term::escape_lines(&table(c)));
    }
    let regressions: Vec<String> = all
        .iter()
        .flat_map(|c| {
            c.pooled_rows()
                .filter(|r| r.regression())
                .map(move |r| format!("{} {}", c.b, r.scope))
        })
        .collect();
    println!(
        "{family} pooled comparison{} (overall and per tag, the task as the unit), Holm-corrected at {} %: {}",
        if family == 1 { "" } else { "s" },
        (compare::ALPHA * 100.0).round(),
        if regressions.is_empty() {
            "no significant regression".to_string()
        } else {
            format!(
                "{} significantly worse: {}",
                regressions.len(),
                regressions.join("; ")
            )
        }
    );
    Ok(match o.fail_on {
        Some(FailOn::Regression) if !regressions.is_empty() => 1,
        _ => 0,
    })
}
