//! The router's evidence measured against a known truth (SPEC §11, issue 29's acceptance): a
//! collection whose first round and feedback round are drawn with set probabilities — each
//! failure label of row `a` fixed by each feedback style with a known chance, row `b` passing
//! each task with a known chance — is built by the real binary; every measured rate in
//! `data/routing.json` is checked against the counts drawn (exactly) and against the truth
//! (within its interval), and the by-label policy's expected success against a direct
//! simulation of that router over the same samples.

use crate::support::site::{build_ok, read, repo};
use callcheck::stats::compare::SplitMix64;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

const TASKS: [&str; 3] = ["cc-1", "cc-2", "cc-3"];
/// Row `a`'s pass probability per task, and row `b`'s.
const P_A: [f64; 3] = [0.5, 0.6, 0.7];
const P_B: [f64; 3] = [0.9, 0.5, 0.8];
const K_A: usize = 40;
const K_B: usize = 20;

/// The failures row `a` makes, drawn uniformly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fail {
    TypeCoercion,
    HallucinatedParam,
    EscapingError,
    SchemaViolation,
    NoCall,
}

const FAILS: [Fail; 5] = [
    Fail::TypeCoercion,
    Fail::HallucinatedParam,
    Fail::EscapingError,
    Fail::SchemaViolation,
    Fail::NoCall,
];

impl Fail {
    fn label(self) -> &'static str {
        match self {
            Fail::TypeCoercion => "type_coercion",
            Fail::HallucinatedParam => "hallucinated_param",
            Fail::EscapingError => "escaping_error",
            Fail::SchemaViolation => "schema_violation",
            Fail::NoCall => "no_call",
        }
    }

    /// The label's mechanical repair makes the call pass (the arguments are otherwise gold).
    fn repairable(self) -> bool {
        matches!(
            self,
            Fail::TypeCoercion | Fail::HallucinatedParam | Fail::EscapingError
        )
    }

    /// SPEC §2's default action.
    fn default_action(self) -> &'static str {
        match self {
            Fail::TypeCoercion | Fail::HallucinatedParam => "repair",
            Fail::EscapingError | Fail::SchemaViolation => "reroll",
            Fail::NoCall => "fallback",
        }
    }

    /// The scripted model's chance of fixing this failure after feedback of `style`.
    fn fixed_by(self, style: &str) -> f64 {
        match (style, self) {
            ("error", Fail::TypeCoercion) => 0.9,
            ("error", Fail::HallucinatedParam) => 0.8,
            ("error", Fail::EscapingError) => 0.7,
            ("error", Fail::SchemaViolation) => 0.6,
            ("error", Fail::NoCall) => 0.3,
            ("checklist", Fail::TypeCoercion) => 0.8,
            ("checklist", Fail::HallucinatedParam) => 0.9,
            ("checklist", Fail::EscapingError) => 0.5,
            ("checklist", Fail::SchemaViolation) => 0.7,
            ("checklist", Fail::NoCall) => 0.1,
            _ => 0.3,
        }
    }
}

const STYLES: [&str; 3] = ["error", "checklist", "retry"];

/// What the model sent: the gold call, or one failure.
fn message(reply: Option<Fail>) -> Value {
    let args = match reply {
        None => r#"{"amount": 1250, "from": "EUR", "to": "JPY"}"#,
        Some(Fail::TypeCoercion) => r#"{"amount": "1250", "from": "EUR", "to": "JPY"}"#,
        Some(Fail::HallucinatedParam) => {
            r#"{"amount": 1250, "from": "EUR", "to": "JPY", "note": "today"}"#
        }
        Some(Fail::EscapingError) => r#"{'amount': 1250, 'from': 'EUR', 'to': 'JPY'}"#,
        Some(Fail::SchemaViolation) => r#"{"amount": 1250, "from": "EURO", "to": "JPY"}"#,
        Some(Fail::NoCall) => {
            return json!({"role": "assistant", "content": "About 200,000 yen, roughly."});
        }
    };
    json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": "call_0", "type": "function",
        "function": {"name": "convert_currency", "arguments": args}}]})
}

fn response(reply: Option<Fail>, tokens: u64) -> Value {
    let finish = if reply == Some(Fail::NoCall) {
        "stop"
    } else {
        "tool_calls"
    };
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": "org/m",
        "choices": [{"index": 0, "message": message(reply), "finish_reason": finish}],
        "usage": {"prompt_tokens": 50, "completion_tokens": tokens, "total_tokens": 50 + tokens},
    })
}

/// One sample: its reply and, for a feedback sample, its parent sample's folder name.
struct Sample {
    reply: Option<Fail>,
    parent: Option<String>,
}

/// Writes a finished run folder.
fn write_run(
    runs: &Path,
    task: &callcheck::task::Task,
    model: &str,
    run_id: &str,
    feedback: Option<&str>,
    samples: &[Sample],
) {
    let run = runs.join(model).join(&task.id).join(run_id);
    for (i, s) in samples.iter().enumerate() {
        let dir = run.join("samples").join(format!("{i:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        let request = json!({"model": "org/m", "messages": task.messages,
            "tools": task.tools_json, "tool_choice": task.tool_choice});
        std::fs::write(dir.join("request.json"), request.to_string()).unwrap();
        let tokens = if feedback.is_some() { 30 } else { 10 };
        std::fs::write(
            dir.join("response.json"),
            response(s.reply, tokens).to_string(),
        )
        .unwrap();
        let total = if feedback.is_some() { 300.0 } else { 100.0 };
        let mut meta = json!({"status": 200, "headers": {}, "ttfb_ms": 10.0, "total_ms": total, "streamed": false});
        if let Some(p) = &s.parent {
            meta["parent"] = json!({"run": "r0001", "sample": p});
        }
        std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    }
    let mut cell = json!({
        "format_version": 1, "callcheck_version": "0.1.0",
        "model": {"name": model, "base_url": "http://127.0.0.1:8000/v1", "model": "org/m"},
        "task": {"id": task.id, "sha256": task.sha256},
        "k": samples.len(), "run_id": run_id,
        "started": "2026-01-01T00:00:00Z", "ended": "2026-01-01T00:01:00Z",
    });
    // Row a declares a price (every run of it, follow-ups included); row b does not.
    if model == "a" {
        cell["model"]["price"] = json!({"input_per_mtok": 0.5, "output_per_mtok": 2.0});
    }
    if let Some(style) = feedback {
        cell["kind"] = json!("feedback");
        cell["feedback"] = json!({"style": style});
    }
    std::fs::write(run.join("cell.json"), cell.to_string()).unwrap();
}

/// What was drawn, for the checks.
#[derive(Default)]
struct Drawn {
    /// Per task: row a's replies, row b's passes.
    a: Vec<Vec<Option<Fail>>>,
    b_passes: Vec<usize>,
    /// Per (label, style): feedback samples and their passes.
    feedback: BTreeMap<(Fail, &'static str), (u64, u64)>,
    /// Per task and parent sample: whether its error-style child passed.
    error_child: Vec<BTreeMap<usize, bool>>,
    /// Per task and parent sample: the first style (error, checklist, retry) whose child passed.
    fixed_by: Vec<BTreeMap<usize, &'static str>>,
}

fn collection(dir: &Path) -> Drawn {
    let tasks_dir = dir.join("tasks");
    std::fs::create_dir_all(&tasks_dir).unwrap();
    let template: Value = serde_json::from_slice(
        &std::fs::read(repo().join("tests/fixtures/runs-tasks/convert-currency.json")).unwrap(),
    )
    .unwrap();
    for id in TASKS {
        let mut t = template.clone();
        t["id"] = json!(id);
        // Asked with tool_choice "required", so every failure drawn (no_call included) is one
        // a router sees (SPEC §11): this suite measures the actions; silent failures are
        // routing_mock's and the unit tests'.
        t["tool_choice"] = json!("required");
        std::fs::write(tasks_dir.join(format!("{id}.json")), t.to_string()).unwrap();
    }
    let tasks = callcheck::task::load(&tasks_dir).unwrap();
    let runs = dir.join("runs");
    let mut rng = SplitMix64::new(2029);
    let mut d = Drawn::default();
    for (t, task) in tasks.iter().enumerate() {
        let replies: Vec<Option<Fail>> = (0..K_A)
            .map(|_| {
                if rng.unit() < P_A[t] {
                    None
                } else {
                    Some(FAILS[rng.below(5) as usize])
                }
            })
            .collect();
        let first: Vec<Sample> = replies
            .iter()
            .map(|&reply| Sample {
                reply,
                parent: None,
            })
            .collect();
        write_run(&runs, task, "a", "r0001", None, &first);
        let mut error_child = BTreeMap::new();
        let mut fixed_by = BTreeMap::new();
        for style in STYLES {
            let mut children = Vec::new();
            for (i, r) in replies.iter().enumerate() {
                let Some(f) = *r else { continue };
                let pass = rng.unit() < f.fixed_by(style);
                let e = d.feedback.entry((f, style)).or_default();
                e.0 += 1;
                e.1 += u64::from(pass);
                if style == "error" {
                    error_child.insert(i, pass);
                }
                if pass {
                    fixed_by.entry(i).or_insert(style);
                }
                children.push(Sample {
                    // A failed follow-up repeats the mistake.
                    reply: if pass { None } else { Some(f) },
                    parent: Some(format!("{i:03}")),
                });
            }
            write_run(
                &runs,
                task,
                "a",
                &format!("fb-{style}"),
                Some(style),
                &children,
            );
        }
        let b: Vec<Sample> = (0..K_B)
            .map(|_| Sample {
                reply: if rng.unit() < P_B[t] {
                    None
                } else {
                    Some(Fail::NoCall)
                },
                parent: None,
            })
            .collect();
        d.b_passes
            .push(b.iter().filter(|s| s.reply.is_none()).count());
        write_run(&runs, task, "b", "r0001", None, &b);
        d.a.push(replies);
        d.error_child.push(error_child);
        d.fixed_by.push(fixed_by);
    }
    // A follow-up of a sample that passes (counted nowhere) and one of a sample that does not
    // exist (an orphan), on the first task.
    let passing = d.a[0].iter().position(Option::is_none).unwrap();
    write_run(
        &runs,
        &tasks[0],
        "a",
        "fb-stale",
        Some("error"),
        &[
            Sample {
                reply: None,
                parent: Some(format!("{passing:03}")),
            },
            Sample {
                reply: None,
                parent: Some("999".into()),
            },
        ],
    );
    d
}

fn rate_of(m: &Value) -> (u64, u64, f64, f64) {
    let iv = &m["interval"];
    (
        m["n"].as_u64().unwrap(),
        m["passes"].as_u64().unwrap(),
        iv["lower"].as_f64().unwrap(),
        iv["upper"].as_f64().unwrap(),
    )
}

fn within(what: &str, truth: f64, lower: f64, upper: f64, misses: &mut Vec<String>) {
    println!("{what}: truth {truth:.4} in [{lower:.4}, {upper:.4}]");
    if !(lower <= truth && truth <= upper) {
        misses.push(format!(
            "{what}: truth {truth:.4} outside [{lower:.4}, {upper:.4}]"
        ));
    }
}

#[test]
fn routing_json_measures_what_was_drawn_and_covers_the_truth() {
    let tmp = tempfile::tempdir().unwrap();
    let d = collection(tmp.path());
    let (tasks, runs, out) = (
        tmp.path().join("tasks"),
        tmp.path().join("runs"),
        tmp.path().join("site"),
    );
    build_ok(&tasks, &runs, &out, &[], &[]);
    let r: Value = serde_json::from_str(&read(&out, "data/routing.json")).unwrap();
    let a = r["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["model"] == "a")
        .unwrap();
    let mut misses = Vec::new();

    // Feedback samples: every drawn one counted; the stale one and the orphan counted nowhere.
    let drawn_children: u64 = d.feedback.values().map(|x| x.0).sum();
    assert_eq!(a["feedback_samples"], json!(drawn_children));
    assert_eq!(a["parent_passes"], json!(1));
    assert_eq!(a["orphans"], json!(1));

    // The first round's cells hold only first-round samples.
    let matrix: Value = serde_json::from_str(&read(&out, "data/matrix.json")).unwrap();
    for c in matrix["cells"].as_array().unwrap() {
        let k = if c["model"] == "a" { K_A } else { K_B };
        assert_eq!(c["k"], json!(k), "cell {} × {}", c["model"], c["task"]);
    }

    for f in FAILS {
        let l = a["labels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["label"] == f.label())
            .unwrap_or_else(|| panic!("no {}", f.label()));
        let fails: Vec<usize> =
            d.a.iter()
                .map(|rs| rs.iter().filter(|r| **r == Some(f)).count())
                .collect();
        let passes: Vec<usize> =
            d.a.iter()
                .map(|rs| rs.iter().filter(|r| r.is_none()).count())
                .collect();
        let failures: usize = fails.iter().sum();
        assert_eq!(l["failures"], json!(failures), "{}", f.label());
        assert_eq!(l["default"], json!(f.default_action()));
        // Reroll: each failure against its cell's other samples.
        let (n, p, lo, hi) = rate_of(&l["reroll"]);
        let want_n: usize = fails.iter().map(|x| x * (K_A - 1)).sum();
        let want_p: usize = fails.iter().zip(&passes).map(|(x, p)| x * p).sum();
        assert_eq!(
            (n, p),
            (want_n as u64, want_p as u64),
            "reroll {}",
            f.label()
        );
        let truth = fails
            .iter()
            .zip(P_A)
            .map(|(x, p)| *x as f64 * p)
            .sum::<f64>()
            / failures as f64;
        within(&format!("reroll {}", f.label()), truth, lo, hi, &mut misses);
        // Repair: every repairable failure passes after its repair; the others have none.
        if f.repairable() {
            let (n, p, lo, hi) = rate_of(&l["repair"]);
            assert_eq!(
                (n, p),
                (failures as u64, failures as u64),
                "repair {}",
                f.label()
            );
            within(&format!("repair {}", f.label()), 1.0, lo, hi, &mut misses);
        } else {
            assert_eq!(l["repair"], Value::Null, "{}", f.label());
        }
        // Feedback per style.
        for style in STYLES {
            let (n, p, lo, hi) = rate_of(&l["feedback"][format!("{style}/as-produced")]);
            let (want_n, want_p) = d.feedback[&(f, style)];
            assert_eq!((n, p), (want_n, want_p), "feedback {style} {}", f.label());
            within(
                &format!("feedback {style} {}", f.label()),
                f.fixed_by(style),
                lo,
                hi,
                &mut misses,
            );
        }
        // Fallback to b: each failure against b's samples of the same task.
        let fb = &l["fallback"][0];
        assert_eq!(fb["model"], "b");
        let (n, p, lo, hi) = rate_of(fb);
        let want_n: usize = fails.iter().map(|x| x * K_B).sum();
        let want_p: usize = fails.iter().zip(&d.b_passes).map(|(x, p)| x * p).sum();
        assert_eq!(
            (n, p),
            (want_n as u64, want_p as u64),
            "fallback {}",
            f.label()
        );
        let truth = fails
            .iter()
            .zip(P_B)
            .map(|(x, p)| *x as f64 * p)
            .sum::<f64>()
            / failures as f64;
        within(
            &format!("fallback {}", f.label()),
            truth,
            lo,
            hi,
            &mut misses,
        );
    }

    // The by-label router, simulated directly over the same samples: a pass is a pass; after a
    // failure, its label's default action: repair (these repairs always pass), reroll (the
    // cell's other samples), fallback (b's samples of the task).
    let policy = |name: &str| {
        a["policies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["policy"] == name)
            .unwrap()
            .clone()
    };
    let mut by_task = Vec::new();
    for (t, rs) in d.a.iter().enumerate() {
        let passes = rs.iter().filter(|r| r.is_none()).count() as f64;
        let s: f64 = rs
            .iter()
            .map(|r| match r {
                None => 1.0,
                Some(f) => match f.default_action() {
                    "repair" => 1.0,
                    "reroll" => passes / (K_A - 1) as f64,
                    _ => d.b_passes[t] as f64 / K_B as f64,
                },
            })
            .sum();
        by_task.push(s / K_A as f64);
    }
    let simulated = by_task.iter().sum::<f64>() / by_task.len() as f64;
    let got = policy("by-label");
    let rate = got["success"]["rate"].as_f64().unwrap();
    println!("by-label: routing.json {rate:.4}, direct simulation {simulated:.4}");
    assert!((rate - simulated).abs() < 1e-4, "{rate} vs {simulated}");
    assert_eq!(got["fallback_to"], "b");
    // Every request of this collection got an answer: end to end is given an answer.
    for p in a["policies"].as_array().unwrap() {
        assert_eq!(p["end_to_end"], p["success"], "{}", p["policy"]);
    }

    // Each policy's success against its truth (each task weighing the same).
    let mean3 = |f: &dyn Fn(usize) -> f64| (0..3).map(f).sum::<f64>() / 3.0;
    let share =
        |pred: &dyn Fn(Fail) -> bool| FAILS.iter().filter(|f| pred(**f)).count() as f64 / 5.0;
    let q_error = FAILS.iter().map(|f| f.fixed_by("error")).sum::<f64>() / 5.0;
    let truths = [
        ("single", mean3(&|t| P_A[t])),
        ("reroll", mean3(&|t| P_A[t] + (1.0 - P_A[t]) * P_A[t])),
        ("feedback", mean3(&|t| P_A[t] + (1.0 - P_A[t]) * q_error)),
        (
            "repair",
            mean3(&|t| P_A[t] + (1.0 - P_A[t]) * share(&|f| f.repairable())),
        ),
        ("fallback", mean3(&|t| P_A[t] + (1.0 - P_A[t]) * P_B[t])),
        (
            "by-label",
            mean3(&|t| {
                let after = share(&|f| f.default_action() == "repair")
                    + share(&|f| f.default_action() == "reroll") * P_A[t]
                    + share(&|f| f.default_action() == "fallback") * P_B[t];
                P_A[t] + (1.0 - P_A[t]) * after
            }),
        ),
    ];
    for (name, truth) in truths {
        let p = policy(name);
        let iv = &p["success"]["interval"];
        within(
            &format!("policy {name}"),
            truth,
            iv["lower"].as_f64().unwrap(),
            iv["upper"].as_f64().unwrap(),
            &mut misses,
        );
        assert_eq!(p["tasks"], json!(3));
    }
    // The feedback policy uses each failure's own error-style child.
    let fb_direct = (0..3)
        .map(|t| {
            let rs = &d.a[t];
            rs.iter()
                .enumerate()
                .map(|(i, r)| match r {
                    None => 1.0,
                    Some(_) => f64::from(u8::from(d.error_child[t][&i])),
                })
                .sum::<f64>()
                / K_A as f64
        })
        .sum::<f64>()
        / 3.0;
    let fb_rate = policy("feedback")["success"]["rate"].as_f64().unwrap();
    assert!(
        (fb_rate - fb_direct).abs() < 1e-4,
        "{fb_rate} vs {fb_direct}"
    );
    // Costs: 10 tokens and 100 ms a first-round request; a reroll costs the cell's mean (10,
    // 100 ms), a feedback round its child's (30, 300 ms); a repair nothing.
    let single = policy("single");
    assert_eq!(single["requests"], json!(1.0));
    assert_eq!(single["completion_tokens"], json!(10.0));
    // Every response of this collection reports 50 prompt tokens.
    assert_eq!(single["prompt_tokens"], json!(50.0));
    // Each first-round request takes 100 ms: every call of `single` does.
    assert_eq!(
        single["latency_ms"],
        json!({"mean": 100.0, "p50": 100.0, "p95": 100.0})
    );
    let fail_share = mean3(&|t| d.a[t].iter().filter(|r| r.is_some()).count() as f64 / K_A as f64);
    let req = policy("reroll")["requests"].as_f64().unwrap();
    assert!((req - (1.0 + fail_share)).abs() < 1e-4, "{req}");
    let tok = policy("feedback")["completion_tokens"].as_f64().unwrap();
    assert!((tok - (10.0 + 30.0 * fail_share)).abs() < 1e-3, "{tok}");
    let prompt = policy("feedback")["prompt_tokens"].as_f64().unwrap();
    assert!(
        (prompt - (50.0 + 50.0 * fail_share)).abs() < 1e-3,
        "{prompt}"
    );
    // A call that failed and was fed back takes its 100 ms and its child's 300 ms: the
    // slowest calls of the feedback policy take 400 ms, and more than 5 % of calls fail.
    assert_eq!(policy("feedback")["latency_ms"]["p95"], json!(400.0));
    assert_eq!(policy("feedback")["latency_ms"]["p50"], json!(100.0));
    // Priced by hand: a `single` call is 50 prompt tokens at 0.5 and 10 completion tokens at
    // 2.0 per million, over its success; the feedback policy's expected tokens likewise. The
    // fallback policy asks row b, which declares no price: no cost.
    let cost = |p: &Value| p["cost"].as_f64().unwrap();
    let rate = |p: &Value| p["success"]["rate"].as_f64().unwrap();
    let want = (50.0 * 0.5 + 10.0 * 2.0) / 1e6 / rate(&single);
    assert!(
        (cost(&single) - want).abs() < 1e-9,
        "{} vs {want}",
        cost(&single)
    );
    let fb = policy("feedback");
    let want = (prompt * 0.5 + tok * 2.0) / 1e6 / rate(&fb);
    assert!(
        (cost(&fb) / want - 1.0).abs() < 1e-3,
        "{} vs {want}",
        cost(&fb)
    );
    // The page shows it per 1000 successes.
    let page = read(&out, "routing.html");
    let shown = format!("{:.4} per 1000 successes", want * 1000.0);
    assert!(page.contains(&shown), "routing.html lacks {shown}");
    assert_eq!(policy("fallback")["cost"], Value::Null);
    assert_eq!(policy("repair")["requests"], json!(1.0));

    println!("{} intervals outside the truth", misses.len());
    assert!(misses.is_empty(), "{misses:#?}");

    // The page says how many follow-ups were counted nowhere, and links the row.
    let page = read(&out, "routing.html");
    assert!(
        page.contains(
            "1 feedback sample follows up a sample that passes under the current checkers"
        ),
        "{page}"
    );
    assert!(page.contains(r#"<h3 id="m-a">"#));
    // A feedback run's page says what it is; its samples have permalinks like any sample.
    let run_page = read(&out, "t/a/cc-1/fb-error/index.html");
    assert!(
        run_page.contains("A feedback round (<b>error</b> style)"),
        "{run_page}"
    );
    assert!(out.join("t/a/cc-1/fb-error/000.html").is_file());
    // The model page links its row's routing table; the label page shows the four actions.
    let model_page = read(&out, "models/a.html");
    assert!(model_page.contains(r#"href="../routing.html#m-a""#));
    // Every failure drawn here is visible (tool_choice "required"): the page says none is
    // hidden from a router.
    assert!(
        model_page.contains(" 0 of ") || model_page.contains(">0 of "),
        "{model_page}"
    );
    let label_page = read(&out, "labels/type_coercion.html");
    assert!(label_page.contains("What each action did"), "{label_page}");

    // samples.csv: the feedback samples are there, with their round, parent and style.
    let csv = read(&out, "data/samples.csv");
    let header = csv.lines().next().unwrap();
    assert!(
        header.ends_with(",round,parent,feedback,visible"),
        "{header}"
    );
    let first_child = d.a[0].iter().position(Option::is_some).unwrap();
    let row = format!(",1,t/a/cc-1/r0001/{first_child:03}.html,checklist");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("t/a/cc-1/fb-checklist/000.html,")
                && l.rsplit_once(',')
                    .is_some_and(|(head, _)| head.ends_with(&row))),
        "no row ending {row}"
    );
    let rows = csv.lines().count() - 1;
    assert_eq!(rows, 3 * (K_A + K_B) + drawn_children as usize + 2);
}

#[test]
fn routing_is_identical_across_rebuilds_with_and_without_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    collection(tmp.path());
    let (tasks, runs) = (tmp.path().join("tasks"), tmp.path().join("runs"));
    let cache = tmp.path().join("cache");
    let cache_arg = cache.to_str().unwrap();
    let fresh = tmp.path().join("fresh");
    build_ok(&tasks, &runs, &fresh, &[], &[]);
    let cached = tmp.path().join("cached");
    build_ok(&tasks, &runs, &cached, &["--cache", cache_arg], &[]);
    // Again, now from the cache's verdicts.
    let err = build_ok(&tasks, &runs, &cached, &["--cache", cache_arg], &[]);
    for f in [
        "data/routing.json",
        "data/samples.csv",
        "data/matrix.json",
        "routing.html",
    ] {
        assert!(
            read(&fresh, f) == read(&cached, f),
            "{f} differs between a fresh build and a rebuild from the cache ({err})"
        );
    }
}

#[test]
fn dpo_pairs_a_failure_with_the_models_own_fixed_answer_where_feedback_fixed_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = collection(tmp.path());
    let file = tmp.path().join("pairs.jsonl");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_callcheck"))
        .args([
            "export",
            "preference",
            "--format",
            "dpo",
            "--source",
            "real",
            "--keep-repeats",
        ])
        .arg("--tasks")
        .arg(tmp.path().join("tasks"))
        .arg("--runs")
        .arg(tmp.path().join("runs"))
        .arg("--out")
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Every failure of row a and of row b is a pair; none is a feedback sample.
    let a_fails: usize =
        d.a.iter()
            .map(|rs| rs.iter().filter(|r| r.is_some()).count())
            .sum();
    let b_fails = 3 * K_B - d.b_passes.iter().sum::<usize>();
    assert_eq!(lines.len(), a_fails + b_fails);
    let mut own = 0;
    for l in &lines {
        let meta = &l["callcheck"];
        let link = meta["permalink"].as_str().unwrap();
        assert!(link.contains("/r0001/"), "{link}");
        let (model, task, sample) = {
            let p: Vec<&str> = link.split('/').collect();
            (
                p[1],
                p[2],
                p[4].trim_end_matches(".html").parse::<usize>().unwrap(),
            )
        };
        // The first style that fixed it wins: error, then checklist, then retry.
        let t = TASKS.iter().position(|x| *x == task).unwrap();
        let want = if model == "a" {
            d.fixed_by[t].get(&sample).copied()
        } else {
            None
        };
        match (meta["chosen"]["source"].as_str().unwrap(), want) {
            ("feedback", Some(style)) => {
                own += 1;
                assert_eq!(meta["chosen"]["style"], style);
                assert!(
                    meta["chosen"]["permalink"]
                        .as_str()
                        .unwrap()
                        .starts_with(&format!("t/a/{task}/fb-{style}/")),
                    "{meta}"
                );
                // The chosen answer is the model's own: a call with the gold arguments.
                let args = l["chosen"][0]["tool_calls"][0]["function"]["arguments"]
                    .as_str()
                    .unwrap();
                assert_eq!(
                    serde_json::from_str::<Value>(args).unwrap(),
                    json!({"amount": 1250, "from": "EUR", "to": "JPY"})
                );
            }
            ("gold", None) => {}
            (source, want) => panic!("{link}: chosen from {source}, expected {want:?}"),
        }
    }
    let fixed: usize = d.fixed_by.iter().map(BTreeMap::len).sum();
    assert_eq!(own, fixed);
    println!(
        "{own} of {} pairs take the model's own fixed answer",
        lines.len()
    );
}

/// Issue 41's refusing server: a row whose follow-ups, sent with the history as produced, are
/// refused with HTTP 500 (as vLLM refuses arguments that are not JSON), and answered when the
/// history is sanitised. The refusals count as trials that did not pass, by status, and both
/// histories stand side by side on routing.html.
#[test]
fn refused_follow_ups_count_by_status_beside_the_sanitised_history() {
    let tmp = tempfile::tempdir().unwrap();
    let (tasks_dir, runs, out) = (
        tmp.path().join("tasks"),
        tmp.path().join("runs"),
        tmp.path().join("site"),
    );
    std::fs::create_dir_all(&tasks_dir).unwrap();
    let mut t: Value = serde_json::from_slice(
        &std::fs::read(repo().join("tests/fixtures/runs-tasks/convert-currency.json")).unwrap(),
    )
    .unwrap();
    t["id"] = json!("cc-1");
    std::fs::write(tasks_dir.join("cc-1.json"), t.to_string()).unwrap();
    let task = &callcheck::task::load(&tasks_dir).unwrap()[0];
    // First round: 6 escaping errors (visible at parse), 4 passes.
    let first: Vec<Sample> = (0..10)
        .map(|i| Sample {
            reply: (i < 6).then_some(Fail::EscapingError),
            parent: None,
        })
        .collect();
    write_run(&runs, task, "v", "r0001", None, &first);
    // One follow-up per failure and history; the sanitised ones pass 4 times of 6.
    let follow_ups = |pass: usize| -> Vec<Sample> {
        (0..6)
            .map(|i| Sample {
                reply: (i >= pass).then_some(Fail::SchemaViolation),
                parent: Some(format!("{i:03}")),
            })
            .collect()
    };
    write_run(&runs, task, "v", "fb-as", Some("error"), &follow_ups(0));
    write_run(&runs, task, "v", "fb-san", Some("error"), &follow_ups(4));
    let set_history = |run: &str, history: &str| {
        let p = runs.join("v/cc-1").join(run).join("cell.json");
        let mut cell: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        cell["feedback"]["history"] = json!(history);
        std::fs::write(&p, cell.to_string()).unwrap();
    };
    set_history("fb-as", "as-produced");
    set_history("fb-san", "sanitised");
    // The as-produced follow-ups: refused as vLLM refuses a history whose arguments do not
    // parse.
    for i in 0..6 {
        let dir = runs.join(format!("v/cc-1/fb-as/samples/{i:03}"));
        std::fs::write(
            dir.join("response.json"),
            r#"{"object":"error","message":"Expecting property name enclosed in double quotes","type":"BadRequestError","code":500}"#,
        )
        .unwrap();
        let meta = json!({"status": 500, "headers": {}, "ttfb_ms": 10.0, "total_ms": 12.0,
            "streamed": false, "parent": {"run": "r0001", "sample": format!("{i:03}")}});
        std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    }
    build_ok(&tasks_dir, &runs, &out, &[], &[]);
    let r: Value = serde_json::from_str(&read(&out, "data/routing.json")).unwrap();
    let v = &r["models"][0];
    assert_eq!(v["model"], "v");
    assert_eq!(
        (&v["feedback_samples"], &v["feedback_errors"]),
        (&json!(12), &json!(6))
    );
    assert_eq!((&v["failures"], &v["visible"]), (&json!(6), &json!(6)));
    let l = &v["labels"][0];
    assert_eq!(l["label"], "escaping_error");
    let fb = &l["feedback"];
    let counts = |k: &str| {
        (
            fb[k]["n"].clone(),
            fb[k]["passes"].clone(),
            fb[k]["refused"].clone(),
        )
    };
    assert_eq!(
        counts("error/as-produced"),
        (json!(6), json!(0), json!({"500": 6}))
    );
    assert_eq!(counts("error/sanitised"), (json!(6), json!(4), json!({})));
    // Both histories on the page, the refusals named by status.
    let page = read(&out, "routing.html");
    assert!(
        page.contains("<th>feedback: error</th><th>feedback: error (sanitised)</th>"),
        "{page}"
    );
    assert!(page.contains("0/6\u{a0}=\u{a0}"), "{page}");
    assert!(
        page.contains("; refused 6\u{a0}×\u{a0}HTTP\u{a0}500"),
        "{page}"
    );
    assert!(page.contains("4/6\u{a0}=\u{a0}"), "{page}");
    // The feedback policy reads the as-produced follow-ups: none passed.
    let feedback = v["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == "feedback")
        .unwrap();
    assert_eq!(feedback["success"]["rate"], json!(0.4));
}
