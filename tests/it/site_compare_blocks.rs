//! The small "Comparisons" blocks of the index, model and task pages (issue 28, SPEC §9
//! wording): the verdict they show is one interval's, so it is labelled uncorrected, and the
//! gate's verdict (Holm-corrected, what `compare --fail-on regression` decides) is stated beside
//! it with a link to the compare page, as that page's headline states it.

use crate::support::site::*;

/// The block's one item, as the fixture's `--compare alpha:beta` gives it from `root`.
fn item(root: &str, anchor: &str, verdict: &str) -> String {
    format!(
        "<li><a href=\"{root}compare/alpha--beta.html{anchor}\">beta against alpha</a>: {verdict} · <a href=\"{root}compare/alpha--beta.html\">the gate's verdict</a>: regression in overall</li>"
    )
}

#[test]
fn comparison_verdicts_outside_the_compare_page_say_uncorrected_and_link_the_gate() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(
        &fixture_tasks(),
        &fixture_runs(),
        &out,
        &["--compare", "alpha:beta"],
        &[],
    );
    // The compare page's own headline: the gate's verdict the blocks repeat.
    assert!(read(&out, "compare/alpha--beta.html").contains(
        "<p class=\"cmp-worse\"><b>Gate: regression in overall. Overall, over these 4 tasks"
    ));
    let overall = item("../", "", "worse <small>(uncorrected, overall)</small>");
    for page in ["models/alpha.html", "models/beta.html"] {
        let html = read(&out, page);
        assert!(html.contains(&overall), "{page}: {html}");
    }
    assert!(read(&out, "index.html").contains(&item(
        "",
        "",
        "worse <small>(uncorrected, overall)</small>"
    )));
    // Task pages: the task's own interval, uncorrected, and the same gate.
    let contact = read(&out, "tasks/contact-card.html");
    assert!(
        contact.contains(&item(
            "../",
            "#t~contact-card",
            "worse <small>(uncorrected, this task)</small>"
        )),
        "{contact}"
    );
    let currency = read(&out, "tasks/convert-currency.html");
    assert!(
        currency.contains(&item(
            "../",
            "#t~convert-currency",
            "no evidence of a difference <small>(uncorrected, this task)</small>"
        )),
        "{currency}"
    );
    // gamma is in no comparison: its page has no block.
    assert!(!read(&out, "models/gamma.html").contains("id=\"comparisons\""));
}
