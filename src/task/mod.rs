//! The task model (SPEC §3): loading task files, checking them, and compiling their schemas.
//!
//! A task file is user input, so every problem is reported with the file, the JSON path inside
//! it and what is wrong, and every problem in a corpus is collected rather than the first one.

pub mod accept;
pub mod predicate;

pub use predicate::{LenBound, Predicate, Test};

use crate::taxonomy::Label;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A problem with one task file: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskError {
    pub file: PathBuf,
    /// A JSON path inside the file (`expect.calls[1].where[0].matches`), empty for the file.
    pub path: String,
    pub problem: String,
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.problem)
        } else {
            write!(
                f,
                "{}: at {}: {}",
                self.file.display(),
                self.path,
                self.problem
            )
        }
    }
}

impl std::error::Error for TaskError {}

/// Every problem found while loading a set of tasks.
#[derive(Debug)]
pub struct TaskErrors(pub Vec<TaskError>);

impl fmt::Display for TaskErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        writeln!(
            f,
            "{n} problem{} in the tasks:",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            writeln!(f, "  {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for TaskErrors {}

/// A JSON Schema together with its compiled validator.
pub struct Schema {
    pub raw: Value,
    pub validator: jsonschema::Validator,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Schema({})", self.raw)
    }
}

/// Refuses every external reference: a schema may only point inside itself, so scoring never
/// touches the network or the file system.
struct NoRemote;

impl jsonschema::Retrieve for NoRemote {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "external $ref to {} is not allowed: only local references (#/$defs/…) are resolved",
            uri.as_str()
        )
        .into())
    }
}

impl Schema {
    /// Compiles a schema; local `$ref`s resolve, remote ones are refused.
    pub fn compile(raw: &Value) -> Result<Schema, String> {
        Schema::compile_located(raw).map_err(|(at, why)| {
            if at.is_empty() {
                why
            } else {
                format!("at {at}: {why}")
            }
        })
    }

    /// Compiles a schema; on failure, the dotted path inside the schema where it fails
    /// (`properties.city.type`, empty for the schema itself) and what is wrong there.
    pub fn compile_located(raw: &Value) -> Result<Schema, (String, String)> {
        let validator = jsonschema::options()
            .with_retriever(NoRemote)
            .build(raw)
            .map_err(|e| describe_schema_error(&e))?;
        Ok(Schema {
            raw: raw.clone(),
            validator,
        })
    }
}

/// JSON Schema types, for saying what `type` allows.
const SCHEMA_TYPES: [&str; 7] = [
    "array", "boolean", "integer", "null", "number", "object", "string",
];

/// A schema that fails the meta-schema, in words a task author can act on: the path inside
/// the schema and, for a misspelt `type`, what is allowed there (the meta-schema's own message
/// is `anyOf` jargon without the path).
fn describe_schema_error(e: &jsonschema::ValidationError<'_>) -> (String, String) {
    let pointer = e.instance_path().as_str();
    let tokens: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let mut at = String::new();
    for t in &tokens {
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            at.push_str(&format!("[{t}]"));
        } else {
            if !at.is_empty() {
                at.push('.');
            }
            at.push_str(t);
        }
    }
    // `type` as a keyword, not a property that happens to be called "type".
    let parent = tokens.len().checked_sub(2).map(|i| tokens[i].as_str());
    let is_type_keyword = tokens.last().is_some_and(|t| t == "type")
        && !matches!(
            parent,
            Some("properties" | "patternProperties" | "$defs" | "definitions")
        );
    let instance: &Value = e.instance();
    if is_type_keyword {
        let bad: Vec<&str> = match instance {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| !SCHEMA_TYPES.contains(t))
                .collect(),
            _ => Vec::new(),
        };
        let allowed = SCHEMA_TYPES
            .iter()
            .map(|t| format!("{t:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let given = match bad.first() {
            Some(b) => format!("{b:?} is not a JSON Schema type"),
            None => format!(
                "{} is not a JSON Schema type",
                crate::json::preview(instance, 60)
            ),
        };
        let hint = bad
            .first()
            .and_then(|b| {
                SCHEMA_TYPES
                    .iter()
                    .map(|t| (edit_distance(b, t), *t))
                    .filter(|(d, _)| *d <= 2)
                    .min()
            })
            .map(|(_, t)| format!(" (did you mean {t:?}?)"))
            .unwrap_or_default();
        return (
            at,
            format!("{given}{hint}: allowed there are {allowed}, or a list of them"),
        );
    }
    (at, e.to_string())
}

/// Levenshtein distance, for suggesting the type a misspelling meant.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// One tool offered to the model.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    /// The `parameters` schema (an empty object schema when the tool declares none).
    pub schema: Arc<Schema>,
}

/// Whether emitted calls must come in the expected order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    Any,
    Strict,
}

/// One call the task expects.
#[derive(Debug, Clone)]
pub struct ExpectedCall {
    pub tool: String,
    /// One correct set of arguments.
    pub gold: Value,
    pub where_: Vec<Predicate>,
    /// Every value that counts as correct, per parameter (value accuracy only, never a label).
    pub accept: Option<BTreeMap<String, Accept>>,
}

/// How an argument is compared with the acceptable values of [`Accept`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Equal as JSON values, numbers by mathematical value.
    Exact,
    /// BFCL's AST checker: its string normalisation, numeric leniency and Java/JavaScript
    /// value parsing (see [`accept`]).
    Bfcl,
}

/// The language whose values BFCL's checker parses (`Language` in BFCL's `ast_checker.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BfclLanguage {
    Python,
    Java,
    Javascript,
}

/// What counts as a correct value for one parameter of an expected call.
#[derive(Debug, Clone, PartialEq)]
pub struct Accept {
    /// Every acceptable value.
    pub values: Vec<Value>,
    /// Leaving the parameter out is acceptable too.
    pub omit: bool,
    pub rule: Rule,
    /// For the `bfcl` rule: the parameter's type in BFCL's function doc (`float`, `tuple`,
    /// `ArrayList`…), its item type, and the language of the category.
    pub bfcl_type: Option<String>,
    pub bfcl_items: Option<String>,
    pub language: BfclLanguage,
}

/// Where a task comes from, when it was imported from another suite (SPEC §3, §10).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The suite (`bfcl`).
    pub suite: String,
    /// The suite's own id for the task.
    pub id: String,
    pub category: String,
    /// The version of the suite's data it came from.
    pub version: String,
    /// Changes made on import to make the task consistent with itself, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<String>,
}

/// What a correct answer looks like.
#[derive(Debug, Clone)]
pub enum Expect {
    /// No tool is needed; any call is spurious.
    NoCall,
    Calls {
        calls: Vec<ExpectedCall>,
        across: Vec<Predicate>,
        order: Order,
    },
    /// The answer is JSON in `content`, constrained by the request's `response_format`.
    StructuredOutput {
        gold: Value,
        where_: Vec<Predicate>,
        schema: Option<Arc<Schema>>,
    },
}

/// A loaded, checked task.
#[derive(Debug, Clone)]
pub struct Task {
    pub id: String,
    pub title: String,
    pub tags: Vec<String>,
    pub description: String,
    pub messages: Vec<Value>,
    /// The `tools` array exactly as it goes into the request.
    pub tools_json: Vec<Value>,
    pub tools: Vec<Tool>,
    pub tool_choice: Option<Value>,
    pub response_format: Option<Value>,
    /// Extra request body fields the task needs (e.g. `parallel_tool_calls`, `max_tokens`).
    pub request: BTreeMap<String, Value>,
    pub expect: Expect,
    /// The expected calls are examples: any call (or calls) to offered tools that passes the
    /// schema is correct (BFCL's relevance: "some call expected, any offered tool").
    pub any_call: bool,
    /// Provenance, for tasks imported from another suite.
    pub source: Option<Source>,
    /// Where it was loaded from.
    pub file: PathBuf,
    /// sha256 of the file's bytes, recorded in each cell so build can tell a changed task.
    pub sha256: String,
}

impl Task {
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The number of calls the task expects (0 for no-call and structured-output tasks).
    pub fn expected_calls(&self) -> &[ExpectedCall] {
        match &self.expect {
            Expect::Calls { calls, .. } => calls,
            _ => &[],
        }
    }

    pub fn is_structured_output(&self) -> bool {
        matches!(self.expect, Expect::StructuredOutput { .. })
    }
}

/// True when `s` may be used as a path segment (SPEC §4).
/// The most bytes read of one task file (BFCL's largest imported task is a few hundred KB).
pub const MAX_TASK_FILE: u64 = 16 << 20;

pub fn is_path_safe(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Keeps the tasks whose id matches `--only`'s glob (all of them without one); a glob that is
/// not valid, or matches no task of the corpus in `dir`, is an error that says so.
pub fn only(tasks: &mut Vec<Task>, glob: Option<&str>, dir: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let Some(glob) = glob else {
        return Ok(());
    };
    let pat =
        glob::Pattern::new(glob).with_context(|| format!("--only {glob:?} is not a valid glob"))?;
    tasks.retain(|t| pat.matches(&t.id));
    if tasks.is_empty() {
        anyhow::bail!("--only {glob:?} matches no task id in {}", dir.display());
    }
    Ok(())
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `bytes` in lower-case hexadecimal. (Formatting each byte with `format!` took as long as
/// hashing the transcripts it names.)
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

// ---- the file format, as serde sees it ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    id: String,
    title: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    description: String,
    messages: Vec<Value>,
    #[serde(default)]
    tools: Vec<Value>,
    #[serde(default, deserialize_with = "present")]
    tool_choice: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    response_format: Option<Value>,
    #[serde(default)]
    request: BTreeMap<String, Value>,
    expect: RawExpect,
    #[serde(default)]
    source: Option<Source>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(default)]
    any_call: Option<bool>,
    #[serde(default)]
    no_call: Option<bool>,
    #[serde(default)]
    calls: Option<Vec<RawCall>>,
    #[serde(default)]
    across: Vec<RawPredicate>,
    #[serde(default)]
    order: Option<Order>,
    #[serde(default)]
    structured_output: Option<RawStructured>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    tool: String,
    gold: Value,
    #[serde(default, rename = "where")]
    where_: Vec<RawPredicate>,
    #[serde(default)]
    accept: Option<BTreeMap<String, RawAccept>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAccept {
    #[serde(default)]
    values: Vec<Value>,
    #[serde(default)]
    omit: bool,
    #[serde(default)]
    rule: Option<Rule>,
    #[serde(default, rename = "type")]
    bfcl_type: Option<String>,
    #[serde(default, rename = "items")]
    bfcl_items: Option<String>,
    #[serde(default)]
    language: Option<BfclLanguage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStructured {
    gold: Value,
    #[serde(default, rename = "where")]
    where_: Vec<RawPredicate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLen {
    #[serde(default)]
    min: Option<u64>,
    #[serde(default)]
    max: Option<u64>,
}

// Predicates are parsed as one struct with optional fields rather than an untagged enum: with
// serde_json's `arbitrary_precision`, untagged enums mangle numbers, and a flat struct gives
// better error messages anyway.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPredicate {
    path: String,
    #[serde(default, deserialize_with = "present")]
    equals: Option<Value>,
    #[serde(default)]
    one_of: Option<Vec<Value>>,
    #[serde(default)]
    matches: Option<String>,
    #[serde(default)]
    len: Option<RawLen>,
    #[serde(default)]
    present: Option<bool>,
    #[serde(default)]
    absent: Option<bool>,
    #[serde(default)]
    distinct: Option<bool>,
    #[serde(default)]
    roundtrip: Option<String>,
    label: String,
}

/// Deserializes a field that is there, even as `null`, to `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Collects problems for one file.
struct Problems<'a> {
    file: &'a Path,
    list: Vec<TaskError>,
}

impl Problems<'_> {
    fn add(&mut self, path: impl Into<String>, problem: impl Into<String>) {
        self.list.push(TaskError {
            file: self.file.to_path_buf(),
            path: path.into(),
            problem: problem.into(),
        });
    }
}

/// Parses and checks one task file's bytes. `file` is used only in error messages.
pub fn parse_task(file: &Path, bytes: &[u8]) -> Result<Task, Vec<TaskError>> {
    let mut problems = Problems {
        file,
        list: Vec::new(),
    };
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let raw: RawTask = match serde_path_to_error::deserialize(de) {
        Ok(r) => r,
        Err(e) => {
            let path = e.path().to_string();
            let path = if path == "." { String::new() } else { path };
            problems.add(path, e.into_inner().to_string());
            return Err(problems.list);
        }
    };

    check_header(&raw, &mut problems);
    let (tools, uncompiled) = compile_tools(&raw.tools, &mut problems);

    let any_call = raw.expect.any_call == Some(true);
    let expect = convert_expect(
        raw.expect,
        &raw.response_format,
        &tools,
        &uncompiled,
        &mut problems,
    );
    if let Some(src) = &raw.source
        && [&src.suite, &src.id, &src.category, &src.version]
            .iter()
            .any(|f| f.trim().is_empty())
    {
        problems.add(
            "source",
            "suite, id, category and version must all be non-empty",
        );
    }

    match (problems.list.is_empty(), expect) {
        (true, Some(expect)) => Ok(Task {
            id: raw.id,
            title: raw.title,
            tags: raw.tags,
            description: raw.description,
            messages: raw.messages,
            tools_json: raw.tools,
            tools,
            tool_choice: raw.tool_choice,
            response_format: raw.response_format,
            request: raw.request,
            expect,
            any_call,
            source: raw.source,
            file: file.to_path_buf(),
            sha256: sha256_hex(bytes),
        }),
        _ => Err(problems.list),
    }
}

/// The id, title and messages of a task file: what every task needs before its tools.
fn check_header(raw: &RawTask, problems: &mut Problems) {
    if !is_path_safe(&raw.id) {
        problems.add(
            "id",
            format!(
                "{:?} is not a valid task id: use only letters, digits, '.', '_' and '-'",
                raw.id
            ),
        );
    }
    if raw.title.trim().is_empty() {
        problems.add("title", "must not be empty");
    }
    if raw.messages.is_empty() {
        problems.add("messages", "must hold at least one message");
    }
    for (i, m) in raw.messages.iter().enumerate() {
        if m.get("role").and_then(Value::as_str).is_none() {
            problems.add(
                format!("messages[{i}]"),
                "a message needs a string \"role\"",
            );
        }
    }
}

/// Each offered tool's schema, compiled; the names of those that did not compile, so that
/// nothing that follows from a missing tool is reported as well.
fn compile_tools(raw_tools: &[Value], problems: &mut Problems) -> (Vec<Tool>, Vec<String>) {
    let mut tools = Vec::new();
    let mut uncompiled: Vec<String> = Vec::new();
    for (i, t) in raw_tools.iter().enumerate() {
        let path = format!("tools[{i}]");
        let Some(func) = t.get("function") else {
            problems.add(
                path,
                "a tool needs a \"function\" object ({\"type\": \"function\", \"function\": {…}})",
            );
            continue;
        };
        let Some(name) = func.get("name").and_then(Value::as_str) else {
            problems.add(format!("{path}.function.name"), "missing or not a string");
            continue;
        };
        if tools.iter().any(|x: &Tool| x.name == name) {
            problems.add(
                format!("{path}.function.name"),
                format!("tool {name:?} is offered twice"),
            );
        }
        let params = func
            .get("parameters")
            .cloned()
            .unwrap_or_else(empty_object_schema);
        match Schema::compile_located(&params) {
            Ok(schema) => tools.push(Tool {
                name: name.to_string(),
                schema: Arc::new(schema),
            }),
            Err((at, why)) => {
                let at = if at.is_empty() {
                    format!("{path}.function.parameters")
                } else {
                    format!("{path}.function.parameters.{at}")
                };
                problems.add(at, format!("the schema does not compile: {why}"));
                // Nothing that follows from the missing tool is reported as well.
                uncompiled.push(name.to_string());
            }
        }
    }
    (tools, uncompiled)
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// The JSON Schema inside a `response_format`, if it carries one.
pub fn response_format_schema(rf: &Value) -> Option<&Value> {
    rf.get("json_schema").and_then(|j| j.get("schema"))
}

fn convert_expect(
    raw: RawExpect,
    response_format: &Option<Value>,
    tools: &[Tool],
    uncompiled: &[String],
    p: &mut Problems,
) -> Option<Expect> {
    let kinds = [
        raw.no_call == Some(true),
        raw.calls.is_some(),
        raw.structured_output.is_some(),
    ];
    if kinds.iter().filter(|k| **k).count() != 1 {
        p.add(
            "expect",
            "needs exactly one of \"no_call\": true, \"calls\": […] or \"structured_output\": {…}",
        );
        return None;
    }
    if raw.any_call.is_some() && raw.calls.is_none() {
        p.add(
            "expect.any_call",
            "\"any_call\" marks \"calls\" as examples, so it needs \"calls\"",
        );
    }
    if raw.no_call == Some(true) {
        if !raw.across.is_empty() || raw.order.is_some() {
            p.add("expect", "\"across\" and \"order\" only apply to \"calls\"");
        }
        return Some(Expect::NoCall);
    }
    if let Some(so) = raw.structured_output {
        let Some(rf) = response_format else {
            p.add(
                "response_format",
                "a structured_output task needs a response_format",
            );
            return None;
        };
        let schema = match response_format_schema(rf) {
            Some(s) => match Schema::compile_located(s) {
                Ok(s) => Some(Arc::new(s)),
                Err((at, why)) => {
                    let path = if at.is_empty() {
                        "response_format.json_schema.schema".to_string()
                    } else {
                        format!("response_format.json_schema.schema.{at}")
                    };
                    p.add(path, format!("the schema does not compile: {why}"));
                    None
                }
            },
            None => None,
        };
        let where_ = convert_predicates(so.where_, "expect.structured_output.where", false, p);
        return Some(Expect::StructuredOutput {
            gold: so.gold,
            where_,
            schema,
        });
    }
    let raw_calls = raw.calls.unwrap_or_default();
    if raw_calls.is_empty() {
        p.add(
            "expect.calls",
            "must list at least one call (use \"no_call\": true for none)",
        );
    }
    let mut calls = Vec::new();
    for (i, c) in raw_calls.into_iter().enumerate() {
        let path = format!("expect.calls[{i}]");
        if !tools.iter().any(|t| t.name == c.tool) && !uncompiled.contains(&c.tool) {
            p.add(
                format!("{path}.tool"),
                format!("{:?} is not among the offered tools", c.tool),
            );
        }
        if !c.gold.is_object() {
            p.add(
                format!("{path}.gold"),
                "gold arguments must be a JSON object",
            );
        }
        let where_ = convert_predicates(c.where_, &format!("{path}.where"), false, p);
        let accept = c.accept.map(|a| convert_accept(a, &c.gold, &path, p));
        if raw.any_call == Some(true) && (!where_.is_empty() || accept.is_some()) {
            p.add(
                path.clone(),
                "with \"any_call\" the calls are examples: they take no \"where\" and no \"accept\"",
            );
        }
        calls.push(ExpectedCall {
            tool: c.tool,
            gold: c.gold,
            where_,
            accept,
        });
    }
    if raw.any_call == Some(true) && (!raw.across.is_empty() || raw.order.is_some()) {
        p.add(
            "expect",
            "with \"any_call\" the calls are examples: \"across\" and \"order\" do not apply",
        );
    }
    let across = convert_predicates(raw.across, "expect.across", true, p);
    Some(Expect::Calls {
        calls,
        across,
        order: raw.order.unwrap_or(Order::Any),
    })
}

/// Checks an expected call's `accept` and that its gold is among what it accepts.
fn convert_accept(
    raw: BTreeMap<String, RawAccept>,
    gold: &Value,
    path: &str,
    p: &mut Problems,
) -> BTreeMap<String, Accept> {
    let mut out = BTreeMap::new();
    for (name, a) in raw {
        let at = format!("{path}.accept.{name}");
        if a.values.is_empty() && !a.omit {
            p.add(
                at.clone(),
                "accepts nothing: list \"values\" or set \"omit\": true",
            );
        }
        let rule = a.rule.unwrap_or(Rule::Exact);
        if rule == Rule::Bfcl && a.bfcl_type.is_none() {
            p.add(
                at.clone(),
                "the \"bfcl\" rule needs the parameter's BFCL \"type\" (string, float, ArrayList…)",
            );
        }
        if rule == Rule::Exact
            && (a.bfcl_type.is_some() || a.bfcl_items.is_some() || a.language.is_some())
        {
            p.add(
                at.clone(),
                "\"type\", \"items\" and \"language\" belong to the \"bfcl\" rule: add \"rule\": \"bfcl\"",
            );
        }
        out.insert(
            name,
            Accept {
                values: a.values,
                omit: a.omit,
                rule,
                bfcl_type: a.bfcl_type,
                bfcl_items: a.bfcl_items,
                language: a.language.unwrap_or(BfclLanguage::Python),
            },
        );
    }
    if let Err(why) = accept::accepts(&out, gold) {
        p.add(
            format!("{path}.gold"),
            format!("the gold arguments are not among those \"accept\" lists: {why}"),
        );
    }
    out
}

fn convert_predicates(
    raw: Vec<RawPredicate>,
    base: &str,
    across: bool,
    p: &mut Problems,
) -> Vec<Predicate> {
    let mut out = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let path = format!("{base}[{i}]");
        let source = predicate_source(&r);
        if !(r.path.is_empty() || r.path.starts_with('/')) {
            p.add(
                format!("{path}.path"),
                format!(
                    "{:?} is not a JSON Pointer (it must be empty or start with '/')",
                    r.path
                ),
            );
        }
        let Some(label) = Label::parse(&r.label) else {
            p.add(
                format!("{path}.label"),
                format!("{:?} is not one of the eleven labels", r.label),
            );
            continue;
        };
        let mut tests: Vec<Test> = Vec::new();
        if let Some(v) = r.equals {
            tests.push(Test::Equals(v));
        }
        if let Some(v) = r.one_of {
            tests.push(Test::OneOf(v));
        }
        if let Some(m) = &r.matches {
            match Regex::new(m) {
                Ok(re) => tests.push(Test::Matches(re)),
                Err(e) => {
                    p.add(format!("{path}.matches"), format!("not a valid regex: {e}"));
                    continue;
                }
            }
        }
        if let Some(l) = r.len {
            if let (Some(lo), Some(hi)) = (l.min, l.max)
                && lo > hi
            {
                p.add(format!("{path}.len"), format!("min {lo} is above max {hi}"));
            }
            tests.push(Test::Len(LenBound {
                min: l.min,
                max: l.max,
            }));
        }
        if r.present == Some(true) {
            tests.push(Test::Present);
        }
        if r.absent == Some(true) {
            tests.push(Test::Absent);
        }
        if r.distinct == Some(true) {
            if !across {
                p.add(
                    format!("{path}.distinct"),
                    "\"distinct\" compares calls, so it belongs in expect.across",
                );
                continue;
            }
            tests.push(Test::Distinct);
        }
        if let Some(text) = &r.roundtrip {
            match predicate::Roundtrip::new(text) {
                Ok(rt) => tests.push(Test::Roundtrip(rt)),
                Err(e) => {
                    p.add(format!("{path}.roundtrip"), e);
                    continue;
                }
            }
        }
        if tests.len() != 1 {
            p.add(path, "a predicate needs exactly one of equals, one_of, matches, len, present, absent, distinct, roundtrip");
            continue;
        }
        let test = tests.remove(0);
        out.push(Predicate {
            path: r.path,
            test,
            label,
            source,
        });
    }
    out
}

fn predicate_source(r: &RawPredicate) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("path".into(), Value::String(r.path.clone()));
    if let Some(v) = &r.equals {
        m.insert("equals".into(), v.clone());
    }
    if let Some(v) = &r.one_of {
        m.insert("one_of".into(), Value::Array(v.clone()));
    }
    if let Some(v) = &r.matches {
        m.insert("matches".into(), Value::String(v.clone()));
    }
    if let Some(v) = &r.roundtrip {
        m.insert("roundtrip".into(), Value::String(v.clone()));
    }
    if let Some(l) = &r.len {
        let mut lm = serde_json::Map::new();
        if let Some(x) = l.min {
            lm.insert("min".into(), x.into());
        }
        if let Some(x) = l.max {
            lm.insert("max".into(), x.into());
        }
        m.insert("len".into(), Value::Object(lm));
    }
    for (k, v) in [
        ("present", r.present),
        ("absent", r.absent),
        ("distinct", r.distinct),
    ] {
        if let Some(b) = v {
            m.insert(k.into(), Value::Bool(b));
        }
    }
    m.insert("label".into(), Value::String(r.label.clone()));
    Value::Object(m)
}

/// Loads one file, or every `*.json` file under a folder (sorted by path), checking that ids are
/// unique. All problems are returned together.
pub fn load(path: &Path) -> Result<Vec<Task>, TaskErrors> {
    let mut errors = Vec::new();
    let files = task_files(path, &mut errors);
    let mut tasks: Vec<Task> = Vec::new();
    let mut ids = Ids::default();
    for (f, named) in files {
        let read = if named {
            crate::fsafe::read_bounded(&f, MAX_TASK_FILE)
        } else {
            crate::fsafe::read_own(&f, MAX_TASK_FILE)
        };
        let bytes = match read {
            Ok(b) => b,
            Err(e) => {
                errors.push(TaskError {
                    file: f,
                    path: String::new(),
                    problem: format!("cannot read: {e}"),
                });
                continue;
            }
        };
        match parse_task(&f, &bytes) {
            Ok(t) => match ids.claim(&t.id, f) {
                Ok(()) => tasks.push(t),
                Err(e) => errors.push(e),
            },
            Err(mut es) => errors.append(&mut es),
        }
    }
    if errors.is_empty() {
        tasks.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(tasks)
    } else {
        Err(TaskErrors(errors))
    }
}

/// The task files `path` names: itself, or the `*.json` files under it in sorted order, each
/// with whether it was named (a link the user names is followed; one found inside a task
/// folder is not: SPEC §12, turn 5). What cannot be read is said in `errors`.
fn task_files(path: &Path, errors: &mut Vec<TaskError>) -> Vec<(PathBuf, bool)> {
    let mut files = Vec::new();
    if path.is_file() {
        files.push((path.to_path_buf(), true));
    } else if path.is_dir() {
        for entry in walkdir::WalkDir::new(path).sort_by_file_name() {
            match entry {
                Ok(e)
                    if e.file_type().is_file()
                        && e.path().extension().is_some_and(|x| x == "json") =>
                {
                    files.push((e.into_path(), false))
                }
                Ok(e) if e.depth() > 0 && !e.file_type().is_dir() && !e.file_type().is_file() => {
                    if let Some(problem) = not_read(&e) {
                        errors.push(TaskError {
                            file: e.into_path(),
                            path: String::new(),
                            problem,
                        });
                    }
                }
                Ok(_) => {}
                Err(e) => errors.push(TaskError {
                    file: e
                        .path()
                        .map(Path::to_path_buf)
                        .unwrap_or_else(|| path.to_path_buf()),
                    path: String::new(),
                    problem: format!("cannot read: {e}"),
                }),
            }
        }
    } else {
        let problem = match crate::fsafe::not_file_or_folder(path) {
            Some(what) => format!("{what}: give a task file or a folder of them"),
            None => "no such file or folder".into(),
        };
        errors.push(TaskError {
            file: path.to_path_buf(),
            path: String::new(),
            problem,
        });
    }
    files
}

/// Why an entry of a task folder that is neither a file nor a folder is not read. It is said,
/// never skipped silently: a link (to a task or a folder of tasks) is not followed, and a
/// `.json` that is a FIFO, a device or a socket is not read.
fn not_read(e: &walkdir::DirEntry) -> Option<String> {
    let json = e.path().extension().is_some_and(|x| x == "json");
    if e.path_is_symlink() {
        Some(match crate::fsafe::not_file_or_folder(e.path()) {
            Some(what @ ("is a symlink loop" | "is a symlink to nothing")) => {
                format!("not read: it {what}")
            }
            _ => format!("not read: it {}", crate::fsafe::IS_SYMLINK),
        })
    } else if json {
        crate::fsafe::not_regular(&e.file_type())
            .map(|what| format!("not read: it {what}, not a regular file"))
    } else {
        None
    }
}

/// The task ids loaded so far, keyed by the id in lower case: ids differing only in case
/// collide on case-insensitive file systems (macOS and Windows checkouts, some Pages clones).
#[derive(Default)]
struct Ids(BTreeMap<String, (String, PathBuf)>);

impl Ids {
    /// Takes `id` for the task of `file`, unless it is too long or already taken.
    fn claim(&mut self, id: &str, file: PathBuf) -> Result<(), TaskError> {
        let refused = |problem: String| TaskError {
            file: file.clone(),
            path: "id".into(),
            problem,
        };
        if let Some(why) = crate::names::too_long("task id", id) {
            return Err(refused(format!("{id:?}: {why}")));
        }
        if let Some((taken, other)) = self.0.get(&crate::names::case_key(id)) {
            let problem = if taken == id {
                format!("id {id:?} is already used by {}", other.display())
            } else {
                format!(
                    "id {id:?} differs only in case from {taken:?} in {}: on a case-insensitive file system both would be one folder; rename one",
                    other.display()
                )
            };
            return Err(refused(problem));
        }
        self.0
            .insert(crate::names::case_key(id), (id.to_string(), file));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hex_is_lower_case_and_two_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(hex(&[]), "");
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    fn task_with(expect: Value, source: Option<Value>) -> Result<Task, Vec<TaskError>> {
        let mut t = json!({
            "id": "t", "title": "T", "tags": ["x"], "description": "d",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}}}}],
            "expect": expect
        });
        if let Some(s) = source {
            t["source"] = s;
        }
        parse_task(Path::new("t.json"), &serde_json::to_vec(&t).unwrap())
    }

    fn problems(r: Result<Task, Vec<TaskError>>) -> String {
        match r {
            Ok(_) => String::new(),
            Err(es) => es
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    #[test]
    fn accept_source_and_any_call_load() {
        let t = task_with(
            json!({"calls": [{"tool": "f", "gold": {"a": "x"}, "accept": {
                "a": {"values": ["x", "y"], "rule": "bfcl", "type": "string"},
                "b": {"values": [1], "omit": true}}}]}),
            Some(json!({"suite": "bfcl", "id": "simple_python_0", "category": "simple_python", "version": "BFCL_v4"})),
        )
        .unwrap();
        let a = t.expected_calls()[0].accept.as_ref().unwrap();
        assert_eq!(a["a"].rule, Rule::Bfcl);
        assert_eq!(a["b"].rule, Rule::Exact);
        assert!(a["b"].omit);
        assert_eq!(t.source.as_ref().unwrap().category, "simple_python");
        let t = task_with(
            json!({"calls": [{"tool": "f", "gold": {}}], "any_call": true}),
            None,
        )
        .unwrap();
        assert!(t.any_call);
    }

    #[test]
    fn lint_names_what_is_wrong_with_accept_source_and_any_call() {
        let p = problems(task_with(
            json!({"calls": [{"tool": "f", "gold": {"a": "z"}, "accept": {"a": {"values": ["x"]}}}]}),
            None,
        ));
        assert!(p.contains("expect.calls[0].gold: the gold arguments are not among those \"accept\" lists: \"a\""), "{p}");
        let p = problems(task_with(
            json!({"calls": [{"tool": "f", "gold": {}, "accept": {"a": {"values": [], "omit": false}}}]}),
            None,
        ));
        assert!(
            p.contains("expect.calls[0].accept.a: accepts nothing"),
            "{p}"
        );
        let p = problems(task_with(
            json!({"calls": [{"tool": "f", "gold": {"a": "x"}, "accept": {"a": {"values": ["x"], "rule": "bfcl"}}}]}),
            None,
        ));
        assert!(p.contains("needs the parameter's BFCL \"type\""), "{p}");
        let p = problems(task_with(
            json!({"calls": [{"tool": "f", "gold": {"a": "x"}, "accept": {"a": {"values": ["x"], "type": "string"}}}]}),
            None,
        ));
        assert!(p.contains("belong to the \"bfcl\" rule"), "{p}");
        let p = problems(task_with(
            json!({"calls": [{"tool": "f", "gold": {"a": "x"}, "where": [{"path": "/a", "present": true, "label": "missing_required"}]}], "any_call": true}),
            None,
        ));
        assert!(
            p.contains("with \"any_call\" the calls are examples"),
            "{p}"
        );
        let p = problems(task_with(json!({"no_call": true, "any_call": true}), None));
        assert!(
            p.contains("\"any_call\" marks \"calls\" as examples"),
            "{p}"
        );
        let p = problems(task_with(
            json!({"no_call": true}),
            Some(json!({"suite": "bfcl", "id": "", "category": "c", "version": "v"})),
        ));
        assert!(
            p.contains("source: suite, id, category and version must all be non-empty"),
            "{p}"
        );
        let p = problems(task_with(
            json!({"no_call": true}),
            Some(json!({"suite": "bfcl", "id": "x", "category": "c", "version": "v", "extra": 1})),
        ));
        assert!(p.contains("unknown field `extra`"), "{p}");
    }
}
