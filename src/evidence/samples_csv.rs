//! A built site's `data/samples.csv` (whole, or split by model) read back: each sample's
//! outcome as that build scored it, for a baseline (`compare`, `build --baseline`), and the
//! previous build's outcomes for the changes page. `site::data` writes the file; the paths and
//! the bounds on reading it live here, beside the readers.

use crate::report::{SampleKey, Scored};
use crate::taxonomy::{Label, Outcome};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::Path;

/// The export's path when written whole, and its folder when split by model.
pub(crate) const SAMPLES_CSV: &str = "data/samples.csv";
pub(crate) const SAMPLES_DIR: &str = "data/samples";

/// The samples.csv files of a published site in `site`: the whole one, or the per-model ones
/// (sorted); empty when it has neither.
pub(crate) fn site_samples_csvs(site: &std::path::Path) -> Vec<std::path::PathBuf> {
    let whole = site.join(SAMPLES_CSV);
    if whole.is_file() {
        return vec![whole];
    }
    let mut parts: Vec<std::path::PathBuf> = std::fs::read_dir(site.join(SAMPLES_DIR))
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "csv") && p.is_file())
                .collect()
        })
        .unwrap_or_default();
    parts.sort();
    parts
}

/// The longest line read from a baseline samples.csv. Its lines carry a sample's key, outcome,
/// label and a detail callcheck shortens; 1 MiB is thousands of times a real one.
pub const MAX_CSV_LINE: usize = 1 << 20;

/// The most read from one baseline samples.csv (a site splits its export by model well before).
const MAX_CSV_BYTES: u64 = 4 << 30;

/// One samples.csv file's first-round rows, as bare samples (outcome only): what a baseline
/// read from a published site holds.
pub fn read_scored(path: &Path) -> Result<Vec<Scored>> {
    // Readers open regular files only and say what they found (SPEC §12).
    if let Some(what) = crate::fsafe::not_file_or_folder(path) {
        bail!(
            "{} {what}, not a samples.csv file (pass a callcheck site's data/samples.csv, the site folder, or a runs/ folder)",
            path.display()
        );
    }
    let file = crate::fsafe::open_regular(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    // Streamed, with a bound on the whole file and on each line (SPEC §12): a samples.csv line
    // is a few hundred bytes, so one past MAX_CSV_LINE is not a samples.csv, and reading it
    // whole would hold it in memory.
    let bounded = crate::fsafe::LineBound::new(
        std::io::Read::take(file, MAX_CSV_BYTES),
        MAX_CSV_LINE,
        "a samples.csv",
    );
    let mut r = csv::ReaderBuilder::new().from_reader(std::io::BufReader::new(bounded));
    let headers = r
        .headers()
        .with_context(|| format!("{}: not a CSV file", path.display()))?
        .clone();
    let col = |name: &str| {
        headers.iter().position(|h| h == name).with_context(|| {
            format!(
                "{}: no {name:?} column: pass a callcheck site's data/samples.csv, the site folder, or a runs/ folder",
                path.display()
            )
        })
    };
    let (cm, ct, cr, cs, co, cl) = (
        col("model")?,
        col("task")?,
        col("run")?,
        col("sample")?,
        col("outcome")?,
        col("label")?,
    );
    // A published site's feedback samples (SPEC §11; `round` 1) are in no rate; a samples.csv
    // of an earlier callcheck has no `round` column and only first-round samples.
    let round = headers.iter().position(|h| h == "round");
    let mut samples = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let rec = rec.with_context(|| format!("{}: row {}", path.display(), i + 2))?;
        let get = |c: usize| rec.get(c).unwrap_or("").to_string();
        if round.is_some_and(|c| !matches!(rec.get(c), None | Some("" | "0"))) {
            continue;
        }
        let outcome = match get(co).as_str() {
            "pass" => Outcome::Pass,
            "error" => Outcome::Error,
            "fail" => match Label::parse(&get(cl)) {
                Some(l) => Outcome::Fail(l),
                None => bail!(
                    "{}: row {}: {:?} is not a label",
                    path.display(),
                    i + 2,
                    get(cl)
                ),
            },
            other => bail!(
                "{}: row {}: outcome {other:?} is not pass, fail or error",
                path.display(),
                i + 2
            ),
        };
        // samples.csv does not carry the answer, so no two baseline answers are compared.
        let key = SampleKey {
            model: get(cm),
            task: get(ct),
            run: get(cr),
            sample: get(cs),
        };
        samples.push(Scored::bare(key, outcome));
    }
    Ok(samples)
}

/// One row of a previous build's `samples.csv`: the permalink and what the sample was then
/// (`pass`, `error` or the label).
pub(crate) fn read_previous(csv: impl std::io::Read) -> Result<BTreeMap<String, String>, String> {
    // Flexible: a row only needs the columns read here (a previous build may have fewer).
    let mut r = csv::ReaderBuilder::new().flexible(true).from_reader(csv);
    let headers = r.headers().map_err(|e| e.to_string())?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("no {name:?} column"))
    };
    let (p, o, l) = (col("permalink")?, col("outcome")?, col("label")?);
    let mut out = BTreeMap::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| e.to_string())?;
        let get = |i: usize| rec.get(i).unwrap_or("").to_string();
        let outcome = get(o);
        let name = if outcome == "fail" { get(l) } else { outcome };
        out.insert(get(p), name);
    }
    Ok(out)
}
