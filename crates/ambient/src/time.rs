//! Time context (§5): one durable reading per step, appended at the end of the entered batch,
//! so the model knows "now" and how long it has been since it last saw the conversation.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PreStepDecision;
use dsh_agent::PreStepInput;
use dsh_kernel::Disposer;
use dsh_kernel::HookError;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_session::Event;
use dsh_session::LogFold;
use dsh_session::SessionLog;
use dsh_session::kind;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::Value;
use serde_json::json;

/// The `plugin` of time-context messages (and its section name).
pub const TIME_PLUGIN: &str = "time-context";

/// Epoch milliseconds now (injected in tests).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// A load or reading error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TimeContextError(pub String);

/// `timeZone?`, `refreshIntervalMs?`.
#[derive(Debug, Clone)]
pub struct TimeContextConfig {
    pub zone_name: String,
    zone: TimeZone,
    pub refresh_interval_ms: u64,
}

/// Validates an interval value (`<plugin>: refreshIntervalMs must be …`).
pub fn parse_interval(plugin: &str, value: Option<&Value>) -> Result<u64, TimeContextError> {
    match value {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v.as_u64().filter(|n| *n < (1u64 << 53)).ok_or_else(|| {
            TimeContextError(format!(
                "{plugin}: refreshIntervalMs must be a non-negative safe integer, got {v}"
            ))
        }),
    }
}

/// `UTC` or an `Area/Location` name the time-zone database knows.
fn iana(name: &str) -> Option<TimeZone> {
    if name == "UTC" {
        return Some(TimeZone::UTC);
    }
    let shaped = name.contains('/') && !name.starts_with('/') && !name.ends_with('/');
    shaped.then(|| TimeZone::get(name).ok()).flatten()
}

impl TimeContextConfig {
    pub fn parse(value: &Value) -> Result<Self, TimeContextError> {
        let empty = serde_json::Map::new();
        let map = value.as_object().unwrap_or(&empty);
        for key in map.keys() {
            if !matches!(
                key.as_str(),
                "timeZone" | "time_zone" | "refreshIntervalMs" | "refresh_interval_ms"
            ) {
                return Err(TimeContextError(format!(
                    "time-context: unknown key \"{key}\""
                )));
            }
        }
        let interval = parse_interval(
            "time-context",
            map.get("refreshIntervalMs")
                .or_else(|| map.get("refresh_interval_ms")),
        )?;
        let zone = map.get("timeZone").or_else(|| map.get("time_zone"));
        let (zone_name, zone) = match zone {
            Some(Value::String(name)) => {
                let tz = iana(name).ok_or_else(|| {
                    TimeContextError(format!("time-context: invalid IANA timeZone \"{name}\""))
                })?;
                (name.clone(), tz)
            }
            Some(other) => {
                return Err(TimeContextError(format!(
                    "time-context: invalid IANA timeZone \"{other}\""
                )));
            }
            None => {
                let system = TimeZone::system();
                let name = system.iana_name().unwrap_or("UTC").to_owned();
                (name, system)
            }
        };
        Ok(Self {
            zone_name,
            zone,
            refresh_interval_ms: interval,
        })
    }
}

/// `YYYY-MM-DDTHH:MM:SS±HH:MM[<zone>]`.
pub fn format_timestamp(epoch_ms: i64, zone: &TimeZone, name: &str) -> String {
    let at = Timestamp::from_millisecond(epoch_ms).unwrap_or(Timestamp::UNIX_EPOCH);
    let zoned = at.to_zoned(zone.clone());
    format!("{}[{name}]", zoned.strftime("%Y-%m-%dT%H:%M:%S%:z"))
}

/// Compact whole seconds: `1d 2h 3m 4s`, leading zero units omitted, seconds always there.
pub fn format_elapsed(ms: i64) -> String {
    let total = (ms.max(0) / 1000) as u64;
    let (d, h, m, s) = (
        total / 86_400,
        total / 3600 % 24,
        total / 60 % 60,
        total % 60,
    );
    let mut parts = Vec::new();
    let mut started = false;
    for (value, unit) in [(d, "d"), (h, "h"), (m, "m")] {
        if value > 0 || started {
            parts.push(format!("{value}{unit}"));
            started = true;
        }
    }
    parts.push(format!("{s}s"));
    parts.join(" ")
}

/// What the fold remembers of a session.
#[derive(Debug, Default, Clone)]
struct Fold {
    next_seq: u64,
    open_turn: Option<u64>,
    /// Time of the latest `user/message` / `assistant/message` / `tool/result`.
    last_visible: Option<i64>,
    /// `(time, turn)` of the latest time-context message (shadowed ones count).
    last_reading: Option<(i64, Option<u64>)>,
    /// `clientTimeZone`s of the open turn's human messages, in order.
    zones: Vec<String>,
}

fn is_reading(event: &Event, source: Option<&Value>) -> bool {
    let field = |name: &str| source.and_then(|s| s.get(name)).and_then(Value::as_str);
    event.kind == kind::USER_MESSAGE
        && field("kind") == Some("plugin")
        && field("plugin") == Some(TIME_PLUGIN)
}

/// `data.source` of a surface event, decoded on its own: a tree cached on the event (a tool
/// result's is ten times its text) would stay as long as the event does.
fn source_of(event: &Event) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct Sourced {
        source: Option<Value>,
    }
    event.data.decode::<Sourced>().ok()?.source
}

/// `{kind:"user", rpcId, clientTimeZone}` → the zone.
fn client_zone(source: &Value) -> Option<&str> {
    (source.get("kind")?.as_str()? == "user" && source.get("rpcId")?.is_string())
        .then(|| source.get("clientTimeZone")?.as_str())
        .flatten()
}

impl Fold {
    fn catch_up(&mut self, log: &SessionLog) {
        if let Err(error) = log.catch_up(self) {
            // The reading stays where it got to; the next step tries again.
            tracing::warn!(%error, "time context: cannot read the session log");
        }
    }
}

impl LogFold for Fold {
    fn next_seq(&mut self) -> &mut u64 {
        &mut self.next_seq
    }

    fn apply(&mut self, event: &Event) {
        match event.kind.as_str() {
            kind::TURN_START => {
                self.open_turn = event.turn();
                self.zones.clear();
            }
            kind::TURN_END => self.open_turn = None,
            kind::USER_MESSAGE | kind::ASSISTANT_MESSAGE | kind::TOOL_RESULT => {
                let time = i64::try_from(event.time).unwrap_or(i64::MAX);
                let source = source_of(event);
                if is_reading(event, source.as_ref()) {
                    self.last_reading = Some((time, self.open_turn));
                } else {
                    self.last_visible = Some(time);
                }
                if let Some(zone) = source.as_ref().and_then(client_zone) {
                    self.zones.push(zone.to_owned());
                }
            }
            _ => {}
        }
    }
}

/// The capability.
pub struct TimeContext {
    config: TimeContextConfig,
    clock: Clock,
    folds: Mutex<HashMap<String, Fold>>,
}

impl std::fmt::Debug for TimeContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimeContext")
            .field("zone", &self.config.zone_name)
            .field("refresh_interval_ms", &self.config.refresh_interval_ms)
            .finish_non_exhaustive()
    }
}

impl TimeContext {
    pub fn new(config: TimeContextConfig, clock: Option<Clock>) -> Arc<Self> {
        let clock = clock.unwrap_or_else(|| Arc::new(|| Timestamp::now().as_millisecond()));
        Arc::new(Self {
            config,
            clock,
            folds: Mutex::new(HashMap::new()),
        })
    }

    /// Registers the prepended pre-step listener (it appends after the inner chain).
    pub fn install(self: &Arc<Self>, owner: &Scope, hooks: &AgentHooks) -> Disposer {
        let this = self.clone();
        hooks
            .pre_step
            .prepend(owner, move |input: PreStepInput, next| {
                let this = this.clone();
                Box::pin(async move {
                    let (agent, turn, step, signal) = (
                        input.agent.clone(),
                        input.turn,
                        input.step,
                        input.signal.clone(),
                    );
                    let decision = next.run(input).await?;
                    match decision {
                        PreStepDecision::Enter(mut messages) if !signal.is_cancelled() => {
                            if let Some(reading) = this
                                .reading(&agent, turn, step, &messages)
                                .map_err(HookError::other)?
                            {
                                messages.push(reading);
                            }
                            Ok(PreStepDecision::Enter(messages))
                        }
                        other => Ok(other),
                    }
                })
            })
    }

    /// The reading due for this step, if any.
    pub fn reading(
        &self,
        agent: &AgentHandle,
        turn: u64,
        step: u64,
        proposed: &[Message],
    ) -> Result<Option<Message>, TimeContextError> {
        let now = (self.clock)();
        let fold = {
            let mut folds = dsh_sync::lock(&self.folds);
            let fold = folds.entry(agent.id().to_owned()).or_default();
            fold.catch_up(agent.log());
            fold.clone()
        };
        let interval = self.config.refresh_interval_ms as i64;
        if interval > 0
            && let Some((at, _)) = fold.last_reading
            && at <= now
            && now - at < interval
        {
            return Ok(None);
        }
        let mut zones = fold.zones.clone();
        for message in proposed {
            let source = serde_json::to_value(&message.source).unwrap_or(Value::Null);
            if let Some(zone) = client_zone(&source) {
                zones.push(zone.to_owned());
            }
        }
        let mut distinct: Vec<String> = Vec::new();
        for zone in zones {
            if iana(&zone).is_none() {
                return Err(TimeContextError(format!(
                    "time-context: invalid client time zone \"{zone}\""
                )));
            }
            if !distinct.contains(&zone) {
                distinct.push(zone);
            }
        }
        let (stamp, zone_line) = match distinct.as_slice() {
            [one] => {
                let tz = iana(one).unwrap_or(TimeZone::UTC);
                (
                    format_timestamp(now, &tz, one),
                    format!("Browser time zone for this request: {one}. Interpret otherwise-unqualified dates and times in this zone."),
                )
            }
            [] => (
                format_timestamp(now, &self.config.zone, &self.config.zone_name),
                "Browser time zone for this request: unavailable. Ask the user to clarify otherwise-unqualified dates and times.".to_owned(),
            ),
            many => (
                format_timestamp(now, &self.config.zone, &self.config.zone_name),
                format!(
                    "Browser time zone for this request: mixed {}. Ask the user to clarify otherwise-unqualified dates and times.",
                    json!(many)
                ),
            ),
        };
        let elapsed = if step == 1 {
            let d = fold
                .last_visible
                .map_or_else(|| "unavailable".to_owned(), |at| format_elapsed(now - at));
            format!("Elapsed since the preceding model-visible message: {d}.")
        } else {
            let d = fold
                .last_reading
                .filter(|(_, t)| *t == Some(turn))
                .map_or_else(
                    || "unavailable".to_owned(),
                    |(at, _)| format_elapsed(now - at),
                );
            format!("Elapsed since the preceding step context: {d}.")
        };
        let text = format!(
            "Time sampled while preparing turn {turn}, step {step}: {stamp}\n{zone_line}\n{elapsed}"
        );
        let source = MessageSource::plugin(TIME_PLUGIN)
            .with("form", "snapshot")
            .with("sections", json!([{"name": TIME_PLUGIN, "text": text}]));
        Ok(Some(Message::user(vec![ContentBlock::text(text)], source)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn elapsed_is_compact_whole_seconds() {
        // Checklist C34.
        assert_eq!(format_elapsed(3_725_000), "1h 2m 5s");
        assert_eq!(format_elapsed(0), "0s");
        assert_eq!(format_elapsed(-5_000), "0s");
        assert_eq!(format_elapsed(999), "0s");
        assert_eq!(format_elapsed(86_400_000 + 4_000), "1d 0h 0m 4s");
        assert_eq!(format_elapsed(61_000), "1m 1s");
    }

    #[test]
    fn timestamps_carry_the_offset_and_zone() {
        // Checklist C33.
        let ms = 1_785_498_790_330; // 2026-07-31T11:53:10Z
        assert_eq!(
            format_timestamp(ms, &TimeZone::UTC, "UTC"),
            "2026-07-31T11:53:10+00:00[UTC]"
        );
        let tokyo = TimeZone::get("Asia/Tokyo").unwrap();
        assert_eq!(
            format_timestamp(ms, &tokyo, "Asia/Tokyo"),
            "2026-07-31T20:53:10+09:00[Asia/Tokyo]"
        );
        let ny = TimeZone::get("America/New_York").unwrap();
        assert_eq!(
            format_timestamp(ms, &ny, "America/New_York"),
            "2026-07-31T07:53:10-04:00[America/New_York]"
        );
    }

    #[test]
    fn config_validation() {
        let error = |v: Value| TimeContextConfig::parse(&v).unwrap_err().0;
        assert_eq!(
            error(json!({"refreshIntervalMs": -1})),
            "time-context: refreshIntervalMs must be a non-negative safe integer, got -1"
        );
        assert_eq!(
            error(json!({"refreshIntervalMs": 1.5})),
            "time-context: refreshIntervalMs must be a non-negative safe integer, got 1.5"
        );
        assert_eq!(
            error(json!({"timeZone": "Mars/Olympus"})),
            "time-context: invalid IANA timeZone \"Mars/Olympus\""
        );
        let config = TimeContextConfig::parse(&json!({"timeZone": "Europe/Paris"})).unwrap();
        assert_eq!(config.zone_name, "Europe/Paris");
        assert!(TimeContextConfig::parse(&json!({})).is_ok());
    }
}
