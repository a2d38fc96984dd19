//! The identical-samples warning wherever the verdicts it affects are (issue 28): a row whose
//! samples of one task are one answer repeated, or a row that asks for temperature 0, is marked
//! beside its verdicts on the index (answers, shape table, matrix), on the tag pages of the
//! shapes it affects and on the comparison pages that touch it, with one sentence linking its
//! model page; pages of rows without it carry no mark. Built by the real binary from runs
//! written reply by reply.

use crate::support::site::*;
use serde_json::json;
use std::path::{Path, PathBuf};

/// The corpus of tests/fixtures/value-tasks (weather: tags bfcl, simple-python, single-call;
/// parallel: bfcl, parallel; irrelevance: bfcl, irrelevance, no-call) and three rows:
/// `same` answers the weather task with one answer three times; `cold` asks for temperature 0
/// (its answers differ) on the irrelevance task only; `varied` and `other` vary everywhere.
fn site(tmp: &Path) -> PathBuf {
    let tasks_dir = tmp.join("tasks");
    copy_tree(&repo().join("tests/fixtures/value-tasks"), &tasks_dir);
    let tasks = callcheck::task::load(&tasks_dir).unwrap_or_else(|e| panic!("{e}"));
    let runs = tmp.join("runs");
    let both = |a: &'static str, b: &'static str| {
        Reply::Calls(vec![
            ("weather_get", json!({ "city": a })),
            ("weather_get", json!({ "city": b })),
        ])
    };
    for row in ["same", "varied", "other"] {
        let weather_replies = if row == "same" {
            vec![weather("Paris"), weather("Paris"), weather("Paris")]
        } else {
            vec![
                weather("Paris"),
                weather("paris, france"),
                weather("London"),
            ]
        };
        write_run(&runs, &tasks, row, "bfcl-fixture-weather", &weather_replies);
        write_run(
            &runs,
            &tasks,
            row,
            "bfcl-fixture-parallel",
            &[
                both("Tokyo", "paris"),
                both("Tokyo", "Paris"),
                both("tokyo", "paris"),
            ],
        );
        write_run(
            &runs,
            &tasks,
            row,
            "bfcl-fixture-irrelevance",
            &[Reply::Prose, weather("Paris"), Reply::Prose],
        );
    }
    write_run(
        &runs,
        &tasks,
        "cold",
        "bfcl-fixture-irrelevance",
        &[Reply::Prose, weather("Paris"), Reply::Prose],
    );
    // The row's entry as collect records it, asking for temperature 0.
    let cell = runs.join("cold/bfcl-fixture-irrelevance/r0001/cell.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cell).unwrap()).unwrap();
    c["model"]["params"] = json!({"temperature": 0});
    std::fs::write(&cell, c.to_string()).unwrap();
    let out = tmp.join("site");
    build_ok(
        &tasks_dir,
        &runs,
        &out,
        &["--compare", "varied:same", "--compare", "varied:other"],
        &[],
    );
    out
}

/// The sentence a page carries when it marks something, naming (and linking) `rows`.
fn note(root: &str, rows: &[&str]) -> String {
    let links: Vec<String> = rows
        .iter()
        .map(|r| format!("<a href=\"{root}models/{r}.html#deterministic\">{r}</a>"))
        .collect();
    format!(
        "<p class=\"warn same\" id=\"repeats\">≡ marks a verdict resting on cells whose samples are one answer repeated, or on a row that asks for temperature 0: k identical samples are one observation, not k, so the interval (which counts them as independent) overstates the evidence; see {}.</p>",
        links.join(", ")
    )
}

/// The marks a page carries, by their text.
fn marks(page: &str) -> Vec<String> {
    page.split("<small class=\"warn same\"")
        .skip(1)
        .map(|s| {
            let text = &s[s.find('>').unwrap() + 1..s.find("</small>").unwrap()];
            text.to_string()
        })
        .collect()
}

#[test]
fn the_warning_stands_beside_every_verdict_it_affects_and_nowhere_else() {
    let tmp = tempfile::tempdir().unwrap();
    let out = site(tmp.path());

    // The index: the answers (same: 3 shapes; cold: 3), the shape table (the same six), the
    // matrix (same's weather cell; cold's irrelevance cell, marked for its temperature).
    let index = read(&out, "index.html");
    // Every answer on this index is `uncertain`, which repeated samples cannot make read
    // otherwise: the answers carry no mark (the shape table below carries each).
    let answers = &index[index.find("<ul class=\"answers\">").unwrap()..];
    let answers = &answers[..answers.find("</ul>").unwrap()];
    assert!(
        answers.contains("<a href=\"tags/bfcl.html\">bfcl</a> <small>(8/9)</small>, "),
        "{answers}"
    );
    assert!(!answers.contains("≡"), "{answers}");
    assert!(index.contains(&note("", &["cold", "same"])), "{index}");
    let mut got = marks(&index);
    got.sort();
    // The shape table carries the marks with their text (bfcl pools same's three tasks, one of
    // them repeated), and the matrix its cells'.
    let mut want: Vec<&str> = Vec::new();
    want.extend([
        "≡ one answer in 1 of 3 tasks",
        "≡ one answer",
        "≡ one answer",
        "≡ one answer",
        "≡ temperature 0",
        "≡ temperature 0",
        "≡ temperature 0",
        "≡ temperature 0",
    ]);
    want.sort();
    assert_eq!(got, want);

    // Tag pages: the pooled verdict and the matrix cell of the rows affected, with the note.
    let single = read(&out, "tags/single-call.html");
    assert_eq!(marks(&single), ["≡ one answer", "≡ one answer"]);
    assert!(single.contains(&note("../", &["same"])), "{single}");
    let no_call = read(&out, "tags/no-call.html");
    assert_eq!(marks(&no_call), ["≡ temperature 0", "≡ temperature 0"]);
    assert!(no_call.contains(&note("../", &["cold"])));
    let bfcl = read(&out, "tags/bfcl.html");
    assert!(bfcl.contains(&note("../", &["cold", "same"])));
    // parallel: every row's samples there differ, and no row there asks for temperature 0.
    let parallel = read(&out, "tags/parallel.html");
    assert!(marks(&parallel).is_empty() && !parallel.contains("id=\"repeats\""));

    // The comparison touching `same`: its overall figure, the tags its weather task is in,
    // and the weather task's row; the other comparison, none.
    let touching = read(&out, "compare/varied--same.html");
    let mut got = marks(&touching);
    got.sort();
    assert_eq!(
        got,
        [
            "≡ B: one answer",
            "≡ B: one answer",
            "≡ B: one answer",
            "≡ B: one answer in 1 of 3 tasks",
            "≡ B: one answer in 1 of 3 tasks",
        ],
        "{touching}"
    );
    assert!(touching.contains(&note("../", &["same"])), "{touching}");
    let apart = read(&out, "compare/varied--other.html");
    assert!(marks(&apart).is_empty() && !apart.contains("id=\"repeats\""));

    // The rows without it: their model pages say nothing of it.
    for row in ["varied", "other"] {
        let page = read(&out, &format!("models/{row}.html"));
        assert!(
            !page.contains("≡") && !page.contains("id=\"deterministic\""),
            "{row}"
        );
    }
    // The page the note links to exists and explains the row.
    assert!(read(&out, "models/same.html").contains(
        "<p id=\"deterministic\">This row&#39;s samples look deterministic: 1 of its 3 cells"
    ));
    assert!(read(&out, "models/cold.html").contains("<p id=\"deterministic\">This row&#39;s samples look deterministic: it asks for temperature 0."));
}
