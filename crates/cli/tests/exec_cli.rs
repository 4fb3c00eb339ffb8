//! `dsh exec` where a codex or Claude Code user would look, through the real binary against a
//! recording chat-completions server: the task from stdin, `--resume` / `--continue` /
//! `--fork`, `-s` / `-a` / `-m` / `-C` / `-c`, `--output json`, `-o`, the session id on stderr;
//! failures that are clear and leave nothing behind; `dsh sessions list|show|rm`; diagnostics
//! that never hang on a closed pipe; `dsh tools` in every tools mode.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::process::Output;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use dsh_testkit::chat::ChatServer;
use dsh_testkit::chat::Reply;
use serde_json::Value;
use serde_json::json;

struct Env {
    work: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        // Every model request is the conversation's: no title side request.
        std::fs::write(
            home.path().join("config.toml"),
            "[plugins.session-title]\nenabled = false\n",
        )
        .unwrap();
        Self {
            work: tempfile::tempdir().unwrap(),
            home,
        }
    }

    fn command(&self, url: &str, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_dsh"));
        for (name, _) in std::env::vars() {
            if name.starts_with("DEEPSEEK_") || name.starts_with("DSH_") {
                command.env_remove(name);
            }
        }
        command
            .args(args)
            .current_dir(self.work.path())
            .env("HOME", self.home.path())
            .env("DSH_HOME", self.home.path())
            .env("DEEPSEEK_API_KEY", "test-key")
            .env("DEEPSEEK_BASE_URL", url);
        command
    }

    fn run(&self, url: &str, args: &[&str]) -> Output {
        self.command(url, args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn run_with_stdin(&self, url: &str, args: &[&str], stdin: &str) -> Output {
        let mut child = self
            .command(url, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    fn sessions(&self) -> usize {
        fn walk(dir: &Path) -> usize {
            std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| {
                    let path = e.path();
                    if path.is_dir() {
                        walk(&path)
                    } else {
                        usize::from(path.extension().is_some_and(|x| x == "jsonl"))
                    }
                })
                .sum()
        }
        walk(&self.home.path().join("sessions"))
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The session id `dsh exec` printed on stderr.
fn session_of(out: &Output) -> String {
    stderr(out)
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .unwrap_or_else(|| panic!("no session line: {}", stderr(out)))
        .to_owned()
}

fn user_texts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_comes_from_stdin_and_json_output_sums_it_up() {
    let server = ChatServer::start(vec![Reply::text("from a pipe"), Reply::text("dash too")])
        .await
        .unwrap();
    let env = Env::new();
    let last = env.work.path().join("last.txt");
    let out = env.run_with_stdin(
        &server.url(),
        &["exec", "--output", "json", "-o", last.to_str().unwrap()],
        "summarise the pipe\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let id = session_of(&out);
    let result: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(result["sessionId"], json!(id));
    assert_eq!(result["status"], "completed");
    assert_eq!(result["output"], "from a pipe");
    assert_eq!(std::fs::read_to_string(&last).unwrap(), "from a pipe");
    assert!(user_texts(&server.requests()[0])[0].contains("summarise the pipe"));

    let out = env.run_with_stdin(&server.url(), &["exec", "-"], "the dash form");
    assert_eq!(stdout(&out), "dash too\n", "{}", stderr(&out));
    assert!(user_texts(&server.requests()[1])[0].contains("the dash form"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_continue_and_fork_pick_the_session() {
    let server = ChatServer::start(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
        Reply::text("four"),
    ])
    .await
    .unwrap();
    let env = Env::new();
    let url = server.url();
    let first = env.run(&url, &["exec", "remember apples"]);
    let id = session_of(&first);
    let resumed = env.run(&url, &["exec", "--resume", &id, "what did I say?"]);
    assert_eq!(session_of(&resumed), id, "{}", stderr(&resumed));
    let continued = env.run(&url, &["exec", "--continue", "and then?"]);
    assert_eq!(session_of(&continued), id);
    // A unique prefix names the session too.
    let forked = env.run(&url, &["exec", "--fork", &id[..16], "in a fork"]);
    let fork = session_of(&forked);
    assert_ne!(fork, id);
    let requests = server.requests();
    let said = |i: usize| user_texts(&requests[i]).join("\n");
    assert!(
        said(1).contains("remember apples") && said(1).contains("what did I say?"),
        "resume carries the history"
    );
    assert!(said(2).contains("what did I say?") && said(2).contains("and then?"));
    let fork = said(3);
    for earlier in [
        "remember apples",
        "what did I say?",
        "and then?",
        "in a fork",
    ] {
        assert!(
            fork.contains(earlier),
            "the fork starts from the whole conversation: {fork}"
        );
    }
    assert_eq!(env.sessions(), 2);
    let bad = env.run(&url, &["exec", "--resume", "session-nope", "x"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("no stored session session-nope"),
        "{}",
        stderr(&bad)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_override_the_configuration() {
    let server = ChatServer::start(vec![
        Reply::text("ok"),
        Reply::text("ok"),
        Reply::text("ok"),
    ])
    .await
    .unwrap();
    let env = Env::new();
    let url = server.url();
    let sub = env.work.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let out = env.run(
        &url,
        &[
            "exec",
            "-m",
            "deepseek-v4-pro",
            "-s",
            "read-only",
            "-C",
            sub.to_str().unwrap(),
            "hi",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.run(
        &url,
        &[
            "exec",
            "-c",
            "model.name=deepseek-v4-flash",
            "-a",
            "never",
            "hi",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let requests = server.requests();
    assert_eq!(requests[0]["model"], "deepseek-v4-pro");
    let first = requests[0].to_string();
    assert!(
        first.contains("read-only"),
        "the sandbox is read-only: {first}"
    );
    assert!(
        first.contains(&*sub.canonicalize().unwrap().to_string_lossy()),
        "-C is the cwd"
    );
    assert_eq!(requests[1]["model"], "deepseek-v4-flash");
    assert!(
        requests[1]
            .to_string()
            .contains("Approval prompts are disabled"),
        "-a never reaches the runtime context"
    );
    let bad = env.run(&url, &["exec", "-c", "novalue", "hi"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("-c novalue: expected key=value"),
        "{}",
        stderr(&bad)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_clear_exit_non_zero_and_leave_no_session() {
    let env = Env::new();
    let missing = env.run("http://127.0.0.1:9", &["exec", "-C", "/no/such/dir", "hi"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        stderr(&missing),
        "dsh: --cwd /no/such/dir: no such directory\n"
    );
    assert_eq!(env.sessions(), 0);

    let started = Instant::now();
    let malformed = env.run("ht tp://bad url", &["exec", "hi"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "fails at once, not after retries"
    );
    assert!(!malformed.status.success());
    assert!(
        stderr(&malformed).contains(
            "base_url `ht tp://bad url` (set by DEEPSEEK_BASE_URL) is not a valid http(s) URL"
        ),
        "{}",
        stderr(&malformed)
    );
    assert_eq!(env.sessions(), 0);

    let no_key = env
        .command("http://127.0.0.1:9", &["exec", "hi"])
        .env("DEEPSEEK_API_KEY", "")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(no_key.status.code(), Some(1));
    let text = stderr(&no_key);
    assert!(text.contains("dsh: MISSING_CREDENTIAL:"), "{text}");
    assert!(
        text.contains("export DEEPSEEK_API_KEY=<your key>"),
        "{text}"
    );
    assert!(text.contains("model.api_key_env"), "{text}");
    assert!(!text.contains("Models page"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_exec_cannot_ask_for_names_the_flag_that_allows_it() {
    if !Path::new("/usr/bin/bwrap").exists() {
        eprintln!("SKIPPED: bubblewrap is not installed");
        return;
    }
    let arguments = json!({
        "command": "touch /etc/dsh-exec-escalated",
        "description": "Write outside",
        "sandbox_permissions": "danger-full-access",
        "justification": "asked to"
    });
    let server = ChatServer::start(vec![
        Reply::tool_call("call_x", "bash", arguments),
        Reply::text("It was refused."),
    ])
    .await
    .unwrap();
    let env = Env::new();
    let out = env.run(
        &server.url(),
        &["exec", "-s", "workspace-write", "escalate"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains("dsh exec cannot ask for approval")
            && text.contains("`-s danger-full-access`"),
        "{text}"
    );
    assert!(!text.contains("no approval service is composed"), "{text}");
    assert!(!Path::new("/etc/dsh-exec-escalated").exists());
    let tool_result = server.requests()[1].to_string();
    assert!(
        tool_result.contains("no approval channel is available"),
        "{tool_result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_list_show_and_rm() {
    let server = ChatServer::start(vec![Reply::text("Pears are **green**.")])
        .await
        .unwrap();
    let env = Env::new();
    let url = server.url();
    let out = env.run(&url, &["exec", "tell me about pears"]);
    let id = session_of(&out);
    let list = env.run(&url, &["sessions", "list"]);
    let table = stdout(&list);
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("ID") && header.contains("ACTIVE") && header.contains("TURNS"));
    let row = lines.next().unwrap();
    assert!(row.starts_with(&id), "the full id: {row}");
    assert!(
        row.contains("just now") && row.contains("tell me about pears"),
        "{row}"
    );
    let folder = env.work.path().canonicalize().unwrap();
    assert!(
        row.contains(folder.file_name().unwrap().to_str().unwrap()),
        "{row}"
    );

    let show = env.run(&url, &["sessions", "show", &id]);
    let transcript = stdout(&show);
    assert!(transcript.contains("› tell me about pears"), "{transcript}");
    assert!(transcript.contains("Pears are green."), "{transcript}");
    assert!(!transcript.contains('\u{1b}'), "plain text for a pipe");
    let json = env.run(&url, &["sessions", "show", "--json", &id]);
    let first: Value = serde_json::from_str(stdout(&json).lines().next().unwrap()).unwrap();
    assert!(first["type"].is_string());

    let rm = env.run(&url, &["sessions", "rm", &id]);
    assert_eq!(stdout(&rm), format!("removed session {id}\n"));
    assert_eq!(env.sessions(), 0);
    let gone = env.run(&url, &["sessions", "show", &id]);
    assert!(!gone.status.success());
}

#[test]
fn diagnostics_have_no_colours_off_a_terminal_and_a_closed_pipe_never_hangs() {
    let env = Env::new();
    // Unreachable server: dsh logs and retries; the reader goes away after the first line.
    let mut child = env
        .command("http://127.0.0.1:9", &["exec", "hi"])
        .env("DSH_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    assert!(!first.contains('\u{1b}'), "no ANSI colours: {first:?}");
    drop(reader);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(1), "a clean failure, not a panic");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "dsh hung after its stderr closed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Listing tools talks to no server, so it must not set up TLS: building an HTTPS client reads
/// the whole certificate store (#18 item 4). The store here is a FIFO nobody writes, so a
/// `dsh tools` that opens it blocks until the deadline.
#[test]
fn tools_never_opens_the_certificate_store() {
    let env = Env::new();
    let fifo = env.home.path().join("certs.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let mut child = env
        .command("https://api.deepseek.com", &["tools"])
        .env("SSL_CERT_FILE", &fifo)
        .env("SSL_CERT_DIR", &fifo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("`dsh tools` blocked opening the certificate store");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "dsh tools failed: {status}");
}

#[test]
fn tools_lists_exactly_what_the_model_is_offered_in_every_mode() {
    let env = Env::new();
    let names = |mode: &str| -> Vec<String> {
        let out = env
            .command("http://127.0.0.1:9", &["tools"])
            .env("DSH_TOOLS_MODE", mode)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect()
    };
    assert_eq!(
        names("code"),
        ["run_code"],
        "code mode offers run_code alone"
    );
    let native = names("native");
    assert!(native.contains(&"bash".to_owned()) && native.contains(&"read".to_owned()));
    assert!(!native.contains(&"run_code".to_owned()));
    let both = names("both");
    assert!(both.contains(&"run_code".to_owned()) && both.contains(&"bash".to_owned()));
}

#[test]
fn tools_lists_mcp_tools_as_the_model_gets_them() {
    let repo = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let server = repo.join("tests/mcp-server/node_modules/.bin/mcp-server-everything");
    if !server.exists() {
        eprintln!(
            "SKIPPED: {} is not installed (npm ci --prefix tests/mcp-server)",
            server.display()
        );
        return;
    }
    let env = Env::new();
    std::fs::write(
        env.home.path().join("config.toml"),
        format!(
            "[plugins.session-title]\nenabled = false\n\n[[mcp.servers]]\nname = \"everything\"\ncommand = \"{}\"\n",
            server.canonicalize().unwrap().display()
        ),
    )
    .unwrap();
    for (mode, expect_mcp) in [("native", true), ("code", false)] {
        let out = env
            .command("http://127.0.0.1:9", &["tools"])
            .env("DSH_TOOLS_MODE", mode)
            .output()
            .unwrap();
        let listed = stdout(&out);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            listed
                .lines()
                .any(|l| l.starts_with("mcp__everything__echo")),
            expect_mcp,
            "{mode}: {listed}"
        );
    }
}

/// A server that answers every request with `status` and a JSON error body.
async fn status_server(status: u16) -> String {
    use tokio::io::AsyncReadExt;
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                // Read the request head and its body, then answer.
                let mut seen = Vec::new();
                let mut buffer = [0u8; 8192];
                loop {
                    let Ok(n) = stream.read(&mut buffer).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&seen).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if seen.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let body =
                    format!(r#"{{"error":{{"message":"status {status} from the test server"}}}}"#);
                let reply = format!(
                    "HTTP/1.1 {status} Test\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    url
}

/// A refused connection, no key, a 404 and a 500: the model answered nothing, so stdout stays
/// empty, `-o` is not created, stderr has no tracing lines, and no session is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_fails_before_the_model_answers_leaves_nothing_behind() {
    let not_found = status_server(404).await;
    let server_error = status_server(500).await;
    let env = Env::new();
    let last = env.work.path().join("last.txt");
    let last_arg = last.to_str().unwrap().to_owned();
    let cases: Vec<(&str, String, bool)> = vec![
        ("no key", "http://127.0.0.1:9".to_owned(), false),
        ("refused", "http://127.0.0.1:9".to_owned(), true),
        ("404", not_found.clone(), true),
        ("500", server_error, true),
    ];
    for (name, url, with_key) in cases {
        let mut command = env.command(&url, &["exec", "-o", &last_arg, "hi"]);
        if !with_key {
            command.env("DEEPSEEK_API_KEY", "");
        }
        let out = command.stdin(Stdio::null()).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert_eq!(stdout(&out), "", "{name}: nothing on stdout");
        assert!(!last.exists(), "{name}: -o is not created empty");
        assert!(
            !err.contains(" WARN ") && !err.contains("dsh_llm::"),
            "{name}: no tracing lines unless DSH_LOG asks: {err}"
        );
        assert!(err.contains("was not kept"), "{name}: {err}");
        assert_eq!(env.sessions(), 0, "{name}: no session is left behind");
    }

    // stream-json's result line says how the run ended, like --output json.
    let out = env.run(&not_found, &["exec", "--output", "stream-json", "hi"]);
    let result: Value = serde_json::from_str(stdout(&out).lines().last().unwrap()).unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["status"], "error", "{result}");
    assert_eq!(result["error"]["code"], "HTTP_404", "{result}");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("status 404"),
        "{result}"
    );
    assert_eq!(env.sessions(), 0);
}

/// `--continue` skips a session in which the model never answered (one an older dsh, or a
/// crash, left behind), and a bare-uuid prefix finds an exec (`session-<uuid>`) id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_never_resumes_an_unanswered_session_and_either_id_form_resumes() {
    let server = ChatServer::start(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
    ])
    .await
    .unwrap();
    let env = Env::new();
    let url = server.url();
    let first = env.run(&url, &["exec", "remember apples"]);
    let id = session_of(&first);
    // A newer session of the same folder with a user message and no answer.
    let answered_dir = std::fs::read_dir(env.home.path().join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let stale_id = "session-00000000-0000-4000-8000-000000000000";
    let stale_dir = answered_dir.join(stale_id);
    std::fs::create_dir_all(&stale_dir).unwrap();
    let cwd = std::fs::canonicalize(env.work.path()).unwrap();
    let header = json!({"type": "session", "version": 0, "id": stale_id,
        "createdAt": 4_000_000_000_000u64, "cwd": cwd, "delegationDepth": 0});
    let user = json!({"type": "user/message", "seq": 0, "time": 4_000_000_000_000u64,
        "data": {"content": [{"type": "text", "text": "never answered"}], "source": {"kind": "user"},
        "role": "user", "id": "u1"}, "surfaceOp": "append"});
    std::fs::write(
        stale_dir.join("session.jsonl"),
        format!("{header}\n{user}\n"),
    )
    .unwrap();

    let continued = env.run(&url, &["exec", "--continue", "and then?"]);
    assert_eq!(session_of(&continued), id, "{}", stderr(&continued));
    let bare = &id["session-".len().."session-".len() + 8];
    let resumed = env.run(&url, &["exec", "--resume", bare, "more?"]);
    assert_eq!(session_of(&resumed), id, "{}", stderr(&resumed));
    let requests = server.requests();
    let said = user_texts(&requests[1]).join("\n");
    assert!(said.contains("remember apples"), "{said}");
    assert!(!said.contains("never answered"), "{said}");
}

/// `[plugins.web-search] fetch` (on by default) points the prompt to `web_fetch` only while
/// the `web` plugin offers it: with `web` off, nothing the model reads names `web_fetch`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_search_prompt_names_web_fetch_only_when_it_is_offered() {
    for web in [false, true] {
        let server = ChatServer::start(vec![Reply::text("ok")]).await.unwrap();
        let env = Env::new();
        let config = env.home.path().join("config.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "[plugins.web]\nenabled = {web}\n[plugins.web-search]\nfetch = true\n[plugins.web-search.deepseek]\napi_key = \"search-key\"\nbase_url = \"http://127.0.0.1:9\"\n"
        ));
        std::fs::write(&config, text).unwrap();
        let out = env.run(&server.url(), &["exec", "hi"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let request = server.requests()[0].to_string();
        assert!(
            request.contains("call web_search"),
            "web_search is offered: {request}"
        );
        assert_eq!(
            request.contains("pass its URL to web_fetch"),
            web,
            "web = {web}: {request}"
        );
        if !web {
            assert!(!request.contains("web_fetch"), "{request}");
        }
    }
}

/// `-m NAME` is checked against the model catalog before anything is created, as `/model` is;
/// `-c model.name=NAME` (which the error and `--help` name) uses an unlisted model on purpose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlisted_model_is_refused_unless_asked_for_on_purpose() {
    let server = ChatServer::start(vec![Reply::text("ok")]).await.unwrap();
    let env = Env::new();
    let url = server.url();
    let typo = env.run(&url, &["exec", "-m", "deepseek-v4-flsh", "hi"]);
    assert_eq!(typo.status.code(), Some(1), "{}", stderr(&typo));
    let text = stderr(&typo);
    assert!(
        text.contains("-m deepseek-v4-flsh: not a model of the catalog")
            && text.contains("deepseek-v4-flash")
            && text.contains("-c model.name=deepseek-v4-flsh"),
        "{text}"
    );
    assert_eq!(stdout(&typo), "");
    assert_eq!(env.sessions(), 0);
    assert!(server.requests().is_empty(), "no request was sent");

    let on_purpose = env.run(&url, &["exec", "-c", "model.name=my-own-model", "hi"]);
    assert!(on_purpose.status.success(), "{}", stderr(&on_purpose));
    assert_eq!(server.requests()[0]["model"], "my-own-model");

    let help = env.run(&url, &["exec", "--help"]);
    assert!(
        stdout(&help).contains("-c model.name=NAME"),
        "{}",
        stdout(&help)
    );
}

/// The advice for a refused escalation ("run with `-s danger-full-access`") works: in such a
/// session the model's request for that same mode simply runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_escalation_advice_works_a_request_for_the_sessions_own_mode_runs() {
    let arguments = json!({
        "command": "echo ran-under-the-same-mode",
        "description": "Same mode",
        "sandbox_permissions": "danger-full-access",
        "justification": "asked to"
    });
    let server = ChatServer::start(vec![
        Reply::tool_call("call_same", "bash", arguments),
        Reply::text("done"),
    ])
    .await
    .unwrap();
    let env = Env::new();
    let out = env.run(
        &server.url(),
        &["exec", "-s", "danger-full-access", "do it"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let tool_result = server.requests()[1].to_string();
    assert!(
        tool_result.contains("ran-under-the-same-mode")
            && !tool_result.contains("not strictly wider"),
        "{tool_result}"
    );
}

/// `dsh sessions show` is a printout: every tool card whole, and no TUI key hints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_show_prints_whole_cards_without_tui_hints() {
    let server = ChatServer::start(vec![
        Reply::tool_call(
            "call_seq",
            "bash",
            json!({"command": "seq 1 80", "description": "Count"}),
        ),
        Reply::text("counted"),
    ])
    .await
    .unwrap();
    let env = Env::new();
    let url = server.url();
    let out = env.run(&url, &["exec", "-s", "danger-full-access", "count"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = session_of(&out);
    let show = env.run(&url, &["sessions", "show", &id]);
    let transcript = stdout(&show);
    assert!(!transcript.contains("ctrl-o"), "{transcript}");
    for n in 1..=80 {
        let wanted = n.to_string();
        assert!(
            transcript
                .lines()
                .any(|l| l.split_whitespace().last() == Some(wanted.as_str())),
            "line {n} of the output is shown: {transcript}"
        );
    }
}

/// A failed run that left no session behind does not name one in its result: `--output json`
/// and `stream-json`'s result line say `"sessionId": null` and `"sessionKept": false`, while a
/// run that is kept names its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_runs_result_names_no_session_it_did_not_keep() {
    let not_found = status_server(404).await;
    let env = Env::new();
    for output in ["json", "stream-json"] {
        let out = env.run(&not_found, &["exec", "--output", output, "hi"]);
        assert_eq!(out.status.code(), Some(1), "{output}: {}", stderr(&out));
        let text = stdout(&out);
        let result: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(result["status"], "error", "{output}: {result}");
        assert_eq!(result["sessionId"], Value::Null, "{output}: {result}");
        assert_eq!(result["sessionKept"], false, "{output}: {result}");
        assert_eq!(env.sessions(), 0, "{output}");
    }
    let server = ChatServer::start(vec![Reply::text("kept")]).await.unwrap();
    let out = env.run(&server.url(), &["exec", "--output", "json", "hi"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(result["sessionId"], session_of(&out), "{result}");
    assert_eq!(env.sessions(), 1);
}

/// The text of the newest `tool` message of a chat-completions request.
fn last_tool_result(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .unwrap_or_else(|| panic!("no tool message: {request}"))
}

/// Under `-a never` every call that needs approval (a bash escalation, a file tool writing
/// outside the workspace, a hook's `ask`) is refused by policy, and the model is told so and
/// which setting refused it: never that "the user rejected" it. The refusal is audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_approval_never_the_model_hears_refused_by_policy_not_the_user() {
    let env = Env::new();
    let outside = env.home.path().join("outside.txt");
    let server = ChatServer::start(vec![
        Reply::tool_call(
            "call_bash",
            "bash",
            json!({"command": "touch /etc/dsh-never-escalated", "description": "Write outside",
                   "sandbox_permissions": "danger-full-access", "justification": "asked to"}),
        ),
        Reply::tool_call(
            "call_write",
            "write",
            json!({"file_path": outside, "content": "x",
                   "sandbox_permissions": "danger-full-access", "justification": "asked to"}),
        ),
        Reply::tool_call("call_glob", "glob", json!({"pattern": "*"})),
        Reply::text("done"),
    ])
    .await
    .unwrap();
    let hook = env.work.path().join("ask.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncat >/dev/null\necho '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"ask\",\"permissionDecisionReason\":\"a human must look\"}}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let hooks = env.home.path().join("hooks.json");
    std::fs::write(
        &hooks,
        json!({"hooks": {"PreToolUse": [{"matcher": "glob", "hooks": [{"type": "command", "command": hook}]}]}})
            .to_string(),
    )
    .unwrap();
    let config = env.home.path().join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[plugins.hooks-claude-code]\nconfig_path = \"{}\"\n",
        hooks.display()
    ));
    std::fs::write(&config, text).unwrap();
    let out = env.run(
        &server.url(),
        &["exec", "-s", "workspace-write", "-a", "never", "try"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!Path::new("/etc/dsh-never-escalated").exists());
    assert!(!outside.exists());
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{}", stderr(&out));
    for (call, request) in ["bash", "write", "glob"].iter().zip(&requests[1..]) {
        let result = last_tool_result(request);
        assert!(
            result.contains("refused by policy")
                && result.contains("approval policy is \\\"never\\\"")
                && result.contains("-a never"),
            "{call}: {result}"
        );
        assert!(!result.contains("user rejected"), "{call}: {result}");
    }
    let err = stderr(&out);
    assert!(!err.contains("cannot ask"), "nobody was asked: {err}");
    let id = session_of(&out);
    let show = env.run(&server.url(), &["sessions", "show", "--json", &id]);
    let decided: Vec<Value> = stdout(&show)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "approval/decided")
        .collect();
    assert_eq!(decided.len(), 3, "each refusal is audited: {decided:?}");
}

/// A server that answers every request `200` with `content_type` and `body` (not an event
/// stream).
async fn plain_server(content_type: &'static str, body: &'static str) -> String {
    use tokio::io::AsyncReadExt;
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 65536];
                let _ = stream.read(&mut buffer).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    url
}

/// Errors from the model server say what to do: a 404 names the base URL and where it was set
/// (`DEEPSEEK_BASE_URL`, or the config file and line); a body that is not an event stream says
/// what came back (its content type and first bytes, escaped) and is not retried; a malformed
/// URL names the variable or key it came from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_server_errors_say_what_to_do_and_where_the_url_was_set() {
    let env = Env::new();
    let not_found = status_server(404).await;
    let out = env.run(&not_found, &["exec", "hi"]);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("check the base URL `{not_found}`"))
            && err.contains("set by DEEPSEEK_BASE_URL"),
        "{err}"
    );

    // The same 404 with the URL from the user's config file: the file and line are named.
    let config = env.home.path().join("config.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("[model]\nbase_url = \"{not_found}\"\n\n{before}"),
    )
    .unwrap();
    let out = env
        .command("", &["exec", "hi"])
        .env_remove("DEEPSEEK_BASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "set by [model] base_url in {}:2",
            config.display()
        )),
        "{err}"
    );
    std::fs::write(&config, &before).unwrap();

    let html = plain_server("text/html", "<html>\n<body>Welcome to nginx!</body></html>").await;
    let started = Instant::now();
    let out = env.run(&html, &["exec", "hi"]);
    let err = stderr(&out);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "not retried: {err}"
    );
    assert!(
        err.contains("not an event stream")
            && err.contains("text/html")
            && err.contains("<html>\\n<body>Welcome to nginx!"),
        "{err}"
    );
    assert!(
        err.contains(&format!("check the base URL `{html}`")),
        "{err}"
    );

    let malformed = env.run("ht tp://bad url", &["exec", "hi"]);
    let err = stderr(&malformed);
    assert!(
        err.contains(
            "base_url `ht tp://bad url` (set by DEEPSEEK_BASE_URL) is not a valid http(s) URL"
        ),
        "{err}"
    );
    assert_eq!(env.sessions(), 0);
}

/// One id format everywhere: a prefix of either form (`session-<uuid>` as `dsh exec` makes, or
/// the bare uuid ACP makes) finds a session of either form in `dsh sessions show`, `export`,
/// `checkpoints` and `dsh exec --resume`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn either_id_form_finds_a_session_of_either_form() {
    let server = ChatServer::start(vec![Reply::text("noted"), Reply::text("again")])
        .await
        .unwrap();
    let env = Env::new();
    let url = server.url();
    let exec_id = session_of(&env.run(&url, &["exec", "remember plums"]));
    let uuid = exec_id.strip_prefix("session-").unwrap().to_owned();
    // The same conversation stored under an ACP-form (bare uuid) id.
    let acp_uuid = "7d0c1a52-9f3e-4b6a-8c21-5e4f3a2b1c0d";
    let folder = std::fs::read_dir(env.home.path().join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let log = std::fs::read_to_string(folder.join(&exec_id).join("session.jsonl")).unwrap();
    let acp_dir = folder.join(acp_uuid);
    std::fs::create_dir_all(&acp_dir).unwrap();
    std::fs::write(
        acp_dir.join("session.jsonl"),
        log.replacen(&exec_id, acp_uuid, 1),
    )
    .unwrap();

    for (text, id) in [
        (uuid[..8].to_owned(), exec_id.as_str()),
        (exec_id[..16].to_owned(), exec_id.as_str()),
        (format!("session-{}", &acp_uuid[..8]), acp_uuid),
        (acp_uuid[..8].to_owned(), acp_uuid),
    ] {
        let show = env.run(&url, &["sessions", "show", &text]);
        assert!(show.status.success(), "show {text}: {}", stderr(&show));
        assert!(stdout(&show).contains("remember plums"), "show {text}");
        let export = env.run(&url, &["sessions", "export", &text, "-o", "-"]);
        assert!(
            export.status.success(),
            "export {text}: {}",
            stderr(&export)
        );
        assert!(export.stdout.starts_with(b"PK"), "export {text}: a zip");
        let checkpoints = env.run(&url, &["sessions", "checkpoints", &text, "--json"]);
        assert!(
            checkpoints.status.success(),
            "checkpoints {text}: {}",
            stderr(&checkpoints)
        );
        // The default archive is named after the session the text found.
        let named = env.run(&url, &["sessions", "export", &text]);
        assert!(
            stderr(&named).contains(&format!("{id}.zip")),
            "{text} finds {id}: {}",
            stderr(&named)
        );
    }
    let resumed = env.run(
        &url,
        &[
            "exec",
            "--resume",
            &format!("session-{}", &acp_uuid[..8]),
            "and?",
        ],
    );
    assert_eq!(session_of(&resumed), acp_uuid, "{}", stderr(&resumed));
}
