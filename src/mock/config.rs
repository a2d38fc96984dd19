//! The mock server's config (`mock.toml`): its scripted models, their failure rates and faults.
//! Built-in defaults give three models, so `callcheck mock` works bare.

use crate::mock::stream_bugs::StreamBug;
use crate::taxonomy::Label;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most bytes read of a mock config (a few KB in practice).
pub const MAX_CONFIG_FILE: u64 = 16 << 20;

/// The most bytes read of one replayed fixture: what collect keeps of one response.
pub const MAX_FIXTURE_FILE: u64 = crate::runs::MAX_SAMPLE_FILE;

/// The whole mock config.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MockConfig {
    /// Every random choice derives from this seed, the model, the task and the sample index.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// When set, requests must carry `Authorization: Bearer <api_key>` (401 otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    #[serde(rename = "model")]
    pub models: Vec<MockModel>,
}

fn default_seed() -> u64 {
    7
}

/// One scripted model, chosen by the request's `model` field.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct MockModel {
    /// The served model id.
    pub name: String,
    /// Serve fixture files from this folder (`<dir>/<task-id>/*.json|*.sse`, in name order,
    /// sample i gets file i mod n) instead of building replies from the task's gold reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<PathBuf>,
    /// Injector: the probability of each failure label (label name → probability; the rest
    /// of the time the gold reply is served). A label that cannot apply to a task gives gold.
    #[serde(default)]
    pub labels: BTreeMap<String, f64>,
    /// Transport faults.
    #[serde(default)]
    pub faults: Faults,
    /// Milliseconds between SSE events (0: as fast as the socket takes them).
    #[serde(default)]
    pub event_delay_ms: u64,
    /// Emulate a server whose chat template drops the tools (llama-server `--jinja` with a
    /// template that has no tools section): they never reach the "prompt", so `prompt_tokens`
    /// is the same with and without them, and the model answers every request in prose.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_tools: bool,
    /// `tool_choice` kinds answered with HTTP 400 as vLLM refuses `"auto"` when started without
    /// `--enable-auto-tool-choice`: any of `auto`, `required`, `none`, `named`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refuse_tool_choice: Vec<String>,
    /// Emulate a server whose streaming path loses parallel calls: a streamed reply carries only
    /// the first of its tool calls (the JSON path is unaffected). A real class of server bug,
    /// and what the demo's `mock-good-stream` row shows next to `mock-good`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream_drops_parallel: bool,
    /// Reported tool-parser bugs of real servers reproduced on the streaming path (the JSON
    /// path is unaffected): `drop_empty_arguments`, `drop_arguments_after_empty`,
    /// `one_delta_keeps_first`, `qwen_xml_in_content` (see `mock::stream_bugs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stream_bugs: Vec<StreamBug>,
    /// How the model answers a follow-up of the feedback round (`mock::feedback`); without
    /// it, a follow-up is answered like a first request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<super::feedback::FeedbackBehaviour>,
    /// How the model answers a review request of the review round (`mock::feedback`,
    /// HiTEC-ICL's second round); without it, a review is answered like a first request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<super::feedback::ReviewBehaviour>,
    /// Refuse a request whose history holds an assistant tool call with arguments that are not
    /// valid JSON, as vLLM does (its chat path runs `json.loads` on every such string): HTTP
    /// 400 with vLLM's error body. A follow-up sent `as-produced` after a broken call is
    /// refused; a `sanitised` one is answered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refuse_invalid_json_history: bool,
}

/// The `tool_choice` kinds `refuse_tool_choice` may name.
pub const TOOL_CHOICE_KINDS: [&str; 4] = ["auto", "required", "none", "named"];

/// Per-model fault probabilities. The status, drop, cut and garbage faults exclude one another
/// (their sum is at most 1); latency is drawn on its own.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// Probability of a delay before the response head.
    #[serde(default)]
    pub latency: f64,
    /// The delay's range in milliseconds, inclusive.
    #[serde(default = "default_latency_ms")]
    pub latency_ms: [u64; 2],
    /// HTTP 429 with an error body.
    #[serde(default)]
    pub http_429: f64,
    /// HTTP 500 with an error body.
    #[serde(default)]
    pub http_500: f64,
    /// HTTP 503 with an error body.
    #[serde(default)]
    pub http_503: f64,
    /// The connection is closed before any byte of the response.
    #[serde(default)]
    pub drop: f64,
    /// The body is cut mid-way: a stream closes after some events (no finish_reason, no
    /// `[DONE]`); a JSON body after some of its bytes.
    #[serde(default)]
    pub cut: f64,
    /// HTTP 200 with random bytes for a body.
    #[serde(default)]
    pub garbage: f64,
}

fn default_latency_ms() -> [u64; 2] {
    [20, 200]
}

/// A problem with a mock config.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct MockConfigError {
    pub file: String,
    pub problem: String,
}

impl MockConfig {
    /// Three models for the demo: near-perfect (whose streaming path drops every parallel call
    /// after the first and the `{}` of parameterless calls), sloppy across every label, and flaky on the wire (latency,
    /// 429/500/503, dropped connections, cut streams, garbage).
    pub fn builtin() -> MockConfig {
        MockConfig {
            seed: default_seed(),
            api_key: None,
            models: vec![demo_good(), demo_sloppy(), demo_flaky()],
        }
    }

    /// Reads a config file (at most [`MAX_CONFIG_FILE`] bytes); relative `replay` folders are
    /// taken from the file's folder.
    pub fn load(path: &Path) -> Result<MockConfig, MockConfigError> {
        let err = |problem: String| MockConfigError {
            file: path.display().to_string(),
            problem,
        };
        // Bounded, and a regular file only (SPEC §12): a mock config is a few KB.
        let text = crate::fsafe::read_bounded(path, MAX_CONFIG_FILE)
            .and_then(|b| {
                String::from_utf8(b)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            })
            .map_err(|e| err(format!("cannot read: {e}")))?;
        let de = toml::de::Deserializer::parse(&text).map_err(|e| err(e.to_string()))?;
        let mut c: MockConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            err(format!("key `{key}`: {}", e.into_inner().message().trim()))
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        for m in &mut c.models {
            if let Some(r) = &m.replay
                && r.is_relative()
            {
                m.replay = Some(base.join(r));
            }
        }
        c.check().map_err(err)?;
        Ok(c)
    }

    /// Checks names, labels and probabilities.
    pub fn check(&self) -> Result<(), String> {
        if self.models.is_empty() {
            return Err("no [[model]] entry".into());
        }
        for (i, m) in self.models.iter().enumerate() {
            let at = format!("model[{i}] {:?}", m.name);
            if m.name.is_empty() {
                return Err(format!("{at}: key `name` is empty"));
            }
            if self.models[..i].iter().any(|o| o.name == m.name) {
                return Err(format!("{at}: key `name`: used twice"));
            }
            let mut sum = 0.0;
            for (l, p) in &m.labels {
                if Label::parse(l).is_none() {
                    return Err(format!("{at}: key `labels.{l}`: not a label"));
                }
                if !(0.0..=1.0).contains(p) {
                    return Err(format!("{at}: key `labels.{l}`: {p} is not a probability"));
                }
                sum += p;
            }
            if sum > 1.0 + 1e-9 {
                return Err(format!(
                    "{at}: key `labels`: probabilities add up to {sum} > 1"
                ));
            }
            for k in &m.refuse_tool_choice {
                if !TOOL_CHOICE_KINDS.contains(&k.as_str()) {
                    return Err(format!(
                        "{at}: key `refuse_tool_choice`: {k:?} is not one of {}",
                        TOOL_CHOICE_KINDS.join(", ")
                    ));
                }
            }
            let f = &m.faults;
            let mut sum = 0.0;
            for (k, p) in [
                ("latency", f.latency),
                ("http_429", f.http_429),
                ("http_500", f.http_500),
                ("http_503", f.http_503),
                ("drop", f.drop),
                ("cut", f.cut),
                ("garbage", f.garbage),
            ] {
                if !(0.0..=1.0).contains(&p) {
                    return Err(format!("{at}: key `faults.{k}`: {p} is not a probability"));
                }
                if k != "latency" {
                    sum += p;
                }
            }
            if sum > 1.0 + 1e-9 {
                return Err(format!(
                    "{at}: key `faults`: status, drop, cut and garbage add up to {sum} > 1"
                ));
            }
            if let Some(b) = &m.review {
                b.check().map_err(|e| format!("{at}: {e}"))?;
            }
            if let Some(b) = &m.feedback {
                b.check().map_err(|e| format!("{at}: {e}"))?;
            }
            if f.latency_ms[0] > f.latency_ms[1] {
                return Err(format!(
                    "{at}: key `faults.latency_ms`: [min, max] with min > max"
                ));
            }
        }
        Ok(())
    }

    /// The config as TOML (for `callcheck mock --print-config`).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }
}

/// Per-label probabilities keyed as a config file writes them.
fn label_rates(pairs: &[(Label, f64)]) -> BTreeMap<String, f64> {
    pairs
        .iter()
        .map(|(l, p)| (l.as_str().to_string(), *p))
        .collect::<BTreeMap<_, _>>()
}

/// A style's name, its own `fix`, and its per-label probabilities.
type StyleSetting<'a> = (&'a str, Option<f64>, &'a [(Label, f64)]);

/// A demo model's answers to the feedback round: its `fix`, per-label rates, and per style.
fn feedback_rates(
    fix: f64,
    by_label: &[(Label, f64)],
    styles: &[StyleSetting],
) -> super::feedback::FeedbackBehaviour {
    super::feedback::FeedbackBehaviour {
        fix,
        labels: label_rates(by_label),
        styles: styles
            .iter()
            .map(|(s, fix, l)| {
                (
                    s.to_string(),
                    super::feedback::StyleBehaviour {
                        fix: *fix,
                        labels: label_rates(l),
                    },
                )
            })
            .collect(),
    }
}

/// The demo's near-perfect model, `mock-good`.
fn demo_good() -> MockModel {
    MockModel {
        name: "mock-good".into(),
        labels: label_rates(&[(Label::TypeCoercion, 0.02), (Label::NoCall, 0.01)]),
        stream_drops_parallel: true,
        // vLLM hermes' empty-arguments bug (#28806): the streamed row's
        // parameterless calls arrive without their {}, which its verdicts name.
        stream_bugs: vec![StreamBug::DropEmptyArguments],
        // Fixes almost every error it is told about, most after a checklist (not
        // a wrong tool: the checklist does not say which tool the user meant),
        // fewer after a bare "try again". Its streaming path's lost parallel
        // calls are the server's: no feedback fixes them.
        feedback: Some(feedback_rates(
            0.9,
            &[],
            &[
                ("checklist", Some(0.8), &[(Label::WrongTool, 0.2)]),
                ("retry", Some(0.55), &[]),
            ],
        )),
        // Under review it keeps its correct calls (almost always) and fixes most
        // of its rare failures.
        review: Some(super::feedback::ReviewBehaviour {
            keep: 0.98,
            fix: 0.8,
            labels: BTreeMap::new(),
        }),
        ..MockModel::default()
    }
}

/// The demo's `mock-sloppy`: wrong across every label, `parallel_collapse` most of all.
fn demo_sloppy() -> MockModel {
    MockModel {
        name: "mock-sloppy".into(),
        labels: label_rates(&[
            (Label::NoCall, 0.06),
            (Label::WrongTool, 0.04),
            (Label::MalformedJson, 0.05),
            (Label::SchemaViolation, 0.04),
            (Label::HallucinatedParam, 0.05),
            (Label::MissingRequired, 0.04),
            (Label::TypeCoercion, 0.06),
            (Label::EscapingError, 0.04),
            (Label::Truncation, 0.04),
            // Only the parallel tasks can collapse, and this model collapses most
            // of them (the others fail with another label), as a server whose
            // parser drops parallel calls does: its `parallel` shape is `broken`
            // in a k=5 demo, beside shapes that are merely uncertain.
            (Label::ParallelCollapse, 0.55),
            (Label::SpuriousCall, 0.03),
        ]),
        // Often repeats its mistakes; a checklist helps it on arguments (types,
        // required and undeclared ones) and not on choosing the tool.
        feedback: Some(feedback_rates(
            0.4,
            &[(Label::WrongTool, 0.15), (Label::ParallelCollapse, 0.25)],
            &[
                (
                    "checklist",
                    Some(0.2),
                    &[
                        (Label::TypeCoercion, 0.7),
                        (Label::MissingRequired, 0.65),
                        (Label::HallucinatedParam, 0.7),
                        (Label::SchemaViolation, 0.55),
                        (Label::WrongTool, 0.05),
                    ],
                ),
                ("retry", Some(0.15), &[]),
            ],
        )),
        // Under review it fixes some argument errors and talks itself out of a
        // correct call now and then: the method's risk, measured.
        review: Some(super::feedback::ReviewBehaviour {
            keep: 0.85,
            fix: 0.3,
            labels: label_rates(&[
                (Label::TypeCoercion, 0.6),
                (Label::MissingRequired, 0.55),
                (Label::HallucinatedParam, 0.6),
                (Label::SchemaViolation, 0.5),
            ]),
        }),
        // Served as vLLM serves it: a history with arguments that are not JSON is
        // refused, so its as-produced follow-ups after broken calls are refused.
        refuse_invalid_json_history: true,
        ..MockModel::default()
    }
}

/// The demo's `mock-flaky`: a few output errors, and flaky on the wire (latency, error
/// statuses, dropped connections, cut streams, garbage).
fn demo_flaky() -> MockModel {
    MockModel {
        name: "mock-flaky".into(),
        labels: label_rates(&[
            (Label::Truncation, 0.06),
            (Label::MalformedJson, 0.03),
            (Label::EscapingError, 0.03),
            (Label::NoCall, 0.03),
        ]),
        faults: Faults {
            latency: 0.1,
            latency_ms: [20, 200],
            http_429: 0.03,
            http_500: 0.02,
            http_503: 0.03,
            drop: 0.04,
            cut: 0.05,
            garbage: 0.02,
        },
        event_delay_ms: 0,
        feedback: Some(feedback_rates(0.75, &[], &[("retry", Some(0.5), &[])])),
        ..MockModel::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_is_valid_and_round_trips() {
        let c = MockConfig::builtin();
        c.check().unwrap();
        let back: MockConfig = toml::from_str(&c.to_toml()).unwrap();
        assert_eq!(back, c);
        // The sloppy model covers every label.
        assert_eq!(c.models[1].labels.len(), Label::ALL.len());
    }

    #[test]
    fn bad_configs_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("mock.toml");
        for (text, needle) in [
            ("[[model]]\nname = \"a\"\nlabelz = {}\n", "labelz"),
            (
                "[[model]]\nname = \"a\"\n[model.labels]\nnope = 0.1\n",
                "labels.nope",
            ),
            (
                "[[model]]\nname = \"a\"\n[model.faults]\ndrop = 1.5\n",
                "faults.drop",
            ),
            (
                "[[model]]\nname = \"a\"\nrefuse_tool_choice = [\"sometimes\"]\n",
                "refuse_tool_choice",
            ),
        ] {
            std::fs::write(&p, text).unwrap();
            let e = MockConfig::load(&p).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }
}
