//! HTML parsing for the Markdown converter: html5ever's tokenizer and tree builder (the WHATWG
//! algorithm, with its complete named-entity table) feeding a flat arena, then an owned tree of
//! bounded depth.
//!
//! The input is parsed as the children of a `<body>` (as turndown parses its input), so
//! `<head>` markup such as `<title>` stays in the tree and renders as text.
//!
//! Two bounds keep hostile pages cheap. The tree builder scans its stack of open elements on
//! most start tags, so a start tag that would open an element deeper than [`MAX_PARSE_DEPTH`] is
//! dropped before it reaches the builder (its text still arrives). The owned tree is then
//! flattened below [`MAX_TREE_DEPTH`]: deeper elements give their children to the ancestor at
//! the limit, so the recursive Markdown pass and the tree's drop never run deep.

use std::borrow::Cow;
use std::cell::Cell;
use std::cell::Ref;
use std::cell::RefCell;

use html5ever::Attribute;
use html5ever::LocalName;
use html5ever::QualName;
use html5ever::TokenizerResult;
use html5ever::interface::AppendNode;
use html5ever::interface::AppendText;
use html5ever::interface::ElementFlags;
use html5ever::interface::NodeOrText;
use html5ever::interface::QuirksMode;
use html5ever::interface::TreeSink;
use html5ever::local_name;
use html5ever::ns;
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::BufferQueue;
use html5ever::tokenizer::TagKind;
use html5ever::tokenizer::Token;
use html5ever::tokenizer::TokenSink;
use html5ever::tokenizer::TokenSinkResult;
use html5ever::tokenizer::Tokenizer;
use html5ever::tokenizer::TokenizerOpts;
use html5ever::tree_builder::TreeBuilder;
use html5ever::tree_builder::TreeBuilderOpts;

/// Start tags that would open an element deeper than this are not given to the tree builder.
pub const MAX_PARSE_DEPTH: usize = 512;
/// Elements deeper than this in the converted tree are flattened into their ancestor.
pub const MAX_TREE_DEPTH: usize = 200;

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Element(Element),
    Text(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Node>,
    /// The element's `textContent` is empty.
    pub text_empty: bool,
    /// The element's `textContent` is only whitespace.
    pub text_blank: bool,
    /// A void element or an `<a>` is among the descendants.
    pub has_void_or_link: bool,
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

/// Void elements as the converter classifies them.
pub const VOIDS: &[&str] = &[
    "area", "base", "br", "col", "command", "embed", "hr", "img", "input", "keygen", "link",
    "meta", "param", "source", "track", "wbr",
];

/// Elements that hold only text: they never nest, so the depth guard lets them through (a
/// dropped `<script>` would leak its code as text).
const TEXT_ONLY: &[&str] = &[
    "script",
    "style",
    "title",
    "textarea",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "noscript",
    "plaintext",
];

/// Parses a document or fragment into a synthetic root element named `#root`.
pub fn parse(input: &str) -> Element {
    let sink = Arena::default();
    let context = sink.create_element(
        QualName::new(None, ns!(html), local_name!("body")),
        Vec::new(),
        ElementFlags::default(),
    );
    let builder = TreeBuilder::new_for_fragment(
        sink,
        context,
        None,
        TreeBuilderOpts {
            scripting_enabled: true,
            ..TreeBuilderOpts::default()
        },
    );
    let tokenizer = Tokenizer::new(DepthGuard { builder }, TokenizerOpts::default());
    let queue = BufferQueue::default();
    queue.push_back(StrTendril::from_slice(input));
    while !matches!(tokenizer.feed(&queue), TokenizerResult::Done) {}
    tokenizer.end();
    tokenizer.sink.builder.sink.into_tree()
}

/// Drops start tags that would nest deeper than [`MAX_PARSE_DEPTH`] (see the module docs).
struct DepthGuard {
    builder: TreeBuilder<usize, Arena>,
}

impl TokenSink for DepthGuard {
    type Handle = usize;

    fn process_token(&self, token: Token, line_number: u64) -> TokenSinkResult<usize> {
        if let Token::TagToken(tag) = &token
            && tag.kind == TagKind::StartTag
            && self.builder.sink.cursor_depth.get() >= MAX_PARSE_DEPTH
            && !VOIDS.contains(&&*tag.name)
            && !TEXT_ONLY.contains(&&*tag.name)
        {
            return TokenSinkResult::Continue;
        }
        self.builder.process_token(token, line_number)
    }

    fn end(&self) {
        self.builder.end();
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.builder
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

enum Data {
    Document,
    Element {
        name: QualName,
        attrs: Vec<Attribute>,
    },
    Text(StrTendril),
    /// Comments, processing instructions, template contents: never rendered.
    Other,
}

struct ArenaNode {
    data: Data,
    parent: Option<usize>,
    children: Vec<usize>,
    /// Depth when last attached (approximate after reparenting; only the guard reads it).
    depth: usize,
}

/// The tree builder's sink: nodes in one vector, handles are indices.
struct Arena {
    nodes: RefCell<Vec<ArenaNode>>,
    /// Depth of the node most recently attached: where the builder is inserting now.
    cursor_depth: Cell<usize>,
}

impl Default for Arena {
    fn default() -> Self {
        Self {
            nodes: RefCell::new(vec![ArenaNode {
                data: Data::Document,
                parent: None,
                children: Vec::new(),
                depth: 0,
            }]),
            cursor_depth: Cell::new(0),
        }
    }
}

impl Arena {
    fn push(&self, data: Data) -> usize {
        let mut nodes = self.nodes.borrow_mut();
        nodes.push(ArenaNode {
            data,
            parent: None,
            children: Vec::new(),
            depth: 0,
        });
        nodes.len() - 1
    }

    fn detach(nodes: &mut [ArenaNode], id: usize) {
        if let Some(parent) = nodes[id].parent.take() {
            let siblings = &mut nodes[parent].children;
            if let Some(at) = siblings.iter().rposition(|&c| c == id) {
                siblings.remove(at);
            }
        }
    }

    /// Inserts `child` into `parent` at `at` (the end when `None`), merging adjacent text.
    fn insert(&self, parent: usize, at: Option<usize>, child: NodeOrText<usize>) {
        let mut nodes = self.nodes.borrow_mut();
        let depth = nodes[parent].depth + 1;
        let at = at.unwrap_or(nodes[parent].children.len());
        match child {
            AppendText(text) => {
                self.cursor_depth.set(depth - 1);
                let before = at.checked_sub(1).map(|i| nodes[parent].children[i]);
                if let Some(prev) = before
                    && let Data::Text(existing) = &mut nodes[prev].data
                {
                    existing.push_tendril(&text);
                    return;
                }
                nodes.push(ArenaNode {
                    data: Data::Text(text),
                    parent: Some(parent),
                    children: Vec::new(),
                    depth,
                });
                let id = nodes.len() - 1;
                nodes[parent].children.insert(at, id);
            }
            AppendNode(id) => {
                self.cursor_depth.set(depth);
                Self::detach(&mut nodes, id);
                let at = at.min(nodes[parent].children.len());
                nodes[id].parent = Some(parent);
                nodes[id].depth = depth;
                nodes[parent].children.insert(at, id);
            }
        }
    }

    /// The owned tree: the fragment's nodes under `#root`, flattened below [`MAX_TREE_DEPTH`].
    fn into_tree(self) -> Element {
        let nodes = self.nodes.into_inner();
        // The fragment parser puts everything under one `<html>` child of the document.
        let top: &[usize] = nodes[0]
            .children
            .iter()
            .find(|&&c| matches!(nodes[c].data, Data::Element { .. }))
            .map_or(&[], |&html| nodes[html].children.as_slice());
        let mut root = Element {
            name: "#root".to_owned(),
            ..Element::default()
        };
        // The elements under construction, outermost first; their count is the depth.
        let mut open: Vec<Element> = Vec::new();
        // Each frame: arena children still to visit, and whether the frame owns an element
        // of `open` (frames below the depth limit are flattened into their ancestor).
        let mut frames: Vec<(&[usize], bool)> = vec![(top, false)];
        while let Some((pending, owns)) = frames.last_mut() {
            let Some((&id, rest)) = pending.split_first() else {
                let owned = *owns;
                frames.pop();
                if owned && let Some(element) = open.pop() {
                    let element = Node::Element(finish(element));
                    open.last_mut().unwrap_or(&mut root).children.push(element);
                }
                continue;
            };
            *pending = rest;
            match &nodes[id].data {
                Data::Text(text) => {
                    let target = open.last_mut().unwrap_or(&mut root);
                    match target.children.last_mut() {
                        Some(Node::Text(existing)) => existing.push_str(text),
                        _ => target.children.push(Node::Text(text.to_string())),
                    }
                }
                Data::Element { name, attrs } => {
                    let owns = open.len() < MAX_TREE_DEPTH;
                    if owns {
                        open.push(Element {
                            name: name.local.to_string(),
                            attrs: attrs
                                .iter()
                                .map(|a| (a.name.local.to_string(), a.value.to_string()))
                                .collect(),
                            ..Element::default()
                        });
                    }
                    frames.push((nodes[id].children.as_slice(), owns));
                }
                Data::Document | Data::Other => {}
            }
        }
        finish(root)
    }
}

/// Fills the cached text facts of a finished element from its children.
fn finish(mut element: Element) -> Element {
    let mut text_empty = true;
    let mut text_blank = true;
    let mut has_void_or_link = false;
    for child in &element.children {
        match child {
            Node::Text(text) => {
                text_empty &= text.is_empty();
                text_blank &= text.trim().is_empty();
            }
            Node::Element(e) => {
                text_empty &= e.text_empty;
                text_blank &= e.text_blank;
                has_void_or_link |=
                    e.has_void_or_link || e.name == "a" || VOIDS.contains(&e.name.as_str());
            }
        }
    }
    element.text_empty = text_empty;
    element.text_blank = text_blank;
    element.has_void_or_link = has_void_or_link;
    element
}

impl TreeSink for Arena {
    type Handle = usize;
    type Output = Self;
    type ElemName<'a> = Ref<'a, QualName>;

    fn finish(self) -> Self {
        self
    }

    fn parse_error(&self, _msg: Cow<'static, str>) {}

    fn get_document(&self) -> usize {
        0
    }

    fn elem_name<'a>(&'a self, target: &'a usize) -> Ref<'a, QualName> {
        Ref::map(self.nodes.borrow(), |nodes| match &nodes[*target].data {
            Data::Element { name, .. } => name,
            _ => &UNNAMED,
        })
    }

    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, _: ElementFlags) -> usize {
        self.push(Data::Element { name, attrs })
    }

    fn create_comment(&self, _text: StrTendril) -> usize {
        self.push(Data::Other)
    }

    fn create_pi(&self, _target: StrTendril, _data: StrTendril) -> usize {
        self.push(Data::Other)
    }

    fn append(&self, parent: &usize, child: NodeOrText<usize>) {
        self.insert(*parent, None, child);
    }

    fn append_based_on_parent_node(
        &self,
        element: &usize,
        prev_element: &usize,
        child: NodeOrText<usize>,
    ) {
        if self.nodes.borrow()[*element].parent.is_some() {
            self.append_before_sibling(element, child);
        } else {
            self.append(prev_element, child);
        }
    }

    fn append_doctype_to_document(&self, _: StrTendril, _: StrTendril, _: StrTendril) {}

    fn get_template_contents(&self, _target: &usize) -> usize {
        // Template contents are never rendered: give the builder a detached node.
        self.push(Data::Other)
    }

    fn same_node(&self, x: &usize, y: &usize) -> bool {
        x == y
    }

    fn set_quirks_mode(&self, _mode: QuirksMode) {}

    fn append_before_sibling(&self, sibling: &usize, new_node: NodeOrText<usize>) {
        let (parent, at) = {
            let nodes = self.nodes.borrow();
            let Some(parent) = nodes[*sibling].parent else {
                return;
            };
            let at = nodes[parent].children.iter().position(|&c| c == *sibling);
            (parent, at)
        };
        if let AppendNode(id) = &new_node {
            // Detach first so that the sibling's index is the one after removal.
            let mut nodes = self.nodes.borrow_mut();
            Self::detach(&mut nodes, *id);
        }
        let at = {
            let nodes = self.nodes.borrow();
            nodes[parent].children.iter().position(|&c| c == *sibling)
        }
        .or(at);
        self.insert(parent, at, new_node);
    }

    fn add_attrs_if_missing(&self, target: &usize, attrs: Vec<Attribute>) {
        if let Data::Element {
            attrs: existing, ..
        } = &mut self.nodes.borrow_mut()[*target].data
        {
            for attr in attrs {
                if !existing.iter().any(|a| a.name == attr.name) {
                    existing.push(attr);
                }
            }
        }
    }

    fn remove_from_parent(&self, target: &usize) {
        Self::detach(&mut self.nodes.borrow_mut(), *target);
    }

    fn reparent_children(&self, node: &usize, new_parent: &usize) {
        let mut nodes = self.nodes.borrow_mut();
        let moved = std::mem::take(&mut nodes[*node].children);
        let depth = nodes[*new_parent].depth + 1;
        for &child in &moved {
            nodes[child].parent = Some(*new_parent);
            nodes[child].depth = depth;
        }
        nodes[*new_parent].children.extend(moved);
    }
}

static UNNAMED: std::sync::LazyLock<QualName> =
    std::sync::LazyLock::new(|| QualName::new(None, ns!(), LocalName::from("")));
