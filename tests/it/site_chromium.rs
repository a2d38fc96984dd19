//! Opens the built site in headless Chromium from `file://`, as a reader would: every page type
//! at a desktop (1440 × 900) and a phone (390 × 844) viewport, with no console errors, no page
//! wider than the phone except inside a scrolling box, every local link resolving, a `#fail`
//! permalink landing with its label and detail in view, and the samples page narrowing to the
//! right samples. Screenshots are saved under target/screenshots to look at.
//!
//! These tests need Chromium, so they are `#[ignore]`d: `cargo test` reports them as ignored,
//! never as passed, and `.ci/run` runs them with `cargo test --test it -- --ignored site_chromium::`,
//! where a missing browser is a failure (`apt-get install -y chromium`).
//!
//! The browser is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
//! null-separated JSON on file descriptors 3 and 4), which needs no network and no crate.

use crate::support::site::*;
use scraper::{Html, Selector};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::FromRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Where the screenshots go: target/screenshots (CI keeps it as an artifact).
fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap_or(Path::new(env!("CARGO_TARGET_TMPDIR")))
        .join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A headless Chromium with one page, driven over the DevTools protocol.
struct Browser {
    child: Child,
    to: File,
    from: Receiver<Value>,
    next: u64,
    session: String,
    /// Events received while waiting for a reply, oldest first.
    events: VecDeque<Value>,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid two-element array; O_CLOEXEC keeps these ends out of other
    // children, and the chosen ends are dup'ed to 3 and 4 (without the flag) in Chromium's.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2 failed");
    (fds[0], fds[1])
}

impl Browser {
    fn launch() -> Browser {
        let chrome = chromium();
        let profile = tempfile::tempdir().unwrap();
        let (to_chrome_r, to_chrome_w) = pipe();
        let (from_chrome_r, from_chrome_w) = pipe();
        let mut cmd = Command::new(chrome);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Move both ends above 4 first, so that dup2 onto 3 and 4 cannot clobber one.
                let a = libc::fcntl(to_chrome_r, libc::F_DUPFD, 10);
                let b = libc::fcntl(from_chrome_w, libc::F_DUPFD, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("chromium starts");
        // SAFETY: these fds were just created by pipe2 and are owned here alone.
        let (to, from) = unsafe {
            libc::close(to_chrome_r);
            libc::close(from_chrome_w);
            (
                File::from_raw_fd(to_chrome_w),
                File::from_raw_fd(from_chrome_r),
            )
        };
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(from);
            loop {
                let mut buf = Vec::new();
                match r.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        buf.pop_if(|b| *b == 0);
                        if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                            && tx.send(v).is_err()
                        {
                            return;
                        }
                    }
                }
            }
        });
        let mut b = Browser {
            child,
            to,
            from: rx,
            next: 0,
            session: String::new(),
            events: VecDeque::new(),
            _profile: profile,
        };
        let target = b.call_browser("Target.createTarget", json!({"url": "about:blank"}));
        let id = target["targetId"].as_str().unwrap().to_string();
        let attached = b.call_browser(
            "Target.attachToTarget",
            json!({"targetId": id, "flatten": true}),
        );
        b.session = attached["sessionId"].as_str().unwrap().to_string();
        for m in ["Page.enable", "Runtime.enable", "Log.enable"] {
            b.call(m, json!({}));
        }
        b
    }

    fn send(&mut self, method: &str, params: Value, session: bool) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if session {
            msg["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from.recv_timeout(left) {
                Ok(v) if v["id"] == json!(id) => {
                    if let Some(e) = v.get("error") {
                        panic!("{method}: {e}");
                    }
                    return v["result"].clone();
                }
                Ok(v) => self.events.push_back(v),
                Err(RecvTimeoutError::Timeout) => panic!("{method}: no reply in 60 s"),
                Err(RecvTimeoutError::Disconnected) => panic!("{method}: chromium exited"),
            }
        }
    }

    fn call_browser(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, false)
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, true)
    }

    /// Waits for an event named `method` (already received or to come).
    fn wait_event(&mut self, method: &str) {
        if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
            self.events.remove(i);
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from.recv_timeout(left) {
                Ok(v) if v["method"] == method => return,
                Ok(v) => self.events.push_back(v),
                Err(_) => panic!("no {method} event in 60 s"),
            }
        }
    }

    /// Opens `url` at a `width` × `height` viewport and waits for its load event.
    fn open(&mut self, url: &str, width: u32, height: u32) {
        self.navigate(url, width, height);
        // Deferred scripts have run by the load event; one frame lets layout and scrolling to
        // the fragment settle.
        self.eval(
            "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))",
        );
    }

    /// Loads `url` at `width` × `height` and waits for its load event (nothing evaluated in
    /// it: a permalink's page sends the browser on as soon as it has loaded).
    fn navigate(&mut self, url: &str, width: u32, height: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        if url.contains('#') {
            // Navigating to the page already shown with another (or the same) fragment only
            // scrolls, with no load event: start from a blank page.
            self.events.clear();
            self.call("Page.navigate", json!({"url": "about:blank"}));
            self.wait_event("Page.loadEventFired");
        }
        self.events.clear();
        self.call("Page.navigate", json!({"url": url}));
        self.wait_event("Page.loadEventFired");
    }

    /// Opens a sample's permalink and waits until it has sent the browser on to the run's page
    /// (`…/index.html#…`), fully loaded.
    fn open_permalink(&mut self, url: &str, width: u32, height: u32) {
        self.navigate(url, width, height);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Evaluated in whatever document is current; during the hand-over there may be none.
            self.next += 1;
            let id = self.next;
            let msg = json!({"id": id, "method": "Runtime.evaluate", "sessionId": self.session,
                "params": {"expression": "location.href + ' ' + document.readyState", "returnByValue": true}});
            let mut bytes = serde_json::to_vec(&msg).unwrap();
            bytes.push(0);
            self.to.write_all(&bytes).unwrap();
            let state = loop {
                match self.from.recv_timeout(Duration::from_secs(30)) {
                    Ok(v) if v["id"] == json!(id) => {
                        break v["result"]["result"]["value"]
                            .as_str()
                            .unwrap_or("")
                            .to_string();
                    }
                    Ok(v) => self.events.push_back(v),
                    Err(_) => panic!("{url}: no reply while following the permalink"),
                }
            };
            if state.contains("/index.html#") && state.ends_with(" complete") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{url} never reached its run's page: {state}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.eval(
            "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))",
        );
    }

    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("{expression}: {e}");
        }
        r["result"]["value"].clone()
    }

    /// Console errors, warnings, uncaught exceptions and failed loads since the last `open`.
    fn console(&mut self) -> Vec<String> {
        // Collect whatever has arrived.
        while let Ok(v) = self.from.try_recv() {
            self.events.push_back(v);
        }
        self.events
            .iter()
            .filter_map(|e| match e["method"].as_str()? {
                "Runtime.exceptionThrown" => Some(e["params"]["exceptionDetails"].to_string()),
                "Runtime.consoleAPICalled" => {
                    let t = e["params"]["type"].as_str().unwrap_or("");
                    matches!(t, "error" | "warning" | "assert").then(|| e["params"].to_string())
                }
                "Log.entryAdded" => {
                    let l = e["params"]["entry"]["level"].as_str().unwrap_or("");
                    matches!(l, "error" | "warning").then(|| e["params"]["entry"].to_string())
                }
                _ => None,
            })
            .collect()
    }

    /// A screenshot of the viewport (or the whole page with `full`) as PNG bytes.
    fn screenshot(&mut self, path: &Path, full: bool) {
        let r = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": full}),
        );
        let png = base64_decode(r["data"].as_str().unwrap());
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(path, png).unwrap();
        println!("screenshot: {}", path.display());
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| *c != b'=').map(val).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            n |= u32::from(*b) << (18 - 6 * i);
        }
        for i in 0..chunk.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
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

/// The demo's site (three scripted models × the corpus at k = 5), built once per test.
fn demo_site(tmp: &Path) -> PathBuf {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks");
    let out = Command::new(env!("CARGO_BIN_EXE_callcheck"))
        .current_dir(tmp)
        .args(["demo", "--quiet", "--tasks"])
        .arg(&corpus)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tmp.join("site")
}

/// data/samples.csv as rows of (column → value).
fn samples_csv(site: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut r = csv::Reader::from_path(site.join("data/samples.csv")).unwrap();
    let headers = r.headers().unwrap().clone();
    let round = headers.iter().position(|h| h == "round");
    r.records()
        .map(|row| row.unwrap())
        // First-round samples: the ones samples.html lists (a feedback sample, SPEC §11, is in
        // routing.html's counts instead).
        .filter(|row| round.is_none_or(|c| &row[c] != "1"))
        .map(|row| {
            headers
                .iter()
                .zip(row.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// data/samples.csv's feedback samples (round 1, SPEC §11) as rows of (column → value).
fn feedback_csv(site: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut r = csv::Reader::from_path(site.join("data/samples.csv")).unwrap();
    let headers = r.headers().unwrap().clone();
    let round = headers.iter().position(|h| h == "round").unwrap();
    r.records()
        .map(|row| row.unwrap())
        .filter(|row| &row[round] == "1")
        .map(|row| {
            headers
                .iter()
                .zip(row.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// The first failed sample's permalink for `label`, from samples.csv.
fn failed_permalink(rows: &[std::collections::BTreeMap<String, String>], label: &str) -> String {
    rows.iter()
        .find(|r| r["label"] == label)
        .map(|r| r["permalink"].clone())
        .unwrap_or_else(|| panic!("no {label} sample"))
}

#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn every_page_type_fits_a_phone_and_logs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let site = demo_site(tmp.path());
    let rows = samples_csv(&site);
    // A run's page, where its samples are shown (their permalinks lead there).
    let permalink = failed_permalink(&rows, "parallel_collapse");
    let transcript = format!("{}/index.html", permalink.rsplit_once('/').unwrap().0);
    let pages = [
        "index.html".to_string(),
        "models/mock-sloppy.html".into(),
        "tasks/weather-parallel-3.html".into(),
        "tags/parallel.html".into(),
        "labels/index.html".into(),
        "labels/no_call.html".into(),
        "samples.html".into(),
        "routing.html".into(),
        "compare/mock-good--mock-good-stream.html".into(),
        transcript,
        "404.html".into(),
    ];
    let mut b = Browser::launch();

    // A control page proves the checks see what they are meant to see: a console error and a
    // page wider than the phone.
    let bad = tmp.path().join("bad.html");
    std::fs::write(
        &bad,
        "<!doctype html><html><head><meta name=\"viewport\" content=\"width=device-width\"></head><body><div style=\"width:600px\">wide</div><script>console.error(\"control\")</script></body></html>",
    )
    .unwrap();
    b.open(&format!("file://{}", bad.display()), 390, 844);
    assert!(
        b.console().iter().any(|l| l.contains("control")),
        "the console check saw nothing on the control page"
    );
    assert!(
        b.eval("document.documentElement.scrollWidth")
            .as_u64()
            .unwrap()
            > 390
    );

    for page in &pages {
        for (w, h) in [(1440, 900), (390, 844)] {
            b.open(&format!("file://{}", site.join(page).display()), w, h);
            let console = b.console();
            assert!(
                console.is_empty(),
                "{page} at {w} px: console messages: {console:#?}"
            );
            let width = b
                .eval("document.documentElement.scrollWidth")
                .as_u64()
                .unwrap();
            if w == 390 && width > 390 {
                // Name the culprits: elements past the right edge outside any scrolling box.
                let culprits = b.eval(
                    r#"(() => { const out = []; for (const e of document.querySelectorAll("body *")) {
                          const r = e.getBoundingClientRect(); if (r.right <= innerWidth + 0.5) continue;
                          let p = e.parentElement, boxed = false;
                          for (; p; p = p.parentElement) if (["auto", "scroll", "hidden"].includes(getComputedStyle(p).overflowX)) { boxed = true; break; }
                          if (!boxed) out.push(`<${e.tagName.toLowerCase()} class="${e.className}"> right=${Math.round(r.right)}: ${(e.textContent || "").slice(0, 50)}`); }
                          return out.slice(-6); })()"#,
                );
                panic!(
                    "{page} is {width} px wide on a 390 px phone (wide content belongs in a scrolling box): {culprits:#}"
                );
            }
            if page == "404.html" {
                continue;
            }
            let dom = b.eval("document.documentElement.outerHTML");
            let (n, missing) = missing_targets(&site, page, dom.as_str().unwrap());
            assert!(n > 5, "{page}: only {n} links");
            assert!(
                missing.is_empty(),
                "{page}: links to missing files: {missing:?}"
            );
        }
    }

    // The matrix's 5/5, 3/5 and 0/5 cells at k = 5 are filled differently, although all three
    // are `uncertain`.
    b.open(
        &format!("file://{}", site.join("index.html").display()),
        1440,
        900,
    );
    let fills = b.eval(
        r#"(() => { const f = {}; for (const td of document.querySelectorAll("table.matrix td.iv")) {
              const t = td.querySelector(".rt").textContent; const k = t.split(" ")[0];
              if (["5/5", "3/5", "0/5"].includes(k)) f[k] = getComputedStyle(td).backgroundImage; }
              return f; })()"#,
    );
    let f = |k: &str| {
        fills[k]
            .as_str()
            .unwrap_or_else(|| panic!("no {k} cell: {fills}"))
            .to_string()
    };
    assert!(
        f("5/5") != f("3/5") && f("3/5") != f("0/5") && f("5/5") != f("0/5"),
        "{fills}"
    );
    // The shape table has both ends on the demo.
    let verdicts = b.eval(
        r#"Array.from(document.querySelectorAll("table.shapes td .vt")).map(e => e.textContent)"#,
    );
    let v: Vec<&str> = verdicts
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(v.contains(&"reliable") && v.contains(&"broken"), "{v:?}");
}

#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn a_fail_permalink_lands_with_its_label_and_detail_in_view() {
    let tmp = tempfile::tempdir().unwrap();
    let site = demo_site(tmp.path());
    let rows = samples_csv(&site);
    let mut b = Browser::launch();
    for label in ["parallel_collapse", "missing_required", "escaping_error"] {
        let page = failed_permalink(&rows, label);
        let sample = page
            .rsplit_once('/')
            .and_then(|(_, f)| f.strip_suffix(".html"))
            .unwrap()
            .to_string();
        for (w, h) in [(1440, 900), (390, 844)] {
            // The permalink, as a blog post links it: it lands on the sample's failure on its
            // run's page, with the sample's own label and detail in view.
            b.open_permalink(&format!("file://{}#fail", site.join(&page).display()), w, h);
            let r = b.eval(&format!(
                r##"(() => {{ const box = s => {{ const e = document.querySelector(s); if (!e) return null;
                      const r = e.getBoundingClientRect(); return [r.top, r.bottom]; }};
                      return {{badge: box("#s-{sample} h2 .o"), detail: box("#s-{sample} .detail"),
                              fail: box("#fail-{sample}"), hash: location.hash,
                              height: window.innerHeight, scrolled: window.scrollY}}; }})()"##
            ));
            assert_eq!(r["hash"], json!(format!("#fail-{sample}")), "{page}: {r}");
            let height = r["height"].as_f64().unwrap();
            for what in ["badge", "detail", "fail"] {
                let b = r[what]
                    .as_array()
                    .unwrap_or_else(|| panic!("{page}: no {what} element: {r}"));
                let (top, bottom) = (b[0].as_f64().unwrap(), b[1].as_f64().unwrap());
                assert!(
                    top >= 0.0 && top < height && (what == "fail" || bottom <= height),
                    "{page}#fail at {w}×{h}: the {what} is not in view ({top}..{bottom} of {height}): {r}"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn the_samples_page_narrows_to_a_label_and_a_model() {
    let tmp = tempfile::tempdir().unwrap();
    let site = demo_site(tmp.path());
    let rows = samples_csv(&site);
    let mut b = Browser::launch();
    b.open(
        &format!("file://{}", site.join("samples.html").display()),
        1440,
        900,
    );
    // It opens on the failures, their outcome cells coloured.
    let all = b.eval("document.getElementById('count').textContent");
    let fails = rows.iter().filter(|r| r["outcome"] == "fail").count();
    let fill = b.eval(
        "getComputedStyle(document.querySelector('#rows tr td:nth-child(4)')).backgroundColor",
    );
    assert_eq!(fill, json!("rgb(255, 235, 233)"), "the outcome cell's fill");
    assert!(
        all.as_str()
            .unwrap()
            .starts_with(&format!("{} of {} samples match", fails, rows.len())),
        "{all}"
    );
    for (label, model) in [
        ("parallel_collapse", "mock-sloppy"),
        ("no_call", "mock-flaky-stream"),
        ("truncation", "mock-good"),
    ] {
        let want = rows
            .iter()
            .filter(|r| r["label"] == label && r["model"] == model)
            .count();
        let js = format!(
            r##"(() => {{ const pick = (id, text) => {{ const s = document.getElementById(id);
                  for (const o of s.options) if (o.textContent === text) s.value = o.value;
                  s.dispatchEvent(new Event("change")); }};
                  pick("f-label", {label:?}); pick("f-model", {model:?});
                  const rows = Array.from(document.querySelectorAll("#rows tr"));
                  return {{count: document.getElementById("count").textContent, rows: rows.length,
                          ok: rows.every(r => r.cells[0].textContent === {model:?} && r.cells[3].textContent === {label:?})}}; }})()"##
        );
        let r = b.eval(&js);
        assert!(
            r["count"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{want} of {} samples match", rows.len())),
            "{label} × {model}: want {want}: {r}"
        );
        assert_eq!(r["rows"].as_u64().unwrap() as usize, want.min(100), "{r}");
        assert!(r["ok"].as_bool().unwrap(), "{r}");
    }
    // Free text over the details, and the filters kept in the address.
    let r = b.eval(
        r#"(() => { for (const id of ["f-label", "f-model"]) { const s = document.getElementById(id); s.value = ""; s.dispatchEvent(new Event("change")); }
              const q = document.getElementById("f-q"); q.value = "double-encoded";
              document.getElementById("f-outcome").value = "fail";
              document.getElementById("f-outcome").dispatchEvent(new Event("change"));
              return {count: document.getElementById("count").textContent, hash: location.hash}; })()"#,
    );
    let want = rows
        .iter()
        .filter(|r| r["outcome"] == "fail" && r["detail"].to_lowercase().contains("double-encoded"))
        .count();
    assert!(want > 0);
    assert!(
        r["count"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{want} of ")),
        "{r}"
    );
    assert!(
        r["hash"].as_str().unwrap().contains("q=double-encoded"),
        "{r}"
    );

    // The feedback samples are listed under the round filter (all, then per style), counted
    // apart from the first round, each row linking its own run page and its parent's.
    let fb = feedback_csv(&site);
    assert!(!fb.is_empty(), "the demo collects a feedback round");
    let by_link: std::collections::BTreeMap<&str, &std::collections::BTreeMap<String, String>> =
        fb.iter().map(|r| (r["permalink"].as_str(), r)).collect();
    // A run page anchor as samples.js writes it, from a permalink `t/m/t/run/NNN.html`.
    let anchor = |permalink: &str, failed: bool| {
        let (run, name) = permalink.rsplit_once('/').unwrap();
        let name = name.trim_end_matches(".html");
        format!(
            "{run}/index.html#{}{name}",
            if failed { "fail-" } else { "s-" }
        )
    };
    let outcome_of: std::collections::BTreeMap<&str, &str> = rows
        .iter()
        .map(|r| (r["permalink"].as_str(), r["outcome"].as_str()))
        .collect();
    for round in ["1", "error", "checklist", "retry"] {
        let want = fb
            .iter()
            .filter(|r| round == "1" || r["feedback"] == round)
            .count();
        let js = format!(
            r##"(() => {{ for (const id of ["f-label", "f-model", "f-tag", "f-task", "f-outcome"]) {{ document.getElementById(id).value = ""; }}
                  document.getElementById("f-q").value = "";
                  const r = document.getElementById("f-round"); r.value = {round:?};
                  r.dispatchEvent(new Event("change"));
                  const rows = Array.from(document.querySelectorAll("#rows tr"));
                  return {{count: document.getElementById("count").textContent, hash: location.hash,
                          rows: rows.map(r => [r.cells[2].querySelector("a").getAttribute("href"),
                                               (r.cells[2].querySelector("a.parent") || {{getAttribute: () => null}}).getAttribute("href"),
                                               r.cells[3].textContent])}}; }})()"##
        );
        let r = b.eval(&js);
        assert!(
            r["count"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{want} of {} feedback samples match", fb.len())),
            "round {round}: want {want}: {}",
            r["count"]
        );
        assert!(
            r["hash"]
                .as_str()
                .unwrap()
                .contains(&format!("round={round}")),
            "{}",
            r["hash"]
        );
        let shown = r["rows"].as_array().unwrap();
        assert_eq!(shown.len(), want.min(100), "round {round}");
        for row in shown {
            let (own, parent, outcome) = (
                row[0].as_str().unwrap(),
                row[1].as_str(),
                row[2].as_str().unwrap(),
            );
            // Back from the run page anchor to the csv row of the feedback sample.
            let (run, name) = own.split_once("/index.html#").unwrap();
            let name = name.trim_start_matches("fail-").trim_start_matches("s-");
            let link = format!("{run}/{name}.html");
            let csv = by_link
                .get(link.as_str())
                .unwrap_or_else(|| panic!("{own} is not a feedback sample"));
            assert!(
                round == "1" || csv["feedback"] == round,
                "{own} in round {round}"
            );
            let shown_outcome = match csv["outcome"].as_str() {
                "fail" => csv["label"].as_str(),
                other => other,
            };
            assert_eq!(outcome, shown_outcome, "{own}");
            let want_parent = outcome_of
                .get(csv["parent"].as_str())
                .map(|o| anchor(&csv["parent"], *o != "pass"));
            assert_eq!(parent.map(str::to_string), want_parent, "parent of {own}");
        }
    }
    // Back to the first round: the count means what it meant.
    let r = b.eval(
        r#"(() => { const r = document.getElementById("f-round"); r.value = "";
              r.dispatchEvent(new Event("change"));
              return document.getElementById("count").textContent; })()"#,
    );
    assert!(
        r.as_str()
            .unwrap()
            .starts_with(&format!("{} of {} samples match", rows.len(), rows.len())),
        "{r}"
    );
    assert!(b.console().is_empty(), "{:?}", b.console());
}

/// The pictures a reader sees first, saved for CI and for the README: the index, a tag page,
/// the samples page and a `#fail` transcript, at 1440 px and at 390 px.
#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn screenshots_of_the_demo() {
    let tmp = tempfile::tempdir().unwrap();
    let site = demo_site(tmp.path());
    let rows = samples_csv(&site);
    let shots = screenshots();
    let transcript = format!("{}#fail", failed_permalink(&rows, "parallel_collapse"));
    let mut b = Browser::launch();
    for (page, name) in [
        ("index.html", "index"),
        ("index.html#shapes", "index-shapes"),
        ("tags/parallel.html", "tag"),
        (
            "compare/mock-good--mock-good-stream.html#tasks",
            "compare-tasks",
        ),
        ("samples.html#outcome=fail", "samples"),
        ("samples.html#round=error", "samples-feedback"),
        (transcript.as_str(), "transcript-fail"),
    ] {
        for (w, h, suffix) in [(1440, 900, ""), (390, 844, "-phone")] {
            let url = format!("file://{}", site.join(page).display());
            if page.starts_with("t/") {
                b.open_permalink(&url, w, h);
            } else {
                b.open(&url, w, h);
            }
            b.screenshot(&shots.join(format!("{name}{suffix}.png")), false);
        }
    }
}

/// Kept from the first browser test: the demo's matrix shows all eleven labels among its marks.
#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn the_demo_site_shows_all_eleven_labels_in_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let site = demo_site(tmp.path());
    let mut b = Browser::launch();
    b.open(
        &format!("file://{}", site.join("index.html").display()),
        1440,
        900,
    );
    let shown = b.eval(
        r#"Array.from(new Set(Array.from(document.querySelectorAll("table.matrix i[title]")).map(e => e.title)))"#,
    );
    let shown: Vec<&str> = shown
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for label in callcheck::taxonomy::Label::ALL {
        assert!(
            shown.contains(&label.as_str()),
            "no {} mark in the demo matrix; marks seen: {shown:?}",
            label.as_str()
        );
    }
}

/// GitHub Pages serves 404.html at the missing address, however deep: its link to the matrix
/// must still reach the site's root.
#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn the_404_page_links_to_the_matrix_from_a_deep_missing_address() {
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &site, &[], &[]);
    let deep = site.join("t/no-such-model/no-such-task/r1");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::copy(site.join("404.html"), deep.join("000.html")).unwrap();
    let mut b = Browser::launch();
    b.open(
        &format!("file://{}", deep.join("000.html").display()),
        1440,
        900,
    );
    assert!(b.console().is_empty(), "{:?}", b.console());
    let home = b.eval("document.querySelector('a#home').href");
    let home = home.as_str().expect("the 404 page links home");
    assert_eq!(
        Path::new(home.strip_prefix("file://").unwrap()),
        site.join("index.html")
    );
    // A dead comparison, a dead tag and a dead top-level address link home too, the first two
    // to the index's comparisons and call shapes.
    std::fs::create_dir_all(site.join("compare")).unwrap();
    for (dead, extra) in [
        ("compare/no-such--row.html", Some("compare")),
        ("tags/no-such-tag.html", Some("tag")),
        ("no-such-page.html", None),
    ] {
        std::fs::copy(site.join("404.html"), site.join(dead)).unwrap();
        b.open(&format!("file://{}", site.join(dead).display()), 390, 844);
        let r = b.eval(
            r#"({home: document.querySelector("a#home").href, shown: !document.getElementById("home-item").hidden,
                 compare: !document.getElementById("compare-item").hidden, tag: !document.getElementById("tag-item").hidden,
                 width: document.documentElement.scrollWidth})"#,
        );
        assert_eq!(r["shown"], json!(true), "{dead}: {r}");
        assert_eq!(
            Path::new(r["home"].as_str().unwrap().strip_prefix("file://").unwrap()),
            site.join("index.html"),
            "{dead}: {r}"
        );
        assert_eq!(r["compare"], json!(extra == Some("compare")), "{dead}: {r}");
        assert_eq!(r["tag"], json!(extra == Some("tag")), "{dead}: {r}");
        assert!(r["width"].as_u64().unwrap() <= 390, "{dead}: {r}");
    }
}

/// The pages that show value accuracy and BFCL-style accuracy (a BFCL task, its tag, a model),
/// on a corpus that has them: no console message, nothing wider than a phone outside a
/// scrolling box, the value table where it should be. Screenshots for the reader to look at.
#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn value_accuracy_pages_fit_a_phone_and_log_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let site = value_fixture_site(tmp.path());
    let shots = screenshots();
    let mut b = Browser::launch();
    for (page, name) in [
        ("tasks/bfcl-fixture-weather.html", "values-task"),
        ("tags/simple-python.html", "values-tag"),
        ("models/m2.html", "values-model"),
    ] {
        for (w, h, suffix) in [(1440, 900, ""), (390, 844, "-phone")] {
            b.open(&format!("file://{}", site.join(page).display()), w, h);
            let console = b.console();
            assert!(console.is_empty(), "{page} at {w} px: {console:#?}");
            let width = b
                .eval("document.documentElement.scrollWidth")
                .as_u64()
                .unwrap();
            assert!(width <= w as u64, "{page} is {width} px wide at {w} px");
            // Value cells are graded like the others but carry no verdict class.
            let cells = b.eval(r#"document.querySelectorAll('td[class="iv"]').length"#);
            assert!(
                cells.as_u64().unwrap() >= 2,
                "{page}: no value cells ({cells})"
            );
            b.screenshot(&shots.join(format!("{name}{suffix}.png")), true);
        }
    }
}

/// What a reader must see of a page at a viewport: the cells that hold its answer (each box
/// inside the viewport's width, not clipped into a scrolling box's hidden part), and words of a
/// verdict on the first screen.
struct Answer {
    page: String,
    /// A JavaScript expression giving the answer cells (an array of elements).
    cells: &'static str,
    /// A JavaScript expression giving the elements whose text is read on the first screen.
    words: &'static str,
    /// A JavaScript regular expression one of those texts must match.
    verdict: &'static str,
}

#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn the_answer_columns_and_a_verdict_are_in_view_at_desktop_and_phone() {
    let tmp = tempfile::tempdir().unwrap();
    let site = demo_site(tmp.path());
    let rows = samples_csv(&site);
    let permalink = failed_permalink(&rows, "wrong_tool");
    let (run_dir, file) = permalink.rsplit_once('/').unwrap();
    let sample = file.strip_suffix(".html").unwrap().to_string();
    let compare = std::fs::read_dir(site.join("compare"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".html"))
        .expect("the demo compares its two mock-good rows");
    let labels = "pass|error|no_call|wrong_tool|malformed_json|schema_violation|hallucinated_param|missing_required|type_coercion|escaping_error|truncation|parallel_collapse|spurious_call";
    let verdicts = "^(reliable|unreliable|broken|uncertain)";
    let answers = [
        Answer {
            page: "index.html".into(),
            // The shape table's first row: one cell per model.
            cells: r##"[...document.querySelectorAll(".shapes tbody tr:first-child td.iv")]"##,
            // The ranked table's verdicts, first on the page.
            words: r##"[...document.querySelectorAll("table.rank .vt")]"##,
            verdict: verdicts,
        },
        Answer {
            page: "tags/parallel.html".into(),
            cells: r##"[...document.querySelector("main table").querySelectorAll("td.iv")]"##,
            words: r##"[...document.querySelectorAll(".vt")]"##,
            verdict: verdicts,
        },
        Answer {
            page: format!("compare/{compare}"),
            cells: r##"[...document.querySelectorAll("table.cmp tbody tr:first-child td[data-l='B − A'], table.cmp tbody tr:first-child td[data-l='verdict']")]"##,
            words: r##"[...document.querySelectorAll("p[class^='cmp-'] b")]"##,
            verdict: "better|worse|no evidence",
        },
        Answer {
            page: "samples.html".into(),
            // Outcome and detail of the first rows.
            cells: r##"[...document.querySelectorAll("#rows tr:nth-child(-n+3) td:nth-child(n+4)")]"##,
            words: r##"[...document.querySelectorAll("#rows td")]"##,
            verdict: labels,
        },
        Answer {
            page: "labels/wrong_tool.html".into(),
            cells: r##"[...document.querySelectorAll(".list tbody tr:first-child > *")]"##,
            words: r##"[...document.querySelectorAll("h1, .list td")]"##,
            verdict: "wrong_tool",
        },
        Answer {
            page: format!("{run_dir}/index.html"),
            cells: r##"[...document.querySelectorAll(".sample h2 .o, .sample .detail")].slice(0, 4)"##,
            words: r##"[...document.querySelectorAll("main > p")].slice(0, 3)"##,
            verdict: labels,
        },
    ];
    let mut b = Browser::launch();
    let shots = screenshots();
    let probe = |cells: &str, words: &str| {
        format!(
            r##"(() => {{ const w = window.innerWidth, h = window.innerHeight;
                const cells = ({cells}).map(e => {{ const r = e.getBoundingClientRect();
                    return [e.textContent.trim().slice(0, 40), r.left, r.right, r.width]; }});
                const seen = ({words}).filter(e => {{ const r = e.getBoundingClientRect();
                    return r.bottom > 0 && r.top < h && r.right > 0 && r.left < w && r.width > 0; }})
                    .map(e => e.textContent.trim());
                return {{w, h, cells, seen}}; }})()"##
        )
    };
    let check = |r: &Value, page: &str, w: u32, verdict: &str| {
        let width = r["w"].as_f64().unwrap();
        let cells = r["cells"].as_array().unwrap();
        assert!(!cells.is_empty(), "{page} at {w} px: no answer cell: {r}");
        for c in cells {
            let (left, right, cw) = (
                c[1].as_f64().unwrap(),
                c[2].as_f64().unwrap(),
                c[3].as_f64().unwrap(),
            );
            assert!(
                cw > 0.0 && left >= -0.5 && right <= width + 0.5,
                "{page} at {w} px: the answer cell {} is not inside the viewport ({left}..{right} of {width})",
                c[0]
            );
        }
        let seen: Vec<&str> = r["seen"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let re = regex::Regex::new(verdict).unwrap();
        assert!(
            seen.iter().any(|t| re.is_match(t)),
            "{page} at {w} px: no verdict word ({verdict}) on the first screen: {seen:?}"
        );
    };
    for a in &answers {
        for (w, h) in [(1440, 900), (390, 844)] {
            b.open(&format!("file://{}", site.join(&a.page).display()), w, h);
            let r = b.eval(&probe(a.cells, a.words));
            check(&r, &a.page, w, a.verdict);
            // Run folders are named by time: the run page's shot keeps one name.
            let name = match a.page.strip_prefix("t/") {
                Some(_) => "run-page".to_string(),
                None => a.page.replace('/', "_").replace(".html", ""),
            };
            b.screenshot(&shots.join(format!("answer-{name}-{w}.png")), false);
        }
    }
    // A `#fail` permalink: the sample's label is on the first screen, its badge and detail
    // inside the viewport's width.
    for (w, h) in [(1440, 900), (390, 844)] {
        b.open_permalink(
            &format!("file://{}#fail", site.join(&permalink).display()),
            w,
            h,
        );
        let cells = format!(
            r##"[...document.querySelectorAll("#s-{sample} h2 .o, #s-{sample} .detail")]"##
        );
        let words = format!(r##"[...document.querySelectorAll("#s-{sample} h2 .o")]"##);
        let r = b.eval(&probe(&cells, &words));
        check(&r, &permalink, w, "wrong_tool");
        b.screenshot(&shots.join(format!("answer-fail-permalink-{w}.png")), false);
    }
}

/// `routing.html` (SPEC §11) as a reader sees it, at 1440 px and at 390 px: no console message,
/// no page wider than the viewport (its tables scroll inside their own box on a phone), every
/// local link resolving, and its tables readable — no word or figure broken across lines (an
/// interval, a model name at its hyphens), no cell's text overflowing it, no text smaller than
/// 12 px, every cell naming its column when the header is hidden — with screenshots to look at.
#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn the_routing_page_fits_a_phone_and_its_tables_are_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let site = demo_site(tmp.path());
    let shots = screenshots();
    let mut b = Browser::launch();
    for (w, h, suffix) in [(1440, 900, ""), (390, 844, "-phone")] {
        b.open(
            &format!("file://{}", site.join("routing.html").display()),
            w,
            h,
        );
        // Pictures first, so that a failure below still leaves them to look at: the whole page,
        // then one screen at each table.
        b.screenshot(&shots.join(format!("routing{suffix}.png")), true);
        for id in ["policies", "tags", "labels"] {
            b.eval(&format!("document.getElementById({id:?}).scrollIntoView()"));
            b.screenshot(&shots.join(format!("routing{suffix}-{id}.png")), false);
        }
        let console = b.console();
        assert!(console.is_empty(), "routing.html at {w} px: {console:#?}");
        let width = b
            .eval("document.documentElement.scrollWidth")
            .as_u64()
            .unwrap();
        assert!(
            width <= w as u64,
            "routing.html is {width} px wide at {w} px"
        );
        let dom = b.eval("document.documentElement.outerHTML");
        let (n, missing) = missing_targets(&site, "routing.html", dom.as_str().unwrap());
        assert!(n > 20, "routing.html: only {n} links");
        assert!(
            missing.is_empty(),
            "routing.html: links to missing files: {missing:?}"
        );
        // Per table: its cells, and the ones a reader cannot read whole.
        let tables = b.eval(
            r#"(() => { const cut = (e) => {
                  // A word (no-break spaces join a unit: 67 %) of one text node laid out on more
                  // than one line: broken at a hyphen, a dash or for want of width.
                  const w = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
                  for (let n = w.nextNode(); n; n = w.nextNode()) {
                    for (const m of n.data.matchAll(/[^ \t\n]+/g)) {
                      const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
                      const lines = new Set(Array.from(r.getClientRects()).filter(x => x.width > 0).map(x => Math.round(x.top)));
                      if (lines.size > 1) return m[0];
                    } }
                  return null; };
                return Array.from(document.querySelectorAll("main table")).map(t => {
                  const bad = [];
                  const cells = Array.from(t.querySelectorAll("th, td"));
                  const head = t.querySelector("thead");
                  const carded = !!head && head.getClientRects().length === 0;
                  for (const e of cells) {
                    // A header hidden on a phone: each cell then names its column itself.
                    if (e.getClientRects().length === 0) continue;
                    if (carded && e.tagName === "TD" && !e.dataset.l) bad.push(`a cell without its column's name: ${e.innerText.slice(0, 40)}`);
                    const r = e.getBoundingClientRect();
                    if (e.scrollWidth > e.clientWidth + 1) bad.push(`overflows: ${e.innerText.slice(0, 40)}`);
                    else if (cut(e)) bad.push(`a word is cut: ${cut(e)} in ${e.innerText.slice(0, 60)} (${Math.round(r.width)} px)`);
                    for (const x of [e, ...e.querySelectorAll("*")])
                      if (parseFloat(getComputedStyle(x).fontSize) < 12) { bad.push(`text below 12 px: ${x.innerText.slice(0, 40)}`); break; }
                  }
                  const box = t.closest(".wide");
                  return {cells: cells.length, bad: bad.slice(0, 8), boxed: !!box && box.getBoundingClientRect().right <= innerWidth + 0.5,
                          heading: (t.querySelector("thead") || t).innerText.slice(0, 60)}; }); })()"#,
        );
        let tables = tables.as_array().unwrap();
        assert!(
            tables.len() >= 3,
            "routing.html has {} tables",
            tables.len()
        );
        for t in tables {
            assert!(t["cells"].as_u64().unwrap() > 0, "{t}");
            assert!(
                t["bad"].as_array().unwrap().is_empty(),
                "routing.html at {w} px, table {}: {:#}",
                t["heading"],
                t["bad"]
            );
            assert!(
                t["boxed"].as_bool().unwrap(),
                "a table outside a scrolling box: {t}"
            );
        }
    }
}

/// Where an element is in the viewport, as `[top, bottom, left, right]`, or `null`.
const BOX: &str = r#"const box = e => { if (!e) return null; const r = e.getBoundingClientRect();
    return [r.top, r.bottom, r.left, r.right]; };"#;

/// The index answers "which one" before anything else: the per-model table, ranked by the
/// interval's lower bound, has its first row's verdict inside the first screen at 1440 × 900 and
/// at 390 × 844, and its rows are in the order of their lower bounds.
#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn the_index_ranks_the_models_on_its_first_screen() {
    let tmp = tempfile::tempdir().unwrap();
    let site = demo_site(tmp.path());
    let mut b = Browser::launch();
    let shots = screenshots();
    for (w, h) in [(1440, 900), (390, 844)] {
        b.open(
            &format!("file://{}", site.join("index.html").display()),
            w,
            h,
        );
        let r = b.eval(&format!(
            r#"(() => {{ {BOX} const rows = [...document.querySelectorAll("table.rank tbody tr")];
                  return {{ verdict: box(rows[0] && rows[0].querySelector(".vt")),
                           word: rows[0] && rows[0].querySelector(".vt").textContent,
                           model: box(rows[0] && rows[0].querySelector("th a")),
                           lower: rows.map(r => Number(r.querySelector("td.iv").dataset.v)),
                           ranks: rows.map(r => r.cells[0].textContent),
                           h: innerHeight, w: innerWidth }}; }})()"#
        ));
        let (vh, vw) = (r["h"].as_f64().unwrap(), r["w"].as_f64().unwrap());
        for what in ["verdict", "model"] {
            let b = r[what]
                .as_array()
                .unwrap_or_else(|| panic!("no ranked table at {w} px: {r}"));
            let [top, bottom, left, right] = [0, 1, 2, 3].map(|i| b[i].as_f64().unwrap());
            assert!(
                top >= 0.0 && bottom <= vh && left >= 0.0 && right <= vw,
                "at {w}×{h} the first row's {what} is not on the first screen: {r}"
            );
        }
        let word = r["word"].as_str().unwrap();
        assert!(
            ["reliable", "unreliable", "broken", "uncertain"].contains(&word),
            "{r}"
        );
        let lower: Vec<f64> = r["lower"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(lower.len(), 4, "one row per demo model: {r}");
        assert!(
            lower.windows(2).all(|p| p[0] >= p[1]),
            "not ranked by the lower bound: {r}"
        );
        assert_eq!(r["ranks"], json!(["1", "2", "3", "4"]), "{r}");
        b.screenshot(&shots.join(format!("first-screen-index-{w}.png")), false);
    }
}

/// A `#fail` permalink, as a blog post links it, lands on the failing sample's own heading at
/// the top of the screen with its one-line context (model · task · run) under it, and nothing
/// of another sample above it — a sample in the middle of its run and the last one alike.
#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn a_fail_permalink_lands_on_its_heading_and_context() {
    let tmp = tempfile::tempdir().unwrap();
    let site = demo_site(tmp.path());
    let rows = samples_csv(&site);
    let mut b = Browser::launch();
    let shots = screenshots();
    // Failures that are not their run's first sample (another sample's content is above them
    // on the page), the last of a run among them.
    let mut picks: Vec<&std::collections::BTreeMap<String, String>> = Vec::new();
    for label in ["schema_violation", "wrong_tool", "parallel_collapse"] {
        let r = rows
            .iter()
            .find(|r| r["label"] == label && r["sample"] != "000")
            .unwrap_or_else(|| panic!("no later {label} sample"));
        picks.push(r);
    }
    let last = rows
        .iter()
        .filter(|r| r["outcome"] == "fail")
        .max_by_key(|r| r["sample"].clone())
        .unwrap();
    picks.push(last);
    for r in picks {
        let page = &r["permalink"];
        let sample = &r["sample"];
        let context = format!("{} · {} · run {}", r["model"], r["task"], r["run"]);
        for (w, h) in [(1440, 900), (390, 844)] {
            b.open_permalink(&format!("file://{}#fail", site.join(page).display()), w, h);
            let got = b.eval(&format!(
                r##"(() => {{ {BOX} const head = document.getElementById("fail-{sample}");
                      const others = [...document.querySelectorAll(".sample")]
                          .filter(s => s.id !== "s-{sample}")
                          .map(s => s.getBoundingClientRect())
                          .filter(r => r.bottom > 1 && r.top < innerHeight).map(r => [r.top, r.bottom]);
                      return {{ head: box(head), h2: box(head && head.querySelector("h2")),
                               ctx: box(head && head.querySelector(".ctx")),
                               text: head && head.querySelector(".ctx") && head.querySelector(".ctx").textContent,
                               others, hash: location.hash, h: innerHeight }}; }})()"##
            ));
            let vh = got["h"].as_f64().unwrap();
            assert_eq!(got["hash"], json!(format!("#fail-{sample}")), "{got}");
            assert_eq!(got["text"], json!(context), "{page}: {got}");
            for what in ["h2", "ctx"] {
                let b = got[what]
                    .as_array()
                    .unwrap_or_else(|| panic!("{page}: no {what}: {got}"));
                let (top, bottom) = (b[0].as_f64().unwrap(), b[1].as_f64().unwrap());
                assert!(
                    top >= 0.0 && bottom <= vh,
                    "{page}#fail at {w}×{h}: the {what} is not in view: {got}"
                );
            }
            let head_top = got["head"][0].as_f64().unwrap();
            assert!(
                head_top.abs() < 24.0,
                "{page}#fail at {w}×{h}: the sample's head is not at the top of the screen: {got}"
            );
            // Whatever of another sample is in view lies below this one's head.
            for o in got["others"].as_array().unwrap() {
                assert!(
                    o[0].as_f64().unwrap() >= head_top,
                    "{page}#fail at {w}×{h}: another sample is above the landing: {got}"
                );
            }
        }
        if r["label"] == "schema_violation" {
            b.screenshot(&shots.join("fail-landing-390.png"), false);
        }
    }
}

/// The long tables keep their column heads in view while their rows scroll: the index's shape
/// table and matrix, a tag's matrix, the samples list (desktop; a phone shows it as cards that
/// name their fields) — at 1440 and at 390 px, where it applies.
#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn long_tables_keep_their_heads_in_view() {
    let tmp = tempfile::tempdir().unwrap();
    let site = demo_site(tmp.path());
    let mut b = Browser::launch();
    let cases = [
        ("index.html", "table.shapes", true),
        ("index.html", "table.matrix", true),
        ("tags/parallel.html", "table.matrix", true),
        ("samples.html", "table.list", false),
    ];
    for (page, table, phone) in cases {
        for (w, h) in [(1440, 900), (390, 844)] {
            if w == 390 && !phone {
                continue;
            }
            b.open(&format!("file://{}", site.join(page).display()), w, h);
            // Bring the table to the top of the screen, then read far down it, as a reader
            // scrolls with the wheel over it: the page first, then the box it sits in.
            let r = b.eval(&format!(
                r#"(async () => {{ {BOX} const t = document.querySelector("{table}");
                      if (!t) return null;
                      const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
                      if (t.tBodies[0] && t.tBodies[0].rows.length < 8)
                          await new Promise(r => setTimeout(r, 500));
                      const box0 = t.parentElement;
                      window.scrollTo(0, scrollY + box0.getBoundingClientRect().top);
                      await frame();
                      const rows = [...t.querySelectorAll("tbody tr")];
                      const far = rows[Math.min(rows.length - 1, 20)];
                      // The wheel over the table scrolls its box (a screen tall at most).
                      box0.scrollTop += far.getBoundingClientRect().top - box0.getBoundingClientRect().top - 300;
                      await frame();
                      const head = t.tHead.rows[0].cells[t.tHead.rows[0].cells.length - 1];
                      return {{ head: box(head), far: box(far), rows: rows.length,
                               scrolled: box0.scrollTop + scrollY, h: innerHeight }}; }})()"#
            ));
            assert!(!r.is_null(), "{page}: no {table}");
            assert!(r["rows"].as_u64().unwrap() > 8, "{page} {table}: {r}");
            let head = r["head"].as_array().unwrap();
            let far = r["far"].as_array().unwrap();
            let (top, bottom) = (head[0].as_f64().unwrap(), head[1].as_f64().unwrap());
            assert!(
                top >= -0.5 && bottom <= r["h"].as_f64().unwrap(),
                "{page} {table} at {w} px: the column heads scrolled away: {r}"
            );
            // The row read is below the heads, not under them.
            assert!(
                far[0].as_f64().unwrap() >= bottom - 0.5,
                "{page} {table} at {w} px: {r}"
            );
        }
    }
}

/// axe-core's script, which `CALLCHECK_AXE` names (.ci/run fetches a pinned version into a
/// cache; it never ships on the site). Without it the accessibility test fails, never passes.
fn axe_script() -> String {
    let path = std::env::var_os("CALLCHECK_AXE").unwrap_or_else(|| {
        panic!(
            "CALLCHECK_AXE is not set: it names axe-core's axe.min.js (.ci/run fetches it: npm pack axe-core@4.10.2)"
        )
    });
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", Path::new(&path).display()))
}

/// axe-core's serious and critical violations on the page shown, as `id (impact): target`.
fn axe_violations(b: &mut Browser, axe: &str) -> Vec<String> {
    b.eval(axe);
    let r = b.eval(
        r#"axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
              .filter(v => v.impact === "serious" || v.impact === "critical")
              .flatMap(v => v.nodes.slice(0, 4).map(n => `${v.id} (${v.impact}): ${n.target.join(" ")}: ${(n.failureSummary || "").slice(0, 160)}`)))"#,
    );
    r.as_array()
        .unwrap_or_else(|| panic!("axe gave no result: {r}"))
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// The pages a reader meets most pass axe-core with no serious or critical violation, at 1440
/// and at 390 px — contrast on the verdict fills, names, landmarks — and its sortable table
/// heads sort from the keyboard, saying so with `aria-sort`, where a head that is a link sorts
/// rather than navigates.
#[test]
#[ignore = "needs Chromium: run with `cargo test --test it -- --ignored site_chromium::`"]
fn the_main_pages_pass_axe_and_sort_from_the_keyboard() {
    let axe = axe_script();
    let tmp = tempfile::tempdir().unwrap();
    let site = demo_site(tmp.path());
    let rows = samples_csv(&site);
    let permalink = failed_permalink(&rows, "schema_violation");
    let run_page = format!("{}/index.html", permalink.rsplit_once('/').unwrap().0);
    let mut b = Browser::launch();

    // A control: text too faint to read is flagged, so an empty list below means something.
    let bad = tmp.path().join("faint.html");
    std::fs::write(
        &bad,
        "<!doctype html><html lang=\"en\"><head><title>faint</title></head><body><main><p style=\"color:#bbb;background:#fff\">faint</p></main></body></html>",
    )
    .unwrap();
    b.open(&format!("file://{}", bad.display()), 1440, 900);
    let v = axe_violations(&mut b, &axe);
    assert!(
        v.iter().any(|v| v.starts_with("color-contrast")),
        "axe saw nothing on the control page: {v:?}"
    );

    let pages = [
        "index.html".to_string(),
        "compare/mock-good--mock-good-stream.html".into(),
        "routing.html".into(),
        "tags/parallel.html".into(),
        "labels/schema_violation.html".into(),
        run_page,
    ];
    let mut found = Vec::new();
    for page in &pages {
        for (w, h) in [(1440, 900), (390, 844)] {
            b.open(&format!("file://{}", site.join(page).display()), w, h);
            for v in axe_violations(&mut b, &axe) {
                found.push(format!("{page} at {w} px: {v}"));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");

    // The keyboard: the ranked table's heads are reachable, Enter sorts and says so; the model
    // head of the shape table is a link, and activating it sorts and stays on the page.
    b.open(
        &format!("file://{}", site.join("index.html").display()),
        1440,
        900,
    );
    let r = b.eval(
        r#"(() => { const th = document.querySelector("table.rank thead th:nth-child(4)");
              const before = th.getAttribute("aria-sort");
              th.focus(); const focused = document.activeElement === th;
              th.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter", bubbles: true}));
              const after = th.getAttribute("aria-sort");
              const lower = [...document.querySelectorAll("table.rank tbody td.iv")].map(td => Number(td.dataset.v));
              const link = document.querySelector("table.shapes thead th a");
              link.click();
              return {before, focused, after, lower, href: location.href,
                      linkSort: link.closest("th").getAttribute("aria-sort")}; })()"#,
    );
    assert_eq!(r["before"], json!("none"), "{r}");
    assert_eq!(r["focused"], json!(true), "{r}");
    assert_eq!(r["after"], json!("ascending"), "{r}");
    let lower: Vec<f64> = r["lower"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(lower.windows(2).all(|p| p[0] <= p[1]), "{r}");
    assert!(
        r["href"].as_str().unwrap().ends_with("/index.html"),
        "a head that is a link navigated: {r}"
    );
    assert_eq!(r["linkSort"], json!("ascending"), "{r}");
}
