//! The review round measured (SPEC §11), end to end: the real binary collects a first round and
//! a review round from the real mock over loopback, with a scripted reviewer whose keep and fix
//! probabilities are known; `build` writes `data/routing.json`'s `review` and `routing.html`'s
//! review section, whose fixed, broken and refused counts equal a recount from runs/ and whose
//! intervals cover the config's truth; `export preference` turns each fixed failure into a
//! real chosen answer and each broken call into a real rejected one, saying which.

use crate::support::collect::*;
use callcheck::runs::RunKind;
use callcheck::taxonomy::Outcome;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Fails with `no_call` 30 % of the time on every task (p = 0.7); under review keeps a correct
/// call 80 % of the time and fixes half of the failures.
const REVIEWER: &str = r#"
seed = 43
[[model]]
name = "reviewer"
[model.labels]
no_call = 0.3
[model.review]
keep = 0.8
fix = 0.5
"#;

const P: f64 = 0.7;
const KEEP: f64 = 0.8;
const FIX: f64 = 0.5;

/// Per row: (parents, reviewed, fixed, broken, refused), and every broken pair as (first
/// permalink, review permalink), recounted from the files of runs/.
type Recount = BTreeMap<String, ((u64, u64, u64, u64, u64), Vec<(String, String)>)>;

fn recount(runs: &Path) -> Recount {
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let score = |r: &callcheck::runs::RunDir, s: &str| {
        let task = tasks.iter().find(|t| t.id == r.task_id).unwrap();
        callcheck::score::score(task, &r.read_sample(s).unwrap().transcript()).outcome
    };
    let link = |m: &str, t: &str, run: &str, s: &str| format!("t/{m}/{t}/{run}/{s}.html");
    let scan = callcheck::runs::scan(runs).runs;
    let mut first: BTreeMap<(String, String, String, String), Outcome> = BTreeMap::new();
    for r in scan.iter().filter(|r| r.cell.kind == RunKind::Samples) {
        for s in &r.samples {
            let key = (
                r.model.clone(),
                r.task_id.clone(),
                r.run_id.clone(),
                s.clone(),
            );
            first.insert(key, score(r, s));
        }
    }
    let mut out = Recount::new();
    for key in first.keys() {
        (out.entry(key.0.clone()).or_default().0).0 += 1;
    }
    for r in scan.iter().filter(|r| r.cell.kind == RunKind::Review) {
        for s in &r.samples {
            let t = r.read_sample(s).unwrap().transcript();
            let parent = t.meta.as_ref().unwrap().parent.clone().unwrap();
            let key = (
                r.model.clone(),
                r.task_id.clone(),
                parent.run.clone(),
                parent.sample.clone(),
            );
            let row = out.get_mut(&r.model).unwrap();
            row.0.1 += 1;
            match (first[&key], score(r, s)) {
                (_, Outcome::Error) => row.0.4 += 1,
                (Outcome::Fail(_), Outcome::Pass) => row.0.2 += 1,
                (Outcome::Pass, Outcome::Fail(_)) => {
                    row.0.3 += 1;
                    row.1.push((
                        link(&r.model, &r.task_id, &parent.run, &parent.sample),
                        link(&r.model, &r.task_id, &r.run_id, s),
                    ));
                }
                _ => {}
            }
        }
    }
    for row in out.values_mut() {
        row.1.sort();
    }
    out
}

fn covers(iv: &Value, truth: f64) -> bool {
    let (lo, hi) = (iv["lower"].as_f64().unwrap(), iv["upper"].as_f64().unwrap());
    lo < hi && lo <= truth && truth <= hi
}

#[test]
fn review_counts_equal_a_recount_and_cover_the_truth_and_export_pairs_them() {
    let tmp = tempfile::tempdir().unwrap();
    let rows = [
        ("rv-json", "reviewer", false, 4),
        ("rv-sse", "reviewer", true, 4),
    ];
    let (_mock, cfg) = mock_and_config(tmp.path(), Some(REVIEWER), &corpus(), &rows);
    let runs = tmp.path().join("runs");
    ok(&collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-*", "--k", "20"],
        &[],
    ));
    ok(&collect_in(
        &cfg,
        &corpus(),
        &runs,
        &["--only", "basic-*", "--review"],
        &[],
    ));
    let site = tmp.path().join("site");
    ok(&build_in(tmp.path(), &runs, &site));

    let counted = recount(&runs);
    let doc: Value =
        serde_json::from_slice(&std::fs::read(site.join("data/routing.json")).unwrap()).unwrap();
    let truth_final = P * KEEP + (1.0 - P) * FIX;
    let truth_diff = (1.0 - P) * FIX - P * (1.0 - KEEP);
    let page = std::fs::read_to_string(site.join("routing.html")).unwrap();
    assert!(page.contains("<h2 id=\"review\">"), "the review section");
    for (row, _, _, _) in rows {
        let m = doc["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["model"] == row)
            .unwrap();
        let rv = &m["review"];
        let ((parents, reviewed, fixed, broken, refused), pairs) = &counted[row];
        let refused_json: u64 = rv["refused"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(
            (
                rv["parents"].as_u64().unwrap(),
                rv["reviewed"].as_u64().unwrap(),
                rv["fixed"].as_u64().unwrap(),
                rv["broken"].as_u64().unwrap(),
                refused_json,
            ),
            (*parents, *reviewed, *fixed, *broken, *refused),
            "{row}: routing.json against the recount"
        );
        assert_eq!(*parents, 60, "{row}: 3 tasks × k = 20");
        assert!(
            *fixed > 0 && *broken > 0,
            "{row}: {fixed} fixed, {broken} broken"
        );
        let listed: Vec<(String, String)> = rv["broken_pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["first"].as_str().unwrap().to_string(),
                    p["review"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let mut sorted = listed.clone();
        sorted.sort();
        assert_eq!(
            &sorted, pairs,
            "{row}: every broken pair, by its permalinks"
        );
        for (a, b) in &listed {
            assert!(
                site.join(a).is_file() && site.join(b).is_file(),
                "{a} → {b}"
            );
        }
        let (first, last, diff) = (
            &rv["first"]["interval"],
            &rv["final"]["interval"],
            &rv["difference"]["interval"],
        );
        eprintln!(
            "{row}: first {first} (truth {P}), final {last} (truth {truth_final:.2}), review − first {diff} (truth {truth_diff:+.2}), {fixed} fixed, {broken} broken"
        );
        assert!(covers(first, P), "{row}: first round {first}");
        assert!(covers(last, truth_final), "{row}: final {last}");
        assert!(covers(diff, truth_diff), "{row}: difference {diff}");
        // The tags of the basic tasks: each over the same 60 parents here, the same counts.
        for t in rv["tags"].as_array().unwrap() {
            assert!(t["parents"].as_u64().unwrap() <= *parents);
            assert!(t["fixed"].as_u64().unwrap() <= *fixed);
            assert!(t["broken"].as_u64().unwrap() <= *broken);
        }
        assert!(
            page.contains(&format!("id=\"review-{row}\"")),
            "{row}'s section"
        );
    }

    // The export: a fixed failure is chosen by its review, a broken call rejected by it.
    let out = tmp.path().join("pairs.jsonl");
    let o = Command::new(env!("CARGO_BIN_EXE_callcheck"))
        .args([
            "export",
            "preference",
            "--format",
            "dpo",
            "--keep-repeats",
            "--tasks",
        ])
        .arg(corpus())
        .arg("--runs")
        .arg(&runs)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    ok(&o);
    let lines: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |source: &str, side: &str| {
        lines
            .iter()
            .filter(|l| l["callcheck"][side]["source"] == source)
            .count() as u64
    };
    let fixed: u64 = counted.values().map(|c| c.0.2).sum();
    let broken: u64 = counted.values().map(|c| c.0.3).sum();
    assert_eq!(
        of("review", "chosen"),
        fixed,
        "each fixed failure, chosen by its review"
    );
    assert_eq!(
        of("review", "rejected"),
        broken,
        "each broken call, rejected"
    );
    assert_eq!(
        of("first", "chosen"),
        broken,
        "each paired with its correct first answer"
    );
    let all_pairs: Vec<(String, String)> = counted.values().flat_map(|c| c.1.clone()).collect();
    for l in lines
        .iter()
        .filter(|l| l["callcheck"]["rejected"]["source"] == "review")
    {
        let c = &l["callcheck"];
        let pair = (
            c["chosen"]["permalink"].as_str().unwrap().to_string(),
            c["permalink"].as_str().unwrap().to_string(),
        );
        assert!(all_pairs.contains(&pair), "{pair:?}");
        assert_eq!(c["rejected"]["first"], c["chosen"]["permalink"]);
        assert!(c["label"].is_string(), "the review's failure label: {c}");
        // Chosen and rejected answer the same first-round request.
        assert_eq!(l["prompt"][0]["role"], "user");
        assert!(
            l["prompt"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m["role"] != "tool"),
            "the first round's prompt, not the review's conversation"
        );
    }
}
