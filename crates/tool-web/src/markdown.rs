//! HTML → Markdown following turndown's default rules (ATX headings, fenced code, `-` bullets,
//! `_` emphasis, `**` strong) plus the GFM plugin's tables. Output shapes are part of the tool's
//! model-facing text, so the joins, escapes and list/table layouts mirror turndown exactly.

use crate::html::Element;
use crate::html::Node;
use crate::html::VOIDS;
use crate::html::parse;

/// Block-level elements as turndown classifies them (they get blank-line separation).
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "audio",
    "blockquote",
    "body",
    "canvas",
    "center",
    "dd",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "frameset",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "hr",
    "html",
    "isindex",
    "li",
    "main",
    "menu",
    "nav",
    "noframes",
    "noscript",
    "ol",
    "output",
    "p",
    "pre",
    "section",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "ul",
];

/// Elements whose meaning survives without text (`blank` rule does not apply to them).
const MEANINGFUL_WHEN_BLANK: &[&str] = &[
    "a", "table", "thead", "tbody", "tfoot", "th", "td", "iframe", "script", "audio", "video",
];

fn is_block(name: &str) -> bool {
    BLOCKS.contains(&name)
}

/// Converts an HTML document or fragment to Markdown. CPU-bound and linear in the input (depth is
/// bounded by the parser): async callers run it on a blocking thread.
pub fn html_to_markdown(html: &str) -> String {
    let root = parse(html);
    let mut conv = Converter;
    let out = conv.children(&root, false);
    let out = out.trim_start_matches(['\t', '\r', '\n']);
    out.trim_end_matches(|c: char| c.is_whitespace()).to_owned()
}

struct Converter;

impl Converter {
    /// Renders the children of `el` and joins them turndown-style.
    fn children(&mut self, el: &Element, in_pre: bool) -> String {
        let mut out = String::new();
        let count = el.children.len();
        let siblings = Siblings::of(el);
        for (index, node) in el.children.iter().enumerate() {
            let piece = match node {
                Node::Text(text) => {
                    if in_pre {
                        text.clone()
                    } else {
                        let collapsed = collapse(text);
                        if collapsed.trim().is_empty() && drops_blank_text(el, index, count) {
                            continue;
                        }
                        // Whitespace does not repeat across adjacent inline nodes.
                        let collapsed =
                            if collapsed.starts_with(' ') && ends_with_space_or_start(&out) {
                                collapsed[1..].to_owned()
                            } else {
                                collapsed
                            };
                        escape(&collapsed)
                    }
                }
                Node::Element(child) => self.element(child, &siblings, index, in_pre),
            };
            join(&mut out, &piece);
        }
        out
    }

    fn element(&mut self, el: &Element, sib: &Siblings, index: usize, in_pre: bool) -> String {
        let parent = sib.parent;
        let name = el.name.as_str();
        if matches!(name, "script" | "style" | "noscript" | "template") {
            return String::new();
        }
        if name == "pre" {
            return code_block(el);
        }
        let in_pre = in_pre || name == "pre";
        if is_blank(el) {
            // An inline blank element still leaves its flanking whitespace behind.
            return if is_block(name) {
                "\n\n".to_owned()
            } else if el.text_empty {
                String::new()
            } else {
                " ".to_owned()
            };
        }
        match name {
            "br" => "  \n".to_owned(),
            "hr" => "\n\n* * *\n\n".to_owned(),
            "img" => {
                let alt = clean_attr(el.attr("alt").unwrap_or(""));
                let src = el.attr("src").unwrap_or("");
                if src.is_empty() {
                    return String::new();
                }
                let title = el
                    .attr("title")
                    .map(clean_attr)
                    .filter(|t| !t.is_empty())
                    .map_or_else(String::new, |t| format!(" \"{t}\""));
                format!("![{alt}]({src}{title})")
            }
            "code" if !in_pre => inline_code(&el.text_content()),
            // GFM plugin: task list checkboxes.
            "input" if parent.name == "li" && el.attr("type") == Some("checkbox") => {
                if el.attr("checked").is_some() {
                    "[x] ".to_owned()
                } else {
                    "[ ] ".to_owned()
                }
            }
            _ => {
                let mut content = self.children(el, in_pre);
                if is_block(name) {
                    // Whitespace at a block's edges is dropped while collapsing.
                    content = content.trim_start_matches(' ').to_owned();
                    if !content.ends_with('\n') {
                        content = content.trim_end_matches(' ').to_owned();
                    }
                }
                self.rule(el, sib, index, content)
            }
        }
    }

    fn rule(&mut self, el: &Element, sib: &Siblings, index: usize, content: String) -> String {
        let name = el.name.as_str();
        let parent = sib.parent;
        match name {
            "p" => format!("\n\n{content}\n\n"),
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let level = usize::from(name.as_bytes()[1] - b'0');
                format!("\n\n{} {content}\n\n", "#".repeat(level))
            }
            "blockquote" => {
                let trimmed = content.trim_matches('\n');
                let quoted: Vec<String> = trimmed.split('\n').map(|l| format!("> {l}")).collect();
                format!("\n\n{}\n\n", quoted.join("\n"))
            }
            "ul" | "ol" => {
                let last_in_li = parent.name == "li" && !sib.element_after[index];
                if last_in_li {
                    format!("\n{content}")
                } else {
                    format!("\n\n{content}\n\n")
                }
            }
            "li" => list_item(sib, index, &content),
            "em" | "i" => wrap(&content, "_"),
            // GFM plugin: strikethrough.
            "del" | "s" | "strike" => format!("~{content}~"),
            "strong" | "b" => wrap(&content, "**"),
            "a" => match el.attr("href") {
                Some(href) => {
                    let href = escape_parens(href);
                    let title = el
                        .attr("title")
                        .map(clean_attr)
                        .filter(|t| !t.is_empty())
                        .map_or_else(String::new, |t| format!(" \"{t}\""));
                    format!("[{content}]({href}{title})")
                }
                None => content,
            },
            "table" => table(content),
            "thead" | "tbody" | "tfoot" => content,
            "tr" => table_row(el, sib, index, &content),
            "th" | "td" => table_cell(&content, sib.first_cell == Some(index)),
            _ if is_block(name) => format!("\n\n{content}\n\n"),
            _ => content,
        }
    }
}

/// Whitespace-only text between block-level siblings (or at a block's edge) carries no
/// meaning; turndown's whitespace collapsing removes it.
fn drops_blank_text(parent: &Element, index: usize, count: usize) -> bool {
    if matches!(
        parent.name.as_str(),
        "ul" | "ol" | "table" | "thead" | "tbody" | "tfoot" | "tr" | "dl"
    ) {
        return true;
    }
    let neighbour_is_block = |i: Option<usize>| match i.and_then(|i| parent.children.get(i)) {
        Some(Node::Element(e)) => is_block(&e.name) || e.name == "br",
        Some(Node::Text(_)) => false,
        None => is_block(&parent.name) || parent.name == "#root",
    };
    let before = index.checked_sub(1);
    let after = (index + 1 < count).then_some(index + 1);
    neighbour_is_block(before) || neighbour_is_block(after)
}

fn ends_with_space_or_start(out: &str) -> bool {
    out.is_empty() || out.ends_with(' ') || out.ends_with('\n')
}

fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_space = false;
    for c in text.chars() {
        if matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{c}') {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out
}

/// turndown's markdown escapes (the `^` ones apply at the start of the text node).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '*' | '`' | '[' | ']' | '_' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    let starts = |p: &str| out.starts_with(p);
    if starts("-") || starts("+ ") || starts("=") || starts("~~~") || starts(">") {
        out.insert(0, '\\');
    } else if let Some(hashes) = out.find(|c| c != '#').filter(|n| (1..=6).contains(n))
        && out[hashes..].starts_with(' ')
    {
        out.insert(0, '\\');
    } else if let Some(digits) = out.find(|c: char| !c.is_ascii_digit()).filter(|n| *n > 0)
        && out[digits..].starts_with(". ")
    {
        out.insert(digits, '\\');
    }
    out
}

/// turndown's `join`, appending in place: the separator is the larger of the newline runs on
/// either side (max 2). Only `output`'s tail is touched, so joining n pieces stays linear.
fn join(output: &mut String, replacement: &str) {
    let kept = output.trim_end_matches('\n').len();
    let trailing = output.len() - kept;
    let s2 = replacement.trim_start_matches('\n');
    let leading = replacement.len() - s2.len();
    let nls = trailing.max(leading).min(2);
    output.truncate(kept);
    // Spaces next to a block boundary are insignificant (turndown drops them while collapsing
    // whitespace), but a hard break's `  \n` belongs to the text before it.
    if nls > 0 && trailing == 0 {
        let kept = output.trim_end_matches([' ', '\t']).len();
        output.truncate(kept);
    }
    let s2 = if nls > 0 && leading == 0 {
        s2.trim_start_matches([' ', '\t'])
    } else {
        s2
    };
    output.push_str(&"\n\n"[..nls]);
    output.push_str(s2);
}

/// What the rules ask about an element's siblings, computed once per parent so that a rule
/// never scans the sibling list (which made wide lists and tables quadratic).
struct Siblings<'a> {
    parent: &'a Element,
    /// An element follows the child at this index.
    element_after: Vec<bool>,
    /// An element or non-blank text follows the child at this index.
    meaningful_after: Vec<bool>,
    /// `<li>` siblings before the child at this index.
    items_before: Vec<usize>,
    /// A `<tr>` sibling precedes the child at this index.
    row_before: Vec<bool>,
    /// Index of the first `<th>`/`<td>` child.
    first_cell: Option<usize>,
}

impl<'a> Siblings<'a> {
    fn of(parent: &'a Element) -> Self {
        let count = parent.children.len();
        let mut element_after = vec![false; count];
        let mut meaningful_after = vec![false; count];
        let (mut element, mut meaningful) = (false, false);
        for (i, node) in parent.children.iter().enumerate().rev() {
            element_after[i] = element;
            meaningful_after[i] = meaningful;
            match node {
                Node::Element(_) => (element, meaningful) = (true, true),
                Node::Text(t) => meaningful |= !t.trim().is_empty(),
            }
        }
        let mut items_before = Vec::with_capacity(count);
        let mut row_before = Vec::with_capacity(count);
        let (mut items, mut row) = (0, false);
        let mut first_cell = None;
        for (i, node) in parent.children.iter().enumerate() {
            items_before.push(items);
            row_before.push(row);
            if let Node::Element(e) = node {
                match e.name.as_str() {
                    "li" => items += 1,
                    "tr" => row = true,
                    "th" | "td" if first_cell.is_none() => first_cell = Some(i),
                    _ => {}
                }
            }
        }
        Self {
            parent,
            element_after,
            meaningful_after,
            items_before,
            row_before,
            first_cell,
        }
    }
}

fn wrap(content: &str, delimiter: &str) -> String {
    if content.trim().is_empty() {
        return String::new();
    }
    // Flanking whitespace moves outside the delimiters, as turndown does.
    let leading = &content[..content.len() - content.trim_start().len()];
    let trailing = &content[content.trim_end().len()..];
    format!(
        "{leading}{delimiter}{}{delimiter}{trailing}",
        content.trim()
    )
}

fn is_blank(el: &Element) -> bool {
    let name = el.name.as_str();
    !VOIDS.contains(&name)
        && !MEANINGFUL_WHEN_BLANK.contains(&name)
        && el.text_blank
        && !el.has_void_or_link
}

fn clean_attr(value: &str) -> String {
    let mut out = String::new();
    for line in value.split('\n') {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line.trim());
    }
    out
}

fn escape_parens(href: &str) -> String {
    let mut out = String::with_capacity(href.len());
    for c in href.chars() {
        if c == '(' || c == ')' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn inline_code(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let code = text.replace("\r\n", " ").replace(['\r', '\n'], " ");
    let spaced_inside =
        code.len() > 2 && code.starts_with(' ') && code.ends_with(' ') && !code.trim().is_empty();
    let pad = if code.starts_with('`') || code.ends_with('`') || spaced_inside {
        " "
    } else {
        ""
    };
    // The shortest backtick run that does not occur in the code.
    let runs = backtick_runs(&code);
    let mut len = 1;
    while runs.contains(&len) {
        len += 1;
    }
    let fence = "`".repeat(len);
    format!("{fence}{pad}{code}{pad}{fence}")
}

fn backtick_runs(text: &str) -> Vec<usize> {
    let mut runs = Vec::new();
    let mut cur = 0;
    for c in text.chars().chain(std::iter::once(' ')) {
        if c == '`' {
            cur += 1;
        } else if cur > 0 {
            runs.push(cur);
            cur = 0;
        }
    }
    runs
}

fn longest_run(text: &str, ch: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for c in text.chars() {
        if c == ch {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

fn code_block(pre: &Element) -> String {
    let code = pre.children.iter().find_map(|n| match n {
        Node::Element(e) if e.name == "code" => Some(e),
        _ => None,
    });
    let (text, language) = match code {
        Some(code) => {
            let language = code
                .attr("class")
                .and_then(|c| {
                    c.split_whitespace()
                        .find_map(|cls| cls.strip_prefix("language-"))
                })
                .unwrap_or("")
                .to_owned();
            (code.text_content(), language)
        }
        None => (pre.text_content(), String::new()),
    };
    let fence = "`".repeat(3.max(longest_run(&text, '`') + 1));
    let text = text.strip_suffix('\n').unwrap_or(&text);
    format!("\n\n{fence}{language}\n{text}\n{fence}\n\n")
}

fn list_item(sib: &Siblings, index: usize, content: &str) -> String {
    let parent = sib.parent;
    let content = content.trim_start_matches('\n');
    let trimmed = content.trim_end_matches('\n');
    let content = if trimmed.len() < content.len() {
        format!("{trimmed}\n")
    } else {
        trimmed.to_owned()
    };
    let content = content.replace('\n', "\n    ");
    let prefix = if parent.name == "ol" {
        let start = parent
            .attr("start")
            .and_then(|s| s.trim().parse::<i64>().ok());
        let position = i64::try_from(sib.items_before[index]).unwrap_or(i64::MAX);
        let number = start.map_or(position.saturating_add(1), |s| s.saturating_add(position));
        format!("{number}.  ")
    } else {
        "-   ".to_owned()
    };
    let newline = if sib.meaningful_after[index] && !content.ends_with('\n') {
        "\n"
    } else {
        ""
    };
    format!("{prefix}{content}{newline}")
}

fn cells_of(row: &Element) -> Vec<&Element> {
    row.children
        .iter()
        .filter_map(|n| match n {
            Node::Element(e) if e.name == "th" || e.name == "td" => Some(e),
            _ => None,
        })
        .collect()
}

/// GFM heading row: in a `thead`, or the table's first row, made only of `th` cells.
fn is_heading_row(row: &Element, sib: &Siblings, index: usize) -> bool {
    let cells = cells_of(row);
    if cells.is_empty() || !cells.iter().all(|c| c.name == "th") {
        return false;
    }
    sib.parent.name == "thead" || !sib.row_before[index]
}

fn table_row(row: &Element, sib: &Siblings, index: usize, content: &str) -> String {
    let mut out = format!("\n{content}");
    if is_heading_row(row, sib, index) {
        let border: Vec<String> = cells_of(row)
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                let align = cell.attr("align").unwrap_or("").to_ascii_lowercase();
                let border = match align.as_str() {
                    "left" => ":--",
                    "right" => "--:",
                    "center" => ":-:",
                    _ => "---",
                };
                table_cell_text(border, i == 0)
            })
            .collect();
        out.push('\n');
        out.push_str(&border.concat());
    }
    out
}

fn table_cell(content: &str, first: bool) -> String {
    let text = content.replace(['\n', '\r'], " ").replace('|', "\\|");
    let text = text.trim();
    let width = text.chars().count();
    let padded = format!("{text}{}", " ".repeat(3usize.saturating_sub(width)));
    table_cell_text(&padded, first)
}

fn table_cell_text(text: &str, first: bool) -> String {
    let prefix = if first { "| " } else { " " };
    format!("{prefix}{text} |")
}

fn table(content: String) -> String {
    let content = content.replacen("\n\n", "\n", 1);
    format!("\n\n{content}\n\n")
}

#[cfg(test)]
#[path = "markdown_tests.rs"]
mod tests;
