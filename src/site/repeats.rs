//! The identical-samples warning beside the verdicts it affects (issue 28), said once per row
//! where it changes the reading (issue 45). k samples that are one answer repeated are one
//! observation, not k: an interval that counts them as independent overstates the evidence.
//! A row whose cells repeat one answer, or that asks for temperature 0, carries the whole mark
//! once: in its heading of a page's first table of rows ([`Repeats::heads`]), in its answer on
//! the index, beside the rows' names on a comparison. Below that, a cell, a pooled shape or a
//! comparison's row carries the glyph alone ([`Why::glyph`], its text in the title), and only
//! beside a decided verdict: a mark on every verdict would mark nothing. The page carries one
//! sentence saying what the mark means, linking the model pages of the rows marked (whose note
//! gives the counts). Rows are kept sorted and every name is escaped, so the marks are
//! deterministic and inert.

use super::html::{escape, escape_into};
use crate::evidence::Provenance;
use crate::report::{Cell, Matrix, TaskInfo};
use std::collections::{BTreeMap, BTreeSet};

/// The mark, a character that reads "the same" without colour.
pub(crate) const MARK: &str = "≡";

/// What the build knows of which rows ask for temperature 0 (from their runs' `cell.json`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Repeats {
    zero: BTreeSet<String>,
}

/// Why one verdict may overstate its evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Why {
    /// Cells under the verdict whose two or more scored samples are one answer.
    repeated: u64,
    /// Cells under the verdict with a scored sample.
    cells: u64,
    /// The row asks for temperature 0.
    zero: bool,
}

impl Repeats {
    pub(crate) fn of(models: &BTreeMap<String, Provenance>) -> Repeats {
        Repeats {
            zero: models
                .iter()
                .filter(|(_, i)| crate::report::distinct::asks_temperature_zero(&i.entries))
                .map(|(name, _)| name.clone())
                .collect(),
        }
    }

    /// Why the verdict of `row` over `cells` (its cells of a shape, a task or a comparison)
    /// may overstate the evidence; `None` when nothing under it repeats, or there is no cell
    /// (and so no verdict) at all.
    pub(crate) fn why<'a>(
        &self,
        row: &str,
        cells: impl IntoIterator<Item = &'a Cell>,
    ) -> Option<Why> {
        let mut w = Why {
            repeated: 0,
            cells: 0,
            zero: self.zero.contains(row),
        };
        let mut any = false;
        for c in cells {
            any = true;
            if c.scored > 0 {
                w.cells += 1;
            }
            if c.identical() {
                w.repeated += 1;
            }
        }
        (any && (w.zero || w.repeated > 0)).then_some(w)
    }

    /// The same from counts already taken (a comparison's cells, which may be a baseline's):
    /// `repeated` of `cells`.
    pub(crate) fn why_counted(&self, row: &str, repeated: u64, cells: u64) -> Option<Why> {
        let w = Why {
            repeated,
            cells,
            zero: self.zero.contains(row),
        };
        (cells > 0 && (w.zero || w.repeated > 0)).then_some(w)
    }

    /// Why one model's pooled verdict over one tag (its cells of the tag's tasks) may overstate
    /// the evidence.
    pub(crate) fn why_tag(&self, m: &Matrix, model: &str, tag: &str) -> Option<Why> {
        let cells = m
            .tasks
            .iter()
            .filter(|t| t.tags.iter().any(|x| x == tag))
            .filter_map(|t| m.cell(model, &t.id));
        self.why(model, cells)
    }

    /// The mark each row (in the matrix's order) carries once in the heading of a page's first
    /// table of rows, over its cells of `tasks`, or `""`: the cells below it repeat only the
    /// glyph, and only beside a decided verdict ([`Why::glyph`]).
    pub(crate) fn heads<'a>(
        &self,
        m: &'a Matrix,
        tasks: impl Iterator<Item = &'a TaskInfo> + Clone,
    ) -> Vec<(String, String)> {
        m.models
            .iter()
            .map(|mv| {
                let why = self.why(
                    &mv.name,
                    tasks.clone().filter_map(|t| m.cell(&mv.name, &t.id)),
                );
                (mv.name.clone(), why.map(|w| w.mark()).unwrap_or_default())
            })
            .collect()
    }
}

impl Why {
    /// The mark with its short text, as a row's heading carries it (HTML): `≡ one answer in 3
    /// of 4 tasks`, `≡ one answer` for a single cell, `≡ temperature 0`. The words a phone's
    /// narrow column has no room for sit in `<span class="long">`, which the phone's style
    /// hides (`≡ 35 of 68` there); the title says what the mark means on both.
    pub(crate) fn mark(&self) -> String {
        wrap(&self.words(("<span class=\"long\">", "</span>")))
    }

    /// The glyph alone, its text in the title: beside a decided verdict in a table whose row
    /// heading carries the whole mark once. A mark on every verdict would mark nothing; an
    /// `uncertain` verdict already claims nothing the repeats could overstate.
    pub(crate) fn glyph(&self) -> String {
        glyph_of(&self.text())
    }

    fn text(&self) -> String {
        self.words(("", ""))
    }

    /// The mark's words, those a phone may drop between `long`'s two halves.
    fn words(&self, long: (&str, &str)) -> String {
        let (open, close) = long;
        let mut parts = Vec::new();
        if self.zero {
            parts.push("temperature 0".to_string());
        }
        if self.repeated > 0 {
            parts.push(if self.cells <= 1 {
                "one answer".to_string()
            } else {
                format!(
                    "{open}one answer in {close}{} of {}{open} tasks{close}",
                    self.repeated, self.cells
                )
            });
        }
        parts.join("; ")
    }
}

fn wrap(text: &str) -> String {
    format!(
        "<small class=\"warn same\" title=\"k identical samples: one observation, not k\">{MARK} {text}</small>"
    )
}

fn glyph_of(text: &str) -> String {
    format!(
        "<small class=\"warn same\" title=\"{}: k identical samples are one observation, not k\">{MARK}</small>",
        escape(text)
    )
}

/// The mark of a comparison's figure, which rests on two rows: `≡ A: one answer; B:
/// temperature 0`, or its glyph alone ([`Why::glyph`]) with `glyph`; `""` when neither side
/// repeats.
pub(crate) fn mark_sides(a: Option<Why>, b: Option<Why>, glyph: bool) -> String {
    let parts: Vec<String> = [("A", a), ("B", b)]
        .into_iter()
        .filter_map(|(side, w)| w.map(|w| format!("{side}: {}", w.text())))
        .collect();
    match (parts.is_empty(), glyph) {
        (true, _) => String::new(),
        (false, true) => glyph_of(&parts.join("; ")),
        (false, false) => wrap(&parts.join("; ")),
    }
}

/// The page's sentence on the mark ([`note`]) for the rows whose heading carries one
/// ([`Repeats::heads`]), every one of them with a page here.
pub(crate) fn heads_note(heads: &[(String, String)], root: &str) -> String {
    note(
        heads
            .iter()
            .filter(|(_, mark)| !mark.is_empty())
            .map(|(row, _)| (row.as_str(), true)),
        root,
    )
}

/// The page's one sentence on the mark, linking the model pages of `rows` (`root` leads to the
/// site root; a row without a page here, a baseline's, is named unlinked); `""` without a row.
pub(crate) fn note<'a>(rows: impl IntoIterator<Item = (&'a str, bool)>, root: &str) -> String {
    let rows: BTreeMap<&str, bool> = rows.into_iter().collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "<p class=\"warn same\" id=\"repeats\">{MARK} marks a verdict resting on cells whose samples are one answer repeated, or on a row that asks for temperature 0: k identical samples are one observation, not k, so the interval (which counts them as independent) overstates the evidence; see "
    );
    for (i, (row, linked)) in rows.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        if *linked {
            s.push_str("<a href=\"");
            s.push_str(&escape(root));
            s.push_str("models/");
            escape_into(&mut s, row);
            s.push_str(".html#deterministic\">");
            escape_into(&mut s, row);
            s.push_str("</a>");
        } else {
            escape_into(&mut s, row);
        }
    }
    s.push_str(".</p>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Reliability, Thresholds};

    fn cell(model: &str, scored: u64, distinct: u64) -> Cell {
        Cell {
            model: model.into(),
            task: "t".into(),
            samples: Vec::new(),
            runs: Vec::new(),
            k: scored,
            scored,
            passes: scored,
            errors: 0,
            labels: BTreeMap::new(),
            interval: None,
            reliability: Thresholds::default().verdict(None),
            value_matches: 0,
            value_compared: 0,
            task_changed: false,
            distinct_responses: distinct,
        }
    }

    #[test]
    fn a_verdict_is_marked_when_a_cell_under_it_repeats_or_its_row_asks_temperature_zero() {
        let mut models = BTreeMap::new();
        models.insert(
            "cold".to_string(),
            Provenance {
                entries: vec![serde_json::json!({"params": {"temperature": 0}})],
                ..Default::default()
            },
        );
        models.insert("warm".to_string(), Provenance::default());
        let r = Repeats::of(&models);
        let (same, varied, one) = (cell("warm", 5, 1), cell("warm", 5, 3), cell("warm", 1, 1));
        assert_eq!(r.why("warm", [&varied, &one]), None);
        // No cell, no verdict to mark, even at temperature 0.
        assert_eq!(r.why("cold", []), None);
        assert_eq!(r.why_counted("cold", 0, 0), None);
        let w = r.why("warm", [&same, &varied, &one]).unwrap();
        assert_eq!(
            w,
            Why {
                repeated: 1,
                cells: 3,
                zero: false
            }
        );
        assert_eq!(w.text(), "one answer in 1 of 3 tasks");
        assert!(
            r.why("warm", [&same])
                .unwrap()
                .mark()
                .ends_with(">≡ one answer</small>")
        );
        // A row's heading keeps the counts on a phone: the other words can be hidden.
        assert!(
            w.mark().ends_with(
                ">≡ <span class=\"long\">one answer in </span>1 of 3<span class=\"long\"> tasks</span></small>"
            ),
            "{}",
            w.mark()
        );
        let cold = r.why("cold", [&varied]).unwrap();
        assert!(cold.mark().ends_with(">≡ temperature 0</small>"));
        let both = Why { zero: true, ..w };
        assert!(both.mark().ends_with(
            ">≡ temperature 0; <span class=\"long\">one answer in </span>1 of 3<span class=\"long\"> tasks</span></small>"
        ));
        assert_eq!(Reliability::Uncertain, same.reliability);
        assert_eq!(mark_sides(None, None, false), "");
        assert_eq!(mark_sides(None, None, true), "");
        assert!(
            mark_sides(Some(w), Some(cold), false)
                .ends_with(">≡ A: one answer in 1 of 3 tasks; B: temperature 0</small>")
        );
        assert!(mark_sides(None, Some(cold), false).ends_with(">≡ B: temperature 0</small>"));
        // The glyph alone keeps its text in the title.
        assert_eq!(
            mark_sides(None, Some(cold), true),
            "<small class=\"warn same\" title=\"B: temperature 0: k identical samples are one observation, not k\">≡</small>"
        );
        assert_eq!(
            w.glyph(),
            "<small class=\"warn same\" title=\"one answer in 1 of 3 tasks: k identical samples are one observation, not k\">≡</small>"
        );
    }

    #[test]
    fn the_note_links_each_marked_row_once_escaped_and_sorted() {
        assert_eq!(note(std::iter::empty(), "../"), "");
        let n = note(
            [("z<b>", true), ("a", true), ("z<b>", true), ("base", false)],
            "../",
        );
        assert!(
            n.ends_with("see <a href=\"../models/a.html#deterministic\">a</a>, base, <a href=\"../models/z&lt;b&gt;.html#deterministic\">z&lt;b&gt;</a>.</p>\n"),
            "{n}"
        );
        assert!(!n.contains("<b>"));
    }
}
