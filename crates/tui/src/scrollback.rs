//! After the UI leaves the alternate screen, the conversation is printed to the normal screen
//! so it stays in the terminal's scrollback (as it would in a shell), followed by the command
//! that reopens the session.
//!
//! Unlike the live view (ratatui's buffer drops control characters), these lines go to the
//! terminal as they are: every span's text passes [`dsh_secrets::terminal_safe`] first, so a
//! model's or a tool's escape sequence is shown, never obeyed.

use std::io;
use std::io::Write;

use crossterm::style::Attribute;
use crossterm::style::Color as TermColor;
use crossterm::style::ContentStyle;
use crossterm::style::PrintStyledContent;
use crossterm::style::StyledContent;
use ratatui::style::Color;
use ratatui::style::Modifier;
use ratatui::style::Style;
use ratatui::text::Line;

use crate::controller::Controller;

fn color(color: Color) -> Option<TermColor> {
    Some(match color {
        Color::Reset => return None,
        Color::Black => TermColor::Black,
        Color::Red => TermColor::DarkRed,
        Color::Green => TermColor::DarkGreen,
        Color::Yellow => TermColor::DarkYellow,
        Color::Blue => TermColor::DarkBlue,
        Color::Magenta => TermColor::DarkMagenta,
        Color::Cyan => TermColor::DarkCyan,
        Color::Gray => TermColor::Grey,
        Color::DarkGray => TermColor::DarkGrey,
        Color::LightRed => TermColor::Red,
        Color::LightGreen => TermColor::Green,
        Color::LightYellow => TermColor::Yellow,
        Color::LightBlue => TermColor::Blue,
        Color::LightMagenta => TermColor::Magenta,
        Color::LightCyan => TermColor::Cyan,
        Color::White => TermColor::White,
        Color::Rgb(r, g, b) => TermColor::Rgb { r, g, b },
        Color::Indexed(i) => TermColor::AnsiValue(i),
    })
}

fn content_style(style: Style) -> ContentStyle {
    let mut out = ContentStyle::new();
    out.foreground_color = style.fg.and_then(color);
    out.background_color = style.bg.and_then(color);
    for (modifier, attribute) in [
        (Modifier::BOLD, Attribute::Bold),
        (Modifier::DIM, Attribute::Dim),
        (Modifier::ITALIC, Attribute::Italic),
        (Modifier::UNDERLINED, Attribute::Underlined),
        (Modifier::CROSSED_OUT, Attribute::CrossedOut),
        (Modifier::REVERSED, Attribute::Reverse),
    ] {
        if style.add_modifier.contains(modifier) {
            out.attributes.set(attribute);
        }
    }
    out
}

/// Writes styled lines as terminal text (SGR sequences, reset after each span).
pub fn write_lines(out: &mut impl Write, lines: &[Line<'_>]) -> io::Result<()> {
    for line in lines {
        for span in &line.spans {
            let style = content_style(line.style.patch(span.style));
            let text = dsh_secrets::terminal_safe(span.content.as_ref());
            crossterm::queue!(
                out,
                PrintStyledContent(StyledContent::new(style, text.as_ref()))
            )?;
        }
        out.write_all(b"\r\n")?;
    }
    Ok(())
}

/// A line of transcript text (for callers without a ratatui dependency).
pub type PlainLine = Line<'static>;

/// Writes lines as plain text (no terminal sequences): for a file or a pipe.
pub fn write_plain(out: &mut impl Write, lines: &[Line<'_>]) -> io::Result<()> {
    for line in lines {
        for span in &line.spans {
            out.write_all(dsh_secrets::terminal_safe(span.content.as_ref()).as_bytes())?;
        }
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The whole transcript at `width`, then the resume hint when the session was stored.
pub fn print(out: &mut impl Write, controller: &Controller, width: usize) -> io::Result<()> {
    let lines = crate::view::transcript_lines(&controller.state, width.max(20));
    if !controller.state.transcript.entries.is_empty() {
        write_lines(out, &lines)?;
        out.write_all(b"\r\n")?;
    }
    if let Some(id) = controller.resumable_id() {
        let hint = Line::from(vec![
            ratatui::text::Span::styled(
                "To continue this session: ",
                Style::default().fg(Color::DarkGray),
            ),
            ratatui::text::Span::styled(
                format!("dsh resume {id}"),
                Style::default().fg(Color::Cyan),
            ),
        ]);
        write_lines(out, &[hint])?;
    }
    out.flush()
}

/// `dsh sessions show`: a stored session (crash repair shown as it would be applied) as the
/// transcript the UI would draw at `width`, under one head line (`head(title)`); styled for a
/// terminal (`ansi`), plain text otherwise.
pub fn write_stored(
    out: &mut impl Write,
    loaded: &dsh_session::LoadedSession,
    now_ms: u64,
    width: usize,
    ansi: bool,
    head: impl FnOnce(&str) -> String,
) -> io::Result<()> {
    let cwd = loaded.header.cwd.clone().unwrap_or_default();
    let mut events: Vec<std::sync::Arc<dsh_session::Event>> = loaded.events.to_vec();
    events.extend(loaded.repair.iter().cloned().map(std::sync::Arc::new));
    let mut state = crate::UiState::new("", cwd, loaded.header.id.clone());
    state.transcript = crate::Transcript::from_events(events.iter(), &crate::Presenters::default());
    state.now_ms = now_ms;
    // A printout has no ctrl-o: every card is shown whole, with no "(ctrl-o to expand)" hint.
    state.expand_tools = true;
    let lines = crate::view::transcript_lines(&state, width);
    let title = state.transcript.title.as_deref().unwrap_or("(untitled)");
    let head = [PlainLine::from(head(title))];
    if ansi {
        write_lines(out, &head).and_then(|()| write_lines(out, &lines))
    } else {
        write_plain(out, &head).and_then(|()| write_plain(out, &lines))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "\u{1b}]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\u{7}\u{1b}]0;title\u{1b}\\\u{1b}[2J\u{9b}1m\u{9d}2;t\u{7}\u{202e}";

    #[test]
    fn styled_and_plain_lines_show_escape_sequences_instead_of_obeying_them() {
        let lines = [Line::from(vec![
            ratatui::text::Span::styled("model: ", Style::default().fg(Color::Cyan)),
            ratatui::text::Span::raw(HOSTILE),
        ])];
        let mut styled = Vec::new();
        write_lines(&mut styled, &lines).unwrap();
        let styled = String::from_utf8(styled).unwrap();
        let mut plain = Vec::new();
        write_plain(&mut plain, &lines).unwrap();
        let plain = String::from_utf8(plain).unwrap();
        for text in [&styled, &plain] {
            for raw in [
                "\u{1b}]",
                "\u{1b}[2J",
                "\u{7}",
                "\u{9b}",
                "\u{9d}",
                "\u{202e}",
            ] {
                assert!(!text.contains(raw), "{raw:?} in {text:?}");
            }
            assert!(text.contains("\\u001b]52;c;"), "{text:?}");
        }
        // dsh's own styling still reaches the terminal.
        assert!(styled.contains("\u{1b}["), "{styled:?}");
        assert!(!plain.contains('\u{1b}'), "{plain:?}");
    }
}
