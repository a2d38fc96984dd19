//! The site's pages, one module each: its askama struct(s) and the builder that fills them.

pub(crate) mod changes;
pub(crate) mod compare;
pub(crate) mod index;
pub(crate) mod label;
pub(crate) mod model;
pub(crate) mod not_found;
pub(crate) mod routing;
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

/// A chart's bytes, or which chart failed.
fn chart(name: &str, r: Result<String, String>) -> Result<Vec<u8>, SiteError> {
    r.map(String::into_bytes)
        .map_err(|message| SiteError::Chart {
            chart: name.to_string(),
            message,
        })
}
