//! The static site: pages (askama templates), charts (plotters SVG) and data exports, rendered
//! from a [`Matrix`] into a list of (relative path, bytes). Pure: `cmd::build` does the reading
//! and writing. Every link is relative, so the site works from the file system and from a
//! GitHub Pages project path.
//!
//! This module draws the site as a whole: which files are drawn, on which core, and which are
//! left as the site being updated holds them ([`reuse`]). Each page is its own module under
//! [`pages`]; what several pages draw alike is in [`marks`] (a cell's samples), [`matrix`] (a
//! cell as a `<td>`, and where it is drawn), [`text`] (figures as words) and [`charts`]; the
//! files of `data/` are written by [`data`].

// Outside callcheck, only `html::slug` (the integration tests) and `samples_page` (its example)
// are read. `data`, `pages` and `reuse` are public because pipeline/, public itself, shows
// some of their types (Changes, SampleMark, Groups).
pub(crate) mod answers;
pub(crate) mod card;
pub(crate) mod charts;
pub mod data;
pub mod html;
pub(crate) mod marks;
pub(crate) mod matrix;
pub mod pages;
pub(crate) mod repeats;
pub mod reuse;
pub(crate) mod tags;
pub(crate) mod text;
pub(crate) mod value;

use crate::evidence::Provenance;
use crate::evidence::SkippedInput;
use crate::report::Matrix;
use crate::task::Task;
use data::Changes;
pub use pages::samples::samples_page;
use pages::{compare, routing};
use rayon::prelude::*;
use std::collections::BTreeMap;

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

/// Everything the site is rendered from.
pub(crate) struct SiteInput<'a> {
    pub(crate) matrix: &'a Matrix,
    /// The corpus, sorted by id.
    pub(crate) tasks: &'a [Task],
    pub(crate) models: &'a BTreeMap<String, Provenance>,
    pub(crate) skipped: &'a [SkippedInput],
    pub(crate) changes: Option<&'a Changes>,
    /// Task id → sha256 of its file, for the manifest.
    pub(crate) task_hashes: &'a BTreeMap<String, String>,
    /// Run folder (relative to the runs root) → sha256 of its listing (every file in it with
    /// its sha256: [`data::run_listing`]), for the manifest.
    pub(crate) transcripts: &'a BTreeMap<String, String>,
    /// Rows compared (SPEC §9), each decided in its family (`compare::correct`); each gets a page.
    pub(crate) comparisons: &'a [crate::compare::Comparison],
    /// The groups of pages the site being updated holds ([`reuse`]): the pages of a model, a
    /// task, a tag or a label whose inputs did not change are left as they are. `None`: every
    /// page is drawn, and none is recorded.
    pub(crate) groups: Option<&'a dyn reuse::Groups>,
    /// The site's base address (`build --site-url`, checked by [`card::site_url`]): the link
    /// cards' `og:url`.
    pub(crate) site_url: Option<&'a str>,
}

/// A rendered file: its path relative to the site root, and its bytes.
pub type File = (String, Vec<u8>);

/// The stylesheet every page links (and the 404 page inlines).
const STYLE: &str = include_str!("style.css");
/// The site's icon (a browser asks for one on every visit; without it, a 404 in the console).
const FAVICON: &str = include_str!("favicon.svg");
/// The optional script that sorts a `table.sortable` by the column clicked.
const SORT_JS: &str = include_str!("sort.js");

/// Where each rendered summary file goes: called from two threads at once.
pub(crate) type Sink<'a> = &'a (dyn Fn(File) -> Result<(), SiteError> + Sync);

/// Renders every file of the site except the per-sample pages (which `cmd::build` renders while
/// it scores, so that no more than a handful of verdicts are alive at once), on every core: the
/// router's evidence is computed beside the files that do not read it, and each group of files
/// is drawn on its own. Each file is handed to `sink` as soon as it is drawn: a BFCL-sized
/// site's summary files are hundreds of megabytes, never held at once.
pub(crate) fn render_site(input: &SiteInput, sink: Sink) -> Result<(), SiteError> {
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
            let mut r = crate::report::routing::routing(input.matrix);
            crate::report::routing::priced(&mut r, &prices(input.models));
            routed_files(input, &r, keys, sink)
        },
        || {
            let (data, pages) = rayon::join(
                || data_files(input, &rep, sink),
                || page_files(input, &rep, keys, sink),
            );
            data.and(pages)
        },
    );
    routed.and(rest)
}

/// Each row's `[model.price]`, from the model entries its runs' `cell.json` recorded: a row
/// is priced only when every entry it was collected with names the same price (a price that
/// changed between runs prices no one call).
fn prices(
    models: &BTreeMap<String, Provenance>,
) -> BTreeMap<String, crate::report::routing::Price> {
    let price = |e: &serde_json::Value| {
        let p = e.get("price")?;
        Some(crate::report::routing::Price {
            input_per_mtok: p.get("input_per_mtok")?.as_f64()?,
            output_per_mtok: p.get("output_per_mtok")?.as_f64()?,
        })
    };
    models
        .iter()
        .filter_map(|(name, info)| {
            let mut each = info.entries.iter().map(price);
            let first = each.next()??;
            each.all(|p| p == Some(first))
                .then(|| (name.clone(), first))
        })
        .collect()
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
        // The review round (SPEC §11) is measured here, where only its page and export read it.
        let reviews = crate::report::review::review(m);
        sink((
            "data/routing.json".into(),
            data::routing_json(m, r, &reviews),
        ))?;
        sink(("data/router.json".into(), data::router_json(m, r)))?;
        let names: Vec<&str> = m.models.iter().map(|mv| mv.name.as_str()).collect();
        routing::page(r, &names, &reviews)?
            .into_iter()
            .try_for_each(sink)
    };
    let pages = || {
        m.models.par_iter().try_for_each(|mv| {
            let key = keys.map(|(g, k)| (*g, k.model(input, &mv.name)));
            group(key, &format!("model {}", mv.name), sink, |files| {
                pages::model::page(input, mv, r, files)
            })
        })?;
        pages::label::pages(input, keys, r, sink)
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
        pages::index::page(input, rep, &samples_csvs, &mut files)?;
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
fn page_files(
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
                pages::task::page(input, t, files)
            })
        }
        Job::Tag(tag) => {
            let key = keys.map(|(g, k)| (*g, k.tag(input, tag)));
            group(key, &format!("tag {tag}"), sink, |files| {
                pages::tag::page(input, rep, tag, files)
            })
        }
    })?;
    let mut files: Vec<File> = Vec::new();
    compare::files(input.comparisons, input.matrix, rep, &mut files)?;
    flush(&mut files, sink)?;
    if let Some(c) = input.changes {
        files.push(pages::changes::page(c)?);
    }
    files.push(pages::not_found::page(input)?);
    files.push(("style.css".into(), STYLE.as_bytes().to_vec()));
    files.push(("sort.js".into(), SORT_JS.as_bytes().to_vec()));
    files.push(("favicon.svg".into(), FAVICON.as_bytes().to_vec()));
    files.push((".nojekyll".into(), Vec::new()));
    flush(&mut files, sink)
}
