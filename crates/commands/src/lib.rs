//! `dsh-commands`: the slash-command registry (context-spec §12.1).
//!
//! Owns: command definitions (`/name`, description, input hint, whether images are accepted),
//! their visibility (global, or scoped to one agent's scope, which shadows a global command of
//! the same name), change notification, the line grammar (`parse_command`), and execution with
//! its durable record (`command/run`, `command/done`, log-only, no turn).
//! Every front-end reads the same registry: the terminal UI's palette and ACP's
//! `available_commands_update` list what [`CommandRegistry::list`] returns, and a prompt line
//! that names a known command goes to [`CommandRegistry::execute`] instead of the model.
//! Does not own: any concrete command (plugins register `/compact`, `/plan`, `/goal`, MCP
//! prompts, …) or how a front-end shows the result.
//! Must not depend on: a front-end crate (`dsh-tui`, `dsh-acp`), `dsh-cli`.

mod error;
mod parse;
mod registry;

pub use error::CommandError;
pub use parse::ParsedCommand;
pub use parse::is_valid_name;
pub use parse::parse_command;
pub use registry::ChoiceProvider;
pub use registry::CommandCall;
pub use registry::CommandChoice;
pub use registry::CommandHandler;
pub use registry::CommandInfo;
pub use registry::CommandInput;
pub use registry::CommandRegistry;
pub use registry::CommandResult;
pub use registry::CommandSpec;
pub use registry::Executed;

/// Event kinds this crate appends.
pub mod kind {
    pub const COMMAND_RUN: &str = "command/run";
    pub const COMMAND_DONE: &str = "command/done";
}
