//! Typed settings: every `[plugins.<name>]` table and the other keys the composition reads,
//! parsed and checked once at start-up so a typo fails before any session starts.

use std::path::PathBuf;

use anyhow::Context;
use dsh_tool_fs::SandboxMode;
use dsh_tools::PresentationMode;
use serde::Deserialize;

use crate::config::Config;

/// `[plugins.sandbox]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    #[serde(default = "default_sandbox_mode")]
    pub mode: String,
    /// Network of confined commands under `workspace-write`: `allow` (default) or `deny`.
    /// `read-only` never has the network.
    pub network: Option<String>,
}

fn default_sandbox_mode() -> String {
    "workspace-write".to_owned()
}

/// `[plugins.approval]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSettings {
    /// `ask` or `never`; default: `never` under danger-full-access, else `ask`.
    pub policy: Option<String>,
}

/// `[plugins.bash]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashSettings {
    #[serde(default = "default_bash_timeout")]
    pub timeout_ms: u64,
    #[serde(default = "default_true")]
    pub run_in_background: bool,
}

fn default_bash_timeout() -> u64 {
    60_000
}

fn default_true() -> bool {
    true
}

/// `[plugins.fs]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsSettings {
    /// Sample over-cap glob results instead of listing the oldest (upstream `globSampling`).
    pub glob_sampling: Option<bool>,
    pub glob_max_results: Option<usize>,
    pub grep_max_matches: Option<usize>,
}

/// `[plugins.spill]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpillSettings {
    /// Results whose text exceeds this many bytes move to a spill file; `0` disables.
    #[serde(default = "default_inline_cap")]
    pub max_inline_bytes: usize,
    /// Where spill files go (default: a private directory under the OS temp directory).
    pub root: Option<PathBuf>,
}

fn default_inline_cap() -> usize {
    50_000
}

/// `[plugins.todo]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoSettings {
    #[serde(default = "default_true")]
    pub allow_parallel_in_progress: bool,
}

/// `[plugins.hooks-claude-code]` and `[plugins.hooks-codex]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSettings {
    /// The bridge's hook file, resolved against the process's launch cwd and read once; absent
    /// = the bridge is off, a missing file = no hooks.
    pub config_path: Option<PathBuf>,
    /// Claude Code: replaces `${CLAUDE_PLUGIN_ROOT}` in commands.
    pub plugin_root: Option<String>,
    /// Claude Code: replaces `${CLAUDE_PROJECT_DIR}`; hooks' `CLAUDE_PROJECT_DIR`.
    pub project_dir: Option<String>,
    /// Codex: the `model` stamped on payloads.
    pub model: Option<String>,
    /// Timeout of a hook that sets none (default 600 000).
    pub default_timeout_ms: Option<f64>,
    /// Cap of `hook/result.stderrSummary` (default 500; a positive integer).
    pub stderr_summary_max_chars: Option<f64>,
}

/// `[prompt]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSettings {
    pub persona: Option<String>,
}

const DEFAULT_PERSONA: &str = "You are a coding agent powered by the {{model}} model. Your working directory is {{cwd}}. Work in small verified steps: read before you edit, run what you change, and keep answers brief and factual.";

/// Reads one `[plugins.<name>]` table into its settings type, naming the plugin on error.
fn plugin<T: serde::de::DeserializeOwned>(config: &Config, name: &str) -> anyhow::Result<T> {
    serde_json::from_value(config.plugin_settings(name))
        .with_context(|| format!("invalid [plugins.{name}] settings"))
}

/// Every setting the composition reads, parsed and checked up front so a typo fails before
/// any session starts.
#[derive(Debug, Clone)]
pub struct Settings {
    pub provider: String,
    pub model: String,
    pub tools_mode: PresentationMode,
    pub max_parallel: usize,
    pub sandbox: SandboxMode,
    pub network: dsh_tool_shell::sandbox::NetworkAccess,
    pub approval_never: bool,
    pub bash: BashSettings,
    pub fs: FsSettings,
    pub spill: SpillSettings,
    pub todo: TodoSettings,
    pub hooks_claude_code: HooksSettings,
    pub hooks_codex: HooksSettings,
    pub persona: String,
    /// `[[mcp.servers]]`
    pub mcp_servers: Vec<dsh_mcp::McpServerConfig>,
    /// `[[model.catalog]]`: input modalities per model id, over the adapter's built-in list.
    pub catalog: Vec<crate::images::CatalogEntry>,
}

impl Settings {
    pub fn from_config(config: &Config) -> anyhow::Result<Self> {
        let sandbox_settings: SandboxSettings = plugin(config, "sandbox")?;
        let sandbox = match sandbox_settings.mode.as_str() {
            "read-only" => SandboxMode::ReadOnly,
            "workspace-write" => SandboxMode::WorkspaceWrite,
            "danger-full-access" => SandboxMode::DangerFullAccess,
            other => anyhow::bail!(
                "[plugins.sandbox] mode must be read-only, workspace-write or danger-full-access, not {other:?}"
            ),
        };
        let network = match sandbox_settings.network.as_deref() {
            None | Some("allow") => dsh_tool_shell::sandbox::NetworkAccess::Allow,
            Some("deny") => dsh_tool_shell::sandbox::NetworkAccess::Deny,
            Some(other) => {
                anyhow::bail!("[plugins.sandbox] network must be allow or deny, not {other:?}")
            }
        };
        let approval: ApprovalSettings = plugin(config, "approval")?;
        let approval_never = match approval.policy.as_deref() {
            None => sandbox == SandboxMode::DangerFullAccess,
            Some("never") => true,
            Some("ask") => false,
            Some(other) => {
                anyhow::bail!("[plugins.approval] policy must be ask or never, not {other:?}")
            }
        };
        let tools_mode = match config.get_str("tools.mode").unwrap_or("native") {
            "native" => PresentationMode::Native,
            "code" => PresentationMode::Code,
            "both" => PresentationMode::Both,
            other => anyhow::bail!("tools.mode must be native, code or both, not {other:?}"),
        };
        let max_parallel = match config
            .get("tools.max_parallel")
            .and_then(serde_json::Value::as_u64)
        {
            Some(0) => anyhow::bail!("tools.max_parallel must be a positive integer"),
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => dsh_agent::DEFAULT_MAX_PARALLEL_TOOL_CALLS,
        };
        let prompt: PromptSettings = match config.get("prompt") {
            Some(value) => {
                serde_json::from_value(value.clone()).context("invalid [prompt] settings")?
            }
            None => PromptSettings::default(),
        };
        Ok(Self {
            provider: config
                .get_str("model.provider")
                .unwrap_or("deepseek-official")
                .to_owned(),
            model: config
                .get_str("model.name")
                .unwrap_or(dsh_llm::DEFAULT_MODEL)
                .to_owned(),
            tools_mode,
            max_parallel,
            sandbox,
            network,
            approval_never,
            bash: plugin(config, "bash")?,
            fs: plugin(config, "fs")?,
            spill: plugin(config, "spill")?,
            todo: plugin(config, "todo")?,
            hooks_claude_code: plugin(config, "hooks-claude-code")?,
            hooks_codex: plugin(config, "hooks-codex")?,
            persona: prompt.persona.unwrap_or_else(|| DEFAULT_PERSONA.to_owned()),
            mcp_servers: match config.get("mcp.servers") {
                Some(servers) => serde_json::from_value(servers.clone())
                    .context("invalid [[mcp.servers]] entry")?,
                None => Vec::new(),
            },
            catalog: crate::images::catalog(config)?,
        })
    }
}
