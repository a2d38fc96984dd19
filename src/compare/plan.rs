//! `callcheck plan` (SPEC §9, "what the gate can and cannot see"): before anything is asked,
//! what the gate will be able to see for a config, its tasks and k — per pooled row the drop it
//! detects with 80 % power, for a single task the k from which a fall from all-pass to
//! all-fail is caught, and the k a named drop needs. The families are the ones `compare` and
//! the pages will decide in ([`super::pairs`], [`super::correct`]), computed from the same
//! counts with the same functions, so `plan` prints what `compare` prints after collecting
//! (when every sample gets an answer: transport errors add an `errors` row to a family).

use super::{Family, RowSettings, pairs};
use crate::report::TaskInfo;
use crate::stats::gate::{self, ALPHA};
use std::collections::BTreeMap;

/// One pooled row as planned.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRow {
    /// `overall` or a tag.
    pub scope: String,
    pub tasks: usize,
    /// Its first-step level in the family (0 when it cannot reach significance at its share).
    pub level: f64,
    /// The drop it detects with 80 % power at the planned k ([`gate::detectable_drop`]).
    pub detects: Option<f64>,
    /// With `--detect D`: the smallest k at which it detects D (`None` beyond [`K_MAX`]).
    pub k_for: Option<Option<u64>>,
}

/// One family as planned: its comparisons and what each of them (alike in a plan: every row
/// asks every task) can see.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFamily {
    /// The comparisons, as `B against A (why)`.
    pub comparisons: Vec<String>,
    /// What `compare` will say of the family ([`Family::describe`]).
    pub family: Family,
    /// The rows of each comparison.
    pub rows: Vec<PlannedRow>,
    /// The command whose gate decides this family.
    pub gate_command: String,
}

/// The largest k `--detect` looks at.
pub const K_MAX: u64 = 200;

/// The families a config forms: one per pair of rows (rows serving one model id, a row and
/// its `variant_of`), or with `baseline` one of every row against its same-named baseline
/// row. `entries` are the config's `[[model]]` entries (name → entry as JSON).
pub fn families(
    entries: &BTreeMap<String, serde_json::Value>,
    baseline: bool,
) -> Vec<(Vec<String>, String)> {
    if baseline {
        let rows: Vec<String> = entries
            .keys()
            .map(|r| format!("{r} against the baseline's {r}"))
            .collect();
        return vec![(rows, "callcheck compare --baseline PATH".to_string())];
    }
    let rows: BTreeMap<String, RowSettings> = entries
        .iter()
        .map(|(name, entry)| {
            (
                name.clone(),
                RowSettings {
                    entry: entry.clone(),
                    server: serde_json::Value::Null,
                },
            )
        })
        .collect();
    pairs(&rows, &[])
        .into_iter()
        .map(|p| {
            (
                vec![format!("{} against {} ({})", p.b, p.a, p.why)],
                format!("callcheck compare {} {}", p.a, p.b),
            )
        })
        .collect()
}

/// Plans one family of `comparisons` alike comparisons over `tasks` at `k`; with `detect`
/// (a drop as a proportion), also the k each row needs for it.
pub fn plan_family(
    comparisons: Vec<String>,
    gate_command: String,
    tasks: &[TaskInfo],
    k: u64,
    detect: Option<f64>,
) -> PlannedFamily {
    let mut scopes: Vec<(String, usize)> = vec![("overall".to_string(), tasks.len())];
    let mut by_tag: BTreeMap<&str, usize> = BTreeMap::new();
    for t in tasks {
        for tag in &t.tags {
            *by_tag.entry(tag.as_str()).or_default() += 1;
        }
    }
    scopes.extend(by_tag.into_iter().map(|(t, n)| (t.to_string(), n)));
    let n = comparisons.len();
    // Every comparison's rows, in the family's order.
    let sizes: Vec<usize> = (0..n).flat_map(|_| scopes.iter().map(|s| s.1)).collect();
    let family = planned_family(&sizes, tasks.len() * n, n, k);
    let (levels, _) = gate::levels_at(&sizes, tasks.len() * n, k);
    let rows = scopes
        .iter()
        .zip(&levels)
        .map(|((scope, c), &level)| PlannedRow {
            scope: scope.clone(),
            tasks: *c,
            level,
            detects: detects(*c, k, level),
            k_for: detect
                .map(|d| k_for(*c, &sizes, tasks.len() * n, d, scope_index(&scopes, scope))),
        })
        .collect();
    PlannedFamily {
        comparisons,
        family,
        rows,
        gate_command,
    }
}

fn scope_index(scopes: &[(String, usize)], scope: &str) -> usize {
    scopes.iter().position(|s| s.0 == scope).unwrap_or(0)
}

/// The drop a row of `c` tasks at `k` detects at `level` (none when it cannot be tested).
fn detects(c: usize, k: u64, level: f64) -> Option<f64> {
    (level > 0.0)
        .then(|| gate::detectable_drop(&vec![(k, k); c], level))
        .flatten()
}

/// The smallest k at which row `index` of the family (`c` tasks) detects `drop`. The
/// family's levels change with k (tasks join it once one of them can reach its share, tiny
/// rows once they can reach theirs), so the ks are split into runs of equal level; within a
/// run more samples detect less (up to the simulation's noise) and a bisection finds the
/// first k that does, runs taken in order.
fn k_for(c: usize, sizes: &[usize], tasks: usize, drop: f64, index: usize) -> Option<u64> {
    let level = |k: u64| gate::levels_at(sizes, tasks, k).0[index];
    let ok = |k: u64| detects(c, k, level(k)).is_some_and(|d| d <= drop + 1e-9);
    let mut start = 1u64;
    while start <= K_MAX {
        let here = level(start).to_bits();
        let mut end = start;
        while end < K_MAX && level(end + 1).to_bits() == here {
            end += 1;
        }
        if here != 0 && ok(end) {
            let (mut lo, mut hi) = (start - 1, end);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if ok(mid) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            return Some(hi);
        }
        start = end + 1;
    }
    None
}

/// A family's [`Family`] before collection: every task at `k` on both sides.
pub fn planned_family(sizes: &[usize], tasks: usize, comparisons: usize, k: u64) -> Family {
    let (levels, task_level) = gate::levels_at(sizes, tasks, k);
    Family {
        comparisons,
        rows: sizes.len(),
        tasks,
        rows_in: levels.iter().filter(|l| **l > 0.0).count(),
        tasks_in: if task_level > 0.0 { tasks } else { 0 },
        row_level: levels.iter().copied().fold(0.0, f64::max),
        task_level,
        single_task_k: gate::single_task_k_in(sizes, tasks, 1000),
    }
}

/// The plan as text.
pub fn render(
    families: &[PlannedFamily],
    config: &str,
    rows: usize,
    tasks: &[TaskInfo],
    k: u64,
    detect: Option<f64>,
) -> String {
    let tags: std::collections::BTreeSet<&str> = tasks
        .iter()
        .flat_map(|t| t.tags.iter().map(String::as_str))
        .collect();
    let mut out = format!(
        "plan for {config}: {rows} row{}, {} task{} ({} tag{}), k = {k}; nothing is sent. The gate (α = {:.0} %) decides each family below as `compare` will after collecting; detects: the smallest drop from {:.0} % on each task of a row caught with 80 % power (simulated for the gate's test at the row's level)\n",
        if rows == 1 { "" } else { "s" },
        tasks.len(),
        if tasks.len() == 1 { "" } else { "s" },
        tags.len(),
        if tags.len() == 1 { "" } else { "s" },
        100.0 * ALPHA,
        100.0 * gate::REFERENCE_RATE
    );
    for f in families {
        out.push_str(&format!(
            "\nfamily of {} (what `{}` decides):\n  {}\n",
            f.comparisons.join(", "),
            f.gate_command,
            f.family.describe()
        ));
        let width = f
            .rows
            .iter()
            .map(|r| r.scope.chars().count())
            .max()
            .unwrap_or(7)
            .max(7);
        let detect_head = detect.map(|d| format!("k for −{:.0} pts", d * 100.0));
        out.push_str(&format!(
            "  {:<width$}  {:>5}  {:>7}  {:>10}{}\n",
            "scope",
            "tasks",
            "level",
            format!("at k = {k}"),
            detect_head
                .as_ref()
                .map(|h| format!("  {h:>14}"))
                .unwrap_or_default()
        ));
        for r in &f.rows {
            out.push_str(&format!(
                "  {:<width$}  {:>5}  {:>7}  {:>10}{}\n",
                r.scope,
                r.tasks,
                if r.level > 0.0 {
                    super::p_text(r.level)
                } else {
                    "–".to_string()
                },
                super::drop_text(r.detects),
                match r.k_for {
                    Some(Some(n)) => format!("  {:>14}", format!("k = {n}")),
                    Some(None) => format!("  {:>14}", format!("above {K_MAX}")),
                    None => String::new(),
                }
            ));
        }
        out.push_str(&format!("  {}\n", f.family.single_task(k)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, tags: &[&str]) -> TaskInfo {
        TaskInfo {
            id: id.into(),
            title: id.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            bfcl_scored: false,
        }
    }

    #[test]
    fn a_config_plans_the_families_compare_will_decide_in() {
        let entry = |model: &str, variant_of: Option<&str>| {
            let mut e = serde_json::json!({"model": model});
            if let Some(v) = variant_of {
                e["variant_of"] = v.into();
            }
            e
        };
        let mut entries = BTreeMap::new();
        entries.insert("q".to_string(), entry("qwen", None));
        entries.insert("q-stream".to_string(), entry("qwen", None));
        entries.insert("q-check".to_string(), entry("qwen", Some("q")));
        entries.insert("other".to_string(), entry("llama", None));
        let f = families(&entries, false);
        let names: Vec<&str> = f.iter().map(|x| x.0[0].as_str()).collect();
        assert_eq!(
            names,
            [
                "q-check against q (variant_of)",
                "q-stream against q (same model id)"
            ]
        );
        assert_eq!(f[0].1, "callcheck compare q q-check");
        let b = families(&entries, true);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].0.len(), 4);

        let tasks: Vec<TaskInfo> = (0..6)
            .map(|i| task(&format!("t{i}"), if i < 2 { &["pair"] } else { &["rest"] }))
            .collect();
        let p = plan_family(vec!["x".into()], "c".into(), &tasks, 5, Some(0.5));
        let scopes: Vec<(&str, usize)> =
            p.rows.iter().map(|r| (r.scope.as_str(), r.tasks)).collect();
        assert_eq!(scopes, [("overall", 6), ("pair", 2), ("rest", 4)]);
        // Three rows and six tasks; at k = 5 one task's smallest p, 1/252, is under its share
        // 0.025/6: the tasks are in, and the rows share the other half.
        assert!((p.rows[0].level - ALPHA / 6.0).abs() < 1e-15);
        assert_eq!(p.family.tasks_in, 6);
        assert!((p.family.task_level - ALPHA / 12.0).abs() < 1e-15);
        assert_eq!(p.family.single_task_k, Some(5));
        assert!(p.family.single_task(5).contains("is detected at k = 5"));
        // At k = 3 (smallest p 0.05) no task can: the rows keep all of α, and the output says
        // which k would.
        let p3 = plan_family(vec!["x".into()], "c".into(), &tasks, 3, None);
        assert!((p3.rows[0].level - ALPHA / 3.0).abs() < 1e-15);
        assert_eq!(p3.family.tasks_in, 0);
        assert_eq!(
            p3.family.single_task(3),
            "a single task falling from all-pass to all-fail cannot be detected at k = 3 (its smallest p is 1/C(6, 3) = 0.0500, above any share of α a task can get here); it is detected from k = 5 in this family"
        );
        // More tasks detect smaller drops; the k for a 50-point drop is at most 5 where the
        // drop at 5 is at most 50 points.
        assert!(p.rows[0].detects < p.rows[2].detects && p.rows[2].detects < p.rows[1].detects);
        for r in &p.rows {
            if r.detects.is_some_and(|d| d <= 0.5) {
                assert!(r.k_for.flatten().is_some_and(|k| k <= 5), "{r:?}");
            } else {
                assert!(r.k_for.flatten().is_none_or(|k| k > 5), "{r:?}");
            }
        }
    }
}
