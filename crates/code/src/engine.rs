//! The QuickJS side of a run: one fresh engine on its own thread per program. Talks to the
//! host only through [`HostCall`]s and the shared [`RunState`] (stop reason, busy meter, logs).

use dsh_sync::lock;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::task::Context;
use std::task::Poll;
use std::time::Duration;
use std::time::Instant;

use rquickjs::AsyncContext;
use rquickjs::AsyncRuntime;
use rquickjs::Ctx;
use rquickjs::Function;
use rquickjs::Object;
use rquickjs::Promise;
use rquickjs::context::EvalOptions;
use rquickjs::prelude::Async;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::sync::mpsc;
use tokio::sync::oneshot;

use crate::convert::js_to_json;
use crate::convert::json_to_js;
use crate::seam::BindingError;
use crate::seam::CodeErrorKind;
use crate::seam::CodeRunError;

const PRELUDE: &str = include_str!("prelude.js");
/// The engine thread's stack; QuickJS's own limit sits well inside it.
const THREAD_STACK: usize = 64 * 1024 * 1024;
/// rquickjs treats anything above 16 MiB as "no limit", so this is the largest real limit.
const JS_STACK: usize = 16 * 1024 * 1024;

/// Exact rejection texts of binding arguments that are not lossless JSON.
pub const ARGS_GETTER_PREFIX: &str = "tool arguments must be lossless JSON: ";
pub const ARGS_LOSSY: &str =
    "tool arguments must be lossless JSON (call the tool with an arguments object, e.g. `{}`)";

/// A binding call from the program: answered at most once through `reply`.
pub(crate) struct HostCall {
    pub namespace: usize,
    pub name: String,
    pub args: Value,
    pub reply: oneshot::Sender<Result<Value, BindingError>>,
}

/// What the engine needs to know about one namespace.
pub(crate) struct NamespaceSpec {
    pub global: String,
    pub names: Vec<String>,
    pub error_class: Option<(String, String)>,
}

/// The combined output budget: the JSON size of the logs array plus the completion value or
/// failure message.
pub(crate) struct Ledger {
    pub logs: Vec<String>,
    used: usize,
    max: usize,
}

impl Ledger {
    pub fn new(max: usize) -> Self {
        Self {
            logs: Vec::new(),
            used: 2,
            max,
        }
    }
    fn cost(&self, text: &str) -> usize {
        serde_json::to_string(text).map_or(usize::MAX / 4, |s| s.len())
            + usize::from(!self.logs.is_empty())
    }
    /// Appends a log line if it fits; `false` = the budget is exhausted (the line is dropped).
    pub fn push(&mut self, text: String) -> bool {
        let cost = self.cost(&text);
        if self.used.saturating_add(cost) > self.max {
            return false;
        }
        self.used += cost;
        self.logs.push(text);
        true
    }
    /// Whether `extra` more bytes still fit.
    pub fn fits(&self, extra: usize) -> bool {
        self.used.saturating_add(extra) <= self.max
    }
    pub fn max(&self) -> usize {
        self.max
    }
}

/// Shared between host, engine thread and interrupt handler.
pub(crate) struct RunState {
    stopped: AtomicBool,
    reason: Mutex<Option<CodeRunError>>,
    wake: Notify,
    busy: Mutex<(Duration, Option<Instant>)>,
    pub ledger: Mutex<Ledger>,
    deadline: Instant,
    wall_ms: u64,
    compute: Duration,
}

impl RunState {
    pub fn new(wall_ms: u64, compute_ms: u64, max_output: usize) -> Arc<Self> {
        Arc::new(Self {
            stopped: AtomicBool::new(false),
            reason: Mutex::new(None),
            wake: Notify::new(),
            busy: Mutex::new((Duration::ZERO, None)),
            ledger: Mutex::new(Ledger::new(max_output)),
            deadline: Instant::now() + Duration::from_millis(wall_ms),
            wall_ms,
            compute: Duration::from_millis(compute_ms),
        })
    }

    /// Ends the run with `kind`/`message`; the first reason wins.
    pub fn stop(&self, kind: CodeErrorKind, message: impl Into<String>) {
        {
            let mut reason = lock(&self.reason);
            if reason.is_none() {
                *reason = Some(CodeRunError {
                    kind,
                    message: message.into(),
                });
            }
        }
        self.stopped.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    pub fn reason(&self) -> Option<CodeRunError> {
        lock(&self.reason).clone()
    }

    fn busy(&self) -> Duration {
        let busy = lock(&self.busy);
        busy.0 + busy.1.map_or(Duration::ZERO, |since| since.elapsed())
    }

    fn wall_exceeded(&self) -> bool {
        if Instant::now() >= self.deadline {
            self.stop(
                CodeErrorKind::Timeout,
                format!("wall-clock ceiling reached ({}ms)", self.wall_ms),
            );
            return true;
        }
        false
    }

    /// The interrupt handler's verdict: stop requested, wall ceiling, or compute budget.
    fn should_interrupt(&self) -> bool {
        if self.stopped.load(Ordering::Acquire) || self.wall_exceeded() {
            return true;
        }
        let busy = self.busy();
        if busy >= self.compute {
            self.stop(
                CodeErrorKind::Timeout,
                format!("compute budget exhausted ({}ms busy)", busy.as_millis()),
            );
            return true;
        }
        false
    }

    fn log(&self, text: String) -> bool {
        if self.stopped.load(Ordering::Acquire) {
            return false;
        }
        let mut ledger = lock(&self.ledger);
        if ledger.push(text) {
            return true;
        }
        let max = ledger.max();
        drop(ledger);
        self.stop(
            CodeErrorKind::OutputLimit,
            format!("outer output exceeded {max} bytes"),
        );
        false
    }
}

/// Counts the time the engine spends inside `poll` (its busy time, excluding waits).
struct Metered<F> {
    inner: Pin<Box<F>>,
    state: Arc<RunState>,
}

impl<F: Future> Future for Metered<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let start = Instant::now();
        lock(&self.state.busy).1 = Some(start);
        let out = self.inner.as_mut().poll(cx);
        let mut busy = lock(&self.state.busy);
        busy.0 += start.elapsed();
        busy.1 = None;
        out
    }
}

/// How the program ended, as far as the engine can tell.
pub(crate) enum EngineEnd {
    /// Completed: `None` = `undefined`.
    Completed(Option<Value>),
    Failed(CodeRunError),
}

pub(crate) struct EngineJob {
    /// The TypeScript program body and the wrapper's parameter names; stripped on the engine
    /// thread, whose large stack the recursive parser needs.
    pub program: String,
    pub params: Vec<String>,
    pub namespaces: Vec<NamespaceSpec>,
    pub memory_bytes: usize,
    pub calls: mpsc::UnboundedSender<HostCall>,
    pub state: Arc<RunState>,
}

/// Starts the engine thread; the receiver yields exactly one end (a panic becomes
/// `worker-exit`).
pub(crate) fn spawn(job: EngineJob) -> oneshot::Receiver<EngineEnd> {
    let (tx, rx) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("dsh-code".to_owned())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let end = match std::panic::catch_unwind(AssertUnwindSafe(|| run_engine(job))) {
                Ok(end) => end,
                Err(payload) => {
                    let message = payload
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| payload.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "engine panicked".to_owned());
                    worker_error(message)
                }
            };
            // The host may have gone away (disposal); nothing left to tell.
            let _ = tx.send(end);
        });
    if let Err(error) = spawned {
        let (tx, rx) = oneshot::channel();
        let _ = tx.send(worker_error(format!("cannot start engine thread: {error}")));
        return rx;
    }
    rx
}

fn worker_error(message: impl std::fmt::Display) -> EngineEnd {
    EngineEnd::Failed(CodeRunError {
        kind: CodeErrorKind::WorkerExit,
        message: format!("worker error: {message}"),
    })
}

fn run_engine(job: EngineJob) -> EngineEnd {
    let stripped = match crate::strip::strip_program(&job.program, &job.params) {
        Ok(stripped) => stripped,
        Err(error) => return exception(error.to_string()),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return worker_error(error),
    };
    let lines = stripped.lines;
    match runtime.block_on(engine_main(job, stripped.script)) {
        // Stack traces name positions of the generated script: report the user's lines.
        EngineEnd::Failed(mut error) if error.kind == CodeErrorKind::Exception => {
            error.message = lines.remap(&error.message);
            EngineEnd::Failed(error)
        }
        end => end,
    }
}

async fn engine_main(job: EngineJob, script: String) -> EngineEnd {
    let state = job.state.clone();
    let rt = match AsyncRuntime::new() {
        Ok(rt) => rt,
        Err(error) => return worker_error(error),
    };
    rt.set_memory_limit(job.memory_bytes).await;
    rt.set_max_stack_size(JS_STACK).await;
    let watcher = state.clone();
    rt.set_interrupt_handler(Some(Box::new(move || watcher.should_interrupt())))
        .await;
    let ctx = match AsyncContext::full(&rt).await {
        Ok(ctx) => ctx,
        Err(error) => return worker_error(error),
    };
    let memory_bytes = job.memory_bytes;
    let run = ctx.async_with(async move |ctx| run_program(ctx, job, script).await);
    let end = {
        let mut metered = Metered {
            inner: Box::pin(run),
            state: state.clone(),
        };
        std::future::poll_fn(|cx| {
            let polled = Pin::new(&mut metered).poll(cx);
            if polled.is_pending() && stalled(&rt) {
                // The program waits, and no job, tool call or timer is left to wake it: it
                // would hold the turn until the wall-clock ceiling for nothing.
                state.stop(CodeErrorKind::Exception, STALLED);
            }
            polled
        })
        .await
    };
    let end = match (state.reason(), end) {
        (Some(reason), _) => EngineEnd::Failed(reason),
        (None, EngineEnd::Failed(error)) if is_oom(&error) => worker_error(format!(
            "out of memory (memory limit {} MB)",
            memory_bytes / (1024 * 1024)
        )),
        (None, end) => end,
    };
    drop(ctx);
    rt.run_gc().await;
    end
}

/// The message of a program that awaits what nothing can settle.
pub(crate) const STALLED: &str = "the program is awaiting a promise that nothing can settle: no tool call, timer or other job is pending, so it could never continue";

/// No JavaScript job is queued and no host future (tool call, timer) is in flight. Called
/// right after the engine returned `Pending`, when its lock is free; a lock that is still
/// held means work is under way.
fn stalled(rt: &AsyncRuntime) -> bool {
    use futures::FutureExt as _;
    rt.is_job_pending().now_or_never() == Some(false)
}

fn is_oom(error: &CodeRunError) -> bool {
    error.kind == CodeErrorKind::Exception && error.message.contains("out of memory")
}

fn exception(message: impl Into<String>) -> EngineEnd {
    EngineEnd::Failed(CodeRunError {
        kind: CodeErrorKind::Exception,
        message: message.into(),
    })
}

/// The pending exception of `ctx`, described by the prelude when possible.
fn caught<'js>(
    ctx: &Ctx<'js>,
    error: &rquickjs::Error,
    describe: Option<&Function<'js>>,
) -> String {
    if !error.is_exception() {
        return error.to_string();
    }
    let thrown = ctx.catch();
    if let Some(describe) = describe
        && let Ok(text) = describe.call::<_, String>((thrown.clone(),))
    {
        return text;
    }
    match thrown.as_exception() {
        Some(e) => e.to_string(),
        None => error.to_string(),
    }
}

async fn run_program<'js>(ctx: Ctx<'js>, job: EngineJob, script: String) -> EngineEnd {
    let EngineJob {
        namespaces,
        calls,
        state,
        ..
    } = job;
    let setup: Function = match ctx.eval(PRELUDE) {
        Ok(setup) => setup,
        Err(error) => {
            return worker_error(format!("prelude failed: {}", caught(&ctx, &error, None)));
        }
    };
    let host_call = Function::new(
        ctx.clone(),
        Async(
            move |ctx: Ctx<'js>, namespace: usize, name: String, args: rquickjs::Value<'js>| {
                let sent = js_to_json(args)
                    .map_err(|_| BindingError::ArgumentsNotJson)
                    .and_then(|args| {
                        let (reply, answer) = oneshot::channel();
                        calls
                            .send(HostCall {
                                namespace,
                                name: name.clone(),
                                args,
                                reply,
                            })
                            .map(|()| answer)
                            .map_err(|_| BindingError::EngineOver { name: name.clone() })
                    });
                async move {
                    let outcome = match sent {
                        Err(error) => Err(error),
                        Ok(answer) => answer.await.unwrap_or(Err(BindingError::ReplyDropped)),
                    };
                    let reply = Object::new(ctx.clone())?;
                    match outcome {
                        Ok(value) => {
                            reply.set("ok", true)?;
                            reply.set("value", json_to_js(&ctx, &value)?)?;
                            dsh_schema::drop_deep(value);
                        }
                        Err(error) => {
                            reply.set("ok", false)?;
                            reply.set("message", error.to_string())?;
                        }
                    }
                    Ok::<_, rquickjs::Error>(reply)
                }
            },
        ),
    );
    let host_sleep = Function::new(
        ctx.clone(),
        Async(|ms: f64| async move {
            // Capped so a float can never overflow the duration; the wall clock ends longer waits.
            let ms = ms.clamp(0.0, 2_147_483_647.0);
            tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)).await;
            Ok::<_, rquickjs::Error>(())
        }),
    );
    let log_state = state.clone();
    let host_log = Function::new(ctx.clone(), move |text: String| log_state.log(text));
    let (host_call, host_log, host_sleep) = match (host_call, host_log, host_sleep) {
        (Ok(call), Ok(log), Ok(sleep)) => (call, log, sleep),
        (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => {
            return worker_error(error);
        }
    };
    let api = match build_api(&ctx, &setup, [host_call, host_log, host_sleep], &namespaces) {
        Ok(api) => api,
        Err(error) => {
            return worker_error(format!("prelude failed: {}", caught(&ctx, &error, None)));
        }
    };
    let describe: Option<Function> = api.get("describe").ok();
    let mut options = EvalOptions::default();
    options.global = true;
    options.strict = true;
    options.filename = Some(crate::strip::SCRIPT_NAME.to_owned());
    let main: Function = match ctx.eval_with_options(script, options) {
        Ok(main) => main,
        Err(error) => return exception(caught(&ctx, &error, describe.as_ref())),
    };
    let promise: Promise = match api
        .get::<_, Function>("run")
        .and_then(|run| run.call((main,)))
    {
        Ok(promise) => promise,
        Err(error) => return exception(caught(&ctx, &error, describe.as_ref())),
    };
    let wait = state.wake.notified();
    tokio::pin!(wait);
    wait.as_mut().enable();
    if state.stopped.load(Ordering::Acquire) {
        return EngineEnd::Failed(state.reason().unwrap_or_else(|| CodeRunError {
            kind: CodeErrorKind::Abort,
            message: crate::seam::ABORT_REASON.to_owned(),
        }));
    }
    let finished = tokio::select! {
        biased;
        () = &mut wait => None,
        () = tokio::time::sleep_until(state.deadline.into()) => {
            state.wall_exceeded();
            None
        }
        settled = promise.into_future::<Object>() => Some(settled),
    };
    let settled = match finished {
        None => {
            return EngineEnd::Failed(state.reason().unwrap_or_else(|| CodeRunError {
                kind: CodeErrorKind::Abort,
                message: crate::seam::ABORT_REASON.to_owned(),
            }));
        }
        Some(Err(error)) => return exception(caught(&ctx, &error, describe.as_ref())),
        Some(Ok(settled)) => settled,
    };
    let kind: String = settled.get("kind").unwrap_or_default();
    match kind.as_str() {
        "ok" => match settled.get::<_, rquickjs::Value>("value") {
            Ok(value) if value.is_undefined() => EngineEnd::Completed(None),
            Ok(value) => match js_to_json(value) {
                Ok(value) => EngineEnd::Completed(Some(value)),
                Err(_) => invalid_output(),
            },
            Err(_) => EngineEnd::Completed(None),
        },
        "exception" => exception(settled.get::<_, String>("message").unwrap_or_default()),
        _ => invalid_output(),
    }
}

fn invalid_output() -> EngineEnd {
    EngineEnd::Failed(CodeRunError {
        kind: CodeErrorKind::InvalidOutput,
        message: "program completion must be lossless JSON".to_owned(),
    })
}

fn build_api<'js>(
    ctx: &Ctx<'js>,
    setup: &Function<'js>,
    hosts: [Function<'js>; 3],
    namespaces: &[NamespaceSpec],
) -> rquickjs::Result<Object<'js>> {
    let specs = rquickjs::Array::new(ctx.clone())?;
    for (index, namespace) in namespaces.iter().enumerate() {
        let spec = Object::new(ctx.clone())?;
        spec.set("global", namespace.global.as_str())?;
        let names = rquickjs::Array::new(ctx.clone())?;
        for (i, name) in namespace.names.iter().enumerate() {
            names.set(i, name.as_str())?;
        }
        spec.set("names", names)?;
        if let Some((class, member)) = &namespace.error_class {
            let error_class = Object::new(ctx.clone())?;
            error_class.set("name", class.as_str())?;
            error_class.set("member", member.as_str())?;
            spec.set("errorClass", error_class)?;
        }
        specs.set(index, spec)?;
    }
    let messages = Object::new(ctx.clone())?;
    messages.set("argsGetter", ARGS_GETTER_PREFIX)?;
    messages.set("argsLossy", ARGS_LOSSY)?;
    let [host_call, host_log, host_sleep] = hosts;
    setup.call((host_call, host_log, host_sleep, specs, messages))
}
