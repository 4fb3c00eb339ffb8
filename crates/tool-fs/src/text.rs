//! Text helpers shared by the file tools: UTF-16 aware truncation (upstream is JavaScript),
//! line-ending detection, envelope formatting and `structuredPatch`-compatible diff hunks.

use dsh_tools::FileDiff;
use similar::ChangeTag;
use similar::TextDiff;

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Keeps the first `max_units` UTF-16 code units of `text`; `None` when it already fits.
/// A surrogate pair straddling the cut is dropped whole rather than split.
pub fn truncate_utf16(text: &str, max_units: usize) -> Option<&str> {
    let mut units = 0usize;
    for (index, ch) in text.char_indices() {
        let width = ch.len_utf16();
        if units + width > max_units {
            return Some(&text[..index]);
        }
        units += width;
    }
    None
}

/// Cuts `text` to at most `max_bytes` UTF-8 bytes on a character boundary.
pub fn truncate_bytes(text: &str, max_bytes: usize) -> Option<&str> {
    if text.len() <= max_bytes {
        return None;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(&text[..end])
}

/// `<path>…</path>\n<type>…</type>\n<content>\n…\n</content>`; the path is not escaped.
pub fn envelope(path: &str, kind: &str, body: &str) -> String {
    format!("<path>{path}</path>\n<type>{kind}</type>\n<content>\n{body}\n</content>")
}

/// The body of an envelope (between `<content>\n` and `\n</content>`).
pub fn envelope_body(text: &str) -> Option<&str> {
    let start = text.find("<content>\n")? + "<content>\n".len();
    let end = text.rfind("\n</content>")?;
    text.get(start..end)
}

/// CRLF when the first 4096 characters hold more CRLF than bare LF endings.
pub fn dominant_is_crlf(text: &str) -> bool {
    let head: String = text.chars().take(4096).collect();
    let crlf = head.matches("\r\n").count();
    let lf = head.matches('\n').count() - crlf;
    crlf > lf
}

pub fn to_lf(text: &str) -> String {
    text.replace("\r\n", "\n")
}

/// One entry per hunk of a 3-line-context unified diff of `before` → `after`: `oldText` is the
/// hunk's context + removed lines, `newText` its context + added lines, joined with `\n`
/// without a trailing newline; `oldText` is null when the hunk has no old lines.
pub fn diff_hunks(path: &str, before: &str, after: &str) -> Vec<FileDiff> {
    if before == after {
        return Vec::new();
    }
    let diff = TextDiff::from_lines(before, after);
    let mut out = Vec::new();
    for group in diff.grouped_ops(3) {
        let mut old_lines: Vec<&str> = Vec::new();
        let mut new_lines: Vec<&str> = Vec::new();
        for op in &group {
            for change in diff.iter_changes(op) {
                let line = change.value();
                let line = line.strip_suffix('\n').unwrap_or(line);
                match change.tag() {
                    ChangeTag::Equal => {
                        old_lines.push(line);
                        new_lines.push(line);
                    }
                    ChangeTag::Delete => old_lines.push(line),
                    ChangeTag::Insert => new_lines.push(line),
                }
            }
        }
        out.push(FileDiff {
            path: path.to_owned(),
            old_text: if old_lines.is_empty() {
                None
            } else {
                Some(old_lines.join("\n"))
            },
            new_text: new_lines.join("\n"),
        });
    }
    out
}

/// Lowercase-extension → language id for read cards; `.txt` has none.
pub fn lang_for(path: &str) -> Option<&'static str> {
    let ext = std::path::Path::new(path)
        .extension()?
        .to_str()?
        .to_ascii_lowercase();
    Some(match ext.as_str() {
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "tsx",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "jsx",
        "json" => "json",
        "py" => "python",
        "rs" => "rust",
        "go" => "go",
        "md" => "markdown",
        "yaml" | "yml" => "yaml",
        "sh" | "bash" => "bash",
        "toml" => "toml",
        "html" => "html",
        "css" => "css",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn hunks_match_recorded_meta() {
        let diffs = diff_hunks(
            "config.txt",
            "mode=DEBUG\nlevel=info\n",
            "mode=RELEASE\nlevel=info\n",
        );
        assert_eq!(
            serde_json::to_string(&diffs).unwrap(),
            r#"[{"path":"config.txt","oldText":"mode=DEBUG\nlevel=info","newText":"mode=RELEASE\nlevel=info"}]"#
        );
        let diffs = diff_hunks("notes.txt", "alpha\n", "beta");
        assert_eq!(
            serde_json::to_string(&diffs).unwrap(),
            r#"[{"path":"notes.txt","oldText":"alpha","newText":"beta"}]"#
        );
        assert_eq!(diff_hunks("a", "same", "same"), vec![]);
        let diffs = diff_hunks("a", "", "new\n");
        assert_eq!(diffs[0].old_text, None);
    }

    #[test]
    fn distant_changes_make_separate_hunks() {
        let before: String = (1..=20).map(|n| format!("l{n}\n")).collect();
        let after = before.replace("l2\n", "L2\n").replace("l18\n", "L18\n");
        let diffs = diff_hunks("f", &before, &after);
        assert_eq!(diffs.len(), 2);
        assert_eq!(diffs[0].old_text.as_deref(), Some("l1\nl2\nl3\nl4\nl5"));
        assert_eq!(diffs[1].new_text, "l15\nl16\nl17\nL18\nl19\nl20");
    }

    #[test]
    fn utf16_truncation_counts_code_units() {
        assert_eq!(truncate_utf16("abc", 3), None);
        assert_eq!(truncate_utf16("abcd", 3), Some("abc"));
        assert_eq!(truncate_utf16("a😀b", 2), Some("a"));
        assert_eq!(truncate_utf16("a😀b", 3), Some("a😀"));
        assert_eq!(truncate_bytes("aé", 2), Some("a"));
    }

    #[test]
    fn dominant_line_ending() {
        assert!(dominant_is_crlf("a\r\nb\r\nc\n"));
        assert!(!dominant_is_crlf("a\r\nb\nc\n"));
        assert!(!dominant_is_crlf("abc"));
    }
}
