//! A program in a real pseudo-terminal: keys go in as bytes, the screen is read back through a
//! VT100 parser (with scrollback), and the raw output is kept.

use std::io::Read;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use portable_pty::CommandBuilder;
use portable_pty::PtySize;
use portable_pty::native_pty_system;

pub const ROWS: u16 = 30;
pub const COLS: u16 = 100;
pub const WAIT: Duration = Duration::from_secs(20);

pub struct Pty {
    pub child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    screen: Arc<Mutex<vt100::Parser>>,
    raw: Arc<Mutex<Vec<u8>>>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Pty {
    pub fn spawn(program: &Path, args: &[&str], cwd: &Path, env: &[(&str, String)]) -> Self {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut command = CommandBuilder::new(program);
        command.args(args);
        command.cwd(cwd);
        command.env("TERM", "xterm-256color");
        for (key, value) in env {
            command.env(key, value);
        }
        let child = pair.slave.spawn_command(command).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let screen = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 2000)));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (screen_in, raw_in) = (screen.clone(), raw.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                screen_in.lock().unwrap().process(&buf[..n]);
                raw_in.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Self {
            child,
            writer,
            screen,
            raw,
            _master: pair.master,
        }
    }

    /// Every byte the program wrote to the terminal so far.
    pub fn raw(&self) -> Vec<u8> {
        self.raw.lock().unwrap().clone()
    }

    pub fn contents(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    pub fn wait_for(&self, needle: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.contents();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                start.elapsed() < WAIT,
                "timed out waiting for {needle:?}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn send(&mut self, bytes: &str) {
        self.writer.write_all(bytes.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    /// Types text one key at a time (a burst would arrive as one read and could look pasted).
    pub fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.send(&c.to_string());
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn wait_exit(&mut self) -> portable_pty::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader drain what the process wrote last.
                std::thread::sleep(Duration::from_millis(100));
                return status;
            }
            assert!(
                start.elapsed() < WAIT,
                "the UI did not exit; screen:\n{}",
                self.contents()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The terminal was handed back: alternate screen left, cursor shown.
    pub fn assert_restored(&self) {
        let screen = self.screen.lock().unwrap();
        assert!(
            !screen.screen().alternate_screen(),
            "still on the alternate screen"
        );
        assert!(!screen.screen().hide_cursor(), "cursor left hidden");
        let raw = self.raw.lock().unwrap();
        let text = String::from_utf8_lossy(&raw);
        assert!(
            text.contains("\u{1b}[?1049l"),
            "never left the alternate screen"
        );
        assert!(text.contains("\u{1b}[?2004l"), "bracketed paste left on");
    }
}

/// `<target>/debug`, wherever the target directory is (`CARGO_TARGET_DIR` included): this test
/// binary lives in `<target>/debug/deps`.
pub fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug"))
}
