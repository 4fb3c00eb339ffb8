//! What every in-process child shares (the host, the directory, the registry, the prompt
//! registry) and what every child gets on its own scope (§1.4): the delegated policy events,
//! the `subagent:delegation` context, the persona shadow, the tool restriction.

use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_agent::PromptRegistry;
use dsh_agent::prompt::Section;
use dsh_agent::prompt::Slot;
use dsh_kernel::Scope;
use dsh_session::Event;
use dsh_session::SessionError;
use dsh_session::SessionLog;
use dsh_session::kind;
use dsh_tools::ToolRegistry;
use serde_json::json;

use crate::descriptor::ToolFilterSpec;
use crate::directory::AgentDirectory;
use crate::error::SubagentError;
use crate::host::ChildHost;
use crate::host::DelegatedPolicy;

/// Name of the runtime-context statement every in-process child gets.
pub const DELEGATION_CONTEXT_NAME: &str = "subagent:delegation";
/// Its slot: the environment band, after the sandbox and approval statements.
pub const DELEGATION_CONTEXT_SLOT: Slot = Slot::Environment;
/// `SUBAGENT_DELEGATION_CONTEXT` (the source constant; it reaches the child's log verbatim).
pub const DELEGATION_CONTEXT: &str = "You are a delegated subagent: your permission scope was fixed when you were started and cannot be widened from inside this session — operations that require approval are rejected automatically. When the task needs access beyond that scope, do not retry the denied operation; state the limitation in your reply so the delegating agent can handle it.";
/// The persona shadow section (order 0).
pub const PERSONA_SECTION: &str = "deployment:persona";

/// The shared pieces of the in-process providers and the continuation manager.
pub struct ChildRuntime {
    /// The flat scope children's agent scopes are created under.
    pub scope: Scope,
    pub host: Arc<dyn ChildHost>,
    pub directory: Arc<AgentDirectory>,
    pub tools: Arc<ToolRegistry>,
    pub prompts: Option<Arc<PromptRegistry>>,
    /// Whether the approval service is composed (then children are pinned to `never`).
    pub approval_composed: bool,
    /// `(tool, section)` pairs: a child whose filter hides the tool gets the section blanked.
    pub(crate) tool_sections: std::sync::Mutex<Vec<(u64, String, String)>>,
    /// Reads a parent's explicit sandbox override; default: its latest `sandbox/mode` event.
    pub(crate) sandbox_override: Option<SandboxOverride>,
}

/// How a composition tells a parent's explicit sandbox override (a mode someone chose, or one
/// a delegation fixed) from the deployment default it merely follows.
pub type SandboxOverride = Arc<dyn Fn(&AgentHandle) -> Option<String> + Send + Sync>;

impl std::fmt::Debug for ChildRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildRuntime").finish_non_exhaustive()
    }
}

impl ChildRuntime {
    pub fn new(
        scope: Scope,
        host: Arc<dyn ChildHost>,
        directory: Arc<AgentDirectory>,
        tools: Arc<ToolRegistry>,
        prompts: Option<Arc<PromptRegistry>>,
        approval_composed: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            scope,
            host,
            directory,
            tools,
            prompts,
            approval_composed,
            tool_sections: std::sync::Mutex::default(),
            sandbox_override: None,
        })
    }

    /// The same runtime with the composition's reading of explicit sandbox overrides.
    pub fn with_sandbox_override(self: Arc<Self>, read: SandboxOverride) -> Arc<Self> {
        let mut me = Arc::try_unwrap(self).unwrap_or_else(|shared| Self {
            scope: shared.scope.clone(),
            host: shared.host.clone(),
            directory: shared.directory.clone(),
            tools: shared.tools.clone(),
            prompts: shared.prompts.clone(),
            approval_composed: shared.approval_composed,
            tool_sections: std::sync::Mutex::default(),
            sandbox_override: shared.sandbox_override.clone(),
        });
        me.sandbox_override = Some(read);
        Arc::new(me)
    }

    /// Records that `tool`'s prompt section `section` lives as long as `owner`.
    pub(crate) fn note_tool_section(self: &Arc<Self>, owner: &Scope, tool: &str, section: &str) {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        dsh_sync::lock(&self.tool_sections).push((id, tool.to_owned(), section.to_owned()));
        let me = Arc::downgrade(self);
        owner.defer(move || {
            if let Some(me) = me.upgrade() {
                dsh_sync::lock(&me.tool_sections).retain(|(entry, _, _)| *entry != id);
            }
        });
    }

    /// `captureDelegatedPolicyOverrides(parent)`: the parent's explicit sandbox override (its
    /// latest `sandbox/mode` event; the deployment default is never copied) and the pinned
    /// approval policy. Synchronous, so later parent switches cannot leak in.
    pub fn capture_policy(&self, parent: &AgentHandle) -> DelegatedPolicy {
        let sandbox = parent
            .log()
            .last_of_kind("sandbox/mode")
            .and_then(|e| sandbox_mode_of(&e));
        DelegatedPolicy {
            sandbox,
            approval_never: self.approval_composed,
        }
    }

    /// The delegated policy as `source:"delegation"` log events (fresh children only).
    pub fn append_policy_events(
        &self,
        log: &SessionLog,
        policy: &DelegatedPolicy,
    ) -> Result<(), SubagentError> {
        let failed = |e: dsh_session::SessionError| SubagentError::plain(e.to_string());
        if let Some(mode) = &policy.sandbox {
            log.append(
                "sandbox/mode",
                json!({"mode": mode, "source": "delegation"}),
                None,
            )
            .map_err(failed)?;
        }
        if self.approval_composed {
            log.append(
                "approval/policy",
                json!({"policy": "never", "source": "delegation"}),
                None,
            )
            .map_err(failed)?;
        }
        Ok(())
    }

    /// `applyChildComposition`: the delegation statement, the persona shadow, the restriction.
    /// Everything is registered on the child's own scope and dies with it.
    pub fn apply_composition(
        &self,
        child: &AgentHandle,
        persona: Option<&str>,
        tool_filter: Option<&ToolFilterSpec>,
    ) -> Result<(), SubagentError> {
        let scope = child.scope();
        match &self.prompts {
            Some(prompts) => {
                prompts.register_context(
                    scope,
                    Section::new(
                        DELEGATION_CONTEXT_NAME,
                        DELEGATION_CONTEXT_SLOT,
                        DELEGATION_CONTEXT,
                    ),
                );
                if let Some(persona) = persona {
                    prompts.register_section(
                        scope,
                        Section::new(PERSONA_SECTION, Slot::Persona, persona),
                    );
                }
            }
            None => tracing::warn!(
                child = child.id(),
                "no prompt registry: the child gets no delegation statement"
            ),
        }
        if let Some(filter) = tool_filter {
            self.tools
                .restrict(scope, filter.to_registry())
                .map_err(|e| SubagentError::plain(e.to_string()))?;
            // A tool section renders empty where its tool is not visible.
            if let Some(prompts) = &self.prompts {
                let sections: Vec<(String, String)> = dsh_sync::lock(&self.tool_sections)
                    .iter()
                    .map(|(_, tool, section)| (tool.clone(), section.clone()))
                    .collect();
                for (tool, section) in sections {
                    if self.tools.get(&tool, Some(scope)).is_none() {
                        prompts.register_section(scope, Section::new(section, Slot::Tools, ""));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The mode of the latest `sandbox/mode` event of `log` (only delegation stamps when
/// `delegated_only`). O(1) unless `delegated_only` and a later `sandbox/mode` (a permission
/// switch) shadows the delegation stamp: then the log is read back (per spawn, not per step).
pub fn latest_sandbox_mode(log: &SessionLog, delegated_only: bool) -> Option<String> {
    let delegated = |e: &Event| e.data.get("source").and_then(|s| s.as_str()) == Some("delegation");
    let latest = log.last_of_kind("sandbox/mode")?;
    if !delegated_only || delegated(&latest) {
        return sandbox_mode_of(&latest);
    }
    // A later switch of another source shadows the delegation's stamp: look further back.
    match log.events() {
        Ok(events) => events
            .iter()
            .rev()
            .filter(|e| e.kind == "sandbox/mode")
            .find(|e| delegated(e))
            .and_then(|e| sandbox_mode_of(e)),
        Err(error) => {
            // Unreadable history: pass on the mode the parent runs under now, never a wider
            // default.
            tracing::warn!(%error, "cannot read the delegation's sandbox stamp; passing on the current mode");
            sandbox_mode_of(&latest)
        }
    }
}

fn sandbox_mode_of(event: &Event) -> Option<String> {
    event
        .data
        .get("mode")
        .and_then(|m| m.as_str())
        .map(str::to_owned)
}

/// `completedTurnPrefix(parent)`: events `0..=seq(last turn/end)`; empty before any turn
/// ended. The in-flight turn (holding the delegating call) and later log-only events are out.
pub fn completed_turn_prefix(log: &SessionLog) -> Result<Vec<Arc<Event>>, SessionError> {
    let Some(last) = log.last_of_kind(kind::TURN_END) else {
        return Ok(Vec::new());
    };
    let mut events = log.events()?.to_vec();
    events.truncate(usize::try_from(last.seq + 1).unwrap_or(usize::MAX));
    Ok(events)
}

/// Owned copies of `events` for a session seed.
pub fn owned_seed(events: &[Arc<Event>]) -> Vec<Event> {
    events.iter().map(|e| (**e).clone()).collect()
}

#[cfg(test)]
mod tests {
    use dsh_session::SessionHeader;

    use super::*;

    /// The definition, over the whole log.
    fn whole_log(log: &SessionLog, delegated_only: bool) -> Option<String> {
        log.events()
            .unwrap()
            .iter()
            .rev()
            .filter(|e| e.kind == "sandbox/mode")
            .find(|e| {
                !delegated_only
                    || e.data.get("source").and_then(|s| s.as_str()) == Some("delegation")
            })
            .and_then(|e| sandbox_mode_of(e))
    }

    #[test]
    fn the_latest_sandbox_mode_is_the_whole_log_one() {
        let log = SessionLog::in_memory(SessionHeader::new("s", None));
        let steps = [
            json!({"mode": "read-only", "source": "delegation"}),
            json!({"mode": "workspace-write"}),
            json!({"mode": 7, "source": "delegation"}),
            json!({"mode": "danger-full-access", "source": "delegation"}),
            json!({"source": "client"}),
        ];
        for both in [false, true] {
            assert_eq!(latest_sandbox_mode(&log, both), None);
        }
        for (i, data) in steps.into_iter().enumerate() {
            log.append("sandbox/mode", data, None).unwrap();
            log.append("other/event", json!({}), None).unwrap();
            for delegated_only in [false, true] {
                assert_eq!(
                    latest_sandbox_mode(&log, delegated_only),
                    whole_log(&log, delegated_only),
                    "step {i}, delegated_only {delegated_only}"
                );
            }
        }
        assert_eq!(latest_sandbox_mode(&log, false), None);
        assert_eq!(
            latest_sandbox_mode(&log, true).as_deref(),
            Some("danger-full-access")
        );
    }
}
