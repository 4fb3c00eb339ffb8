//! Incremental SSE framing: bytes in, events out. Tolerates frames split anywhere (even inside
//! a UTF-8 sequence or a CRLF), `:` comments, CRLF/CR/LF line ends and multi-line `data:`.

use std::collections::VecDeque;

/// One framing result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseItem {
    /// A `:` comment line: transport activity, no payload.
    Comment,
    /// A dispatched event's data (multi-line data joined with `\n`).
    Data(String),
}

#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buffer: Vec<u8>,
    data: String,
    has_data: bool,
    at_start: bool,
    items: VecDeque<SseItem>,
}

impl SseParser {
    pub(crate) fn new() -> Self {
        Self {
            at_start: true,
            ..Self::default()
        }
    }

    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
        if self.at_start {
            // A UTF-8 BOM may open the stream; it is not part of the first field name.
            if self.buffer.len() < 3 && b"\xEF\xBB\xBF".starts_with(&self.buffer) {
                return;
            }
            if self.buffer.starts_with(b"\xEF\xBB\xBF") {
                self.buffer.drain(..3);
            }
            self.at_start = false;
        }
        let mut consumed = 0;
        loop {
            let rest = &self.buffer[consumed..];
            let Some(end) = rest.iter().position(|b| *b == b'\n' || *b == b'\r') else {
                break;
            };
            let terminator_len = if rest[end] == b'\r' {
                match rest.get(end + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A CR at the end of what we have may be the first half of a CRLF.
                    None => break,
                }
            } else {
                1
            };
            let line = String::from_utf8_lossy(&rest[..end]).into_owned();
            consumed += end + terminator_len;
            self.line(&line);
        }
        self.buffer.drain(..consumed);
    }

    /// The peer closed the stream: a CR held back as a possible CRLF half is a line end.
    pub(crate) fn end_of_input(&mut self) {
        if self.buffer.last() == Some(&b'\r') {
            self.buffer.push(b'\n');
            self.feed(&[]);
        }
    }

    pub(crate) fn next_item(&mut self) -> Option<SseItem> {
        self.items.pop_front()
    }

    fn line(&mut self, line: &str) {
        if line.is_empty() {
            if self.has_data {
                let mut data = std::mem::take(&mut self.data);
                if data.ends_with('\n') {
                    data.pop();
                }
                self.items.push_back(SseItem::Data(data));
            }
            self.has_data = false;
            return;
        }
        if line.starts_with(':') {
            self.items.push_back(SseItem::Comment);
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        // `event`, `id`, `retry` and unknown fields carry nothing the adapter uses.
        if field == "data" {
            self.data.push_str(value);
            self.data.push('\n');
            self.has_data = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn parse_in_pieces(input: &[u8], piece: usize) -> Vec<SseItem> {
        let mut parser = SseParser::new();
        let mut items = Vec::new();
        for chunk in input.chunks(piece.max(1)) {
            parser.feed(chunk);
            while let Some(item) = parser.next_item() {
                items.push(item);
            }
        }
        parser.end_of_input();
        while let Some(item) = parser.next_item() {
            items.push(item);
        }
        items
    }

    #[test]
    fn frames_split_at_every_byte_give_the_same_events() {
        let input = "\u{FEFF}: keep-alive\r\ndata: {\"a\":\"é€\"}\r\n\r\nevent: x\nid: 7\ndata: line1\ndata:line2\n\n\
                     data\n\n:c\rdata: [DONE]\r\r"
            .as_bytes();
        let expected = vec![
            SseItem::Comment,
            SseItem::Data("{\"a\":\"é€\"}".into()),
            SseItem::Data("line1\nline2".into()),
            SseItem::Data(String::new()),
            SseItem::Comment,
            SseItem::Data("[DONE]".into()),
        ];
        for piece in [1, 2, 3, 5, 7, 1000] {
            assert_eq!(
                parse_in_pieces(input, piece),
                expected,
                "piece size {piece}"
            );
        }
    }

    #[test]
    fn unterminated_event_is_not_dispatched() {
        assert_eq!(parse_in_pieces(b"data: [DONE]\n", 4), vec![]);
        assert_eq!(parse_in_pieces(b"data: [DONE]", 4), vec![]);
    }

    #[test]
    fn events_without_data_are_dropped() {
        assert_eq!(parse_in_pieces(b"event: ping\n\nretry: 5\n\n", 3), vec![]);
    }
}
