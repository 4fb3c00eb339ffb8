//! Text from a model, a tool, a file or a log, made safe to print on a terminal.
//!
//! A terminal obeys control sequences in what it prints: OSC 52 writes the clipboard, OSC 0/2
//! the window title, CSI moves the cursor and rewrites what is already on screen, and C1 bytes
//! (U+0080–U+009F) are single-character forms of the same introducers. Bidirectional overrides
//! and isolates reorder what the reader sees without changing the bytes ("Trojan Source").
//! Every such character is replaced by its JSON-style escape `\uXXXX`: visible, nothing is lost,
//! and the result is still valid JSON when the input was (inside a JSON document these
//! characters can only stand in strings, where `\uXXXX` means the same character). So one
//! function serves plain text and JSON lines alike.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` would be obeyed, not shown, by a terminal (or reorder what is shown): C0 controls
/// other than newline and tab, DEL, C1 controls, and the bidirectional embeddings, overrides and
/// isolates.
pub fn is_terminal_control(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

/// `text` with every [`is_terminal_control`] character written as `\uXXXX` (but a carriage
/// return right before a newline, a CRLF line end, is kept); borrowed when there is none (the
/// common case costs one scan).
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let Some(first) = text.find(is_terminal_control) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    let mut chars = text[first..].chars().peekable();
    while let Some(c) = chars.next() {
        // A carriage return that ends a line (CRLF) moves nothing that a newline would not;
        // alone it returns to the start of the line and lets what follows overwrite it.
        if c == '\r' && chars.peek() == Some(&'\n') {
            out.push(c);
        } else if is_terminal_control(c) {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        let osc52 = "\u{1b}]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\u{7}";
        assert_eq!(
            terminal_safe(osc52),
            "\\u001b]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\\u0007"
        );
        assert_eq!(
            terminal_safe("\u{1b}]0;pwned\u{1b}\\"),
            "\\u001b]0;pwned\\u001b\\"
        );
        assert_eq!(terminal_safe("a\u{9b}2J\u{9d}x"), "a\\u009b2J\\u009dx");
        assert_eq!(terminal_safe("del\u{7f} cr\r"), "del\\u007f cr\\u000d");
        assert_eq!(terminal_safe("shown\rhidden\r\n"), "shown\\u000dhidden\r\n");
        assert_eq!(terminal_safe("\u{202e}txt.exe"), "\\u202etxt.exe");
        assert_eq!(terminal_safe("\u{2067}x\u{2069}"), "\\u2067x\\u2069");
    }

    #[test]
    fn ordinary_text_is_untouched_and_borrowed() {
        let text = "line one\n\tindented — ünïcödé 中文 😀 \u{200d}";
        assert!(matches!(terminal_safe(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn json_stays_json_with_the_same_value() {
        let value = serde_json::json!({"text": "\u{1b}]52;c;eA==\u{7} \u{9b}31m \u{202e} \u{7f}"});
        let line = serde_json::to_string(&value).unwrap();
        let safe = terminal_safe(&line);
        assert!(!safe.contains(is_terminal_control), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }
}
