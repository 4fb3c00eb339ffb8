//! The session's permission preset when a client picked one (ACP's `session/set_mode`, the
//! TUI's `/approval`): the session context logs it as `permission/preset {preset}` (with
//! `sandbox/mode` and `approval/policy` when they change), and this folds it back when the
//! session is resumed or forked, so a session set to `read-only` in one process is still
//! `read-only` when an editor reopens it in another. A session whose client never picked a
//! preset follows the configuration, as when it was created.

use dsh_plugin::Permissions;
use dsh_session::SessionLog;

/// The event the session context writes for a client's preset choice.
pub(crate) const PRESET_KIND: &str = "permission/preset";

/// The permissions of the latest preset `log` records a client choosing, if any. An entry
/// that names no known preset (a log from another version) is passed over for an earlier one.
pub(crate) fn restored(log: &SessionLog) -> Option<Permissions> {
    let preset_of = |event: &dsh_session::Event| {
        let name = event.data.get("preset")?.as_str()?;
        dsh_plugin::PRESETS
            .iter()
            .find(|preset| preset.name == name)
            .map(|preset| preset.permissions)
    };
    let latest = log.last_of_kind(PRESET_KIND)?;
    preset_of(&latest).or_else(|| {
        log.events()
            .ok()?
            .iter()
            .rev()
            .filter(|event| event.kind == PRESET_KIND)
            .find_map(|event| preset_of(event))
    })
}

#[cfg(test)]
mod tests {
    use dsh_plugin::SandboxMode;
    use dsh_session::SessionHeader;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_latest_known_preset_is_restored() {
        let log = SessionLog::in_memory(SessionHeader::new("s", None));
        assert_eq!(restored(&log), None, "no choice: the configuration decides");
        log.append(PRESET_KIND, json!({"preset": "danger-full-access"}), None)
            .unwrap();
        log.append(PRESET_KIND, json!({"preset": "read-only"}), None)
            .unwrap();
        assert_eq!(
            restored(&log).map(|p| p.sandbox),
            Some(SandboxMode::ReadOnly)
        );
        log.append(PRESET_KIND, json!({"preset": "from-the-future"}), None)
            .unwrap();
        assert_eq!(
            restored(&log).map(|p| p.sandbox),
            Some(SandboxMode::ReadOnly),
            "an unknown name does not reset the session to the configured mode"
        );
    }
}
