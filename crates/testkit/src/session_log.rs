//! Reads the session logs `dsh` writes under `$DSH_HOME/sessions/` (JSONL: a header line, then
//! `{"type","seq","time","data"}` events) to learn tool outcomes and turn boundaries.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One session file.
#[derive(Debug, Clone, Default)]
pub struct SessionLog {
    pub path: PathBuf,
    pub header: Value,
    pub events: Vec<Value>,
}

/// A `tool/result` event, reduced to what the judge compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedResult {
    pub call_id: String,
    pub is_error: bool,
    /// Concatenation of the result's text blocks (the model-facing text).
    pub text: String,
}

impl SessionLog {
    pub fn is_top_level(&self) -> bool {
        self.header.get("parentSession").is_none_or(Value::is_null)
    }

    pub fn created_at(&self) -> f64 {
        self.header
            .get("createdAt")
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
    }

    fn of_type<'a>(&'a self, ty: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.events
            .iter()
            .filter(move |e| e.get("type").and_then(Value::as_str) == Some(ty))
    }

    /// Highest turn number with a `turn/start` (0 when none).
    pub fn last_turn_started(&self) -> u64 {
        self.turns_of("turn/start")
    }

    /// Highest turn number with a `turn/end` (0 when none).
    pub fn last_turn_ended(&self) -> u64 {
        self.turns_of("turn/end")
    }

    fn turns_of(&self, ty: &str) -> u64 {
        self.of_type(ty)
            .filter_map(|e| e.pointer("/data/turn").and_then(Value::as_u64))
            .max()
            .unwrap_or(0)
    }

    /// True when at least one turn ran and every started turn has ended.
    pub fn idle_after_turn(&self) -> bool {
        let started = self.of_type("turn/start").count();
        started > 0 && self.of_type("turn/end").count() >= started
    }

    /// True when a `session/title` event follows the last `turn/end`.
    pub fn title_after_last_turn_end(&self) -> bool {
        let last_end = self
            .events
            .iter()
            .rposition(|e| e.get("type").and_then(Value::as_str) == Some("turn/end"));
        last_end.is_some_and(|i| {
            self.events[i + 1..]
                .iter()
                .any(|e| e.get("type").and_then(Value::as_str) == Some("session/title"))
        })
    }

    /// Every tool outcome in the log: `tool/result` events, plus the settle events of calls
    /// made from inside a `run_code` program (`tool/code-dispatch`, keyed by `subCallId`).
    pub fn tool_results(&self) -> Vec<LoggedResult> {
        let mut results: Vec<LoggedResult> =
            self.of_type("tool/result").filter_map(result_of).collect();
        results.extend(
            self.of_type("tool/code-dispatch")
                .filter_map(dispatch_result_of),
        );
        results
    }
}

fn dispatch_result_of(event: &Value) -> Option<LoggedResult> {
    let data = event.get("data")?;
    Some(LoggedResult {
        call_id: data.get("subCallId")?.as_str()?.to_owned(),
        is_error: data
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        text: text_of(data.get("content")),
    })
}

fn text_of(content: Option<&Value>) -> String {
    content
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<String>()
        })
        .unwrap_or_default()
}

fn result_of(event: &Value) -> Option<LoggedResult> {
    let message = event.pointer("/data/message")?;
    let call_id_fallback = message
        .pointer("/source/callId")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let block = message
        .get("content")
        .and_then(Value::as_array)?
        .iter()
        .find(|b| b.get("type").and_then(Value::as_str) == Some("tool-result"))?;
    let call_id = block
        .get("toolCallId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or(call_id_fallback)?;
    let text = text_of(block.get("content"));
    Some(LoggedResult {
        call_id,
        is_error: block
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        text,
    })
}

/// Parses one log file; a torn or foreign line is skipped (the harness may be mid-append).
pub fn parse_log(path: &Path, text: &str) -> SessionLog {
    let mut lines = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok());
    let header = lines.next().unwrap_or(Value::Null);
    SessionLog {
        path: path.to_path_buf(),
        header,
        events: lines.collect(),
    }
}

/// Every `*.jsonl` under `sessions_root`, recursively, sorted by header `createdAt`.
pub fn read_logs(sessions_root: &Path) -> Vec<SessionLog> {
    let mut files = Vec::new();
    collect_jsonl(sessions_root, &mut files);
    let mut logs: Vec<SessionLog> = files
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok().map(|t| parse_log(p, &t)))
        .collect();
    logs.sort_by(|a, b| a.created_at().total_cmp(&b.created_at()));
    logs
}

fn collect_jsonl(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_jsonl(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_results_and_turns_from_nested_files() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("--tmp-x--/session-1");
        std::fs::create_dir_all(&dir).unwrap();
        let lines = [
            json!({"type":"session","version":0,"id":"session-1","createdAt":5,"delegationDepth":0}),
            json!({"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}),
            json!({"type":"tool/call","seq":1,"time":1,"data":{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":{}}}),
            json!({"type":"tool/result","seq":2,"time":1,"data":{"turn":1,"step":1,"message":{
                "source":{"kind":"tool","callId":"c1"},
                "content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"A"},{"type":"image"},{"type":"text","text":"B"}],"isError":true}],
                "role":"tool","id":"m"}}}),
            json!({"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}),
            json!({"type":"session/title","seq":4,"time":1,"data":{"title":"t"}}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(dir.join("session.jsonl"), format!("{text}{{\"torn")).unwrap();
        std::fs::write(dir.join("other.txt"), "ignored").unwrap();
        let logs = read_logs(root.path());
        assert_eq!(logs.len(), 1);
        let log = &logs[0];
        assert!(log.is_top_level());
        assert_eq!(log.last_turn_started(), 1);
        assert_eq!(log.last_turn_ended(), 1);
        assert!(log.idle_after_turn());
        assert!(log.title_after_last_turn_end());
        assert_eq!(
            log.tool_results(),
            vec![LoggedResult {
                call_id: "c1".into(),
                is_error: true,
                text: "AB".into()
            }]
        );
    }
}
