//! The decision procedure of SPEC §2.1: a pure function from a task and one transcript to a
//! [`Verdict`] — pass, error, or exactly one of the eleven labels, with the stage that decided
//! it and a detail a person can act on.
//!
//! Stages run in strict order and the first that cannot be passed decides. Within a stage each
//! rule is tried against every call before the next rule, so the outcome never depends on the
//! order in which the calls were emitted.

pub mod extract;
pub mod mend;
pub mod repair;
pub mod schema;
pub mod value;
pub mod wire;

use crate::json::{clip, preview, values_equal};
use crate::task::{Expect, Order, Schema, Task};
use crate::taxonomy::{Label, Outcome, Stage};
use crate::transcript::Transcript;
use extract::{Broken, Source, TextCall};
use repair::find_repair;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use wire::{Completion, WireArgs};

/// One call as the scorer saw it.
#[derive(Debug, Clone, Serialize)]
pub struct Call {
    /// Position in emission order, from 0.
    pub index: usize,
    /// Where it was found: `tool_calls`, or a text form left in content.
    pub source: Source,
    pub name: Option<String>,
    /// The arguments as received: the string, or the JSON value a server sent instead.
    pub arguments_raw: Option<String>,
    /// The arguments, parsed, when they parse to an object.
    pub arguments: Option<Value>,
    /// The expected call (index into `expect.calls`) this call was matched to.
    pub matched: Option<usize>,
}

/// The verdict on one sample.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub outcome: Outcome,
    /// The stage that decided a failure or an error; `None` for a pass.
    pub stage: Option<Stage>,
    /// What went wrong and where, for people. Free text: never aggregated.
    pub detail: String,
    pub calls: Vec<Call>,
    /// The parsed structured output, for structured-output tasks.
    pub output: Option<Value>,
    pub finish_reason: Option<String>,
    /// The output was cut by the token budget.
    pub cut: bool,
    /// Observations that decide nothing (protocol deviations, extra prose).
    pub notes: Vec<String>,
    /// The failing call (index into `calls`) and the JSON Pointer inside its arguments (or the
    /// structured output) where the failure is: the transcript page's `#fail` anchor.
    pub fail_call: Option<usize>,
    pub fail_path: Option<String>,
    /// The JSON Schema keyword behind a schema-stage failure (`type`, `enum`…).
    pub schema_keyword: Option<String>,
    /// The failing value was empty (`""`, `[]`, `{}`).
    pub empty_value: bool,
    /// The message carried prose beside its calls (HiTEC's "redundant information").
    pub extra_prose: bool,
    /// On a pass: whether every argument equals the gold call's exactly (value accuracy,
    /// reported beside conformance and never folded into a label).
    pub value_match: Option<bool>,
}

impl Verdict {
    /// A verdict with no calls and no details beyond its outcome, stage and one-line detail.
    pub(crate) fn new(outcome: Outcome, stage: Option<Stage>, detail: String) -> Verdict {
        Verdict {
            outcome,
            stage,
            detail,
            calls: Vec::new(),
            output: None,
            finish_reason: None,
            cut: false,
            notes: Vec::new(),
            fail_call: None,
            fail_path: None,
            schema_keyword: None,
            empty_value: false,
            extra_prose: false,
            value_match: None,
        }
    }

    pub fn label(&self) -> Option<Label> {
        self.outcome.label()
    }

    /// The JSON printed by `callcheck check`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "outcome": self.outcome.kind(),
            "label": self.outcome.label(),
            "stage": self.stage,
            "detail": self.detail,
            "calls": self.calls,
            "output": self.output,
            "finish_reason": self.finish_reason,
            "cut": self.cut,
            "notes": self.notes,
            "fail": self.fail_path.as_ref().map(|p| serde_json::json!({"call": self.fail_call, "path": p})),
            "value_match": self.value_match,
        })
    }
}

/// What the request offered, as sent (falling back to the task when the request is unknown).
struct Offered {
    tools: Vec<(String, Arc<Schema>)>,
    structured_schema: Option<Arc<Schema>>,
    notes: Vec<String>,
}

impl Offered {
    fn schema(&self, name: &str) -> Option<&Arc<Schema>> {
        self.tools.iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }
    fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|(n, _)| n.as_str()).collect()
    }
}

fn offered(task: &Task, request: Option<&Value>) -> Offered {
    let mut notes = Vec::new();
    let mut tools = Vec::new();
    match request {
        // Without the request, the task's tools are what was offered.
        None => {
            tools = task
                .tools
                .iter()
                .map(|t| (t.name.clone(), t.schema.clone()))
                .collect()
        }
        // A request that sent no tools offered none.
        Some(r) => {
            for t in r
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let Some(name) = t.pointer("/function/name").and_then(Value::as_str) else {
                    continue;
                };
                let params = t
                    .pointer("/function/parameters")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
                // The common case: the tools sent are the task's; reuse its compiled schema.
                let schema = match task.tool(name) {
                    Some(tt) if tt.schema.raw == params => tt.schema.clone(),
                    fallback => match Schema::compile(&params) {
                        Ok(s) => Arc::new(s),
                        Err(e) => match fallback {
                            Some(tt) => {
                                notes.push(format!("the schema sent for {name} does not compile ({e}); the task's is used"));
                                tt.schema.clone()
                            }
                            None => continue,
                        },
                    },
                };
                tools.push((name.to_string(), schema));
            }
        }
    }
    let task_schema = match &task.expect {
        Expect::StructuredOutput { schema, .. } => schema.clone(),
        _ => None,
    };
    let sent_schema = request.and_then(|r| {
        r.get("response_format")
            .and_then(crate::task::response_format_schema)
            .or_else(|| r.pointer("/structured_outputs/json"))
            .or_else(|| r.get("guided_json"))
    });
    let structured_schema = match (sent_schema, &task_schema) {
        (Some(s), Some(ts)) if ts.raw == *s => Some(ts.clone()),
        (Some(s), _) => match Schema::compile(s) {
            Ok(c) => Some(Arc::new(c)),
            Err(e) => {
                notes.push(format!(
                    "the response_format schema sent does not compile ({e}); the task's is used"
                ));
                task_schema
            }
        },
        (None, _) if request.is_some() => None,
        (None, ts) => ts.clone(),
    };
    Offered {
        tools,
        structured_schema,
        notes,
    }
}

/// Scores one transcript against its task.
pub fn score(task: &Task, t: &Transcript) -> Verdict {
    score_parsed(task, t, &parse(t))
}

/// The response of `t` read as a completion (JSON body or SSE stream), or why it cannot be.
pub fn parse(t: &Transcript) -> Result<wire::Completion, wire::TransportFailure> {
    if t.streamed {
        wire::parse_stream(&t.body)
    } else {
        wire::parse_body(&t.body)
    }
}

/// [`score`], with the response already read by [`parse`] (the build reads it once for the
/// verdict, the page and the reports).
pub fn score_parsed(
    task: &Task,
    t: &Transcript,
    parsed: &Result<wire::Completion, wire::TransportFailure>,
) -> Verdict {
    // Stage 0: transport.
    if let Some(meta) = &t.meta {
        match meta.status {
            Some(s) if !(200..300).contains(&s) => {
                let body = String::from_utf8_lossy(&t.body);
                let body = body.trim();
                let tail = if body.is_empty() {
                    String::new()
                } else {
                    format!(": {}", clip(body, 200))
                };
                return Verdict::new(
                    Outcome::Error,
                    Some(Stage::Transport),
                    format!("HTTP {s}{tail}"),
                );
            }
            // No status and a recorded failure: no response head ever arrived.
            None => {
                let why = meta
                    .error
                    .clone()
                    .or_else(|| meta.attempts.last().and_then(|a| a.error.clone()));
                if let Some(why) = why {
                    return Verdict::new(
                        Outcome::Error,
                        Some(Stage::Transport),
                        format!("no HTTP response: {why}"),
                    );
                }
                // A meta.json that simply does not record the status (hand-made, or older)
                // says nothing against the body: the body decides.
            }
            Some(_) => {}
        }
    }
    let completion = match parsed {
        Ok(c) => c,
        Err(f) => {
            let mut v = Verdict::new(Outcome::Error, Some(Stage::Transport), f.0.clone());
            if let Some(e) = t.meta.as_ref().and_then(|m| m.error.as_ref()) {
                v.notes.push(format!("collect recorded: {e}"));
            }
            return v;
        }
    };
    // vLLM ends a request it aborted (client gone, engine error, preemption) with
    // finish_reason "abort": whatever precedes it is not a complete model response.
    if completion.finish_reason.as_deref() == Some("abort") {
        return Verdict::new(
            Outcome::Error,
            Some(Stage::Transport),
            "the server aborted the generation (finish_reason \"abort\"): no complete model response".into(),
        );
    }

    let offered = offered(task, t.request.as_ref());
    let max_tokens = t.max_tokens();
    let cut_reason = if completion.finish_reason.as_deref() == Some("length") {
        Some("finish_reason is \"length\"".to_string())
    } else {
        match (completion.completion_tokens, max_tokens) {
            (Some(used), Some(max)) if used >= max => Some(format!(
                "usage.completion_tokens {used} reached max_tokens {max} (finish_reason {})",
                completion
                    .finish_reason
                    .as_deref()
                    .map(|f| format!("{f:?}"))
                    .unwrap_or_else(|| "absent".into())
            )),
            _ => None,
        }
    };

    let mut s = Scoring {
        task,
        offered: &offered,
        completion,
        cut_reason: cut_reason.clone(),
        calls: Vec::new(),
    };
    let mut v = match &task.expect {
        Expect::StructuredOutput { gold, where_, .. } => s.structured_output(gold, where_),
        _ => s.calls(),
    };
    v.calls = s.calls;
    v.finish_reason = completion.finish_reason.clone();
    v.cut = cut_reason.is_some();
    let mut notes = offered.notes.clone();
    notes.extend(completion.notes.iter().cloned());
    notes.append(&mut v.notes);
    v.notes = notes;
    v
}

/// A call candidate before parsing: structured or found in text.
struct Candidate {
    source: Source,
    name: Option<String>,
    args: WireArgs,
    broken: Option<Broken>,
}

enum ArgsState {
    Ok(Value),
    Escaping(String),
    DoubleEncoded,
    Malformed(String),
}

struct Scoring<'a> {
    task: &'a Task,
    offered: &'a Offered,
    completion: &'a Completion,
    cut_reason: Option<String>,
    calls: Vec<Call>,
}

fn fail(label: Label, stage: Stage, detail: String) -> Verdict {
    Verdict::new(Outcome::Fail(label), Some(stage), detail)
}

fn call_name(c: &Call) -> String {
    match &c.name {
        Some(n) => format!("call {} ({})", c.index + 1, n),
        None => format!("call {}", c.index + 1),
    }
}

fn parse_args(args: &WireArgs) -> ArgsState {
    let text = match args {
        WireArgs::Absent => return ArgsState::Ok(Value::Object(Default::default())),
        WireArgs::Json(Value::Object(o)) => return ArgsState::Ok(Value::Object(o.clone())),
        WireArgs::Json(Value::String(s)) => s.as_str(),
        WireArgs::Json(other) => {
            return ArgsState::Malformed(format!(
                "the arguments are a JSON {}, not an object",
                crate::json::type_name(other)
            ));
        }
        WireArgs::Text(s) => s.as_str(),
    };
    if text.trim().is_empty() {
        return ArgsState::Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => ArgsState::Ok(Value::Object(o)),
        Ok(Value::String(inner)) => match serde_json::from_str::<Value>(&inner) {
            Ok(Value::Object(_)) => ArgsState::DoubleEncoded,
            _ => ArgsState::Malformed("the arguments parse to a JSON string, not an object".into()),
        },
        Ok(other) => ArgsState::Malformed(format!(
            "the arguments parse to a JSON {}, not an object",
            crate::json::type_name(&other)
        )),
        Err(e) => {
            let why = extract::describe_json_error(text, &e);
            match find_repair(text, Value::is_object) {
                Some((r, _)) => ArgsState::Escaping(format!(
                    "the arguments do not parse ({why}) but do after fixing {}",
                    r.describe()
                )),
                None => ArgsState::Malformed(format!("the arguments do not parse: {why}")),
            }
        }
    }
}

fn raw_text(args: &WireArgs) -> Option<String> {
    match args {
        WireArgs::Absent => None,
        WireArgs::Text(s) => Some(s.clone()),
        WireArgs::Json(v) => Some(serde_json::to_string(v).unwrap_or_default()),
    }
}

impl Scoring<'_> {
    fn candidates(&self) -> Vec<Candidate> {
        let c = self.completion;
        if !c.tool_calls.is_empty() {
            return c
                .tool_calls
                .iter()
                .map(|w| Candidate {
                    source: Source::ToolCalls,
                    name: w.name.clone(),
                    args: w.arguments.clone(),
                    broken: None,
                })
                .collect();
        }
        let names = self.offered.names();
        let mut out: Vec<Candidate> = match &c.content {
            Some(content) => extract::text_calls(content, &names)
                .into_iter()
                .map(
                    |TextCall {
                         source,
                         name,
                         args,
                         broken,
                         ..
                     }| Candidate {
                        source,
                        name,
                        args,
                        broken,
                    },
                )
                .collect(),
            None => Vec::new(),
        };
        if out.is_empty()
            && let Some(fc) = &c.function_call
        {
            out.push(Candidate {
                source: Source::FunctionCall,
                name: fc.name.clone(),
                args: fc.arguments.clone(),
                broken: None,
            });
        }
        out
    }

    fn calls(&mut self) -> Verdict {
        let candidates = self.candidates();
        let content = self
            .completion
            .content
            .as_deref()
            .unwrap_or("")
            .trim()
            .to_string();
        let mut states = Vec::new();
        for (i, c) in candidates.iter().enumerate() {
            let state = match &c.broken {
                Some(b) => match b
                    .json_text
                    .as_deref()
                    .and_then(|t| find_repair(t, Value::is_object))
                {
                    Some((r, _)) => ArgsState::Escaping(format!(
                        "the call's JSON does not parse ({}) but does after fixing {}",
                        b.error,
                        r.describe()
                    )),
                    None => {
                        ArgsState::Malformed(format!("the call's text does not parse: {}", b.error))
                    }
                },
                None => parse_args(&c.args),
            };
            let arguments = match &state {
                ArgsState::Ok(v) => Some(v.clone()),
                _ => None,
            };
            self.calls.push(Call {
                index: i,
                source: c.source,
                name: c.name.clone(),
                arguments_raw: match &c.broken {
                    Some(b) => b.json_text.clone(),
                    None => raw_text(&c.args),
                },
                arguments,
                matched: None,
            });
            states.push(state);
        }

        let expected = match &self.task.expect {
            Expect::NoCall => {
                return match self.calls.first() {
                    None => Verdict::new(
                        Outcome::Pass,
                        None,
                        "no tool was needed and none was called".into(),
                    ),
                    Some(c) => {
                        let how = if c.source == Source::ToolCalls {
                            String::new()
                        } else {
                            format!(", written as {}", c.source.describe())
                        };
                        let mut v = fail(
                            Label::SpuriousCall,
                            Stage::Structure,
                            format!(
                                "the task needs no tool call, but the model called {}{how} ({} call{} in all)",
                                c.name
                                    .as_deref()
                                    .map(|n| format!("{n:?}"))
                                    .unwrap_or_else(|| "a tool".into()),
                                self.calls.len(),
                                if self.calls.len() == 1 { "" } else { "s" }
                            ),
                        );
                        v.fail_call = Some(0);
                        v
                    }
                };
            }
            Expect::Calls { calls, .. } => calls,
            Expect::StructuredOutput { .. } => &[][..],
        };
        let n_expected = expected.len();

        // Stage 2: parse.
        if let Some(cut) = &self.cut_reason {
            let broken = states.iter().position(|s| !matches!(s, ArgsState::Ok(_)));
            let nameless = self
                .calls
                .iter()
                .position(|c| c.name.as_deref().is_none_or(str::is_empty));
            let what = if let Some(i) = broken.or(nameless) {
                // Say where the emission stops parsing, as every parse-stage detail does.
                let why = match &states[i] {
                    ArgsState::Malformed(why) => why.clone(),
                    ArgsState::Ok(_) => "the call has no name".to_string(),
                    ArgsState::Escaping(_) | ArgsState::DoubleEncoded => self.calls[i]
                        .arguments_raw
                        .as_deref()
                        .and_then(|raw| {
                            serde_json::from_str::<Value>(raw).err().map(|e| {
                                format!(
                                    "the arguments do not parse: {}",
                                    extract::describe_json_error(raw, &e)
                                )
                            })
                        })
                        .unwrap_or_else(|| "the arguments do not parse".to_string()),
                };
                Some((
                    Some(i),
                    format!("{} is incomplete: {why}", call_name(&self.calls[i])),
                ))
            } else if self.calls.is_empty() {
                Some((None, "no call was emitted".to_string()))
            } else if self.calls.len() < n_expected {
                Some((
                    None,
                    format!(
                        "{} of {n_expected} expected calls were emitted",
                        self.calls.len()
                    ),
                ))
            } else {
                None
            };
            if let Some((at, what)) = what {
                let mut v = fail(
                    Label::Truncation,
                    Stage::Parse,
                    format!("the output was cut ({cut}) and {what}"),
                );
                v.fail_call = at;
                return v;
            }
        }
        for (i, state) in states.iter().enumerate() {
            if let ArgsState::Escaping(why) = state {
                let mut v = fail(
                    Label::EscapingError,
                    Stage::Parse,
                    format!("{}: {why}", call_name(&self.calls[i])),
                );
                v.fail_call = Some(i);
                return v;
            }
        }
        for (i, state) in states.iter().enumerate() {
            if let ArgsState::DoubleEncoded = state {
                let mut v = fail(
                    Label::EscapingError,
                    Stage::Parse,
                    format!(
                        "{}: the arguments are double-encoded: a JSON string whose content is the arguments object",
                        call_name(&self.calls[i])
                    ),
                );
                v.fail_call = Some(i);
                return v;
            }
        }
        for (i, state) in states.iter().enumerate() {
            let problem = match state {
                ArgsState::Malformed(why) => Some(why.clone()),
                _ if self.calls[i].name.as_deref().is_none_or(str::is_empty) => {
                    Some("the call has no name".to_string())
                }
                _ => None,
            };
            if let Some(why) = problem {
                let mut v = fail(
                    Label::MalformedJson,
                    Stage::Parse,
                    format!("{}: {why}", call_name(&self.calls[i])),
                );
                v.fail_call = Some(i);
                return v;
            }
        }

        // Stage 3: structure.
        if let Some(first) = self.calls.first() {
            if first.source != Source::ToolCalls {
                let mut v = fail(
                    Label::NoCall,
                    Stage::Structure,
                    format!(
                        "call emitted as text, not extracted by the server: {} {} ({}), so the client's runtime would execute nothing",
                        self.calls.len(),
                        if self.calls.len() == 1 {
                            "call"
                        } else {
                            "calls"
                        },
                        first.source.describe()
                    ),
                );
                v.fail_call = Some(0);
                return v;
            }
        } else {
            let detail = if content.is_empty() {
                format!(
                    "no call and no content (finish_reason {})",
                    self.completion
                        .finish_reason
                        .as_deref()
                        .map(|f| format!("{f:?}"))
                        .unwrap_or_else(|| "absent".into())
                )
            } else {
                format!(
                    "answered in prose, called nothing: {}",
                    preview(&Value::String(content.clone()), 160)
                )
            };
            return fail(Label::NoCall, Stage::Structure, detail);
        }
        let mut notes = Vec::new();
        let extra_prose = !content.is_empty();
        if extra_prose {
            notes.push(format!(
                "the message also carries prose beside its calls: {}",
                preview(&Value::String(content), 120)
            ));
        }

        let offered_names = self.offered.names();
        let expected_names: Vec<&str> = expected.iter().map(|e| e.tool.as_str()).collect();
        for c in &self.calls {
            let name = c.name.as_deref().unwrap_or("");
            if !offered_names.contains(&name) {
                let mut v = fail(
                    Label::WrongTool,
                    Stage::Structure,
                    format!(
                        "{} names {name:?}, which was not offered (offered: {})",
                        call_name(c),
                        offered_names.join(", ")
                    ),
                );
                v.fail_call = Some(c.index);
                return v;
            }
        }

        let order = match &self.task.expect {
            Expect::Calls { order, .. } => *order,
            _ => Order::Any,
        };
        // A task whose calls are examples (`any_call`) matches no call to an expected one.
        if self.task.any_call {
        } else if order == Order::Strict {
            for (i, (c, e)) in self.calls.iter().zip(expected).enumerate() {
                if c.name.as_deref() != Some(e.tool.as_str()) {
                    let mut v = fail(
                        Label::WrongTool,
                        Stage::Structure,
                        format!(
                            "{} is where the task expects {} (call order is strict)",
                            call_name(c),
                            e.tool
                        ),
                    );
                    v.fail_call = Some(i);
                    return v;
                }
            }
            for i in 0..self.calls.len().min(n_expected) {
                self.calls[i].matched = Some(i);
            }
        } else {
            self.match_calls(expected);
        }
        let unmatched_expected: Vec<usize> = (0..n_expected)
            .filter(|e| !self.task.any_call && !self.calls.iter().any(|c| c.matched == Some(*e)))
            .collect();
        let unmatched_calls: Vec<usize> = self
            .calls
            .iter()
            .filter(|c| c.matched.is_none() && !self.task.any_call)
            .map(|c| c.index)
            .collect();
        // An expected call left unmatched beside a call that matched nothing is a wrong tool:
        // first the expected tool used for another expected call (two tools expected, one
        // called twice), then a substitution by an offered tool that no expected call names.
        // An unmatched call with every expected call matched is an addition (spurious_call,
        // below), whatever offered tool it names: the right call was made.
        if let Some(&e) = unmatched_expected.first() {
            let twice = unmatched_calls
                .iter()
                .find(|&&c| expected_names.contains(&self.calls[c].name.as_deref().unwrap_or("")));
            let instead = unmatched_calls
                .iter()
                .find(|&&c| !expected_names.contains(&self.calls[c].name.as_deref().unwrap_or("")));
            let found = match (twice, instead) {
                (Some(&c), _) => Some((
                    c,
                    format!(
                        "expected call {} ({}) has no match: {} was used for it, a tool another expected call already used",
                        e + 1,
                        expected[e].tool,
                        call_name(&self.calls[c])
                    ),
                )),
                (None, Some(&c)) => Some((
                    c,
                    format!(
                        "expected call {} ({}) has no match: {} was called in its place, which was offered, but the task expects {}",
                        e + 1,
                        expected[e].tool,
                        call_name(&self.calls[c]),
                        dedup(&expected_names).join(", ")
                    ),
                )),
                (None, None) => None,
            };
            if let Some((c, detail)) = found {
                let mut v = fail(Label::WrongTool, Stage::Structure, detail);
                v.fail_call = Some(c);
                return v;
            }
        }
        if !unmatched_expected.is_empty() {
            let missing: Vec<String> = unmatched_expected
                .iter()
                .map(|e| format!("{} ({})", e + 1, expected[*e].tool))
                .collect();
            return fail(
                Label::ParallelCollapse,
                Stage::Structure,
                format!(
                    "the task expects {n_expected} calls but {} {} emitted (fused or dropped); unmatched expected call{} {}",
                    self.calls.len(),
                    if self.calls.len() == 1 { "was" } else { "were" },
                    if missing.len() == 1 { "" } else { "s" },
                    missing.join(", ")
                ),
            );
        }
        if let Some(&c) = unmatched_calls.first() {
            let mut v = fail(
                Label::SpuriousCall,
                Stage::Structure,
                format!(
                    "the task expects {n_expected} call{} and {} were emitted; every expected call is matched and {} is extra (an addition{})",
                    if n_expected == 1 { "" } else { "s" },
                    self.calls.len(),
                    call_name(&self.calls[c]),
                    if expected_names.contains(&self.calls[c].name.as_deref().unwrap_or("")) {
                        ""
                    } else {
                        ", to an offered tool the task does not expect"
                    }
                ),
            );
            v.fail_call = Some(c);
            return v;
        }

        // Stage 4: schema, every matched call, expected order.
        let mut by_expected: Vec<usize> = (0..self.calls.len()).collect();
        by_expected.sort_by_key(|i| self.calls[*i].matched);
        let mut found: Vec<(usize, schema::Violation)> = Vec::new();
        for &i in &by_expected {
            let c = &self.calls[i];
            let (Some(name), Some(args)) = (&c.name, &c.arguments) else {
                continue;
            };
            if let Some(s) = self.offered.schema(name) {
                found.extend(schema::violations(s, args).into_iter().map(|v| (i, v)));
            }
        }
        found.sort_by_key(|(i, v)| (schema::precedence(v.label), self.calls[*i].matched));
        if let Some((i, viol)) = found.into_iter().next() {
            let mut v = fail(
                viol.label,
                Stage::Schema,
                format!("{}: {}", call_name(&self.calls[i]), viol.detail),
            );
            if viol.empty_value {
                v.detail.push_str(" (empty value)");
            }
            v.fail_call = Some(i);
            v.fail_path = Some(viol.path);
            v.schema_keyword = Some(viol.keyword);
            v.empty_value = viol.empty_value;
            v.extra_prose = extra_prose;
            v.notes = notes;
            return v;
        }

        // Stage 5: semantic predicates.
        for &i in &by_expected {
            let c = &self.calls[i];
            let (Some(e), Some(args)) = (c.matched, &c.arguments) else {
                continue;
            };
            for p in &expected[e].where_ {
                if let Err(why) = p.check(args) {
                    let mut v = fail(p.label, Stage::Semantic, format!("{}: {why}", call_name(c)));
                    v.fail_call = Some(i);
                    v.fail_path = Some(p.path.clone());
                    v.empty_value = args.pointer(&p.path).is_some_and(schema::is_empty_value);
                    // SPEC §2.3: HiTEC's "empty parameter value" is read from the detail too.
                    if v.empty_value {
                        v.detail.push_str(" (empty value)");
                    }
                    v.extra_prose = extra_prose;
                    v.notes = notes;
                    return v;
                }
            }
        }
        if let Expect::Calls { across, .. } = &self.task.expect {
            let all: Vec<&Value> = by_expected
                .iter()
                .filter_map(|i| self.calls[*i].arguments.as_ref())
                .collect();
            for p in across {
                if let Err(why) = p.check_across(&all) {
                    let mut v = fail(p.label, Stage::Semantic, format!("across calls: {why}"));
                    v.fail_path = Some(p.path.clone());
                    v.extra_prose = extra_prose;
                    v.notes = notes;
                    return v;
                }
            }
        }

        let value_match = value::value_match(expected, &self.calls);
        let mut v = Verdict::new(
            Outcome::Pass,
            None,
            format!(
                "{n_expected} call{} as expected",
                if n_expected == 1 { "" } else { "s" }
            ),
        );
        v.value_match = (!self.task.any_call).then_some(value_match);
        v.extra_prose = extra_prose;
        v.notes = notes;
        v
    }

    /// Matches emitted calls to expected calls by tool name, then by best fit of arguments.
    fn match_calls(&mut self, expected: &[crate::task::ExpectedCall]) {
        let mut names: Vec<&str> = expected.iter().map(|e| e.tool.as_str()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let rows: Vec<usize> = (0..expected.len())
                .filter(|e| expected[*e].tool == name)
                .collect();
            let cols: Vec<usize> = self
                .calls
                .iter()
                .filter(|c| c.name.as_deref() == Some(name))
                .map(|c| c.index)
                .collect();
            let sim: Vec<Vec<i64>> = rows
                .iter()
                .map(|&e| {
                    cols.iter()
                        .map(|&c| similarity(&expected[e].gold, self.calls[c].arguments.as_ref()))
                        .collect()
                })
                .collect();
            for (r, col) in assign(&sim).into_iter().enumerate() {
                if let Some(ci) = col {
                    self.calls[cols[ci]].matched = Some(rows[r]);
                }
            }
        }
    }

    fn structured_output(&mut self, gold: &Value, where_: &[crate::task::Predicate]) -> Verdict {
        let content = self.completion.content.as_deref().unwrap_or("");
        let body = content.trim();
        let parsed = serde_json::from_str::<Value>(body);
        let payload = match parsed {
            Ok(Value::String(inner))
                if serde_json::from_str::<Value>(&inner)
                    .is_ok_and(|v| v.is_object() || v.is_array()) =>
            {
                return fail(
                    Label::EscapingError,
                    Stage::Parse,
                    "the output is double-encoded: a JSON string whose content is the JSON value"
                        .into(),
                );
            }
            Ok(v) => v,
            Err(e) => {
                // A complete JSON value inside a fence or beside prose: what a client's JSON
                // parser chokes on is the wrapping, and more tokens would not remove it.
                let wrapping = wrapped(body);
                if let Some(cut) = &self.cut_reason
                    && wrapping.is_none()
                {
                    let what = match json_start(body) {
                        Some(at) => format!(
                            "its JSON is incomplete: {}",
                            json_error_at(body, at)
                                .unwrap_or_else(|| extract::describe_json_error(body, &e))
                        ),
                        // As for calls (stage 2: "or no call at all"): the budget ran out
                        // before the answer began, and more tokens is the fix.
                        None if body.is_empty() => "no content was written".to_string(),
                        None => format!(
                            "no JSON value had begun: {}",
                            preview(&Value::String(body.to_string()), 120)
                        ),
                    };
                    return fail(
                        Label::Truncation,
                        Stage::Parse,
                        format!("the output was cut ({cut}) and {what}"),
                    );
                }
                if let Some(w) = wrapping {
                    return fail(
                        Label::MalformedJson,
                        Stage::Parse,
                        format!("wrapped: {w}, so a client calling a JSON parser on content fails"),
                    );
                }
                if body.starts_with('{') || body.starts_with('[') {
                    let why = extract::describe_json_error(body, &e);
                    return match find_repair(body, |_| true) {
                        Some((r, _)) => fail(
                            Label::EscapingError,
                            Stage::Parse,
                            format!(
                                "the output does not parse ({why}) but does after fixing {}",
                                r.describe()
                            ),
                        ),
                        None => fail(
                            Label::MalformedJson,
                            Stage::Parse,
                            format!("the output does not parse: {why}"),
                        ),
                    };
                }
                // JSON that begins inside a fence or after prose and does not parse either:
                // content does hold an attempted JSON value, so this is not prose.
                if let Some(at) = json_start(body) {
                    let why = json_error_at(body, at).unwrap_or_default();
                    return fail(
                        Label::MalformedJson,
                        Stage::Parse,
                        format!(
                            "wrapped: the JSON value starting at byte {at} sits inside a code fence or after prose, and it does not parse either ({why})"
                        ),
                    );
                }
                let detail = if body.is_empty() {
                    "no content: the model answered nothing".to_string()
                } else {
                    format!(
                        "answered in prose, no JSON value in content: {}",
                        preview(&Value::String(body.to_string()), 160)
                    )
                };
                return fail(Label::NoCall, Stage::Structure, detail);
            }
        };
        self.calls.clear();
        let schema = self.offered.structured_schema.clone();
        let mut v = match &schema {
            Some(s) => match schema::violations(s, &payload).into_iter().next() {
                Some(viol) => {
                    let mut v = fail(
                        viol.label,
                        Stage::Schema,
                        format!("the output: {}", viol.detail),
                    );
                    if viol.empty_value {
                        v.detail.push_str(" (empty value)");
                    }
                    v.fail_path = Some(viol.path);
                    v.schema_keyword = Some(viol.keyword);
                    v.empty_value = viol.empty_value;
                    v
                }
                None => Verdict::new(Outcome::Pass, None, String::new()),
            },
            None if !payload.is_object() => {
                let mut v = fail(
                    Label::SchemaViolation,
                    Stage::Schema,
                    format!(
                        "a JSON object was requested, got a JSON {}",
                        crate::json::type_name(&payload)
                    ),
                );
                v.schema_keyword = Some("type".into());
                v
            }
            None => Verdict::new(Outcome::Pass, None, String::new()),
        };
        if v.outcome == Outcome::Pass {
            for p in where_ {
                if let Err(why) = p.check(&payload) {
                    v = fail(p.label, Stage::Semantic, format!("the output: {why}"));
                    v.fail_path = Some(p.path.clone());
                    v.empty_value = payload.pointer(&p.path).is_some_and(schema::is_empty_value);
                    if v.empty_value {
                        v.detail.push_str(" (empty value)");
                    }
                    break;
                }
            }
        }
        if v.outcome == Outcome::Pass {
            v.detail = "the output parses, validates and meets every predicate".into();
            v.value_match = Some(values_equal(gold, &payload));
        }
        v.output = Some(payload);
        v
    }
}

/// How a complete JSON value sits inside other text: in a code fence, or with prose around it.
/// `None` when there is no complete object or array, or when `body` itself starts as JSON that
/// does not parse (a broken value, whose inner objects must not be mistaken for the answer).
fn wrapped(body: &str) -> Option<String> {
    if let Some(inner) = extract::strip_fence(body)
        && serde_json::from_str::<Value>(inner.trim()).is_ok()
    {
        let at = body.find("```").unwrap_or(0);
        return Some(format!(
            "the JSON sits inside a markdown code fence opening at byte {at}"
        ));
    }
    if body.starts_with('{') || body.starts_with('[') {
        return match extract::first_json_value(body) {
            Ok((v, used)) if (v.is_object() || v.is_array()) && used < body.len() => Some(format!(
                "the JSON value at byte 0 has text after it, from byte {used}"
            )),
            _ => None,
        };
    }
    // Prose first: the first complete object, else the first complete array. Openers inside a
    // value that fails to parse are skipped: they start nested values of a broken one (and
    // retrying each would be quadratic on deeply nested text).
    for open in ['{', '['] {
        let mut from = 0;
        while let Some(i) = body[from..].find(open).map(|k| k + from) {
            match extract::first_json_value(&body[i..]) {
                Ok((v, used)) if v.is_object() || v.is_array() => {
                    let after = !body[i + used..].trim().is_empty();
                    let where_ = if after {
                        "prose before and after it"
                    } else {
                        "prose before it"
                    };
                    return Some(format!("the JSON value at byte {i} has {where_}"));
                }
                Ok(_) => from = i + 1,
                Err(e) => from = i + extract::error_offset(&body[i..], &e).max(1),
            }
        }
    }
    None
}

/// Where an attempted JSON value begins in content: at the start, inside a code fence, or
/// after prose at an opening brace followed by a key (`{"`), or an array of objects or strings.
fn json_start(body: &str) -> Option<usize> {
    if body.starts_with('{') || body.starts_with('[') {
        return Some(0);
    }
    if let Some(inner) = extract::strip_fence(body) {
        let t = inner.trim_start();
        if t.starts_with('{') || t.starts_with('[') {
            let inner_at = inner.as_ptr() as usize - body.as_ptr() as usize;
            return Some(inner_at + (inner.len() - t.len()));
        }
    }
    body.char_indices().find_map(|(i, c)| {
        // `c` is one byte here, so `i + 1` is a char boundary.
        let next = || body[i + 1..].trim_start().chars().next();
        let opens = match c {
            '{' => matches!(next(), Some('"' | '}')),
            '[' => matches!(next(), Some('{' | '"')),
            _ => false,
        };
        opens.then_some(i)
    })
}

/// The parse error of the JSON value that starts at byte `at`, located in `body`.
fn json_error_at(body: &str, at: usize) -> Option<String> {
    let text = body.get(at..)?;
    let text = match extract::strip_fence(body) {
        // Inside a fence, the value ends at the closing fence.
        Some(inner) if at > 0 => {
            let inner_at = inner.as_ptr() as usize - body.as_ptr() as usize;
            body.get(at..inner_at + inner.len()).unwrap_or(text)
        }
        _ => text,
    };
    let err = match extract::first_json_value(text) {
        Ok(_) => return None,
        Err(e) => e,
    };
    let rel = extract::describe_json_error(text, &err);
    // describe_json_error ends in "at byte N" relative to `text`; shift it into `body`.
    match rel.rsplit_once(" at byte ") {
        Some((msg, n)) => n
            .parse::<usize>()
            .ok()
            .map(|n| format!("{msg} at byte {}", n + at)),
        None => Some(rel),
    }
}

fn dedup<'a>(names: &[&'a str]) -> Vec<&'a str> {
    let mut v = names.to_vec();
    v.sort();
    v.dedup();
    v
}

/// How well emitted arguments fit a gold call: 2 per equal value, 1 per key present.
fn similarity(gold: &Value, args: Option<&Value>) -> i64 {
    let (Some(g), Some(a)) = (gold.as_object(), args.and_then(Value::as_object)) else {
        return 0;
    };
    g.iter()
        .map(|(k, gv)| match a.get(k) {
            Some(av) if values_equal(gv, av) => 2,
            Some(_) => 1,
            None => 0,
        })
        .sum()
}

/// Assigns columns (emitted calls) to rows (expected calls) maximising the number of pairs,
/// then the total similarity; ties go to the earliest rows and columns, so the result is
/// deterministic. Exhaustive up to 8×8, greedy beyond.
fn assign(sim: &[Vec<i64>]) -> Vec<Option<usize>> {
    let rows = sim.len();
    let cols = sim.first().map_or(0, Vec::len);
    let target = rows.min(cols);
    if rows <= 8 && cols <= 8 {
        let mut best: Option<(i64, Vec<Option<usize>>)> = None;
        let mut cur = vec![None; rows];
        search(
            sim,
            0,
            cols,
            0,
            target,
            0,
            &mut vec![false; cols],
            &mut cur,
            &mut best,
        );
        return best.map(|(_, a)| a).unwrap_or(cur);
    }
    let mut used = vec![false; cols];
    let mut out = vec![None; rows];
    for r in 0..rows {
        let pick = (0..cols)
            .filter(|c| !used[*c])
            .max_by_key(|c| (sim[r][*c], std::cmp::Reverse(*c)));
        if let Some(c) = pick {
            used[c] = true;
            out[r] = Some(c);
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn search(
    sim: &[Vec<i64>],
    r: usize,
    cols: usize,
    matched: usize,
    target: usize,
    score: i64,
    used: &mut Vec<bool>,
    cur: &mut Vec<Option<usize>>,
    best: &mut Option<(i64, Vec<Option<usize>>)>,
) {
    if r == sim.len() {
        if matched == target && best.as_ref().is_none_or(|(b, _)| score > *b) {
            *best = Some((score, cur.clone()));
        }
        return;
    }
    for c in 0..cols {
        if !used[c] {
            used[c] = true;
            cur[r] = Some(c);
            search(
                sim,
                r + 1,
                cols,
                matched + 1,
                target,
                score + sim[r][c],
                used,
                cur,
                best,
            );
            used[c] = false;
            cur[r] = None;
        }
    }
    // Leave this row unmatched only if the others can still reach the target.
    if sim.len() - r > target - matched {
        search(sim, r + 1, cols, matched, target, score, used, cur, best);
    }
}
