//! What the service knows about one session's events: their surface class (`current`,
//! `shadowed`, `log-only`), replacement and source links, and each event's searchable text.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_session::Event;
use dsh_session::SurfaceOp;
use dsh_session::is_surface_kind;
use serde_json::Value;

/// Where an event stands relative to the model-visible surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SurfaceClass {
    Current,
    Shadowed,
    LogOnly,
}

impl SurfaceClass {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Current => "current",
            Self::Shadowed => "shadowed",
            Self::LogOnly => "log-only",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "current" => Some(Self::Current),
            "shadowed" => Some(Self::Shadowed),
            "log-only" => Some(Self::LogOnly),
            _ => None,
        }
    }
}

/// The surface replayed over a session's events.
#[derive(Debug, Default, Clone)]
pub struct Analysis {
    pub classes: HashMap<u64, SurfaceClass>,
    /// Event → the event that replaced it.
    pub replaced_by: HashMap<u64, u64>,
    /// Event → the surface events its replacement removed.
    pub replaced: HashMap<u64, Vec<u64>>,
    /// Event → events citing it in `sourceEventSeqs`.
    pub derived: HashMap<u64, Vec<u64>>,
}

impl Analysis {
    /// Replays appends and replacements (`replace {start, end}` names the first and last
    /// current surface node it covers, inclusive).
    pub fn of(events: &[Arc<Event>]) -> Self {
        let mut surface: Vec<u64> = Vec::new();
        let mut analysis = Self::default();
        for event in events {
            if let Some(sources) = event.source_event_seqs() {
                for source in sources {
                    analysis.derived.entry(*source).or_default().push(event.seq);
                }
            }
            if !is_surface_kind(&event.kind) {
                continue;
            }
            match event.surface_op() {
                Some(SurfaceOp::Replace { start, end }) => {
                    let from = surface.iter().rposition(|s| *s == start);
                    let to = surface.iter().rposition(|s| *s == end);
                    if let (Some(from), Some(to)) = (from, to)
                        && from <= to
                    {
                        let removed: Vec<u64> = surface.splice(from..=to, [event.seq]).collect();
                        for seq in &removed {
                            analysis.replaced_by.insert(*seq, event.seq);
                        }
                        analysis.replaced.insert(event.seq, removed);
                    } else {
                        surface.push(event.seq);
                    }
                }
                _ => surface.push(event.seq),
            }
        }
        for event in events {
            let class = if !is_surface_kind(&event.kind) {
                SurfaceClass::LogOnly
            } else if analysis.replaced_by.contains_key(&event.seq) {
                SurfaceClass::Shadowed
            } else {
                SurfaceClass::Current
            };
            analysis.classes.insert(event.seq, class);
        }
        analysis
    }

    pub fn class(&self, seq: u64) -> SurfaceClass {
        self.classes
            .get(&seq)
            .copied()
            .unwrap_or(SurfaceClass::LogOnly)
    }

    /// The replacers of `seq`, nearest first, to the end of the chain.
    pub fn replacement_chain(&self, seq: u64) -> Vec<u64> {
        let mut chain = Vec::new();
        let mut current = seq;
        while let Some(next) = self.replaced_by.get(&current) {
            if chain.contains(next) {
                break;
            }
            chain.push(*next);
            current = *next;
        }
        chain
    }
}

fn push_trimmed(parts: &mut Vec<String>, text: &str) {
    let trimmed = text.trim();
    if !trimmed.is_empty() {
        parts.push(trimmed.to_owned());
    }
}

/// Text, tool-call name and arguments, and nested tool-result text of message content
/// (reasoning excluded).
fn content_parts(parts: &mut Vec<String>, content: &Value) {
    match content {
        Value::String(text) => push_trimmed(parts, text),
        Value::Array(blocks) => {
            for block in blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        push_trimmed(parts, block["text"].as_str().unwrap_or(""));
                    }
                    Some("tool-call") => {
                        push_trimmed(parts, block["name"].as_str().unwrap_or(""));
                        push_trimmed(parts, block["arguments"].as_str().unwrap_or(""));
                    }
                    Some("tool-result") => content_parts(parts, &block["content"]),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The searchable text of an event (`extraction.ts`); `None` when it has none.
pub fn searchable_text(event: &Event) -> Option<String> {
    let data = &event.data;
    let mut parts = Vec::new();
    match event.kind.as_str() {
        "user/message" | "assistant/message" => content_parts(&mut parts, &data["content"]),
        "tool/call" => {
            push_trimmed(&mut parts, data["name"].as_str().unwrap_or(""));
            push_trimmed(&mut parts, data["arguments"].as_str().unwrap_or(""));
        }
        "tool/result" => {
            content_parts(&mut parts, &data["message"]["content"]);
            push_trimmed(&mut parts, data["error"]["name"].as_str().unwrap_or(""));
            push_trimmed(&mut parts, data["error"]["code"].as_str().unwrap_or(""));
        }
        "todo/write" => {
            for todo in data["todos"].as_array().into_iter().flatten() {
                push_trimmed(&mut parts, todo["status"].as_str().unwrap_or(""));
                push_trimmed(&mut parts, todo["content"].as_str().unwrap_or(""));
            }
        }
        "turn/end" => match data["reason"]["kind"].as_str() {
            Some("error") => {
                parts.push("error".to_owned());
                push_trimmed(
                    &mut parts,
                    data["reason"]["error"]["message"].as_str().unwrap_or(""),
                );
            }
            Some("aborted") => parts.push("aborted".to_owned()),
            Some("max-tokens") => parts.push("max-tokens".to_owned()),
            Some("interrupted") => parts.push("interrupted".to_owned()),
            _ => {}
        },
        _ => {}
    }
    (!parts.is_empty()).then(|| parts.join("\n"))
}

/// `new Date(ms).toISOString()`.
pub fn iso(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// Howard Hinnant's days → (year, month, day).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Why a timestamp filter was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampError {
    /// Not `YYYY-MM-DDTHH:MM[:SS[.fff…]](Z|±HH:MM)`.
    Format,
    /// Well-formed but not a real instant.
    Invalid,
}

/// `YYYY-MM-DDTHH:MM[:SS[.fff…]](Z|±HH:MM)` → epoch milliseconds.
pub fn parse_timestamp(text: &str) -> Result<i64, TimestampError> {
    let b = text.as_bytes();
    let digits = |s: &[u8]| -> Option<i64> {
        if s.iter().all(u8::is_ascii_digit) && !s.is_empty() {
            std::str::from_utf8(s).ok()?.parse().ok()
        } else {
            None
        }
    };
    let format = TimestampError::Format;
    if b.len() < 17 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return Err(format);
    }
    let year = digits(&b[0..4]).ok_or(format)?;
    let month = digits(&b[5..7]).ok_or(format)?;
    let day = digits(&b[8..10]).ok_or(format)?;
    let hour = digits(&b[11..13]).ok_or(format)?;
    let minute = digits(&b[14..16]).ok_or(format)?;
    let mut i = 16;
    let (mut second, mut millis) = (0, 0);
    if b.get(i) == Some(&b':') {
        second = digits(b.get(i + 1..i + 3).ok_or(format)?).ok_or(format)?;
        i += 3;
        if b.get(i) == Some(&b'.') {
            let start = i + 1;
            let mut end = start;
            while b.get(end).is_some_and(u8::is_ascii_digit) {
                end += 1;
            }
            if end == start {
                return Err(format);
            }
            let frac = &b[start..end];
            let mut ms = 0;
            for k in 0..3 {
                ms = ms * 10 + frac.get(k).map_or(0, |d| i64::from(d - b'0'));
            }
            millis = ms;
            i = end;
        }
    }
    let offset_minutes = match &b[i..] {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let hours = digits(&[*h1, *h2]).ok_or(format)?;
            let minutes = digits(&[*m1, *m2]).ok_or(format)?;
            if hours > 23 || minutes > 59 {
                return Err(TimestampError::Invalid);
            }
            let total = hours * 60 + minutes;
            if *sign == b'-' { -total } else { total }
        }
        _ => return Err(format),
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day < 1
        || day > month_days[usize::try_from(month - 1).unwrap_or(0)]
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Err(TimestampError::Invalid);
    }
    let days = days_from_civil(year, month, day);
    Ok(((days * 24 + hour) * 60 + minute - offset_minutes) * 60_000 + second * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(
        kind: &str,
        seq: u64,
        data: Value,
        op: Option<SurfaceOp>,
        sources: Option<Vec<u64>>,
    ) -> Arc<Event> {
        Arc::new(Event::new(kind, seq, 0, data).with_surface(op, sources))
    }

    #[test]
    fn replacements_shadow_and_link() {
        let events = vec![
            event("user/message", 0, json!({}), Some(SurfaceOp::Append), None),
            event(
                "assistant/message",
                1,
                json!({}),
                Some(SurfaceOp::Append),
                None,
            ),
            event("turn/end", 2, json!({}), None, None),
            event(
                "user/message",
                3,
                json!({}),
                Some(SurfaceOp::Replace { start: 0, end: 1 }),
                Some(vec![0, 1]),
            ),
        ];
        let a = Analysis::of(&events);
        assert_eq!(a.class(0), SurfaceClass::Shadowed);
        assert_eq!(a.class(2), SurfaceClass::LogOnly);
        assert_eq!(a.class(3), SurfaceClass::Current);
        assert_eq!(a.replaced.get(&3), Some(&vec![0, 1]));
        assert_eq!(a.replacement_chain(1), vec![3]);
        assert_eq!(a.derived.get(&0), Some(&vec![3]));
    }

    #[test]
    fn searchable_text_follows_the_extraction_rules() {
        let user = event(
            "user/message",
            0,
            json!({"content": [{"type": "text", "text": "  hello  "}, {"type": "reasoning", "text": "no"}]}),
            Some(SurfaceOp::Append),
            None,
        );
        assert_eq!(searchable_text(&user).as_deref(), Some("hello"));
        let call = event(
            "tool/call",
            1,
            json!({"name": "bash", "arguments": "{\"a\":1}"}),
            None,
            None,
        );
        assert_eq!(searchable_text(&call).as_deref(), Some("bash\n{\"a\":1}"));
        let end = event(
            "turn/end",
            2,
            json!({"reason": {"kind": "completed"}}),
            None,
            None,
        );
        assert_eq!(searchable_text(&end), None);
        let failed = event(
            "turn/end",
            3,
            json!({"reason": {"kind": "error", "error": {"message": "boom"}}}),
            None,
            None,
        );
        assert_eq!(searchable_text(&failed).as_deref(), Some("error\nboom"));
    }

    #[test]
    fn iso_times_and_timestamps_round_trip() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(
            parse_timestamp("2023-11-14T22:13:20.123Z"),
            Ok(1_700_000_000_123)
        );
        assert_eq!(
            parse_timestamp("2023-11-14T23:13+01:00"),
            Ok(1_700_000_000_000 - 20_000)
        );
        assert_eq!(
            parse_timestamp("2023-11-14T22:13:20"),
            Err(TimestampError::Format)
        );
        assert_eq!(
            parse_timestamp("2023-02-30T00:00Z"),
            Err(TimestampError::Invalid)
        );
    }
}
