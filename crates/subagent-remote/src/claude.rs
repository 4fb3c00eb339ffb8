//! The `claude-code` provider (§3): the `claude` CLI in print mode with stream-json output, one
//! unattended query, no persisted session.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dsh_protocol::ContentBlock;
use dsh_subagent::Capabilities;
use dsh_subagent::StartRequest;
use dsh_subagent::StopReason;
use dsh_subagent::SubagentError;
use dsh_subagent::SubagentProvider;
use dsh_subagent::SubagentResult;
use dsh_subagent::SubagentRun;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::common::ProductFailure;
use crate::common::check_grace;
use crate::common::child_cwd;
use crate::common::text_task;
use crate::process;

const PREFIX: &str = "subagent-claude-code";
pub const ABORTED_BEFORE_STARTUP: &str =
    "subagent-claude-code: request was aborted before SDK startup";

/// `permissionMode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ClaudePermission {
    #[default]
    DontAsk,
    AcceptEdits,
    Auto,
    Plan,
    BypassPermissions,
}

impl ClaudePermission {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DontAsk => "dontAsk",
            Self::AcceptEdits => "acceptEdits",
            Self::Auto => "auto",
            Self::Plan => "plan",
            Self::BypassPermissions => "bypassPermissions",
        }
    }
}

/// `subagent-claude-code` config (`command` is this port's addition; default `claude`).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClaudeConfig {
    #[serde(default = "default_name")]
    pub provider_name: String,
    #[serde(default = "default_command")]
    pub command: String,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub permission_mode: ClaudePermission,
    #[serde(default = "default_grace")]
    pub dispose_grace_ms: u64,
}

fn default_name() -> String {
    "claude-code".to_owned()
}
fn default_command() -> String {
    "claude".to_owned()
}
fn default_grace() -> u64 {
    3000
}

impl Default for ClaudeConfig {
    fn default() -> Self {
        Self {
            provider_name: default_name(),
            command: default_command(),
            env: BTreeMap::new(),
            permission_mode: ClaudePermission::DontAsk,
            dispose_grace_ms: default_grace(),
        }
    }
}

pub struct ClaudeProvider {
    config: ClaudeConfig,
}

impl ClaudeProvider {
    pub fn new(config: ClaudeConfig) -> Result<Arc<Self>, SubagentError> {
        check_grace(PREFIX, "disposeGraceMs", config.dispose_grace_ms)?;
        Ok(Arc::new(Self { config }))
    }
}

/// The command line of one unattended query.
pub fn arguments(mode: ClaudePermission, task: &str) -> Vec<String> {
    let mut disallowed = vec!["AskUserQuestion"];
    if mode == ClaudePermission::Plan {
        disallowed.push("ExitPlanMode");
    }
    vec![
        "--print".to_owned(),
        "--output-format".to_owned(),
        "stream-json".to_owned(),
        "--verbose".to_owned(),
        "--no-session-persistence".to_owned(),
        "--permission-mode".to_owned(),
        mode.as_str().to_owned(),
        "--disallowedTools".to_owned(),
        disallowed.join(","),
        "--".to_owned(),
        task.to_owned(),
    ]
}

/// Why a Claude Code run did not succeed; `Display` is the failure category reported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultFailure {
    /// No `result` message arrived (the caller reports a failed process as `process-exit`).
    #[error("missing-result")]
    MissingResult,
    /// A known error subtype (`error_max_turns`, …), reported as is.
    #[error("{0}")]
    Subtype(&'static str),
    #[error("unknown")]
    Unknown,
    /// `subtype: success` with `is_error` set or a blank result.
    #[error("invalid-success")]
    InvalidSuccess,
}

/// Success only for a `result` message of subtype `success`, not an error, with a non-blank
/// result; everything else is an error with a category.
pub fn result_outcome(result: Option<&Value>) -> Result<String, ResultFailure> {
    let Some(result) = result else {
        return Err(ResultFailure::MissingResult);
    };
    let subtype = result
        .get("subtype")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    if subtype != "success" {
        return Err(
            match [
                "error_during_execution",
                "error_max_turns",
                "error_max_budget_usd",
                "error_max_structured_output_retries",
            ]
            .into_iter()
            .find(|known| *known == subtype)
            {
                Some(known) => ResultFailure::Subtype(known),
                None => ResultFailure::Unknown,
            },
        );
    }
    let is_error = result
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let text = result
        .get("result")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if is_error || text.trim().is_empty() {
        return Err(ResultFailure::InvalidSuccess);
    }
    Ok(text.to_owned())
}

impl SubagentProvider for ClaudeProvider {
    fn name(&self) -> &str {
        &self.config.provider_name
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }
    fn inherits_parent_context(&self) -> bool {
        false
    }
    fn start(
        &self,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentRun, SubagentError>> {
        let config = self.config.clone();
        Box::pin(async move { start(config, request).await })
    }
}

async fn start(config: ClaudeConfig, request: StartRequest) -> Result<SubagentRun, SubagentError> {
    let task = text_task(PREFIX, &request.prompt)?;
    if request.signal.is_cancelled() {
        return Err(SubagentError::plain(ABORTED_BEFORE_STARTUP));
    }
    let parent_cwd = request.parent.log().header().cwd.clone();
    let cwd = child_cwd(PREFIX, None, parent_cwd.as_deref(), false)?;
    let env = dsh_process::ChildEnv::inherited().with(config.env.clone());
    let mode = config.permission_mode;
    let spawned =
        process::spawn(&config.command, &arguments(mode, &task), &cwd, &env).map_err(|_| {
            SubagentError::plain(format!(
                "{PREFIX}: {}",
                ProductFailure {
                    product: "Claude Code",
                    stage: "query-start".to_owned(),
                    category: "process-exit".to_owned(),
                    ..ProductFailure::default()
                }
                .render()
            ))
        })?;
    let process::Spawned {
        mut child,
        stdin,
        stdout,
        pgid,
        ..
    } = spawned;
    drop(stdin);
    let grace = Duration::from_millis(config.dispose_grace_ms);
    let signal = request.signal.clone();
    let name = config.provider_name.clone();
    let (result_tx, result_rx) =
        tokio::sync::oneshot::channel::<(SubagentResult, tokio::process::Child)>();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let mut last_result: Option<Value> = None;
        let mut cancelled = false;
        loop {
            tokio::select! {
                () = signal.cancelled(), if !cancelled => {
                    cancelled = true;
                    if let Some(pgid) = pgid {
                        dsh_process::kill_group(pgid, rustix::process::Signal::TERM);
                    }
                }
                line = lines.next_line() => match line {
                    Ok(Some(line)) => {
                        if let Ok(message) = serde_json::from_str::<Value>(&line)
                            && message.get("type").and_then(Value::as_str) == Some("result")
                        {
                            last_result = Some(message);
                        }
                    }
                    _ => break,
                }
            }
        }
        let status = child.wait().await.ok();
        let outcome = result_outcome(last_result.as_ref());
        let result = match outcome {
            _ if cancelled => SubagentResult::new(Vec::new(), StopReason::Aborted),
            Ok(text) => SubagentResult::new(vec![ContentBlock::text(text)], StopReason::Completed),
            Err(failure) => {
                let (exit_code, signal_name) = status
                    .as_ref()
                    .map(dsh_tool_shell_exit)
                    .unwrap_or((None, None));
                let category = match failure {
                    ResultFailure::MissingResult if status.is_some_and(|s| !s.success()) => {
                        "process-exit".to_owned()
                    }
                    failure => failure.to_string(),
                };
                let stage = if category == "process-exit" {
                    "process"
                } else {
                    "query-run"
                };
                let failure = ProductFailure {
                    product: "Claude Code",
                    stage: stage.to_owned(),
                    category,
                    exit_code,
                    signal: signal_name,
                    ..ProductFailure::default()
                };
                tracing::warn!(
                    "subagent-claude-code \"{name}\": child run failed (error): {}",
                    failure.render()
                );
                let mut result = SubagentResult::new(Vec::new(), StopReason::Error);
                result.diagnostic = Some(dsh_subagent::limit_diagnostic(&failure.render()));
                result
            }
        };
        let _ = result_tx.send((result, child));
    });
    let (settled_tx, settled_rx) = tokio::sync::watch::channel::<Option<SubagentResult>>(None);
    let child_slot: Arc<tokio::sync::Mutex<Option<tokio::process::Child>>> = Arc::default();
    {
        let child_slot = child_slot.clone();
        tokio::spawn(async move {
            if let Ok((result, child)) = result_rx.await {
                *child_slot.lock().await = Some(child);
                let _ = settled_tx.send(Some(result));
            }
        });
    }
    let mut waiting = settled_rx.clone();
    let result: BoxFuture<'static, dsh_subagent::RunResult> = Box::pin(async move {
        let settled = waiting
            .wait_for(Option::is_some)
            .await
            .map_err(|_| {
                SubagentError::plain("subagent-claude-code: the run ended without a result")
            })?
            .clone();
        settled.ok_or_else(|| {
            SubagentError::plain("subagent-claude-code: the run ended without a result")
        })
    });
    let dispose = move || -> BoxFuture<'static, Result<(), SubagentError>> {
        Box::pin(async move {
            if settled_rx.borrow().is_none() {
                if let Some(pgid) = pgid {
                    dsh_process::kill_group(pgid, rustix::process::Signal::TERM);
                }
                tokio::time::sleep(grace).await;
                if let Some(pgid) = pgid {
                    dsh_process::kill_group(pgid, rustix::process::Signal::KILL);
                }
            }
            if let Some(child) = child_slot.lock().await.take() {
                process::reap(child, pgid, Duration::from_millis(10), grace).await;
            } else if let Some(pgid) = pgid {
                dsh_process::kill_group(pgid, rustix::process::Signal::KILL);
            }
            Ok(())
        })
    };
    Ok(SubagentRun::new(
        uuid::Uuid::new_v4().to_string(),
        None,
        result,
        dispose,
    ))
}

fn dsh_tool_shell_exit(status: &std::process::ExitStatus) -> (Option<i32>, Option<String>) {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(sig) => {
            let name = match sig {
                1 => "SIGHUP",
                2 => "SIGINT",
                3 => "SIGQUIT",
                6 => "SIGABRT",
                9 => "SIGKILL",
                11 => "SIGSEGV",
                13 => "SIGPIPE",
                15 => "SIGTERM",
                _ => return (None, Some(format!("SIG{sig}"))),
            };
            (None, Some(name.to_owned()))
        }
        None => (status.code(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_clean_success_counts() {
        assert_eq!(
            result_outcome(Some(
                &json!({"type": "result", "subtype": "success", "is_error": false, "result": "done"})
            )),
            Ok("done".to_owned())
        );
        assert_eq!(
            result_outcome(Some(
                &json!({"type": "result", "subtype": "success", "is_error": true, "result": "x"})
            )),
            Err(ResultFailure::InvalidSuccess)
        );
        assert_eq!(
            result_outcome(Some(
                &json!({"type": "result", "subtype": "error_max_turns"})
            )),
            Err(ResultFailure::Subtype("error_max_turns"))
        );
        assert_eq!(
            result_outcome(Some(&json!({"type": "result", "subtype": "error_other"})))
                .unwrap_err()
                .to_string(),
            "unknown"
        );
        assert_eq!(result_outcome(None), Err(ResultFailure::MissingResult));
        assert_eq!(ResultFailure::MissingResult.to_string(), "missing-result");
        assert_eq!(
            ResultFailure::Subtype("error_max_turns").to_string(),
            "error_max_turns"
        );
        assert_eq!(ResultFailure::InvalidSuccess.to_string(), "invalid-success");
    }

    #[test]
    fn queries_are_unattended_and_unpersisted() {
        let args = arguments(ClaudePermission::Plan, "task");
        assert!(args.contains(&"--no-session-persistence".to_owned()));
        assert!(args.contains(&"AskUserQuestion,ExitPlanMode".to_owned()));
        assert_eq!(args.last().unwrap(), "task");
    }
}
