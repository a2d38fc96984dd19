//! `models/<model>.html`: a model's totals, its cells and tags, its charts, what its failures
//! measured on a reroll, its HiTEC counts and F1, and what its runs' `cell.json` say about the
//! server (the preflight checks among them).

use super::{chart, compare, routing};
use crate::evidence::Provenance;
use crate::hitec::HitecError;
use crate::report::pooled::Pooled;
use crate::report::{Matrix, ModelView, routing::Routing};
use crate::site::charts::{self, outcome_colour};
use crate::site::html::{json_html, root, slug};
use crate::site::matrix::cell_td;
use crate::site::text::{TotalRow, label_summary, total_row};
use crate::site::{File, SiteError, SiteInput, value};
use crate::taxonomy::{Label, Outcome};
use askama::Template;
use serde_json::Value;

/// One of the model's cells, in task order.
struct TaskRow {
    task: String,
    title: String,
    td: String,
    all_passed: &'static str,
    flaky: &'static str,
    value: String,
    labels: String,
}

/// One HiTEC error type with the model's count of it.
struct HitecRow {
    number: u8,
    name: &'static str,
    labels: &'static str,
    count: u64,
}

/// One label with its failures and what asking again measured.
struct RerollRow {
    label: &'static str,
    retry: &'static str,
    failures: u64,
    measured: String,
}

#[derive(Template)]
#[template(path = "model.html")]
struct ModelPage<'a> {
    title: String,
    root: String,
    name: &'a str,
    total: TotalRow,
    method: &'static str,
    tasks: Vec<TaskRow>,
    tags: Vec<TotalRow>,
    rerolls: Vec<RerollRow>,
    /// The share of the row's failures a router cannot see (SPEC §11).
    silent_share: Option<String>,
    hitec: Vec<HitecRow>,
    f1_name: String,
    f1_param: String,
    entries: Vec<String>,
    servers: Vec<Vec<(String, String)>>,
    preflight: Vec<Vec<PreflightRow>>,
    versions: String,
    runs: &'a [(String, String, u32, String, String)],
    /// The pre-rendered "Comparisons" block (empty without comparisons).
    comparisons: String,
    /// The sentence saying the row's samples look deterministic, or empty.
    determinism: String,
    /// Over all the model's tasks that report values, then per tag (empty when it ran none).
    value_rows: Vec<value::ValueRow>,
    value_first: &'static str,
    value_meaning: &'static str,
    bfcl_style_meaning: &'static str,
}

/// An F1 score with the counts it comes from.
fn f1_text(f: &crate::hitec::F1) -> String {
    match f.f1() {
        Some(x) => format!(
            "{:.3} (precision {}/{} emitted calls, recall {}/{} gold calls)",
            crate::stats::interval::round4(x),
            f.true_positives,
            f.emitted,
            f.true_positives,
            f.gold
        ),
        None => "– (no calls emitted or expected)".into(),
    }
}

/// One preflight check as the model page shows it.
struct PreflightRow {
    check: String,
    /// The stage-table class: `pass`, `fail`, or `na` when the check recorded no verdict.
    class: &'static str,
    result: &'static str,
    status: String,
    detail: String,
}

/// The preflight checks of one `server` object, in probe order.
fn preflight_rows(p: &Value) -> Vec<PreflightRow> {
    let Some(o) = p.as_object() else {
        return Vec::new();
    };
    // Probe order, whatever order the file has them in; checks a later collect may add come
    // after, by name.
    use crate::server::CHECKS;
    let rank = |k: &str| CHECKS.iter().position(|c| *c == k).unwrap_or(CHECKS.len());
    let mut keys: Vec<&String> = o.keys().collect();
    keys.sort_by_key(|k| (rank(k), k.as_str()));
    keys.into_iter()
        .map(|k| {
            let c = &o[k];
            let ok = c.get("ok").and_then(Value::as_bool);
            PreflightRow {
                check: k.clone(),
                class: match ok {
                    Some(true) => "pass",
                    Some(false) => "fail",
                    None => "na",
                },
                result: match ok {
                    Some(true) => "ok",
                    Some(false) => "finding",
                    None => "–",
                },
                status: c
                    .get("status")
                    .and_then(Value::as_u64)
                    .map_or_else(|| "–".to_string(), |s| s.to_string()),
                detail: c
                    .get("detail")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            }
        })
        .collect()
}

/// What `cell.json` says about the server: per endpoint its URL, the `/models` status, the
/// model ids it lists and its version; anything else flattened (the preflight has its own table).
fn server_rows(s: &Value) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let endpoints = s.get("endpoints").and_then(Value::as_array);
    for (i, e) in endpoints.into_iter().flatten().enumerate() {
        let n = if endpoints.is_some_and(|a| a.len() > 1) {
            format!(" {}", i + 1)
        } else {
            String::new()
        };
        let Some(o) = e.as_object() else {
            flatten(e, &format!("endpoint{n}"), 1, &mut rows);
            continue;
        };
        for (k, v) in o {
            match k.as_str() {
                "base_url" => rows.push((
                    format!("endpoint{n}"),
                    v.as_str().unwrap_or_default().to_string(),
                )),
                "models_status" => rows.push((format!("GET /models{n}"), v.to_string())),
                "models" => match crate::server::listed_models_text(e) {
                    Some(ids) => rows.push((format!("models listed{n}"), ids)),
                    _ => flatten(v, &format!("models{n}"), 2, &mut rows),
                },
                _ => flatten(v, &format!("{k}{n}"), 1, &mut rows),
            }
        }
    }
    if let Some(o) = s.as_object() {
        for (k, v) in o {
            if k != "endpoints" && k != "preflight" {
                flatten(v, k, 1, &mut rows);
            }
        }
    }
    rows
}

/// Flattens a JSON object into (dotted key, text) rows for a table; strings are shown bare.
fn flatten(v: &Value, prefix: &str, depth: usize, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(o) if depth < 3 && !o.is_empty() => {
            for (k, x) in o {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(x, &key, depth + 1, out);
            }
        }
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((
            prefix.to_string(),
            serde_json::to_string(other).unwrap_or_default(),
        )),
    }
}

fn label_bars(mv: &ModelView) -> Vec<charts::Bar> {
    let mut bars = vec![charts::Bar {
        name: "pass".into(),
        count: mv.total.passes,
        colour: outcome_colour(Outcome::Pass),
        counted: true,
    }];
    for l in Label::ALL {
        bars.push(charts::Bar {
            name: format!("{l} ({})", l.retry()),
            count: mv.labels.get(&l).copied().unwrap_or(0),
            colour: outcome_colour(Outcome::Fail(l)),
            counted: true,
        });
    }
    bars.push(charts::Bar {
        name: "error (not counted)".into(),
        count: mv.total.errors,
        colour: outcome_colour(Outcome::Error),
        counted: false,
    });
    bars
}

/// `models/<model>.html` and its two charts; `routing` is the router's evidence, whose reroll
/// measures the page gives.
pub(crate) fn page(
    input: &SiteInput,
    mv: &ModelView,
    routing: &Routing,
    files: &mut Vec<File>,
) -> Result<(), SiteError> {
    let m = input.matrix;
    let r = root(1);
    draw_charts(m, mv, files)?;
    let unknown = Provenance::default();
    let info = input.models.get(&mv.name).unwrap_or(&unknown);
    let page = ModelPage {
        value_rows: value_rows(m, mv, &r),
        value_first: "tag",
        value_meaning: value::VALUE_MEANING,
        bfcl_style_meaning: value::BFCL_STYLE_MEANING,
        comparisons: compare::block(input.comparisons, 1, Some(&mv.name), None),
        title: mv.name.clone(),
        root: r.clone(),
        name: &mv.name,
        total: total_row(
            m.thresholds,
            &mv.name,
            String::new(),
            &mv.total,
            &mv.pooled_total,
            Some(&mv.latency),
        ),
        method: m.method.title(),
        tasks: task_rows(m, mv, &r),
        tags: tag_rows(m, mv, &r),
        rerolls: reroll_rows(mv, routing),
        silent_share: routing.model(&mv.name).map(routing::silent_share),
        hitec: HitecError::ALL
            .iter()
            .map(|h| HitecRow {
                number: h.number(),
                name: h.name(),
                labels: h.labels(),
                count: mv.hitec[h.number() as usize],
            })
            .collect(),
        f1_name: f1_text(&mv.metrics.name),
        f1_param: f1_text(&mv.metrics.name_and_parameters),
        entries: info.entries.iter().map(|e| json_html(e, None)).collect(),
        servers: info.servers.iter().map(server_rows).collect(),
        preflight: info
            .servers
            .iter()
            .filter_map(|s| s.get("preflight"))
            .map(preflight_rows)
            .collect(),
        versions: info.versions.join(", "),
        runs: &info.runs,
        determinism: crate::report::distinct::determinism_note(
            m.cells.values().filter(|c| c.model == mv.name),
            &info.entries,
        ),
    };
    let path = format!("models/{}.html", mv.name);
    let p = &mv.pooled_total;
    let shapes: Vec<(String, &'static str, u64, u64)> = m
        .tags
        .iter()
        .filter_map(|tag| {
            let t = mv.pooled.get(tag)?;
            Some((
                tag.clone(),
                t.reliability(m.thresholds).as_str(),
                t.passes,
                t.scored,
            ))
        })
        .collect();
    let html = super::carded(
        "model page",
        &page,
        &format!(
            "{}: {} over its tasks",
            mv.name,
            p.reliability(m.thresholds).as_str()
        ),
        &format!(
            "pass@1 {}; {}",
            crate::site::text::rate_text(p.passes, p.scored, p.interval.as_ref()),
            super::verdict_line(&shapes)
        ),
        &path,
        input.site_url,
    )?;
    files.push((path, html));
    Ok(())
}

/// The model's pass rate per tag (forest) and its outcomes (bars), as SVG.
fn draw_charts(m: &Matrix, mv: &ModelView, files: &mut Vec<File>) -> Result<(), SiteError> {
    let mut forest_items: Vec<(String, &Pooled)> = vec![("all tasks".into(), &mv.pooled_total)];
    forest_items.extend(mv.pooled.iter().map(|(t, x)| (format!("tag {t}"), x)));
    let forest_file = format!("charts/models/{}.tags.svg", mv.name);
    files.push((
        forest_file.clone(),
        chart(
            &forest_file,
            charts::forest(
                &format!("{}: pass rate per tag", mv.name),
                &charts::forest_rows(m.thresholds, forest_items),
                m.thresholds,
            ),
        )?,
    ));
    let bars_file = format!("charts/models/{}.labels.svg", mv.name);
    files.push((
        bars_file.clone(),
        chart(
            &bars_file,
            charts::bars(&format!("{}: outcomes", mv.name), &label_bars(mv)),
        )?,
    ));
    Ok(())
}

/// The model's cells, one row per task it ran (`r` leads to the site root).
fn task_rows(m: &Matrix, mv: &ModelView, r: &str) -> Vec<TaskRow> {
    let mut tasks = Vec::new();
    for t in &m.tasks {
        let Some(c) = m.cell(&mv.name, &t.id) else {
            continue;
        };
        let mut td = String::new();
        // A summary: compact marks, no per-sample links (the task and tag pages have them).
        cell_td(m, c, r, false, false, None, &mut td);
        tasks.push(TaskRow {
            task: t.id.clone(),
            title: t.title.clone(),
            td,
            all_passed: if c.scored == 0 {
                "–"
            } else if c.all_passed() {
                "yes"
            } else {
                "no"
            },
            flaky: if c.flaky() { "flaky" } else { "" },
            value: if c.value_compared > 0 {
                format!("{}/{}", c.value_matches, c.value_compared)
            } else {
                "–".into()
            },
            labels: label_summary(c),
        });
    }
    tasks
}

/// The model's totals per tag, each linked to its tag's page.
fn tag_rows(m: &Matrix, mv: &ModelView, r: &str) -> Vec<TotalRow> {
    mv.tags
        .iter()
        .map(|(tag, t)| {
            total_row(
                m.thresholds,
                tag,
                format!("{r}tags/{}.html", slug(tag)),
                t,
                mv.pooled.get(tag).unwrap_or(&Pooled::default()),
                mv.latency_by_tag.get(tag),
            )
        })
        .collect()
}

/// Per label the model failed with, what asking again measured: with routing's interval (these
/// tasks; the trials of one failure share its cell), never the bare rate of the pairs.
fn reroll_rows(mv: &ModelView, routing: &Routing) -> Vec<RerollRow> {
    let own = routing.model(&mv.name);
    Label::ALL
        .iter()
        .filter_map(|l| {
            let x = mv.reroll.get(l)?;
            let measure = own
                .and_then(|o| o.labels.iter().find(|r| r.label == *l))
                .map(|r| r.reroll_all);
            Some(RerollRow {
                label: l.as_str(),
                retry: l.retry().as_str(),
                failures: x.failures,
                measured: match measure {
                    Some(m) if m.n > 0 => routing::measure_text(&m),
                    _ => "– (no other sample in those cells)".into(),
                },
            })
        })
        .collect()
}

/// Value accuracy over all the model's tasks that report values, then per tag; empty when it
/// ran none.
fn value_rows(m: &Matrix, mv: &ModelView, r: &str) -> Vec<value::ValueRow> {
    let Some(v) = &mv.value_total else {
        return Vec::new();
    };
    let mut rows = vec![value::row(
        m.thresholds,
        "all such tasks".into(),
        String::new(),
        v,
    )];
    rows.extend(mv.value_by_tag.iter().map(|(tag, v)| {
        value::row(
            m.thresholds,
            tag.clone(),
            format!("{r}tags/{}.html", slug(tag)),
            v,
        )
    }));
    rows
}
