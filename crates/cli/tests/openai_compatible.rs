//! `[model] provider = "openai-compatible"`: a whole `dsh exec` turn with a tool call against a
//! local server that speaks plain chat completions (no `reasoning_content`, no cache fields),
//! as llama.cpp, vLLM or an Ollama OpenAI endpoint would.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use dsh_testkit::chat::ChatServer;
use dsh_testkit::chat::Reply;
use serde_json::Value;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_with_a_tool_call_runs_against_a_plain_chat_completions_server() {
    let server = ChatServer::start(vec![
        Reply::tool_call(
            "call_todo",
            "todo_write",
            json!({"todos": [{"content": "check the adapter", "status": "in_progress"}]}),
        ),
        Reply::text("The list is written."),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[model]\nprovider = \"openai-compatible\"\nname = \"local-model\"\nbase_url = \"{}/v1\"\napi_key_env = \"LOCAL_LLM_KEY\"\n\n[plugins.session-title]\nenabled = false\n",
            server.url()
        ),
    )
    .unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
    for (name, _) in std::env::vars() {
        if name.starts_with("DEEPSEEK_") || name.starts_with("DSH_") || name.starts_with("OPENAI_")
        {
            command.env_remove(name);
        }
    }
    let output = command
        .args(["exec", "--output", "stream-json", "write a todo"])
        .current_dir(workspace.path())
        .env("DSH_HOME", home.path())
        .env("LOCAL_LLM_KEY", "local-secret")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["output"], "The list is written.");
    assert!(
        stdout.contains(r#""type":"todo/write""#),
        "the tool ran and logged: {stdout}"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request["model"], "local-model");
        assert_eq!(request["stream"], true);
        assert!(request.get("thinking").is_none(), "{request}");
        assert!(request.get("reasoning_effort").is_none(), "{request}");
    }
    assert!(server.offered_tools(0).contains(&"todo_write".to_owned()));
    let messages = requests[1]["messages"].as_array().unwrap();
    let call = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the tool call is sent back");
    assert_eq!(call["tool_calls"][0]["id"], "call_todo");
    assert!(call.get("reasoning_content").is_none());
    let result = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool result is sent");
    assert_eq!(result["tool_call_id"], "call_todo");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .starts_with("Updated todo list"),
        "{result}"
    );
    let headers = &server.headers()[0];
    let auth = headers.iter().find(|(k, _)| k == "authorization").unwrap();
    assert_eq!(auth.1, "Bearer local-secret");
    assert!(
        headers.iter().all(|(k, _)| !k.starts_with("x-deepseek")),
        "{headers:?}"
    );
}
