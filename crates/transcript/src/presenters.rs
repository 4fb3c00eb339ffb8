//! Where the fold gets what it does not own: plugins' event presenters and tools' cards.

use dsh_sync::lock;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_session::Event;
use dsh_tools::ResultView;
use dsh_tools::ToolCallView;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolResultView;
use serde_json::Value;

use crate::Item;

/// A plugin's presenter: one of its events → the items a person sees (none is fine).
pub type PresentFn = dyn Fn(&Event) -> Vec<Item> + Send + Sync;

/// Why a presenter could not be registered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PresenterError {
    #[error(
        "event kind `{0}` belongs to the core transcript: a plugin presents only its own events"
    )]
    CoreKind(String),
    #[error("the scope registering a presenter for `{0}` is already disposed")]
    Disposed(String),
}

struct Registration {
    id: u64,
    present: Arc<PresentFn>,
}

/// The presenter registry in the host services: `event kind → items` for the events plugins
/// own. The latest live registration of a kind answers (a hot reload re-registers before the
/// old scope goes).
#[derive(Default)]
pub struct EventPresenters {
    by_kind: Mutex<HashMap<String, Vec<Registration>>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for EventPresenters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<String> = lock(&self.by_kind).keys().cloned().collect();
        f.debug_struct("EventPresenters")
            .field("kinds", &kinds)
            .finish()
    }
}

impl EventPresenters {
    pub fn new() -> Self {
        Self::default()
    }

    /// Presents events of `kind` with `present` until `scope` is disposed (or the returned
    /// disposer runs). The core kinds the fold itself reads cannot be taken over.
    pub fn register(
        self: &Arc<Self>,
        scope: &Scope,
        kind: &str,
        present: impl Fn(&Event) -> Vec<Item> + Send + Sync + 'static,
    ) -> Result<Disposer, PresenterError> {
        if crate::fold::CORE_KINDS.contains(&kind) {
            return Err(PresenterError::CoreKind(kind.to_owned()));
        }
        if scope.is_disposed() {
            return Err(PresenterError::Disposed(kind.to_owned()));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.by_kind)
            .entry(kind.to_owned())
            .or_default()
            .push(Registration {
                id,
                present: Arc::new(present),
            });
        let weak = Arc::downgrade(self);
        let owned_kind = kind.to_owned();
        let disposer = scope.defer(move || {
            if let Some(presenters) = weak.upgrade() {
                let mut by_kind = lock(&presenters.by_kind);
                if let Some(list) = by_kind.get_mut(&owned_kind) {
                    list.retain(|registration| registration.id != id);
                    if list.is_empty() {
                        by_kind.remove(&owned_kind);
                    }
                }
            }
        });
        if disposer.is_disposed() {
            return Err(PresenterError::Disposed(kind.to_owned()));
        }
        Ok(disposer)
    }

    /// The items a plugin presents for `event`; empty when no plugin presents its kind.
    pub fn present(&self, event: &Event) -> Vec<Item> {
        let present = lock(&self.by_kind)
            .get(event.kind.as_str())
            .and_then(|list| list.last())
            .map(|registration| registration.present.clone());
        // Called outside the lock: a presenter may be slow or register others.
        present.map_or_else(Vec::new, |present| present(event))
    }

    /// Whether some plugin presents `kind`.
    pub fn presents(&self, kind: &str) -> bool {
        lock(&self.by_kind).contains_key(kind)
    }
}

/// Where the fold finds tools' cards and plugins' presenters for one session: the tool
/// registry seen from the session's agent scope (agent-scoped tools are registered there),
/// and the host's presenter registry. The default has neither (generic cards, core events only).
#[derive(Clone, Default)]
pub struct Presentation {
    pub tools: Option<Arc<ToolRegistry>>,
    pub scope: Option<Scope>,
    pub presenters: Option<Arc<EventPresenters>>,
}

impl std::fmt::Debug for Presentation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presentation").finish_non_exhaustive()
    }
}

impl Presentation {
    pub fn new(
        tools: Arc<ToolRegistry>,
        scope: Scope,
        presenters: Option<Arc<EventPresenters>>,
    ) -> Self {
        Self {
            tools: Some(tools),
            scope: Some(scope),
            presenters,
        }
    }

    fn definition(&self, name: &str) -> Option<Arc<dsh_tools::ToolDefinition>> {
        self.tools
            .as_ref()
            .and_then(|tools| tools.get(name, self.scope.as_ref()))
    }

    /// The tool's `present_call` card (a generic one when the tool is unknown or has none).
    pub fn call_card(&self, name: &str, arguments: &Value) -> ToolCallView {
        dsh_tools::call_card(self.definition(name).as_deref(), name, arguments)
    }

    /// The tool's `present_result` card, `None` when it has none.
    pub fn result_card(
        &self,
        name: &str,
        arguments: &Value,
        view: &ResultView,
    ) -> Option<ToolResultView> {
        dsh_tools::result_card(self.definition(name).as_deref(), arguments, view)
    }

    /// What plugins present for an event the core fold does not read.
    pub fn present(&self, event: &Event) -> Vec<Item> {
        self.presenters
            .as_ref()
            .map_or_else(Vec::new, |presenters| presenters.present(event))
    }
}
