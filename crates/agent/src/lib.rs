//! `dsh-agent`: the agent loop.
//!
//! Owns: the inbox, turns and steps, prompt assembly, the request envelope and its logging,
//! the retry executor, tool-call scheduling through the tool runtime, cancellation, the
//! headless one-shot fold, and a scripted model for tests.
//! Depends on the `ModelAdapter` trait, never on a wire format.
//! Must not depend on: front-ends (acp, cli), concrete tools, HTTP.

mod agent;
mod driver;
mod error;
mod headless;
mod hooks;
mod inbox;
mod maintenance;
pub mod prompt;
pub mod scripted;
mod step;
mod tools;

pub use agent::Agent;
pub use agent::AgentConfig;
pub use agent::AgentHandle;
pub use agent::AgentStatus;
pub use agent::CancelCause;
pub use agent::DEFAULT_MAX_CALLS_PER_RESPONSE;
pub use agent::DEFAULT_MAX_PARALLEL_TOOL_CALLS;
pub use agent::DEFAULT_MODEL_ATTEMPT_TIMEOUT;
pub use error::AgentError;
pub use error::error_chain;
pub use headless::RunOutcome;
pub use headless::run_final;
pub use headless::run_once;
pub use hooks::AgentEvent;
pub use hooks::AgentHooks;
pub use hooks::CallConfig;
pub use hooks::PreStepDecision;
pub use hooks::PreStepInput;
pub use hooks::Recovery;
pub use hooks::RequestErrorInput;
pub use hooks::RequestInput;
pub use hooks::SessionSource;
pub use hooks::SessionStarted;
pub use hooks::TurnStopping;
pub use maintenance::Maintenance;
pub use prompt::PromptConfig;
pub use prompt::PromptRegistry;
pub use step::MAX_MODEL_OUTPUT_BYTES;
pub use step::MODEL_ATTEMPT_TIMEOUT;
pub use step::NO_ADAPTER;
pub use step::OUTPUT_TOO_LARGE;

pub use dsh_session::data::AbortReason;
pub use dsh_session::data::InboxTarget;
pub use dsh_session::data::TurnEndReason;
