//! `404.html`: the page a dead link lands on, which links the pages that do exist.

use super::render;
use crate::site::{File, STYLE, SiteError, SiteInput};
use askama::Template;

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

/// `404.html`, naming the site's models and tasks.
pub(crate) fn page(input: &SiteInput) -> Result<File, SiteError> {
    let page = NotFoundPage {
        title: "not found".into(),
        root: String::new(),
        style: STYLE,
        models: input
            .matrix
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
    };
    Ok(("404.html".into(), render("404.html", &page)?))
}
