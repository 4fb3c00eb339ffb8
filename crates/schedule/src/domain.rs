//! Reminder rules: selector parsing with the exact error values, records and views, and the
//! log fold (`schedule/change` events after the last seed boundary).

use std::sync::Arc;

use dsh_session::Event;
use dsh_session::LogFold;
use dsh_session::SessionLog;
use jiff::Timestamp;
use jiff::civil;
use jiff::tz::TimeZone;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;

/// An error value (`{code, message}`), returned as a success result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    pub code: &'static str,
    pub message: &'static str,
}

impl RuleError {
    const fn new(code: &'static str, message: &'static str) -> Self {
        Self { code, message }
    }

    pub fn to_value(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

pub const INVALID_SELECTOR: RuleError = RuleError::new(
    "invalid_selector",
    "schedule_create accepts exactly one of after_seconds, at, or every_seconds.",
);
pub const INVALID_PROMPT: RuleError =
    RuleError::new("invalid_prompt", "prompt must be non-empty after trimming.");
pub const INTERNAL: RuleError = RuleError::new("internal_error", "The schedule operation failed.");
pub const CORRUPT: RuleError = RuleError::new(
    "corrupt_schedule_log",
    "The session schedule log is corrupt.",
);
const NOT_FUTURE: RuleError = RuleError::new(
    "not_future",
    "The scheduled time must be strictly in the future.",
);
const OUT_OF_RANGE: RuleError = RuleError::new(
    "time_out_of_range",
    "The scheduled time must be representable as a four-digit-year RFC 3339 UTC instant.",
);
const FREQUENCY: RuleError =
    RuleError::new("frequency_too_high", "every_seconds must be at least 300.");

fn rule(message: &'static str) -> RuleError {
    RuleError::new("invalid_rule", message)
}

const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// What a record repeats on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    After,
    At,
    Every,
}

/// One reminder as logged: camelCase, optional fields omitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub id: String,
    pub kind: Kind,
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_seconds: Option<u64>,
    /// The next target, RFC 3339 UTC with milliseconds.
    pub scheduled_at: String,
    /// Creation instant (epoch ms): fixed-rate targets stay aligned to it.
    pub created_at_ms: i64,
}

/// RFC 3339 UTC with milliseconds, `Z`.
pub fn rfc3339(ms: i64) -> String {
    match Timestamp::from_millisecond(ms) {
        Ok(ts) => ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        Err(_) => String::new(),
    }
}

pub fn parse_rfc3339(text: &str) -> Option<i64> {
    text.parse::<Timestamp>()
        .ok()
        .map(Timestamp::as_millisecond)
}

impl Record {
    pub fn scheduled_ms(&self) -> i64 {
        parse_rfc3339(&self.scheduled_at).unwrap_or(i64::MAX)
    }

    /// The model's view: the record's fields, then `state`, then `deliveryMode`.
    pub fn view(&self, now_ms: i64) -> Value {
        let mut value = json!({"id": self.id, "kind": self.kind, "prompt": self.prompt});
        if let Some(after) = self.after_seconds {
            value["afterSeconds"] = json!(after);
        }
        if let Some(every) = self.every_seconds {
            value["everySeconds"] = json!(every);
        }
        value["scheduledAt"] = json!(self.scheduled_at);
        let state = if self.scheduled_ms() > now_ms {
            "scheduled"
        } else {
            "overdue"
        };
        value["state"] = json!(state);
        value["deliveryMode"] = json!("session-local");
        value
    }

    /// For a fixed-rate rule: the first creation-aligned target strictly after `now`.
    pub fn next_after(&self, now_ms: i64) -> i64 {
        let every = i64::try_from(self.every_seconds.unwrap_or(300)).unwrap_or(300) * 1000;
        let elapsed = now_ms - self.created_at_ms;
        let steps = elapsed.div_euclid(every) + 1;
        self.created_at_ms + steps.max(1) * every
    }
}

fn positive_integer(value: &Value) -> Option<u64> {
    let n = value.as_f64()?;
    (n.fract() == 0.0 && (1.0..=MAX_SAFE).contains(&n)).then(|| {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let n = n as u64;
        n
    })
}

fn digits(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
}

/// `YYYY-MM-DDTHH:mm:ss[.S|.SS|.SSS](Z|±HH:MM)` → epoch ms.
fn parse_at_string(text: &str) -> Result<i64, RuleError> {
    let strict = rule(
        "at must use YYYY-MM-DDTHH:mm:ss with optional 1-3 digit fractional seconds and an explicit Z or numeric offset.",
    );
    if text.len() < 20 {
        return Err(strict);
    }
    let (date, rest) = text.split_at(10);
    let date_ok = digits(&date[0..4], 4)
        && &date[4..5] == "-"
        && digits(&date[5..7], 2)
        && &date[7..8] == "-"
        && digits(&date[8..10], 2);
    if !date_ok || !rest.starts_with('T') {
        return Err(strict);
    }
    let rest = &rest[1..];
    if rest.len() < 9
        || !digits(&rest[0..2], 2)
        || &rest[2..3] != ":"
        || !digits(&rest[3..5], 2)
        || &rest[5..6] != ":"
        || !digits(&rest[6..8], 2)
    {
        return Err(strict);
    }
    let mut tail = &rest[8..];
    let mut millis = 0i64;
    if let Some(fraction) = tail.strip_prefix('.') {
        let count = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if !(1..=3).contains(&count) {
            return Err(strict);
        }
        let padded = format!("{:0<3}", &fraction[..count]);
        millis = padded.parse().unwrap_or(0);
        tail = &fraction[count..];
    }
    let offset_minutes: i64 = match tail {
        "Z" => 0,
        _ if tail.len() == 6
            && (tail.starts_with('+') || tail.starts_with('-'))
            && digits(&tail[1..3], 2)
            && &tail[3..4] == ":"
            && digits(&tail[4..6], 2) =>
        {
            let hours: i64 = tail[1..3].parse().unwrap_or(99);
            let minutes: i64 = tail[4..6].parse().unwrap_or(99);
            if tail == "-00:00" || hours > 23 || minutes > 59 {
                return Err(rule("The at numeric offset is invalid."));
            }
            let total = hours * 60 + minutes;
            if tail.starts_with('-') { -total } else { total }
        }
        _ => return Err(strict),
    };
    let field = |s: &str| s.parse::<i16>().unwrap_or(-1);
    let real = rule("The at value must be a real ISO calendar date and time.");
    let year = field(&date[0..4]);
    let month = i8::try_from(field(&date[5..7])).map_err(|_| real.clone())?;
    let day = i8::try_from(field(&date[8..10])).map_err(|_| real.clone())?;
    let hour = i8::try_from(field(&rest[0..2])).map_err(|_| real.clone())?;
    let minute = i8::try_from(field(&rest[3..5])).map_err(|_| real.clone())?;
    let second = i8::try_from(field(&rest[6..8])).map_err(|_| real.clone())?;
    let civil =
        civil::DateTime::new(year, month, day, hour, minute, second, 0).map_err(|_| real)?;
    let utc = civil
        .to_zoned(TimeZone::UTC)
        .map_err(|_| OUT_OF_RANGE)?
        .timestamp()
        .as_millisecond();
    Ok(utc + millis - offset_minutes * 60_000)
}

fn parse_local(object: &serde_json::Map<String, Value>) -> Result<i64, RuleError> {
    let exact = rule("Local at must contain exactly date, time, and time_zone.");
    if object.len() != 3
        || !["date", "time", "time_zone"]
            .iter()
            .all(|k| object.contains_key(*k))
    {
        return Err(exact);
    }
    let format = rule(
        "Local at requires date YYYY-MM-DD and time HH:mm:ss with optional one-to-three digit milliseconds.",
    );
    let (Some(date), Some(time), Some(zone)) = (
        object["date"].as_str(),
        object["time"].as_str(),
        object["time_zone"].as_str(),
    ) else {
        return Err(format);
    };
    let date_ok = date.len() == 10
        && digits(&date[0..4], 4)
        && &date[4..5] == "-"
        && digits(&date[5..7], 2)
        && &date[7..8] == "-"
        && digits(&date[8..10], 2);
    let time_ok = time.len() >= 8
        && digits(&time[0..2], 2)
        && &time[2..3] == ":"
        && digits(&time[3..5], 2)
        && &time[5..6] == ":"
        && digits(&time[6..8], 2)
        && (time.len() == 8
            || (time[8..].starts_with('.')
                && (2..=4).contains(&(time.len() - 8))
                && time[9..].bytes().all(|b| b.is_ascii_digit())));
    if !date_ok || !time_ok {
        return Err(format);
    }
    let tz = if zone == "UTC" {
        TimeZone::UTC
    } else if zone.contains('/') && !zone.starts_with('/') && !zone.contains("..") {
        TimeZone::get(zone).map_err(|_| {
            RuleError::new(
                "invalid_time_zone",
                "time_zone must be UTC or a valid IANA Area/Location name.",
            )
        })?
    } else {
        return Err(RuleError::new(
            "invalid_time_zone",
            "time_zone must be UTC or a valid IANA Area/Location name.",
        ));
    };
    let real = rule("The local at value must be a real ISO calendar date and time.");
    let field = |s: &str| s.parse::<i16>().unwrap_or(-1);
    let millis: i64 = if time.len() > 8 {
        format!("{:0<3}", &time[9..]).parse().unwrap_or(0)
    } else {
        0
    };
    let civil = civil::DateTime::new(
        field(&date[0..4]),
        i8::try_from(field(&date[5..7])).map_err(|_| real.clone())?,
        i8::try_from(field(&date[8..10])).map_err(|_| real.clone())?,
        i8::try_from(field(&time[0..2])).map_err(|_| real.clone())?,
        i8::try_from(field(&time[3..5])).map_err(|_| real.clone())?,
        i8::try_from(field(&time[6..8])).map_err(|_| real.clone())?,
        0,
    )
    .map_err(|_| real)?;
    // Gaps are refused; in an overlap the earlier instant wins.
    let ambiguous = tz.to_ambiguous_zoned(civil);
    if matches!(ambiguous.offset(), jiff::tz::AmbiguousOffset::Gap { .. }) {
        return Err(rule(
            "The local at time does not exist in the selected time zone.",
        ));
    }
    let zoned = ambiguous.earlier().map_err(|_| OUT_OF_RANGE)?;
    Ok(zoned.timestamp().as_millisecond() + millis)
}

/// What a valid create asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRule {
    pub kind: Kind,
    pub prompt: String,
    pub after_seconds: Option<u64>,
    pub every_seconds: Option<u64>,
    pub first_ms: i64,
}

const LATEST_MS: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z

/// Checks `schedule_create` arguments in upstream's order.
pub fn parse_create(args: &Value, now_ms: i64) -> Result<NewRule, RuleError> {
    let Some(object) = args.as_object() else {
        return Err(INVALID_SELECTOR);
    };
    let allowed = ["prompt", "after_seconds", "at", "every_seconds"];
    if object.keys().any(|k| !allowed.contains(&k.as_str())) {
        return Err(INVALID_SELECTOR);
    }
    let selectors: Vec<&str> = ["after_seconds", "at", "every_seconds"]
        .into_iter()
        .filter(|k| object.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if selectors.len() != 1 {
        return Err(INVALID_SELECTOR);
    }
    let prompt = object
        .get("prompt")
        .and_then(Value::as_str)
        .filter(|p| !p.trim().is_empty())
        .ok_or(INVALID_PROMPT)?
        .to_owned();
    let (kind, after, every, first) = match selectors[0] {
        "after_seconds" => {
            let after = positive_integer(&object["after_seconds"])
                .ok_or_else(|| rule("after_seconds must be a positive safe integer."))?;
            let delta = i64::try_from(after)
                .unwrap_or(i64::MAX)
                .saturating_mul(1000);
            (Kind::After, Some(after), None, now_ms.saturating_add(delta))
        }
        "every_seconds" => {
            let value = &object["every_seconds"];
            let every = value
                .as_f64()
                .filter(|n| n.fract() == 0.0 && n.abs() <= MAX_SAFE)
                .ok_or_else(|| rule("every_seconds must be a safe integer."))?;
            if every < 300.0 {
                return Err(FREQUENCY);
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let every = every as u64;
            let delta = i64::try_from(every)
                .unwrap_or(i64::MAX)
                .saturating_mul(1000);
            (Kind::Every, None, Some(every), now_ms.saturating_add(delta))
        }
        _ => {
            let at = match &object["at"] {
                Value::String(text) => parse_at_string(text)?,
                Value::Object(map) => parse_local(map)?,
                _ => {
                    return Err(rule(
                        "at must be an explicit-offset string or local calendar object.",
                    ));
                }
            };
            (Kind::At, None, None, at)
        }
    };
    if first > LATEST_MS {
        return Err(OUT_OF_RANGE);
    }
    if first <= now_ms {
        return Err(NOT_FUTURE);
    }
    Ok(NewRule {
        kind,
        prompt,
        after_seconds: after,
        every_seconds: every,
        first_ms: first,
    })
}

/// `schedule/change` payloads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "operation", rename_all = "lowercase")]
pub enum Change {
    Create {
        version: u64,
        schedule: Record,
    },
    Delete {
        version: u64,
        id: String,
    },
    /// A delivery: a one-shot ends; a fixed-rate rule moves to `next` (absent for one-shots).
    Dispatch {
        version: u64,
        id: String,
        #[serde(rename = "occurrenceAt")]
        occurrence_at: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        next: Option<String>,
    },
}

/// The session's reminders, folded from its log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    pub active: Vec<Record>,
    /// Every id ever created here (never reused).
    pub seen: Vec<String>,
}

impl State {
    /// Folds the `schedule/change` events after the last `session/end-seed` (a fork starts
    /// without its parent's reminders).
    pub fn fold(events: &[Arc<Event>]) -> Result<Self, RuleError> {
        let start = events
            .iter()
            .rposition(|e| e.kind == "session/end-seed")
            .map_or(0, |i| i + 1);
        let mut state = Self::default();
        for event in &events[start..] {
            if event.kind != "schedule/change" {
                continue;
            }
            let change: Change = event.data.decode().map_err(|_| CORRUPT)?;
            state.apply(change);
        }
        Ok(state)
    }

    fn apply(&mut self, change: Change) {
        match change {
            Change::Create { schedule, .. } => {
                self.seen.push(schedule.id.clone());
                self.active.push(schedule);
            }
            Change::Delete { id, .. } => self.active.retain(|r| r.id != id),
            Change::Dispatch { id, next, .. } => match next {
                Some(next) => {
                    if let Some(record) = self.active.iter_mut().find(|r| r.id == id) {
                        record.scheduled_at = next;
                    }
                }
                None => self.active.retain(|r| r.id != id),
            },
        }
    }

    /// `schedule-<n>`: n = ids ever seen + 1, skipping used ones.
    pub fn next_id(&self) -> String {
        let mut n = self.seen.len() + 1;
        loop {
            let id = format!("schedule-{n}");
            if !self.seen.contains(&id) {
                return id;
            }
            n += 1;
        }
    }
}

/// [`State::fold`] of one log kept across calls: the events before `next_seq` are folded, so
/// a read costs only what the log appended since the last one.
#[derive(Debug, Clone, Default)]
pub(crate) struct StateFold {
    next_seq: u64,
    state: State,
    /// A `schedule/change` since the last seed boundary did not decode.
    corrupt: bool,
}

impl StateFold {
    /// `State::fold(&log.events())`, folding only what `log` appended since the last call. A
    /// log shorter than what was folded is another log: the fold starts over.
    pub(crate) fn catch_up(&mut self, log: &SessionLog) -> Result<State, RuleError> {
        log.catch_up(self).map_err(|error| {
            // The operation fails as any internal failure does; the fold keeps what it folded.
            tracing::warn!(%error, "schedule: cannot read the session log");
            INTERNAL
        })?;
        if self.corrupt {
            Err(CORRUPT)
        } else {
            Ok(self.state.clone())
        }
    }
}

impl LogFold for StateFold {
    fn next_seq(&mut self) -> &mut u64 {
        &mut self.next_seq
    }

    fn apply(&mut self, event: &Event) {
        match event.kind.as_str() {
            "session/end-seed" => {
                self.state = State::default();
                self.corrupt = false;
            }
            "schedule/change" if !self.corrupt => match event.data.decode::<Change>() {
                Ok(change) => self.state.apply(change),
                Err(_) => self.corrupt = true,
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::SessionHeader;

    const NOW: i64 = 1_893_456_000_000; // 2030-01-01T00:00:00Z

    fn err(args: Value) -> (&'static str, &'static str) {
        let e = parse_create(&args, NOW).unwrap_err();
        (e.code, e.message)
    }

    #[test]
    fn selectors_and_rules() {
        assert_eq!(
            err(json!({"prompt": "x", "after_seconds": 60, "at": "2031-01-01T00:00:00Z"})).0,
            "invalid_selector"
        );
        assert_eq!(
            err(json!({"prompt": "x", "after_seconds": 60, "extra": 1})).0,
            "invalid_selector"
        );
        assert_eq!(
            err(json!({"prompt": " ", "after_seconds": 60})),
            ("invalid_prompt", "prompt must be non-empty after trimming.")
        );
        assert_eq!(
            err(json!({"prompt": "x", "every_seconds": 299})),
            ("frequency_too_high", "every_seconds must be at least 300.")
        );
        assert_eq!(
            err(json!({"prompt": "x", "after_seconds": 1.5})).1,
            "after_seconds must be a positive safe integer."
        );
        assert_eq!(
            err(json!({"prompt": "x", "at": "2030-01-01T00:00:00"})).1,
            "at must use YYYY-MM-DDTHH:mm:ss with optional 1-3 digit fractional seconds and an explicit Z or numeric offset."
        );
        assert_eq!(
            err(json!({"prompt": "x", "at": "2031-01-01T00:00:00-00:00"})).1,
            "The at numeric offset is invalid."
        );
        assert_eq!(
            err(json!({"prompt": "x", "at": "2031-02-30T00:00:00Z"})).1,
            "The at value must be a real ISO calendar date and time."
        );
        assert_eq!(
            err(json!({"prompt": "x", "at": "2020-01-01T00:00:00Z"})).0,
            "not_future"
        );
        assert_eq!(
            err(json!({"prompt": "x", "at": 5})).1,
            "at must be an explicit-offset string or local calendar object."
        );
        assert_eq!(
            err(json!({"prompt": "x", "at": {"date": "2031-01-01", "time": "00:00:00"}})).1,
            "Local at must contain exactly date, time, and time_zone."
        );
        assert_eq!(err(json!({"prompt": "x", "at": {"date": "2031-01-01", "time": "00:00:00", "time_zone": "Mars/Base"}})).0, "invalid_time_zone");
        assert_eq!(err(json!({"prompt": "x", "at": {"date": "2031-03-09", "time": "02:30:00", "time_zone": "America/New_York"}})).1, "The local at time does not exist in the selected time zone.");
        let ok = parse_create(
            &json!({"prompt": "x", "at": "2031-01-01T01:00:00.5+01:00"}),
            NOW,
        )
        .unwrap();
        assert_eq!(rfc3339(ok.first_ms), "2031-01-01T00:00:00.500Z");
        let local = parse_create(&json!({"prompt": "x", "at": {"date": "2031-11-02", "time": "01:30:00", "time_zone": "America/New_York"}}), NOW).unwrap();
        // In the overlap the earlier (daylight) instant wins: 05:30Z.
        assert_eq!(rfc3339(local.first_ms), "2031-11-02T05:30:00.000Z");
    }

    #[test]
    fn fixed_rate_targets_stay_aligned() {
        let record = Record {
            id: "schedule-1".into(),
            kind: Kind::Every,
            prompt: "p".into(),
            after_seconds: None,
            every_seconds: Some(300),
            scheduled_at: rfc3339(NOW + 300_000),
            created_at_ms: NOW,
        };
        assert_eq!(record.next_after(NOW + 301_000), NOW + 600_000);
        assert_eq!(record.next_after(NOW + 1_000_000), NOW + 1_200_000);
        let view = record.view(NOW);
        assert_eq!(
            view.to_string(),
            format!(
                "{{\"id\":\"schedule-1\",\"kind\":\"every\",\"prompt\":\"p\",\"everySeconds\":300,\"scheduledAt\":\"{}\",\"state\":\"scheduled\",\"deliveryMode\":\"session-local\"}}",
                rfc3339(NOW + 300_000)
            )
        );
    }

    fn record(n: u64, kind: Kind) -> Record {
        Record {
            id: format!("schedule-{n}"),
            kind,
            prompt: format!("p{n}"),
            after_seconds: (kind == Kind::After).then_some(60),
            every_seconds: (kind == Kind::Every).then_some(300),
            scheduled_at: rfc3339(NOW + 60_000),
            created_at_ms: NOW,
        }
    }

    fn append(log: &SessionLog, change: &Change) {
        let data = serde_json::to_value(change).unwrap();
        log.append("schedule/change", data, None).unwrap();
    }

    fn create(log: &SessionLog, n: u64, kind: Kind) {
        append(
            log,
            &Change::Create {
                version: 1,
                schedule: record(n, kind),
            },
        );
    }

    fn delete(log: &SessionLog, n: u64) {
        append(
            log,
            &Change::Delete {
                version: 1,
                id: format!("schedule-{n}"),
            },
        );
    }

    fn dispatch(log: &SessionLog, n: u64, next: Option<i64>) {
        append(
            log,
            &Change::Dispatch {
                version: 1,
                id: format!("schedule-{n}"),
                occurrence_at: rfc3339(NOW + 60_000),
                next: next.map(rfc3339),
            },
        );
    }

    fn corrupt(log: &SessionLog) {
        log.append("schedule/change", json!({"operation": "explode"}), None)
            .unwrap();
    }

    /// Appends one step of a session's reminder history (and other events).
    fn step(log: &SessionLog, i: u64) {
        match i % 7 {
            0 => create(log, i, Kind::After),
            1 => create(log, i, Kind::Every),
            2 => dispatch(log, i - 1, Some(NOW + 600_000 + i as i64)),
            3 => delete(log, i - 3),
            4 => dispatch(log, i.saturating_sub(5), None),
            5 => log
                .append("turn/start", json!({"turn": i}), None)
                .map(drop)
                .unwrap(),
            _ => create(log, i, Kind::At),
        }
    }

    #[test]
    fn the_incremental_fold_is_the_whole_log_fold() {
        for every in [1, 4] {
            let log = SessionLog::in_memory(SessionHeader::new("s", None));
            let mut fold = StateFold::default();
            for i in 0..40 {
                step(&log, i);
                if i % every == 0 {
                    assert_eq!(
                        fold.catch_up(&log),
                        State::fold(&log.events().unwrap()),
                        "step {i}"
                    );
                }
            }
            let last = fold.catch_up(&log).unwrap();
            assert_eq!(Ok(last.clone()), State::fold(&log.events().unwrap()));
            assert!(!last.active.is_empty());
            let creates = (0..40).filter(|i| matches!(i % 7, 0 | 1 | 6)).count();
            assert_eq!(last.seen.len(), creates);
            // A corrupt change stays an error however the log grows.
            corrupt(&log);
            create(&log, 100, Kind::At);
            assert_eq!(fold.catch_up(&log), Err(CORRUPT));
            create(&log, 101, Kind::At);
            assert_eq!(fold.catch_up(&log), State::fold(&log.events().unwrap()));
        }
    }

    #[test]
    fn a_seed_boundary_starts_the_fold_over() {
        // A fork: the parent's history (even a corrupt one) is seed, and does not count.
        let parent = SessionLog::in_memory(SessionHeader::new("parent", None));
        for i in 0..10 {
            step(&parent, i);
        }
        corrupt(&parent);
        let seed: Vec<Event> = parent
            .events()
            .unwrap()
            .iter()
            .map(|e| (**e).clone())
            .collect();
        let child = SessionLog::from_seed(SessionHeader::new("child", None), seed).unwrap();
        let mut fold = StateFold::default();
        assert_eq!(fold.catch_up(&child), Ok(State::default()));
        create(&child, 1, Kind::After);
        let state = fold.catch_up(&child).unwrap();
        assert_eq!(Ok(state.clone()), State::fold(&child.events().unwrap()));
        assert_eq!(state.seen, vec!["schedule-1".to_owned()]);
    }

    #[test]
    fn a_shorter_log_starts_the_fold_over() {
        let long = SessionLog::in_memory(SessionHeader::new("s", None));
        for i in 0..20 {
            step(&long, i);
        }
        let mut fold = StateFold::default();
        assert!(!fold.catch_up(&long).unwrap().seen.is_empty());
        let short = SessionLog::in_memory(SessionHeader::new("s", None));
        create(&short, 7, Kind::At);
        let state = fold.catch_up(&short).unwrap();
        assert_eq!(Ok(state.clone()), State::fold(&short.events().unwrap()));
        assert_eq!(state.seen, vec!["schedule-7".to_owned()]);
    }
}
