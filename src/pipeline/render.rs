//! Stage 4, render: a run's page with its samples' sections and their permalinks (while their
//! verdicts are alive), and the summary pages and exports from the aggregates. Pure: data in,
//! (relative path, bytes) out.

use super::aggregate::Aggregates;
use crate::evidence::SkippedInput;
use crate::evidence::read::Sample;
use crate::runs::{CellInfo, RunDir};
use crate::score::Verdict;
use crate::site::pages::run;
use crate::site::{self, SiteInput};
use crate::task::Task;
use anyhow::{Context, Result};
use std::collections::BTreeMap;

/// The most bytes of sample sections one run page holds: with its head and the run's request
/// (its messages, tools and other fields shown up to 256 KiB each, its curl block the same), the
/// page stays under 2 MB. A section that would take the page past it shows the sample's verdict
/// and says its transcript was left off ([`left_off`]).
pub const SECTIONS_BUDGET: usize = 900_000;

/// Why a sample's transcript is left off its run's page, `len` bytes of HTML that would have
/// taken the page's sections past [`SECTIONS_BUDGET`].
pub fn left_off(sample: &Sample, len: usize) -> String {
    let k = &sample.key;
    format!(
        "This sample's transcript is left off this page: its {} of HTML would take the page past the 2 MB a run's page holds. Its files are runs/{}/{}/{}/samples/{}/ in the collection ({} read).",
        crate::site::html::bytes(len as u64),
        k.model,
        k.task,
        k.run,
        k.sample,
        crate::site::html::bytes(sample.bytes)
    )
}

/// One scored sample's section of its run's page, and its permalink page (path relative to the
/// site root, HTML). `left_off`: why the transcript is not shown ([`left_off`]).
#[allow(clippy::too_many_arguments)]
pub fn sample_section(
    task: &Task,
    cell: &CellInfo,
    task_changed: bool,
    sample: &Sample,
    request_changes: &[String],
    verdict: &Verdict,
    completion: Option<&crate::score::wire::Completion>,
    site_url: Option<&str>,
    left_off: Option<String>,
    shared_meta: &[(String, String)],
    shared_marks: Option<&(String, String)>,
    follow_ups: &[(String, String)],
) -> Result<(String, (String, String))> {
    let section = run::render(&run::SampleContext {
        key: &sample.key,
        task,
        cell,
        transcript: &sample.transcript,
        request_raw: &sample.request_raw,
        request_changes,
        verdict,
        task_changed,
        completion,
        left_off,
        shared_meta,
        shared_marks,
        follow_ups,
    })
    .with_context(|| format!("rendering the section of {}", sample.key.permalink()))?;
    let stub = run::render_stub(&sample.key, verdict, site_url)
        .with_context(|| format!("rendering the page of {}", sample.key.permalink()))?;
    Ok((section, (sample.key.permalink(), stub)))
}

/// The request every sample of a run sent, as its first sample has it: the bytes, and whether
/// its response was a stream.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub sample: String,
    pub bytes: Vec<u8>,
    /// The bytes parsed, when they parse: what another sample's request is compared with.
    pub value: Option<std::sync::Arc<serde_json::Value>>,
    pub streamed: bool,
}

/// A run's page (`t/<model>/<task>/<run>/index.html`): its samples' sections, and the request
/// shown once.
#[allow(clippy::too_many_arguments)]
pub fn run_page(
    task: &Task,
    run: &RunDir,
    samples: &[run::SampleMark],
    sections: &str,
    request: Option<&RunRequest>,
    cells: usize,
    site_url: Option<&str>,
    shared_meta: &[(String, String)],
    shared_marks: Option<&(String, String)>,
) -> Result<(String, String)> {
    let html = run::render_run(&run::RunContext {
        task,
        cell: &run.cell,
        model: &run.model,
        run: &run.run_id,
        samples,
        sections,
        reference: request.map(|r| (r.sample.as_str(), r.bytes.as_slice(), r.streamed)),
        cells,
        site_url,
        shared_meta,
        shared_marks,
    })
    .with_context(|| format!("rendering the page of run {}", run.dir.display()))?;
    Ok((run_page_path(run), html))
}

/// Where a run's page goes, relative to the site root.
pub fn run_page_path(run: &RunDir) -> String {
    format!("t/{}/{}/{}/index.html", run.model, run.task_id, run.run_id)
}

/// Every other file of the site (summary pages, charts, exports, the manifest), each handed to
/// `sink` as soon as it is rendered.
#[allow(clippy::too_many_arguments)]
pub fn summary(
    agg: &Aggregates,
    tasks: &[Task],
    skipped: &[SkippedInput],
    transcripts: &BTreeMap<String, String>,
    comparisons: &[crate::compare::Comparison],
    groups: Option<&dyn site::reuse::Groups>,
    site_url: Option<&str>,
    sink: site::Sink,
) -> Result<()> {
    Ok(site::render_site(
        &SiteInput {
            matrix: &agg.matrix,
            tasks,
            models: &agg.models,
            skipped,
            changes: agg.changes.as_ref(),
            task_hashes: &agg.task_hashes,
            transcripts,
            comparisons,
            groups,
            site_url,
        },
        sink,
    )?)
}
