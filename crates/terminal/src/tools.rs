//! The six `terminal_*` tools (`tool-terminal`): parameters, exact result texts, the per-tool
//! byte bound, and background sends as jobs.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;

use dsh_protocol::ContentBlock;
use dsh_tool_shell::JobsRuntime;
use dsh_tool_shell::OwnerId;
use dsh_tool_shell::jobs::JobError;
use dsh_tool_shell::jobs::JobOutcome;
use dsh_tool_shell::jobs::JobProducer;
use dsh_tool_shell::jobs::JobRun;
use dsh_tool_shell::jobs::JobSpec;
use dsh_tool_shell::jobs::JobStatus;
use dsh_tool_shell::register::ContextResolver;
use dsh_tools::DefineError;
use dsh_tools::Tool;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::TerminalToolsConfig;
use crate::error::TerminalError;
use crate::pty::SessionStatus;
use crate::pty::utf8_head;
use crate::pty::utf8_tail;
use crate::service::CloseOutcome;
use crate::service::OpenRequest;
use crate::service::TerminalService;

/// `tool:pty`, order 106 (exact).
pub const SECTION: (&str, u32) = ("tool:pty", 106);
pub const SECTION_TEXT: &str = "Terminals are for work that has to keep state between calls or answer interactive input; a single bounded command is better served by the shell and file tools. Keep the ids you open and close each terminal once you are done with it. A send that ends in inferred_idle or timeout only means output went quiet: the command in the foreground may still be running.";

const OPEN_DESCRIPTION: &str = "Start a terminal that lives across tool calls and belongs to you alone, using one of the registered backend types. Choose it when a shell or REPL has to remember state between calls.";
const SEND_DESCRIPTION: &str = "Type text into one of your terminals. Unless told otherwise it presses Enter and returns when the prompt comes back, input is awaited, output stays quiet, the time limit passes or the terminal exits.";
const SEND_BACKGROUND_SUFFIX: &str = " With background set it returns at once with a job id to follow through job_output or job_kill.";
const READ_DESCRIPTION: &str =
    "Page through the output a terminal has kept, without typing anything into it.";
const SIGNAL_DESCRIPTION: &str = "Deliver one of the permitted signals to whatever process group runs in the foreground of a terminal.";
const CLOSE_DESCRIPTION: &str =
    "Shut a terminal down; returns once every process it started has exited.";
const LIST_DESCRIPTION: &str = "Show the terminals this agent has open.";

/// The marker every over-long result ends with.
pub const TRUNCATED: &str = "\n[output truncated]";

/// `boundTerminalText`: the UTF-8-safe head of `max − 19` bytes plus the marker.
pub fn bound_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let head = utf8_head(text, max.saturating_sub(TRUNCATED.len()));
    format!("{head}{TRUNCATED}")
}

/// What every terminal tool shares.
#[derive(Clone)]
pub struct TerminalTools {
    pub service: Arc<TerminalService>,
    pub resolve: ContextResolver,
    pub jobs: Option<Arc<JobsRuntime>>,
    pub config: TerminalToolsConfig,
}

fn owner(run: &ToolRun) -> Result<String, ToolError> {
    run.agent()
        .map(|agent| agent.id().to_owned())
        .ok_or_else(|| ToolError::new("terminal tools require an initiating agent"))
}

fn session_id(args: &Value) -> Result<String, ToolError> {
    match args.get("sessionId").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => Ok(id.to_owned()),
        _ => Err(ToolError::new("sessionId must be a non-empty string")),
    }
}

fn text_output(max: usize) -> impl Fn(&Value, &Value) -> Result<Vec<ContentBlock>, ToolError> {
    move |_args, value| {
        let text = value.get("text").and_then(Value::as_str).unwrap_or("");
        Ok(vec![ContentBlock::text(bound_text(text, max))])
    }
}

/// Re-bounds a single-text-block result (errors too) to `max` bytes.
fn finalize(
    max: usize,
) -> impl Fn(
    &dsh_tools::Execution,
    &dsh_tools::ToolResult,
) -> Result<Option<Vec<ContentBlock>>, ToolError>
+ Send
+ Sync
+ 'static {
    move |_exec, result| match result.content.as_slice() {
        [ContentBlock::Text { text }] if text.len() > max => {
            Ok(Some(vec![ContentBlock::text(bound_text(text, max))]))
        }
        _ => Ok(None),
    }
}

fn object_output() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
}

fn session_id_param() -> Value {
    json!({"type": "string", "description": "Id of the terminal, as terminal_open gave it."})
}

impl TerminalTools {
    pub fn definitions(&self) -> Result<Vec<ToolDefinition>, DefineError> {
        Ok(vec![
            self.open()?,
            self.send()?,
            self.read()?,
            self.signal()?,
            self.close()?,
            self.list()?,
        ])
    }

    fn max(&self) -> usize {
        self.config.max_result_bytes
    }

    fn open(&self) -> Result<ToolDefinition, DefineError> {
        let tools = self.clone();
        Tool::builder("terminal_open")
            .description(OPEN_DESCRIPTION)
            .validated_parameters(json!({
                "type": "object",
                "properties": {
                    "type": {"type": "string", "description": "Which registered backend to start; normally \"shell\"."},
                    "name": {"type": "string", "description": "A name of your choosing; must not clash with another open terminal."},
                    "cwd": {"type": "string", "description": "Starting folder; the workspace root when left out."}
                },
                "required": ["type"]
            }))
            .raw_output(object_output(), text_output(self.max()))
            .finalize_content(finalize(self.max()))
            .present_call(|args: &Value| {
                let kind = args.get("type").and_then(Value::as_str).unwrap_or("shell");
                Some(ToolCallView::generic(format!("Open terminal ({kind})")).kind(ToolCallKind::Execute))
            })
            .run(move |args: Value, run: ToolRun| {
                let tools = tools.clone();
                async move { tools.run_open(args, run).await }
            })
            .build()
    }

    async fn run_open(&self, args: Value, run: ToolRun) -> Result<Value, ToolError> {
        let owner = owner(&run)?;
        let kind = args.get("type").and_then(Value::as_str).unwrap_or("");
        if kind.is_empty() {
            return Err(ToolError::new("type must be a non-empty string"));
        }
        let name = args.get("name").and_then(Value::as_str);
        let context = (self.resolve)(&run)?;
        let cwd = match args.get("cwd").and_then(Value::as_str) {
            Some(cwd) if !cwd.is_empty() => context.cwd.join(cwd),
            _ => context.cwd.clone(),
        };
        self.service.watch_owner(&run);
        let (entry, motd) = self
            .service
            .open(&owner, kind, name, |id| {
                Ok(OpenRequest {
                    id: id.to_owned(),
                    owner: owner.clone(),
                    wrapper: context
                        .confinement()
                        .and_then(|policy| policy.pty_wrapper(&cwd)),
                    cwd: cwd.clone(),
                    env: context.child_env(),
                })
            })
            .await?;
        let mut prefix = format!("started terminal session {}", entry.id);
        if let Some(name) = &entry.name {
            prefix.push_str(&format!(" ({name})"));
        }
        prefix.push_str(&format!(" [type: {}]\n", entry.kind));
        let shown = if motd.is_empty() {
            "(no startup output)"
        } else {
            motd.as_str()
        };
        let full = format!("{prefix}{shown}");
        // Over the cap the prefix stays and the newest start-up output is kept.
        let text = if full.len() > self.max() {
            let room = self.max().saturating_sub(prefix.len() + TRUNCATED.len());
            let (tail, _) = utf8_tail(shown.as_bytes(), room);
            format!("{prefix}{}{TRUNCATED}", String::from_utf8_lossy(tail))
        } else {
            full
        };
        let mut value = serde_json::Map::new();
        value.insert("text".into(), json!(text));
        value.insert("sessionId".into(), json!(entry.id));
        if let Some(name) = &entry.name {
            value.insert("name".into(), json!(name));
        }
        value.insert("type".into(), json!(entry.kind));
        if let Some(pid) = entry.session.pid() {
            value.insert("pid".into(), json!(pid));
        }
        value.insert("status".into(), json!("running"));
        value.insert("motd".into(), json!(motd));
        Ok(Value::Object(value))
    }

    fn send(&self) -> Result<ToolDefinition, DefineError> {
        let tools = self.clone();
        let mut properties = json!({
            "sessionId": session_id_param(),
            "text": {"type": "string", "description": "Text to type into the terminal."},
            "submit": {"type": "boolean", "description": "Press Enter after the text (default true)."}
        });
        let mut description = SEND_DESCRIPTION.to_owned();
        if self.config.enable_run_in_background {
            description.push_str(SEND_BACKGROUND_SUFFIX);
            properties["run_in_background"] = json!({
                "type": "boolean",
                "description": "Return at once with a job id; read the output with job_output."
            });
        }
        Tool::builder("terminal_send")
            .description(description)
            .validated_parameters(json!({
                "type": "object",
                "properties": properties,
                "required": ["sessionId", "text"]
            }))
            .raw_output(object_output(), text_output(self.max()))
            .presentation_meta(|_args, value| Ok(value.get("meta").cloned().unwrap_or(Value::Null)))
            .finalize_content(finalize(self.max()))
            .present_call(|args: &Value| {
                let text = args.get("text").and_then(Value::as_str).unwrap_or("");
                Some(ToolCallView::terminal(text, None, None))
            })
            .run(move |args: Value, run: ToolRun| {
                let tools = tools.clone();
                async move { tools.run_send(args, run).await }
            })
            .build()
    }

    async fn run_send(&self, args: Value, run: ToolRun) -> Result<Value, ToolError> {
        let owner = owner(&run)?;
        let id = session_id(&args)?;
        let text = args
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let submit = args.get("submit").and_then(Value::as_bool).unwrap_or(true);
        let background = args
            .get("run_in_background")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if background {
            if !self.config.enable_run_in_background {
                return Err(ToolError::new(
                    "background terminal sends are disabled by tool-terminal configuration",
                ));
            }
            let Some(jobs) = self.jobs.clone() else {
                return Err(ToolError::new(
                    "background terminal sends require @deepseek-ai/dsh-jobs and @deepseek-ai/dsh-tool-jobs",
                ));
            };
            return self.start_background(&jobs, &owner, &id, text, submit);
        }
        let (entry, _guard) = self.service.begin_send(&owner, &id)?;
        let outcome = entry.session.send(&text, submit, run.signal()).await?;
        let viewport = if outcome.viewport.is_empty() {
            "(no new output)".to_owned()
        } else {
            outcome.viewport.clone()
        };
        let meta_lines = format!(
            "\n[wait: {}]\n[session: {}]",
            outcome.wait_reason.as_str(),
            outcome.status.render()
        );
        let marker = if outcome.truncated { TRUNCATED } else { "" };
        let full = format!("{viewport}{meta_lines}{marker}");
        let text = if full.len() > self.max() {
            // Keep the newest output that fits before the metadata and the marker.
            let room = self
                .max()
                .saturating_sub(meta_lines.len() + TRUNCATED.len());
            let (tail, _) = utf8_tail(viewport.as_bytes(), room);
            format!("{}{meta_lines}{TRUNCATED}", String::from_utf8_lossy(tail))
        } else {
            full
        };
        let meta = json!({
            "viewport": outcome.viewport,
            "waitReason": outcome.wait_reason.as_str(),
            "sessionStatus": outcome.status,
            "truncated": outcome.truncated,
        });
        Ok(json!({
            "text": text,
            "kind": "foreground",
            "viewport": outcome.viewport,
            "waitReason": outcome.wait_reason.as_str(),
            "sessionStatus": outcome.status,
            "truncated": outcome.truncated,
            "meta": meta,
        }))
    }

    fn start_background(
        &self,
        jobs: &Arc<JobsRuntime>,
        owner: &str,
        id: &str,
        text: String,
        submit: bool,
    ) -> Result<Value, ToolError> {
        let (entry, guard) = self.service.begin_send(owner, id)?;
        let label_text = if text.is_empty() {
            "(input)"
        } else {
            text.as_str()
        };
        let spec = JobSpec {
            kind: "pty-send".to_owned(),
            label: format!("{id}: {label_text}"),
            owner: Some(OwnerId::new(owner)),
            output_limit_bytes: Some(self.max() as u64),
        };
        let limit = self.max();
        let job_id = jobs
            .start(spec, move || {
                let cancel = CancellationToken::new();
                let start = entry.session.output_end();
                let producer = Arc::new(SendJob {
                    session: entry.session.clone(),
                    cancel: cancel.clone(),
                    read_from: Mutex::new(start),
                    limit,
                });
                let session = entry.session.clone();
                let done = Box::pin(async move {
                    let _guard = guard;
                    let (prompts, written_at) = (session.prompt_count(), Instant::now());
                    let mut bytes = text.into_bytes();
                    if submit {
                        bytes.push(b'\r');
                    }
                    session
                        .write(bytes)
                        .await
                        .map_err(|e| JobError::Failed(e.message))?;
                    match session.wait_ready(written_at, prompts, &cancel).await {
                        Ok(reason) => {
                            let detail = match session.status() {
                                SessionStatus::Exited { code, signal } => format!(
                                    "session exited: {}",
                                    code.map(|c| c.to_string())
                                        .or(signal)
                                        .unwrap_or_else(|| "unknown".to_owned())
                                ),
                                SessionStatus::Running => format!("wait: {}", reason.as_str()),
                            };
                            Ok(JobOutcome {
                                status: JobStatus::Completed,
                                detail: Some(detail),
                                output: None,
                            })
                        }
                        Err(_) => {
                            if let Some(pgid) = session.foreground_pgid() {
                                crate::procfs::kill_group(pgid, rustix::process::Signal::INT);
                            }
                            Ok(JobOutcome {
                                status: JobStatus::Killed,
                                detail: None,
                                output: None,
                            })
                        }
                    }
                });
                Ok(JobRun { producer, done })
            })
            .map_err(ToolError::from)?;
        Ok(json!({
            "text": format!("started background job {job_id}"),
            "kind": "background",
            "jobId": job_id,
        }))
    }

    fn read(&self) -> Result<ToolDefinition, DefineError> {
        let tools = self.clone();
        Tool::builder("terminal_read")
            .description(READ_DESCRIPTION)
            .validated_parameters(json!({
                "type": "object",
                "properties": {
                    "sessionId": session_id_param(),
                    "offset": {"type": "number", "description": "How many lines back from the newest to start (default 0)."},
                    "count": {"type": "number", "description": "How many lines to return (default 500; the backend may return fewer)."}
                },
                "required": ["sessionId"]
            }))
            .raw_output(object_output(), text_output(self.max()))
            .finalize_content(finalize(self.max()))
            .concurrency_safe(|_| true)
            .run(move |args: Value, run: ToolRun| {
                let tools = tools.clone();
                async move { tools.run_read(&args, &run) }
            })
            .build()
    }

    fn run_read(&self, args: &Value, run: &ToolRun) -> Result<Value, ToolError> {
        let owner = owner(run)?;
        let id = session_id(args)?;
        let entry = self.service.get(&owner, &id)?;
        let offset = safe_integer(args.get("offset"), 0, true).ok_or_else(|| {
            TerminalError::new(
                "INVALID_READ",
                "PTY read offset must be a non-negative safe integer",
            )
        })?;
        let count = safe_integer(args.get("count"), 500, false).ok_or_else(|| {
            TerminalError::new(
                "INVALID_READ",
                "PTY read count must be a positive safe integer",
            )
        })?;
        let page = entry.session.read(offset, count);
        let body = if page.text.is_empty() {
            "(no retained output)"
        } else {
            page.text.as_str()
        };
        let mut text = format!(
            "{body}\n[lines: {}-{} of {}]",
            page.line_begin, page.line_end, page.total_lines
        );
        if page.truncated {
            text.push_str(TRUNCATED);
        }
        Ok(json!({
            "text": text,
            "totalLines": page.total_lines,
            "lineBegin": page.line_begin,
            "lineEnd": page.line_end,
            "truncated": page.truncated,
            "retained": page.text,
        }))
    }

    fn signal(&self) -> Result<ToolDefinition, DefineError> {
        let tools = self.clone();
        Tool::builder("terminal_signal")
            .description(SIGNAL_DESCRIPTION)
            .validated_parameters(json!({
                "type": "object",
                "properties": {
                    "sessionId": session_id_param(),
                    "signal": {
                        "type": "string",
                        "enum": ["SIGINT", "SIGTERM", "SIGKILL", "SIGTSTP", "SIGHUP"],
                        "description": "SIGKILL aimed at the shell itself is refused; close the terminal with terminal_close instead."
                    }
                },
                "required": ["sessionId", "signal"]
            }))
            .raw_output(object_output(), text_output(self.max()))
            .finalize_content(finalize(self.max()))
            .run(move |args: Value, run: ToolRun| {
                let tools = tools.clone();
                async move {
                    let owner = owner(&run)?;
                    let id = session_id(&args)?;
                    let name = args.get("signal").and_then(Value::as_str).unwrap_or("");
                    let signal = parse_signal(name).ok_or_else(|| {
                        ToolError::new(format!("unsupported terminal signal {name}"))
                    })?;
                    let entry = tools.service.get(&owner, &id)?;
                    let pgid = entry.session.signal(signal)?;
                    Ok(json!({
                        "text": format!("delivered {name} to foreground process group {pgid}"),
                        "signal": name,
                        "pgid": pgid,
                    }))
                }
            })
            .build()
    }

    fn close(&self) -> Result<ToolDefinition, DefineError> {
        let tools = self.clone();
        Tool::builder("terminal_close")
            .description(CLOSE_DESCRIPTION)
            .validated_parameters(json!({
                "type": "object",
                "properties": {"sessionId": session_id_param()},
                "required": ["sessionId"]
            }))
            .raw_output(object_output(), text_output(self.max()))
            .finalize_content(finalize(self.max()))
            .run(move |args: Value, run: ToolRun| {
                let tools = tools.clone();
                async move {
                    let owner = owner(&run)?;
                    let id = session_id(&args)?;
                    let text = match tools.service.close(&owner, &id).await? {
                        CloseOutcome::Closed => format!("closed terminal session {id}"),
                        CloseOutcome::AlreadyClosing => {
                            format!("terminal session {id} was already closing")
                        }
                    };
                    Ok(json!({"text": text, "sessionId": id}))
                }
            })
            .build()
    }

    fn list(&self) -> Result<ToolDefinition, DefineError> {
        let tools = self.clone();
        Tool::builder("terminal_list")
            .description(LIST_DESCRIPTION)
            .validated_parameters(json!({"type": "object", "properties": {}}))
            .raw_output(object_output(), text_output(self.max()))
            .finalize_content(finalize(self.max()))
            .concurrency_safe(|_| true)
            .run(move |_args: Value, run: ToolRun| {
                let tools = tools.clone();
                async move {
                    let owner = owner(&run)?;
                    let sessions = tools.service.list(&owner);
                    let text = if sessions.is_empty() {
                        "(no terminal sessions)".to_owned()
                    } else {
                        sessions
                            .iter()
                            .map(|s| s.line())
                            .collect::<Vec<_>>()
                            .join("\n")
                    };
                    let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
                    Ok(json!({"text": text, "sessions": ids}))
                }
            })
            .build()
    }
}

/// A JSON number that is a safe integer (≥ 0 when `zero_ok`, else ≥ 1); absent → `default`.
fn safe_integer(value: Option<&Value>, default: u64, zero_ok: bool) -> Option<u64> {
    let Some(value) = value else {
        return Some(default);
    };
    let number = value.as_f64()?;
    let valid = number.fract() == 0.0
        && number <= 9_007_199_254_740_991.0
        && if zero_ok {
            number >= 0.0
        } else {
            number >= 1.0
        };
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    valid.then_some(number as u64)
}

fn parse_signal(name: &str) -> Option<rustix::process::Signal> {
    use rustix::process::Signal;
    Some(match name {
        "SIGINT" => Signal::INT,
        "SIGTERM" => Signal::TERM,
        "SIGKILL" => Signal::KILL,
        "SIGTSTP" => Signal::TSTP,
        "SIGHUP" => Signal::HUP,
        _ => return None,
    })
}

/// A background send as a job: cancel interrupts the foreground program, reads consume the
/// new output.
struct SendJob {
    session: Arc<crate::pty::PtySession>,
    cancel: CancellationToken,
    read_from: Mutex<u64>,
    limit: usize,
}

impl JobProducer for SendJob {
    fn cancel(&self, _reason: Option<&str>) -> Result<(), JobError> {
        self.cancel.cancel();
        Ok(())
    }

    fn read_output(&self) -> Option<String> {
        let mut from = dsh_sync::lock(&self.read_from);
        let end = self.session.output_end();
        let (text, truncated) = self.session.output_since(*from, self.limit);
        *from = end;
        if truncated {
            let sep = if text.ends_with('\n') { "" } else { "\n" };
            return Some(format!("{text}{sep}[output truncated]"));
        }
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounding_keeps_the_total_within_the_cap() {
        let text = "x".repeat(100);
        let bounded = bound_text(&text, 64);
        assert_eq!(bounded.len(), 64);
        assert!(bounded.ends_with("\n[output truncated]"));
        assert_eq!(bound_text("short", 64), "short");
        let wide = "\u{e9}".repeat(40);
        let bounded = bound_text(&wide, 64);
        assert!(bounded.len() <= 64);
    }

    #[test]
    fn read_offsets_must_be_safe_integers() {
        assert_eq!(safe_integer(None, 500, false), Some(500));
        assert_eq!(safe_integer(Some(&json!(0)), 1, true), Some(0));
        assert_eq!(safe_integer(Some(&json!(0)), 1, false), None);
        assert_eq!(safe_integer(Some(&json!(1.5)), 1, true), None);
        assert_eq!(safe_integer(Some(&json!(-1)), 1, true), None);
    }
}
