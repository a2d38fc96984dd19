//! Building the chat-completions request body for a task and a model row. The body is what
//! collect sends and records byte for byte; the scorer reads `max_tokens` and the tools from it.

use crate::task::Task;
use serde_json::{Map, Value};

/// How one model row asks (SPEC §5): served model id, sampling parameters, streaming, an
/// optional system prompt and extra body fields.
#[derive(Debug, Clone, Default)]
pub struct Asking {
    pub model: String,
    pub system: Option<String>,
    pub stream: bool,
    /// Sampling parameters: temperature, top_p, max_tokens, seed…
    pub params: Map<String, Value>,
    /// Extra request body fields (server-specific).
    pub extra: Map<String, Value>,
}

/// The request body. Precedence, lowest first: the model row's parameters and extra fields,
/// then the task's own `request` fields (a long-argument task may need a larger `max_tokens`).
pub fn chat_request(task: &Task, asking: &Asking) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(asking.model.clone()));
    let mut messages = Vec::new();
    if let Some(system) = &asking.system {
        // A checklist system prompt goes first; a task's own system message follows it.
        messages.push(serde_json::json!({"role": "system", "content": system}));
    }
    messages.extend(task.messages.iter().cloned());
    body.insert("messages".into(), Value::Array(messages));
    if !task.tools_json.is_empty() {
        body.insert("tools".into(), Value::Array(task.tools_json.clone()));
    }
    if let Some(tc) = &task.tool_choice {
        body.insert("tool_choice".into(), tc.clone());
    }
    if let Some(rf) = &task.response_format {
        body.insert("response_format".into(), rf.clone());
    }
    for (k, v) in &asking.params {
        body.insert(k.clone(), v.clone());
    }
    for (k, v) in &asking.extra {
        body.insert(k.clone(), v.clone());
    }
    for (k, v) in &task.request {
        body.insert(k.clone(), v.clone());
    }
    body.insert("stream".into(), Value::Bool(asking.stream));
    if asking.stream && !body.contains_key("stream_options") {
        body.insert(
            "stream_options".into(),
            serde_json::json!({"include_usage": true}),
        );
    }
    Value::Object(body)
}
