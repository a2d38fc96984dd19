//! Opens the built site in headless Chromium from `file://`, as a reader of a blog post would:
//! no console errors, every local link and resource on the page (as the browser's DOM has it,
//! after scripts ran) resolves to a file, and a screenshot is saved under target/ to look at.
//!
//! Skipped, saying so, when Chromium is absent and CALLCHECK_REQUIRE_CHROMIUM is unset (CI sets
//! it; `apt-get install -y chromium` installs it).

mod site_support;

use scraper::{Html, Selector};
use site_support::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Chromium, or `None` after saying the test is skipped; a failure instead when
/// CALLCHECK_REQUIRE_CHROMIUM is set (as `.ci/run` does).
fn chromium_or_skip() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        if std::env::var_os("CALLCHECK_REQUIRE_CHROMIUM").is_some() {
            panic!("chromium is not installed and CALLCHECK_REQUIRE_CHROMIUM is set");
        }
        eprintln!(
            "SKIPPED: chromium not found on PATH (apt-get install -y chromium); set CALLCHECK_REQUIRE_CHROMIUM to make this an error"
        );
    }
    found
}

/// Runs Chromium headless on one file with `mode` (`--dump-dom` or `--screenshot=…`), returning
/// (stdout, the console lines it logged).
fn run(chrome: &Path, page: &Path, mode: &str, profile: &Path) -> (String, Vec<String>) {
    let url = format!("file://{}", page.display());
    let o = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1400,1800",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(mode)
        .arg(&url)
        .output()
        .expect("chromium runs");
    let stderr = String::from_utf8_lossy(&o.stderr);
    // Chromium logs every console message (errors, warnings, uncaught exceptions) as a
    // `CONSOLE` line; the site's pages log nothing at all.
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (String::from_utf8_lossy(&o.stdout).into_owned(), console)
}

/// Every href/src in the DOM that is not a fragment-only link, resolved against the page.
fn missing_targets(site: &Path, page_rel: &str, dom: &str) -> (usize, Vec<String>) {
    let doc = Html::parse_document(dom);
    let sel = Selector::parse("[href], [src]").unwrap();
    let mut n = 0;
    let mut missing = Vec::new();
    for e in doc.select(&sel) {
        for attr in ["href", "src"] {
            let Some(link) = e.value().attr(attr) else {
                continue;
            };
            let file = link.split('#').next().unwrap_or("");
            if file.is_empty() {
                continue;
            }
            n += 1;
            match resolve(page_rel, file) {
                Some(t) if site.join(&t).is_file() => {}
                _ => missing.push(link.to_string()),
            }
        }
    }
    (n, missing)
}

#[test]
fn pages_open_from_the_file_system_without_errors() {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let profile = tmp.path().join("profile");
    let site = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &site, &[], &[]);

    // A control page proves the checks see what they are meant to see.
    let bad = tmp.path().join("bad.html");
    std::fs::write(
        &bad,
        "<!doctype html><html><body><img src=\"nope.png\"><script>throw new Error(\"control\")</script></body></html>",
    )
    .unwrap();
    let (dom, console) = run(&chrome, &bad, "--dump-dom", &profile);
    assert!(
        console.iter().any(|l| l.contains("control")),
        "the console check saw nothing on the control page: {console:?}"
    );
    let (_, missing) = missing_targets(tmp.path(), "bad.html", &dom);
    assert_eq!(missing, ["nope.png"]);

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("site-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    for (page, name) in [
        ("index.html", "index"),
        ("t/beta/convert-currency/r0001/001.html", "transcript"),
        ("models/beta.html", "model"),
    ] {
        let path = site.join(page);
        let (dom, console) = run(&chrome, &path, "--dump-dom", &profile);
        assert!(console.is_empty(), "{page}: console messages: {console:#?}");
        assert!(dom.contains("</html>"), "{page}: no DOM dumped");
        let (n, missing) = missing_targets(&site, page, &dom);
        assert!(n > 5, "{page}: only {n} links");
        assert!(
            missing.is_empty(),
            "{page}: links to missing files: {missing:?}"
        );
        let shot = shots.join(format!("{name}.png"));
        let _ = std::fs::remove_file(&shot);
        run(
            &chrome,
            &path,
            &format!("--screenshot={}", shot.display()),
            &profile,
        );
        let png = std::fs::read(&shot).unwrap_or_default();
        assert!(
            png.starts_with(b"\x89PNG"),
            "{page}: no screenshot at {}",
            shot.display()
        );
    }
    // The transcript page's failing argument is there after the browser parsed it.
    let (dom, _) = run(
        &chrome,
        &site.join("t/beta/convert-currency/r0001/001.html"),
        "--dump-dom",
        &profile,
    );
    assert!(dom.contains("<mark id=\"fail\">"));
}

/// The demo's site, as a newcomer opens it: the matrix shows all eleven labels among its
/// sample marks, with no console errors and no broken local links.
#[test]
fn the_demo_site_shows_all_eleven_labels_in_chromium() {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks");
    let out = Command::new(env!("CARGO_BIN_EXE_callcheck"))
        .current_dir(tmp.path())
        .args(["demo", "--quiet", "--tasks"])
        .arg(&corpus)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let site = tmp.path().join("site");
    let (dom, console) = run(
        &chrome,
        &site.join("index.html"),
        "--dump-dom",
        &tmp.path().join("profile"),
    );
    assert!(console.is_empty(), "console messages: {console:#?}");
    let (_, missing) = missing_targets(&site, "index.html", &dom);
    assert!(missing.is_empty(), "links to missing files: {missing:?}");
    let doc = Html::parse_document(&dom);
    let marks = Selector::parse("table.matrix .d").unwrap();
    let shown: std::collections::BTreeSet<String> = doc
        .select(&marks)
        .filter_map(|a| a.value().attr("title"))
        .filter_map(|t| t.rsplit(": ").next())
        .map(str::to_string)
        .collect();
    for label in callcheck::taxonomy::Label::ALL {
        assert!(
            shown.contains(label.as_str()),
            "no {} mark in the demo matrix; marks seen: {shown:?}",
            label.as_str()
        );
    }
}

/// GitHub Pages serves 404.html at the missing address, however deep: its link to the matrix
/// must still reach the site's root.
#[test]
fn the_404_page_links_to_the_matrix_from_a_deep_missing_address() {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &site, &[], &[]);
    let deep = site.join("t/no-such-model/no-such-task/r1");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::copy(site.join("404.html"), deep.join("000.html")).unwrap();
    let (dom, console) = run(
        &chrome,
        &deep.join("000.html"),
        "--dump-dom",
        &tmp.path().join("profile"),
    );
    assert!(console.is_empty(), "console messages: {console:#?}");
    let doc = Html::parse_document(&dom);
    let home = doc
        .select(&Selector::parse("a#home").unwrap())
        .next()
        .and_then(|a| a.value().attr("href"))
        .expect("the 404 page links home")
        .to_string();
    assert_eq!(Path::new(&home), site.join("index.html"));
}
