//! `@session` syntax (§4.1): canonical `dsh-session:` URIs and Markdown mentions.

use std::sync::LazyLock;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use regex::Regex;

use crate::session::SessionReferenceError;

pub const URI_SCHEME: &str = "dsh-session:";

/// `dsh-session:` + base64url (no padding) of the JSON-quoted id.
pub fn encode_session_uri(session_id: &str) -> String {
    let json = serde_json::Value::String(session_id.to_owned()).to_string();
    format!("{URI_SCHEME}{}", URL_SAFE_NO_PAD.encode(json.as_bytes()))
}

/// The id of a canonical URI, else `SESSION_REFERENCE_INVALID_REFERENCE`.
pub fn decode_session_uri(uri: &str) -> Result<String, SessionReferenceError> {
    let invalid = || SessionReferenceError::invalid_uri(uri);
    let payload = uri.strip_prefix(URI_SCHEME).ok_or_else(invalid)?;
    if payload.is_empty()
        || !payload
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(invalid());
    }
    let bytes = URL_SAFE_NO_PAD.decode(payload).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let id = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::String(id)) => id,
        _ => return Err(invalid()),
    };
    if encode_session_uri(&id) != uri {
        return Err(invalid());
    }
    Ok(id)
}

/// `@[<label>](<uri>)` with `]` and `\` escaped in the label.
pub fn format_session_mention(label: &str, session_id: &str) -> String {
    let escaped = label.replace('\\', "\\\\").replace(']', "\\]");
    format!("@[{escaped}]({})", encode_session_uri(session_id))
}

fn unescape(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    let mut chars = label.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

static MENTION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"@\[((?:\\.|[^\\\]])*)\]\((dsh-session:[^\s)]*)\)|(dsh-session:[A-Za-z0-9_-]+)")
        .ok()
});

/// One reference found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    pub session_id: String,
    pub label: String,
}

/// The readable text (each mention as `@<label>`) and the mentions, in order.
pub fn parse_mentions(text: &str) -> Result<(String, Vec<Mention>), SessionReferenceError> {
    let Some(regex) = MENTION.as_ref() else {
        return Ok((text.to_owned(), Vec::new()));
    };
    let mut out = String::with_capacity(text.len());
    let mut mentions = Vec::new();
    let mut last = 0;
    for captures in regex.captures_iter(text) {
        let Some(whole) = captures.get(0) else {
            continue;
        };
        let (session_id, label) = match (captures.get(1), captures.get(2), captures.get(3)) {
            (Some(label), Some(uri), _) => {
                (decode_session_uri(uri.as_str())?, unescape(label.as_str()))
            }
            (_, _, Some(uri)) => {
                let id = decode_session_uri(uri.as_str())?;
                (id.clone(), id)
            }
            _ => continue,
        };
        out.push_str(&text[last..whole.start()]);
        out.push('@');
        out.push_str(&label);
        last = whole.end();
        mentions.push(Mention { session_id, label });
    }
    out.push_str(&text[last..]);
    Ok((out, mentions))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn uris_are_canonical() {
        // Checklist B26.
        assert_eq!(encode_session_uri("abc"), "dsh-session:ImFiYyI");
        assert_eq!(decode_session_uri("dsh-session:ImFiYyI").unwrap(), "abc");
        for bad in [
            "dsh-session:ImFiYyI=",
            "dsh-session:ImFiYyJ",
            "dsh-session:YWJj",
            "dsh-session:",
            "dsh-session:Im!iYyI",
            "other:ImFiYyI",
        ] {
            let error = decode_session_uri(bad).unwrap_err();
            assert_eq!(error.code, "SESSION_REFERENCE_INVALID_REFERENCE", "{bad}");
            assert_eq!(
                error.message,
                format!("invalid session reference URI \"{bad}\"")
            );
        }
        let id = "session-ü/x\"y";
        assert_eq!(decode_session_uri(&encode_session_uri(id)).unwrap(), id);
    }

    #[test]
    fn mentions_become_readable_labels() {
        let uri = encode_session_uri("s-1");
        let text = format!("see @[Build \\] fix]({uri}) and {uri}, plain dsh-session: text");
        let (readable, mentions) = parse_mentions(&text).unwrap();
        assert_eq!(
            readable,
            "see @Build ] fix and @s-1, plain dsh-session: text"
        );
        assert_eq!(
            mentions,
            [
                Mention {
                    session_id: "s-1".into(),
                    label: "Build ] fix".into()
                },
                Mention {
                    session_id: "s-1".into(),
                    label: "s-1".into()
                }
            ]
        );
        assert_eq!(
            format_session_mention("a]b\\", "s-1"),
            format!("@[a\\]b\\\\]({uri})")
        );
        let error = parse_mentions("@[x](dsh-session:nope)").unwrap_err();
        assert_eq!(error.code, "SESSION_REFERENCE_INVALID_REFERENCE");
    }
}
