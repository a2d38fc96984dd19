//! A bearer token a server echoes back in pieces, end to end: the real collect binary against
//! a loopback gateway that streams the key split across 2, 3 and 10 SSE events (and writes it
//! `\u`-escaped in its non-streamed answers), then the real build; the key must appear nowhere
//! in runs/, the site or anything either command printed (SPEC §12).

use crate::support::collect::*;
use callcheck::runs;
use std::path::Path;

const KEY: &str = "sk-callcheck-test-0123456789abcdef";

/// An SSE answer whose content says `text`, cut into `n` content events of near-equal length.
fn split_stream(text: &str, n: usize) -> Vec<u8> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::from(
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
    );
    for i in 0..n {
        let piece: String = chars[i * chars.len() / n..(i + 1) * chars.len() / n]
            .iter()
            .collect();
        out.push_str(&format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{}}}}}]}}\n\n",
            serde_json::to_string(&piece).unwrap()
        ));
    }
    out.push_str("data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":80,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n");
    out.into_bytes()
}

fn all_text(root: &Path) -> Vec<(String, String)> {
    files(root)
        .into_iter()
        .map(|(name, bytes)| (name, String::from_utf8_lossy(&bytes).into_owned()))
        .collect()
}

#[test]
fn a_key_streamed_back_in_pieces_reaches_neither_runs_nor_the_site() {
    let tmp = tempfile::tempdir().unwrap();
    // The sample's index in its cell picks the split: 2, 3 or 10 events.
    let server = gateway(|req| {
        let auth = req
            .headers
            .get("authorization")
            .cloned()
            .unwrap_or_default();
        let key = auth.strip_prefix("Bearer ").unwrap_or_default().to_string();
        let text = format!("Your key is {key}, keep it safe.");
        let streamed = String::from_utf8_lossy(&req.body).contains("\"stream\":true");
        if !streamed {
            // The same echo, written the way a JSON writer that escapes letters would.
            let escaped = text.replacen("sk-", "\\u0073k-", 1);
            return Reply::json(200, completion(80, None).replace("It is sunny.", &escaped));
        }
        let sample = sample_of(req).unwrap_or(0);
        Reply::Full {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: split_stream(&text, [2, 3, 10][sample % 3]),
        }
    });
    let cfg = row_config(
        tmp.path(),
        &server.url,
        "stream = true\napi_key_env = \"CALLCHECK_TEST_KEY\"\ntimeout_secs = 10\n",
    );
    let runs = tmp.path().join("runs");
    let out = collect_in(
        &cfg,
        &corpus(),
        &runs,
        &ONE_CELL,
        &[("CALLCHECK_TEST_KEY", KEY)],
    );
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{printed}");
    assert!(!printed.contains(KEY), "{printed}");
    // The server did stream it, in pieces none of which is the key.
    assert!(
        server
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.headers.contains_key("x-callcheck-sample"))
            .count()
            == 3
    );

    let run = &runs::scan(&runs).runs[0];
    assert_eq!(run.samples.len(), 3);
    for s in &run.samples {
        let dir = run.sample_dir(s);
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["redacted_secrets"], 1, "{meta}");
        let body = std::fs::read_to_string(dir.join("response.sse")).unwrap();
        let done = callcheck::score::wire::parse_stream(body.as_bytes()).unwrap();
        assert_eq!(
            done.content.as_deref(),
            Some("Your key is [REDACTED], keep it safe."),
            "{body}"
        );
    }
    // The preflight's probes (both streamed and not) were redacted too.
    for (name, text) in all_text(&runs) {
        assert!(!text.contains(KEY), "{name} holds the key");
        assert!(!text.contains(&KEY[1..]), "{name} holds the escaped key");
    }

    let site = tmp.path().join("site");
    let built = build_in(tmp.path(), &runs, &site);
    let printed = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "{printed}");
    assert!(!printed.contains(KEY), "{printed}");
    let pages = all_text(&site);
    assert!(pages.len() > 10);
    for (name, text) in pages.iter().chain(&all_text(&tmp.path().join("cache"))) {
        assert!(!text.contains(KEY), "{name} publishes the key");
    }
    assert!(
        pages
            .iter()
            .any(|(_, t)| t.contains("Your key is [REDACTED], keep it safe.")),
        "the redacted answer is published as rejoined"
    );
}
