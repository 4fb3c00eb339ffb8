//! The published Python SDK (`deepseek-harness-sdk` 0.2.1rc2, from PyPI, in a venv without its
//! bundled runtime) drives the real `dsh` binary against the replay model server:
//! `tests/sdk/published_client.py`. `.ci/run` installs the venv at
//! `$HOME/.cache/dsh-sdk-venv` (`DSH_SDK_VENV` names another); in CI (`CI=true`) a missing
//! venv fails the test, elsewhere it is skipped with a note.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::path::PathBuf;
use std::process::Command;

use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use serde_json::Value;
use serde_json::json;

fn venv_python() -> Option<PathBuf> {
    let venv = std::env::var_os("DSH_SDK_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/dsh-sdk-venv"))
        })?;
    let python = venv.join("bin/python");
    let installed = python.is_file()
        && Command::new(&python)
            .args(["-c", "import deepseek_harness"])
            .status()
            .is_ok_and(|s| s.success());
    if installed {
        return Some(python);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the SDK venv is missing in CI: {} (see .ci/run)",
        venv.display()
    );
    eprintln!(
        "SKIPPED: the published SDK is not installed in {}; run: python3 -m venv {0} && {0}/bin/pip install --no-deps deepseek-harness-sdk==0.2.1rc2 pydantic pydantic-core annotated-types typing-extensions typing-inspection",
        venv.display()
    );
    None
}

fn response(
    session: usize,
    index: usize,
    content: Option<&str>,
    call: Option<(&str, Value)>,
) -> Value {
    let mut entry = json!({"session": session, "route": "main", "index": index, "kind": "response",
        "usage": {"prompt_tokens": 5, "completion_tokens": 5}});
    if let Some(text) = content {
        entry["content"] = json!(text);
        entry["finish_reason"] = json!("stop");
    }
    if let Some((name, args)) = call {
        entry["tool_calls"] = json!([{"id": format!("call_{session}_{index}"), "name": name, "arguments": args.to_string()}]);
        entry["finish_reason"] = json!("tool_calls");
    }
    entry
}

#[test]
fn the_published_python_client_drives_dsh() {
    let Some(python) = venv_python() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    // A fresh, empty DSH_HOME but for the test's settings (no title side requests, tools
    // unconfined so the replayed command runs anywhere).
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.session-title]\nenabled = false\n\n[plugins.sandbox]\nmode = \"danger-full-access\"\n",
    )
    .unwrap();
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "headless", "name": "sdk-python",
        "sessions": [
            {"session": 0, "first_user_text": "List the marker."},
            {"session": 1, "first_user_text": "First of two."},
            {"session": 2, "first_user_text": "Delegate the check."},
            {"session": 3, "first_user_text": "Check it."},
            {"session": 4, "first_user_text": "This one fails."}
        ]
    }))
    .unwrap();
    let entries = vec![
        response(
            0,
            0,
            None,
            Some((
                "bash",
                json!({"command": "echo SDK-MARKER", "description": "echo"}),
            )),
        ),
        response(0, 1, Some("The marker is SDK-MARKER."), None),
        response(1, 0, Some("One."), None),
        response(1, 1, Some("Two."), None),
        response(1, 2, Some("Three."), None),
        response(
            2,
            0,
            None,
            Some((
                "subagent",
                json!({"description": "Check", "prompt": "Check it.", "run_in_background": false}),
            )),
        ),
        response(2, 1, Some("PARENT_DONE"), None),
        response(3, 0, Some("CHILD_DONE"), None),
        json!({"session": 4, "route": "main", "index": 0, "kind": "error",
               "error": {"status": 400, "message": "replayed bad request"}}),
    ];
    let model: Vec<ModelEntry> = entries
        .into_iter()
        .map(|e| serde_json::from_value(e).unwrap())
        .collect();
    let scenario = Scenario::from_parts(spec, model);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ReplayServer::start(
            &scenario,
            ([127, 0, 0, 1], 0).into(),
            None,
        ))
        .unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/published_client.py");
    let out = Command::new(python)
        .arg(script)
        .current_dir(work.path())
        .env("SDK_TEST_DSH", env!("CARGO_BIN_EXE_dsh"))
        .env("SDK_TEST_HOME", home.path())
        .env("SDK_TEST_WORK", work.path())
        .env("SDK_TEST_URL", server.url())
        .env_remove("DSH_HOME")
        .env_remove("DSH_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("published client: all checks passed"),
        "{stdout}\n{stderr}"
    );
    assert!(server.unconsumed().is_empty(), "{:?}", server.unconsumed());
}
