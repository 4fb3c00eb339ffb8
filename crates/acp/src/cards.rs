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

fn diff_content(diffs: &[FileDiff]) -> Vec<ToolCallContent> {
    diffs
        .iter()
        .map(|diff| {
            ToolCallContent::Diff(
                Diff::new(diff.path.clone(), diff.new_text.clone()).old_text(diff.old_text.clone()),
            )
        })
        .collect()
}

fn acp_locations(locations: &[FileLocation]) -> Vec<ToolCallLocation> {
    locations
        .iter()
        .map(|location| {
            let line = location.line.and_then(|line| u32::try_from(line).ok());
            ToolCallLocation::new(location.path.clone()).line(line)
        })
        .collect()
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
/// client will track by id (so a terminal result may address it).
pub(crate) fn call_update(
    call_id: &str,
    card: &ToolCallView,
    ctx: &RenderContext,
) -> (ToolCall, bool) {
    match card {
        ToolCallView::Generic {
            title,
            kind,
            raw_input,
            content,
            locations,
        } => {
            let first = locations
                .as_ref()
                .and_then(|l| l.first())
                .map(|l| l.path.as_str());
            let mut call =
                ToolCall::new(call_id.to_owned(), relativize_title(title, first, &ctx.cwd))
                    .kind(kind_of(*kind))
                    .status(ToolCallStatus::InProgress)
                    .raw_input(raw_input.clone());
            if let Some(locations) = locations {
                call = call.locations(acp_locations(locations));
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
                    .status(ToolCallStatus::InProgress);
            if let Some(locations) = locations {
                call = call.locations(acp_locations(locations));
            }
            (call.content(diff_content(diffs)), false)
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
                .raw_input(Value::String(title.clone()));
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
                fields.title(title).content(diff_content(&diffs)),
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
