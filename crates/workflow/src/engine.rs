//! The worker engine (§4.1–§4.2): one Code Mode QuickJS program per run, on its own thread,
//! whose hooks fan out one-shot children through the subagent service.

use dsh_sync::lock;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_agent::AgentHandle;
use dsh_code::BindingError;
use dsh_code::BindingFn;
use dsh_code::CodeBindingNamespace;
use dsh_code::CodeRunRequest;
use dsh_code::CodeRuntime;
use dsh_code::ErrorClass;
use dsh_kernel::Observe;
use dsh_protocol::ContentBlock;
use dsh_subagent::AgentOptions;
use dsh_subagent::StartRequest;
use dsh_subagent::StopReason;
use dsh_subagent::Subagents;
use futures::FutureExt;
use futures::future::BoxFuture;
use futures::future::Shared;
use indexmap::IndexMap;
use serde_json::Value;
use serde_json::json;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::error::WorkflowError;
use crate::error::code;
use crate::meta::WorkflowMeta;
use crate::meta::validate_meta;
use crate::script::check_script;

const SHIM: &str = include_str!("shim.js");
const MAX_SAFE: u64 = (1 << 53) - 1;

/// Engine settings (`workflow-worker-thread`).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub provider: String,
    /// 0 = `min(16, max(1, availableParallelism − 2))`.
    pub max_concurrent_agents: usize,
    pub max_total_agents: u64,
    pub max_items_per_call: usize,
    /// Bounds the program's busy (executing) time; waits for children do not count.
    pub sync_timeout_ms: u64,
    pub dispose_grace_ms: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            provider: "spawn".to_owned(),
            max_concurrent_agents: 0,
            max_total_agents: 1000,
            max_items_per_call: 4096,
            sync_timeout_ms: 5000,
            dispose_grace_ms: 5000,
        }
    }
}

impl EngineConfig {
    fn slots(&self) -> usize {
        if self.max_concurrent_agents > 0 {
            return self.max_concurrent_agents;
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        cores.saturating_sub(2).clamp(1, 16)
    }
}

/// `start(request)`.
pub struct WorkflowRequest {
    pub script: String,
    pub meta: Value,
    pub args: Option<Value>,
    pub subagent_provider: Option<String>,
    pub max_total_agents: Option<u64>,
    pub parent: AgentHandle,
    pub signal: Option<CancellationToken>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowStop {
    Completed,
    Cancelled,
    Error,
}

impl WorkflowStop {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::Error => "error",
        }
    }
}

/// `WorkflowResult` (never a rejection).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowResult {
    /// `null` when the script returned nothing.
    pub value: Value,
    pub stop_reason: WorkflowStop,
    pub error: Option<String>,
    pub agents_started: u64,
}

/// `{id, meta}` of a run.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub id: String,
    pub meta: WorkflowMeta,
}

/// How a workflow child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentOutcome {
    Completed,
    Failed,
    Cancelled,
}

impl AgentOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// One child of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRef {
    pub seq: u64,
    pub label: String,
    pub phase: Option<String>,
    pub child_id: String,
}

/// The live, observe-only `workflow/*` events (dispatched with the parent's scope as subject).
#[derive(Debug, Clone)]
pub enum WorkflowEvent {
    Start(RunInfo),
    Phase(RunInfo, String),
    Log(RunInfo, String),
    AgentStart(RunInfo, AgentRef),
    AgentEnd(RunInfo, AgentRef, AgentOutcome),
    End(RunInfo, WorkflowResult),
}

impl WorkflowEvent {
    pub fn info(&self) -> &RunInfo {
        match self {
            Self::Start(i)
            | Self::Phase(i, _)
            | Self::Log(i, _)
            | Self::AgentStart(i, _)
            | Self::AgentEnd(i, _, _)
            | Self::End(i, _) => i,
        }
    }
}

type ResultFuture = Shared<BoxFuture<'static, WorkflowResult>>;

/// A started run. Its result never rejects; `dispose` cancels (if still running) and waits.
pub struct WorkflowRun {
    pub id: String,
    pub meta: WorkflowMeta,
    result: ResultFuture,
    shared: Arc<RunShared>,
}

impl WorkflowRun {
    pub fn result(&self) -> ResultFuture {
        self.result.clone()
    }

    /// First reason wins.
    pub fn cancel(&self, reason: Option<&str>) {
        self.shared.cancel(reason.unwrap_or("cancelled"));
    }

    pub async fn dispose(&self) {
        if !self.shared.settled() {
            self.shared.cancel("workflow run disposed");
        }
        let _ = self.result.clone().await;
    }
}

struct RunShared {
    info: RunInfo,
    parent: AgentHandle,
    subagents: Arc<Subagents>,
    events: Arc<Observe<WorkflowEvent>>,
    provider: String,
    max_total: u64,
    slots: Arc<Semaphore>,
    /// Aborts the children and the program.
    signal: CancellationToken,
    cancel_reason: Mutex<Option<String>>,
    fatal: Mutex<Option<WorkflowError>>,
    started: AtomicU64,
    seq: AtomicU64,
    phase: Mutex<Option<String>>,
    open: Mutex<BTreeMap<u64, AgentRef>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    done: std::sync::atomic::AtomicBool,
}

impl RunShared {
    fn emit(&self, event: WorkflowEvent) {
        self.events.emit(Some(self.parent.scope()), &event);
    }

    fn cancel(&self, reason: &str) {
        {
            let mut current = lock(&self.cancel_reason);
            if current.is_none() && lock(&self.fatal).is_none() {
                *current = Some(reason.to_owned());
            }
        }
        self.signal.cancel();
    }

    /// Records the first fatal error and kills the run.
    /// [`Self::die`] as the rejection of the binding call that caused it.
    fn fail(&self, error: WorkflowError) -> BindingError {
        BindingError::Failed(self.die(error))
    }

    fn die(&self, error: WorkflowError) -> String {
        let message = error.message.clone();
        {
            let cancelled = lock(&self.cancel_reason).is_some();
            let mut fatal = lock(&self.fatal);
            if fatal.is_none() && !cancelled {
                *fatal = Some(error);
            }
        }
        self.signal.cancel();
        message
    }

    fn settled(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
}

/// The engine service (`ctx.workflowEngine`).
pub struct WorkflowEngine {
    config: EngineConfig,
    subagents: Arc<Subagents>,
    runtime: Arc<dyn CodeRuntime>,
    events: Arc<Observe<WorkflowEvent>>,
}

impl std::fmt::Debug for WorkflowEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkflowEngine")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl WorkflowEngine {
    /// An engine whose programs run on their own QuickJS worker threads.
    pub fn new(
        config: EngineConfig,
        subagents: Arc<Subagents>,
    ) -> Result<Arc<Self>, WorkflowError> {
        if config.max_total_agents == 0 || config.max_total_agents > MAX_SAFE {
            return Err(WorkflowError::new(
                code::INVALID_ARGUMENT,
                "maxTotalAgents must be a positive safe integer",
            ));
        }
        let runtime = dsh_code::QuickJsRuntime::new(dsh_code::QuickJsConfig {
            compute_ms: config.sync_timeout_ms.max(1),
            max_wall_ms: 2_147_483_647,
            max_output_bytes: 64 * 1024 * 1024,
            memory_mb: 256,
        })
        .map_err(|e| WorkflowError::new(code::INVALID_ARGUMENT, e.to_string()))?;
        Ok(Arc::new(Self {
            config,
            subagents,
            runtime,
            events: Arc::new(Observe::new("workflow/event")),
        }))
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn events(&self) -> &Observe<WorkflowEvent> {
        &self.events
    }

    pub fn subagents(&self) -> &Arc<Subagents> {
        &self.subagents
    }

    /// Validates synchronously (nothing runs or is published on failure), then starts.
    pub fn start(&self, request: WorkflowRequest) -> Result<WorkflowRun, WorkflowError> {
        let meta = validate_meta(&request.meta)?;
        check_script(&request.script)?;
        let provider = request
            .subagent_provider
            .clone()
            .unwrap_or_else(|| self.config.provider.clone());
        if provider.is_empty() || provider.trim() != provider {
            return Err(WorkflowError::new(
                code::INVALID_ARGUMENT,
                "workflow subagentProvider must be a non-empty normalized string",
            ));
        }
        if self.subagents.provider(&provider).is_none() {
            return Err(WorkflowError::new(
                code::AGENT_START,
                format!("no subagent provider registered for \"{provider}\""),
            ));
        }
        let max_total = match request.max_total_agents {
            None => self.config.max_total_agents,
            Some(0) => {
                return Err(WorkflowError::new(
                    code::INVALID_ARGUMENT,
                    "workflow maxTotalAgents must be a positive safe integer",
                ));
            }
            Some(n) if n > MAX_SAFE => {
                return Err(WorkflowError::new(
                    code::INVALID_ARGUMENT,
                    "workflow maxTotalAgents must be a positive safe integer",
                ));
            }
            Some(n) if n > self.config.max_total_agents => {
                return Err(WorkflowError::new(
                    code::INVALID_ARGUMENT,
                    format!(
                        "workflow maxTotalAgents {n} exceeds the engine ceiling {}",
                        self.config.max_total_agents
                    ),
                ));
            }
            Some(n) => n,
        };
        let args = request.args.clone().unwrap_or_else(|| json!({}));
        let program = compose_program(&request.script, &args, self.config.max_items_per_call);
        let info = RunInfo {
            id: uuid::Uuid::new_v4().to_string(),
            meta: meta.clone(),
        };
        let shared = Arc::new(RunShared {
            info: info.clone(),
            parent: request.parent.clone(),
            subagents: self.subagents.clone(),
            events: self.events.clone(),
            provider,
            max_total,
            slots: Arc::new(Semaphore::new(self.config.slots())),
            signal: CancellationToken::new(),
            cancel_reason: Mutex::new(None),
            fatal: Mutex::new(None),
            started: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            phase: Mutex::new(None),
            open: Mutex::new(BTreeMap::new()),
            tasks: Mutex::new(Vec::new()),
            done: std::sync::atomic::AtomicBool::new(false),
        });
        shared.emit(WorkflowEvent::Start(info.clone()));
        if let Some(outer) = request.signal.clone() {
            let watched = Arc::downgrade(&shared);
            let own = shared.signal.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = outer.cancelled() => {
                        if let Some(shared) = watched.upgrade() {
                            shared.cancel("parent step aborted");
                        }
                    }
                    () = own.cancelled() => {}
                }
            });
        }
        let code_request = CodeRunRequest {
            program,
            bindings: vec![bindings(&shared)],
            signal: Some(shared.signal.clone()),
        };
        let run = self.runtime.run(code_request);
        let grace = Duration::from_millis(self.config.dispose_grace_ms);
        let driver = shared.clone();
        let result: BoxFuture<'static, WorkflowResult> = Box::pin(async move {
            let outcome = drive(run, &driver, grace).await;
            driver.done.store(true, Ordering::Release);
            driver.emit(WorkflowEvent::End(driver.info.clone(), outcome.clone()));
            outcome
        });
        let result = result.shared();
        // The run proceeds whether or not anyone awaits it.
        tokio::spawn(result.clone().map(drop));
        Ok(WorkflowRun {
            id: info.id,
            meta,
            result,
            shared,
        })
    }
}

/// The shim with args and caps substituted, the body spliced in verbatim (never scanned).
fn compose_program(body: &str, args: &Value, item_cap: usize) -> String {
    let args_text = serde_json::to_string(args).unwrap_or_else(|_| "{}".to_owned());
    let args_literal = serde_json::to_string(&args_text).unwrap_or_else(|_| "\"{}\"".to_owned());
    let shim = SHIM.replace("__WF_ITEM_CAP__", &item_cap.to_string());
    let (head, tail) = shim.split_once("__WF_BODY__").unwrap_or((&shim, ""));
    // Substituted after the split, so neither the arguments nor the body is ever rescanned.
    let head = head.replacen("__WF_ARGS__", &args_literal, 1);
    format!("{head}{body}{tail}")
}

/// Awaits the program, then the children; forces settlement after the grace period.
async fn drive(
    run: BoxFuture<'static, Result<dsh_code::CodeRunResult, dsh_code::CodeRuntimeError>>,
    shared: &Arc<RunShared>,
    grace: Duration,
) -> WorkflowResult {
    let signal = shared.signal.clone();
    let forced = async {
        signal.cancelled().await;
        tokio::time::sleep(grace).await;
    };
    let code = tokio::select! {
        code = run => Some(code),
        () = forced => None,
    };
    // What ended the run is decided now; the children's teardown cannot change it.
    let cancelled = lock(&shared.cancel_reason).clone();
    let fatal = lock(&shared.fatal).clone();
    // The program is over: no child of this run may outlive it.
    shared.signal.cancel();
    let tasks: Vec<_> = std::mem::take(&mut *lock(&shared.tasks));
    let joined = futures::future::join_all(tasks);
    let forced_children = tokio::time::timeout(grace, joined).await.is_err();
    if code.is_none() || forced_children {
        // Forced termination: synthesize the missing agent ends.
        let open: Vec<AgentRef> = std::mem::take(&mut *lock(&shared.open))
            .into_values()
            .collect();
        for agent in open {
            shared.emit(WorkflowEvent::AgentEnd(
                shared.info.clone(),
                agent,
                AgentOutcome::Cancelled,
            ));
        }
    }
    let agents_started = shared.started.load(Ordering::Acquire);
    if let Some(reason) = cancelled {
        return WorkflowResult {
            value: Value::Null,
            stop_reason: WorkflowStop::Cancelled,
            error: Some(format!("workflow run cancelled: {reason}")),
            agents_started,
        };
    }
    if let Some(fatal) = fatal {
        return WorkflowResult {
            value: Value::Null,
            stop_reason: WorkflowStop::Error,
            error: Some(fatal.rendered()),
            agents_started,
        };
    }
    match code {
        None => WorkflowResult {
            value: Value::Null,
            stop_reason: WorkflowStop::Cancelled,
            error: Some("workflow run cancelled: cancelled".to_owned()),
            agents_started,
        },
        Some(Err(error)) => WorkflowResult {
            value: Value::Null,
            stop_reason: WorkflowStop::Error,
            error: Some(format!("workflow worker failed: {error}")),
            agents_started,
        },
        Some(Ok(result)) => match result.error {
            None => WorkflowResult {
                value: result.value.unwrap_or(Value::Null),
                stop_reason: WorkflowStop::Completed,
                error: None,
                agents_started,
            },
            Some(error) => WorkflowResult {
                value: Value::Null,
                stop_reason: WorkflowStop::Error,
                error: Some(match error.kind {
                    dsh_code::CodeErrorKind::WorkerExit => {
                        format!("workflow worker failed: {}", error.message)
                    }
                    _ => error.message,
                }),
                agents_started,
            },
        },
    }
}

fn binding(
    f: impl Fn(Value) -> BoxFuture<'static, Result<Value, BindingError>> + Send + Sync + 'static,
) -> BindingFn {
    Arc::new(f)
}

/// The `__wf` namespace: `agent`, `phase`, `log`, `fatal`.
fn bindings(shared: &Arc<RunShared>) -> CodeBindingNamespace {
    let mut functions: IndexMap<String, BindingFn> = IndexMap::new();
    let s = Arc::downgrade(shared);
    functions.insert(
        "fatal".to_owned(),
        binding(move |args| {
            if let Some(shared) = s.upgrade() {
                let code = args["code"].as_str().unwrap_or(code::INVALID_ARGUMENT);
                let message = args["message"].as_str().unwrap_or_default();
                shared.die(WorkflowError::new(code, message));
            }
            Box::pin(async { Ok(Value::Null) })
        }),
    );
    let s = Arc::downgrade(shared);
    functions.insert(
        "phase".to_owned(),
        binding(move |args| {
            if let Some(shared) = s.upgrade() {
                let title = args["title"].as_str().unwrap_or_default().to_owned();
                *lock(&shared.phase) = Some(title.clone());
                shared.emit(WorkflowEvent::Phase(shared.info.clone(), title));
            }
            Box::pin(async { Ok(Value::Null) })
        }),
    );
    let s = Arc::downgrade(shared);
    functions.insert(
        "log".to_owned(),
        binding(move |args| {
            if let Some(shared) = s.upgrade() {
                let message = args["message"].as_str().unwrap_or_default().to_owned();
                shared.emit(WorkflowEvent::Log(shared.info.clone(), message));
            }
            Box::pin(async { Ok(Value::Null) })
        }),
    );
    let s = Arc::downgrade(shared);
    functions.insert(
        "agent".to_owned(),
        binding(move |args| {
            let Some(shared) = s.upgrade() else {
                return Box::pin(async {
                    Err(BindingError::Failed("workflow run is over".to_owned()))
                });
            };
            // The child is driven by a task of the run, so dropping this future (the program
            // ended) never leaks an undisposed child.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let worker = shared.clone();
            let task = tokio::spawn(async move {
                let outcome = run_agent(&worker, args).await;
                let _ = tx.send(outcome);
            });
            lock(&shared.tasks).push(task);
            Box::pin(async move {
                rx.await.unwrap_or_else(|_| {
                    Err(BindingError::Failed("workflow child task ended".to_owned()))
                })
            })
        }),
    );
    CodeBindingNamespace {
        global: "__wf".to_owned(),
        functions,
        error_class: Some(ErrorClass {
            name: "WorkflowHostError".to_owned(),
            member_name_property: "hook".to_owned(),
        }),
    }
}

const SUPPORTED: &str = "supported: label, phase, schema, provider, model";

/// The label of a child: `opts.label`, else the prompt's first line (≤ 48 characters).
fn default_label(prompt: &str) -> String {
    let line = prompt.lines().next().unwrap_or_default();
    if line.chars().count() <= 48 {
        return line.to_owned();
    }
    let mut out: String = line.chars().take(47).collect();
    out.push('…');
    out
}

struct AgentOptionsIn {
    label: Option<String>,
    phase: Option<String>,
    schema: Option<Value>,
    provider: Option<String>,
    model: Option<String>,
}

fn parse_options(opts: &Value) -> Result<AgentOptionsIn, WorkflowError> {
    let mut out = AgentOptionsIn {
        label: None,
        phase: None,
        schema: None,
        provider: None,
        model: None,
    };
    let Value::Object(map) = opts else {
        return Ok(out);
    };
    for (key, value) in map {
        match key.as_str() {
            "effort" | "isolation" | "agentType" => {
                return Err(WorkflowError::new(
                    code::UNSUPPORTED_OPTION,
                    format!(
                        "agent() option \"{key}\" is deferred and not supported by this engine ({SUPPORTED})"
                    ),
                ));
            }
            "label" | "phase" | "provider" | "model" => {
                let Some(text) = value.as_str() else {
                    return Err(WorkflowError::new(
                        code::INVALID_ARGUMENT,
                        format!("agent() option \"{key}\" must be a string"),
                    ));
                };
                let slot = match key.as_str() {
                    "label" => &mut out.label,
                    "phase" => &mut out.phase,
                    "provider" => &mut out.provider,
                    _ => &mut out.model,
                };
                *slot = Some(text.to_owned());
            }
            "schema" => {
                dsh_schema::assert_object_schema(value).map_err(|e| {
                    WorkflowError::new(
                        code::UNSUPPORTED_SCHEMA,
                        format!("agent() schema is outside the supported subset — {e}"),
                    )
                })?;
                out.schema = Some(value.clone());
            }
            _ => {
                return Err(WorkflowError::new(
                    code::UNSUPPORTED_OPTION,
                    format!("agent() option \"{key}\" is not recognized ({SUPPORTED})"),
                ));
            }
        }
    }
    Ok(out)
}

/// One `agent()` call, start to disposal.
async fn run_agent(shared: &Arc<RunShared>, args: Value) -> Result<Value, BindingError> {
    let prompt = args["prompt"].as_str().unwrap_or_default().to_owned();
    if prompt.is_empty() {
        return Err(shared.fail(WorkflowError::new(
            code::INVALID_ARGUMENT,
            "agent() requires a non-empty prompt string",
        )));
    }
    let options = parse_options(&args["opts"]).map_err(|e| shared.fail(e))?;
    let started = shared.started.fetch_add(1, Ordering::AcqRel);
    if started >= shared.max_total {
        shared.started.fetch_sub(1, Ordering::AcqRel);
        return Err(shared.fail(WorkflowError::new(
            code::AGENT_CAP,
            format!(
                "this run reached its total agent cap ({}) — a runaway-loop backstop; raise the applicable maxTotalAgents limit if the scale is intentional",
                shared.max_total
            ),
        )));
    }
    let seq = shared.seq.fetch_add(1, Ordering::AcqRel) + 1;
    let label = options
        .label
        .clone()
        .unwrap_or_else(|| default_label(&prompt));
    let phase = options
        .phase
        .clone()
        .or_else(|| lock(&shared.phase).clone());
    let cancelled_error = || WorkflowError::new(code::CANCELLED, "workflow run cancelled");
    let permit = tokio::select! {
        permit = shared.slots.clone().acquire_owned() => permit.map_err(|_| shared.fail(cancelled_error()))?,
        () = shared.signal.cancelled() => return Err(BindingError::Failed(cancelled_error().message)),
    };
    if shared.signal.is_cancelled() {
        return Err(BindingError::Failed(cancelled_error().message));
    }
    let mut request = StartRequest::new(
        shared.parent.clone(),
        vec![ContentBlock::text(prompt)],
        shared.signal.clone(),
    );
    request.output_schema.clone_from(&options.schema);
    if options.provider.is_some() || options.model.is_some() {
        request.agent_options = Some(AgentOptions {
            provider: options.provider.clone(),
            model: options.model.clone(),
            max_tokens: None,
        });
    }
    let run = match shared.subagents.start(&shared.provider, request).await {
        Ok(run) => run,
        Err(error) => {
            if shared.signal.is_cancelled() {
                return Err(BindingError::Failed(cancelled_error().message));
            }
            return Err(shared.fail(WorkflowError::new(
                code::AGENT_START,
                format!(
                    "agent() could not start a child: {}: {}",
                    error.name, error.message
                ),
            )));
        }
    };
    let agent = AgentRef {
        seq,
        label,
        phase,
        child_id: run.id.clone(),
    };
    lock(&shared.open).insert(seq, agent.clone());
    shared.emit(WorkflowEvent::AgentStart(
        shared.info.clone(),
        agent.clone(),
    ));
    let result = run.result().await;
    let disposed = run.dispose().await;
    drop(permit);
    let end = |outcome| {
        if lock(&shared.open).remove(&seq).is_some() {
            shared.emit(WorkflowEvent::AgentEnd(
                shared.info.clone(),
                agent.clone(),
                outcome,
            ));
        }
    };
    let result = match (result, disposed) {
        (Ok(result), _) => result,
        (Err(error), _) => {
            end(AgentOutcome::Failed);
            return Err(shared.fail(WorkflowError::new(
                code::AGENT_RESULT,
                format!("child agent run failed: {error}"),
            )));
        }
    };
    if result.stop_reason == StopReason::Completed {
        if options.schema.is_some() {
            return match result.structured {
                Some(value) => {
                    end(AgentOutcome::Completed);
                    Ok(value)
                }
                None => {
                    end(AgentOutcome::Failed);
                    Ok(Value::Null)
                }
            };
        }
        end(AgentOutcome::Completed);
        return Ok(Value::String(dsh_protocol::text_of(&result.output)));
    }
    if shared.signal.is_cancelled() && lock(&shared.fatal).is_none() {
        end(AgentOutcome::Cancelled);
        return Err(shared.fail(cancelled_error()));
    }
    end(AgentOutcome::Failed);
    Ok(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_default_to_the_first_prompt_line() {
        assert_eq!(default_label("short\nmore"), "short");
        let long = "x".repeat(60);
        let label = default_label(&long);
        assert_eq!(label.chars().count(), 48);
        assert!(label.ends_with('…'));
        assert_eq!(default_label(&"y".repeat(48)), "y".repeat(48));
    }

    #[test]
    fn options_are_checked_with_exact_texts() {
        let err = |v: Value| parse_options(&v).err().map(|e| (e.code, e.message));
        assert_eq!(
            err(json!({"effort": "high"})),
            Some((
                "UNSUPPORTED_OPTION".into(),
                "agent() option \"effort\" is deferred and not supported by this engine (supported: label, phase, schema, provider, model)".into()
            ))
        );
        assert_eq!(
            err(json!({"colour": 1})),
            Some((
                "UNSUPPORTED_OPTION".into(),
                "agent() option \"colour\" is not recognized (supported: label, phase, schema, provider, model)".into()
            ))
        );
        assert_eq!(
            err(json!({"label": 3})).unwrap().1,
            "agent() option \"label\" must be a string"
        );
        let schema = err(json!({"schema": {"type": "string"}})).unwrap();
        assert_eq!(schema.0, "UNSUPPORTED_SCHEMA");
        assert!(
            schema
                .1
                .starts_with("agent() schema is outside the supported subset — ")
        );
        assert!(
            err(json!({"label": "l", "schema": {"type": "object", "properties": {}}})).is_none()
        );
    }

    #[test]
    fn the_body_is_spliced_verbatim() {
        let program = compose_program("return '__WF_ARGS__';", &json!({"a": "\"q\""}), 7);
        assert!(program.contains("return '__WF_ARGS__';"));
        assert!(
            program.contains(r#"JSON.parse("{\"a\":\"\\\"q\\\"\"}")"#),
            "{program}"
        );
        assert!(program.contains("const __wfItemCap = 7;"));
    }
}
