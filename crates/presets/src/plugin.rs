//! `[plugins.agent-presets]`: the roster as a service, the session's preset applied as a
//! per-session piece, `/preset`.
//!
//! The session's preset is a fold over its log (the latest `agent-preset/selected`, else the
//! header's `agentPreset`, else the parent session's preset, else the roster default), so
//! resume and fork see the preset the log says without any state of their own. A switch is
//! logged and then re-applies every piece of the session (`Sessions::reapply`, the path a
//! permission switch takes): this piece rebuilds from the new preset, and the pieces of other
//! plugins rebuild from the same session state they always read.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_commands::CommandCall;
use dsh_commands::CommandRegistry;
use dsh_commands::CommandResult;
use dsh_commands::CommandSpec;
use dsh_kernel::Scope;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::PromptRegistry;
use dsh_plugin::Section;
use dsh_plugin::SessionContext;
use dsh_plugin::Sessions;
use dsh_plugin::Slot;
use dsh_tools::ToolFilter;
use dsh_tools::ToolRegistry;

use crate::PRESET_COMMAND;
use crate::PRESET_DESCRIPTION;
use crate::PRESET_HINT;
use crate::Preset;
use crate::PresetAction;
use crate::PresetRoot;
use crate::PresetRoster;
use crate::PresetSelected;
use crate::PresetsConfig;
use crate::preset_command;

/// The section name a persona registers (shadowing the deployment persona).
const PERSONA_SECTION: &str = "deployment:persona";

/// Why a preset switch did not happen.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error("Unknown preset: {0}")]
    Unknown(String),
    #[error("The preset can only be switched before the session's first prompt.")]
    NotBlank,
    #[error("the session has no session context")]
    NoSession,
    #[error("cannot log the preset switch: {0}")]
    Log(#[from] dsh_session::SessionError),
    #[error("cannot re-apply the session's plugins: {0}")]
    Reapply(#[from] PluginError),
}

/// The roster and the sessions' presets (a service on the plugin's scope).
pub struct AgentPresets {
    roster: PresetRoster,
    sessions: Arc<Sessions>,
}

impl std::fmt::Debug for AgentPresets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentPresets")
            .field("roster", &self.roster)
            .finish_non_exhaustive()
    }
}

impl AgentPresets {
    /// The service visible from `scope`, when the plugin is mounted.
    pub fn of(scope: &Scope) -> Option<Arc<Self>> {
        scope.service::<Self>()
    }

    pub fn roster(&self) -> &PresetRoster {
        &self.roster
    }

    /// The preset of the session `context` belongs to.
    pub fn current(&self, context: &SessionContext) -> &Preset {
        let id = self.recorded(context, 0);
        match id.as_deref().map(|id| self.roster.get(id)) {
            Some(Some(preset)) => preset,
            Some(None) => {
                tracing::warn!(session = context.id(), preset = ?id, "the session's preset is not in the roster; using the default");
                self.default_preset()
            }
            None => self.default_preset(),
        }
    }

    fn default_preset(&self) -> &Preset {
        // The roster checked at discovery that its default is listed.
        self.roster
            .get(self.roster.default_id())
            .unwrap_or(&self.roster.list()[0])
    }

    /// What the log (or the parent's) says, if anything.
    fn recorded(&self, context: &SessionContext, depth: u32) -> Option<String> {
        let log = context.log();
        if let Some(event) =
            log.last_of_kind(<PresetSelected as dsh_session::data::EventData>::KIND)
            && let Some(Ok(selected)) = event.decode::<PresetSelected>()
        {
            return Some(selected.preset);
        }
        if let Some(id) = log.header().agent_preset.as_ref().and_then(|v| v.as_str()) {
            return Some(id.to_owned());
        }
        // A child joins its parent's preset (bounded: parents form a finite chain).
        let parent = context.parent()?;
        if depth > 64 {
            return None;
        }
        let (_, parent) = self.sessions.get(parent)?;
        self.recorded(&parent, depth + 1)
            .or_else(|| Some(self.roster.default_id().to_owned()))
    }

    /// Whether the session has not run a turn yet (only then may it switch).
    pub fn is_blank(context: &SessionContext) -> bool {
        context.log().turn_state().last_turn == 0
    }

    /// Switches the session of `agent` to preset `id`: logs `agent-preset/selected`, then
    /// re-applies every per-session piece of the session. `Ok(false)`: already on it.
    pub fn select(&self, agent: &AgentHandle, id: &str) -> Result<bool, SelectError> {
        let context = SessionContext::of(agent.scope()).ok_or(SelectError::NoSession)?;
        if self.roster.get(id).is_none() {
            return Err(SelectError::Unknown(id.to_owned()));
        }
        if self.current(&context).id == id {
            return Ok(false);
        }
        if !Self::is_blank(&context) {
            return Err(SelectError::NotBlank);
        }
        context.record(&PresetSelected {
            preset: id.to_owned(),
        })?;
        self.sessions.reapply(&context)?;
        Ok(true)
    }
}

/// Applies `preset` to the agent of `scope` (a piece scope under the agent's): the persona
/// section, the runtime-context suppressor, the presentation mode, the tool filter. All of it
/// is owned by `scope`, so the next re-apply starts clean.
fn apply_preset(
    scope: &Scope,
    preset: &Preset,
    prompts: &PromptRegistry,
    tools: &ToolRegistry,
) -> Result<(), PluginError> {
    if let Some(persona) = &preset.persona {
        let section = Section::new(PERSONA_SECTION, Slot::Persona, persona.text.clone());
        let section = if persona.complete {
            section.complete()
        } else {
            section
        };
        prompts.register_section(scope, section);
        if !persona.include_runtime_context {
            prompts.suppress_contexts(scope);
        }
    }
    if let Some(mode) = preset.tools.mode
        && mode != tools.mode_for(Some(scope))
    {
        tools
            .present_as(scope, mode)
            .map_err(|e| apply_error(preset, format!("tools.mode: {e}")))?;
    }
    if preset.tools.allow.is_some() || preset.tools.deny.is_some() {
        // A narrowing, not a restriction: it also hides the session's own tools (the file
        // tools are attached per session), and names the composition lacks are no error.
        tools
            .narrow(
                scope,
                ToolFilter {
                    allow: preset.tools.allow.clone(),
                    deny: preset.tools.deny.clone(),
                },
            )
            .map_err(|e| apply_error(preset, format!("tools: {e}")))?;
    }
    Ok(())
}

fn apply_error(preset: &Preset, message: String) -> PluginError {
    PluginError::Message(format!("agent preset \"{}\": {message}", preset.id))
}

/// `[plugins.agent-presets]`.
#[derive(Debug, Default)]
pub struct PresetsPlugin;

impl Plugin for PresetsPlugin {
    type Config = PresetsConfig;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: PresetsConfig) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        // Relative roots are the launch directory's, like every other path in the config.
        let config = PresetsConfig {
            roots: config
                .roots
                .into_iter()
                .map(|root| PresetRoot {
                    path: if root.path.is_absolute() {
                        root.path
                    } else {
                        host.info.launch_cwd.join(root.path)
                    },
                    trust: root.trust,
                })
                .collect(),
            ..config
        };
        let home: PathBuf = host.info.home.clone();
        let roster = PresetRoster::discover(&config, &home)
            .map_err(|e| dsh_plugin::invalid_config(Self::NAME, Some("default"), e.0))?;
        let presets = Arc::new(AgentPresets {
            roster,
            sessions: host.sessions.clone(),
        });
        ctx.provide(presets.clone())?;
        {
            let presets = presets.clone();
            let prompts = host.prompts.clone();
            let tools = host.tools.clone();
            host.sessions.attach(ctx, Self::NAME, move |session| {
                let preset = presets.current(session.context);
                apply_preset(session.scope, preset, &prompts, &tools)
            })?;
        }
        if let Some(commands) = CommandRegistry::of(ctx) {
            commands
                .register(ctx, preset_spec(presets))
                .map_err(|e| PluginError::Message(e.to_string()))?;
        }
        Ok(())
    }
}

impl HostPlugin for PresetsPlugin {
    const NAME: &'static str = "agent-presets";
    const EVENT_KINDS: &'static [&'static str] =
        &[<crate::PresetSelected as dsh_plugin::DurableEvent>::KIND];
}

fn preset_spec(presets: Arc<AgentPresets>) -> CommandSpec {
    let handler = move |call: CommandCall| {
        let presets = presets.clone();
        async move { Ok(run_command(&presets, &call)) }
    };
    CommandSpec::new(PRESET_COMMAND, PRESET_DESCRIPTION, handler).input(PRESET_HINT)
}

fn run_command(presets: &AgentPresets, call: &CommandCall) -> CommandResult {
    let Some(context) = SessionContext::of(call.agent.scope()) else {
        return CommandResult::error(SelectError::NoSession.to_string());
    };
    let current = presets.current(&context).id.clone();
    let blank = AgentPresets::is_blank(&context);
    match preset_command(presets.roster(), &current, call.argument(), blank) {
        PresetAction::Show(text) => CommandResult::text(text),
        PresetAction::Refuse(text) => CommandResult::error(text),
        PresetAction::Switch(id) => match presets.select(&call.agent, &id) {
            Ok(_) => CommandResult::text(format!("Switched to preset {id}.")),
            Err(error) => CommandResult::error(error.to_string()),
        },
    }
}
