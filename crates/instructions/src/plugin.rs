//! `[plugins.workspace-instructions]` on the host.
//!
//! Instruction files are read through the session's own file policy, the one the file tools
//! apply: a project's `AGENTS.md` that is a link into a credential folder or dsh's home is
//! refused like a `read` of it would be. Only the user-global `$DSH_HOME/AGENTS.md` is
//! readable inside dsh's home.

use std::path::Path;
use std::sync::Arc;

use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::Scope;
use dsh_plugin::SessionContext;
use dsh_plugin::invalid_config;
use dsh_spill::SpillStore;
use dsh_tool_fs::FilePolicy;
use serde::Deserialize;
use serde::Serialize;

use crate::config::Environment;
use crate::config::InstructionsConfig;
use crate::fs::InstructionFs;
use crate::fs::LocalFs;
use crate::fs::Probe;
use crate::fs::ReadOutcome;
use crate::service::FsProvider;
use crate::service::WorkspaceInstructions;

/// Reads through a file policy: refused paths are "unreadable" (skipped, never shown).
#[derive(Debug)]
pub struct PolicyFs {
    policy: FilePolicy,
}

impl PolicyFs {
    pub fn new(policy: FilePolicy) -> Self {
        Self { policy }
    }

    fn refused(&self, path: &Path) -> Option<&'static str> {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.policy.read_refusal(path, &real)
    }
}

impl InstructionFs for PolicyFs {
    fn exists(&self, path: &Path) -> std::io::Result<bool> {
        LocalFs.exists(path)
    }

    fn probe_file(&self, path: &Path) -> Probe {
        LocalFs.probe_file(path)
    }

    fn read(&self, path: &Path, max: u64) -> ReadOutcome {
        if let Some(reason) = self.refused(path) {
            return ReadOutcome::Failed(format!("the file policy refuses it: {reason}"));
        }
        if let Ok(file) = std::fs::File::open(path)
            && self.policy.is_secret_file(&file)
        {
            return ReadOutcome::Failed("it is a link to a credential file".to_owned());
        }
        LocalFs.read(path, max)
    }
}

fn max_bytes() -> i64 {
    65_536
}
fn markers() -> Vec<String> {
    vec![".git".to_owned()]
}
fn max_source_bytes() -> u64 {
    1_048_576
}
fn candidates() -> Vec<String> {
    vec!["AGENTS.md".to_owned(), "CLAUDE.md".to_owned()]
}
fn local_candidates() -> Vec<String> {
    vec!["AGENTS.local.md".to_owned(), "CLAUDE.local.md".to_owned()]
}

/// `[plugins.workspace-instructions]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstructionsSettings {
    /// UTF-8 cap of one rendered baseline or delta; `<= 0` disables the capability.
    #[serde(default = "max_bytes")]
    pub max_bytes: i64,
    /// Where the user-global `AGENTS.md` lives (default: dsh's home).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsh_home: Option<String>,
    #[serde(default = "markers")]
    pub project_root_markers: Vec<String>,
    #[serde(default = "max_source_bytes")]
    pub max_source_bytes: u64,
    #[serde(default = "candidates")]
    pub instruction_file_candidates: Vec<String>,
    #[serde(default = "local_candidates")]
    pub local_instruction_file_candidates: Vec<String>,
}

impl Default for InstructionsSettings {
    fn default() -> Self {
        Self {
            max_bytes: max_bytes(),
            dsh_home: None,
            project_root_markers: markers(),
            max_source_bytes: max_source_bytes(),
            instruction_file_candidates: candidates(),
            local_instruction_file_candidates: local_candidates(),
        }
    }
}

/// The workspace-instructions plugin.
#[derive(Debug, Default)]
pub struct WorkspaceInstructionsPlugin;

impl Plugin for WorkspaceInstructionsPlugin {
    type Config = InstructionsSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, settings: InstructionsSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let value = serde_json::to_value(&settings)
            .map_err(|e| invalid_config(Self::NAME, None, e.to_string()))?;
        let env = Environment {
            dsh_home: Some(host.info.home.to_string_lossy().into_owned()),
            home: std::env::var_os("HOME").map(Into::into),
        };
        let config = InstructionsConfig::parse(&value, &env)
            .map_err(|e| invalid_config(Self::NAME, None, e.0))?;
        let global = config.dsh_home.path.join("AGENTS.md");
        let spill = ctx.service::<SpillStore>();
        let fs: FsProvider = Arc::new(move |agent| {
            let session = SessionContext::of(agent.scope())?;
            let policy =
                dsh_tool_fs::session_policy(&session, spill.as_deref()).allow_reading(&global);
            Some(Arc::new(PolicyFs::new(policy)) as Arc<dyn InstructionFs>)
        });
        let _ = WorkspaceInstructions::mount(config, Some(fs), ctx, &host.hooks, &host.tools);
        Ok(())
    }
}

impl HostPlugin for WorkspaceInstructionsPlugin {
    const NAME: &'static str = "workspace-instructions";
    const USES: &'static [&'static str] = &["spill"];
}
