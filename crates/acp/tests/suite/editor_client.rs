//! The client's own capabilities, against a client that really has them: an editor that keeps
//! unsaved buffers (`fs/read_text_file`, `fs/write_text_file`) and runs terminals as real
//! processes (`terminal/*`). The agent side runs dsh's real file and shell tools.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::collections::HashMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use agent_client_protocol::Agent;
use agent_client_protocol::ByteStreams;
use agent_client_protocol::Client;
use agent_client_protocol::on_receive_notification;
use agent_client_protocol::on_receive_request;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::ClientCapabilities;
use agent_client_protocol::v1::schema::ContentBlock;
use agent_client_protocol::v1::schema::CreateTerminalRequest;
use agent_client_protocol::v1::schema::CreateTerminalResponse;
use agent_client_protocol::v1::schema::FileSystemCapabilities;
use agent_client_protocol::v1::schema::InitializeRequest;
use agent_client_protocol::v1::schema::KillTerminalRequest;
use agent_client_protocol::v1::schema::KillTerminalResponse;
use agent_client_protocol::v1::schema::NewSessionRequest;
use agent_client_protocol::v1::schema::PromptRequest;
use agent_client_protocol::v1::schema::ReadTextFileRequest;
use agent_client_protocol::v1::schema::ReadTextFileResponse;
use agent_client_protocol::v1::schema::ReleaseTerminalRequest;
use agent_client_protocol::v1::schema::ReleaseTerminalResponse;
use agent_client_protocol::v1::schema::SessionNotification;
use agent_client_protocol::v1::schema::StopReason;
use agent_client_protocol::v1::schema::TerminalExitStatus;
use agent_client_protocol::v1::schema::TerminalOutputRequest;
use agent_client_protocol::v1::schema::TerminalOutputResponse;
use agent_client_protocol::v1::schema::TextContent;
use agent_client_protocol::v1::schema::WaitForTerminalExitRequest;
use agent_client_protocol::v1::schema::WaitForTerminalExitResponse;
use agent_client_protocol::v1::schema::WriteTextFileRequest;
use agent_client_protocol::v1::schema::WriteTextFileResponse;
use dsh_acp::BridgeConfig;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_tool_fs::FsContext;
use dsh_tool_fs::policy::FilePolicy;
use dsh_tool_shell::JobToolsConfig;
use dsh_tool_shell::JobsConfig;
use dsh_tool_shell::JobsRuntime;
use dsh_tool_shell::ShellContext;
use dsh_tool_shell::ShellTools;
use dsh_tool_shell::spill::SpillStore;
use dsh_tools::SandboxMode;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;
use tokio_util::compat::TokioAsyncReadCompatExt;
use tokio_util::compat::TokioAsyncWriteCompatExt;

use super::harness::TIMEOUT;
use super::harness::TestHost;

/// A real `read`/`write`/`edit` and `bash` behind the bridge, confined to `work`.
pub(super) fn factory(home: &Path, work: &Path) -> Arc<TestHost> {
    let host = TestHost::bare(home, &[]);
    let (root, registry) = (host.root.clone(), host.registry.clone());
    let fs = FsContext::new(work, FilePolicy::new(SandboxMode::WorkspaceWrite, work));
    for disposer in dsh_tool_fs::register::register_fs_tools(&registry, &root, fs).unwrap() {
        std::mem::forget(disposer);
    }
    let mut shell = ShellContext::new(work, "editor");
    shell.spill = Arc::new(SpillStore::new(home.join("spill")));
    let tools = ShellTools {
        resolve: Arc::new(move |_run| Ok(shell.clone())),
        jobs: JobsRuntime::new(JobsConfig::default()),
        job_config: JobToolsConfig::default(),
        run_in_background: false,
        sandbox: None,
    };
    for disposer in dsh_tool_shell::register_shell_tools(&registry, &root, &tools).unwrap() {
        std::mem::forget(disposer);
    }
    host
}

/// What the editor did, for the assertions.
#[derive(Default)]
struct Editor {
    /// Open buffers (unsaved): path → text.
    buffers: HashMap<PathBuf, String>,
    reads: Vec<PathBuf>,
    writes: Vec<(PathBuf, String)>,
    created: Vec<CreateTerminalRequest>,
    released: Vec<String>,
    /// Terminal id → (finished output, exit code).
    terminals: HashMap<String, (String, Option<u32>)>,
    updates: Vec<Value>,
}

type Shared = Arc<Mutex<Editor>>;

/// Runs a terminal's command to the end as a real process.
async fn run_terminal(request: &CreateTerminalRequest) -> (String, Option<u32>) {
    let mut command = tokio::process::Command::new(&request.command);
    command.args(&request.args);
    if let Some(cwd) = &request.cwd {
        command.current_dir(cwd);
    }
    for variable in &request.env {
        command.env(&variable.name, &variable.value);
    }
    let output = command.output().await.unwrap();
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (
        text,
        output.status.code().and_then(|c| u32::try_from(c).ok()),
    )
}

async fn with_editor<R: Send + 'static>(
    factory: Arc<TestHost>,
    editor: Shared,
    capabilities: ClientCapabilities,
    body: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<R, agent_client_protocol::Error> + Send,
) -> R {
    let (client_io, agent_io) = tokio::io::duplex(1 << 16);
    let (agent_read, agent_write) = tokio::io::split(agent_io);
    let server = tokio::spawn(dsh_acp::serve(
        factory.sessions(),
        BridgeConfig::default(),
        agent_read,
        agent_write,
    ));
    let (client_read, client_write) = tokio::io::split(client_io);
    let transport = ByteStreams::new(client_write.compat_write(), client_read.compat());
    let (e1, e2, e3, e4, e5, e6, e7) = (
        editor.clone(),
        editor.clone(),
        editor.clone(),
        editor.clone(),
        editor.clone(),
        editor.clone(),
        editor.clone(),
    );
    let result = Client
        .v1()
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                e1.lock()
                    .unwrap()
                    .updates
                    .push(serde_json::to_value(&notification.update).unwrap());
                Ok(())
            },
            on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, _cx| {
                let mut editor = e2.lock().unwrap();
                editor.reads.push(request.path.clone());
                match editor.buffers.get(&request.path) {
                    Some(text) => responder.respond(ReadTextFileResponse::new(text.clone())),
                    None => responder
                        .respond_with_error(agent_client_protocol::Error::new(-32002, "not open")),
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WriteTextFileRequest, responder, _cx| {
                let mut editor = e3.lock().unwrap();
                editor
                    .writes
                    .push((request.path.clone(), request.content.clone()));
                editor.buffers.insert(request.path, request.content);
                responder.respond(WriteTextFileResponse::new())
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CreateTerminalRequest, responder, _cx| {
                // Runs in the background, as a terminal does; the id answers at once.
                let id = format!("term-{}", e4.lock().unwrap().created.len() + 1);
                e4.lock().unwrap().created.push(request.clone());
                let finished = run_terminal(&request).await;
                e4.lock().unwrap().terminals.insert(id.clone(), finished);
                responder.respond(CreateTerminalResponse::new(id))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WaitForTerminalExitRequest, responder, _cx| {
                let code = e5.lock().unwrap().terminals[&*request.terminal_id.0].1;
                responder.respond(WaitForTerminalExitResponse::new(
                    TerminalExitStatus::new().exit_code(code),
                ))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: TerminalOutputRequest, responder, _cx| {
                let (output, code) = e6.lock().unwrap().terminals[&*request.terminal_id.0].clone();
                responder.respond(
                    TerminalOutputResponse::new(output, false)
                        .exit_status(TerminalExitStatus::new().exit_code(code)),
                )
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReleaseTerminalRequest, responder, _cx| {
                e7.lock()
                    .unwrap()
                    .released
                    .push(request.terminal_id.0.to_string());
                responder.respond(ReleaseTerminalResponse::new())
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |_request: KillTerminalRequest, responder, _cx| {
                responder.respond(KillTerminalResponse::new())
            },
            on_receive_request!(),
        )
        .connect_with(transport, async move |cx| {
            cx.send_request(
                InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities),
            )
            .block_task()
            .await?;
            body(cx).await
        })
        .await
        .expect("client run succeeds");
    tokio::time::timeout(TIMEOUT, server)
        .await
        .expect("bridge exits when the client leaves")
        .unwrap()
        .unwrap();
    result
}

async fn one_prompt(
    cx: &ConnectionTo<Agent>,
    cwd: &Path,
    text: &str,
) -> Result<StopReason, agent_client_protocol::Error> {
    let created = cx
        .send_request(NewSessionRequest::new(cwd))
        .block_task()
        .await?;
    let done = cx
        .send_request(PromptRequest::new(
            created.session_id,
            vec![ContentBlock::Text(TextContent::new(text))],
        ))
        .block_task()
        .await?;
    Ok(done.stop_reason)
}

fn tool_results(factory: &TestHost) -> Vec<String> {
    let requests = factory.adapter.requests();
    requests
        .last()
        .unwrap()
        .messages
        .iter()
        .filter(|m| {
            m.content
                .iter()
                .any(|b| matches!(b, dsh_protocol::ContentBlock::ToolResult { .. }))
        })
        .map(|m| serde_json::to_string(&m.content).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_tools_read_and_write_through_the_editor_under_the_file_policy() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("ws");
    std::fs::create_dir(&work).unwrap();
    let work = work.canonicalize().unwrap();
    let file = work.join("notes.txt");
    std::fs::write(&file, "on disk\n").unwrap();
    // Outside the workspace and every temp folder: workspace-write refuses it.
    let outside = PathBuf::from("/etc/dsh-editor-client-test.txt");
    let factory = factory(home.path(), &work);
    let read = json!({"file_path": "notes.txt"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("c1", "read", &read, None));
    let edit = json!({"file_path": "notes.txt", "old_string": "unsaved", "new_string": "edited"})
        .to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("c2", "edit", &edit, None));
    let escape = json!({"file_path": outside, "content": "x"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("c3", "write", &escape, None));
    factory.adapter.push_chunks(text_response("Done."));

    let editor: Shared = Arc::default();
    editor
        .lock()
        .unwrap()
        .buffers
        .insert(file.clone(), "unsaved buffer\n".into());
    let caps = ClientCapabilities::new().fs(FileSystemCapabilities::new()
        .read_text_file(true)
        .write_text_file(true));
    let cwd = work.clone();
    let stop = with_editor(factory.clone(), editor.clone(), caps, async move |cx| {
        one_prompt(&cx, &cwd, "tidy the notes").await
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);

    let results = tool_results(&factory);
    assert!(
        results[0].contains("1: unsaved buffer"),
        "the model read the buffer: {}",
        results[0]
    );
    assert!(!results[0].contains("on disk"));
    let editor = editor.lock().unwrap();
    assert_eq!(
        editor.buffers[&file], "edited buffer\n",
        "the edit landed in the editor"
    );
    assert_eq!(
        editor.writes,
        vec![(file.clone(), "edited buffer\n".to_owned())]
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "on disk\n",
        "the editor saves, not dsh"
    );
    // The policy refused the write outside the workspace before the editor was asked.
    assert!(results[2].contains("sandbox"), "{}", results[2]);
    assert!(!outside.exists());
    assert!(editor.writes.iter().all(|(p, _)| p != &outside));
    assert!(editor.reads.iter().all(|p| p.is_absolute()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_runs_in_a_client_terminal_shown_on_its_card() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("ws");
    std::fs::create_dir(&work).unwrap();
    let work = work.canonicalize().unwrap();
    let factory = factory(home.path(), &work);
    let bash = json!({"command": "printf 'from the terminal\\n'; pwd", "description": "Say where"})
        .to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_t", "bash", &bash, None));
    factory.adapter.push_chunks(text_response("Ran it."));
    let editor: Shared = Arc::default();
    let caps = ClientCapabilities::new().terminal(true);
    let cwd = work.clone();
    let stop = with_editor(factory.clone(), editor.clone(), caps, async move |cx| {
        one_prompt(&cx, &cwd, "run it").await
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let editor = editor.lock().unwrap();
    assert_eq!(editor.created.len(), 1);
    let created = &editor.created[0];
    // The client runs exactly the command dsh would have spawned, environment cleared.
    assert!(created.command.ends_with("env"), "{}", created.command);
    assert_eq!(created.args[0], "-i");
    assert_eq!(
        created.args[created.args.len() - 3..],
        [
            "bash".to_owned(),
            "-c".to_owned(),
            "printf 'from the terminal\\n'; pwd".to_owned()
        ]
    );
    assert!(
        created
            .args
            .iter()
            .all(|a| !a.starts_with("DEEPSEEK_API_KEY="))
    );
    assert_eq!(created.cwd.as_deref(), Some(work.as_path()));
    assert_eq!(editor.released, vec!["term-1".to_owned()]);
    let card: Vec<&Value> = editor
        .updates
        .iter()
        .filter(|u| u["toolCallId"] == "call_t")
        .collect();
    assert_eq!(card[0]["sessionUpdate"], "tool_call");
    assert_eq!(
        card[1]["content"],
        json!([{"type": "content", "content": {"type": "text", "text": "Say where"}},
               {"type": "terminal", "terminalId": "term-1"}])
    );
    // The completing update keeps the terminal on the card.
    assert_eq!(card.last().unwrap()["status"], "completed");
    assert_eq!(card.last().unwrap().get("content"), None);
    let results = tool_results(&factory);
    assert!(results[0].contains("from the terminal"), "{}", results[0]);
    assert!(
        results[0].contains(&*work.to_string_lossy()),
        "{}",
        results[0]
    );
}
