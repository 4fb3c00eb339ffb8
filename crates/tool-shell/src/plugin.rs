//! The shell plugins: `[plugins.jobs]` (the background jobs runtime, the job tools and the
//! job-notice policy) and `[plugins.bash]` (the `bash` tool over that runtime).
//!
//! They are two plugins so that re-applying `bash` (a new timeout) never kills the jobs a
//! session has running: the runtime belongs to `jobs`, which `bash` only uses.

use std::sync::Arc;

use dsh_agent::AgentStatus;
use dsh_kernel::Scope;
use dsh_plugin::AttachedSession;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::Section;
use dsh_plugin::SessionContext;
use dsh_plugin::Slot;
use dsh_session::Event;
use dsh_spill::SpillStore;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use serde::Deserialize;
use serde::Serialize;
use tokio::sync::broadcast;

use crate::BashConfig;
use crate::JobToolsConfig;
use crate::JobsConfig;
use crate::JobsRuntime;
use crate::OwnerId;
use crate::SandboxConfig;
use crate::ShellContext;
use crate::ShellTools;
use crate::WakeBudget;
use crate::notice::CompletionDelivery;
use crate::notice::NoticeDelivery;

/// `[plugins.jobs]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsSettings {
    /// Running plus stopping jobs per session.
    #[serde(default = "default_max_jobs")]
    pub max_concurrent_jobs: usize,
    /// `wakeup`: a finished job wakes an idle session with a follow-up turn (at most
    /// `max_consecutive_wakes` in a row without user input); `quiet`: notices only join the
    /// next step.
    #[serde(default)]
    pub completion: Completion,
    #[serde(default = "default_wakes")]
    pub max_consecutive_wakes: u32,
    /// `job_output`'s default and longest wait.
    #[serde(default = "default_wait")]
    pub wait_timeout_ms: u64,
    #[serde(default = "default_max_wait")]
    pub max_wait_timeout_ms: u64,
}

/// How job-completion notices reach a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Completion {
    #[default]
    Wakeup,
    Quiet,
}

fn default_max_jobs() -> usize {
    JobsConfig::default().max_concurrent_jobs_per_owner
}

fn default_wakes() -> u32 {
    3
}

fn default_wait() -> u64 {
    JobToolsConfig::default().wait_timeout_ms
}

fn default_max_wait() -> u64 {
    JobToolsConfig::default().max_wait_timeout_ms
}

impl Default for JobsSettings {
    fn default() -> Self {
        Self {
            max_concurrent_jobs: default_max_jobs(),
            completion: Completion::default(),
            max_consecutive_wakes: default_wakes(),
            wait_timeout_ms: default_wait(),
            max_wait_timeout_ms: default_max_wait(),
        }
    }
}

/// The next log event, or never once the log has closed (so the notice branch keeps running).
async fn recv_event(
    events: &mut Option<broadcast::Receiver<Arc<Event>>>,
) -> Result<Arc<Event>, broadcast::error::RecvError> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// A committed `user/message` whose source is the user (job notices are `plugin`-sourced).
fn is_user_input(event: &Event) -> bool {
    event.kind == dsh_session::kind::USER_MESSAGE && event.data["source"]["kind"] == "user"
}

/// The background jobs runtime (a service), the job tools and the notice pump of each session.
#[derive(Debug, Default)]
pub struct JobsPlugin;

impl Plugin for JobsPlugin {
    type Config = JobsSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: JobsSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let jobs = JobsRuntime::new(JobsConfig {
            max_concurrent_jobs_per_owner: config.max_concurrent_jobs,
        });
        ctx.provide(jobs.clone())?;
        let runtime = jobs.clone();
        ctx.defer(move || {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move { runtime.dispose().await });
            }
        });
        let tools = ShellTools {
            resolve: Arc::new(|_run: &ToolRun| Err(ToolError::new("not a bash call"))),
            jobs: jobs.clone(),
            job_config: JobToolsConfig {
                wait_timeout_ms: config.wait_timeout_ms,
                max_wait_timeout_ms: config.max_wait_timeout_ms,
            },
            run_in_background: true,
            sandbox: None,
        };
        for definition in crate::shell_tool_definitions(&tools)
            .map_err(PluginError::other)?
            .into_iter()
            .filter(|d| d.name() != crate::bash::BASH_TOOL_NAME)
        {
            host.tools
                .register(ctx, definition)
                .map_err(PluginError::other)?;
        }
        let delivery = match config.completion {
            Completion::Wakeup => CompletionDelivery::Wakeup,
            Completion::Quiet => CompletionDelivery::Quiet,
        };
        let wakes = config.max_consecutive_wakes;
        host.sessions
            .attach(ctx, Self::NAME, move |session: &AttachedSession<'_>| {
                let agent = session.agent.clone();
                let owner = OwnerId::new(agent.id());
                let mut notices = jobs.subscribe(&owner);
                let mut events = Some(agent.subscribe());
                let pump = tokio::spawn(async move {
                    let mut budget = WakeBudget::new(delivery, wakes);
                    loop {
                        tokio::select! {
                            notice = notices.recv() => {
                                let Some(notice) = notice else { break };
                                let idle = agent.status() == AgentStatus::Idle;
                                let message = crate::notice_message(&notice);
                                let sent = match budget.decide(idle) {
                                    NoticeDelivery::FollowUp => agent.followup(message),
                                    NoticeDelivery::Inject => agent.inject(message),
                                };
                                if sent.is_err() {
                                    break;
                                }
                            }
                            // The budget counts *consecutive* wakes: user input resets it.
                            event = recv_event(&mut events) => match event {
                                Ok(event) if is_user_input(&event) => budget.on_user_message(),
                                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                                Err(broadcast::error::RecvError::Closed) => events = None,
                            },
                        }
                    }
                });
                let jobs = jobs.clone();
                let owner = OwnerId::new(session.agent.id());
                session.scope.defer(move || {
                    pump.abort();
                    tokio::spawn(async move { jobs.dispose_owner(&owner).await });
                });
                Ok(())
            })?;
        Ok(())
    }
}

impl HostPlugin for JobsPlugin {
    const NAME: &'static str = "jobs";
}

/// `[plugins.bash]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashSettings {
    /// The default timeout of one command.
    #[serde(default = "default_bash_timeout")]
    pub timeout_ms: u64,
    /// Whether `bash` offers `run_in_background` (needs the jobs plugin).
    #[serde(default = "yes")]
    pub run_in_background: bool,
}

fn default_bash_timeout() -> u64 {
    60_000
}

fn yes() -> bool {
    true
}

impl Default for BashSettings {
    fn default() -> Self {
        Self {
            timeout_ms: default_bash_timeout(),
            run_in_background: true,
        }
    }
}

/// The `bash` tool. Each call runs in its session's cwd under the session's live permissions.
#[derive(Debug, Default)]
pub struct BashPlugin;

impl Plugin for BashPlugin {
    type Config = BashSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: BashSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let jobs = ctx.service::<JobsRuntime>();
        let background = config.run_in_background && jobs.is_some();
        let permissions = ctx.service::<dsh_plugin::DefaultPermissions>().map_or_else(
            || dsh_plugin::Permissions::for_mode(dsh_plugin::SandboxMode::WorkspaceWrite),
            |p| p.0,
        );
        let mut sandbox = SandboxConfig::new(permissions.sandbox);
        sandbox.approval = permissions.approval;
        if let Some(network) = ctx.service::<dsh_plugin::SandboxNetwork>() {
            sandbox.network = network.0;
        }
        if let Some(limits) = ctx.service::<dsh_plugin::SandboxLimits>() {
            sandbox.limits = limits.0;
        }
        let standing = sandbox.clone();
        let bash = BashConfig {
            timeout_ms: config.timeout_ms,
            enable_run_in_background: background,
            ..BashConfig::default()
        };
        // The executor's stream spill (full bash output) is not the generic policy: it is always
        // on, under the spill plugin's root when it is mounted.
        let spill = Arc::new(
            ctx.service::<SpillStore>()
                .map_or_else(SpillStore::in_temp_dir, |store| SpillStore::clone(&store)),
        );
        let home = host.info.home.clone();
        let runtime = jobs.clone();
        let resolve = Arc::new(move |run: &ToolRun| -> Result<ShellContext, ToolError> {
            let session = SessionContext::for_run(run, crate::bash::BASH_TOOL_NAME)?;
            let mut ctx = ShellContext::new(session.cwd().to_path_buf(), session.id().to_owned());
            ctx.dsh_home = Some(home.clone());
            ctx.session_jsonl = session.log_path();
            let permissions = session.permissions();
            ctx.sandbox = Some(
                standing
                    .policy_in(permissions.sandbox, session.cwd())
                    .with_approval(permissions.approval),
            );
            ctx.config = bash.clone();
            ctx.spill = spill.clone();
            ctx.jobs = runtime.clone();
            ctx.owner = Some(OwnerId::new(session.id()));
            Ok(ctx)
        });
        let tools = ShellTools {
            resolve,
            jobs: jobs.unwrap_or_else(|| JobsRuntime::new(JobsConfig::default())),
            job_config: JobToolsConfig::default(),
            run_in_background: background,
            sandbox: Some(sandbox),
        };
        let definition = crate::shell_tool_definitions(&tools)
            .map_err(PluginError::other)?
            .into_iter()
            .find(|d| d.name() == crate::bash::BASH_TOOL_NAME)
            .ok_or_else(|| PluginError::msg("the shell crate defines no bash tool"))?;
        host.tools
            .register(ctx, definition)
            .map_err(PluginError::other)?;
        host.prompts.register_section(
            ctx,
            Section::new("tool:bash", Slot::Tools, crate::texts::BASH_PROMPT_SECTION),
        );
        if background {
            host.prompts.register_section(
                ctx,
                Section::new("tool:jobs", Slot::Tools, crate::texts::JOBS_PROMPT_SECTION),
            );
        }
        Ok(())
    }
}

impl HostPlugin for BashPlugin {
    const NAME: &'static str = "bash";
    const USES: &'static [&'static str] = &["jobs", "spill", "sandbox", "approval"];
}

/// One status line per background job of `session` (running first, then finished), for a
/// front-end's `/jobs`.
pub fn job_lines(scope: &Scope, session: &str) -> Vec<String> {
    let Some(jobs) = scope.service::<JobsRuntime>() else {
        return Vec::new();
    };
    jobs.list(Some(&OwnerId::new(session)))
        .iter()
        .map(|job| job.status_line())
        .collect()
}
