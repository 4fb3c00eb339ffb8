//! The `bash` tool (§2.1): arguments, canonical value, execution, model text and cards.

use std::path::PathBuf;
use std::time::Duration;

use dsh_protocol::ContentBlock;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolResultView;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::background;
use crate::capture::CaptureConfig;
use crate::context::ShellContext;
use crate::error::ShellError;
use crate::error::js_number;
use crate::escalation;
use crate::process;
use crate::process::ShellProcess;
use crate::sandbox;
use crate::sandbox::SandboxMode;
use crate::texts;

/// The tool name.
pub const BASH_TOOL_NAME: &str = "bash";

/// A wider sandbox mode requested for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxPermissions {
    WorkspaceWrite,
    DangerFullAccess,
}

impl SandboxPermissions {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WorkspaceWrite => "workspace-write",
            Self::DangerFullAccess => "danger-full-access",
        }
    }
}

impl From<SandboxPermissions> for SandboxMode {
    fn from(value: SandboxPermissions) -> Self {
        match value {
            SandboxPermissions::WorkspaceWrite => Self::WorkspaceWrite,
            SandboxPermissions::DangerFullAccess => Self::DangerFullAccess,
        }
    }
}

/// `bash` arguments, with upstream's parameter names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BashArgs {
    pub command: String,
    pub description: String,
    #[serde(rename = "timeoutMs", default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_in_background: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_permissions: Option<SandboxPermissions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub justification: Option<String>,
}

impl BashArgs {
    /// A foreground call with no options.
    pub fn new(command: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            description: description.into(),
            timeout_ms: None,
            workdir: None,
            run_in_background: None,
            sandbox_permissions: None,
            justification: None,
        }
    }
}

/// One stream of a foreground run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamText {
    pub text: String,
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_path: Option<String>,
    /// Why the full stream was not kept, when it was truncated and has no spill file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_missing: Option<String>,
}

/// How the sandbox treated a foreground run (present only with a confining executor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxReport {
    pub mode: SandboxMode,
    pub denied: bool,
    /// The backend that confined the run (`bwrap`); absent when the mode runs unconfined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_failed: Option<bool>,
    /// The note for a command that ran into one of its sandbox's limits: which one, and the
    /// setting that raises it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

/// The canonical value of a `bash` call.
// The foreground variant is the common one and is built once per call; boxing it would only
// add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum BashOutput {
    Foreground {
        exit_code: Option<i32>,
        signal: Option<String>,
        timed_out: bool,
        aborted: bool,
        timeout_ms: f64,
        stdout: StreamText,
        stderr: StreamText,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<SandboxReport>,
    },
    Background {
        job_id: String,
    },
}

/// The model-facing description for a composition.
pub fn bash_description(run_in_background: bool, confining: bool) -> String {
    let last = if run_in_background {
        texts::BASH_BACKGROUND_ENABLED
    } else {
        texts::BASH_BACKGROUND_DISABLED
    };
    let mut text = format!("{} {last}", texts::BASH_DESCRIPTION_CORE);
    if confining {
        text.push(' ');
        text.push_str(texts::BASH_ESCALATION_PARAGRAPH);
    }
    text
}

/// The parameter schema, shaped as upstream's: background and sandbox fields only when offered.
pub fn bash_parameters(run_in_background: bool, confining: bool) -> Value {
    let mut properties = serde_json::Map::new();
    properties.insert(
        "command".into(),
        json!({"type": "string", "description": texts::BASH_PARAM_COMMAND}),
    );
    properties.insert(
        "description".into(),
        json!({"type": "string", "description": texts::BASH_PARAM_DESCRIPTION}),
    );
    properties.insert(
        "timeoutMs".into(),
        json!({"type": "number", "description": texts::BASH_PARAM_TIMEOUTMS}),
    );
    properties.insert(
        "workdir".into(),
        json!({"type": "string", "description": texts::BASH_PARAM_WORKDIR}),
    );
    if run_in_background {
        properties.insert(
            "run_in_background".into(),
            json!({"type": "boolean", "description": texts::BASH_PARAM_RUN_IN_BACKGROUND}),
        );
    }
    if confining {
        properties.insert(
            "sandbox_permissions".into(),
            json!({
                "type": "string",
                "description": texts::BASH_PARAM_SANDBOX_PERMISSIONS,
                "enum": ["workspace-write", "danger-full-access"],
            }),
        );
        properties.insert(
            "justification".into(),
            json!({"type": "string", "description": texts::BASH_PARAM_JUSTIFICATION}),
        );
    }
    json!({"type": "object", "properties": properties, "required": ["command", "description"]})
}

/// Checks done in the tool body before anything runs (upstream's exact texts).
pub fn validate(args: &BashArgs, ctx: &ShellContext) -> Result<(), ShellError> {
    if args.command.trim().is_empty() {
        return Err(ShellError::plain(
            "invalid command: expected a non-empty string",
        ));
    }
    if args.description.trim().is_empty() {
        return Err(ShellError::plain(
            "invalid description: expected a non-empty string",
        ));
    }
    if let Some(timeout) = args.timeout_ms
        && !(timeout.is_finite() && timeout > 0.0)
    {
        return Err(ShellError::plain(format!(
            "invalid timeoutMs: expected a positive number, got {}",
            js_number(timeout)
        )));
    }
    match (&args.sandbox_permissions, &args.justification) {
        (Some(_), None) => {
            return Err(ShellError::plain(
                "invalid escalation: sandbox_permissions requires a justification",
            ));
        }
        (None, Some(_)) => {
            return Err(ShellError::plain(
                "invalid escalation: justification is only valid together with sandbox_permissions",
            ));
        }
        (Some(_), Some(j)) if j.trim().is_empty() => {
            return Err(ShellError::plain(
                "invalid justification: expected a non-empty sentence",
            ));
        }
        _ => {}
    }
    if args.sandbox_permissions.is_some() && ctx.sandbox.is_none() {
        // This executor never confines, so there is nothing to escalate from.
        return Err(ShellError::plain(
            "sandbox_permissions is not available in this composition (no sandboxing executor to escalate)",
        ));
    }
    if args.run_in_background == Some(true) && !ctx.config.enable_run_in_background {
        return Err(ShellError::plain(
            "run_in_background is disabled for this deployment (enableRunInBackground: false)",
        ));
    }
    Ok(())
}

/// The working directory: the session cwd, or `workdir` resolved against it.
pub fn resolve_workdir(args: &BashArgs, ctx: &ShellContext) -> PathBuf {
    match args.workdir.as_deref() {
        Some(dir) if !dir.is_empty() => ctx.cwd.join(dir),
        _ => ctx.cwd.clone(),
    }
}

pub(crate) fn capture_config(ctx: &ShellContext, stream: &str) -> CaptureConfig {
    CaptureConfig {
        max_tail: ctx.config.max_output_bytes,
        max_spill: ctx.config.max_spill_bytes,
        spill: Some(ctx.spill.clone()),
        session_id: ctx.session_id.clone(),
        spill_name: format!("bash-{stream}.txt"),
    }
}

/// Why a shell could not be spawned.
pub(crate) struct SpawnFailure {
    /// `spawn <file> <CODE>`.
    pub message: String,
    /// Set when the sandbox runner itself could not start under this mode.
    pub runner_mode: Option<SandboxMode>,
}

/// Spawns the call's shell, confined when the call's policy says so. `live` mirrors its output
/// to the context's [`ShellContext::output`] tap (foreground calls only).
pub(crate) fn spawn_for(
    args: &BashArgs,
    ctx: &ShellContext,
    live: bool,
) -> Result<ShellProcess, SpawnFailure> {
    let cwd = resolve_workdir(args, ctx);
    let launch = ctx.confinement().and_then(|policy| policy.launch(&cwd));
    process::spawn_shell(
        &args.command,
        &cwd,
        &ctx.child_env(),
        launch.as_ref(),
        capture_config(ctx, "stdout"),
        capture_config(ctx, "stderr"),
        ctx.output.clone().filter(|_| live),
    )
    .map_err(|err| match (&launch, &ctx.sandbox) {
        // A missing workdir fails the same way with or without a runner.
        (Some(launch), Some(policy)) if cwd.is_dir() => SpawnFailure {
            message: process::spawn_error_message_for(&launch.program.to_string_lossy(), &err),
            runner_mode: Some(policy.mode),
        },
        _ => SpawnFailure {
            message: process::spawn_error_message(&err),
            runner_mode: None,
        },
    })
}

/// Runs one `bash` call.
pub async fn run(
    args: BashArgs,
    ctx: &ShellContext,
    cancel: CancellationToken,
) -> Result<BashOutput, ShellError> {
    run_in(args, ctx, cancel, None).await
}

/// A client terminal to run a foreground call in, and the call it shows on.
pub struct ClientTerminal {
    pub terminals: std::sync::Arc<dyn dsh_tools::ClientTerminals>,
    pub call_id: String,
}

/// [`run`], with the foreground command run in the client's terminal when one is given.
pub async fn run_in(
    args: BashArgs,
    ctx: &ShellContext,
    cancel: CancellationToken,
    terminal: Option<ClientTerminal>,
) -> Result<BashOutput, ShellError> {
    validate(&args, ctx)?;
    let escalated;
    let ctx = match (args.sandbox_permissions, &ctx.sandbox) {
        (Some(requested), Some(policy)) => {
            let justification = args.justification.as_deref().unwrap_or_default();
            let mode = escalation::approve_escalation(
                requested.into(),
                justification,
                policy,
                ctx.approval.as_ref(),
                &cancel,
            )
            .await?;
            let mut wider = ctx.clone();
            if let Some(policy) = wider.sandbox.as_mut() {
                policy.mode = mode;
            }
            escalated = wider;
            &escalated
        }
        _ => ctx,
    };
    if args.run_in_background == Some(true) {
        return background::start_bash_job(&args, ctx, &cancel)
            .map(|job_id| BashOutput::Background { job_id });
    }
    if cancel.is_cancelled() {
        return Err(ShellError::aborted());
    }
    let timeout_ms = args
        .timeout_ms
        .unwrap_or(ctx.config.timeout_ms as f64)
        .min(ctx.config.max_timeout_ms as f64);
    if let Some(terminal) = terminal {
        return crate::client_terminal::run(
            &args,
            ctx,
            terminal.terminals,
            &terminal.call_id,
            timeout_ms,
            &cancel,
        )
        .await;
    }
    match foreground(&args, ctx, &cancel, timeout_ms).await {
        // A daemon socket the sandbox masks vanished between the scan and the launch: the
        // runner could not place its mask. Not the command's fault: look again and retry once.
        Err(Foreground::RunnerFailed(line)) if sandbox::is_vanished_mask(&line) => {
            sandbox::forget_sockets();
            foreground(&args, ctx, &cancel, timeout_ms)
                .await
                .map_err(|failure| failure.into_error(ctx))
        }
        other => other.map_err(|failure| failure.into_error(ctx)),
    }
}

/// Why a foreground run produced no output.
enum Foreground {
    Error(ShellError),
    /// The sandbox runner failed before the command ran (its `bwrap: …` line).
    RunnerFailed(String),
}

impl Foreground {
    fn into_error(self, ctx: &ShellContext) -> ShellError {
        match self {
            Self::Error(error) => error,
            Self::RunnerFailed(line) => {
                let mode = ctx
                    .sandbox
                    .as_ref()
                    .map_or(SandboxMode::WorkspaceWrite, |policy| policy.mode);
                // Fail closed, never unconfined.
                sandbox::sandbox_unavailable(mode, Some(&line))
            }
        }
    }
}

impl From<ShellError> for Foreground {
    fn from(error: ShellError) -> Self {
        Self::Error(error)
    }
}

async fn foreground(
    args: &BashArgs,
    ctx: &ShellContext,
    cancel: &CancellationToken,
    timeout_ms: f64,
) -> Result<BashOutput, Foreground> {
    let mut proc = spawn_for(args, ctx, true).map_err(|failure| match failure.runner_mode {
        Some(mode) => {
            sandbox::sandbox_unavailable(mode, Some(&format!("Error: {}", failure.message)))
        }
        None => ShellError::plain(failure.message),
    })?;

    let deadline = tokio::time::sleep(Duration::from_secs_f64(timeout_ms / 1000.0));
    let mut timed_out = false;
    let mut aborted = false;
    let status = tokio::select! {
        status = proc.wait() => status,
        () = deadline => {
            timed_out = true;
            let grace = Duration::from_millis(ctx.config.grace_ms);
            tokio::select! {
                status = proc.terminate(grace) => status,
                () = cancel.cancelled() => { aborted = true; proc.kill_now().await }
            }
        }
        () = cancel.cancelled() => {
            aborted = true;
            proc.kill_now().await
        }
    };
    let stdout = proc.stdout.clone();
    let stderr = proc.stderr.clone();
    proc.finish(timed_out || aborted).await;
    if aborted {
        return Err(ShellError::aborted().into());
    }
    let status =
        status.map_err(|err| ShellError::plain(format!("failed to wait for bash: {err}")))?;
    let (exit_code, signal) = process::exit_parts(&status);
    let to_stream = |snap: crate::capture::StreamSnapshot| StreamText {
        text: snap.text,
        truncated: snap.truncated,
        spill_path: snap.spill_path,
        spill_missing: snap.spill_missing,
    };
    let stdout = to_stream(stdout.snapshot());
    let stderr = to_stream(stderr.snapshot());
    let sandbox = match &ctx.sandbox {
        None => None,
        Some(policy) => {
            let confined = policy.mode != SandboxMode::DangerFullAccess;
            if confined
                && !timed_out
                && let Some(line) = sandbox::runner_failure(exit_code, &stderr.text)
            {
                return Err(Foreground::RunnerFailed(line));
            }
            Some(SandboxReport {
                mode: policy.mode,
                denied: sandbox::detect_denial(&stderr.text, policy, &resolve_workdir(args, ctx)),
                enforcement: confined.then(|| "bwrap".to_owned()),
                runner_failed: None,
                limit: confined
                    .then(|| sandbox::limit_note(&stderr.text, policy))
                    .flatten(),
            })
        }
    };
    Ok(BashOutput::Foreground {
        exit_code,
        signal,
        timed_out,
        aborted,
        timeout_ms,
        stdout,
        stderr,
        sandbox,
    })
}

/// The model-facing text of a `bash` result, with the escalation hint after a denial.
pub fn render_text(output: &BashOutput) -> String {
    render_text_with(output, true)
}

/// The model-facing text; `escalation_hint` is whether escalation is advertised (approval
/// prompts enabled) and so whether a denial marker is followed by the hint line.
pub fn render_text_with(output: &BashOutput, escalation_hint: bool) -> String {
    let BashOutput::Foreground {
        exit_code,
        signal,
        timed_out,
        timeout_ms,
        stdout,
        stderr,
        sandbox,
        ..
    } = output
    else {
        let BashOutput::Background { job_id } = output else {
            return String::new();
        };
        return format!("started background job {job_id}");
    };
    let stream = |s: &StreamText| {
        if s.truncated {
            let path = full_output(s.spill_path.as_deref(), s.spill_missing.as_deref());
            format!("{}\n[output truncated; full output: {path}]", s.text)
        } else {
            s.text.clone()
        }
    };
    let mut body = stream(stdout);
    let err_text = stream(stderr);
    if !err_text.is_empty() {
        if !body.is_empty() && !body.ends_with('\n') {
            body.push('\n');
        }
        body.push_str("[stderr]\n");
        body.push_str(&err_text);
    }
    if body.is_empty() {
        body.push_str("(no output)");
    }
    let mut markers = Vec::new();
    if let Some(report) = sandbox
        && report.denied
    {
        markers.push(sandbox::denial_marker(report.mode));
        if escalation_hint && report.mode != SandboxMode::DangerFullAccess {
            markers.push(sandbox::ESCALATION_HINT.to_owned());
        }
    }
    if let Some(note) = sandbox.as_ref().and_then(|report| report.limit.as_ref()) {
        markers.push(note.clone());
    }
    if *timed_out {
        markers.push(format!("[timed out after {}ms]", js_number(*timeout_ms)));
    }
    match (signal, exit_code) {
        (Some(sig), _) => markers.push(format!("[killed by signal: {sig}]")),
        (None, Some(code)) if *code != 0 => markers.push(format!("[exit code: {code}]")),
        _ => {}
    }
    if !markers.is_empty() {
        if !body.ends_with('\n') {
            body.push('\n');
        }
        body.push_str(&markers.join("\n"));
    }
    body
}

/// `render(args, value)`: one text block.
pub fn render(_args: &BashArgs, output: &BashOutput) -> Vec<ContentBlock> {
    vec![ContentBlock::text(render_text(output))]
}

/// `render` for a composition that states whether escalation is advertised.
pub fn render_with(
    _args: &BashArgs,
    output: &BashOutput,
    escalation_hint: bool,
) -> Vec<ContentBlock> {
    vec![ContentBlock::text(render_text_with(
        output,
        escalation_hint,
    ))]
}

/// Where the full output is: the spill path, or `(unavailable: <why>)`.
pub(crate) fn full_output(path: Option<&str>, missing: Option<&str>) -> String {
    match (path, missing) {
        (Some(path), _) => path.to_owned(),
        (None, Some(why)) => format!("(unavailable: {why})"),
        (None, None) => "(unavailable)".to_owned(),
    }
}

/// The pending card.
pub fn present_call(args: &BashArgs) -> ToolCallView {
    if args.run_in_background == Some(true) {
        return ToolCallView::Generic {
            title: args.command.clone(),
            kind: Some(ToolCallKind::Execute),
            raw_input: Some(Value::String(args.command.clone())),
            content: Some(vec![ContentBlock::text(args.description.clone())]),
            locations: None,
        };
    }
    ToolCallView::Terminal {
        title: args.command.clone(),
        description: Some(args.description.clone()),
        cwd: args.workdir.clone(),
    }
}

/// The completed card, from the durable result only (replay-safe).
pub fn present_result(args: &BashArgs, content: &[ContentBlock], is_error: bool) -> ToolResultView {
    let text = dsh_protocol::text_of(content);
    if is_error || args.run_in_background == Some(true) {
        return console_card(&text);
    }
    let (output, exit_code, signal) = parse_terminal_marker(&text);
    ToolResultView::Terminal {
        title: None,
        output: Some(output),
        exit_code,
        signal,
    }
}

/// A generic result card showing `text` as a console block (background acknowledgements and
/// error results).
fn console_card(text: &str) -> ToolResultView {
    let body = text.trim_end_matches('\n');
    ToolResultView::Generic {
        title: None,
        content: Some(vec![ContentBlock::text(format!("```console\n{body}\n```"))]),
    }
}

/// Splits a trailing `\n[killed by signal: X]` or `\n[exit code: N]` off the result text.
pub fn parse_terminal_marker(text: &str) -> (String, Option<i64>, Option<String>) {
    if let Some(line_start) = text.rfind('\n') {
        let last = &text[line_start + 1..];
        let head = text[..line_start].to_owned();
        if let Some(sig) = last
            .strip_prefix("[killed by signal: ")
            .and_then(|s| s.strip_suffix(']'))
            && !sig.is_empty()
            && !sig.contains(['\n', ']'])
        {
            return (head, None, Some(sig.to_owned()));
        }
        if let Some(code) = last
            .strip_prefix("[exit code: ")
            .and_then(|s| s.strip_suffix(']'))
            .and_then(|s| s.parse::<i64>().ok())
        {
            return (head, Some(code), None);
        }
    }
    (text.to_owned(), Some(0), None)
}

#[cfg(test)]
#[path = "bash_tests.rs"]
mod tests;
