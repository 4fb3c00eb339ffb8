//! The workspace-instructions capability on the agent loop: a pre-step listener that records
//! the baseline (and later deltas) as logged `user/message`s, and a tool-result observer that
//! turns successful `read`/`write`/`edit` calls into refreshes.
//!
//! Placement (§1.4): the listener runs after the inner chain and splices its message right
//! after the last claimed message. Refreshes go through the next-step inbox, so they land after
//! the tool results of the step that touched the file.

use dsh_sync::lock;
use std::collections::HashMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentEvent;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PreStepDecision;
use dsh_agent::PreStepInput;
use dsh_agent::prompt::SNAPSHOT_PLUGIN;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::Message;
use dsh_tools::ExecutionToken;
use dsh_tools::ResultEvent;
use dsh_tools::ToolRegistry;
use serde_json::Value;

use crate::compose::Cache;
use crate::compose::Composer;
use crate::compose::is_instructions;
use crate::compose::merge;
use crate::config::InstructionsConfig;
use crate::fs::InstructionFs;

/// The file tools whose successful calls touch a path.
pub const TOUCHING_TOOLS: [&str; 3] = ["read", "write", "edit"];

#[derive(Default)]
struct Touches {
    /// Released touches per agent, waiting for the next pre-step.
    staged: HashMap<String, Vec<PathBuf>>,
    /// Touches of nested executions, held until their top-level execution's result.
    nested: HashMap<ExecutionToken, Vec<PathBuf>>,
}

/// The filesystem a given session's instructions are read through (`None`: no provider for
/// it, the capability does nothing there).
pub type FsProvider = Arc<dyn Fn(&AgentHandle) -> Option<Arc<dyn InstructionFs>> + Send + Sync>;

/// One provider for every session.
pub fn same_fs(fs: Arc<dyn InstructionFs>) -> FsProvider {
    Arc::new(move |_| Some(fs.clone()))
}

/// The capability for one composition (all agents).
pub struct WorkspaceInstructions {
    config: InstructionsConfig,
    fs: FsProvider,
    caches: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Cache>>>>,
    touches: Mutex<Touches>,
    agents: Mutex<HashMap<String, AgentHandle>>,
}

impl std::fmt::Debug for WorkspaceInstructions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceInstructions")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn is_snapshot(message: &Message) -> bool {
    message.source.kind() == "plugin"
        && message.source.get("plugin").and_then(Value::as_str) == Some(SNAPSHOT_PLUGIN)
}

impl WorkspaceInstructions {
    pub fn new(config: InstructionsConfig, fs: FsProvider) -> Arc<Self> {
        Arc::new(Self {
            config,
            fs,
            caches: Mutex::new(HashMap::new()),
            touches: Mutex::new(Touches::default()),
            agents: Mutex::new(HashMap::new()),
        })
    }

    /// Mounts the listeners. Without a filesystem provider, or with `maxBytes <= 0`, the
    /// capability is a no-op and registers nothing.
    pub fn mount(
        config: InstructionsConfig,
        fs: Option<FsProvider>,
        owner: &Scope,
        hooks: &AgentHooks,
        tools: &ToolRegistry,
    ) -> Vec<Disposer> {
        let Some(fs) = fs else {
            return Vec::new();
        };
        if config.max_bytes.is_none() {
            return Vec::new();
        }
        Self::new(config, fs).install(owner, hooks, tools)
    }

    /// Registers the pre-step listener, the result observer and the disposal cleanup.
    pub fn install(
        self: &Arc<Self>,
        owner: &Scope,
        hooks: &AgentHooks,
        tools: &ToolRegistry,
    ) -> Vec<Disposer> {
        let this = self.clone();
        let pre_step = hooks
            .pre_step
            .register(owner, move |input: PreStepInput, next| {
                let this = this.clone();
                Box::pin(async move {
                    let agent = input.agent.clone();
                    let step = input.step;
                    let signal = input.signal.clone();
                    let claimed: Vec<String> = input
                        .messages
                        .iter()
                        .filter(|m| !is_snapshot(m))
                        .map(|m| m.id.clone())
                        .collect();
                    let decision = next.run(input).await?;
                    if signal.is_cancelled() {
                        return Ok(decision);
                    }
                    Ok(this.after_pre_step(&agent, step, &claimed, decision).await)
                })
            });
        let this = self.clone();
        let results = tools.results().register(owner, move |event: &ResultEvent| {
            this.observe(event);
            Ok(())
        });
        let this = self.clone();
        let disposed = hooks.events.register(owner, move |event: &AgentEvent| {
            if let AgentEvent::Disposed { agent } = event {
                this.forget(agent);
            }
            Ok(())
        });
        vec![pre_step, results, disposed]
    }

    fn forget(&self, agent: &str) {
        lock(&self.agents).remove(agent);
        lock(&self.caches).remove(agent);
        lock(&self.touches).staged.remove(agent);
    }

    fn cache(&self, agent: &str) -> Arc<tokio::sync::Mutex<Cache>> {
        lock(&self.caches)
            .entry(agent.to_owned())
            .or_default()
            .clone()
    }

    fn surface(agent: &AgentHandle) -> Vec<Arc<Message>> {
        agent
            .log()
            .derive_messages()
            .iter()
            .filter(|m| is_instructions(&m.source))
            .cloned()
            .collect()
    }

    fn pending(agent: &AgentHandle) -> Vec<Message> {
        agent
            .pending()
            .1
            .into_iter()
            .filter(|m| is_instructions(&m.source))
            .collect()
    }

    async fn after_pre_step(
        &self,
        agent: &AgentHandle,
        step: u64,
        claimed: &[String],
        decision: PreStepDecision,
    ) -> PreStepDecision {
        let Some(cwd) = agent.cwd().map(PathBuf::from) else {
            return decision;
        };
        let Some(fs) = (self.fs)(agent) else {
            return decision;
        };
        lock(&self.agents).insert(agent.id().to_owned(), agent.clone());
        let cache = self.cache(agent.id());
        let mut cache = cache.lock().await;
        let staged = lock(&self.touches)
            .staged
            .remove(agent.id())
            .unwrap_or_default();
        if !staged.is_empty() {
            queue(&self.config, fs.as_ref(), agent, &cwd, &mut cache, &staged);
        }
        match decision {
            PreStepDecision::Reject => {
                queue(&self.config, fs.as_ref(), agent, &cwd, &mut cache, &[]);
                PreStepDecision::Reject
            }
            PreStepDecision::Enter(messages) if step == 1 && messages.is_empty() => {
                queue(&self.config, fs.as_ref(), agent, &cwd, &mut cache, &[]);
                PreStepDecision::Enter(messages)
            }
            PreStepDecision::Enter(mut messages) => {
                let pending = Self::pending(agent);
                for message in &pending {
                    if let Err(error) = agent.remove_pending(&message.id, None) {
                        tracing::warn!(agent = %agent.id(), %error, "workspace instructions: cannot take a pending message");
                        return PreStepDecision::Enter(messages);
                    }
                }
                let surface = Self::surface(agent);
                let surface: Vec<&Message> = surface.iter().map(AsRef::as_ref).collect();
                let mut authority: Vec<&Message> = messages
                    .iter()
                    .filter(|m| is_instructions(&m.source))
                    .collect();
                authority.extend(pending.iter());
                let composer = Composer::new(&self.config, fs.as_ref(), &cwd);
                let composed = composer.compose(&mut cache, &surface, &authority, &[], false);
                let mut insert = pending;
                if let Some(composed) = composed
                    && !messages
                        .iter()
                        .chain(&insert)
                        .any(|m| m.content == composed.content && m.source == composed.source)
                {
                    insert.push(composed);
                }
                let at = messages
                    .iter()
                    .rposition(|m| claimed.contains(&m.id))
                    .map_or(0, |i| i + 1);
                messages.splice(at..at, insert);
                PreStepDecision::Enter(messages)
            }
        }
    }

    fn observe(&self, event: &ResultEvent) {
        let exec = &event.exec;
        let mut touched = Vec::new();
        if !event.result.is_error
            && TOUCHING_TOOLS.contains(&exec.name())
            && exec.agent().is_some()
            && !exec.signal().is_cancelled()
            && let Some(path) = exec
                .arguments()
                .and_then(|a| a.get("file_path"))
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|p| !p.is_empty())
        {
            touched.push(PathBuf::from(path));
        }
        let mut touches = lock(&self.touches);
        if let Some(nested) = touches.nested.remove(&exec.token()) {
            touched.extend(nested);
        }
        if touched.is_empty() {
            return;
        }
        if let Some(parent) = exec.parent() {
            touches.nested.entry(parent).or_default().extend(touched);
            return;
        }
        let Some(agent_id) = exec.agent().map(|a| a.id().to_owned()) else {
            return;
        };
        let idle_agent = lock(&self.agents)
            .get(&agent_id)
            .filter(|a| a.log().turn_state().open_step.is_none())
            .cloned();
        match idle_agent {
            // Outside a step: project now.
            Some(agent) => {
                drop(touches);
                self.spawn_projection(agent, touched);
            }
            None => touches.staged.entry(agent_id).or_default().extend(touched),
        }
    }

    fn spawn_projection(&self, agent: AgentHandle, touched: Vec<PathBuf>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            lock(&self.touches)
                .staged
                .entry(agent.id().to_owned())
                .or_default()
                .extend(touched);
            return;
        };
        let Some(cwd) = agent.cwd().map(PathBuf::from) else {
            return;
        };
        let Some(fs) = (self.fs)(&agent) else {
            return;
        };
        let cache = self.cache(agent.id());
        let config = self.config.clone();
        runtime.spawn(async move {
            let mut cache = cache.lock().await;
            queue(&config, fs.as_ref(), &agent, &cwd, &mut cache, &touched);
        });
    }
}

/// Composes against the visible state plus the pending workspace message and queues the
/// result in next-step: merged into the pending message, or prepended.
fn queue(
    config: &InstructionsConfig,
    fs: &dyn InstructionFs,
    agent: &AgentHandle,
    cwd: &Path,
    cache: &mut Cache,
    touched: &[PathBuf],
) {
    let pending = WorkspaceInstructions::pending(agent);
    let surface = WorkspaceInstructions::surface(agent);
    let surface: Vec<&Message> = surface.iter().map(AsRef::as_ref).collect();
    let authority: Vec<&Message> = pending.iter().collect();
    let composer = Composer::new(config, fs, cwd);
    let Some(composed) =
        composer.compose(cache, &surface, &authority, touched, !touched.is_empty())
    else {
        return;
    };
    let outcome = match pending.first() {
        Some(first) => agent
            .remove_pending(&first.id, Some(merge(first, &composed)))
            .map(drop),
        None => agent.prepend_next_step(composed),
    };
    if let Err(error) = outcome {
        tracing::warn!(agent = %agent.id(), %error, "workspace instructions: cannot queue the refresh");
    }
}
