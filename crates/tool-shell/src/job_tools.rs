//! The job-control tools `job_output`, `job_list`, `job_kill` (§2.6) over [`JobsRuntime`].

use std::sync::Arc;
use std::time::Duration;

use dsh_protocol::ContentBlock;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::error::ShellError;
use crate::error::js_number;
use crate::jobs::JobsRuntime;
use crate::jobs::KillOutcome;
use crate::jobs::OwnerId;
use crate::jobs::PublicJob;
use crate::texts;

pub const JOB_OUTPUT_TOOL_NAME: &str = "job_output";
pub const JOB_LIST_TOOL_NAME: &str = "job_list";
pub const JOB_KILL_TOOL_NAME: &str = "job_kill";

/// `dsh-tool-jobs` settings.
#[derive(Debug, Clone)]
pub struct JobToolsConfig {
    pub wait_timeout_ms: u64,
    pub max_wait_timeout_ms: u64,
}

impl Default for JobToolsConfig {
    fn default() -> Self {
        Self {
            wait_timeout_ms: 30_000,
            max_wait_timeout_ms: 600_000,
        }
    }
}

/// What the job tools run against: the runtime and the calling agent.
#[derive(Clone)]
pub struct JobsContext {
    pub runtime: Arc<JobsRuntime>,
    pub caller: Option<OwnerId>,
    pub config: JobToolsConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobOutputArgs {
    pub job_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobOutputOutput {
    pub text: String,
    pub job: PublicJob,
    /// The producer's cap on the whole result, applied by `render`.
    #[serde(skip)]
    pub output_limit_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobListArgs {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobListOutput {
    pub jobs: Vec<PublicJob>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobKillArgs {
    pub job_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobKillOutput {
    pub outcome: KillOutcome,
    pub job: PublicJob,
}

fn check_job_id(job_id: &str) -> Result<(), ShellError> {
    if job_id.is_empty() {
        let got = serde_json::to_string(job_id).unwrap_or_default();
        return Err(ShellError::plain(format!(
            "invalid job_id: expected a non-empty string, got {got}"
        )));
    }
    Ok(())
}

/// `job_output`: optionally waits, then consumes the job's new output.
pub async fn job_output(
    args: JobOutputArgs,
    ctx: &JobsContext,
    cancel: CancellationToken,
) -> Result<JobOutputOutput, ShellError> {
    check_job_id(&args.job_id)?;
    let caller = ctx.caller.as_ref();
    if args.wait == Some(true) {
        if let Some(t) = args.timeout_ms
            && (t.is_nan() || t <= 0.0)
        {
            return Err(ShellError::plain(format!(
                "invalid wait timeout: expected a positive number of milliseconds, got {}",
                js_number(t)
            )));
        }
        let timeout = args
            .timeout_ms
            .unwrap_or(ctx.config.wait_timeout_ms as f64)
            .min(ctx.config.max_wait_timeout_ms as f64);
        ctx.runtime
            .wait(
                caller,
                &args.job_id,
                Duration::from_secs_f64(timeout / 1000.0),
                &cancel,
            )
            .await?;
    }
    let read = ctx.runtime.read(caller, &args.job_id)?;
    Ok(JobOutputOutput {
        text: read.text,
        job: read.job,
        output_limit_bytes: read.output_limit_bytes,
    })
}

/// The text of a `job_output` result.
pub fn render_job_output_text(output: &JobOutputOutput) -> String {
    let body = if output.text.is_empty() {
        "(no new output)"
    } else {
        output.text.as_str()
    };
    let sep = if body.ends_with('\n') { "" } else { "\n" };
    let status = output.job.status_line();
    let full = format!("{body}{sep}{status}");
    let Some(limit) = output
        .output_limit_bytes
        .and_then(|l| usize::try_from(l).ok())
    else {
        return full;
    };
    if full.len() <= limit {
        return full;
    }
    // Keep the tail of the output, then the marker and the status line.
    let suffix = format!("\n[output truncated]\n{status}");
    let room = limit.saturating_sub(suffix.len());
    let mut start = body.len().saturating_sub(room);
    while start < body.len() && !body.is_char_boundary(start) {
        start += 1;
    }
    format!("{}{suffix}", &body[start..])
}

pub fn render_job_output(_args: &JobOutputArgs, output: &JobOutputOutput) -> Vec<ContentBlock> {
    vec![ContentBlock::text(render_job_output_text(output))]
}

/// `job_list`: the caller's and unowned jobs.
pub async fn job_list(
    _args: JobListArgs,
    ctx: &JobsContext,
    _cancel: CancellationToken,
) -> Result<JobListOutput, ShellError> {
    Ok(JobListOutput {
        jobs: ctx.runtime.list(ctx.caller.as_ref()),
    })
}

pub fn render_job_list_text(output: &JobListOutput) -> String {
    if output.jobs.is_empty() {
        return "(no background jobs)".to_owned();
    }
    output
        .jobs
        .iter()
        .map(|j| format!("{} [{}] {} — {}", j.id, j.kind, j.status.as_str(), j.label))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn render_job_list(_args: &JobListArgs, output: &JobListOutput) -> Vec<ContentBlock> {
    vec![ContentBlock::text(render_job_list_text(output))]
}

/// `job_kill`: requests cancellation; returns immediately.
pub async fn job_kill(
    args: JobKillArgs,
    ctx: &JobsContext,
    _cancel: CancellationToken,
) -> Result<JobKillOutput, ShellError> {
    check_job_id(&args.job_id)?;
    let (outcome, job) =
        ctx.runtime
            .kill(ctx.caller.as_ref(), &args.job_id, args.reason.as_deref())?;
    Ok(JobKillOutput { outcome, job })
}

pub fn render_job_kill_text(output: &JobKillOutput) -> String {
    match output.outcome {
        KillOutcome::CancellationRequested => {
            format!("requested cancellation of job {}", output.job.id)
        }
        KillOutcome::AlreadyFinished => {
            format!(
                "job {} had already finished {}",
                output.job.id,
                output.job.status_line()
            )
        }
    }
}

pub fn render_job_kill(_args: &JobKillArgs, output: &JobKillOutput) -> Vec<ContentBlock> {
    vec![ContentBlock::text(render_job_kill_text(output))]
}

pub fn present_job_output_call(args: &JobOutputArgs) -> ToolCallView {
    ToolCallView::Generic {
        title: format!("Read output from background job {}", args.job_id),
        kind: Some(ToolCallKind::Read),
        raw_input: Some(Value::String(args.job_id.clone())),
        content: None,
        locations: None,
    }
}

pub fn present_job_list_call(_args: &JobListArgs) -> ToolCallView {
    ToolCallView::Generic {
        title: "List background jobs".into(),
        kind: Some(ToolCallKind::Read),
        raw_input: None,
        content: None,
        locations: None,
    }
}

pub fn present_job_kill_call(args: &JobKillArgs) -> ToolCallView {
    ToolCallView::Generic {
        title: format!("Kill background job {}", args.job_id),
        kind: Some(ToolCallKind::Execute),
        raw_input: None,
        content: None,
        locations: None,
    }
}

/// Parameter schemas: names, types, order and required-ness as upstream; the descriptions are ours.
pub fn job_output_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "job_id": {"type": "string", "description": texts::JOB_OUTPUT_PARAM_JOB_ID},
            "wait": {"type": "boolean", "description": texts::JOB_OUTPUT_PARAM_WAIT},
            "timeout_ms": {"type": "number", "description": texts::JOB_OUTPUT_PARAM_TIMEOUT_MS},
        },
        "required": ["job_id"],
    })
}

pub fn job_list_parameters() -> Value {
    json!({"type": "object", "properties": {}})
}

pub fn job_kill_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "job_id": {"type": "string", "description": texts::JOB_KILL_PARAM_JOB_ID},
            "reason": {"type": "string", "description": texts::JOB_KILL_PARAM_REASON},
        },
        "required": ["job_id"],
    })
}
