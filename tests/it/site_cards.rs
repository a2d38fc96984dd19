//! Shared links unfurl: what Slack, Discord, X or LinkedIn see of a page. An unfurler fetches
//! the one address it is given, runs no script and follows no redirect, so these tests read the
//! page's bytes as written (a sample's permalink is a forwarding page), parse its `<meta>` tags
//! and check the card they make, with and without `build --site-url`.

use crate::support::site::*;
use std::collections::BTreeMap;

/// The `<meta>` tags of a page as an unfurler reads them: `property` (Open Graph) or `name`
/// (Twitter, description) → `content`, entities decoded. Both keys are kept when one tag has
/// both. A key given twice is an error (an unfurler would pick one arbitrarily).
fn card(html: &str) -> BTreeMap<String, String> {
    let mut tags = BTreeMap::new();
    for chunk in html.split("<meta ").skip(1) {
        let tag = &chunk[..chunk.find('>').expect("a <meta> tag is closed")];
        let mut attrs = BTreeMap::new();
        let mut rest = tag;
        while let Some(eq) = rest.find("=\"") {
            let name = rest[..eq].trim().to_string();
            let after = &rest[eq + 2..];
            let end = after.find('"').expect("an attribute's value is closed");
            attrs.insert(name, decode(&after[..end]));
            rest = &after[end + 1..];
        }
        let Some(content) = attrs.get("content") else {
            continue;
        };
        for key in ["property", "name"] {
            if let Some(k) = attrs.get(key) {
                let old = tags.insert(k.clone(), content.clone());
                assert!(old.is_none(), "{k} is given twice");
            }
        }
    }
    tags
}

fn decode(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[test]
fn a_permalink_a_run_page_and_the_index_unfurl_with_their_own_card() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(
        &fixture_tasks(),
        &fixture_runs(),
        &out,
        // Without its trailing slash: the pages' addresses still append to it.
        &["--site-url", "https://you.github.io/conformance"],
        &[],
    );

    // The permalink of a failed sample: a forwarding page, and the card is in it.
    let stub = read(&out, "t/beta/convert-currency/r0001/001.html");
    assert!(stub.contains("http-equiv=\"refresh\""), "{stub}");
    let c = card(&stub);
    let want: BTreeMap<String, String> = [
        ("og:title", "beta · convert-currency · missing_required"),
        (
            "og:description",
            "call 1 (convert_currency): required argument /amount is absent",
        ),
        (
            "description",
            "call 1 (convert_currency): required argument /amount is absent",
        ),
        ("og:type", "article"),
        (
            "og:url",
            "https://you.github.io/conformance/t/beta/convert-currency/r0001/001.html",
        ),
        ("twitter:card", "summary"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(c, want);

    // The run's page: what its samples came to.
    let run = card(&read(&out, "t/beta/convert-currency/r0001/index.html"));
    assert_eq!(run["og:title"], "beta · convert-currency · run r0001");
    assert_eq!(
        run["og:url"],
        "https://you.github.io/conformance/t/beta/convert-currency/r0001/index.html"
    );
    assert_eq!(run["og:type"], "article");
    assert_eq!(run["twitter:card"], "summary");
    assert!(
        run["og:description"].starts_with("3 samples of beta on "),
        "{}",
        run["og:description"]
    );
    assert!(
        run["og:description"].contains("1 missing_required"),
        "{}",
        run["og:description"]
    );

    // The summary page: the site itself.
    let index = card(&read(&out, "index.html"));
    assert_eq!(index["og:url"], "https://you.github.io/conformance/");
    assert_eq!(index["og:type"], "website");
    assert_eq!(
        index["og:title"],
        "Tool-call conformance: 3 models × 4 tasks"
    );
    assert!(
        index["og:description"]
            .starts_with("36 samples: 17 passed, 17 failed with a label, 2 transport errors"),
        "{}",
        index["og:description"]
    );
}

#[test]
fn without_a_site_url_a_card_has_no_address_and_model_text_is_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let stub = read(&out, "t/beta/convert-currency/r0001/001.html");
    let c = card(&stub);
    assert!(!c.contains_key("og:url"), "{stub}");
    assert_eq!(c["og:title"], "beta · convert-currency · missing_required");
    // Every permalink's card is whole (`card` fails on a value that lets a `>` or `"` out of
    // its attribute).
    let site = tree(&out);
    let mut stubs = 0;
    for (path, bytes) in &site {
        let is_stub = path.starts_with("t/") && !path.ends_with("/index.html");
        if !is_stub {
            continue;
        }
        stubs += 1;
        let html = String::from_utf8(bytes.clone()).unwrap();
        let c = card(&html);
        for key in ["og:title", "og:description", "og:type", "twitter:card"] {
            assert!(c.contains_key(key), "{path} has no {key}: {html}");
        }
    }
    assert_eq!(
        stubs, 36,
        "every sample of the fixture tree, transport errors too"
    );
}

#[test]
fn a_site_url_that_is_not_an_address_is_refused_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    let o = build(
        &fixture_tasks(),
        &fixture_runs(),
        &out,
        &["--site-url", "you.github.io/\"><script>"],
        &[],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "--site-url \"you.github.io/\\\"><script>\": it must start with https:// (or http://)"
        ),
        "{err}"
    );
    assert!(!out.exists(), "nothing is written");
}
