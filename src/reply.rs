//! A scripted model reply and its two wire renderings: a chat-completions JSON body and an SSE
//! stream chunked the way vLLM chunks it (role first, tool-call deltas with the name once and
//! argument fragments split anywhere, a finish chunk, a usage chunk, `[DONE]`).
//!
//! The mock server answers with these, and the mutation test scores them, so the scorer and the
//! collector are proven against the same bytes.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

/// One call in a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyCall {
    pub name: String,
    /// The arguments text exactly as it goes on the wire (it may be deliberately broken).
    pub arguments: String,
}

/// What a scripted model answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub content: Option<String>,
    pub tool_calls: Vec<ReplyCall>,
    pub finish_reason: String,
    pub completion_tokens: u64,
}

/// Fixed so that the mock's bytes are reproducible; real servers send the time.
const CREATED: u64 = 1_767_225_600;

/// A rough token count for text: what the mock reports in `usage`.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4).max(1)
}

impl Reply {
    /// A reply carrying calls, with `finish_reason` "tool_calls" and an honest token count.
    pub fn calls(calls: Vec<ReplyCall>) -> Reply {
        let tokens = calls
            .iter()
            .map(|c| estimate_tokens(&c.name) + estimate_tokens(&c.arguments) + 4)
            .sum();
        Reply {
            content: None,
            tool_calls: calls,
            finish_reason: "tool_calls".into(),
            completion_tokens: tokens,
        }
    }

    /// A reply carrying only text, with `finish_reason` "stop".
    pub fn text(content: impl Into<String>) -> Reply {
        let content = content.into();
        let tokens = estimate_tokens(&content);
        Reply {
            content: Some(content),
            tool_calls: Vec::new(),
            finish_reason: "stop".into(),
            completion_tokens: tokens,
        }
    }
}

fn hex_id(rng: &mut Xoshiro256PlusPlus, len: usize) -> String {
    (0..len)
        .map(|_| char::from_digit(rng.random_range(0..16u32), 16).unwrap_or('0'))
        .collect()
}

/// Renders a non-streamed body, vLLM style (with its extra fields, as real bodies carry them).
pub fn render_json(reply: &Reply, model: &str, prompt_tokens: u64, seed: u64) -> Vec<u8> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let id = format!("chatcmpl-{}", hex_id(&mut rng, 32));
    let tool_calls: Vec<Value> = reply
        .tool_calls
        .iter()
        .map(|c| {
            json!({"id": format!("chatcmpl-tool-{}", hex_id(&mut rng, 32)), "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect();
    let body = json!({
        "id": id,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "reasoning_content": null, "content": reply.content, "tool_calls": tool_calls},
            "logprobs": null,
            "finish_reason": reply.finish_reason,
            "stop_reason": null
        }],
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + reply.completion_tokens,
                  "completion_tokens": reply.completion_tokens, "prompt_tokens_details": null},
        "prompt_logprobs": null
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Splits text into pieces of 1–`max` characters at random character boundaries: a stream's
/// argument fragments fall anywhere, inside escapes and between the digits of a number.
fn pieces(text: &str, max: usize, rng: &mut Xoshiro256PlusPlus) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let n = rng.random_range(1..=max.max(1)).min(chars.len() - i);
        out.push(chars[i..i + n].iter().collect());
        i += n;
    }
    out
}

/// One SSE event line for a chunk.
fn event(chunk: &Value) -> String {
    format!(
        "data: {}\n\n",
        serde_json::to_string(chunk).unwrap_or_default()
    )
}

/// Renders the reply as the list of SSE events a server would send, in order (the mock writes
/// them one by one, so a fault can cut the stream between or inside them).
pub fn render_sse_events(
    reply: &Reply,
    model: &str,
    prompt_tokens: u64,
    include_usage: bool,
    seed: u64,
) -> Vec<String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let id = format!("chatcmpl-{}", hex_id(&mut rng, 32));
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": id, "object": "chat.completion.chunk", "created": CREATED, "model": model,
               "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    let mut events = vec![event(&chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    ))];
    if let Some(content) = &reply.content {
        for p in pieces(content, 12, &mut rng) {
            events.push(event(&chunk(json!({"content": p}), None)));
        }
    }
    for (i, c) in reply.tool_calls.iter().enumerate() {
        let call_id = format!("chatcmpl-tool-{}", hex_id(&mut rng, 32));
        events.push(event(&chunk(
            json!({"tool_calls": [{"index": i, "id": call_id, "type": "function", "function": {"name": c.name, "arguments": ""}}]}),
            None,
        )));
        for p in pieces(&c.arguments, 9, &mut rng) {
            events.push(event(&chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                None,
            )));
        }
    }
    events.push(event(&chunk(json!({}), Some(&reply.finish_reason))));
    if include_usage {
        events.push(event(&json!({"id": id, "object": "chat.completion.chunk", "created": CREATED, "model": model, "choices": [],
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + reply.completion_tokens, "completion_tokens": reply.completion_tokens}})));
    }
    events.push("data: [DONE]\n\n".to_string());
    events
}

/// The whole SSE stream as bytes.
pub fn render_sse(
    reply: &Reply,
    model: &str,
    prompt_tokens: u64,
    include_usage: bool,
    seed: u64,
) -> Vec<u8> {
    render_sse_events(reply, model, prompt_tokens, include_usage, seed)
        .concat()
        .into_bytes()
}
