//! A run's page as a reader meets it: the conversation in the order the model read it (system,
//! earlier turns, tools, the user's message, then each sample's answer), the request-differs
//! warning only for a real difference (each sample's own seed is not one) and naming it, and
//! no raw control byte on any page of a site built from a garbage response.

use crate::support::site::*;
use serde_json::{Value, json};
use std::path::Path;

/// The fixture corpus and one run of `convert-currency` by `model`, its samples' requests a
/// whole conversation: a system prompt, an earlier turn with a tool result, the question.
fn conversation_run(runs: &Path, model: &str, requests: &[Value]) {
    let tasks = callcheck::task::load(&fixture_tasks()).unwrap();
    let call = || {
        Reply::Calls(vec![(
            "convert_currency",
            json!({"amount": 100, "from": "EUR", "to": "USD"}),
        )])
    };
    let replies: Vec<Reply> = requests.iter().map(|_| call()).collect();
    write_run(runs, &tasks, model, "convert-currency", &replies);
    for (i, r) in requests.iter().enumerate() {
        let path = runs
            .join(model)
            .join("convert-currency/r0001/samples")
            .join(format!("{i:03}/request.json"));
        std::fs::write(path, r.to_string()).unwrap();
    }
}

fn request(seed: u64, temperature: f64) -> Value {
    let tasks = callcheck::task::load(&fixture_tasks()).unwrap();
    let t = tasks.iter().find(|t| t.id == "convert-currency").unwrap();
    json!({
        "model": "org/m",
        "messages": [
            {"role": "system", "content": "SYSTEM-PROMPT-MARK"},
            {"role": "user", "content": "EARLIER-TURN-MARK"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "convert_currency", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c0", "content": "TOOL-RESULT-MARK"},
            {"role": "user", "content": "FINAL-QUESTION-MARK"}
        ],
        "tools": t.tools_json,
        "temperature": temperature,
        "seed": seed,
    })
}

fn at(page: &str, needle: &str) -> usize {
    let found: Vec<usize> = page.match_indices(needle).map(|(i, _)| i).collect();
    assert_eq!(
        found.len(),
        1,
        "{needle:?} once on the page, found {found:?}"
    );
    found[0]
}

#[test]
fn a_run_page_reads_in_conversation_order_and_warns_only_of_real_differences() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    // Samples 000 and 001 differ only in their seed; 002 also in its temperature.
    conversation_run(
        &runs,
        "m",
        &[request(11, 0.7), request(22, 0.7), request(33, 0.2)],
    );
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &runs, &out, &[], &[]);
    let page = read(&out, "t/m/convert-currency/r0001/index.html");

    // What was sent, in the order the model read it, then the answers.
    // (The request's text recurs below: in the sample that sent another, and in the curl block.)
    let first = |needle: &str| page.find(needle).unwrap();
    let order = [
        at(&page, "<h2 id=\"request\">"),
        first("SYSTEM-PROMPT-MARK"),
        first("EARLIER-TURN-MARK"),
        first("TOOL-RESULT-MARK"),
        first("<p class=\"role\">tools</p>"),
        first("FINAL-QUESTION-MARK"),
        at(&page, "<h2 id=\"answers\">"),
        at(&page, "id=\"s-000\""),
        at(&page, "id=\"s-001\""),
        at(&page, "id=\"s-002\""),
        at(&page, "<h2 id=\"curl\">"),
    ];
    let mut sorted = order;
    sorted.sort();
    assert_eq!(order, sorted, "{page}");

    // The seed alone is no difference; the temperature is, and it is named.
    assert_eq!(
        page.matches("request differs from the run").count(),
        1,
        "{page}"
    );
    let s002 = &page[at(&page, "id=\"s-002\"")..];
    assert!(
        s002.contains("This sample's request differs from the run's in: temperature. What it sent"),
        "{s002}"
    );
    // The differing sample shows its own conversation in the same order, before its answer.
    let sent = [
        s002.find("SYSTEM-PROMPT-MARK").unwrap(),
        s002.find("<p class=\"role\">tools</p>").unwrap(),
        s002.find("FINAL-QUESTION-MARK").unwrap(),
        s002.find("<h3>The answer</h3>").unwrap(),
        s002.find("<h3>Call 1:").unwrap(),
    ];
    let mut sorted = sent;
    sorted.sort();
    assert_eq!(sent, sorted, "{s002}");
    // Each sample says its own seed (the request shown once carries the first's).
    let s001 = &page[at(&page, "id=\"s-001\"")..at(&page, "id=\"s-002\"")];
    assert!(s001.contains("seed <b>22</b>"), "{s001}");

    // A failure's JSON body is laid out for reading, its tokens as received, a tab a level
    // (the run's page says once where the bytes are).
    assert!(page.contains("Response body, laid out:\n{\n"), "{page}");
    assert!(page.contains("\n\t\"id\": \"chatcmpl-1\",\n\t\"object\": \"chat.completion\",\n"));
    assert!(page.contains("the bytes are in runs/"), "{page}");
}

/// Bytes a browser draws as nothing: C0 controls but newline and tab, DEL, and C1 controls
/// (U+0080–U+009F, `C2 80`–`C2 9F` in UTF-8).
fn control_bytes(bytes: &[u8]) -> Vec<(usize, u8)> {
    let mut found = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        let c0 = b < 0x20 && b != b'\n' && b != b'\t';
        let c1 = b == 0xc2 && bytes.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n));
        if c0 || b == 0x7f || c1 {
            found.push((i, b));
        }
    }
    found
}

#[test]
fn no_page_carries_a_raw_control_byte_from_a_garbage_response() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    conversation_run(
        &runs,
        "garbage",
        &[request(1, 0.7), request(2, 0.7), request(3, 0.7)],
    );
    let samples = runs.join("garbage/convert-currency/r0001/samples");
    // 000: JSON whose content decodes to terminal escapes, NUL, CR, DEL and a C1 control.
    let content = "\u{1b}[2J\u{1b}[31mred\u{0}\r\u{7f}\u{85}end";
    let body = json!({"id": "x", "object": "chat.completion", "model": "garbage",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]});
    std::fs::write(samples.join("000/response.json"), body.to_string()).unwrap();
    // 001: raw bytes that are not JSON (nor UTF-8), as a broken server sends them.
    std::fs::write(
        samples.join("001/response.json"),
        b"\x1b[2J\x00garbage\r\x7f\xc2\x85 \xff\xfe{",
    )
    .unwrap();
    // 002: a stream whose event carries them, and a meta.json error that does.
    std::fs::remove_file(samples.join("002/response.json")).unwrap();
    std::fs::write(
        samples.join("002/response.sse"),
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\u{1b}[1mbold\u{7}\"}}]}\n\ndata: \u{1b}raw\u{0}\n\n",
    )
    .unwrap();
    let meta = json!({"status": 200, "headers": {"x-note": "a\u{1b}b"}, "attempts": [], "error": "cut \u{1b}[0m\u{0} short", "streamed": true});
    std::fs::write(samples.join("002/meta.json"), meta.to_string()).unwrap();

    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &runs, &out, &[], &[]);
    let site = tree(&out);
    let mut pages = 0;
    for (path, bytes) in &site {
        if !(path.ends_with(".html") || path.ends_with(".svg") || path.ends_with(".js")) {
            continue;
        }
        pages += 1;
        assert_eq!(control_bytes(bytes), vec![], "{path}");
    }
    assert!(pages > 20, "{pages} pages scanned");
    // The bytes are shown, visibly escaped, where the sample is.
    let run = read(&out, "t/garbage/convert-currency/r0001/index.html");
    for shown in [
        "\\u001b[2J\\u001b[31mred\\u0000\\u000d\\u007f\\u0085end",
        "\\u001b[2J\\u0000garbage\\u000d\\u007f\\u0085",
        "\\u001b[1mbold\\u0007",
        "cut \\u001b[0m\\u0000 short",
    ] {
        assert!(run.contains(shown), "{shown} not in {run}");
    }
}
