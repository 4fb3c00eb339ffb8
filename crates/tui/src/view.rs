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

use crate::cards::CardContext;
use crate::cards::card_lines;
use crate::markdown::markdown;
use crate::model::Entry;
use crate::model::NoticeLevel;
use crate::model::Part;
use crate::render_cache::RenderKey;
use crate::state::Picker;
use crate::state::UiState;
use crate::text::truncate;
use crate::text::width_of;
use crate::text::wrap_line;

const MAX_INPUT_LINES: usize = 8;

fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// Spinner frames, one per 100 ms.
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// Draws one frame.
pub fn render(state: &UiState, frame: &mut Frame<'_>) {
    let area = frame.area();
    let width = area.width as usize;
    let input_lines = input_lines(state, width.saturating_sub(2));
    let input_height = (input_lines.len().clamp(1, MAX_INPUT_LINES) + 2) as u16;
    let (approval, title) = if state.approvals.is_empty() && !state.questions.is_empty() {
        question_lines(state, width.saturating_sub(2), area.height as usize)
    } else {
        (
            approval_lines(state, width.saturating_sub(2)),
            " approval needed ".to_owned(),
        )
    };
    let approval_height = if approval.is_empty() {
        0
    } else {
        approval.len() as u16 + 2
    };
    let popup = popup_lines(state, width);
    let [body, approval_area, popup_area, input_area, status_area] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(approval_height),
        Constraint::Length(popup.len() as u16),
        Constraint::Length(input_height),
        Constraint::Length(1),
    ])
    .areas(area);

    let lines = visible_transcript(state, width, body.height as usize);
    frame.render_widget(Paragraph::new(lines), body);

    if !approval.is_empty() {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(Style::default().fg(Color::Yellow))
            .title(title);
        frame.render_widget(Paragraph::new(approval).block(block), approval_area);
    }
    if !popup.is_empty() {
        frame.render_widget(Paragraph::new(popup), popup_area);
    }
    render_input(state, frame, input_area, input_lines);
    frame.render_widget(Paragraph::new(status_line(state, width)), status_area);
    if let Some(choices) = &state.choices {
        render_choices(frame, body, choices);
    }
    if let Some(picker) = &state.picker {
        render_picker(frame, body, picker);
    } else if let Some(overlay) = &state.overlay {
        render_overlay(frame, body, &overlay.title, &overlay.lines);
    }
}

/// The `@path` completion or the command palette, under the input box.
fn popup_lines(state: &UiState, width: usize) -> Vec<Line<'static>> {
    let selected_style = Style::default().fg(Color::Black).bg(Color::Cyan);
    if let Some(palette) = &state.palette {
        let label_width = palette
            .items
            .iter()
            .map(|i| width_of(&i.label))
            .max()
            .unwrap_or(0)
            .min(width / 2);
        let start = palette.selected.saturating_sub(POPUP_ITEMS - 1);
        return palette
            .items
            .iter()
            .enumerate()
            .skip(start)
            .take(POPUP_ITEMS)
            .map(|(i, item)| {
                let label = format!("  {:<label_width$}", truncate(&item.label, label_width));
                let detail = truncate(&item.detail, width.saturating_sub(label_width + 5));
                if i == palette.selected {
                    Line::from(vec![
                        Span::styled(label, selected_style),
                        Span::styled(format!("  {detail}"), selected_style),
                    ])
                } else {
                    Line::from(vec![
                        Span::styled(label, Style::default().fg(Color::Cyan)),
                        Span::styled(format!("  {detail}"), dim()),
                    ])
                }
            })
            .collect();
    }
    if let Some(completion) = &state.completion {
        let start = completion.selected.saturating_sub(POPUP_ITEMS - 1);
        return completion
            .items
            .iter()
            .enumerate()
            .skip(start)
            .take(POPUP_ITEMS)
            .map(|(i, item)| {
                let style = if i == completion.selected {
                    selected_style
                } else {
                    dim()
                };
                Line::from(Span::styled(
                    format!("  {}", truncate(item, width.saturating_sub(2))),
                    style,
                ))
            })
            .collect();
    }
    Vec::new()
}

const POPUP_ITEMS: usize = 6;

/// Whether an entry's rendering is final (it can be cached).
fn finished(entry: &Entry) -> bool {
    match entry {
        Entry::User(_) | Entry::Notice { .. } => true,
        Entry::Assistant(assistant) => !assistant.streaming,
        Entry::Tool(tool) => tool.state != crate::model::ToolState::Running,
    }
}

/// The rendered lines of entry `index`, from the cache when it is finished.
fn entry_lines(state: &UiState, index: usize, width: usize) -> std::rc::Rc<Vec<Line<'static>>> {
    let entry = &state.transcript.entries[index];
    let key = RenderKey {
        width,
        expand_tools: state.expand_tools,
        show_reasoning: state.show_reasoning,
    };
    let stamp = if finished(entry) {
        state.transcript.stamp(index)
    } else {
        None
    };
    state
        .render_cache
        .borrow_mut()
        .lines(stamp, &key, || render_entry(state, entry, width))
}

/// The lines before any entry (the welcome) and after the last (queued prompts).
fn welcome_lines(state: &UiState, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if state.transcript.entries.is_empty() {
        out.extend(wrap_line(
            &Line::from(Span::styled(
                "dsh",
                Style::default()
                    .fg(Color::Cyan)
                    .add_modifier(Modifier::BOLD),
            )),
            width,
            0,
        ));
        out.extend(wrap_line(
            &Line::from(Span::styled(
                format!("working in {} · /help for commands", state.cwd),
                dim(),
            )),
            width,
            0,
        ));
    }
    out
}

fn queued_lines(state: &UiState, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
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

/// The whole transcript wrapped to `width` (what scrollback gets on exit, and tests).
pub fn transcript_lines(state: &UiState, width: usize) -> Vec<Line<'static>> {
    let mut out = welcome_lines(state, width);
    for index in 0..state.transcript.entries.len() {
        if !out.is_empty() {
            out.push(Line::default());
        }
        out.extend(entry_lines(state, index, width).iter().cloned());
    }
    out.extend(queued_lines(state, width));
    state.render_cache.borrow_mut().end_frame();
    out
}

/// The `height` transcript lines the body shows, `state.scroll` lines up from the bottom.
/// Only entries that reach the window are looked at (and only changed ones rendered).
pub fn visible_transcript(state: &UiState, width: usize, height: usize) -> Vec<Line<'static>> {
    let wanted = height + state.scroll;
    let mut tail: Vec<Line<'static>> = queued_lines(state, width);
    tail.reverse();
    let entries = state.transcript.entries.len();
    let mut index = entries;
    let mut reached_top = true;
    while index > 0 {
        if tail.len() >= wanted {
            reached_top = false;
            break;
        }
        index -= 1;
        let lines = entry_lines(state, index, width);
        tail.extend(lines.iter().rev().cloned());
        if index > 0 {
            tail.push(Line::default());
        }
    }
    if reached_top {
        let welcome = welcome_lines(state, width);
        if !welcome.is_empty() && entries > 0 {
            tail.push(Line::default());
        }
        tail.extend(welcome.into_iter().rev());
    }
    state.render_cache.borrow_mut().end_frame();
    tail.reverse();
    // `tail` ends at the bottom; scrolling never goes above the first line.
    let scroll = if reached_top {
        state.scroll.min(tail.len().saturating_sub(height))
    } else {
        state.scroll
    };
    let bottom = tail.len().saturating_sub(scroll);
    let top = bottom.saturating_sub(height);
    tail.drain(top..bottom).collect()
}

fn render_entry(state: &UiState, entry: &Entry, width: usize) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = Vec::new();
    let push = |logical: Vec<(Line<'static>, usize)>, out: &mut Vec<Line<'static>>| {
        for (line, indent) in logical {
            out.extend(wrap_line(&line, width, indent));
        }
    };
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
                    Part::Text(text) => lines.extend(markdown(text, Style::default(), width)),
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
    match pending
        .reason
        .as_deref()
        .and_then(|r| r.strip_prefix("escalate sandbox to "))
    {
        Some(rest) => {
            let (mode, justification) = rest.split_once(": ").unwrap_or((rest, ""));
            lines.push(Line::from(vec![
                Span::styled("sandbox escalation to ", Style::default().fg(Color::Yellow)),
                Span::styled(
                    mode.to_owned(),
                    Style::default()
                        .fg(Color::Yellow)
                        .add_modifier(Modifier::BOLD),
                ),
            ]));
            if !justification.is_empty() {
                let line = Line::from(vec![
                    Span::styled("why (from the model): ", dim()),
                    Span::raw(justification.to_owned()),
                ]);
                lines.extend(wrap_line(&line, width, 2));
            }
        }
        None => {
            if let Some(reason) = &pending.reason {
                lines.extend(wrap_line(
                    &Line::from(Span::styled(reason.clone(), dim())),
                    width,
                    2,
                ));
            }
        }
    }
    let mut options = Vec::new();
    for (i, answer) in pending.answers().iter().enumerate() {
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

/// The front question: its header and text, the plan of a plan review, the option rows
/// (ticks for multi-select), the free-text row and the keys; and the box title.
fn question_lines(state: &UiState, width: usize, height: usize) -> (Vec<Line<'static>>, String) {
    let Some(pending) = state.questions.front() else {
        return (Vec::new(), String::new());
    };
    let Some(question) = pending.current() else {
        return (Vec::new(), String::new());
    };
    let title = match (&question.header, pending.questions.len()) {
        (Some(header), 1) => format!(" {header} "),
        (Some(header), n) => format!(" {header} ({}/{n}) ", pending.index + 1),
        (None, 1) => " question ".to_owned(),
        (None, n) => format!(" question {}/{n} ", pending.index + 1),
    };
    let mut lines = wrap_line(
        &Line::from(Span::styled(
            question.question.clone(),
            Style::default().add_modifier(Modifier::BOLD),
        )),
        width,
        0,
    );
    if let Some(detail) = &question.detail {
        // A plan gets at most half the screen; the rest of it is in the call card.
        let budget = (height / 2).max(3);
        let detail_lines: Vec<&str> = detail.lines().collect();
        for line in detail_lines.iter().take(budget) {
            lines.extend(wrap_line(
                &Line::from(Span::raw((*line).to_owned())),
                width,
                2,
            ));
        }
        if detail_lines.len() > budget {
            lines.push(Line::from(Span::styled(
                format!("  … {} more lines", detail_lines.len() - budget),
                dim(),
            )));
        }
    }
    let multi = question.is_multi_select();
    let rows = pending.rows();
    let descriptions: Vec<Option<String>> = question
        .options
        .iter()
        .flatten()
        .map(|o| o.description.clone())
        .collect();
    for (i, row) in rows.iter().enumerate() {
        let marker = if i == pending.selected { "› " } else { "  " };
        let free_text = i + 1 == rows.len();
        let tick = match (multi, free_text) {
            (true, false) if pending.ticked.contains(&i) => "[x] ",
            (true, false) => "[ ] ",
            _ => "",
        };
        let number = if free_text {
            String::new()
        } else {
            format!("{}. ", i + 1)
        };
        let style = if i == pending.selected {
            Style::default().fg(Color::Black).bg(Color::Yellow)
        } else if free_text {
            dim()
        } else {
            Style::default()
        };
        let mut spans = vec![Span::styled(format!("{marker}{tick}{number}{row}"), style)];
        if let Some(Some(description)) = descriptions.get(i) {
            spans.push(Span::styled(format!("  {description}"), dim()));
        }
        lines.extend(wrap_line(&Line::from(spans), width, 4));
    }
    let keys = if multi {
        "↑↓ move · space ticks · enter answers · esc dismisses"
    } else {
        "↑↓ move · 1-9 or enter answers · esc dismisses"
    };
    lines.push(Line::from(Span::styled(keys, dim())));
    if state.questions.len() > 1 {
        lines.push(Line::from(Span::styled(
            format!("{} more waiting", state.questions.len() - 1),
            dim(),
        )));
    }
    (lines, title)
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

/// `[spinner working 12s ·] model · cwd · ctx · tokens · cache · jobs · plan` on the left, the
/// key hint on the right.
pub fn status_line(state: &UiState, width: usize) -> Line<'static> {
    let usage = state.transcript.usage;
    let mut lead = Vec::new();
    if state.busy {
        let running = state
            .busy_since_ms
            .map(|since| state.now_ms.saturating_sub(since));
        let frame = SPINNER[(running.unwrap_or(state.now_ms) / 100) as usize % SPINNER.len()];
        let elapsed = running
            .map(|ms| format!(" {}", elapsed(ms)))
            .unwrap_or_default();
        lead.push(Span::styled(
            format!("{frame} working{elapsed} · "),
            Style::default().fg(Color::Yellow),
        ));
    }
    let mut tail = Vec::new();
    if let Some(context) = state.context {
        let percent = context.percent();
        let style = match percent {
            90.. => Style::default().fg(Color::Red),
            70.. => Style::default().fg(Color::Yellow),
            _ => dim(),
        };
        tail.push(Span::styled(
            format!(" · ctx {percent}% of {}", count(context.window_tokens)),
            style,
        ));
    }
    tail.push(Span::styled(
        format!(
            " · ↑{} ↓{}",
            count(usage.prompt_total()),
            count(usage.output)
        ),
        dim(),
    ));
    if let Some(hit) = usage.cache_hit_percent() {
        tail.push(Span::styled(format!(" · cache {hit}%"), dim()));
    }
    if !state.jobs.is_empty() {
        tail.push(Span::styled(
            format!(" · jobs {}", state.jobs.len()),
            Style::default().fg(Color::Yellow),
        ));
    }
    let todos = &state.transcript.plan;
    if !todos.is_empty() {
        use dsh_transcript::PlanStatus;
        let done = todos
            .iter()
            .filter(|t| t.status == PlanStatus::Completed)
            .count();
        let current = todos
            .iter()
            .find(|t| t.status == PlanStatus::InProgress)
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
    let fixed: usize = width_of(&state.model)
        + lead.iter().map(|s| width_of(&s.content)).sum::<usize>()
        + tail.iter().map(|s| width_of(&s.content)).sum::<usize>();
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
    let mut parts = lead;
    parts.push(Span::styled(
        state.model.clone(),
        Style::default().fg(Color::Cyan),
    ));
    parts.push(Span::styled(cwd, dim()));
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

/// `12s`, `3m05s` (whole seconds: the status line should not flicker).
fn elapsed(ms: u64) -> String {
    let secs = ms / 1000;
    if secs < 60 {
        format!("{secs}s")
    } else {
        format!("{}m{:02}s", secs / 60, secs % 60)
    }
}

fn render_picker(frame: &mut Frame<'_>, body: Rect, picker: &Picker) {
    let width = body.width.saturating_sub(2).min(110);
    let inner = width.saturating_sub(2) as usize;
    let visible = picker.visible();
    let rows = (body.height.saturating_sub(4) as usize).max(1);
    let start = picker.selected.saturating_sub(rows.saturating_sub(1));
    let mut lines = vec![Line::from(vec![
        Span::styled("filter: ", dim()),
        Span::raw(picker.filter.clone()),
        Span::styled("▏", Style::default().fg(Color::Cyan)),
    ])];
    if visible.is_empty() {
        lines.push(Line::from(Span::styled("no matching session", dim())));
    }
    let when_width = 12;
    let folder_width = (inner / 3).min(40);
    for (i, item) in visible.iter().enumerate().skip(start).take(rows) {
        let title_width = inner.saturating_sub(when_width + folder_width + 6);
        let mark = if item.here { "•" } else { " " };
        let text = format!(
            "{mark} {:<title_width$}  {:<when_width$}  {}",
            truncate(&item.title, title_width),
            truncate(&item.when, when_width),
            truncate(&short_cwd(&item.folder), folder_width),
        );
        let style = if i == picker.selected {
            Style::default().fg(Color::Black).bg(Color::Cyan)
        } else if item.here {
            Style::default()
        } else {
            dim()
        };
        lines.push(Line::from(Span::styled(text, style)));
    }
    let height = (lines.len() as u16 + 2).min(body.height);
    let area = Rect::new(body.x + (body.width - width) / 2, body.y, width, height);
    frame.render_widget(Clear, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::default().fg(Color::Cyan))
        .title(" resume a session · ↑↓ enter · esc closes · • this folder ");
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn render_choices(frame: &mut Frame<'_>, body: Rect, picker: &crate::state::ChoicePicker) {
    let width = body.width.saturating_sub(2).min(110);
    let inner = width.saturating_sub(2) as usize;
    let rows = (body.height.saturating_sub(2) as usize).max(1);
    let start = picker.selected.saturating_sub(rows.saturating_sub(1));
    let label_width = picker
        .items
        .iter()
        .map(|item| item.label.chars().count())
        .max()
        .unwrap_or(0)
        .min(inner.saturating_sub(4) * 2 / 3);
    let mut lines = Vec::new();
    for (i, item) in picker.items.iter().enumerate().skip(start).take(rows) {
        let detail_width = inner.saturating_sub(label_width + 4);
        let text = format!(
            "  {:<label_width$}  {}",
            truncate(&item.label, label_width),
            truncate(&item.detail, detail_width),
        );
        let style = if i == picker.selected {
            Style::default().fg(Color::Black).bg(Color::Cyan)
        } else {
            Style::default()
        };
        lines.push(Line::from(Span::styled(text, style)));
    }
    let height = (lines.len() as u16 + 2).min(body.height);
    let area = Rect::new(body.x + (body.width - width) / 2, body.y, width, height);
    frame.render_widget(Clear, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::default().fg(Color::Cyan))
        .title(format!(" /{} · ↑↓ enter · esc closes ", picker.command));
    frame.render_widget(Paragraph::new(lines).block(block), area);
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
