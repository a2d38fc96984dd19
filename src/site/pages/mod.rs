//! The site's pages, one module each: its askama struct(s) and the builder that fills them.

pub(crate) mod changes;
pub(crate) mod compare;
pub(crate) mod index;
pub(crate) mod label;
pub(crate) mod model;
pub(crate) mod not_found;
pub(crate) mod routing;
pub(crate) mod routing_review;
pub mod run;
pub(crate) mod samples;
pub(crate) mod tag;
pub(crate) mod task;

use super::SiteError;
use askama::Template;

/// A page's bytes, or which page failed (a template bug, never bad input).
fn render<T: Template>(page: &str, t: &T) -> Result<Vec<u8>, SiteError> {
    t.render()
        .map(String::into_bytes)
        .map_err(|source| SiteError::Template {
            page: page.to_string(),
            source,
        })
}

/// A page's bytes with its link card (og:, twitter:, meta description: [`super::card`]) in its
/// head: a summary page's one-line summary, for when its address is shared. `path` is the page's
/// address relative to the site root.
fn carded<T: Template>(
    page: &str,
    t: &T,
    title: &str,
    description: &str,
    path: &str,
    site_url: Option<&str>,
) -> Result<Vec<u8>, SiteError> {
    let mut html = render(page, t)?;
    let card = super::card::render(
        &super::card::Card {
            title,
            description,
            path,
            kind: "website",
        },
        site_url,
    );
    // Every page that extends base.html has exactly one `</head>`, written by the template.
    if let Some(at) = html.windows(7).position(|w| w == b"</head>") {
        html.splice(at..at, card.into_bytes());
    }
    Ok(html)
}

/// A model's verdicts over `shapes` (tag, verdict, passes, scored), the decided ones first, as
/// one line for a card: `reliable on parallel (54/55); unreliable on enum (19/30), …`.
fn verdict_line(shapes: &[(String, &'static str, u64, u64)]) -> String {
    let mut parts = Vec::new();
    for want in ["reliable", "unreliable", "broken", "uncertain"] {
        let named: Vec<String> = shapes
            .iter()
            .filter(|s| s.1 == want)
            .map(|s| format!("{} ({}/{})", s.0, s.2, s.3))
            .collect();
        if !named.is_empty() {
            parts.push(format!("{want} on {}", named.join(", ")));
        }
    }
    parts.join("; ")
}

/// A chart's bytes, or which chart failed.
fn chart(name: &str, r: Result<String, String>) -> Result<Vec<u8>, SiteError> {
    r.map(String::into_bytes)
        .map_err(|message| SiteError::Chart {
            chart: name.to_string(),
            message,
        })
}
