//! Decides PASS/FAIL for one run (the three criteria of the conformance runner) and measures
//! tool-result text parity. Pure functions over captured output, so they are tested directly.

use serde::Serialize;
use serde_json::Value;

use crate::normalize::Normalizer;
use crate::replay::{Unanswered, Unconsumed};
use crate::scenario::{Step, ToolResultRecord};
use crate::session_log::LoggedResult;

/// Share of recorded tool results whose normalised text the harness reproduced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Parity {
    pub matched: usize,
    pub total: usize,
}

/// The judge's findings; the scenario passes when `failures` is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub failures: Vec<String>,
    pub parity: Parity,
}

/// Criterion 1: every main-route entry consumed, no request unanswered.
pub fn judge_replay(unconsumed: &[Unconsumed], unanswered: &[Unanswered], out: &mut Vec<String>) {
    let main: Vec<String> = unconsumed
        .iter()
        .filter(|u| u.route == "main")
        .map(|u| format!("s{}#{}", u.session, u.index))
        .collect();
    if !main.is_empty() {
        out.push(format!("unconsumed model entries: {}", main.join(", ")));
    }
    for u in unanswered {
        out.push(format!(
            "unanswered model request {} {}: {}",
            u.method, u.path, u.reason
        ));
    }
}

/// Criterion 2 plus text parity: every recorded call has exactly one result with the recorded
/// `is_error`.
pub fn judge_tools(
    recorded: &[ToolResultRecord],
    missing: &[String],
    logged: &[LoggedResult],
    norm: &Normalizer,
    out: &mut Vec<String>,
) -> Parity {
    let mut parity = Parity::default();
    for rec in recorded.iter().filter(|r| !missing.contains(&r.call_id)) {
        parity.total += 1;
        let results: Vec<&LoggedResult> =
            logged.iter().filter(|l| l.call_id == rec.call_id).collect();
        match results.as_slice() {
            [one] => {
                if one.is_error != rec.is_error {
                    out.push(format!(
                        "tool call {} ({}): is_error {} (recorded {})",
                        rec.call_id, rec.name, one.is_error, rec.is_error
                    ));
                }
                if norm.text(&one.text) == norm.text(&rec.text) {
                    parity.matched += 1;
                }
            }
            many => out.push(format!(
                "tool call {} ({}): {} results (expected 1)",
                rec.call_id,
                rec.name,
                many.len()
            )),
        }
    }
    parity
}

/// What a client request was, so responses can be judged per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Initialize,
    NewSession { expect_error: bool },
    Prompt { expect_error: bool },
}

/// The client requests a script sends, in order (`cancel` is a notification).
pub fn request_kinds(steps: &[Step]) -> Vec<RequestKind> {
    steps
        .iter()
        .filter_map(|s| match s.op.as_str() {
            "initialize" => Some(RequestKind::Initialize),
            "newSession" => Some(RequestKind::NewSession {
                expect_error: false,
            }),
            "newSessionExpectError" => Some(RequestKind::NewSession { expect_error: true }),
            "promptExpectError" => Some(RequestKind::Prompt { expect_error: true }),
            "prompt" | "promptContent" | "promptAndWaitForAgentMessage" | "promptAndCancel" => {
                Some(RequestKind::Prompt {
                    expect_error: false,
                })
            }
            _ => None,
        })
        .collect()
}

/// One response the agent sent, with the agent message text streamed since the previous one.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub response: Value,
    pub text: String,
}

fn is_response(line: &Value) -> bool {
    line.get("method").is_none() && (line.get("result").is_some() || line.get("error").is_some())
}

/// Splits an ACP stdout capture at the agent's responses.
pub fn exchanges(lines: &[Value]) -> Vec<Exchange> {
    let mut out = Vec::new();
    let mut text = String::new();
    for line in lines {
        if is_response(line) {
            out.push(Exchange {
                response: line.clone(),
                text: std::mem::take(&mut text),
            });
        } else if line.get("method").and_then(Value::as_str) == Some("session/update")
            && line
                .pointer("/params/update/sessionUpdate")
                .and_then(Value::as_str)
                == Some("agent_message_chunk")
            && let Some(t) = line
                .pointer("/params/update/content/text")
                .and_then(Value::as_str)
        {
            text.push_str(t);
        }
    }
    out
}

fn error_summary(norm: &Normalizer, resp: &Value) -> Option<String> {
    let e = resp.get("error")?;
    Some(format!(
        "{} {}",
        e.get("code").map(Value::to_string).unwrap_or_default(),
        norm.text(e.get("message").and_then(Value::as_str).unwrap_or(""))
    ))
}

/// Criterion 3 (ACP): per prompt, agent text and stop reason (or error) equal the recording;
/// `session/new` succeeded or failed as recorded.
pub fn judge_acp(
    kinds: &[RequestKind],
    expected: &[Value],
    actual: &[Value],
    norm: &Normalizer,
    out: &mut Vec<String>,
) {
    let exp = exchanges(expected);
    let act = exchanges(actual);
    for (k, kind) in kinds.iter().enumerate() {
        let n = k + 1;
        let Some(a) = act.get(k) else {
            out.push(format!("request {n} ({kind:?}): no response"));
            continue;
        };
        let e = exp.get(k);
        let a_err = error_summary(norm, &a.response);
        let e_err = e.and_then(|e| error_summary(norm, &e.response));
        match kind {
            RequestKind::Initialize => {
                if let Some(err) = a_err {
                    out.push(format!("initialize failed: {err}"));
                }
            }
            RequestKind::NewSession { expect_error } => {
                let want_err = *expect_error || e_err.is_some();
                if want_err != a_err.is_some() {
                    out.push(format!(
                        "session/new: expected {}, got {}",
                        if want_err { "an error" } else { "success" },
                        a_err.map_or_else(|| "success".to_owned(), |e| format!("error {e}"))
                    ));
                }
            }
            RequestKind::Prompt { expect_error } => {
                if *expect_error && a_err.is_none() {
                    out.push(format!(
                        "prompt {n}: expected a JSON-RPC error, got {}",
                        a.response
                    ));
                }
                let Some(e) = e else {
                    out.push(format!("prompt {n}: not in the recording"));
                    continue;
                };
                let (want, got) = (norm.text(&e.text), norm.text(&a.text));
                if want != got {
                    out.push(format!("prompt {n}: agent text {got:?}, expected {want:?}"));
                }
                match (&e_err, &a_err) {
                    (Some(w), Some(g)) if w != g => {
                        out.push(format!("prompt {n}: error {g}, expected {w}"));
                    }
                    (Some(w), None) => {
                        out.push(format!("prompt {n}: succeeded, expected error {w}"))
                    }
                    (None, Some(g)) => out.push(format!("prompt {n}: error {g}")),
                    (None, None) => {
                        let stop = |x: &Value| x.pointer("/result/stopReason").cloned();
                        let (w, g) = (stop(&e.response), stop(&a.response));
                        if w != g {
                            out.push(format!(
                                "prompt {n}: stopReason {}, expected {}",
                                g.unwrap_or(Value::Null),
                                w.unwrap_or(Value::Null)
                            ));
                        }
                    }
                    (Some(_), Some(_)) => {}
                }
            }
        }
    }
    if act.len() > kinds.len() {
        out.push(format!(
            "{} unexpected responses from the agent",
            act.len() - kinds.len()
        ));
    }
}

/// The facts of a headless stream-json run that the judge compares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeadlessFacts {
    pub output: Option<String>,
    pub end_kind: Option<String>,
    pub end_code: Option<String>,
    pub end_message: Option<String>,
}

pub fn headless_facts(lines: &[Value]) -> HeadlessFacts {
    let mut facts = HeadlessFacts::default();
    for line in lines {
        match line.get("type").and_then(Value::as_str) {
            Some("result") => {
                facts.output = line
                    .get("output")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            Some("session_event")
                if line.pointer("/event/type").and_then(Value::as_str) == Some("turn/end") =>
            {
                let reason = line.pointer("/event/data/reason");
                let s = |p: &str| {
                    reason
                        .and_then(|r| r.pointer(p))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                facts.end_kind = s("/kind");
                facts.end_code = s("/error/code");
                facts.end_message = s("/error/message");
            }
            _ => {}
        }
    }
    facts
}

/// Criterion 3 (headless): `result` output, last `turn/end` kind and error code, and dsh's exit
/// rule (0 only when the turn completed, else non-zero with `dsh: <code>: <message>`).
pub fn judge_headless(
    expected: &[Value],
    actual: &[Value],
    exit_code: Option<i32>,
    stderr: &str,
    norm: &Normalizer,
    out: &mut Vec<String>,
) {
    let e = headless_facts(expected);
    let a = headless_facts(actual);
    let out_norm = |o: &Option<String>| o.as_deref().map(|t| norm.text(t));
    if a.output.is_none() {
        out.push("no result line on stdout".to_owned());
    } else if out_norm(&e.output) != out_norm(&a.output) {
        out.push(format!(
            "result output {:?}, expected {:?}",
            a.output, e.output
        ));
    }
    if (&e.end_kind, &e.end_code) != (&a.end_kind, &a.end_code) {
        out.push(format!(
            "last turn/end {}{}, expected {}{}",
            a.end_kind.as_deref().unwrap_or("missing"),
            a.end_code
                .as_deref()
                .map(|c| format!(" {c}"))
                .unwrap_or_default(),
            e.end_kind.as_deref().unwrap_or("missing"),
            e.end_code
                .as_deref()
                .map(|c| format!(" {c}"))
                .unwrap_or_default(),
        ));
    }
    let completed = a.end_kind.as_deref() == Some("completed");
    match (completed, exit_code) {
        (true, Some(0)) => {}
        (true, code) => out.push(format!("turn completed but exit code {code:?}")),
        (false, Some(0)) => out.push("turn did not complete but exit code 0".to_owned()),
        (false, None) => out.push("harness was killed (no exit code)".to_owned()),
        (false, Some(_)) => {
            if let (Some("error"), Some(code)) = (a.end_kind.as_deref(), a.end_code.as_deref()) {
                let prefix = format!("dsh: {code}: ");
                if !stderr.lines().any(|l| l.starts_with(&prefix)) {
                    out.push(format!("stderr lacks a line starting {prefix:?}"));
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
