//! Figures as the pages write them: a rate with its interval, latency as median / p95, the
//! summary row of a model or a tag, a cell's labels counted.

use crate::report::latency::{Latency, Spread};
use crate::report::pooled::Pooled;
use crate::report::{Cell, Total};
use crate::stats::Thresholds;
use crate::stats::interval::{Interval, percent, round4, show};

/// `2/3 · 67 % [21–94 %]`, or why there is no rate.
pub(crate) fn rate_text(passes: u64, scored: u64, iv: Option<&Interval>) -> String {
    match iv {
        Some(iv) => format!(
            "{passes}/{scored} · {} {}",
            percent(passes as f64 / scored as f64),
            show(iv)
        ),
        None => "no scored sample".to_string(),
    }
}

/// Latency and size as three short texts for a table row.
pub(crate) struct LatencyText {
    pub(crate) ttfb: String,
    pub(crate) total: String,
    pub(crate) tokens: String,
}

/// `120 / 340 ms`: median / p95, or "–" when nothing recorded it.
fn spread_text(s: Option<Spread>, unit: &str) -> String {
    match s {
        Some(s) => format!("{:.0} / {:.0}{unit}", s.median, s.p95),
        None => "–".into(),
    }
}

/// A model's (or a model's on one tag) latency and size as a row writes them.
pub(crate) fn latency_text(l: Option<&Latency>) -> LatencyText {
    let l = l.cloned().unwrap_or_default();
    LatencyText {
        ttfb: spread_text(l.ttfb_ms, " ms"),
        total: spread_text(l.total_ms, " ms"),
        tokens: spread_text(l.completion_tokens, ""),
    }
}

/// A model's or a tag's totals as a row of the index's and a model page's tables.
pub(crate) struct TotalRow {
    pub(crate) name: String,
    /// Median / p95 time to first byte, total time, completion tokens.
    pub(crate) latency: LatencyText,
    pub(crate) link: String,
    /// Cells (tasks) rated.
    pub(crate) cells: u64,
    /// Pooled pass@1 with its by-task interval.
    pub(crate) rate: String,
    pub(crate) verdict: &'static str,
    pub(crate) lower: u64,
    pub(crate) upper: u64,
    pub(crate) pass_all_k: String,
    pub(crate) flaky: u64,
    pub(crate) errors: u64,
    pub(crate) sort: String,
}

/// A summary row: the rate is pooled with the task as its unit (`p`); pass^k counts cells, each
/// cell one task, with a plain interval over cells (`t`).
pub(crate) fn total_row(
    at: Thresholds,
    name: &str,
    link: String,
    t: &Total,
    p: &Pooled,
    latency: Option<&Latency>,
) -> TotalRow {
    let pct = |x: f64| (round4(x) * 100.0).round() as u64;
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

/// A cell's labels counted, in taxonomy order: `wrong_tool ×2, truncation ×1`.
pub(crate) fn label_summary(c: &Cell) -> String {
    c.labels
        .iter()
        .map(|(l, n)| format!("{l} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
