//! What may be shown or logged (docs/design.md#9-reliability-and-limits,
//! docs/design.md#11-security): the one home of the rules that keep secrets and forged lines
//! out of responses and logs.
//!
//! - URLs lose their userinfo (`http://user:pass@host` -> `http://host`): a password in an
//!   agent URL is used for the upstream call and appears nowhere else.
//! - Strings from clients or upstreams (ids, upstream error messages) are shown with control
//!   characters escaped (a newline in a threadId cannot forge a log line) and cut to
//!   [`MAX_SHOWN`] bytes.

use std::fmt;

/// Bytes of a client- or upstream-controlled string shown in a log line or error message.
pub(crate) const MAX_SHOWN: usize = 200;

/// `url` without its username and password.
pub(crate) fn url(url: &url::Url) -> String {
    if url.username().is_empty() && url.password().is_none() {
        return url.to_string();
    }
    let mut clean = url.clone();
    let _ = clean.set_username("");
    let _ = clean.set_password(None);
    clean.to_string()
}

/// Replaces every occurrence of `url` in `text` by its redacted form (for messages of
/// libraries that print the URL they were given).
pub(crate) fn url_in(text: &str, url: &url::Url) -> String {
    let raw = url.as_str();
    if url.username().is_empty() && url.password().is_none() {
        return text.to_owned();
    }
    text.replace(raw, &self::url(url))
}

/// Displays a foreign string safely, cut to [`MAX_SHOWN`] bytes (on a char boundary, `…`
/// marking the cut) with control characters escaped: `tracing::info!(id = %Shown(id))`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shown<'a>(pub &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut end = self.0.len().min(MAX_SHOWN);
        while !self.0.is_char_boundary(end) {
            end -= 1;
        }
        for c in self.0[..end].chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        if end < self.0.len() {
            f.write_str("…")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_removed() {
        let u = url::Url::parse("http://user:s3cret@agent.local:9/a2a").unwrap();
        assert_eq!(url(&u), "http://agent.local:9/a2a");
        let msg = format!("error sending request for url ({u})");
        assert!(!url_in(&msg, &u).contains("s3cret"));
        let plain = url::Url::parse("http://agent.local/").unwrap();
        assert_eq!(url(&plain), "http://agent.local/");
    }

    #[test]
    fn foreign_text_cannot_forge_lines_or_grow_unbounded() {
        assert_eq!(Shown("a\nb\u{1b}[31m").to_string(), "a\\nb\\u{1b}[31m");
        let long = "é".repeat(1000);
        let shown = Shown(&long).to_string();
        assert!(shown.len() <= MAX_SHOWN + "…".len());
        assert!(shown.ends_with('…'));
    }
}
