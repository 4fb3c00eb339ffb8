//! Slash commands (`/help`, `/new`, `/resume`, `/model`, `/mode`, `/approval`, `/jobs`,
//! `/quit`).

use dsh_tools::PresentationMode;

use super::Controller;
use super::HELP;
use crate::approval::ApprovalMode;
use crate::state::Overlay;

impl Controller {
    pub(super) fn command(&mut self, line: &str) {
        let mut words = line.split_whitespace();
        let name = words.next().unwrap_or_default();
        let arg = words.next();
        match name {
            "help" | "?" => {
                self.state.overlay = Some(Overlay {
                    title: "help".to_owned(),
                    lines: HELP.iter().map(|l| (*l).to_owned()).collect(),
                });
            }
            "new" | "clear" => match self.factory.new_session(&self.cwd) {
                Ok(agent) => self.switch(agent),
                Err(error) => self.error(format!("cannot start a session: {error:#}")),
            },
            "resume" => match arg {
                Some(id) => match self.factory.resume(id) {
                    Ok(agent) => self.switch(agent),
                    Err(error) => self.error(format!("cannot resume {id}: {error:#}")),
                },
                None => self.list_sessions(),
            },
            "model" => match arg {
                None => {
                    let mut lines = vec![format!("current: {}", self.state.model)];
                    let models = self.factory.models();
                    if !models.is_empty() {
                        lines.push(String::new());
                        lines.extend(models.iter().map(|m| format!("  {m}")));
                        lines.push(String::new());
                        lines.push("/model NAME switches (applies to /new sessions)".to_owned());
                    }
                    self.state.overlay = Some(Overlay {
                        title: "model".to_owned(),
                        lines,
                    });
                }
                Some(model) => match self.factory.set_model(model) {
                    Ok(()) => {
                        self.state.model = model.to_owned();
                        self.info(format!(
                            "model set to {model}; /new starts a session with it"
                        ));
                    }
                    Err(error) => self.error(format!("{error:#}")),
                },
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

    fn list_sessions(&mut self) {
        match self.factory.list_sessions() {
            Ok(sessions) => {
                let mut lines: Vec<String> = sessions
                    .iter()
                    .take(30)
                    .map(|s| {
                        let title = s.title.clone().unwrap_or_else(|| "(untitled)".to_owned());
                        let here = if s.cwd.as_deref() == Some(&*self.cwd.to_string_lossy()) {
                            "*"
                        } else {
                            " "
                        };
                        format!("{here} {}  {title}", s.id)
                    })
                    .collect();
                if lines.is_empty() {
                    lines.push("no stored sessions".to_owned());
                } else {
                    lines.push(String::new());
                    lines.push("/resume ID reopens one (* = this folder)".to_owned());
                }
                self.state.overlay = Some(Overlay {
                    title: "sessions".to_owned(),
                    lines,
                });
            }
            Err(error) => self.error(format!("cannot list sessions: {error:#}")),
        }
    }
}
