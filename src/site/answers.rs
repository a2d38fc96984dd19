//! The index's first screen: per model, the call shapes it can be relied on for, those it
//! cannot, and those its samples cannot tell yet. The shape table below it holds the same
//! verdicts with their rates and intervals; this is the answer a reader came for, said before
//! the evidence (a 1440 × 900 screen showed a page of `uncertain` cells, and the one decisive
//! row below the fold).

use super::html::{escape, escape_into, slug};
use crate::report::Matrix;
use crate::stats::Reliability;

/// Which of the three answers a pooled verdict gives.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Answer {
    Reliable,
    /// Any verdict that rules reliance out (`broken`, and whatever else says the rate is
    /// surely below the threshold).
    NotReliable,
    Undecided,
}

fn answer(r: Reliability) -> Answer {
    match r {
        Reliability::Reliable => Answer::Reliable,
        Reliability::Uncertain => Answer::Undecided,
        #[allow(unreachable_patterns)]
        _ => Answer::NotReliable,
    }
}

/// The answers as HTML (a list, one item per model, so that it reads the same on a phone), or
/// `""` without a model. Model and tag names are escaped; links are relative to the site root.
pub(crate) fn block(m: &Matrix, rep: &super::repeats::Repeats) -> String {
    if m.models.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<section id=\"answers\"><h2>What each model can be relied on for</h2>\n<p class=\"legend\">Per call shape, pooled over its tasks; the rates and intervals are in the <a href=\"#shapes\">table below</a>.</p>\n<ul class=\"answers\">\n",
    );
    for mv in &m.models {
        s.push_str("<li><a href=\"models/");
        escape_into(&mut s, &mv.name);
        s.push_str(".html\"><b>");
        escape_into(&mut s, &mv.name);
        s.push_str("</b></a>: ");
        let mut parts: Vec<String> = Vec::new();
        // The decided verdicts resting on identical samples, said once after the line.
        let mut marked: Vec<&str> = Vec::new();
        for (want, head, class) in [
            (Answer::Reliable, "reliable on", "v-reliable"),
            (Answer::NotReliable, "unreliable on", "v-broken"),
            (Answer::Undecided, "uncertain on", "v-uncertain"),
        ] {
            let tags: Vec<String> = m
                .tags
                .iter()
                .filter_map(|tag| {
                    let p = mv.pooled.get(tag)?;
                    let r = p.reliability(m.thresholds);
                    (answer(r) == want).then(|| {
                        let mut t = format!("<a href=\"tags/{}.html\">", escape(&slug(tag)));
                        escape_into(&mut t, tag);
                        t.push_str("</a>");
                        // The verdict word where it is not the group's own, and the count.
                        let word = if want == Answer::NotReliable && r.as_str() != "unreliable" {
                            format!("{} ", r.as_str())
                        } else {
                            String::new()
                        };
                        t.push_str(&format!(
                            " <small>({word}{}/{})</small>",
                            p.passes, p.scored
                        ));
                        // The identical-samples mark, once per model and only where it
                        // changes the reading: beside a decided verdict (an `uncertain` one is
                        // not relied on either way), the shape table below giving its text.
                        if want != Answer::Undecided && rep.why_tag(m, &mv.name, tag).is_some() {
                            marked.push(tag.as_str());
                        }
                        t
                    })
                })
                .collect();
            if !tags.is_empty() {
                parts.push(format!(
                    "<span class=\"{class}\"><b class=\"vt\">{head}</b></span> {}",
                    tags.join(", ")
                ));
            }
        }
        if parts.is_empty() {
            parts.push("no scored sample yet".into());
        }
        s.push_str(&parts.join("; "));
        s.push('.');
        if !marked.is_empty() {
            s.push_str(&format!(
                " <small class=\"warn same\" title=\"k identical samples: one observation, not k\">{} ",
                super::repeats::MARK
            ));
            escape_into(&mut s, &marked.join(", "));
            s.push_str(": repeated answers</small>");
        }
        s.push_str("</li>\n");
    }
    s.push_str("</ul></section>\n");
    s
}
