//! The reserved `run_code` definition and Code Mode's installation into the registry.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::Weak;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_tools::CodeModeTransport;
use dsh_tools::RUN_CODE;
use dsh_tools::Tool;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use serde_json::Value;
use serde_json::json;

use crate::log::DispatchLogHook;
use crate::render::render_text;
use crate::seam::CodeRuntime;

pub const TS_DESCRIPTION: &str = "Execute a TypeScript program against the available tools. Takes two required arguments: `code`, the BODY of an async function (erasable syntax only; top-level `await` and `return` work), and `description`, a short summary of what the program does. Call tools as `await tools.name(args)` per the declarations in the system prompt. Only what you print or return is program output — curate it. Image-bearing subtool results are attached after the run.";
pub const TS_CODE_PARAM: &str = "The program: the body of an async TypeScript function.";
pub const PY_DESCRIPTION: &str = "Execute a Python program against the available tools. Takes two required arguments: `code`, the BODY of an async function (top-level `await` and `return` work), and `description`, a short summary of what the program does. Call tools as `await tools.name(args)` per the declarations in the system prompt. Use `print(...)` and/or `return <value>` for program output — curate it. Image-bearing subtool results are attached after the run.";
pub const PY_CODE_PARAM: &str = "The program: the body of an async Python function.";
pub const DESCRIPTION_PARAM: &str = "Clear, concise description of what this program does in active voice, 5-10 words (shown in the UI). Examples: \"Count TODO markers across packages\"; \"Read failing test and its fixture\"; \"Rename config key in every cordis.yml\".";

/// Code Mode configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeModeConfig {
    /// How many concurrency-safe sub-calls may overlap (at least 1).
    pub max_parallel_sub_calls: usize,
}

impl Default for CodeModeConfig {
    fn default() -> Self {
        Self {
            max_parallel_sub_calls: 10,
        }
    }
}

/// Code Mode misuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeModeError {
    #[error("dsh-tools: maxParallelSubCalls must be a positive integer")]
    InvalidParallelism,
    #[error(
        "dsh-tools: mode \"{mode}\" requires a code runtime — load a ctx.codeRuntime implementation (e.g. @deepseek-ai/dsh-code-runtime-worker-thread) or set tools mode to \"native\""
    )]
    MissingRuntime { mode: String },
    #[error(
        "dsh-tools: no SDK renderer registered for runtime language \"{language}\" (known: \"typescript\", \"python\")"
    )]
    UnknownLanguage { language: String },
    #[error("dsh-tools: {0}")]
    Schemas(String),
    #[error(transparent)]
    Define(#[from] dsh_tools::DefineError),
}

/// Code Mode for one registry: the `run_code` transport plus the sub-call dispatch bridge.
pub struct CodeMode {
    pub(crate) me: Weak<CodeMode>,
    pub(crate) registry: Weak<ToolRegistry>,
    pub(crate) home: Scope,
    pub(crate) config: CodeModeConfig,
    definitions: OnceLock<(Arc<ToolDefinition>, Arc<ToolDefinition>)>,
    pub(crate) dispatch_log: DispatchLogHook,
}

impl std::fmt::Debug for CodeMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeMode")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CodeMode {
    /// Builds Code Mode for `registry` and installs it as the registry's transport, owned by
    /// `scope` (runtimes are looked up from the calling agent's scope, else from `scope`).
    pub fn install(
        scope: &Scope,
        registry: &Arc<ToolRegistry>,
        config: CodeModeConfig,
    ) -> Result<(Arc<CodeMode>, Disposer), CodeModeError> {
        let code_mode = Self::new(scope, registry, config)?;
        let disposer = registry.set_code_mode_transport(scope, code_mode.clone());
        Ok((code_mode, disposer))
    }

    /// Builds Code Mode without installing it.
    pub fn new(
        scope: &Scope,
        registry: &Arc<ToolRegistry>,
        config: CodeModeConfig,
    ) -> Result<Arc<CodeMode>, CodeModeError> {
        if config.max_parallel_sub_calls == 0 {
            return Err(CodeModeError::InvalidParallelism);
        }
        let code_mode = Arc::new_cyclic(|me| CodeMode {
            me: me.clone(),
            registry: Arc::downgrade(registry),
            home: scope.clone(),
            config,
            definitions: OnceLock::new(),
            dispatch_log: DispatchLogHook::new("tools/code-dispatch-log"),
        });
        let built = (
            Arc::new(code_mode.build(false)?),
            Arc::new(code_mode.build(true)?),
        );
        // Freshly created: nobody else can have set it.
        let _ = code_mode.definitions.set(built);
        Ok(code_mode)
    }

    pub fn config(&self) -> CodeModeConfig {
        self.config
    }

    /// `tools/code-dispatch-log`: rewrites the logged copy of sub-call content.
    pub fn dispatch_log_hook(&self) -> &DispatchLogHook {
        &self.dispatch_log
    }

    /// The runtime serving `scope` (the calling agent's), else the installation scope's.
    pub fn runtime_for(&self, scope: Option<&Scope>) -> Option<Arc<dyn CodeRuntime>> {
        scope
            .and_then(|s| s.service::<dyn CodeRuntime>())
            .or_else(|| self.home.service::<dyn CodeRuntime>())
    }

    fn build(&self, python: bool) -> Result<ToolDefinition, dsh_tools::DefineError> {
        let (description, code) = if python {
            (PY_DESCRIPTION, PY_CODE_PARAM)
        } else {
            (TS_DESCRIPTION, TS_CODE_PARAM)
        };
        let me = self.me.clone();
        Tool::builder(RUN_CODE)
            .description(description)
            .validated_parameters(json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": code},
                    "description": {"type": "string", "description": DESCRIPTION_PARAM}
                },
                "required": ["code", "description"]
            }))
            .author_output(
                &json!({
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "logs": {"type": "array", "required": true, "items": {"type": "string"}},
                        "result": {"type": "json"}
                    }
                }),
                |_, value| Ok(vec![ContentBlock::text(render_value(value))]),
            )
            .present_call(|args: &Value| {
                Some(ToolCallView::Generic {
                    title: args
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    kind: Some(ToolCallKind::Execute),
                    raw_input: Some(args.get("code").cloned().unwrap_or(Value::Null)),
                    content: None,
                    locations: None,
                })
            })
            .run(move |args: Value, run: ToolRun| {
                let me = me.clone();
                async move {
                    let Some(code_mode) = me.upgrade() else {
                        return Err(ToolError::new("code mode is gone"));
                    };
                    crate::bridge::run_code(code_mode, args, run).await
                }
            })
            .build()
    }
}

/// The text of a `{logs, result?}` value.
fn render_value(value: &Value) -> String {
    let logs: Vec<String> = value
        .get("logs")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    render_text(&logs, value.get("result"))
}

impl CodeModeTransport for CodeMode {
    /// One shared definition per flavour (built once, in [`CodeMode::new`]), so every
    /// non-native view holds the same object. The flavour follows the installation scope's
    /// runtime; with none (or an unknown language) it is the TypeScript one.
    fn definition(&self) -> Arc<ToolDefinition> {
        let python = self
            .runtime_for(None)
            .is_some_and(|runtime| runtime.language() == "python");
        match self.definitions.get() {
            Some((_, py)) if python => py.clone(),
            Some((typescript, _)) => typescript.clone(),
            // `new` always fills the cell before the value escapes.
            None => unreachable!("run_code definitions are built in CodeMode::new"),
        }
    }
}
