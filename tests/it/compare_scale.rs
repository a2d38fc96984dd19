//! Comparison pages grow with the tasks they compare, not with k (SPEC §9 "Scale"): above 12
//! samples a side's marks are one per outcome group with its count, each linked to the group's
//! first sample, as the other summary pages group them. The real binary builds two synthetic
//! collections of the same cells at k = 15 and k = 30.

use crate::support::site::{build_ok, synth_tree};
use callcheck::synth::SynthOpts;
use std::collections::BTreeMap;
use std::path::Path;

/// 4 rows serving 2 model ids (rows 0 and 2 serve one, 1 and 3 the other: two comparisons) ×
/// 8 tasks × k.
const MODELS: usize = 4;
const TASKS: usize = 8;

/// Builds the collection at `k` into `dir/site` and returns the site's folder.
fn site_at(dir: &Path, k: usize) -> std::path::PathBuf {
    let synth = dir.join(format!("k{k}"));
    let n = synth_tree(
        &synth,
        &SynthOpts {
            samples: MODELS * TASKS * k,
            models: MODELS,
            k,
            seed: 11,
            served: Some(2),
        },
    );
    assert_eq!(n, MODELS * TASKS * k);
    let out = synth.join("site");
    build_ok(&synth.join("tasks"), &synth.join("runs"), &out, &[], &[]);
    out
}

fn compare_pages(site: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(site.join("compare"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(e.path()).unwrap())
        })
        .collect()
}

/// Per (model, task): each outcome (`pass`, `error` or the label) with its count and its first
/// sample's link from a page one folder deep, as data/samples.csv lists the samples (in key
/// order).
type Groups = BTreeMap<(String, String), BTreeMap<String, (u64, String)>>;

fn groups_from_csv(site: &Path) -> Groups {
    let mut r = csv::Reader::from_path(site.join("data/samples.csv")).unwrap();
    let mut out: Groups = BTreeMap::new();
    for row in r.records() {
        let row = row.unwrap();
        let (model, task, run, sample, kind, label) =
            (&row[1], &row[2], &row[3], &row[4], &row[5], &row[6]);
        let outcome = if kind == "fail" { label } else { kind };
        let href = format!(
            "../t/{model}/{task}/{run}/index.html#{}-{sample}",
            if kind == "pass" { "s" } else { "fail" }
        );
        out.entry((model.to_string(), task.to_string()))
            .or_default()
            .entry(outcome.to_string())
            .or_insert((0, href))
            .0 += 1;
    }
    out
}

/// The contents of the `<td data-l="{side}'s samples">` of the row of `task`.
fn marks_of<'a>(page: &'a str, task: &str, side: &str) -> &'a str {
    let row_at = page
        .find(&format!("<tr id=\"t~{task}\""))
        .unwrap_or_else(|| panic!("no row for {task}"));
    let row = &page[row_at..];
    let row = &row[..row.find("</tr>").unwrap()];
    let open = format!("<td data-l=\"{side}'s samples\">");
    let at = row.find(&open).unwrap() + open.len();
    &row[at..at + row[at..].find("</td>").unwrap()]
}

/// The grouped marks of a side: (outcome, count, href), from the markup
/// `<a class="mf" href="…" title="{outcome} × {n}, the first linked">G×{n}</a>`.
fn parse_groups(marks: &str) -> Vec<(String, u64, String)> {
    let mut out = Vec::new();
    for part in marks.split("<a class=\"").skip(1) {
        let href_at = part.find("href=\"").unwrap() + 6;
        let href = &part[href_at..href_at + part[href_at..].find('"').unwrap()];
        let title_at = part.find("title=\"").unwrap() + 7;
        let title = &part[title_at..title_at + part[title_at..].find('"').unwrap()];
        let (outcome, rest) = title.split_once(" × ").unwrap();
        let n: u64 = rest
            .strip_suffix(", the first linked")
            .unwrap()
            .parse()
            .unwrap();
        let text = &part[part.find('>').unwrap() + 1..part.find("</a>").unwrap()];
        assert!(
            text.ends_with(&format!("×{n}")),
            "the mark reads its count: {text} for {n}"
        );
        out.push((outcome.to_string(), n, href.replace("&amp;", "&")));
    }
    out
}

#[test]
fn a_comparison_page_grows_with_tasks_not_samples_and_links_each_group() {
    let tmp = tempfile::tempdir().unwrap();
    let (s15, s30) = (site_at(tmp.path(), 15), site_at(tmp.path(), 30));
    let (p15, p30) = (compare_pages(&s15), compare_pages(&s30));
    // Rows of one model id are paired as a star: model-02 against model-00, model-03 against
    // model-01.
    assert_eq!(
        p30.keys().collect::<Vec<_>>(),
        ["model-00--model-02.html", "model-01--model-03.html"]
    );
    assert_eq!(
        p15.keys().collect::<Vec<_>>(),
        p30.keys().collect::<Vec<_>>()
    );
    for (name, page30) in &p30 {
        let page15 = &p15[name];
        // No sample has a mark of its own above 12 samples per side.
        for page in [page15, page30] {
            assert_eq!(page.matches("class=\"d o-").count(), 0, "{name}");
        }
        // What does change with k: the counts' digits, the rates and intervals (a few dozen
        // bytes per task), and the outcome groups drawn: at most one per outcome (pass, 11
        // labels, error) per task and side, whatever k is. One mark per sample would add
        // 2 × 8 × 15 marks of over 150 bytes.
        let groups = |p: &str| p.matches("<a class=\"m").count() as i64;
        let (g15, g30) = (groups(page15), groups(page30));
        for g in [g15, g30] {
            assert!(g <= (TASKS as i64) * 2 * 13, "{name}: {g} groups");
        }
        let longest = [page15, page30]
            .iter()
            .flat_map(|p| p.split("<a class=\"m").skip(1))
            .map(|g| g.find("</a>").unwrap() + "<a class=\"m</a>".len())
            .max()
            .unwrap() as i64;
        let (a, b) = (page15.len() as i64, page30.len() as i64);
        let bound = (g30 - g15).abs() * longest + (TASKS as i64) * 64;
        assert!(
            (b - a).abs() <= bound,
            "{name}: {a} bytes at k = 15, {b} at k = 30, more than {bound} apart ({g15} and {g30} groups)"
        );
        assert!(
            bound < 2 * 8 * 15 * 150 / 2,
            "{name}: the bound {bound} is small"
        );
        println!(
            "{name}: {a} bytes at k = 15 ({g15} groups), {b} bytes at k = 30 ({g30} groups), bound {bound}"
        );
    }

    // Each group links its first sample, with the count data/samples.csv gives, in the other
    // pages' order (passes, labels in taxonomy order, errors); and the link's target is there.
    for site in [&s15, &s30] {
        let csv = groups_from_csv(site);
        for (name, page) in compare_pages(site) {
            let (a, b) = name.trim_end_matches(".html").split_once("--").unwrap();
            let mut groups = 0;
            let tasks: Vec<&String> = csv.keys().filter(|(m, _)| m == a).map(|(_, t)| t).collect();
            assert_eq!(tasks.len(), TASKS);
            for task in tasks {
                for (side, model) in [("A", a), ("B", b)] {
                    let shown = parse_groups(marks_of(&page, task, side));
                    let want = &csv[&(model.to_string(), task.clone())];
                    let mut want: Vec<(String, u64, String)> = want
                        .iter()
                        .map(|(o, (n, h))| (o.clone(), *n, h.clone()))
                        .collect();
                    // Passes first, errors last, the labels between in taxonomy order.
                    let rank = |o: &str| match o {
                        "pass" => 0,
                        "error" => 12,
                        l => {
                            1 + callcheck::taxonomy::Label::ALL
                                .iter()
                                .position(|x| x.as_str() == l)
                                .unwrap()
                        }
                    };
                    want.sort_by_key(|(o, _, _)| rank(o));
                    assert_eq!(shown, want, "{name}, {task}, {side}");
                    for (_, _, href) in &shown {
                        let (file, anchor) =
                            href.trim_start_matches("../").split_once('#').unwrap();
                        let target = std::fs::read_to_string(site.join(file)).unwrap();
                        assert!(target.contains(&format!("id=\"{anchor}\"")), "{href}");
                    }
                    groups += shown.len();
                }
            }
            // Not only passes: failures are drawn and linked too.
            assert!(groups > 2 * TASKS, "{name}: {groups} groups");
        }
    }
}

/// `cache …: A of B samples' verdicts reused, C of D model, task, tag and label pages kept`.
fn reuse_figures(err: &str) -> [u64; 4] {
    let at = err.find("samples' verdicts reused").unwrap();
    let line = &err[err[..at].rfind("cache ").unwrap()..];
    let line = &line[..line.find('\n').unwrap_or(line.len())];
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let n = nums.len();
    assert!(n >= 4, "{line}");
    [nums[n - 4], nums[n - 3], nums[n - 2], nums[n - 1]]
}

#[test]
fn one_new_run_in_a_compared_row_redraws_only_the_pages_it_touches() {
    // One run arrives in model-03, compared with model-01: its comparison changes (the task
    // was missing from B, now it is compared). Drawn again: the model and task pages whose
    // bytes change (model-03's, the task's, and those whose Comparisons block shows the
    // changed comparison), the task's tags and the labels of its samples — no other group.
    // Everything is byte for byte what a fresh build without a cache writes.
    let tmp = tempfile::tempdir().unwrap();
    let synth = tmp.path().join("synth");
    let k = 3;
    synth_tree(
        &synth,
        &SynthOpts {
            samples: MODELS * TASKS * k,
            models: MODELS,
            k,
            seed: 11,
            served: Some(2),
        },
    );
    let (tasks, runs) = (synth.join("tasks"), synth.join("runs"));
    let mut ids: Vec<String> = std::fs::read_dir(runs.join("model-03"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    let task = ids.last().unwrap().clone();
    let held = tmp.path().join("held");
    std::fs::rename(runs.join("model-03").join(&task), &held).unwrap();
    let (out, cache) = (tmp.path().join("site"), tmp.path().join("cache"));
    let cache_arg = ["--cache", cache.to_str().unwrap()];
    build_ok(&tasks, &runs, &out, &cache_arg, &[]);
    let before = std::fs::read_to_string(out.join("compare/model-01--model-03.html")).unwrap();
    assert!(before.contains(&format!(
        "<b>Missing</b> (A has them, B has no sample): <a href=\"../tasks/{task}.html\">{task}</a>."
    )));

    let pages_before = crate::support::site::tree(&out);
    // The previous outcomes, for the fresh build's changes page (the rebuild has them cached).
    let previous = tmp.path().join("previous.csv");
    std::fs::copy(out.join("data/samples.csv"), &previous).unwrap();
    std::fs::rename(&held, runs.join("model-03").join(&task)).unwrap();
    let err = build_ok(&tasks, &runs, &out, &cache_arg, &[]);
    let [reused, samples, kept, groups] = reuse_figures(&err);
    assert_eq!(
        (reused, samples),
        ((MODELS * TASKS * k - k) as u64, (MODELS * TASKS * k) as u64)
    );
    let task_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tasks.join(format!("{task}.json"))).unwrap())
            .unwrap();
    let tags = task_json["tags"].as_array().unwrap().len() as u64;
    // The model and task pages whose bytes changed (model-03's and the task's among them),
    // its tags, and at most k labels.
    let pages_after = crate::support::site::tree(&out);
    let changed = |dir: &str| {
        pages_after
            .iter()
            .filter(|(p, b)| p.starts_with(dir) && pages_before.get(*p) != Some(*b))
            .count() as u64
    };
    let (models, tasks_changed) = (changed("models/"), changed("tasks/"));
    assert!(
        models >= 1 && tasks_changed >= 1,
        "{models} model and {tasks_changed} task pages changed"
    );
    let redrawn = groups - kept;
    assert!(
        redrawn >= 2 + tags && redrawn <= models + tasks_changed + tags + k as u64,
        "{redrawn} of {groups} groups drawn again ({models} model and {tasks_changed} task pages changed, {tags} tags): {err}"
    );
    assert!(kept > 0, "{err}");
    let after = std::fs::read_to_string(out.join("compare/model-01--model-03.html")).unwrap();
    assert!(!after.contains("<b>Missing</b>"));
    assert!(after.contains(&format!("<tr id=\"t~{task}\"")));

    let fresh = tmp.path().join("fresh");
    build_ok(
        &tasks,
        &runs,
        &fresh,
        &["--previous", previous.to_str().unwrap()],
        &[],
    );
    let (a, b) = (
        crate::support::site::tree(&out),
        crate::support::site::tree(&fresh),
    );
    let differ: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|p| a.get(*p) != b.get(*p))
        .collect();
    assert!(
        differ.is_empty(),
        "the rebuild differs from a fresh build: {differ:?}"
    );
}
