//! `[plugins.skill]`: the `skill` tool bound to each session's cwd, the skill catalog entered
//! at every pre-step when it changed, and the `/<name>` user gesture.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::PreStepDecision;
use dsh_agent::PreStepInput;
use dsh_kernel::Scope;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::SessionContext;
use serde::Deserialize;
use serde::Serialize;

use crate::SkillRoots;

/// `[plugins.skill]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillSettings {
    /// Extra skill folders (upstream `customSkillDirs`), ranked after the project's own and
    /// before the user's home folders.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custom_dirs: Vec<PathBuf>,
}

/// The skill plugin.
#[derive(Debug, Default)]
pub struct SkillPlugin;

impl Plugin for SkillPlugin {
    type Config = SkillSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: SkillSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let roots = SkillRoots {
            dsh_home: Some(host.info.home.clone()),
            custom_dirs: config.custom_dirs,
            ..SkillRoots::from_env()
        };
        let cwd: crate::CwdResolver = Arc::new(|run: &dsh_tools::ToolRun| {
            SessionContext::for_run(run, crate::NAME).map(|session| session.cwd().to_path_buf())
        });
        crate::register(&host.tools, ctx, roots.clone(), cwd).map_err(PluginError::other)?;
        let (registry, roots) = (host.tools.clone(), Arc::new(roots));
        host.hooks
            .pre_step
            .register(ctx, move |input: PreStepInput, next| {
                let (registry, roots) = (registry.clone(), roots.clone());
                Box::pin(async move {
                    let agent = input.agent.clone();
                    let claimed = input.messages.clone();
                    let decision = next.run(input).await?;
                    let PreStepDecision::Enter(mut messages) = decision else {
                        return Ok(decision);
                    };
                    let scope = agent.scope();
                    let Some(session) = SessionContext::of(scope) else {
                        return Ok(PreStepDecision::Enter(messages));
                    };
                    if registry.get(crate::NAME, Some(scope)).is_some() {
                        let skills = roots.discover(session.cwd());
                        // Only the latest catalog in the history matters; the log indexes
                        // it, so this is no walk of the history per step.
                        let latest = agent
                            .log()
                            .latest_message_of_kind(crate::catalog::CATALOG_KIND);
                        if let Some(catalog) = crate::catalog::catalog_message(
                            &skills,
                            latest.as_slice(),
                            &messages,
                            crate::catalog::DESCRIPTION_MAX_LENGTH,
                        ) {
                            messages.push(catalog);
                        }
                    }
                    // `/<name>` gestures go after every other injection of the step.
                    messages.extend(crate::invocation::invocation_messages(
                        &roots,
                        session.cwd(),
                        &claimed,
                    ));
                    Ok(PreStepDecision::Enter(messages))
                })
            });
        Ok(())
    }
}

impl HostPlugin for SkillPlugin {
    const NAME: &'static str = "skill";
}
