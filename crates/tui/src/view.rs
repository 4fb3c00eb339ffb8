//! `render(state, frame)`: the whole screen from [`UiState`], nothing else.

use ratatui::Frame;
use ratatui::layout::Constraint;
use ratatui::layout::Layout;
use ratatui::layout::Position;
use ratatui::layout::Rect;
use ratatui::style::Color;
use ratatui::style::Modifier;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::text::Span;
use ratatui::widgets::Block;
use ratatui::widgets::Borders;
use ratatui::widgets::Clear;
use ratatui::widgets::Paragraph;

use crate::approval::Answer;
use crate::cards::CardContext;
use crate::cards::card_lines;
use crate::model::Entry;
use crate::model::NoticeLevel;
use crate::model::Part;
use crate::state::UiState;
use crate::text::markdown;
use crate::text::truncate;
use crate::text::width_of;
use crate::text::wrap_line;

const MAX_INPUT_LINES: usize = 8;

fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// Draws one frame.
pub fn render(state: &UiState, frame: &mut Frame<'_>) {
    let area = frame.area();
    let width = area.width as usize;
    let input_lines = input_lines(state, width.saturating_sub(2));
    let input_height = (input_lines.len().clamp(1, MAX_INPUT_LINES) + 2) as u16;
    let approval = approval_lines(state, width.saturating_sub(2));
    let approval_height = if approval.is_empty() {
        0
    } else {
        approval.len() as u16 + 2
    };
    let completion_height = state
        .completion
        .as_ref()
        .map_or(0, |c| c.items.len().min(6) as u16);
    let [
        body,
        approval_area,
        completion_area,
        input_area,
        status_area,
    ] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(approval_height),
        Constraint::Length(completion_height),
        Constraint::Length(input_height),
        Constraint::Length(1),
    ])
    .areas(area);

    let lines = transcript_lines(state, width);
    let visible = body.height as usize;
    let bottom = lines
        .len()
        .saturating_sub(state.scroll.min(lines.len().saturating_sub(visible)));
    let top = bottom.saturating_sub(visible);
    frame.render_widget(Paragraph::new(lines[top..bottom].to_vec()), body);

    if !approval.is_empty() {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(Style::default().fg(Color::Yellow))
            .title(" approval needed ");
        frame.render_widget(Paragraph::new(approval).block(block), approval_area);
    }
    if let Some(completion) = &state.completion {
        let items: Vec<Line<'_>> = completion
            .items
            .iter()
            .enumerate()
            .take(6)
            .map(|(i, item)| {
                let style = if i == completion.selected {
                    Style::default().fg(Color::Black).bg(Color::Cyan)
                } else {
                    dim()
                };
                Line::from(Span::styled(format!("  @{item}"), style))
            })
            .collect();
        frame.render_widget(Paragraph::new(items), completion_area);
    }
    render_input(state, frame, input_area, input_lines);
    frame.render_widget(Paragraph::new(status_line(state, width)), status_area);
    if let Some(overlay) = &state.overlay {
        render_overlay(frame, body, &overlay.title, &overlay.lines);
    }
}

/// The whole transcript wrapped to `width`.
pub fn transcript_lines(state: &UiState, width: usize) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = Vec::new();
    let push = |logical: Vec<(Line<'static>, usize)>, out: &mut Vec<Line<'static>>| {
        for (line, indent) in logical {
            out.extend(wrap_line(&line, width, indent));
        }
    };
    if state.transcript.entries.is_empty() {
        push(
            vec![
                (
                    Line::from(Span::styled(
                        "dsh",
                        Style::default()
                            .fg(Color::Cyan)
                            .add_modifier(Modifier::BOLD),
                    )),
                    0,
                ),
                (
                    Line::from(Span::styled(
                        format!("working in {} · /help for commands", state.cwd),
                        dim(),
                    )),
                    0,
                ),
            ],
            &mut out,
        );
    }
    for entry in &state.transcript.entries {
        if !out.is_empty() {
            out.push(Line::default());
        }
        match entry {
            Entry::User(text) => {
                let style = Style::default()
                    .fg(Color::White)
                    .add_modifier(Modifier::BOLD);
                let lines = text
                    .lines()
                    .enumerate()
                    .map(|(i, l)| {
                        let mark = if i == 0 { "› " } else { "  " };
                        (
                            Line::from(vec![
                                Span::styled(mark, Style::default().fg(Color::Cyan)),
                                Span::styled(l.to_owned(), style),
                            ]),
                            2,
                        )
                    })
                    .collect();
                push(lines, &mut out);
            }
            Entry::Assistant(assistant) => {
                let mut lines = Vec::new();
                for (i, part) in assistant.parts.iter().enumerate() {
                    if i > 0 {
                        lines.push((Line::default(), 0));
                    }
                    match part {
                        Part::Text(text) => lines.extend(markdown(text, Style::default())),
                        Part::Reasoning(text) => {
                            lines.extend(reasoning_lines(text, state.show_reasoning))
                        }
                    }
                }
                if assistant.streaming {
                    lines.push((
                        Line::from(Span::styled("▌", Style::default().fg(Color::Cyan))),
                        0,
                    ));
                } else if assistant.interrupted {
                    lines.push((Line::from(Span::styled("(interrupted)", dim())), 0));
                }
                push(lines, &mut out);
            }
            Entry::Tool(tool) => {
                let ctx = CardContext {
                    expanded: state.expand_tools,
                    now_ms: state.now_ms,
                    awaiting_approval: state.approvals.iter().any(|a| a.call_id == tool.call_id),
                };
                push(relativize(card_lines(tool, ctx), &state.cwd), &mut out);
            }
            Entry::Notice { level, text } => {
                let style = match level {
                    NoticeLevel::Info => dim(),
                    NoticeLevel::Warning => Style::default().fg(Color::Yellow),
                    NoticeLevel::Error => Style::default().fg(Color::Red),
                };
                push(
                    vec![(Line::from(Span::styled(format!("■ {text}"), style)), 2)],
                    &mut out,
                );
            }
        }
    }
    for text in &state.queued {
        out.push(Line::default());
        let line = Line::from(vec![
            Span::styled("› ", dim()),
            Span::styled(text.lines().next().unwrap_or("").to_owned(), dim()),
            Span::styled("  (queued)", dim().add_modifier(Modifier::ITALIC)),
        ]);
        out.extend(wrap_line(&line, width, 2));
    }
    out
}

/// Paths inside the working folder read better relative (presenters stay cwd-free).
fn relativize(lines: Vec<(Line<'static>, usize)>, cwd: &str) -> Vec<(Line<'static>, usize)> {
    if cwd.is_empty() {
        return lines;
    }
    let prefix = format!("{}/", cwd.trim_end_matches('/'));
    lines
        .into_iter()
        .map(|(mut line, indent)| {
            for span in &mut line.spans {
                if span.content.contains(&prefix) {
                    span.content = span.content.replace(&prefix, "").into();
                }
            }
            (line, indent)
        })
        .collect()
}

fn reasoning_lines(text: &str, shown: bool) -> Vec<(Line<'static>, usize)> {
    let style = dim().add_modifier(Modifier::ITALIC);
    if !shown {
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        let count = text.lines().count();
        return vec![(
            Line::from(vec![
                Span::styled("✻ thinking: ", dim()),
                Span::styled(first.to_owned(), style),
                Span::styled(
                    if count > 1 {
                        format!(" (+{} lines, ctrl-t)", count - 1)
                    } else {
                        String::new()
                    },
                    dim(),
                ),
            ]),
            2,
        )];
    }
    let mut out = vec![(Line::from(Span::styled("✻ thinking", dim())), 0)];
    out.extend(text.lines().map(|l| {
        (
            Line::from(vec![
                Span::styled("│ ", dim()),
                Span::styled(l.to_owned(), style),
            ]),
            2,
        )
    }));
    out
}

fn approval_lines(state: &UiState, width: usize) -> Vec<Line<'static>> {
    let Some(pending) = state.approvals.front() else {
        return Vec::new();
    };
    let title = state
        .transcript
        .entries
        .iter()
        .find_map(|entry| match entry {
            Entry::Tool(tool) if tool.call_id == pending.call_id => Some(card_title(tool)),
            _ => None,
        })
        .unwrap_or_else(|| pending.tool_name.clone());
    let mut lines = vec![Line::from(vec![
        Span::styled(
            pending.tool_name.clone(),
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::raw(" wants to run: "),
        Span::styled(
            truncate(&title, width.saturating_sub(20).max(10)),
            Style::default().fg(Color::Cyan),
        ),
    ])];
    if let Some(reason) = &pending.reason {
        lines.push(Line::from(Span::styled(truncate(reason, width), dim())));
    }
    let mut options = Vec::new();
    for (i, answer) in Answer::ALL.iter().enumerate() {
        let style = if i == pending.selected {
            Style::default().fg(Color::Black).bg(Color::Yellow)
        } else {
            Style::default()
        };
        options.push(Span::styled(
            format!("[{}] {}", answer.key(), answer.label()),
            style,
        ));
        options.push(Span::raw("  "));
    }
    lines.extend(wrap_line(&Line::from(options), width, 0));
    if state.approvals.len() > 1 {
        lines.push(Line::from(Span::styled(
            format!("{} more waiting", state.approvals.len() - 1),
            dim(),
        )));
    }
    lines
}

fn card_title(tool: &crate::model::ToolEntry) -> String {
    match &tool.call {
        dsh_tools::ToolCallView::Generic { title, .. }
        | dsh_tools::ToolCallView::Diff { title, .. } => title.clone(),
        dsh_tools::ToolCallView::Terminal { title, .. } => format!("$ {title}"),
    }
}

fn input_lines(state: &UiState, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for (i, line) in state.editor.lines().iter().enumerate() {
        let mark = if i == 0 { "› " } else { "  " };
        let wrapped = wrap_line(&Line::from(format!("{mark}{line}")), width, 2);
        out.extend(wrapped);
    }
    out
}

fn render_input(state: &UiState, frame: &mut Frame<'_>, area: Rect, lines: Vec<Line<'static>>) {
    let border = if state.busy {
        Color::Yellow
    } else {
        Color::Cyan
    };
    let placeholder = state.editor.is_empty();
    let inner_height = area.height.saturating_sub(2) as usize;
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::default().fg(border));
    let (row, col) = state.editor.cursor();
    let inner_width = area.width.saturating_sub(2) as usize;
    // Cursor position in wrapped coordinates: rows of the lines before, then within its line.
    let mut cursor_row = 0;
    for line in &state.editor.lines()[..row] {
        cursor_row += wrap_line(&Line::from(format!("  {line}")), inner_width, 2).len();
    }
    let before: String = state.editor.lines()[row].chars().take(col).collect();
    let offset = 2 + width_of(&before);
    let usable = inner_width.max(6);
    cursor_row += offset / usable;
    let cursor_col = offset % usable;
    let skip = (cursor_row + 1).saturating_sub(inner_height);
    let shown: Vec<Line<'static>> = if placeholder {
        let hint = if state.busy {
            "working… type to queue a message, esc to cancel"
        } else {
            "ask anything · @ to attach a file · /help"
        };
        vec![Line::from(vec![Span::raw("› "), Span::styled(hint, dim())])]
    } else {
        lines.into_iter().skip(skip).collect()
    };
    frame.render_widget(Paragraph::new(shown).block(block), area);
    if state.overlay.is_none() && state.approvals.is_empty() {
        frame.set_cursor_position(Position::new(
            area.x + 1 + cursor_col as u16,
            area.y + 1 + (cursor_row - skip) as u16,
        ));
    }
}

fn short_cwd(cwd: &str) -> String {
    if let Some(home) = std::env::var_os("HOME").map(|h| h.to_string_lossy().into_owned())
        && !home.is_empty()
        && let Some(rest) = cwd.strip_prefix(&home)
    {
        return format!("~{rest}");
    }
    cwd.to_owned()
}

fn count(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 10_000 {
        format!("{}k", n / 1000)
    } else if n >= 1000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}

/// `model · cwd · tokens · cache · jobs · plan` on the left, the key hint on the right.
pub fn status_line(state: &UiState, width: usize) -> Line<'static> {
    let usage = state.transcript.usage;
    let mut tail = vec![Span::styled(
        format!(
            " · ↑{} ↓{}",
            count(usage.prompt_total()),
            count(usage.output)
        ),
        dim(),
    )];
    if let Some(hit) = usage.cache_hit_percent() {
        tail.push(Span::styled(format!(" · cache {hit}%"), dim()));
    }
    if !state.jobs.is_empty() {
        tail.push(Span::styled(
            format!(" · jobs {}", state.jobs.len()),
            Style::default().fg(Color::Yellow),
        ));
    }
    let todos = &state.transcript.todos;
    if !todos.is_empty() {
        use dsh_tool_todo::TodoStatus;
        let done = todos
            .iter()
            .filter(|t| t.status == TodoStatus::Completed)
            .count();
        let current = todos
            .iter()
            .find(|t| t.status == TodoStatus::InProgress)
            .map(|t| format!(": {}", t.content))
            .unwrap_or_default();
        tail.push(Span::styled(
            format!(" · plan {done}/{}{current}", todos.len()),
            Style::default().fg(Color::Magenta),
        ));
    }
    let right = match (&state.hint, state.busy) {
        (Some(hint), _) => Some(hint.clone()),
        (None, true) => Some("esc to cancel".to_owned()),
        (None, false) => None,
    };
    let right_width = right.as_deref().map_or(0, |r| width_of(r) + 2);
    let fixed: usize =
        width_of(&state.model) + tail.iter().map(|s| width_of(&s.content)).sum::<usize>();
    // The folder gives way first: full path, then `…/name`, then nothing.
    let full = short_cwd(&state.cwd);
    let base = std::path::Path::new(&state.cwd)
        .file_name()
        .map(|n| format!("…/{}", n.to_string_lossy()))
        .unwrap_or_default();
    let room = width.saturating_sub(fixed + right_width);
    let cwd = [full, base]
        .into_iter()
        .find(|c| width_of(c) + 3 <= room)
        .map(|c| format!(" · {c}"))
        .unwrap_or_default();
    let mut parts = vec![
        Span::styled(state.model.clone(), Style::default().fg(Color::Cyan)),
        Span::styled(cwd, dim()),
    ];
    parts.extend(tail);
    let left_width: usize = parts.iter().map(|s| width_of(&s.content)).sum();
    if let Some(right) = right {
        let style = if state.hint.is_some() {
            Style::default().fg(Color::Yellow)
        } else {
            dim()
        };
        if left_width + right_width > width {
            // Too narrow for both: the hint matters more right now.
            return Line::from(Span::styled(truncate(&right, width), style));
        }
        parts.push(Span::raw(" ".repeat(width - left_width - right_width + 2)));
        parts.push(Span::styled(right, style));
        return Line::from(parts);
    }
    if left_width > width {
        let text: String = parts.iter().map(|s| s.content.as_ref()).collect();
        return Line::from(Span::styled(truncate(&text, width), dim()));
    }
    Line::from(parts)
}

fn render_overlay(frame: &mut Frame<'_>, body: Rect, title: &str, lines: &[String]) {
    let width = body.width.saturating_sub(2).min(90);
    let wrapped: Vec<Line<'static>> = lines
        .iter()
        .flat_map(|l| wrap_line(&Line::from(l.clone()), width.saturating_sub(2) as usize, 2))
        .collect();
    let height = (wrapped.len() as u16 + 2).min(body.height);
    let area = Rect::new(body.x + (body.width - width) / 2, body.y, width, height);
    frame.render_widget(Clear, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::default().fg(Color::Cyan))
        .title(format!(" {title} · esc to close "));
    frame.render_widget(Paragraph::new(wrapped).block(block), area);
}
