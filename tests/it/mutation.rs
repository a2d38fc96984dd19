//! The mutation test: for every task in `tasks/` and every label that can apply to it, corrupt
//! the task's gold reply into that failure (both as a JSON body and as an SSE stream) and demand
//! the scorer returns exactly that label. This proves every task can tell apart the failures it
//! is meant to, and that the corruptions the mock server serves mean what they say.

use callcheck::corrupt::{corruptions, gold, roundtrip_survivors};
use callcheck::reply::{render_json, render_sse};
use callcheck::request::{Asking, chat_request};
use callcheck::score::score;
use callcheck::task::predicate::Mangling;
use callcheck::taxonomy::{Label, Outcome};
use callcheck::transcript::Transcript;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;

const MAX_TOKENS: u64 = 512;

#[test]
fn every_applicable_label_is_produced_and_recovered_for_every_task() {
    let tasks = callcheck::task::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tasks")))
        .expect("the corpus loads");
    assert!(!tasks.is_empty());
    let mut failures = Vec::new();
    let mut variants = 0;
    let mut seen: BTreeMap<Label, usize> = BTreeMap::new();
    let mut families: BTreeSet<&str> = BTreeSet::new();
    for task in &tasks {
        for stream in [false, true] {
            let mut asking = Asking {
                model: "mutant".into(),
                stream,
                ..Asking::default()
            };
            asking.params.insert("max_tokens".into(), MAX_TOKENS.into());
            let request = chat_request(task, &asking);
            let budget = request
                .get("max_tokens")
                .and_then(|v| v.as_u64())
                .unwrap_or(MAX_TOKENS);
            let render = |r: &callcheck::reply::Reply| {
                if stream {
                    render_sse(r, "mutant", 90, true, 7)
                } else {
                    render_json(r, "mutant", 90, 7)
                }
            };
            let v = score(
                task,
                &Transcript {
                    request: Some(std::sync::Arc::new(request.clone())),
                    body: render(&gold(task)),
                    streamed: stream,
                    meta: None,
                },
            );
            if v.outcome != Outcome::Pass {
                failures.push(format!(
                    "{} gold (stream={stream}): {} {}",
                    task.id,
                    v.outcome.name(),
                    v.detail
                ));
            }
            for label in Label::ALL {
                let Ok(list) = corruptions(task, label, budget) else {
                    continue;
                };
                for c in list {
                    variants += 1;
                    let v = score(
                        task,
                        &Transcript {
                            request: Some(std::sync::Arc::new(request.clone())),
                            body: render(&c.reply),
                            streamed: stream,
                            meta: None,
                        },
                    );
                    if v.outcome == Outcome::Fail(label) {
                        *seen.entry(label).or_default() += 1;
                        if let Some(m) = Mangling::ALL.iter().find(|m| c.name.ends_with(m.name())) {
                            families.insert(m.name());
                        }
                    } else {
                        failures.push(format!(
                            "{} {} (stream={stream}): got {} at {:?}: {}",
                            task.id,
                            c.name,
                            v.outcome.name(),
                            v.stage,
                            v.detail
                        ));
                    }
                }
            }
        }
    }
    println!(
        "{variants} corrupted variants over {} tasks; recovered per label: {seen:?}",
        tasks.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {variants} variants were mislabelled:\n{}",
        failures.len(),
        failures.join("\n")
    );
    for label in Label::ALL {
        assert!(
            seen.get(&label).copied().unwrap_or(0) > 0,
            "no task produced {label}"
        );
    }
    // Every family of mangling a `roundtrip` predicate knows was generated on some task and
    // (above) labelled escaping_error.
    for m in Mangling::ALL {
        assert!(
            families.contains(m.name()),
            "no task produced a {} variant",
            m.name()
        );
    }
}

/// The other side of `roundtrip` (SPEC §2.1): the text intact with words appended, and a
/// different text, are not escaping failures; they pass conformance.
#[test]
fn appended_and_different_texts_are_not_escaping_errors() {
    let tasks = callcheck::task::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tasks")))
        .expect("the corpus loads");
    let mut checked = 0;
    let mut failures = Vec::new();
    for task in &tasks {
        for stream in [false, true] {
            let mut asking = Asking {
                model: "mutant".into(),
                stream,
                ..Asking::default()
            };
            asking.params.insert("max_tokens".into(), MAX_TOKENS.into());
            let request = chat_request(task, &asking);
            for c in roundtrip_survivors(task) {
                checked += 1;
                let body = if stream {
                    render_sse(&c.reply, "mutant", 90, true, 7)
                } else {
                    render_json(&c.reply, "mutant", 90, 7)
                };
                let v = score(
                    task,
                    &Transcript {
                        request: Some(std::sync::Arc::new(request.clone())),
                        body,
                        streamed: stream,
                        meta: None,
                    },
                );
                if v.outcome != Outcome::Pass {
                    failures.push(format!(
                        "{} {} (stream={stream}): got {} at {:?}: {}",
                        task.id,
                        c.name,
                        v.outcome.name(),
                        v.stage,
                        v.detail
                    ));
                }
            }
        }
    }
    println!("{checked} appended/different-text variants");
    assert!(
        checked >= 20,
        "only {checked} variants: the corpus lost its roundtrip predicates?"
    );
    assert!(
        failures.is_empty(),
        "{} of {checked} were not passes:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
