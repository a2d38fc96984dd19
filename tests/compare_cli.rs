//! Comparing rows and collections (SPEC §9) with the real binary, on one demo collection:
//! the demo's comparison page finds the streaming bug on parallel tasks and nothing elsewhere;
//! `callcheck compare` gates on a regression (exit 1), passes a collection compared with itself
//! (exit 0, every verdict `no evidence`), refuses bad usage (exit 2); `build --baseline` pages
//! are linked, link-checked and byte-identical across rebuilds.

mod site_support;

use scraper::{Html, Selector};
use serde_json::Value;
use site_support::{resolve, tree};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_callcheck");

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tasks")
}

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .arg("--tasks")
        .arg(corpus())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The verdict column of every pooled row `callcheck compare` printed.
fn verdicts(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| {
            l.starts_with("  ") && !l.trim_start().starts_with("scope") && l.contains("%  ")
        })
        .map(|l| {
            if l.contains("no evidence of a difference") {
                "no evidence".to_string()
            } else if l.contains(" worse ") {
                "worse".to_string()
            } else if l.contains(" better ") {
                "better".to_string()
            } else {
                format!("unreadable: {l}")
            }
        })
        .collect()
}

/// Every href/src of the given pages resolves to a file of the site, and every fragment to an
/// id on its target page. Returns the number of links checked.
fn check_links(site: &Path, pages: &[String]) -> usize {
    let files = tree(site);
    let linked = Selector::parse("[href], [src]").unwrap();
    let any_id = Selector::parse("[id]").unwrap();
    let mut checked = 0;
    for page in pages {
        let doc = Html::parse_document(&String::from_utf8_lossy(&files[page]));
        for e in doc.select(&linked) {
            let link = e.value().attr("href").or(e.value().attr("src")).unwrap();
            assert!(!link.contains("://"), "{page}: {link} is not relative");
            let (file, frag) = link.split_once('#').unwrap_or((link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                resolve(page, file).unwrap_or_else(|| panic!("{page}: {link} leaves the site"))
            };
            let bytes = files
                .get(&target)
                .unwrap_or_else(|| panic!("{page}: {link} → {target} does not exist"));
            if !frag.is_empty() {
                let t = Html::parse_document(&String::from_utf8_lossy(bytes));
                assert!(
                    t.select(&any_id)
                        .any(|x| x.value().attr("id") == Some(frag)),
                    "{page}: {link}: no id {frag:?} in {target}"
                );
            }
            checked += 1;
        }
    }
    checked
}

#[test]
fn the_demo_comparison_and_the_compare_gate() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = run(dir, &["demo", "--quiet"]);
    assert!(o.status.success(), "{}", text(&o));
    let site = dir.join("site");
    let tasks = callcheck::task::load(&corpus()).unwrap();
    let parallel: BTreeSet<&str> = tasks
        .iter()
        .filter(|t| t.tags.iter().any(|g| g == "parallel"))
        .map(|t| t.id.as_str())
        .collect();
    assert!(parallel.len() >= 3, "{parallel:?}");

    // The demo's rows mock-good and mock-good-stream serve one model id: compared without
    // being asked, attributed to the one setting that differs, worse on parallel tasks only.
    let doc: Value =
        serde_json::from_slice(&std::fs::read(site.join("data/compare.json")).unwrap()).unwrap();
    let comparisons = doc["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 1, "{doc:#}");
    let c = &comparisons[0];
    assert_eq!(c["page"], "compare/mock-good--mock-good-stream.html");
    assert_eq!(
        (c["a"].as_str(), c["b"].as_str()),
        (Some("mock-good"), Some("mock-good-stream"))
    );
    assert_eq!(c["why"], "same model id");
    assert_eq!(
        c["settings"],
        serde_json::json!([{"setting": "stream", "a": "false", "b": "true"}])
    );
    for t in c["tags"].as_array().unwrap() {
        // A tag pools its tasks: worse when they are all parallel, no evidence when none is;
        // a tag mixing both (empty-args, tight-budget) may show the collapse or not.
        let members: Vec<&str> = tasks
            .iter()
            .filter(|x| {
                x.tags
                    .iter()
                    .any(|g| Some(g.as_str()) == t["scope"].as_str())
            })
            .map(|x| x.id.as_str())
            .collect();
        let n_parallel = members.iter().filter(|m| parallel.contains(*m)).count();
        let want = if n_parallel == members.len() {
            "worse"
        } else if n_parallel == 0 {
            "no_evidence"
        } else {
            assert!(
                ["worse", "no_evidence"].contains(&t["direction"].as_str().unwrap()),
                "{t}"
            );
            continue;
        };
        assert_eq!(t["direction"], want, "{t}");
        if t["scope"] == "parallel" {
            assert!(t["interval"]["upper"].as_f64().unwrap() < 0.0, "{t}");
            assert!(t["holm_p"].as_f64().unwrap() < 0.05, "{t}");
        }
    }
    for cell in c["cells"].as_array().unwrap() {
        let task = cell["task"].as_str().unwrap();
        let want = if parallel.contains(task) {
            "worse"
        } else {
            "no_evidence"
        };
        assert_eq!(cell["direction"], want, "{cell}");
        if parallel.contains(task) {
            assert!(cell["interval"]["upper"].as_f64().unwrap() < 0.0, "{cell}");
        }
    }
    let gained: Vec<&Value> = c["labels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["label"] == "parallel_collapse")
        .collect();
    assert_eq!(gained.len(), 1, "{}", c["labels"]);
    assert!(gained[0]["b"].as_u64().unwrap() >= 5 * parallel.len() as u64 - 2);

    // The page: the verdict and interval of the parallel tag, transcripts linked both sides,
    // linked from the index, both model pages and each task page.
    let page =
        std::fs::read_to_string(site.join("compare/mock-good--mock-good-stream.html")).unwrap();
    assert!(page.contains("<th>parallel</th>"), "no parallel row");
    assert!(page.contains("−100.0 points [−100.0, −100.0]"), "{page}");
    assert!(
        page.contains("This page shows 19 pooled comparisons"),
        "{page}"
    );
    assert!(page.contains("href=\"../t/mock-good-stream/weather-parallel-3/"));
    assert!(page.contains("href=\"../t/mock-good/weather-parallel-3/"));
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(index.contains("href=\"compare/mock-good--mock-good-stream.html\""));
    for m in ["mock-good", "mock-good-stream"] {
        let p = std::fs::read_to_string(site.join(format!("models/{m}.html"))).unwrap();
        assert!(
            p.contains("href=\"../compare/mock-good--mock-good-stream.html\""),
            "models/{m}.html"
        );
    }
    let sloppy = std::fs::read_to_string(site.join("models/mock-sloppy.html")).unwrap();
    assert!(
        !sloppy.contains("compare/"),
        "mock-sloppy is in no comparison"
    );
    for t in &tasks {
        let p = std::fs::read_to_string(site.join(format!("tasks/{}.html", t.id))).unwrap();
        assert!(
            p.contains(&format!(
                "href=\"../compare/mock-good--mock-good-stream.html#t~{}\"",
                t.id
            )),
            "tasks/{}.html",
            t.id
        );
    }

    // The gate: a sloppy model against a good one is a regression; without --fail-on it only
    // reports.
    let o = run(
        dir,
        &[
            "compare",
            "mock-good",
            "mock-sloppy",
            "--fail-on",
            "regression",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("REGRESSION"), "{out}");
    assert!(out.contains("Holm-corrected"), "{out}");
    assert!(verdicts(&out).iter().any(|v| v == "worse"), "{out}");
    let o = run(dir, &["compare", "mock-good", "mock-sloppy"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The streaming bug fails the gate too: only on parallel calls.
    let o = run(
        dir,
        &[
            "compare",
            "mock-good",
            "mock-good-stream",
            "--fail-on",
            "regression",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("differs: stream: false → true"), "{out}");
    // With 11 of 68 tasks parallel, the collapse also shows pooled over all tasks and over the
    // multi-tool tag (whose tasks are all parallel).
    assert!(
        out.contains(
            "3 significantly worse: mock-good-stream overall; mock-good-stream multi-tool; mock-good-stream parallel"
        ),
        "{out}"
    );

    // A collection against itself, as a runs/ tree and as the published samples.csv: nothing
    // differs, every verdict says so, the gate passes.
    for baseline in ["runs", "site/data/samples.csv", "site"] {
        let o = run(
            dir,
            &["compare", "--baseline", baseline, "--fail-on", "regression"],
        );
        assert_eq!(o.status.code(), Some(0), "{baseline}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        let v = verdicts(&out);
        assert_eq!(v.len(), 4 * 19, "{baseline}: {out}");
        assert!(v.iter().all(|x| x == "no evidence"), "{baseline}: {out}");
        assert!(out.contains("no significant regression"), "{out}");
    }

    // Usage errors: exit 2 with a message naming the fix.
    for (args, needle) in [
        (vec!["compare", "mock-good"], "give two rows"),
        (
            vec!["compare", "mock-good", "nope"],
            "no row named \"nope\"",
        ),
        (vec!["compare", "a", "b", "--baseline", "runs"], "not both"),
        (
            vec!["compare", "--baseline", "missing"],
            "no such file or folder",
        ),
        (vec!["compare", "--fail-on", "everything"], "everything"),
    ] {
        let o = run(dir, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(needle),
            "{args:?}: {}",
            text(&o)
        );
    }

    // build --baseline: a page per row, linked; rebuilt, byte for byte the same.
    let baseline = dir.join("published.csv");
    std::fs::copy(site.join("data/samples.csv"), &baseline).unwrap();
    let b = baseline.to_str().unwrap();
    let o = run(
        dir,
        &[
            "build",
            "--out",
            "site2",
            "--baseline",
            b,
            "--compare",
            "mock-sloppy:mock-good",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let first = tree(&dir.join("site2"));
    let pages: Vec<String> = first
        .keys()
        .filter(|k| k.starts_with("compare/"))
        .cloned()
        .collect();
    assert_eq!(
        pages,
        [
            "compare/baseline/mock-flaky-stream.html",
            "compare/baseline/mock-good-stream.html",
            "compare/baseline/mock-good.html",
            "compare/baseline/mock-sloppy.html",
            "compare/mock-good--mock-good-stream.html",
            "compare/mock-sloppy--mock-good.html",
        ]
    );
    let base_page = String::from_utf8_lossy(&first["compare/baseline/mock-good.html"]).into_owned();
    assert!(base_page.contains("Not recorded: the baseline was read from a samples.csv"));
    assert!(
        !base_page.contains("cmp-worse"),
        "a collection against itself"
    );
    let mut linked: Vec<String> = pages.clone();
    linked.extend([
        "index.html".to_string(),
        "models/mock-good.html".to_string(),
    ]);
    linked.extend(tasks.iter().map(|t| format!("tasks/{}.html", t.id)));
    let n = check_links(&dir.join("site2"), &linked);
    assert!(n > 2000, "only {n} links checked");
    let o = run(
        dir,
        &[
            "build",
            "--out",
            "site3",
            "--baseline",
            b,
            "--compare",
            "mock-sloppy:mock-good",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let second = tree(&dir.join("site3"));
    assert_eq!(
        first.keys().collect::<Vec<_>>(),
        second.keys().collect::<Vec<_>>()
    );
    for (k, v) in &first {
        assert!(second[k] == *v, "{k} differs between two builds");
    }
    // A --compare row that does not exist is named.
    let o = run(
        dir,
        &["build", "--out", "site4", "--compare", "mock-good:nope"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no row named \"nope\""));
}
