//! The tool-call timeout policy: a `tools/execute` wrapper that arms a deadline of the tool's
//! declared `timeoutMs`, hands the body a derived signal, and replaces whatever came back with
//! the `TOOL_TIMEOUT` failure when (and only when) its own timer fired. Cooperative: a body
//! that ignores its signal runs on.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolResult;

/// The failure of a timed-out call.
pub fn timeout_error(ms: u64) -> ToolError {
    ToolError::coded(
        "ToolTimeoutError",
        "TOOL_TIMEOUT",
        format!("tool call timed out after {ms}ms"),
    )
}

/// Registers the policy on `registry`, owned by `owner`.
pub fn install(registry: &Arc<ToolRegistry>, owner: &Scope) -> Disposer {
    let tools = Arc::downgrade(registry);
    registry
        .execute_hook()
        .register(owner, move |mut dispatch, next| {
            let tools = tools.clone();
            Box::pin(async move {
                let exec = dispatch.execution().clone();
                let budget = tools
                    .upgrade()
                    .and_then(|tools| tools.get(exec.name(), exec.subject()))
                    .and_then(|definition| definition.timeout_ms());
                let Some(ms) = budget else {
                    return next.run(dispatch).await;
                };
                let deadline = dispatch.signal().child_token();
                let fired = Arc::new(AtomicBool::new(false));
                let timer = {
                    let (deadline, fired) = (deadline.clone(), fired.clone());
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        fired.store(true, Ordering::SeqCst);
                        deadline.cancel();
                    })
                };
                dispatch.set_signal(deadline);
                let result = next.run(dispatch).await;
                timer.abort();
                if fired.load(Ordering::SeqCst) {
                    return Ok(Arc::new(ToolResult::from_error(&timeout_error(ms))));
                }
                result
            })
        })
}
