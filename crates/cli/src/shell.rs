//! The shell plugin of the composition: `bash`, the jobs runtime and the job tools, mounted
//! once; each agent gets its session facts and a completion-notice pump.

use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_agent::prompt::Section;
use dsh_kernel::Scope;
use dsh_session::Event;
use dsh_tool_shell::BashConfig;
use dsh_tool_shell::JobToolsConfig;
use dsh_tool_shell::JobsConfig;
use dsh_tool_shell::JobsRuntime;
use dsh_tool_shell::OwnerId;
use dsh_tool_shell::SandboxConfig;
use dsh_tool_shell::SandboxPolicy;
use dsh_tool_shell::ShellContext;
use dsh_tool_shell::ShellTools;
use dsh_tool_shell::WakeBudget;
use dsh_tool_shell::notice::CompletionDelivery;
use dsh_tool_shell::notice::NoticeDelivery;
use dsh_tool_shell::sandbox::ApprovalPolicy;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use tokio::sync::broadcast;

use crate::compose::SessionState;
use crate::compose::Settings;
use crate::config::Config;

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

pub struct ShellPlugin {
    jobs: Option<Arc<JobsRuntime>>,
    enabled: bool,
    background: bool,
    /// The per-call shell context; terminals reuse it so they get bash's sandbox and env.
    resolve: Option<dsh_tool_shell::register::ContextResolver>,
}

/// An idle owner is woken by job notices at most this many times in a row.
const MAX_CONSECUTIVE_WAKES: u32 = 3;

impl ShellPlugin {
    pub fn mount(
        config: &Config,
        settings: &Settings,
        registry: &ToolRegistry,
        root: &Scope,
        spill: Option<&dsh_spill::SpillStore>,
    ) -> anyhow::Result<Self> {
        if !config.plugin_enabled("bash", true)? {
            return Ok(Self {
                jobs: None,
                enabled: false,
                background: false,
                resolve: None,
            });
        }
        let jobs = JobsRuntime::new(JobsConfig::default());
        let mut sandbox = SandboxConfig::new(settings.sandbox);
        sandbox.approval = if settings.approval_never {
            ApprovalPolicy::Never
        } else {
            ApprovalPolicy::Ask
        };
        let bash = BashConfig {
            timeout_ms: settings.bash.timeout_ms,
            enable_run_in_background: settings.bash.run_in_background,
            ..BashConfig::default()
        };
        // The executor's stream spill (full bash output) is not the generic policy: it is always
        // on, under the configured spill root when there is one.
        let spill_store = Arc::new(
            spill
                .cloned()
                .unwrap_or_else(dsh_spill::SpillStore::in_temp_dir),
        );
        let home = config.home.clone();
        let runtime = jobs.clone();
        let resolve: dsh_tool_shell::register::ContextResolver =
            Arc::new(move |run: &ToolRun| -> Result<ShellContext, ToolError> {
                let agent = run
                    .agent()
                    .ok_or_else(|| ToolError::new("bash requires an owning agent session"))?;
                let state = agent
                    .scope()
                    .service::<SessionState>()
                    .ok_or_else(|| ToolError::new("bash requires an owning agent session"))?;
                let mut ctx = ShellContext::new(state.cwd.clone(), state.id.clone());
                ctx.dsh_home = Some(home.clone());
                ctx.session_jsonl = state.jsonl.clone();
                let (mode, never) = state.permissions();
                let approval = if never {
                    ApprovalPolicy::Never
                } else {
                    ApprovalPolicy::Ask
                };
                ctx.sandbox = Some(SandboxPolicy::new(mode, &state.cwd).with_approval(approval));
                ctx.config = bash.clone();
                ctx.spill = spill_store.clone();
                ctx.jobs = Some(runtime.clone());
                ctx.owner = Some(OwnerId::new(agent.id()));
                Ok(ctx)
            });
        let tools = ShellTools {
            resolve: resolve.clone(),
            jobs: jobs.clone(),
            job_config: JobToolsConfig::default(),
            run_in_background: settings.bash.run_in_background,
            sandbox: Some(sandbox),
        };
        // Persistent bash (`[plugins.bash-persistent]`) takes the `bash` name instead.
        let persistent = config.plugin_enabled("bash-persistent", false)?;
        for definition in dsh_tool_shell::shell_tool_definitions(&tools)? {
            if persistent && definition.name() == dsh_tool_shell::bash::BASH_TOOL_NAME {
                continue;
            }
            registry.register(root, definition)?;
        }
        Ok(Self {
            jobs: Some(jobs),
            enabled: true,
            background: settings.bash.run_in_background,
            resolve: Some(resolve),
        })
    }

    /// The per-call shell context resolver (`None` when bash is disabled).
    pub fn resolver(&self) -> Option<dsh_tool_shell::register::ContextResolver> {
        self.resolve.clone()
    }

    /// The jobs runtime (`None` when bash is disabled).
    pub fn jobs(&self) -> Option<Arc<JobsRuntime>> {
        self.jobs.clone()
    }

    pub fn prompt_sections(&self) -> Vec<Section> {
        if !self.enabled {
            return Vec::new();
        }
        let mut sections = vec![Section::new(
            "tool:bash",
            105.0,
            dsh_tool_shell::texts::BASH_PROMPT_SECTION,
        )];
        if self.background {
            sections.push(Section::new(
                "tool:jobs",
                106.0,
                dsh_tool_shell::texts::JOBS_PROMPT_SECTION,
            ));
        }
        sections
    }

    /// One status line per background job of `agent` (running first, then finished).
    pub fn job_lines(&self, agent: &AgentHandle) -> Vec<String> {
        let Some(jobs) = &self.jobs else {
            return Vec::new();
        };
        jobs.list(Some(&OwnerId::new(agent.id())))
            .iter()
            .map(|job| job.status_line())
            .collect()
    }

    /// Pumps job notices into the agent, and stops the agent's jobs when it is disposed.
    pub fn attach(&self, agent: &AgentHandle) -> anyhow::Result<()> {
        let scope = agent.scope().clone();
        let Some(jobs) = self.jobs.clone() else {
            return Ok(());
        };
        let owner = OwnerId::new(agent.id());
        let mut notices = jobs.subscribe(&owner);
        let mut events = Some(agent.subscribe());
        let weak = agent.clone();
        let pump = tokio::spawn(async move {
            let mut budget = WakeBudget::new(CompletionDelivery::Wakeup, MAX_CONSECUTIVE_WAKES);
            loop {
                tokio::select! {
                    notice = notices.recv() => {
                        let Some(notice) = notice else { break };
                        let idle = weak.status() == dsh_agent::AgentStatus::Idle;
                        let message = dsh_tool_shell::notice_message(&notice);
                        let sent = match budget.decide(idle) {
                            NoticeDelivery::FollowUp => weak.followup(message),
                            NoticeDelivery::Inject => weak.inject(message),
                        };
                        if sent.is_err() {
                            break;
                        }
                    }
                    // The budget counts *consecutive* wakes: user input resets it (spec §2.6).
                    event = recv_event(&mut events) => match event {
                        Ok(event) if is_user_input(&event) => budget.on_user_message(),
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => events = None,
                    },
                }
            }
        });
        scope.defer(move || {
            pump.abort();
            tokio::spawn(async move { jobs.dispose_owner(&owner).await });
        });
        Ok(())
    }
}
