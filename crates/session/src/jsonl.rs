//! Reading the JSONL format (§5.2): header line, event lines, packed chunk rows, torn tails.
//!
//! One pass: each line is parsed once into its envelope, packed rows are expanded, seqs are
//! checked for contiguity and data for losslessness. An event's data is checked with the parser
//! that would build its tree but kept as its text in the file buffer, which every event of the
//! load shares (see [`Payload`]): a loaded log costs about its file size plus the envelopes.
//! Surface rules are checked only when a log is rebuilt from the events (resume, fork), never
//! by `load`.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Map;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::SessionError;
use crate::event::Event;
use crate::event::SurfaceOp;
use crate::event::kind;
use crate::header::SessionHeader;
use crate::line_index::LineIndex;
use crate::payload::Payload;
use crate::payload::TextError;
use crate::payload::check_text;
use crate::repair::crash_repair;

/// A stored session read without changing anything on disk.
#[derive(Debug, Clone)]
pub struct LoadedSession {
    pub header: SessionHeader,
    pub path: PathBuf,
    /// The committed events as stored (packed rows expanded, torn tail dropped). Crash repair
    /// is *not* applied; see `repair`.
    pub events: Vec<Arc<Event>>,
    /// Bytes after the committed prefix (a torn last line) that a resume would truncate.
    pub dropped_bytes: u64,
    /// The synthetic closers a resume would append (§5.3); empty for a balanced log.
    pub repair: Vec<Event>,
}

pub(crate) struct ParsedLog {
    pub(crate) header: SessionHeader,
    pub(crate) events: Vec<Arc<Event>>,
    /// Where each event's line starts in the file (the members of a packed row share their
    /// row's start), when asked for: a resumed log reads evicted events back through it.
    pub(crate) starts: LineIndex,
    /// Length of the committed prefix in bytes.
    pub(crate) valid_len: u64,
    /// Length of the whole file in bytes.
    pub(crate) file_len: u64,
}

/// Reads and validates one `session.jsonl` file (read-only).
pub fn read_log_file(path: &Path) -> Result<LoadedSession, SessionError> {
    // A log open in this process may still have queued events for this file.
    crate::writer::settle(path);
    let bytes = std::fs::read(path).map_err(|e| SessionError::io(path, e))?;
    let parsed = parse_log(path, bytes, false)?;
    let repair = crash_repair(&parsed.events);
    Ok(LoadedSession {
        header: parsed.header,
        path: path.to_owned(),
        events: parsed.events,
        dropped_bytes: parsed.file_len - parsed.valid_len,
        repair,
    })
}

/// Parses a whole file's bytes (taken, so the loaded events can keep them without a copy).
/// With `want_starts`, also where each event's line starts (see [`ParsedLog::starts`]).
pub(crate) fn parse_log(
    path: &Path,
    mut bytes: Vec<u8>,
    want_starts: bool,
) -> Result<ParsedLog, SessionError> {
    let corrupt = |line: usize, reason: &str| SessionError::Corrupt {
        path: path.to_owned(),
        line,
        reason: reason.to_owned(),
    };
    // A line is committed only once its newline is written; anything after the last newline
    // is a torn tail.
    let committed_len = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if committed_len == 0 {
        return Err(corrupt(1, "no complete header line"));
    }
    let file_len = bytes.len() as u64;
    // The UTF-8 check runs once over the whole file; a bad byte marks its line as unreadable.
    // The events' data points into `text`, which holds the readable committed lines only and
    // is the file's own buffer unless a bad byte forces a copy (then `damaged` keeps the bytes).
    let (text, damaged, bad_utf8_at) = match std::str::from_utf8(&bytes[..committed_len]) {
        Ok(_) => {
            bytes.truncate(committed_len);
            let text = String::from_utf8(bytes).map_err(|_| corrupt(1, "invalid UTF-8"))?;
            (text, None, None)
        }
        Err(e) => {
            let valid = &bytes[..e.valid_up_to()];
            let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let text = std::str::from_utf8(&bytes[..line_start])
                .unwrap_or_default()
                .to_owned();
            (text, Some(bytes), Some(line_start))
        }
    };
    let text = Arc::new(text);
    let committed = damaged
        .as_deref()
        .map_or(text.as_bytes(), |bytes| &bytes[..committed_len]);
    let Some((header_line, body)) = text.split_once('\n') else {
        return Err(corrupt(1, "header line is not valid UTF-8"));
    };
    let header = SessionHeader::parse_line(path, header_line.as_bytes())?;

    let parallel = if bad_utf8_at.is_none() {
        parse_parallel(&text, body, want_starts)
    } else {
        None
    };
    let mut valid_len = committed_len;
    let ((events, starts), mut bad) = match parallel {
        Some(parsed) => (parsed, None),
        None => parse_sequential(path, &text, header_line.len() + 1, body, want_starts)?,
    };
    if bad.is_none()
        && let Some(at) = bad_utf8_at
    {
        bad = Some((at, "invalid UTF-8".to_owned()));
    }
    if let Some((at, reason)) = bad {
        // Damage at or before the last committed turn/end is corruption; after it, the
        // records were never acknowledged as durable and are dropped like a torn tail.
        if contains(&committed[at..], br#"{"type":"turn/end""#) {
            let line = committed[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            return Err(corrupt(line, &reason));
        }
        tracing::warn!(path = %path.display(), %reason, "dropping unreadable records after the last turn/end");
        valid_len = at;
    }
    Ok(ParsedLog {
        header,
        events,
        starts,
        valid_len: valid_len as u64,
        file_len,
    })
}

/// Parsed events with their line starts (empty unless asked for).
type Rows = (Vec<Arc<Event>>, LineIndex);

/// Events plus, when parsing stopped early, the byte offset of the bad record and why.
type Parsed = (Rows, Option<(usize, String)>);

/// Parses the body line by line; stops at the first unreadable or out-of-sequence record.
fn parse_sequential(
    path: &Path,
    buf: &Arc<String>,
    body_start: usize,
    body: &str,
    want_starts: bool,
) -> Result<Parsed, SessionError> {
    let mut events: Vec<Arc<Event>> = Vec::with_capacity(body.len() / 160);
    let mut starts = want_starts.then(|| LineIndex::with_capacity(lines_in(body)));
    let mut offset = body_start;
    for (index, line) in body.split_terminator('\n').enumerate() {
        let line_no = index + 2;
        let line_start = offset;
        offset += line.len() + 1;
        if line.is_empty() {
            continue;
        }
        match parse_row(buf, line, &mut events, &mut Some(0), starts.as_mut()) {
            Ok(()) => {}
            Err(RowError::Bad(reason)) => {
                return Ok((
                    (events, starts.unwrap_or_default()),
                    Some((line_start, format!("line {line_no}: {reason}"))),
                ));
            }
            Err(RowError::Lossy) => {
                return Err(SessionError::Corrupt {
                    path: path.to_owned(),
                    line: line_no,
                    reason: "event data is not lossless JSON".into(),
                });
            }
        }
    }
    Ok(((events, starts.unwrap_or_default()), None))
}

/// Below this body size one thread is faster than splitting the work.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// The fast path for large, healthy logs: parses line-aligned slices of the body on separate
/// threads. Any anomaly returns `None`, and the sequential pass then reports it precisely.
fn parse_parallel(buf: &Arc<String>, body: &str, want_starts: bool) -> Option<Rows> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4);
    if body.len() < PARALLEL_MIN_BYTES || threads < 2 {
        return None;
    }
    let bytes = body.as_bytes();
    let mut cuts = vec![0];
    for i in 1..threads {
        let target = (body.len() * i / threads).max(*cuts.last()?);
        let newline = bytes[target..].iter().position(|&b| b == b'\n')?;
        cuts.push(target + newline + 1);
    }
    cuts.push(body.len());
    type Part = (u64, Vec<Arc<Event>>, Option<LineIndex>);
    let parts: Vec<Option<Part>> = std::thread::scope(|scope| {
        let handles: Vec<_> = cuts
            .windows(2)
            .map(|w| {
                let slice = &body[w[0]..w[1]];
                scope.spawn(move || {
                    let mut events = Vec::with_capacity(slice.len() / 160);
                    let mut starts = want_starts.then(|| LineIndex::with_capacity(lines_in(slice)));
                    let mut base = None;
                    for line in slice.split_terminator('\n').filter(|l| !l.is_empty()) {
                        parse_row(buf, line, &mut events, &mut base, starts.as_mut()).ok()?;
                    }
                    Some((base.unwrap_or(0), events, starts))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    let total: usize = parts.iter().flatten().map(|(_, e, _)| e.len()).sum();
    let mut events: Vec<Arc<Event>> = Vec::new();
    let mut all_starts: Option<LineIndex> = None;
    for (base, part, starts) in parts
        .into_iter()
        .map(|p| p.ok_or(()))
        .collect::<Result<Vec<_>, ()>>()
        .ok()?
    {
        if !part.is_empty() && base != events.len() as u64 {
            return None;
        }
        if events.is_empty() {
            // The first part's vector grows in place (a large block is remapped, not copied),
            // so the event list is never held twice.
            events = part;
            events.reserve_exact(total - events.len());
        } else {
            events.extend(part);
        }
        // Like the events, the first part's index grows in place.
        match (&mut all_starts, starts) {
            (Some(all), Some(part)) => all.append(part),
            (all @ None, mut part) => {
                if let Some(part) = part.as_mut() {
                    part.reserve_exact(total - events.len());
                }
                *all = part;
            }
            (Some(_), None) => {}
        }
    }
    Some((events, all_starts.unwrap_or_default()))
}

/// The events `from..to` out of `bytes`, whole rows read back from a live log's file (where
/// the writer put them; rows before `from` or after `to` may come along and are dropped).
/// Anything else than exactly those events is an error: the file changed under the log.
pub(crate) fn parse_read_back(
    path: &Path,
    bytes: Vec<u8>,
    from: u64,
    to: u64,
) -> Result<Vec<Arc<Event>>, SessionError> {
    let unreadable = |reason: String| SessionError::ReadBack {
        path: path.to_owned(),
        seq: from,
        reason,
    };
    let buf = Arc::new(String::from_utf8(bytes).map_err(|_| unreadable("invalid UTF-8".into()))?);
    let mut events = Vec::with_capacity(usize::try_from(to - from).unwrap_or(0));
    let mut base = None;
    for line in buf.split_terminator('\n').filter(|l| !l.is_empty()) {
        parse_row(&buf, line, &mut events, &mut base, None).map_err(|e| {
            unreadable(match e {
                RowError::Bad(reason) => reason,
                RowError::Lossy => "event data is not lossless JSON".into(),
            })
        })?;
    }
    events.retain(|e| (from..to).contains(&e.seq));
    let whole = events.first().map(|e| e.seq) == Some(from) && events.len() as u64 == to - from;
    if !whole {
        return Err(unreadable(format!(
            "the file no longer holds events {from}..{to} where they were written"
        )));
    }
    Ok(events)
}

/// The number of lines in `text` (one event each, unless packed rows expand).
fn lines_in(text: &str) -> usize {
    text.bytes().filter(|&b| b == b'\n').count()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    String::from_utf8_lossy(haystack).contains(std::str::from_utf8(needle).unwrap_or_default())
}

enum RowError {
    /// Unparsable or out-of-sequence: handled by the torn-tail/corruption rule.
    Bad(String),
    Lossy,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRow<'a> {
    // Borrowed from the line unless it has escapes: the event keeps an interned `Kind`.
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    time: Option<u64>,
    #[serde(default)]
    seq0: Option<u64>,
    #[serde(default)]
    time0: Option<u64>,
    #[serde(default, borrow)]
    data: Option<&'a RawValue>,
    #[serde(default)]
    ignorable: bool,
    #[serde(default)]
    source_event_seqs: Option<Vec<u64>>,
    #[serde(default)]
    surface_op: Option<SurfaceOp>,
}

/// Parses one stored row (a line of `buf`) onto `events`. `base` is the seq of `events[0]`;
/// `None` lets the first row define it (a slice parsed on its own thread). With `starts`, the
/// line's offset in `buf` is pushed there once per event the row holds. A type this crate does
/// not know is kept as it is (an opaque event): the kinds beyond the core vocabulary belong to
/// plugins, and whether a stored log may be resumed with them is the host's check
/// (`EventVocabulary`), so reading a log never depends on which plugins are built.
fn parse_row(
    buf: &Arc<String>,
    line: &str,
    events: &mut Vec<Arc<Event>>,
    base: &mut Option<u64>,
    starts: Option<&mut LineIndex>,
) -> Result<(), RowError> {
    let before = events.len();
    parse_row_events(buf, line, events, base)?;
    if let Some(starts) = starts {
        let at = (line.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize) as u64;
        for _ in before..events.len() {
            starts.push(at);
        }
    }
    Ok(())
}

fn parse_row_events(
    buf: &Arc<String>,
    line: &str,
    events: &mut Vec<Arc<Event>>,
    base: &mut Option<u64>,
) -> Result<(), RowError> {
    let row: RawRow = serde_json::from_str(line).map_err(|e| RowError::Bad(e.to_string()))?;
    let Some(raw) = row.data else {
        return Err(RowError::Bad("record has no data".into()));
    };
    if let (Some(seq0), Some(time0)) = (row.seq0, row.time0)
        && matches!(
            &*row.kind,
            "text-chunks" | "reasoning-chunks" | "tool-call-chunks"
        )
    {
        let expected = *base.get_or_insert(seq0) + events.len() as u64;
        let data: Value =
            serde_json::from_str(raw.get()).map_err(|e| RowError::Bad(e.to_string()))?;
        return expand_packed(&row.kind, seq0, expected, time0, data, events);
    }
    let (Some(seq), Some(time)) = (row.seq, row.time) else {
        return Err(RowError::Bad("record has no seq/time".into()));
    };
    let expected = *base.get_or_insert(seq) + events.len() as u64;
    if seq != expected {
        return Err(RowError::Bad(format!(
            "seq {seq} where {expected} was expected"
        )));
    }
    let text = raw.get();
    match check_text(text) {
        Ok(()) => {}
        Err(TextError::Invalid(reason)) => return Err(RowError::Bad(reason)),
        Err(TextError::Lossy) => return Err(RowError::Lossy),
    }
    // `text` borrows from `line`, a slice of `buf`: its offset there is the pointer distance.
    let start = (text.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize);
    let data = match Payload::stored(buf, start, text.len()) {
        Some(data) => data,
        // A span past the compact form's 4 GiB reach keeps its tree instead.
        None => Payload::from(
            serde_json::from_str::<Value>(text).map_err(|e| RowError::Bad(e.to_string()))?,
        ),
    };
    events.push(Arc::new(
        Event::new(&*row.kind, seq, time, data)
            .with_ignorable(row.ignorable)
            .with_surface(row.surface_op, row.source_event_seqs),
    ));
    Ok(())
}

/// Expands a packed chunk row into its `assistant/chunk` members (§5.2):
/// member k has `seq = seq0 + k` and `time = time0 + sum(dt[..k])`.
fn expand_packed(
    row_kind: &str,
    seq0: u64,
    expected: u64,
    time0: u64,
    data: Value,
    events: &mut Vec<Arc<Event>>,
) -> Result<(), RowError> {
    #[derive(Deserialize)]
    struct Packed {
        turn: Value,
        step: Value,
        index: Value,
        dt: Vec<i64>,
        #[serde(default)]
        texts: Option<Vec<String>>,
        #[serde(default)]
        id: Option<Value>,
        #[serde(default)]
        name: Option<Value>,
        #[serde(default)]
        args: Option<Vec<String>>,
    }
    let bad = |reason: &str| RowError::Bad(format!("{row_kind}: {reason}"));
    let packed: Packed = serde_json::from_value(data).map_err(|e| bad(&e.to_string()))?;
    if seq0 != expected {
        return Err(bad(&format!("seq0 {seq0} where {expected} was expected")));
    }
    let (members, chunk_type) = match row_kind {
        "tool-call-chunks" => (
            packed.args.ok_or_else(|| bad("missing args"))?,
            "tool-call-delta",
        ),
        "reasoning-chunks" => (
            packed.texts.ok_or_else(|| bad("missing texts"))?,
            "reasoning-delta",
        ),
        _ => (
            packed.texts.ok_or_else(|| bad("missing texts"))?,
            "text-delta",
        ),
    };
    if packed.dt.len() + 1 != members.len() {
        return Err(bad("dt must have one entry fewer than the members"));
    }
    let mut time = time0 as i64;
    for (k, member) in members.into_iter().enumerate() {
        if k > 0 {
            time += packed.dt[k - 1];
        }
        let mut chunk = Map::new();
        chunk.insert("type".into(), chunk_type.into());
        chunk.insert("index".into(), packed.index.clone());
        if chunk_type == "tool-call-delta" {
            chunk.insert("id".into(), packed.id.clone().unwrap_or_default());
            if let Some(name) = &packed.name {
                chunk.insert("name".into(), name.clone());
            }
            chunk.insert("argumentsDelta".into(), member.into());
        } else {
            chunk.insert("text".into(), member.into());
        }
        let mut data = Map::new();
        data.insert("turn".into(), packed.turn.clone());
        data.insert("step".into(), packed.step.clone());
        data.insert("chunk".into(), Value::Object(chunk));
        events.push(Arc::new(Event::new(
            kind::ASSISTANT_CHUNK,
            seq0 + k as u64,
            u64::try_from(time).map_err(|_| bad("member time is negative"))?,
            Value::Object(data),
        )));
    }
    Ok(())
}
