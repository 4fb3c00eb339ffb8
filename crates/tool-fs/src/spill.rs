//! Where glob/grep put their complete over-cap result. The store itself (layout, privacy,
//! naming) and the generic inline cap belong to `dsh-spill`; this is the tools' handle on it.

pub use dsh_spill::SpillSaved;
pub use dsh_spill::SpillStore;

/// The session's spill store. Saving is best-effort: no store, no session or a failed save
/// all mean "the complete result could not be saved", never an error.
#[derive(Debug, Clone, Default)]
pub struct SpillConfig {
    pub store: Option<SpillStore>,
    /// The owning session (upstream keys spill directories by session id).
    pub session_id: Option<String>,
}

impl SpillConfig {
    pub fn new(store: SpillStore, session_id: impl Into<String>) -> Self {
        Self {
            store: Some(store),
            session_id: Some(session_id.into()),
        }
    }

    /// Saves `content` as `suggested_name`; `None` when it could not be saved.
    pub fn save(&self, suggested_name: &str, content: &str) -> Option<SpillSaved> {
        let (store, session) = (self.store.as_ref()?, self.session_id.as_deref()?);
        match store.save_text(session, suggested_name, content) {
            Ok(saved) => Some(saved),
            Err(err) => {
                tracing::warn!(error = %err, name = suggested_name, "spill save failed; keeping inline result");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn saves_only_with_store_and_session() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(SpillConfig::default().save("x.txt", "a"), None);
        let no_session = SpillConfig {
            store: Some(SpillStore::new(dir.path())),
            session_id: None,
        };
        assert_eq!(no_session.save("x.txt", "a"), None);
        let config = SpillConfig::new(SpillStore::new(dir.path()), "s");
        let saved = config.save("glob-results.txt", "a\nb").unwrap();
        assert!(saved.locator.ends_with("-glob-results.txt"));
        assert_eq!(std::fs::read_to_string(&saved.locator).unwrap(), "a\nb");
        let blocked = SpillConfig::new(SpillStore::new("/proc/definitely/not/writable"), "s");
        assert_eq!(blocked.save("x.txt", "a"), None);
    }
}
