//! A replay scenario of our own: through `dsh acp`, with the reference MCP server
//! (`@modelcontextprotocol/server-everything`, installed by `.ci/run` into `tests/mcp-server`)
//! passed in `session/new` `mcpServers`, the model calls `mcp__everything__echo` and the echo
//! reaches the model. The scenario is written to a temp dir (the server path is absolute) and
//! judged by the same conformance runner as the recorded scenarios.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::path::PathBuf;

use dsh_testkit::runner::RunnerOptions;
use dsh_testkit::runner::Status;
use dsh_testkit::runner::run_scenario;
use serde_json::Value;
use serde_json::json;

fn write_jsonl(path: &Path, lines: &[Value]) {
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(path, text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_calls_an_mcp_tool_given_in_session_new() {
    let repo = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let server = repo.join("tests/mcp-server/node_modules/.bin/mcp-server-everything");
    if !server.exists() {
        eprintln!(
            "SKIPPED: {} is not installed (run `npm ci --prefix tests/mcp-server`)",
            server.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prompt = "Call the echo tool of the everything MCP server with the message hello-mcp, then reply with what it returned.";
    let arguments = json!({"message": "hello-mcp"}).to_string();
    std::fs::write(
        dir.path().join("scenario.json"),
        serde_json::to_string_pretty(&json!({
            "format_version": 1,
            "suite": "acp",
            "name": "mcp-echo",
            "prompt_steps": [
                {"op": "initialize"},
                {"op": "newSession", "mcpServers": [
                    {"name": "everything", "command": server.to_string_lossy(), "args": [], "env": []}
                ]},
                {"op": "prompt", "text": prompt}
            ],
            "mode": "native",
            "features": [],
            "workspace": {"files": {}, "location": "temp"},
            "env": {},
            "sessions": [{"session": 0, "first_user_text": prompt}],
            "expected": {"acp_stdout": "expected.acp.jsonl"},
            "upstream": {"config_files": ["examples/acp-agent/cordis.yml"]}
        }))
        .unwrap(),
    )
    .unwrap();
    write_jsonl(
        &dir.path().join("model.jsonl"),
        &[
            json!({"session": 0, "route": "main", "index": 0, "kind": "response",
                "tool_calls": [{"id": "call_echo", "name": "mcp__everything__echo", "arguments": arguments}],
                "finish_reason": "tool_calls",
                "stream": [{"tool_call": 0, "id": "call_echo", "name": "mcp__everything__echo", "arguments": arguments}]}),
            json!({"session": 0, "route": "main", "index": 1, "kind": "response",
                "content": "It returned: Echo: hello-mcp", "finish_reason": "stop",
                "stream": [{"content": "It returned: Echo: hello-mcp"}]}),
        ],
    );
    write_jsonl(
        &dir.path().join("tool-results.jsonl"),
        &[
            json!({"session": 0, "turn": 1, "step": 1, "call_id": "call_echo", "name": "mcp__everything__echo",
            "arguments": {"message": "hello-mcp"}, "is_error": false, "text": "Echo: hello-mcp",
            "content": [{"type": "text", "text": "Echo: hello-mcp"}]}),
        ],
    );
    write_jsonl(
        &dir.path().join("expected.acp.jsonl"),
        &[
            json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}}),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "{{sessionId}}"}}),
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "{{sessionId}}",
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "It returned: Echo: hello-mcp"}}}}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}),
        ],
    );
    let options = RunnerOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_dsh")));
    let report = run_scenario(dir.path(), &options).await;
    assert_eq!(report.status, Status::Pass, "{:?}", report.failures);
    let parity = report.parity.expect("the echo result was logged");
    assert_eq!(
        (parity.matched, parity.total),
        (1, 1),
        "the echo text reached the log unchanged"
    );
}
