//! How many different answers a cell's samples hold: k identical answers are one observation,
//! not k, and an interval computed over them overstates the evidence.

use crate::score::wire::{self, WireArgs, WireCall};
use sha2::{Digest, Sha256};

/// A fingerprint of what the model answered in one response: its text, its calls (name and
/// arguments), its function_call and its finish reason, hashed. Not the raw bytes: every
/// response carries its own id and timestamp (and streamed ones their chunking), so byte
/// hashes would call two identical answers different. A body that does not parse as a
/// completion is fingerprinted by its bytes.
pub fn fingerprint(body: &[u8], streamed: bool) -> u128 {
    let parsed = if streamed {
        wire::parse_stream(body)
    } else {
        wire::parse_body(body)
    };
    fingerprint_parsed(&parsed, body)
}

/// [`fingerprint`] of a response already read. 128 bits of sha256: ample to tell the answers
/// of one cell apart, and the build holds one per sample (as a number: 16 bytes, where a hex
/// string took 56 and an allocation).
pub fn fingerprint_parsed(
    parsed: &Result<wire::Completion, wire::TransportFailure>,
    body: &[u8],
) -> u128 {
    let mut h = Sha256::new();
    match parsed {
        Ok(c) => {
            h.update(b"completion\0");
            field(&mut h, c.content.as_deref());
            for call in &c.tool_calls {
                h.update(b"call\0");
                call_fields(&mut h, call);
            }
            if let Some(f) = &c.function_call {
                h.update(b"function_call\0");
                call_fields(&mut h, f);
            }
            field(&mut h, c.finish_reason.as_deref());
        }
        Err(_) => {
            h.update(b"bytes\0");
            h.update(body);
        }
    }
    let mut first = [0u8; 16];
    first.copy_from_slice(&h.finalize()[..16]);
    u128::from_be_bytes(first)
}

/// Every model entry of a row (its `cell.json` files' `model`) asks for temperature 0: its
/// samples are meant to repeat one answer.
pub fn asks_temperature_zero(entries: &[serde_json::Value]) -> bool {
    !entries.is_empty()
        && entries.iter().all(|e| {
            // Collect writes `params.temperature`; hand-made cell.json files put it on top.
            e.pointer("/params/temperature")
                .or_else(|| e.get("temperature"))
                .and_then(serde_json::Value::as_f64)
                == Some(0.0)
        })
}

/// The model page's sentence when a row's samples look deterministic: every model entry asks
/// for temperature 0, or some cells repeat one answer in all their samples. Empty otherwise.
pub fn determinism_note<'a>(
    cells: impl Iterator<Item = &'a super::Cell>,
    entries: &[serde_json::Value],
) -> String {
    let (mut repeated, mut rated) = (0u64, 0u64);
    for c in cells {
        if c.scored >= 2 {
            rated += 1;
        }
        if c.identical() {
            repeated += 1;
        }
    }
    let zero = asks_temperature_zero(entries);
    let mut parts = Vec::new();
    if zero {
        parts.push("it asks for temperature 0".to_string());
    }
    if repeated > 0 {
        parts.push(format!(
            "{repeated} of its {rated} cells with two or more scored samples {} one answer in every sample",
            if repeated == 1 { "repeats" } else { "repeat" }
        ));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(
        "This row's samples look deterministic: {}. Where a cell's samples are one answer repeated, \
         k samples are one observation, and the interval (which counts them as independent) \
         overstates the evidence; data/matrix.json marks such cells as identical.",
        parts.join(", and ")
    )
}

fn field(h: &mut Sha256, s: Option<&str>) {
    match s {
        Some(s) => {
            h.update((s.len() as u64).to_be_bytes());
            h.update(s.as_bytes());
        }
        None => h.update(b"\xff"),
    }
}

fn call_fields(h: &mut Sha256, c: &WireCall) {
    field(h, c.name.as_deref());
    match &c.arguments {
        WireArgs::Absent => h.update(b"absent"),
        WireArgs::Text(t) => field(h, Some(t)),
        WireArgs::Json(v) => field(h, Some(&v.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_of_one_repeated_answer_are_flagged_and_said() {
        use crate::report::{SampleKey, Scored, TaskInfo, aggregate};
        use crate::stats::IntervalKind;
        use crate::taxonomy::Outcome;
        let s = |task: &str, n: &str, response: u128, outcome: Outcome| {
            let key = SampleKey {
                model: "m".into(),
                task: task.into(),
                run: "r".into(),
                sample: n.into(),
            };
            Scored {
                response,
                ..Scored::bare(key, outcome)
            }
        };
        let samples = vec![
            s("same", "000", 1, Outcome::Pass),
            s("same", "001", 1, Outcome::Pass),
            s("same", "002", 1, Outcome::Pass),
            // An error's (empty) answer does not count as a second answer.
            s("varied", "000", 1, Outcome::Pass),
            s("varied", "001", 2, Outcome::Pass),
            s("varied", "002", 3, Outcome::Error),
        ];
        let tasks = ["same", "varied"]
            .iter()
            .map(|t| TaskInfo {
                id: t.to_string(),
                title: String::new(),
                tags: Vec::new(),
                bfcl_scored: false,
            })
            .collect();
        let m = aggregate(samples, tasks, IntervalKind::Wilson);
        let same = &m.cells[&("m".to_string(), "same".to_string())];
        let varied = &m.cells[&("m".to_string(), "varied".to_string())];
        assert_eq!((same.distinct_responses, same.identical()), (1, true));
        assert_eq!((varied.distinct_responses, varied.identical()), (2, false));
        let note = determinism_note(m.cells.values(), &[]);
        assert!(note.contains("1 of its 2 cells"), "{note}");
        let t0 = [serde_json::json!({"params": {"temperature": 0}})];
        let note = determinism_note(std::iter::once(varied), &t0);
        assert!(
            note.contains("temperature 0") && !note.contains("of its"),
            "{note}"
        );
        let t7 = [serde_json::json!({"params": {"temperature": 0.7}})];
        assert_eq!(determinism_note(std::iter::once(varied), &t7), "");
    }

    #[test]
    fn the_same_answer_with_another_id_is_the_same_response() {
        let a = br#"{"id":"chatcmpl-1","created":1,"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}"#;
        let b = br#"{"id":"chatcmpl-2","created":2,"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}"#;
        let c = br#"{"id":"chatcmpl-3","created":3,"choices":[{"message":{"content":"hi!"},"finish_reason":"stop"}]}"#;
        assert_eq!(fingerprint(a, false), fingerprint(b, false));
        assert_ne!(fingerprint(a, false), fingerprint(c, false));
        let call = |id: &str, city: &str| {
            format!(
                r#"{{"choices":[{{"message":{{"content":null,"tool_calls":[{{"id":"{id}","type":"function","function":{{"name":"w","arguments":"{{\"city\":\"{city}\"}}"}}}}]}},"finish_reason":"tool_calls"}}]}}"#
            )
        };
        assert_eq!(
            fingerprint(call("x1", "Paris").as_bytes(), false),
            fingerprint(call("x2", "Paris").as_bytes(), false)
        );
        assert_ne!(
            fingerprint(call("x1", "Paris").as_bytes(), false),
            fingerprint(call("x1", "Lima").as_bytes(), false)
        );
        // Unparseable bodies: by their bytes.
        assert_ne!(fingerprint(b"oops", false), fingerprint(b"oops!", false));
    }
}
