//! `tags/<tag>.html`: one call shape, what it probes, each model's pooled verdict, its chart,
//! and its tasks × models with every sample linked.

use super::chart;
use crate::report::pooled::Pooled;
use crate::report::{Matrix, TaskInfo};
use crate::site::charts;
use crate::site::html::{root, slug};
use crate::site::marks::{LegendItem, legend};
use crate::site::matrix::{MatrixRow, matrix_row, pooled_row};
use crate::site::repeats::{self, Repeats};
use crate::site::text::{LatencyText, latency_text};
use crate::site::{File, SiteError, SiteInput, tags, value};
use askama::Template;

#[derive(Template)]
#[template(path = "tag.html")]
struct TagPage<'a> {
    title: String,
    root: String,
    tag: &'a str,
    description: String,
    method: &'static str,
    models: Vec<String>,
    /// Each model with its identical-samples mark, said once in the pooled table's heading
    /// ([`Repeats::heads`]).
    heads: Vec<(String, String)>,
    /// Pre-rendered pooled `<td>`s, one per model.
    pooled: String,
    /// The sentence on the identical-samples mark, or `""` ([`repeats`]).
    repeats: String,
    /// Per model, in the same order.
    latency: Vec<LatencyText>,
    rows: Vec<MatrixRow>,
    chart: Option<String>,
    legend: Vec<LegendItem>,
    /// Per model: conformance, value accuracy and BFCL-style accuracy over the tag's tasks
    /// that report values (empty when none does).
    value_rows: Vec<value::ValueRow>,
    /// The tag's tasks that report values.
    value_tasks: usize,
    value_first: &'static str,
    value_meaning: &'static str,
    bfcl_style_meaning: &'static str,
}

/// `tags/<tag>.html`: one call shape, what it probes, each model's pooled verdict, and its
/// tasks × models with every sample linked.
pub(crate) fn page(
    input: &SiteInput,
    rep: &Repeats,
    tag: &str,
    files: &mut Vec<File>,
) -> Result<(), SiteError> {
    let m = input.matrix;
    let r = root(1);
    let tasks: Vec<&TaskInfo> = m
        .tasks
        .iter()
        .filter(|t| t.tags.iter().any(|x| x == tag))
        .collect();
    let rows = tasks
        .iter()
        .map(|t| {
            // The cells' anchors here too: above [`MATRIX_CELLS`] the tag pages are the matrix.
            let also = t
                .tags
                .iter()
                .filter(|x| *x != tag)
                .cloned()
                .collect::<Vec<_>>();
            matrix_row(m, t, &r, also.join(", "), rep)
        })
        .collect();
    let heads = rep.heads(m, tasks.iter().copied());
    let page = TagPage {
        repeats: repeats::heads_note(&heads, &r),
        heads,
        value_rows: value_rows(m, tag, &r),
        value_tasks: tasks.iter().filter(|t| t.bfcl_scored).count(),
        value_first: "model",
        value_meaning: value::VALUE_MEANING,
        bfcl_style_meaning: value::BFCL_STYLE_MEANING,
        title: format!("tag {tag}"),
        latency: m
            .models
            .iter()
            .map(|mv| latency_text(mv.latency_by_tag.get(tag)))
            .collect(),
        root: r,
        tag,
        description: tags::describe(tag),
        method: m.method.title(),
        models: m.models.iter().map(|mv| mv.name.clone()).collect(),
        pooled: pooled_row(m, rep, tag, "<td class=\"none\">not run</td>"),
        rows,
        chart: draw_chart(m, tag, files)?,
        legend: legend(),
    };
    let path = format!("tags/{}.html", slug(tag));
    let verdicts: Vec<String> = m
        .models
        .iter()
        .filter_map(|mv| {
            let p = mv.pooled.get(tag)?;
            Some(format!(
                "{} {} {}/{}",
                mv.name,
                p.reliability(m.thresholds).as_str(),
                p.passes,
                p.scored
            ))
        })
        .collect();
    let html = super::carded(
        "tag page",
        &page,
        &format!(
            "Call shape {tag}: {} task{}",
            tasks.len(),
            if tasks.len() == 1 { "" } else { "s" }
        ),
        &verdicts.join(" · "),
        &path,
        input.site_url,
    )?;
    files.push((path, html));
    Ok(())
}

/// The tag's pass rate by model (forest), as SVG, and its path; none when no model ran the tag.
fn draw_chart(m: &Matrix, tag: &str, files: &mut Vec<File>) -> Result<Option<String>, SiteError> {
    let items: Vec<(String, &Pooled)> = m
        .models
        .iter()
        .filter_map(|mv| mv.pooled.get(tag).map(|p| (mv.name.clone(), p)))
        .collect();
    if items.is_empty() {
        return Ok(None);
    }
    let chart_file = format!("charts/tags/{}.svg", slug(tag));
    files.push((
        chart_file.clone(),
        chart(
            &chart_file,
            charts::forest(
                &format!("tag {tag}: pass rate by model"),
                &charts::forest_rows(m.thresholds, items),
                m.thresholds,
            ),
        )?,
    ));
    Ok(Some(chart_file))
}

/// Per model: conformance, value accuracy and BFCL-style accuracy over the tag's tasks that
/// report values (`r` leads to the site root).
fn value_rows(m: &Matrix, tag: &str, r: &str) -> Vec<value::ValueRow> {
    m.models
        .iter()
        .filter_map(|mv| {
            let v = mv.value_by_tag.get(tag)?;
            Some(value::row(
                m.thresholds,
                mv.name.clone(),
                format!("{r}models/{}.html", mv.name),
                v,
            ))
        })
        .collect()
}
