//! `changes.html`: which samples' outcomes moved since the previous build, counted by move, with
//! a few examples of each.

use super::render;
use crate::site::data::{self, Changes};
use crate::site::{File, SiteError};
use askama::Template;
use std::collections::BTreeMap;

/// The changes page lists at most this many samples per move (old outcome → new); the moves
/// table counts them all.
const MAX_CHANGE_EXAMPLES: usize = 20;

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

/// `changes.html`, from what changed since the previous build.
pub(crate) fn page(c: &Changes) -> Result<File, SiteError> {
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
    Ok(("changes.html".into(), render("changes.html", &page)?))
}
