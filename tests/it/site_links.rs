//! Whole-site properties: every link resolves (fragments included), model-written text never
//! survives as markup, and the same inputs give a byte-identical site whatever the thread count.

use crate::support::site::*;
use callcheck::reply::{Reply, ReplyCall};
use callcheck::synth::{ModelRow, RunSpec, SynthOpts, Wire, server_info, write_run};
use scraper::{Html, Selector};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Checks every href/src of every HTML page resolves to a file of the site, and every fragment
/// to an id on the target page. Returns the number of links checked.
fn check_links(site: &Path) -> usize {
    let files = tree(site);
    let mut ids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let any_id = Selector::parse("[id]").unwrap();
    for (path, bytes) in &files {
        if path.ends_with(".html") {
            let doc = Html::parse_document(&String::from_utf8_lossy(bytes));
            let set = doc
                .select(&any_id)
                .filter_map(|e| e.value().attr("id").map(str::to_string))
                .collect();
            ids.insert(path.clone(), set);
        }
    }
    let linked = Selector::parse("[href], [src], meta[http-equiv=refresh]").unwrap();
    let mut checked = 0;
    let mut broken = Vec::new();
    for (path, bytes) in &files {
        if !path.ends_with(".html") || path == "404.html" {
            continue;
        }
        let doc = Html::parse_document(&String::from_utf8_lossy(bytes));
        for e in doc.select(&linked) {
            // A permalink's refresh (`0; url=index.html#s-000`) is a link too.
            let refresh = e
                .value()
                .attr("content")
                .filter(|_| e.value().name() == "meta")
                .map(|c| c.split_once("url=").map_or("", |(_, u)| u));
            let links = [e.value().attr("href"), e.value().attr("src"), refresh];
            for link in links.into_iter().flatten() {
                checked += 1;
                assert!(
                    !link.starts_with('/') && !link.contains("://"),
                    "{path}: {link} is not a relative link"
                );
                let (file, frag) = match link.split_once('#') {
                    Some((f, frag)) => (f, Some(frag)),
                    None => (link, None),
                };
                let target = if file.is_empty() {
                    Some(path.clone())
                } else {
                    resolve(path, file)
                };
                match target {
                    Some(t) if files.contains_key(&t) => {
                        if let Some(frag) = frag {
                            let ok = ids.get(&t).is_some_and(|s| s.contains(frag));
                            if !ok {
                                broken.push(format!("{path}: {link} (no id {frag:?} in {t})"));
                            }
                        }
                    }
                    _ => broken.push(format!("{path}: {link}")),
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} broken links:\n{}",
        broken.len(),
        broken.join("\n")
    );
    checked
}

#[test]
fn every_link_of_the_fixture_site_resolves() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site");
    build_ok(&fixture_tasks(), &fixture_runs(), &out, &[], &[]);
    let n = check_links(&out);
    assert!(n > 300, "only {n} links checked");
    // Every failed sample's section carries the fail anchor the label pages link to (checked
    // above: the fragment must exist on the run's page).
    let label = read(&out, "labels/missing_required.html");
    assert!(label.contains("../t/beta/convert-currency/r0001/index.html#fail-001"));
    // The link checker itself can fail.
    std::fs::remove_file(out.join("t/beta/convert-currency/r0001/001.html")).unwrap();
    let r = std::panic::catch_unwind(|| check_links(&out));
    assert!(r.is_err(), "a removed page must be reported");
}

#[test]
fn same_inputs_give_a_byte_identical_site_whatever_the_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    // A bigger synthetic tree beside the fixture, so scheduling really varies.
    let synth = tmp.path().join("synth");
    let n = synth_tree(
        &synth,
        &SynthOpts {
            samples: 600,
            models: 5,
            k: 6,
            seed: 3,
            served: None,
        },
    );
    assert_eq!(n, 600);
    for (tasks, runs, name) in [
        (fixture_tasks(), fixture_runs(), "fixture"),
        (synth.join("tasks"), synth.join("runs"), "synth"),
    ] {
        let a = tmp.path().join(format!("{name}-1"));
        let b = tmp.path().join(format!("{name}-2"));
        build_ok(&tasks, &runs, &a, &[], &[("RAYON_NUM_THREADS", "1")]);
        build_ok(&tasks, &runs, &b, &[], &[("RAYON_NUM_THREADS", "3")]);
        let (ta, tb) = (tree(&a), tree(&b));
        assert_eq!(
            ta.keys().collect::<Vec<_>>(),
            tb.keys().collect::<Vec<_>>(),
            "{name}: file lists differ"
        );
        for (k, v) in &ta {
            assert!(v == &tb[k], "{name}: {k} differs between builds");
        }
        assert!(ta.len() > 40);
    }
}

const PAYLOADS: [&str; 3] = [
    "<script>alert('xss')</script>",
    "\"><img src=x onerror=alert(1)>",
    "javascript:alert(1)",
];

/// A task whose every free-text field carries the payloads.
fn hostile_task() -> serde_json::Value {
    let all = PAYLOADS.join(" ");
    serde_json::json!({
        "id": "hostile-task",
        "title": format!("Title {all}"),
        "tags": [format!("tag {}", PAYLOADS[1])],
        "description": format!("Text {all}\n\n[click me](javascript:alert(1)) <a href=\"javascript:alert(2)\" onclick=\"x()\">raw</a>\n\n<iframe src=\"https://evil.example\"></iframe>"),
        "messages": [{"role": "user", "content": format!("Search for {all}")}],
        "tools": [
            {"type": "function", "function": {"name": "web_search", "description": all,
              "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": all}}, "required": ["query"]}}},
            {"type": "function", "function": {"name": PAYLOADS[1],
              "parameters": {"type": "object", "properties": {}}}}
        ],
        "expect": {"calls": [{"tool": "web_search", "gold": {"query": all}}]}
    })
}

#[test]
fn model_written_text_never_survives_as_markup() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = tmp.path().join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    let file = tasks.join("hostile-task.json");
    let bytes = serde_json::to_vec_pretty(&hostile_task()).unwrap();
    std::fs::write(&file, &bytes).unwrap();
    let task = callcheck::task::parse_task(&file, &bytes).unwrap();
    let all = PAYLOADS.join(" ");
    let runs = tmp.path().join("runs");
    for stream in [false, true] {
        let row = ModelRow {
            // The row name is a path segment (path-safe by construction); the served model id
            // and the rest of the entry are free text.
            name: if stream {
                "evil-stream".into()
            } else {
                "evil".into()
            },
            served: format!("served {all}"),
            stream,
        };
        let wires = vec![
            // Prose with the payloads: no_call.
            Wire::Reply(Reply::text(format!("Sure! {all}"))),
            // A call to the tool whose name is a payload: wrong_tool.
            Wire::Reply(Reply::calls(vec![ReplyCall {
                name: PAYLOADS[1].into(),
                arguments: "{}".into(),
            }])),
            // Arguments carrying the payloads, and a hallucinated key that is one.
            Wire::Reply(Reply::calls(vec![ReplyCall {
                name: "web_search".into(),
                arguments: serde_json::json!({"query": all, PAYLOADS[0]: PAYLOADS[2]}).to_string(),
            }])),
            // Malformed arguments containing the payloads.
            Wire::Reply(Reply::calls(vec![ReplyCall {
                name: "web_search".into(),
                arguments: format!("{{\"query\": {all}"),
            }])),
            // An HTTP error whose body is a payload.
            Wire::Status(500, all.clone()),
        ];
        let mut server = server_info(&row.served);
        server["preflight"] = serde_json::json!({PAYLOADS[0]: {"ok": false, "detail": all}});
        write_run(
            &runs,
            RunSpec {
                model: &row,
                task: &task,
                task_sha256: &task.sha256,
                run_id: "r1",
                server,
                seed: 1,
            },
            &wires,
        )
        .unwrap();
    }
    let out = tmp.path().join("site");
    build_ok(&tasks, &runs, &out, &[], &[]);
    let files = tree(&out);

    let everything = Selector::parse("*").unwrap();
    let template_404_script = {
        let t = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/404.html"),
        )
        .unwrap();
        let start = t.find("<script>").expect("the 404 template has its script") + 8;
        let end = t.find("</script>").unwrap();
        t[start..end].to_string()
    };
    let mut scripts = 0;
    let mut pages = 0;
    for (path, bytes) in &files {
        let text = String::from_utf8_lossy(bytes);
        // The data exports carry the raw text on purpose (they are data, not markup).
        if !(path.ends_with(".html") || path.ends_with(".svg")) {
            continue;
        }
        for raw in [
            "<script>alert",
            "<img src=x",
            "onerror=alert(1)>",
            "<iframe",
        ] {
            assert!(!text.contains(raw), "{path} contains raw {raw:?}");
        }
        if !path.ends_with(".html") {
            continue;
        }
        pages += 1;
        let doc = Html::parse_document(&text);
        for e in doc.select(&everything) {
            let el = e.value();
            assert!(
                !matches!(el.name(), "iframe" | "object" | "embed" | "form"),
                "{path}: <{}>",
                el.name()
            );
            for (name, value) in el.attrs() {
                assert!(
                    !name.starts_with("on"),
                    "{path}: attribute {name}={value:?}"
                );
                let v = value.trim().to_ascii_lowercase();
                assert!(!v.starts_with("javascript:"), "{path}: {name}={value:?}");
            }
            match el.name() {
                "script" => {
                    scripts += 1;
                    let body = e.text().collect::<String>();
                    // The one inline script is the 404 page's own, byte for byte as the
                    // template has it (a relative src would not load at a deep missing
                    // address); every other script is one of the site's files (sort.js, the samples
                    // page's samples.js and its data), with no body.
                    if path.ends_with("404.html") && el.attr("src").is_none() {
                        assert!(
                            template_404_script.contains(body.trim()) && !body.trim().is_empty(),
                            "{path}: an inline script that is not the template's"
                        );
                        continue;
                    }
                    // A sample's permalink sends the reader on with a refresh alone (no
                    // script: it cost each of a hundred thousand permalinks a hundred bytes);
                    // every other script is one of the site's files.
                    assert!(
                        el.attr("src").is_some_and(|s| {
                            s.ends_with("sort.js") || s.ends_with("samples.js")
                        }),
                        "{path}: inline script"
                    );
                    assert!(body.trim().is_empty(), "{path}: script body");
                }
                "img" => {
                    let src = el.attr("src").unwrap_or("");
                    assert!(
                        src.contains("charts/") && src.ends_with(".svg"),
                        "{path}: img {src}"
                    );
                }
                _ => {}
            }
        }
    }
    assert!(pages >= 10 + 5 * 2, "{pages} pages");
    assert!(scripts >= 3);
    // The payloads are still there, as text: escaped, not dropped.
    let t = read(&out, "t/evil/hostile-task/r1/index.html");
    assert!(
        t.contains("&lt;script&gt;alert('xss')&lt;/script&gt;"),
        "prose is shown escaped"
    );
    assert!(t.contains("&lt;img src=x onerror=alert(1)&gt;"));
    let model = read(&out, "models/evil.html");
    assert!(
        model.contains("served &lt;script&gt;"),
        "the served id is shown escaped"
    );
    // The hostile tag has its own page (a slug for a file name), its text escaped there and in
    // the index's shape table; the samples index carries it as JSON data, shown as text.
    let tag = format!("tag {}", PAYLOADS[1]);
    let tag_page = read(
        &out,
        &format!("tags/{}.html", callcheck::site::html::slug(&tag)),
    );
    let escaped = "&#60;img src=x onerror=alert(1)&#62;";
    assert!(tag_page.contains(escaped), "{tag_page}");
    assert!(read(&out, "index.html").contains(escaped));
    let data = read(&out, "data/samples.js");
    assert!(data.starts_with("window.CALLCHECK_SAMPLES = {") && data.ends_with("};\n"));
    let task_page = read(&out, "tasks/hostile-task.html");
    assert!(
        task_page.contains("click me"),
        "the link text survives sanitising"
    );
    assert!(!task_page.contains("onclick"));
}

/// Above the index's cell budget the matrix is drawn on the tag pages: every link to a cell
/// (from run pages, label pages, the index) still lands on its anchor.
#[test]
fn every_link_resolves_when_the_matrix_moves_to_the_tag_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let synth = tmp.path().join("synth");
    // 30 models × 101 tasks = 3,030 cells, one sample each.
    let n = synth_tree(
        &synth,
        &SynthOpts {
            samples: 3_030,
            models: 30,
            k: 1,
            seed: 5,
            served: None,
        },
    );
    assert_eq!(n, 3_030);
    let out = tmp.path().join("site");
    build_ok(&synth.join("tasks"), &synth.join("runs"), &out, &[], &[]);
    assert!(!read(&out, "index.html").contains("id=\"c~"));
    let run = std::fs::read_dir(out.join("t/model-00"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let run = std::fs::read_dir(&run)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let page = std::fs::read_to_string(run.join("index.html")).unwrap();
    assert!(page.contains("href=\"../../../../tags/"), "{page}");
    assert!(check_links(&out) > 3_030);
}
