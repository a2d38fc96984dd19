//! Which rows a comparison pairs (SPEC §9) and the settings in which they differ: rows
//! serving the same model id, a row and its `variant_of`, the `--compare A:B` pairs.

use anyhow::{Result, bail};
use serde::Serialize;
use std::collections::BTreeMap;

/// A setting in which A and B differ (what the comparison attributes the effect to).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettingDiff {
    pub setting: String,
    pub a: String,
    pub b: String,
}

/// What a row was collected with, from its runs' `cell.json`: the model entry (redacted by
/// collect) and what the server said about itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowSettings {
    pub entry: serde_json::Value,
    pub server: serde_json::Value,
}

impl RowSettings {
    /// The served model id.
    pub fn model_id(&self) -> Option<&str> {
        self.entry.get("model").and_then(serde_json::Value::as_str)
    }

    fn variant_of(&self) -> Option<&str> {
        self.entry
            .get("variant_of")
            .and_then(serde_json::Value::as_str)
    }

    /// The settings a comparison attributes an effect to, flattened to `name → value` (compact
    /// JSON). Scheduling (`concurrency`, `timeout_secs`) and bookkeeping (`name`, `variant_of`,
    /// the key's variable) change no request, so they are left out.
    fn flat(&self) -> BTreeMap<String, String> {
        use serde_json::Value;
        let mut out = BTreeMap::new();
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        if let Value::Object(e) = &self.entry {
            for (k, v) in e {
                match k.as_str() {
                    "name" | "variant_of" | "concurrency" | "timeout_secs" | "api_key_env" => {}
                    "base_url" | "base_urls" => {
                        let urls = match v {
                            Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(", "),
                            v => text(v),
                        };
                        out.insert("base URLs".to_string(), urls);
                    }
                    "params" | "extra" => {
                        if let Value::Object(m) = v {
                            for (pk, pv) in m {
                                out.insert(format!("{k}.{pk}"), text(pv));
                            }
                        }
                    }
                    _ => {
                        out.insert(k.clone(), text(v));
                    }
                }
            }
            out.entry("stream".into()).or_insert_with(|| "false".into());
        }
        let versions: Vec<String> = self
            .server
            .get("endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("version"))
            .map(|v| match v.get("version") {
                Some(inner) => text(inner),
                None => text(v),
            })
            .collect();
        if !versions.is_empty() {
            out.insert("server version".into(), versions.join(", "));
        }
        out
    }
}

/// The settings in which A and B differ, in name order; a setting one side lacks reads
/// `(not set)`. `None` when either side's settings are unknown (a baseline read from a
/// samples.csv records none).
pub fn settings_diff(a: Option<&RowSettings>, b: Option<&RowSettings>) -> Option<Vec<SettingDiff>> {
    let (Some(a), Some(b)) = (a, b) else {
        return None;
    };
    let (fa, fb) = (a.flat(), b.flat());
    let names: std::collections::BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    let unset = || "(not set)".to_string();
    Some(
        names
            .into_iter()
            .filter(|n| fa.get(*n) != fb.get(*n))
            .map(|n| SettingDiff {
                setting: n.clone(),
                a: fa.get(n).cloned().unwrap_or_else(unset),
                b: fb.get(n).cloned().unwrap_or_else(unset),
            })
            .collect(),
    )
}

/// Two rows of one collection to compare: A the baseline, B the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub a: String,
    pub b: String,
    /// `--compare`, `variant_of` or `same model id`.
    pub why: &'static str,
}

impl Pair {
    /// The comparison page, relative to the site root: `compare/<a>--<b>.html`, unless that
    /// could be read two ways (SPEC §6: rows `x--y`/`z` and `x`/`y--z` are two pages).
    /// Row names are `[A-Za-z0-9._-]+`; when A holds no `--` and does not end in `-`, and B holds
    /// no `--` and does not start with `-`, the first `--` of the name is the separator, so the
    /// plain form is unambiguous. Otherwise the page is `compare/~<a>~<b>.html`: `~` is in no
    /// row name, so it splits the two, and no plain-form name starts with it.
    pub fn page(&self) -> String {
        let plain = |name: &str| !name.contains("--");
        if plain(&self.a) && plain(&self.b) && !self.a.ends_with('-') && !self.b.starts_with('-') {
            format!("compare/{}--{}.html", self.a, self.b)
        } else {
            format!("compare/~{}~{}.html", self.a, self.b)
        }
    }
}

/// The pairs a build compares, in this order of precedence for a pair named twice: the
/// `--compare A:B` pairs as given, then each row with the row its `variant_of` names, then each
/// other row serving a model id with the first row (by name) serving it. Sorted by page; rows that have no
/// samples are left out.
pub fn pairs(rows: &BTreeMap<String, RowSettings>, explicit: &[(String, String)]) -> Vec<Pair> {
    let mut out: Vec<Pair> = Vec::new();
    let mut add = |a: &str, b: &str, why: &'static str| {
        if a == b || !rows.contains_key(a) || !rows.contains_key(b) {
            return;
        }
        if !out
            .iter()
            .any(|p| (p.a == a && p.b == b) || (p.a == b && p.b == a))
        {
            out.push(Pair {
                a: a.into(),
                b: b.into(),
                why,
            });
        }
    };
    for (a, b) in explicit {
        add(a, b, "--compare");
    }
    for (name, s) in rows {
        if let Some(base) = s.variant_of() {
            add(base, name, "variant_of");
        }
    }
    // A star, not a clique (SPEC §9): each other row serving a model id against the first row
    // (by name) serving it, so pages grow with the rows, not with their square.
    let mut first_by_id: BTreeMap<&str, &String> = BTreeMap::new();
    for (name, s) in rows {
        if let Some(id) = s.model_id() {
            first_by_id.entry(id).or_insert(name);
        }
    }
    for (name, s) in rows {
        if s.variant_of().is_some() {
            continue;
        }
        if let Some(first) = s.model_id().and_then(|id| first_by_id.get(id)) {
            add(first, name, "same model id");
        }
    }
    out.sort_by_key(Pair::page);
    out
}

/// What each row of a build was collected with: the first model entry and server its runs
/// recorded.
pub fn row_settings(
    info: &BTreeMap<String, crate::evidence::Provenance>,
) -> BTreeMap<String, RowSettings> {
    info.iter()
        .map(|(name, i)| {
            (
                name.clone(),
                RowSettings {
                    entry: i.entries.first().cloned().unwrap_or_default(),
                    server: i.servers.first().cloned().unwrap_or_default(),
                },
            )
        })
        .collect()
}

/// Parses `--compare A:B` values.
pub fn parse_pairs(values: &[String]) -> Result<Vec<(String, String)>> {
    values
        .iter()
        .map(|v| match v.split_once(':') {
            Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_string(), b.to_string())),
            _ => bail!("--compare {v:?}: expected two row names as A:B"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_names_are_injective() {
        let page = |a: &str, b: &str| {
            Pair {
                a: a.into(),
                b: b.into(),
                why: "--compare",
            }
            .page()
        };
        assert_eq!(page("q", "q-stream"), "compare/q--q-stream.html");
        assert_eq!(page("x--y", "z"), "compare/~x--y~z.html");
        assert_eq!(page("x", "y--z"), "compare/~x~y--z.html");
        assert_eq!(page("x-", "y"), "compare/~x-~y.html");
        assert_eq!(page("x", "-y"), "compare/~x~-y.html");
        // Every pair of names from a small alphabet that stresses `-`: no two pages alike.
        let names = [
            "a", "a-", "-a", "a--", "--a", "a-b", "a--b", "-", "--", "a---b",
        ];
        let mut seen = std::collections::BTreeMap::new();
        for a in names {
            for b in names {
                if let Some(other) = seen.insert(page(a, b), (a, b)) {
                    panic!("{a}/{b} and {}/{} share {}", other.0, other.1, page(a, b));
                }
            }
        }
    }

    fn row(entry: serde_json::Value) -> RowSettings {
        RowSettings {
            entry,
            server: serde_json::json!({"endpoints": [{"version": {"version": "0.11.0"}}]}),
        }
    }

    #[test]
    fn rows_pair_by_model_id_variant_of_and_flag_and_list_what_differs() {
        use serde_json::json;
        let mut rows = BTreeMap::new();
        rows.insert(
            "q".to_string(),
            row(json!({"name": "q", "model": "qwen", "base_url": "http://a/v1", "stream": false, "params": {"temperature": 0.7}, "concurrency": 8})),
        );
        rows.insert(
            "q-stream".to_string(),
            row(json!({"name": "q-stream", "model": "qwen", "base_url": "http://a/v1", "stream": true, "params": {"temperature": 0.7}, "concurrency": 2})),
        );
        rows.insert(
            "checklist".to_string(),
            row(json!({"name": "checklist", "model": "qwen", "base_url": "http://a/v1", "system": "Check: <b>", "variant_of": "q"})),
        );
        rows.insert(
            "other".to_string(),
            row(json!({"name": "other", "model": "llama"})),
        );
        let got = pairs(
            &rows,
            &[("other".into(), "q".into()), ("q".into(), "missing".into())],
        );
        let got: Vec<(&str, &str, &str)> = got
            .iter()
            .map(|p| (p.a.as_str(), p.b.as_str(), p.why))
            .collect();
        assert_eq!(
            got,
            [
                // q against checklist is already the variant_of pair.
                ("checklist", "q-stream", "same model id"),
                ("other", "q", "--compare"),
                ("q", "checklist", "variant_of"),
            ]
        );
        let d = settings_diff(Some(&rows["q"]), Some(&rows["q-stream"])).unwrap();
        assert_eq!(
            d,
            [SettingDiff {
                setting: "stream".into(),
                a: "false".into(),
                b: "true".into()
            }]
        );
        let d = settings_diff(Some(&rows["q"]), Some(&rows["checklist"])).unwrap();
        let names: Vec<&str> = d.iter().map(|s| s.setting.as_str()).collect();
        assert_eq!(names, ["params.temperature", "system"]);
        assert_eq!(d[1].a, "(not set)");
        let mut newer = rows["q"].clone();
        newer.server = json!({"endpoints": [{"version": {"version": "0.12.0"}}]});
        let d = settings_diff(Some(&rows["q"]), Some(&newer)).unwrap();
        assert_eq!(
            (d[0].setting.as_str(), d[0].b.as_str()),
            ("server version", "0.12.0")
        );
        assert_eq!(settings_diff(None, Some(&newer)), None);
    }
}
