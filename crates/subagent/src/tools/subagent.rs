//! `subagent`, `subagent_fork`, … (§2.1): one tool instance binds one provider to one tool
//! name, mounted while its provider is registered.

use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_agent::prompt::Section;
use dsh_agent::prompt::Slot;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::ContentBlock;
use dsh_tool_shell::JobsRuntime;
use dsh_tool_shell::OwnerId;
use dsh_tool_shell::jobs::JobError;
use dsh_tool_shell::jobs::JobOutcome;
use dsh_tool_shell::jobs::JobProducer;
use dsh_tool_shell::jobs::JobRun;
use dsh_tool_shell::jobs::JobSpec;
use dsh_tool_shell::jobs::JobStatus;
use dsh_tools::Tool;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::continuation::ContinuableStart;
use crate::descriptor::ToolFilterSpec;
use crate::error::MountError;
use crate::error::SubagentError;
use crate::output::StopReason;
use crate::output::output_text;
use crate::provider::AgentOptions;
use crate::provider::StartRequest;
use crate::provider::SubagentProvider;
use crate::provider::SubagentRun;
use crate::service::ProviderChange;
use crate::service::Subagents;
use crate::tools::caller;

/// `backgroundMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackgroundMode {
    #[default]
    OneShot,
    Continuable,
}

/// `maxDepth`: a natural number, or `'provider-managed'`.
#[derive(Debug, Clone, PartialEq)]
pub enum MaxDepth {
    Limit(u64),
    ProviderManaged,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentOptionsConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, alias = "max_tokens", skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFilterConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
}

/// The `tool-subagent` plugin config (§2.1.1), as JSON.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SubagentToolConfig {
    pub provider: String,
    #[serde(default = "default_tool_name")]
    pub tool_name: String,
    #[serde(default = "default_true")]
    pub enable_run_in_background: bool,
    #[serde(default)]
    pub background_mode: BackgroundMode,
    #[serde(default)]
    pub agent_options: Option<AgentOptionsConfig>,
    #[serde(default)]
    pub persona: Option<String>,
    #[serde(default)]
    pub tool_filter: Option<ToolFilterConfig>,
    /// A number or `"provider-managed"`; default 3.
    #[serde(default)]
    pub max_depth: Option<Value>,
}

fn default_tool_name() -> String {
    "subagent".to_owned()
}
fn default_true() -> bool {
    true
}

impl SubagentToolConfig {
    pub fn new(provider: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            tool_name: default_tool_name(),
            enable_run_in_background: true,
            background_mode: BackgroundMode::OneShot,
            agent_options: None,
            persona: None,
            tool_filter: None,
            max_depth: None,
        }
    }
}

/// The validated settings of one instance.
#[derive(Debug, Clone)]
struct Settings {
    provider: String,
    tool_name: String,
    background: bool,
    mode: BackgroundMode,
    agent_options: Option<AgentOptions>,
    persona: Option<String>,
    tool_filter: Option<ToolFilterSpec>,
    max_depth: MaxDepth,
}

pub const RUN_IN_BACKGROUND_DISABLED: &str =
    "run_in_background is disabled for this tool instance (enableRunInBackground: false)";
pub const JOBS_UNAVAILABLE: &str =
    "background jobs unavailable: load @deepseek-ai/dsh-jobs and @deepseek-ai/dsh-tool-jobs";

fn validate(config: SubagentToolConfig) -> Result<Settings, SubagentError> {
    let max_depth = match &config.max_depth {
        None => MaxDepth::Limit(3),
        Some(Value::String(s)) if s == "provider-managed" => MaxDepth::ProviderManaged,
        Some(value) => MaxDepth::Limit(crate::depth::parse_max_depth(value)?),
    };
    let tool_filter = match config.tool_filter {
        Some(filter) if filter.allow.is_none() && filter.deny.is_none() => {
            return Err(SubagentError::plain(
                "tool-subagent: `toolFilter` is configured but names neither `allow` nor `deny` — remove the key or fill the filter",
            ));
        }
        Some(filter) => Some(ToolFilterSpec {
            allow: filter.allow,
            deny: filter.deny,
        }),
        None => None,
    };
    if let Some(AgentOptionsConfig {
        max_tokens: Some(0),
        ..
    }) = &config.agent_options
    {
        return Err(SubagentError::plain(
            "tool-subagent: agentOptions.maxTokens must be a positive integer",
        ));
    }
    Ok(Settings {
        provider: config.provider,
        tool_name: config.tool_name,
        background: config.enable_run_in_background,
        mode: config.background_mode,
        agent_options: config.agent_options.map(|o| AgentOptions {
            provider: o.provider,
            model: o.model,
            max_tokens: o.max_tokens,
        }),
        persona: config.persona,
        tool_filter,
        max_depth,
    })
}

/// Mount-time checks against the provider.
fn check_mount(settings: &Settings, provider: &dyn SubagentProvider) -> Result<(), MountError> {
    let name = &settings.provider;
    if matches!(settings.max_depth, MaxDepth::Limit(_)) && !provider.capabilities().depth_limit {
        return Err(MountError::NoDepthLimit {
            provider: name.clone(),
        });
    }
    if settings.mode == BackgroundMode::Continuable && !provider.supports_continuable() {
        return Err(MountError::NoContinuable {
            provider: name.clone(),
        });
    }
    Ok(())
}

/// Installs one `tool-subagent` instance under `scope`: validated now, mounted while its
/// provider is registered (now, or when it appears), unmounted when it goes away.
pub fn install(
    subagents: &Arc<Subagents>,
    scope: &Scope,
    config: SubagentToolConfig,
) -> Result<(), SubagentError> {
    let settings = Arc::new(validate(config)?);
    let mounted: Arc<Mutex<Option<Scope>>> = Arc::default();
    let mount = {
        let subagents = Arc::downgrade(subagents);
        let settings = settings.clone();
        let mounted = mounted.clone();
        let scope = scope.clone();
        move |provider: &Arc<dyn SubagentProvider>| -> Result<(), MountError> {
            check_mount(&settings, provider.as_ref())?;
            let Some(subagents) = subagents.upgrade() else {
                return Ok(());
            };
            let child = scope.child(ScopeKind::Plugin, format!("tool:{}", settings.tool_name))?;
            if let Err(error) = mount_into(&subagents, &child, &settings, provider.as_ref()) {
                child.dispose();
                return Err(error);
            }
            if let Some(old) = dsh_sync::lock(&mounted).replace(child) {
                old.dispose();
            }
            Ok(())
        }
    };
    if let Some(provider) = subagents.provider(&settings.provider) {
        mount(&provider).map_err(|e| SubagentError::plain(e.to_string()))?;
    } else {
        tracing::info!(
            "subagent provider \"{}\" not registered yet; the \"{}\" tool will register when it appears",
            settings.provider,
            settings.tool_name
        );
    }
    let watched = settings.provider.clone();
    let unmounted = mounted.clone();
    subagents.on_provider_change(scope, move |change| match change {
        ProviderChange::Added(provider) if provider.name() == watched => mount(provider),
        ProviderChange::Removed(name) if *name == watched => {
            if let Some(old) = dsh_sync::lock(&unmounted).take() {
                old.dispose();
            }
            Ok(())
        }
        _ => Ok(()),
    });
    let cleanup = mounted;
    scope.defer(move || {
        if let Some(old) = dsh_sync::lock(&cleanup).take() {
            old.dispose();
        }
    });
    Ok(())
}

#[derive(Debug, Deserialize)]
struct Args {
    description: String,
    prompt: String,
    #[serde(default)]
    run_in_background: Option<bool>,
}

fn parameters(settings: &Settings, inherits: bool) -> Value {
    let prompt = if inherits {
        "What the forked agent should do next. It already has every completed turn of this conversation, so state only what is new."
    } else {
        "The complete task for the agent. It does not see this conversation: include every fact, path and constraint it needs."
    };
    let mut spec = json!({
        "description": {
            "type": "string",
            "required": true,
            "description": "A short (3-5 word) label for the task, shown to the user."
        },
        "prompt": {"type": "string", "required": true, "description": prompt},
    });
    if settings.background
        && let Some(map) = spec.as_object_mut()
    {
        let text = match settings.mode {
            BackgroundMode::Continuable => {
                "Defaults to true: the call returns a durable subagent id at once. Set false only when your next step needs the result."
            }
            BackgroundMode::OneShot => {
                "Defaults to false: the call waits for the result. Set true to get a job id instead; collect it with job_output, stop it with job_kill."
            }
        };
        map.insert(
            "run_in_background".into(),
            json!({"type": "boolean", "description": text}),
        );
    }
    spec
}

fn description(settings: &Settings, inherits: bool) -> String {
    let base = if inherits {
        "Fork this conversation into a child agent that starts from every completed turn (not the one in progress). Use it for follow-ups or reviews that build on what is already known; the child's result comes back to you."
    } else {
        "Hand a self-contained task to a separate agent with its own context. Only its result comes back to you, so the prompt must stand on its own: the agent does not see this conversation."
    };
    let suffix = match (settings.background, settings.mode) {
        (true, BackgroundMode::Continuable) => {
            " By default it runs in the background: you get a durable subagent id immediately and the agent keeps its conversation for later turns. When it settles, the runtime sends you a notice with the outcome and its final message; use send_message to give it more work. Set run_in_background to false only when your next action depends on the result."
        }
        (true, BackgroundMode::OneShot) => {
            " By default the call waits for the result. With run_in_background set to true it returns a job id instead: collect the result with job_output, stop it with job_kill."
        }
        (false, _) => " The call waits and returns the result.",
    };
    format!("{base}{suffix}")
}

const SECTION_TEXT: &str = "Delegated agents run in the background by default. Start independent delegations together in one assistant message and keep working while they run; wait in the foreground only when your next action depends on the result. Each background agent sends a notice with its outcome and final message when it settles.";

fn output_schema() -> Value {
    json!({
        "oneOf": [
            {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "kind": {"type": "string", "const": "background"},
                    "jobId": {"type": "string"}
                },
                "required": ["kind", "jobId"]
            },
            {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "kind": {"type": "string", "const": "continuable"},
                    "subagentId": {"type": "string"}
                },
                "required": ["kind", "subagentId"]
            },
            {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "kind": {"type": "string", "const": "foreground"},
                    "runId": {"type": "string"},
                    "output": {"type": "array"}
                },
                "required": ["kind", "runId", "output"]
            }
        ]
    })
}

fn render(value: &Value) -> Vec<ContentBlock> {
    let text = match value.get("kind").and_then(Value::as_str) {
        Some("background") => format!(
            "started background subagent job {}",
            value
                .get("jobId")
                .and_then(Value::as_str)
                .unwrap_or_default()
        ),
        Some("continuable") => format!(
            "started subagent {}",
            value
                .get("subagentId")
                .and_then(Value::as_str)
                .unwrap_or_default()
        ),
        _ => {
            let blocks: Vec<ContentBlock> = value
                .get("output")
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(ContentBlock::from_value).collect())
                .unwrap_or_default();
            output_text(&blocks)
        }
    };
    vec![ContentBlock::text(text)]
}

/// Finished foreground runs' transcripts, keyed by run id, until the result card takes them.
#[derive(Default)]
struct Transcripts(Mutex<indexmap::IndexMap<String, Value>>);

/// Transcripts kept for cards that were never rendered (nested calls have no card).
const KEPT_TRANSCRIPTS: usize = 64;

impl Transcripts {
    fn put(&self, run_id: &str, transcript: Value) {
        let mut map = dsh_sync::lock(&self.0);
        map.insert(run_id.to_owned(), transcript);
        while map.len() > KEPT_TRANSCRIPTS {
            map.shift_remove_index(0);
        }
    }

    fn take(&self, run_id: &str) -> Option<Value> {
        dsh_sync::lock(&self.0).shift_remove(run_id)
    }
}

/// What a foreground child did, as the delegating call's card shows it.
#[derive(Default)]
struct Activity {
    child_id: String,
    steps: Vec<String>,
    answer: Option<String>,
}

/// The progress callback of one foreground call: the child's tool calls and messages go to
/// the call's live output (when a front-end watches it) and into its transcript.
fn progress_for(run: &ToolRun, activity: Arc<Mutex<Activity>>) -> crate::provider::ProgressFn {
    let sink = dsh_tools::output_sink(run);
    let call_id = run.call_id().to_owned();
    Arc::new(move |child_id, progress| {
        let line = {
            let mut activity = dsh_sync::lock(&activity);
            child_id.clone_into(&mut activity.child_id);
            match progress {
                crate::provider::ChildProgress::ToolCall { title, .. } => {
                    let line = format!("▸ {title}\n");
                    activity.steps.push(title);
                    line
                }
                crate::provider::ChildProgress::Text(text) => {
                    let line = format!("{text}\n");
                    activity.answer = Some(text);
                    line
                }
            }
        };
        if let Some(sink) = &sink {
            sink.output(&call_id, dsh_tools::OutputStream::Stdout, line.as_bytes());
        }
    })
}

/// The completed card: the child's tool calls, then its result.
fn transcript_card(meta: &Value, content: &[ContentBlock]) -> Option<dsh_tools::ToolResultView> {
    let subagent = meta.get("subagent")?;
    let mut text = String::new();
    for step in subagent
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(step) = step.as_str() {
            text.push_str("▸ ");
            text.push_str(step);
            text.push('\n');
        }
    }
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(&output_text(content));
    Some(dsh_tools::ToolResultView::Generic {
        title: None,
        content: Some(vec![ContentBlock::text(text)]),
    })
}

fn mount_into(
    subagents: &Arc<Subagents>,
    scope: &Scope,
    settings: &Arc<Settings>,
    provider: &dyn SubagentProvider,
) -> Result<(), MountError> {
    let inherits = provider.inherits_parent_context();
    let runtime = subagents.runtime().clone();
    let service = Arc::downgrade(subagents);
    let body_settings = settings.clone();
    let transcripts = Arc::new(Transcripts::default());
    let (filled, taken) = (transcripts.clone(), transcripts);
    let definition = Tool::builder(settings.tool_name.clone())
        .description(description(settings, inherits))
        .author_parameters(&parameters(settings, inherits))
        .raw_output(output_schema(), |_, value| Ok(render(value)))
        .presentation_meta(move |_, value| {
            let subagent = match value.get("kind").and_then(Value::as_str) {
                Some("foreground") => value
                    .get("runId")
                    .and_then(Value::as_str)
                    .and_then(|run_id| taken.take(run_id))
                    .unwrap_or_else(|| json!({})),
                Some("continuable") => json!({"childId": value.get("subagentId")}),
                _ => json!({"jobId": value.get("jobId")}),
            };
            Ok(json!({"subagent": subagent}))
        })
        .present_result(|_: &Value, view: &dsh_tools::ResultView| {
            view.meta
                .as_ref()
                .and_then(|meta| transcript_card(meta, &view.content))
        })
        .concurrency_safe(|_: &Value| true)
        .run(move |args: Value, run: ToolRun| {
            let service = service.clone();
            let settings = body_settings.clone();
            let transcripts = filled.clone();
            async move {
                let Some(subagents) = service.upgrade() else {
                    return Err(ToolError::new("the subagent service is gone"));
                };
                execute(&subagents, &settings, &transcripts, args, run).await
            }
        })
        .build()?;
    runtime.tools.register(scope, definition)?;
    if settings.mode == BackgroundMode::Continuable
        && settings.background
        && let Some(prompts) = &runtime.prompts
    {
        let name = format!("tool:{}", settings.tool_name);
        prompts.register_section(scope, Section::new(name.clone(), Slot::Tools, SECTION_TEXT));
        runtime.note_tool_section(scope, &settings.tool_name, &name);
    }
    Ok(())
}

async fn execute(
    subagents: &Arc<Subagents>,
    settings: &Settings,
    transcripts: &Transcripts,
    args: Value,
    run: ToolRun,
) -> Result<Value, ToolError> {
    let args: Args = serde_json::from_value(args).map_err(|e| ToolError::new(e.to_string()))?;
    let Some(parent) = caller(subagents, &run) else {
        return Err(ToolError::new(
            "subagent tool requires a calling agent (exec.agent was undefined)",
        ));
    };
    let mut request = StartRequest::new(
        parent.clone(),
        vec![ContentBlock::text(args.prompt)],
        run.signal().clone(),
    );
    request.label = Some(args.description.clone());
    request.agent_options.clone_from(&settings.agent_options);
    request.persona.clone_from(&settings.persona);
    request.tool_filter.clone_from(&settings.tool_filter);
    if let MaxDepth::Limit(depth) = settings.max_depth {
        request.max_depth = Some(depth);
    }
    if !settings.background && args.run_in_background == Some(true) {
        return Err(ToolError::new(RUN_IN_BACKGROUND_DISABLED));
    }
    let background = args
        .run_in_background
        .unwrap_or(settings.mode == BackgroundMode::Continuable);
    if background && settings.mode == BackgroundMode::Continuable {
        let accepted = subagents
            .start_continuable(ContinuableStart {
                provider: settings.provider.clone(),
                label: args.description,
                child_id: None,
                request,
            })
            .await?;
        return Ok(json!({"kind": "continuable", "subagentId": accepted.child_id}));
    }
    if background {
        let jobs = parent
            .scope()
            .service::<JobsRuntime>()
            .ok_or_else(|| ToolError::new(JOBS_UNAVAILABLE))?;
        let job_id = start_job(
            subagents,
            &jobs,
            &settings.provider,
            &parent,
            request,
            args.description,
        )
        .map_err(|e| ToolError::new(e.to_string()))?;
        return Ok(json!({"kind": "background", "jobId": job_id}));
    }
    let activity = Arc::new(Mutex::new(Activity::default()));
    request.progress = Some(progress_for(&run, activity.clone()));
    let run_handle = subagents.start(&settings.provider, request).await?;
    let result = run_handle.result().await;
    let disposed = run_handle.dispose().await;
    {
        let activity = dsh_sync::lock(&activity);
        transcripts.put(
            &run_handle.run_id,
            json!({
                "childId": run_handle.id,
                "steps": activity.steps,
                "answer": activity.answer,
            }),
        );
    }
    match (result, disposed) {
        (Ok(result), Ok(())) if result.stop_reason == StopReason::Completed => Ok(json!({
            "kind": "foreground",
            "runId": run_handle.run_id,
            "output": result.output.iter().map(ContentBlock::to_value).collect::<Vec<_>>(),
        })),
        (Ok(result), Ok(())) => Err(ToolError::new(failure_text(&result))),
        (Err(a), Err(b)) => Err(ToolError::new(format!(
            "subagent run failed: {a}; dispose failed: {b}"
        ))),
        (Err(error), Ok(())) => Err(error.into()),
        (Ok(_), Err(error)) => Err(error.into()),
    }
}

/// `<headline>[\nDiagnostic: <d>][\nPartial output before the run ended:\n<text>]`.
pub fn failure_text(result: &crate::provider::SubagentResult) -> String {
    let mut text = match &result.stop_reason {
        StopReason::Aborted => "subagent run was cancelled".to_owned(),
        StopReason::Error => "subagent run failed".to_owned(),
        StopReason::MaxTokens => "subagent run hit its token limit before finishing".to_owned(),
        StopReason::Refusal => "subagent declined the task".to_owned(),
        StopReason::Completed => "subagent run completed".to_owned(),
        StopReason::Other(reason) => format!("subagent run ended abnormally ({reason})"),
    };
    if let Some(diagnostic) = &result.diagnostic {
        text.push_str("\nDiagnostic: ");
        text.push_str(diagnostic);
    }
    let partial = output_text(&result.output);
    if !partial.is_empty() {
        text.push_str("\nPartial output before the run ended:\n");
        text.push_str(&partial);
    }
    text
}

struct SubagentJob {
    abort: CancellationToken,
    reason: Mutex<Option<String>>,
}

impl JobProducer for SubagentJob {
    fn cancel(&self, reason: Option<&str>) -> Result<(), JobError> {
        *dsh_sync::lock(&self.reason) = Some(
            reason
                .unwrap_or("background subagent task killed")
                .to_owned(),
        );
        self.abort.cancel();
        Ok(())
    }
}

/// A one-shot background child as a job of kind `subagent` (§1.7.2).
fn start_job(
    subagents: &Arc<Subagents>,
    jobs: &Arc<JobsRuntime>,
    provider: &str,
    parent: &AgentHandle,
    mut request: StartRequest,
    label: String,
) -> Result<String, dsh_tool_shell::ShellError> {
    let spec = JobSpec {
        kind: "subagent".to_owned(),
        label,
        owner: Some(OwnerId::new(parent.id())),
        output_limit_bytes: None,
    };
    let subagents = subagents.clone();
    let provider = provider.to_owned();
    jobs.start(spec, move || {
        let abort = CancellationToken::new();
        request.signal = abort.clone();
        let producer = Arc::new(SubagentJob {
            abort: abort.clone(),
            reason: Mutex::new(None),
        });
        let done = Box::pin(async move {
            match subagents.start(&provider, request).await {
                Err(error) if abort.is_cancelled() => {
                    let _ = error;
                    Ok(JobOutcome {
                        status: JobStatus::Killed,
                        detail: None,
                        output: None,
                    })
                }
                Err(error) => Ok(JobOutcome {
                    status: JobStatus::Failed,
                    detail: Some(format!("Error: {error}")),
                    output: None,
                }),
                Ok(run) => Ok(settle_run(&run).await),
            }
        });
        Ok(JobRun {
            producer: producer as Arc<dyn JobProducer>,
            done,
        })
    })
}

/// `settleRun`: the job outcome of a started run, then its disposal.
async fn settle_run(run: &SubagentRun) -> JobOutcome {
    let mut outcome = match run.result().await {
        Ok(result) => match &result.stop_reason {
            StopReason::Completed => JobOutcome {
                status: JobStatus::Completed,
                detail: None,
                output: Some(output_text(&result.output)),
            },
            StopReason::Aborted => JobOutcome {
                status: JobStatus::Killed,
                detail: None,
                output: None,
            },
            other => JobOutcome {
                status: JobStatus::Failed,
                detail: Some(match &result.diagnostic {
                    Some(d) => format!("{other}; diagnostic: {d}"),
                    None => other.to_string(),
                }),
                output: None,
            },
        },
        Err(error) => JobOutcome {
            status: JobStatus::Failed,
            detail: Some(format!("Error: {error}")),
            output: None,
        },
    };
    if let Err(error) = run.dispose().await {
        outcome.status = JobStatus::Failed;
        outcome.detail = Some(match outcome.detail {
            Some(previous) => format!("{previous}; dispose failed: Error: {error}"),
            None => format!("dispose failed: Error: {error}"),
        });
        outcome.output = None;
    }
    outcome
}
