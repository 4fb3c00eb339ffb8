//! Line wrapping and Markdown rendering into styled ratatui lines.
//!
//! Wrapping is done here rather than by `Paragraph` so the transcript knows its exact height
//! (scrolling from the bottom needs it) and so snapshots do not depend on widget internals.

use ratatui::style::Color;
use ratatui::style::Modifier;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::text::Span;
use unicode_width::UnicodeWidthChar;

/// Splits one styled line into lines of at most `width` cells, breaking at the last space when
/// there is one. Continuation lines get `indent` blank cells.
pub fn wrap_line(line: &Line<'_>, width: usize, indent: usize) -> Vec<Line<'static>> {
    let width = width.max(indent + 4);
    let cells: Vec<(char, Style)> = line
        .spans
        .iter()
        .flat_map(|span| {
            let style = line.style.patch(span.style);
            span.content.chars().map(move |c| (c, style))
        })
        .filter(|(c, _)| *c != '\n' && *c != '\r')
        .map(|(c, style)| if c == '\t' { (' ', style) } else { (c, style) })
        .collect();
    let mut out = Vec::new();
    let mut start = 0;
    let mut first = true;
    loop {
        let budget = if first { width } else { width - indent };
        let mut used = 0;
        let mut end = start;
        while end < cells.len() {
            let w = cells[end].0.width().unwrap_or(0);
            if used + w > budget {
                break;
            }
            used += w;
            end += 1;
        }
        let mut next = end;
        if end < cells.len()
            && let Some(space) = (start + 1..end).rev().find(|&i| cells[i].0 == ' ')
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

fn merge(cells: &[(char, Style)]) -> Vec<Span<'static>> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut current = String::new();
    let mut style = None;
    for (c, s) in cells {
        if style.is_some_and(|style| style != *s) {
            spans.push(Span::styled(
                std::mem::take(&mut current),
                style.unwrap_or_default(),
            ));
        }
        style = Some(*s);
        current.push(*c);
    }
    if let Some(style) = style {
        spans.push(Span::styled(current, style));
    }
    spans
}

/// Display width of a string in terminal cells.
pub fn width_of(text: &str) -> usize {
    text.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// Truncates to `width` cells, ending with `…` when cut.
pub fn truncate(text: &str, width: usize) -> String {
    if width_of(text) <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        used += w;
        out.push(c);
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

/// Inline Markdown: `code`, **bold**, *italic* / _italic_.
fn inline(text: &str, base: Style) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let push = |current: &mut String, spans: &mut Vec<Span<'static>>| {
        if !current.is_empty() {
            spans.push(Span::styled(std::mem::take(current), base));
        }
    };
    let find = |from: usize, pat: &[char]| -> Option<usize> {
        (from..chars.len().saturating_sub(pat.len() - 1)).find(|&k| chars[k..].starts_with(pat))
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '`'
            && let Some(end) = find(i + 1, &['`'])
        {
            push(&mut current, &mut spans);
            let code: String = chars[i + 1..end].iter().collect();
            spans.push(Span::styled(code, base.fg(Color::Yellow)));
            i = end + 1;
            continue;
        }
        if c == '*'
            && chars.get(i + 1) == Some(&'*')
            && let Some(end) = find(i + 2, &['*', '*'])
            && end > i + 2
        {
            push(&mut current, &mut spans);
            let inner: String = chars[i + 2..end].iter().collect();
            spans.extend(inline(&inner, base.add_modifier(Modifier::BOLD)));
            i = end + 2;
            continue;
        }
        let word_start = i == 0 || !chars[i - 1].is_alphanumeric();
        if (c == '*' || c == '_')
            && word_start
            && chars.get(i + 1).is_some_and(|n| !n.is_whitespace())
            && let Some(end) = find(i + 1, &[c])
            && end > i + 1
        {
            push(&mut current, &mut spans);
            let inner: String = chars[i + 1..end].iter().collect();
            spans.extend(inline(&inner, base.add_modifier(Modifier::ITALIC)));
            i = end + 1;
            continue;
        }
        current.push(c);
        i += 1;
    }
    push(&mut current, &mut spans);
    spans
}

/// Renders Markdown into logical (unwrapped) lines with the continuation indent each needs.
pub fn markdown(text: &str, base: Style) -> Vec<(Line<'static>, usize)> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for raw in text.lines() {
        let trimmed = raw.trim_start();
        if let Some(rest) = trimmed.strip_prefix("```") {
            match fence {
                Some(_) => fence = None,
                None => {
                    let lang = rest.trim().to_owned();
                    let label = if lang.is_empty() {
                        "code".to_owned()
                    } else {
                        lang.clone()
                    };
                    out.push((
                        Line::from(Span::styled(
                            format!("  ╭─ {label}"),
                            Style::default().fg(Color::DarkGray),
                        )),
                        0,
                    ));
                    fence = Some(lang);
                }
            }
            continue;
        }
        if let Some(lang) = &fence {
            let mut spans = vec![Span::styled("  │ ", Style::default().fg(Color::DarkGray))];
            spans.extend(highlight_code(raw, lang));
            out.push((Line::from(spans), 4));
            continue;
        }
        if trimmed.is_empty() {
            out.push((Line::default(), 0));
            continue;
        }
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            let mut style = base.fg(Color::Cyan).add_modifier(Modifier::BOLD);
            if hashes == 1 {
                style = style.add_modifier(Modifier::UNDERLINED);
            }
            out.push((Line::from(inline(trimmed[hashes..].trim(), style)), 0));
            continue;
        }
        if trimmed.chars().all(|c| c == '-' || c == '*' || c == '_') && trimmed.len() >= 3 {
            out.push((
                Line::from(Span::styled(
                    "────────",
                    Style::default().fg(Color::DarkGray),
                )),
                0,
            ));
            continue;
        }
        let depth = (raw.len() - trimmed.len()) / 2;
        let pad = "  ".repeat(depth);
        if let Some(rest) = trimmed.strip_prefix("> ") {
            let mut spans = vec![Span::styled("│ ", Style::default().fg(Color::DarkGray))];
            spans.extend(inline(rest, base.add_modifier(Modifier::ITALIC)));
            out.push((Line::from(spans), 2));
            continue;
        }
        if let Some(rest) = ["- ", "* ", "+ "]
            .iter()
            .find_map(|p| trimmed.strip_prefix(p))
        {
            let rest = rest
                .strip_prefix("[ ] ")
                .map(|r| format!("☐ {r}"))
                .or_else(|| rest.strip_prefix("[x] ").map(|r| format!("☑ {r}")))
                .unwrap_or_else(|| rest.to_owned());
            let mut spans = vec![Span::styled(
                format!("{pad}• "),
                Style::default().fg(Color::Cyan),
            )];
            spans.extend(inline(&rest, base));
            out.push((Line::from(spans), pad.len() + 2));
            continue;
        }
        let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && trimmed[digits..].starts_with(". ") {
            let marker = format!("{pad}{}. ", &trimmed[..digits]);
            let indent = marker.len();
            let mut spans = vec![Span::styled(marker, Style::default().fg(Color::Cyan))];
            spans.extend(inline(&trimmed[digits + 2..], base));
            out.push((Line::from(spans), indent));
            continue;
        }
        out.push((Line::from(inline(raw, base)), 0));
    }
    out
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
    fn markdown_styles_headings_lists_code_and_inline() {
        let lines = markdown(
            "# Title\n- item `x` **b**\n```rust\nfn main() {}\n```",
            Style::default(),
        );
        let texts: Vec<String> = plain(&lines.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>());
        assert_eq!(
            texts,
            ["Title", "• item x b", "  ╭─ rust", "  │ fn main() {}"]
        );
        let item = &lines[1].0;
        assert_eq!(item.spans[2].style.fg, Some(Color::Yellow));
        assert!(item.spans[4].style.add_modifier.contains(Modifier::BOLD));
        let code = &lines[3].0;
        assert_eq!(code.spans[1].content, "fn");
        assert_eq!(code.spans[1].style.fg, Some(Color::Magenta));
    }

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
    }
}
