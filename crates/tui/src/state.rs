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

/// `@path` completion candidates under the input box: each the mention it inserts
/// (`@src/main.rs`, `@"my dir/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub items: Vec<String>,
    pub selected: usize,
    /// The `@…` text before the cursor a choice replaces.
    pub token: String,
}

/// One line of the command palette: what it shows and what choosing it puts in the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaletteItem {
    /// `/model` or a model name.
    pub label: String,
    /// The description (or the argument hint).
    pub detail: String,
    /// The input text after choosing it (`/model `).
    pub insert: String,
}

/// Suggestions while a `/command` (or its argument) is typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Palette {
    /// `commands`, or the command whose argument is completed (`model`).
    pub title: String,
    pub items: Vec<PaletteItem>,
    pub selected: usize,
}

/// One stored session in the `/resume` picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickerItem {
    pub id: String,
    pub title: String,
    /// `3 min ago`.
    pub when: String,
    pub folder: String,
    /// The session belongs to the current folder.
    pub here: bool,
}

/// A picker of a shared command's argument, one step at a time (`/rewind`: the prompt, then
/// files, conversation or both): arrows select, enter takes the choice and asks the command
/// for the next step, or runs it once the argument is complete; esc closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChoicePicker {
    /// The command's name, without the slash.
    pub command: String,
    pub items: Vec<dsh_commands::CommandChoice>,
    pub selected: usize,
}

/// The `/resume` picker: typing filters, arrows select, enter reopens.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Picker {
    pub items: Vec<PickerItem>,
    pub selected: usize,
    pub filter: String,
}

impl Picker {
    /// The items the filter keeps (title, id or folder contains it, case-insensitively).
    pub fn visible(&self) -> Vec<&PickerItem> {
        let filter = self.filter.to_lowercase();
        self.items
            .iter()
            .filter(|item| {
                filter.is_empty()
                    || item.title.to_lowercase().contains(&filter)
                    || item.id.to_lowercase().contains(&filter)
                    || item.folder.to_lowercase().contains(&filter)
            })
            .collect()
    }
}

/// How full the model's context window is (the token meter's projection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextFill {
    pub used_tokens: u64,
    pub window_tokens: u64,
}

impl ContextFill {
    pub fn percent(&self) -> u64 {
        if self.window_tokens == 0 {
            return 0;
        }
        (self.used_tokens.saturating_mul(100) / self.window_tokens).min(100)
    }
}

#[derive(Debug)]
pub struct UiState {
    pub transcript: Transcript,
    pub editor: Editor,
    /// Prompts in arrival order; the front one is answered by keys.
    pub approvals: VecDeque<PendingApproval>,
    /// Questions (`ask_user_question`, plan reviews) in arrival order; the front one is
    /// answered by keys once no approval waits.
    pub questions: VecDeque<crate::questions::PendingQuestions>,
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
    /// Command (or argument) suggestions while a `/…` line is typed.
    pub palette: Option<Palette>,
    /// The `/resume` picker.
    pub picker: Option<Picker>,
    /// The picker of a shared command's argument (`/rewind` without one).
    pub choices: Option<ChoicePicker>,
    pub overlay: Option<Overlay>,
    /// When the running turn started (epoch ms), for the elapsed time.
    pub busy_since_ms: Option<u64>,
    /// The context fill, when a token meter is composed.
    pub context: Option<ContextFill>,
    /// A one-line hint in the status bar (e.g. "press Ctrl-C again to quit").
    pub hint: Option<String>,
    /// Finished entries rendered per width (the view fills it; see [`RenderCache`]).
    pub render_cache: std::cell::RefCell<crate::render_cache::RenderCache>,
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
            questions: VecDeque::new(),
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
            palette: None,
            picker: None,
            choices: None,
            overlay: None,
            busy_since_ms: None,
            context: None,
            hint: None,
            render_cache: std::cell::RefCell::default(),
        }
    }
}
