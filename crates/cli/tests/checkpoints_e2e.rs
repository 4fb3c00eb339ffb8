//! Checkpoints through the real binary over ACP: a three-prompt session that edits, creates
//! and deletes files with the file tools and with `bash`, then `/undo` three times back to the
//! original tree (every file's bytes) and `/redo` three times to the final one, with the
//! user's `.git` byte-identical throughout; `/rewind` over the same wire.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(
    clippy::disallowed_methods,
    reason = "tests start git and dsh directly"
)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use serde_json::json;
use support::Acp;
use support::model_server;
use support::sse;

fn tool_call(id: &str, name: &str, arguments: Value) -> String {
    sse(
        &[
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}}]}),
        ],
        "tool_calls",
    )
}

fn reply(text: &str) -> String {
    sse(&[json!({"content": text})], "stop")
}

/// Every file under `dir` with its bytes (`.git` left out unless `with_git`).
fn files(dir: &Path, with_git: bool) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if !with_git && (rel == ".git" || rel.starts_with(".git/")) {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

fn chunks_since(frames: &[Value], from: usize) -> String {
    frames[from..]
        .iter()
        .filter(|f| f["method"] == "session/update")
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|f| f["params"]["update"]["content"]["text"].as_str())
        .collect()
}

struct Session {
    acp: Acp,
    id: String,
    next: u64,
}

impl Session {
    async fn prompt(&mut self, text: &str) -> String {
        self.next += 1;
        let from = self.acp.frames.len();
        let done = self
            .acp
            .request(
                self.next,
                "session/prompt",
                json!({"sessionId": self.id, "prompt": [{"type": "text", "text": text}]}),
            )
            .await;
        assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
        chunks_since(&self.acp.frames, from)
    }
}

async fn start(work: &Path, home: &Path, url: &str) -> Session {
    let mut acp = Acp::start(work, home, url);
    acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await;
    let created = acp
        .request(2, "session/new", json!({"cwd": work, "mcpServers": []}))
        .await;
    let id = created["result"]["sessionId"].as_str().unwrap().to_owned();
    Session { acp, id, next: 10 }
}

fn workspace() -> tempfile::TempDir {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "pub fn one() -> u32 { 1 }\n").unwrap();
    std::fs::write(root.join("README.md"), "# project\n").unwrap();
    std::fs::write(root.join("old.txt"), "to be deleted\n").unwrap();
    std::fs::write(root.join("data.bin"), [0u8, 159, 146, 150, 255, 0, 1]).unwrap();
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "start"]);
    work
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_three_times_restores_the_original_tree_and_redo_three_times_the_final_one() {
    let work = workspace();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    let root = work.path();
    let (url, bodies) = model_server(vec![
        // Prompt 1: the file tools create one file and overwrite another.
        tool_call(
            "c1",
            "write",
            json!({"file_path": root.join("notes/plan.md"), "content": "step one\n"}),
        ),
        reply("Created the plan."),
        // Prompt 2: bash renames, deletes and appends.
        tool_call(
            "c2",
            "bash",
            json!({"command": "mv README.md README.txt && rm old.txt && printf 'pub fn two() {}\\n' >> src/lib.rs", "description": "Shuffle files"}),
        ),
        reply("Shuffled."),
        // Prompt 3: the file tools write a new file; bash deletes the first one's file.
        tool_call(
            "c3",
            "write",
            json!({"file_path": root.join("gen/out.txt"), "content": "generated\n"}),
        ),
        tool_call(
            "c4",
            "bash",
            json!({"command": "rm -r notes && printf '\\001\\002' > data.bin", "description": "Clean up"}),
        ),
        reply("Done."),
        // After `/rewind 2 conversation`: the fork's first prompt.
        reply("Continuing from the plan."),
    ])
    .await;
    let git_before = files(&root.join(".git"), true);
    let mut states = vec![files(root, false)];
    let mut session = start(root, home.path(), &url).await;
    for prompt in ["make a plan", "shuffle the files", "generate and clean"] {
        session.prompt(prompt).await;
        states.push(files(root, false));
    }
    let commands_listed = session.acp.frames.iter().any(|f| {
        f["params"]["update"]["sessionUpdate"] == "available_commands_update"
            && f["params"]["update"]["availableCommands"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["name"] == "undo"))
    });
    assert!(commands_listed, "ACP lists /undo");
    assert_ne!(states[0], states[1]);
    assert_ne!(states[1], states[2]);
    assert_ne!(states[2], states[3]);
    assert!(states[3].contains_key("gen/out.txt") && !states[3].contains_key("old.txt"));
    assert_eq!(files(&root.join(".git"), true), git_before);

    let text = session.prompt("/undo").await;
    assert!(
        text.starts_with("Undid turn 3 (\"generate and clean\")"),
        "{text}"
    );
    assert!(text.contains("This turn ran bash"), "{text}");
    assert_eq!(files(root, false), states[2]);
    let text = session.prompt("/undo").await;
    assert!(
        text.starts_with("Undid turn 2 (\"shuffle the files\")"),
        "{text}"
    );
    assert!(text.contains("recreated old.txt"), "{text}");
    assert_eq!(files(root, false), states[1]);
    let text = session.prompt("/undo").await;
    assert!(text.starts_with("Undid turn 1 (\"make a plan\")"), "{text}");
    assert!(text.contains("deleted notes/plan.md"), "{text}");
    assert!(!text.contains("This turn ran"), "{text}");
    assert_eq!(
        files(root, false),
        states[0],
        "the original tree, byte for byte"
    );
    assert_eq!(files(&root.join(".git"), true), git_before);
    let text = session.prompt("/undo").await;
    assert!(text.starts_with("Nothing to undo"), "{text}");

    for (n, state) in states.iter().enumerate().skip(1) {
        let text = session.prompt("/redo").await;
        assert!(text.starts_with(&format!("Redid turn {n}")), "{text}");
        assert_eq!(&files(root, false), state);
        assert_eq!(files(&root.join(".git"), true), git_before);
    }

    // `/rewind` over the same wire: the list of prompts, then the files back to the first.
    let text = session.prompt("/rewind").await;
    assert!(text.contains("1. make a plan"), "{text}");
    assert!(text.contains("3. generate and clean"), "{text}");
    let text = session.prompt("/rewind 1 files").await;
    assert!(
        text.starts_with("Rewound the files to before turn 1"),
        "{text}"
    );
    assert_eq!(files(root, false), states[0]);
    assert_eq!(files(&root.join(".git"), true), git_before);

    // The conversation: a fork before prompt 2 takes this ACP session's place; the files
    // stay; the next prompt's request holds prompt 1 and nothing after it.
    let text = session.prompt("/rewind 2 conversation").await;
    assert!(
        text.starts_with("Rewound the conversation to before prompt 2 (\"shuffle the files\"): it continues in session "),
        "{text}"
    );
    assert!(text.contains(&session.id), "names the kept session: {text}");
    let fork = text
        .split("it continues in session ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap()
        .to_owned();
    assert!(!text.contains("Error"), "{text}");
    assert_eq!(
        files(root, false),
        states[0],
        "the files were left as they are"
    );
    let requests = bodies.lock().unwrap().len();
    let text = session.prompt("what now").await;
    assert_eq!(text, "Continuing from the plan.");
    let request = bodies.lock().unwrap()[requests].to_string();
    assert!(request.contains("make a plan"), "{request}");
    assert!(request.contains("what now"), "{request}");
    assert!(
        !request.contains("shuffle the files") && !request.contains("generate and clean"),
        "the fork holds nothing from prompt 2 on: {request}"
    );
    let id = session.id.clone();
    session.acp.stop().await;

    // From the command line: the list, oldest first, then a restore to the final tree.
    let dsh = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
            .args(args)
            .current_dir(root)
            .env("DSH_HOME", home.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "dsh {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let listed: Value =
        serde_json::from_str(&dsh(&["sessions", "checkpoints", &id, "--json"])).unwrap();
    let listed = listed.as_array().unwrap();
    let ids: Vec<&str> = listed.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids.first(), Some(&"1.1"), "{ids:?}");
    assert_eq!(ids.last(), Some(&"3.end"), "{ids:?}");
    let times: Vec<u64> = listed.iter().map(|c| c["time"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert_eq!(listed[0]["prompt"], "make a plan");
    // The fork holds prompt 1's checkpoints, then its own next prompt's.
    let forked: Value =
        serde_json::from_str(&dsh(&["sessions", "checkpoints", &fork, "--json"])).unwrap();
    let mut prompts: Vec<&str> = forked
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["prompt"].as_str())
        .collect();
    prompts.dedup();
    assert_eq!(prompts, vec!["make a plan", "what now"], "{forked}");
    let text = dsh(&["sessions", "restore", &id, "3.end"]);
    assert!(
        text.starts_with("Restored the files to checkpoint 3.end"),
        "{text}"
    );
    assert_eq!(files(root, false), states[3]);
    assert_eq!(files(&root.join(".git"), true), git_before);
    let text = dsh(&["sessions", "checkpoints", &id]);
    assert!(text.lines().next().unwrap().starts_with("1.1"), "{text}");

    // The store is outside the workspace, under $DSH_HOME.
    assert!(home.path().join("checkpoints").is_dir());
    // The sandbox leaves an empty `.dsh` placeholder (a protected folder it mounts over when
    // bash runs); nothing of the store may be in it.
    assert!(
        std::fs::read_dir(root.join(".dsh")).map_or(true, |mut entries| entries.next().is_none()),
        "something was written under the workspace's .dsh"
    );
}

/// `dsh exec` with the sessions' environment; returns (status ok, stdout, stderr).
fn exec_in(root: &Path, home: &Path, url: &str, args: &[&str]) -> (bool, String, String) {
    let out = exec_command(root, home, url, args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn exec_command(root: &Path, home: &Path, url: &str, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
    for (name, _) in std::env::vars() {
        if name.starts_with("DEEPSEEK_") || name.starts_with("DSH_") {
            command.env_remove(name);
        }
    }
    command
        .arg("exec")
        .args(args)
        .current_dir(root)
        .env("DSH_HOME", home)
        .env("DEEPSEEK_BASE_URL", url)
        .env("DEEPSEEK_API_KEY", "test-key")
        .stdin(std::process::Stdio::null());
    command
}

/// Every line of every session log under `home`.
fn logged(home: &Path) -> String {
    let mut text = String::new();
    let mut stack = vec![home.join("sessions")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                text.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    text
}

/// A resumed `dsh exec` runs `/undo`, `/redo` and `/rewind` from the registry (no model
/// request); a real SIGKILL of `dsh exec "/undo"` just after the restore is logged as started
/// leaves every file either as it was or as restored, and the next resumed run finishes the
/// restore, after which `/redo` and `/undo` work as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_exec_runs_undo_redo_and_rewind_and_survives_a_sigkill_mid_restore() {
    const FILES: usize = 3000;
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    let root = work.path();
    for i in 0..FILES {
        std::fs::write(root.join(format!("f{i:04}.txt")), "orig\n").unwrap();
    }
    let (url, bodies) = model_server(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command": "for f in f*.txt; do echo changed > $f; done", "description": "Change every file"}),
        ),
        reply("Changed them."),
    ])
    .await;
    let original = files(root, false);
    let (ok, out, err) = exec_in(root, home.path(), &url, &["change every file"]);
    assert!(ok, "{out}\n{err}");
    let id = err
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .unwrap()
        .trim()
        .to_owned();
    let changed = files(root, false);
    assert!(changed.values().all(|b| b == b"changed\n"), "the turn ran");
    let requests = bodies.lock().unwrap().len();

    let resume = |task: &str| exec_in(root, home.path(), &url, &["--resume", &id, task]);
    let (ok, out, err) = resume("/rewind");
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("1. change every file"), "{out}");

    // Kill `/undo` right after its restore is logged as started; the race is retried until a
    // kill lands between the start and the end (a redo puts the files back for the next try).
    let mut interrupted = false;
    for attempt in 1..=6 {
        let before = logged(home.path())
            .matches("checkpoint/restore-started")
            .count();
        let mut child = exec_command(root, home.path(), &url, &["--resume", &id, "/undo"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while logged(home.path())
            .matches("checkpoint/restore-started")
            .count()
            == before
            && std::time::Instant::now() < deadline
            && child.try_wait().unwrap().is_none()
        {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let log = logged(home.path());
        let started = log.matches("checkpoint/restore-started").count();
        let finished = log.matches("\"checkpoint/restored\"").count();
        // Git may still be writing for a moment (its own process group outlives dsh).
        std::thread::sleep(std::time::Duration::from_millis(500));
        let now = files(root, false);
        assert_eq!(now.len(), FILES, "no file lost, none added");
        assert!(
            now.values().all(|b| b == b"orig\n" || b == b"changed\n"),
            "every file is either its old or its new self"
        );
        if started > finished {
            eprintln!("the SIGKILL landed inside the restore on try {attempt}");
            interrupted = true;
            break;
        }
        // The undo finished before the kill: put the turn back and try again.
        let (ok, out, err) = resume("/redo");
        assert!(ok && out.starts_with("Redid turn 1"), "{out}\n{err}");
    }
    assert!(interrupted, "no kill landed inside a restore in six tries");

    // The next run finishes the interrupted undo first: nothing is left to undo.
    let (ok, out, err) = resume("/undo");
    assert!(ok, "{out}\n{err}");
    assert!(out.starts_with("Nothing to undo"), "{out}");
    assert!(logged(home.path()).contains("\"recovered\":true"));
    assert_eq!(files(root, false), original, "the undo was finished");
    let (ok, out, err) = resume("/redo");
    assert!(ok && out.starts_with("Redid turn 1"), "{out}\n{err}");
    assert_eq!(files(root, false), changed);
    let (ok, out, err) = resume("/undo");
    assert!(ok && out.starts_with("Undid turn 1"), "{out}\n{err}");
    assert_eq!(files(root, false), original);

    // A failing command ends the run as an error; `/rewind N conversation` says how to resume
    // the fork.
    let (ok, _, err) = resume("/rewind 7");
    assert!(!ok, "{err}");
    assert!(
        err.contains("COMMAND_FAILED") && err.contains("there is no prompt 7"),
        "{err}"
    );
    let (ok, out, err) = resume("/rewind 1 conversation");
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("Continue there with: dsh exec --resume "),
        "{out}"
    );
    assert_eq!(
        bodies.lock().unwrap().len(),
        requests,
        "no command reached the model"
    );
}
