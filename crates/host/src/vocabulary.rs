//! The event vocabulary of this build: the core kinds (`dsh_session::kind`), the host's own, and
//! every kind a plugin of the table declares (`HostPlugin::EVENT_KINDS`), mounted or not. Reading
//! a log needs none of it (the session crate keeps an unknown kind as an opaque event); resuming
//! or forking one does (§1.10: a non-ignorable type nobody knows is refused), and so does the
//! debug check on every append.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_plugin::PluginSpec;
use dsh_session::Event;
use dsh_session::KindCheck;
use dsh_session::is_core_kind;

/// Kinds the host itself appends: the permission state (written by `dsh-plugin`'s
/// `SessionContext`), the model choice and the slash-command audit pair.
const HOST_KINDS: [&str; 3] = [
    <crate::model_choice::ModelSelected as dsh_session::data::EventData>::KIND,
    dsh_commands::kind::COMMAND_RUN,
    dsh_commands::kind::COMMAND_DONE,
];

/// Kinds upstream writes that no dsh plugin owns yet: a log from upstream that holds them must
/// still resume here (dsh reads past them, as before the kinds moved to their plugins).
const UPSTREAM_KINDS: [&str; 1] = ["feedback/record"];

/// Upstream's team plugin names its kinds under this prefix.
const UPSTREAM_PREFIXES: [&str; 1] = ["team/"];

/// Why a table's declarations cannot stand.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VocabularyError {
    #[error(
        "plugin {plugin} declares event kind {kind:?}: a kind is `<namespace>/<name>` (lowercase, no spaces)"
    )]
    Malformed { plugin: String, kind: String },
    #[error(
        "plugin {plugin} declares event kind {kind:?}, which the core vocabulary owns: remove it from its EVENT_KINDS"
    )]
    Core { plugin: String, kind: String },
}

/// The kinds a stored log may hold without `ignorable: true` in this build.
#[derive(Debug, Clone)]
pub struct EventVocabulary {
    declared: HashSet<&'static str>,
}

impl EventVocabulary {
    /// The vocabulary of `table`, after checking each declaration: a malformed name or a core
    /// kind is refused (a typo at registration, not in a log). Two plugins may declare one kind
    /// (the two hook dialects write the same records).
    pub fn of(table: &[PluginSpec]) -> Result<Self, VocabularyError> {
        let mut declared: HashSet<&'static str> = HOST_KINDS
            .iter()
            .chain(dsh_plugin::PERMISSION_EVENT_KINDS)
            .chain(UPSTREAM_KINDS.iter())
            .copied()
            .collect();
        for spec in table {
            for &kind in spec.event_kinds {
                if !well_formed(kind) {
                    return Err(VocabularyError::Malformed {
                        plugin: spec.name.to_owned(),
                        kind: kind.to_owned(),
                    });
                }
                if is_core_kind(kind) {
                    return Err(VocabularyError::Core {
                        plugin: spec.name.to_owned(),
                        kind: kind.to_owned(),
                    });
                }
                declared.insert(kind);
            }
        }
        Ok(Self { declared })
    }

    /// Whether a log may hold `kind` without `ignorable: true`.
    pub fn knows(&self, kind: &str) -> bool {
        is_core_kind(kind)
            || self.declared.contains(kind)
            || UPSTREAM_PREFIXES
                .iter()
                .any(|prefix| kind.starts_with(prefix))
    }

    /// The first event of `events` this build cannot resume: a kind nobody declares, not marked
    /// ignorable.
    pub fn first_unknown<'a>(&self, events: &'a [Arc<Event>]) -> Option<&'a Event> {
        events
            .iter()
            .find(|event| !event.ignorable() && !self.knows(&event.kind))
            .map(|event| &**event)
    }

    /// The check a session log runs on each append.
    pub fn as_check(self: &Arc<Self>) -> KindCheck {
        let vocabulary = self.clone();
        Arc::new(move |kind| vocabulary.knows(kind))
    }
}

/// `<namespace>/<name>`: non-empty segments of lowercase letters, digits, `-` and `_`.
fn well_formed(kind: &str) -> bool {
    kind.contains('/')
        && kind.split('/').all(|segment| {
            !segment.is_empty()
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind the session crate listed before the kinds moved to their plugins (commit
    /// 5a37515's `KNOWN_KINDS`): a log that resumed then must resume now.
    const BEFORE: [&str; 48] = [
        "assistant/chunk",
        "tool/call",
        "tool/result",
        "assistant/message",
        "step/start",
        "step/end",
        "request/context",
        "user/message",
        "turn/start",
        "turn/end",
        "request/header",
        "todo/write",
        "session/end-seed",
        "agent/inbox/spliced",
        "llm/retry",
        "llm/retry-started",
        "session/title",
        "session/title-llm-request",
        "compaction/start",
        "compaction/summary",
        "compaction/end",
        "compaction/prune",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "permission/preset",
        "sandbox/mode",
        "plan/mode",
        "hook/invoked",
        "hook/result",
        "subagent/descriptor",
        "tool/code-dispatch-start",
        "tool/code-dispatch",
        "goal/change",
        "tool-workflow/run-start",
        "tool-workflow/agent-start",
        "tool-workflow/agent-end",
        "tool-workflow/run-end",
        "feedback/record",
        "schedule/change",
        "agent-preset/selected",
        "model/selected",
        "command/run",
        "command/done",
        "web/deepseek-search-llm-request",
        "checkpoint/created",
        "checkpoint/restore-started",
        "checkpoint/restored",
    ];

    #[test]
    fn the_builtin_table_declares_every_kind_the_session_crate_used_to_list() {
        let vocabulary = EventVocabulary::of(&crate::builtin_plugins()).unwrap();
        let missing: Vec<&str> = BEFORE
            .iter()
            .chain(&["team/member-joined"])
            .copied()
            .filter(|kind| !vocabulary.knows(kind))
            .collect();
        assert!(missing.is_empty(), "undeclared: {missing:?}");
        assert!(!vocabulary.knows("goal/chnage"));
        assert!(!vocabulary.knows("mystery/event"));
    }

    #[test]
    fn the_core_vocabulary_is_the_session_crates_own() {
        // No plugin kind is left in `dsh_session::CORE_KINDS`, and no plugin redeclares a core one.
        for kind in dsh_session::CORE_KINDS {
            assert!(
                !crate::builtin_plugins()
                    .iter()
                    .any(|spec| spec.event_kinds.contains(&kind)),
                "{kind} is core and declared by a plugin"
            );
        }
        assert_eq!(dsh_session::CORE_KINDS.len(), 16);
    }

    #[test]
    fn a_malformed_or_core_declaration_is_refused_at_registration() {
        assert!(well_formed("tool-workflow/run-start"));
        assert!(well_formed("agent/inbox/spliced"));
        for bad in [
            "goal",
            "goal/",
            "/change",
            "Goal/change",
            "goal/ change",
            "",
        ] {
            assert!(!well_formed(bad), "{bad:?}");
        }
    }
}
