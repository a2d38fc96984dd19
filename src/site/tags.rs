//! What each tag of the corpus probes, in one sentence: the models × tags table and the tag
//! pages lead with it, so a reader knows which shape of call a row is about before reading its
//! numbers. Tags are free text in task files, so an unknown tag (a new area, an imported BFCL
//! category) gets a plain fallback rather than nothing.

/// The corpus's tags (tasks/README.md) and imported BFCL categories, sorted by tag.
const DESCRIPTIONS: &[(&str, &str)] = &[
    (
        "bfcl",
        "Tasks imported from the Berkeley Function Calling Leaderboard's single-turn categories.",
    ),
    (
        "empty-args",
        "Tools without parameters, or with only optional ones, where the right arguments are {}: the {} must arrive, alone or beside calls that take arguments.",
    ),
    (
        "enum",
        "Arguments constrained by an enum, a pattern or a numeric range: the value must be one the schema allows.",
    ),
    (
        "int64",
        "Integer ids at the edges of int64, which a server that routes numbers through a double silently rounds.",
    ),
    (
        "irrelevance",
        "BFCL irrelevance: none of the offered tools fits the request, so the right answer calls nothing.",
    ),
    (
        "live",
        "BFCL live: user-contributed prompts and tools rather than synthetic ones.",
    ),
    (
        "long-args",
        "Long argument strings (a code file, verbatim feedback) that must arrive whole and correctly escaped.",
    ),
    (
        "multi-tool",
        "Two or three different tools called in one turn, each exactly once.",
    ),
    (
        "multi-turn",
        "A conversation with earlier turns and tool results: the call must use what the history says.",
    ),
    (
        "multiple",
        "BFCL multiple: several tools are offered and exactly one of them is the right call.",
    ),
    (
        "nested",
        "Arguments that are nested objects and arrays of objects, with required keys at depth.",
    ),
    (
        "no-call",
        "Prompts that need no tool (small talk, general knowledge, missing details): any call is spurious.",
    ),
    (
        "optional",
        "Optional parameters the prompt never mentions, which must be left out rather than invented.",
    ),
    (
        "parallel",
        "Several independent calls in one turn (parallel tool calls), each of which must be emitted.",
    ),
    (
        "parallel-multiple",
        "BFCL parallel-multiple: several calls in one turn, to more than one tool.",
    ),
    (
        "ref",
        "Schemas built with $ref and $defs, recursion and nullable unions, resolved as the server sent them.",
    ),
    (
        "relevance",
        "BFCL relevance: some offered tool fits, so the answer must call one.",
    ),
    (
        "similar-tools",
        "Many tools with similar names and purposes: the call must pick the one the prompt asks for.",
    ),
    (
        "simple",
        "BFCL simple: one tool offered, one call expected.",
    ),
    (
        "single-call",
        "The happy path: one tool, one call, plain arguments.",
    ),
    (
        "structured-output",
        "JSON in the message content constrained by response_format (guided decoding), not a tool call.",
    ),
    (
        "tight-budget",
        "A max_tokens budget the right call fits only when emitted directly: a preamble or a repeat cuts it.",
    ),
    (
        "tool-choice",
        "tool_choice forced by name, required or none: the server must honour it.",
    ),
    (
        "type-coercion",
        "Bait for wrong types: numbers, booleans and objects a model tends to send as strings.",
    ),
    (
        "unicode-escaping",
        "Text that must survive the wire verbatim: non-ASCII, emoji, quotes, backslashes, JSON inside strings.",
    ),
];

/// The sentence for `tag`; imported `bfcl-…`/`live_…` categories and unknown tags get a plain
/// fallback naming the tag.
pub(crate) fn describe(tag: &str) -> String {
    if let Ok(i) = DESCRIPTIONS.binary_search_by(|(t, _)| t.cmp(&tag)) {
        return DESCRIPTIONS[i].1.to_string();
    }
    let norm = tag.replace('_', "-");
    let mut bare = norm.as_str();
    for prefix in ["bfcl-", "live-"] {
        bare = bare.strip_prefix(prefix).unwrap_or(bare);
    }
    if bare != tag
        && let Ok(i) = DESCRIPTIONS.binary_search_by(|(t, _)| (*t).cmp(bare))
    {
        return format!("Imported category {tag}. {}", DESCRIPTIONS[i].1);
    }
    format!("Tasks tagged {tag} (no description of this tag yet: see its tasks).")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_known_and_fallback() {
        assert!(DESCRIPTIONS.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(describe("parallel").starts_with("Several independent calls"));
        assert!(describe("live_parallel").contains("Several independent calls"));
        assert!(describe("bfcl-irrelevance").contains("calls nothing"));
        assert!(describe("weird <tag>").contains("weird <tag>"));
        // Every tag of the corpus has its own sentence.
        let tasks = crate::task::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tasks"
        )))
        .unwrap();
        for t in &tasks {
            for tag in &t.tags {
                assert!(
                    DESCRIPTIONS.iter().any(|(k, _)| k == tag),
                    "tag {tag} of {} has no description",
                    t.id
                );
            }
        }
    }
}
