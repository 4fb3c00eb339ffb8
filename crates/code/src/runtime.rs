//! The shipped backend: QuickJS on a dedicated thread per run (language `typescript`).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::engine;
use crate::engine::EngineEnd;
use crate::engine::HostCall;
use crate::engine::NamespaceSpec;
use crate::engine::RunState;
use crate::seam::ABORT_REASON;
use crate::seam::BindingError;
use crate::seam::CodeErrorKind;
use crate::seam::CodeRunRequest;
use crate::seam::CodeRunResult;
use crate::seam::CodeRuntime;
use crate::seam::CodeRuntimeError;
use crate::seam::validate_bindings;

/// Budgets of one run (every value positive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuickJsConfig {
    /// Busy (executing) time budget.
    pub compute_ms: u64,
    /// Wall-clock ceiling, waits included.
    pub max_wall_ms: u64,
    /// Combined output ledger (JSON size of logs plus value or failure message); at least 4.
    pub max_output_bytes: usize,
    /// Engine heap limit.
    pub memory_mb: usize,
}

impl Default for QuickJsConfig {
    fn default() -> Self {
        Self {
            compute_ms: 60_000,
            max_wall_ms: 600_000,
            max_output_bytes: 64 * 1024 * 1024,
            memory_mb: 512,
        }
    }
}

/// A configuration value out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid code runtime config: {0}")]
pub struct ConfigError(pub String);

impl QuickJsConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.compute_ms == 0 || self.max_wall_ms == 0 || self.memory_mb == 0 {
            return Err(ConfigError(
                "computeMs, maxWallMs and memory must be positive".to_owned(),
            ));
        }
        if self.max_wall_ms > 2_147_483_647 {
            return Err(ConfigError("maxWallMs must be <= 2147483647".to_owned()));
        }
        if self.max_output_bytes < 4 {
            return Err(ConfigError("maxOutputBytes must be >= 4".to_owned()));
        }
        Ok(())
    }
}

/// The QuickJS code runtime. No state survives between runs: each run gets a fresh engine.
pub struct QuickJsRuntime {
    config: QuickJsConfig,
    disposed: CancellationToken,
    live: Arc<(AtomicUsize, Notify)>,
}

impl QuickJsRuntime {
    pub fn new(config: QuickJsConfig) -> Result<Arc<Self>, ConfigError> {
        config.validate()?;
        Ok(Arc::new(Self {
            config,
            disposed: CancellationToken::new(),
            live: Arc::new((AtomicUsize::new(0), Notify::new())),
        }))
    }

    pub fn config(&self) -> QuickJsConfig {
        self.config
    }

    /// Aborts live runs (`runtime disposed`) and waits for them; later runs are refused.
    pub async fn dispose(&self) {
        self.disposed.cancel();
        loop {
            let notified = self.live.1.notified();
            if self.live.0.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

struct LiveGuard(Arc<(AtomicUsize, Notify)>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::AcqRel);
        self.0.1.notify_waiters();
    }
}

impl CodeRuntime for QuickJsRuntime {
    fn language(&self) -> &str {
        "typescript"
    }
    fn isolation(&self) -> &str {
        "worker-thread"
    }
    fn run(
        &self,
        request: CodeRunRequest,
    ) -> BoxFuture<'static, Result<CodeRunResult, CodeRuntimeError>> {
        if self.disposed.is_cancelled() {
            return Box::pin(std::future::ready(Err(CodeRuntimeError::Disposed)));
        }
        if let Err(error) = validate_bindings(&request.bindings) {
            return Box::pin(std::future::ready(Err(error)));
        }
        self.live.0.fetch_add(1, Ordering::AcqRel);
        let guard = LiveGuard(self.live.clone());
        let config = self.config;
        let disposed = self.disposed.clone();
        Box::pin(async move {
            let result = run(config, request, disposed).await;
            drop(guard);
            Ok(result)
        })
    }
}

type Pending = BoxFuture<
    'static,
    (
        tokio::sync::oneshot::Sender<Result<Value, BindingError>>,
        Result<Value, BindingError>,
    ),
>;

async fn run(
    config: QuickJsConfig,
    request: CodeRunRequest,
    disposed: CancellationToken,
) -> CodeRunResult {
    let signal = request.signal.clone().unwrap_or_default();
    if signal.is_cancelled() {
        return CodeRunResult::failed(CodeErrorKind::Abort, ABORT_REASON, Vec::new());
    }
    let mut params: Vec<String> = request.bindings.iter().map(|n| n.global.clone()).collect();
    params.extend(
        request
            .bindings
            .iter()
            .filter_map(|n| n.error_class.as_ref().map(|c| c.name.clone())),
    );
    params.push("console".to_owned());
    let namespaces = request
        .bindings
        .iter()
        .map(|n| NamespaceSpec {
            global: n.global.clone(),
            names: n.functions.keys().cloned().collect(),
            error_class: n
                .error_class
                .as_ref()
                .map(|c| (c.name.clone(), c.member_name_property.clone())),
        })
        .collect();
    let state = RunState::new(
        config.max_wall_ms,
        config.compute_ms,
        config.max_output_bytes,
    );
    let (calls, mut incoming) = mpsc::unbounded_channel::<HostCall>();
    let mut ended = engine::spawn(engine::EngineJob {
        program: request.program.clone(),
        params,
        namespaces,
        memory_bytes: config.memory_mb.saturating_mul(1024 * 1024),
        calls,
        state: state.clone(),
    });
    let mut pending: FuturesUnordered<Pending> = FuturesUnordered::new();
    let mut aborted = false;
    let end = loop {
        tokio::select! {
            biased;
            end = &mut ended => break end.unwrap_or_else(|_| EngineEnd::Failed(crate::seam::CodeRunError {
                kind: CodeErrorKind::WorkerExit,
                message: "worker exited before completing".to_owned(),
            })),
            () = signal.cancelled(), if !aborted => {
                aborted = true;
                state.stop(CodeErrorKind::Abort, ABORT_REASON);
            }
            () = disposed.cancelled(), if !aborted => {
                aborted = true;
                state.stop(CodeErrorKind::Abort, "runtime disposed");
            }
            Some(call) = incoming.recv() => {
                let binding = request
                    .bindings
                    .get(call.namespace)
                    .and_then(|n| n.functions.get(&call.name).map(|f| (n, f)));
                match binding {
                    None => {
                        let global = request.bindings.get(call.namespace).map_or("", |n| n.global.as_str());
                        let _ = call.reply.send(Err(BindingError::Unknown { global: global.to_owned(), name: call.name }));
                    }
                    Some(_) if !dsh_schema::is_lossless(&call.args) => {
                        let _ = call.reply.send(Err(BindingError::ArgumentsNotJson));
                    }
                    Some((_, function)) => {
                        let answer = function(call.args);
                        let reply = call.reply;
                        pending.push(answer.map(move |outcome| (reply, outcome)).boxed());
                    }
                }
            }
            Some((reply, outcome)) = pending.next(), if !pending.is_empty() => {
                let outcome = match outcome {
                    Ok(value) if !dsh_schema::is_lossless(&value) => {
                        Err(BindingError::ResolutionNotJson)
                    }
                    other => other,
                };
                // The program may have stopped waiting; a dropped receiver is fine.
                let _ = reply.send(outcome);
            }
        }
    };
    // Calls the program made before completing reach their bindings (in order) even though
    // nobody awaits the answers any more: upstream's host sees those messages before `done`.
    while let Ok(call) = incoming.try_recv() {
        if let Some(function) = request
            .bindings
            .get(call.namespace)
            .and_then(|n| n.functions.get(&call.name))
            && dsh_schema::is_lossless(&call.args)
        {
            drop(function(call.args));
        }
    }
    drop(pending);
    let ledger = std::mem::replace(&mut *dsh_sync::lock(&state.ledger), engine::Ledger::new(0));
    let max = ledger.max();
    let over = |logs: Vec<String>| {
        CodeRunResult::failed(
            CodeErrorKind::OutputLimit,
            format!("outer output exceeded {max} bytes"),
            logs,
        )
    };
    match end {
        EngineEnd::Completed(value) => {
            let size = value
                .as_ref()
                .map_or(0, |v| dsh_schema::to_js_json(v).len() + 1);
            if !ledger.fits(size) {
                return over(ledger.logs);
            }
            CodeRunResult {
                value,
                logs: ledger.logs,
                error: None,
            }
        }
        EngineEnd::Failed(error) => {
            if error.kind != CodeErrorKind::OutputLimit && !ledger.fits(error.message.len()) {
                return over(ledger.logs);
            }
            CodeRunResult {
                value: None,
                logs: ledger.logs,
                error: Some(error),
            }
        }
    }
}
