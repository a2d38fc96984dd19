//! The server's description as `cell.json` records it (SPEC §4): the preflight's checks, in the
//! order collect makes them, and the model list each endpoint answered. Collect writes it; the
//! model page reads it.

use serde_json::Value;

/// The checks, in the order `run` makes them and `cell.json` records them (a row whose server
/// fails `models` or `model_id` stops after those two).
pub const CHECKS: [&str; 7] = [
    "models",
    "model_id",
    "tools_in_prompt",
    "tool_choice_auto",
    "tool_choice_required",
    "tool_choice_named",
    "stream",
];

/// The model ids one endpoint's recorded `/models` answer lists (`cell.json`'s
/// `server.endpoints[]`), or `None` when it holds no model list. Reads both shapes: the
/// bounded model-list summary collect writes, and the whole body that collections before it stored.
pub fn listed_model_ids(endpoint: &Value) -> Option<Vec<String>> {
    if let Some(ids) = endpoint.pointer("/models/ids").and_then(Value::as_array) {
        return Some(
            ids.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        );
    }
    let data = endpoint.pointer("/models/data")?.as_array()?;
    Some(
        data.iter()
            .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_string))
            .collect(),
    )
}

/// The model ids an endpoint lists, for people: the ids, and how many more there were or that
/// the list was cut (new summaries only; an old whole body lists every id).
pub fn listed_models_text(endpoint: &Value) -> Option<String> {
    let ids = listed_model_ids(endpoint)?;
    if ids.is_empty() {
        return None;
    }
    let count = endpoint
        .pointer("/models/count")
        .and_then(Value::as_u64)
        .map_or(ids.len(), |c| c as usize);
    let cut = endpoint
        .pointer("/models/truncated")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut s = ids.join(", ");
    if count > ids.len() {
        s.push_str(&format!(" (+{} more)", count - ids.len()));
    }
    if cut {
        s.push_str(" (list cut at the preflight's read cap)");
    }
    Some(s)
}
