//! A comparison page (SPEC §9) in headless Chromium from `file://`, at a desktop width (1440 px)
//! and a phone width (390 px): no console errors, every local link resolves, and the page itself
//! never scrolls sideways (its wide tables scroll inside their own boxes). Screenshots are saved
//! under target/ to look at.
//!
//! It needs Chromium, so it is `#[ignore]`d like tests/it/site_chromium.rs: `cargo test` reports it
//! as ignored, never as passed, and `.ci/run` runs it with `--ignored`, where a missing browser
//! is a failure.

use crate::support::site::*;
use scraper::{Html, Selector};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs Chromium on a file at a window width; returns (stdout, console lines).
fn chrome(
    bin: &Path,
    page: &Path,
    width: u32,
    mode: &str,
    profile: &Path,
) -> (String, Vec<String>) {
    let o = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            // The probe page reads the framed page's layout; file:// pages are otherwise each
            // their own origin.
            "--allow-file-access-from-files",
            "--virtual-time-budget=3000",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--window-size={width},1600"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(mode)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    let console = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (String::from_utf8_lossy(&o.stdout).into_owned(), console)
}

/// A page that frames `target` at `width` px and writes the framed document's scroll width and
/// its number of rows into its own DOM, for `--dump-dom` to read.
fn probe(dir: &Path, target: &Path, width: u32) -> PathBuf {
    let p = dir.join(format!("probe-{width}.html"));
    std::fs::write(
        &p,
        format!(
            r#"<!doctype html><html><body style="margin:0"><iframe id="f" src="file://{}" style="width:{width}px;height:1200px;border:0" onload="var d=this.contentDocument;document.getElementById('out').textContent=d.documentElement.scrollWidth+' '+d.querySelectorAll('tr').length"></iframe><pre id="out">not loaded</pre></body></html>"#,
            target.display()
        ),
    )
    .unwrap();
    p
}

#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored compare_chromium::`"]
fn a_comparison_page_reads_at_desktop_and_phone_widths() {
    let bin = chromium();
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("site");
    build_ok(
        &fixture_tasks(),
        &fixture_runs(),
        &site,
        &["--compare", "alpha:beta"],
        &[],
    );
    let rel = "compare/alpha--beta.html";
    let page = site.join(rel);
    assert!(page.is_file(), "no {rel}");
    let profile = tmp.path().join("profile");
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("site-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    for width in [1440, 390] {
        let (dom, console) = chrome(&bin, &page, width, "--dump-dom", &profile);
        assert!(
            console.is_empty(),
            "{width} px: console messages: {console:#?}"
        );
        let doc = Html::parse_document(&dom);
        let sel = Selector::parse("[href], [src]").unwrap();
        let mut links = 0;
        for e in doc.select(&sel) {
            let link = e.value().attr("href").or(e.value().attr("src")).unwrap();
            let file = link.split('#').next().unwrap_or("");
            if file.is_empty() {
                continue;
            }
            links += 1;
            let t = resolve(rel, file).unwrap_or_else(|| panic!("{link} leaves the site"));
            assert!(
                site.join(&t).is_file(),
                "{width} px: {link} → {t} is missing"
            );
        }
        assert!(links > 20, "only {links} links");

        let (dom, console) = chrome(
            &bin,
            &probe(tmp.path(), &page, width),
            width,
            "--dump-dom",
            &profile,
        );
        assert!(console.is_empty(), "{width} px probe: {console:#?}");
        let out = Html::parse_document(&dom)
            .select(&Selector::parse("#out").unwrap())
            .next()
            .map(|e| e.text().collect::<String>())
            .unwrap_or_default();
        let nums: Vec<u32> = out.split(' ').filter_map(|x| x.parse().ok()).collect();
        assert_eq!(nums.len(), 2, "{width} px: the probe read nothing: {out:?}");
        assert!(
            nums[1] > 5,
            "{width} px: only {} table rows rendered",
            nums[1]
        );
        assert!(
            nums[0] <= width,
            "{width} px: the page is {} px wide and scrolls sideways",
            nums[0]
        );

        let shot = shots.join(format!("compare-{width}.png"));
        let _ = std::fs::remove_file(&shot);
        chrome(
            &bin,
            &page,
            width,
            &format!("--screenshot={}", shot.display()),
            &profile,
        );
        assert!(
            std::fs::read(&shot)
                .unwrap_or_default()
                .starts_with(b"\x89PNG"),
            "no screenshot at {}",
            shot.display()
        );
    }
}
