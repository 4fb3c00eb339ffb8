//! Model Markdown as styled transcript lines, parsed by `pulldown-cmark` (CommonMark plus
//! tables, strikethrough and task lists): headings, emphasis, inline code, links (with their
//! target), nested ordered and unordered lists, block quotes, fenced and indented code with
//! a light highlighter, rules, and tables fitted to the width.
//!
//! Output is logical lines with the continuation indent each needs; wrapping to the screen
//! width happens later ([`crate::text::wrap_line`]), except for tables, which are laid out here.

use pulldown_cmark::CodeBlockKind;
use pulldown_cmark::Event;
use pulldown_cmark::HeadingLevel;
use pulldown_cmark::Options;
use pulldown_cmark::Parser;
use pulldown_cmark::Tag;
use pulldown_cmark::TagEnd;
use ratatui::style::Color;
use ratatui::style::Modifier;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::text::Span;

use crate::text::highlight_code;
use crate::text::truncate;
use crate::text::width_of;

fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// One open list: the next number for an ordered list.
struct List {
    next: Option<u64>,
}

/// A table being collected: rows of cells, each cell its spans.
#[derive(Default)]
struct Table {
    rows: Vec<Vec<Vec<Span<'static>>>>,
    header_rows: usize,
    cell: Vec<Span<'static>>,
    row: Vec<Vec<Span<'static>>>,
}

struct Renderer {
    out: Vec<(Line<'static>, usize)>,
    /// The line being built (inline content).
    spans: Vec<Span<'static>>,
    /// Inline style stack (emphasis, links, headings).
    styles: Vec<Style>,
    lists: Vec<List>,
    /// The marker of the item whose first line is being built.
    marker: Option<String>,
    quote: usize,
    code: Option<(String, String)>,
    table: Option<Table>,
    links: Vec<String>,
    /// A block ended: the next block starts after a blank line.
    gap: bool,
    width: usize,
}

impl Renderer {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, change: impl FnOnce(Style) -> Style) {
        let next = change(self.style());
        self.styles.push(next);
    }

    /// Indentation of list content at the current depth.
    fn list_pad(&self) -> usize {
        self.lists.len().saturating_sub(1) * 2
    }

    /// The prefix of a new line: quote bars, then list indentation (with the item's marker on
    /// its first line). Returns the spans and their width (the continuation indent).
    fn prefix(&mut self) -> (Vec<Span<'static>>, usize) {
        let mut spans = Vec::new();
        let mut width = 0;
        for _ in 0..self.quote {
            spans.push(Span::styled("│ ", dim()));
            width += 2;
        }
        if !self.lists.is_empty() {
            let pad = self.list_pad();
            match self.marker.take() {
                Some(marker) => {
                    let text = format!("{}{marker}", " ".repeat(pad));
                    width += width_of(&text);
                    spans.push(Span::styled(text, Style::default().fg(Color::Cyan)));
                }
                None => {
                    // Continuation of an item: aligned under its text.
                    let text = " ".repeat(pad + 2);
                    width += text.len();
                    spans.push(Span::raw(text));
                }
            }
        }
        (spans, width)
    }

    fn flush(&mut self) {
        if self.spans.is_empty() && self.marker.is_none() {
            return;
        }
        let (mut line, indent) = self.prefix();
        line.append(&mut self.spans);
        self.out.push((Line::from(line), indent));
    }

    fn blank(&mut self) {
        let mut spans = Vec::new();
        for _ in 0..self.quote {
            spans.push(Span::styled("│", dim()));
        }
        self.out.push((Line::from(spans), 0));
    }

    /// Before a block: the blank line separating it from the previous one.
    fn open_block(&mut self) {
        self.flush();
        if self.gap && !self.out.is_empty() {
            self.blank();
        }
        self.gap = false;
    }

    fn text(&mut self, text: &str) {
        if let Some(table) = &mut self.table {
            table.cell.push(Span::styled(
                text.to_owned(),
                self.styles.last().copied().unwrap_or_default(),
            ));
            return;
        }
        if let Some((_, buffer)) = &mut self.code {
            buffer.push_str(text);
            return;
        }
        let style = self.style();
        self.spans.push(Span::styled(text.to_owned(), style));
    }

    fn inline_span(&mut self, span: Span<'static>) {
        match &mut self.table {
            Some(table) => table.cell.push(span),
            None => self.spans.push(span),
        }
    }

    fn code_block(&mut self, lang: String, body: &str) {
        let label = if lang.is_empty() {
            "code"
        } else {
            lang.as_str()
        };
        let (mut head, indent) = self.prefix();
        head.push(Span::styled(format!("  ╭─ {label}"), dim()));
        self.out.push((Line::from(head), indent));
        for raw in body.trim_end_matches('\n').split('\n') {
            let (mut line, indent) = self.prefix();
            line.push(Span::styled("  │ ", dim()));
            line.extend(highlight_code(raw, &lang));
            self.out.push((Line::from(line), indent + 4));
        }
    }

    fn table(&mut self, table: Table) {
        let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
        if columns == 0 {
            return;
        }
        let text = |cell: &[Span<'static>]| -> String {
            cell.iter().map(|s| s.content.as_ref()).collect()
        };
        let mut widths = vec![1usize; columns];
        for row in &table.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(width_of(&text(cell)));
            }
        }
        // Fit: `│ a │ b │` costs 3 per column plus 1; shrink the widest columns first.
        let (_, indent) = self.prefix();
        let budget = self
            .width
            .saturating_sub(indent + 1 + 3 * columns)
            .max(columns);
        while widths.iter().sum::<usize>() > budget {
            let Some(widest) = (0..columns).max_by_key(|&i| widths[i]) else {
                break;
            };
            if widths[widest] <= 3 {
                break;
            }
            widths[widest] -= 1;
        }
        let border = |left: &str, mid: &str, right: &str| -> String {
            let inner: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            format!("{left}{}{right}", inner.join(mid))
        };
        let rule = |renderer: &mut Self, text: String| {
            let (mut line, indent) = renderer.prefix();
            line.push(Span::styled(text, dim()));
            renderer.out.push((Line::from(line), indent));
        };
        rule(self, border("┌", "┬", "┐"));
        for (r, row) in table.rows.iter().enumerate() {
            let (mut line, indent) = self.prefix();
            for (i, width) in widths.iter().enumerate() {
                line.push(Span::styled("│ ", dim()));
                let cell = row.get(i).map(Vec::as_slice).unwrap_or_default();
                let shown = text(cell);
                let fitted = truncate(&shown, *width);
                let style = if r < table.header_rows {
                    Style::default().add_modifier(Modifier::BOLD)
                } else {
                    cell.first().map(|s| s.style).unwrap_or_default()
                };
                let pad = width.saturating_sub(width_of(&fitted));
                line.push(Span::styled(fitted, style));
                line.push(Span::raw(" ".repeat(pad + 1)));
            }
            line.push(Span::styled("│", dim()));
            self.out.push((Line::from(line), indent));
            if r + 1 == table.header_rows {
                rule(self, border("├", "┼", "┤"));
            }
        }
        rule(self, border("└", "┴", "┘"));
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            // An item's first paragraph stays on the marker's line.
            Tag::Paragraph if self.marker.is_some() => {}
            Tag::Paragraph => self.open_block(),
            Tag::Heading { level, .. } => {
                self.open_block();
                self.push_style(|s| {
                    let s = s.fg(Color::Cyan).add_modifier(Modifier::BOLD);
                    if level == HeadingLevel::H1 {
                        s.add_modifier(Modifier::UNDERLINED)
                    } else {
                        s
                    }
                });
            }
            Tag::BlockQuote(_) => {
                self.open_block();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.open_block();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(first) => {
                if self.lists.is_empty() {
                    self.open_block();
                } else {
                    self.flush();
                }
                self.lists.push(List { next: first });
            }
            Tag::Item => {
                self.flush();
                let marker = match self.lists.last_mut() {
                    Some(List { next: Some(n) }) => {
                        let marker = format!("{n}. ");
                        *n += 1;
                        marker
                    }
                    _ => "• ".to_owned(),
                };
                self.marker = Some(marker);
            }
            Tag::Emphasis => self.push_style(|s| s.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|s| s.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(|s| s.add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                self.links.push(dest_url.to_string());
                self.push_style(|s| s.fg(Color::Blue).add_modifier(Modifier::UNDERLINED));
            }
            Tag::Image { dest_url, .. } => {
                self.links.push(dest_url.to_string());
                self.inline_span(Span::styled("[image: ", dim()));
                self.push_style(|s| s.add_modifier(Modifier::ITALIC));
            }
            Tag::Table(_) => {
                self.open_block();
                self.table = Some(Table::default());
            }
            Tag::TableHead | Tag::TableRow => {}
            Tag::TableCell => {}
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush();
                self.gap = true;
            }
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.flush();
                self.gap = true;
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote = self.quote.saturating_sub(1);
                self.gap = true;
            }
            TagEnd::CodeBlock => {
                if let Some((lang, body)) = self.code.take() {
                    self.code_block(lang, &body);
                }
                self.gap = true;
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.gap = true;
                }
            }
            TagEnd::Item => {
                self.flush();
                self.marker = None;
                self.gap = false;
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.styles.pop();
            }
            TagEnd::Link => {
                self.styles.pop();
                let url = self.links.pop().unwrap_or_default();
                let shown: String = self
                    .spans
                    .iter()
                    .rev()
                    .take(1)
                    .map(|s| s.content.to_string())
                    .collect();
                // `<https://x>` shows the URL as its own text: no need to repeat it.
                if !url.is_empty() && shown != url && !url.starts_with('#') {
                    self.inline_span(Span::styled(format!(" ({url})"), dim()));
                }
            }
            TagEnd::Image => {
                self.styles.pop();
                let url = self.links.pop().unwrap_or_default();
                self.inline_span(Span::styled(format!("] ({url})"), dim()));
            }
            TagEnd::TableCell => {
                if let Some(table) = &mut self.table {
                    let cell = std::mem::take(&mut table.cell);
                    table.row.push(cell);
                }
            }
            TagEnd::TableHead => {
                if let Some(table) = &mut self.table {
                    let row = std::mem::take(&mut table.row);
                    table.rows.push(row);
                    table.header_rows = table.rows.len();
                }
            }
            TagEnd::TableRow => {
                if let Some(table) = &mut self.table {
                    let row = std::mem::take(&mut table.row);
                    table.rows.push(row);
                }
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.table(table);
                }
                self.gap = true;
            }
            _ => {}
        }
    }
}

/// Renders Markdown into logical lines (with each line's continuation indent). `width` is the
/// screen width, used to fit tables.
pub fn markdown(text: &str, base: Style, width: usize) -> Vec<(Line<'static>, usize)> {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut renderer = Renderer {
        out: Vec::new(),
        spans: Vec::new(),
        styles: vec![base],
        lists: Vec::new(),
        marker: None,
        quote: 0,
        code: None,
        table: None,
        links: Vec::new(),
        gap: false,
        width,
    };
    for event in Parser::new_ext(text, options) {
        match event {
            Event::Start(tag) => renderer.start(tag),
            Event::End(tag) => renderer.end(tag),
            Event::Text(text) => renderer.text(&text),
            Event::Code(code) => {
                let style = renderer.style().fg(Color::Yellow);
                renderer.inline_span(Span::styled(code.to_string(), style));
            }
            Event::SoftBreak => renderer.text(" "),
            Event::HardBreak => renderer.flush(),
            Event::Rule => {
                renderer.open_block();
                renderer
                    .out
                    .push((Line::from(Span::styled("────────", dim())), 0));
                renderer.gap = true;
            }
            Event::TaskListMarker(done) => {
                let mark = if done { "☑ " } else { "☐ " };
                renderer.inline_span(Span::styled(mark, Style::default().fg(Color::Cyan)));
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                renderer.text(html.trim_end_matches('\n'))
            }
            Event::InlineMath(math) | Event::DisplayMath(math) => renderer.text(&math),
            Event::FootnoteReference(label) => renderer.text(&format!("[{label}]")),
        }
    }
    renderer.flush();
    renderer.out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn plain(lines: &[(Line<'_>, usize)]) -> Vec<String> {
        lines
            .iter()
            .map(|(l, _)| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn headings_lists_code_and_inline() {
        let lines = markdown(
            "# Title\n\n- item `x` **b**\n\n```rust\nfn main() {}\n```",
            Style::default(),
            80,
        );
        assert_eq!(
            plain(&lines),
            [
                "Title",
                "",
                "• item x b",
                "",
                "  ╭─ rust",
                "  │ fn main() {}"
            ]
        );
        let item = &lines[2].0;
        assert_eq!(item.spans[2].style.fg, Some(Color::Yellow));
        assert!(item.spans[4].style.add_modifier.contains(Modifier::BOLD));
        let code = &lines[5].0;
        assert_eq!(code.spans[1].content, "fn");
        assert_eq!(code.spans[1].style.fg, Some(Color::Magenta));
    }

    #[test]
    fn nested_lists_keep_their_depth_and_numbers() {
        let text = "1. one\n   - inner *a*\n   - inner b\n     1. deep\n2. two\n   more of two\n";
        let lines = markdown(text, Style::default(), 80);
        assert_eq!(
            plain(&lines),
            [
                "1. one",
                "  • inner a",
                "  • inner b",
                "    1. deep",
                "2. two more of two",
            ]
        );
        // A wrapped item continues under its text, not under the marker.
        assert_eq!(lines[3].1, 7);
    }

    #[test]
    fn links_show_their_target_and_tables_are_laid_out() {
        let lines = markdown(
            "See [the docs](https://example.com/d) or <https://x.dev>.\n\n| Name | Size |\n|---|---:|\n| a.rs | 10 |\n| b | 2000 |\n",
            Style::default(),
            80,
        );
        assert_eq!(
            plain(&lines),
            [
                "See the docs (https://example.com/d) or https://x.dev.",
                "",
                "┌──────┬──────┐",
                "│ Name │ Size │",
                "├──────┼──────┤",
                "│ a.rs │ 10   │",
                "│ b    │ 2000 │",
                "└──────┴──────┘",
            ]
        );
        assert!(
            lines[0].0.spans[1]
                .style
                .add_modifier
                .contains(Modifier::UNDERLINED)
        );
    }

    #[test]
    fn a_wide_table_is_fitted_to_the_width() {
        let row = format!("| {} | {} |", "x".repeat(40), "y".repeat(40));
        let text = format!("| a | b |\n|---|---|\n{row}\n");
        for line in markdown(&text, Style::default(), 40) {
            let shown: String = line.0.spans.iter().map(|s| s.content.as_ref()).collect();
            assert!(width_of(&shown) <= 40, "{shown}");
        }
    }

    #[test]
    fn quotes_rules_strikethrough_and_tasks() {
        let lines = markdown(
            "> quoted **text**\n\n---\n\n- [x] done\n- [ ] todo ~~old~~\n",
            Style::default(),
            80,
        );
        assert_eq!(
            plain(&lines),
            [
                "│ quoted text",
                "",
                "────────",
                "",
                "• ☑ done",
                "• ☐ todo old"
            ]
        );
        let old = lines[5].0.spans.last().unwrap();
        assert!(old.style.add_modifier.contains(Modifier::CROSSED_OUT));
    }
}
