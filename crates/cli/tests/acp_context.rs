//! Context over the real `dsh acp` wire, against the long-session model server: `/compact` is
//! offered in `available_commands_update` and runs as an ACP command (no model turn, a reply
//! chunk, `end_turn`), and the token meter's context fill reaches the client as
//! `usage_update {used, size}` before each prompt response (context-spec §7.4, §8.10, §12.3).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use dsh_testkit::long_session::LONG_SESSION_PROMPT;
use dsh_testkit::long_session::LongSessionPlan;
use dsh_testkit::long_session::LongSessionServer;
use serde_json::Value;
use serde_json::json;
use support::Acp;

const WINDOW: u64 = 32_000;

fn updates<'a>(frames: &'a [Value], kind: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| {
            f["method"] == "session/update" && f["params"]["update"]["sessionUpdate"] == kind
        })
        .map(|f| &f["params"]["update"])
        .collect()
}

/// The index of the response frame to request `id`.
fn response_at(frames: &[Value], id: u64) -> usize {
    frames
        .iter()
        .position(|f| f["id"] == json!(id) && f.get("method").is_none())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_is_an_acp_command_and_the_context_fill_is_a_usage_update() {
    let server = LongSessionServer::start(
        LongSessionPlan {
            steps: 6,
            result_bytes: 6_000,
            context_window: WINDOW,
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[plugins.sandbox]\nmode = \"danger-full-access\"\n\n[plugins.session-title]\nenabled = false\n\n[[model.catalog]]\nid = \"deepseek-v4-flash\"\ncontext_window = {WINDOW}\n"
        ),
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().canonicalize().unwrap();

    let mut acp = Acp::start(&cwd, home.path(), &server.url());
    acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await;
    let created = acp
        .request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let id = created["result"]["sessionId"].as_str().unwrap().to_owned();

    let answered = acp
        .request(
            3,
            "session/prompt",
            json!({"sessionId": id, "prompt": [{"type": "text", "text": LONG_SESSION_PROMPT}]}),
        )
        .await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    let commands = updates(&acp.frames, "available_commands_update");
    let compact = commands
        .first()
        .and_then(|u| {
            u["availableCommands"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "compact")
        })
        .expect("/compact is offered after session/new");
    assert_eq!(compact["description"], "Compact older conversation history");
    assert!(compact.get("input").is_none(), "/compact takes no input");
    let usage = updates(&acp.frames, "usage_update");
    let after_turn = usage.last().expect("a usage_update for the turn");
    assert_eq!(after_turn["size"], WINDOW);
    let used = after_turn["used"].as_u64().unwrap();
    assert!(used > 6_000 && used < WINDOW, "{after_turn}");
    let frames_before = acp.frames.len();
    let usage_at = acp
        .frames
        .iter()
        .rposition(|f| f["params"]["update"]["sessionUpdate"] == "usage_update")
        .unwrap();
    assert!(
        usage_at < response_at(&acp.frames, 3),
        "the fill precedes the answer"
    );
    let served_before = server.served();

    let compacted = acp
        .request(
            4,
            "session/prompt",
            json!({"sessionId": id, "prompt": [{"type": "text", "text": "/compact"}]}),
        )
        .await;
    assert_eq!(compacted["result"]["stopReason"], "end_turn", "{compacted}");
    let frames = &acp.frames[frames_before..];
    let chunks: Vec<&str> = updates(frames, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(chunks.len(), 1, "{chunks:?}");
    assert!(chunks[0].starts_with("Compacted "), "{chunks:?}");
    let served = server.served();
    let new: Vec<&str> = served[served_before.len()..]
        .iter()
        .map(|s| s.kind)
        .collect();
    assert_eq!(new, ["compaction"], "one summary request, no model turn");
    let shrunk = updates(frames, "usage_update");
    let shrunk = shrunk.last().expect("the fill after /compact");
    assert!(
        shrunk["used"].as_u64().unwrap() < used,
        "compaction lowered the fill: {shrunk} vs {used}"
    );
    acp.stop().await;
}
