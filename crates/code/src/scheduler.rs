//! The per-run sub-call scheduler. One ordered driver lane runs the start-event append,
//! `prepare` and the head-of-line commit; only around-dispatch + body of different sub-calls
//! overlap (spawned tasks). Starts and commits happen in submission order.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use dsh_kernel::BoxFuture;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_tools::Dispatched;
use dsh_tools::Execution;
use dsh_tools::ExecutionMode;
use dsh_tools::Prepared;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolResult;
use dsh_tools::ToolRun;
use futures::FutureExt;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::bridge::RunOver;
use crate::bridge::SETTLED;
use crate::log::CodeDispatchEvent;
use crate::log::DispatchLog;
use crate::log::DispatchLogInput;
use crate::seam::BindingError;
use crate::seam::RunOverFate;
use crate::transport::CodeMode;

/// The plugin name image-forwarding contexts carry.
pub const IMAGE_CONTEXT_PLUGIN: &str = "tools-code-mode";

/// How the scheduler answers a binding.
pub(crate) enum SubReply {
    /// The sub-call settled: its canonical value or its failure message.
    Settled(Result<Value, BindingError>),
    /// The call was still queued when the run settled (the exact rejection).
    Abandoned(BindingError),
}

/// One accepted binding call, in submission order.
pub(crate) struct Submission {
    pub n: u64,
    pub name: String,
    pub args: Value,
    pub logged: Value,
    pub reply: oneshot::Sender<SubReply>,
}

enum Stage {
    Running,
    Post(Arc<ToolResult>),
    Final(Arc<ToolResult>),
}

struct Started {
    n: u64,
    name: String,
    sub_call_id: String,
    logged: Value,
    reply: Option<oneshot::Sender<SubReply>>,
    exec: Arc<Execution>,
    exclusive: bool,
    stage: Stage,
}

pub(crate) struct Driver {
    registry: Arc<ToolRegistry>,
    code_mode: Arc<CodeMode>,
    outer: ToolRun,
    controller: CancellationToken,
    over: Arc<RunOver>,
    max_parallel: usize,
    log: Option<DispatchLog>,
    queue: VecDeque<Submission>,
    started: VecDeque<Started>,
    running: usize,
    bodies: FuturesUnordered<BoxFuture<'static, (u64, Dispatched)>>,
    appends: FuturesUnordered<BoxFuture<'static, ()>>,
}

impl Driver {
    pub fn new(
        registry: Arc<ToolRegistry>,
        code_mode: Arc<CodeMode>,
        outer: ToolRun,
        controller: CancellationToken,
        over: Arc<RunOver>,
        max_parallel: usize,
    ) -> Self {
        let log = outer
            .agent()
            .and_then(|agent| dsh_plugin::SessionContext::of(agent.scope()))
            .map(DispatchLog);
        Self {
            registry,
            code_mode,
            outer,
            controller,
            over,
            max_parallel,
            log,
            queue: VecDeque::new(),
            started: VecDeque::new(),
            running: 0,
            bodies: FuturesUnordered::new(),
            appends: FuturesUnordered::new(),
        }
    }

    /// `registry.execution_mode` applies the §5.2 collapse, which a nested call is exempt from
    /// (the seam takes no parent); classify against the visible definition instead, fail-closed.
    fn mode_of(&self, name: &str, args: &Value) -> ExecutionMode {
        let subject = self.outer.agent().map(|a| a.scope());
        match self.registry.get(name, subject) {
            Some(definition) if definition.is_concurrency_safe(args) => ExecutionMode::Parallel,
            _ => ExecutionMode::Exclusive,
        }
    }

    fn can_start(&self, next: &Submission) -> bool {
        match self.mode_of(&next.name, &next.args) {
            ExecutionMode::Parallel => {
                !self.started.iter().any(|s| s.exclusive) && self.running < self.max_parallel
            }
            ExecutionMode::Exclusive => self.started.is_empty(),
        }
    }

    /// Runs until the program settled, every started call committed and every append landed.
    pub async fn drive(
        mut self,
        mut submissions: mpsc::UnboundedReceiver<Submission>,
        mut settled: oneshot::Receiver<()>,
    ) {
        let mut is_settled = false;
        let mut closed = false;
        loop {
            // Submissions first: a call is classified against the pool as it was when the
            // program submitted it, before later settlements are processed.
            while !closed && let Ok(next) = submissions.try_recv() {
                if is_settled {
                    let reason = self.over.reason().unwrap_or_else(|| SETTLED.to_owned());
                    reject_abandoned(next, &reason);
                } else {
                    self.accept(next).await;
                }
            }
            if self
                .started
                .front()
                .is_some_and(|s| !matches!(s.stage, Stage::Running))
            {
                self.commit().await;
                continue;
            }
            if !is_settled
                && self.over.reason().is_none()
                && let Some(next) = self.queue.front()
                && self.can_start(next)
                && let Some(next) = self.queue.pop_front()
            {
                self.start(next).await;
                continue;
            }
            if is_settled && self.started.is_empty() {
                break;
            }
            tokio::select! {
                biased;
                next = submissions.recv(), if !closed => match next {
                    Some(next) if is_settled => {
                        let reason = self.over.reason().unwrap_or_else(|| SETTLED.to_owned());
                        reject_abandoned(next, &reason);
                    }
                    Some(next) => self.accept(next).await,
                    None => closed = true,
                },
                Some((n, dispatched)) = self.bodies.next(), if !self.bodies.is_empty() => {
                    self.running = self.running.saturating_sub(1);
                    if let Some(entry) = self.started.iter_mut().find(|s| s.n == n) {
                        entry.stage = match dispatched {
                            Dispatched::Post(result) => Stage::Post(result),
                            Dispatched::Final(result) => Stage::Final(result),
                        };
                    }
                }
                _ = &mut settled, if !is_settled => {
                    is_settled = true;
                    self.catch_up(&mut submissions).await;
                    self.abandon();
                }
                Some(()) = self.appends.next(), if !self.appends.is_empty() => {}
            }
        }
        while self.appends.next().await.is_some() {}
    }

    /// Upstream starts a call synchronously with its submission when the pool admits it, so
    /// a call submitted just before the program completed has already started; one that had
    /// to queue is abandoned at settlement. After an outer abort nothing new starts.
    async fn accept(&mut self, next: Submission) {
        let admissible = matches!(self.over.reason().as_deref(), None | Some(SETTLED))
            && self.queue.is_empty()
            && self.can_start(&next);
        if admissible {
            self.start(next).await;
        } else {
            self.queue.push_back(next);
        }
    }

    async fn catch_up(&mut self, submissions: &mut mpsc::UnboundedReceiver<Submission>) {
        while let Ok(next) = submissions.try_recv() {
            self.accept(next).await;
        }
    }

    fn abandon(&mut self) {
        let reason = self.over.reason().unwrap_or_else(|| SETTLED.to_owned());
        for next in std::mem::take(&mut self.queue) {
            reject_abandoned(next, &reason);
        }
    }

    async fn start(&mut self, next: Submission) {
        let Submission {
            n,
            name,
            args,
            logged,
            reply,
        } = next;
        let exclusive = self.mode_of(&name, &args) == ExecutionMode::Exclusive;
        let sub_call_id = format!("{}:code:{n}", self.outer.call_id());
        if let Some(log) = &self.log {
            log.append(CodeDispatchEvent::Start {
                root_call_id: self.outer.root_call_id().to_owned(),
                parent_call_id: self.outer.call_id().to_owned(),
                sub_call_id: sub_call_id.clone(),
                name: name.clone(),
                arguments: dsh_schema::clone_deep(&logged),
            })
            .await;
        }
        let mut input = ToolCallInput::new(
            sub_call_id.clone(),
            name.clone(),
            args,
            self.controller.clone(),
        )
        .root_call_id(self.outer.root_call_id())
        .parent(self.outer.token());
        if let Some(agent) = self.outer.agent() {
            input = input.agent(agent.clone());
        }
        let (exec, stage) = match self.registry.prepare(input).await {
            Prepared::Dispatch(exec) => {
                let registry = self.registry.clone();
                let body_exec = exec.clone();
                let task = tokio::spawn(async move { registry.dispatch(&body_exec).await });
                self.bodies.push(Box::pin(task.map(move |joined| {
                    let dispatched = joined.unwrap_or_else(|error| {
                        let failure = ToolError::new(format!("sub-call task failed: {error}"));
                        Dispatched::Final(Arc::new(ToolResult::from_error(&failure)))
                    });
                    (n, dispatched)
                })));
                self.running += 1;
                (exec, Stage::Running)
            }
            Prepared::Post(exec, result) => (exec, Stage::Post(result)),
            Prepared::Final(exec, result) => (exec, Stage::Final(result)),
        };
        self.started.push_back(Started {
            n,
            name,
            sub_call_id,
            logged,
            reply: Some(reply),
            exec,
            exclusive,
            stage,
        });
    }

    async fn commit(&mut self) {
        let Some(mut entry) = self.started.pop_front() else {
            return;
        };
        let result = match std::mem::replace(&mut entry.stage, Stage::Running) {
            Stage::Post(result) => self.registry.finalize(&entry.exec, result).await,
            Stage::Final(result) => self.registry.finish(&entry.exec, result),
            Stage::Running => return,
        };
        if !result.is_error
            && result
                .content
                .iter()
                .any(|block| matches!(block, ContentBlock::Image { .. }))
        {
            self.outer.defer_context(Message::user(
                result.content.clone(),
                MessageSource::plugin(IMAGE_CONTEXT_PLUGIN),
            ));
        }
        for context in &result.additional_contexts {
            self.outer.defer_context(context.clone());
        }
        if result.concludes_turn {
            self.outer.conclude_turn();
        }
        let outcome = match (&result.value, &result.error) {
            (Some(value), _) if !result.is_error => Ok(dsh_schema::clone_deep(value)),
            (_, Some(error)) => Err(BindingError::Failed(error.message.clone())),
            _ => Err(BindingError::Failed(dsh_protocol::text_of(&result.content))),
        };
        if let Some(reply) = entry.reply.take() {
            // The program may have stopped listening; the event is still logged.
            let _ = reply.send(SubReply::Settled(outcome));
        }
        if let Some(log) = self.log.clone() {
            let input = DispatchLogInput {
                name: entry.name.clone(),
                sub_call_id: entry.sub_call_id.clone(),
                is_error: result.is_error,
                content: result.content.clone(),
            };
            let hook = self.code_mode.clone();
            let subject = self.outer.agent().map(|a| a.scope().clone());
            let event_base = (
                self.outer.root_call_id().to_owned(),
                self.outer.call_id().to_owned(),
                entry.sub_call_id.clone(),
                entry.name.clone(),
                std::mem::take(&mut entry.logged),
                result.is_error,
            );
            self.appends.push(Box::pin(async move {
                let original = input.content.clone();
                let name = input.name.clone();
                let base = |input: DispatchLogInput| -> BoxFuture<'static, _> {
                    Box::pin(std::future::ready(Ok(input.content)))
                };
                let filtered =
                    AssertUnwindSafe(hook.dispatch_log.dispatch(subject.as_ref(), input, base))
                        .catch_unwind()
                        .await;
                let content = match filtered {
                    Ok(Ok(content)) => content,
                    Ok(Err(error)) => {
                        contained(&name, &error.message);
                        original
                    }
                    Err(payload) => {
                        contained(&name, &ToolError::from_panic(payload.as_ref()).message);
                        original
                    }
                };
                let (root_call_id, parent_call_id, sub_call_id, name, arguments, is_error) =
                    event_base;
                log.append(CodeDispatchEvent::Settle {
                    root_call_id,
                    parent_call_id,
                    sub_call_id,
                    name,
                    arguments,
                    is_error,
                    content,
                })
                .await;
            }));
            while self.appends.len() > self.max_parallel {
                self.appends.next().await;
            }
        }
        dsh_schema::drop_deep(std::mem::take(&mut entry.logged));
    }
}

fn contained(name: &str, message: &str) {
    tracing::warn!(
        "tools: code-dispatch-log listener failed for {name}: {message}; logging the original settled content"
    );
}

fn reject_abandoned(submission: Submission, reason: &str) {
    let Submission {
        name,
        args,
        logged,
        reply,
        ..
    } = submission;
    let _ = reply.send(SubReply::Abandoned(BindingError::RunOver {
        reason: reason.to_owned(),
        name,
        fate: RunOverFate::Abandoned,
    }));
    dsh_schema::drop_deep(args);
    dsh_schema::drop_deep(logged);
}
