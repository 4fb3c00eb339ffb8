//! Finished transcript entries are rendered (Markdown, cards, wrapping) once per width and
//! kept; a frame re-renders only entries that changed or are still live (streaming text,
//! running cards). Keyed by the transcript's entry stamps, so an entry that changes gets a
//! new stamp and is rendered again.

use std::collections::HashMap;
use std::collections::HashSet;
use std::rc::Rc;

use ratatui::text::Line;

/// What else an entry's rendering depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RenderKey {
    pub(crate) width: usize,
    pub(crate) expand_tools: bool,
    pub(crate) show_reasoning: bool,
}

#[derive(Default)]
pub struct RenderCache {
    entries: HashMap<u64, (RenderKey, Rc<Vec<Line<'static>>>)>,
    /// Stamps used by the current frame (the rest are dropped when the cache grows).
    used: HashSet<u64>,
    renders: u64,
}

impl std::fmt::Debug for RenderCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderCache")
            .field("entries", &self.entries.len())
            .field("renders", &self.renders)
            .finish()
    }
}

impl RenderCache {
    /// How many entry renderings were computed so far (cache misses and live entries).
    pub fn renders(&self) -> u64 {
        self.renders
    }

    /// The lines of an entry: cached when `stamp` is given (a finished entry) and known for
    /// `key`, else rendered now (and kept when `stamp` is given).
    pub(crate) fn lines(
        &mut self,
        stamp: Option<u64>,
        key: &RenderKey,
        render: impl FnOnce() -> Vec<Line<'static>>,
    ) -> Rc<Vec<Line<'static>>> {
        if let Some(stamp) = stamp {
            self.used.insert(stamp);
            if let Some((cached, lines)) = self.entries.get(&stamp)
                && cached == key
            {
                return lines.clone();
            }
        }
        self.renders += 1;
        let lines = Rc::new(render());
        if let Some(stamp) = stamp {
            self.entries.insert(stamp, (key.clone(), lines.clone()));
        }
        lines
    }

    /// Ends a frame: forgets renderings of entries that no longer exist once they pile up.
    pub(crate) fn end_frame(&mut self) {
        if self.entries.len() > 2 * self.used.len() + 64 {
            let used = std::mem::take(&mut self.used);
            self.entries.retain(|stamp, _| used.contains(stamp));
        } else {
            self.used.clear();
        }
    }
}
