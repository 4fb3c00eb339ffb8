//! Everything a frame is drawn from. The view is a pure function of this struct, which is what
//! makes frames snapshot-testable.

use std::collections::VecDeque;

use crate::approval::PendingApproval;
use crate::input::Editor;
use crate::model::Transcript;

/// A modal panel over the transcript (help, session list, jobs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    pub title: String,
    pub lines: Vec<String>,
}

/// `@path` completion candidates under the input box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub items: Vec<String>,
    pub selected: usize,
}

#[derive(Debug)]
pub struct UiState {
    pub transcript: Transcript,
    pub editor: Editor,
    /// Prompts in arrival order; the front one is answered by keys.
    pub approvals: VecDeque<PendingApproval>,
    pub model: String,
    pub cwd: String,
    pub session_id: String,
    /// Running background jobs (`/jobs` lists them).
    pub jobs: Vec<String>,
    /// Show tool output in full (Ctrl-O).
    pub expand_tools: bool,
    /// Show reasoning text (Ctrl-T); collapsed it is one dim line.
    pub show_reasoning: bool,
    /// Lines scrolled up from the bottom of the transcript.
    pub scroll: usize,
    /// The clock the running durations are measured against (epoch ms).
    pub now_ms: u64,
    /// The agent is working on a turn.
    pub busy: bool,
    /// Prompts sent while busy, waiting for their turn.
    pub queued: Vec<String>,
    pub completion: Option<Completion>,
    pub overlay: Option<Overlay>,
    /// A one-line hint in the status bar (e.g. "press Ctrl-C again to quit").
    pub hint: Option<String>,
}

impl UiState {
    pub fn new(
        model: impl Into<String>,
        cwd: impl Into<String>,
        session_id: impl Into<String>,
    ) -> Self {
        Self {
            transcript: Transcript::new(),
            editor: Editor::new(),
            approvals: VecDeque::new(),
            model: model.into(),
            cwd: cwd.into(),
            session_id: session_id.into(),
            jobs: Vec::new(),
            expand_tools: false,
            show_reasoning: false,
            scroll: 0,
            now_ms: 0,
            busy: false,
            queued: Vec::new(),
            completion: None,
            overlay: None,
            hint: None,
        }
    }
}
