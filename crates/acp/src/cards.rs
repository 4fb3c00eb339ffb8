//! Presentation cards (tool-runtime-spec §8.3) rendered as ACP tool-call updates (§1B).
//!
//! Presenters stay pure and cwd-free: the bridge, which knows the session cwd, relativizes
//! titles, resolves terminal cwds and adds the console fence.

use std::path::Path;
use std::path::PathBuf;

use agent_client_protocol::v1::schema::Content;
use agent_client_protocol::v1::schema::ContentBlock as AcpBlock;
use agent_client_protocol::v1::schema::Diff;
use agent_client_protocol::v1::schema::Meta;
use agent_client_protocol::v1::schema::Terminal;
use agent_client_protocol::v1::schema::TextContent;
use agent_client_protocol::v1::schema::ToolCall;
use agent_client_protocol::v1::schema::ToolCallContent;
use agent_client_protocol::v1::schema::ToolCallLocation;
use agent_client_protocol::v1::schema::ToolCallStatus;
use agent_client_protocol::v1::schema::ToolCallUpdate;
use agent_client_protocol::v1::schema::ToolCallUpdateFields;
use agent_client_protocol::v1::schema::ToolKind;
use dsh_protocol::ContentBlock;
use dsh_tools::FileDiff;
use dsh_tools::FileLocation;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolResultView;
use serde_json::Value;
use serde_json::json;

/// What the bridge knows that presenters must not: where the session runs and what the client
/// can display.
#[derive(Debug, Clone)]
pub(crate) struct RenderContext {
    pub(crate) cwd: PathBuf,
    /// `clientCapabilities._meta.terminal_output === true` at `initialize`.
    pub(crate) terminal_output: bool,
}

fn kind_of(kind: Option<ToolCallKind>) -> ToolKind {
    match kind {
        Some(ToolCallKind::Read) => ToolKind::Read,
        Some(ToolCallKind::Edit) => ToolKind::Edit,
        Some(ToolCallKind::Delete) => ToolKind::Delete,
        Some(ToolCallKind::Move) => ToolKind::Move,
        Some(ToolCallKind::Search) => ToolKind::Search,
        Some(ToolCallKind::Execute) => ToolKind::Execute,
        Some(ToolCallKind::Fetch) => ToolKind::Fetch,
        Some(ToolCallKind::Other) | None => ToolKind::Other,
    }
}

fn text_block(text: impl Into<String>) -> ToolCallContent {
    ToolCallContent::Content(Content::new(AcpBlock::Text(TextContent::new(text.into()))))
}

/// The text blocks of harness content as ACP content (non-text blocks have no ACP rendering
/// in a tool card and are dropped, as in the reference).
pub(crate) fn text_content(blocks: &[ContentBlock]) -> Vec<ToolCallContent> {
    blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text_block(text.clone())),
            _ => None,
        })
        .collect()
}

/// `path` as the protocol requires it ("All file paths in the protocol MUST be absolute"):
/// a relative path is taken against the session cwd, and `.` / `..` are folded lexically (the
/// file may not exist yet, so nothing is resolved on disk).
pub(crate) fn absolute_path(path: &str, cwd: &Path) -> PathBuf {
    use std::path::Component;
    let joined = cwd.join(path);
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                // Never climbs above the root.
                if out.parent().is_some() {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn diff_content(diffs: &[FileDiff], cwd: &Path) -> Vec<ToolCallContent> {
    diffs
        .iter()
        .map(|diff| {
            ToolCallContent::Diff(
                Diff::new(absolute_path(&diff.path, cwd), diff.new_text.clone())
                    .old_text(diff.old_text.clone()),
            )
        })
        .collect()
}

fn acp_locations(locations: &[FileLocation], cwd: &Path) -> Vec<ToolCallLocation> {
    locations
        .iter()
        .map(|location| {
            let line = location.line.and_then(|line| u32::try_from(line).ok());
            ToolCallLocation::new(absolute_path(&location.path, cwd)).line(line)
        })
        .collect()
}

/// `rawInput` is the arguments object the model sent. Arguments that were not JSON have no
/// object to show and are left out (a string there makes schema-checking clients drop the
/// whole call).
fn raw_input(arguments: &Value) -> Option<Value> {
    match arguments {
        Value::String(_) => None,
        other => Some(other.clone()),
    }
}

/// Replaces each occurrence of `path` in `title` by its cwd-relative form when `path` is
/// absolute and strictly inside `cwd`; anything else leaves the title unchanged.
pub(crate) fn relativize_title(title: &str, path: Option<&str>, cwd: &Path) -> String {
    let Some(path) = path else {
        return title.to_owned();
    };
    let absolute = Path::new(path);
    if !absolute.is_absolute() {
        return title.to_owned();
    }
    let Ok(relative) = absolute.strip_prefix(cwd) else {
        return title.to_owned();
    };
    let relative = relative.to_string_lossy();
    if relative.is_empty() || relative.starts_with("..") {
        return title.to_owned();
    }
    title.replace(path, &relative)
}

fn terminal_cwd(view_cwd: Option<&str>, session_cwd: &Path) -> String {
    match view_cwd {
        Some(cwd) if Path::new(cwd).is_absolute() => cwd.to_owned(),
        Some(cwd) => session_cwd.join(cwd).to_string_lossy().into_owned(),
        None => session_cwd.to_string_lossy().into_owned(),
    }
}

fn meta(value: Value) -> Option<Meta> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// The `tool_call` for a pending card. Returns the call and whether it is a terminal card the
/// client will track by id (so a terminal result may address it). `arguments` are the parsed
/// arguments of the call (its `rawInput`).
pub(crate) fn call_update(
    call_id: &str,
    card: &ToolCallView,
    arguments: &Value,
    ctx: &RenderContext,
) -> (ToolCall, bool) {
    let raw_input = raw_input(arguments);
    match card {
        ToolCallView::Generic {
            title,
            kind,
            content,
            locations,
            ..
        } => {
            let first = locations
                .as_ref()
                .and_then(|l| l.first())
                .map(|l| l.path.as_str());
            let mut call =
                ToolCall::new(call_id.to_owned(), relativize_title(title, first, &ctx.cwd))
                    .kind(kind_of(*kind))
                    .status(ToolCallStatus::InProgress)
                    .raw_input(raw_input);
            if let Some(locations) = locations {
                call = call.locations(acp_locations(locations, &ctx.cwd));
            }
            if let Some(content) = content {
                call = call.content(text_content(content));
            }
            (call, false)
        }
        ToolCallView::Diff {
            title,
            diffs,
            locations,
        } => {
            let first = diffs.first().map(|d| d.path.as_str()).or_else(|| {
                locations
                    .as_ref()
                    .and_then(|l| l.first())
                    .map(|l| l.path.as_str())
            });
            let mut call =
                ToolCall::new(call_id.to_owned(), relativize_title(title, first, &ctx.cwd))
                    .kind(ToolKind::Edit)
                    .status(ToolCallStatus::InProgress)
                    .raw_input(raw_input);
            if let Some(locations) = locations {
                call = call.locations(acp_locations(locations, &ctx.cwd));
            }
            (call.content(diff_content(diffs, &ctx.cwd)), false)
        }
        ToolCallView::Terminal {
            title,
            description,
            cwd,
        } => {
            let mut content: Vec<ToolCallContent> =
                description.iter().map(|d| text_block(d.clone())).collect();
            let mut call = ToolCall::new(call_id.to_owned(), title.clone())
                .kind(ToolKind::Execute)
                .status(ToolCallStatus::InProgress)
                .raw_input(raw_input);
            if ctx.terminal_output {
                content.push(ToolCallContent::Terminal(Terminal::new(call_id.to_owned())));
                let cwd = terminal_cwd(cwd.as_deref(), &ctx.cwd);
                call = call.meta(meta(
                    json!({"terminal_info": {"terminal_id": call_id, "cwd": cwd}}),
                ));
            }
            (call.content(content), ctx.terminal_output)
        }
    }
}

/// Terminal output as console text for clients without the terminal capability.
fn console_fence(output: &str) -> String {
    format!("```console\n{}\n```", output.trim_end_matches(['\n', '\r']))
}

/// A progress update appending `data` to the call's client-side terminal (the call keeps its
/// status and content).
pub(crate) fn live_terminal_update(call_id: &str, data: &str) -> ToolCallUpdate {
    let data = json!({"terminal_output": {"terminal_id": call_id, "data": data}});
    ToolCallUpdate::new(call_id.to_owned(), ToolCallUpdateFields::new()).meta(meta(data))
}

/// A progress update replacing the call's content with the console text of its output so far.
pub(crate) fn live_console_update(call_id: &str, tail: &str) -> ToolCallUpdate {
    ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().content(vec![text_block(console_fence(tail))]),
    )
}

/// The completing `tool_call_update`. `card` is the result presenter's view (`None` = generic
/// fallback with the raw content); `terminal_call` says the pending card was a terminal one.
pub(crate) fn result_update(
    call_id: &str,
    card: Option<ToolResultView>,
    raw: &[ContentBlock],
    is_error: bool,
    terminal_call: bool,
    ctx: &RenderContext,
) -> ToolCallUpdate {
    let status = if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let fields = ToolCallUpdateFields::new().status(status);
    let generic = |title: Option<String>, content: Option<Vec<ContentBlock>>| {
        let content = content.map_or_else(|| text_content(raw), |c| text_content(&c));
        ToolCallUpdate::new(
            call_id.to_owned(),
            fields.clone().title(title).content(content),
        )
    };
    match card {
        None => generic(None, None),
        Some(ToolResultView::Generic { title, content }) => generic(title, content),
        // Orphan guard: a terminal result needs a terminal call card.
        Some(ToolResultView::Terminal {
            title,
            output,
            exit_code,
            signal,
        }) if terminal_call || !ctx.terminal_output => {
            if ctx.terminal_output {
                let mut data = json!({"terminal_output": {"terminal_id": call_id, "data": output.unwrap_or_default()}});
                if let Some(code) = exit_code {
                    data["terminal_exit"] = json!({"terminal_id": call_id, "exit_code": code});
                } else if let Some(signal) = signal {
                    data["terminal_exit"] = json!({"terminal_id": call_id, "signal": signal});
                }
                ToolCallUpdate::new(call_id.to_owned(), fields.title(title)).meta(meta(data))
            } else {
                let fenced = console_fence(&output.unwrap_or_default());
                ToolCallUpdate::new(
                    call_id.to_owned(),
                    fields.title(title).content(vec![text_block(fenced)]),
                )
            }
        }
        Some(ToolResultView::Terminal { title, .. }) => generic(title, None),
        Some(ToolResultView::Diff { title, diffs }) => {
            let first = diffs.first().map(|d| d.path.as_str());
            let title = title.map(|t| relativize_title(&t, first, &ctx.cwd));
            ToolCallUpdate::new(
                call_id.to_owned(),
                fields.title(title).content(diff_content(&diffs, &ctx.cwd)),
            )
        }
        Some(ToolResultView::Read { title, content, .. }) => {
            let content = content.map(|text| vec![ContentBlock::text(text)]);
            generic(title, content)
        }
        // Search and web cards carry no text of their own: the raw content stands in.
        Some(ToolResultView::Search(_) | ToolResultView::Web(_)) => generic(None, None),
    }
}

/// The card of a call now running in a client terminal: its text blocks, then the terminal.
pub(crate) fn terminal_attached(
    call_id: &str,
    shown: &ToolCall,
    terminal_id: &str,
) -> ToolCallUpdate {
    let mut content: Vec<ToolCallContent> = shown
        .content
        .iter()
        .filter(|block| !matches!(block, ToolCallContent::Terminal(_)))
        .cloned()
        .collect();
    content.push(ToolCallContent::Terminal(Terminal::new(
        terminal_id.to_owned(),
    )));
    ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().content(content),
    )
}

/// The completing update of a call that ran in a client terminal: status only, so the card
/// keeps showing the terminal (which holds the output).
pub(crate) fn client_terminal_result(call_id: &str, is_error: bool) -> ToolCallUpdate {
    let status = if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().status(status),
    )
}

/// A sandbox escalation request, parsed from the approval reason the tools send
/// (`escalate sandbox to <mode>: <justification>`).
pub(crate) fn escalation(reason: Option<&str>) -> Option<(&str, &str)> {
    let rest = reason?.strip_prefix("escalate sandbox to ")?;
    Some(rest.split_once(": ").unwrap_or((rest, "")))
}

/// The sentence(s) a permission request shows: what exactly the user is asked to allow.
pub(crate) fn ask_text(tool_name: &str, arguments: Option<&Value>, reason: Option<&str>) -> String {
    let field = |name: &str| {
        arguments
            .and_then(|args| args.get(name))
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
    };
    if let Some((mode, justification)) = escalation(reason) {
        let what = if field("command").is_some() {
            "command"
        } else {
            "operation"
        };
        let mut text = format!(
            "Sandbox escalation: {tool_name} asks to run this {what} with \"{mode}\" access, wider than the session's sandbox."
        );
        if let Some(command) = field("command") {
            text.push_str(&format!("\nCommand: {command}"));
        }
        if let Some(path) = field("file_path").or_else(|| field("path")) {
            text.push_str(&format!("\nFile: {path}"));
        }
        if !justification.is_empty() {
            text.push_str(&format!(
                "\nJustification (from the model): {justification}"
            ));
        }
        return text;
    }
    match reason.filter(|reason| !reason.trim().is_empty()) {
        Some(reason) => format!("{tool_name} needs approval: {reason}"),
        None => format!("{tool_name} needs approval to run."),
    }
}

/// The full tool call of a `session/request_permission`: the card the client was shown (title,
/// kind, `rawInput`, locations, its content minus any terminal) with status `pending`, led by
/// a text block saying what is asked. A call the client never saw (a call made from inside
/// `run_code`) is described from the request alone.
pub(crate) fn permission_call(
    call_id: &str,
    shown: Option<(&ToolCall, &Value)>,
    tool_name: &str,
    reason: Option<&str>,
) -> ToolCallUpdate {
    let ask = text_block(ask_text(tool_name, shown.map(|(_, args)| args), reason));
    let mut fields = ToolCallUpdateFields::new().status(ToolCallStatus::Pending);
    match shown {
        Some((call, _)) => {
            let mut content = vec![ask];
            content.extend(
                call.content
                    .iter()
                    .filter(|block| !matches!(block, ToolCallContent::Terminal(_)))
                    .cloned(),
            );
            fields = fields
                .title(call.title.clone())
                .kind(call.kind)
                .content(content)
                .raw_input(call.raw_input.clone());
            if !call.locations.is_empty() {
                fields = fields.locations(call.locations.clone());
            }
        }
        None => {
            fields = fields
                .title(tool_name.to_owned())
                .kind(ToolKind::Other)
                .content(vec![ask]);
        }
    }
    ToolCallUpdate::new(call_id.to_owned(), fields)
}

/// A status change of a call the client was shown (`pending` while asking, `in_progress` once
/// allowed).
pub(crate) fn status_update(call_id: &str, status: ToolCallStatus) -> ToolCallUpdate {
    ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().status(status),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_relativized_only_inside_the_cwd() {
        let cwd = Path::new("/ws");
        assert_eq!(
            relativize_title("Edit /ws/src/a.rs", Some("/ws/src/a.rs"), cwd),
            "Edit src/a.rs"
        );
        assert_eq!(
            relativize_title("Edit /etc/hosts", Some("/etc/hosts"), cwd),
            "Edit /etc/hosts"
        );
        assert_eq!(relativize_title("Edit /ws", Some("/ws"), cwd), "Edit /ws");
        assert_eq!(
            relativize_title("Read a.rs", Some("a.rs"), cwd),
            "Read a.rs"
        );
        assert_eq!(
            relativize_title("Read /wsx/a", Some("/wsx/a"), cwd),
            "Read /wsx/a"
        );
    }

    #[test]
    fn protocol_paths_are_absolute() {
        let cwd = Path::new("/ws");
        assert_eq!(
            absolute_path("src/a.rs", cwd),
            PathBuf::from("/ws/src/a.rs")
        );
        assert_eq!(absolute_path("./a/../b.rs", cwd), PathBuf::from("/ws/b.rs"));
        assert_eq!(
            absolute_path("/etc/hosts", cwd),
            PathBuf::from("/etc/hosts")
        );
        assert_eq!(absolute_path("../../../x", cwd), PathBuf::from("/x"));
    }

    #[test]
    fn escalation_asks_name_the_command_mode_and_justification() {
        let args = json!({"command": "curl example.com", "sandbox_permissions": "danger-full-access", "justification": "needs network"});
        let text = ask_text(
            "bash",
            Some(&args),
            Some("escalate sandbox to danger-full-access: needs network"),
        );
        assert_eq!(
            text,
            "Sandbox escalation: bash asks to run this command with \"danger-full-access\" access, wider than the session's sandbox.\nCommand: curl example.com\nJustification (from the model): needs network"
        );
        assert_eq!(
            ask_text(
                "write",
                None,
                Some("escalate sandbox to workspace-write: fix: it")
            ),
            "Sandbox escalation: write asks to run this operation with \"workspace-write\" access, wider than the session's sandbox.\nJustification (from the model): fix: it"
        );
        assert_eq!(
            ask_text("mcp__x__y", None, None),
            "mcp__x__y needs approval to run."
        );
        assert_eq!(
            ask_text("bash", None, Some("hook says ask")),
            "bash needs approval: hook says ask"
        );
    }

    #[test]
    fn terminal_cwd_resolution() {
        let cwd = Path::new("/ws");
        assert_eq!(terminal_cwd(None, cwd), "/ws");
        assert_eq!(terminal_cwd(Some("sub"), cwd), "/ws/sub");
        assert_eq!(terminal_cwd(Some("/tmp"), cwd), "/tmp");
    }

    #[test]
    fn terminal_result_without_capability_is_fenced() {
        let ctx = RenderContext {
            cwd: PathBuf::from("/ws"),
            terminal_output: false,
        };
        let card = ToolResultView::terminal(
            None,
            Some("hi\n\n".into()),
            Some(dsh_tools::TerminalExit::Code(0)),
        );
        let update = result_update("c1", Some(card), &[], false, false, &ctx);
        let value = serde_json::to_value(&update).unwrap();
        assert_eq!(
            value["content"][0]["content"]["text"],
            "```console\nhi\n```"
        );
        assert_eq!(value["status"], "completed");
    }
}
