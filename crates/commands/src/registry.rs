//! The registry: definitions with scope visibility, change listeners, and execution.

use dsh_sync::lock;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use dsh_agent::AgentHandle;
use dsh_kernel::BoxFuture;
use dsh_kernel::Disposer;
use dsh_kernel::KernelError;
use dsh_kernel::Scope;
use dsh_kernel::ScopeId;
use dsh_protocol::ContentBlock;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::error::CommandError;
use crate::kind;
use crate::parse::is_valid_name;
use crate::parse::parse_command;

/// What a command takes after its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandInput {
    /// Shown as the argument placeholder (`[off|message]`).
    pub hint: String,
    /// Whether image attachments may come with the line.
    #[serde(skip)]
    pub images: bool,
}

/// How a command ended. Results never enter model history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandResult {
    Success {
        text: Option<String>,
        /// The event the command produced, when it produced one worth pointing at.
        source_event_seq: Option<u64>,
    },
    /// The command made another stored session (a fork of this one) and asks the front-end
    /// to continue there: it opens `session` and shows it in place of the one the command ran
    /// in, which is left as it was. A front-end that cannot switch says where to continue.
    /// Logged as a success with `switchTo`.
    Switch {
        text: Option<String>,
        session: String,
    },
    /// `text` must not be empty.
    Error { text: String },
}

impl CommandResult {
    pub fn ok() -> Self {
        Self::Success {
            text: None,
            source_event_seq: None,
        }
    }

    pub fn text(text: impl Into<String>) -> Self {
        Self::Success {
            text: Some(text.into()),
            source_event_seq: None,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self::Error { text: text.into() }
    }

    /// The text a front-end shows (`Error: <text>` for errors), if any.
    pub fn display_text(&self) -> Option<String> {
        match self {
            Self::Success { text, .. } | Self::Switch { text, .. } => {
                text.clone().filter(|t| !t.is_empty())
            }
            Self::Error { text } => Some(format!("Error: {text}")),
        }
    }

    fn done_data(&self, command_id: &str) -> Value {
        match self {
            Self::Success {
                text,
                source_event_seq,
            } => {
                let mut data = json!({"commandId": command_id, "kind": "success"});
                if let Some(text) = text {
                    data["text"] = json!(text);
                }
                if let Some(seq) = source_event_seq {
                    data["sourceEventSeq"] = json!(seq);
                }
                data
            }
            Self::Switch { text, session } => {
                let mut data =
                    json!({"commandId": command_id, "kind": "success", "switchTo": session});
                if let Some(text) = text {
                    data["text"] = json!(text);
                }
                data
            }
            Self::Error { text } => json!({"commandId": command_id, "kind": "error", "text": text}),
        }
    }

    /// The session a front-end should continue in, when the command asks for a switch.
    pub fn switch_to(&self) -> Option<&str> {
        match self {
            Self::Switch { session, .. } => Some(session),
            _ => None,
        }
    }
}

/// One invocation, as the handler sees it.
pub struct CommandCall {
    pub agent: AgentHandle,
    pub command_id: String,
    pub name: String,
    /// Everything after the name, separator included.
    pub raw_input: String,
    /// Image blocks (attachment references) that came with the line; empty unless the command
    /// accepts images.
    pub images: Vec<ContentBlock>,
    pub signal: CancellationToken,
}

impl CommandCall {
    /// The argument text, trimmed.
    pub fn argument(&self) -> &str {
        self.raw_input.trim()
    }
}

/// A command's behaviour. Closures `Fn(CommandCall) -> impl Future<Output = Result<…>>`
/// implement it.
pub trait CommandHandler: Send + Sync + 'static {
    /// `Err(text)` is a failed handler: logged as an error result, then reported as
    /// [`CommandError::Failed`].
    // String: a handler's failure is only logged and shown (`CommandError::Failed`); no caller
    // branches on it, and the closure seam is implemented in every command crate.
    fn run(&self, call: CommandCall) -> BoxFuture<'static, Result<CommandResult, String>>;
}

impl<F, Fut> CommandHandler for F
where
    F: Fn(CommandCall) -> Fut + Send + Sync + 'static,
    // String: the closure form of the handler seam above.
    Fut: Future<Output = Result<CommandResult, String>> + Send + 'static,
{
    // String: the closure form of the handler seam above.
    fn run(&self, call: CommandCall) -> BoxFuture<'static, Result<CommandResult, String>> {
        Box::pin(self(call))
    }
}

/// One value a command's argument can take next, for a front-end's picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandChoice {
    /// The whole argument once this is chosen (what came before included).
    pub value: String,
    /// What the picker shows.
    pub label: String,
    pub detail: String,
}

/// Lists the choices that follow `partial` (the argument chosen so far; empty at first) for
/// `agent`'s session. An empty list: the argument is complete.
pub type ChoiceProvider = dyn Fn(&AgentHandle, &str) -> Vec<CommandChoice> + Send + Sync;

/// A definition to register.
#[derive(Clone)]
pub struct CommandSpec {
    pub name: String,
    pub description: String,
    pub input: Option<CommandInput>,
    /// Whether `command/run` records the raw input (off for inputs that may hold secrets).
    pub record_input: bool,
    pub handler: Arc<dyn CommandHandler>,
    /// The argument's choices, step by step, for a front-end that offers a picker when the
    /// command is run without one (the TUI's `/rewind`).
    pub choices: Option<Arc<ChoiceProvider>>,
}

impl std::fmt::Debug for CommandSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandSpec")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("input", &self.input)
            .field("record_input", &self.record_input)
            .field("choices", &self.choices.is_some())
            .finish_non_exhaustive()
    }
}

impl CommandSpec {
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl CommandHandler,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input: None,
            record_input: true,
            handler: Arc::new(handler),
            choices: None,
        }
    }

    /// Offers the argument's values step by step (see [`ChoiceProvider`]).
    pub fn choices(
        mut self,
        provider: impl Fn(&AgentHandle, &str) -> Vec<CommandChoice> + Send + Sync + 'static,
    ) -> Self {
        self.choices = Some(Arc::new(provider));
        self
    }

    /// Declares an argument, shown as `hint`.
    pub fn input(mut self, hint: impl Into<String>) -> Self {
        let images = self.input.as_ref().is_some_and(|i| i.images);
        self.input = Some(CommandInput {
            hint: hint.into(),
            images,
        });
        self
    }

    /// Accepts image attachments (needs an input).
    pub fn images(mut self, images: bool) -> Self {
        if let Some(input) = &mut self.input {
            input.images = images;
        }
        self
    }

    pub fn record_input(mut self, record: bool) -> Self {
        self.record_input = record;
        self
    }
}

/// What `list` and `find` return: what a palette or an editor shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandInfo {
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<CommandInput>,
}

/// A finished execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executed {
    pub command_id: String,
    pub result: CommandResult,
}

struct Entry {
    id: u64,
    /// The registering scope's nearest agent: `None` = global.
    agent: Option<ScopeId>,
    spec: Arc<CommandSpec>,
}

type Listener = Arc<dyn Fn() + Send + Sync>;

struct Inner {
    /// 8 hex digits of this registry's UUID: the middle of every command id.
    tag: String,
    next_command: AtomicU64,
    next_entry: AtomicU64,
    entries: Mutex<Vec<Entry>>,
    listeners: Mutex<Vec<(u64, Listener)>>,
}

/// The registry. Install one per composition with [`CommandRegistry::install`]; find it from
/// any scope of the tree with [`CommandRegistry::of`].
#[derive(Clone)]
pub struct CommandRegistry {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for CommandRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandRegistry")
            .field("commands", &lock(&self.inner.entries).len())
            .finish()
    }
}

impl Default for CommandRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl CommandRegistry {
    pub fn new() -> Self {
        let uuid = uuid::Uuid::new_v4().simple().to_string();
        Self {
            inner: Arc::new(Inner {
                tag: uuid[..8].to_owned(),
                next_command: AtomicU64::new(1),
                next_entry: AtomicU64::new(1),
                entries: Mutex::new(Vec::new()),
                listeners: Mutex::new(Vec::new()),
            }),
        }
    }

    /// A new registry provided as a kernel service on `scope` (normally the root).
    pub fn install(scope: &Scope) -> Result<Self, KernelError> {
        let registry = Self::new();
        scope.provide(Arc::new(registry.clone()))?;
        Ok(registry)
    }

    /// The registry visible from `scope`, if one is installed.
    pub fn of(scope: &Scope) -> Option<Self> {
        scope.service::<CommandRegistry>().map(|r| (*r).clone())
    }

    /// Registers a command for as long as `scope` (or the returned disposer) lives. A command
    /// registered under an agent's scope is that agent's only and shadows a global one.
    pub fn register(&self, scope: &Scope, spec: CommandSpec) -> Result<Disposer, CommandError> {
        if !is_valid_name(&spec.name) {
            return Err(CommandError::InvalidName(spec.name));
        }
        if spec.description.trim().is_empty() {
            return Err(CommandError::InvalidDescription(spec.name));
        }
        if spec
            .input
            .as_ref()
            .is_some_and(|i| i.hint.trim().is_empty())
        {
            return Err(CommandError::InvalidHint(spec.name));
        }
        if scope.is_disposed() {
            return Err(CommandError::Disposed(spec.name));
        }
        let agent = scope.nearest_agent().map(|a| a.id());
        let id = self.inner.next_entry.fetch_add(1, Ordering::Relaxed);
        let name = spec.name.clone();
        {
            let mut entries = lock(&self.inner.entries);
            if entries
                .iter()
                .any(|e| e.agent == agent && e.spec.name == name)
            {
                return Err(match agent {
                    None => CommandError::Duplicate(name),
                    Some(_) => CommandError::DuplicateInScope(name),
                });
            }
            entries.push(Entry {
                id,
                agent,
                spec: Arc::new(spec),
            });
        }
        let weak = Arc::downgrade(&self.inner);
        let disposer = scope.defer(move || {
            if let Some(inner) = weak.upgrade() {
                lock(&inner.entries).retain(|e| e.id != id);
                notify(&inner);
            }
        });
        if disposer.is_disposed() {
            // The scope was already gone: `defer` ran the undo at once.
            return Err(CommandError::Disposed(name));
        }
        notify(&self.inner);
        Ok(disposer)
    }

    /// The commands `scope` sees, name-sorted, scoped definitions shadowing global ones.
    pub fn list(&self, scope: &Scope) -> Vec<CommandInfo> {
        let mut specs = self.visible(scope);
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        specs.iter().map(|spec| info(spec)).collect()
    }

    /// The command `name` as `scope` sees it.
    pub fn find(&self, scope: &Scope, name: &str) -> Option<CommandInfo> {
        self.spec(scope, name).map(|spec| info(&spec))
    }

    /// The choices that follow `partial` for the command `name` as `agent` sees it; `None`
    /// when the command offers none (or is unknown).
    pub fn choices(
        &self,
        agent: &AgentHandle,
        name: &str,
        partial: &str,
    ) -> Option<Vec<CommandChoice>> {
        let spec = self.spec(agent.scope(), name)?;
        let provider = spec.choices.as_ref()?;
        Some(provider(agent, partial))
    }

    fn spec(&self, scope: &Scope, name: &str) -> Option<Arc<CommandSpec>> {
        self.visible(scope)
            .into_iter()
            .find(|spec| spec.name == name)
    }

    /// One spec per name: the nearest scoped definition, else the global one.
    fn visible(&self, scope: &Scope) -> Vec<Arc<CommandSpec>> {
        let chain: Vec<ScopeId> = scope.ancestors().iter().map(Scope::id).collect();
        let rank = |agent: Option<ScopeId>| match agent {
            None => Some(usize::MAX),
            Some(id) => chain.iter().position(|c| *c == id),
        };
        let entries = lock(&self.inner.entries);
        let mut best: Vec<(usize, Arc<CommandSpec>)> = Vec::new();
        for entry in entries.iter() {
            let Some(rank) = rank(entry.agent) else {
                continue;
            };
            match best.iter_mut().find(|(_, s)| s.name == entry.spec.name) {
                Some(slot) if rank < slot.0 => *slot = (rank, entry.spec.clone()),
                Some(_) => {}
                None => best.push((rank, entry.spec.clone())),
            }
        }
        best.into_iter().map(|(_, spec)| spec).collect()
    }

    /// Calls `listener` after every registration or removal (`commands/change`), until `scope`
    /// or the returned disposer goes away.
    pub fn on_change(
        &self,
        scope: &Scope,
        listener: impl Fn() + Send + Sync + 'static,
    ) -> Disposer {
        let id = self.inner.next_entry.fetch_add(1, Ordering::Relaxed);
        lock(&self.inner.listeners).push((id, Arc::new(listener)));
        let weak = Arc::downgrade(&self.inner);
        scope.defer(move || {
            if let Some(inner) = weak.upgrade() {
                lock(&inner.listeners).retain(|(l, _)| *l != id);
            }
        })
    }

    /// Runs the command `line` names for `agent`. `Ok(None)`: not a command, or not one this
    /// agent knows (nothing is logged; the caller may treat the line as ordinary text).
    /// Otherwise `command/run` is logged, the handler runs (raced against `signal`), and
    /// `command/done` records the result. A failed or cancelled handler is logged as an error
    /// result and returned as `Err`.
    pub async fn execute(
        &self,
        agent: &AgentHandle,
        line: &str,
        images: Vec<ContentBlock>,
        signal: CancellationToken,
    ) -> Result<Option<Executed>, CommandError> {
        let Some(parsed) = parse_command(line) else {
            return Ok(None);
        };
        let Some(spec) = self.spec(agent.scope(), parsed.name) else {
            return Ok(None);
        };
        let n = self.inner.next_command.fetch_add(1, Ordering::Relaxed);
        let command_id = format!("cmd-{}-{n}", self.inner.tag);
        let log = agent.log();
        let mut run = json!({"commandId": command_id, "name": spec.name});
        if spec.record_input {
            run["args"] = json!(parsed.raw_input);
        }
        run["source"] = json!({"kind": "user"});
        log.append(kind::COMMAND_RUN, run, None)
            .map_err(|e| CommandError::Log(e.to_string()))?;
        let accepts_images = spec.input.as_ref().is_some_and(|i| i.images);
        let outcome = if !images.is_empty() && !accepts_images {
            Ok(CommandResult::error(format!(
                "/{} does not accept image attachments",
                spec.name
            )))
        } else {
            let call = CommandCall {
                agent: agent.clone(),
                command_id: command_id.clone(),
                name: spec.name.clone(),
                raw_input: parsed.raw_input.to_owned(),
                images,
                signal: signal.clone(),
            };
            let handler = spec.handler.run(call);
            tokio_util::future::FutureExt::with_cancellation_token(handler, &signal)
                .await
                .map_or(Err(CommandError::Cancelled), |result| {
                    result.map_err(CommandError::Failed)
                })
                .and_then(|result| match result {
                    CommandResult::Error { text } if text.trim().is_empty() => Err(
                        CommandError::Failed(format!("/{} returned an empty error", spec.name)),
                    ),
                    result => Ok(result),
                })
        };
        let done = match &outcome {
            Ok(result) => result.done_data(&command_id),
            Err(error) => CommandResult::error(error.to_string()).done_data(&command_id),
        };
        log.append(kind::COMMAND_DONE, done, None)
            .map_err(|e| CommandError::Log(e.to_string()))?;
        outcome.map(|result| Some(Executed { command_id, result }))
    }
}

fn info(spec: &CommandSpec) -> CommandInfo {
    CommandInfo {
        name: spec.name.clone(),
        description: spec.description.clone(),
        input: spec.input.clone(),
    }
}

fn notify(inner: &Inner) {
    let listeners: Vec<Listener> = lock(&inner.listeners)
        .iter()
        .map(|(_, l)| l.clone())
        .collect();
    for listener in listeners {
        listener();
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
