//! `dsh-tui`: the interactive terminal UI (`dsh` in a project folder, `dsh resume`).
//!
//! Owns: the transcript fold of session events ([`model`]), the frame renderer ([`view`],
//! a pure function of [`UiState`]), the input editor, the inline approval channel
//! ([`TuiApproval`]), the inline question prompt (`ask_user_question`, plan reviews:
//! [`TuiQuestions`]), live tool output into running cards ([`LiveOutput`]), the event loop and terminal safety (raw mode/alternate screen restored on
//! exit, panic and SIGTERM), the trust question asked before it starts ([`ask_trust`]).
//! Does not own: how agents are composed (`dsh_host::SessionHost` supplies them), tools, models.
//! Must not depend on: `dsh-cli`, `dsh-acp`, a capability crate (`dsh-tool-*`,
//! `dsh-plan-mode`, `dsh-goal`, `dsh-subagent*`; `scripts/check-deps.py`), HTTP.

mod app;
mod approval;
mod cards;
mod controller;
mod input;
mod live;
mod markdown;
pub mod model;
mod questions;
mod render_cache;
pub mod scrollback;
mod state;
mod terminal;
mod text;
mod trust;
pub mod view;

pub use app::HostNotice;
pub use app::NOT_A_TERMINAL;
pub use app::Start;
pub use app::TuiApp;
pub use app::event_loop;
pub use app::is_interactive;
pub use app::run;
pub use approval::Answer;
pub use approval::ApprovalMode;
pub use approval::PendingApproval;
pub use approval::TuiApproval;
pub use controller::Controller;
pub use input::Editor;
pub use live::LiveOutput;
pub use live::OutputDropped;
pub use model::Presenters;
pub use model::Transcript;
pub use questions::PendingQuestions;
pub use questions::TuiQuestions;
pub use render_cache::RenderCache;
pub use state::Completion;
pub use state::ContextFill;
pub use state::Overlay;
pub use state::Palette;
pub use state::PaletteItem;
pub use state::Picker;
pub use state::PickerItem;
pub use state::UiState;
pub use trust::ask_trust;
pub use view::render;
