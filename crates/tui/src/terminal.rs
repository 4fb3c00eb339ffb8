//! Terminal safety: whatever happens (normal exit, error, panic, SIGTERM), raw mode and the
//! alternate screen are undone before anything else is printed.

use std::io;
use std::io::Write;
use std::sync::Once;

use crossterm::cursor;
use crossterm::event::DisableBracketedPaste;
use crossterm::event::EnableBracketedPaste;
use crossterm::execute;
use crossterm::terminal;

/// Puts the terminal into UI mode; dropping it restores the terminal.
#[derive(Debug)]
pub struct TerminalGuard {
    _private: (),
}

impl TerminalGuard {
    pub fn enter() -> io::Result<Self> {
        install_panic_hook();
        terminal::enable_raw_mode()?;
        // From here on the guard exists, so a failure below still restores.
        let guard = Self { _private: () };
        execute!(
            io::stdout(),
            terminal::EnterAlternateScreen,
            // Not `Terminal::clear`: that asks the terminal for the cursor position first.
            terminal::Clear(terminal::ClearType::All),
            EnableBracketedPaste,
            cursor::Show
        )?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Idempotent: leaving modes that are not on is harmless.
pub fn restore() {
    let _ = terminal::disable_raw_mode();
    let mut stdout = io::stdout();
    let _ = execute!(
        stdout,
        DisableBracketedPaste,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
    let _ = stdout.flush();
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // Restore first, or the panic message lands in the alternate screen and vanishes.
            restore();
            previous(info);
        }));
    });
}
