//! Typed configuration of the terminal plugins, with upstream's load-time checks.

use serde::Deserialize;
use serde::Serialize;

use crate::error::ConfigError;

/// `tool-terminal` settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TerminalToolsConfig {
    /// Offer `run_in_background` on `terminal_send` (needs the jobs runtime).
    pub enable_run_in_background: bool,
    /// Every terminal tool result is re-bounded to this many UTF-8 bytes.
    pub max_result_bytes: usize,
}

impl Default for TerminalToolsConfig {
    fn default() -> Self {
        Self {
            enable_run_in_background: true,
            max_result_bytes: 262_144,
        }
    }
}

impl TerminalToolsConfig {
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.max_result_bytes < 64 || self.max_result_bytes > MAX_SAFE {
            return Err(ConfigError(
                "tool-terminal: maxResultBytes must be a safe integer of at least 64".to_owned(),
            ));
        }
        Ok(())
    }
}

const MAX_SAFE: usize = 9_007_199_254_740_991;

/// `terminal-bash` backend settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BashBackendConfig {
    /// The type name `terminal_open` selects this backend by.
    pub backend_type: String,
    /// Only `bash` is supported.
    pub shell_dialect: String,
    /// The shell's argv.
    pub shell: Vec<String>,
    pub rows: u16,
    pub cols: u16,
    pub scrollback_lines: usize,
    pub scrollback_max_bytes: usize,
    pub max_read_bytes: usize,
    pub poll_interval_ms: u64,
    pub exact_probe_after_ms: u64,
    pub idle_silence_ms: u64,
    pub handoff_grace_ms: u64,
    pub timeout_ms: u64,
    pub dispose_grace_ms: u64,
}

impl Default for BashBackendConfig {
    fn default() -> Self {
        Self {
            backend_type: "shell".to_owned(),
            shell_dialect: "bash".to_owned(),
            shell: ["/bin/bash", "--noprofile", "--norc", "-i"]
                .map(str::to_owned)
                .to_vec(),
            rows: 40,
            cols: 160,
            scrollback_lines: 10_000,
            scrollback_max_bytes: 4 * 1024 * 1024,
            max_read_bytes: 256 * 1024,
            poll_interval_ms: 50,
            exact_probe_after_ms: 150,
            idle_silence_ms: 3_000,
            handoff_grace_ms: 500,
            timeout_ms: 30_000,
            dispose_grace_ms: 3_000,
        }
    }
}

impl BashBackendConfig {
    pub fn check(&self) -> Result<(), ConfigError> {
        let fail = |m: &str| Err(ConfigError(format!("terminal-bash: {m}")));
        if self.backend_type.trim().is_empty() {
            return fail("backendType must be non-empty");
        }
        if self.shell_dialect != "bash" {
            return fail("shellDialect must be \"bash\" (pwsh is not supported)");
        }
        if self.shell.is_empty() || self.shell[0].is_empty() {
            return fail("shell must name a program");
        }
        for (name, value) in [
            ("rows", u64::from(self.rows)),
            ("cols", u64::from(self.cols)),
            ("scrollbackLines", self.scrollback_lines as u64),
            ("scrollbackMaxBytes", self.scrollback_max_bytes as u64),
            ("maxReadBytes", self.max_read_bytes as u64),
            ("pollIntervalMs", self.poll_interval_ms),
            ("exactProbeAfterMs", self.exact_probe_after_ms),
            ("idleSilenceMs", self.idle_silence_ms),
            ("handoffGraceMs", self.handoff_grace_ms),
            ("timeoutMs", self.timeout_ms),
            ("disposeGraceMs", self.dispose_grace_ms),
        ] {
            if value == 0 || value > MAX_SAFE as u64 {
                return fail(&format!("{name} must be a positive safe integer"));
            }
        }
        if self.max_read_bytes > self.scrollback_max_bytes {
            return fail("maxReadBytes must not exceed scrollbackMaxBytes");
        }
        if self.handoff_grace_ms < self.poll_interval_ms {
            return fail("handoffGraceMs must be at least pollIntervalMs");
        }
        Ok(())
    }
}

/// `tool-bash-persistent` settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PersistentBashConfig {
    pub backend_type: String,
    pub timeout_ms: u64,
    pub max_output_chars: usize,
    pub description: String,
}

pub const PERSISTENT_BASH_DESCRIPTION: &str = "Run a command in this agent's own long-lived bash shell. The working directory, exported variables, shell functions and background jobs carry over from one call to the next.";

impl Default for PersistentBashConfig {
    fn default() -> Self {
        Self {
            backend_type: "shell".to_owned(),
            timeout_ms: 300_000,
            max_output_chars: 16_000,
            description: PERSISTENT_BASH_DESCRIPTION.to_owned(),
        }
    }
}

impl PersistentBashConfig {
    pub fn check(&self) -> Result<(), ConfigError> {
        let fail = |m: &str| Err(ConfigError(format!("tool-bash-persistent: {m}")));
        if self.backend_type.trim().is_empty() {
            return fail("backendType must be non-empty");
        }
        if self.timeout_ms == 0 || self.timeout_ms > MAX_SAFE as u64 {
            return fail("timeoutMs must be a positive safe integer");
        }
        if self.max_output_chars == 0 || self.max_output_chars > MAX_SAFE {
            return fail("maxOutputChars must be a positive safe integer");
        }
        if self.description.trim().is_empty() {
            return fail("description must be non-empty");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_bad_values_name_the_field() {
        BashBackendConfig::default().check().unwrap();
        TerminalToolsConfig::default().check().unwrap();
        PersistentBashConfig::default().check().unwrap();
        let small = TerminalToolsConfig {
            max_result_bytes: 63,
            ..TerminalToolsConfig::default()
        };
        assert_eq!(
            small.check().unwrap_err().0,
            "tool-terminal: maxResultBytes must be a safe integer of at least 64"
        );
        let bad = PersistentBashConfig {
            timeout_ms: 0,
            ..PersistentBashConfig::default()
        };
        assert_eq!(
            bad.check().unwrap_err().0,
            "tool-bash-persistent: timeoutMs must be a positive safe integer"
        );
        let unknown: Result<TerminalToolsConfig, _> =
            serde_json::from_value(serde_json::json!({"maxResultBytes": 100}));
        assert!(unknown.is_err());
    }
}
