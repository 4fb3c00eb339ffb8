//! `dsh-code`: Code Mode (tool-runtime-spec §7) — the model writes one program that calls many
//! tools; only what it prints or returns comes back.
//!
//! Owns: the reserved `run_code` transport ([`CodeMode`], installed into the registry through
//! `ToolRegistry::set_code_mode_transport`), the dispatch bridge and its per-run sub-call
//! scheduler, the outer result rendering, the code-runtime seam ([`CodeRuntime`]) and its
//! shipped backend ([`QuickJsRuntime`]: QuickJS through `rquickjs`, TypeScript type-stripping
//! through `oxc`), the generated TypeScript SDK and the code-only rule prompt sections, and the
//! `tool/code-dispatch-start` / `tool/code-dispatch` event vocabulary (recorded through the
//! session's `SessionContext`), and [`CodePlugin`] (`[plugins.code]`), which registers the
//! transport, the runtime, the prompt sections and the wire tool list.
//! Does not own: the registry, modes and the §5.2 collapse (`dsh-tools`), prompt assembly.
//! Must not depend on: any other capability crate, the host, a front-end.

mod bridge;
mod convert;
mod engine;
mod log;
mod plugin;
mod render;
mod runtime;
mod scheduler;
mod sdk;
mod seam;
mod strip;
mod transport;

pub use engine::ARGS_GETTER_PREFIX;
pub use engine::ARGS_LOSSY;
pub use log::CODE_DISPATCH;
pub use log::CODE_DISPATCH_START;
pub use log::CodeDispatchEvent;
pub use log::DispatchLogHook;
pub use log::DispatchLogInput;
pub use plugin::CodePlugin;
pub use plugin::CodeSettings;
pub use render::NO_OUTPUT;
pub use render::pretty_json;
pub use render::render_text;
pub use runtime::ConfigError;
pub use runtime::QuickJsConfig;
pub use runtime::QuickJsRuntime;
pub use scheduler::IMAGE_CONTEXT_PLUGIN;
pub use sdk::CODE_ONLY_RULE;
pub use sdk::CODE_ONLY_SECTION;
pub use sdk::SDK_SECTION;
pub use sdk::SdkTool;
pub use sdk::code_only_section;
pub use sdk::json_schema_to_ts;
pub use sdk::render_tools_sdk;
pub use sdk::sdk_section;
pub use sdk::sdk_tools;
pub use sdk::wire_schemas;
pub use seam::*;
pub use transport::CodeMode;
pub use transport::CodeModeConfig;
pub use transport::CodeModeError;
pub use transport::DESCRIPTION_PARAM;
pub use transport::PY_CODE_PARAM;
pub use transport::PY_DESCRIPTION;
pub use transport::TS_CODE_PARAM;
pub use transport::TS_DESCRIPTION;
