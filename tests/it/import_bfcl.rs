//! `callcheck import bfcl` through the real binary, on small BFCL-format fixtures written for the
//! purpose (tests/fixtures/bfcl, the layout of BFCL's repository and wheel), and `callcheck
//! check`'s `value_match` on hand-made answers judged by BFCL's rules. The end-to-end test on
//! the real `bfcl-eval` wheel is `#[ignore]`d: it needs the wheel (CALLCHECK_BFCL_WHEEL).

use callcheck::task::{self, Expect};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_callcheck");

fn fixture_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bfcl")
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the binary runs")
}

fn import(from: &Path, out: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "import",
        "bfcl",
        "--from",
        from.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(
        o.status.success(),
        "import failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Every file under `root`: relative path → bytes.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() {
            let rel = e
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.insert(rel, std::fs::read(e.path()).unwrap());
        }
    }
    out
}

fn read_task(out: &Path, category: &str, id: &str) -> Value {
    let p = out.join(category).join(format!("{id}.json"));
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

/// The fixture data as the wheel holds it: a zip with `bfcl_eval/data/…` and the dist-info.
fn fixture_wheel(dir: &Path) -> PathBuf {
    let path = dir.join("bfcl_eval-2026.3.23-py3-none-any.whl");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let data = fixture_root().join("bfcl_eval/data");
    for (rel, bytes) in tree(&data) {
        zip.start_file(format!("bfcl_eval/data/{rel}"), opts)
            .unwrap();
        zip.write_all(&bytes).unwrap();
    }
    zip.start_file("bfcl_eval/__init__.py", opts).unwrap();
    zip.start_file("bfcl_eval-2026.3.23.dist-info/METADATA", opts)
        .unwrap();
    zip.write_all(
        b"Metadata-Version: 2.4\nName: bfcl_eval\nVersion: 2026.3.23\nLicense: Apache 2.0\n",
    )
    .unwrap();
    zip.finish().unwrap();
    path
}

#[test]
fn every_category_converts_and_the_summary_says_what_was_imported_repaired_and_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bfcl");
    let stdout = import(&fixture_root(), &out, &[]);
    for row in [
        "| simple_python | 2 | 1 | 0 |",
        "| simple_java | 1 | 0 | 1 |",
        "| simple_javascript | 1 | 0 | 0 |",
        "| multiple | 1 | 0 | 0 |",
        "| parallel | 1 | 0 | 0 |",
        "| parallel_multiple | 1 | 1 | 0 |",
        "| irrelevance | 1 | 0 | 0 |",
        "| live_simple | 2 | 2 | 0 |",
        "| live_multiple | 0 | 0 | 1 |",
        "| live_parallel | 1 | 0 | 0 |",
        "| live_parallel_multiple | 1 | 0 | 0 |",
        "| live_irrelevance | 1 | 0 | 0 |",
        "| live_relevance | 1 | 0 | 0 |",
        "| all | 14 | 4 | 2 |",
    ] {
        assert!(stdout.contains(row), "no {row:?} in\n{stdout}");
    }
    // Skips are one line each, with the reason.
    assert!(stdout.contains("skipped simple_java_1 (simple_java): BFCL's own checker accepts none of its possible answers for Decoder.decode.parts"), "{stdout}");
    assert!(stdout.contains("skipped live_multiple_0-0-0 (live_multiple): its possible answer for record.start lists no value"), "{stdout}");
    // Categories that need BFCL's execution environments are named, with the reason.
    assert!(
        stdout.contains(
            "not imported: multi_turn_base: multi-turn: needs BFCL's executable API classes"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("not imported: web_search: web search:"),
        "{stdout}"
    );
    assert!(stdout.contains("BFCL_v4 (bfcl-eval 2026.3.23)"), "{stdout}");

    // Every imported task loads and passes lint, ids derived from BFCL's.
    let tasks = task::load(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tasks.len(), 14);
    for t in &tasks {
        let problems = callcheck::lint::lint_task(t);
        assert!(problems.is_empty(), "{}: {problems:?}", t.id);
        let src = t
            .source
            .as_ref()
            .expect("imported tasks record their source");
        assert_eq!(t.id, format!("bfcl-{}", src.id.replace('_', "-")));
        assert_eq!(src.suite, "bfcl");
        assert_eq!(src.version, "BFCL_v4 (bfcl-eval 2026.3.23)");
        assert!(
            t.tags
                .starts_with(&["bfcl".to_string(), src.category.replace('_', "-")]),
            "{:?}",
            t.tags
        );
        assert!(
            t.description
                .contains("Berkeley Function Calling Leaderboard")
                && t.description.contains("Apache-2.0")
        );
        assert!(t.file.starts_with(out.join(&src.category)));
    }
    let by_id: BTreeMap<&str, &task::Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    // irrelevance → no call; relevance → any call; the rest: one call per ground truth, any order.
    assert!(matches!(by_id["bfcl-irrelevance-0"].expect, Expect::NoCall));
    assert!(matches!(
        by_id["bfcl-live-irrelevance-0-0-0"].expect,
        Expect::NoCall
    ));
    assert!(by_id["bfcl-live-relevance-0-0-0"].any_call);
    assert_eq!(by_id["bfcl-parallel-0"].expected_calls().len(), 2);
    assert_eq!(
        by_id["bfcl-live-parallel-multiple-0-0-0"]
            .expected_calls()
            .len(),
        2
    );
    assert!(!by_id["bfcl-parallel-0"].any_call);
    // Shape tags of the corpus.
    assert!(
        by_id["bfcl-parallel-multiple-0"]
            .tags
            .contains(&"parallel".to_string())
    );
    assert!(
        by_id["bfcl-parallel-multiple-0"]
            .tags
            .contains(&"similar-tools".to_string())
    );
    assert!(
        by_id["bfcl-live-irrelevance-0-0-0"]
            .tags
            .contains(&"no-call".to_string())
    );
    assert!(
        by_id["bfcl-simple-python-0"]
            .tags
            .contains(&"single-call".to_string())
    );
}

#[test]
fn tools_are_sent_as_bfcls_handler_sends_them() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bfcl");
    import(&fixture_root(), &out, &[]);

    let t = read_task(&out, "simple_python", "bfcl-simple-python-1");
    let f = &t["tools"][0]["function"];
    // Dotted names become valid OpenAI tool names; the language hint ends the description.
    assert_eq!(f["name"], "travel_book");
    assert_eq!(
        f["description"],
        "Does a thing. Note that the provided function is in Python 3 syntax."
    );
    let p = &f["parameters"];
    assert_eq!(p["type"], "object");
    let props = &p["properties"];
    // dict → object, at every depth; float → number with BFCL's format and sentence.
    assert_eq!(props["trip"]["type"], "object");
    assert_eq!(props["trip"]["properties"]["budget"]["type"], "object");
    let amount = &props["trip"]["properties"]["budget"]["properties"]["amount"];
    assert_eq!(amount["type"], "number");
    assert_eq!(amount["format"], "float");
    assert_eq!(amount["description"], "Amount. This is a float type value.");
    // A property without a type is sent as a string.
    assert_eq!(
        props["trip"]["properties"]["budget"]["properties"]["currency"]["type"],
        "string"
    );
    // tuple → array; items of dicts converted inside; items of items mapped two levels deep.
    assert_eq!(props["days"]["type"], "array");
    assert_eq!(props["legs"]["items"]["type"], "object");
    assert_eq!(
        props["legs"]["items"]["properties"]["weight"]["type"],
        "number"
    );
    assert_eq!(props["grid"]["items"]["type"], "array");
    assert_eq!(props["grid"]["items"]["items"]["type"], "number");
    // `any` is sent as a string, as BFCL's GORILLA_TO_OPENAPI table says.
    assert_eq!(props["note"]["type"], "string");
    // Every message of the question's turn, the system prompt and an assistant turn included.
    let roles: Vec<&str> = t["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert!(t.get("tool_choice").is_none(), "BFCL sends no tool_choice");

    // Java: every parameter a string in Java syntax, the type named in its description.
    let j = read_task(&out, "simple_java", "bfcl-simple-java-0");
    let jf = &j["tools"][0]["function"];
    assert_eq!(jf["name"], "Repo_fetch");
    assert!(
        jf["description"]
            .as_str()
            .unwrap()
            .ends_with(" Note that the provided function is in Java 8 SDK syntax.")
    );
    let jp = &jf["parameters"]["properties"];
    for name in ["userId", "verbose", "tags", "options", "ratio"] {
        assert_eq!(jp[name]["type"], "string", "{name}");
    }
    assert_eq!(
        jp["userId"]["description"],
        "User. This is Java long type parameter in string representation."
    );
    assert_eq!(
        jp["tags"]["description"],
        "Tags. This is Java ArrayList type parameter in string representation. The list elements are of type String; they are not in string representation."
    );
    assert!(jp["tags"].get("items").is_none());
    // The gold is Java source text that BFCL's parser reads back as the ground truth.
    assert_eq!(
        j["expect"]["calls"][0]["gold"],
        json!({"userId": "42L", "verbose": "true", "tags": "new ArrayList<>(Arrays.asList(\"a\"))",
               "options": "new HashMap<String, Object>() {{ put(\"limit\", 50); }}"})
    );

    // JavaScript: dict properties moved into the description, as json.dumps writes them.
    let js = read_task(&out, "simple_javascript", "bfcl-simple-javascript-0");
    let store = &js["tools"][0]["function"]["parameters"]["properties"]["store"];
    assert_eq!(store["type"], "string");
    assert!(store.get("properties").is_none());
    assert!(store["description"].as_str().unwrap().ends_with(
        "The dictionary entries have the following schema; they are not in string representation. {\"reducers\": {\"type\": \"String\", \"description\": \"Reducers.\"}}"
    ));
}

#[test]
fn possible_answers_become_gold_and_accept_with_optional_omission() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bfcl");
    import(&fixture_root(), &out, &[]);
    let t = read_task(&out, "simple_python", "bfcl-simple-python-0");
    let call = &t["expect"]["calls"][0];
    assert_eq!(call["tool"], "math_hypot");
    assert_eq!(t["expect"]["order"], "any");
    // z's first acceptable value is omission: the gold leaves it out; accept keeps 0 and omit.
    assert_eq!(call["gold"], json!({"x": 4, "y": 5.0}));
    assert_eq!(
        call["accept"]["z"],
        json!({"values": [0], "omit": true, "rule": "bfcl", "type": "integer"})
    );
    assert_eq!(
        call["accept"]["y"],
        json!({"values": [5.0], "rule": "bfcl", "type": "float"})
    );
    // multiple: the optional `unit` is left out of the gold ("" first) but 'c' stays accepted.
    let m = read_task(&out, "multiple", "bfcl-multiple-0");
    assert_eq!(m["expect"]["calls"][0]["gold"], json!({"city": "Paris"}));
    assert_eq!(m["expect"]["calls"][0]["accept"]["unit"]["omit"], true);
    // relevance: an example call built from the schema (defaults, first enum values).
    let r = read_task(&out, "live_relevance", "bfcl-live-relevance-0-0-0");
    assert_eq!(r["expect"]["any_call"], true);
    assert_eq!(
        r["expect"]["calls"][0]["gold"],
        json!({"prompt": "example", "size": "small", "steps": 20})
    );
}

#[test]
fn repairs_are_recorded_in_the_task() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bfcl");
    import(&fixture_root(), &out, &[]);
    let repairs = |cat: &str, id: &str| -> Vec<String> {
        let t = read_task(&out, cat, id);
        let r: Vec<String> =
            serde_json::from_value(t["source"]["repairs"].clone()).unwrap_or_default();
        for line in &r {
            assert!(
                t["description"].as_str().unwrap().contains(line.as_str()),
                "the description lists {line}"
            );
        }
        r
    };
    // A ground-truth key the function doc does not define: left out.
    let r = repairs("parallel_multiple", "bfcl-parallel-multiple-0");
    assert_eq!(r.len(), 1);
    assert!(
        r[0].contains("gives `type`, which its function doc does not define"),
        "{r:?}"
    );
    let t = read_task(&out, "parallel_multiple", "bfcl-parallel-multiple-0");
    assert!(t["expect"]["calls"][0]["accept"].get("type").is_none());
    // An enum on an array (no array satisfies it): moved to the items.
    let r = repairs("live_simple", "bfcl-live-simple-0-0-0");
    assert!(r[0].contains("sat on the array"), "{r:?}");
    let t = read_task(&out, "live_simple", "bfcl-live-simple-0-0-0");
    let metrics = &t["tools"][0]["function"]["parameters"]["properties"]["metrics"];
    assert!(metrics.get("enum").is_none());
    assert_eq!(
        metrics["items"]["enum"],
        json!(["temperature", "humidity", "co2"])
    );
    // A boolean ground truth where the schema's enum spells it "True".
    let r = repairs("live_simple", "bfcl-live-simple-1-0-1");
    assert!(r[0].contains("\"True\""), "{r:?}");
    let t = read_task(&out, "live_simple", "bfcl-live-simple-1-0-1");
    assert_eq!(t["expect"]["calls"][0]["gold"]["is_unisex"], "True");
    // Lists of alternatives nested inside a dictionary answer: their first alternatives.
    let r = repairs("simple_python", "bfcl-simple-python-1");
    assert!(r[0].contains("nests lists of alternatives"), "{r:?}");
    let t = read_task(&out, "simple_python", "bfcl-simple-python-1");
    assert_eq!(
        t["expect"]["calls"][0]["gold"]["trip"],
        json!({"city": "Paris", "budget": {"amount": 1000.0, "currency": "EUR"}, "travellers": 2})
    );
    // Untouched tasks record no repairs.
    assert!(repairs("parallel", "bfcl-parallel-0").is_empty());
}

#[test]
fn a_wheel_a_data_folder_and_a_checkout_give_the_same_bytes_every_time() {
    let tmp = tempfile::tempdir().unwrap();
    let wheel = fixture_wheel(tmp.path());
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    let c = tmp.path().join("c");
    import(&fixture_root(), &a, &[]);
    import(&wheel, &b, &[]);
    import(&fixture_root().join("bfcl_eval/data"), &c, &[]);
    let ta = tree(&a);
    // 14 tasks and the record of what the import wrote.
    assert_eq!(ta.len(), 15);
    assert!(ta.contains_key(".callcheck-import"));
    assert_eq!(ta, tree(&b), "the wheel gives the checkout's bytes");
    assert_eq!(ta, tree(&c), "the data folder gives the checkout's bytes");
    // Importing again over the same folder changes nothing.
    import(&wheel, &a, &[]);
    assert_eq!(ta, tree(&a));
}

#[test]
fn categories_select_and_bad_sources_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bfcl");
    let stdout = import(
        &fixture_root(),
        &out,
        &["--categories", "parallel,live_relevance"],
    );
    assert_eq!(
        tree(&out).keys().cloned().collect::<Vec<_>>(),
        [
            ".callcheck-import",
            "live_relevance/bfcl-live-relevance-0-0-0.json",
            "parallel/bfcl-parallel-0.json"
        ]
    );
    assert!(stdout.contains("| all | 2 | 0 | 0 |"), "{stdout}");

    let o = run(&[
        "import",
        "bfcl",
        "--from",
        fixture_root().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--categories",
        "multi_turn_base",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("\"multi_turn_base\" is not a single-turn AST category"),
        "{err}"
    );

    let not_zip = tmp.path().join("bfcl.whl");
    std::fs::write(&not_zip, "not a zip").unwrap();
    let o = run(&[
        "import",
        "bfcl",
        "--from",
        not_zip.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bfcl.whl is not a zip archive"), "{err}");

    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = run(&[
        "import",
        "bfcl",
        "--from",
        empty.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no BFCL data files"));
}

#[test]
fn a_reimport_removes_the_bfcl_files_it_no_longer_produces_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("bfcl");
    copy_dir(&fixture_root(), &data);
    let out = tmp.path().join("tasks");
    import(
        &data,
        &out,
        &["--categories", "simple_python,parallel,irrelevance"],
    );
    // A hand-written task beside the imports, in a category folder and at the top.
    let mine = r#"{"id": "mine", "source": {"suite": "not-bfcl"}}"#;
    std::fs::write(out.join("irrelevance/mine.json"), mine).unwrap();
    std::fs::write(out.join("hand-written.json"), r#"{"id": "hand"}"#).unwrap();
    let before = tree(&out);
    assert!(before.contains_key("simple_python/bfcl-simple-python-1.json"));

    // The data loses simple_python_1; the second import drops the irrelevance category.
    let file = data.join("bfcl_eval/data/BFCL_v4_simple_python.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("\"simple_python_1\""))
        .collect();
    assert_eq!(kept.len(), 1);
    std::fs::write(&file, kept.join("\n") + "\n").unwrap();
    let stdout = import(&data, &out, &["--categories", "simple_python,parallel"]);
    let sep = std::path::MAIN_SEPARATOR;
    for gone in [
        format!("irrelevance{sep}bfcl-irrelevance-0.json"),
        format!("simple_python{sep}bfcl-simple-python-1.json"),
    ] {
        assert!(
            stdout.contains(&format!(
                "removed {} (an earlier BFCL import wrote it and this one no longer produces it)",
                out.join(&gone).display()
            )),
            "{gone} in\n{stdout}"
        );
    }
    assert!(
        stdout.contains("removed 2 task files of an earlier import"),
        "{stdout}"
    );
    let after = tree(&out);
    assert_eq!(
        after.keys().cloned().collect::<Vec<_>>(),
        [
            ".callcheck-import",
            "hand-written.json",
            "irrelevance/mine.json",
            "parallel/bfcl-parallel-0.json",
            "simple_python/bfcl-simple-python-0.json",
        ]
    );
    // What is still produced is untouched, byte for byte (the record names this import's).
    for (k, v) in after.iter().filter(|(k, _)| *k != ".callcheck-import") {
        assert_eq!(Some(v), before.get(k), "{k}");
    }
    // Dropping the last file of a category removes its folder; a third import removes nothing.
    let stdout = import(&data, &out, &["--categories", "parallel"]);
    assert!(
        stdout.contains("removed 1 task file of an earlier import"),
        "{stdout}"
    );
    assert!(!out.join("simple_python").exists());
    let stdout = import(&data, &out, &["--categories", "parallel"]);
    assert!(!stdout.contains("removed"), "{stdout}");
}

/// Copies a folder tree.
fn copy_dir(from: &Path, to: &Path) {
    for (rel, bytes) in tree(from) {
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, bytes).unwrap();
    }
}

// ---- value_match through `callcheck check` ----

/// A chat completion whose message calls `calls` (name, arguments object).
fn response(calls: &[(&str, Value)]) -> Vec<u8> {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (n, a))| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": n, "arguments": a.to_string()}}))
        .collect();
    serde_json::to_vec(&json!({
        "id": "x", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": null, "tool_calls": tool_calls}}]
    }))
    .unwrap()
}

fn value_match(task: &Path, calls: &[(&str, Value)]) -> Value {
    let dir = task.parent().unwrap();
    let resp = dir.join("response.json");
    std::fs::write(&resp, response(calls)).unwrap();
    let o = run(&[
        "check",
        "--task",
        task.to_str().unwrap(),
        "--response",
        resp.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["outcome"], "pass",
        "value accuracy is reported on passes: {v}"
    );
    v["value_match"].clone()
}

/// A hand-made task with BFCL `accept` rules.
fn bfcl_task(dir: &Path) -> PathBuf {
    let task = json!({
        "id": "bfcl-hand-made", "title": "Hand-made BFCL rules", "tags": ["bfcl"],
        "description": "value_match by BFCL's rules",
        "source": {"suite": "bfcl", "id": "hand_made", "category": "simple_python", "version": "test"},
        "messages": [{"role": "user", "content": "Plan it."}],
        "tools": [{"type": "function", "function": {"name": "plan", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "ratio": {"type": "number"},
            "weights": {"type": "array", "items": {"type": "number"}},
            "stops": {"type": "array", "items": {"type": "string"}},
            "budget": {"type": "object", "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}}},
            "note": {"type": "string"}},
            "required": ["city", "ratio"]}}}],
        "expect": {"calls": [{"tool": "plan",
            "gold": {"city": "New York, NY", "ratio": 2.0, "weights": [1.5, 2.0], "stops": ["Boston", "Albany"], "budget": {"amount": 100.0, "currency": "USD"}},
            "accept": {
                "city": {"values": ["New York, NY"], "rule": "bfcl", "type": "string"},
                "ratio": {"values": [2.0], "rule": "bfcl", "type": "float"},
                "weights": {"values": [[1.5, 2.0]], "rule": "bfcl", "type": "array", "items": "float"},
                "stops": {"values": [["Boston", "Albany"]], "rule": "bfcl", "type": "array", "items": "string"},
                "budget": {"values": [{"amount": [100.0], "currency": ["USD", ""]}], "rule": "bfcl", "type": "dict"},
                "note": {"values": [], "omit": true, "rule": "bfcl", "type": "string"}
            }}]}
    });
    let p = dir.join("task.json");
    std::fs::write(&p, serde_json::to_vec_pretty(&task).unwrap()).unwrap();
    p
}

#[test]
fn check_prints_value_match_by_bfcls_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let task = bfcl_task(tmp.path());
    let gold = json!({"city": "New York, NY", "ratio": 2.0, "weights": [1.5, 2.0], "stops": ["Boston", "Albany"], "budget": {"amount": 100.0, "currency": "USD"}});
    let with = |k: &str, v: Value| {
        let mut g = gold.clone();
        g[k] = v;
        g
    };
    assert_eq!(value_match(&task, &[("plan", gold.clone())]), json!(true));
    // String normalisation: spaces and ,./-_*^ removed, case folded.
    assert_eq!(
        value_match(&task, &[("plan", with("city", json!("new york ny")))]),
        json!(true)
    );
    assert_eq!(
        value_match(&task, &[("plan", with("city", json!("NEW-YORK/NY.")))]),
        json!(true)
    );
    assert_eq!(
        value_match(&task, &[("plan", with("city", json!("New York City")))]),
        json!(false)
    );
    // An int for a float at the top level, but not inside a list.
    assert_eq!(
        value_match(&task, &[("plan", with("ratio", json!(2)))]),
        json!(true)
    );
    assert_eq!(
        value_match(&task, &[("plan", with("weights", json!([1.5, 2])))]),
        json!(false)
    );
    // Lists element by element, in order (strings normalised).
    assert_eq!(
        value_match(
            &task,
            &[("plan", with("stops", json!(["boston", "ALBANY"])))]
        ),
        json!(true)
    );
    assert_eq!(
        value_match(
            &task,
            &[("plan", with("stops", json!(["Albany", "Boston"])))]
        ),
        json!(false)
    );
    // Nested dict key by key: an optional key may go, a required one may not, values normalised.
    assert_eq!(
        value_match(&task, &[("plan", with("budget", json!({"amount": 100.0})))]),
        json!(true)
    );
    assert_eq!(
        value_match(
            &task,
            &[(
                "plan",
                with("budget", json!({"currency": "usd", "amount": 100}))
            )]
        ),
        json!(true)
    );
    assert_eq!(
        value_match(
            &task,
            &[("plan", with("budget", json!({"currency": "USD"})))]
        ),
        json!(false)
    );
    // A parameter accepted only by omission.
    assert_eq!(
        value_match(&task, &[("plan", with("note", json!("hi")))]),
        json!(false)
    );
}

#[test]
fn imported_java_and_parallel_tasks_match_by_bfcls_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bfcl");
    import(&fixture_root(), &out, &[]);
    let java = out.join("simple_java/bfcl-simple-java-0.json");
    let base = json!({"userId": "42L", "verbose": "true"});
    let with = |k: &str, v: &str| {
        let mut g = base.clone();
        g[k] = json!(v);
        g
    };
    assert_eq!(
        value_match(&java, &[("Repo_fetch", base.clone())]),
        json!(false),
        "tags and options are not optional"
    );
    let full = {
        let mut g = with("tags", "new ArrayList<String>() {{ add(\"a\"); }}");
        g["options"] = json!("new HashMap<String, Object>() {{ put(\"limit\", 50); }}");
        g
    };
    assert_eq!(
        value_match(&java, &[("Repo_fetch", full.clone())]),
        json!(true)
    );
    let mut no_suffix = full.clone();
    no_suffix["userId"] = json!("42");
    assert_eq!(
        value_match(&java, &[("Repo_fetch", no_suffix)]),
        json!(false),
        "a Java long needs its L"
    );
    let mut float = full.clone();
    float["ratio"] = json!("0.5f");
    assert_eq!(value_match(&java, &[("Repo_fetch", float)]), json!(true));

    // Parallel: order-free, and each expected call takes the first emitted call it accepts.
    let par = out.join("parallel/bfcl-parallel-0.json");
    let paris = ("weather_get", json!({"city": "paris"}));
    let lima = ("weather_get", json!({"city": "LIMA"}));
    assert_eq!(
        value_match(&par, &[lima.clone(), paris.clone()]),
        json!(true)
    );
    assert_eq!(
        value_match(
            &par,
            &[paris.clone(), ("weather_get", json!({"city": "Quito"}))]
        ),
        json!(false)
    );
    // Relevance tasks pass on any offered call and have no value to compare.
    let rel = out.join("live_relevance/bfcl-live-relevance-0-0-0.json");
    assert_eq!(
        value_match(
            &rel,
            &[(
                "image_generate",
                json!({"prompt": "a cat", "size": "large", "steps": 3})
            )]
        ),
        Value::Null
    );
}

// ---- the real wheel, end to end ----

/// `CALLCHECK_BFCL_WHEEL=/path/to/bfcl_eval-….whl cargo test --test it -- --ignored import_bfcl::`
#[test]
#[ignore = "needs the real bfcl-eval wheel: set CALLCHECK_BFCL_WHEEL (pip download --no-deps bfcl-eval)"]
fn the_real_wheel_imports_lints_and_its_gold_replies_pass_with_value_match() {
    let wheel = PathBuf::from(
        std::env::var("CALLCHECK_BFCL_WHEEL")
            .expect("CALLCHECK_BFCL_WHEEL names the bfcl-eval wheel"),
    );
    let tmp = tempfile::tempdir().unwrap();
    let all = tmp.path().join("all");
    let started = std::time::Instant::now();
    let stdout = import(&wheel, &all, &[]);
    let import_time = started.elapsed();
    println!("{stdout}");
    println!(
        "import took {:.2} s (debug build)",
        import_time.as_secs_f64()
    );

    let tasks = task::load(&all).unwrap_or_else(|e| panic!("{e}"));
    let mut problems = 0;
    for t in &tasks {
        for p in callcheck::lint::lint_task(t) {
            eprintln!("{}: {p}", t.id);
            problems += 1;
        }
    }
    assert_eq!(problems, 0, "every imported task passes lint");
    assert!(tasks.len() > 3000, "{} tasks", tasks.len());

    // A sample: the first 20 tasks of every category, collected from the mock's gold replies.
    let sample = tmp.path().join("sample");
    let mut per_category: BTreeMap<String, usize> = BTreeMap::new();
    for t in &tasks {
        let cat = t.source.as_ref().unwrap().category.clone();
        let n = per_category.entry(cat.clone()).or_default();
        if *n < 20 {
            *n += 1;
            let dir = sample.join(&cat);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::copy(&t.file, dir.join(t.file.file_name().unwrap())).unwrap();
        }
    }
    println!("sampled per category: {per_category:?}");
    let sampled: usize = per_category.values().sum();

    let mut mock = Command::new(BIN)
        .args(["mock", "--port", "0", "--tasks"])
        .arg(&sample)
        .arg("--config")
        .arg({
            let p = tmp.path().join("mock.toml");
            std::fs::write(&p, "[[model]]\nname = \"gold\"\n").unwrap();
            p
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut mock_out = BufReader::new(mock.stdout.take().unwrap());
    mock_out.read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("callcheck mock listening on ")
        .unwrap()
        .to_string();
    let cfg = tmp.path().join("callcheck.toml");
    std::fs::write(
        &cfg,
        format!("[[model]]\nname = \"gold\"\nbase_url = \"{url}\"\nmodel = \"gold\"\nconcurrency = 8\n\n[[model]]\nname = \"gold-stream\"\nbase_url = \"{url}\"\nmodel = \"gold\"\nstream = true\nconcurrency = 8\n"),
    )
    .unwrap();
    let runs = tmp.path().join("runs");
    let site = tmp.path().join("site");
    let o = run(&[
        "collect",
        "--config",
        cfg.to_str().unwrap(),
        "--tasks",
        sample.to_str().unwrap(),
        "--runs",
        runs.to_str().unwrap(),
        "--k",
        "3",
        "--quiet",
        "--no-preflight",
    ]);
    let _ = mock.kill();
    let _ = mock.wait();
    assert!(
        o.status.success(),
        "collect: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run(&[
        "build",
        "--tasks",
        sample.to_str().unwrap(),
        "--runs",
        runs.to_str().unwrap(),
        "--out",
        site.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "build: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let csv = std::fs::read(site.join("data/samples.csv")).unwrap();
    let mut r = csv::Reader::from_reader(csv.as_slice());
    let headers = r.headers().unwrap().clone();
    let col = |n: &str| headers.iter().position(|h| h == n).unwrap();
    let (task_col, outcome, vm) = (col("task"), col("outcome"), col("value_match"));
    let no_value: Vec<&str> = tasks
        .iter()
        .filter(|t| matches!(t.expect, Expect::NoCall) || t.any_call)
        .map(|t| t.id.as_str())
        .collect();
    let mut rows = 0;
    for rec in r.records() {
        let rec = rec.unwrap();
        rows += 1;
        assert_eq!(&rec[outcome], "pass", "{rec:?}");
        let expected = if no_value.contains(&&rec[task_col]) {
            ""
        } else {
            "true"
        };
        assert_eq!(&rec[vm], expected, "{rec:?}");
    }
    assert_eq!(rows, sampled * 3 * 2, "every sampled task × k=3 × two rows");
    // The pooled figures the model pages show: every gold sample right, by both measures.
    let matrix: Value =
        serde_json::from_slice(&std::fs::read(site.join("data/matrix.json")).unwrap()).unwrap();
    for m in matrix["models"].as_array().unwrap() {
        let v = &m["values_by_task"];
        for part in ["value_accuracy", "bfcl_style"] {
            assert!(v[part]["of"].as_u64().unwrap() > 0, "{part}: {v}");
            assert_eq!(v[part]["count"], v[part]["of"], "{part}: {v}");
        }
        assert_eq!(
            v["bfcl_style"]["of"].as_u64().unwrap() as usize,
            sampled * 3
        );
    }
    for name in ["gold", "gold-stream"] {
        let page = std::fs::read_to_string(site.join(format!("models/{name}.html"))).unwrap();
        assert!(
            page.contains("id=\"values\""),
            "{name}'s page has no value table"
        );
    }
    println!(
        "{rows} gold samples (JSON and streamed) over {sampled} tasks passed with value_match true where there is a value"
    );
}
