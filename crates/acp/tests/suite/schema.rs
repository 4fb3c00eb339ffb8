//! Everything the bridge sends, checked against the ACP JSON Schema of the protocol crate in use
//! (`agent-client-protocol` 5.2.0, schema crate 1.17: generated from its own types with
//! `schemars`, as the crate's `schemars` feature publishes it).
//!
//! One rich run through the raw wire with the real file and shell tools: a client offering
//! `fs` and `terminal`, so file tools read and write through it and bash runs in its terminal,
//! a permission request, a failed call, modes, commands, a slash command, cancellation, errors;
//! then `session/load` and `session/list` on a second connection with the `terminal_output`
//! extension, replaying the cards. Every notification, agent→client request and response must
//! validate.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::collections::HashMap;
use std::path::Path;

use agent_client_protocol::v1::schema as acp;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_tools::PreDecision;
use serde_json::Value;
use serde_json::json;

use super::harness::TestHost;
use super::harness::Wire;

fn validator<T: schemars::JsonSchema>() -> jsonschema::Validator {
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// The schema of each message the agent side of ACP sends.
pub struct Schemas {
    notifications: HashMap<&'static str, jsonschema::Validator>,
    requests: HashMap<&'static str, jsonschema::Validator>,
    responses: HashMap<&'static str, jsonschema::Validator>,
    error: jsonschema::Validator,
}

impl Schemas {
    pub fn new() -> Self {
        let notifications =
            HashMap::from([("session/update", validator::<acp::SessionNotification>())]);
        let requests = HashMap::from([
            (
                "session/request_permission",
                validator::<acp::RequestPermissionRequest>(),
            ),
            ("fs/read_text_file", validator::<acp::ReadTextFileRequest>()),
            (
                "fs/write_text_file",
                validator::<acp::WriteTextFileRequest>(),
            ),
            ("terminal/create", validator::<acp::CreateTerminalRequest>()),
            ("terminal/output", validator::<acp::TerminalOutputRequest>()),
            (
                "terminal/wait_for_exit",
                validator::<acp::WaitForTerminalExitRequest>(),
            ),
            ("terminal/kill", validator::<acp::KillTerminalRequest>()),
            (
                "terminal/release",
                validator::<acp::ReleaseTerminalRequest>(),
            ),
        ]);
        let responses = HashMap::from([
            ("initialize", validator::<acp::InitializeResponse>()),
            ("authenticate", validator::<acp::AuthenticateResponse>()),
            ("session/new", validator::<acp::NewSessionResponse>()),
            ("session/load", validator::<acp::LoadSessionResponse>()),
            ("session/list", validator::<acp::ListSessionsResponse>()),
            ("session/prompt", validator::<acp::PromptResponse>()),
            (
                "session/set_mode",
                validator::<acp::SetSessionModeResponse>(),
            ),
            (
                "session/set_config_option",
                validator::<acp::SetSessionConfigOptionResponse>(),
            ),
        ]);
        Self {
            notifications,
            requests,
            responses,
            error: validator::<agent_client_protocol::Error>(),
        }
    }

    /// Problems with the frames the agent sent; `asked` maps the client's request ids to their
    /// methods (to pick each response's schema).
    pub fn check(&self, frames: &[Value], asked: &HashMap<u64, &str>) -> Vec<String> {
        let mut problems = Vec::new();
        fn check(
            problems: &mut Vec<String>,
            validator: &jsonschema::Validator,
            value: &Value,
            what: String,
        ) {
            for error in validator.iter_errors(value) {
                problems.push(format!(
                    "{what}: {error} at {} in {value}",
                    error.instance_path()
                ));
            }
        }
        for frame in frames {
            match (frame.get("method").and_then(Value::as_str), frame.get("id")) {
                (Some(method), id) => {
                    let table = if id.is_some() {
                        &self.requests
                    } else {
                        &self.notifications
                    };
                    match table.get(method) {
                        Some(validator) => check(
                            &mut problems,
                            validator,
                            &frame["params"],
                            method.to_owned(),
                        ),
                        None => {
                            problems.push(format!("no schema for sent method {method}: {frame}"))
                        }
                    }
                }
                (None, Some(id)) => {
                    let method = id.as_u64().and_then(|id| asked.get(&id)).copied();
                    if let Some(error) = frame.get("error") {
                        check(
                            &mut problems,
                            &self.error,
                            error,
                            format!("error answering {method:?}"),
                        );
                    } else if let Some(validator) = method.and_then(|m| self.responses.get(m)) {
                        check(
                            &mut problems,
                            validator,
                            &frame["result"],
                            format!("{method:?} result"),
                        );
                    } else {
                        problems.push(format!("a response to an unknown request: {frame}"));
                    }
                }
                (None, None) => problems.push(format!("neither a request nor a response: {frame}")),
            }
        }
        problems
    }
}

/// Answers the bridge's client-side requests as an editor would: buffers for `fs/*`, real
/// processes for `terminal/*`, and the permission answer `allow`.
async fn answer(
    wire: &Wire,
    frame: &Value,
    buffers: &mut HashMap<String, String>,
    outputs: &mut HashMap<String, (String, i32)>,
) {
    let id = frame["id"].clone();
    let params = &frame["params"];
    let result = match frame["method"].as_str().unwrap_or_default() {
        "session/request_permission" => {
            json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}})
        }
        "fs/read_text_file" => {
            let path = params["path"].as_str().unwrap();
            match buffers.get(path) {
                Some(text) => json!({"content": text}),
                None => {
                    wire.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32002, "message": "not open"}}));
                    return;
                }
            }
        }
        "fs/write_text_file" => {
            buffers.insert(
                params["path"].as_str().unwrap().to_owned(),
                params["content"].as_str().unwrap().to_owned(),
            );
            json!({})
        }
        "terminal/create" => {
            let args: Vec<String> = serde_json::from_value(params["args"].clone()).unwrap();
            let out = tokio::process::Command::new(params["command"].as_str().unwrap())
                .args(&args)
                .current_dir(params["cwd"].as_str().unwrap())
                .output()
                .await
                .unwrap();
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            let terminal = format!("t{}", outputs.len() + 1);
            outputs.insert(terminal.clone(), (text, out.status.code().unwrap_or(-1)));
            json!({"terminalId": terminal})
        }
        "terminal/wait_for_exit" => {
            let (_, code) = &outputs[params["terminalId"].as_str().unwrap()];
            json!({"exitCode": code})
        }
        "terminal/output" => {
            let (text, code) = &outputs[params["terminalId"].as_str().unwrap()];
            json!({"output": text, "truncated": false, "exitStatus": {"exitCode": code}})
        }
        "terminal/kill" | "terminal/release" => json!({}),
        other => panic!("unexpected client request {other}"),
    };
    wire.send(json!({"jsonrpc": "2.0", "id": id, "result": result}));
}

/// Reads frames until the response to `id`, answering client requests on the way.
async fn until(
    wire: &mut Wire,
    id: u64,
    buffers: &mut HashMap<String, String>,
    outputs: &mut HashMap<String, (String, i32)>,
) -> Value {
    loop {
        let frame = wire.next().await;
        if frame.get("method").is_some() && frame.get("id").is_some() {
            answer(wire, &frame, buffers, outputs).await;
            continue;
        }
        if frame.get("method").is_none() && frame["id"] == json!(id) {
            return frame;
        }
    }
}

fn script(factory: &TestHost, work: &Path) {
    let file = work.join("notes.txt").to_string_lossy().into_owned();
    let read = json!({"file_path": "notes.txt"}).to_string();
    factory.adapter.push_chunks(tool_call_response(
        "c_read",
        "read",
        &read,
        Some("Reading."),
    ));
    let edit = json!({"file_path": file, "old_string": "draft", "new_string": "final"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("c_edit", "edit", &edit, None));
    let bash = json!({"command": "echo needs-approval; ls", "description": "List"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("c_bash", "bash", &bash, None));
    let broken = json!({"file_path": "missing.txt"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("c_fail", "read", &broken, None));
    let odd = "{not json";
    factory
        .adapter
        .push_chunks(tool_call_response("c_odd", "mystery", odd, None));
    factory.adapter.push_chunks(text_response("All done."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_the_bridge_sends_validates_against_the_acp_schema() {
    let schemas = Schemas::new();
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("ws");
    std::fs::create_dir(&work).unwrap();
    let work = work.canonicalize().unwrap();
    std::fs::write(work.join("notes.txt"), "draft\n").unwrap();
    let factory = super::editor_client::factory(home.path(), &work);
    let _ = factory
        .registry
        .pre_execute()
        .register(&factory.root, |exec, next| {
            let asks = exec
                .arguments()
                .is_some_and(|a| a.to_string().contains("needs-approval"));
            if asks {
                Box::pin(async { Ok(PreDecision::ask(None)) })
            } else {
                next.run(exec)
            }
        });
    factory
        .commands
        .register(
            &factory.root,
            dsh_commands::CommandSpec::new(
                "hello",
                "Greets",
                |_: dsh_commands::CommandCall| async {
                    Ok(dsh_commands::CommandResult::text("hi"))
                },
            )
            .input("[name]"),
        )
        .unwrap();
    script(&factory, &work);
    let mut buffers = HashMap::from([(
        work.join("notes.txt").to_string_lossy().into_owned(),
        "draft (unsaved)\n".to_owned(),
    )]);
    let mut outputs = HashMap::new();
    let mut asked: HashMap<u64, &str> = HashMap::new();

    let mut wire = Wire::start(factory.clone());
    let mut request = |wire: &Wire, id: u64, method: &'static str, params: Value| {
        asked.insert(id, method);
        wire.request(id, method, params);
    };
    request(
        &wire,
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}}),
    );
    until(&mut wire, 1, &mut buffers, &mut outputs).await;
    request(
        &wire,
        2,
        "session/new",
        json!({"cwd": work, "mcpServers": []}),
    );
    let created = until(&mut wire, 2, &mut buffers, &mut outputs).await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    request(
        &wire,
        3,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "read-only"}),
    );
    until(&mut wire, 3, &mut buffers, &mut outputs).await;
    assert_eq!(
        created["result"]["configOptions"][0]["id"], "model",
        "{created}"
    );
    request(
        &wire,
        30,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "alternate-model"}),
    );
    let switched = until(&mut wire, 30, &mut buffers, &mut outputs).await;
    assert_eq!(
        switched["result"]["configOptions"][0]["currentValue"], "alternate-model",
        "{switched}"
    );
    request(
        &wire,
        4,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "tidy up"}, {"type": "resource_link", "name": "notes", "uri": "file:///notes.txt"}]}),
    );
    let done = until(&mut wire, 4, &mut buffers, &mut outputs).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    request(
        &wire,
        5,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "/hello you"}]}),
    );
    until(&mut wire, 5, &mut buffers, &mut outputs).await;
    request(
        &wire,
        6,
        "session/prompt",
        json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
    );
    until(&mut wire, 6, &mut buffers, &mut outputs).await;
    request(&wire, 7, "authenticate", json!({"methodId": "api-key-env"}));
    until(&mut wire, 7, &mut buffers, &mut outputs).await;
    wire.close();
    wire.task.await.unwrap().unwrap();
    let first = std::mem::take(&mut wire.seen);
    assert_eq!(
        buffers[&work.join("notes.txt").to_string_lossy().into_owned()],
        "final (unsaved)\n"
    );
    assert!(!outputs.is_empty(), "bash ran in a client terminal");

    // The editor reopens: load replays the cards, list shows the session.
    let mut wire = Wire::start(factory.clone());
    let mut asked2: HashMap<u64, &str> = HashMap::new();
    let mut request = |wire: &Wire, id: u64, method: &'static str, params: Value| {
        asked2.insert(id, method);
        wire.request(id, method, params);
    };
    request(
        &wire,
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"_meta": {"terminal_output": true}}}),
    );
    until(&mut wire, 1, &mut buffers, &mut outputs).await;
    request(&wire, 2, "session/list", json!({}));
    until(&mut wire, 2, &mut buffers, &mut outputs).await;
    request(
        &wire,
        3,
        "session/load",
        json!({"sessionId": session, "cwd": work, "mcpServers": []}),
    );
    let loaded = until(&mut wire, 3, &mut buffers, &mut outputs).await;
    assert_eq!(
        loaded["result"]["configOptions"][0]["currentValue"], "alternate-model",
        "the model switch is kept by session/load: {loaded}"
    );
    wire.close();
    wire.task.await.unwrap().unwrap();
    let second = std::mem::take(&mut wire.seen);

    let kinds: std::collections::BTreeSet<String> = first
        .iter()
        .chain(&second)
        .filter_map(|f| {
            f["params"]["update"]["sessionUpdate"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    for kind in [
        "agent_message_chunk",
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "available_commands_update",
        "current_mode_update",
    ] {
        assert!(kinds.contains(kind), "the run covers {kind}: {kinds:?}");
    }
    let methods: std::collections::BTreeSet<&str> = first
        .iter()
        .filter(|f| f.get("id").is_some())
        .filter_map(|f| f["method"].as_str())
        .collect();
    for method in [
        "session/request_permission",
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/release",
    ] {
        assert!(
            methods.contains(method),
            "the run covers {method}: {methods:?}"
        );
    }
    assert!(
        first.len() + second.len() > 40,
        "{} frames",
        first.len() + second.len()
    );
    let mut problems = schemas.check(&first, &asked);
    problems.extend(schemas.check(&second, &asked2));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // A frame that breaks the schema is caught (the check can fail).
    let bad = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": {"sessionUpdate": "tool_call", "toolCallId": "x", "title": 7}}});
    assert!(!schemas.check(&[bad], &HashMap::new()).is_empty());
}
