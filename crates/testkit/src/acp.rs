//! ACP driver: runs `dsh acp` and plays a scenario's `prompt_steps` over newline-delimited
//! JSON-RPC 2.0 on its stdio, as an editor would; answers `session/request_permission` from
//! `permission_answers` and refuses every other client-side method.

use dsh_sync::lock;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::ChildStdin;

use crate::harness::{RunContext, wait_until};
use crate::scenario::{PermissionAnswer, Step};

/// What one ACP run produced.
#[derive(Debug, Default)]
pub struct AcpRun {
    /// Every stdout line that parsed as JSON, in order.
    pub lines: Vec<Value>,
    /// Protocol problems: non-JSON stdout, unlisted permission kinds, failed steps.
    pub failures: Vec<String>,
    pub stderr: String,
    pub exit_code: Option<i32>,
    /// False when the harness process could not be spawned at all.
    pub started: bool,
}

#[derive(Debug)]
struct Shared {
    lines: Vec<Value>,
    last_activity: Instant,
    eof: bool,
    failures: Vec<String>,
    answers: VecDeque<PermissionAnswer>,
}

type Stdin = Arc<tokio::sync::Mutex<Option<ChildStdin>>>;

/// Why a scripted ACP step failed (reported as the scenario's failure line).
#[derive(Debug, thiserror::Error)]
pub enum AcpStepError {
    #[error("stdin already closed")]
    StdinClosed,
    #[error("write to harness stdin: {0}")]
    Write(#[source] std::io::Error),
    #[error("flush harness stdin: {0}")]
    Flush(#[source] std::io::Error),
    #[error("harness closed stdout while waiting for {0}")]
    HarnessClosed(String),
    #[error("timed out after {millis} ms waiting for {what}")]
    TimedOutAfter { millis: u128, what: String },
    #[error("timed out waiting for {0}")]
    TimedOut(String),
    #[error("{0}")]
    MissingArgument(&'static str),
    #[error("session/load failed: {0}")]
    LoadFailed(Value),
    #[error("unsupported step op {0}")]
    UnsupportedOp(String),
}

struct Driver<'a> {
    ctx: &'a RunContext<'a>,
    shared: Arc<Mutex<Shared>>,
    stdin: Stdin,
    next_id: u64,
    session_id: Option<String>,
}

async fn write_line(stdin: &Stdin, msg: &Value) -> Result<(), AcpStepError> {
    let mut guard = stdin.lock().await;
    let Some(pipe) = guard.as_mut() else {
        return Err(AcpStepError::StdinClosed);
    };
    let line = format!("{msg}\n");
    pipe.write_all(line.as_bytes())
        .await
        .map_err(AcpStepError::Write)?;
    pipe.flush().await.map_err(AcpStepError::Flush)
}

/// Answers one agent→client request.
fn client_reply(shared: &Mutex<Shared>, req: &Value) -> Value {
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let method = req.get("method").and_then(Value::as_str).unwrap_or("");
    if method != "session/request_permission" {
        return json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("Method not found: {method}")}});
    }
    let mut st = lock(shared);
    let cancelled =
        json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": {"outcome": "cancelled"}}});
    let Some(answer) = st.answers.pop_front() else {
        return cancelled;
    };
    let chosen = req
        .pointer("/params/options")
        .and_then(Value::as_array)
        .and_then(|opts| {
            opts.iter()
                .find(|o| o.get("kind").and_then(Value::as_str) == Some(answer.kind.as_str()))
        })
        .and_then(|o| o.get("optionId").cloned());
    match chosen {
        Some(option_id) => {
            json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": {"outcome": "selected", "optionId": option_id}}})
        }
        None => {
            st.failures.push(format!(
                "permission answer {:?} is not among the offered options",
                answer.kind
            ));
            cancelled
        }
    }
}

/// Runs `dsh acp` through the whole script.
pub async fn run(ctx: &RunContext<'_>, steps: &[Step], answers: &[PermissionAnswer]) -> AcpRun {
    let mut child = match crate::harness::spawn_retrying(&mut ctx.command(&["acp"])) {
        Ok(c) => c,
        Err(e) => {
            return AcpRun {
                failures: vec![format!("cannot start {} acp: {e}", ctx.bin.display())],
                ..AcpRun::default()
            };
        }
    };
    let shared = Arc::new(Mutex::new(Shared {
        lines: Vec::new(),
        last_activity: Instant::now(),
        eof: false,
        failures: Vec::new(),
        answers: answers.iter().cloned().collect(),
    }));
    let stdin: Stdin = Arc::new(tokio::sync::Mutex::new(child.stdin.take()));
    let reader = child.stdout.take().map(|out| {
        let shared = shared.clone();
        let stdin = stdin.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let parsed = serde_json::from_str::<Value>(&line);
                let reply = {
                    let mut st = lock(&shared);
                    st.last_activity = Instant::now();
                    match parsed {
                        Ok(v) => {
                            let is_request = v.get("method").is_some() && v.get("id").is_some();
                            st.lines.push(v.clone());
                            is_request.then_some(v)
                        }
                        Err(_) => {
                            st.failures
                                .push(format!("stdout line is not JSON: {line:?}"));
                            None
                        }
                    }
                };
                if let Some(req) = reply {
                    let answer = client_reply(&shared, &req);
                    if let Err(e) = write_line(&stdin, &answer).await {
                        lock(&shared).failures.push(e.to_string());
                    }
                }
            }
            lock(&shared).eof = true;
        })
    });
    let stderr_task = child.stderr.take().map(|mut err| {
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let _ = err.read_to_end(&mut buf).await;
            String::from_utf8_lossy(&buf).into_owned()
        })
    });

    let mut driver = Driver {
        ctx,
        shared: shared.clone(),
        stdin: stdin.clone(),
        next_id: 0,
        session_id: None,
    };
    for (i, step) in steps.iter().enumerate() {
        if let Err(e) = driver.step(step).await {
            lock(&shared)
                .failures
                .push(format!("step {} ({}): {e}", i + 1, step.op));
            break;
        }
    }

    // Closing stdin is the client's goodbye; a well-behaved agent exits on EOF.
    stdin.lock().await.take();
    let exit_code = match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
        Ok(Ok(status)) => status.code(),
        _ => {
            let _ = child.kill().await;
            lock(&shared)
                .failures
                .push("harness did not exit within 5 s after stdin closed".to_owned());
            None
        }
    };
    if let Some(r) = reader {
        let _ = tokio::time::timeout(Duration::from_secs(2), r).await;
    }
    let stderr = match stderr_task {
        Some(t) => tokio::time::timeout(Duration::from_secs(2), t)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default(),
        None => String::new(),
    };
    let mut st = lock(&shared);
    AcpRun {
        lines: std::mem::take(&mut st.lines),
        failures: std::mem::take(&mut st.failures),
        stderr,
        exit_code,
        started: true,
    }
}

impl Driver<'_> {
    fn timeout(&self, step: &Step) -> Duration {
        step.u64_arg("timeoutMs")
            .map_or(self.ctx.wait, Duration::from_millis)
    }

    fn line_count(&self) -> usize {
        lock(&self.shared).lines.len()
    }

    async fn send(&mut self, method: &str, params: Value) -> Result<u64, AcpStepError> {
        self.next_id += 1;
        let id = self.next_id;
        write_line(
            &self.stdin,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .await?;
        Ok(id)
    }

    async fn notify(&self, method: &str, params: Value) -> Result<(), AcpStepError> {
        write_line(
            &self.stdin,
            &json!({"jsonrpc": "2.0", "method": method, "params": params}),
        )
        .await
    }

    /// Waits for `cond` over the transcript; fails early when the harness closed stdout.
    async fn wait_for<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut cond: impl FnMut(&Shared) -> Option<T>,
    ) -> Result<T, AcpStepError> {
        let mut found = None;
        let mut eof = false;
        wait_until(timeout, || {
            let st = lock(&self.shared);
            found = cond(&st);
            eof = st.eof;
            found.is_some() || eof
        })
        .await;
        match found {
            Some(v) => Ok(v),
            None if eof => Err(AcpStepError::HarnessClosed(what.to_owned())),
            None => Err(AcpStepError::TimedOutAfter {
                millis: timeout.as_millis(),
                what: what.to_owned(),
            }),
        }
    }

    async fn response(&self, id: u64, timeout: Duration) -> Result<Value, AcpStepError> {
        self.wait_for(timeout, &format!("the response to request {id}"), |st| {
            st.lines
                .iter()
                .find(|l| {
                    l.get("method").is_none()
                        && l.get("id").and_then(Value::as_u64) == Some(id)
                        && (l.get("result").is_some() || l.get("error").is_some())
                })
                .cloned()
        })
        .await
    }

    async fn wait_file(&self, rel: &str, timeout: Duration) -> Result<(), AcpStepError> {
        let path = self.ctx.workspace_file(rel);
        if wait_until(timeout, || path.exists()).await {
            Ok(())
        } else {
            Err(AcpStepError::TimedOut(format!("workspace file {rel}")))
        }
    }

    fn session(&self) -> Value {
        self.session_id.clone().map_or(Value::Null, Value::String)
    }

    fn prompt_blocks(step: &Step) -> Value {
        if step.op == "promptContent" {
            step.args
                .get("content")
                .or_else(|| step.args.get("prompt"))
                .cloned()
                .unwrap_or_else(|| json!([]))
        } else {
            json!([{"type": "text", "text": step.str_arg("text").unwrap_or("")}])
        }
    }

    async fn step(&mut self, step: &Step) -> Result<(), AcpStepError> {
        let timeout = self.timeout(step);
        let cwd = self.ctx.workspace.to_string_lossy().into_owned();
        match step.op.as_str() {
            "initialize" => {
                let id = self
                    .send(
                        "initialize",
                        json!({"protocolVersion": 1, "clientCapabilities": {}}),
                    )
                    .await?;
                self.response(id, timeout).await.map(drop)
            }
            "newSession" | "newSessionExpectError" => {
                let mut params = json!({
                    "cwd": cwd,
                    "mcpServers": step.args.get("mcpServers").cloned().unwrap_or_else(|| json!([])),
                });
                if let Some(dirs) = step.args.get("additionalDirectories") {
                    params["additionalDirectories"] = dirs.clone();
                }
                let id = self.send("session/new", params).await?;
                let resp = self.response(id, timeout).await?;
                if let Some(sid) = resp.pointer("/result/sessionId").and_then(Value::as_str) {
                    self.session_id = Some(sid.to_owned());
                }
                Ok(())
            }
            // The replay half of live = replay: an editor reopening a stored session.
            "loadSession" => {
                let session_id = step
                    .str_arg("sessionId")
                    .ok_or(AcpStepError::MissingArgument(
                        "loadSession without sessionId",
                    ))?
                    .to_owned();
                let params = json!({"sessionId": session_id, "cwd": cwd, "mcpServers": []});
                let id = self.send("session/load", params).await?;
                let resp = self.response(id, timeout).await?;
                if let Some(error) = resp.get("error") {
                    return Err(AcpStepError::LoadFailed(error.clone()));
                }
                self.session_id = Some(session_id);
                Ok(())
            }
            "prompt" | "promptContent" | "promptExpectError" | "promptAndWaitForAgentMessage" => {
                let from = self.line_count();
                let params =
                    json!({"sessionId": self.session(), "prompt": Self::prompt_blocks(step)});
                let id = self.send("session/prompt", params).await?;
                self.response(id, timeout).await?;
                if let Some(want) = step.str_arg("waitForText") {
                    self.wait_for(timeout, &format!("agent message {want:?}"), |st| {
                        st.lines[from.min(st.lines.len())..]
                            .iter()
                            .any(|l| {
                                l.pointer("/params/update/sessionUpdate")
                                    .and_then(Value::as_str)
                                    == Some("agent_message_chunk")
                                    && l.pointer("/params/update/content/text")
                                        .and_then(Value::as_str)
                                        == Some(want)
                            })
                            .then_some(())
                    })
                    .await?;
                }
                Ok(())
            }
            "promptAndCancel" => {
                let params =
                    json!({"sessionId": self.session(), "prompt": Self::prompt_blocks(step)});
                let id = self.send("session/prompt", params).await?;
                match step.wait_for_file() {
                    Some(rel) => self.wait_file(rel, timeout).await?,
                    None => self.wait_turn_start(1, timeout).await?,
                }
                self.notify("session/cancel", json!({"sessionId": self.session()}))
                    .await?;
                self.response(id, timeout).await.map(drop)
            }
            "cancel" => {
                if let Some(rel) = step.wait_for_file() {
                    self.wait_file(rel, timeout).await?;
                }
                self.notify("session/cancel", json!({"sessionId": self.session()}))
                    .await
            }
            "waitForFile" => {
                let rel = step
                    .wait_for_file()
                    .ok_or(AcpStepError::MissingArgument("waitForFile without path"))?;
                self.wait_file(rel, timeout).await
            }
            "waitForTurnStart" => {
                self.wait_turn_start(step.u64_arg("minimumTurn").unwrap_or(1), timeout)
                    .await
            }
            "waitForTurnEnd" => self.wait_turn_end(timeout).await,
            "waitForSubagentTurnEnd" => {
                let child = usize::try_from(step.u64_arg("child").unwrap_or(1)).unwrap_or(1);
                let turn = step.u64_arg("minimumTurn").unwrap_or(1);
                let ctx = self.ctx;
                let ok = wait_until(timeout, || {
                    ctx.logs()
                        .iter()
                        .filter(|l| !l.is_top_level())
                        .nth(child.saturating_sub(1))
                        .is_some_and(|l| l.last_turn_ended() >= turn)
                })
                .await;
                ok.then_some(()).ok_or_else(|| {
                    AcpStepError::TimedOut(format!("child {child} turn {turn} to end"))
                })
            }
            "waitForTitleAfterTurnEnd" => {
                let ctx = self.ctx;
                let ok = wait_until(timeout, || {
                    ctx.top_log().is_some_and(|l| l.title_after_last_turn_end())
                })
                .await;
                ok.then_some(()).ok_or_else(|| {
                    AcpStepError::TimedOut("a session title after the turn".to_owned())
                })
            }
            other => Err(AcpStepError::UnsupportedOp(other.to_owned())),
        }
    }

    async fn wait_turn_start(&self, minimum: u64, timeout: Duration) -> Result<(), AcpStepError> {
        let ctx = self.ctx;
        let ok = wait_until(timeout, || {
            ctx.top_log()
                .is_some_and(|l| l.last_turn_started() >= minimum)
        })
        .await;
        ok.then_some(())
            .ok_or_else(|| AcpStepError::TimedOut(format!("turn {minimum} to start")))
    }

    /// Prefers the session log; without one, "no model request in flight and stdout idle for
    /// 300 ms" counts as the end of the turn.
    async fn wait_turn_end(&self, timeout: Duration) -> Result<(), AcpStepError> {
        let ctx = self.ctx;
        let shared = &self.shared;
        let ok = wait_until(timeout, || match ctx.top_log() {
            Some(log) if log.last_turn_started() > 0 => log.idle_after_turn(),
            _ => {
                let st = lock(shared);
                ctx.replay.in_flight() == 0
                    && st.last_activity.elapsed() >= Duration::from_millis(300)
            }
        })
        .await;
        ok.then_some(())
            .ok_or_else(|| AcpStepError::TimedOut("the turn to end".to_owned()))
    }
}
