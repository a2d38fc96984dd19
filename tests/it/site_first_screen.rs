//! The index's first screen ranks the models, then answers before it shows evidence: per model, the call shapes it is
//! reliable on, those it is not, and those its samples cannot tell yet, above the shape table;
//! and the comparisons, when there are any, near the top and in the navigation.

use crate::support::site::*;

#[test]
fn the_index_opens_with_each_models_answer_then_the_evidence() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let index = read(&out, "index.html");
    let answers = index
        .find("<section id=\"answers\">")
        .expect("an answers section");
    let shapes = index.find("<h2 id=\"shapes\">").unwrap();
    assert!(answers < shapes, "the answers come before the shape table");
    // The ranking comes first of all: one row per model, by the lower bound of its interval.
    let ranked = index
        .find("<table class=\"sortable rank\">")
        .expect("a ranked table");
    assert!(ranked < answers, "the ranking comes before the answers");
    // beta is decisively not reliable on the shapes where it passed nothing (Clopper–Pearson's
    // upper bound is under 90 % even for 0 of 2), and parallel (1 of 3) cannot be told yet; the
    // decisive answer comes first, each shape links its page. beta's no-call verdict rests on
    // one task whose five samples are one answer: the line says so once, naming the shape.
    assert!(
        index.contains("<li><a href=\"models/beta.html\"><b>beta</b></a>: <span class=\"v-broken\"><b class=\"vt\">unreliable on</b></span> <a href=\"tags/enum.html\">enum</a> <small>(0/2)</small>, <a href=\"tags/integer.html\">integer</a> <small>(0/2)</small>, <a href=\"tags/no-call.html\">no-call</a> <small>(0/5)</small>, <a href=\"tags/structured-output.html\">structured-output</a> <small>(0/3)</small>; <span class=\"v-uncertain\"><b class=\"vt\">uncertain on</b></span> <a href=\"tags/parallel.html\">parallel</a> <small>(1/3)</small>. <small class=\"warn same\" title=\"k identical samples: one observation, not k\">≡ no-call: repeated answers</small></li>"),
        "{index}"
    );
    // One line per model.
    assert_eq!(index.matches("<li><a href=\"models/").count(), 3);
    // No comparison here: none in the navigation either.
    assert!(!index.contains("href=\"#comparisons\""), "{index}");
}

#[test]
fn comparisons_are_in_the_navigation_and_above_the_shape_table() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(
        &fixture_tasks(),
        &fixture_runs(),
        &out,
        &["--compare", "alpha:beta"],
        &[],
    );
    let index = read(&out, "index.html");
    let nav_end = index.find("</header>").unwrap();
    let nav_link = index
        .find(" <a href=\"#comparisons\">comparisons</a>")
        .expect("the navigation links the comparisons");
    assert!(nav_link < nav_end, "{index}");
    let section = index.find("<section id=\"comparisons\">").unwrap();
    assert!(
        index.find("<section id=\"answers\">").unwrap() < section
            && section < index.find("<h2 id=\"shapes\">").unwrap(),
        "{index}"
    );
    assert!(index.contains("compare/alpha--beta.html"), "{index}");
}
