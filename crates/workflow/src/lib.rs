//! `dsh-workflow`: workflows and the Ralph loop.
//!
//! Owns: the workflow engine seam ([`WorkflowEngine`]: `start` → [`WorkflowRun`], the live
//! `workflow/*` events, caps and error codes), its worker (each run is one Code Mode QuickJS
//! program on its own thread, with the `agent` / `parallel` / `pipeline` / `phase` / `log` hooks
//! of `shim.js`), meta and script validation, the `workflow` tool with its durable
//! `tool-workflow/*` records, and the `ralph` tool with its fixed round script.
//! Does not own: children (`dsh-subagent` runs them), the JavaScript engine (`dsh-code`).
//! Must not depend on: front-ends, the host, concrete model wires.

mod engine;
mod error;
mod meta;
pub mod plugin;
pub mod ralph;
mod script;
pub mod tool;

pub use engine::AgentOutcome;
pub use engine::AgentRef;
pub use engine::EngineConfig;
pub use engine::RunInfo;
pub use engine::WorkflowEngine;
pub use engine::WorkflowEvent;
pub use engine::WorkflowRequest;
pub use engine::WorkflowResult;
pub use engine::WorkflowRun;
pub use engine::WorkflowStop;
pub use error::RalphConfigError;
pub use error::RalphResultError;
pub use error::WorkflowError;
pub use error::code;
pub use meta::Phase;
pub use meta::WorkflowMeta;
pub use meta::validate_meta;
pub use plugin::WorkflowPlugin;
pub use plugin::WorkflowSettings;
pub use ralph::RALPH_SCRIPT;
pub use ralph::RalphConfig;
pub use script::INLINE_META;
pub use script::check_script;
pub use tool::WorkflowToolConfig;
pub use tool::render_completion;
