//! Server bugs of the streaming path that the mock reproduces, selectable per scripted model
//! (`stream_bugs` in `mock.toml`). Each is a reported bug of a real server's tool parser: the
//! calls a client reassembles from the stream differ from the non-streamed answer of the same
//! model, so a stream-vs-non-stream comparison isolates them as what they are, server faults.
//!
//! Written from the reports and the fixes' descriptions (vLLM #11392, #28806 and PR #37098 for
//! hermes; #47901 and PR #47954 for xlam/hunyuan_a13b; PR #53965 for HY-V3; #42021 for calls
//! left as Qwen3-Coder XML), checked against vLLM's shipped `hermes_tool_parser.py` (an empty
//! `arguments` is falsy, so "no arguments have been created yet" skips it, and the name delta
//! is dumped with `exclude_none`: no `arguments` key at all) and `xlam_tool_parser.py` (its
//! `re.search` for `"arguments": {}` matches an earlier call and marks the current one empty),
//! not from a run of those servers.

use crate::reply::Reply;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One streaming-path server bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamBug {
    /// vLLM's hermes parser (#11392, #28806): a parameterless call's `{}` is never streamed,
    /// only its name arrives (the parser's truthiness check treats `{}` as nothing to send).
    DropEmptyArguments,
    /// vLLM's xlam and hunyuan_a13b parsers (#47901): once a call with empty arguments has
    /// been seen, every later call is streamed with `{}` and its real arguments are lost.
    DropArgumentsAfterEmpty,
    /// vLLM's HY-V3 parser before PR #53965: several complete calls arrive in one engine delta;
    /// the first is streamed (whole, in one delta) and the rest stay in the parser's buffer.
    OneDeltaKeepsFirst,
    /// The server's parser does not recognise Qwen3-Coder's XML call form (vLLM #42021): the
    /// calls arrive as content text, `finish_reason` "stop".
    QwenXmlInContent,
}

impl StreamBug {
    /// What the bug did to one reply, for the mock's request log.
    fn describe(self) -> &'static str {
        match self {
            StreamBug::DropEmptyArguments => "the stream dropped the {} of a parameterless call",
            StreamBug::DropArgumentsAfterEmpty => {
                "the stream sent {} for every call after an empty-argument call"
            }
            StreamBug::OneDeltaKeepsFirst => {
                "the calls came in one delta and the stream kept only the first"
            }
            StreamBug::QwenXmlInContent => {
                "the stream left the calls as Qwen3-Coder XML in content"
            }
        }
    }
}

fn is_empty_object(arguments: &str) -> bool {
    serde_json::from_str::<Value>(arguments)
        .is_ok_and(|v| v.as_object().is_some_and(serde_json::Map::is_empty))
}

/// Qwen3-Coder's XML form of the calls: strings as their text, other values as JSON.
fn qwen_xml(reply: &Reply) -> String {
    let mut out = Vec::new();
    for c in &reply.tool_calls {
        let mut block = format!("<tool_call>\n<function={}>\n", c.name);
        if let Ok(Value::Object(args)) = serde_json::from_str::<Value>(&c.arguments) {
            for (k, v) in args {
                let text = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                block.push_str(&format!("<parameter={k}>\n{text}\n</parameter>\n"));
            }
        }
        block.push_str("</function>\n</tool_call>");
        out.push(block);
    }
    out.join("\n")
}

/// The reply as a server with `bugs` lets it through its streaming path, and what was done.
/// The bugs that show in the reply itself (arguments replaced, calls lost or left as text) are
/// applied here; [`events_as_streamed`] applies the ones that show only in the deltas.
pub fn reply_as_streamed(bugs: &[StreamBug], mut reply: Reply) -> (Reply, Vec<&'static str>) {
    let mut done = Vec::new();
    if bugs.contains(&StreamBug::DropArgumentsAfterEmpty)
        && let Some(first) = reply
            .tool_calls
            .iter()
            .position(|c| is_empty_object(&c.arguments))
    {
        let mut changed = false;
        for c in reply.tool_calls.iter_mut().skip(first + 1) {
            if !is_empty_object(&c.arguments) {
                c.arguments = "{}".into();
                changed = true;
            }
        }
        if changed {
            done.push(StreamBug::DropArgumentsAfterEmpty.describe());
        }
    }
    if bugs.contains(&StreamBug::OneDeltaKeepsFirst) && reply.tool_calls.len() > 1 {
        reply.tool_calls.truncate(1);
        done.push(StreamBug::OneDeltaKeepsFirst.describe());
    }
    if bugs.contains(&StreamBug::QwenXmlInContent) && !reply.tool_calls.is_empty() {
        let xml = qwen_xml(&reply);
        reply.content = Some(match reply.content.take() {
            Some(prose) if !prose.is_empty() => format!("{prose}\n{xml}"),
            _ => xml,
        });
        reply.tool_calls.clear();
        reply.finish_reason = "stop".into();
        done.push(StreamBug::QwenXmlInContent.describe());
    }
    (reply, done)
}

/// The SSE events of `reply` (rendered by `reply::render_sse_events`) as the buggy server
/// sends them: the `{}` of parameterless calls never sent, or the one call left whole in a
/// single delta. Events that are not chunks pass unchanged.
pub fn events_as_streamed(
    bugs: &[StreamBug],
    reply: &Reply,
    events: Vec<String>,
) -> (Vec<String>, Vec<&'static str>) {
    let drop_empty: Vec<bool> = reply
        .tool_calls
        .iter()
        .map(|c| bugs.contains(&StreamBug::DropEmptyArguments) && is_empty_object(&c.arguments))
        .collect();
    let one_delta = bugs.contains(&StreamBug::OneDeltaKeepsFirst);
    if !drop_empty.contains(&true) && !one_delta {
        return (events, Vec::new());
    }
    let mut done = Vec::new();
    if drop_empty.contains(&true) {
        done.push(StreamBug::DropEmptyArguments.describe());
    }
    let mut out = Vec::new();
    for ev in events {
        let Some(mut chunk) = ev
            .strip_prefix("data: ")
            .and_then(|d| serde_json::from_str::<Value>(d.trim_end()).ok())
        else {
            out.push(ev);
            continue;
        };
        let Some(calls) = chunk
            .pointer_mut("/choices/0/delta/tool_calls")
            .and_then(Value::as_array_mut)
        else {
            out.push(ev);
            continue;
        };
        calls.retain_mut(|tc| {
            let i = tc.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            let starts = tc.pointer("/function/name").is_some();
            if drop_empty.get(i) == Some(&true) {
                if let Some(f) = tc.get_mut("function").and_then(Value::as_object_mut) {
                    f.remove("arguments");
                }
                return starts;
            }
            if one_delta {
                // The call arrives whole: its start carries all of its arguments.
                if starts {
                    if let (Some(f), Some(c)) = (
                        tc.get_mut("function").and_then(Value::as_object_mut),
                        reply.tool_calls.get(i),
                    ) {
                        f.insert("arguments".into(), Value::String(c.arguments.clone()));
                    }
                    return true;
                }
                return false;
            }
            true
        });
        if calls.is_empty() {
            continue;
        }
        out.push(format!(
            "data: {}\n\n",
            serde_json::to_string(&chunk).unwrap_or_default()
        ));
    }
    (out, done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::{ReplyCall, render_sse_events};

    fn call(name: &str, arguments: &str) -> ReplyCall {
        ReplyCall {
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    /// The calls a client reassembles from the events, by index: (name, arguments text or
    /// `None` when no arguments were ever sent).
    fn reassembled(events: &[String]) -> Vec<(String, Option<String>)> {
        let body = events.concat();
        let c = crate::score::wire::parse_stream(body.as_bytes()).unwrap();
        c.tool_calls
            .into_iter()
            .map(|w| {
                let args = match w.arguments {
                    crate::score::wire::WireArgs::Text(t) => Some(t),
                    crate::score::wire::WireArgs::Absent => None,
                    crate::score::wire::WireArgs::Json(v) => Some(v.to_string()),
                };
                (w.name.unwrap_or_default(), args)
            })
            .collect()
    }

    fn stream(bugs: &[StreamBug], reply: Reply) -> (Vec<String>, Vec<&'static str>) {
        let (reply, mut done) = reply_as_streamed(bugs, reply);
        let events = render_sse_events(&reply, "m", 10, true, 3);
        let (events, more) = events_as_streamed(bugs, &reply, events);
        done.extend(more);
        (events, done)
    }

    #[test]
    fn each_bug_changes_what_a_client_reassembles_as_reported() {
        let pair = || {
            Reply::calls(vec![
                call("get_server_status", "{}"),
                call("get_weather", "{\"city\": \"Oslo\"}"),
            ])
        };
        let (ev, done) = stream(&[StreamBug::DropEmptyArguments], pair());
        assert_eq!(
            reassembled(&ev),
            [
                ("get_server_status".to_string(), None),
                (
                    "get_weather".to_string(),
                    Some("{\"city\": \"Oslo\"}".into())
                )
            ]
        );
        assert_eq!(done, ["the stream dropped the {} of a parameterless call"]);

        let (ev, _) = stream(&[StreamBug::DropArgumentsAfterEmpty], pair());
        assert_eq!(
            reassembled(&ev),
            [
                ("get_server_status".to_string(), Some("{}".into())),
                ("get_weather".to_string(), Some("{}".into()))
            ]
        );

        let (ev, _) = stream(&[StreamBug::OneDeltaKeepsFirst], pair());
        assert_eq!(
            reassembled(&ev),
            [("get_server_status".to_string(), Some("{}".into()))]
        );
        // The first call arrives whole in its one delta.
        let deltas = ev.iter().filter(|e| e.contains("tool_calls\":[")).count();
        assert_eq!(deltas, 1, "{ev:?}");

        let (ev, _) = stream(&[StreamBug::QwenXmlInContent], pair());
        let c = crate::score::wire::parse_stream(ev.concat().as_bytes()).unwrap();
        assert!(c.tool_calls.is_empty());
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        assert_eq!(
            c.content.as_deref(),
            Some(
                "<tool_call>\n<function=get_server_status>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"
            )
        );
    }

    #[test]
    fn a_reply_the_bug_does_not_concern_streams_unchanged() {
        let one = Reply::calls(vec![call("get_weather", "{\"city\": \"Oslo\"}")]);
        let plain = render_sse_events(&one, "m", 10, true, 3);
        let (ev, done) = stream(
            &[
                StreamBug::DropEmptyArguments,
                StreamBug::DropArgumentsAfterEmpty,
            ],
            one,
        );
        assert_eq!(ev, plain);
        assert!(done.is_empty());
    }
}
