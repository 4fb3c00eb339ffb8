//! Glue into `dsh-tools`: the four shell tools as [`ToolDefinition`]s over the plain functions
//! of this crate. Per-session facts (cwd, session id) come from a resolver the composition
//! supplies; the calling agent's id is the jobs owner.

use std::sync::Arc;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_tools::ApprovalService;
use dsh_tools::DefineError;
use dsh_tools::ResultView;
use dsh_tools::Tool;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use serde_json::Value;

use crate::bash;
use crate::bash::BashArgs;
use crate::bash::BashOutput;
use crate::capture::OutputTap;
use crate::context::ShellContext;
use crate::escalation::ApprovalRoute;
use crate::job_tools;
use crate::job_tools::JobKillArgs;
use crate::job_tools::JobKillOutput;
use crate::job_tools::JobListArgs;
use crate::job_tools::JobListOutput;
use crate::job_tools::JobOutputArgs;
use crate::job_tools::JobOutputOutput;
use crate::job_tools::JobToolsConfig;
use crate::job_tools::JobsContext;
use crate::jobs::JobsRuntime;
use crate::jobs::OwnerId;
use crate::sandbox::ApprovalPolicy;
use crate::sandbox::SandboxConfig;
use crate::texts;

/// Maps a call to the session context it runs in.
pub type ContextResolver = Arc<dyn Fn(&ToolRun) -> Result<ShellContext, ToolError> + Send + Sync>;

/// What the composition provides to register the shell tools.
#[derive(Clone)]
pub struct ShellTools {
    pub resolve: ContextResolver,
    pub jobs: Arc<JobsRuntime>,
    pub job_config: JobToolsConfig,
    /// `enableRunInBackground`.
    pub run_in_background: bool,
    /// `Some` composes the confining executor: `bash` advertises `sandbox_permissions`, and
    /// each call runs under this config's standing mode rooted at the session cwd (unless the
    /// resolver already set [`ShellContext::sandbox`]).
    pub sandbox: Option<SandboxConfig>,
}

/// Why the tools could not be set up (kept as a name for callers).
pub type ShellRegisterError = dsh_tools::SetupError;

fn owner_of(run: &ToolRun) -> Option<OwnerId> {
    run.agent().map(|agent| OwnerId::new(agent.id()))
}

/// The approval service visible from the calling agent's scope, and the agent itself.
fn approval_route(run: &ToolRun) -> ApprovalRoute {
    let scope = run
        .execution()
        .subject()
        .or_else(|| run.agent().map(|agent| agent.scope()));
    ApprovalRoute {
        service: scope.and_then(|scope| scope.service::<dyn ApprovalService>()),
        agent: run.agent().cloned(),
        call_id: run.call_id().to_owned(),
    }
}

/// The four definitions: `bash`, `job_output`, `job_list`, `job_kill`.
pub fn shell_tool_definitions(tools: &ShellTools) -> Result<Vec<ToolDefinition>, DefineError> {
    Ok(vec![
        bash_definition(tools)?,
        job_output_definition(tools)?,
        job_list_definition(tools)?,
        job_kill_definition(tools)?,
    ])
}

/// Registers the four tools in `scope`'s layer; dropping or disposing the returned disposers
/// unregisters them.
pub fn register_shell_tools(
    registry: &ToolRegistry,
    scope: &Scope,
    tools: &ShellTools,
) -> Result<Vec<Disposer>, ShellRegisterError> {
    let mut disposers = Vec::new();
    for definition in shell_tool_definitions(tools)? {
        disposers.push(registry.register(scope, definition)?);
    }
    Ok(disposers)
}

fn bash_definition(tools: &ShellTools) -> Result<ToolDefinition, DefineError> {
    let resolve = tools.resolve.clone();
    let jobs = tools.jobs.clone();
    let background = tools.run_in_background;
    let sandbox = tools.sandbox.clone();
    let confining = sandbox.is_some();
    let hint = sandbox
        .as_ref()
        .is_some_and(|config| config.approval == ApprovalPolicy::Ask);
    Tool::builder(bash::BASH_TOOL_NAME)
        .description(bash::bash_description(background, confining))
        .validated_parameters(bash::bash_parameters(background, confining))
        .author_output(
            &serde_json::json!({"type": "json"}),
            move |args: &Value, value: &Value| {
                let args: BashArgs = serde_json::from_value(args.clone())
                    .map_err(|e| ToolError::new(e.to_string()))?;
                let value: BashOutput = serde_json::from_value(value.clone())
                    .map_err(|e| ToolError::new(e.to_string()))?;
                Ok(bash::render_with(&args, &value, hint))
            },
        )
        .present_call(|args: &Value| {
            let args: BashArgs = serde_json::from_value(args.clone()).ok()?;
            Some(bash::present_call(&args))
        })
        .present_result(|args: &Value, result: &ResultView| {
            let args: BashArgs = serde_json::from_value(args.clone()).ok()?;
            Some(bash::present_result(
                &args,
                &result.content,
                result.is_error,
            ))
        })
        .run(move |args: Value, run: ToolRun| {
            let resolved = resolve(&run);
            let jobs = jobs.clone();
            let sandbox = sandbox.clone();
            let route = approval_route(&run);
            let terminal =
                dsh_tools::client_terminals(&run).map(|terminals| crate::bash::ClientTerminal {
                    terminals,
                    call_id: run.call_id().to_owned(),
                });
            let tap = dsh_tools::output_sink(&run).map(|sink| OutputTap {
                sink,
                call_id: Arc::from(run.call_id()),
            });
            async move {
                let args: BashArgs = serde_json::from_value(args)
                    .map_err(|e| ToolError::invalid_args(&[e.to_string()]))?;
                let mut ctx = resolved?;
                ctx.config.enable_run_in_background = background;
                if ctx.owner.is_none() {
                    ctx.owner = owner_of(&run);
                }
                if ctx.jobs.is_none() {
                    ctx.jobs = Some(jobs);
                }
                if ctx.sandbox.is_none()
                    && let Some(config) = &sandbox
                {
                    ctx.sandbox = Some(config.policy_for(&ctx.cwd));
                }
                if ctx.approval.is_none() {
                    ctx.approval = Some(route);
                }
                if ctx.output.is_none() {
                    ctx.output = tap;
                }
                let output = bash::run_in(args, &ctx, run.signal().clone(), terminal).await?;
                Ok(output)
            }
        })
        .build()
}

fn jobs_context(tools: &ShellTools, run: &ToolRun) -> JobsContext {
    JobsContext {
        runtime: tools.jobs.clone(),
        caller: owner_of(run),
        config: tools.job_config.clone(),
    }
}

fn job_output_definition(tools: &ShellTools) -> Result<ToolDefinition, DefineError> {
    let shared = tools.clone();
    Tool::builder(job_tools::JOB_OUTPUT_TOOL_NAME)
        .description(texts::JOB_OUTPUT_DESCRIPTION)
        .validated_parameters(job_tools::job_output_parameters())
        .author_output(
            &serde_json::json!({"type": "json"}),
            |_args: &Value, value: &Value| {
                let text = value
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let job = serde_json::from_value(value.get("job").cloned().unwrap_or_default())
                    .map_err(|e| ToolError::new(e.to_string()))?;
                let output_limit_bytes = value.get("outputLimitBytes").and_then(Value::as_u64);
                let output = JobOutputOutput {
                    text,
                    job,
                    output_limit_bytes,
                };
                Ok(vec![dsh_protocol::ContentBlock::text(
                    job_tools::render_job_output_text(&output),
                )])
            },
        )
        .present_call(|args: &Value| {
            let args: JobOutputArgs = serde_json::from_value(args.clone()).ok()?;
            Some(job_tools::present_job_output_call(&args))
        })
        .run(move |args: Value, run: ToolRun| {
            let ctx = jobs_context(&shared, &run);
            async move {
                let args: JobOutputArgs = serde_json::from_value(args)
                    .map_err(|e| ToolError::invalid_args(&[e.to_string()]))?;
                let output = job_tools::job_output(args, &ctx, run.signal().clone()).await?;
                // The canonical value is `{text, job}`; the limit rides along for `render`.
                let mut value =
                    serde_json::to_value(&output).map_err(|e| ToolError::new(e.to_string()))?;
                if let (Some(limit), Some(map)) = (output.output_limit_bytes, value.as_object_mut())
                {
                    map.insert("outputLimitBytes".into(), limit.into());
                }
                Ok(value)
            }
        })
        .build()
}

fn job_list_definition(tools: &ShellTools) -> Result<ToolDefinition, DefineError> {
    let shared = tools.clone();
    Tool::builder(job_tools::JOB_LIST_TOOL_NAME)
        .description(texts::JOB_LIST_DESCRIPTION)
        .validated_parameters(job_tools::job_list_parameters())
        .author_output(&serde_json::json!({"type": "json"}), |_args: &Value, value: &Value| {
            let output: JobListOutput = serde_json::from_value(value.clone()).map_err(|e| ToolError::new(e.to_string()))?;
            Ok(vec![dsh_protocol::ContentBlock::text(job_tools::render_job_list_text(&output))])
        })
        .present_call(|_args: &Value| Some(job_tools::present_job_list_call(&JobListArgs {})))
        .run(move |_args: Value, run: ToolRun| {
            let ctx = jobs_context(&shared, &run);
            async move { Ok(job_tools::job_list(JobListArgs {}, &ctx, run.signal().clone()).await?) }
        })
        .build()
}

fn job_kill_definition(tools: &ShellTools) -> Result<ToolDefinition, DefineError> {
    let shared = tools.clone();
    Tool::builder(job_tools::JOB_KILL_TOOL_NAME)
        .description(texts::JOB_KILL_DESCRIPTION)
        .validated_parameters(job_tools::job_kill_parameters())
        .author_output(
            &serde_json::json!({"type": "json"}),
            |_args: &Value, value: &Value| {
                let output: JobKillOutput = serde_json::from_value(value.clone())
                    .map_err(|e| ToolError::new(e.to_string()))?;
                Ok(vec![dsh_protocol::ContentBlock::text(
                    job_tools::render_job_kill_text(&output),
                )])
            },
        )
        .present_call(|args: &Value| {
            let args: JobKillArgs = serde_json::from_value(args.clone()).ok()?;
            Some(job_tools::present_job_kill_call(&args))
        })
        .run(move |args: Value, run: ToolRun| {
            let ctx = jobs_context(&shared, &run);
            async move {
                let args: JobKillArgs = serde_json::from_value(args)
                    .map_err(|e| ToolError::invalid_args(&[e.to_string()]))?;
                Ok(job_tools::job_kill(args, &ctx, run.signal().clone()).await?)
            }
        })
        .build()
}
