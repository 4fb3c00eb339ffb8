//! HTML → Markdown following turndown's default rules (ATX headings, fenced code, `-` bullets,
//! `_` emphasis, `**` strong) plus the GFM plugin's tables. Output shapes are part of the tool's
//! model-facing text, so the joins, escapes and list/table layouts mirror turndown exactly.

use crate::html::Element;
use crate::html::Node;
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

const VOIDS: &[&str] = &[
    "area", "base", "br", "col", "command", "embed", "hr", "img", "input", "keygen", "link",
    "meta", "param", "source", "track", "wbr",
];

/// Elements whose meaning survives without text (`blank` rule does not apply to them).
const MEANINGFUL_WHEN_BLANK: &[&str] = &[
    "a", "table", "thead", "tbody", "tfoot", "th", "td", "iframe", "script", "audio", "video",
];

fn is_block(name: &str) -> bool {
    BLOCKS.contains(&name)
}

/// Converts an HTML document or fragment to Markdown.
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
                Node::Element(child) => self.element(child, el, index, in_pre),
            };
            out = join(&out, &piece);
        }
        out
    }

    fn element(&mut self, el: &Element, parent: &Element, index: usize, in_pre: bool) -> String {
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
            } else if el.text_content().is_empty() {
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
                self.rule(el, parent, index, content)
            }
        }
    }

    fn rule(&mut self, el: &Element, parent: &Element, index: usize, content: String) -> String {
        let name = el.name.as_str();
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
                let last_in_li = parent.name == "li"
                    && !parent.children[index + 1..]
                        .iter()
                        .any(|n| matches!(n, Node::Element(_)));
                if last_in_li {
                    format!("\n{content}")
                } else {
                    format!("\n\n{content}\n\n")
                }
            }
            "li" => list_item(parent, index, &content),
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
            "tr" => table_row(el, parent, index, &content),
            "th" | "td" => table_cell(&content, parent, el),
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

/// turndown's `join`: the separator is the larger of the newline runs on either side (max 2).
fn join(output: &str, replacement: &str) -> String {
    let s1 = output.trim_end_matches('\n');
    let s2 = replacement.trim_start_matches('\n');
    let nls = (output.len() - s1.len())
        .max(replacement.len() - s2.len())
        .min(2);
    // Spaces next to a block boundary are insignificant (turndown drops them while collapsing
    // whitespace), but a hard break's `  \n` belongs to the text before it.
    let s1 = if nls > 0 && s1.len() == output.len() {
        s1.trim_end_matches([' ', '\t'])
    } else {
        s1
    };
    let s2 = if nls > 0 && s2.len() == replacement.len() {
        s2.trim_start_matches([' ', '\t'])
    } else {
        s2
    };
    let mut out = String::with_capacity(s1.len() + nls + s2.len());
    out.push_str(s1);
    out.push_str(&"\n\n"[..nls]);
    out.push_str(s2);
    out
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
        && el.text_content().trim().is_empty()
        && !has_descendant(el, &|e| VOIDS.contains(&e.name.as_str()) || e.name == "a")
}

fn has_descendant(el: &Element, pred: &dyn Fn(&Element) -> bool) -> bool {
    el.children.iter().any(|n| match n {
        Node::Element(e) => pred(e) || has_descendant(e, pred),
        Node::Text(_) => false,
    })
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

fn list_item(parent: &Element, index: usize, content: &str) -> String {
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
        let position = parent.children[..index]
            .iter()
            .filter(|n| matches!(n, Node::Element(e) if e.name == "li"))
            .count() as i64;
        format!("{}.  ", start.map_or(position + 1, |s| s + position))
    } else {
        "-   ".to_owned()
    };
    let has_next = parent.children[index + 1..].iter().any(|n| {
        matches!(n, Node::Element(_)) || matches!(n, Node::Text(t) if !t.trim().is_empty())
    });
    let newline = if has_next && !content.ends_with('\n') {
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
fn is_heading_row(row: &Element, parent: &Element, index: usize) -> bool {
    let cells = cells_of(row);
    if cells.is_empty() || !cells.iter().all(|c| c.name == "th") {
        return false;
    }
    parent.name == "thead"
        || !parent.children[..index]
            .iter()
            .any(|n| matches!(n, Node::Element(e) if e.name == "tr"))
}

fn table_row(row: &Element, parent: &Element, index: usize, content: &str) -> String {
    let mut out = format!("\n{content}");
    if is_heading_row(row, parent, index) {
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

fn table_cell(content: &str, row: &Element, cell: &Element) -> String {
    let first = cells_of(row)
        .first()
        .is_some_and(|c| std::ptr::eq(*c, cell));
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
