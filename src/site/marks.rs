//! The marks a cell's samples are drawn with: one glyph per outcome (so the marks read without
//! colour), one mark per sample linked to its transcript, or one per outcome group with its
//! count above [`MAX_MARKS`] samples; and the legend that explains the glyphs.

use super::html::{self, escape};
use crate::report::{Cell, Matrix, SampleKey};
use crate::taxonomy::{Label, Outcome};

/// A one-character mark per outcome, so dots read without colour (the legend explains them).
pub(crate) fn glyph(o: Outcome) -> &'static str {
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

/// Cells with more samples than this draw each outcome group as its glyph and a count (`✓×27`)
/// instead of one glyph per sample, so a summary page grows with the cells it shows, not with k.
pub(crate) const MAX_MARKS: usize = 12;

/// The dots of a cell. With `links` (task and tag pages), one link per sample to its permalink,
/// marked by glyph and class. Without (the index and model pages, whose size must not grow with
/// samples), see [`compact_marks`], the whole group one link to the cell's run page.
pub(crate) fn dots(m: &Matrix, c: &Cell, root: &str, links: bool, out: &mut String) {
    if !links {
        // One link for the whole group of marks: the cell's run page (its latest run, ids
        // starting with their time), where every sample is, in order.
        match c.runs.last() {
            Some(run) => {
                out.push_str("<a class=\"dots\" href=\"");
                out.push_str(root);
                out.push_str("t/");
                for (i, part) in [&c.model, &c.task, run].into_iter().enumerate() {
                    if i > 0 {
                        out.push('/');
                    }
                    html::escape_into(out, part);
                }
                out.push_str("/index.html\">");
                compact_marks(c, out);
                out.push_str("</a>");
            }
            None => {
                out.push_str("<span class=\"dots\">");
                compact_marks(c, out);
                out.push_str("</span>");
            }
        }
        return;
    }
    out.push_str("<span class=\"dots\">");
    for &i in &c.samples {
        let s = &m.samples[i];
        out.push_str("<a class=\"d o-");
        out.push_str(s.outcome.kind());
        out.push_str("\" href=\"");
        out.push_str(root);
        section_into(out, &s.key, s.outcome != Outcome::Pass);
        out.push('"');
        // A failure's mark names its sample and label on hover; a pass's ✓ says all there is
        // (as in the compact marks), and a title on every pass cost each a couple dozen bytes.
        if s.outcome != Outcome::Pass {
            out.push_str(" title=\"");
            html::escape_into(out, &s.key.run);
            out.push('/');
            html::escape_into(out, &s.key.sample);
            out.push_str(": ");
            out.push_str(s.outcome.name());
            out.push('"');
        }
        out.push('>');
        out.push_str(glyph(s.outcome));
        out.push_str("</a>");
    }
    out.push_str("</span>");
}

/// `escape(&key.section(fail))` onto `out`, without making either string (a matrix cell links
/// each of its samples).
fn section_into(out: &mut String, key: &SampleKey, fail: bool) {
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
pub(crate) fn grouped_marks(
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

/// One glyph of the legend with the outcome it stands for.
pub(crate) struct LegendItem {
    pub(crate) glyph: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) name: &'static str,
}

/// Every glyph in taxonomy order: pass, each label, then the transport error.
pub(crate) fn legend() -> Vec<LegendItem> {
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
