//! The skill plugin of the composition: the `skill` tool bound to each session's cwd, the
//! skill catalog entered at every pre-step when it changed, and `/<name>` gestures.

use std::path::Path;
use std::sync::Arc;

use dsh_kernel::Scope;
use dsh_tools::ToolRegistry;

use crate::compose::SessionState;

/// The `skill` tool (skills looked up from the calling session's cwd), the catalog, added at
/// each pre-step after every other listener's messages whenever it changed, and the `/<name>`
/// user gesture.
pub fn install(
    hooks: &dsh_agent::AgentHooks,
    registry: &Arc<ToolRegistry>,
    root: &Scope,
    home: &Path,
) -> anyhow::Result<()> {
    let roots = dsh_tool_skill::SkillRoots {
        dsh_home: Some(home.to_path_buf()),
        ..dsh_tool_skill::SkillRoots::from_env()
    };
    let cwd: dsh_tool_skill::CwdResolver = Arc::new(|run: &dsh_tools::ToolRun| {
        run.agent()
            .and_then(|agent| agent.scope().service::<SessionState>())
            .map(|state| state.cwd.clone())
            .ok_or_else(|| dsh_tools::ToolError::new("skill requires an owning agent session"))
    });
    dsh_tool_skill::register(registry, root, roots.clone(), cwd)?;
    let (registry, roots) = (registry.clone(), Arc::new(roots));
    hooks
        .pre_step
        .register(root, move |input: dsh_agent::PreStepInput, next| {
            let (registry, roots) = (registry.clone(), roots.clone());
            Box::pin(async move {
                let agent = input.agent.clone();
                let claimed = input.messages.clone();
                let decision = next.run(input).await?;
                let dsh_agent::PreStepDecision::Enter(mut messages) = decision else {
                    return Ok(decision);
                };
                let scope = agent.scope();
                let Some(state) = scope.service::<SessionState>() else {
                    return Ok(dsh_agent::PreStepDecision::Enter(messages));
                };
                if registry.get(dsh_tool_skill::NAME, Some(scope)).is_some() {
                    let skills = roots.discover(&state.cwd);
                    // Only the latest catalog in the history matters; the log indexes it, so
                    // this is no walk of the history per step.
                    let latest = agent
                        .log()
                        .latest_message_of_kind(dsh_tool_skill::catalog::CATALOG_KIND);
                    if let Some(catalog) = dsh_tool_skill::catalog::catalog_message(
                        &skills,
                        latest.as_slice(),
                        &messages,
                        dsh_tool_skill::catalog::DESCRIPTION_MAX_LENGTH,
                    ) {
                        messages.push(catalog);
                    }
                }
                // `/<name>` gestures go after every other injection of the step.
                messages.extend(dsh_tool_skill::invocation::invocation_messages(
                    &roots, &state.cwd, &claimed,
                ));
                Ok(dsh_agent::PreStepDecision::Enter(messages))
            })
        });
    Ok(())
}
