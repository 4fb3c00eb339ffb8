//! Test-only behaviour the recorded conformance compositions added (`fixture_plugins`). A host
//! mounts these only when a test asks for them by name.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use dsh_agent::AgentEvent;
use dsh_agent::AgentHooks;
use dsh_kernel::Scope;
use tokio::sync::Notify;

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

/// The name scenarios use (`subagent-report-fence`).
pub const REPORT_FENCE: &str = "subagent-report-fence";

/// `subagent-report-fence`: holds the report child until its parent's spawn turn has produced
/// its answer, and keeps that parent turn open until the child's settlement notice has arrived,
/// so the report and the notice reach the parent together, in causal order, whatever the
/// scheduling.
pub fn install_report_fence(hooks: &AgentHooks, scope: &Scope) {
    let child_ready = Arc::new(Latch::default());
    let parent_stopped = Arc::new(Latch::default());
    let child_settled = Arc::new(Latch::default());
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
    {
        let (parent_stopped, child_settled) = (parent_stopped.clone(), child_settled.clone());
        hooks.turn_stopping.register(scope, move |event| {
            let (parent_stopped, child_settled) = (parent_stopped.clone(), child_settled.clone());
            Box::pin(async move {
                let top_level = event.agent.log().header().parent_session.is_none();
                if top_level && event.turn == 1 && !parent_stopped.open.load(Ordering::Acquire) {
                    parent_stopped.open();
                    tokio::select! {
                        () = child_settled.wait() => {}
                        () = event.signal.cancelled() => {}
                    }
                }
                Ok(())
            })
        });
    }
    hooks.events.register(scope, move |event| {
        if let AgentEvent::InboxInserted { message, .. } = event
            && message.source.kind() == "subagent-settled"
        {
            child_settled.open();
        }
        Ok(())
    });
    let release = (child_ready, parent_stopped);
    scope.defer(move || {
        release.0.open();
        release.1.open();
    });
}
