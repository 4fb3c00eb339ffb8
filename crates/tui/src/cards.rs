//! Tool cards drawn as transcript lines: a header with state and duration, then a body chosen
//! by the card kind (diff, terminal output, read/search summaries, generic text).

use dsh_protocol::ContentBlock;
use dsh_tools::FileDiff;
use dsh_tools::SearchView;
use dsh_tools::ToolCallView;
use dsh_tools::ToolResultView;
use dsh_tools::WebView;
use ratatui::style::Color;
use ratatui::style::Modifier;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::text::Span;

use crate::model::ToolEntry;
use crate::model::ToolState;

/// Lines of a collapsed body (tail for terminals, head for the rest).
const COLLAPSED_LINES: usize = 6;
const COLLAPSED_DIFF_LINES: usize = 14;

/// How the surrounding screen affects a card.
#[derive(Debug, Clone, Copy)]
pub struct CardContext {
    pub expanded: bool,
    pub now_ms: u64,
    pub awaiting_approval: bool,
}

fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// `1.2s`, `45s`, `2m05s`.
pub fn duration(ms: u64) -> String {
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    }
}

fn call_title(call: &ToolCallView) -> String {
    match call {
        ToolCallView::Generic { title, .. } | ToolCallView::Diff { title, .. } => title.clone(),
        ToolCallView::Terminal { title, .. } => format!("$ {title}"),
    }
}

fn result_title(result: &ToolResultView) -> Option<&str> {
    match result {
        ToolResultView::Generic { title, .. }
        | ToolResultView::Terminal { title, .. }
        | ToolResultView::Diff { title, .. }
        | ToolResultView::Read { title, .. } => title.as_deref(),
        ToolResultView::Search(SearchView::Matches { title, .. })
        | ToolResultView::Search(SearchView::Paths { title, .. })
        | ToolResultView::Web(WebView::Search { title, .. })
        | ToolResultView::Web(WebView::Fetch { title, .. }) => title.as_deref(),
    }
}

/// The card's lines (logical, unwrapped) with each line's continuation indent.
pub fn card_lines(entry: &ToolEntry, ctx: CardContext) -> Vec<(Line<'static>, usize)> {
    let mut out = Vec::new();
    let (mark, mark_style, state) = match entry.state {
        _ if ctx.awaiting_approval => (
            "?",
            Style::default().fg(Color::Yellow),
            "awaiting approval".to_owned(),
        ),
        ToolState::Running => (
            "●",
            Style::default().fg(Color::Yellow),
            format!(
                "running {}",
                duration(ctx.now_ms.saturating_sub(entry.started_ms))
            ),
        ),
        ToolState::Done => (
            "✓",
            Style::default().fg(Color::Green),
            duration(
                entry
                    .ended_ms
                    .unwrap_or(entry.started_ms)
                    .saturating_sub(entry.started_ms),
            ),
        ),
        ToolState::Failed => (
            "✗",
            Style::default().fg(Color::Red),
            format!(
                "failed {}",
                duration(
                    entry
                        .ended_ms
                        .unwrap_or(entry.started_ms)
                        .saturating_sub(entry.started_ms)
                )
            ),
        ),
    };
    let title = entry
        .result
        .as_ref()
        .and_then(result_title)
        .map(str::to_owned)
        .unwrap_or_else(|| call_title(&entry.call));
    let mut header = vec![
        Span::styled(format!("{mark} "), mark_style),
        Span::styled(title, Style::default().add_modifier(Modifier::BOLD)),
        Span::styled(format!("  {state}"), dim()),
    ];
    if let Some(ToolResultView::Terminal {
        exit_code, signal, ..
    }) = &entry.result
    {
        match (exit_code, signal) {
            (Some(code), _) if *code != 0 => header.push(Span::styled(
                format!(" · exit {code}"),
                Style::default().fg(Color::Red),
            )),
            (_, Some(signal)) => header.push(Span::styled(
                format!(" · {signal}"),
                Style::default().fg(Color::Red),
            )),
            _ => {}
        }
    }
    out.push((Line::from(header), 2));
    let body = body_lines(entry, ctx);
    out.extend(body.into_iter().map(|line| {
        let mut spans = vec![Span::styled("  ", dim())];
        spans.extend(line.spans);
        (Line::from(spans), 4)
    }));
    out
}

/// The todo list a `todo_write` call sets, one line per item.
fn todo_lines(arguments: &serde_json::Value) -> Option<Vec<Line<'static>>> {
    let todos = arguments.get("todos")?.as_array()?;
    let lines = todos
        .iter()
        .map(|todo| {
            let content = todo["content"].as_str().unwrap_or_default().to_owned();
            match todo["status"].as_str() {
                Some("completed") => Line::from(vec![
                    Span::styled("☑ ", Style::default().fg(Color::Green)),
                    Span::styled(content, dim().add_modifier(Modifier::CROSSED_OUT)),
                ]),
                Some("in_progress") => Line::from(vec![
                    Span::styled("◐ ", Style::default().fg(Color::Yellow)),
                    Span::styled(content, Style::default().add_modifier(Modifier::BOLD)),
                ]),
                _ => Line::from(vec![Span::styled("☐ ", dim()), Span::raw(content)]),
            }
        })
        .collect();
    Some(lines)
}

/// A terminal call's description, shown on its card for as long as the card is shown.
fn description(entry: &ToolEntry) -> Option<Line<'static>> {
    match &entry.call {
        ToolCallView::Terminal {
            description: Some(description),
            ..
        } if !description.trim().is_empty() => Some(Line::from(Span::styled(
            description.clone(),
            dim().add_modifier(Modifier::ITALIC),
        ))),
        _ => None,
    }
}

fn body_lines(entry: &ToolEntry, ctx: CardContext) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = description(entry).into_iter().collect();
    if entry.name == "todo_write"
        && entry.state != ToolState::Failed
        && let Some(todos) = todo_lines(&entry.arguments)
    {
        out.extend(todos);
        return out;
    }
    if is_delegation(entry) {
        out.extend(child_lines(entry, ctx));
        return out;
    }
    out.extend(result_body(entry, ctx));
    out
}

/// A delegation to a child agent (`subagent`, `subagent_fork`, or a renamed one).
fn is_delegation(entry: &ToolEntry) -> bool {
    entry.name.starts_with("subagent")
}

/// The child's transcript as the delegating call streams it (and its result card repeats it):
/// `▸ title` per tool call, then its messages / final answer.
struct ChildTranscript<'a> {
    steps: Vec<&'a str>,
    /// Everything else, in order (intermediate messages while running; the answer when done).
    text: Vec<&'a str>,
}

impl<'a> ChildTranscript<'a> {
    fn parse(text: &'a str) -> Self {
        let mut steps = Vec::new();
        let mut rest = Vec::new();
        for line in unfenced(text) {
            match line.strip_prefix("▸ ") {
                Some(step) => steps.push(step),
                None if rest.is_empty() && line.trim().is_empty() => {}
                None => rest.push(line),
            }
        }
        Self { steps, text: rest }
    }
}

/// The child's live progress (or finished transcript): a one-line summary while collapsed,
/// every tool call and the whole answer expanded (ctrl-o).
fn child_lines(entry: &ToolEntry, ctx: CardContext) -> Vec<Line<'static>> {
    let text = match &entry.result {
        Some(ToolResultView::Generic {
            content: Some(content),
            ..
        }) => dsh_protocol::text_of(content),
        _ => entry.output.clone().unwrap_or_default(),
    };
    let child = ChildTranscript::parse(&text);
    if entry.state == ToolState::Failed && child.steps.is_empty() {
        return text_lines(&text, entry.state, ctx.expanded);
    }
    let calls = match child.steps.len() {
        1 => "1 tool call".to_owned(),
        n => format!("{n} tool calls"),
    };
    let status = match entry.state {
        ToolState::Running => "running",
        ToolState::Done => "done",
        ToolState::Failed => "failed",
    };
    let mut out = Vec::new();
    if ctx.expanded {
        out.push(Line::from(Span::styled(
            format!("▾ {calls} · {status}"),
            dim(),
        )));
        out.extend(child.steps.iter().map(|step| {
            Line::from(vec![
                Span::styled("│ ▸ ", dim()),
                Span::raw((*step).to_owned()),
            ])
        }));
        out.extend(
            child
                .text
                .iter()
                .map(|line| Line::from(Span::styled(format!("│ {line}"), dim()))),
        );
        return out;
    }
    let mut summary = format!("▸ {calls} · {status}");
    if entry.state == ToolState::Running
        && let Some(last) = child.steps.last()
    {
        summary.push_str(" · ");
        summary.push_str(last);
    }
    summary.push_str("  (ctrl-o to expand)");
    out.push(Line::from(Span::styled(summary, dim())));
    if entry.state != ToolState::Running {
        // The answer is what the delegation produced: its head stays visible.
        out.extend(text_lines(&child.text.join("\n"), entry.state, false));
    }
    out
}

fn result_body(entry: &ToolEntry, ctx: CardContext) -> Vec<Line<'static>> {
    match (&entry.result, &entry.call) {
        (Some(ToolResultView::Diff { diffs, .. }), _) => diff_lines(diffs, ctx.expanded),
        (None, ToolCallView::Diff { diffs, .. }) if entry.state == ToolState::Running => {
            diff_lines(diffs, ctx.expanded)
        }
        (Some(ToolResultView::Terminal { output, .. }), _) => {
            let text = output
                .clone()
                .or_else(|| entry.output.clone())
                .unwrap_or_default();
            terminal_lines(&text, ctx.expanded)
        }
        (None, ToolCallView::Terminal { .. }) => match &entry.output {
            Some(output) if entry.state == ToolState::Failed => {
                text_lines(output, entry.state, ctx.expanded)
            }
            Some(output) => terminal_lines(output, ctx.expanded),
            None => vec![Line::from(Span::styled("│ (waiting for output…)", dim()))],
        },
        (
            Some(ToolResultView::Read {
                path,
                offset,
                lines,
                total_lines,
                ..
            }),
            _,
        ) => {
            let last = lines.last().map_or(*offset, |l| l.number);
            let mut out = vec![Line::from(Span::styled(
                format!("{path}: lines {offset}–{last} of {total_lines}"),
                dim(),
            ))];
            if ctx.expanded {
                out.extend(lines.iter().map(|l| {
                    Line::from(vec![
                        Span::styled(format!("{:>5} ", l.number), dim()),
                        Span::raw(l.text.clone()),
                    ])
                }));
            }
            out
        }
        (Some(ToolResultView::Search(search)), _) => search_lines(search, ctx.expanded),
        (Some(ToolResultView::Web(web)), _) => web_lines(web),
        (Some(ToolResultView::Generic { content, .. }), _) => {
            let text = content
                .as_deref()
                .map(dsh_protocol::text_of)
                .or_else(|| entry.output.clone())
                .unwrap_or_default();
            text_lines(&text, entry.state, ctx.expanded)
        }
        (None, ToolCallView::Generic { content, .. }) => {
            let text = entry
                .output
                .clone()
                .or_else(|| content.as_deref().map(text_of_blocks))
                .unwrap_or_default();
            text_lines(&text, entry.state, ctx.expanded)
        }
        (None, ToolCallView::Diff { .. }) => text_lines(
            entry.output.as_deref().unwrap_or_default(),
            entry.state,
            ctx.expanded,
        ),
    }
}

fn text_of_blocks(blocks: &[ContentBlock]) -> String {
    dsh_protocol::text_of(blocks)
}

fn more(hidden: usize) -> Line<'static> {
    Line::from(Span::styled(
        format!("… {hidden} more lines (ctrl-o to expand)"),
        dim().add_modifier(Modifier::ITALIC),
    ))
}

/// Text without Markdown fence lines (a presenter may fence console output; the card shows
/// the text itself).
fn unfenced(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|line| !line.trim_start().starts_with("```"))
        .collect()
}

fn text_lines(text: &str, state: ToolState, expanded: bool) -> Vec<Line<'static>> {
    let style = if state == ToolState::Failed {
        Style::default().fg(Color::Red)
    } else {
        dim()
    };
    let all = unfenced(text);
    let limit = if expanded { usize::MAX } else { 3 };
    let mut out: Vec<Line<'static>> = all
        .iter()
        .take(limit)
        .map(|l| Line::from(Span::styled((*l).to_owned(), style)))
        .collect();
    if all.len() > limit {
        out.push(more(all.len() - limit));
    }
    out
}

/// Terminal output: the tail while collapsed (the end is what matters), everything expanded.
fn terminal_lines(text: &str, expanded: bool) -> Vec<Line<'static>> {
    let all: Vec<&str> = text.lines().collect();
    if all.is_empty() {
        return vec![Line::from(Span::styled("│ (no output)", dim()))];
    }
    let skip = if expanded {
        0
    } else {
        all.len().saturating_sub(COLLAPSED_LINES)
    };
    let mut out = Vec::new();
    if skip > 0 {
        out.push(Line::from(Span::styled(
            format!("… {skip} earlier lines (ctrl-o to expand)"),
            dim().add_modifier(Modifier::ITALIC),
        )));
    }
    out.extend(
        all[skip..]
            .iter()
            .map(|l| Line::from(vec![Span::styled("│ ", dim()), Span::raw((*l).to_owned())])),
    );
    out
}

fn diff_lines(diffs: &[FileDiff], expanded: bool) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for diff in diffs {
        let old = diff.old_text.as_deref().unwrap_or("");
        let text_diff = similar::TextDiff::from_lines(old, &diff.new_text);
        let (added, removed) =
            text_diff
                .iter_all_changes()
                .fold((0, 0), |(a, r), c| match c.tag() {
                    similar::ChangeTag::Insert => (a + 1, r),
                    similar::ChangeTag::Delete => (a, r + 1),
                    similar::ChangeTag::Equal => (a, r),
                });
        let verb = if diff.old_text.is_none() {
            "new file "
        } else {
            ""
        };
        out.push(Line::from(vec![
            Span::styled(
                format!("{verb}{}", diff.path),
                Style::default().fg(Color::Cyan),
            ),
            Span::styled(format!(" +{added}"), Style::default().fg(Color::Green)),
            Span::styled(format!(" -{removed}"), Style::default().fg(Color::Red)),
        ]));
        let mut body = Vec::new();
        for (index, group) in text_diff.grouped_ops(2).iter().enumerate() {
            if index > 0 {
                body.push(Line::from(Span::styled("⋮", dim())));
            }
            for op in group {
                for change in text_diff.iter_changes(op) {
                    let line_no = change
                        .new_index()
                        .or(change.old_index())
                        .map_or(0, |i| i + 1);
                    let (sign, style) = match change.tag() {
                        similar::ChangeTag::Insert => ("+", Style::default().fg(Color::Green)),
                        similar::ChangeTag::Delete => ("-", Style::default().fg(Color::Red)),
                        similar::ChangeTag::Equal => (" ", dim()),
                    };
                    let text = change.value().trim_end_matches(['\n', '\r']).to_owned();
                    body.push(Line::from(vec![
                        Span::styled(format!("{line_no:>4} "), dim()),
                        Span::styled(format!("{sign}{text}"), style),
                    ]));
                }
            }
        }
        if !expanded && body.len() > COLLAPSED_DIFF_LINES {
            let hidden = body.len() - COLLAPSED_DIFF_LINES;
            body.truncate(COLLAPSED_DIFF_LINES);
            body.push(more(hidden));
        }
        out.extend(body);
    }
    out
}

fn search_lines(search: &SearchView, expanded: bool) -> Vec<Line<'static>> {
    let limit = if expanded { usize::MAX } else { 4 };
    match search {
        SearchView::Matches {
            files,
            truncated,
            total,
            ..
        } => {
            let more_mark = if *truncated { "+" } else { "" };
            let mut out = vec![Line::from(Span::styled(
                format!("{total}{more_mark} matches in {} files", files.len()),
                dim(),
            ))];
            for file in files.iter().take(limit) {
                out.push(Line::from(vec![
                    Span::styled(file.path.clone(), Style::default().fg(Color::Cyan)),
                    Span::styled(format!(" ({})", file.matches.len()), dim()),
                ]));
                if expanded {
                    out.extend(file.matches.iter().map(|m| {
                        Line::from(vec![
                            Span::styled(format!("{:>5} ", m.line_number), dim()),
                            Span::raw(m.line.clone()),
                        ])
                    }));
                }
            }
            if files.len() > limit {
                out.push(more(files.len() - limit));
            }
            out
        }
        SearchView::Paths {
            paths,
            truncated,
            total,
            ..
        } => {
            let more_mark = if *truncated { "+" } else { "" };
            let mut out = vec![Line::from(Span::styled(
                format!("{total}{more_mark} paths"),
                dim(),
            ))];
            out.extend(
                paths
                    .iter()
                    .take(limit)
                    .map(|p| Line::from(Span::raw(p.clone()))),
            );
            if paths.len() > limit {
                out.push(more(paths.len() - limit));
            }
            out
        }
    }
}

fn web_lines(web: &WebView) -> Vec<Line<'static>> {
    match web {
        WebView::Search { sources, .. } => sources
            .iter()
            .take(5)
            .map(|s| {
                Line::from(vec![
                    Span::raw(s.title.clone().unwrap_or_else(|| s.url.clone())),
                    Span::styled(format!("  {}", s.url), dim()),
                ])
            })
            .collect(),
        WebView::Fetch {
            url, status_code, ..
        } => {
            vec![Line::from(Span::styled(
                format!("{status_code} {url}"),
                dim(),
            ))]
        }
    }
}

#[cfg(test)]
mod tests {
    use dsh_protocol::ContentBlock;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn entry(name: &str, arguments: serde_json::Value, state: ToolState) -> ToolEntry {
        ToolEntry {
            call_id: "c".into(),
            name: name.into(),
            arguments: arguments.into(),
            call: ToolCallView::Generic {
                title: "Update todo list".into(),
                kind: None,
                raw_input: None,
                content: None,
                locations: None,
            },
            result: None,
            output: None,
            state,
            started_ms: 0,
            ended_ms: Some(1200),
        }
    }

    fn text(lines: &[(Line<'static>, usize)]) -> Vec<String> {
        lines
            .iter()
            .map(|(l, _)| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    const CTX: CardContext = CardContext {
        expanded: false,
        now_ms: 0,
        awaiting_approval: false,
    };

    #[test]
    fn a_todo_card_lists_its_items() {
        let todos = json!({"todos": [
            {"content": "read the code", "status": "completed"},
            {"content": "fix the bug", "status": "in_progress"},
            {"content": "ship", "status": "pending"}
        ]});
        let lines = card_lines(&entry("todo_write", todos, ToolState::Done), CTX);
        assert_eq!(
            text(&lines),
            [
                "✓ Update todo list  1.2s",
                "  ☑ read the code",
                "  ◐ fix the bug",
                "  ☐ ship"
            ]
        );
    }

    #[test]
    fn a_failed_card_shows_its_text_without_fences() {
        let mut failed = entry("bash", json!({}), ToolState::Failed);
        failed.result = Some(ToolResultView::Generic {
            title: None,
            content: Some(vec![ContentBlock::text(
                "```console\nError: spawn failed\n```",
            )]),
        });
        let lines = card_lines(&failed, CTX);
        assert_eq!(
            text(&lines),
            ["✗ Update todo list  failed 1.2s", "  Error: spawn failed"]
        );
    }

    fn delegation(state: ToolState) -> ToolEntry {
        let mut call = entry("subagent", json!({"prompt": "look"}), state);
        call.call = ToolCallView::Generic {
            title: "subagent".into(),
            kind: None,
            raw_input: None,
            content: None,
            locations: None,
        };
        call
    }

    #[test]
    fn a_running_delegation_is_a_one_line_summary_until_expanded() {
        let mut running = delegation(ToolState::Running);
        running.output = Some("▸ read src/lib.rs\nlooking\n▸ bash ls\n".into());
        assert_eq!(
            text(&card_lines(&running, CTX)),
            [
                "● subagent  running 0.0s",
                "  ▸ 2 tool calls · running · bash ls  (ctrl-o to expand)"
            ]
        );
        let expanded = CardContext {
            expanded: true,
            ..CTX
        };
        assert_eq!(
            text(&card_lines(&running, expanded)),
            [
                "● subagent  running 0.0s",
                "  ▾ 2 tool calls · running",
                "  │ ▸ read src/lib.rs",
                "  │ ▸ bash ls",
                "  │ looking"
            ]
        );
        let waiting = delegation(ToolState::Running);
        assert_eq!(
            text(&card_lines(&waiting, CTX))[1],
            "  ▸ 0 tool calls · running  (ctrl-o to expand)"
        );
    }

    #[test]
    fn a_finished_delegation_keeps_its_summary_and_shows_the_answer() {
        let mut done = delegation(ToolState::Done);
        done.result = Some(ToolResultView::Generic {
            title: None,
            content: Some(vec![ContentBlock::text("▸ bash ls\n\nall good")]),
        });
        assert_eq!(
            text(&card_lines(&done, CTX)),
            [
                "✓ subagent  1.2s",
                "  ▸ 1 tool call · done  (ctrl-o to expand)",
                "  all good"
            ]
        );
        let expanded = CardContext {
            expanded: true,
            ..CTX
        };
        assert_eq!(
            text(&card_lines(&done, expanded)),
            [
                "✓ subagent  1.2s",
                "  ▾ 1 tool call · done",
                "  │ ▸ bash ls",
                "  │ all good"
            ]
        );
    }
}
