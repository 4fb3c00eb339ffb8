//! `[plugins.code]`: Code Mode as a plugin. Always mounted by default so a session can switch
//! presentation (`/mode`); it only changes what the model sees in `code` or `both` mode.

use std::sync::Arc;

use dsh_kernel::Scope;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::Section;
use dsh_plugin::Slot;
use serde::Deserialize;
use serde::Serialize;

use crate::CodeMode;
use crate::CodeModeConfig;
use crate::CodeRuntime;
use crate::QuickJsConfig;
use crate::QuickJsRuntime;

/// `[plugins.code]`: the program budgets of `run_code`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CodeSettings {
    /// Busy (executing) time budget of one program, in milliseconds.
    pub compute_ms: u64,
    /// Wall-clock ceiling of one program, waits included, in milliseconds.
    pub max_wall_ms: u64,
    /// Combined output ledger of one program, in bytes.
    pub max_output_bytes: usize,
    /// Engine heap limit, in MiB.
    pub memory_mb: usize,
    /// How many concurrency-safe sub-calls may overlap.
    pub max_parallel_sub_calls: usize,
}

impl Default for CodeSettings {
    fn default() -> Self {
        let runtime = QuickJsConfig::default();
        Self {
            compute_ms: runtime.compute_ms,
            max_wall_ms: runtime.max_wall_ms,
            max_output_bytes: runtime.max_output_bytes,
            memory_mb: runtime.memory_mb,
            max_parallel_sub_calls: CodeModeConfig::default().max_parallel_sub_calls,
        }
    }
}

/// The `run_code` transport, the QuickJS runtime, the code-only rule, the generated SDK and
/// the wire tool list of code presentations.
#[derive(Debug, Default)]
pub struct CodePlugin;

impl Plugin for CodePlugin {
    type Config = CodeSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: CodeSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let runtime = QuickJsRuntime::new(QuickJsConfig {
            compute_ms: config.compute_ms,
            max_wall_ms: config.max_wall_ms,
            max_output_bytes: config.max_output_bytes,
            memory_mb: config.memory_mb,
        })
        .map_err(|e| dsh_plugin::invalid_config(Self::NAME, None, e.to_string()))?;
        ctx.provide::<dyn CodeRuntime>(runtime)?;
        let (_, transport) = CodeMode::install(
            ctx,
            &host.tools,
            CodeModeConfig {
                max_parallel_sub_calls: config.max_parallel_sub_calls,
            },
        )
        .map_err(|e| dsh_plugin::invalid_config(Self::NAME, None, e.to_string()))?;
        ctx.defer(move || transport.dispose());
        // Both sections depend on the agent's presentation mode and visible tools, so they are
        // computed at every assembly.
        let (code_only, sdk) = (crate::CODE_ONLY_SECTION, crate::SDK_SECTION);
        let tools = host.tools.clone();
        host.prompts.register_section(
            ctx,
            Section::dynamic(code_only, Slot::Preamble, move |agent| {
                crate::code_only_section(&tools, agent).unwrap_or_default()
            }),
        );
        let tools = host.tools.clone();
        host.prompts.register_section(
            ctx,
            Section::dynamic(sdk, Slot::Reference, move |agent| {
                crate::sdk_section(&tools, agent).unwrap_or_default()
            }),
        );
        let tools = host.tools.clone();
        host.prompts.register_tool_schemas(
            ctx,
            Arc::new(move |agent: &Scope| {
                crate::wire_schemas(&tools, Some(agent)).map_err(|e| e.to_string())
            }),
        );
        Ok(())
    }
}

impl HostPlugin for CodePlugin {
    const NAME: &'static str = "code";
    const EVENT_KINDS: &'static [&'static str] =
        &[crate::log::CODE_DISPATCH_START, crate::log::CODE_DISPATCH];
}
