//! Live progress of an out-of-process child, for presentation (the remote session has no
//! local log a front-end could follow).

/// One piece of a remote child's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildProgress {
    /// A chunk of the child's answer.
    Text(String),
    /// The child started a tool call.
    ToolCall { id: String, title: String },
}

/// Receives progress, keyed by the run's child id.
pub trait ProgressSink: Send + Sync {
    fn progress(&self, child_id: &str, progress: ChildProgress);
}
