//! The UI's own slash commands (`/help`, `/new`, `/resume`, `/model`, `/mode`, `/approval`,
//! `/jobs`, `/quit`), the command palette (these plus the shared registry's commands, and
//! model names after `/model `), and the `/resume` picker.

use crossterm::event::KeyCode;
use crossterm::event::KeyEvent;
use dsh_tools::PresentationMode;

use super::BUILTINS;
use super::Controller;
use super::KEYS;
use crate::approval::ApprovalMode;
use crate::state::Overlay;
use crate::state::Palette;
use crate::state::PaletteItem;
use crate::state::Picker;
use crate::state::PickerItem;

/// `3 min ago`, `2 h ago`, `5 d ago` (or `just now`).
pub(crate) fn relative_time(then_ms: u64, now_ms: u64) -> String {
    let secs = now_ms.saturating_sub(then_ms) / 1000;
    match secs {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86_400 => format!("{} h ago", secs / 3600),
        _ => format!("{} d ago", secs / 86_400),
    }
}

impl Controller {
    pub(super) fn command(&mut self, line: &str) {
        let mut words = line.split_whitespace();
        let name = words.next().unwrap_or_default();
        let arg = words.next();
        match name {
            "help" | "?" => {
                let mut lines = vec!["Commands".to_owned()];
                for item in self.command_items() {
                    lines.push(format!("  {:<24} {}", item.label, item.detail));
                }
                lines.push(String::new());
                lines.extend(KEYS.iter().map(|l| (*l).to_owned()));
                self.state.overlay = Some(Overlay {
                    title: "help".to_owned(),
                    lines,
                });
            }
            "new" | "clear" => match self.sessions.create(dsh_host::NewSession {
                id: None,
                cwd: self.cwd.clone(),
            }) {
                Ok(agent) => self.switch(agent),
                Err(error) => self.error(format!("cannot start a session: {error:#}")),
            },
            "resume" => match arg {
                Some(id) => match self.sessions.load(id) {
                    Ok(agent) => self.switch(agent),
                    Err(error) => self.error(format!("cannot resume {id}: {error:#}")),
                },
                None => self.open_picker(),
            },
            "model" => match arg {
                None => {
                    // The palette lists the models; choosing one switches.
                    self.state.editor.set_text("/model ");
                    self.update_palette();
                    if self.state.palette.is_none() {
                        self.info(format!("model: {}", self.state.model));
                    }
                }
                Some(model) => self.switch_model(model),
            },
            "mode" => self.set_mode(arg),
            "approval" | "approvals" => {
                match arg {
                    Some("ask") => self.approval.set_mode(ApprovalMode::Ask),
                    Some("auto") => self.approval.set_mode(ApprovalMode::Auto),
                    Some(other) => {
                        self.error(format!("unknown approval mode {other:?}; use ask or auto"));
                        return;
                    }
                    None => {}
                }
                let mode = match self.approval.mode() {
                    ApprovalMode::Ask => "ask (prompt for each call)",
                    ApprovalMode::Auto => "auto (every call allowed)",
                };
                let granted = self.approval.granted();
                let granted = if granted.is_empty() {
                    String::new()
                } else {
                    format!("; allowed for this session: {}", granted.join(", "))
                };
                self.info(format!("approval: {mode}{granted}"));
            }
            "jobs" => {
                self.refresh_jobs();
                let lines = if self.state.jobs.is_empty() {
                    vec!["no background jobs running".to_owned()]
                } else {
                    self.state.jobs.clone()
                };
                self.state.overlay = Some(Overlay {
                    title: "jobs".to_owned(),
                    lines,
                });
            }
            "quit" | "exit" | "q" => self.quit = true,
            other => self.error(format!("unknown command /{other} (try /help)")),
        }
    }

    fn set_mode(&mut self, arg: Option<&str>) {
        let mode = match arg {
            Some("native") => PresentationMode::Native,
            Some("code") => PresentationMode::Code,
            Some("both") => PresentationMode::Both,
            _ => {
                let current = self.registry.mode_for(Some(self.session.agent.scope()));
                self.info(format!(
                    "tool mode: {} (use /mode native|code|both)",
                    current.as_str()
                ));
                return;
            }
        };
        if let Some(previous) = self.session.mode.take() {
            previous.dispose();
        }
        match self.registry.present_as(self.session.agent.scope(), mode) {
            Ok(disposer) => {
                self.session.mode = Some(disposer);
                self.info(format!("tool mode: {}", mode.as_str()));
            }
            Err(error) => self.error(format!("cannot switch tool mode: {error}")),
        }
    }

    /// `/model NAME`: this session's requests use NAME from the next one on.
    pub(super) fn switch_model(&mut self, model: &str) {
        if !self.models.is_empty() && !self.models.iter().any(|m| m == model) {
            self.error(format!(
                "unknown model {model}; known: {}",
                self.models.join(", ")
            ));
            return;
        }
        // Through the host, like ACP's model option: logged as `model/selected`, so resuming
        // or forking this session keeps asking the chosen model.
        if let Err(error) = self.sessions.set_model(&self.session.agent, model) {
            self.error(format!("cannot switch model: {error}"));
            return;
        }
        self.state.model = model.to_owned();
        self.update_context();
        self.info(format!("model: {model} (from the next request)"));
    }

    /// The palette's command lines: the UI's own, then the registry's (shadowed by ours).
    pub(super) fn command_items(&self) -> Vec<PaletteItem> {
        let mut items: Vec<PaletteItem> = BUILTINS
            .iter()
            .map(|(name, hint, description)| PaletteItem {
                label: if hint.is_empty() {
                    format!("/{name}")
                } else {
                    format!("/{name} {hint}")
                },
                detail: (*description).to_owned(),
                insert: if hint.is_empty() {
                    format!("/{name}")
                } else {
                    format!("/{name} ")
                },
            })
            .collect();
        if let Some(registry) = dsh_commands::CommandRegistry::of(self.session.agent.scope()) {
            for command in registry.list(self.session.agent.scope()) {
                if BUILTINS.iter().any(|(name, ..)| *name == command.name) {
                    continue;
                }
                let (label, insert) = match &command.input {
                    Some(input) => (
                        format!("/{} {}", command.name, input.hint),
                        format!("/{} ", command.name),
                    ),
                    None => (format!("/{}", command.name), format!("/{}", command.name)),
                };
                items.push(PaletteItem {
                    label,
                    detail: command.description,
                    insert,
                });
            }
        }
        items
    }

    /// Suggestions for the `/…` line being typed: command names, or model names after
    /// `/model `.
    pub(super) fn update_palette(&mut self) {
        let text = self.state.editor.text();
        let at_end = self.state.editor.cursor().1 == text.chars().count();
        let palette = match text.strip_prefix('/') {
            Some(rest) if at_end && !text.contains('\n') => {
                if let Some(query) = rest.strip_prefix("model ") {
                    let query = query.trim_start().to_lowercase();
                    let items: Vec<PaletteItem> = self
                        .models
                        .iter()
                        .filter(|m| m.to_lowercase().contains(&query))
                        .map(|m| PaletteItem {
                            label: m.clone(),
                            detail: if *m == self.state.model {
                                "current".to_owned()
                            } else {
                                String::new()
                            },
                            insert: format!("/model {m}"),
                        })
                        .collect();
                    (!items.is_empty()).then(|| Palette {
                        title: "model".to_owned(),
                        items,
                        selected: 0,
                    })
                } else if !rest.contains(char::is_whitespace) {
                    let query = rest.to_lowercase();
                    let all = self.command_items();
                    let name = |item: &PaletteItem| {
                        item.insert.trim().trim_start_matches('/').to_lowercase()
                    };
                    let mut items: Vec<PaletteItem> = all
                        .iter()
                        .filter(|i| name(i).starts_with(&query))
                        .cloned()
                        .collect();
                    items.extend(
                        all.iter()
                            .filter(|i| !name(i).starts_with(&query) && name(i).contains(&query))
                            .cloned(),
                    );
                    (!items.is_empty()).then(|| Palette {
                        title: "commands".to_owned(),
                        items,
                        selected: 0,
                    })
                } else {
                    None
                }
            }
            _ => None,
        };
        // Keep the selection while the same list stays up.
        let selected = self
            .state
            .palette
            .as_ref()
            .filter(|old| palette.as_ref().is_some_and(|new| new.items == old.items))
            .map_or(0, |old| old.selected);
        self.state.palette = palette.map(|mut p| {
            p.selected = selected.min(p.items.len().saturating_sub(1));
            p
        });
    }

    /// Keys the palette consumes; `false` passes the key on.
    pub(super) fn palette_key(&mut self, key: KeyEvent) -> bool {
        let Some(palette) = &mut self.state.palette else {
            return false;
        };
        match key.code {
            KeyCode::Up => {
                palette.selected = palette.selected.saturating_sub(1);
                true
            }
            KeyCode::Down => {
                palette.selected =
                    (palette.selected + 1).min(palette.items.len().saturating_sub(1));
                true
            }
            KeyCode::Tab | KeyCode::Enter => {
                let Some(item) = palette.items.get(palette.selected).cloned() else {
                    return false;
                };
                let typed = self.state.editor.text();
                let complete = item.insert.trim() == typed.trim();
                if key.code == KeyCode::Enter && (complete || !item.insert.ends_with(' ')) {
                    // A whole command (or a chosen argument): run it.
                    self.state.editor.set_text(&item.insert);
                    self.state.palette = None;
                    self.submit();
                    return true;
                }
                self.state.editor.set_text(&item.insert);
                self.state.palette = None;
                self.update_palette();
                true
            }
            KeyCode::Esc => {
                self.state.palette = None;
                true
            }
            _ => false,
        }
    }

    /// `/resume` without an id: the picker of stored sessions (this folder's first).
    fn open_picker(&mut self) {
        match self.sessions.list() {
            Ok(sessions) => {
                let cwd = self.cwd.to_string_lossy().into_owned();
                let now = super::now_ms();
                let mut items: Vec<PickerItem> = sessions
                    .into_iter()
                    .filter(|s| s.parent_session.is_none() && s.id != self.state.session_id)
                    .map(|s| PickerItem {
                        title: s.title.clone().unwrap_or_else(|| "(untitled)".to_owned()),
                        when: relative_time(s.created_at, now),
                        here: s.cwd.as_deref() == Some(cwd.as_str()),
                        folder: s.cwd.unwrap_or_default(),
                        id: s.id,
                    })
                    .collect();
                items.sort_by_key(|item| !item.here);
                if items.is_empty() {
                    self.info("no stored sessions to resume");
                    return;
                }
                self.state.picker = Some(Picker {
                    items,
                    selected: 0,
                    filter: String::new(),
                });
            }
            Err(error) => self.error(format!("cannot list sessions: {error:#}")),
        }
    }

    pub(super) fn picker_key(&mut self, key: KeyEvent) {
        let Some(picker) = &mut self.state.picker else {
            return;
        };
        let count = picker.visible().len();
        match key.code {
            KeyCode::Esc => self.state.picker = None,
            KeyCode::Up => picker.selected = picker.selected.saturating_sub(1),
            KeyCode::Down => picker.selected = (picker.selected + 1).min(count.saturating_sub(1)),
            KeyCode::Enter => {
                let chosen = picker
                    .visible()
                    .get(picker.selected)
                    .map(|item| item.id.clone());
                self.state.picker = None;
                if let Some(id) = chosen {
                    match self.sessions.load(&id) {
                        Ok(agent) => self.switch(agent),
                        Err(error) => self.error(format!("cannot resume {id}: {error:#}")),
                    }
                }
            }
            KeyCode::Backspace => {
                picker.filter.pop();
                picker.selected = 0;
            }
            // Typing filters the list (it is never dropped).
            KeyCode::Char(c) => {
                picker.filter.push(c);
                picker.selected = 0;
            }
            _ => {}
        }
    }
}
