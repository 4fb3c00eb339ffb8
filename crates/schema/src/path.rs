//! Paths kept as a parent-linked arena and rendered only when a message needs one.
//!
//! Building every path string eagerly costs O(depth²) on deep schemas and values (a 5 000-deep
//! chain would allocate hundreds of megabytes); an arena entry is O(1).

#[derive(Clone, Copy)]
enum Seg<'a> {
    Root(&'a str),
    Key(&'a str),
    Index(usize),
}

/// Handle of one path in a [`Paths`] arena.
pub(crate) type PathId = usize;

pub(crate) struct Paths<'a> {
    nodes: Vec<(PathId, Seg<'a>)>,
}

impl<'a> Paths<'a> {
    /// A new arena whose path 0 is `root`.
    pub(crate) fn new(root: &'a str) -> Self {
        Self {
            nodes: vec![(0, Seg::Root(root))],
        }
    }

    pub(crate) const ROOT: PathId = 0;

    /// `parent.key` (just `key` when `parent` renders empty).
    pub(crate) fn key(&mut self, parent: PathId, key: &'a str) -> PathId {
        self.nodes.push((parent, Seg::Key(key)));
        self.nodes.len() - 1
    }

    /// `parent[index]`.
    pub(crate) fn index(&mut self, parent: PathId, index: usize) -> PathId {
        self.nodes.push((parent, Seg::Index(index)));
        self.nodes.len() - 1
    }

    /// The path text, e.g. `schema.properties.a`, `servers[1].host`.
    pub(crate) fn render(&self, id: PathId) -> String {
        let mut segs = Vec::new();
        let mut cur = id;
        while let Some(&(parent, seg)) = self.nodes.get(cur) {
            segs.push(seg);
            if matches!(seg, Seg::Root(_)) {
                break;
            }
            cur = parent;
        }
        let mut out = String::new();
        for seg in segs.iter().rev() {
            match seg {
                Seg::Root(r) => out.push_str(r),
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
            }
        }
        out
    }
}

/// A path rendered at most once, and only if a message needs it.
pub(crate) struct Lazy {
    id: PathId,
    text: Option<String>,
}

impl Lazy {
    pub(crate) fn new(id: PathId) -> Self {
        Self { id, text: None }
    }

    pub(crate) fn id(&self) -> PathId {
        self.id
    }

    pub(crate) fn get(&mut self, paths: &Paths<'_>) -> String {
        self.text
            .get_or_insert_with(|| paths.render(self.id))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::Paths;

    #[test]
    fn renders_dotted_keys_and_bracketed_indices() {
        let mut paths = Paths::new("");
        let servers = paths.key(Paths::ROOT, "servers");
        let one = paths.index(servers, 1);
        let host = paths.key(one, "host");
        assert_eq!(paths.render(Paths::ROOT), "");
        assert_eq!(paths.render(host), "servers[1].host");
        let mut rooted = Paths::new("value");
        let a = rooted.key(Paths::ROOT, "a");
        let i = rooted.index(Paths::ROOT, 0);
        assert_eq!(rooted.render(a), "value.a");
        assert_eq!(rooted.render(i), "value[0]");
    }
}
