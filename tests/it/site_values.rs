//! Value accuracy and BFCL-style accuracy on the site: per cell on the task page, pooled by task
//! on the tag and model pages, only for tasks that come from BFCL or list acceptable values
//! (`accept`). The site is the site support module's `value_fixture_site`: tests/fixtures/value-tasks
//! (three tasks in the shape `callcheck import bfcl` gives, not BFCL's data) plus one
//! hand-written task without `accept`, with runs written reply by reply so every count is
//! known. The expected intervals were computed apart from callcheck (Wilson per cell; Wilson on
//! n/deff with t at C−1 df pooled).

use crate::support::site::*;
use scraper::{Html, Selector};
use serde_json::Value;

/// The text of each `<td>` of the table row whose header is `name`, in the table that follows
/// the element with id `section` (the first such row).
fn row(page: &str, section: &str, name: &str) -> Vec<String> {
    let tr = Selector::parse("tr").unwrap();
    let th = Selector::parse("th").unwrap();
    let td = Selector::parse("td").unwrap();
    let start = page
        .find(&format!("id=\"{section}\""))
        .unwrap_or_else(|| panic!("no #{section}"));
    // The rows after the section's heading: parse only that part of the page.
    let part = Html::parse_fragment(&page[start..]);
    let found = part
        .select(&tr)
        .find(|r| {
            r.select(&th)
                .next()
                .is_some_and(|h| h.text().collect::<String>().trim() == name)
        })
        .unwrap_or_else(|| panic!("no row {name:?} after #{section}"));
    found
        .select(&td)
        .map(|c| {
            c.text()
                .collect::<Vec<_>>()
                .join(" ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn value_and_bfcl_style_accuracy_per_cell_tag_and_model() {
    let tmp = tempfile::tempdir().unwrap();
    let out = value_fixture_site(tmp.path());

    // Task page, one row per model: conformance, value accuracy, BFCL-style, labels.
    let task = read(&out, "tasks/bfcl-fixture-weather.html");
    let m1 = row(&task, "results", "m1");
    assert!(m1[0].contains("4/5 · 80 % [38–96 %]"), "{m1:?}");
    assert_eq!(m1[1], "3/4 · 75 % [30–95 %]");
    assert_eq!(m1[2], "3/5 · 60 % [23–88 %]");
    let m2 = row(&task, "results", "m2");
    assert!(m2[0].contains("3/4 · 75 % [30–95 %]"), "{m2:?}");
    assert_eq!(m2[1], "0/3 · 0 % [0–56 %]");
    assert_eq!(m2[2], "0/4 · 0 % [0–49 %]");
    assert!(task.contains("<b>Value accuracy</b>: of the samples that passed conformance"));
    assert!(task.contains("<b>BFCL-style accuracy</b>: the share of all scored samples"));
    // The expected call lists what it accepts.
    assert!(
        task.contains(r#"<li><code>city: &#34;Paris&#34; or &#34;Paris, France&#34; (BFCL&#39;s rule)</code></li>"#),
        "{task}"
    );
    assert!(task.contains(
        r#"<li><code>unit: &#34;celsius&#34; or left out (BFCL&#39;s rule)</code></li>"#
    ));
    // A question that expects no call has no value to compare; BFCL-style is its pass rate.
    let irrelevance = read(&out, "tasks/bfcl-fixture-irrelevance.html");
    let m1 = row(&irrelevance, "results", "m1");
    assert_eq!(m1[1], "– no passing sample with a value to compare");
    assert_eq!(m1[2], "2/3 · 67 % [21–94 %]");

    // Model pages: pooled over the model's BFCL tasks with the interval by task.
    let model = read(&out, "models/m1.html");
    let all = row(&model, "values", "all such tasks");
    assert_eq!(all[0], "3", "tasks: {all:?}");
    assert!(all[1].contains("9/11 · 82 % [47–98 %]"), "{all:?}");
    // Tasks of different sizes: the estimate is the mean over the tasks, named beside the ratio.
    assert_eq!(
        all[2],
        "6/7 · 86 % [43–100 %] 2 tasks · mean over the tasks 88 % · design effect 1.02"
    );
    assert_eq!(
        all[3],
        "8/11 · 73 % [41–96 %] 3 tasks · mean over the tasks 76 % · design effect 1.06"
    );
    // The hand-written task's tags (enum, integer) are not among them: no row of its own.
    let section = &model[model.find("id=\"values\"").unwrap()..model.find("id=\"tasks\"").unwrap()];
    assert!(section.contains(">simple-python</a>"), "{section}");
    assert!(
        !section.contains(">enum</a>") && !section.contains(">integer</a>"),
        "{section}"
    );
    let model = read(&out, "models/m2.html");
    let all = row(&model, "values", "all such tasks");
    assert!(all[1].contains("6/7 · 86 % [43–100 %]"), "{all:?}");
    // Two tasks that disagree (0/3 and 3/3): about these two tasks, Clopper–Pearson on the six
    // samples (their disagreement only narrows the pooled count's spread).
    assert_eq!(all[2], "3/6 · 50 % [12–88 %] 2 tasks");
    assert_eq!(
        all[3],
        "3/7 · 43 % [14–86 %] 2 tasks · mean over the tasks 50 % · design effect 1.02"
    );
    let parallel = row(&model, "values", "parallel");
    assert_eq!(parallel[2], "3/3 · 100 % [29–100 %] 1 task");

    // Tag pages: per model over the tag's tasks.
    let tag = read(&out, "tags/simple-python.html");
    let m1 = row(&tag, "values", "m1");
    assert_eq!(m1[0], "1");
    assert!(m1[1].contains("4/5 · 80 % [28–99 %]"), "{m1:?}");
    assert_eq!(m1[2], "3/4 · 75 % [19–99 %] 1 task");
    assert_eq!(m1[3], "3/5 · 60 % [15–95 %] 1 task");
    let m2 = row(&tag, "values", "m2");
    assert_eq!(m2[2], "0/3 · 0 % [0–71 %] 1 task");
    assert!(tag.contains("Over this shape's 1 task that come from BFCL"));
    let tag = read(&out, "tags/bfcl.html");
    assert!(tag.contains("Over this shape's 3 tasks"));
    assert_eq!(
        row(&tag, "values", "m1")[3],
        "8/11 · 73 % [41–96 %] 3 tasks · mean over the tasks 76 % · design effect 1.06"
    );
    let tag = read(&out, "tags/irrelevance.html");
    assert_eq!(
        row(&tag, "values", "m1")[2],
        "– no passing sample with a value to compare"
    );

    // data/matrix.json carries the same pooled figures.
    let matrix: Value = serde_json::from_str(&read(&out, "data/matrix.json")).unwrap();
    let m2 = &matrix["models"][1];
    assert_eq!(m2["model"], "m2");
    let values = &m2["values_by_task"];
    assert_eq!(values["value_accuracy"]["count"], 3);
    assert_eq!(values["value_accuracy"]["of"], 6);
    assert_eq!(values["value_accuracy"]["tasks"], 2);
    assert_eq!(values["value_accuracy"]["design_effect"], 1.0);
    assert_eq!(values["bfcl_style"]["of"], 7);
    assert_eq!(values["conformance"]["passes"], 6);
    assert_eq!(
        m2["tags"]["parallel"]["values_by_task"]["bfcl_style"]["count"],
        3
    );
    let m1 = &matrix["models"][0];
    assert_eq!(m1["values_by_task"]["bfcl_style"]["tasks"], 3);
    assert!(m1["tags"]["enum"].get("values_by_task").is_none());

    // The hand-written task, and a tag only it has, show none of it.
    for page in ["tasks/convert-currency.html", "tags/enum.html"] {
        let html = read(&out, page);
        assert!(!html.contains("BFCL-style"), "{page}");
        assert!(!html.contains("id=\"values\""), "{page}");
    }
}

#[test]
fn a_corpus_without_accept_shows_no_value_accuracy() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let mut pages = 0;
    for (path, bytes) in tree(&out) {
        if !path.ends_with(".html") || path.starts_with("t/") {
            continue;
        }
        pages += 1;
        let html = String::from_utf8(bytes).unwrap();
        assert!(!html.contains("BFCL-style"), "{path}");
        assert!(!html.contains("id=\"values\""), "{path}");
    }
    assert!(pages > 10, "only {pages} pages");
    assert!(!read(&out, "data/matrix.json").contains("values_by_task"));
}
