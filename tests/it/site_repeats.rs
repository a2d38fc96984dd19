//! The identical-samples warning wherever the verdicts it affects are (issue 28), said once per
//! row where it changes the reading (issue 45): a row whose samples of one task are one answer
//! repeated, or a row that asks for temperature 0, carries the whole mark once in its heading
//! of the page's first table of rows (the index's shape table, a tag page's per-model table),
//! once in its answer and once beside the rows' names on a comparison; a cell or a comparison's
//! row carries the glyph alone, and only beside a decided verdict. One sentence links the row's
//! model page; pages of rows without it carry no mark. Built by the real binary from runs
//! written reply by reply.

use crate::support::site::*;
use serde_json::json;
use std::path::{Path, PathBuf};

/// The corpus of tests/fixtures/value-tasks (weather: tags bfcl, simple-python, single-call;
/// parallel: bfcl, parallel; irrelevance: bfcl, irrelevance, no-call) and three rows:
/// `same` answers the weather task with one answer three times (3/3, `uncertain`) and the
/// parallel task with one failing answer three times (0/3, `unreliable`); `cold` asks for
/// temperature 0 (its answers differ) on the irrelevance task only; `varied` and `other` vary
/// everywhere.
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
        // `same` answers the parallel task with one call, three times: a decided verdict
        // (0/3 is `unreliable` even at k = 3) resting on one answer.
        let parallel_replies = if row == "same" {
            vec![weather("Tokyo"), weather("Tokyo"), weather("Tokyo")]
        } else {
            vec![
                both("Tokyo", "paris"),
                both("Tokyo", "Paris"),
                both("tokyo", "paris"),
            ]
        };
        write_run(
            &runs,
            &tasks,
            row,
            "bfcl-fixture-parallel",
            &parallel_replies,
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

/// The marks the comparison of `varied` and `same` carries: its head's, and the glyph beside
/// its two decided rows, the parallel tag and the parallel task (3/3 against 0/3, `worse`);
/// the overall and bfcl rows hold 0 in their intervals and carry none.
const COMPARE_MARKS: [&str; 3] = ["≡", "≡", "≡ B: one answer in 2 of 3 tasks"];

/// The marks a page carries, by their text as a desktop reader reads it (tags inside left out).
fn marks(page: &str) -> Vec<String> {
    page.split("<small class=\"warn same\"")
        .skip(1)
        .map(|s| {
            let html = &s[s.find('>').unwrap() + 1..s.find("</small>").unwrap()];
            let mut text = String::new();
            let mut in_tag = false;
            for c in html.chars() {
                match c {
                    '<' => in_tag = true,
                    '>' => in_tag = false,
                    c if !in_tag => text.push(c),
                    _ => {}
                }
            }
            text
        })
        .collect()
}

#[test]
fn the_warning_stands_beside_every_verdict_it_affects_and_nowhere_else() {
    let tmp = tempfile::tempdir().unwrap();
    let out = site(tmp.path());

    // "≡" is said once per row where it changes the reading: the whole mark once in the row's
    // heading of a page's first table of rows (and once in its answer), and beside a cell only
    // its glyph, and only where the verdict is decided (an `uncertain` one claims nothing the
    // repeats could overstate).
    let index = read(&out, "index.html");
    // The answers: `same` is unreliable on bfcl and parallel, both resting on a repeated
    // answer, said once after its line; `cold`'s verdicts are all uncertain.
    let answers = &index[index.find("<ul class=\"answers\">").unwrap()..];
    let answers = &answers[..answers.find("</ul>").unwrap()];
    assert!(
        answers.contains("<a href=\"tags/bfcl.html\">bfcl</a> <small>(8/9)</small>, "),
        "{answers}"
    );
    assert_eq!(
        marks(answers),
        ["≡ bfcl, parallel: repeated answers"],
        "{answers}"
    );
    assert!(index.contains(&note("", &["cold", "same"])), "{index}");
    // The shape table's headings say each row's mark once (same: 2 of its 3 tasks repeat; cold
    // asks for temperature 0); the glyph stands beside same's decided verdicts, bfcl (5/9) and
    // parallel (0/3) in the shape table and the parallel cell (0/3) in the matrix. Same's
    // weather cell (3/3, one answer) and cold's irrelevance cell (2/3) are `uncertain`: no mark.
    let mut got = marks(&index);
    got.sort();
    assert_eq!(
        got,
        [
            "≡",
            "≡",
            "≡",
            "≡ bfcl, parallel: repeated answers",
            "≡ one answer in 2 of 3 tasks",
            "≡ temperature 0",
        ]
    );
    // On a phone the heading keeps the counts: the words around them can be hidden.
    assert!(
        index.contains("≡ <span class=\"long\">one answer in </span>2 of 3<span class=\"long\"> tasks</span></small>"),
        "{index}"
    );
    // A glyph keeps its text in its title.
    assert!(
        index.contains("<small class=\"warn same\" title=\"one answer: k identical samples are one observation, not k\">≡</small>"),
        "{index}"
    );

    // Tag pages: the mark once in the per-model table's heading, the glyph beside decided
    // verdicts only, and the note.
    let single = read(&out, "tags/single-call.html");
    assert_eq!(marks(&single), ["≡ one answer"]);
    assert!(single.contains(&note("../", &["same"])), "{single}");
    let no_call = read(&out, "tags/no-call.html");
    assert_eq!(marks(&no_call), ["≡ temperature 0"]);
    assert!(no_call.contains(&note("../", &["cold"])));
    let bfcl = read(&out, "tags/bfcl.html");
    assert!(bfcl.contains(&note("../", &["cold", "same"])));
    // parallel: same's pooled verdict and its cell are decided (0/3) on one answer.
    let parallel = read(&out, "tags/parallel.html");
    assert_eq!(marks(&parallel), ["≡ one answer", "≡", "≡"]);
    assert!(parallel.contains(&note("../", &["same"])), "{parallel}");
    // irrelevance: nobody's verdict there is decided, and same's cell there varies.
    let irrelevance = read(&out, "tags/irrelevance.html");
    assert_eq!(marks(&irrelevance), ["≡ temperature 0"]);

    // The comparison touching `same`: the mark once beside the rows' names, over every task
    // shown; the glyph beside its decided rows only.
    let touching = read(&out, "compare/varied--same.html");
    let head = &touching[touching.find("<p>A = ").unwrap()..];
    let head = &head[..head.find("</p>").unwrap()];
    assert_eq!(marks(head), ["≡ B: one answer in 2 of 3 tasks"], "{head}");
    let mut got = marks(&touching);
    got.sort();
    assert_eq!(got, COMPARE_MARKS, "{touching}");
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
        "<p id=\"deterministic\">This row&#39;s samples look deterministic: 2 of its 3 cells"
    ));
    assert!(read(&out, "models/cold.html").contains("<p id=\"deterministic\">This row&#39;s samples look deterministic: it asks for temperature 0."));
}
