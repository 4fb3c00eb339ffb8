//! One bridge instance: a loaded hook file wired to every seam its events use.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Instant;

use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PreStepDecision;
use dsh_agent::PreStepInput;
use dsh_agent::SessionStarted;
use dsh_agent::TurnStopping;
use dsh_agent::prompt::SNAPSHOT_PLUGIN;
use dsh_kernel::Disposer;
use dsh_kernel::HookError;
use dsh_kernel::Scope;
use dsh_plugin::SessionContext;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::text_of;
use dsh_tools::Execution;
use dsh_tools::PostDecision;
use dsh_tools::PostInput;
use dsh_tools::PreDecision;
use dsh_tools::ToolRegistry;
use serde_json::Map;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::DEFAULT_STDERR_SUMMARY_MAX_CHARS;
use crate::DEFAULT_TIMEOUT_MS;
use crate::Dialect;
use crate::Event;
use crate::HookConfigError;
use crate::codec::HookOutput;
use crate::codec::parse_hook_output;
use crate::config::HookFile;
use crate::config::Substitutions;
use crate::event::HookEvent;
use crate::event::summarize_stderr;
use crate::exec::ExecRequest;
use crate::exec::HookExecutor;
use crate::merge::Merged;
use crate::merge::MergedDecision;
use crate::merge::merge_outputs;

/// A bridge's plugin configuration (upstream keys in camelCase).
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeSettings {
    /// The hook file, as configured (and as warnings name it).
    pub config_path: String,
    /// What a relative `config_path` resolves against (default: the process cwd).
    pub base_dir: Option<PathBuf>,
    /// Claude Code: replaces `${CLAUDE_PLUGIN_ROOT}`.
    pub plugin_root: Option<String>,
    /// Claude Code: replaces `${CLAUDE_PROJECT_DIR}` and is hooks' `CLAUDE_PROJECT_DIR`.
    pub project_dir: Option<String>,
    /// Codex: stamped as `model` on every payload.
    pub model: String,
    pub default_timeout_ms: f64,
    /// Validated at load: an integer ≥ 1.
    pub stderr_summary_max_chars: f64,
}

impl BridgeSettings {
    pub fn new(config_path: impl Into<String>) -> Self {
        Self {
            config_path: config_path.into(),
            base_dir: None,
            plugin_root: None,
            project_dir: None,
            model: String::new(),
            default_timeout_ms: DEFAULT_TIMEOUT_MS,
            stderr_summary_max_chars: DEFAULT_STDERR_SUMMARY_MAX_CHARS as f64,
        }
    }

    fn summary_cap(&self, dialect: Dialect) -> Result<usize, HookConfigError> {
        let cap = self.stderr_summary_max_chars;
        if cap.is_finite() && cap >= 1.0 && cap.fract() == 0.0 && cap <= 9_007_199_254_740_991.0 {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            return Ok(cap as usize);
        }
        Err(HookConfigError::SummaryCap(dialect))
    }
}

/// The handler-id counter: one per dialect per process (upstream's module-level counter),
/// incremented on every hook run across points, sessions and agents.
#[derive(Debug, Default)]
pub struct HandlerCounter(AtomicU64);

static CLAUDE_CODE_COUNTER: HandlerCounter = HandlerCounter(AtomicU64::new(0));
static CODEX_COUNTER: HandlerCounter = HandlerCounter(AtomicU64::new(0));

impl HandlerCounter {
    /// The process-wide counter of `dialect`.
    pub fn global(dialect: Dialect) -> &'static Self {
        match dialect {
            Dialect::ClaudeCode => &CLAUDE_CODE_COUNTER,
            Dialect::Codex => &CODEX_COUNTER,
        }
    }

    fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// A subagent lifecycle notification, as the subagent runtime reports it.
#[derive(Debug, Clone)]
pub struct SubagentRun {
    pub run_id: String,
    /// The child's agent id (`agent_id` of the payload).
    pub agent_id: String,
    /// The live in-process child, when there is one (a remote child has none).
    pub child: Option<AgentHandle>,
}

/// The facts of the session a hook point concerns.
struct Site {
    agent: Option<AgentHandle>,
    session_id: String,
    transcript: Option<String>,
    /// The session cwd; `None` without an agent (the executor's default applies).
    cwd: Option<String>,
    /// Where `hook/*` events go: only with an agent and a turn.
    turn: Option<u64>,
}

impl Site {
    fn of(agent: Option<AgentHandle>, turn: Option<u64>) -> Self {
        let Some(agent) = agent else {
            return Self {
                agent: None,
                session_id: String::new(),
                transcript: None,
                cwd: None,
                turn: None,
            };
        };
        let log = agent.log();
        Self {
            session_id: log.header().id.clone(),
            transcript: log.path().map(|p| p.to_string_lossy().into_owned()),
            cwd: log.header().cwd.clone(),
            turn,
            agent: Some(agent),
        }
    }

    fn for_tool(exec: &Execution) -> Self {
        let agent = exec.subject().and_then(AgentHandle::from_scope);
        let turn = agent.as_ref().map(|a| a.log().turn_state().last_turn);
        Self::of(agent, turn)
    }

    fn payload_cwd(&self) -> String {
        self.cwd.clone().unwrap_or_else(|| {
            std::env::current_dir()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
    }

    fn record(&self, event: &HookEvent) {
        let (Some(agent), Some(turn)) = (&self.agent, self.turn) else {
            return;
        };
        if let Err(error) = agent
            .log()
            .append(event.event_type(), event.data(turn), None)
        {
            tracing::warn!(%error, "cannot log a hook event");
        }
    }
}

/// One loaded bridge.
pub struct HookBridge {
    dialect: Dialect,
    file: HookFile,
    settings: BridgeSettings,
    summary_cap: usize,
    executor: Arc<dyn HookExecutor>,
    counter: Arc<dyn Fn() -> u64 + Send + Sync>,
    detached: TaskTracker,
    lifetime: CancellationToken,
    children: Mutex<HashMap<String, Option<AgentHandle>>>,
}

impl std::fmt::Debug for HookBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookBridge")
            .field("dialect", &self.dialect)
            .field("config_path", &self.settings.config_path)
            .finish_non_exhaustive()
    }
}

/// What loading a bridge produced.
pub struct Loaded {
    /// `None` when the hook file could not be loaded: nothing is registered.
    pub bridge: Option<Arc<HookBridge>>,
    /// Warnings already logged (`could not load …`, `skipping …`), for callers to show.
    pub warnings: Vec<String>,
}

impl HookBridge {
    /// Loads a bridge. `Err` (plugin load fails) only for invalid settings; every hook-file
    /// problem is contained: a warning and no bridge.
    pub fn load(
        dialect: Dialect,
        settings: BridgeSettings,
        executor: Arc<dyn HookExecutor>,
        counter: Option<Arc<HandlerCounter>>,
    ) -> Result<Loaded, HookConfigError> {
        let summary_cap = settings.summary_cap(dialect)?;
        let subs = Substitutions {
            plugin_root: settings.plugin_root.clone(),
            project_dir: settings.project_dir.clone(),
        };
        let subs = match dialect {
            Dialect::ClaudeCode => subs,
            Dialect::Codex => Substitutions::default(),
        };
        let path = match &settings.base_dir {
            Some(base) => base
                .join(&settings.config_path)
                .to_string_lossy()
                .into_owned(),
            None => settings.config_path.clone(),
        };
        let file = match HookFile::load(dialect, &path, &subs) {
            Ok(file) => file,
            Err(error) => {
                // Node names the path as it was given to readFileSync.
                let error = match error {
                    crate::config::LoadError::Missing(_) => {
                        crate::config::LoadError::Missing(settings.config_path.clone())
                    }
                    other => other,
                };
                let warning = format!(
                    "{}: could not load hook config \"{}\": {error} — no hooks registered",
                    dialect.plugin(),
                    settings.config_path
                );
                tracing::warn!("{warning}");
                return Ok(Loaded {
                    bridge: None,
                    warnings: vec![warning],
                });
            }
        };
        for warning in &file.skipped {
            tracing::warn!("{warning}");
        }
        let warnings = file.skipped.clone();
        let counter: Arc<dyn Fn() -> u64 + Send + Sync> = match counter {
            Some(counter) => Arc::new(move || counter.next()),
            None => Arc::new(move || HandlerCounter::global(dialect).next()),
        };
        Ok(Loaded {
            bridge: Some(Arc::new(Self {
                dialect,
                file,
                settings,
                summary_cap,
                executor,
                counter,
                detached: TaskTracker::new(),
                lifetime: CancellationToken::new(),
                children: Mutex::new(HashMap::new()),
            })),
            warnings,
        })
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    pub fn file(&self) -> &HookFile {
        &self.file
    }

    /// Registers the listeners of every event that has hooks, owned by `owner`. Disposing
    /// `owner` removes them and aborts detached runs (await [`HookBridge::shutdown`] to wait
    /// for those to settle).
    pub fn install(
        self: &Arc<Self>,
        owner: &Scope,
        registry: &ToolRegistry,
        hooks: &AgentHooks,
    ) -> Vec<Disposer> {
        let mut disposers = Vec::new();
        let has = |event| !self.file.groups(event).is_empty();
        if has(Event::SessionStart) {
            let me = self.clone();
            disposers.push(
                hooks
                    .session_start
                    .register(owner, move |event: &SessionStarted| {
                        me.session_start(event);
                        Ok(())
                    }),
            );
        }
        if has(Event::UserPromptSubmit) {
            let me = self.clone();
            disposers.push(hooks.pre_step.register(owner, move |input, next| {
                let me = me.clone();
                Box::pin(async move { me.user_prompt_submit(input, next).await })
            }));
        }
        if has(Event::PreToolUse) {
            let me = self.clone();
            disposers.push(registry.pre_execute().register(owner, move |exec, next| {
                let me = me.clone();
                Box::pin(async move {
                    match me.pre_tool_use(&exec).await {
                        Some(decision) => Ok(decision),
                        None => next.run(exec).await,
                    }
                })
            }));
        }
        if has(Event::PostToolUse) {
            let me = self.clone();
            disposers.push(registry.post_execute().register(owner, move |input, next| {
                let me = me.clone();
                Box::pin(async move { me.post_tool_use(input, next).await })
            }));
        }
        if has(Event::Stop) {
            let me = self.clone();
            disposers.push(hooks.turn_stopping.register(owner, move |event| {
                let me = me.clone();
                Box::pin(async move {
                    me.stop(&event).await;
                    Ok::<(), HookError>(())
                })
            }));
        }
        let lifetime = self.lifetime.clone();
        disposers.push(owner.defer(move || lifetime.cancel()));
        disposers
    }

    /// Aborts running detached hooks (SessionStart, Subagent*) and resolves once their
    /// continuations settled.
    pub async fn shutdown(&self) {
        self.lifetime.cancel();
        self.detached.close();
        self.detached.wait().await;
    }

    // ----- running -----

    fn base(&self, site: &Site, event: Event) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("session_id".into(), site.session_id.clone().into());
        map.insert(
            "transcript_path".into(),
            match (&site.transcript, self.dialect) {
                (Some(path), _) => path.clone().into(),
                (None, Dialect::ClaudeCode) => "".into(),
                (None, Dialect::Codex) => Value::Null,
            },
        );
        map.insert("cwd".into(), site.payload_cwd().into());
        map.insert("hook_event_name".into(), event.as_str().into());
        if self.dialect == Dialect::Codex {
            map.insert("model".into(), self.settings.model.clone().into());
            map.insert("permission_mode".into(), "default".into());
        }
        map
    }

    /// Codex's turn-scoped base: `turn_id` after `permission_mode`.
    fn turn_base(&self, site: &Site, event: Event, turn: u64) -> Map<String, Value> {
        let mut map = self.base(site, event);
        if self.dialect == Dialect::Codex {
            map.insert("turn_id".into(), turn.to_string().into());
        }
        map
    }

    fn tool_input(&self, exec: &Execution) -> Value {
        let args = exec.arguments().map(|a| (**a).clone());
        match self.dialect {
            Dialect::ClaudeCode => args.unwrap_or(Value::Object(Map::new())),
            Dialect::Codex => {
                let command = args
                    .as_ref()
                    .and_then(|a| a.get("command"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let mut map = Map::new();
                map.insert("command".into(), command.into());
                Value::Object(map)
            }
        }
    }

    /// Runs every matching hook of `event` serially, recording `hook/*` where the site allows.
    async fn run(
        &self,
        event: Event,
        subject: &str,
        site: &Site,
        payload: &Map<String, Value>,
        signal: &CancellationToken,
    ) -> Vec<HookOutput> {
        let mut outputs = Vec::new();
        let mut stdin = serde_json::to_vec(payload).unwrap_or_default();
        if self.dialect == Dialect::ClaudeCode {
            stdin.push(b'\n');
        }
        let mut env = Vec::new();
        if self.dialect == Dialect::ClaudeCode
            && let Some(dir) = self
                .settings
                .project_dir
                .clone()
                .or_else(|| site.cwd.clone())
        {
            env.push(("CLAUDE_PROJECT_DIR".to_owned(), dir));
        }
        for group in self.file.groups(event) {
            if !group.matches(subject) {
                continue;
            }
            for hook in &group.hooks {
                let handler_id = format!(
                    "{}:{}:{}",
                    self.dialect.as_str(),
                    event.as_str(),
                    (self.counter)()
                );
                site.record(&HookEvent::Invoked {
                    point: event,
                    dialect: self.dialect,
                    handler_id: handler_id.clone(),
                    matcher: group.matcher.clone(),
                });
                let started = Instant::now();
                let request = ExecRequest {
                    command: hook.command.clone(),
                    cwd: site.cwd.as_ref().map(PathBuf::from),
                    env: env.clone(),
                    stdin: stdin.clone(),
                    timeout_ms: hook
                        .timeout_sec
                        .map_or(self.settings.default_timeout_ms, |s| s * 1000.0),
                    signal: signal.clone(),
                    session: site
                        .agent
                        .as_ref()
                        .and_then(|agent| SessionContext::of(agent.scope())),
                };
                let output = match self.executor.run(request).await {
                    Ok(out) => parse_hook_output(out.exit_code, &out.stdout, &out.stderr, event),
                    Err(error) => parse_hook_output(None, "", &error.to_string(), event),
                };
                let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
                self.warn_unhonoured(event, &output);
                site.record(&HookEvent::Result {
                    point: event,
                    handler_id,
                    decision: output.result_decision(),
                    exit_code: output.exit_code,
                    stderr_summary: summarize_stderr(&output.stderr, self.summary_cap),
                    duration_ms,
                });
                outputs.push(output);
            }
        }
        outputs
    }

    fn warn_unhonoured(&self, event: Event, output: &HookOutput) {
        let plugin = self.dialect.plugin();
        if self.dialect == Dialect::ClaudeCode && output.updated_input.is_some() {
            tracing::warn!(
                "{plugin}: {} hook requested updatedInput, which is not yet honored (ignored)",
                event.as_str()
            );
        }
        if output.system_message.is_some() {
            tracing::warn!(
                "{plugin}: {} hook emitted a systemMessage, which is not yet surfaced (ignored)",
                event.as_str()
            );
        }
    }

    /// Merges, taking Codex's plain stdout as context where that dialect does.
    fn merge(&self, event: Event, mut outputs: Vec<HookOutput>) -> Merged {
        if self.dialect == Dialect::Codex
            && matches!(event, Event::SessionStart | Event::UserPromptSubmit)
        {
            for output in &mut outputs {
                if output.additional_context.is_none()
                    && let Some(text) = output.plain_stdout()
                {
                    output.additional_context = Some(text.to_owned());
                }
            }
        }
        merge_outputs(&outputs)
    }

    fn context_message(&self, merged: &Merged) -> Option<Message> {
        if merged.additional_context.is_empty() {
            return None;
        }
        Some(Message::user(
            merged
                .additional_context
                .iter()
                .map(|text| ContentBlock::text(text.clone()))
                .collect(),
            MessageSource::plugin(self.dialect.plugin()),
        ))
    }

    // ----- points -----

    async fn pre_tool_use(&self, exec: &Execution) -> Option<PreDecision> {
        let event = Event::PreToolUse;
        if !self
            .file
            .groups(event)
            .iter()
            .any(|g| g.matches(exec.name()))
        {
            return None;
        }
        let site = Site::for_tool(exec);
        let mut payload = self.turn_base(&site, event, site.turn.unwrap_or(0));
        payload.insert("tool_name".into(), exec.name().into());
        payload.insert("tool_input".into(), self.tool_input(exec));
        if !exec.call_id().is_empty() {
            payload.insert("tool_use_id".into(), exec.call_id().into());
        }
        let outputs = self
            .run(event, exec.name(), &site, &payload, exec.signal())
            .await;
        let merged = self.merge(event, outputs);
        match (self.dialect, merged.decision) {
            (_, MergedDecision::Deny) => Some(PreDecision::Deny {
                reason: merged
                    .reason
                    .unwrap_or_else(|| "blocked by PreToolUse hook".to_owned()),
            }),
            (Dialect::ClaudeCode, MergedDecision::Ask) => Some(PreDecision::Ask {
                reason: merged.reason,
            }),
            _ => None,
        }
    }

    async fn post_tool_use(
        &self,
        input: PostInput,
        next: dsh_kernel::Next<PostInput, Result<PostDecision, dsh_tools::ToolError>>,
    ) -> Result<PostDecision, dsh_tools::ToolError> {
        let event = Event::PostToolUse;
        let exec = input.exec.clone();
        if !self
            .file
            .groups(event)
            .iter()
            .any(|g| g.matches(exec.name()))
        {
            return next.run(input).await;
        }
        let site = Site::for_tool(&exec);
        let mut payload = self.turn_base(&site, event, site.turn.unwrap_or(0));
        payload.insert("tool_name".into(), exec.name().into());
        payload.insert("tool_input".into(), self.tool_input(&exec));
        if !exec.call_id().is_empty() {
            payload.insert("tool_use_id".into(), exec.call_id().into());
        }
        payload.insert(
            "tool_response".into(),
            text_of(&input.result.content).into(),
        );
        let outputs = self
            .run(event, exec.name(), &site, &payload, exec.signal())
            .await;
        let merged = self.merge(event, outputs);
        let context = self.context_message(&merged);
        if merged.decision == MergedDecision::Deny {
            let feedback = merged
                .reason
                .unwrap_or_else(|| "blocked by PostToolUse hook".to_owned());
            return Ok(PostDecision::Block {
                feedback: vec![ContentBlock::text(feedback)],
                additional_contexts: context.into_iter().collect(),
            });
        }
        let mut downstream = next.run(input).await?;
        if let Some(context) = context {
            match &mut downstream {
                PostDecision::Accept {
                    additional_contexts,
                    ..
                }
                | PostDecision::Block {
                    additional_contexts,
                    ..
                } => additional_contexts.insert(0, context),
            }
        }
        Ok(downstream)
    }

    async fn user_prompt_submit(
        &self,
        input: PreStepInput,
        next: dsh_kernel::Next<PreStepInput, Result<PreStepDecision, HookError>>,
    ) -> Result<PreStepDecision, HookError> {
        let event = Event::UserPromptSubmit;
        // The loop appends the runtime-context snapshot to the claimed batch; it is not part
        // of what the user (or a producer) submitted.
        let claimed: Vec<&Message> = input
            .messages
            .iter()
            .filter(|m| {
                !(m.source.kind() == "plugin"
                    && m.source.get("plugin").and_then(Value::as_str) == Some(SNAPSHOT_PLUGIN))
            })
            .collect();
        if claimed.is_empty() {
            return next.run(input).await;
        }
        let prompt: String = claimed.iter().map(|m| text_of(&m.content)).collect();
        let site = Site::of(Some(input.agent.clone()), Some(input.turn));
        let mut payload = self.turn_base(&site, event, input.turn);
        payload.insert("prompt".into(), prompt.into());
        let outputs = self.run(event, "", &site, &payload, &input.signal).await;
        let merged = self.merge(event, outputs);
        if merged.decision == MergedDecision::Deny {
            return Ok(PreStepDecision::Reject);
        }
        let context = self.context_message(&merged);
        match next.run(input).await? {
            PreStepDecision::Enter(mut messages) => {
                messages.extend(context);
                Ok(PreStepDecision::Enter(messages))
            }
            reject => Ok(reject),
        }
    }

    async fn stop(&self, event_in: &TurnStopping) {
        let event = Event::Stop;
        let site = Site::of(Some(event_in.agent.clone()), Some(event_in.turn));
        let mut payload = self.turn_base(&site, event, event_in.turn);
        payload.insert("stop_hook_active".into(), false.into());
        if self.dialect == Dialect::Codex {
            payload.insert("last_assistant_message".into(), Value::Null);
        }
        let outputs = self.run(event, "", &site, &payload, &event_in.signal).await;
        let merged = self.merge(event, outputs);
        if merged.decision != MergedDecision::Deny {
            return;
        }
        let text = merged
            .reason
            .unwrap_or_else(|| "continue: blocked by Stop hook".to_owned());
        let message = Message::user(
            vec![ContentBlock::text(text)],
            MessageSource::plugin(self.dialect.plugin()),
        );
        if let Err(error) = event_in.agent.steer(message) {
            tracing::warn!(%error, "{}: Stop hook could not steer", self.dialect.plugin());
        }
    }

    fn spawn_detached(&self, label: &'static str, work: impl Future<Output = ()> + Send + 'static) {
        if tokio::runtime::Handle::try_current().is_err() {
            tracing::warn!(
                "{}: {label} hook failed: no async runtime",
                self.dialect.plugin()
            );
            return;
        }
        self.detached.spawn(work);
    }

    fn session_start(self: &Arc<Self>, started: &SessionStarted) {
        let event = Event::SessionStart;
        let source = started.source.as_str();
        if !self.file.groups(event).iter().any(|g| g.matches(source)) {
            return;
        }
        let me = self.clone();
        let agent = started.agent.clone();
        let signal = self.lifetime.child_token();
        self.spawn_detached("SessionStart", async move {
            let site = Site::of(Some(agent.clone()), None);
            let mut payload = me.base(&site, event);
            payload.insert("source".into(), source.into());
            let outputs = me.run(event, source, &site, &payload, &signal).await;
            let merged = me.merge(event, outputs);
            if signal.is_cancelled() {
                return;
            }
            if let Some(context) = me.context_message(&merged)
                && let Err(error) = agent.inject(context)
            {
                tracing::warn!(
                    "{}: SessionStart hook failed: Error: {error}",
                    me.dialect.plugin()
                );
            }
        });
    }

    /// `SubagentStart` (Claude Code): run detached; merged context is injected into the live
    /// in-process child.
    pub fn subagent_start(self: &Arc<Self>, run: SubagentRun) {
        let event = Event::SubagentStart;
        if self.dialect != Dialect::ClaudeCode || self.file.groups(event).is_empty() {
            return;
        }
        dsh_sync::lock(&self.children).insert(run.run_id.clone(), run.child.clone());
        let me = self.clone();
        let signal = self.lifetime.child_token();
        self.spawn_detached("SubagentStart", async move {
            let site = Site::of(run.child.clone(), None);
            let mut payload = me.base(&site, event);
            payload.insert("agent_id".into(), run.agent_id.clone().into());
            payload.insert("agent_type".into(), "general-purpose".into());
            let outputs = me
                .run(event, "general-purpose", &site, &payload, &signal)
                .await;
            let merged = me.merge(event, outputs);
            if let (Some(child), Some(context)) = (&run.child, me.context_message(&merged))
                && !signal.is_cancelled()
                && let Err(error) = child.inject(context)
            {
                tracing::warn!(
                    "{}: SubagentStart hook failed: Error: {error}",
                    me.dialect.plugin()
                );
            }
        });
    }

    /// `SubagentStop` (Claude Code): observe-only, run detached.
    pub fn subagent_end(self: &Arc<Self>, run: SubagentRun) {
        let event = Event::SubagentStop;
        let remembered = dsh_sync::lock(&self.children).remove(&run.run_id);
        if self.dialect != Dialect::ClaudeCode || self.file.groups(event).is_empty() {
            return;
        }
        let child = remembered.flatten().or(run.child.clone());
        let me = self.clone();
        let signal = self.lifetime.child_token();
        self.spawn_detached("SubagentStop", async move {
            let site = Site::of(child, None);
            let mut payload = me.base(&site, event);
            payload.insert("agent_id".into(), run.agent_id.clone().into());
            payload.insert("agent_type".into(), "general-purpose".into());
            payload.insert("stop_hook_active".into(), false.into());
            me.run(event, "general-purpose", &site, &payload, &signal)
                .await;
        });
    }
}
