//! Listing children and descendants (§2.4 "Service listing rules") and the session projection
//! units `subagent` / `subagentTiming` (§5.7).

use std::collections::HashMap;
use std::sync::Arc;

use dsh_session::Event;
use dsh_session::SessionHeader;
use dsh_session::kind;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::descriptor::Descriptor;
use crate::descriptor::fold_last_wins;
use crate::error::SubagentError;
use crate::error::code;
use crate::service::Subagents;

/// Concurrency of cold reads.
const COLD_READS: usize = 4;

/// The session projection registry (upstream `sessionProjections`). The subagent service
/// provides one with its two units; `list_agents` requires it.
#[derive(Debug, Default)]
pub struct SessionProjections {
    units: std::sync::Mutex<Vec<(&'static str, u32)>>,
}

impl SessionProjections {
    pub fn register_unit(&self, name: &'static str, state_version: u32) {
        let mut units = dsh_sync::lock(&self.units);
        if !units.iter().any(|(n, _)| *n == name) {
            units.push((name, state_version));
        }
    }

    pub fn units(&self) -> Vec<(&'static str, u32)> {
        dsh_sync::lock(&self.units).clone()
    }

    /// The `subagent` unit's snapshot of a log.
    pub fn subagent(&self, events: &[Arc<Event>]) -> Option<crate::descriptor::Identity> {
        fold_last_wins(events)
    }
}

/// `subagentTiming`: settled model-work time since the last descriptor, and the open turn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timing {
    pub settled_ms: u64,
    /// `(since, through)` of an open turn.
    pub active: Option<(u64, u64)>,
}

pub fn fold_timing(events: &[Arc<Event>]) -> Timing {
    let mut timing = Timing::default();
    let mut open: Option<u64> = None;
    for event in events {
        match event.kind.as_str() {
            crate::descriptor::DESCRIPTOR_KIND => {
                timing = Timing::default();
                open = None;
            }
            kind::TURN_START => open = Some(event.time),
            kind::TURN_END => {
                if let Some(since) = open.take() {
                    timing.settled_ms += event.time.saturating_sub(since);
                }
            }
            _ => {}
        }
    }
    timing.active = open.map(|since| (since, events.last().map_or(since, |e| e.time)));
    timing
}

/// Whether the list walks direct children or the whole tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ListScope {
    #[default]
    Children,
    Descendants,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// A live session.
    Running,
    /// Stored only.
    Inactive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagnosticReason {
    Corrupt,
    Unsupported,
    Unavailable,
}

impl DiagnosticReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Corrupt => "corrupt",
            Self::Unsupported => "unsupported",
            Self::Unavailable => "unavailable",
        }
    }
}

/// One listed entry. `parent`/`depth` locate it in the tree (direct children: depth 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListRow {
    Child {
        id: String,
        mode: &'static str,
        label: Option<String>,
        activity: Activity,
        has_children: bool,
        parent: String,
        depth: u64,
    },
    Diagnostic {
        id: String,
        reason: DiagnosticReason,
        parent: String,
        depth: u64,
    },
}

impl ListRow {
    pub fn id(&self) -> &str {
        match self {
            Self::Child { id, .. } | Self::Diagnostic { id, .. } => id,
        }
    }
}

struct Node {
    header: SessionHeader,
    live: Option<Vec<Arc<Event>>>,
}

fn same_lifecycle(a: &SessionHeader, b: &SessionHeader) -> bool {
    a.id == b.id
        && a.created_at == b.created_at
        && a.cwd == b.cwd
        && a.parent_session == b.parent_session
        && a.seed_length == b.seed_length
        && a.delegation_depth == b.delegation_depth
}

impl Subagents {
    /// Persisted headers overlaid by live sessions (live wins by id).
    fn corpus(&self) -> HashMap<String, Node> {
        let mut corpus = HashMap::new();
        if let Some(store) = self.runtime.host.persistence() {
            match store.headers() {
                Ok(headers) => {
                    for header in headers {
                        corpus.insert(header.id.clone(), Node { header, live: None });
                    }
                }
                Err(error) => tracing::warn!(%error, "cannot list stored sessions"),
            }
        }
        for agent in self.runtime.directory.live() {
            let header = agent.log().header().clone();
            corpus.insert(
                header.id.clone(),
                Node {
                    header,
                    live: match agent.log().events() {
                        Ok(events) => Some(events.to_vec()),
                        Err(error) => {
                            tracing::warn!(%error, "cannot read a live session's history; listing it as stored");
                            None
                        }
                    },
                },
            );
        }
        corpus
    }

    /// Direct children of `parent` that are subagents (any mode), in `(createdAt, id)` order.
    pub async fn list_children(
        &self,
        parent: &str,
        signal: &CancellationToken,
    ) -> Result<Vec<ListRow>, SubagentError> {
        self.list_rows(parent, ListScope::Children, signal).await
    }

    /// Every subagent below `parent`, pre-order, siblings in `(createdAt, id)` order.
    pub async fn list_descendants(
        &self,
        parent: &str,
        signal: &CancellationToken,
    ) -> Result<Vec<ListRow>, SubagentError> {
        self.list_rows(parent, ListScope::Descendants, signal).await
    }

    async fn list_rows(
        &self,
        root: &str,
        scope: ListScope,
        signal: &CancellationToken,
    ) -> Result<Vec<ListRow>, SubagentError> {
        let cancelled = || SubagentError::coded(code::CANCELLED, "subagent listing was cancelled");
        if signal.is_cancelled() {
            return Err(cancelled());
        }
        let corpus = self.corpus();
        let mut by_parent: HashMap<&str, Vec<&Node>> = HashMap::new();
        for node in corpus.values() {
            if let Some(parent) = node.header.parent_session.as_deref() {
                by_parent.entry(parent).or_default().push(node);
            }
        }
        for siblings in by_parent.values_mut() {
            siblings.sort_by(|a, b| {
                a.header
                    .created_at
                    .cmp(&b.header.created_at)
                    .then_with(|| a.header.id.cmp(&b.header.id))
            });
        }
        let has_children = |id: &str| {
            by_parent
                .get(id)
                .is_some_and(|kids| kids.iter().any(|k| is_subagent(&k.header)))
        };
        // (node, parent, depth) in output order.
        let mut order: Vec<(&Node, String, u64)> = Vec::new();
        match scope {
            ListScope::Children => {
                for kid in by_parent.get(root).into_iter().flatten() {
                    order.push((kid, root.to_owned(), 1));
                }
            }
            ListScope::Descendants => walk_preorder(root, &by_parent, &mut order),
        }
        let store = self.runtime.host.persistence();
        let owned: Vec<Candidate> = order
            .into_iter()
            .filter(|(n, _, _)| is_subagent(&n.header))
            .map(|(node, parent, depth)| Candidate {
                has_children: has_children(&node.header.id),
                header: node.header.clone(),
                live: node.live.clone(),
                parent,
                depth,
            })
            .collect();
        drop(by_parent);
        drop(corpus);
        let rows = futures::stream::iter(owned)
            .map(move |candidate: Candidate| row_for(store.clone(), candidate))
            .buffered(COLD_READS);
        tokio::pin!(rows);
        let mut out = Vec::new();
        loop {
            tokio::select! {
                biased;
                () = signal.cancelled() => return Err(cancelled()),
                next = rows.next() => match next {
                    Some(Some(row)) => out.push(row),
                    Some(None) => {}
                    None => break,
                },
            }
        }
        Ok(out)
    }
}

fn is_subagent(header: &SessionHeader) -> bool {
    header.origin.as_deref() == Some("subagent")
}

fn walk_preorder<'a>(
    root: &str,
    by_parent: &HashMap<&str, Vec<&'a Node>>,
    out: &mut Vec<(&'a Node, String, u64)>,
) {
    // Iterative pre-order: push siblings in reverse so the first is visited first.
    let mut stack: Vec<(&'a Node, String, u64)> = Vec::new();
    if let Some(kids) = by_parent.get(root) {
        for kid in kids.iter().rev() {
            stack.push((kid, root.to_owned(), 1));
        }
    }
    let mut seen = std::collections::HashSet::new();
    while let Some((node, parent, level)) = stack.pop() {
        if !seen.insert(node.header.id.clone()) {
            continue;
        }
        if let Some(kids) = by_parent.get(node.header.id.as_str()) {
            for kid in kids.iter().rev() {
                stack.push((kid, node.header.id.clone(), level + 1));
            }
        }
        out.push((node, parent, level));
    }
}

struct Candidate {
    header: SessionHeader,
    live: Option<Vec<Arc<Event>>>,
    parent: String,
    depth: u64,
    has_children: bool,
}

async fn row_for(
    store: Option<Arc<dyn dsh_session::SessionStore>>,
    candidate: Candidate,
) -> Option<ListRow> {
    let Candidate {
        header,
        live,
        parent,
        depth,
        has_children,
    } = candidate;
    let id = header.id.clone();
    let diagnostic = |reason| ListRow::Diagnostic {
        id: id.clone(),
        reason,
        parent: parent.clone(),
        depth,
    };
    let child = |descriptor: Descriptor, activity| ListRow::Child {
        id: id.clone(),
        mode: descriptor.mode(),
        label: descriptor.label().map(str::to_owned),
        activity,
        has_children,
        parent: parent.clone(),
        depth,
    };
    if let Some(events) = live {
        // Live: no identity yet (the creation window before the descriptor) ⇒ omitted.
        return fold_last_wins(&events).map(|i| child(i.descriptor, Activity::Running));
    }
    let Some(store) = store else {
        return Some(diagnostic(DiagnosticReason::Unavailable));
    };
    let loaded = {
        let id = id.clone();
        tokio::task::spawn_blocking(move || store.load(&id)).await
    };
    let loaded = match loaded {
        Ok(Ok(loaded)) => loaded,
        _ => return Some(diagnostic(DiagnosticReason::Unavailable)),
    };
    if !same_lifecycle(&header, &loaded.header) {
        return Some(diagnostic(DiagnosticReason::Corrupt));
    }
    match fold_last_wins(&loaded.events) {
        Some(identity) => Some(child(identity.descriptor, Activity::Inactive)),
        None => Some(diagnostic(DiagnosticReason::Corrupt)),
    }
}
