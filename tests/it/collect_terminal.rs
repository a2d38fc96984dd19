//! What collect prints, read by a person and by a CI log: server-controlled text with its
//! control characters escaped (SPEC §12), against the real mock serving a hostile model id.

use crate::support::collect::*;

/// A model id that sets the window title and clears the screen when printed raw.
const HOSTILE: &str = "m\u{1b}]0;title\u{7}\u{1b}[2J";
/// How the terminal must show it.
const SHOWN: &str = "m\\e]0;title\\x07\\e[2J";

/// True when `bytes` hold a control byte a terminal would obey (anything below space but a
/// newline, DEL, or a C1 control written in UTF-8).
fn obeyed_controls(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .filter(|l| l.chars().any(|c| c.is_control()))
        .map(|l| format!("{l:?}"))
        .collect()
}

#[test]
fn a_hostile_model_id_reaches_the_terminal_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let mock_toml = format!(
        "[[model]]\nname = {}\nrefuse_tool_choice = [\"required\"]\n",
        toml_string(HOSTILE)
    );
    let mock = start_mock(tmp.path(), Some(&mock_toml), &corpus());
    // One row asks for the hostile id (served: its probes are refused, with bodies naming
    // it); the other asks for an id the server does not list (stopped, the list quoted).
    let cfg = tmp.path().join("callcheck.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[model]]\nname = \"hostile\"\nbase_url = \"{u}\"\nmodel = {m}\ntimeout_secs = 10\n\n[[model]]\nname = \"absent\"\nbase_url = \"{u}\"\nmodel = \"served\"\ntimeout_secs = 10\n",
            u = mock.url,
            m = toml_string(HOSTILE)
        ),
    )
    .unwrap();
    let runs = tmp.path().join("runs");
    let out = collect_in(&cfg, &corpus(), &runs, &ONE_CELL, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    // The absent row is not collected: exit 1, naming it.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error: not collected: absent"), "{err}");
    assert_eq!(obeyed_controls(&out.stderr), Vec::<String>::new(), "{err}");
    assert_eq!(obeyed_controls(&out.stdout), Vec::<String>::new());
    // The id is there, shown: in the stopped row's reason (preflight line, summary) …
    let stopped = format!("is not among the models {} serves ({SHOWN})", mock.url);
    assert!(
        err.matches(&stopped).count() >= 2,
        "the WARNING line and the summary quote the list: {err}"
    );
    // … and the hostile row's refused probes are reported.
    assert!(
        err.contains("WARNING hostile: preflight tool_choice_required: refused: HTTP 400"),
        "{err}"
    );
    assert!(err.contains("hostile: 3 samples written"), "{err}");
}

/// `s` as a TOML basic string, control characters as `\u` escapes.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The lines of `text` that start with `prefix`.
fn lines_with<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[test]
fn the_preflight_is_one_line_per_row_unless_verbose() {
    let tmp = tempfile::tempdir().unwrap();
    let rows = [("a", "mock-good", false, 2), ("b", "mock-good", true, 2)];
    let (mock, cfg) = mock_and_config(tmp.path(), None, &corpus(), &rows);
    let runs = tmp.path().join("runs");
    let flags = ["--k", "3", "--only", "basic-weather-city"];
    let out = collect_in(&cfg, &corpus(), &runs, &flags, &[]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    let n = callcheck::server::CHECKS.len();
    for row in ["a", "b"] {
        let lines = lines_with(&err, &format!("preflight {row}: "));
        assert_eq!(lines.len(), 1, "{err}");
        let want = format!(
            "preflight {row}: GET {}/models: HTTP 200, 3 model ids in ",
            mock.url
        );
        assert!(lines[0].starts_with(&want), "{err}");
        assert!(
            lines[0].contains(&format!("; {n} of {n} checks passed in ")),
            "{err}"
        );
    }
    // --verbose: every request of the preflight on its own line, then the time it took.
    let out = collect_in(
        &cfg,
        &corpus(),
        &tmp.path().join("runs2"),
        &[&flags[..], &["--verbose"]].concat(),
        &[],
    );
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    let lines = lines_with(&err, "preflight a: ");
    // GET /models, six probes, "done".
    assert_eq!(lines.len(), 8, "{err}");
    assert!(
        lines[1].starts_with("preflight a: probe tools: HTTP 200 in "),
        "{err}"
    );
    assert!(lines[7].starts_with("preflight a: done in "), "{err}");
}

#[test]
fn off_a_terminal_progress_lines_come_at_a_steady_interval() {
    let tmp = tempfile::tempdir().unwrap();
    // A slow server: 200 ms per answer, one at a time, so 9 samples take about 2 s.
    let server = gateway(|_| {
        std::thread::sleep(std::time::Duration::from_millis(200));
        Reply::json(200, completion(10, None))
    });
    let cfg = tmp.path().join("callcheck.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[model]]\nname = \"slow\"\nbase_url = \"{}\"\nmodel = \"served\"\nconcurrency = 1\ntimeout_secs = 10\n",
            server.url
        ),
    )
    .unwrap();
    // stderr is a pipe here, as in CI.
    let out = collect_in(
        &cfg,
        &corpus(),
        &tmp.path().join("runs"),
        &["--k", "3", "--no-preflight", "--only", "basic-*"],
        &[("CALLCHECK_PROGRESS_SECS", "0.4")],
    );
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    let re = regex::Regex::new(
        r"^progress: cells (\d+)/3, samples (\d+)/9, (\d+) transport errors?, \d+\.\d\d samples/s, (about .* left|none left|time left unknown \(no sample yet\)) \(.* elapsed\)$",
    )
    .unwrap();
    // `none left`: every sample is answered and the last cells are being written, which a
    // loaded machine can take longer than one tick to do.
    let lines = lines_with(&err, "progress: ");
    assert!(lines.len() >= 2, "{err}");
    let mut last = (0, 0);
    for l in &lines {
        let c = re.captures(l).unwrap_or_else(|| panic!("{l:?}\n{err}"));
        let cells: u64 = c[1].parse().unwrap();
        let samples: u64 = c[2].parse().unwrap();
        assert_eq!(&c[3], "0", "{l}");
        assert!(cells <= 3 && samples <= 9, "{l}");
        assert!(
            cells * 3 <= samples,
            "a cell is done after its samples: {l}"
        );
        assert!((cells, samples) >= last, "counts only grow: {err}");
        last = (cells, samples);
    }
    // The lines saw the collection move, and ended before its summary.
    assert!(last.1 > 0 && last.1 < 9 || lines.len() >= 3, "{err}");
    let summary = err.find("slow: 9 samples written").unwrap();
    assert!(err.rfind("progress: ").unwrap() < summary, "{err}");
}

#[test]
fn collect_and_build_agree_on_what_a_transport_error_is() {
    let tmp = tempfile::tempdir().unwrap();
    // Sample 0 answers, sample 1 answers HTTP 200 with an HTML page, sample 2 is a 404.
    let server = gateway(|req| match sample_of(req) {
        Some(1) => Reply::json(200, "<html>proxy error</html>"),
        Some(2) => Reply::json(404, r#"{"error":{"message":"gone"}}"#),
        _ => Reply::json(200, completion(10, None)),
    });
    let cfg = row_config(tmp.path(), &server.url, "timeout_secs = 10\n");
    let runs = tmp.path().join("runs");
    let out = collect_in(
        &cfg,
        &corpus(),
        &runs,
        &[
            "--k",
            "3",
            "--no-preflight",
            "--retries",
            "0",
            "--only",
            "basic-weather-city",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("row: 3 samples written, 1 kept as transport errors (HTTP 404 × 1) and 1 answered but not a chat completion (not JSON, or a stream with no end), which build also counts as transport errors (2 in all); "),
        "{err}"
    );
    let built = build_in(tmp.path(), &runs, &tmp.path().join("site"));
    let err = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "{err}");
    assert!(
        err.contains("3 samples (")
            && err.contains(
                " (0 passed, 1 failed, 2 transport errors: no complete chat completion received); "
            ),
        "{err}"
    );
}
