//! The static site: pages (askama templates), charts (plotters SVG) and data exports, rendered
//! from a [`Matrix`] into a list of (relative path, bytes). Pure: `cmd::build` does the reading
//! and writing. Every link is relative, so the site works from the file system and from a
//! GitHub Pages project path.

pub mod answers;
pub mod card;
pub mod charts;
pub mod data;
pub mod html;
pub mod pages;
pub mod repeats;
pub mod reuse;
pub mod tags;
pub mod value;

use crate::hitec::HitecError;
use crate::report::latency::{Latency, Spread};
use crate::report::pooled::Pooled;
use crate::report::{Cell, Matrix, ModelView, Total};
use crate::stats::Thresholds;
use crate::stats::interval::Interval;
use crate::stats::interval::{percent, show};
use crate::task::{Expect, Order, Task};
use crate::taxonomy::{Label, Outcome};
use askama::Template;
use data::{Changes, SkippedInput};
use html::{cell_id, escape, json_html, root, slug};
use pages::{compare, routing, samples};
use rayon::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A page or asset failed to render (a template or chart bug, never bad input).
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("rendering {page}: {source}")]
    Template { page: String, source: askama::Error },
    #[error("drawing {chart}: {message}")]
    Chart { chart: String, message: String },
    #[error("writing data/samples.csv: {0}")]
    Csv(#[from] csv::Error),
    /// A file could not be handed on (written) as it was rendered.
    #[error("{0}")]
    Write(String),
}

/// What the cell.json files of a model's runs say about it.
#[derive(Debug, Clone, Default)]
pub struct ModelInfo {
    /// The distinct model entries used (already redacted by collect), in run order.
    pub entries: Vec<Value>,
    /// The distinct `server` objects recorded.
    pub servers: Vec<Value>,
    /// callcheck versions that collected the runs, sorted.
    pub versions: Vec<String>,
    /// (task, run id, k, started, ended), sorted.
    pub runs: Vec<(String, String, u32, String, String)>,
}

/// Everything the site is rendered from.
pub struct SiteInput<'a> {
    pub matrix: &'a Matrix,
    /// The corpus, sorted by id.
    pub tasks: &'a [Task],
    pub models: &'a BTreeMap<String, ModelInfo>,
    pub skipped: &'a [SkippedInput],
    pub changes: Option<&'a Changes>,
    /// Task id → sha256 of its file, for the manifest.
    pub task_hashes: &'a BTreeMap<String, String>,
    /// Run folder (relative to the runs root) → sha256 of its listing (every file in it with
    /// its sha256: [`data::run_listing`]), for the manifest.
    pub transcripts: &'a BTreeMap<String, String>,
    /// Rows compared (SPEC §9), Holm-corrected together; each gets a page.
    pub comparisons: &'a [crate::compare::Comparison],
    /// The groups of pages the site being updated holds ([`reuse`]): the pages of a model, a
    /// task, a tag or a label whose inputs did not change are left as they are. `None`: every
    /// page is drawn, and none is recorded.
    pub groups: Option<&'a dyn reuse::Groups>,
    /// The site's base address (`build --site-url`, checked by [`card::site_url`]): the link
    /// cards' `og:url`.
    pub site_url: Option<&'a str>,
}

/// A rendered file: its path relative to the site root, and its bytes.
pub type File = (String, Vec<u8>);

const STYLE: &str = include_str!("style.css");
const SORT_JS: &str = include_str!("sort.js");
const SAMPLES_JS: &str = include_str!("samples.js");

/// A one-character mark per outcome, so dots read without colour (the legend explains them).
pub fn glyph(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "✓",
        Outcome::Error => "!",
        Outcome::Fail(l) => match l {
            Label::NoCall => "N",
            Label::WrongTool => "W",
            Label::MalformedJson => "M",
            Label::SchemaViolation => "S",
            Label::HallucinatedParam => "H",
            Label::MissingRequired => "R",
            Label::TypeCoercion => "C",
            Label::EscapingError => "E",
            Label::Truncation => "T",
            Label::ParallelCollapse => "P",
            Label::SpuriousCall => "U",
        },
    }
}

/// The bar colour of an outcome in distribution charts.
fn outcome_colour(o: Outcome) -> (u8, u8, u8) {
    match o {
        Outcome::Pass => (26, 127, 55),
        Outcome::Error => (110, 119, 129),
        Outcome::Fail(l) => match l.retry() {
            crate::taxonomy::Retry::Reroll => (191, 135, 0),
            crate::taxonomy::Retry::Repair => (9, 105, 218),
            crate::taxonomy::Retry::Fallback => (207, 34, 46),
        },
    }
}

/// Cells with more samples than this draw each outcome group as its glyph and a count (`✓×27`)
/// instead of one glyph per sample, so a summary page grows with the cells it shows, not with k.
const MAX_MARKS: usize = 12;

/// The index draws its matrix up to this many cells (models × tasks); above, it links the tag
/// pages, which draw the matrix one call shape at a time. Layout time grows with the cells:
/// bench/index.sh measured, in headless Chromium on 2 shared cores, 11,800 compact cells at
/// about 2 s (1.3 s even without their marks) and 3,894 at 0.75–0.93 s, so the budget keeps the
/// index under a second with some margin.
const MATRIX_CELLS: usize = 3_000;

/// A label's page gives at most this many example transcripts per cell (the task page links
/// every sample), so the page grows with the cells that have the label, not with k.
const MAX_LABEL_EXAMPLES: usize = 3;

/// The changes page lists at most this many samples per move (old outcome → new); the moves
/// table counts them all.
const MAX_CHANGE_EXAMPLES: usize = 20;

/// The dots of a cell. With `links` (task and tag pages), one link per sample to its permalink,
/// marked by glyph and class. Without (the index and model pages, whose size must not grow with
/// samples), see [`compact_marks`].
fn dots(m: &Matrix, c: &Cell, root: &str, links: bool, out: &mut String) {
    out.push_str("<span class=\"dots\">");
    if !links {
        compact_marks(c, out);
        out.push_str("</span>");
        return;
    }
    for &i in &c.samples {
        let s = &m.samples[i];
        out.push_str("<a class=\"d o-");
        out.push_str(s.outcome.kind());
        out.push_str("\" href=\"");
        out.push_str(root);
        section_into(out, &s.key, s.outcome != Outcome::Pass);
        out.push_str("\" title=\"");
        html::escape_into(out, &s.key.run);
        out.push('/');
        html::escape_into(out, &s.key.sample);
        out.push_str(": ");
        out.push_str(s.outcome.name());
        out.push_str("\">");
        out.push_str(glyph(s.outcome));
        out.push_str("</a>");
    }
    out.push_str("</span>");
}

/// `escape(&key.section(fail))` onto `out`, without making either string (a matrix cell links
/// each of its samples).
fn section_into(out: &mut String, key: &crate::report::SampleKey, fail: bool) {
    for part in key.section_parts(fail) {
        html::escape_into(out, part);
    }
}

/// A cell's samples as one mark per outcome group, unlinked: passes, then each label in
/// taxonomy order, then transport errors. A group repeats its glyph once per sample (`✓✓W`) up
/// to [`MAX_MARKS`] samples in the cell, and reads glyph × count above (`✓×27 W×3`). Failure and
/// error groups carry their name as a title (the legend explains every glyph, so the marks read
/// without colour), and the markup is a few dozen bytes whatever k is.
fn compact_marks(c: &Cell, out: &mut String) {
    let groups = std::iter::once((Outcome::Pass, c.passes))
        .chain(c.labels.iter().map(|(l, n)| (Outcome::Fail(*l), *n)))
        .chain(std::iter::once((Outcome::Error, c.errors)));
    grouped_marks(c.samples.len(), groups.map(|(o, n)| (o, n, None)), out);
}

/// The marks of [`compact_marks`] for any list of outcome groups (in the order given), each
/// with the count of its samples and, optionally, the address (relative, unescaped) its mark
/// links to: the comparison pages link each group to its first sample.
fn grouped_marks(
    samples: usize,
    groups: impl Iterator<Item = (Outcome, u64, Option<String>)>,
    out: &mut String,
) {
    let each = samples <= MAX_MARKS;
    for (outcome, n, href) in groups {
        if n == 0 {
            continue;
        }
        let (class, title) = match outcome {
            Outcome::Pass => ("mp", None),
            Outcome::Fail(l) => ("mf", Some(l.as_str())),
            Outcome::Error => ("me", Some("error")),
        };
        let tag = if href.is_some() { "a" } else { "i" };
        out.push('<');
        out.push_str(tag);
        out.push_str(" class=\"");
        out.push_str(class);
        out.push('"');
        if let Some(h) = &href {
            out.push_str(" href=\"");
            out.push_str(&escape(h));
            out.push_str("\" title=\"");
            out.push_str(outcome.name());
            out.push_str(&format!(" × {n}, the first linked\""));
        } else if let Some(t) = title {
            out.push_str(" title=\"");
            out.push_str(t);
            out.push('"');
        }
        out.push('>');
        let glyph = glyph(outcome);
        if each {
            for _ in 0..n {
                out.push_str(glyph);
            }
        } else {
            out.push_str(glyph);
            out.push('×');
            out.push_str(&n.to_string());
        }
        out.push_str("</");
        out.push_str(tag);
        out.push('>');
    }
}

/// The inline style that grades a cell's fill by its interval: green up to the lower bound
/// (surely passes), yellow across the interval, red above the upper bound (surely fails). So
/// 5/5, 3/5 and 0/5 look different at k = 5 although all three are `uncertain`, and the fill
/// is the interval, never the bare rate.
fn fill(iv: Option<&Interval>) -> String {
    match iv {
        Some(iv) => format!(
            " style=\"--l:{}%;--u:{}%\"",
            (crate::stats::interval::round4(iv.lower) * 100.0).round() as i64,
            (crate::stats::interval::round4(iv.upper) * 100.0).round() as i64
        ),
        None => String::new(),
    }
}

/// `2/3 · 67 % [21–94 %]`, or why there is no rate.
fn rate_text(passes: u64, scored: u64, iv: Option<&crate::stats::interval::Interval>) -> String {
    match iv {
        Some(iv) => format!(
            "{passes}/{scored} · {} {}",
            percent(passes as f64 / scored as f64),
            show(iv)
        ),
        None => "no scored sample".to_string(),
    }
}

/// One matrix cell as a `<td>`, with its anchor (`with_id`), verdict word, rate, notes and dots:
/// linked to the transcripts with `links`, else [`compact_marks`], a few dozen bytes at any k.
/// One task's row of a matrix (the index's or a tag page's): a cell per model, each with its
/// anchor and grouped marks, and `also`, the task's other tags.
fn matrix_row(
    m: &Matrix,
    t: &crate::report::TaskInfo,
    root: &str,
    also: String,
    rep: &repeats::Repeats,
) -> MatrixRow {
    let mut cells = String::new();
    for mv in &m.models {
        match m.cell(&mv.name, &t.id) {
            Some(c) => cell_td(m, c, root, true, false, Some(rep), &mut cells),
            None => cells.push_str("<td class=\"none\">not run</td>"),
        }
    }
    MatrixRow {
        task: t.id.clone(),
        title: t.title.clone(),
        also,
        cells,
    }
}

/// `rep`: where the page marks cells whose samples repeat one answer ([`repeats`]).
fn cell_td(
    m: &Matrix,
    c: &Cell,
    root: &str,
    with_id: bool,
    links: bool,
    rep: Option<&repeats::Repeats>,
    out: &mut String,
) {
    let v = c.reliability.as_str();
    out.push_str("<td class=\"iv v-");
    out.push_str(v);
    out.push('"');
    out.push_str(&fill(c.interval.as_ref()));
    if with_id {
        out.push_str(" id=\"");
        html::escape_into(out, &cell_id(&c.model, &c.task));
        out.push('"');
    }
    // Writing to a String cannot fail.
    let _ = write!(out, " data-v=\"{:.4}", c.rate().unwrap_or(-1.0));
    out.push_str("\"><b class=\"vt\">");
    out.push_str(v);
    out.push_str("</b> <span class=\"rt\">");
    html::escape_into(out, &rate_text(c.passes, c.scored, c.interval.as_ref()));
    out.push_str("</span>");
    if c.too_few() {
        let _ = write!(
            out,
            " <small class=\"few\">only {} scored</small>",
            c.scored
        );
    }
    if c.errors > 0 {
        let _ = write!(
            out,
            " <small>+{} error{}</small>",
            c.errors,
            if c.errors == 1 { "" } else { "s" }
        );
    }
    if c.task_changed {
        out.push_str(" <small class=\"warn\">task changed</small>");
    }
    if let Some(why) = rep.and_then(|r| r.why(&c.model, [c])) {
        out.push(' ');
        out.push_str(&why.mark());
    }
    out.push(' ');
    dots(m, c, root, links, out);
    out.push_str("</td>");
}

/// A pooled (model × tag) cell as a `<td>`: verdict, passes/scored with the by-task interval,
/// pass^k and flaky cells; graded like a matrix cell.
/// `mark`: the identical-samples mark of the cells pooled ([`repeats`]), or `""`.
fn pooled_td(at: Thresholds, p: &Pooled, mark: &str, out: &mut String) {
    let v = p.reliability(at).as_str();
    out.push_str("<td class=\"iv v-");
    out.push_str(v);
    out.push('"');
    out.push_str(&fill(p.interval.as_ref()));
    out.push_str(&format!(
        " data-v=\"{:.4}\"><b class=\"vt\">{v}</b> <span class=\"rt\">{}</span><br><small>",
        p.interval.map_or(-1.0, |iv| iv.lower),
        escape(&rate_text(p.passes, p.scored, p.interval.as_ref()))
    ));
    out.push_str(&format!(
        "{} task{} · pass^k {}/{} · flaky {}",
        p.tasks,
        if p.tasks == 1 { "" } else { "s" },
        p.all_passed,
        p.tasks,
        p.flaky
    ));
    if p.errors > 0 {
        out.push_str(&format!(" · +{} errors", p.errors));
    }
    if let Some(more) = crate::report::pooled::samples_to_settle(p, at.reliable_at()) {
        out.push_str(&format!(" · ~{more} more samples per task would settle it"));
    }
    if !mark.is_empty() {
        out.push_str(" · ");
        out.push_str(mark);
    }
    out.push_str("</small></td>");
}

/// Latency and size as three short texts for a table row.
struct LatencyText {
    ttfb: String,
    total: String,
    tokens: String,
}

/// `120 / 340 ms`: median / p95, or "–" when nothing recorded it.
fn spread_text(s: Option<Spread>, unit: &str) -> String {
    match s {
        Some(s) => format!("{:.0} / {:.0}{unit}", s.median, s.p95),
        None => "–".into(),
    }
}

fn latency_text(l: Option<&Latency>) -> LatencyText {
    let l = l.cloned().unwrap_or_default();
    LatencyText {
        ttfb: spread_text(l.ttfb_ms, " ms"),
        total: spread_text(l.total_ms, " ms"),
        tokens: spread_text(l.completion_tokens, ""),
    }
}

struct TotalRow {
    name: String,
    /// Median / p95 time to first byte, total time, completion tokens.
    latency: LatencyText,
    link: String,
    /// Cells (tasks) rated.
    cells: u64,
    /// Pooled pass@1 with its by-task interval.
    rate: String,
    verdict: &'static str,
    lower: u64,
    upper: u64,
    pass_all_k: String,
    flaky: u64,
    errors: u64,
    sort: String,
}

/// A summary row: the rate is pooled with the task as its unit (`p`); pass^k counts cells, each
/// cell one task, with a plain interval over cells (`t`).
fn total_row(
    at: Thresholds,
    name: &str,
    link: String,
    t: &Total,
    p: &Pooled,
    latency: Option<&Latency>,
) -> TotalRow {
    let pct = |x: f64| (crate::stats::interval::round4(x) * 100.0).round() as u64;
    TotalRow {
        name: name.to_string(),
        latency: latency_text(latency),
        link,
        cells: p.tasks,
        rate: rate_text(p.passes, p.scored, p.interval.as_ref()),
        verdict: p.reliability(at).as_str(),
        lower: p.interval.map_or(0, |iv| pct(iv.lower)),
        upper: p.interval.map_or(0, |iv| pct(iv.upper)),
        pass_all_k: match t.all_passed_interval.as_ref() {
            Some(iv) => format!(
                "{} cells · {} {}",
                format_args!("{}/{}", t.all_passed_cells, t.rated_cells),
                percent(t.all_passed_cells as f64 / t.rated_cells as f64),
                show(iv)
            ),
            None => "–".into(),
        },
        flaky: t.flaky_cells,
        errors: t.errors,
        sort: format!("{:.4}", p.interval.map_or(-1.0, |iv| iv.lower)),
    }
}

struct LabelCountRow {
    model: String,
    passes: u64,
    counts: Vec<u64>,
    errors: u64,
}

struct LegendItem {
    glyph: &'static str,
    kind: &'static str,
    name: &'static str,
}

fn legend() -> Vec<LegendItem> {
    let mut v = vec![LegendItem {
        glyph: glyph(Outcome::Pass),
        kind: "pass",
        name: "pass",
    }];
    for l in Label::ALL {
        v.push(LegendItem {
            glyph: glyph(Outcome::Fail(l)),
            kind: "fail",
            name: l.as_str(),
        });
    }
    v.push(LegendItem {
        glyph: glyph(Outcome::Error),
        kind: "error",
        name: "error (transport, not counted)",
    });
    v
}

/// One row of the models × tags table.
struct ShapeRow {
    tag: String,
    link: String,
    description: String,
    tasks: usize,
    /// Pre-rendered `<td>`s, one per model.
    cells: String,
}

/// One task row of a matrix.
struct MatrixRow {
    task: String,
    title: String,
    /// Its other tags.
    also: String,
    /// Pre-rendered `<td>`s, one per model.
    cells: String,
}

/// Above [`MATRIX_CELLS`], one page holding part of the matrix: a tag page, or the page of a
/// task with no tag.
struct MatrixPageLink {
    name: String,
    link: String,
    tasks: usize,
}

/// The tasks grouped under one tag in the index's matrix.
struct MatrixGroup {
    tag: String,
    link: Option<String>,
    rows: Vec<MatrixRow>,
}

#[derive(Template)]
#[template(path = "index.html")]
struct IndexPage<'a> {
    title: String,
    root: String,
    /// Escaped HTML: the link card's tags ([`card`]).
    card: String,
    method: &'static str,
    n_models: usize,
    n_tasks: usize,
    n_samples: usize,
    passes: u64,
    fails: u64,
    errors: u64,
    skipped: &'a [SkippedInput],
    has_changes: bool,
    models: Vec<String>,
    shapes: Vec<ShapeRow>,
    /// The matrix, empty above [`MATRIX_CELLS`] cells.
    groups: Vec<MatrixGroup>,
    n_cells: usize,
    matrix_cells: usize,
    /// Above [`MATRIX_CELLS`] cells: the pages that hold the matrix instead.
    matrix_pages: Vec<MatrixPageLink>,
    labels: Vec<&'static str>,
    label_rows: Vec<LabelCountRow>,
    totals: Vec<TotalRow>,
    legend: Vec<LegendItem>,
    /// Above this many samples a cell's marks are counts ([`MAX_MARKS`]).
    max_marks: usize,
    rules: String,
    /// The pre-rendered "Comparisons" block (empty without comparisons).
    comparisons: String,
    /// The pre-rendered first answer: per model, the shapes it is reliable on, those it is
    /// not, and those not told yet ([`answers`]).
    answers: String,
    /// The one-row-per-sample export: `data/samples.csv`, or one file per model.
    samples_csvs: &'a [String],
    /// The sentence on the identical-samples mark, or `""` ([`repeats`]).
    repeats: String,
    /// `--reliable-at` and the broken threshold as the legend writes them (`90 %`, `50 %`).
    reliable_at: String,
    broken_below: String,
    /// The interval of 5/5 in one cell, and the fewest all-passing samples a cell needs to
    /// read `reliable` (0: never, within four billion).
    five_of_five: String,
    cell_reliable_from: u64,
}

#[derive(Template)]
#[template(path = "samples.html")]
struct SamplesPage {
    title: String,
    root: String,
    n_samples: usize,
    /// Feedback samples (SPEC §11), listed under the round filter.
    n_feedback: usize,
    styles: Vec<&'static str>,
    clip: usize,
}

#[derive(Template)]
#[template(path = "tag.html")]
struct TagPage<'a> {
    title: String,
    root: String,
    tag: &'a str,
    description: String,
    method: &'static str,
    models: Vec<String>,
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

struct TaskRow {
    task: String,
    title: String,
    td: String,
    all_passed: &'static str,
    flaky: &'static str,
    value: String,
    labels: String,
}

struct HitecRow {
    number: u8,
    name: &'static str,
    labels: &'static str,
    count: u64,
}

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

struct ExpectedView {
    tool: String,
    gold: String,
    predicates: Vec<String>,
    /// What `accept` lists, one line per parameter (empty without `accept`).
    accept: Vec<String>,
}

struct ResultRow {
    model: String,
    td: String,
    /// Value accuracy and BFCL-style accuracy `<td>`s, when the task reports values.
    value_tds: String,
    labels: String,
}

#[derive(Template)]
#[template(path = "task.html")]
struct TaskPage<'a> {
    title: String,
    root: String,
    task: &'a Task,
    description: String,
    changed: bool,
    messages: String,
    tools: String,
    tool_choice: Option<String>,
    response_format: Option<String>,
    request: Option<String>,
    /// A sentence, as HTML (tool names escaped, in `<code>`).
    expect_kind: String,
    expected: Vec<ExpectedView>,
    across: Vec<String>,
    results: Vec<ResultRow>,
    /// The task reports value accuracy and BFCL-style accuracy (it has `accept` or is BFCL's).
    bfcl_scored: bool,
    value_meaning: &'static str,
    bfcl_style_meaning: &'static str,
    /// The pre-rendered "Comparisons" block (empty without comparisons).
    comparisons: String,
}

/// One example of a label on its page: a link to the sample's transcript at `#fail`.
struct LabelSample {
    link: String,
    run: String,
    sample: String,
}

/// One cell (model × task) on a label's page: how many of its samples got the label, a few
/// examples and the first one's detail; the task page links every sample.
struct LabelCell {
    task: String,
    /// Where the cell is drawn ([`cell_href`]).
    cell: String,
    count: u64,
    scored: u64,
    examples: Vec<LabelSample>,
    /// Samples with the label not given as examples.
    more: u64,
    detail: String,
}

struct LabelGroup {
    model: String,
    count: u64,
    cells: Vec<LabelCell>,
}

#[derive(Template)]
#[template(path = "label.html")]
struct LabelPage {
    title: String,
    root: String,
    label: &'static str,
    meaning: &'static str,
    retry: &'static str,
    retry_meaning: &'static str,
    hitec: String,
    /// Per row: the label's four measured actions (SPEC §11).
    actions: Vec<routing::LabelView>,
    groups: Vec<LabelGroup>,
    total: u64,
    n_cells: usize,
    max_examples: usize,
}

struct LabelIndexRow {
    label: &'static str,
    meaning: &'static str,
    retry: &'static str,
    count: u64,
}

#[derive(Template)]
#[template(path = "labels.html")]
struct LabelsPage {
    title: String,
    root: String,
    rows: Vec<LabelIndexRow>,
}

#[derive(Template)]
#[template(path = "changes.html")]
struct ChangesPage<'a> {
    title: String,
    root: String,
    c: &'a Changes,
    moves: Vec<(String, String, u64)>,
    /// The samples listed: at most `max_examples` per move, so that a scoring change that
    /// moves every verdict does not make a page the size of the collection.
    shown: Vec<&'a data::Change>,
    max_examples: usize,
}

#[derive(Template)]
#[template(path = "404.html")]
struct NotFoundPage {
    title: String,
    root: String,
    /// The stylesheet, inline: at a deep missing address a relative link would not load it.
    style: &'static str,
    /// Space-separated model names and task ids that have pages (path-safe words), so that a
    /// dead permalink links only pages that exist.
    models: String,
    tasks: String,
}

fn render<T: Template>(page: &str, t: &T) -> Result<Vec<u8>, SiteError> {
    t.render()
        .map(String::into_bytes)
        .map_err(|source| SiteError::Template {
            page: page.to_string(),
            source,
        })
}

fn chart(name: &str, r: Result<String, String>) -> Result<Vec<u8>, SiteError> {
    r.map(String::into_bytes)
        .map_err(|message| SiteError::Chart {
            chart: name.to_string(),
            message,
        })
}

fn retry_meaning(r: crate::taxonomy::Retry) -> &'static str {
    match r {
        crate::taxonomy::Retry::Reroll => {
            "a sampling artifact: asking the same model again is reasonable"
        }
        crate::taxonomy::Retry::Fallback => "a capability gap: send the request to another model",
        crate::taxonomy::Retry::Repair => "mechanically fixable by the caller",
    }
}

fn label_summary(c: &Cell) -> String {
    c.labels
        .iter()
        .map(|(l, n)| format!("{l} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

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

/// Flattens a JSON object into (dotted key, text) rows for a table; strings are shown bare.
/// One preflight check as the model page shows it.
struct PreflightRow {
    check: String,
    /// The stage-table class: `pass`, `fail`, or `na` when the check recorded no verdict.
    class: &'static str,
    result: &'static str,
    status: String,
    detail: String,
}

fn preflight_rows(p: &Value) -> Vec<PreflightRow> {
    let Some(o) = p.as_object() else {
        return Vec::new();
    };
    // Probe order, whatever order the file has them in; checks a later collect may add come
    // after, by name.
    use crate::collect::preflight::CHECKS;
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
                "models" => match crate::collect::preflight::listed_models_text(e) {
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

/// Chart rows from pooled rates: the interval drawn is the one by task.
fn forest_rows(at: Thresholds, items: Vec<(String, &Pooled)>) -> Vec<charts::ForestRow> {
    items
        .into_iter()
        .map(|(name, p)| charts::ForestRow {
            name,
            passes: p.passes,
            scored: p.scored,
            interval: p.interval,
            reliability: p.reliability(at),
        })
        .collect()
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

/// The tag a task is grouped under in the matrix: its first, or none.
fn primary_tag(t: &crate::report::TaskInfo) -> &str {
    t.tags.first().map_or("", String::as_str)
}

/// The models × tags table's rows, one per tag with its description and one pooled cell per
/// model (`root` leads to the site root).
fn shape_rows(m: &Matrix, root: &str, rep: &repeats::Repeats) -> Vec<ShapeRow> {
    m.tags
        .iter()
        .map(|tag| {
            let tasks = m.tasks.iter().filter(|t| t.tags.contains(tag)).count();
            let mut cells = String::new();
            for mv in &m.models {
                match mv.pooled.get(tag) {
                    Some(p) => pooled_td(
                        m.thresholds,
                        p,
                        &shape_mark(m, rep, &mv.name, tag),
                        &mut cells,
                    ),
                    None => cells.push_str("<td class=\"none\" data-v=\"-2\">not run</td>"),
                }
            }
            ShapeRow {
                tag: tag.clone(),
                link: format!("{root}tags/{}.html", slug(tag)),
                description: tags::describe(tag),
                tasks,
                cells,
            }
        })
        .collect()
}

/// The identical-samples mark of one model's pooled verdict over one tag, or `""`.
fn shape_mark(m: &Matrix, rep: &repeats::Repeats, model: &str, tag: &str) -> String {
    shape_why(m, rep, model, tag)
        .map(|w| w.mark())
        .unwrap_or_default()
}

/// Why one model's pooled verdict over one tag may overstate its evidence ([`repeats`]).
fn shape_why(m: &Matrix, rep: &repeats::Repeats, model: &str, tag: &str) -> Option<repeats::Why> {
    let cells = m
        .tasks
        .iter()
        .filter(|t| t.tags.iter().any(|x| x == tag))
        .filter_map(|t| m.cell(model, &t.id));
    rep.why(model, cells)
}

/// The rows marked somewhere among `tasks`' cells (a page's shapes and matrix), for its note.
fn marked_rows<'a>(
    m: &'a Matrix,
    rep: &repeats::Repeats,
    tasks: impl Iterator<Item = &'a crate::report::TaskInfo> + Clone,
) -> Vec<(&'a str, bool)> {
    m.models
        .iter()
        .filter(|mv| {
            rep.why(
                &mv.name,
                tasks.clone().filter_map(|t| m.cell(&mv.name, &t.id)),
            )
            .is_some()
        })
        .map(|mv| (mv.name.as_str(), true))
        .collect()
}

fn index_page(
    input: &SiteInput,
    rep: &repeats::Repeats,
    samples_csvs: &[String],
    files: &mut Vec<File>,
) -> Result<(), SiteError> {
    let m = input.matrix;
    // Tasks down the side, grouped under their first tag (tag order, then id); models across.
    let mut by_group: BTreeMap<&str, Vec<&crate::report::TaskInfo>> = BTreeMap::new();
    for t in &m.tasks {
        by_group.entry(primary_tag(t)).or_default().push(t);
    }
    let n_cells = m.models.len() * m.tasks.len();
    let mut groups = Vec::new();
    let mut matrix_pages = Vec::new();
    if n_cells > MATRIX_CELLS {
        // Too many cells for one page: each tag's page is its part of the matrix (with the
        // cells' anchors), and tasks with no tag are listed with their own pages.
        for tag in &m.tags {
            matrix_pages.push(MatrixPageLink {
                name: tag.clone(),
                link: format!("tags/{}.html", slug(tag)),
                tasks: m.tasks.iter().filter(|t| t.tags.contains(tag)).count(),
            });
        }
        for t in by_group.remove("").unwrap_or_default() {
            matrix_pages.push(MatrixPageLink {
                name: t.id.clone(),
                link: format!("tasks/{}.html", t.id),
                tasks: 1,
            });
        }
        by_group.clear();
    }
    for (tag, tasks) in by_group {
        let rows = tasks
            .into_iter()
            .map(|t| {
                let also = t.tags.iter().skip(1).cloned().collect::<Vec<_>>();
                matrix_row(m, t, "", also.join(", "), rep)
            })
            .collect();
        groups.push(MatrixGroup {
            tag: if tag.is_empty() {
                "untagged".into()
            } else {
                tag.to_string()
            },
            link: (!tag.is_empty()).then(|| format!("tags/{}.html", slug(tag))),
            rows,
        });
    }
    let label_rows = m
        .models
        .iter()
        .map(|mv| LabelCountRow {
            model: mv.name.clone(),
            passes: mv.total.passes,
            counts: Label::ALL
                .iter()
                .map(|l| mv.labels.get(l).copied().unwrap_or(0))
                .collect(),
            errors: mv.total.errors,
        })
        .collect();
    let totals = m
        .models
        .iter()
        .map(|mv| {
            total_row(
                m.thresholds,
                &mv.name,
                format!("models/{}.html", mv.name),
                &mv.total,
                &mv.pooled_total,
                Some(&mv.latency),
            )
        })
        .collect();
    let (passes, fails, errors) = m.outcome_counts();
    let card = card::render(
        &card::Card {
            title: &format!(
                "Tool-call conformance: {} model{} × {} task{}",
                m.models.len(),
                if m.models.len() == 1 { "" } else { "s" },
                m.tasks.len(),
                if m.tasks.len() == 1 { "" } else { "s" },
            ),
            description: &format!(
                "{} samples: {passes} passed, {fails} failed with a label, {errors} transport errors; every rate with its 95 % interval, every failure linked to its transcript.",
                m.samples.len()
            ),
            // The site's own address.
            path: "",
            kind: "website",
        },
        input.site_url,
    );
    let page = IndexPage {
        title: "Tool-call conformance".into(),
        root: String::new(),
        card,
        method: m.method.title(),
        n_models: m.models.len(),
        n_tasks: m.tasks.len(),
        n_samples: m.samples.len(),
        passes,
        fails,
        errors,
        skipped: input.skipped,
        has_changes: input.changes.is_some(),
        models: m.models.iter().map(|mv| mv.name.clone()).collect(),
        shapes: shape_rows(m, "", rep),
        groups,
        n_cells,
        matrix_cells: MATRIX_CELLS,
        matrix_pages,
        labels: Label::ALL.iter().map(|l| l.as_str()).collect(),
        label_rows,
        totals,
        legend: legend(),
        max_marks: MAX_MARKS,
        rules: data::rules_sha256()[..12].to_string(),
        comparisons: compare::block(input.comparisons, 0, None, None),
        answers: answers::block(m, rep),
        // The rows marked in the shape table and the answers (tagged tasks), and in the
        // matrix when the index draws it (every task).
        repeats: repeats::note(
            marked_rows(
                m,
                rep,
                m.tasks
                    .iter()
                    .filter(|t| n_cells <= MATRIX_CELLS || !t.tags.is_empty()),
            ),
            "",
        ),
        samples_csvs,
        reliable_at: m.thresholds.reliable_percent(),
        broken_below: m.thresholds.broken_percent(),
        five_of_five: crate::stats::interval::interval(m.method, 5, 5)
            .as_ref()
            .map(show)
            .unwrap_or_default(),
        cell_reliable_from: m.thresholds.fewest_samples(m.method).unwrap_or(0),
    };
    files.push(("index.html".into(), render("index.html", &page)?));
    Ok(())
}

/// `tags/<tag>.html`: one call shape, what it probes, each model's pooled verdict, and its
/// tasks × models with every sample linked.
fn tag_page(
    input: &SiteInput,
    rep: &repeats::Repeats,
    tag: &str,
    files: &mut Vec<File>,
) -> Result<(), SiteError> {
    let m = input.matrix;
    let r = root(1);
    let tasks: Vec<&crate::report::TaskInfo> = m
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
    let mut pooled = String::new();
    for mv in &m.models {
        match mv.pooled.get(tag) {
            Some(p) => pooled_td(
                m.thresholds,
                p,
                &shape_mark(m, rep, &mv.name, tag),
                &mut pooled,
            ),
            None => pooled.push_str("<td class=\"none\">not run</td>"),
        }
    }
    let items: Vec<(String, &Pooled)> = m
        .models
        .iter()
        .filter_map(|mv| mv.pooled.get(tag).map(|p| (mv.name.clone(), p)))
        .collect();
    let chart_file = format!("charts/tags/{}.svg", slug(tag));
    let has_chart = !items.is_empty();
    if has_chart {
        files.push((
            chart_file.clone(),
            chart(
                &chart_file,
                charts::forest(
                    &format!("tag {tag}: pass rate by model"),
                    &forest_rows(m.thresholds, items),
                    m.thresholds,
                ),
            )?,
        ));
    }
    let latency = m
        .models
        .iter()
        .map(|mv| latency_text(mv.latency_by_tag.get(tag)))
        .collect();
    let value_rows = m
        .models
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
        .collect();
    let repeats = repeats::note(marked_rows(m, rep, tasks.iter().copied()), &r);
    let page = TagPage {
        repeats,
        value_rows,
        value_tasks: tasks.iter().filter(|t| t.bfcl_scored).count(),
        value_first: "model",
        value_meaning: value::VALUE_MEANING,
        bfcl_style_meaning: value::BFCL_STYLE_MEANING,
        title: format!("tag {tag}"),
        latency,
        root: r,
        tag,
        description: tags::describe(tag),
        method: m.method.title(),
        models: m.models.iter().map(|mv| mv.name.clone()).collect(),
        pooled,

        rows,
        chart: has_chart.then_some(chart_file),
        legend: legend(),
    };
    files.push((
        format!("tags/{}.html", slug(tag)),
        render("tag page", &page)?,
    ));
    Ok(())
}

fn model_page(
    input: &SiteInput,
    mv: &ModelView,
    routing: &crate::report::routing::Routing,
    files: &mut Vec<File>,
) -> Result<(), SiteError> {
    let m = input.matrix;
    let r = root(1);
    let mut tasks = Vec::new();
    for t in &m.tasks {
        let Some(c) = m.cell(&mv.name, &t.id) else {
            continue;
        };
        let mut td = String::new();
        // A summary: compact marks, no per-sample links (the task and tag pages have them).
        cell_td(m, c, &r, false, false, None, &mut td);
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
    let tags = mv
        .tags
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
        .collect();
    let mut forest_items: Vec<(String, &Pooled)> = vec![("all tasks".into(), &mv.pooled_total)];
    forest_items.extend(mv.pooled.iter().map(|(t, x)| (format!("tag {t}"), x)));
    let forest_file = format!("charts/models/{}.tags.svg", mv.name);
    files.push((
        forest_file.clone(),
        chart(
            &forest_file,
            charts::forest(
                &format!("{}: pass rate per tag", mv.name),
                &forest_rows(m.thresholds, forest_items),
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
    // The reroll figure with routing's interval (these tasks; the trials of one failure share
    // its cell), never the bare rate of the pairs.
    let own = routing.model(&mv.name);
    let rerolls = Label::ALL
        .iter()
        .filter_map(|l| {
            let x = mv.reroll.get(l)?;
            let measure = own
                .and_then(|o| o.labels.iter().find(|r| r.label == *l))
                .map(|r| r.reroll);
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
        .collect();
    let hitec = HitecError::ALL
        .iter()
        .map(|h| HitecRow {
            number: h.number(),
            name: h.name(),
            labels: h.labels(),
            count: mv.hitec[h.number() as usize],
        })
        .collect();
    let info = input.models.get(&mv.name).cloned().unwrap_or_default();
    let servers: Vec<Vec<(String, String)>> = info.servers.iter().map(server_rows).collect();
    let preflight = info
        .servers
        .iter()
        .filter_map(|s| s.get("preflight"))
        .map(preflight_rows)
        .collect();
    let runs: Vec<(String, String, u32, String, String)> = info.runs.clone();
    let mut value_rows = Vec::new();
    if let Some(v) = &mv.value_total {
        value_rows.push(value::row(
            m.thresholds,
            "all such tasks".into(),
            String::new(),
            v,
        ));
        value_rows.extend(mv.value_by_tag.iter().map(|(tag, v)| {
            value::row(
                m.thresholds,
                tag.clone(),
                format!("{r}tags/{}.html", slug(tag)),
                v,
            )
        }));
    }
    let page = ModelPage {
        value_rows,
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
        tasks,
        tags,
        rerolls,
        hitec,
        f1_name: f1_text(&mv.metrics.name),
        f1_param: f1_text(&mv.metrics.name_and_parameters),
        entries: info.entries.iter().map(|e| json_html(e, None)).collect(),
        servers,
        preflight,
        versions: info.versions.join(", "),
        runs: &runs,
        determinism: crate::report::distinct::determinism_note(
            input.matrix.cells.values().filter(|c| c.model == mv.name),
            &info.entries,
        ),
    };
    files.push((
        format!("models/{}.html", mv.name),
        render("model page", &page)?,
    ));
    Ok(())
}

/// What a call task expects, as a sentence: "3 calls to `get_weather`, in any order", "2 calls:
/// 1 to `a` and 1 to `b`, in this order". HTML, with the tool names escaped.
fn expected_sentence<'a>(tools: impl Iterator<Item = &'a str>, order: Order) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    let mut n = 0;
    for t in tools {
        n += 1;
        match counts.iter_mut().find(|(x, _)| *x == t) {
            Some((_, c)) => *c += 1,
            None => counts.push((t, 1)),
        }
    }
    let plural = |k: usize| if k == 1 { "call" } else { "calls" };
    let code = |t: &str| format!("<code>{}</code>", escape(t));
    let mut out = match counts.as_slice() {
        [] => return "No call is listed.".into(),
        [(t, k)] => format!("{k} {} to {}", plural(*k), code(t)),
        many => {
            let parts: Vec<String> = many
                .iter()
                .map(|(t, k)| format!("{k} to {}", code(t)))
                .collect();
            let (last, rest) = parts
                .split_last()
                .map_or((String::new(), &[][..]), |(l, r)| (l.clone(), r));
            format!("{n} calls: {} and {last}", rest.join(", "))
        }
    };
    if n > 1 {
        out.push_str(match order {
            Order::Any => ", in any order",
            Order::Strict => ", in this order",
        });
    }
    out.push('.');
    out
}

/// Renders task markdown and sanitises it: raw HTML, event handlers and `javascript:` links in a
/// task description never reach the page. Images are dropped too: the site stays
/// self-contained (no fetches a reader did not ask for, no links that can break).
pub fn markdown(text: &str) -> String {
    let parser = pulldown_cmark::Parser::new_ext(text, pulldown_cmark::Options::ENABLE_TABLES);
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, parser);
    ammonia::Builder::default()
        .rm_tags(["img"])
        .link_rel(Some("noopener noreferrer"))
        .clean(&out)
        .to_string()
}

fn task_page(input: &SiteInput, task: &Task, files: &mut Vec<File>) -> Result<(), SiteError> {
    let m = input.matrix;
    let r = root(1);
    let mut results = Vec::new();
    let mut changed = false;
    let bfcl_scored = m.task(&task.id).is_some_and(|t| t.bfcl_scored);
    for mv in &m.models {
        if let Some(c) = m.cell(&mv.name, &task.id) {
            changed |= c.task_changed;
            let mut td = String::new();
            cell_td(m, c, &r, false, true, None, &mut td);
            let mut value_tds = String::new();
            if bfcl_scored {
                value::cell_tds(m, c, &mut value_tds);
            }
            results.push(ResultRow {
                model: mv.name.clone(),
                td,
                value_tds,
                labels: label_summary(c),
            });
        }
    }
    let (expect_kind, expected, across) = match &task.expect {
        Expect::NoCall => (
            "No tool call is needed: any call is <code>spurious_call</code>.".to_string(),
            vec![],
            vec![],
        ),
        Expect::Calls {
            calls,
            across,
            order,
        } => (
            expected_sentence(calls.iter().map(|c| c.tool.as_str()), *order),
            calls
                .iter()
                .map(|c| ExpectedView {
                    tool: c.tool.clone(),
                    gold: json_html(&c.gold, None),
                    predicates: c.where_.iter().map(|p| p.describe()).collect(),
                    accept: c.accept.as_ref().map(value::accept_lines).unwrap_or_default(),
                })
                .collect(),
            across.iter().map(|p| p.describe()).collect(),
        ),
        Expect::StructuredOutput { gold, where_, .. } => (
            "Structured output: JSON in the message content, valid against the schema sent in <code>response_format</code>.".to_string(),
            vec![ExpectedView {
                tool: "structured output".into(),
                gold: json_html(gold, None),
                predicates: where_.iter().map(|p| p.describe()).collect(),
                accept: Vec::new(),
            }],
            vec![],
        ),
    };
    let page = TaskPage {
        comparisons: compare::block(input.comparisons, 1, None, Some(&task.id)),
        title: format!("{} · {}", task.id, task.title),
        root: r,
        task,
        description: markdown(&task.description),
        changed,
        messages: json_html(&Value::Array(task.messages.clone()), None),
        tools: json_html(&Value::Array(task.tools_json.clone()), None),
        tool_choice: task.tool_choice.as_ref().map(|v| json_html(v, None)),
        response_format: task.response_format.as_ref().map(|v| json_html(v, None)),
        request: (!task.request.is_empty()).then(|| {
            json_html(
                &Value::Object(task.request.clone().into_iter().collect()),
                None,
            )
        }),
        expect_kind,
        expected,
        across,
        results,
        bfcl_scored,
        value_meaning: value::VALUE_MEANING,
        bfcl_style_meaning: value::BFCL_STYLE_MEANING,
    };
    files.push((
        format!("tasks/{}.html", task.id),
        render("task page", &page)?,
    ));
    Ok(())
}

/// The label pages, each handed to `sink` as it is drawn (or left as it is: [`reuse`]), and
/// their index.
fn label_pages(
    input: &SiteInput,
    keys: GroupKeys,
    routing_of: &crate::report::routing::Routing,
    sink: Sink,
) -> Result<(), SiteError> {
    let m = input.matrix;
    let r = root(1);
    let mut totals: BTreeMap<Label, u64> = BTreeMap::new();
    for c in m.cells.values() {
        for (&l, &count) in &c.labels {
            *totals.entry(l).or_default() += count;
        }
    }
    // Each label's page is drawn on its own core, unless the site being updated holds it as
    // drawn from the same cells and routing evidence.
    Label::ALL.par_iter().try_for_each(|&l| {
        let actions = routing::label_actions(routing_of, l);
        let key = keys.map(|(g, k)| (*g, routing::label_key(k.label(input, l), &actions)));
        if key.is_some_and(|(g, k)| g.keep(&label_group(l), &k)) {
            return Ok(());
        }
        // model → the cells with the label, in model and task order. Only the first
        // MAX_LABEL_EXAMPLES samples of each cell are kept: the page grows with cells, not
        // samples.
        let mut by_model: BTreeMap<&str, Vec<LabelCell>> = BTreeMap::new();
        for c in m.cells.values() {
            let Some(&count) = c.labels.get(&l) else {
                continue;
            };
            let mut examples = Vec::new();
            let mut detail = String::new();
            for &i in &c.samples {
                let s = &m.samples[i];
                if s.outcome != Outcome::Fail(l) {
                    continue;
                }
                if examples.is_empty() {
                    detail = crate::json::clip(&s.detail, 240);
                }
                examples.push(LabelSample {
                    link: format!("{r}{}", s.key.section(true)),
                    run: s.key.run.clone(),
                    sample: s.key.sample.clone(),
                });
                if examples.len() == MAX_LABEL_EXAMPLES {
                    break;
                }
            }
            by_model
                .entry(c.model.as_str())
                .or_default()
                .push(LabelCell {
                    task: c.task.clone(),
                    cell: cell_href(m, &c.model, &c.task),
                    count,
                    scored: c.scored,
                    more: count - examples.len() as u64,
                    examples,
                    detail,
                });
        }
        let groups: Vec<LabelGroup> = by_model
            .into_iter()
            .map(|(model, cells)| LabelGroup {
                model: model.to_string(),
                count: cells.iter().map(|c| c.count).sum(),
                cells,
            })
            .collect();
        let total: u64 = groups.iter().map(|g| g.count).sum();
        let n_cells = groups.iter().map(|g| g.cells.len()).sum();
        let hitec = HitecError::ALL
            .iter()
            .filter(|h| h.labels().contains(l.as_str()))
            .map(|h| format!("type {} (\u{201c}{}\u{201d})", h.number(), h.name()))
            .collect::<Vec<_>>()
            .join("; ");
        let page = LabelPage {
            title: format!("label {l}"),
            root: r.clone(),
            label: l.as_str(),
            meaning: l.meaning(),
            retry: l.retry().as_str(),
            retry_meaning: retry_meaning(l.retry()),
            hitec: if hitec.is_empty() {
                "none".into()
            } else {
                hitec
            },
            actions,
            groups,
            total,
            n_cells,
            max_examples: MAX_LABEL_EXAMPLES,
        };
        let path = format!("labels/{l}.html");
        if let Some((g, key)) = key {
            g.drawn(&label_group(l), key, vec![path.clone()]);
        }
        sink((path, render("label page", &page)?))
    })?;
    let index_rows = Label::ALL
        .iter()
        .map(|&l| LabelIndexRow {
            label: l.as_str(),
            meaning: l.meaning(),
            retry: l.retry().as_str(),
            count: totals.get(&l).copied().unwrap_or(0),
        })
        .collect();
    let page = LabelsPage {
        title: "labels".into(),
        root: r,
        rows: index_rows,
    };
    sink(("labels/index.html".into(), render("labels index", &page)?))
}

/// The name of a label page's group ([`reuse`]).
fn label_group(l: Label) -> String {
    format!("label {l}")
}

/// The triage page and what it loads: `samples.html`, `samples.js` and `data/samples.js` (a
/// function of its own so the page benchmark, examples/samples_page.rs, renders exactly it).
pub fn samples_page(m: &Matrix) -> Result<Vec<File>, SiteError> {
    Ok(vec![
        ("samples.js".into(), SAMPLES_JS.as_bytes().to_vec()),
        ("data/samples.js".into(), samples::samples_js(m)),
        (
            "samples.html".into(),
            render(
                "samples.html",
                &SamplesPage {
                    title: "every sample".into(),
                    root: String::new(),
                    n_samples: m.samples.len(),
                    n_feedback: m.feedback.len(),
                    styles: crate::runs::FeedbackStyle::ALL
                        .iter()
                        .map(|st| st.as_str())
                        .collect(),
                    clip: samples::DETAIL_CHARS,
                },
            )?,
        ),
    ])
}

/// Where each rendered summary file goes: called from two threads at once.
pub type Sink<'a> = &'a (dyn Fn(File) -> Result<(), SiteError> + Sync);

/// Renders every file of the site except the per-sample pages (which `cmd::build` renders while
/// it scores, so that no more than a handful of verdicts are alive at once), on every core: the
/// router's evidence is computed beside the files that do not read it, and each group of files
/// is drawn on its own. Each file is handed to `sink` as soon as it is drawn: a BFCL-sized
/// site's summary files are hundreds of megabytes, never held at once.
pub fn render_site(input: &SiteInput, sink: Sink) -> Result<(), SiteError> {
    // Which rows ask for temperature 0: the identical-samples marks of the index, the tag and
    // the comparison pages.
    let rep = repeats::Repeats::of(input.models);
    // What tells whether a group of pages the site being updated holds can stay.
    let keys = input.groups.map(|g| (g, reuse::Keys::of(input)));
    let keys = keys.as_ref();
    // The router's evidence (SPEC §11) is a pass over every sample and its follow-ups, and only
    // the model and label pages, `data/matrix.json` and its own page and export read it.
    let (routed, rest) = rayon::join(
        || {
            let r = crate::report::routing::routing(input.matrix);
            routed_files(input, &r, keys, sink)
        },
        || {
            let (data, pages) = rayon::join(
                || data_files(input, &rep, sink),
                || pages(input, &rep, keys, sink),
            );
            data.and(pages)
        },
    );
    routed.and(rest)
}

/// The keys of the site's groups of pages, with the record of the site being updated.
type GroupKeys<'a> = Option<&'a (&'a dyn reuse::Groups, reuse::Keys)>;

/// The files that read the router's evidence `r`: the model and label pages,
/// `data/matrix.json`, the routing page and its export.
fn routed_files(
    input: &SiteInput,
    r: &crate::report::routing::Routing,
    keys: GroupKeys,
    sink: Sink,
) -> Result<(), SiteError> {
    let m = input.matrix;
    let matrix = || {
        sink((
            "data/matrix.json".into(),
            data::matrix_json(m, r, input.skipped),
        ))
    };
    let routing = || {
        sink((routing::JSON.into(), routing::routing_json(m, r)))?;
        sink(routing::routing_page(r)?)
    };
    let pages = || {
        m.models.par_iter().try_for_each(|mv| {
            let key = keys.map(|(g, k)| (*g, k.model(input, &mv.name)));
            group(key, &format!("model {}", mv.name), sink, |files| {
                model_page(input, mv, r, files)
            })
        })?;
        label_pages(input, keys, r, sink)
    };
    let (a, (b, c)) = rayon::join(matrix, || rayon::join(routing, pages));
    a.and(b).and(c)
}

/// Draws one group of files ([`reuse`]) and hands them to `sink`, unless the site being updated
/// holds them as drawn from inputs with the same key.
fn group(
    key: Option<(&dyn reuse::Groups, reuse::Key)>,
    name: &str,
    sink: Sink,
    draw: impl FnOnce(&mut Vec<File>) -> Result<(), SiteError>,
) -> Result<(), SiteError> {
    if let Some((groups, key)) = &key
        && groups.keep(name, key)
    {
        return Ok(());
    }
    let mut files = Vec::new();
    draw(&mut files)?;
    if let Some((groups, key)) = key {
        groups.drawn(name, key, files.iter().map(|f| f.0.clone()).collect());
    }
    flush(&mut files, sink)
}

/// Hands each file of `files` to `sink`, emptying it.
fn flush(files: &mut Vec<File>, sink: Sink) -> Result<(), SiteError> {
    files.drain(..).try_for_each(sink)
}

/// The exports that do not read the router's evidence, the index and the manifest: the samples'
/// export with the index (which names the export's files), beside the samples table's data and
/// the manifest.
fn data_files(input: &SiteInput, rep: &repeats::Repeats, sink: Sink) -> Result<(), SiteError> {
    let m = input.matrix;
    let export_and_index = || {
        let samples_csvs = data::samples_csv_files(m, data::CSV_SPLIT_BYTES, &mut |f| sink(f))?;
        let mut files: Vec<File> = Vec::new();
        index_page(input, rep, &samples_csvs, &mut files)?;
        flush(&mut files, sink)
    };
    // The samples table's data is one pass over every sample.
    let samples = || samples_page(m).and_then(|files| files.into_iter().try_for_each(sink));
    let manifest = || {
        sink((
            "data/manifest.json".into(),
            data::manifest_json(m, input.task_hashes, input.transcripts),
        ))
    };
    let (a, (b, c)) = rayon::join(export_and_index, || rayon::join(samples, manifest));
    a.and(b).and(c)
}

/// The task, tag, comparison and changes pages, the 404 page and the assets.
fn pages(
    input: &SiteInput,
    rep: &repeats::Repeats,
    keys: GroupKeys,
    sink: Sink,
) -> Result<(), SiteError> {
    let m = input.matrix;
    // The groups of a task's and a tag's pages are drawn on every core: each is drawn from the
    // aggregates alone, and the files it writes are its own.
    enum Job<'a> {
        Task(&'a Task),
        Tag(&'a String),
    }
    let jobs: Vec<Job> = input
        .tasks
        .iter()
        .map(Job::Task)
        .chain(m.tags.iter().map(Job::Tag))
        .collect();
    jobs.par_iter().try_for_each(|job| match job {
        Job::Task(t) => {
            let key = keys.map(|(g, k)| (*g, k.task(input, &t.id)));
            group(key, &format!("task {}", t.id), sink, |files| {
                task_page(input, t, files)
            })
        }
        Job::Tag(tag) => {
            let key = keys.map(|(g, k)| (*g, k.tag(input, tag)));
            group(key, &format!("tag {tag}"), sink, |files| {
                tag_page(input, rep, tag, files)
            })
        }
    })?;
    let mut files: Vec<File> = Vec::new();
    compare::files(input.comparisons, input.matrix, rep, &mut files)?;
    flush(&mut files, sink)?;
    if let Some(c) = input.changes {
        let moves = c
            .moves
            .iter()
            .map(|((a, b), n)| (a.clone(), b.clone(), *n))
            .collect();
        let mut per_move: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        let shown = c
            .changed
            .iter()
            .filter(|x| {
                let n = per_move
                    .entry((x.old.as_str(), x.new.as_str()))
                    .or_default();
                *n += 1;
                *n <= MAX_CHANGE_EXAMPLES
            })
            .collect();
        let page = ChangesPage {
            title: "what changed".into(),
            root: String::new(),
            c,
            moves,
            shown,
            max_examples: MAX_CHANGE_EXAMPLES,
        };
        files.push(("changes.html".into(), render("changes.html", &page)?));
    }
    files.push((
        "404.html".into(),
        render(
            "404.html",
            &NotFoundPage {
                title: "not found".into(),
                root: String::new(),
                style: STYLE,
                models: m
                    .models
                    .iter()
                    .map(|mv| mv.name.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                tasks: input
                    .tasks
                    .iter()
                    .map(|t| t.id.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            },
        )?,
    ));
    files.push(("style.css".into(), STYLE.as_bytes().to_vec()));
    files.push(("sort.js".into(), SORT_JS.as_bytes().to_vec()));
    files.push((".nojekyll".into(), Vec::new()));
    flush(&mut files, sink)
}

/// Where a cell is drawn with its `c~<model>~<task>` anchor, relative to the site root: the
/// index's matrix, or above [`MATRIX_CELLS`] the page of the task's first tag (tag pages always
/// carry the anchors), or the task's own page for a task with no tag.
pub fn cell_href(m: &Matrix, model: &str, task: &str) -> String {
    let tags = m
        .tasks
        .binary_search_by(|t| t.id.as_str().cmp(task))
        .ok()
        .map(|i| m.tasks[i].tags.as_slice())
        .unwrap_or_default();
    cell_href_in(m.models.len() * m.tasks.len(), tags, model, task)
}

/// Whether the index draws the matrix of a site of `cells` cells (else the tag pages do).
pub fn index_draws_matrix(cells: usize) -> bool {
    cells <= MATRIX_CELLS
}

/// [`cell_href`] for a site of `cells` cells (models × tasks), the task having `tags`: what a
/// run's page links before the matrix exists.
pub fn cell_href_in(cells: usize, tags: &[String], model: &str, task: &str) -> String {
    if index_draws_matrix(cells) {
        return format!("index.html#{}", cell_id(model, task));
    }
    match tags.first() {
        Some(tag) => format!("tags/{}.html#{}", slug(tag), cell_id(model, task)),
        None => format!("tasks/{task}.html"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{SampleKey, Scored, TaskInfo, aggregate};

    /// `models` × `tasks` cells, one sample each, over two tags and one untagged task.
    fn matrix_of(models: usize, tasks: usize) -> Matrix {
        let infos: Vec<TaskInfo> = (0..tasks)
            .map(|i| TaskInfo {
                id: format!("task-{i:04}"),
                title: format!("task {i}"),
                tags: match i {
                    0 => vec![],
                    _ if i % 2 == 0 => vec!["even".into()],
                    _ => vec!["odd".into()],
                },
                bfcl_scored: false,
            })
            .collect();
        let samples = (0..models)
            .flat_map(|m| {
                (0..tasks).map(move |t| {
                    Scored::bare(
                        SampleKey {
                            model: format!("model-{m:02}"),
                            task: format!("task-{t:04}"),
                            run: "r1".into(),
                            sample: "000".into(),
                        },
                        if (m + t) % 3 == 0 {
                            Outcome::Fail(Label::WrongTool)
                        } else {
                            Outcome::Pass
                        },
                    )
                })
            })
            .collect();
        aggregate(samples, infos, crate::stats::IntervalKind::Wilson)
    }

    /// The index and the tag pages of [`matrix_of`].
    fn index_of(m: &Matrix) -> BTreeMap<String, String> {
        let input = SiteInput {
            matrix: m,
            tasks: &[],
            models: &BTreeMap::new(),
            skipped: &[],
            changes: None,
            task_hashes: &BTreeMap::new(),
            transcripts: &BTreeMap::new(),
            comparisons: &[],
            groups: None,
            site_url: None,
        };
        let mut files = Vec::new();
        let rep = repeats::Repeats::of(input.models);
        index_page(&input, &rep, &["data/samples.csv".to_string()], &mut files).unwrap();
        for tag in &m.tags {
            tag_page(&input, &rep, tag, &mut files).unwrap();
        }
        files
            .into_iter()
            .filter(|(p, _)| p.ends_with(".html"))
            .map(|(p, b)| (p, String::from_utf8(b).unwrap()))
            .collect()
    }

    #[test]
    fn above_the_cell_budget_the_index_links_the_tag_pages_which_hold_the_anchors() {
        // Within the budget: every cell on the index, with its anchor.
        let small = index_of(&matrix_of(2, 30));
        let index = &small["index.html"];
        assert_eq!(index.matches("id=\"c~").count(), 60);
        assert!(index.contains("<table class=\"matrix\">"));
        // Above: no matrix, a link to each tag page and to the untagged task's page...
        let (models, tasks) = (41, MATRIX_CELLS / 40);
        let m = matrix_of(models, tasks);
        let big = index_of(&m);
        let index = &big["index.html"];
        assert!(!index.contains("<table class=\"matrix\">"));
        assert_eq!(index.matches("id=\"c~").count(), 0);
        assert!(index.contains(&format!("make {} cells", models * tasks)));
        for link in ["tags/even.html", "tags/odd.html", "tasks/task-0000.html"] {
            assert!(index.contains(&format!("<a href=\"{link}\">")), "{link}");
        }
        // ...and the tag pages carry every tagged cell's anchor, so the cell is one click away.
        let anchored: usize = ["tags/even.html", "tags/odd.html"]
            .iter()
            .map(|p| big[*p].matches("id=\"c~").count())
            .sum();
        assert_eq!(anchored, models * (tasks - 1));
        assert!(big["tags/odd.html"].contains("id=\"c~model-40~task-0001\""));
        // Pages that name a cell link it where it is drawn.
        assert_eq!(
            cell_href(&m, "model-40", "task-0001"),
            "tags/odd.html#c~model-40~task-0001"
        );
        assert_eq!(
            cell_href(&m, "model-40", "task-0000"),
            "tasks/task-0000.html"
        );
        assert_eq!(
            cell_href(&matrix_of(2, 30), "model-01", "task-0000"),
            "index.html#c~model-01~task-0000"
        );
    }

    #[test]
    fn expected_calls_read_as_a_sentence() {
        let s = |tools: &[&str], o| expected_sentence(tools.iter().copied(), o);
        assert_eq!(
            s(&["get_weather"; 3], Order::Any),
            "3 calls to <code>get_weather</code>, in any order."
        );
        assert_eq!(
            s(&["get_weather"], Order::Any),
            "1 call to <code>get_weather</code>."
        );
        assert_eq!(
            s(&["a", "b<", "a"], Order::Strict),
            "3 calls: 2 to <code>a</code> and 1 to <code>b&lt;</code>, in this order."
        );
        assert_eq!(
            s(&["a", "b", "c"], Order::Any),
            "3 calls: 1 to <code>a</code>, 1 to <code>b</code> and 1 to <code>c</code>, in any order."
        );
    }
}
