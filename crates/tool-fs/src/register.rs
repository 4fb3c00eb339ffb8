//! Glue to the `dsh-tools` runtime: one `ToolDefinition` per file tool (exact upstream
//! schemas, render, meta, cards, scheduling), the per-call context (nested flag, approval
//! routed through the calling agent's `ApprovalService`), and the direct-call spill of
//! over-cap `glob`/`grep` results as a `tools/post-execute` listener.

use std::future::Future;
use std::sync::Arc;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;
use dsh_tools::DefineError;
use dsh_tools::PostDecision;
use dsh_tools::Tool;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::cards::ResultInput;
use crate::context::ApprovalFuture;
use crate::context::EscalationApprover;
use crate::context::FsContext;
use crate::edit;
use crate::error::FsError;
use crate::glob;
use crate::grep;
use crate::policy;
use crate::read;
use crate::read_image;
use crate::schema;
use crate::str_replace_editor;
use crate::write;

/// `glob`/`grep` deadline (`timeoutMs`), enforced by the timeout wrapper.
const SEARCH_TIMEOUT_MS: u64 = 30_000;

/// Why the tools could not be set up (kept as a name for callers).
pub type FsRegisterError = dsh_tools::SetupError;

fn tool_error(err: FsError) -> ToolError {
    match (err.class_name(), err.code) {
        (Some(name), Some(code)) => ToolError::coded(name, code, err.message),
        _ => ToolError::new(err.message),
    }
}

fn typed<A: DeserializeOwned>(args: &Value) -> Result<A, ToolError> {
    serde_json::from_value(args.clone()).map_err(|e| ToolError::invalid_args(&[e.to_string()]))
}

fn result_input(view: &dsh_tools::ResultView) -> ResultInput<'_> {
    ResultInput {
        content: &view.content,
        is_error: view.is_error,
        meta: view.meta.as_ref(),
    }
}

/// Routes an escalation to the calling agent's approval service (subject "operation").
struct RunApprover {
    agent: Option<Arc<dyn dsh_tools::AgentHandle>>,
    call_id: String,
    signal: dsh_tools::CancellationToken,
}

impl EscalationApprover for RunApprover {
    fn approve<'a>(
        &'a self,
        tool_name: &'a str,
        _call_id: Option<&'a str>,
        reason: &'a str,
    ) -> ApprovalFuture<'a> {
        Box::pin(async move {
            let mode = reason
                .strip_prefix("escalate sandbox to ")
                .and_then(|r| r.split(':').next())
                .unwrap_or("");
            let Some(agent) = self.agent.clone() else {
                return Err(FsError::plain(format!(
                    "sandbox escalation to \"{mode}\" requires approval, but the call has no agent to route it through"
                )));
            };
            let Some(service) = agent.scope().service::<dyn ApprovalService>() else {
                return Err(FsError::plain(format!(
                    "sandbox escalation to \"{mode}\" requires approval, but no approval service is composed"
                )));
            };
            let request = ApprovalRequest {
                agent,
                tool_name: tool_name.to_owned(),
                call_id: self.call_id.clone(),
                reason: Some(reason.to_owned()),
                signal: self.signal.clone(),
            };
            Ok(match service.request(request).await {
                dsh_tools::ApprovalOutcome::AllowedOnce => policy::ApprovalOutcome::AllowedOnce,
                dsh_tools::ApprovalOutcome::Rejected => policy::ApprovalOutcome::Rejected,
                dsh_tools::ApprovalOutcome::Cancelled => policy::ApprovalOutcome::Cancelled,
                dsh_tools::ApprovalOutcome::Unavailable => policy::ApprovalOutcome::Unavailable,
                dsh_tools::ApprovalOutcome::RefusedByPolicy(by) => {
                    policy::ApprovalOutcome::RefusedByPolicy(by)
                }
            })
        })
    }
}

/// The session context specialised to one call.
fn call_context(base: &FsContext, run: &ToolRun) -> FsContext {
    let mut ctx = base.clone();
    ctx.call_id = Some(run.call_id().to_owned());
    ctx.nested = run.parent().is_some();
    ctx.editor = dsh_tools::editor_files(run);
    ctx.approver = Some(Arc::new(RunApprover {
        agent: run.agent().cloned(),
        call_id: run.call_id().to_owned(),
        signal: run.signal().clone(),
    }));
    ctx
}

/// Wraps a typed tool body as a runtime body.
fn body<A, O, F, Fut>(
    ctx: &Arc<FsContext>,
    run_tool: F,
) -> impl Fn(Value, ToolRun) -> std::pin::Pin<Box<dyn Future<Output = Result<O, ToolError>> + Send>>
+ Send
+ Sync
+ 'static
where
    A: DeserializeOwned + Send + 'static,
    O: Send + 'static,
    F: Fn(A, FsContext, dsh_tools::CancellationToken) -> Fut + Send + Sync + Copy + 'static,
    Fut: Future<Output = Result<O, FsError>> + Send + 'static,
{
    let ctx = ctx.clone();
    move |args: Value, run: ToolRun| {
        let call_ctx = call_context(&ctx, &run);
        let signal = run.signal().clone();
        Box::pin(async move {
            let args: A = typed(&args)?;
            run_tool(args, call_ctx, signal).await.map_err(tool_error)
        })
    }
}

macro_rules! fs_tool {
    ($ctx:expr, $module:ident, $args:ty, $out:ty, $desc:expr, $params:expr, $render:expr) => {{
        let render = $render;
        Tool::builder($module::NAME)
            .description($desc)
            .validated_parameters($params)
            .output::<$out>(move |args: &Value, out: &$out| Ok(render(&typed::<$args>(args)?, out)))
            .run(body($ctx, |a: $args, c: FsContext, s| async move {
                $module::run(&a, &c, s).await
            }))
    }};
}

/// Every file tool definition for one session context. `read_image` is included only when
/// `ctx.images` is mounted; `write`/`edit` advertise escalation when the policy does.
pub fn fs_tool_definitions(ctx: FsContext) -> Result<Vec<ToolDefinition>, DefineError> {
    let ctx = Arc::new(ctx);
    let escalation = ctx.policy.escalation_advertised;
    let read_limit = ctx.limits.read_limit;
    let glob_config = glob::GlobConfig::from_limits(&ctx.limits);
    let grep_config = grep::GrepConfig {
        max_matches: ctx.limits.grep_max_matches,
    };
    let meta_max = ctx.limits.search_meta_max_bytes;
    let mut out = Vec::new();

    out.push(
        fs_tool!(
            &ctx,
            read,
            read::ReadArgs,
            read::ReadOutput,
            schema::READ_DESCRIPTION,
            schema::read_parameters(),
            move |a: &read::ReadArgs, o: &read::ReadOutput| read::render_with_limit(
                a, o, read_limit
            )
        )
        .presentation_meta(|args, value| Ok(read::presentation_meta(&typed(args)?, &typed(value)?)))
        .present_call(|args: &Value| Some(read::present_call(&typed(args).ok()?)))
        .present_result(|args: &Value, view| {
            read::present_result(&typed(args).ok()?, result_input(view))
        })
        .concurrency_safe(|_| true)
        .build()?,
    );
    if ctx.images.is_some() {
        out.push(
            fs_tool!(
                &ctx,
                read_image,
                read_image::ReadImageArgs,
                read_image::ReadImageOutput,
                schema::READ_IMAGE_DESCRIPTION,
                schema::read_image_parameters(),
                read_image::render
            )
            .present_call(|args: &Value| Some(read_image::present_call(&typed(args).ok()?)))
            .concurrency_safe(|_| true)
            .build()?,
        );
    }
    out.push(
        fs_tool!(
            &ctx,
            write,
            write::WriteArgs,
            write::WriteOutput,
            schema::WRITE_DESCRIPTION,
            schema::write_parameters(escalation),
            write::render
        )
        .presentation_meta(|args, value| {
            Ok(write::presentation_meta(&typed(args)?, &typed(value)?))
        })
        .present_call(|args: &Value| Some(write::present_call(&typed(args).ok()?)))
        .present_result(|args: &Value, view| {
            write::present_result(&typed(args).ok()?, result_input(view))
        })
        .build()?,
    );
    out.push(
        fs_tool!(
            &ctx,
            edit,
            edit::EditArgs,
            edit::EditOutput,
            schema::EDIT_DESCRIPTION,
            schema::edit_parameters(escalation),
            edit::render
        )
        .presentation_meta(|args, value| Ok(edit::presentation_meta(&typed(args)?, &typed(value)?)))
        .present_call(|args: &Value| Some(edit::present_call(&typed(args).ok()?)))
        .present_result(|args: &Value, view| {
            edit::present_result(&typed(args).ok()?, result_input(view))
        })
        .build()?,
    );
    out.push(
        fs_tool!(
            &ctx,
            glob,
            glob::GlobArgs,
            glob::GlobOutput,
            glob::description(glob_config.max_results, glob_config.sampling),
            schema::glob_parameters(),
            move |a: &glob::GlobArgs, o: &glob::GlobOutput| glob::render_with(
                &glob_config,
                a,
                o,
                None
            )
        )
        .presentation_meta(move |_, value| {
            Ok(glob::presentation_meta_with(
                &glob_config,
                &typed(value)?,
                meta_max,
            ))
        })
        .present_call(|args: &Value| Some(glob::present_call(&typed(args).ok()?)))
        .present_result(|args: &Value, view| {
            glob::present_result(&typed(args).ok()?, result_input(view))
        })
        .timeout_ms(SEARCH_TIMEOUT_MS)
        .build()?,
    );
    out.push(
        fs_tool!(
            &ctx,
            grep,
            grep::GrepArgs,
            grep::GrepOutput,
            schema::grep_description(grep_config.max_matches),
            schema::grep_parameters(),
            move |a: &grep::GrepArgs, o: &grep::GrepOutput| grep::render_with(
                &grep_config,
                a,
                o,
                None
            )
        )
        .presentation_meta(move |_, value| {
            Ok(grep::presentation_meta_with(
                &grep_config,
                &typed(value)?,
                meta_max,
            ))
        })
        .present_call(|args: &Value| Some(grep::present_call(&typed(args).ok()?)))
        .present_result(|args: &Value, view| {
            grep::present_result(&typed(args).ok()?, result_input(view))
        })
        .timeout_ms(SEARCH_TIMEOUT_MS)
        .build()?,
    );
    Ok(out)
}

/// The `str_replace_editor` alternative editor (not part of the default set).
pub fn str_replace_editor_definition(ctx: FsContext) -> Result<ToolDefinition, DefineError> {
    let ctx = Arc::new(ctx);
    fs_tool!(
        &ctx,
        str_replace_editor,
        str_replace_editor::StrReplaceEditorArgs,
        str_replace_editor::StrReplaceEditorOutput,
        schema::STR_REPLACE_EDITOR_DESCRIPTION,
        schema::str_replace_editor_parameters(),
        str_replace_editor::render
    )
    .present_call(|args: &Value| Some(str_replace_editor::present_call(&typed(args).ok()?)))
    .build()
}

/// Over-cap `glob`/`grep` results of direct calls: save the full list and show its locator.
type PostNext = dsh_kernel::Next<dsh_tools::PostInput, Result<PostDecision, ToolError>>;
type PostFuture = futures::future::BoxFuture<'static, Result<PostDecision, ToolError>>;

fn spill_listener(
    ctx: Arc<FsContext>,
) -> impl Fn(dsh_tools::PostInput, PostNext) -> PostFuture + Send + Sync + 'static {
    move |input, next| {
        let ctx = ctx.clone();
        Box::pin(async move {
            let exec = input.exec.clone();
            let result = input.result.clone();
            let decision = next.run(input).await?;
            let untouched = matches!(
                &decision,
                PostDecision::Accept {
                    content: None,
                    value: None,
                    ..
                }
            );
            if !untouched || result.is_error || exec.parent().is_some() {
                return Ok(decision);
            }
            let (Some(args), Some(value)) = (exec.arguments(), result.value.as_ref()) else {
                return Ok(decision);
            };
            // Spill directories are keyed by session: the calling agent's, else the configured one.
            let mut ctx = (*ctx).clone();
            if let Some(agent) = exec.agent() {
                ctx.spill.session_id = Some(agent.id().to_owned());
            }
            let content: Option<Vec<ContentBlock>> = match exec.name() {
                glob::NAME => match (
                    typed::<glob::GlobArgs>(args),
                    typed::<glob::GlobOutput>(value),
                ) {
                    (Ok(a), Ok(o)) => glob::spill_content(&a, &o, &ctx),
                    _ => None,
                },
                grep::NAME => match (
                    typed::<grep::GrepArgs>(args),
                    typed::<grep::GrepOutput>(value),
                ) {
                    (Ok(a), Ok(o)) => grep::spill_content(&a, &o, &ctx),
                    _ => None,
                },
                _ => None,
            };
            Ok(match (content, decision) {
                (
                    Some(content),
                    PostDecision::Accept {
                        additional_contexts,
                        ..
                    },
                ) => PostDecision::Accept {
                    content: Some(content),
                    value: None,
                    additional_contexts,
                },
                (_, decision) => decision,
            })
        })
    }
}

/// Registers the file tools in `scope`'s layer and the glob/grep spill listener.
pub fn register_fs_tools(
    registry: &ToolRegistry,
    scope: &Scope,
    ctx: FsContext,
) -> Result<Vec<Disposer>, FsRegisterError> {
    let mut disposers = Vec::new();
    for definition in fs_tool_definitions(ctx.clone())? {
        disposers.push(registry.register(scope, definition)?);
    }
    disposers.push(
        registry
            .post_execute()
            .register(scope, spill_listener(Arc::new(ctx))),
    );
    Ok(disposers)
}

#[cfg(test)]
#[path = "register_tests.rs"]
mod tests;
