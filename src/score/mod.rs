//! The decision procedure of SPEC §2.1: a pure function from a task and one transcript to a
//! [`Verdict`] — pass, error, or exactly one of the eleven labels, with the stage that decided
//! it and a detail a person can act on.
//!
//! Stages run in strict order and the first that cannot be passed decides. Within a stage each
//! rule is tried against every call before the next rule, so the outcome never depends on the
//! order in which the calls were emitted.

pub mod chunk;
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
    /// A router in front of the server could tell this sample failed (SPEC §11): it is a
    /// transport error, or a failure decided by a rule that reads only the request (its tools,
    /// their schemas, `tool_choice`, the token budget) and the response, never the task's
    /// expected calls ([`router_sees`]). `false` for a pass and for a *silent* failure, which a
    /// router takes for an answer.
    pub visible: bool,
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
            // A transport error is plain to anyone holding the response; a failure's
            // visibility is decided once the verdict is reached ([`router_sees`]).
            visible: outcome == Outcome::Error,
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
            "visible": self.visible,
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
                let function = t.get("function");
                let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str)
                else {
                    continue;
                };
                let no_parameters;
                let params = match function.and_then(|f| f.get("parameters")) {
                    Some(p) => p,
                    None => {
                        no_parameters = serde_json::json!({"type": "object", "properties": {}});
                        &no_parameters
                    }
                };
                // The common case: the tools sent are the task's; reuse its compiled schema.
                let schema = match task.tool(name) {
                    Some(tt) if tt.schema.raw == *params => tt.schema.clone(),
                    fallback => match Schema::compile(params) {
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
            .or_else(|| r.get("structured_outputs").and_then(|s| s.get("json")))
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
    if let Some(v) = failed_exchange(t) {
        return v;
    }
    let completion = match parsed {
        Ok(c) => c,
        Err(f) => return unread_response(t, f),
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

    let offered = offered(task, t.request.as_deref());
    let cut_reason = cut_reason(completion, t.max_tokens());
    let s = Scoring {
        task,
        offered: &offered,
        completion,
        cut_reason: cut_reason.clone(),
    };
    let mut v = match &task.expect {
        Expect::StructuredOutput { gold, where_, .. } => s.structured_output(gold, where_),
        _ => s.calls(),
    };
    // SPEC §2.1: every protocol deviation absorbed in reading the calls is named in the
    // detail, whatever the verdict.
    if !completion.deviations.is_empty() {
        let n = completion.deviations.len();
        v.detail.push_str(&format!(
            " (protocol deviation{}: {})",
            if n == 1 { "" } else { "s" },
            completion.deviations.join("; ")
        ));
    }
    v.finish_reason = completion.finish_reason.clone();
    v.cut = cut_reason.is_some();
    v.visible = router_sees(&v, &offered, &Demands::of(task, t.request.as_deref()));
    let mut notes = offered.notes.clone();
    notes.extend(completion.notes.iter().cloned());
    notes.append(&mut v.notes);
    v.notes = notes;
    v
}

/// Stage 0 as `meta.json` records it: a status outside 2xx, or no response head at all.
/// `None` when the head arrived with a 2xx status, or when `meta.json` simply does not record
/// the status (hand-made, or older): the body decides.
fn failed_exchange(t: &Transcript) -> Option<Verdict> {
    let meta = t.meta.as_ref()?;
    match meta.status {
        Some(s) if !(200..300).contains(&s) => {
            let body = String::from_utf8_lossy(&t.body);
            let body = body.trim();
            let tail = if body.is_empty() {
                String::new()
            } else {
                format!(": {}", clip(body, 200))
            };
            Some(Verdict::new(
                Outcome::Error,
                Some(Stage::Transport),
                format!("HTTP {s}{tail}"),
            ))
        }
        // No status and a recorded failure: no response head ever arrived.
        None => {
            let why = meta
                .error
                .clone()
                .or_else(|| meta.attempts.last().and_then(|a| a.error.clone()))?;
            // The row's timeout_secs ran out before the head: callcheck stopped waiting
            // (collect keeps it as the sample's outcome), which says nothing against the
            // server or the model.
            let detail = if why.contains("timed out") {
                format!(
                    "callcheck's own timeout (the row's timeout_secs) ended the request before the response head arrived ({why}); not a fault of the server or the model"
                )
            } else {
                format!("no HTTP response: {why}")
            };
            Some(Verdict::new(Outcome::Error, Some(Stage::Transport), detail))
        }
        Some(_) => None,
    }
}

/// Stage 0 for a response that arrived but cannot be read as a completion.
fn unread_response(t: &Transcript, f: &wire::TransportFailure) -> Verdict {
    let recorded = t.meta.as_ref().and_then(|m| m.error.as_deref());
    // collect's own deadline (the row's timeout_secs) ended the read: the body stops
    // where callcheck stopped waiting, which says nothing against the server.
    if let Some(e) = recorded.filter(|e| e.starts_with("timed out")) {
        let shown = f.0.replace(": the connection was cut", "");
        let mut v = Verdict::new(
            Outcome::Error,
            Some(Stage::Transport),
            format!(
                "callcheck's own timeout (the row's timeout_secs) ended the request before the response was complete ({e}); not a fault of the server or the model"
            ),
        );
        v.notes.push(format!("the response as kept: {shown}"));
        return v;
    }
    let mut v = Verdict::new(Outcome::Error, Some(Stage::Transport), f.0.clone());
    if let Some(e) = recorded {
        v.notes.push(format!("collect recorded: {e}"));
    }
    v
}

/// Why the output counts as cut at the token budget, when it does: `finish_reason` "length",
/// or as many completion tokens used as `max_tokens` allowed.
fn cut_reason(completion: &Completion, max_tokens: Option<u64>) -> Option<String> {
    if completion.finish_reason.as_deref() == Some("length") {
        return Some("finish_reason is \"length\"".to_string());
    }
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
}

/// What the request demands of the answer, as a router in front of the server reads it.
struct Demands {
    choice: ToolChoice,
    /// The request asked for JSON content (`response_format` of type `json_object` or
    /// `json_schema`, vLLM's `structured_outputs` or `guided_json`).
    json: bool,
}

impl Demands {
    /// From the request as sent; without a recorded request, from what the task sends (its
    /// `request` fields first, as collect builds the body).
    fn of(task: &Task, request: Option<&Value>) -> Demands {
        let field = |name: &str| match request {
            Some(r) => r.get(name),
            None => task.request.get(name).or(match name {
                "tool_choice" => task.tool_choice.as_ref(),
                "response_format" => task.response_format.as_ref(),
                _ => None,
            }),
        };
        let json = field("response_format")
            .and_then(|f| f.get("type"))
            .and_then(Value::as_str)
            .is_some_and(|t| t == "json_object" || t == "json_schema")
            || field("structured_outputs").is_some()
            || field("guided_json").is_some();
        Demands {
            choice: ToolChoice::of(field("tool_choice")),
            json,
        }
    }
}

/// The request's `tool_choice`, as a router in front of the server reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ToolChoice {
    /// `"auto"`, or none given (the API's default when tools are offered): the model may call
    /// or answer in prose, and a router cannot tell which was wanted.
    Auto,
    /// `"required"`: some call must come.
    Required,
    /// `"none"`: no call may come.
    Nothing,
    /// `{"type": "function", "function": {"name": …}}`: this function must be called, and no
    /// other.
    Named(String),
}

impl ToolChoice {
    /// The `tool_choice` sent, if any.
    fn of(sent: Option<&Value>) -> ToolChoice {
        match sent {
            Some(Value::String(s)) if s == "required" => ToolChoice::Required,
            Some(Value::String(s)) if s == "none" => ToolChoice::Nothing,
            Some(v @ Value::Object(_)) => match v.pointer("/function/name").and_then(Value::as_str)
            {
                Some(name) => ToolChoice::Named(name.to_string()),
                // An object naming no function demands nothing a router could check.
                None => ToolChoice::Auto,
            },
            // "auto", absent, or a value no server reads as a demand.
            _ => ToolChoice::Auto,
        }
    }

    /// The request forbids a call to `name`: `"none"` forbids every call, a named function
    /// every other one.
    fn forbids(&self, name: Option<&str>) -> bool {
        match self {
            ToolChoice::Nothing => true,
            ToolChoice::Named(n) => name != Some(n.as_str()),
            ToolChoice::Auto | ToolChoice::Required => false,
        }
    }
}

/// Whether a router in front of the server sees that `v` failed (SPEC §11, "What a router
/// sees"). A router holds the request — the tools and their schemas as sent, `tool_choice`, the
/// token budget, `response_format` — and the response; it never holds the task's expected calls.
/// So a failure is *visible* when the rule of SPEC §2.1 that decided it reads only those, and
/// *silent* when the rule consults the expected calls or the task's predicates. Rule by rule:
///
/// - transport (stage 0): no usable response at all; whoever sent the request knows. Visible.
/// - parse (stage 2), every rule. `truncation`: the cut is read off the response
///   (`finish_reason "length"`, or `usage.completion_tokens` against the request's budget), and
///   an answer cut short is incomplete whatever it was meant to be — even where the rule's
///   sub-case counts fewer calls than expected, the router sees the cut that caused it.
///   `escaping_error` and `malformed_json` at parse: arguments (or a structured output) that do
///   not parse as a JSON object, or a call without a name, fail any client's `json.loads`.
///   Visible.
/// - structure (stage 3):
///   - `no_call` (prose, or a call left as text in content): on a call task only the answer key
///     says a call was wanted, unless the request demanded one — `tool_choice` `"required"` or
///     naming a function. Where the request's `response_format` demands JSON (a
///     structured-output task), content that holds none is visibly wrong; without that, silent.
///   - `wrong_tool`: a name that was not offered (the rule tried first, so when any call names
///     such a tool it decided), or a name `tool_choice` forbids, is visible against the request.
///     A substitution among offered tools, or an expected tool used twice, is known only from
///     the expected calls: silent.
///   - `parallel_collapse` (fewer calls than the N expected): only the task knows N. Silent.
///   - `spurious_call` (a call where the task expects none, or more calls than expected): the
///     count is the task's, so silent — unless `tool_choice` forbids one of the calls (`"none"`,
///     or a call to another function than the one named), which the request itself says.
/// - schema (stage 4): every violation is found against the parameters schema as sent in the
///   request (or the `response_format` schema). Visible, whatever the label.
/// - semantic (stage 5): the task's own predicates (`where`, `across`) decide, with the label a
///   predicate declares (`escaping_error` from a round-trip, `type_coercion` from an int64
///   check, `parallel_collapse` from `distinct`): only the task holds them. Silent.
///
/// (`parallel_tool_calls: false` with several calls is left to the structure rules, as SPEC
/// §11 lists it: no corpus task asks for it and no rule of §2.1 reads it.)
fn router_sees(v: &Verdict, offered: &Offered, demands: &Demands) -> bool {
    let choice = &demands.choice;
    let Outcome::Fail(label) = v.outcome else {
        return v.outcome == Outcome::Error;
    };
    match v.stage {
        Some(Stage::Transport) | Some(Stage::Parse) | Some(Stage::Schema) => true,
        Some(Stage::Semantic) | None => false,
        Some(Stage::Structure) => {
            let forbidden = || v.calls.iter().any(|c| choice.forbids(c.name.as_deref()));
            match label {
                Label::NoCall => {
                    demands.json || matches!(choice, ToolChoice::Required | ToolChoice::Named(_))
                }
                Label::WrongTool => {
                    let names = offered.names();
                    v.calls
                        .iter()
                        .any(|c| !names.contains(&c.name.as_deref().unwrap_or("")))
                        || forbidden()
                }
                Label::SpuriousCall => forbidden(),
                _ => false,
            }
        }
    }
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

/// What extract (stage 1) established: every call the model made, in emission order, with
/// the state of its arguments, and the message's prose.
struct Extracted {
    calls: Vec<Call>,
    /// The state of each call's arguments, parallel to `calls`.
    args: Vec<ArgsState>,
    /// `content`, trimmed.
    prose: String,
}

/// What parse (stage 2) established: every call has a name and arguments that parse to an
/// object (`Call::arguments` is set), and nothing was cut short.
struct Parsed {
    calls: Vec<Call>,
    prose: String,
}

/// What structure (stage 3) established: the calls are structured ones naming offered tools,
/// each matched to exactly one expected call (none on an `any_call` task), none left over.
struct Structured {
    calls: Vec<Call>,
    /// Indices into `calls`, in the order of the expected calls they match.
    by_expected: Vec<usize>,
    /// The message carried prose beside its calls.
    extra_prose: bool,
    notes: Vec<String>,
}

impl Structured {
    /// A verdict decided after structure (schema, semantic or pass): it carries the calls and
    /// what structure observed.
    fn into_verdict(self, mut v: Verdict) -> Verdict {
        v.calls = self.calls;
        v.extra_prose = self.extra_prose;
        v.notes = self.notes;
        v
    }

    fn reject(self, v: Verdict) -> Verdict {
        self.into_verdict(v)
    }
}

/// Stage 1's verdict on a task that expects no call: any call, structured or text, parseable
/// or not, is `spurious_call` (stage `structure`); prose, even cut off, passes. `cut` is why the
/// output counts as cut, when it does: a spurious call cut at the budget says so, since the
/// label alone hides it.
fn no_call_expected(ex: Extracted, cut: Option<&str>) -> Verdict {
    let calls = ex.calls;
    let mut v = match calls.first() {
        None => Verdict::new(
            Outcome::Pass,
            None,
            format!(
                "no tool was needed and none was called{}",
                quoted_back(&ex.prose)
            ),
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
                    "the task needs no tool call, but the model called {}{how} ({} call{} in all){}",
                    c.name
                        .as_deref()
                        .map(|n| format!("{n:?}"))
                        .unwrap_or_else(|| "a tool".into()),
                    calls.len(),
                    if calls.len() == 1 { "" } else { "s" },
                    also_cut(cut)
                ),
            );
            v.fail_call = Some(0);
            v
        }
    };
    v.calls = calls;
    v
}

/// The words a detail adds when the answer quotes tools' definitions back (SPEC §2.1: a
/// mention, not a call), so a reader of a `{"name": …}` echo sees why it was not taken for one;
/// nothing when it quotes none.
fn quoted_back(prose: &str) -> String {
    let names = extract::quoted_definitions(prose);
    if names.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!(
        " (the answer quotes the definition{} of {} back: a mention, not a call)",
        if shown.len() == 1 { "" } else { "s" },
        shown.join(" and ")
    )
}

/// The words a detail decided by something else adds when the output was also cut at the
/// budget: the label names one thing that happened, the detail says all of it.
fn also_cut(cut: Option<&str>) -> String {
    cut.map(|c| format!("; the output was also cut ({c})"))
        .unwrap_or_default()
}

struct Scoring<'a> {
    task: &'a Task,
    offered: &'a Offered,
    completion: &'a Completion,
    cut_reason: Option<String>,
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

// A stage that decides returns the verdict as its `Err`: the early exit of SPEC §2.1 ("the
// first stage that cannot be passed decides"), once per sample, where boxing would buy nothing.
#[allow(clippy::result_large_err)]
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

    /// SPEC §2.1 for a task that expects calls (or none): extract, then — unless the task
    /// expects no call — parse, structure, schema and semantic, each stage a function that
    /// takes what the previous one established and either hands on what it established or
    /// decides the verdict.
    fn calls(&self) -> Verdict {
        match self.decide_calls() {
            Ok(v) | Err(v) => v,
        }
    }

    fn decide_calls(&self) -> Result<Verdict, Verdict> {
        let extracted = self.extract();
        let expected = match &self.task.expect {
            Expect::NoCall => {
                return Ok(no_call_expected(extracted, self.cut_reason.as_deref()));
            }
            Expect::Calls { calls, .. } => calls,
            Expect::StructuredOutput { .. } => &[][..],
        };
        let parsed = self.parse(extracted, expected.len())?;
        let structured = self.structure(parsed, expected)?;
        if let Err(v) = self
            .schema(&structured)
            .and_then(|()| self.semantic(&structured, expected))
        {
            return Err(structured.reject(v));
        }
        Ok(self.pass(structured, expected))
    }

    /// Stage 1, extract: the calls the model made, each with the state of its arguments.
    fn extract(&self) -> Extracted {
        let candidates = self.candidates();
        let prose = self
            .completion
            .content
            .as_deref()
            .unwrap_or("")
            .trim()
            .to_string();
        let mut calls = Vec::new();
        let mut args = Vec::new();
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
            calls.push(Call {
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
            args.push(state);
        }
        Extracted { calls, args, prose }
    }

    /// Stage 2, parse: the output was cut with an incomplete emission, or a call's arguments do
    /// not parse (repairably: escaping; otherwise: malformed), or a call has no name.
    fn parse(&self, ex: Extracted, n_expected: usize) -> Result<Parsed, Verdict> {
        let Extracted { calls, args, prose } = ex;
        let reject = |mut v: Verdict, at: Option<usize>, calls: Vec<Call>| {
            v.fail_call = at;
            v.calls = calls;
            Err(v)
        };
        if let Some(cut) = &self.cut_reason {
            let broken = args.iter().position(|s| !matches!(s, ArgsState::Ok(_)));
            let nameless = calls
                .iter()
                .position(|c| c.name.as_deref().is_none_or(str::is_empty));
            let what = if let Some(i) = broken.or(nameless) {
                // Say where the emission stops parsing, as every parse-stage detail does.
                let why = match &args[i] {
                    ArgsState::Malformed(why) => why.clone(),
                    ArgsState::Ok(_) => "the call has no name".to_string(),
                    ArgsState::Escaping(_) | ArgsState::DoubleEncoded => calls[i]
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
                    format!("{} is incomplete: {why}", call_name(&calls[i])),
                ))
            } else if calls.is_empty() {
                // Most cut samples of small models are prose run to the limit: say so, rather
                // than suggest a call was begun.
                let what = if prose.is_empty() {
                    "no call was emitted: nothing was written before the limit".to_string()
                } else {
                    format!(
                        "no call was emitted: the model was still writing prose, no call had begun{}: {}",
                        quoted_back(&prose),
                        preview(&Value::String(prose.clone()), 120)
                    )
                };
                Some((None, what))
            } else if calls.len() < n_expected {
                Some((
                    None,
                    format!(
                        "{} of {n_expected} expected calls were emitted",
                        calls.len()
                    ),
                ))
            } else if let Some((i, missing)) = self.lacking_required(&calls) {
                Some((
                    Some(i),
                    format!(
                        "{} lacks required arguments ({missing}): servers close a call cut at the limit with {{}}",
                        call_name(&calls[i])
                    ),
                ))
            } else {
                None
            };
            if let Some((at, what)) = what {
                let v = fail(
                    Label::Truncation,
                    Stage::Parse,
                    format!("the output was cut ({cut}) and {what}"),
                );
                return reject(v, at, calls);
            }
        }
        for (i, state) in args.iter().enumerate() {
            if let ArgsState::Escaping(why) = state {
                let v = fail(
                    Label::EscapingError,
                    Stage::Parse,
                    format!("{}: {why}", call_name(&calls[i])),
                );
                return reject(v, Some(i), calls);
            }
        }
        for (i, state) in args.iter().enumerate() {
            if let ArgsState::DoubleEncoded = state {
                let v = fail(
                    Label::EscapingError,
                    Stage::Parse,
                    format!(
                        "{}: the arguments are double-encoded: a JSON string whose content is the arguments object",
                        call_name(&calls[i])
                    ),
                );
                return reject(v, Some(i), calls);
            }
        }
        for (i, state) in args.iter().enumerate() {
            let problem = match state {
                ArgsState::Malformed(why) => Some(why.clone()),
                _ if calls[i].name.as_deref().is_none_or(str::is_empty) => {
                    Some("the call has no name".to_string())
                }
                _ => None,
            };
            if let Some(why) = problem {
                let v = fail(
                    Label::MalformedJson,
                    Stage::Parse,
                    format!("{}: {why}", call_name(&calls[i])),
                );
                return reject(v, Some(i), calls);
            }
        }
        Ok(Parsed { calls, prose })
    }

    /// The first call whose arguments parse but lack a required argument of its offered tool,
    /// with the missing ones described: on a cut output, the trace of a call the server closed
    /// with `{}` (vLLM #46303).
    fn lacking_required(&self, calls: &[Call]) -> Option<(usize, String)> {
        calls.iter().find_map(|c| {
            let schema = self.offered.schema(c.name.as_deref()?)?;
            let missing: Vec<String> = schema::violations(schema, c.arguments.as_ref()?)
                .into_iter()
                .filter(|v| v.label == Label::MissingRequired)
                .map(|v| v.detail)
                .collect();
            (!missing.is_empty()).then(|| (c.index, missing.join("; ")))
        })
    }

    /// Stage 3, structure: the calls against the task's expectation — text calls and no call
    /// are `no_call`, a tool not offered or used in another's place is `wrong_tool`, fewer
    /// calls than expected `parallel_collapse`, more `spurious_call`. The rules run in that
    /// order; the first that finds something decides.
    fn structure(
        &self,
        parsed: Parsed,
        expected: &[crate::task::ExpectedCall],
    ) -> Result<Structured, Verdict> {
        let Parsed { mut calls, prose } = parsed;
        let reject = |(mut v, at): Finding, calls: Vec<Call>| {
            v.fail_call = at;
            v.calls = calls;
            Err(v)
        };
        if let Some(found) = self.no_structured_call(&calls, &prose) {
            return reject(found, calls);
        }
        let mut notes = Vec::new();
        let extra_prose = !prose.is_empty();
        if extra_prose {
            notes.push(format!(
                "the message also carries prose beside its calls: {}",
                preview(&Value::String(prose), 120)
            ));
        }
        if let Some(found) = self.unoffered_tool(&calls) {
            return reject(found, calls);
        }
        if let Some(found) = self.pair_with_expected(&mut calls, expected) {
            return reject(found, calls);
        }
        let left = Leftovers::of(&calls, expected.len(), self.task.any_call);
        let found = left
            .substituted(&calls, expected)
            .or_else(|| left.collapsed(&calls, expected))
            .or_else(|| left.added(&calls, expected, self.cut_reason.as_deref()));
        if let Some(found) = found {
            return reject(found, calls);
        }
        let mut by_expected: Vec<usize> = (0..calls.len()).collect();
        by_expected.sort_by_key(|i| calls[*i].matched);
        Ok(Structured {
            calls,
            by_expected,
            extra_prose,
            notes,
        })
    }

    /// Structure's first rule, `no_call`: calls written as text (the server extracted
    /// nothing, so the client's runtime executes nothing), or no call at all.
    fn no_structured_call(&self, calls: &[Call], prose: &str) -> Option<Finding> {
        let Some(first) = calls.first() else {
            let detail = if prose.is_empty() {
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
                    "answered in prose, called nothing{}: {}",
                    quoted_back(prose),
                    preview(&Value::String(prose.to_string()), 160)
                )
            };
            return Some((fail(Label::NoCall, Stage::Structure, detail), None));
        };
        if first.source == Source::ToolCalls {
            return None;
        }
        let v = fail(
            Label::NoCall,
            Stage::Structure,
            format!(
                "call emitted as text, not extracted by the server: {} {} ({}), so the client's runtime would execute nothing",
                calls.len(),
                if calls.len() == 1 { "call" } else { "calls" },
                first.source.describe()
            ),
        );
        Some((v, Some(0)))
    }

    /// Structure's `wrong_tool` rule for a name the request never offered.
    fn unoffered_tool(&self, calls: &[Call]) -> Option<Finding> {
        let offered_names = self.offered.names();
        let c = calls
            .iter()
            .find(|c| !offered_names.contains(&c.name.as_deref().unwrap_or("")))?;
        let v = fail(
            Label::WrongTool,
            Stage::Structure,
            format!(
                "{} names {:?}, which was not offered (offered: {})",
                call_name(c),
                c.name.as_deref().unwrap_or(""),
                offered_names.join(", ")
            ),
        );
        Some((v, Some(c.index)))
    }

    /// Pairs each call with the expected call it answers (`Call::matched`): position by
    /// position when the task's order is strict, where a tool out of place is `wrong_tool`;
    /// by tool and best fit of arguments otherwise. A task whose calls are examples
    /// (`any_call`) pairs nothing.
    fn pair_with_expected(
        &self,
        calls: &mut [Call],
        expected: &[crate::task::ExpectedCall],
    ) -> Option<Finding> {
        let order = match &self.task.expect {
            Expect::Calls { order, .. } => *order,
            _ => Order::Any,
        };
        if self.task.any_call {
            return None;
        }
        if order != Order::Strict {
            match_calls(calls, expected);
            return None;
        }
        if let Some(found) = out_of_order(calls, expected) {
            return Some(found);
        }
        for (i, c) in calls.iter_mut().enumerate().take(expected.len()) {
            c.matched = Some(i);
        }
        None
    }

    /// Stage 4, schema: every matched call against its tool's parameters as sent; the first
    /// violation by label precedence, then expected order, decides.
    fn schema(&self, s: &Structured) -> Result<(), Verdict> {
        let mut found: Vec<(usize, schema::Violation)> = Vec::new();
        for &i in &s.by_expected {
            let c = &s.calls[i];
            let (Some(name), Some(args)) = (&c.name, &c.arguments) else {
                continue;
            };
            if let Some(schema) = self.offered.schema(name) {
                found.extend(schema::violations(schema, args).into_iter().map(|v| (i, v)));
            }
        }
        found.sort_by_key(|(i, v)| (schema::precedence(v.label), s.calls[*i].matched));
        let Some((i, viol)) = found.into_iter().next() else {
            return Ok(());
        };
        let mut v = fail(
            viol.label,
            Stage::Schema,
            format!("{}: {}", call_name(&s.calls[i]), viol.detail),
        );
        if viol.empty_value {
            v.detail.push_str(" (empty value)");
        }
        v.fail_call = Some(i);
        v.fail_path = Some(viol.path);
        v.schema_keyword = Some(viol.keyword);
        v.empty_value = viol.empty_value;
        Err(v)
    }

    /// Stage 5, semantic: each matched call's `where` predicates in expected order, then the
    /// task's `across` predicates; the first that fails decides, with the label it declares.
    fn semantic(
        &self,
        s: &Structured,
        expected: &[crate::task::ExpectedCall],
    ) -> Result<(), Verdict> {
        for &i in &s.by_expected {
            let c = &s.calls[i];
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
                    return Err(v);
                }
            }
        }
        if let Expect::Calls { across, .. } = &self.task.expect {
            let all: Vec<&Value> = s
                .by_expected
                .iter()
                .filter_map(|i| s.calls[*i].arguments.as_ref())
                .collect();
            for p in across {
                if let Err(why) = p.check_across(&all) {
                    let mut v = fail(p.label, Stage::Semantic, format!("across calls: {why}"));
                    v.fail_path = Some(p.path.clone());
                    return Err(v);
                }
            }
        }
        Ok(())
    }

    /// Stage 6: every stage passed.
    fn pass(&self, s: Structured, expected: &[crate::task::ExpectedCall]) -> Verdict {
        let n_expected = expected.len();
        let value_match = value::value_match(expected, &s.calls);
        let mut v = Verdict::new(
            Outcome::Pass,
            None,
            format!(
                "{n_expected} call{} as expected",
                if n_expected == 1 { "" } else { "s" }
            ),
        );
        v.value_match = (!self.task.any_call).then_some(value_match);
        s.into_verdict(v)
    }

    /// A structured-output task: the content read as one JSON value (stage 2), checked
    /// against the schema sent (stage 4), then the task's predicates (stage 5).
    fn structured_output(&self, gold: &Value, where_: &[crate::task::Predicate]) -> Verdict {
        let content = self.completion.content.as_deref().unwrap_or("");
        let payload = match self.output_value(content.trim()) {
            Ok(payload) => payload,
            Err(v) => return v,
        };
        let mut v = self.output_schema(&payload);
        if v.outcome == Outcome::Pass
            && let Some(failed) = output_predicates(&payload, where_)
        {
            v = failed;
        }
        if v.outcome == Outcome::Pass {
            v.detail = "the output parses, validates and meets every predicate".into();
            v.value_match = Some(values_equal(gold, &payload));
        }
        v.output = Some(payload);
        v
    }

    /// Structured output's stage 2: the content as one JSON value, or the verdict on why it
    /// is not one (double-encoded, cut, wrapped, broken, prose).
    fn output_value(&self, body: &str) -> Result<Value, Verdict> {
        match serde_json::from_str::<Value>(body) {
            Ok(Value::String(inner))
                if serde_json::from_str::<Value>(&inner)
                    .is_ok_and(|v| v.is_object() || v.is_array()) =>
            {
                Err(fail(
                    Label::EscapingError,
                    Stage::Parse,
                    "the output is double-encoded: a JSON string whose content is the JSON value"
                        .into(),
                ))
            }
            Ok(v) => Ok(v),
            Err(e) => Err(self.unparsed_output(body, &e)),
        }
    }

    /// The verdict on content that does not parse as JSON: the first of cut short, wrapped,
    /// broken (repairable or not), wrapped and broken, prose.
    fn unparsed_output(&self, body: &str, e: &serde_json::Error) -> Verdict {
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
                        .unwrap_or_else(|| extract::describe_json_error(body, e))
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
            let why = extract::describe_json_error(body, e);
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
        fail(Label::NoCall, Stage::Structure, detail)
    }

    /// Structured output's stage 4: the value against the schema sent (any JSON object when
    /// none was sent); a pass with an empty detail when it conforms.
    fn output_schema(&self, payload: &Value) -> Verdict {
        match &self.offered.structured_schema {
            Some(s) => match schema::violations(s, payload).into_iter().next() {
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
                        crate::json::type_name(payload)
                    ),
                );
                v.schema_keyword = Some("type".into());
                v
            }
            None => Verdict::new(Outcome::Pass, None, String::new()),
        }
    }
}

/// Structured output's stage 5: the first of the task's predicates the value fails.
fn output_predicates(payload: &Value, where_: &[crate::task::Predicate]) -> Option<Verdict> {
    where_.iter().find_map(|p| {
        let why = p.check(payload).err()?;
        let mut v = fail(p.label, Stage::Semantic, format!("the output: {why}"));
        v.fail_path = Some(p.path.clone());
        v.empty_value = payload.pointer(&p.path).is_some_and(schema::is_empty_value);
        if v.empty_value {
            v.detail.push_str(" (empty value)");
        }
        Some(v)
    })
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

/// A structure rule's finding: the verdict, and the call it points at when it points at one.
type Finding = (Verdict, Option<usize>);

/// Strict order's `wrong_tool`: the first call that is not the tool expected at its position.
fn out_of_order(calls: &[Call], expected: &[crate::task::ExpectedCall]) -> Option<Finding> {
    let i = calls
        .iter()
        .zip(expected)
        .position(|(c, e)| c.name.as_deref() != Some(e.tool.as_str()))?;
    let e = &expected[i];
    // Out of order and never called read differently to whoever fixes it.
    let later = calls[i + 1..]
        .iter()
        .find(|c| c.name.as_deref() == Some(e.tool.as_str()));
    let whereabouts = match later {
        Some(c) => format!(
            "{} came later, as call {}: the right tool out of order",
            e.tool,
            c.index + 1
        ),
        None => format!("{} was not called at all", e.tool),
    };
    let v = fail(
        Label::WrongTool,
        Stage::Structure,
        format!(
            "{} is where the task expects {}; {whereabouts} (call order is strict)",
            call_name(&calls[i]),
            e.tool
        ),
    );
    Some((v, Some(i)))
}

/// What pairing calls with expected calls left over (nothing on an `any_call` task).
struct Leftovers {
    /// Expected calls no call matched, by index.
    expected: Vec<usize>,
    /// Calls that matched no expected call, by `Call::index`.
    calls: Vec<usize>,
}

impl Leftovers {
    fn of(calls: &[Call], n_expected: usize, any_call: bool) -> Leftovers {
        Leftovers {
            expected: (0..n_expected)
                .filter(|e| !any_call && !calls.iter().any(|c| c.matched == Some(*e)))
                .collect(),
            calls: calls
                .iter()
                .filter(|c| c.matched.is_none() && !any_call)
                .map(|c| c.index)
                .collect(),
        }
    }

    /// `wrong_tool`: an expected call left unmatched beside a call that matched nothing —
    /// first the expected tool used for another expected call (two tools expected, one
    /// called twice), then a substitution by an offered tool that no expected call names.
    /// An unmatched call with every expected call matched is an addition ([`Self::added`]),
    /// whatever offered tool it names: the right call was made.
    fn substituted(
        &self,
        calls: &[Call],
        expected: &[crate::task::ExpectedCall],
    ) -> Option<Finding> {
        let &e = self.expected.first()?;
        let expected_names: Vec<&str> = expected.iter().map(|e| e.tool.as_str()).collect();
        let names_expected =
            |c: usize| expected_names.contains(&calls[c].name.as_deref().unwrap_or(""));
        let twice = self.calls.iter().find(|&&c| names_expected(c));
        let instead = self.calls.iter().find(|&&c| !names_expected(c));
        let (c, detail) = match (twice, instead) {
            (Some(&c), _) => (
                c,
                format!(
                    "expected call {} ({}) has no match: {} was used for it, a tool another expected call already used",
                    e + 1,
                    expected[e].tool,
                    call_name(&calls[c])
                ),
            ),
            (None, Some(&c)) => (
                c,
                format!(
                    "expected call {} ({}) has no match: {} was called in its place, which was offered, but the task expects {}",
                    e + 1,
                    expected[e].tool,
                    call_name(&calls[c]),
                    dedup(&expected_names).join(", ")
                ),
            ),
            (None, None) => return None,
        };
        Some((fail(Label::WrongTool, Stage::Structure, detail), Some(c)))
    }

    /// `parallel_collapse`: fewer calls than expected (fused or dropped), each missing one
    /// named by what no call carries.
    fn collapsed(&self, calls: &[Call], expected: &[crate::task::ExpectedCall]) -> Option<Finding> {
        if self.expected.is_empty() {
            return None;
        }
        let missing: Vec<String> = self
            .expected
            .iter()
            .map(|e| format!("{} ({})", e + 1, missing_call(&expected[*e], calls)))
            .collect();
        let v = fail(
            Label::ParallelCollapse,
            Stage::Structure,
            format!(
                "the task expects {} calls but {} {} emitted (fused or dropped); unmatched expected call{} {}",
                expected.len(),
                calls.len(),
                if calls.len() == 1 { "was" } else { "were" },
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", ")
            ),
        );
        Some((v, None))
    }

    /// `spurious_call`: every expected call is matched and a call is left over — an exact
    /// repeat (small models often say the same call twice), another call to an expected
    /// tool, or a call to an offered tool the task does not expect.
    fn added(
        &self,
        calls: &[Call],
        expected: &[crate::task::ExpectedCall],
        cut: Option<&str>,
    ) -> Option<Finding> {
        let &c = self.calls.first()?;
        let n_expected = expected.len();
        let extra = &calls[c];
        let repeat = calls.iter().find(|o| {
            o.index != c
                && o.matched.is_some()
                && o.name == extra.name
                && matches!((&o.arguments, &extra.arguments), (Some(a), Some(b)) if values_equal(a, b))
        });
        let expects_tool = expected
            .iter()
            .any(|e| e.tool == extra.name.as_deref().unwrap_or(""));
        let what = match repeat {
            Some(o) => format!(
                ", an exact repeat of {}: same tool, same arguments",
                call_name(o)
            ),
            None if expects_tool => String::new(),
            None => ", to an offered tool the task does not expect".to_string(),
        };
        let v = fail(
            Label::SpuriousCall,
            Stage::Structure,
            format!(
                "the task expects {n_expected} call{} and {} were emitted; every expected call is matched and {} is extra (an addition{what}){}",
                if n_expected == 1 { "" } else { "s" },
                calls.len(),
                call_name(extra),
                also_cut(cut)
            ),
        );
        Some((v, Some(c)))
    }
}

/// Matches emitted calls to expected calls by tool name, then by best fit of arguments.
fn match_calls(calls: &mut [Call], expected: &[crate::task::ExpectedCall]) {
    let mut names: Vec<&str> = expected.iter().map(|e| e.tool.as_str()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let rows: Vec<usize> = (0..expected.len())
            .filter(|e| expected[*e].tool == name)
            .collect();
        let cols: Vec<usize> = calls
            .iter()
            .filter(|c| c.name.as_deref() == Some(name))
            .map(|c| c.index)
            .collect();
        let sim: Vec<Vec<i64>> = rows
            .iter()
            .map(|&e| {
                cols.iter()
                    .map(|&c| similarity(&expected[e].gold, calls[c].arguments.as_ref()))
                    .collect()
            })
            .collect();
        for (r, col) in assign(&sim).into_iter().enumerate() {
            if let Some(ci) = col {
                calls[cols[ci]].matched = Some(rows[r]);
            }
        }
    }
}

/// An expected call no emitted call matched, named by what is missing: its tool and the gold
/// arguments that no emitted call of that tool carries (`get_weather with city "London"`), so
/// a reader of a `parallel_collapse` sees which of several calls to one tool was dropped or
/// fused. When every gold value was carried somewhere (two expected calls alike), the gold
/// arguments are all shown.
fn missing_call(e: &crate::task::ExpectedCall, calls: &[Call]) -> String {
    let Some(gold) = e.gold.as_object().filter(|g| !g.is_empty()) else {
        return e.tool.clone();
    };
    let carried = |k: &str, gv: &Value| {
        calls.iter().any(|c| {
            c.name.as_deref() == Some(e.tool.as_str())
                && c.arguments
                    .as_ref()
                    .and_then(|a| a.get(k))
                    .is_some_and(|av| values_equal(gv, av))
        })
    };
    let uncarried: Vec<(&String, &Value)> = gold.iter().filter(|(k, gv)| !carried(k, gv)).collect();
    let shown = if uncarried.is_empty() {
        gold.iter().collect()
    } else {
        uncarried
    };
    let args: Vec<String> = shown
        .iter()
        .map(|(k, v)| format!("{k} {}", preview(v, 60)))
        .collect();
    format!("{} with {}", e.tool, args.join(", "))
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
