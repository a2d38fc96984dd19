//! A server's address as callcheck keeps, shows and calls it. A `base_url` may carry a secret
//! in two places a key is commonly put: the userinfo (`http://user:secret@host`) and the query
//! string (Azure's `?api-key=…`). The address is called as given, but wherever it is written
//! down (`cell.json`, `meta.json`, a page, the terminal) both are redacted (SPEC §12, turn 5).

/// What a redacted secret reads as.
pub const REDACTED: &str = "REDACTED";

/// `url` with its userinfo replaced by `REDACTED`, each query value by `REDACTED` (the names
/// stay, so a reader sees that a key was passed and how; a bare `?token` goes whole) and any
/// fragment dropped. Text that is not an http(s) URL keeps only what precedes any `?` or `#`,
/// and loses anything before an `@`.
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if matches!(u.scheme(), "http" | "https") => {
            if !u.username().is_empty() || u.password().is_some() {
                let _ = u.set_username(REDACTED);
                let _ = u.set_password(None);
            }
            if let Some(q) = u.query() {
                let redacted: Vec<String> = q
                    .split('&')
                    .map(|pair| match pair.split_once('=') {
                        Some((name, _)) => format!("{name}={REDACTED}"),
                        None => REDACTED.to_string(),
                    })
                    .collect();
                u.set_query(Some(&redacted.join("&")));
            }
            u.set_fragment(None);
            u.to_string()
        }
        _ => {
            let head = url.split(['?', '#']).next().unwrap_or_default();
            let cut = head.len() < url.len();
            let head = match head.rsplit_once('@') {
                Some((_, host)) => format!("{REDACTED}@{host}"),
                None => head.to_string(),
            };
            if cut {
                format!("{head}?{REDACTED}")
            } else {
                head
            }
        }
    }
}

/// The address of endpoint `path` (`chat/completions`, `models`) under `base`: the path
/// appended to the base's path, its query kept after it (`http://h/v1?api-version=x` and
/// `chat/completions` give `http://h/v1/chat/completions?api-version=x`).
pub fn join(base: &str, path: &str) -> String {
    match reqwest::Url::parse(base) {
        Ok(mut u) if u.query().is_some() || u.fragment().is_some() => {
            let p = format!("{}/{path}", u.path().trim_end_matches('/'));
            u.set_path(&p);
            u.set_fragment(None);
            u.to_string()
        }
        _ => format!("{}/{path}", base.trim_end_matches('/')),
    }
}

/// [`join`], beside the base's `/v1` rather than under it (`GET /version` is the server's, not
/// the API's).
pub fn join_root(base: &str, path: &str) -> String {
    match reqwest::Url::parse(base) {
        Ok(mut u) => {
            let trimmed = u.path().trim_end_matches('/');
            let root = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
            let p = format!("{root}/{path}");
            u.set_path(&p);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => {
            let root = base.strip_suffix("/v1").unwrap_or(base);
            format!("{root}/{path}")
        }
    }
}

/// A model entry or server description (`cell.json`'s `model`, `server`) with every address it
/// records redacted: each string under a `base_url` or `base_urls` key, at any depth. What a
/// build takes from a `cell.json`, whoever wrote it.
pub fn redact_entry(entry: &mut serde_json::Value) {
    use serde_json::Value;
    fn redact_strings(v: &mut Value) {
        match v {
            Value::String(s) => *s = redact_url(s),
            Value::Array(items) => items.iter_mut().for_each(redact_strings),
            _ => {}
        }
    }
    match entry {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                if k == "base_url" || k == "base_urls" {
                    redact_strings(v);
                } else {
                    redact_entry(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_entry),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_query_values_and_fragments_are_redacted() {
        for (url, kept) in [
            (
                "http://bob:hunter2@127.0.0.1:8000/v1",
                "http://REDACTED@127.0.0.1:8000/v1",
            ),
            ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
            (
                "https://x.openai.azure.com/openai/deployments/d?api-key=s3cret&api-version=2024-10-21",
                "https://x.openai.azure.com/openai/deployments/d?api-key=REDACTED&api-version=REDACTED",
            ),
            ("http://h/v1?s3cret", "http://h/v1?REDACTED"),
            ("http://h/v1#s3cret", "http://h/v1"),
            ("not a url?key=s3cret", "not a url?REDACTED"),
            ("bob:s3cret@nowhere", "REDACTED@nowhere"),
        ] {
            assert_eq!(redact_url(url), kept, "{url}");
            assert!(!redact_url(url).contains("s3cret") && !redact_url(url).contains("hunter2"));
        }
    }

    #[test]
    fn a_path_goes_before_the_query() {
        assert_eq!(join("http://h/v1", "models"), "http://h/v1/models");
        assert_eq!(
            join("http://h/v1/", "chat/completions"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(
            join("http://h/v1?api-key=k&api-version=2", "chat/completions"),
            "http://h/v1/chat/completions?api-key=k&api-version=2"
        );
        assert_eq!(
            join_root("http://h:8/v1?k=1", "version"),
            "http://h:8/version?k=1"
        );
        assert_eq!(join_root("http://h:8/v1", "version"), "http://h:8/version");
    }

    #[test]
    fn an_entrys_addresses_are_redacted_and_nothing_else() {
        let mut e = serde_json::json!({
            "name": "m?x", "base_url": "http://h/v1?api-key=k",
            "base_urls": ["http://a:b@h/v1", 3], "temperature": 0.5,
            "replicas": [{"base_url": "http://h/v1?key=k", "note": "http://h/?x=1"}]
        });
        redact_entry(&mut e);
        assert_eq!(
            e,
            serde_json::json!({
                "name": "m?x", "base_url": "http://h/v1?api-key=REDACTED",
                "base_urls": ["http://REDACTED@h/v1", 3], "temperature": 0.5,
                "replicas": [{"base_url": "http://h/v1?key=REDACTED", "note": "http://h/?x=1"}]
            })
        );
    }
}
