//! The crate's error types: bad declarations ([`ConfigError`]) and mount failures
//! ([`McpError`]). Tool-call failures are not here: they become tool results.

/// A server declaration that cannot be used. Reported by the config loader or `session/new`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("mcp server name \"{name}\" must match ^[A-Za-z0-9_-]{{1,32}}$")]
    InvalidName { name: String },
    #[error(
        "mcp server \"{server}\" needs either `command` (stdio) or `url` (streamable HTTP or SSE)"
    )]
    NoTransport { server: String },
    #[error("mcp server \"{server}\" sets both `command` and `url`; pick one transport")]
    BothTransports { server: String },
    #[error("mcp server \"{server}\": transport \"{transport}\" needs `{field}`")]
    TransportNeeds {
        server: String,
        transport: &'static str,
        field: &'static str,
    },
    #[error(
        "mcp server \"{server}\" has a `url`: `args`, `env` and `cwd` apply to stdio servers only"
    )]
    StdioFieldsOnHttp { server: String },
    #[error("mcp server \"{server}\": timeout_ms must be positive")]
    ZeroTimeout { server: String },
    #[error("invalid ACP mcpServers entry: {reason}")]
    InvalidAcpServer { reason: String },
    #[error(
        "mcp server \"{server}\": the {transport} transport is not supported (use stdio, http or sse)"
    )]
    UnsupportedAcpTransport { server: String, transport: String },
    #[error("mcp server \"{server}\": invalid header \"{header}\"")]
    InvalidHeader { server: String, header: String },
}

/// Why a server could not be mounted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(
        "mcp-client: serverName \"{name}\" is already in use by another mcp-client instance — pick a unique serverName in cordis.yml"
    )]
    NameInUse { name: String },
    /// The first connect failed and `fail_on_startup_error` is set.
    #[error("mcp server \"{server}\" failed to start: {reason}")]
    Startup { server: String, reason: String },
    #[error(transparent)]
    Kernel(#[from] dsh_kernel::KernelError),
}

/// Why the configured servers did not start in the background (fails the host's start).
#[derive(Debug, thiserror::Error)]
pub(crate) enum McpStartError {
    #[error("cannot start the configured MCP servers: {0}")]
    Mount(#[source] McpError),
    #[error("{0}")]
    Provide(#[source] dsh_kernel::KernelError),
}
