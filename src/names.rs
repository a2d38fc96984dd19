//! Limits on the names that become paths: row names and task ids are folder names under runs/
//! and parts of every file name the site derives from them.

/// The longest row name or task id, in bytes (both are ASCII: `[A-Za-z0-9._-]+`). A file-name
/// component may hold 255 bytes on every common file system, and the site derives names such
/// as `<row>.labels.svg` and `<task>.html`, and pages naming two rows; 120 leaves room for two
/// names and a suffix in one component.
pub const MAX_NAME_BYTES: usize = 120;

/// Why `name` (a `what`: "row name", "task id") is too long to become a path, when it is.
pub fn too_long(what: &str, name: &str) -> Option<String> {
    (name.len() > MAX_NAME_BYTES).then(|| {
        format!(
            "the {what} is {} bytes long; at most {MAX_NAME_BYTES} are allowed, because it becomes \
             part of file names (runs/ folders, site pages and charts such as <name>.labels.svg) \
             and a file name holds at most 255 bytes: shorten it",
            name.len()
        )
    })
}

/// The key under which two names collide on a case-insensitive file system (macOS and Windows
/// checkouts, some Pages clones): `Qwen` and `qwen` would be one folder there.
pub fn case_key(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// A run or sample folder's name as collect writes them: letters, digits, `-`, `_`, `.`, not
/// starting with a dot. What a `meta.json` names is linked (as a path) only when it is one.
pub fn folder_name(n: &str) -> bool {
    !n.is_empty()
        && !n.starts_with('.')
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_refused_with_the_limit_and_why() {
        assert!(too_long("row name", &"a".repeat(MAX_NAME_BYTES)).is_none());
        let e = too_long("row name", &"a".repeat(MAX_NAME_BYTES + 1)).unwrap();
        assert!(e.contains("121 bytes") && e.contains("at most 120"), "{e}");
        // The longest derived component still fits: a page naming two rows and a suffix.
        let longest = format!(
            "{}-vs-{}.labels.svg",
            "a".repeat(MAX_NAME_BYTES),
            "b".repeat(MAX_NAME_BYTES)
        );
        assert!(longest.len() <= 255, "{}", longest.len());
        assert_eq!(case_key("Qwen3-8B"), case_key("qwen3-8b"));
    }
}
