//! `[plugins.subagent-report-fence]`, for the recorded `subagent-report` conformance scenario
//! (`fixture_plugins: subagent-report-fence`): orders a child's report and settlement notice
//! against its parent's turns, as the recorded composition did.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use dsh_agent::AgentEvent;
use dsh_agent::AgentHooks;
use dsh_agent::AgentStatus;
use dsh_kernel::Scope;
use tokio::sync::Notify;

use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_subagent::AgentDirectory;
use serde::Deserialize;
use serde::Serialize;

/// A one-way latch.
#[derive(Default)]
struct Latch {
    open: AtomicBool,
    notify: Notify,
}

impl Latch {
    fn open(&self) {
        self.open.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.open.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

/// `[plugins.subagent-report-fence]` (no settings): the fence over the subagents plugin's
/// agent directory; re-applied with it.
#[derive(Debug, Default)]
pub struct SubagentReportFence;

/// `[plugins.subagent-report-fence]` takes no settings but `enabled`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FenceSettings {}

impl Plugin for SubagentReportFence {
    type Config = FenceSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, _settings: Self::Config) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let directory = ctx.service::<AgentDirectory>().ok_or_else(|| {
            PluginError::msg(format!(
                "[plugins.{}] needs [plugins.subagents] enabled",
                Self::NAME
            ))
        })?;
        install_report_fence(&host.hooks, directory, ctx);
        Ok(())
    }
}

impl HostPlugin for SubagentReportFence {
    const NAME: &'static str = "subagent-report-fence";
    const ENABLED_BY_DEFAULT: bool = false;
    const USES: &'static [&'static str] = &["subagents"];
}

/// `subagent-report-fence`: holds the report child until its parent's spawn turn has ended,
/// then keeps the parent in maintenance (busy, not running a turn) until the child's settlement
/// notice has arrived, so the parent's next turn claims the report and the notice together, in
/// causal order, whatever the scheduling.
pub fn install_report_fence(hooks: &AgentHooks, directory: Arc<AgentDirectory>, scope: &Scope) {
    let child_ready = Arc::new(Latch::default());
    let parent_stopped = Arc::new(Latch::default());
    let child_settled = Arc::new(Latch::default());
    let maintaining = Arc::new(AtomicBool::new(false));
    {
        let (child_ready, parent_stopped) = (child_ready.clone(), parent_stopped.clone());
        hooks.pre_step.register(scope, move |input, next| {
            let (child_ready, parent_stopped) = (child_ready.clone(), parent_stopped.clone());
            Box::pin(async move {
                let is_child = input.agent.log().header().parent_session.is_some();
                if is_child {
                    child_ready.open();
                    parent_stopped.wait().await;
                } else if input.turn == 1 && input.step == 2 {
                    child_ready.wait().await;
                }
                next.run(input).await
            })
        });
    }
    let settled = child_settled.clone();
    hooks.events.register(scope, move |event| {
        match event {
            AgentEvent::Status {
                agent,
                status: AgentStatus::Idle,
            } => {
                let Some(parent) = directory.get(agent) else {
                    return Ok(());
                };
                let top_level = parent.log().header().parent_session.is_none();
                if !top_level || parent.log().turn_state().last_turn != 1 {
                    return Ok(());
                }
                parent_stopped.open();
                if maintaining.swap(true, Ordering::AcqRel) {
                    return Ok(());
                }
                match parent.begin_maintenance() {
                    Ok(guard) => {
                        let settled = settled.clone();
                        tokio::spawn(async move {
                            tokio::select! {
                                () = settled.wait() => {}
                                () = guard.token().cancelled() => {}
                            }
                            drop(guard);
                        });
                    }
                    Err(error) => tracing::warn!(%error, "report fence: no maintenance phase"),
                }
            }
            AgentEvent::InboxInserted { message, .. }
                if message.source.kind() == "subagent-settled" =>
            {
                child_settled.open();
            }
            _ => {}
        }
        Ok(())
    });
    scope.defer(move || {
        child_ready.open();
    });
}
