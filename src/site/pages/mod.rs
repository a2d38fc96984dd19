//! The site's pages, one module each: its askama struct(s) and the builder that fills them.

pub mod compare;
pub mod routing;
pub mod run;
pub mod samples;
