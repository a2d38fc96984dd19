//! Issue 29's acceptance on the scripted mock (SPEC §11): the real mock on loopback serves two
//! models whose characters are known — `fixer` fails with set probabilities per label and, sent
//! its failure back, fixes exactly the labels it is told to with a set probability per style;
//! `steady` fails only with `no_call` — and the real `collect`, `collect --feedback
//! error,checklist,retry` and `build` run against it. Then:
//!
//! - every measure of `routing.json` (`n`, `passes`) equals the count the test makes itself from
//!   `samples.csv` (and, for repair, from the runs with the library's repair);
//! - every measured rate's interval holds the truth that follows from the mock's config;
//! - every figure of `routing.html`'s table is the one in `routing.json`;
//! - the `by-label` and `feedback` policies' expected success equal a direct simulation of
//!   those routers over the same samples.

use crate::support::collect::{BIN, models_config, ok, start_mock};
use callcheck::runs::RunKind;
use callcheck::stats::interval::{Interval, percent, show};
use callcheck::taxonomy::{Label, Outcome, Retry};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The corpus tasks the test collects: tasks where some of the labels below do not apply, so
/// per-task pass probabilities differ.
const TASKS: [&str; 6] = [
    "basic/basic-weather-city.json",
    "basic/basic-calendar-event.json",
    "types/types-thermostat.json",
    "types/types-numeric-strings.json",
    "similar/similar-user-lookup.json",
    "nocall/nocall-small-talk.json",
];
const K_FIXER: usize = 20;
const K_STEADY: usize = 8;
const STYLES: [&str; 3] = ["error", "checklist", "retry"];

/// `fixer`'s first-round failures: P(the mock tries the label) per sample, where the task
/// allows it.
const FIXER_FAILS: [(Label, f64); 5] = [
    (Label::TypeCoercion, 0.2),
    (Label::HallucinatedParam, 0.15),
    (Label::MalformedJson, 0.15),
    (Label::WrongTool, 0.15),
    (Label::NoCall, 0.1),
];
const STEADY_FAILS: [(Label, f64); 1] = [(Label::NoCall, 0.3)];

/// P(fixer's follow-up passes | the parent's label, the style), as the config below says.
fn fix_probability(label: Label, style: &str) -> f64 {
    match (style, label) {
        ("retry", _) => 0.25,
        ("checklist", Label::TypeCoercion) => 0.8,
        ("checklist", Label::HallucinatedParam) => 0.9,
        ("checklist", Label::MalformedJson) => 0.3,
        ("checklist", Label::WrongTool) => 0.1,
        ("checklist", Label::NoCall) => 0.3,
        (_, Label::TypeCoercion) => 0.9,
        (_, Label::HallucinatedParam) => 0.7,
        (_, Label::MalformedJson) => 0.6,
        (_, Label::WrongTool) => 0.2,
        (_, Label::NoCall) => 0.5,
        _ => 0.0,
    }
}

const MOCK: &str = r#"
seed = 29
[[model]]
name = "fixer"
[model.labels]
type_coercion = 0.2
hallucinated_param = 0.15
malformed_json = 0.15
wrong_tool = 0.15
no_call = 0.1
[model.feedback]
fix = 0.0
labels = { type_coercion = 0.9, hallucinated_param = 0.7, malformed_json = 0.6, wrong_tool = 0.2, no_call = 0.5 }
[model.feedback.styles.checklist]
labels = { type_coercion = 0.8, hallucinated_param = 0.9, malformed_json = 0.3, wrong_tool = 0.1, no_call = 0.3 }
[model.feedback.styles.retry]
fix = 0.25

[[model]]
name = "steady"
[model.labels]
no_call = 0.3
"#;

/// One row of `samples.csv`, as the test reads it.
#[derive(Debug, Clone)]
struct Row {
    link: String,
    model: String,
    task: String,
    outcome: String,
    label: Option<Label>,
    round: u8,
    parent: String,
    style: String,
    /// A router could tell the sample failed (SPEC §11).
    visible: bool,
}

fn samples_csv(site: &Path) -> Vec<Row> {
    let mut r = csv::Reader::from_path(site.join("data/samples.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|x| x == name).unwrap();
    let visible = col("visible");
    let (link, model, task, outcome, label, round, parent, style) = (
        col("permalink"),
        col("model"),
        col("task"),
        col("outcome"),
        col("label"),
        col("round"),
        col("parent"),
        col("feedback"),
    );
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            Row {
                link: rec[link].to_string(),
                model: rec[model].to_string(),
                task: rec[task].to_string(),
                outcome: rec[outcome].to_string(),
                label: Label::parse(&rec[label]),
                round: rec[round].parse().unwrap(),
                parent: rec[parent].to_string(),
                style: rec[style].to_string(),
                visible: &rec[visible] == "true",
            }
        })
        .collect()
}

/// P(a sample of a model with `fails` passes `task`): the mock tries label L with its
/// probability and gives the gold reply when the task has no corruption for L.
fn pass_probability(task: &callcheck::task::Task, fails: &[(Label, f64)]) -> f64 {
    1.0 - label_probabilities(task, fails).values().sum::<f64>()
}

/// P(a sample fails with L) per label, on `task`.
fn label_probabilities(
    task: &callcheck::task::Task,
    fails: &[(Label, f64)],
) -> BTreeMap<Label, f64> {
    fails
        .iter()
        .filter(|(l, _)| {
            callcheck::corrupt::corruptions(task, *l, 512).is_ok_and(|c| !c.is_empty())
        })
        .map(|&(l, p)| (l, p))
        .collect()
}

/// The share of the mock's corruptions for `label` on `task` that a router could see (SPEC
/// §11): the mock draws one of them uniformly, so this is P(visible | a failure with the label)
/// on the task, from the config alone. Each corruption is rendered as the mock renders it and
/// scored against the request collect sends.
fn visible_share(task: &callcheck::task::Task, label: Label) -> f64 {
    let Ok(list) = callcheck::corrupt::corruptions(task, label, 512) else {
        return 0.0;
    };
    if list.is_empty() {
        return 0.0;
    }
    let mut request = serde_json::json!({
        "model": "m", "messages": task.messages, "tools": task.tools_json, "max_tokens": 512,
    });
    if let Some(tc) = task
        .request
        .get("tool_choice")
        .or(task.tool_choice.as_ref())
    {
        request["tool_choice"] = tc.clone();
    }
    let request = std::sync::Arc::new(request);
    let seen = list
        .iter()
        .filter(|c| {
            let t = callcheck::transcript::Transcript {
                request: Some(request.clone()),
                body: callcheck::reply::render_json(&c.reply, "m", 100, 1),
                streamed: false,
                meta: None,
            };
            callcheck::score::score(task, &t).visible
        })
        .count();
    seen as f64 / list.len() as f64
}

fn measure(m: &Value) -> (u64, u64, Option<Interval>) {
    let iv = &m["interval"];
    let interval = iv["lower"].as_f64().map(|lower| Interval {
        lower,
        upper: iv["upper"].as_f64().unwrap(),
    });
    (
        m["n"].as_u64().unwrap(),
        m["passes"].as_u64().unwrap(),
        interval,
    )
}

/// A unit of a figure as the page keeps it on one line: no-break spaces, a word joiner after
/// an en dash.
fn unit(s: &str) -> String {
    s.replace(' ', "\u{a0}").replace('–', "–\u{2060}")
}

/// The page's text for a rate and its interval (`src/site/routing.rs`).
fn rate_text(rate: f64, iv: &Interval) -> String {
    format!("{} {}", unit(&percent(rate)), unit(&show(iv)))
}

/// The page's text for a measure, from `routing.json`'s figures.
fn page_text(m: &Value) -> String {
    let (n, passes, iv) = measure(m);
    match (iv, m["rate"].as_f64()) {
        (Some(iv), Some(rate)) if n > 0 => {
            format!("{passes}/{n}\u{a0}=\u{a0}{}", rate_text(rate, &iv))
        }
        _ => "–".into(),
    }
}

fn run(args: &[&str], cfg: &Path, tasks: &Path, runs: &Path) {
    let out = Command::new(BIN)
        .arg("collect")
        .arg("--config")
        .arg(cfg)
        .arg("--tasks")
        .arg(tasks)
        .arg("--runs")
        .arg(runs)
        .args(args)
        .output()
        .unwrap();
    ok(&out);
}

#[test]
fn routing_on_the_scripted_mock_measures_the_truth_and_simulates_the_router() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks_dir = tmp.path().join("tasks");
    std::fs::create_dir_all(&tasks_dir).unwrap();
    let corpus = crate::support::collect::corpus();
    for t in TASKS {
        let name = Path::new(t).file_name().unwrap();
        std::fs::copy(corpus.join(t), tasks_dir.join(name)).unwrap();
    }
    let tasks = callcheck::task::load(&tasks_dir).unwrap();
    let task = |id: &str| tasks.iter().find(|t| t.id == id).unwrap();
    let mock = start_mock(tmp.path(), Some(MOCK), &tasks_dir);
    let cfg = tmp.path().join("callcheck.toml");
    let rows = [("fixer", "fixer", false, 4), ("steady", "steady", false, 4)];
    std::fs::write(&cfg, models_config(&mock.url, &rows, "")).unwrap();
    let runs = tmp.path().join("runs");
    let k_fixer = K_FIXER.to_string();
    let k_steady = K_STEADY.to_string();
    run(
        &["--models", "fixer", "--k", &k_fixer],
        &cfg,
        &tasks_dir,
        &runs,
    );
    run(
        &["--models", "steady", "--k", &k_steady],
        &cfg,
        &tasks_dir,
        &runs,
    );
    run(
        &["--models", "fixer", "--feedback", "error,checklist,retry"],
        &cfg,
        &tasks_dir,
        &runs,
    );
    let site = tmp.path().join("site");
    let out = Command::new(BIN)
        .arg("build")
        .arg("--tasks")
        .arg(&tasks_dir)
        .arg("--runs")
        .arg(&runs)
        .arg("--out")
        .arg(&site)
        .arg("--no-cache")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // What the samples say, counted here.
    let csv = samples_csv(&site);
    assert!(
        csv.iter().all(|r| r.outcome != "error"),
        "the mock has no faults"
    );
    let first = |model: &str, task: &str| -> Vec<&Row> {
        csv.iter()
            .filter(|r| r.round == 0 && r.model == model && r.task == task)
            .collect()
    };
    for t in &tasks {
        assert_eq!(first("fixer", &t.id).len(), K_FIXER, "{}", t.id);
        assert_eq!(first("steady", &t.id).len(), K_STEADY, "{}", t.id);
    }
    let by_link: BTreeMap<&str, &Row> = csv.iter().map(|r| (r.link.as_str(), r)).collect();
    // Each failure's follow-ups, per style: passed or not.
    let mut children: BTreeMap<(&str, &str), Vec<bool>> = BTreeMap::new();
    for r in csv.iter().filter(|r| r.round == 1) {
        assert_eq!(
            r.model, "fixer",
            "steady is never followed up: it has no feedback run"
        );
        children
            .entry((r.parent.as_str(), r.style.as_str()))
            .or_default()
            .push(r.outcome == "pass");
    }
    // The repair of each failure, with the library's repair on the raw sample.
    let mut repaired: BTreeMap<&str, bool> = BTreeMap::new();
    for r in callcheck::runs::scan(&runs).runs {
        if r.cell.kind != RunKind::Samples || r.model != "fixer" {
            continue;
        }
        for s in &r.samples {
            let link = format!("t/{}/{}/{}/{s}.html", r.model, r.task_id, r.run_id);
            let row = by_link[link.as_str()];
            let t = r.read_sample(s).unwrap().transcript();
            let verdict = callcheck::score::score(task(&r.task_id), &t);
            let fixed = callcheck::score::mend::repaired(task(&r.task_id), &t, &verdict)
                .is_some_and(|v| v.outcome == Outcome::Pass);
            repaired.insert(row.link.as_str(), fixed);
        }
    }
    for (parent, style) in children.keys() {
        assert!(
            by_link[parent].label.is_some(),
            "a follow-up of a passing sample: {parent} ({style})"
        );
    }
    // collect --feedback follows up visible failures only: one follow-up per style each, and
    // none for a silent one (no router learns of it).
    for r in csv
        .iter()
        .filter(|r| r.round == 0 && r.model == "fixer" && r.label.is_some())
    {
        for st in STYLES {
            assert_eq!(
                children.get(&(r.link.as_str(), st)).map(Vec::len),
                r.visible.then_some(1),
                "{} in style {st}",
                r.link
            );
        }
    }

    let routing: Value =
        serde_json::from_str(&std::fs::read_to_string(site.join("data/routing.json")).unwrap())
            .unwrap();
    let fixer = routing["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["model"] == "fixer")
        .unwrap();
    let page = std::fs::read_to_string(site.join("routing.html")).unwrap();
    let section = page
        .split(r#"<h3 id="m-fixer">"#)
        .nth(1)
        .and_then(|s| s.split("<h3 ").next())
        .unwrap();
    let mut misses = Vec::new();
    let mut checked = 0;
    let mut check = |what: String, m: &Value, truth: f64| {
        let (_, _, iv) = measure(m);
        let iv = iv.unwrap_or_else(|| panic!("{what}: no interval"));
        println!(
            "{what:<34} {:>9}  truth {truth:.3}  in [{:.3}, {:.3}]",
            format!("{}/{}", m["passes"], m["n"]),
            iv.lower,
            iv.upper
        );
        checked += 1;
        if !(iv.lower <= truth && truth <= iv.upper) {
            misses.push(format!("{what}: truth {truth:.4} outside {iv:?}"));
        }
    };

    let labels = fixer["labels"].as_array().unwrap();
    let measured: Vec<&str> = labels
        .iter()
        .map(|l| l["label"].as_str().unwrap())
        .collect();
    let want: Vec<&str> = FIXER_FAILS.iter().map(|(l, _)| l.as_str()).collect();
    let mut want_sorted: Vec<&str> = Label::ALL
        .iter()
        .map(|l| l.as_str())
        .filter(|l| want.contains(l))
        .collect();
    want_sorted.retain(|l| {
        csv.iter()
            .any(|r| r.model == "fixer" && r.round == 0 && r.label.map(Label::as_str) == Some(l))
    });
    assert_eq!(
        measured, want_sorted,
        "the labels fixer failed with, in taxonomy order"
    );

    for l in labels {
        let label = Label::parse(l["label"].as_str().unwrap()).unwrap();
        let name = label.as_str();
        // Per task: fixer's failures with the label, passes, samples; steady's passes.
        let mut counts = Vec::new();
        for t in &tasks {
            let a = first("fixer", &t.id);
            let f = a
                .iter()
                .filter(|r| r.label == Some(label) && r.visible)
                .count() as u64;
            let x = a.iter().filter(|r| r.outcome == "pass").count() as u64;
            let b = first("steady", &t.id);
            let xb = b.iter().filter(|r| r.outcome == "pass").count() as u64;
            counts.push((t, a, f, x, b.len() as u64, xb));
        }
        // Every measure follows the visible failures only; `failures` counts them all.
        let visible: u64 = counts.iter().map(|c| c.2).sum();
        assert_eq!(l["visible"], visible, "{name}");
        let failures = counts
            .iter()
            .flat_map(|c| c.1.iter())
            .filter(|r| r.label == Some(label))
            .count() as u64;
        assert_eq!(l["failures"], failures, "{name}");
        // A label no router saw here has nothing measured; its intervals say nothing.
        let mut check = |what: String, m: &Value, truth: f64| {
            if visible > 0 {
                check(what, m, truth);
            }
        };
        assert_eq!(l["default"], label.retry().as_str(), "{name}");

        // The truth weighs each task by how often it fails visibly with the label (SPEC §11's
        // P(action passes | a visible failure with L), a task drawn uniformly).
        let weights: Vec<f64> = tasks
            .iter()
            .map(|t| {
                label_probabilities(t, &FIXER_FAILS)
                    .get(&label)
                    .copied()
                    .unwrap_or(0.0)
                    * visible_share(t, label)
            })
            .collect();
        let weighted = |chance: &dyn Fn(&callcheck::task::Task) -> f64| {
            let num: f64 = tasks.iter().zip(&weights).map(|(t, w)| w * chance(t)).sum();
            num / weights.iter().sum::<f64>()
        };

        // Reroll: each failure against its cell's other samples.
        let (n, p, _) = measure(&l["reroll"]);
        let want = (
            counts
                .iter()
                .map(|c| c.2 * (K_FIXER as u64 - 1))
                .sum::<u64>(),
            counts.iter().map(|c| c.2 * c.3).sum::<u64>(),
        );
        assert_eq!((n, p), want, "reroll {name}");
        check(
            format!("reroll {name}"),
            &l["reroll"],
            weighted(&|t| pass_probability(t, &FIXER_FAILS)),
        );

        // Repair: the library's repair of each failure.
        if label.retry() == Retry::Repair || l["repair"] != Value::Null {
            let (n, p, _) = measure(&l["repair"]);
            let fails: Vec<&&Row> = counts
                .iter()
                .flat_map(|c| c.1.iter().filter(|r| r.label == Some(label) && r.visible))
                .collect();
            let fixed = fails.iter().filter(|r| repaired[r.link.as_str()]).count() as u64;
            assert_eq!((n, p), (fails.len() as u64, fixed), "repair {name}");
            // The corrupter's type and extra-argument failures are exactly what the repair
            // undoes: the truth is 1.
            check(format!("repair {name}"), &l["repair"], 1.0);
        }

        // Feedback per style: the follow-ups of the label's failures.
        for st in STYLES {
            let m = &l["feedback"][format!("{st}/as-produced")];
            let kids: Vec<bool> = counts
                .iter()
                .flat_map(|c| c.1.iter().filter(|r| r.label == Some(label) && r.visible))
                .flat_map(|r| children[&(r.link.as_str(), st)].clone())
                .collect();
            let (n, p, _) = measure(m);
            assert_eq!(
                (n, p),
                (
                    kids.len() as u64,
                    kids.iter().filter(|x| **x).count() as u64
                ),
                "feedback {st} {name}"
            );
            check(
                format!("feedback {st} {name}"),
                m,
                fix_probability(label, st),
            );
        }

        // Fallback to steady: each failure against steady's samples of the task.
        let fb = &l["fallback"][0];
        assert_eq!(fb["model"], "steady");
        let (n, p, _) = measure(fb);
        let want = (
            counts.iter().map(|c| c.2 * c.4).sum::<u64>(),
            counts.iter().map(|c| c.2 * c.5).sum::<u64>(),
        );
        assert_eq!((n, p), want, "fallback {name}");
        check(
            format!("fallback {name} → steady"),
            fb,
            weighted(&|t| pass_probability(t, &STEADY_FAILS)),
        );

        // The page's row for the label shows the same figures.
        let tr = section
            .split("<tr>")
            .find(|r| r.starts_with(&format!(r#"<th><a href="labels/{name}.html">"#)))
            .unwrap_or_else(|| panic!("no row for {name} on routing.html"));
        // Each cell names its column (`<td data-l="reroll">`, for phones).
        let cells: Vec<&str> = tr
            .split("<td")
            .skip(1)
            .map(|c| c.split_once('>').unwrap().1.split("</td>").next().unwrap())
            .collect();
        let repair_text = if l["repair"].is_null() {
            "none".to_string()
        } else {
            page_text(&l["repair"])
        };
        let want_cells = vec![
            label.retry().as_str().to_string(),
            failures.to_string(),
            visible.to_string(),
            page_text(&l["reroll"]),
            repair_text,
            page_text(&l["feedback"]["error/as-produced"]),
            page_text(&l["feedback"]["checklist/as-produced"]),
            page_text(&l["feedback"]["retry/as-produced"]),
            if visible > 0 {
                format!("steady: {}", page_text(fb))
            } else {
                "–".to_string()
            },
        ];
        assert_eq!(cells, want_cells, "routing.html's row for {name}");
    }
    println!(
        "{checked} intervals checked, {} outside the truth",
        misses.len()
    );
    assert!(misses.is_empty(), "{misses:#?}");
    assert!(checked >= 20, "{checked}");

    // The routers, simulated directly over the same samples: per task, the mean over fixer's
    // samples of a pass, or after a failure the chance of its action; then the mean over tasks.
    let policy = |name: &str| {
        fixer["policies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["policy"] == name)
            .unwrap()
            .clone()
    };
    let simulate = |after: &dyn Fn(&Row, f64, f64) -> f64| -> f64 {
        let per_task: Vec<f64> = tasks
            .iter()
            .map(|t| {
                let a = first("fixer", &t.id);
                let b = first("steady", &t.id);
                let reroll =
                    a.iter().filter(|r| r.outcome == "pass").count() as f64 / (a.len() - 1) as f64;
                let fallback =
                    b.iter().filter(|r| r.outcome == "pass").count() as f64 / b.len() as f64;
                a.iter()
                    .map(|r| match r.label {
                        None => 1.0,
                        // A silent failure is final: no router acts on it.
                        Some(_) if !r.visible => 0.0,
                        Some(_) => after(r, reroll, fallback),
                    })
                    .sum::<f64>()
                    / a.len() as f64
            })
            .collect();
        per_task.iter().sum::<f64>() / per_task.len() as f64
    };
    let by_label = simulate(&|r, reroll, fallback| match r.label.map(Label::retry) {
        Some(Retry::Repair) => f64::from(u8::from(repaired[r.link.as_str()])),
        Some(Retry::Reroll) => reroll,
        _ => fallback,
    });
    let got = policy("by-label");
    assert_eq!(got["fallback_to"], "steady");
    let rate = got["success"]["rate"].as_f64().unwrap();
    println!("by-label: routing.json {rate:.4}, direct simulation {by_label:.4}");
    assert!((rate - by_label).abs() < 1e-4, "{rate} vs {by_label}");
    let feedback =
        simulate(&|r, _, _| f64::from(u8::from(children[&(r.link.as_str(), "error")][0])));
    let rate = policy("feedback")["success"]["rate"].as_f64().unwrap();
    println!("feedback: routing.json {rate:.4}, direct simulation {feedback:.4}");
    assert!((rate - feedback).abs() < 1e-4, "{rate} vs {feedback}");
    let single = simulate(&|_, _, _| 0.0);
    let rate = policy("single")["success"]["rate"].as_f64().unwrap();
    assert!((rate - single).abs() < 1e-4, "{rate} vs {single}");

    // Each policy's success against its truth over these tasks (each task weighing the same):
    // a pass, or after a visible failure with L (probability π_L · v_L on the task, v_L the
    // share of the mock's corruptions a router sees) the action's chance; a silent one stays.
    let over_tasks = |after: &dyn Fn(&callcheck::task::Task, Label, f64, f64) -> f64| {
        tasks
            .iter()
            .map(|t| {
                let p = pass_probability(t, &FIXER_FAILS);
                let q = pass_probability(t, &STEADY_FAILS);
                p + label_probabilities(t, &FIXER_FAILS)
                    .iter()
                    .map(|(l, pi)| pi * visible_share(t, *l) * after(t, *l, p, q))
                    .sum::<f64>()
            })
            .sum::<f64>()
            / tasks.len() as f64
    };
    let repairable = |l: Label| f64::from(u8::from(l.retry() == Retry::Repair));
    let truths: [(&str, f64); 6] = [
        ("single", over_tasks(&|_, _, _, _| 0.0)),
        ("reroll", over_tasks(&|_, _, p, _| p)),
        (
            "feedback",
            over_tasks(&|_, l, _, _| fix_probability(l, "error")),
        ),
        ("repair", over_tasks(&|_, l, _, _| repairable(l))),
        ("fallback", over_tasks(&|_, _, _, q| q)),
        (
            "by-label",
            over_tasks(&|_, l, p, q| match l.retry() {
                Retry::Repair => 1.0,
                Retry::Reroll => p,
                Retry::Fallback => q,
            }),
        ),
    ];
    let policies_row = page
        .split(r##"<tr><th><a href="#m-fixer">fixer</a></th>"##)
        .nth(1)
        .and_then(|s| s.split("</tr>").next())
        .unwrap();
    let mut misses = Vec::new();
    for (name, truth) in truths {
        let p = policy(name);
        let rate = p["success"]["rate"].as_f64().unwrap();
        let iv = Interval {
            lower: p["success"]["interval"]["lower"].as_f64().unwrap(),
            upper: p["success"]["interval"]["upper"].as_f64().unwrap(),
        };
        println!(
            "policy {name:<9} {rate:.3}  truth {truth:.3}  in [{:.3}, {:.3}]",
            iv.lower, iv.upper
        );
        if !(iv.lower <= truth && truth <= iv.upper) {
            misses.push(format!("policy {name}: truth {truth:.4} outside {iv:?}"));
        }
        let mut text = rate_text(rate, &iv);
        if name == "fallback" {
            text.push_str(" → steady");
        }
        assert!(
            policies_row.contains(&format!(r#"<td data-l="{name}">{text}<small>"#))
                || policies_row.contains(&format!(r#"<td data-l="{name}"><b>{text}</b><small>"#)),
            "routing.html's policy row lacks {name}: {text}\n{policies_row}"
        );
    }
    assert!(misses.is_empty(), "{misses:#?}");
}
