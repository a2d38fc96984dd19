//! The demo's site read without JavaScript, as a crawler or a reader with scripts off reads it:
//! following every `href` and `src` from `index.html` reaches every file the build wrote —
//! every run's page and every sample's permalink, the follow-ups of the feedback and review
//! rounds included (they were reachable only through the samples page's script) — and each
//! follow-up and the failure it follows up link each other.

use crate::support::site::*;
use scraper::{Html, Selector};
use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::process::Command;

/// Files a reader is never sent to by a link: what GitHub Pages itself reads, and the marker by
/// which a later build knows the folder is a site it wrote.
const UNLINKED: [&str; 3] = [".nojekyll", "404.html", ".callcheck-site"];

#[test]
fn a_crawl_without_javascript_reaches_every_file_of_the_demo() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_callcheck"))
        .current_dir(tmp.path())
        .args(["demo", "--quiet", "--tasks"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let site = tmp.path().join("site");
    let files = tree(&site);
    let linked = Selector::parse("[href], [src]").unwrap();
    let mut seen: BTreeSet<String> = BTreeSet::from(["index.html".to_string()]);
    let mut queue = VecDeque::from(["index.html".to_string()]);
    while let Some(page) = queue.pop_front() {
        if !page.ends_with(".html") {
            continue;
        }
        let Some(bytes) = files.get(&page) else {
            continue;
        };
        let doc = Html::parse_document(&String::from_utf8_lossy(bytes));
        for e in doc.select(&linked) {
            for attr in ["href", "src"] {
                let Some(link) = e.value().attr(attr) else {
                    continue;
                };
                let file = link.split(['#', '?']).next().unwrap_or("");
                if file.is_empty() || file.contains(':') {
                    continue;
                }
                if let Some(target) = resolve(&page, file)
                    && files.contains_key(&target)
                    && seen.insert(target.clone())
                {
                    queue.push_back(target);
                }
            }
        }
    }
    let unreached: Vec<&String> = files
        .keys()
        .filter(|f| !seen.contains(*f) && !UNLINKED.contains(&f.as_str()))
        .collect();
    assert!(
        unreached.is_empty(),
        "{} of {} files are reached by no link from index.html, e.g. {:?}",
        unreached.len(),
        files.len(),
        &unreached[..unreached.len().min(8)]
    );
    // The follow-ups are among them, and each links its parent failure.
    let followups: Vec<&String> = files
        .keys()
        .filter(|f| {
            // t/<model>/<task>/<run>/index.html, the run named after its feedback style.
            let parts: Vec<&str> = f.split('/').collect();
            parts.len() == 5
                && parts[0] == "t"
                && parts[4] == "index.html"
                && ["-error", "-checklist", "-retry"]
                    .iter()
                    .any(|s| parts[3].ends_with(s))
        })
        .collect();
    assert!(followups.len() > 10, "{followups:?}");
    let mut linked_back = 0;
    for f in followups {
        let page = read(&site, f);
        assert!(page.contains("Follows up <a href=\"../"), "{f}");
        // ...and the failure it follows up links it back, in its own section of its run's page
        // (rendered before the follow-up runs are scored: the build reads their parents first).
        let (dir, run) = f
            .strip_suffix("/index.html")
            .unwrap()
            .rsplit_once('/')
            .unwrap();
        for section in page.split("<section class=\"sample\" id=\"s-").skip(1) {
            let sample = section.split('"').next().unwrap();
            let Some(href) = section
                .split("Follows up <a href=\"../")
                .nth(1)
                .and_then(|h| h.split('"').next())
            else {
                continue;
            };
            let (parent_run, parent_sample) = href.split_once("/index.html#fail-").unwrap();
            let parent_page = read(&site, &format!("{dir}/{parent_run}/index.html"));
            let parent_section = parent_page
                .split(&format!(
                    "<section class=\"sample\" id=\"s-{parent_sample}\">"
                ))
                .nth(1)
                .and_then(|s| s.split("</section>").next())
                .unwrap_or_else(|| panic!("{dir}/{parent_run}: no section {parent_sample}"));
            assert!(
                parent_section.contains(&format!("<a href=\"../{run}/index.html#s-{sample}\">")),
                "{dir}/{parent_run}/index.html#s-{parent_sample} does not link its follow-up {run}/{sample}: {parent_section}"
            );
            linked_back += 1;
        }
    }
    assert!(linked_back > 10, "{linked_back} follow-ups linked back");
}
