//! `dsh mcp serve` through the real binary, driven by a real MCP client (rmcp over the child's
//! stdio): the session's catalog is listed, `read` and `bash` run under workspace-write, and
//! calls the policy forbids are refused with `isError` and without their data.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::model::CallToolResult;
use rmcp::service::RoleClient;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::Value;
use serde_json::json;

struct Env {
    work: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            "# home-marker-7f3a\n[plugins.session-title]\nenabled = false\n",
        )
        .unwrap();
        Self {
            work: tempfile::tempdir().unwrap(),
            home,
        }
    }

    async fn serve(&self, args: &[&str]) -> RunningService<RoleClient, ()> {
        self.serve_with_key(args, "test-key").await
    }

    async fn serve_with_key(&self, args: &[&str], key: &str) -> RunningService<RoleClient, ()> {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
        for (name, _) in std::env::vars() {
            if name.starts_with("DEEPSEEK_") || name.starts_with("DSH_") {
                command.env_remove(name);
            }
        }
        command
            .args(["mcp", "serve"])
            .args(args)
            .current_dir(self.work.path())
            .env("HOME", self.home.path())
            .env("DSH_HOME", self.home.path())
            .env("DEEPSEEK_API_KEY", key)
            // No model request is made: nothing listens here.
            .env("DEEPSEEK_BASE_URL", "http://127.0.0.1:9");
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        ().serve(transport).await.unwrap()
    }
}

async fn call(client: &RunningService<RoleClient, ()>, name: &str, args: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = Some(args.as_object().unwrap().clone());
    client.call_tool(params).await.unwrap()
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_session_tools_under_its_policy() {
    let env = Env::new();
    std::fs::write(env.work.path().join("notes.txt"), "alpha\nbeta\n").unwrap();

    let client = env.serve(&["-s", "workspace-write"]).await;
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "dsh");

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in ["bash", "read", "write", "edit"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let read = tools.iter().find(|t| t.name == "read").unwrap();
    assert!(!read.description.as_deref().unwrap_or_default().is_empty());
    assert!(
        read.input_schema
            .get("properties")
            .unwrap()
            .get("file_path")
            .is_some()
    );

    // A workspace file is read through the real tool.
    let result = call(
        &client,
        "read",
        json!({"file_path": env.work.path().join("notes.txt")}),
    )
    .await;
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    assert!(text(&result).contains("beta"), "{}", text(&result));

    // bash runs in the workspace.
    let result = call(
        &client,
        "bash",
        json!({"command": "echo hi && pwd", "description": "Say hi"}),
    )
    .await;
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    let output = text(&result);
    assert!(output.contains("hi"), "{output}");
    let work = env.work.path().canonicalize().unwrap();
    assert!(output.contains(&*work.to_string_lossy()), "{output}");

    // dsh's home is outside what the policy lets a tool read: refused, and the content never
    // reaches the peer.
    let config = env.home.path().join("config.toml");
    let result = call(&client, "read", json!({"file_path": config})).await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(!text(&result).contains("home-marker-7f3a"));

    // Writing there is refused too and leaves nothing behind.
    let target = env.home.path().join("planted.txt");
    let result = call(
        &client,
        "write",
        json!({"file_path": target, "content": "x"}),
    )
    .await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(!target.exists());

    // A call that needs approval is refused: nobody can be asked over MCP.
    let escalated = std::path::Path::new("/etc/dsh-mcp-serve-escalated");
    let result = call(
        &client,
        "bash",
        json!({
            "command": format!("touch {}", escalated.display()),
            "description": "Write outside",
            "sandbox_permissions": "danger-full-access",
            "justification": "asked to"
        }),
    )
    .await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(
        text(&result).contains("no approval channel is available"),
        "{}",
        text(&result)
    );
    assert!(!escalated.exists());

    // A tool error is a result with isError (bad arguments), not a protocol failure.
    let result = call(&client, "read", json!({})).await;
    assert_eq!(result.is_error, Some(true));

    // A name the session does not offer is a protocol error.
    let mut params = CallToolRequestParams::new("no_such_tool");
    params.arguments = Some(serde_json::Map::new());
    assert!(client.call_tool(params).await.is_err());

    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_refuses_bash_writes() {
    let env = Env::new();
    let client = env.serve(&["-s", "read-only"]).await;
    let target = env.work.path().join("made.txt");
    let result = call(
        &client,
        "bash",
        json!({"command": format!("echo x > {}", target.display()), "description": "Write a file"}),
    )
    .await;
    // The command ran and failed inside the sandbox: its output says so, nothing was written.
    assert!(!target.exists(), "{}", text(&result));
    assert!(
        text(&result).contains("Read-only file system"),
        "{}",
        text(&result)
    );
    client.cancel().await.unwrap();
}

/// Only tools that can work for an MCP client are offered: never the ones that answer inside a
/// model's turn, and the delegation tools only with a model key for the children. A hidden
/// name cannot be called either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_only_tools_that_work_for_a_client() {
    let env = Env::new();
    for (key, delegation) in [("test-key", true), ("", false)] {
        let client = env.serve_with_key(&["-s", "workspace-write"], key).await;
        let tools = client.list_all_tools().await.unwrap();
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        assert!(names.iter().any(|n| n == "read"), "{names:?}");
        for never in [
            "ask_user_question",
            "exit_plan_mode",
            "create_goal",
            "update_goal",
            "ralph",
        ] {
            assert!(
                !names.iter().any(|n| n == never),
                "{never} offered: {names:?}"
            );
        }
        assert_eq!(
            names.iter().any(|n| n == "subagent"),
            delegation,
            "key {key:?}: {names:?}"
        );
        let mut params = CallToolRequestParams::new("ask_user_question".to_owned());
        params.arguments = Some(serde_json::Map::new());
        let refused = client.call_tool(params).await;
        let refused_text = match &refused {
            Ok(result) => format!("{:?} {}", result.is_error, text(result)),
            Err(error) => error.to_string(),
        };
        assert!(
            refused.is_err() || refused.as_ref().unwrap().is_error == Some(true),
            "{refused_text}"
        );
        client.cancel().await.unwrap();
    }
}
