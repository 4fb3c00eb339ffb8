//! The input box: a small multi-line editor with history and large-paste placeholders.

/// Pastes longer than this (characters) or with more lines are shown as a placeholder and
/// expanded on submit, so the box stays readable.
const LARGE_PASTE_CHARS: usize = 800;
const LARGE_PASTE_LINES: usize = 8;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Editor {
    lines: Vec<String>,
    /// (row, column in chars)
    cursor: (usize, usize),
    history: Vec<String>,
    /// Position while browsing history; `None` = editing a fresh entry.
    browsing: Option<usize>,
    draft: String,
    pastes: Vec<(String, String)>,
}

impl Editor {
    pub fn new() -> Self {
        Self {
            lines: vec![String::new()],
            ..Self::default()
        }
    }

    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    pub fn cursor(&self) -> (usize, usize) {
        self.cursor
    }

    /// The text as shown (placeholders unexpanded).
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    pub fn set_text(&mut self, text: &str) {
        self.lines = text.split('\n').map(str::to_owned).collect();
        if self.lines.is_empty() {
            self.lines.push(String::new());
        }
        let row = self.lines.len() - 1;
        self.cursor = (row, self.lines[row].chars().count());
    }

    pub fn clear(&mut self) {
        self.set_text("");
        self.pastes.clear();
        self.browsing = None;
    }

    /// Takes the text for submission: placeholders expanded, remembered in history, box cleared.
    pub fn submit(&mut self) -> String {
        let shown = self.text();
        let mut text = shown.clone();
        for (placeholder, content) in &self.pastes {
            text = text.replacen(placeholder, content, 1);
        }
        if !shown.trim().is_empty() && self.history.last() != Some(&shown) {
            self.history.push(shown);
        }
        self.clear();
        text
    }

    fn byte_at(line: &str, col: usize) -> usize {
        line.char_indices().nth(col).map_or(line.len(), |(i, _)| i)
    }

    fn line_len(&self, row: usize) -> usize {
        self.lines[row].chars().count()
    }

    pub fn insert_char(&mut self, c: char) {
        if c == '\n' {
            self.newline();
            return;
        }
        let (row, col) = self.cursor;
        let at = Self::byte_at(&self.lines[row], col);
        self.lines[row].insert(at, c);
        self.cursor.1 += 1;
    }

    pub fn insert_str(&mut self, text: &str) {
        for c in text.chars().filter(|c| *c != '\r') {
            self.insert_char(c);
        }
    }

    /// Inserts pasted text; a large paste becomes a placeholder expanded on submit.
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let lines = text.lines().count();
        if text.chars().count() > LARGE_PASTE_CHARS || lines > LARGE_PASTE_LINES {
            let placeholder = format!(
                "[pasted #{}: {lines} lines, {} chars]",
                self.pastes.len() + 1,
                text.chars().count()
            );
            self.insert_str(&placeholder);
            self.pastes.push((placeholder, text));
        } else {
            self.insert_str(&text);
        }
    }

    pub fn newline(&mut self) {
        let (row, col) = self.cursor;
        let at = Self::byte_at(&self.lines[row], col);
        let rest = self.lines[row].split_off(at);
        self.lines.insert(row + 1, rest);
        self.cursor = (row + 1, 0);
    }

    pub fn backspace(&mut self) {
        let (row, col) = self.cursor;
        if col > 0 {
            let at = Self::byte_at(&self.lines[row], col - 1);
            self.lines[row].remove(at);
            self.cursor.1 -= 1;
        } else if row > 0 {
            let line = self.lines.remove(row);
            let prev = self.line_len(row - 1);
            self.lines[row - 1].push_str(&line);
            self.cursor = (row - 1, prev);
        }
    }

    pub fn delete(&mut self) {
        let (row, col) = self.cursor;
        if col < self.line_len(row) {
            let at = Self::byte_at(&self.lines[row], col);
            self.lines[row].remove(at);
        } else if row + 1 < self.lines.len() {
            let next = self.lines.remove(row + 1);
            self.lines[row].push_str(&next);
        }
    }

    /// Deletes the word before the cursor (Ctrl-W).
    pub fn delete_word(&mut self) {
        while self.cursor.1 > 0 && self.char_before().is_some_and(char::is_whitespace) {
            self.backspace();
        }
        while self.cursor.1 > 0 && self.char_before().is_some_and(|c| !c.is_whitespace()) {
            self.backspace();
        }
    }

    fn char_before(&self) -> Option<char> {
        let (row, col) = self.cursor;
        col.checked_sub(1)
            .and_then(|c| self.lines[row].chars().nth(c))
    }

    pub fn left(&mut self) {
        if self.cursor.1 > 0 {
            self.cursor.1 -= 1;
        } else if self.cursor.0 > 0 {
            self.cursor.0 -= 1;
            self.cursor.1 = self.line_len(self.cursor.0);
        }
    }

    pub fn right(&mut self) {
        if self.cursor.1 < self.line_len(self.cursor.0) {
            self.cursor.1 += 1;
        } else if self.cursor.0 + 1 < self.lines.len() {
            self.cursor = (self.cursor.0 + 1, 0);
        }
    }

    pub fn home(&mut self) {
        self.cursor.1 = 0;
    }

    pub fn end(&mut self) {
        self.cursor.1 = self.line_len(self.cursor.0);
    }

    /// Up: previous line, or the previous history entry on the first line.
    pub fn up(&mut self) {
        if self.cursor.0 > 0 {
            self.cursor.0 -= 1;
            self.cursor.1 = self.cursor.1.min(self.line_len(self.cursor.0));
            return;
        }
        if self.history.is_empty() {
            return;
        }
        let index = match self.browsing {
            None => {
                self.draft = self.text();
                self.history.len() - 1
            }
            Some(0) => 0,
            Some(i) => i - 1,
        };
        self.browsing = Some(index);
        let entry = self.history[index].clone();
        self.set_text(&entry);
    }

    /// Down: next line, or the next history entry (then the draft) on the last line.
    pub fn down(&mut self) {
        if self.cursor.0 + 1 < self.lines.len() {
            self.cursor.0 += 1;
            self.cursor.1 = self.cursor.1.min(self.line_len(self.cursor.0));
            return;
        }
        match self.browsing {
            None => {}
            Some(i) if i + 1 < self.history.len() => {
                self.browsing = Some(i + 1);
                let entry = self.history[i + 1].clone();
                self.set_text(&entry);
            }
            Some(_) => {
                self.browsing = None;
                let draft = std::mem::take(&mut self.draft);
                self.set_text(&draft);
            }
        }
    }

    /// The line the cursor is on.
    pub fn current_line(&self) -> &str {
        &self.lines[self.cursor.0]
    }

    /// Replaces the `count` characters before the cursor by `text` (a completion).
    pub fn replace_before_cursor(&mut self, count: usize, text: &str) {
        for _ in 0..count.min(self.cursor.1) {
            self.backspace();
        }
        self.insert_str(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_across_lines() {
        let mut e = Editor::new();
        e.insert_str("ab");
        e.newline();
        e.insert_str("cd");
        assert_eq!(e.text(), "ab\ncd");
        e.home();
        e.backspace();
        assert_eq!(e.text(), "abcd");
        assert_eq!(e.cursor(), (0, 2));
        e.insert_str(" éx");
        e.delete_word();
        assert_eq!(e.text(), "ab cd");
    }

    #[test]
    fn history_browses_and_restores_the_draft() {
        let mut e = Editor::new();
        e.insert_str("one");
        assert_eq!(e.submit(), "one");
        e.insert_str("two");
        e.submit();
        e.insert_str("dra");
        e.up();
        assert_eq!(e.text(), "two");
        e.up();
        assert_eq!(e.text(), "one");
        e.down();
        e.down();
        assert_eq!(e.text(), "dra");
    }

    #[test]
    fn large_pastes_are_placeholders_expanded_on_submit() {
        let mut e = Editor::new();
        let big = "line\n".repeat(20);
        e.insert_str("see ");
        e.paste(&big);
        assert_eq!(e.text(), "see [pasted #1: 20 lines, 100 chars]");
        assert_eq!(e.submit(), format!("see {big}"));
    }

    #[test]
    fn a_completion_replaces_what_is_before_the_cursor() {
        let mut e = Editor::new();
        e.insert_str("look at @src/ma");
        assert_eq!(e.current_line(), "look at @src/ma");
        e.replace_before_cursor("@src/ma".chars().count(), "@src/main.rs ");
        assert_eq!(e.text(), "look at @src/main.rs ");
    }
}
