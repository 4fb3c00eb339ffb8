//! tmux context (§6): on a turn's first step, where the harness runs inside tmux, one reading
//! of its tmux location, placed before the turn's messages and repeated only when it changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PreStepDecision;
use dsh_agent::PreStepInput;
use dsh_kernel::BoxFuture;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_session::Event;
use dsh_session::LogFold;
use dsh_session::SessionLog;
use dsh_session::kind;
use serde_json::Value;
use serde_json::json;

use crate::time::Clock;
use crate::time::TimeContextError;
use crate::time::parse_interval;

/// The `plugin` of tmux-context messages (and its section name).
pub const TMUX_PLUGIN: &str = "tmux-context";

/// What a shell run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutput {
    pub exit_code: Option<i32>,
    pub stdout: String,
}

/// Runs a harness-owned script (never model-written). `Err` is a shell that could not run.
pub trait ShellExecutor: Send + Sync {
    fn run(&self, script: String) -> BoxFuture<'static, Result<ShellOutput, std::io::Error>>;
}

/// `sh -c` on this machine, with optional extra environment (tests point `PATH` elsewhere).
#[derive(Debug, Clone, Default)]
pub struct LocalShell {
    pub env: Vec<(String, String)>,
}

impl ShellExecutor for LocalShell {
    fn run(&self, script: String) -> BoxFuture<'static, Result<ShellOutput, std::io::Error>> {
        let env = self.env.clone();
        Box::pin(async move {
            // The filtered environment every dsh child gets: no provider key.
            let mut command =
                dsh_process::command("sh", &dsh_process::ChildEnv::inherited().with(env));
            command
                .arg("-c")
                .arg(script)
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true);
            let output = command.output().await?;
            Ok(ShellOutput {
                exit_code: output.status.code(),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            })
        })
    }
}

/// The location query for the harness process `pid`.
pub fn location_script(pid: u32) -> String {
    format!(
        "[ -n \"$TMUX_PANE\" ] || exit 1\n\
         self_tty=$(ps -o tty= -p {pid} | tr -d ' ')\n\
         [ -n \"$self_tty\" ] || exit 1\n\
         pane_tty=$(tmux display-message -t \"$TMUX_PANE\" -p '#{{pane_tty}}') || exit 1\n\
         [ \"$pane_tty\" = \"/dev/$self_tty\" ] || exit 1\n\
         exec tmux display-message -t \"$TMUX_PANE\" -p '#{{session_name}}\\t#{{window_index}}\\t#{{window_name}}\\t#{{pane_index}}\\t#{{pane_id}}\\t#{{window_active}}\\t#{{pane_active}}\\t#{{window_layout}}'"
    )
}

/// The state text of a location line, or `None` when it is not one.
pub fn parse_location(stdout: &str) -> Option<String> {
    let line = stdout.trim_end_matches(['\n', '\r']);
    let fields: Vec<&str> = line.split("\\t").collect();
    let [
        session,
        window,
        name,
        pane,
        pane_id,
        window_active,
        pane_active,
        layout,
    ] = fields.as_slice()
    else {
        return None;
    };
    if pane_id.is_empty() {
        return None;
    }
    Some(format!(
        "session {session}, window {window} {}, pane {pane} {pane_id}\nwindow active={window_active}, pane active={pane_active}, layout {layout}",
        Value::String((*name).to_owned())
    ))
}

/// `refreshIntervalMs?`.
pub fn parse_tmux_config(value: &Value) -> Result<u64, TimeContextError> {
    let empty = serde_json::Map::new();
    let map = value.as_object().unwrap_or(&empty);
    for key in map.keys() {
        if !matches!(key.as_str(), "refreshIntervalMs" | "refresh_interval_ms") {
            return Err(TimeContextError(format!(
                "tmux-context: unknown key \"{key}\""
            )));
        }
    }
    parse_interval(
        "tmux-context",
        map.get("refreshIntervalMs")
            .or_else(|| map.get("refresh_interval_ms")),
    )
}

#[derive(Debug, Default, Clone)]
struct Fold {
    next_seq: u64,
    /// `(time, state text)` of the latest tmux reading.
    last: Option<(i64, String)>,
}

impl Fold {
    fn catch_up(&mut self, log: &SessionLog) {
        if let Err(error) = log.catch_up(self) {
            // The reading stays where it got to; the next step tries again.
            tracing::warn!(%error, "tmux location: cannot read the session log");
        }
    }
}

impl LogFold for Fold {
    fn next_seq(&mut self) -> &mut u64 {
        &mut self.next_seq
    }

    fn apply(&mut self, event: &Event) {
        if event.kind == kind::USER_MESSAGE
            && event.data.pointer("/source/plugin").and_then(Value::as_str) == Some(TMUX_PLUGIN)
        {
            let text = event
                .data
                .pointer("/content/0/text")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let state = text.split_once('\n').map_or("", |(_, s)| s).to_owned();
            self.last = Some((i64::try_from(event.time).unwrap_or(i64::MAX), state));
        }
    }
}

/// The capability.
pub struct TmuxContext {
    shell: Arc<dyn ShellExecutor>,
    refresh_interval_ms: u64,
    clock: Clock,
    pid: u32,
    folds: Mutex<HashMap<String, Fold>>,
}

impl std::fmt::Debug for TmuxContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TmuxContext")
            .field("refresh_interval_ms", &self.refresh_interval_ms)
            .finish_non_exhaustive()
    }
}

impl TmuxContext {
    pub fn new(
        shell: Arc<dyn ShellExecutor>,
        refresh_interval_ms: u64,
        clock: Option<Clock>,
    ) -> Arc<Self> {
        Arc::new(Self {
            shell,
            refresh_interval_ms,
            clock: clock.unwrap_or_else(|| Arc::new(|| jiff::Timestamp::now().as_millisecond())),
            pid: std::process::id(),
            folds: Mutex::new(HashMap::new()),
        })
    }

    /// Registers the prepended pre-step listener (it places its reading first).
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
                        PreStepDecision::Enter(mut messages)
                            if step == 1 && !signal.is_cancelled() =>
                        {
                            if let Some(reading) = this.reading(&agent, turn).await {
                                messages.insert(0, reading);
                            }
                            Ok(PreStepDecision::Enter(messages))
                        }
                        other => Ok(other),
                    }
                })
            })
    }

    /// The reading for `turn`, when the location is known and changed.
    pub async fn reading(&self, agent: &AgentHandle, turn: u64) -> Option<Message> {
        let fold = {
            let mut folds = dsh_sync::lock(&self.folds);
            let fold = folds.entry(agent.id().to_owned()).or_default();
            fold.catch_up(agent.log());
            fold.clone()
        };
        let now = (self.clock)();
        let interval = self.refresh_interval_ms as i64;
        if interval > 0
            && let Some((at, _)) = &fold.last
            && *at <= now
            && now - at < interval
        {
            return None;
        }
        let output = match self.shell.run(location_script(self.pid)).await {
            Ok(output) => output,
            Err(error) => {
                tracing::warn!(agent = %agent.id(), "tmux location query failed: {error}; injecting no location this turn");
                return None;
            }
        };
        if output.exit_code != Some(0) {
            return None;
        }
        let state = parse_location(&output.stdout)?;
        if fold.last.as_ref().is_some_and(|(_, last)| *last == state) {
            return None;
        }
        let text = format!("tmux location (turn {turn}):\n{state}");
        let source = MessageSource::plugin(TMUX_PLUGIN)
            .with("form", "snapshot")
            .with("sections", json!([{"name": TMUX_PLUGIN, "text": text}]));
        Some(Message::user(vec![ContentBlock::text(text)], source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn location_lines_parse_into_the_state_text() {
        assert_eq!(
            parse_location("work\\t2\\teditor \"x\"\\t0\\t%5\\t1\\t0\\tabcd,80x24,0,0\n")
                .as_deref(),
            Some(
                "session work, window 2 \"editor \\\"x\\\"\", pane 0 %5\nwindow active=1, pane active=0, layout abcd,80x24,0,0"
            )
        );
        assert_eq!(parse_location("a\\tb\n"), None);
        assert_eq!(parse_location("w\\t2\\tn\\t0\\t\\t1\\t0\\tl"), None);
    }

    #[test]
    fn the_script_checks_the_pane_belongs_to_this_process() {
        let script = location_script(4242);
        assert!(script.starts_with("[ -n \"$TMUX_PANE\" ] || exit 1\n"));
        assert!(script.contains("ps -o tty= -p 4242 | tr -d ' '"));
        assert!(script.ends_with("'#{session_name}\\t#{window_index}\\t#{window_name}\\t#{pane_index}\\t#{pane_id}\\t#{window_active}\\t#{pane_active}\\t#{window_layout}'"));
        assert_eq!(
            parse_tmux_config(&json!({"refreshIntervalMs": "x"}))
                .unwrap_err()
                .0,
            "tmux-context: refreshIntervalMs must be a non-negative safe integer, got \"x\""
        );
    }
}
