//! `dsh-tools`: tool definitions, the tool registry and the guarded execution pipeline.
//!
//! Owns: the authoring builder ([`Tool::builder`] → [`ToolDefinition`]), typed/DSL/raw
//! parameters with upstream's exact validation messages, the mandatory output declaration
//! (validate → freeze → render → optional presentation meta), execution identity
//! ([`Execution`], [`ExecutionToken`], [`ToolRun`]), the [`ToolRegistry`] (global and per-agent
//! layers, shadowing, restrictions, guards, presentation modes, change notification), the
//! pipeline (pre-execute → approval → guards → around-dispatch → body → post-execute →
//! finalize → result observers) including cancellation, and the vocabulary every tool crate shares:
//! presentation cards, the standing [`SandboxMode`], and image attachments ([`ImageAttachment`],
//! [`AttachmentStore`], [`sniff_image`]), and the seams front-ends provide: live output
//! ([`ToolOutputSink`]), file access through the client's editor ([`EditorFiles`]) and
//! commands in the client's terminals ([`ClientTerminals`]).
//! Does not own: which tools exist (`dsh-tool-*`), when calls run (`dsh-agent`), Code Mode's
//! `run_code` and SDK text (behind [`CodeModeTransport`]), timeouts (a wrapper plugin).
//! Must not depend on: `dsh-agent`, `dsh-session`, any concrete tool crate.

mod attachment;
mod card;
mod definition;
mod editor;
mod error;
mod execution;
mod hooks;
mod output;
mod pipeline;
mod registry;
mod result;
mod sandbox;
mod terminal;

pub use attachment::AttachmentStore;
pub use attachment::ImageAttachment;
pub use attachment::sniff_image;
pub use card::FileDiff;
pub use card::FileLocation;
pub use card::ReadFileLine;
pub use card::SearchFile;
pub use card::SearchMatch;
pub use card::SearchView;
pub use card::TerminalExit;
pub use card::ToolCallKind;
pub use card::ToolCallView;
pub use card::ToolResultView;
pub use card::WebSource;
pub use card::WebView;
pub use card::call_card;
pub use card::parse_arguments;
pub use card::result_card;
pub use definition::FinalizeFn;
pub use definition::Tool;
pub use definition::ToolBuilder;
pub use definition::ToolDefinition;
pub use editor::EditorFiles;
pub use editor::editor_files;
pub use editor::editor_files_in;
pub use error::AttachmentStoreError;
pub use error::ClientRequestError;
pub use error::DefineError;
pub use error::FailureInfo;
pub use error::PresentAsError;
pub use error::RUN_CODE;
pub use error::RegisterError;
pub use error::RestrictError;
pub use error::SchemasError;
pub use error::SetupError;
pub use error::ToolError;
pub use error::ToolFailure;
pub use error::messages;
pub use execution::AgentGone;
pub use execution::AgentHandle;
pub use execution::Dispatch;
pub use execution::Execution;
pub use execution::ExecutionToken;
pub use execution::ToolCallInput;
pub use execution::ToolRun;
pub use hooks::ApprovalOutcome;
pub use hooks::ApprovalRequest;
pub use hooks::ApprovalService;
pub use hooks::ChangeFn;
pub use hooks::CodeModeTransport;
pub use hooks::ExecuteHook;
pub use hooks::ExecutionMode;
pub use hooks::GuardFn;
pub use hooks::NeverBy;
pub use hooks::PostDecision;
pub use hooks::PostExecuteHook;
pub use hooks::PostInput;
pub use hooks::PreDecision;
pub use hooks::PreExecuteHook;
pub use hooks::PresentationMode;
pub use hooks::ResultEvent;
pub use hooks::ResultHook;
pub use hooks::refused_by_policy;
pub use output::OutputStream;
pub use output::ToolOutputSink;
pub use output::output_sink;
pub use output::output_sink_in;
pub use pipeline::Dispatched;
pub use pipeline::MAX_ARGUMENT_BYTES;
pub use pipeline::Prepared;
pub use registry::RegistryConfig;
pub use registry::ToolFilter;
pub use registry::ToolRegistry;
pub use result::ResultView;
pub use result::ToolResult;
pub use sandbox::ApprovalPolicy;
pub use sandbox::GIT_DIR_NAME;
pub use sandbox::NetworkAccess;
pub use sandbox::PROTECTED_PROJECT_DIRS;
pub use sandbox::PROTECTED_PROJECT_FILES;
pub use sandbox::SandboxLimits;
pub use sandbox::SandboxMode;
pub use terminal::ClientTerminals;
pub use terminal::TerminalCommand;
pub use terminal::TerminalOutcome;
pub use terminal::client_terminals;
pub use terminal::client_terminals_in;
pub use tokio_util::sync::CancellationToken;
