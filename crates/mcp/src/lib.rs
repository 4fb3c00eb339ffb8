//! `dsh-mcp`: the MCP client. Tools from any Model Context Protocol server (stdio or
//! streamable HTTP via the official `rmcp` SDK, or the legacy HTTP+SSE transport via this
//! crate's own client of it) become dsh tools named
//! `mcp__<server>__<tool>` (catalog spec §4).
//!
//! Owns: server declarations ([`McpServerConfig`], the `[[mcp.servers]]` row and the ACP
//! `mcpServers` conversion), one plugin scope per mounted server ([`McpServer`]) whose raw,
//! unvalidated tools mirror the server's `tools/list`, the reconnect supervisor (backoff with a
//! retry budget; tools unregister while disconnected), result rendering (text, images as
//! attachments, resources), and the `dsh mcp list` probe ([`list_servers`]).
//! [`McpPlugin`] (`[plugins.mcp]` + `[[mcp.servers]]`) mounts the configured servers.
//! [`ToolServer`] is the other direction (`dsh mcp serve`): a session's tools offered to an MCP
//! client over stdio, every call through the registry's guarded pipeline.
//! Does not own: where image bytes live (the attachments plugin's store), timeouts of other
//! tools, approval.
//! Must not depend on: the host, a front-end, any `dsh-tool-*` crate.

mod commands;
mod config;
mod connection;
mod elicit;
mod error;
mod list;
mod naming;
mod plugin;
mod render;
mod serve;
mod server;
mod sse;
mod tool;

pub use commands::prompt_arguments;
pub use commands::register_prompt_commands;
pub use config::DEFAULT_TIMEOUT_MS;
pub use config::McpServerConfig;
pub use config::ReconnectConfig;
pub use config::Transport;
pub use config::TransportKind;
pub use config::scrubbed_env;
pub use connection::CLIENT_NAME;
pub use connection::CLIENT_VERSION;
pub use dsh_tools::AttachmentStore;
pub use dsh_tools::ImageAttachment;
pub use error::ConfigError;
pub use error::McpError;
pub use list::McpServers;
pub use list::list_servers;
pub use list::mount_acp_servers;
pub use list::mount_servers;
pub use list::status_text;
pub use naming::prompt_command;
pub use naming::public_name;
pub use plugin::McpPlugin;
pub use plugin::McpSettings;
pub use plugin::options as plugin_options;
pub use render::ImageSupport;
pub use render::default_media_types;
pub use render::render_content;
pub use serve::Catalog;
pub use serve::ServeError;
pub use serve::ToolServer;
pub use server::McpOptions;
pub use server::McpServer;
pub use server::STARTUP_BUDGET;
pub use server::ServerState;
pub use server::ServerStatus;
pub use server::ToolStatus;
