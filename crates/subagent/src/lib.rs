//! `dsh-subagent`: child agents.
//!
//! Owns: the provider registry and the live `subagent/*` events ([`Subagents`]), the live agent
//! directory ([`AgentDirectory`]), the seam to the composition that builds child sessions
//! ([`ChildHost`], with [`BasicChildHost`]), the in-process `spawn` / `fork` providers and the
//! one-shot driver, the continuable manager (activations, follow-ups, cold resume, interrupts,
//! reports, settlement notices, draining), child listing and the projection units, the
//! `structured_output` child tool, and the delegation tools (`subagent`, `subagent_fork`,
//! `send_message`, `interrupt_agent`, `list_agents`, `report`).
//! Does not own: how a session is composed (the host implements [`ChildHost`]), the loop, the
//! log format, the jobs runtime (`dsh-tool-shell`), workflows (`dsh-workflow`).
//! Must not depend on: front-ends (acp, tui, cli), concrete model wires.

mod continuation;
mod depth;
mod descriptor;
mod directory;
mod error;
mod host;
mod inprocess;
mod listing;
mod notice;
mod output;
pub mod plugin;
mod present;
mod provider;
mod runtime;
mod service;
mod structured;
pub mod tools;

pub use continuation::Accepted;
pub use continuation::ContinuableStart;
pub use continuation::DRAINING_TEXT;
pub use continuation::InterruptAuthority;
pub use continuation::PERSISTENCE_REQUIRED;
pub use continuation::ReportDelivery;
pub use depth::MAX_SAFE_INTEGER;
pub use depth::check_max_depth;
pub use depth::delegation_depth_of;
pub use depth::parse_max_depth;
pub use depth::resolve_child_depth;
pub use descriptor::ContinuableDescriptor;
pub use descriptor::DESCRIPTOR_KIND;
pub use descriptor::DESCRIPTOR_VERSION;
pub use descriptor::Descriptor;
pub use descriptor::Identity;
pub use descriptor::ToolFilterSpec;
pub use descriptor::fold_first;
pub use descriptor::fold_last_wins;
pub use directory::AgentDirectory;
pub use error::MountError;
pub use error::SubagentError;
pub use error::code;
pub use host::AdapterFor;
pub use host::BasicChildHost;
pub use host::ChildHost;
pub use host::ChildMeta;
pub use host::ChildSession;
pub use host::ChildSetup;
pub use host::ChildSpec;
pub use host::DelegatedPolicy;
pub use host::NeverApprove;
pub use host::PromptInput;
pub use host::PromptTemplate;
pub use inprocess::ABORTED_BEFORE_PUBLICATION;
pub use inprocess::InProcessProvider;
pub use listing::Activity;
pub use listing::DiagnosticReason;
pub use listing::ListRow;
pub use listing::ListScope;
pub use listing::SessionProjections;
pub use listing::Timing;
pub use listing::fold_timing;
pub use notice::bound_summary;
pub use notice::coordinator_source;
pub use notice::report_message;
pub use notice::settlement_notice;
pub use notice::settlement_summary;
pub use output::ConsumedWork;
pub use output::DIAGNOSTIC_LIMIT;
pub use output::DIAGNOSTIC_TRUNCATED;
pub use output::StopReason;
pub use output::epoch_stop_reason;
pub use output::final_assistant_output;
pub use output::fold_consumed_work;
pub use output::limit_diagnostic;
pub use output::one_shot_stop_reason;
pub use output::output_text;
pub use plugin::SubagentPlugin;
pub use plugin::SubagentSettings;
pub use provider::AgentOptions;
pub use provider::Capabilities;
pub use provider::ChildProgress;
pub use provider::PrepareRequest;
pub use provider::Prepared;
pub use provider::ProgressFn;
pub use provider::RunResult;
pub use provider::StartRequest;
pub use provider::SubagentProvider;
pub use provider::SubagentResult;
pub use provider::SubagentRun;
pub use runtime::ChildRuntime;
pub use runtime::DELEGATION_CONTEXT;
pub use runtime::DELEGATION_CONTEXT_NAME;
pub use runtime::DELEGATION_CONTEXT_SLOT;
pub use runtime::SandboxOverride;
pub use runtime::completed_turn_prefix;
pub use runtime::latest_sandbox_mode;
pub use service::ContinuableSetupFn;
pub use service::ProviderChange;
pub use service::RunInfo;
pub use service::SubagentEvent;
pub use service::Subagents;
pub use structured::STRUCTURED_OUTPUT;
pub use structured::already_recorded;
