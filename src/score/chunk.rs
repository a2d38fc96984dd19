//! One chunk of a chat-completions stream, reduced to what reassembling the answer reads
//! ([`ChunkView`]), and two ways of getting there that give the same view:
//!
//! - [`ChunkView::of_value`], from the chunk parsed into a [`Value`]: the reference, which reads
//!   every chunk a client library would read;
//! - [`ChunkView::fast`], typed and borrowing from the event's text: no map of every field, no
//!   copy of a string without escapes. It gives up ([`None`]) on anything unusual, and the
//!   chunk is then read the reference way.
//!
//! A stream of a few hundred chunks is read for every sample a build scores, and parsing each
//! chunk into a [`Value`] was most of that. The fast reading gives up wherever it could differ
//! from the reference:
//!
//! - a field it reads has a type other than the usual one (a number for a string, an object
//!   for a list, an array for an object: serde would read a struct from an array by position);
//! - a field it reads appears twice (the reference keeps the last, silently);
//! - an `error` key, or `"object": "error"`: error events are rare and worded by the reference;
//! - the text holds a `\u` escape, or more than [`MAX_OPENINGS`] brackets: serde skips a field
//!   it does not read without checking that a `\u` escape is a whole character, or how deep
//!   the value nests, and the reference refuses both a lone surrogate and nesting past 128.
//!
//! `tests` in this module check the two against each other on every stream the scorer's fixtures
//! and the real captures hold, and on random mutations of realistic chunks.

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Number, Value};
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// Brackets (`[` or `{`, anywhere in the text) beyond which the fast reading gives up: serde
/// skips a field without a nesting limit, and the reference stops at 128 levels.
pub const MAX_OPENINGS: usize = 100;

/// What a chunk says, as reassembly reads it.
#[derive(Debug, Default, PartialEq)]
pub struct ChunkView<'a> {
    /// The message of an error event (`error`, or `"object": "error"`).
    pub error: Option<String>,
    /// `usage.completion_tokens`, when it is a non-negative integer.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens`, likewise.
    pub prompt_tokens: Option<u64>,
    /// `choices`, when it is a list.
    pub choices: Vec<ChoiceView<'a>>,
}

/// One element of `choices`.
#[derive(Debug, Default, PartialEq)]
pub struct ChoiceView<'a> {
    /// Its `index` is 0 or absent (or anything but a non-negative integer): the choice a client
    /// reads.
    pub first: bool,
    pub finish_reason: Option<Cow<'a, str>>,
    /// `delta.content`, when a string.
    pub content: Option<Cow<'a, str>>,
    /// `delta.tool_calls`, as a list.
    pub calls: Vec<CallView<'a>>,
    /// `delta.tool_calls` was one object rather than a list (a protocol deviation).
    pub calls_object: bool,
}

/// One element of `delta.tool_calls`.
#[derive(Debug, Default, PartialEq)]
pub struct CallView<'a> {
    pub index: Option<u64>,
    pub id: Option<Cow<'a, str>>,
    pub name: Option<Cow<'a, str>>,
    /// `function.name` is present and null.
    pub name_null: bool,
    pub arguments: ArgsView<'a>,
}

/// `function.arguments` of a call delta.
#[derive(Debug, Default, PartialEq)]
pub enum ArgsView<'a> {
    /// Absent or null.
    #[default]
    Missing,
    Text(Cow<'a, str>),
    /// Any other JSON value (a protocol deviation); only the reference reading gives it.
    Json(Value),
}

impl<'a> ChunkView<'a> {
    /// The chunk read the fast way, or `None` where only the reference may read it.
    pub fn fast(data: &'a str) -> Option<ChunkView<'a>> {
        let bytes = data.as_bytes();
        if bytes.first() != Some(&b'{')
            || memchr::memmem::find(bytes, b"\\u").is_some()
            || bytes.iter().filter(|&&b| b == b'[' || b == b'{').count() > MAX_OPENINGS
        {
            return None;
        }
        let chunk: Obj<Chunk<'a>> = serde_json::from_str(data).ok()?;
        let Chunk { usage, choices } = chunk.0;
        Some(ChunkView {
            error: None,
            completion_tokens: usage
                .as_ref()
                .and_then(|u| u.0.completion_tokens.as_ref())
                .and_then(|n| n.as_u64()),
            prompt_tokens: usage
                .and_then(|u| u.0.prompt_tokens)
                .and_then(|n| n.as_u64()),
            choices: choices
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.0.view())
                .collect(),
        })
    }

    /// The chunk read from its [`Value`], as a client library reads it.
    pub fn of_value(v: &'a Value) -> ChunkView<'a> {
        if let Some(msg) = error_message(v) {
            return ChunkView {
                error: Some(msg),
                ..ChunkView::default()
            };
        }
        let choices = v
            .get("choices")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        ChunkView {
            error: None,
            completion_tokens: usage(v, "completion_tokens"),
            prompt_tokens: usage(v, "prompt_tokens"),
            choices: choices.iter().map(ChoiceView::of_value).collect(),
        }
    }
}

impl<'a> ChoiceView<'a> {
    fn of_value(c: &'a Value) -> ChoiceView<'a> {
        let delta = c.get("delta");
        let (calls, calls_object) = match delta.and_then(|d| d.get("tool_calls")) {
            Some(Value::Array(items)) => (items.as_slice(), false),
            Some(one @ Value::Object(_)) => (std::slice::from_ref(one), true),
            _ => (&[][..], false),
        };
        ChoiceView {
            first: c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0,
            finish_reason: text_of(c.get("finish_reason")),
            content: text_of(delta.and_then(|d| d.get("content"))),
            calls: calls.iter().map(CallView::of_value).collect(),
            calls_object,
        }
    }
}

impl<'a> CallView<'a> {
    fn of_value(tc: &'a Value) -> CallView<'a> {
        let func = tc.get("function").unwrap_or(&Value::Null);
        CallView {
            index: tc.get("index").and_then(Value::as_u64),
            id: text_of(tc.get("id")),
            name: text_of(func.get("name")),
            name_null: func.get("name").is_some_and(Value::is_null),
            arguments: match func.get("arguments") {
                Some(Value::String(s)) => ArgsView::Text(Cow::Borrowed(s)),
                Some(Value::Null) | None => ArgsView::Missing,
                Some(other) => ArgsView::Json(other.clone()),
            },
        }
    }
}

fn text_of(v: Option<&Value>) -> Option<Cow<'_, str>> {
    v.and_then(Value::as_str).map(Cow::Borrowed)
}

/// The message of an error object or event: `error` (unless null), or `"object": "error"`.
pub fn error_message(v: &Value) -> Option<String> {
    if let Some(e) = v.get("error") {
        if e.is_null() {
            return None;
        }
        let msg = e
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| crate::json::preview(e, 200));
        return Some(msg);
    }
    if v.get("object").and_then(Value::as_str) == Some("error") {
        let msg = v
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)");
        return Some(msg.to_string());
    }
    None
}

// ---- the fast reading ----

/// A JSON string, borrowed from the text when it holds no escape.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_string())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The fields of one JSON object that the fast reading takes.
trait Fields<'de>: Default {
    /// Reads the value of `key` when it is one of this object's fields, and names the field;
    /// `None` for any other key (whose value the caller skips).
    fn field<A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<Option<&'static str>, A::Error>;
}

/// A JSON object read field by field: never an array (which a derived struct would read by
/// position), never a field twice (the reference keeps the last).
struct Obj<T>(T);

impl<'de, T: Fields<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Fields<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Obj<T>, A::Error> {
                let mut t = T::default();
                let mut seen: Vec<&'static str> = Vec::new();
                while let Some(key) = map.next_key::<Text<'de>>()? {
                    match t.field(&key.0, &mut map)? {
                        Some(name) if seen.contains(&name) => {
                            return Err(de::Error::duplicate_field(name));
                        }
                        Some(name) => seen.push(name),
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Obj(t))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// The [`Fields`] of a struct whose fields are each read as they are, under their own names.
macro_rules! plain_fields {
    ($ty:ty, [$($field:ident),*]) => {
        impl<'de> Fields<'de> for $ty {
            fn field<A: MapAccess<'de>>(
                &mut self,
                key: &str,
                map: &mut A,
            ) -> Result<Option<&'static str>, A::Error> {
                Ok(match key {
                    $(stringify!($field) => {
                        self.$field = map.next_value()?;
                        Some(stringify!($field))
                    })*
                    _ => None,
                })
            }
        }
    };
}

plain_fields!(Usage, [completion_tokens, prompt_tokens]);
plain_fields!(Choice<'de>, [index, finish_reason, delta]);
plain_fields!(Delta<'de>, [content, tool_calls]);
plain_fields!(CallDelta<'de>, [index, id, function]);

#[derive(Default)]
struct Chunk<'a> {
    usage: Option<Obj<Usage>>,
    choices: Option<Vec<Obj<Choice<'a>>>>,
}

impl<'de> Fields<'de> for Chunk<'de> {
    fn field<A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<Option<&'static str>, A::Error> {
        Ok(Some(match key {
            "usage" => {
                self.usage = map.next_value()?;
                "usage"
            }
            "choices" => {
                self.choices = map.next_value()?;
                "choices"
            }
            // An error event is left to the reference reading, which words its message.
            "error" => return Err(de::Error::custom("an error event")),
            "object" => {
                if map
                    .next_value::<Option<Text<'de>>>()?
                    .is_some_and(|t| t.0 == "error")
                {
                    return Err(de::Error::custom("an error event"));
                }
                "object"
            }
            _ => return Ok(None),
        }))
    }
}

#[derive(Default)]
struct Usage {
    completion_tokens: Option<Number>,
    prompt_tokens: Option<Number>,
}

#[derive(Default)]
struct Choice<'a> {
    index: Option<Number>,
    finish_reason: Option<Text<'a>>,
    delta: Option<Obj<Delta<'a>>>,
}

impl<'a> Choice<'a> {
    fn view(self) -> ChoiceView<'a> {
        let delta = self.delta.map(|d| d.0).unwrap_or_default();
        ChoiceView {
            first: self.index.and_then(|n| n.as_u64()).unwrap_or(0) == 0,
            finish_reason: self.finish_reason.map(|t| t.0),
            content: delta.content.map(|t| t.0),
            calls: delta
                .tool_calls
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.0.view())
                .collect(),
            calls_object: false,
        }
    }
}

#[derive(Default)]
struct Delta<'a> {
    content: Option<Text<'a>>,
    tool_calls: Option<Vec<Obj<CallDelta<'a>>>>,
}

#[derive(Default)]
struct CallDelta<'a> {
    index: Option<Number>,
    id: Option<Text<'a>>,
    function: Option<Obj<Function<'a>>>,
}

impl<'a> CallDelta<'a> {
    fn view(self) -> CallView<'a> {
        let f = self.function.map(|f| f.0).unwrap_or_default();
        CallView {
            index: self.index.and_then(|n| n.as_u64()),
            id: self.id.map(|t| t.0),
            name: f.name.map(|t| t.0),
            name_null: f.name_null,
            arguments: f
                .arguments
                .map_or(ArgsView::Missing, |t| ArgsView::Text(t.0)),
        }
    }
}

#[derive(Default)]
struct Function<'a> {
    name: Option<Text<'a>>,
    name_null: bool,
    arguments: Option<Text<'a>>,
}

impl<'de> Fields<'de> for Function<'de> {
    fn field<A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<Option<&'static str>, A::Error> {
        Ok(Some(match key {
            "name" => {
                self.name = map.next_value()?;
                self.name_null = self.name.is_none();
                "name"
            }
            "arguments" => {
                self.arguments = map.next_value()?;
                "arguments"
            }
            _ => return Ok(None),
        }))
    }
}

/// A token count of a response's `usage` object (`completion_tokens`, `prompt_tokens`), where
/// it is a whole number: a body's and a stream chunk's are read the same way.
pub(super) fn usage(v: &Value, key: &str) -> Option<u64> {
    v.get("usage")
        .and_then(|u| u.get(key))
        .and_then(Value::as_u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference reading of `data`, or `None` where it is not JSON.
    fn reference(data: &str) -> Option<Value> {
        serde_json::from_str(data).ok()
    }

    /// Every SSE event's data in the fixtures: the scorer's cases, the real captures, the
    /// runs/ trees.
    fn fixture_events() -> Vec<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut out = Vec::new();
        for e in walkdir::WalkDir::new(&root).sort_by_file_name() {
            let e = e.unwrap();
            if e.path().extension().is_some_and(|x| x == "sse") {
                let body = std::fs::read(e.path()).unwrap();
                let (events, _) = crate::score::wire::sse_events(&body);
                out.extend(events.into_iter().map(|e| e.data.trim().to_string()));
            }
        }
        out
    }

    /// Whenever the fast reading answers, the reference gives the same view.
    fn agree(data: &str) -> Result<bool, TestCaseError> {
        let Some(fast) = ChunkView::fast(data) else {
            return Ok(false);
        };
        let v = reference(data);
        prop_assert!(
            v.is_some(),
            "the fast reading took {data:?}, which is not JSON"
        );
        prop_assert_eq!(&fast, &ChunkView::of_value(v.as_ref().unwrap()), "{}", data);
        Ok(true)
    }

    #[test]
    fn the_fast_reading_agrees_on_every_fixture_chunk_and_reads_most_of_them() {
        let events = fixture_events();
        let json: Vec<&String> = events.iter().filter(|d| d.starts_with('{')).collect();
        assert!(
            json.len() > 500,
            "only {} JSON chunks in the fixtures",
            json.len()
        );
        let mut fast = 0;
        for d in &json {
            fast += agree(d).unwrap() as usize;
        }
        // Not a test that passes by never taking the fast way: the usual chunk takes it.
        assert!(
            fast * 10 >= json.len() * 9,
            "the fast reading took only {fast} of {} chunks",
            json.len()
        );
    }

    #[test]
    fn the_fast_reading_gives_up_where_it_could_differ() {
        for (data, why) in [
            (
                r#"{"choices":[[0,"stop"]]}"#,
                "a choice that is an array (a struct would read it by position)",
            ),
            (
                r#"{"choices":[{"index":0,"finish_reason":"stop","finish_reason":null}]}"#,
                "a field twice",
            ),
            (
                r#"{"id":"\ud800","choices":[{"index":0,"finish_reason":"stop"}]}"#,
                "a lone surrogate in a field it skips (the reference refuses the chunk)",
            ),
            (r#"{"error":{"message":"overloaded"}}"#, "an error event"),
            (
                r#"{"object":"error","message":"overloaded"}"#,
                "an error event",
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"tool_calls":{"index":0}}}]}"#,
                "tool_calls as an object",
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":{"a":1}}}]}}]}"#,
                "arguments as an object",
            ),
            (
                r#"{"choices":[{"index":"0"}]}"#,
                "an index that is a string",
            ),
            (r#"[{"choices":[]}]"#, "a chunk that is an array"),
        ] {
            assert!(ChunkView::fast(data).is_none(), "took {why}: {data}");
        }
        // Nesting the reference refuses (past 128 levels), in a field the fast reading skips.
        let deep = format!(
            r#"{{"x":{}{},"choices":[]}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert!(reference(&deep).is_none());
        assert!(ChunkView::fast(&deep).is_none());
        // What the reference makes of the lone surrogate and of the array-shaped choice.
        assert!(reference(r#"{"id":"\ud800"}"#).is_none());
        let v = reference(r#"{"choices":[[0,"stop"]]}"#).unwrap();
        let view = ChunkView::of_value(&v);
        assert!(view.choices[0].first && view.choices[0].finish_reason.is_none());
    }

    #[test]
    fn the_fast_reading_borrows_what_it_can() {
        let data = r#"{"id":"x","object":"chat.completion.chunk","created":1,"choices":[{"index":0,"delta":{"content":"a\"b","tool_calls":[{"index":1,"id":"c1","function":{"name":null,"arguments":"{\"k\":"}}]},"finish_reason":null}],"usage":{"completion_tokens":7}}"#;
        let view = ChunkView::fast(data).expect("a usual chunk");
        assert_eq!(view.completion_tokens, Some(7));
        let c = &view.choices[0];
        assert!(c.first);
        assert_eq!(c.content.as_deref(), Some("a\"b"));
        let call = &c.calls[0];
        assert_eq!(
            (call.index, call.id.as_deref(), call.name_null),
            (Some(1), Some("c1"), true)
        );
        assert!(matches!(call.id, Some(Cow::Borrowed(_))));
        assert!(matches!(&call.arguments, ArgsView::Text(Cow::Owned(t)) if t == "{\"k\":"));
        assert_eq!(view, ChunkView::of_value(&reference(data).unwrap()));
    }

    /// Realistic chunks: vLLM's and llama.cpp's envelopes around content, a call's deltas,
    /// a finish, usage.
    fn chunk() -> impl Strategy<Value = String> {
        let text = prop_oneof![
            Just("hello".to_string()),
            Just("{\\\"city\\\": \\\"Paris\\\"}".to_string()),
            Just("\\n\\t".to_string()),
            Just("é ü 中".to_string()),
            Just(String::new()),
        ];
        let delta = prop_oneof![
            text.clone()
                .prop_map(|t| format!(r#"{{"role":"assistant","content":"{t}"}}"#)),
            (0u8..3, text.clone()).prop_map(|(i, t)| format!(
                r#"{{"tool_calls":[{{"index":{i},"id":"call_{i}","type":"function","function":{{"name":"get_weather","arguments":"{t}"}}}}]}}"#
            )),
            text.prop_map(|t| format!(
                r#"{{"tool_calls":[{{"index":0,"function":{{"arguments":"{t}"}}}}]}}"#
            )),
            Just("{}".to_string()),
            Just(r#"{"content":null,"reasoning_content":"hm"}"#.to_string()),
        ];
        let finish = prop_oneof![
            Just("null"),
            Just(r#""stop""#),
            Just(r#""tool_calls""#),
            Just(r#""length""#)
        ];
        let usage = prop_oneof![
            Just(String::new()),
            Just(r#","usage":null"#.to_string()),
            Just(
                r#","usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}"#
                    .to_string()
            ),
        ];
        (delta, finish, usage, 0u8..2).prop_map(|(delta, finish, usage, index)| {
            format!(
                r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"org/m","choices":[{{"index":{index},"delta":{delta},"logprobs":null,"finish_reason":{finish}}}]{usage}}}"#
            )
        })
    }

    /// One edit of a chunk's text with the characters JSON turns on.
    fn mutated() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("{"),
            Just("}"),
            Just("["),
            Just("]"),
            Just("\""),
            Just(","),
            Just(":"),
            Just("\\"),
            Just("\\u"),
            Just("\\ud800"),
            Just("\\u00e9"),
            Just("null"),
            Just("0"),
            Just("-1"),
            Just("1.5"),
            Just("1e400"),
            Just("true"),
            Just("\u{1}"),
            Just(" "),
            Just(r#""index":"#),
            Just(r#""choices":"#),
            Just(r#""error":"#),
            Just(r#""name":"#),
            Just(r#""arguments":"#),
            Just(r#""tool_calls":"#),
            Just(r#""object":"error""#),
            Just(r#""completion_tokens":"#),
            Just(""),
        ];
        (
            chunk(),
            prop::collection::vec((any::<prop::sample::Index>(), 0usize..4, piece), 1..3),
        )
            .prop_map(|(mut s, edits)| {
                for (at, cut, piece) in edits {
                    let mut i = at.index(s.len() + 1);
                    while !s.is_char_boundary(i) {
                        i -= 1;
                    }
                    let mut j = (i + cut).min(s.len());
                    while !s.is_char_boundary(j) {
                        j += 1;
                    }
                    s.replace_range(i..j, piece);
                }
                s
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn realistic_chunks_read_the_same_both_ways(data in chunk()) {
            prop_assert!(agree(&data)?, "the fast reading gave up on a usual chunk: {}", data);
        }

    }

    #[test]
    fn mutated_chunks_read_the_same_whenever_the_fast_reading_answers() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = mutated();
        let (mut fast, mut refused) = (0, 0);
        for _ in 0..8_000 {
            let data = strategy.new_tree(&mut runner).unwrap().current();
            fast += agree(&data).unwrap() as usize;
            refused += reference(&data).is_none() as usize;
        }
        // The edits reach both sides: chunks the fast reading takes, and chunks the reference
        // refuses (which the fast reading must then refuse too).
        assert!(
            fast > 1_200 && refused > 1_200,
            "fast {fast}, refused {refused}"
        );
    }
}
