//! Building the chat-completions request body for a task and a model row. The body is what
//! collect sends and records byte for byte; the scorer reads `max_tokens` and the tools from it.

use crate::task::Task;
use serde_json::{Map, Value};

/// The header collect adds so a server's logs (and the mock) can tell which sample a request
/// is: `<task-id>/<sample index in the cell>/<attempt>`. Real servers ignore it.
pub const SAMPLE_HEADER: &str = "x-callcheck-sample";

/// The header a preflight probe carries instead of [`SAMPLE_HEADER`]: `<check>/<attempt>`
/// (the preflight of collect). Real servers ignore it; the mock answers probes by it.
pub const PREFLIGHT_HEADER: &str = "x-callcheck-preflight";

/// The header a follow-up of the feedback round carries beside [`SAMPLE_HEADER`]:
/// `<style>/<label of the parent>`. Real servers ignore it; the mock's scripted models answer
/// feedback by it (SPEC §11).
pub const FEEDBACK_HEADER: &str = "x-callcheck-feedback";

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

/// The seed sent with sample `sample` of a cell when its row sets `seed`: derived from the
/// row's seed, the task id and the sample number, so the k samples of a cell are k draws (the
/// same seed k times makes a deterministic server answer the same bytes k times: one
/// observation counted as k) and a re-collection sends the same seeds again. Kept below 2^31
/// because servers parse seeds as 32- or 64-bit, signed or not.
pub fn sample_seed(row_seed: i64, task_id: &str, sample: u32) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{row_seed}\n{task_id}\n{sample}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) % (1 << 31)) as i64
}

/// The request body of one sample: [`chat_request`], with the row's integer `seed` (when it
/// sets one and the task does not) replaced by [`sample_seed`]; the body is recorded as sent,
/// so `request.json` says which seed each sample had.
pub fn sample_request(task: &Task, asking: &Asking, sample: u32) -> Value {
    let mut body = chat_request(task, asking);
    if let Some(row_seed) = asking.params.get("seed").and_then(Value::as_i64)
        && !task.request.contains_key("seed")
        && let Some(o) = body.as_object_mut()
    {
        o.insert(
            "seed".into(),
            Value::from(sample_seed(row_seed, &task.id, sample)),
        );
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_seeds_differ_per_sample_and_task_and_never_change() {
        // Fixed values: a re-collection must send the same seeds, whatever the version.
        // (sha256 of "7\nbasic-weather-city\n0", first 8 bytes big-endian, mod 2^31.)
        assert_eq!(sample_seed(7, "basic-weather-city", 0), 1_282_301_783);
        assert_eq!(sample_seed(7, "basic-weather-city", 1), 1_086_937_940);
        let seeds: std::collections::BTreeSet<i64> =
            (0..100).map(|i| sample_seed(7, "t", i)).collect();
        assert_eq!(seeds.len(), 100);
        assert_ne!(sample_seed(7, "a", 0), sample_seed(7, "b", 0));
        assert_ne!(sample_seed(7, "a", 0), sample_seed(8, "a", 0));
        assert!((0..1000).all(|i| (0..1 << 31).contains(&sample_seed(-3, "x", i))));
    }
}
