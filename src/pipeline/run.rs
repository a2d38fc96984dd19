//! One run folder's samples: taken from the cache when the run is untouched or its bytes are
//! the ones the previous build scored, else read, scored and rendered, each page queued for the
//! writer as it is made.

use super::write::Page;
use super::{cache, render};
use crate::evidence::read::{self, RunInput};
use crate::evidence::{SkippedInput, score};
use crate::report::Scored;
use crate::task::Task;
use anyhow::{Result, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::mpsc::SyncSender;

/// One run folder after scoring: what the aggregates, the manifest and the cache keep of it.
#[derive(Debug, Default)]
pub struct RunOutcome {
    pub scored: Vec<Scored>,
    /// sha256 of the run folder's listing (cell.json and every sample file read, with their
    /// sha256), for the manifest.
    pub listing_sha256: String,
    /// Samples taken from the cache.
    pub reused: usize,
    pub skipped: Vec<SkippedInput>,
    /// Bytes of transcripts read (or, for a sample taken from the cache, that it holds).
    pub bytes: u64,
    /// Pages of the run's samples, and their bytes.
    pub pages: (usize, u64),
    /// What the cache keeps of the run for the next build.
    pub cached: cache::CachedRun,
    /// Pages the previous build wrote for this run that this build does not write (in place).
    pub stale: Vec<String>,
    /// What changed since the previous build, when its outcomes come from the cache.
    pub changes: crate::site::data::RunChanges,
    /// The previous build's record of the run could not be read back, so `changes` cannot be
    /// told from it: the build reads the previous outcomes from the site instead.
    pub changes_unknown: bool,
}

/// How a run's samples are taken: all read and scored, or from the previous build where
/// nothing changed.
pub struct Reuse<'a> {
    /// Models × tasks of the site (where a run's page links its cell).
    pub cells: usize,
    /// The site's base address (`build --site-url`, checked), for the pages' link cards.
    pub site_url: Option<&'a str>,
    /// The previous build's record of this run. When its `cell.json` and task are unchanged and
    /// its pages are in the site being written (`in_place`), an unchanged sample needs neither
    /// scoring, nor its page rendered or written.
    pub prior: Option<cache::CachedRun>,
    pub in_place: bool,
    /// Keep a record of the run for the next build.
    pub record: bool,
    /// Tell what changed since the previous build, from `prior`'s outcomes.
    pub changes: bool,
    /// The disk's time when the build began ([`cache::disk_now`]): the samples' looks settled
    /// before it are recorded for the next build.
    pub stamp: Option<crate::runs::DiskTime>,
    /// Every run's follow-ups ([`crate::evidence::follow_ups`]): a failure's section links the
    /// samples that followed it up.
    pub follow_ups: &'a crate::evidence::follow_ups::FollowUps,
}

/// Reads, scores and renders the samples of one run folder, queueing each page for the writer;
/// samples the cache vouches for are taken from it instead.
pub fn run_samples(
    runs_root: &Path,
    input: &RunInput,
    task: &Task,
    reuse: Reuse<'_>,
    pages: &SyncSender<Page>,
) -> Result<RunOutcome> {
    let mut reuse = reuse;
    let prior = reuse.prior.take();
    let job = Job {
        runs_root,
        input,
        run: &input.run,
        task,
        reuse,
        pages,
    };
    // A record whose checksum held but whose verdicts this build cannot read back (an outcome
    // it does not know) is no record: the run is read and scored as if it had none, and what
    // changed since is told from the previous site's samples.csv.
    let changes_unknown = prior
        .as_ref()
        .is_some_and(|p| !p.samples.values().all(cache::CachedSample::decodes));
    let mut prior = prior.filter(|_| !changes_unknown);
    if let Some(p) = prior.take_if(|p| job.untouched(p)) {
        return job.take_untouched(p);
    }
    let mut out = RunOutcome {
        changes_unknown,
        ..RunOutcome::default()
    };
    let samples = job.read_all(&mut out);
    // Same bytes as when the page in the site was written (read again, e.g. after a fresh clone
    // of runs/): the same verdicts, and the pages stand.
    if let Some(p) = prior.take_if(|p| job.same_bytes(p, &samples)) {
        return job.take_same_bytes(p, samples, out);
    }
    job.score_all(prior, samples, out)
}

/// One run folder's samples being taken: what [`run_samples`] was given.
struct Job<'a> {
    runs_root: &'a Path,
    input: &'a RunInput,
    run: &'a crate::runs::RunDir,
    task: &'a Task,
    /// How the run is taken; its `prior` already taken out.
    reuse: Reuse<'a>,
    pages: &'a SyncSender<Page>,
}

impl Job<'_> {
    fn follow_ups(&self) -> Option<&crate::evidence::follow_ups::OfRun> {
        self.reuse.follow_ups.of(&self.run.rel())
    }

    fn follow_ups_sha256(&self) -> String {
        crate::evidence::follow_ups::fingerprint(self.follow_ups())
    }

    fn key(&self, name: &str) -> crate::report::SampleKey {
        crate::report::SampleKey {
            model: self.run.model.clone(),
            task: self.run.task_id.clone(),
            run: self.run.run_id.clone(),
            sample: name.to_string(),
        }
    }

    /// The previous verdicts stand for the same transcripts of the same run and task, and its
    /// pages where they are.
    fn reusable(&self, p: &cache::CachedRun) -> bool {
        self.reuse.in_place
            && p.run_page.is_some()
            // A new follow-up (or one gone) changes the page of the run it follows up.
            && p.follow_ups_sha256 == self.follow_ups_sha256()
            && p.cell_sha256 == self.run.cell_sha256
            && p.task_sha256 == self.task.sha256
    }

    /// The run's folders look as they did when the previous build read them (the scan looked
    /// before listing them), with the same samples, and so do each sample's folder and files:
    /// nothing is read, and the listing and the run's page stand. See [`crate::runs::RunLook`]
    /// and [`crate::runs::SampleLook`] for what that trusts.
    fn untouched(&self, p: &cache::CachedRun) -> bool {
        let run = self.run;
        self.reusable(p)
            && run.look.is_some()
            && p.folders
                .as_ref()
                .is_some_and(|f| Some(f.look) == run.look && f.seen.samples == run.samples)
            && p.samples.len() == run.samples.len()
            && crate::fsafe::DirAt::open(&run.dir.join("samples")).is_ok_and(|samples| {
                run.samples.iter().all(|n| {
                    p.samples.get(n).is_some_and(|c| {
                        c.look.is_some_and(|l| {
                            crate::runs::SampleLook::now(&samples, n, l.streamed, l.meta) == Some(l)
                        })
                    })
                })
            })
    }

    /// The run as the cache holds it: the next cache holds the previous record as it is
    /// ([`cache::CachedRun::verbatim`]), only the verdicts are kept, and every page stands.
    fn take_untouched(&self, mut p: cache::CachedRun) -> Result<RunOutcome> {
        let mut out = RunOutcome {
            listing_sha256: p.listing_sha256.clone(),
            ..RunOutcome::default()
        };
        let samples = std::mem::take(&mut p.samples);
        out.cached = p;
        out.cached.verbatim = true;
        if self.reuse.changes {
            out.changes.seen = samples.len() as u64;
        }
        out.scored.reserve(samples.len());
        for (name, mut c) in samples {
            let Some(scored) = c
                .scored
                .take()
                .and_then(|s| (*s).into_scored(self.key(&name)))
            else {
                bail!(
                    "the cache's record of {} cannot be read",
                    self.run.dir.display()
                );
            };
            out.reused += 1;
            out.count(&scored, &c);
            out.scored.push(scored);
        }
        out.pages.0 += 1;
        out.pages.1 += out.cached.run_page.unwrap_or(0);
        Ok(out)
    }

    /// Every readable sample, with what the cache keeps of it (the run's page is rendered whole
    /// or, when nothing in the run changed, not at all); the run's listing goes into `out`.
    fn read_all(&self, out: &mut RunOutcome) -> Vec<(read::Sample, cache::CachedSample)> {
        let run = self.run;
        out.cached.cell_sha256 = run.cell_sha256.clone();
        out.cached.task_sha256 = self.task.sha256.clone();
        out.cached.follow_ups_sha256 = self.follow_ups_sha256();
        let mut listing: Vec<(String, String)> =
            vec![("cell.json".into(), run.cell_sha256.clone())];
        let mut samples: Vec<(read::Sample, cache::CachedSample)> = Vec::new();
        for name in &run.samples {
            let previous = samples.last().map(|(s, _)| s);
            let sample = match read::read_sample(self.runs_root, run, name, previous) {
                Ok(s) => s,
                Err(skipped) => {
                    out.skipped.push(skipped);
                    continue;
                }
            };
            listing.extend(sample.files.iter().cloned());
            let record = cache::CachedSample {
                transcript_sha256: crate::evidence::cache::transcript_sha256(&sample.files),
                bytes: sample.bytes,
                page_len: 0,
                damage: sample.damage.clone(),
                look: self.reuse.stamp.and_then(|st| sample.stats.look(st)),
                scored: None,
            };
            samples.push((sample, record));
        }
        let listing =
            crate::site::data::run_listing(listing.iter().map(|(f, h)| (f.as_str(), h.as_str())));
        out.listing_sha256 = crate::task::sha256_hex(listing.as_bytes());
        out.cached.listing_sha256 = out.listing_sha256.clone();
        samples
    }

    /// The samples read are the bytes the previous build scored, sample for sample.
    fn same_bytes(
        &self,
        p: &cache::CachedRun,
        samples: &[(read::Sample, cache::CachedSample)],
    ) -> bool {
        self.reusable(p)
            && p.samples.len() == samples.len()
            && samples.iter().all(|(s, r)| {
                p.samples
                    .get(&s.key.sample)
                    .is_some_and(|c| c.transcript_sha256 == r.transcript_sha256)
            })
    }

    /// The previous verdicts of samples read again unchanged; the pages stand.
    fn take_same_bytes(
        &self,
        mut p: cache::CachedRun,
        samples: Vec<(read::Sample, cache::CachedSample)>,
        mut out: RunOutcome,
    ) -> Result<RunOutcome> {
        out.cached.run_page = p.run_page;
        out.pages.0 += 1;
        out.pages.1 += p.run_page.unwrap_or(0);
        if self.reuse.changes {
            out.changes.seen = samples.len() as u64;
        }
        for (sample, mut record) in samples {
            let name = &sample.key.sample;
            let prior = p.samples.remove(name);
            let Some(scored) = prior
                .as_ref()
                .and_then(|c| c.scored.clone())
                .and_then(|s| (*s).into_scored(self.key(name)))
            else {
                bail!(
                    "the cache's record of {} cannot be read",
                    self.run.dir.display()
                );
            };
            record.page_len = prior.map(|c| c.page_len).unwrap_or(0);
            out.reused += 1;
            out.keep(scored, record);
        }
        if !self.reuse.record {
            out.cached.samples.clear();
        }
        Ok(out)
    }

    /// Scores every sample read, renders its section and page, then the run's page.
    fn score_all(
        &self,
        prior: Option<cache::CachedRun>,
        samples: Vec<(read::Sample, cache::CachedSample)>,
        mut out: RunOutcome,
    ) -> Result<RunOutcome> {
        // The run's request, from its first sample: each sample whose request is the same bytes
        // shows it by reference, once, at the end of the run's page.
        let reference = samples.first().map(|(s, _)| render::RunRequest {
            sample: s.key.sample.clone(),
            bytes: s.request_raw.clone(),
            value: s.transcript.request.clone(),
            streamed: s.transcript.streamed,
        });
        let mut page = RunPage {
            sections: String::new(),
            marks: Vec::with_capacity(samples.len()),
            shared_meta: crate::site::pages::run::shared_meta(
                samples.iter().map(|(s, _)| s.transcript.meta.as_ref()),
            ),
            shared_marks: crate::site::pages::run::shared_marks(
                samples.iter().map(|(s, _)| &s.transcript),
            ),
        };
        if let Some(p) = prior.as_ref().filter(|_| self.reuse.in_place) {
            out.stale = self.stale_pages(p, &samples);
        }
        // The previous build's outcome of each sample, to tell what changed.
        let before: BTreeMap<String, String> = prior
            .filter(|_| self.reuse.changes)
            .map(|p| {
                p.samples
                    .into_iter()
                    .filter_map(|(name, c)| Some((name, c.scored?.outcome)))
                    .collect()
            })
            .unwrap_or_default();
        for (sample, record) in samples {
            let old = before.get(&sample.key.sample).map(String::as_str);
            self.score_one(sample, record, old, reference.as_ref(), &mut page, &mut out)?;
        }
        if !page.marks.is_empty() {
            let (path, html) = render::run_page(
                self.task,
                self.run,
                &page.marks,
                &page.sections,
                reference.as_ref(),
                self.reuse.cells,
                self.reuse.site_url,
                &page.shared_meta,
                page.shared_marks.as_ref(),
            )?;
            out.cached.run_page = Some(html.len() as u64);
            out.pages.0 += 1;
            out.pages.1 += html.len() as u64;
            self.send((path, html.into_bytes()))?;
        }
        if !self.reuse.record {
            out.cached.samples.clear();
        }
        Ok(out)
    }

    /// In place, the previous build's pages of the run that this build does not write again.
    fn stale_pages(
        &self,
        p: &cache::CachedRun,
        samples: &[(read::Sample, cache::CachedSample)],
    ) -> Vec<String> {
        let path = self.run.rel();
        let now: BTreeSet<&str> = samples.iter().map(|(s, _)| s.key.sample.as_str()).collect();
        let mut stale: Vec<String> = p
            .samples
            .keys()
            .filter(|n| !now.contains(n.as_str()))
            .map(|n| format!("t/{path}/{n}.html"))
            .collect();
        if p.run_page.is_some() && samples.is_empty() {
            stale.push(format!("t/{path}/index.html"));
        }
        stale
    }

    /// Scores one sample, adds its section to the run's page and queues its own page.
    fn score_one(
        &self,
        sample: read::Sample,
        mut record: cache::CachedSample,
        old: Option<&str>,
        reference: Option<&render::RunRequest>,
        page: &mut RunPage,
        out: &mut RunOutcome,
    ) -> Result<()> {
        let (task, run, task_changed) = (self.task, self.run, self.input.task_changed);
        let (verdict, mut scored, parsed) = score::score_read(task, task_changed, &sample);
        scored.feedback = score::feedback_of(run, &sample);
        if self.reuse.changes {
            out.changes.sample(&scored, old);
        }
        let request_changes = reference.map_or(Vec::new(), |r| {
            crate::site::pages::run::request_changes(
                r.value.as_deref(),
                &r.bytes,
                sample.transcript.request.as_deref(),
                &sample.request_raw,
            )
        });
        let section = |left_off| {
            render::sample_section(
                task,
                &run.cell,
                task_changed,
                &sample,
                &request_changes,
                &verdict,
                parsed.as_ref().ok(),
                self.reuse.site_url,
                left_off,
                &page.shared_meta,
                page.shared_marks.as_ref(),
                self.follow_ups()
                    .and_then(|f| f.get(&sample.key.sample))
                    .map_or(&[][..], Vec::as_slice),
            )
        };
        let (mut html, (path, stub)) = section(None)?;
        // The run's page is bounded: a section that would take it past the bound shows only
        // the sample's verdict (sections come in sample order, so which ones is deterministic).
        if page.sections.len() + html.len() > render::SECTIONS_BUDGET {
            html = section(Some(render::left_off(&sample, html.len())))?.0;
        }
        page.sections.push_str(&html);
        page.marks.push(crate::site::pages::run::SampleMark {
            name: sample.key.sample.clone(),
            outcome: verdict.outcome,
        });
        record.page_len = stub.len() as u64;
        self.send((path, stub.into_bytes()))?;
        out.keep(scored, record);
        Ok(())
    }

    fn send(&self, page: Page) -> Result<()> {
        self.pages
            .send(page)
            .map_err(|_| anyhow::anyhow!("the page writer stopped"))
    }
}

/// A run's page as its samples are scored: their sections and marks, in sample order.
struct RunPage {
    sections: String,
    marks: Vec<crate::site::pages::run::SampleMark>,
    /// The response rows every sample shares, shown once above the sections.
    shared_meta: Vec<(String, String)>,
    /// The ‹ and › every stream of the run shares, said once above the sections.
    shared_marks: Option<(String, String)>,
}

impl RunOutcome {
    fn keep(&mut self, scored: Scored, record: cache::CachedSample) {
        self.count(&scored, &record);
        self.cached
            .samples
            .insert(scored.key.sample.clone(), record);
        self.scored.push(scored);
    }

    /// Adds a sample's damage, bytes and page to the run's.
    fn count(&mut self, scored: &Scored, record: &cache::CachedSample) {
        // A damaged sample is reported on every build, from the cache too, so an incremental
        // build says what a fresh one says.
        if !record.damage.is_empty() {
            let k = &scored.key;
            let path = format!("{}/{}/{}/samples/{}", k.model, k.task, k.run, k.sample);
            self.skipped
                .extend(record.damage.iter().map(|reason| SkippedInput {
                    path: path.clone(),
                    reason: reason.clone(),
                }));
        }
        self.bytes += record.bytes;
        self.pages.0 += 1;
        self.pages.1 += record.page_len;
    }
}
