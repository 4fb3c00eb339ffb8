//! A small, forgiving HTML tokenizer and tree builder: just enough structure for the Markdown
//! converter (elements, attributes, text with entities decoded). Not a full HTML5 parser: it
//! implements the implied-end-tag cases that matter for documents turndown handles (`p`, `li`,
//! table cells and rows) and drops comments, doctypes and raw-text elements we never render.

use crate::entities::decode;

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Element(Element),
    Text(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Node>,
}

impl Element {
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// All descendant text, as the DOM's `textContent`.
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        collect_text(&self.children, &mut out);
        out
    }
}

fn collect_text(nodes: &[Node], out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Element(e) => collect_text(&e.children, out),
        }
    }
}

const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

/// Elements whose content is raw text and never rendered (removed like turndown's `remove`).
const DROPPED_RAW: &[&str] = &["script", "style", "noscript", "template"];
/// Raw-text elements whose text we keep (entities still decoded).
const KEPT_RAW: &[&str] = &["title", "textarea"];

/// Starting one of these closes an open `<p>`.
const CLOSES_P: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "div",
    "dl",
    "fieldset",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "ul",
];

/// Parses a document into a synthetic root element named `#root`.
pub fn parse(input: &str) -> Element {
    let mut stack: Vec<Element> = vec![Element {
        name: "#root".to_owned(),
        attrs: Vec::new(),
        children: Vec::new(),
    }];
    let bytes = input.as_bytes();
    let mut i = 0;
    let mut text_start = 0;
    while i < bytes.len() {
        if bytes[i] != b'<' {
            i += 1;
            continue;
        }
        let rest = &input[i..];
        let next = bytes.get(i + 1).copied().unwrap_or(b' ');
        let is_markup = next.is_ascii_alphabetic() || next == b'/' || next == b'!' || next == b'?';
        if !is_markup {
            i += 1;
            continue;
        }
        push_text(&mut stack, &input[text_start..i]);
        if let Some(comment) = rest.strip_prefix("<!--") {
            i = comment.find("-->").map_or(bytes.len(), |p| i + 4 + p + 3);
        } else if next == b'!' || next == b'?' {
            i = rest.find('>').map_or(bytes.len(), |p| i + p + 1);
        } else if next == b'/' {
            let gt = rest.find('>');
            let name_end = gt.map_or(bytes.len(), |p| i + p);
            let end = gt.map_or(bytes.len(), |p| i + p + 1);
            let name: String = input[(i + 2).min(name_end)..name_end]
                .trim()
                .split(|c: char| c.is_ascii_whitespace())
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            close(&mut stack, &name);
            i = end;
        } else {
            let (tag, end) = parse_tag(input, i);
            i = end;
            let name = tag.name.clone();
            if DROPPED_RAW.contains(&name.as_str()) || KEPT_RAW.contains(&name.as_str()) {
                let closing = format!("</{name}");
                let lower = input[i..].to_ascii_lowercase();
                let (content_end, after) = match lower.find(&closing) {
                    Some(p) => {
                        let gt = input[i + p..]
                            .find('>')
                            .map_or(bytes.len(), |q| i + p + q + 1);
                        (i + p, gt)
                    }
                    None => (bytes.len(), bytes.len()),
                };
                if KEPT_RAW.contains(&name.as_str()) {
                    let mut el = tag.into_element();
                    el.children.push(Node::Text(decode(&input[i..content_end])));
                    append(&mut stack, Node::Element(el));
                }
                i = after;
            } else if VOID.contains(&name.as_str()) || tag.self_closing {
                if name == "hr" {
                    close_implied(&mut stack, &name);
                }
                append(&mut stack, Node::Element(tag.into_element()));
            } else {
                close_implied(&mut stack, &name);
                stack.push(tag.into_element());
            }
        }
        text_start = i;
    }
    push_text(&mut stack, &input[text_start.min(bytes.len())..]);
    while stack.len() > 1 {
        pop(&mut stack);
    }
    stack.pop().unwrap_or(Element {
        name: "#root".to_owned(),
        attrs: Vec::new(),
        children: Vec::new(),
    })
}

struct Tag {
    name: String,
    attrs: Vec<(String, String)>,
    self_closing: bool,
}

impl Tag {
    fn into_element(self) -> Element {
        Element {
            name: self.name,
            attrs: self.attrs,
            children: Vec::new(),
        }
    }
}

/// Parses `<name attr=...>` starting at `start`; returns the tag and the index after `>`.
fn parse_tag(input: &str, start: usize) -> (Tag, usize) {
    let bytes = input.as_bytes();
    let mut i = start + 1;
    let name_start = i;
    while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'>' && bytes[i] != b'/'
    {
        i += 1;
    }
    let name = input[name_start..i].to_ascii_lowercase();
    let mut attrs = Vec::new();
    let mut self_closing = false;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() {
            break;
        }
        match bytes[i] {
            b'>' => {
                i += 1;
                break;
            }
            b'/' => {
                self_closing = true;
                i += 1;
                continue;
            }
            _ => {}
        }
        self_closing = false;
        let k_start = i;
        while i < bytes.len()
            && !bytes[i].is_ascii_whitespace()
            && !matches!(bytes[i], b'=' | b'>' | b'/')
        {
            i += 1;
        }
        let key = input[k_start..i].to_ascii_lowercase();
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if bytes.get(i) == Some(&b'=') {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            match bytes.get(i) {
                Some(&q) if q == b'"' || q == b'\'' => {
                    let v_start = i + 1;
                    let v_end = input[v_start..]
                        .find(q as char)
                        .map_or(bytes.len(), |p| v_start + p);
                    value = decode(&input[v_start..v_end]);
                    i = (v_end + 1).min(bytes.len());
                }
                _ => {
                    let v_start = i;
                    while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'>' {
                        i += 1;
                    }
                    value = decode(&input[v_start..i]);
                }
            }
        }
        if key.is_empty() {
            i += 1;
        } else if !attrs.iter().any(|(k, _): &(String, String)| *k == key) {
            attrs.push((key, value));
        }
    }
    (
        Tag {
            name,
            attrs,
            self_closing,
        },
        i,
    )
}

fn push_text(stack: &mut [Element], raw: &str) {
    if raw.is_empty() {
        return;
    }
    let text = decode(raw);
    if let Some(top) = stack.last_mut() {
        if let Some(Node::Text(prev)) = top.children.last_mut() {
            prev.push_str(&text);
        } else {
            top.children.push(Node::Text(text));
        }
    }
}

fn append(stack: &mut [Element], node: Node) {
    if let Some(top) = stack.last_mut() {
        top.children.push(node);
    }
}

fn pop(stack: &mut Vec<Element>) {
    if stack.len() <= 1 {
        return;
    }
    if let Some(el) = stack.pop() {
        append(stack, Node::Element(el));
    }
}

fn is_open(stack: &[Element], name: &str, boundaries: &[&str]) -> bool {
    for el in stack.iter().rev() {
        if el.name == name {
            return true;
        }
        if boundaries.contains(&el.name.as_str()) {
            return false;
        }
    }
    false
}

fn close(stack: &mut Vec<Element>, name: &str) {
    if name.is_empty() || !stack.iter().skip(1).any(|e| e.name == name) {
        return;
    }
    while stack.len() > 1 {
        let done = stack.last().is_some_and(|e| e.name == name);
        pop(stack);
        if done {
            break;
        }
    }
}

/// The end tags HTML implies when `name` starts.
fn close_implied(stack: &mut Vec<Element>, name: &str) {
    if CLOSES_P.contains(&name) && is_open(stack, "p", &["button", "td", "th", "li", "table"]) {
        close(stack, "p");
    }
    match name {
        "li" if is_open(stack, "li", &["ul", "ol"]) => close(stack, "li"),
        "dt" | "dd" => {
            for n in ["dt", "dd"] {
                if is_open(stack, n, &["dl"]) {
                    close(stack, n);
                }
            }
        }
        "td" | "th" => {
            for n in ["td", "th"] {
                if is_open(stack, n, &["tr", "table"]) {
                    close(stack, n);
                }
            }
        }
        "tr" if is_open(stack, "tr", &["table"]) => close(stack, "tr"),
        "thead" | "tbody" | "tfoot" => {
            for n in ["thead", "tbody", "tfoot"] {
                if is_open(stack, n, &["table"]) {
                    close(stack, n);
                }
            }
        }
        _ => {}
    }
}
