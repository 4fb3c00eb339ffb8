//! The dispatch bridge (tool-runtime-spec §7.3): `run_code`'s body, the bindings, and the
//! per-run scheduler that runs every sub-call through the whole tool pipeline.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use dsh_tools::RUN_CODE;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use indexmap::IndexMap;
use serde_json::Map;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::scheduler::Driver;
use crate::scheduler::SubReply;
use crate::scheduler::Submission;
use crate::seam::ABORT_REASON;
use crate::seam::BindingError;
use crate::seam::BindingFn;
use crate::seam::CodeBindingNamespace;
use crate::seam::CodeRunRequest;
use crate::seam::ErrorClass;
use crate::seam::RunOverFate;
use crate::transport::CodeMode;
use crate::transport::CodeModeError;

/// Why the run is over (`run_code settled` or the outer abort reason); `None` while live.
#[derive(Default)]
pub(crate) struct RunOver(Mutex<Option<String>>);

impl RunOver {
    pub fn reason(&self) -> Option<String> {
        dsh_sync::lock(&self.0).clone()
    }
    /// Marks the run over (first reason wins) and aborts the run controller.
    pub fn end(&self, reason: &str, controller: &CancellationToken) {
        {
            let mut slot = dsh_sync::lock(&self.0);
            if slot.is_none() {
                *slot = Some(reason.to_owned());
            }
        }
        controller.cancel();
    }
}

pub(crate) const SETTLED: &str = "run_code settled";

pub(crate) async fn run_code(
    code_mode: Arc<CodeMode>,
    args: Value,
    run: ToolRun,
) -> Result<Value, ToolError> {
    let description = args
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    if description.trim().is_empty() {
        return Err(ToolError::new(
            "invalid description: expected a non-empty string",
        ));
    }
    let code = args
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let Some(registry) = code_mode.registry.upgrade() else {
        return Err(ToolError::new("tool registry is gone"));
    };
    let subject = run.agent().map(|a| a.scope().clone());
    let Some(runtime) = code_mode.runtime_for(subject.as_ref()) else {
        let mode = registry.mode_for(None).as_str().to_owned();
        return Err(ToolError::new(
            CodeModeError::MissingRuntime { mode }.to_string(),
        ));
    };
    let controller = CancellationToken::new();
    let over = Arc::new(RunOver::default());
    let (submit, submissions) = mpsc::unbounded_channel::<Submission>();
    let counter = Arc::new(AtomicU64::new(0));
    let mut functions: IndexMap<String, BindingFn> = IndexMap::new();
    for definition in registry.view(subject.as_ref()) {
        let name = definition.name().to_owned();
        if name == RUN_CODE {
            continue;
        }
        functions.insert(
            name.clone(),
            binding(name, submit.clone(), counter.clone(), over.clone()),
        );
    }
    drop(submit);
    let request = CodeRunRequest {
        program: code,
        bindings: vec![CodeBindingNamespace {
            global: "tools".to_owned(),
            functions,
            error_class: Some(ErrorClass {
                name: "ToolCallError".to_owned(),
                member_name_property: "toolName".to_owned(),
            }),
        }],
        signal: Some(controller.clone()),
    };
    let driver = Driver::new(
        registry,
        code_mode.clone(),
        run.clone(),
        controller.clone(),
        over.clone(),
        code_mode.config.max_parallel_sub_calls,
    );
    let (settled_tx, settled_rx) = oneshot::channel::<()>();
    let outer = run.signal().clone();
    let runner = async {
        let outcome = runtime.run(request).await;
        over.end(SETTLED, &controller);
        let _ = settled_tx.send(());
        outcome
    };
    let watcher = async {
        tokio::select! {
            () = outer.cancelled() => over.end(ABORT_REASON, &controller),
            () = controller.cancelled() => {}
        }
    };
    let (outcome, (), ()) = tokio::join!(runner, driver.drive(submissions, settled_rx), watcher);
    let result = outcome.map_err(|error| ToolError::new(error.to_string()))?;
    if let Some(error) = result.error {
        let mut message = format!(
            "code run failed ({}): {}",
            error.kind.as_str(),
            error.message
        );
        if !result.logs.is_empty() {
            message.push_str("\nCaptured output:\n");
            message.push_str(&result.logs.join("\n"));
        }
        return Err(ToolError::coded(
            "CodeRunFailedError",
            "CODE_RUN_FAILED",
            message,
        ));
    }
    let mut value = Map::new();
    value.insert(
        "logs".to_owned(),
        Value::Array(result.logs.into_iter().map(Value::String).collect()),
    );
    if let Some(result) = result.value {
        value.insert("result".to_owned(), result);
    }
    Ok(Value::Object(value))
}

fn binding(
    name: String,
    submit: mpsc::UnboundedSender<Submission>,
    counter: Arc<AtomicU64>,
    over: Arc<RunOver>,
) -> BindingFn {
    Arc::new(move |args: Value| {
        let name = name.clone();
        if let Some(reason) = over.reason() {
            return Box::pin(std::future::ready(Err(BindingError::RunOver {
                reason,
                name,
                fate: RunOverFate::NotDispatched,
            })));
        }
        if !dsh_schema::is_lossless(&args) {
            return Box::pin(std::future::ready(Err(BindingError::ToolArgumentsLossy)));
        }
        let logged = dsh_schema::clone_deep(&args);
        let n = counter.fetch_add(1, Ordering::AcqRel) + 1;
        let (reply, answer) = oneshot::channel();
        let sent = submit.send(Submission {
            n,
            name: name.clone(),
            args,
            logged,
            reply,
        });
        let over = over.clone();
        Box::pin(async move {
            if sent.is_err() {
                let reason = over.reason().unwrap_or_else(|| SETTLED.to_owned());
                return Err(BindingError::RunOver {
                    reason,
                    name,
                    fate: RunOverFate::NotDispatched,
                });
            }
            let outcome = match answer.await {
                Ok(SubReply::Settled(outcome)) => outcome,
                Ok(SubReply::Abandoned(error)) => return Err(error),
                Err(_) => {
                    let reason = over.reason().unwrap_or_else(|| SETTLED.to_owned());
                    return Err(BindingError::RunOver {
                        reason,
                        name,
                        fate: RunOverFate::Abandoned,
                    });
                }
            };
            if let Some(reason) = over.reason() {
                return Err(BindingError::RunOver {
                    reason,
                    name,
                    fate: RunOverFate::Discarded,
                });
            }
            outcome
        })
    })
}
