//! `callcheck build` on the checked-in fixture tree (tests/fixtures/runs, with its own tasks in
//! tests/fixtures/runs-tasks so the corpus can change without breaking these): snapshots of the
//! pages, what build reports, skipped inputs, changed tasks, the exports, the interval flag, the
//! changes page and the swap into place.

use crate::support::site::*;
use std::path::Path;

fn normalise(s: &str, root: &Path) -> String {
    // Tasks first: the runs path is a prefix of it.
    s.replace(&fixture_tasks().display().to_string(), "[TASKS]")
        .replace(&fixture_runs().display().to_string(), "[RUNS]")
        .replace(&root.display().to_string(), "[OUT]")
}

#[test]
fn pages_match_their_snapshots() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    let err = build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    insta::assert_snapshot!("build_stderr", normalise(&err, tmp.path()));
    insta::assert_snapshot!("index", read(&out, "index.html"));
    insta::assert_snapshot!("model_beta", read(&out, "models/beta.html"));
    insta::assert_snapshot!("tag_enum", read(&out, "tags/enum.html"));
    // One page per run: sample 001's missing_required marks the failing object in place, sample
    // 002's stream was cut mid-way (a transport error, the partial event reported).
    insta::assert_snapshot!(
        "run_beta_convert_currency",
        read(&out, "t/beta/convert-currency/r0001/index.html")
    );
    // The permalink: a shared link's title and summary, and the way to the sample's section.
    insta::assert_snapshot!(
        "permalink_missing_required",
        read(&out, "t/beta/convert-currency/r0001/001.html")
    );
}

#[test]
fn build_reports_what_it_read_and_skipped_and_flags_changed_tasks() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    let err = build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    assert!(err.contains("read 4 tasks"), "{err}");
    assert!(
        err.contains("read 12 run directories") && err.contains("36 samples, 3 models"),
        "{err}"
    );
    assert!(
        err.contains(
            "skipped alpha/retired-task/r0001: task \"retired-task\" is not in the task corpus"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "skipped beta/convert-currency/r0002: cell.json has format_version 2, newer than the 1"
        ),
        "{err}"
    );
    assert!(
        !err.contains(".tmp-r0002"),
        "unfinished writes are ignored silently: {err}"
    );
    assert!(err.contains("task contact-card changed since 1 of its run was collected"));
    let last = err.lines().last().unwrap();
    assert!(
        last.contains("36 samples (83.9 KB of transcripts) in 11 cells from 12 runs (17 passed, 17 failed, 2 transport errors: no complete chat completion received); 2 skipped"),
        "{last}"
    );

    let index = read(&out, "index.html");
    assert!(index.contains("2 inputs skipped"));
    assert!(index.contains("<code>alpha/retired-task/r0001</code>"));
    assert!(!out.join("t/alpha/retired-task").exists());
    // The changed task is flagged on its page, its cells and its transcripts.
    assert!(read(&out, "tasks/contact-card.html").contains("This task's file changed"));
    assert!(
        read(&out, "t/beta/contact-card/r0001/index.html")
            .contains("The task file changed after this sample was collected")
    );
    assert!(!read(&out, "t/alpha/contact-card/r0001/index.html").contains("The task file changed"));
    // Site furniture.
    for f in [
        ".nojekyll",
        "404.html",
        "style.css",
        "sort.js",
        "labels/index.html",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    // No changes page without a previous build.
    assert!(!out.join("changes.html").exists());
}

#[test]
fn cells_count_errors_apart_and_say_when_there_are_too_few_samples() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let m: serde_json::Value = serde_json::from_str(&read(&out, "data/matrix.json")).unwrap();
    let cell = |model: &str, task: &str| {
        m["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["model"] == model && c["task"] == task)
            .unwrap_or_else(|| panic!("no cell {model} {task}"))
            .clone()
    };
    // gamma × convert-currency: wrong_tool, no_call and a 503 → 0/2, one error apart.
    let c = cell("gamma", "convert-currency");
    assert_eq!(
        (c["k"].as_u64(), c["scored"].as_u64(), c["errors"].as_u64()),
        (Some(3), Some(2), Some(1))
    );
    assert_eq!(
        c["label_counts"],
        serde_json::json!({"no_call": 1, "wrong_tool": 1})
    );
    // alpha × convert-currency has two runs: 3 + 2 samples.
    let c = cell("alpha", "convert-currency");
    assert_eq!(c["runs"], serde_json::json!(["r0001", "r0002"]));
    // Every pass of a call task has a gold value to compare with…
    assert_eq!(c["value_compared"], c["passes"]);
    // BFCL-style accuracy there counts the passes whose values match, out of every scored sample.
    let matches = c["value_matches"].as_u64().unwrap();
    assert_eq!(c["value_accuracy"]["count"], matches);
    assert_eq!(c["value_accuracy"]["of"], c["value_compared"]);
    assert_eq!(c["bfcl_style"]["count"], matches);
    assert_eq!(c["bfcl_style"]["of"], c["scored"]);
    let alpha = c;
    // …and no pass of a no-call task does: its value match reads "–", not "0/n".
    let c = cell("gamma", "no-tool-greeting");
    assert!(c["passes"].as_u64().unwrap() > 0);
    assert_eq!(c["value_compared"], 0);
    assert_eq!(c["value_matches"], 0);
    // No value to compare: value accuracy has no rate, and BFCL-style accuracy is the pass rate.
    assert_eq!(c["value_accuracy"]["rate"], serde_json::Value::Null);
    assert_eq!(c["bfcl_style"]["count"], c["passes"]);
    assert_eq!(c["bfcl_style"]["of"], c["scored"]);
    assert_eq!(c["bfcl_style"]["interval"], c["interval"]);
    let page = read(&out, "models/gamma.html");
    let row = page
        .split("<tr id=\"t~no-tool-greeting\">")
        .nth(1)
        .and_then(|r| r.split("</tr>").next())
        .expect("gamma's page has a no-tool-greeting row");
    assert!(row.contains("<td>–</td>"), "{row}");
    let c = alpha;
    assert_eq!(
        (c["passes"].as_u64(), c["scored"].as_u64()),
        (Some(3), Some(5))
    );
    assert_eq!(c["flaky"], true);
    // beta × no-tool-greeting: 0/5 is broken (Wilson upper 0.4345 < 0.5).
    let c = cell("beta", "no-tool-greeting");
    assert_eq!(c["verdict"], "broken");
    assert_eq!(c["interval"]["upper"].as_f64(), Some(0.4345));
    // alpha × no-tool-greeting: 3/3 is only "uncertain" (lower 0.4385).
    let c = cell("alpha", "no-tool-greeting");
    assert_eq!(c["verdict"], "uncertain");
    assert_eq!(c["interval"]["lower"].as_f64(), Some(0.4385));
    assert_eq!(c["all_passed"], true);

    let index = read(&out, "index.html");
    // Too few samples is said in words; the cell never shows a bare rate.
    assert!(
        index.contains("2/2 · 100 % [34–100 %]"),
        "gamma × no-tool-greeting"
    );
    assert!(index.contains("only 2 scored"));
    assert!(!index.contains(">100 %<"));
    assert!(index.contains("+1 error"));
    // Verdicts in words, next to the colour.
    assert!(index.contains("<b class=\"vt\">broken</b>"));

    // Measured reroll success: beta's spurious_call cell never passed (0 of 4 others, ×5).
    let labels = m["labels"].as_array().unwrap();
    let spurious = labels
        .iter()
        .find(|l| l["label"] == "spurious_call")
        .unwrap();
    assert_eq!(spurious["retry"], "fallback");
    // Its interval counts the 4 other samples once, not the 20 pairs: Clopper–Pearson on 0/4
    // (upper 1 − 0.025^(1/4) = 0.6024), where 0/20 would read [0, 0.168].
    assert_eq!(
        spurious["reroll_success"]["beta"],
        serde_json::json!({"failures": 5, "rerolls": 20, "rerolls_passed": 0, "rate": 0.0,
            "interval": {"lower": 0.0, "upper": 0.6024}})
    );
    // alpha's type_coercion sits in a cell where 3 of the 4 other samples passed.
    let tc = labels
        .iter()
        .find(|l| l["label"] == "type_coercion")
        .unwrap();
    assert_eq!(tc["reroll_success"]["alpha"]["rate"].as_f64(), Some(0.75));
}

#[test]
fn clopper_pearson_is_selectable() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(
        &fixture_tasks(),
        &fixture_runs(),
        &out,
        &["--interval", "clopper-pearson"],
        &[],
    );
    let m: serde_json::Value = serde_json::from_str(&read(&out, "data/matrix.json")).unwrap();
    assert_eq!(m["interval"]["method"], "clopper-pearson");
    let c = m["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["model"] == "alpha" && c["task"] == "no-tool-greeting")
        .unwrap();
    // 3/3 at 95 %: [0.2924, 1].
    assert_eq!(c["interval"]["lower"].as_f64(), Some(0.2924));
    assert_eq!(c["interval"]["upper"].as_f64(), Some(1.0));
    assert!(read(&out, "index.html").contains("Clopper–Pearson"));
}

#[test]
fn exports_are_complete_and_csv_is_quoted() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let csv = std::fs::read(out.join("data/samples.csv")).unwrap();
    let mut r = csv::Reader::from_reader(csv.as_slice());
    assert_eq!(
        r.headers().unwrap().iter().collect::<Vec<_>>(),
        [
            "permalink",
            "model",
            "task",
            "run",
            "sample",
            "outcome",
            "label",
            "stage",
            "detail",
            "value_match",
            "ttfb_ms",
            "total_ms",
            "completion_tokens",
            "round",
            "parent",
            "feedback",
            "visible"
        ]
    );
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
    assert_eq!(rows.len(), 36);
    // alpha/contact-card/r0001/000: meta.json has ttfb_ms 95.0 and total_ms 357.0; the
    // response's usage says 15 completion tokens.
    assert_eq!(
        rows[0].iter().skip(10).collect::<Vec<_>>(),
        ["95.0", "357.0", "15", "0", "", "", ""]
    );
    let mut details_with_commas = 0;
    for row in &rows {
        assert_eq!(row.len(), 17);
        // No feedback round in these runs: every sample is of round 0.
        assert_eq!((&row[13], &row[14], &row[15]), ("0", "", ""));
        // Times from meta.json and tokens from the response's usage, or empty when absent.
        for col in 10..13 {
            assert!(
                row[col].is_empty() || row[col].parse::<f64>().is_ok(),
                "column {col}: {:?}",
                &row[col]
            );
        }
        assert!(out.join(&row[0]).is_file(), "{} has no page", &row[0]);
        // value_match is set on passes only (empty where there was no gold value to compare).
        assert!(&row[5] == "pass" || row[9].is_empty(), "{:?}", row);
        // `visible` says of a failure or an error whether a router could tell; of a pass,
        // nothing. A transport error and a parse- or schema-stage failure are always visible,
        // a semantic-stage one never (SPEC §11).
        let want: &[&str] = match (&row[5], &row[7]) {
            ("pass", _) => &[""],
            ("error", _) | (_, "parse" | "schema") => &["true"],
            (_, "semantic") => &["false"],
            _ => &["true", "false"],
        };
        assert!(want.contains(&&row[16]), "{:?}", row);
        assert_eq!(
            row[0],
            format!("t/{}/{}/{}/{}.html", &row[1], &row[2], &row[3], &row[4])
        );
        if row[8].contains(',') || row[8].contains('"') {
            details_with_commas += 1;
        }
        // The permalink sends the reader to the sample's section of its run's page (a failed or
        // errored sample's to its head, its one fail anchor; a pass has none), without a script.
        let stub = read(&out, &row[0]);
        let anchor = if &row[5] == "pass" { "s" } else { "fail" };
        assert!(
            stub.contains(&format!("url=index.html#{anchor}-{}\"", &row[4])),
            "{}: {stub}",
            &row[0]
        );
        assert!(!stub.contains("<script"), "{}: {stub}", &row[0]);
        let run_page = read(
            &out,
            &format!("t/{}/{}/{}/index.html", &row[1], &row[2], &row[3]),
        );
        assert_eq!(
            run_page.matches(&format!("id=\"s-{}\"", &row[4])).count(),
            1
        );
        let anchors = run_page
            .matches(&format!("id=\"fail-{}\"", &row[4]))
            .count();
        assert_eq!(anchors, usize::from(&row[5] != "pass"), "{}", &row[0]);
        match &row[5] {
            "fail" => assert!(!row[6].is_empty() && !row[7].is_empty()),
            "error" => assert_eq!((&row[6], &row[7]), ("", "transport")),
            "pass" => assert_eq!((&row[6], &row[7]), ("", "")),
            o => panic!("outcome {o}"),
        }
    }
    assert!(
        details_with_commas > 0,
        "the fixture should exercise quoting"
    );

    let manifest: serde_json::Value =
        serde_json::from_str(&read(&out, "data/manifest.json")).unwrap();
    assert_eq!(manifest["callcheck_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(manifest["scoring_rules_sha256"].as_str().unwrap().len(), 64);
    // One hash per run folder read (the 12 that were not skipped), each the sha256 of the listing
    // docs/data.md tells a reader to compute with sha256sum: recomputed here the same way.
    let runs = manifest["runs"].as_object().unwrap();
    assert_eq!(runs.len(), 12);
    for (run, sha) in runs {
        let o = std::process::Command::new("bash")
            .arg("-c")
            .arg("find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum")
            .current_dir(fixture_runs().join(run))
            .output()
            .unwrap();
        let got = String::from_utf8_lossy(&o.stdout);
        assert_eq!(got.split_whitespace().next(), sha.as_str(), "{run}");
    }
    assert!(manifest["tasks"]["contact-card"].as_str().is_some());
}

#[test]
fn a_second_build_lists_what_changed_and_carries_publisher_files() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    std::fs::write(out.join("CNAME"), "callcheck.example.org\n").unwrap();
    // Pretend the previous build labelled two samples differently.
    let csv = read(&out, "data/samples.csv");
    let csv = csv
        .replace(
            "t/alpha/contact-card/r0001/000.html,alpha,contact-card,r0001,000,pass,,,",
            "t/alpha/contact-card/r0001/000.html,alpha,contact-card,r0001,000,fail,truncation,parse,",
        )
        .replace(
            "t/gamma/no-tool-greeting/r0001/001.html,gamma,no-tool-greeting,r0001,001,pass,,,",
            "t/gamma/no-tool-greeting/r0001/001.html,gamma,no-tool-greeting,r0001,001,fail,truncation,parse,",
        );
    let csv = format!("{csv}t/gone/x/r1/000.html,gone,x,r1,000,pass,,,,\r\n");
    std::fs::write(out.join("data/samples.csv"), csv).unwrap();

    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let changes = read(&out, "changes.html");
    assert!(
        changes.contains("2 samples changed outcome, 0 new, 1 no longer present"),
        "{changes}"
    );
    assert!(
        changes.contains("<td>truncation</td><td>pass</td><td>2</td>"),
        "{changes}"
    );
    assert!(changes.contains("href=\"t/alpha/contact-card/r0001/000.html\""));
    assert!(read(&out, "index.html").contains("href=\"changes.html\""));
    // Publisher files survive. (A file nobody's build wrote is refused: tests/it/destroy_nothing.rs.)
    assert_eq!(read(&out, "CNAME"), "callcheck.example.org\n");
    // No temporary folders are left beside the site.
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "site")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_failed_build_leaves_the_previous_site_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let before = tree(&out);

    // A broken task corpus: the build fails, naming the file, and the site is untouched.
    let tasks = tmp.path().join("tasks");
    copy_tree(&fixture_tasks(), &tasks);
    std::fs::write(tasks.join("broken.json"), "{\"id\": \"broken\"").unwrap();
    let o = build(&tasks, &fixture_runs(), &out, &[], &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("broken.json"), "{err}");
    assert_eq!(tree(&out), before);

    // A folder that is not a callcheck site is never replaced.
    let other = tmp.path().join("docs");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    let o = build(&fixture_tasks(), &fixture_runs(), &other, &[], &[]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a callcheck site"));
    assert_eq!(read(&other, "notes.txt"), "mine");
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
}

#[test]
fn unreadable_runs_are_skipped_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    std::fs::write(
        runs.join("gamma/weather-parallel-3/r0001/cell.json"),
        "not json",
    )
    .unwrap();
    std::fs::remove_file(runs.join("alpha/weather-parallel-3/r0001/samples/001/response.json"))
        .unwrap();
    let out = tmp.path().join("site");
    let err = build_ok(&fixture_tasks(), &runs, &out, &[], &[]);
    assert!(
        err.contains("skipped gamma/weather-parallel-3/r0001: cell.json is not JSON"),
        "{err}"
    );
    assert!(
        err.contains("skipped alpha/weather-parallel-3/r0001/samples/001: sample not readable"),
        "{err}"
    );
    assert!(read(&out, "index.html").contains("4 inputs skipped"));
    assert!(
        !out.join("t/alpha/weather-parallel-3/r0001/001.html")
            .exists()
    );
    assert!(
        out.join("t/alpha/weather-parallel-3/r0001/000.html")
            .exists()
    );
}

#[cfg(unix)]
#[test]
fn a_rebuild_reuses_identical_pages_and_rewrites_changed_ones() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let fresh = tree(&out);
    let same = "t/alpha/contact-card/r0001/000.html";
    let edited = "t/gamma/weather-parallel-3/r0001/000.html";
    let ino_same = std::fs::metadata(out.join(same)).unwrap().ino();
    // An older build's page for this sample said something else.
    std::fs::write(out.join(edited), "stale").unwrap();
    let ino_edited = std::fs::metadata(out.join(edited)).unwrap().ino();

    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let again = tree(&out);
    // Nothing was re-labelled, so no changes page: the rebuild is byte for byte a fresh build…
    assert!(!out.join("changes.html").exists());
    assert_eq!(fresh.len(), again.len());
    assert!(fresh == again, "a rebuild differs from a fresh build");
    assert_eq!(
        fresh
            .keys()
            .filter(|k| k.starts_with("t/") && !k.ends_with("/index.html"))
            .count(),
        36
    );
    // …the identical page was kept (same inode), the stale one replaced.
    assert_eq!(std::fs::metadata(out.join(same)).unwrap().ino(), ino_same);
    assert_ne!(
        std::fs::metadata(out.join(edited)).unwrap().ino(),
        ino_edited
    );
}

#[test]
fn a_preflight_finding_is_shown_as_the_servers_on_the_model_page() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture_runs(), &runs);
    let cell = runs.join("alpha/contact-card/r0001/cell.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cell).unwrap()).unwrap();
    // Written in another order than collect probes in: the page puts them in probe order.
    c["server"]["preflight"] = serde_json::json!({
        "tools_in_prompt": {"ok": false, "status": 200,
            "detail": "prompt_tokens 37 with the tool, 37 without: the server drops the tools <b>"},
        "models": {"ok": true, "status": 200, "detail": "GET /models answered"},
    });
    std::fs::write(&cell, serde_json::to_vec_pretty(&c).unwrap()).unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &runs, &out, &[], &[]);
    let page = read(&out, "models/alpha.html");
    let table = page
        .split("id=\"preflight\"")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .expect("alpha's page has a preflight table");
    let models = table
        .find("<tr class=\"s-pass\"><td>models</td><td>ok</td><td>200</td>")
        .expect("the models check, ok");
    let tools = table
        .find("<tr class=\"s-fail\"><td>tools_in_prompt</td><td>finding</td><td>200</td><td>prompt_tokens 37 with the tool, 37 without: the server drops the tools &#60;b&#62;</td>")
        .expect("the tools check, a finding, its detail escaped");
    assert!(models < tools, "{table}");
    // The server's own fields are listed apart, without the preflight.
    assert!(page.contains("<th>version</th><td>0.11.0</td>"), "{page}");
}

/// The same cells at `per` samples per outcome: per task, `per` gold replies and `per` of each
/// of the first two failure labels the task can have, for three rows over the fixture tasks.
/// Returns the number of cells written and of (cell, label) pairs among them.
fn cells_at(dir: &Path, per: usize) -> (usize, usize) {
    use callcheck::synth::{ModelRow, RunSpec, Wire, failure_menu, server_info, write_run};
    let tasks = callcheck::task::load(&fixture_tasks()).unwrap();
    let (mut cells, mut pairs) = (0, 0);
    for i in 0..3 {
        let row = ModelRow {
            name: format!("row-{i}"),
            served: format!("org/row-{i}"),
            stream: i == 1,
        };
        for task in &tasks {
            let mut wires = vec![Wire::Reply(callcheck::corrupt::gold(task)); per];
            for (_, replies) in failure_menu(task).iter().take(2) {
                wires.extend(std::iter::repeat_n(Wire::Reply(replies[0].clone()), per));
                pairs += 1;
            }
            write_run(
                &dir.join("runs"),
                RunSpec {
                    model: &row,
                    task,
                    task_sha256: &task.sha256,
                    run_id: "r0001",
                    server: server_info(&row.served),
                    seed: i,
                },
                &wires,
            )
            .unwrap();
            cells += 1;
        }
    }
    (cells, pairs)
}

#[test]
fn summary_pages_do_not_grow_with_k() {
    let tmp = tempfile::tempdir().unwrap();
    let (small, big) = (tmp.path().join("k3"), tmp.path().join("k30"));
    let (cells, pairs) = cells_at(&small, 3);
    assert_eq!(cells_at(&big, 30), (cells, pairs));
    build_ok(
        &fixture_tasks(),
        &small.join("runs"),
        &small.join("site"),
        &[],
        &[],
    );
    build_ok(
        &fixture_tasks(),
        &big.join("runs"),
        &big.join("site"),
        &[],
        &[],
    );
    let size = |site: &Path, page: &str| read(site, page).len() as i64;
    let (a, b) = (small.join("site"), big.join("site"));
    // Ten times the samples: the per-sample pages grow (a sanity check that k really changed)...
    assert!(tree(&b).len() > tree(&a).len() + 9 * cells);
    // ...and the summary pages do not: every cell has the same outcome groups at both k, so the
    // only differences are a count's digits per group (`✓✓✓` against `✓×30`, "3 of 9" against
    // "30 of 90, +27 more"). One mark per sample would add tens of bytes per extra sample: 27 ×
    // 3 extra samples per cell, far above this bound.
    let mut pages = vec!["index.html".to_string(), "labels/index.html".into()];
    pages.extend(
        callcheck::taxonomy::Label::ALL
            .iter()
            .map(|l| format!("labels/{}.html", l.as_str())),
    );
    pages.extend(["models/row-0.html".into(), "models/row-1.html".into()]);
    for page in &pages {
        let (x, y) = (size(&a, page), size(&b, page));
        assert!(
            (y - x).abs() <= 24 * cells as i64,
            "{page}: {x} bytes at k = 9, {y} at k = 90 ({cells} cells)"
        );
    }
    // No per-sample transcript link on the index at any k, one link per cell to its run page;
    // the task page still links them all.
    for site in [&a, &b] {
        let index = read(site, "index.html");
        assert_eq!(index.matches("href=\"t/").count(), cells);
        assert_eq!(index.matches("<a class=\"dots\" href=\"t/").count(), cells);
        assert!(index.contains("id=\"c~row-0~convert-currency\""));
    }
    let task = read(&b, "tasks/convert-currency.html");
    assert_eq!(
        task.matches("href=\"../t/row-0/convert-currency/").count(),
        90
    );
    // A label page gives at most three transcripts per cell and says how many more there are.
    let labels: Vec<String> = callcheck::taxonomy::Label::ALL
        .iter()
        .map(|l| read(&b, &format!("labels/{}.html", l.as_str())))
        .collect();
    let links: usize = labels.iter().map(|p| p.matches("#fail-").count()).sum();
    let listed: usize = labels.iter().map(|p| p.matches("+27 more").count()).sum();
    assert_eq!(links, 3 * listed);
    assert_eq!(listed, pairs);
}
