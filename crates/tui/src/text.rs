//! Line wrapping (grapheme clusters, display width) and the code highlighter; Markdown itself
//! is rendered in [`crate::markdown`].
//!
//! Wrapping is done here rather than by `Paragraph` so the transcript knows its exact height
//! (scrolling from the bottom needs it) and so snapshots do not depend on widget internals.

use ratatui::style::Color;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::text::Span;
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthChar;

/// Splits one styled line into lines of at most `width` cells, breaking at the last space when
/// there is one. Continuation lines get `indent` blank cells. Measures grapheme clusters by
/// their display width, so a wide (CJK, emoji) or combined character is never split or
/// miscounted.
pub fn wrap_line(line: &Line<'_>, width: usize, indent: usize) -> Vec<Line<'static>> {
    let width = width.max(indent + 4);
    let cells: Vec<(String, usize, Style)> = line
        .spans
        .iter()
        .flat_map(|span| {
            let style = line.style.patch(span.style);
            // The one sanitiser of every terminal path: the buffer would drop a control
            // character silently; here it is shown as an escape, and a bidi override too.
            let safe = dsh_secrets::terminal_safe(span.content.as_ref());
            safe.graphemes(true)
                .filter(|g| *g != "\n" && *g != "\r" && *g != "\r\n")
                .map(|g| {
                    if g == "\t" {
                        (" ".to_owned(), 1, style)
                    } else {
                        (g.to_owned(), grapheme_width(g), style)
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let mut out = Vec::new();
    let mut start = 0;
    let mut first = true;
    loop {
        let budget = if first { width } else { width - indent };
        let mut used = 0;
        let mut end = start;
        while end < cells.len() {
            let w = cells[end].1;
            // A cluster wider than the whole budget still takes a line of its own.
            if used + w > budget && end > start {
                break;
            }
            used += w;
            end += 1;
        }
        let mut next = end;
        if end < cells.len()
            && let Some(space) = (start + 1..end).rev().find(|&i| cells[i].0 == " ")
        {
            end = space;
            next = space + 1;
        }
        let mut spans = Vec::new();
        if !first && indent > 0 {
            spans.push(Span::raw(" ".repeat(indent)));
        }
        spans.extend(merge(&cells[start..end]));
        out.push(Line::from(spans));
        first = false;
        if next >= cells.len() {
            break;
        }
        start = next;
    }
    out
}

/// Display width of one grapheme cluster: its widest scalar (a base character with combining
/// marks or a ZWJ emoji sequence occupies the cells of one character), at least 0.
fn grapheme_width(grapheme: &str) -> usize {
    if grapheme.chars().any(|c| c == '\u{fe0f}') {
        // Emoji presentation selector: a wide emoji.
        return 2;
    }
    grapheme
        .chars()
        .map(|c| c.width().unwrap_or(0))
        .max()
        .unwrap_or(0)
}

fn merge(cells: &[(String, usize, Style)]) -> Vec<Span<'static>> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut current = String::new();
    let mut style = None;
    for (g, _, s) in cells {
        if style.is_some_and(|style| style != *s) {
            spans.push(Span::styled(
                std::mem::take(&mut current),
                style.unwrap_or_default(),
            ));
        }
        style = Some(*s);
        current.push_str(g);
    }
    if let Some(style) = style {
        spans.push(Span::styled(current, style));
    }
    spans
}

/// Display width of a string in terminal cells (per grapheme cluster).
pub fn width_of(text: &str) -> usize {
    text.graphemes(true).map(grapheme_width).sum()
}

/// Truncates to `width` cells, ending with `…` when cut (never inside a grapheme cluster).
pub fn truncate(text: &str, width: usize) -> String {
    if width_of(text) <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for g in text.graphemes(true) {
        let w = grapheme_width(g);
        if used + w + 1 > width {
            break;
        }
        used += w;
        out.push_str(g);
    }
    out.push('…');
    out
}

const KEYWORDS: &[&str] = &[
    "fn",
    "let",
    "mut",
    "pub",
    "use",
    "mod",
    "impl",
    "struct",
    "enum",
    "trait",
    "match",
    "if",
    "else",
    "for",
    "while",
    "loop",
    "return",
    "async",
    "await",
    "const",
    "static",
    "self",
    "Self",
    "crate",
    "super",
    "where",
    "type",
    "in",
    "as",
    "ref",
    "move",
    "dyn",
    "unsafe",
    "def",
    "class",
    "import",
    "from",
    "lambda",
    "with",
    "yield",
    "pass",
    "None",
    "True",
    "False",
    "and",
    "or",
    "not",
    "is",
    "function",
    "var",
    "export",
    "default",
    "new",
    "this",
    "null",
    "undefined",
    "true",
    "false",
    "interface",
    "extends",
    "implements",
    "package",
    "func",
    "go",
    "defer",
    "struct",
    "switch",
    "case",
    "break",
    "continue",
    "try",
    "catch",
    "throw",
    "finally",
    "echo",
    "then",
    "fi",
    "do",
    "done",
    "esac",
    "elif",
    "local",
];

/// A tiny language-agnostic highlighter: keywords, strings, numbers, line comments.
pub fn highlight_code(line: &str, lang: &str) -> Vec<Span<'static>> {
    let comment = match lang {
        "py" | "python" | "sh" | "bash" | "shell" | "zsh" | "toml" | "yaml" | "yml" | "rb" => "#",
        "sql" | "lua" => "--",
        _ => "//",
    };
    let base = Style::default().fg(Color::Gray);
    let mut spans = Vec::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let mut plain = String::new();
    let flush = |plain: &mut String, spans: &mut Vec<Span<'static>>| {
        if !plain.is_empty() {
            spans.push(Span::styled(std::mem::take(plain), base));
        }
    };
    while i < chars.len() {
        let rest: String = chars[i..].iter().collect();
        if rest.starts_with(comment) {
            flush(&mut plain, &mut spans);
            spans.push(Span::styled(rest, Style::default().fg(Color::DarkGray)));
            return spans;
        }
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            flush(&mut plain, &mut spans);
            let mut j = i + 1;
            while j < chars.len() && chars[j] != c {
                if chars[j] == '\\' {
                    j += 1;
                }
                j += 1;
            }
            let end = (j + 1).min(chars.len());
            let s: String = chars[i..end].iter().collect();
            spans.push(Span::styled(s, Style::default().fg(Color::Green)));
            i = end;
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            let mut j = i;
            while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            let word: String = chars[i..j].iter().collect();
            if KEYWORDS.contains(&word.as_str()) {
                flush(&mut plain, &mut spans);
                spans.push(Span::styled(word, Style::default().fg(Color::Magenta)));
            } else if word.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                flush(&mut plain, &mut spans);
                spans.push(Span::styled(word, Style::default().fg(Color::Yellow)));
            } else {
                plain.push_str(&word);
            }
            i = j;
            continue;
        }
        plain.push(c);
        i += 1;
    }
    flush(&mut plain, &mut spans);
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn wraps_at_spaces_and_hard_breaks_long_words() {
        let line = Line::from("hello world this is dsh");
        assert_eq!(
            plain(&wrap_line(&line, 11, 0)),
            ["hello", "world this", "is dsh"]
        );
        let long = Line::from("abcdefghij");
        assert_eq!(plain(&wrap_line(&long, 4, 0)), ["abcd", "efgh", "ij"]);
        assert_eq!(plain(&wrap_line(&Line::default(), 10, 0)), [""]);
    }

    #[test]
    fn control_characters_are_shown_as_escapes_in_the_live_view() {
        let line = Line::from("a\u{1b}]0;title\u{7}b\u{202e}c\rd\r\n");
        assert_eq!(
            plain(&wrap_line(&line, 80, 0)),
            ["a\\u001b]0;title\\u0007b\\u202ec\\u000dd"]
        );
    }

    #[test]
    fn wrapping_counts_graphemes_and_display_width() {
        // Wide CJK: two cells each, never split.
        let cjk = Line::from("你好世界你好");
        assert_eq!(plain(&wrap_line(&cjk, 4, 0)), ["你好", "世界", "你好"]);
        // A base letter with a combining accent is one cell.
        let combined = Line::from("e\u{301}e\u{301}e\u{301}e\u{301}e\u{301}");
        assert_eq!(wrap_line(&combined, 4, 0).len(), 2);
        assert_eq!(width_of("e\u{301}"), 1);
        // A family emoji (ZWJ sequence) is one cluster.
        let family = "👨\u{200d}👩\u{200d}👧";
        assert_eq!(width_of(family), 2);
        assert_eq!(
            plain(&wrap_line(&Line::from(format!("ab{family}cd")), 4, 0)),
            [format!("ab{family}"), "cd".to_owned()]
        );
        assert_eq!(truncate("你好世界", 5), "你好…");
    }

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
    }
}
