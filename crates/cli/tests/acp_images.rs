//! Images end to end through `dsh acp` against a capturing model server on loopback: with an
//! image-capable model in `[[model.catalog]]`, `initialize` advertises image prompts, an
//! inline prompt image and a `read_image` result both reach the model as `image_url` data
//! URLs, the bytes live in `$DSH_HOME/attachments`, and the session log holds references only.
//! Without the catalog entry nothing is advertised and an image prompt is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use support::Acp;
use support::model_server;
use support::sse;

const RED_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
const RED_HEX: &str = "b1ff9c8ea3a780bad09b346c423d2d0e46815926879b18e841d928376a946640";

fn workspace_with(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".dsh")).unwrap();
    std::fs::write(dir.path().join(".dsh/config.toml"), config).unwrap();
    std::fs::write(
        dir.path().join("red.png"),
        base64_decode(RED_PNG), // the recorded 1x1 PNG
    )
    .unwrap();
    dir
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

const VISION: &str = "[plugins.sandbox]\nmode = \"danger-full-access\"\n\n[model]\nname = \"vision-test\"\n\n[[model.catalog]]\nid = \"vision-test\"\ninput = [\"text\", \"image\"]\n\n[plugins.session-title]\nenabled = false\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_and_tool_images_reach_an_image_capable_model_as_data_urls() {
    let call = json!({"tool_calls": [{"index": 0, "id": "call_img", "type": "function",
        "function": {"name": "read_image", "arguments": "{\"file_path\":\"red.png\"}"}}]});
    let (url, bodies) = model_server(vec![
        sse(&[call], "tool_calls"),
        sse(&[json!({"content": "a red pixel"})], "stop"),
    ])
    .await;
    let workspace = workspace_with(VISION);
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(workspace.path(), home.path(), &url);
    let init = acp
        .request(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["image"],
        true
    );
    let session = acp
        .request(
            2,
            "session/new",
            json!({"cwd": workspace.path(), "mcpServers": []}),
        )
        .await["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = acp
        .request(
            3,
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": "Look at this and at red.png."},
                {"type": "image", "data": RED_PNG, "mimeType": "image/png"}
            ]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    acp.stop().await;

    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    let data_url = format!("data:image/png;base64,{RED_PNG}");
    let tools: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"read_image"), "{tools:?}");
    let prompt = bodies[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap();
    assert_eq!(
        prompt["content"],
        json!([
            {"type": "text", "text": "Look at this and at red.png."},
            {"type": "image_url", "image_url": {"url": data_url}}
        ])
    );
    // The tool result's image follows it in a user message of its own.
    let messages = bodies[1]["messages"].as_array().unwrap();
    let tool_at = messages.iter().position(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        messages[tool_at]["content"],
        format!(
            "<path>{}/red.png</path>\n<type>image</type>\n<content>\nimage/png image, 1x1 px, 69 bytes\n</content>",
            workspace.path().canonicalize().unwrap().display()
        )
    );
    assert_eq!(
        messages[tool_at + 1]["content"][1],
        json!({"type": "image_url", "image_url": {"url": data_url}})
    );

    let stored = home.path().join(format!("attachments/sha256-{RED_HEX}"));
    assert_eq!(std::fs::read(&stored).unwrap(), base64_decode(RED_PNG));
    let log = dsh_session::JsonlStore::new(home.path().to_path_buf())
        .find(&session)
        .unwrap()
        .expect("the session is persisted");
    let text = std::fs::read_to_string(log).unwrap();
    assert!(text.contains(&format!("sha256:{RED_HEX}")));
    assert!(!text.contains(RED_PNG), "no base64 in the durable log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_only_model_advertises_no_image_prompts_and_refuses_them() {
    let (url, bodies) = model_server(Vec::new()).await;
    let workspace = workspace_with("[model]\nname = \"deepseek-v4-flash\"\n");
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(workspace.path(), home.path(), &url);
    let init = acp
        .request(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["image"],
        false
    );
    let session = acp
        .request(
            2,
            "session/new",
            json!({"cwd": workspace.path(), "mcpServers": []}),
        )
        .await["result"]["sessionId"]
        .clone();
    let refused = acp
        .request(
            3,
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "image", "data": RED_PNG, "mimeType": "image/png"}
            ]}),
        )
        .await;
    assert_eq!(
        refused["error"]["message"],
        "Invalid params: inline image prompts were not advertised by this connection"
    );
    acp.stop().await;
    assert!(bodies.lock().unwrap().is_empty());
    assert!(!home.path().join("attachments").exists());
}
