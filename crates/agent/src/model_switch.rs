//! Switching a running session's model: an `agent/request` listener on the agent's own scope
//! that puts `model` on every request from the next one on. Front-ends (`/model` in the TUI,
//! ACP's `model` config option) share it; disposing the returned guard switches back.

use dsh_kernel::Disposer;

use crate::agent::AgentHandle;
use crate::hooks::CallConfig;

/// From the next request on, `agent` asks for `model` (same provider). Replaces nothing else
/// of the request configuration.
pub fn switch_model(agent: &AgentHandle, model: &str) -> Disposer {
    let model = model.to_owned();
    agent
        .hooks()
        .request
        .register(agent.scope(), move |input, next| {
            let model = model.clone();
            Box::pin(async move {
                let config = next.run(input).await?;
                Ok(CallConfig { model, ..config })
            })
        })
}
