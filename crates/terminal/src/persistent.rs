//! Persistent `bash` (`tool-bash-persistent`): one PTY shell per agent, created lazily, whose
//! directory, variables, functions and jobs survive from call to call. Each command is framed
//! by unguessable per-call markers so its output and status can be cut out of the stream.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use dsh_protocol::ContentBlock;
use dsh_tool_shell::register::ContextResolver;
use dsh_tools::DefineError;
use dsh_tools::Tool;
use dsh_tools::ToolCallView;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use serde_json::Value;
use serde_json::json;

use crate::config::PersistentBashConfig;
use crate::pty::SessionStatus;
use crate::pty::WaitReason;
use crate::service::OpenRequest;
use crate::service::TerminalEntry;
use crate::service::TerminalService;

pub const RESET_LINE: &str = "The persistent bash shell was reset; the next bash call starts from the workspace with a fresh current directory and environment.";
const CLIP_NOTE: &str = "<response clipped><NOTE>To save on context only part of this file has been shown to you. You should retry this tool after you have searched inside the file with `grep -n` in order to find the line numbers of what you are looking for.</NOTE>";
const DROPPED_NOTE: &str = "<response clipped><NOTE>The beginning of this command output was dropped by the terminal scrollback limit. The following text is the earliest retained output.</NOTE>\n";

const POLL: Duration = Duration::from_millis(25);

/// One agent's shell slot; the async mutex serialises that agent's calls in FIFO order.
type Slot = Arc<tokio::sync::Mutex<Option<Arc<TerminalEntry>>>>;

/// The persistent `bash` tool.
#[derive(Clone)]
pub struct PersistentBash {
    pub service: Arc<TerminalService>,
    pub resolve: ContextResolver,
    pub config: PersistentBashConfig,
    slots: Arc<Mutex<HashMap<String, Slot>>>,
}

/// `$'…'` quoting with `\\`, `\'`, `\r` and `\n` escaped: the command stays on one line.
pub fn ansi_c_quote(command: &str) -> String {
    let mut out = String::with_capacity(command.len() + 3);
    out.push_str("$'");
    for c in command.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out.push('\'');
    out
}

/// The per-call markers and the one-line wrapper that prints them around the command.
pub struct Framing {
    pub start: String,
    pub end: String,
    pub line: String,
}

impl Framing {
    pub fn new(command: &str) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let start = format!("__DSH_PERSISTENT_BASH_START_{id}__");
        let end = format!("__DSH_PERSISTENT_BASH_END_{id}:");
        let line = format!(
            "printf '%s\\n' {start}; eval -- {}; __dsh_persistent_bash_status=$?; printf '%s%s\\n' {end} \"$__dsh_persistent_bash_status\"",
            ansi_c_quote(command)
        );
        Self { start, end, line }
    }

    /// The command output and status once the end marker (digits, newline) has arrived.
    /// `text` is the stream from the write on; `None` while it has not.
    pub fn complete(&self, text: &str) -> Option<(String, i32)> {
        let mut search = 0;
        while let Some(found) = text[search..].find(&self.end) {
            let at = search + found;
            let rest = &text[at + self.end.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if !digits.is_empty() && rest[digits.len()..].starts_with('\n') {
                let status = digits.parse().unwrap_or(-1);
                return Some((self.body(&text[..at]), status));
            }
            search = at + self.end.len();
        }
        None
    }

    /// What lies after the start marker in `text` (everything when the marker is gone),
    /// without the marker's newline and one trailing newline.
    pub fn body(&self, text: &str) -> String {
        let after = match text.find(&self.start) {
            Some(at) => &text[at + self.start.len()..],
            None => text,
        };
        let after = after.strip_prefix('\n').unwrap_or(after);
        after.strip_suffix('\n').unwrap_or(after).to_owned()
    }
}

/// Clips to `max` UTF-16 units with the clip note; prefixes the dropped-start note.
pub fn render_output(output: &str, status: Option<i32>, max: usize, start_dropped: bool) -> String {
    let units = output.encode_utf16().count();
    let mut text = if units > max {
        let mut cut = String::new();
        let mut used = 0;
        for c in output.chars() {
            let width = c.len_utf16();
            if used + width > max {
                break;
            }
            used += width;
            cut.push(c);
        }
        format!("{cut}{CLIP_NOTE}")
    } else if start_dropped {
        format!("{output}{CLIP_NOTE}")
    } else {
        output.to_owned()
    };
    if start_dropped {
        text = format!("{DROPPED_NOTE}{text}");
    }
    if let Some(code) = status.filter(|&c| c != 0) {
        if text.is_empty() {
            text = format!("[exit code: {code}]");
        } else {
            text.push_str(&format!("\n[exit code: {code}]"));
        }
    }
    text
}

fn join_lines(parts: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

enum Finish {
    Done {
        output: String,
        status: i32,
        start_dropped: bool,
    },
    Waiting {
        output: String,
    },
    Exited {
        output: String,
        status: SessionStatus,
    },
    TimedOut {
        output: String,
    },
}

impl PersistentBash {
    pub fn new(
        service: Arc<TerminalService>,
        resolve: ContextResolver,
        config: PersistentBashConfig,
    ) -> Self {
        Self {
            service,
            resolve,
            config,
            slots: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    pub fn definition(&self) -> Result<ToolDefinition, DefineError> {
        let tool = self.clone();
        Tool::builder("bash")
            .description(self.config.description.clone())
            .validated_parameters(json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line for bash; prefer paths relative to the current folder."}
                },
                "required": ["command"]
            }))
            .raw_output(json!({"type": "string"}), |_args, value| {
                Ok(vec![ContentBlock::text(value.as_str().unwrap_or(""))])
            })
            .present_call(|args: &Value| {
                let command = args.get("command").and_then(Value::as_str).unwrap_or("");
                Some(ToolCallView::terminal(command, None, None))
            })
            .run(move |args: Value, run: ToolRun| {
                let tool = tool.clone();
                async move { tool.call(args, run).await.map(Value::String) }
            })
            .build()
    }

    fn slot(&self, owner: &str) -> Slot {
        dsh_sync::lock(&self.slots)
            .entry(owner.to_owned())
            .or_default()
            .clone()
    }

    async fn call(&self, args: Value, run: ToolRun) -> Result<String, ToolError> {
        let command = args.get("command").and_then(Value::as_str).unwrap_or("");
        if command.trim().is_empty() {
            return Err(ToolError::new("command must be a non-empty string"));
        }
        let owner = run
            .agent()
            .map(|a| a.id().to_owned())
            .ok_or_else(|| ToolError::new("bash requires an owning agent session"))?;
        let slot = self.slot(&owner);
        let mut shell = slot.lock().await;
        let entry = match shell.as_ref() {
            Some(entry) if entry.session.status() == SessionStatus::Running => entry.clone(),
            _ => {
                let entry = self.start_shell(&owner, &run).await?;
                *shell = Some(entry.clone());
                entry
            }
        };
        let outcome = self.run_command(&owner, &entry, command, &run).await;
        let reset = |shell: &mut Option<Arc<TerminalEntry>>| {
            if let Some(entry) = shell.take() {
                let service = self.service.clone();
                let owner = owner.clone();
                tokio::spawn(async move {
                    let _ = service.close(&owner, &entry.id).await;
                });
            }
        };
        match outcome {
            Err(error) => {
                reset(&mut shell);
                Err(error)
            }
            Ok(Finish::Done {
                output,
                status,
                start_dropped,
            }) => Ok(render_output(
                &output,
                Some(status),
                self.config.max_output_chars,
                start_dropped,
            )),
            Ok(Finish::Waiting { output }) => Ok(output),
            Ok(Finish::Exited { output, status }) => {
                reset(&mut shell);
                let how = match status {
                    SessionStatus::Exited {
                        code: Some(code), ..
                    } => format!("[shell exited: code {code}]"),
                    SessionStatus::Exited {
                        signal: Some(signal),
                        ..
                    } => format!("[shell killed by signal: {signal}]"),
                    _ => "[shell exited]".to_owned(),
                };
                Ok(join_lines(&[&output, &how, RESET_LINE]))
            }
            Ok(Finish::TimedOut { output }) => {
                reset(&mut shell);
                let seconds = (self.config.timeout_ms as f64 / 1000.0).round();
                Ok(format!(
                    "Your command timed out after {seconds} seconds or experienced an OOM error. Below is partial output:\n{output}\n{RESET_LINE}"
                ))
            }
        }
    }

    async fn start_shell(
        &self,
        owner: &str,
        run: &ToolRun,
    ) -> Result<Arc<TerminalEntry>, ToolError> {
        let context = (self.resolve)(run)?;
        self.service.watch_owner(run);
        let cwd = context.cwd.clone();
        let (entry, _motd) = self
            .service
            .open(owner, &self.config.backend_type, None, |id| {
                Ok(OpenRequest {
                    id: id.to_owned(),
                    owner: owner.to_owned(),
                    wrapper: context.confinement().and_then(|p| p.pty_wrapper(&cwd)),
                    cwd: cwd.clone(),
                    env: context.child_env(),
                })
            })
            .await?;
        let init = {
            let (entry, _guard) = self.service.begin_send(owner, &entry.id)?;
            entry.session.send("stty -echo", true, run.signal()).await
        };
        match init {
            Ok(outcome)
                if outcome.wait_reason != WaitReason::Timeout
                    && outcome.wait_reason != WaitReason::SessionExit =>
            {
                Ok(entry)
            }
            _ => {
                let _ = self.service.close(owner, &entry.id).await;
                Err(ToolError::new(
                    "persistent bash shell did not accept initialization",
                ))
            }
        }
    }

    async fn run_command(
        &self,
        owner: &str,
        entry: &Arc<TerminalEntry>,
        command: &str,
        run: &ToolRun,
    ) -> Result<Finish, ToolError> {
        let (entry, _guard) = self.service.begin_send(owner, &entry.id)?;
        let session = entry.session.clone();
        let framing = Framing::new(command);
        let start = session.output_end();
        let prompts = session.prompt_count();
        let mut line = framing.line.clone().into_bytes();
        line.push(b'\r');
        let written_at = Instant::now();
        session.write(line).await.map_err(ToolError::from)?;
        let deadline = written_at + Duration::from_millis(self.config.timeout_ms);
        let probe = Duration::from_millis(150);
        let mut last_len = 0usize;
        let mut changed_at = written_at;
        loop {
            let (text, _) = session.output_since(start, usize::MAX);
            if let Some((output, status)) = framing.complete(&text) {
                return Ok(Finish::Done {
                    output,
                    status,
                    start_dropped: !text.contains(&framing.start),
                });
            }
            let now = Instant::now();
            if text.len() != last_len {
                last_len = text.len();
                changed_at = now;
            }
            if session.status() != SessionStatus::Running {
                // Let the reader catch the last bytes before cutting.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let (text, _) = session.output_since(start, usize::MAX);
                let output = if text.contains(&framing.start) {
                    framing.body(&text)
                } else {
                    String::new()
                };
                // An interactive bash announces its own `exit` on the terminal; that line is
                // the shell's, not the command's.
                let output = match output.strip_suffix("exit") {
                    Some(rest) if rest.is_empty() || rest.ends_with('\n') => {
                        rest.strip_suffix('\n').unwrap_or(rest).to_owned()
                    }
                    _ => output,
                };
                return Ok(Finish::Exited {
                    output,
                    status: session.status(),
                });
            }
            let quiet = now.duration_since(changed_at) >= probe;
            let prompted = session.prompt_count() > prompts;
            let foreground = session.foreground_pgid();
            if quiet
                && (prompted
                    || foreground.is_some_and(|pgid| {
                        crate::procfs::reads_terminal(pgid, session_tty(&session).as_deref())
                    }))
            {
                return Ok(Finish::Waiting {
                    output: framing.body(&text),
                });
            }
            if now >= deadline {
                return Ok(Finish::TimedOut {
                    output: framing.body(&text),
                });
            }
            tokio::select! {
                () = run.signal().cancelled() => {
                    if let Some(pgid) = session.foreground_pgid() {
                        crate::procfs::kill_group(pgid, rustix::process::Signal::INT);
                    }
                    return Err(ToolError::aborted());
                }
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }
}

fn session_tty(session: &crate::pty::PtySession) -> Option<std::path::PathBuf> {
    session.tty().map(std::path::Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_the_command_on_one_line() {
        assert_eq!(ansi_c_quote("echo 'a'\nb\\c"), r"$'echo \'a\'\nb\\c'");
        let framing = Framing::new("echo hi\necho there");
        assert!(!framing.line.contains('\n'));
        assert!(framing.start.starts_with("__DSH_PERSISTENT_BASH_START_"));
        assert_ne!(Framing::new("x").start, framing.start);
    }

    #[test]
    fn the_body_and_status_are_cut_out_of_the_stream() {
        let framing = Framing::new("x");
        let text = format!(
            "{}\nline one\nline two\n{}7\ndsh> ",
            framing.start, framing.end
        );
        assert_eq!(
            framing.complete(&text),
            Some(("line one\nline two".to_owned(), 7))
        );
        let partial = format!("{}\nline one\n{}", framing.start, framing.end);
        assert_eq!(framing.complete(&partial), None);
    }

    #[test]
    fn rendering_clips_and_reports_status() {
        assert_eq!(render_output("", Some(1), 10, false), "[exit code: 1]");
        assert_eq!(
            render_output("out", Some(2), 10, false),
            "out\n[exit code: 2]"
        );
        assert_eq!(render_output("out", Some(0), 10, false), "out");
        let clipped = render_output("abcdef", Some(0), 3, false);
        assert!(clipped.starts_with("abc<response clipped>"));
        let dropped = render_output("tail", Some(0), 100, true);
        assert!(dropped.starts_with("<response clipped><NOTE>The beginning"));
        assert!(dropped.ends_with("</NOTE>"));
    }
}
