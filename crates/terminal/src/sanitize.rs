//! Terminal output as text: ANSI/OSC sequences stripped, CRLF folded to LF, the shell's
//! prompt marker (`OSC 133;D;<status>`) reported. Streaming, so a sequence split across two
//! reads is still recognised.

/// What one chunk produced.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sanitized {
    pub text: Vec<u8>,
    /// One entry per prompt marker seen, in order: where in `text` it stood and the status
    /// the shell reported.
    pub prompts: Vec<(usize, Option<i32>)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Normal,
    Esc,
    Csi,
    Osc,
    OscEsc,
}

/// The streaming sanitizer of one terminal.
#[derive(Debug)]
pub struct Sanitizer {
    state: State,
    pending_cr: bool,
    osc: Vec<u8>,
}

impl Default for Sanitizer {
    fn default() -> Self {
        Self::new()
    }
}

/// OSC payloads are short; a runaway one is cut off here rather than buffered forever.
const MAX_OSC: usize = 4096;

impl Sanitizer {
    pub fn new() -> Self {
        Self {
            state: State::Normal,
            pending_cr: false,
            osc: Vec::new(),
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) -> Sanitized {
        let mut out = Sanitized::default();
        for &byte in bytes {
            match self.state {
                State::Normal => self.normal(byte, &mut out),
                State::Esc => {
                    self.state = match byte {
                        b'[' => State::Csi,
                        b']' => State::Osc,
                        _ => State::Normal,
                    };
                    self.osc.clear();
                }
                State::Csi => {
                    if (0x40..=0x7e).contains(&byte) {
                        self.state = State::Normal;
                    }
                }
                State::Osc => match byte {
                    0x07 => self.end_osc(&mut out),
                    0x1b => self.state = State::OscEsc,
                    _ => {
                        if self.osc.len() < MAX_OSC {
                            self.osc.push(byte);
                        }
                    }
                },
                State::OscEsc => {
                    if byte == b'\\' {
                        self.end_osc(&mut out);
                    } else {
                        self.state = State::Osc;
                    }
                }
            }
        }
        out
    }

    fn normal(&mut self, byte: u8, out: &mut Sanitized) {
        if self.pending_cr {
            self.pending_cr = false;
            if byte == b'\n' {
                out.text.push(b'\n');
                return;
            }
        }
        match byte {
            0x1b => self.state = State::Esc,
            b'\r' => self.pending_cr = true,
            b'\n' | b'\t' => out.text.push(byte),
            0x00..=0x1f | 0x7f => {}
            _ => out.text.push(byte),
        }
    }

    fn end_osc(&mut self, out: &mut Sanitized) {
        self.state = State::Normal;
        if let Some(rest) = self.osc.strip_prefix(b"133;D") {
            let status = rest
                .strip_prefix(b";")
                .and_then(|s| std::str::from_utf8(s).ok())
                .and_then(|s| s.trim().parse().ok());
            out.prompts.push((out.text.len(), status));
        }
        self.osc.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&[u8]]) -> (String, Vec<Option<i32>>) {
        let mut s = Sanitizer::new();
        let mut text = Vec::new();
        let mut prompts = Vec::new();
        for chunk in chunks {
            let out = s.feed(chunk);
            text.extend(out.text);
            prompts.extend(out.prompts.into_iter().map(|(_, status)| status));
        }
        (String::from_utf8(text).unwrap(), prompts)
    }

    #[test]
    fn colours_and_crlf_are_removed() {
        let (text, prompts) = run(&[b"\x1b[1;31mred\x1b[0m\r\nnext\r\n"]);
        assert_eq!(text, "red\nnext\n");
        assert!(prompts.is_empty());
    }

    #[test]
    fn a_prompt_marker_split_across_reads_is_seen_with_its_status() {
        let (text, prompts) = run(&[b"out\r\n\x1b]133;", b"D;7\x07dsh> "]);
        assert_eq!(text, "out\ndsh> ");
        assert_eq!(prompts, vec![Some(7)]);
        let (_, prompts) = run(&[b"\x1b]133;D;0\x1b\\"]);
        assert_eq!(prompts, vec![Some(0)]);
    }

    #[test]
    fn the_marker_position_is_reported() {
        let out = Sanitizer::new().feed(b"ab\x1b]133;D;0\x07dsh> ");
        assert_eq!(out.prompts, vec![(2, Some(0))]);
    }

    #[test]
    fn other_osc_titles_and_lone_carriage_returns_vanish() {
        let (text, _) = run(&[b"\x1b]0;title\x07a\rb\xc3\xa9"]);
        assert_eq!(text, "ab\u{e9}");
    }
}
