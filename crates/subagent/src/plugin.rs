//! `[plugins.subagents]`: the subagent service on the host, children built through the host's
//! session machinery (every per-session plugin attaches to a child as to any session), the
//! `spawn` / `fork` providers, the delegation tool instances, the control tools, `report`.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::PromptConfig;
use dsh_kernel::BoxFuture;
use dsh_kernel::Scope;
use dsh_plugin::ApprovalPolicy;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Permissions;
use dsh_plugin::PermissionsOrigin;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::SandboxMode;
use dsh_plugin::SessionContext;
use dsh_session::CreateOptions;
use dsh_session::SessionStore;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use crate::continuation::ReportDelivery;
use crate::directory::AgentDirectory;
use crate::error::SubagentError;
use crate::host::ChildHost;
use crate::host::ChildSession;
use crate::host::ChildSetup;
use crate::host::ChildSpec;
use crate::host::NeverApprove;
use crate::inprocess::InProcessProvider;
use crate::listing::SessionProjections;
use crate::runtime::ChildRuntime;
use crate::service::SubagentEvent;
use crate::service::Subagents;
use crate::tools::BackgroundMode;
use crate::tools::SubagentToolConfig;
use crate::tools::subagent::AgentOptionsConfig;
use crate::tools::subagent::ToolFilterConfig;

/// One delegation tool (a `tool-subagent` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegationTool {
    pub provider: String,
    #[serde(default = "default_tool_name")]
    pub tool_name: String,
    #[serde(default = "default_true")]
    pub enable_run_in_background: bool,
    #[serde(default)]
    pub background_mode: BackgroundMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_options: Option<AgentOptionsConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persona: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_filter: Option<ToolFilterConfig>,
    /// A natural number, or `"provider-managed"`; default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth: Option<Value>,
}

fn default_tool_name() -> String {
    "subagent".to_owned()
}
fn default_true() -> bool {
    true
}

impl DelegationTool {
    fn to_config(&self) -> SubagentToolConfig {
        SubagentToolConfig {
            provider: self.provider.clone(),
            tool_name: self.tool_name.clone(),
            enable_run_in_background: self.enable_run_in_background,
            background_mode: self.background_mode,
            agent_options: self.agent_options.clone(),
            persona: self.persona.clone(),
            tool_filter: self.tool_filter.clone(),
            max_depth: self.max_depth.clone(),
        }
    }
}

/// `[plugins.subagents]`. The defaults are the reference composition's rows: `subagent`
/// (spawn, continuable) and `subagent_fork` (fork, one-shot, foreground only), both with
/// `max_depth = 1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentSettings {
    #[serde(default = "default_tools")]
    pub tools: Vec<DelegationTool>,
    /// `send_message`, `interrupt_agent`, `list_agents`.
    #[serde(default = "default_true")]
    pub control_tools: bool,
    /// How `report` reaches the parent.
    #[serde(default)]
    pub report_delivery: ReportDelivery,
    /// Parallel tool calls of a child's steps.
    #[serde(default = "default_parallel")]
    pub max_parallel_tool_calls: usize,
}

fn default_parallel() -> usize {
    dsh_agent::DEFAULT_MAX_PARALLEL_TOOL_CALLS
}

fn default_tools() -> Vec<DelegationTool> {
    vec![
        DelegationTool {
            provider: "spawn".to_owned(),
            tool_name: "subagent".to_owned(),
            enable_run_in_background: true,
            background_mode: BackgroundMode::Continuable,
            agent_options: None,
            persona: None,
            tool_filter: None,
            max_depth: Some(Value::from(1)),
        },
        DelegationTool {
            provider: "fork".to_owned(),
            tool_name: "subagent_fork".to_owned(),
            enable_run_in_background: false,
            background_mode: BackgroundMode::OneShot,
            agent_options: None,
            persona: None,
            tool_filter: None,
            max_depth: Some(Value::from(1)),
        },
    ]
}

impl Default for SubagentSettings {
    fn default() -> Self {
        Self {
            tools: default_tools(),
            control_tools: true,
            report_delivery: ReportDelivery::NextStep,
            max_parallel_tool_calls: default_parallel(),
        }
    }
}

/// The plugin.
#[derive(Debug, Default)]
pub struct SubagentPlugin;

impl HostPlugin for SubagentPlugin {
    const NAME: &'static str = "subagents";
}

impl Plugin for SubagentPlugin {
    type Config = SubagentSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: SubagentSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let store = ctx.service::<dyn SessionStore>();
        if config.max_parallel_tool_calls == 0 {
            return Err(dsh_plugin::invalid_config(
                Self::NAME,
                Some("max_parallel_tool_calls"),
                "must be at least 1",
            ));
        }
        let child_host = Arc::new(HostChildHost {
            services: host.clone(),
            store,
            max_parallel: config.max_parallel_tool_calls,
        });
        let directory = AgentDirectory::new();
        // Visible to every plugin: who is a root and who a delegated child, by agent.
        ctx.provide(directory.clone())?;
        ctx.provide(Arc::new(SessionProjections::default()))?;
        let runtime = ChildRuntime::new(
            ctx.clone(),
            child_host,
            directory.clone(),
            host.tools.clone(),
            Some(host.prompts.clone()),
            true,
        )
        .with_sandbox_override(Arc::new(explicit_sandbox));
        let subagents = Subagents::install(ctx, runtime.clone()).map_err(PluginError::other)?;
        host.presenters
            .register(ctx, crate::present::KIND, crate::present::present)
            .map_err(PluginError::other)?;
        let error = |e: SubagentError| PluginError::msg(e.message);
        subagents
            .register_provider(ctx, InProcessProvider::spawn("spawn", runtime.clone()))
            .map_err(error)?;
        subagents
            .register_provider(ctx, InProcessProvider::fork("fork", runtime))
            .map_err(error)?;
        for (index, tool) in config.tools.iter().enumerate() {
            crate::tools::subagent::install(&subagents, ctx, tool.to_config()).map_err(|e| {
                dsh_plugin::invalid_config(Self::NAME, Some(&format!("tools.{index}")), e.message)
            })?;
        }
        if config.control_tools {
            crate::tools::install_control(&subagents, ctx).map_err(error)?;
            crate::tools::install_list_agents(&subagents, ctx).map_err(error)?;
        }
        crate::tools::install_report(
            &subagents,
            ctx,
            crate::tools::ReportConfig {
                report_delivery: config.report_delivery,
            },
        );
        bridge_subagent_hooks(&subagents, ctx);
        // Every top-level session is a root of the agent directory; children register
        // themselves (with their owner) when they are built.
        let roots = directory.clone();
        host.sessions.attach(ctx, Self::NAME, move |session| {
            if session.context.parent().is_none() {
                roots.register(session.agent, None);
            }
            Ok(())
        })?;
        Ok(())
    }
}

/// `SubagentStart` / `SubagentStop` of the Claude Code hook bridge (hooks spec §A.8.6). The
/// bridge is looked up at each event, so a reloaded hook file is picked up without re-applying
/// this plugin (which would cancel every live child).
fn bridge_subagent_hooks(subagents: &Arc<Subagents>, ctx: &Scope) {
    let lookup = ctx.clone();
    subagents.events().register(ctx, move |event| {
        let Some(bridge) = lookup.service::<dsh_hooks::HookBridge>() else {
            return Ok(());
        };
        match event {
            SubagentEvent::Start(info) => bridge.subagent_start(hook_run(info)),
            SubagentEvent::End { info, .. } => bridge.subagent_end(hook_run(info)),
            SubagentEvent::ProviderAdded { .. } | SubagentEvent::ProviderRemoved { .. } => {}
        }
        Ok(())
    });
}

fn hook_run(info: &crate::service::RunInfo) -> dsh_hooks::SubagentRun {
    dsh_hooks::SubagentRun {
        run_id: info.run_id.clone(),
        agent_id: info.id.clone(),
        child: info.child.clone(),
    }
}

/// A parent's explicit override: the mode a client chose for it, or the one a delegation fixed
/// for it. A parent that follows the configured default passes nothing on.
fn explicit_sandbox(parent: &AgentHandle) -> Option<String> {
    if let Some(context) = SessionContext::of(parent.scope())
        && context.permissions_origin() == PermissionsOrigin::Client
        && context.parent().is_none()
    {
        return Some(context.permissions().sandbox.as_str().to_owned());
    }
    crate::runtime::latest_sandbox_mode(parent.log(), true)
}

/// Builds children the way the host builds sessions: a `SessionContext` with the delegated
/// permissions, every per-session plugin attached, on the host's adapter and registry.
struct HostChildHost {
    services: Arc<HostServices>,
    store: Option<Arc<dyn SessionStore>>,
    max_parallel: usize,
}

impl HostChildHost {
    fn make(&self, spec: &ChildSpec, setup: ChildSetup) -> Result<AgentHandle, SubagentError> {
        let failed = |e: dsh_session::SessionError| SubagentError::plain(e.to_string());
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| SubagentError::plain("the host has no session store"))?;
        let (log, resumed) = match &spec.session {
            ChildSession::Fresh { id, meta, seed } => (
                store
                    .create(CreateOptions {
                        id: Some(id.clone()),
                        cwd: meta.cwd.as_ref().map(PathBuf::from),
                        parent_session: Some(meta.parent_session.clone()),
                        seed_length: meta.seed_length,
                        origin: Some("subagent".to_owned()),
                        delegation_depth: meta.delegation_depth,
                        agent_preset: meta.agent_preset.clone(),
                        seed: seed.clone(),
                    })
                    .map_err(failed)?,
                false,
            ),
            ChildSession::Resume { id } => (store.resume(id).map_err(failed)?, true),
        };
        let cwd = log
            .header()
            .cwd
            .as_ref()
            .map(PathBuf::from)
            .unwrap_or_else(|| self.services.info.launch_cwd.clone());
        let default = spec
            .owner
            .service::<dsh_plugin::DefaultPermissions>()
            .map_or_else(
                || Permissions::for_mode(SandboxMode::WorkspaceWrite),
                |d| d.0,
            );
        let sandbox = spec
            .policy
            .sandbox
            .as_deref()
            .and_then(SandboxMode::parse)
            .unwrap_or(default.sandbox);
        let approval = if spec.policy.approval_never {
            ApprovalPolicy::Never
        } else {
            default.approval
        };
        let context = Arc::new(
            SessionContext::new(
                log.clone(),
                cwd.clone(),
                Some(self.services.info.home.clone()),
                Permissions { sandbox, approval },
            )
            .with_origin(PermissionsOrigin::Client),
        );
        let config = AgentConfig {
            id: log.id().to_owned(),
            cwd: Some(cwd.to_string_lossy().into_owned()),
            provider: spec
                .options
                .provider
                .clone()
                .unwrap_or_else(|| self.services.info.provider.clone()),
            model: spec
                .options
                .model
                .clone()
                .unwrap_or_else(|| self.services.info.model.clone()),
            max_tokens: spec.options.max_tokens,
            adapter: self.services.adapter.clone(),
            tools: self.services.tools.clone(),
            scope: spec.owner.clone(),
            log,
            prompt: PromptConfig::default(),
            max_parallel_tool_calls: self.max_parallel,
        };
        let sessions = self.services.sessions.clone();
        let never = spec.policy.approval_never;
        Agent::start(config, resumed, move |agent: &AgentHandle| {
            agent
                .scope()
                .provide(context.clone())
                .map_err(|e| SubagentError::plain(e.to_string()))?;
            if never {
                agent
                    .scope()
                    .provide::<dyn dsh_tools::ApprovalService>(Arc::new(NeverApprove))
                    .map_err(|e| SubagentError::plain(e.to_string()))?;
            }
            sessions
                .open(agent, context.clone())
                .map_err(|e| SubagentError::plain(e.to_string()))?;
            setup(agent)
        })
    }
}

impl From<dsh_agent::AgentError> for SubagentError {
    fn from(error: dsh_agent::AgentError) -> Self {
        SubagentError::plain(dsh_agent::error_chain(&error))
    }
}

impl ChildHost for HostChildHost {
    fn persistence(&self) -> Option<Arc<dyn SessionStore>> {
        self.store.clone()
    }

    fn build(
        &self,
        spec: ChildSpec,
        setup: ChildSetup,
    ) -> BoxFuture<'static, Result<AgentHandle, SubagentError>> {
        let fresh = matches!(spec.session, ChildSession::Fresh { .. });
        let id = spec.session.id().to_owned();
        let outcome = self.make(&spec, setup);
        let store = self.store.clone();
        Box::pin(async move {
            match outcome {
                Ok(agent) => Ok(agent),
                Err(error) => {
                    // A fresh child that failed its setup leaves no session behind.
                    if fresh && let Some(store) = store {
                        let _ = store.remove(&id);
                    }
                    Err(error)
                }
            }
        })
    }
}
