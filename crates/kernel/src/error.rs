//! The kernel's error types. `KernelError` is about scopes; `HookError` is what a listener
//! returns; `PluginError` is what mounting and applying a plugin returns.

/// A scope-level failure. Routing: always a programming/lifecycle error of the caller (it used a
/// scope after disposing it), never something a model can correct.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// The scope was disposed; it accepts no more children or services.
    #[error("scope `{name}` is disposed")]
    ScopeDisposed {
        /// The disposed scope's name.
        name: String,
    },
}

/// The failure of one hook listener (serial hooks stop on it; observers log and contain it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HookError {
    /// A plain message.
    #[error("{0}")]
    Message(String),
    /// Any other error.
    #[error(transparent)]
    Other(#[from] Box<dyn std::error::Error + Send + Sync>),
}

impl HookError {
    /// A hook error carrying only a message.
    pub fn msg(message: impl Into<String>) -> Self {
        Self::Message(message.into())
    }

    /// Wraps any error.
    pub fn other(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Other(Box::new(error))
    }
}

/// Mounting, configuring or applying a plugin failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The configuration value did not deserialize into the plugin's `Config` type.
    /// `path` is the dotted field path when it could be located (`None` = the top level).
    #[error("plugin `{plugin}`: invalid config{}: {message}", path_suffix(path))]
    InvalidConfig {
        /// The plugin's name.
        plugin: String,
        /// Dotted path of the offending field, if known.
        path: Option<String>,
        /// The deserializer's message (without line/column).
        message: String,
    },
    /// `apply` failed; everything it registered so far was disposed.
    #[error("plugin `{plugin}` failed to apply: {source}")]
    Apply {
        /// The plugin's name.
        plugin: String,
        /// What `apply` returned.
        #[source]
        source: Box<PluginError>,
    },
    /// A scope operation failed (usually: the parent scope is already disposed).
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A plain message (for plugins' own `apply` failures).
    #[error("{0}")]
    Message(String),
    /// Any other error (for plugins' own `apply` failures).
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl PluginError {
    /// A plugin error carrying only a message.
    pub fn msg(message: impl Into<String>) -> Self {
        Self::Message(message.into())
    }

    /// Wraps any error.
    pub fn other(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Other(Box::new(error))
    }
}

fn path_suffix(path: &Option<String>) -> String {
    match path {
        Some(p) => format!(" at `{p}`"),
        None => String::new(),
    }
}
