//! `callcheck build --reliable-at P` (SPEC §6): the threshold every verdict of the site and its
//! exports is taken at. On the checked-in fixture tree: 0.95 and 0.5 change exactly the verdicts
//! whose intervals sit between the two thresholds, the pages say which threshold they use, the
//! default is the 0.9 build byte for byte, a cached rebuild at another threshold gives the fresh
//! build's site, and a value outside (0, 1) is a usage error naming the flag.

use crate::support::site::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Every verdict `data/matrix.json` holds, by where it is: `cell model/task`, `by_task model`
/// (the pooled total), `shape model/tag`. A row or a tag has no other verdict (SPEC §9: only
/// the verdicts the pages show).
fn verdicts(site: &Path) -> BTreeMap<String, String> {
    let m: Value = serde_json::from_str(&read(site, "data/matrix.json")).unwrap();
    let mut out = BTreeMap::new();
    let word = |v: &Value| v.as_str().unwrap().to_string();
    for c in m["cells"].as_array().unwrap() {
        out.insert(
            format!(
                "cell {}/{}",
                c["model"].as_str().unwrap(),
                c["task"].as_str().unwrap()
            ),
            word(&c["verdict"]),
        );
    }
    for mv in m["models"].as_array().unwrap() {
        let name = mv["model"].as_str().unwrap();
        assert_eq!(
            mv.get("verdict"),
            None,
            "{name}: a verdict the pages do not show"
        );
        out.insert(format!("by_task {name}"), word(&mv["by_task"]["verdict"]));
        for (tag, t) in mv["tags"].as_object().unwrap() {
            assert_eq!(
                t.get("verdict"),
                None,
                "{name}/{tag}: a verdict the pages do not show"
            );
            out.insert(
                format!("shape {name}/{tag}"),
                word(&t["by_task"]["verdict"]),
            );
        }
    }
    out
}

/// The verdicts that differ between two builds: where → (first, second).
fn moved(a: &Path, b: &Path) -> Vec<String> {
    let (va, vb) = (verdicts(a), verdicts(b));
    assert_eq!(va.keys().collect::<Vec<_>>(), vb.keys().collect::<Vec<_>>());
    va.iter()
        .filter(|(k, v)| vb[*k] != **v)
        .map(|(k, v)| format!("{k}: {v} -> {}", vb[k]))
        .collect()
}

fn fixture_build(out: &Path, extra: &[&str]) {
    build_ok(&fixture_tasks(), &fixture_runs(), out, extra, &[]);
}

#[test]
fn another_threshold_moves_exactly_the_verdicts_between_the_two() {
    let tmp = tempfile::tempdir().unwrap();
    let (default, strict, lenient) = (
        tmp.path().join("default"),
        tmp.path().join("strict"),
        tmp.path().join("lenient"),
    );
    fixture_build(&default, &[]);
    fixture_build(&strict, &["--reliable-at", "0.95"]);
    fixture_build(&lenient, &["--reliable-at", "0.5"]);

    // 0.95: upper bounds in [0.9, 0.95) become `unreliable` (gamma's weather-parallel-3 cell
    // [20.8–93.9 %], alpha's enum and integer [14.7–94.7 %], beta's parallel [0.8–90.6 %]);
    // nothing reaches `reliable`, `broken` stays below 0.5.
    assert_eq!(
        moved(&default, &strict),
        [
            "cell gamma/weather-parallel-3: uncertain -> unreliable",
            "shape alpha/enum: uncertain -> unreliable",
            "shape alpha/integer: uncertain -> unreliable",
            "shape beta/parallel: uncertain -> unreliable",
        ]
    );
    // 0.5: every interval whose upper bound is in [0.5, 0.9) now straddles the threshold;
    // alpha's pooled row [61.5–99.4 %] is `reliable`; beta's no-tool-greeting [0–43.5 %] and
    // its total stay `broken`.
    assert_eq!(
        moved(&default, &lenient),
        [
            "by_task alpha: uncertain -> reliable",
            "by_task gamma: unreliable -> uncertain",
            "cell alpha/convert-currency: unreliable -> uncertain",
            "cell beta/contact-card: unreliable -> uncertain",
            "cell beta/convert-currency: unreliable -> uncertain",
            "cell beta/weather-parallel-3: unreliable -> uncertain",
            "cell gamma/convert-currency: unreliable -> uncertain",
            "shape beta/enum: unreliable -> uncertain",
            "shape beta/integer: unreliable -> uncertain",
            "shape beta/no-call: unreliable -> uncertain",
            "shape beta/structured-output: unreliable -> uncertain",
            "shape gamma/enum: unreliable -> uncertain",
            "shape gamma/integer: unreliable -> uncertain",
        ]
    );
    assert_eq!(verdicts(&lenient)["cell beta/no-tool-greeting"], "broken");
    assert_eq!(verdicts(&lenient)["by_task beta"], "broken");

    // The exports say which threshold they were judged at.
    let matrix: Value = serde_json::from_str(&read(&strict, "data/matrix.json")).unwrap();
    assert_eq!(matrix["reliable_at"], serde_json::json!(0.95));
    assert_eq!(
        matrix["verdicts"]["reliable"],
        "interval lower bound >= 0.95"
    );
    assert_eq!(matrix["verdicts"]["broken"], "interval upper bound < 0.5");
    let manifest: Value = serde_json::from_str(&read(&strict, "data/manifest.json")).unwrap();
    assert_eq!(manifest["reliable_at"], serde_json::json!(0.95));
    let manifest: Value = serde_json::from_str(&read(&default, "data/manifest.json")).unwrap();
    assert_eq!(manifest["reliable_at"], serde_json::json!(0.9));

    // The pages: the shape table's cell, its legend, the tag page's pooled row, the chart.
    let index = read(&strict, "index.html");
    assert!(
        index.contains("<b class=\"vt\">reliable</b></span> lower bound ≥ 95 %, <span class=\"v-unreliable\"><b class=\"vt\">unreliable</b></span> upper bound &lt; 95 %, <span class=\"v-broken\"><b class=\"vt\">broken</b></span> upper bound &lt; 50 %, <span class=\"v-uncertain\"><b class=\"vt\">uncertain</b></span> when the interval straddles 95 %."),
        "{index}"
    );
    // Wilson reaches 0.95 from 73 samples all passing (n / (n + 1.96²) ≥ 0.95).
    assert!(
        index.contains("so no single cell can be <b>reliable</b> below 73 samples."),
        "{index}"
    );
    let enum_page = read(&strict, "tags/enum.html");
    let alpha_enum = enum_page
        .split("<td class=\"iv v-")
        .nth(1)
        .expect("the tag page's first pooled cell is alpha's");
    assert!(alpha_enum.starts_with("unreliable\""), "{alpha_enum}");
    assert!(
        read(&default, "tags/enum.html")
            .split("<td class=\"iv v-")
            .nth(1)
            .unwrap()
            .starts_with("uncertain\"")
    );
    let chart = read(&strict, "charts/tags/enum.svg");
    // The threshold's line is labelled (a line lower: 95 % is close to 100 %).
    assert!(
        chart.contains(">\n95 %\n<") && !chart.contains(">\n90 %\n<"),
        "{chart}"
    );
    assert!(read(&default, "charts/tags/enum.svg").contains(">\n90 %\n<"));
    let lenient_index = read(&lenient, "index.html");
    assert!(
        lenient_index.contains("a single cell reads <b>reliable</b> from 4 samples, all passing."),
        "{lenient_index}"
    );
    assert!(lenient_index.contains("lower bound ≥ 50 %"));
}

#[test]
fn the_default_is_point_nine_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let (plain, named) = (tmp.path().join("plain"), tmp.path().join("named"));
    fixture_build(&plain, &[]);
    fixture_build(&named, &["--reliable-at", "0.9"]);
    let (a, b) = (tree(&plain), tree(&named));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (path, bytes) in &a {
        assert!(b[path] == *bytes, "{path} differs");
    }
    assert!(read(&plain, "index.html").contains("lower bound ≥ 90 %"));
}

#[test]
fn a_cached_rebuild_at_another_threshold_redraws_every_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, cache, fresh) = (
        tmp.path().join("site"),
        tmp.path().join("cache"),
        tmp.path().join("fresh"),
    );
    let cache_arg = cache.to_str().unwrap();
    fixture_build(&out, &["--cache", cache_arg]);
    // The same runs and cache: every sample's verdict is reused, but no page drawn at 0.9.
    let err = build_ok(
        &fixture_tasks(),
        &fixture_runs(),
        &out,
        &["--cache", cache_arg, "--reliable-at", "0.95"],
        &[],
    );
    assert!(err.contains("36 of 36 samples' verdicts reused"), "{err}");
    assert!(err.contains(", 0 of "), "no page may be kept: {err}");
    fixture_build(&fresh, &["--reliable-at", "0.95"]);
    let (a, b) = (tree(&out), tree(&fresh));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (path, bytes) in &a {
        assert!(
            b[path] == *bytes,
            "{path} differs from a fresh build at 0.95"
        );
    }
}

#[test]
fn a_threshold_outside_zero_to_one_is_a_usage_error_naming_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    for (value, why) in [
        ("1", "1 is not a rate strictly between 0 and 1"),
        ("0", "0 is not a rate strictly between 0 and 1"),
        ("90", "90 is not a rate strictly between 0 and 1"),
        ("-0.5", "-0.5 is not a rate strictly between 0 and 1"),
        (
            "ninety",
            "\"ninety\" is not a number: give a rate such as 0.9 or 0.95",
        ),
    ] {
        let out = tmp.path().join("site");
        let o = build(
            &fixture_tasks(),
            &fixture_runs(),
            &out,
            &[&format!("--reliable-at={value}")],
            &[],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{value}: {err}");
        assert!(
            err.contains(&format!(
                "invalid value '{value}' for '--reliable-at <P>': {why}"
            )),
            "{value}: {err}"
        );
        assert!(!out.exists(), "nothing is written on a usage error");
    }
}
