//! A page's link card: the Open Graph and Twitter card tags that Slack, Discord, X and LinkedIn
//! read when a link to the page is shared. Unfurlers fetch the page they are given, run no
//! script and follow no redirect, so a sample's permalink (a forwarding page) carries its own.
//!
//! Twitter's card reads `og:title` and `og:description` when its own are absent, so only
//! `twitter:card` is written for it; and one `<meta>` carries both the page's description and
//! `og:description` (HTML's `name` and RDFa's `property` may share an element). A permalink is
//! written for every sample, so every byte here is paid a hundred thousand times.

use super::html::escape_into;

/// What a shared link shows.
pub(crate) struct Card<'a> {
    /// The card's title (`og:title`).
    pub(crate) title: &'a str,
    /// The line under it (`og:description` and the page's description).
    pub(crate) description: &'a str,
    /// The page's address relative to the site root, made absolute with the site's URL when
    /// `build --site-url` gave one (`og:url`); without it no `og:url` is written, as a
    /// relative one is not allowed.
    pub(crate) path: &'a str,
    /// `article` for a sample or a run, `website` for the summary pages.
    pub(crate) kind: &'static str,
}

/// The most characters of a description: unfurlers cut longer ones anyway.
const MAX_DESCRIPTION: usize = 200;

/// A site's base URL as `build --site-url` accepts it: `http(s)://` and a host, no whitespace,
/// control characters, quotes, angle brackets, query or fragment; returned with one trailing
/// `/` so that page paths append to it. The error says what is wrong.
pub(crate) fn site_url(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("it must start with https:// (or http://)")?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err("it names no host".into());
    }
    if let Some(c) = url
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || "\"'<>\\`?#".contains(*c))
    {
        return Err(format!(
            "it holds {c:?}, which a page's base address cannot (no query or fragment either)"
        ));
    }
    Ok(format!("{}/", url.trim_end_matches('/')))
}

/// The card's tags, escaped, one per line. `base` is [`site_url`]'s result.
pub(crate) fn render(card: &Card, base: Option<&str>) -> String {
    let mut s = String::with_capacity(320);
    let mut tag = |attr: &str, content: &str| {
        s.push_str("<meta ");
        s.push_str(attr);
        s.push_str(" content=\"");
        escape_into(&mut s, content);
        s.push_str("\">\n");
    };
    tag("property=\"og:title\"", card.title);
    tag(
        "name=\"description\" property=\"og:description\"",
        &crate::json::clip(card.description, MAX_DESCRIPTION),
    );
    tag("property=\"og:type\"", card.kind);
    // The site's name only on the summary pages: a sample's or a run's card names its model and
    // task, and its permalink is written a hundred thousand times.
    if card.kind == "website" {
        tag("property=\"og:site_name\"", "callcheck");
    }
    if let Some(b) = base {
        tag("property=\"og:url\"", &format!("{b}{}", card.path));
    }
    tag("name=\"twitter:card\"", "summary");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_escapes_what_models_wrote_and_says_where_the_page_is() {
        let card = Card {
            title: "m · t · wrong_type",
            description: "argument \"a\" <b>is</b> 'x' & more",
            path: "t/m/t/r/001.html",
            kind: "article",
        };
        let base = site_url("https://you.github.io/conformance").unwrap();
        assert_eq!(
            render(&card, Some(&base)),
            "<meta property=\"og:title\" content=\"m · t · wrong_type\">\n\
             <meta name=\"description\" property=\"og:description\" content=\"argument &quot;a&quot; &lt;b&gt;is&lt;/b&gt; &#39;x&#39; &amp; more\">\n\
             <meta property=\"og:type\" content=\"article\">\n\
             <meta property=\"og:url\" content=\"https://you.github.io/conformance/t/m/t/r/001.html\">\n\
             <meta name=\"twitter:card\" content=\"summary\">\n"
        );
        // Without a base URL there is no og:url (a relative one is not allowed).
        assert!(!render(&card, None).contains("og:url"));
    }

    #[test]
    fn a_long_description_is_cut() {
        let long = "x".repeat(1000);
        let card = Card {
            title: "t",
            description: &long,
            path: "index.html",
            kind: "website",
        };
        let html = render(&card, None);
        let content = html
            .split("og:description\" content=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap();
        assert!(content.chars().count() <= MAX_DESCRIPTION + 1, "{content}");
        assert!(content.starts_with("xxxx"));
    }

    #[test]
    fn only_a_plain_http_base_url_is_accepted() {
        assert_eq!(
            site_url("https://a.example/x/").as_deref(),
            Ok("https://a.example/x/")
        );
        assert_eq!(
            site_url("http://a.example").as_deref(),
            Ok("http://a.example/")
        );
        for bad in [
            "a.example",
            "javascript:alert(1)",
            "https://",
            "https:///x",
            "https://a.example/\"><script>",
            "https://a.example/ x",
            "https://a.example/?q=1",
            "https://a.example/#top",
        ] {
            assert!(site_url(bad).is_err(), "{bad}");
        }
    }
}
