//! The `@file` grammar composers use (§3.1). `@file` references are path-only: the harness
//! never reads or attaches the file; the selected path is ordinary prompt text.

use std::sync::LazyLock;

use regex::Regex;

use crate::candidates::CandidateKind;
use crate::candidates::FileCandidate;

/// The `@` token under the cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtToken {
    /// What the completion replaces (`@src/ma`, `@"my d`).
    pub prefix: String,
    /// What the user typed after `@` (inside the quote when quoted).
    pub query: String,
    pub quoted: bool,
}

static QUOTED: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r#"(?:^|\s)(@"([^"]*))$"#).ok());
static PLAIN: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"(?:^|\s)(@(\S*))$").ok());

/// `activeAtToken(line, cursor)`: looks at the text before `cursor` (a char index). An `@`
/// inside a word, such as an e-mail address, does not count.
pub fn active_at_token(line: &str, cursor: usize) -> Option<AtToken> {
    let end = line
        .char_indices()
        .nth(cursor)
        .map_or(line.len(), |(i, _)| i);
    let before = &line[..end];
    for (regex, quoted) in [(&*QUOTED, true), (&*PLAIN, false)] {
        let Some(captures) = regex.as_ref().and_then(|r| r.captures(before)) else {
            continue;
        };
        let (Some(prefix), Some(query)) = (captures.get(1), captures.get(2)) else {
            continue;
        };
        return Some(AtToken {
            prefix: prefix.as_str().to_owned(),
            query: query.as_str().to_owned(),
            quoted,
        });
    }
    None
}

fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// `formatFileMention(candidate, preserveQuote)`: the text a selection inserts, or `None` for
/// a path that cannot be written as a mention (control characters or `"`).
pub fn format_file_mention(candidate: &FileCandidate, preserve_quote: bool) -> Option<String> {
    let directory = candidate.kind == CandidateKind::Directory;
    let path = if directory {
        format!("{}/", candidate.path)
    } else {
        candidate.path.clone()
    };
    if path.chars().any(|c| is_control(c) || c == '"') {
        return None;
    }
    let quoted = preserve_quote || path.chars().any(char::is_whitespace);
    Some(match (quoted, directory) {
        // The quote stays open on a directory so completion can go on inside it.
        (true, true) => format!("@\"{path}"),
        (true, false) => format!("@\"{path}\""),
        (false, _) => format!("@{path}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn file(path: &str, kind: CandidateKind) -> FileCandidate {
        FileCandidate {
            path: path.to_owned(),
            kind,
        }
    }

    #[test]
    fn the_token_under_the_cursor() {
        // Checklist B22.
        assert_eq!(
            active_at_token("see @src/ma", 11),
            Some(AtToken {
                prefix: "@src/ma".into(),
                query: "src/ma".into(),
                quoted: false
            })
        );
        assert_eq!(active_at_token("a@b", 3), None);
        assert_eq!(
            active_at_token("@", 1),
            Some(AtToken {
                prefix: "@".into(),
                query: String::new(),
                quoted: false
            })
        );
        assert_eq!(
            active_at_token("open @\"my d", 11),
            Some(AtToken {
                prefix: "@\"my d".into(),
                query: "my d".into(),
                quoted: true
            })
        );
        // Only the text before the cursor counts.
        assert_eq!(
            active_at_token("see @src/main.rs now", 6).unwrap().query,
            "s"
        );
        assert_eq!(active_at_token("see @src now", 12), None);
        // Char indices, not bytes.
        assert_eq!(active_at_token("é @ü", 4).unwrap().query, "ü");
    }

    #[test]
    fn mentions_quote_when_needed() {
        // Checklist B23.
        assert_eq!(
            format_file_mention(&file("my dir", CandidateKind::Directory), false).as_deref(),
            Some("@\"my dir/")
        );
        assert_eq!(
            format_file_mention(&file("my file.txt", CandidateKind::File), false).as_deref(),
            Some("@\"my file.txt\"")
        );
        assert_eq!(
            format_file_mention(&file("src/main.rs", CandidateKind::File), false).as_deref(),
            Some("@src/main.rs")
        );
        assert_eq!(
            format_file_mention(&file("src", CandidateKind::Directory), true).as_deref(),
            Some("@\"src/")
        );
        assert_eq!(
            format_file_mention(&file("a\"b", CandidateKind::File), false),
            None
        );
        assert_eq!(
            format_file_mention(&file("a\u{7}b", CandidateKind::File), false),
            None
        );
        assert_eq!(
            format_file_mention(&file("a\u{85}b", CandidateKind::File), false),
            None
        );
    }
}
