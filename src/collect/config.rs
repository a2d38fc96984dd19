//! The models config (`callcheck.toml`, SPEC §5): which endpoints to ask, how, and how hard.
//!
//! A config is user input: every problem names the file, the model entry and the key.

use crate::request::Asking;
use crate::task::is_path_safe;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::path::{Path, PathBuf};

/// One `[[model]]` entry: one row of the matrix.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// The matrix row, used as a path segment under runs/ (`[A-Za-z0-9._-]+`).
    pub name: String,
    /// The endpoint, up to and including `/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Replicas serving the same model, used round-robin (instead of `base_url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_urls: Option<Vec<String>>,
    /// The served model id sent in the request's `model` field.
    pub model: String,
    /// The name of the environment variable holding the API key (never the key itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Ask for an SSE stream.
    #[serde(default)]
    pub stream: bool,
    /// Requests in flight at once for this row.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// Per request, from sending to the last byte.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// A system prompt put before the task's messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// A system prompt callcheck ships, by name (instead of `system`): `hitec-global`, the
    /// HiTEC paper's eight global checks ([`crate::hitec::GLOBAL_CHECKLIST`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Sampling parameters: temperature, top_p, max_tokens, seed…
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub params: Map<String, Value>,
    /// Extra request body fields.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
    /// The row this one is a variant of: the build compares the two (SPEC §9), this row as the
    /// change and the named one as its baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant_of: Option<String>,
    /// What the row's provider charges (`[model.price]`, SPEC §11): recorded in `cell.json`'s
    /// model entry, so the build can give a policy's cost per successful call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
}

/// A row's price per million tokens, in whatever currency the user keeps accounts in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million prompt tokens.
    pub input_per_mtok: f64,
    /// Per million completion tokens.
    pub output_per_mtok: f64,
}

fn default_concurrency() -> usize {
    8
}

fn default_timeout() -> u64 {
    120
}

/// Request body fields that collect owns: a model row may not set them through `params`/`extra`.
const RESERVED: [&str; 4] = ["model", "messages", "stream", "tools"];

impl ModelEntry {
    /// The endpoints, in round-robin order.
    pub fn urls(&self) -> Vec<String> {
        match (&self.base_url, &self.base_urls) {
            (Some(u), _) => vec![u.trim_end_matches('/').to_string()],
            (None, Some(us)) => us
                .iter()
                .map(|u| u.trim_end_matches('/').to_string())
                .collect(),
            (None, None) => Vec::new(),
        }
    }

    /// How this row asks, for `request::chat_request`.
    pub fn asking(&self) -> Asking {
        Asking {
            model: self.model.clone(),
            system: self.system.clone().or_else(|| {
                self.system_prompt
                    .as_deref()
                    .and_then(crate::hitec::system_prompt)
                    .map(str::to_string)
            }),
            stream: self.stream,
            params: self.params.clone(),
            extra: self.extra.clone(),
        }
    }

    /// The entry as recorded in `cell.json`: every field as configured, with any password in a
    /// URL replaced. The key's variable name is kept; its value is never part of the entry.
    pub fn redacted(&self) -> Value {
        let mut e = self.clone();
        e.base_url = e.base_url.map(|u| redact_url(&u));
        e.base_urls = e
            .base_urls
            .map(|us| us.iter().map(|u| redact_url(u)).collect());
        serde_json::to_value(&e).unwrap_or(Value::Null)
    }
}

/// A URL as it may be written down: userinfo and query values redacted
/// ([`crate::endpoint::redact_url`]).
pub use crate::endpoint::redact_url;

/// A problem with the models config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// `model[2] "qwen3-8b"`, or empty for the file as a whole.
    pub entry: String,
    /// The key at fault, when there is one.
    pub key: String,
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if !self.entry.is_empty() {
            write!(f, ": {}", self.entry)?;
        }
        if !self.key.is_empty() {
            write!(f, ": key `{}`", self.key)?;
        }
        write!(f, ": {}", self.problem)
    }
}

impl std::error::Error for ConfigError {}

/// The parsed config.
#[derive(Debug, Clone)]
pub struct Config {
    pub file: PathBuf,
    pub models: Vec<ModelEntry>,
}

/// Reads and checks a config file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let err = |problem: String| ConfigError {
        file: path.to_path_buf(),
        entry: String::new(),
        key: String::new(),
        problem,
    };
    // A config is a few KB: bounded, and a regular file only (SPEC §12).
    let text = crate::fsafe::read_bounded(path, 16 << 20)
        .and_then(|b| {
            String::from_utf8(b)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                err(
                    "no such file: write one (the README shows a vLLM example; examples/ holds \
                 a llama-server one) or pass --config FILE"
                        .into(),
                )
            } else {
                err(format!("cannot read: {e}"))
            }
        })?;
    parse(path, &text)
}

/// Parses and checks a config's text; `path` is used in messages only.
pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let file = path.to_path_buf();
    let entries = model_tables(text).map_err(|(key, problem)| ConfigError {
        file: file.clone(),
        entry: String::new(),
        key,
        problem,
    })?;
    let mut models: Vec<ModelEntry> = Vec::new();
    for (i, raw) in entries.into_iter().enumerate() {
        let name_hint = raw
            .get("name")
            .and_then(toml::Value::as_str)
            .map(|n| format!(" {n:?}"))
            .unwrap_or_default();
        let bad = |(key, problem): Problem| ConfigError {
            file: file.clone(),
            entry: format!("model[{i}]{name_hint}"),
            key,
            problem,
        };
        let m: ModelEntry = serde_path_to_error::deserialize(raw).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner().to_string();
            // serde names an unknown or missing field in its message; lift it into the key.
            let key = if key == "." || key.is_empty() {
                field_in(&inner).unwrap_or_default()
            } else {
                key
            };
            bad((key, inner.trim().to_string()))
        })?;
        check_entry(&m, &models).map_err(bad)?;
        models.push(m);
    }
    // `variant_of` names another row of this file, so a typo is caught before collecting.
    for (i, m) in models.iter().enumerate() {
        if let Some(v) = &m.variant_of
            && (v == &m.name || !models.iter().any(|o| &o.name == v))
        {
            return Err(ConfigError {
                file: file.clone(),
                entry: format!("model[{i}] {:?}", m.name),
                key: "variant_of".into(),
                problem: format!(
                    "{v:?} is not the name of another [[model]] entry of this file (it names the row this one is compared with)"
                ),
            });
        }
    }
    Ok(Config { file, models })
}

/// A problem found in a config: the key at fault (empty for none) and what is wrong with it.
type Problem = (String, String);

fn problem(key: &str, what: impl Into<String>) -> Problem {
    (key.to_string(), what.into())
}

/// The `[[model]]` tables of a config's text: valid TOML holding nothing else.
fn model_tables(text: &str) -> Result<Vec<toml::Value>, Problem> {
    let table: toml::Table =
        toml::from_str(text).map_err(|e| problem("", format!("not valid TOML: {e}")))?;
    for key in table.keys() {
        if key != "model" {
            return Err(problem(
                key,
                "unknown key (a config holds only [[model]] entries)",
            ));
        }
    }
    match table.get("model") {
        None => Err(problem("model", "no [[model]] entry")),
        Some(toml::Value::Array(a)) => Ok(a.clone()),
        Some(_) => Err(problem(
            "model",
            "must be an array of tables, written [[model]]",
        )),
    }
}

/// One model entry's rules, in the order its problems are reported; `earlier` are the entries
/// above it.
fn check_entry(m: &ModelEntry, earlier: &[ModelEntry]) -> Result<(), Problem> {
    if !is_path_safe(&m.name) || m.name.starts_with('.') {
        return Err(problem(
            "name",
            format!(
                "{:?} cannot be used: a name becomes a folder under runs/, so it must match [A-Za-z0-9._-]+ and not start with a dot",
                m.name
            ),
        ));
    }
    check_system_prompt(m)?;
    check_name_unique(m, earlier)?;
    check_endpoints(m)?;
    if m.model.is_empty() {
        return Err(problem("model", "is empty: give the served model id"));
    }
    if m.concurrency == 0 {
        return Err(problem("concurrency", "must be at least 1"));
    }
    if m.timeout_secs == 0 {
        return Err(problem("timeout_secs", "must be at least 1"));
    }
    if let Some(p) = &m.price {
        for (key, x) in [
            ("price.input_per_mtok", p.input_per_mtok),
            ("price.output_per_mtok", p.output_per_mtok),
        ] {
            if !x.is_finite() || x < 0.0 {
                return Err(problem(
                    key,
                    format!("{x} is not a price: give a number ≥ 0 per million tokens"),
                ));
            }
        }
    }
    if let Some(v) = &m.api_key_env
        && (v.is_empty() || v.contains('=') || v.contains('\0'))
    {
        return Err(problem(
            "api_key_env",
            format!("{v:?} is not an environment variable name"),
        ));
    }
    check_reserved(m)
}

/// `system_prompt` names a built-in prompt, and is not given beside `system`.
fn check_system_prompt(m: &ModelEntry) -> Result<(), Problem> {
    let Some(name) = &m.system_prompt else {
        return Ok(());
    };
    if m.system.is_some() {
        return Err(problem(
            "system_prompt",
            "set either `system` (your own text) or `system_prompt` (a built-in one), not both",
        ));
    }
    if crate::hitec::system_prompt(name).is_none() {
        return Err(problem(
            "system_prompt",
            format!(
                "{name:?} is not a built-in system prompt (there is {:?}: the HiTEC paper's eight global checks)",
                crate::hitec::GLOBAL_PROMPT_NAME
            ),
        ));
    }
    Ok(())
}

/// The row's name fits a path and is its own folder under runs/, even on a case-insensitive
/// file system.
fn check_name_unique(m: &ModelEntry, earlier: &[ModelEntry]) -> Result<(), Problem> {
    if let Some(why) = crate::names::too_long("row name", &m.name) {
        return Err(problem("name", format!("{:?}: {why}", m.name)));
    }
    if let Some(prev) = earlier.iter().position(|o| {
        o.name != m.name && crate::names::case_key(&o.name) == crate::names::case_key(&m.name)
    }) {
        return Err(problem(
            "name",
            format!(
                "{:?} differs only in case from model[{prev}] {:?}: on a case-insensitive file system (macOS, Windows) both would be one folder under runs/; rename one",
                m.name, earlier[prev].name
            ),
        ));
    }
    if let Some(prev) = earlier.iter().position(|o| o.name == m.name) {
        return Err(problem(
            "name",
            format!("{:?} is already the name of model[{prev}]", m.name),
        ));
    }
    Ok(())
}

/// Exactly one of `base_url` and `base_urls`, each URL http(s) with a host.
fn check_endpoints(m: &ModelEntry) -> Result<(), Problem> {
    match (&m.base_url, &m.base_urls) {
        (Some(_), Some(_)) => {
            return Err(problem(
                "base_urls",
                "give either base_url or base_urls, not both",
            ));
        }
        (None, None) => {
            return Err(problem(
                "base_url",
                "missing (give base_url, or base_urls for replicas)",
            ));
        }
        (None, Some(us)) if us.is_empty() => {
            return Err(problem("base_urls", "is empty"));
        }
        _ => {}
    }
    let key = if m.base_url.is_some() {
        "base_url"
    } else {
        "base_urls"
    };
    for u in m.urls() {
        match reqwest::Url::parse(&u) {
            Ok(p) if matches!(p.scheme(), "http" | "https") && p.host().is_some() => {}
            Ok(_) => {
                return Err(problem(
                    key,
                    format!("{:?} is not an http(s) URL", redact_url(&u)),
                ));
            }
            Err(e) => {
                return Err(problem(
                    key,
                    format!("{:?} is not a URL: {e}", redact_url(&u)),
                ));
            }
        }
    }
    Ok(())
}

/// `params` and `extra` leave the fields collect writes itself alone.
fn check_reserved(m: &ModelEntry) -> Result<(), Problem> {
    for (table, map) in [("params", &m.params), ("extra", &m.extra)] {
        for k in map.keys() {
            if RESERVED.contains(&k.as_str()) {
                return Err(problem(
                    &format!("{table}.{k}"),
                    format!(
                        "is set by callcheck itself ({}), not by a model entry",
                        match k.as_str() {
                            "model" => "use the entry's `model` key",
                            "stream" => "use the entry's `stream` key",
                            "messages" => "messages come from the task and `system`",
                            _ => "tools come from the task",
                        }
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Pulls the field name out of serde's "unknown field `x`" / "missing field `x`" messages.
fn field_in(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(message[start..start + len].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_of_names_another_row_and_is_kept_in_the_entry() {
        let base = "[[model]]\nname = \"a\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\n";
        let good = format!(
            "{base}[[model]]\nname = \"b\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\nvariant_of = \"a\"\n"
        );
        let c = parse(Path::new("c.toml"), &good).unwrap();
        assert_eq!(c.models[1].redacted()["variant_of"], "a");
        assert!(c.models[0].redacted().get("variant_of").is_none());
        let typo = good.replace("variant_of = \"a\"", "variant_of = \"z\"");
        let e = parse(Path::new("c.toml"), &typo).unwrap_err();
        assert_eq!(e.key, "variant_of");
        assert!(e.to_string().contains("\"z\""), "{e}");
    }

    #[test]
    fn a_price_is_kept_in_the_entry_and_a_negative_one_is_refused() {
        let base = "[[model]]\nname = \"a\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\n";
        let priced = format!("{base}[model.price]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n");
        let c = parse(Path::new("c.toml"), &priced).unwrap();
        assert_eq!(
            c.models[0].redacted()["price"],
            serde_json::json!({"input_per_mtok": 0.15, "output_per_mtok": 0.6})
        );
        assert!(
            parse(Path::new("c.toml"), base).unwrap().models[0]
                .redacted()
                .get("price")
                .is_none()
        );
        let e = parse(Path::new("c.toml"), &priced.replace("0.6", "-1")).unwrap_err();
        assert_eq!(e.key, "price.output_per_mtok");
        let e = parse(
            Path::new("c.toml"),
            &priced.replace("input_per_mtok", "input"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("input"), "{e}");
    }

    #[test]
    fn a_missing_config_says_how_to_get_one() {
        let e = load(Path::new("/nonexistent/callcheck.toml")).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("/nonexistent/callcheck.toml: no such file"),
            "{msg}"
        );
        assert!(msg.contains("--config FILE"), "{msg}");
    }

    fn parse_str(s: &str) -> Result<Config, ConfigError> {
        parse(Path::new("callcheck.toml"), s)
    }

    const GOOD: &str = r#"
[[model]]
name = "qwen3-8b"
base_url = "http://127.0.0.1:8000/v1"
model = "Qwen/Qwen3-8B"
api_key_env = "VLLM_API_KEY"
stream = false
concurrency = 8
timeout_secs = 120
system = "Check your calls."
[model.params]
temperature = 0.7
max_tokens = 1024
[model.extra]
chat_template_kwargs = { enable_thinking = false }

[[model]]
name = "qwen3-8b.stream"
base_urls = ["http://127.0.0.1:8000/v1/", "http://127.0.0.1:8001/v1"]
model = "Qwen/Qwen3-8B"
stream = true
"#;

    /// `system_prompt = "hitec-global"` puts the HiTEC paper's global checklist first; an
    /// unknown name, or both prompts at once, is an error naming the key.
    #[test]
    fn a_row_can_use_the_shipped_global_checklist() {
        let plain = GOOD.replace("system = \"Check your calls.\"\n", "");
        let global = plain.replacen(
            "stream = false\n",
            "stream = false\nsystem_prompt = \"hitec-global\"\n",
            1,
        );
        let c = parse_str(&global).unwrap();
        assert_eq!(
            c.models[0].asking().system.as_deref(),
            Some(crate::hitec::GLOBAL_CHECKLIST)
        );
        assert_eq!(c.models[1].asking().system, None);
        assert_eq!(c.models[0].redacted()["system_prompt"], "hitec-global");
        let e = parse_str(&global.replace("hitec-global", "hitec")).unwrap_err();
        assert_eq!(e.key, "system_prompt");
        assert!(
            e.problem
                .contains("\"hitec\" is not a built-in system prompt"),
            "{e}"
        );
        let both = GOOD.replacen(
            "stream = false\n",
            "stream = false\nsystem_prompt = \"hitec-global\"\n",
            1,
        );
        let e = parse_str(&both).unwrap_err();
        assert_eq!(e.key, "system_prompt");
    }

    #[test]
    fn the_documented_shape_parses() {
        let c = parse_str(GOOD).unwrap();
        assert_eq!(c.models.len(), 2);
        let a = &c.models[0];
        assert_eq!(a.params["max_tokens"], serde_json::json!(1024));
        assert_eq!(a.params["temperature"].to_string(), "0.7");
        assert_eq!(
            a.extra["chat_template_kwargs"],
            serde_json::json!({"enable_thinking": false})
        );
        let b = &c.models[1];
        assert_eq!(b.concurrency, 8);
        assert_eq!(b.timeout_secs, 120);
        assert_eq!(
            b.urls(),
            vec!["http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"]
        );
        let r = a.redacted();
        assert_eq!(r["api_key_env"], "VLLM_API_KEY");
    }

    #[test]
    fn an_unknown_key_is_named_with_its_entry() {
        let e = parse_str(&GOOD.replace("timeout_secs = 120", "timeout = 120")).unwrap_err();
        assert_eq!(e.key, "timeout");
        assert_eq!(e.entry, "model[0] \"qwen3-8b\"");
        let s = e.to_string();
        assert!(
            s.starts_with("callcheck.toml: model[0] \"qwen3-8b\": key `timeout`: unknown field"),
            "{s}"
        );
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            ("concurrency = 8", "concurrency = 0", "concurrency"),
            ("concurrency = 8", "concurrency = \"many\"", "concurrency"),
            ("name = \"qwen3-8b\"", "name = \"../x\"", "name"),
            ("name = \"qwen3-8b\"", "name = \"a/b\"", "name"),
            ("name = \"qwen3-8b\"", "name = \"\"", "name"),
            ("name = \"qwen3-8b\"", "name = \"qwen3-8b.stream\"", "name"),
            (
                "base_url = \"http://127.0.0.1:8000/v1\"",
                "base_url = \"ftp://x\"",
                "base_url",
            ),
            ("base_url = \"http://127.0.0.1:8000/v1\"", "", "base_url"),
            (
                "max_tokens = 1024",
                "max_tokens = 1024\nstream = true",
                "params.stream",
            ),
        ];
        for (from, to, key) in cases {
            let e = parse_str(&GOOD.replacen(from, to, 1)).unwrap_err();
            assert_eq!(e.key, key, "{from} -> {to}: {e}");
        }
        let e = parse_str("[[model]]\nname = \"a\"\nbase_url = \"http://h/v1\"\n").unwrap_err();
        assert_eq!(e.key, "model");
        let e = parse_str("models = 1").unwrap_err();
        assert_eq!(e.key, "models");
    }

    #[test]
    fn url_passwords_are_redacted() {
        assert_eq!(
            redact_url("http://bob:hunter2@127.0.0.1:8000/v1"),
            "http://REDACTED@127.0.0.1:8000/v1"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:8000/v1"),
            "http://127.0.0.1:8000/v1"
        );
    }
}
