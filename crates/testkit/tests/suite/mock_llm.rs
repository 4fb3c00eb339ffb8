//! The `dsh-mock-llm` binary: first stdout line, serving, status, exit report.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};

#[tokio::test]
async fn serves_a_scenario_and_reports_unconsumed_entries_on_sigterm() {
    let scenario = tempfile::tempdir().unwrap();
    std::fs::write(
        scenario.path().join("scenario.json"),
        r#"{"suite":"acp","name":"tiny","sessions":[{"session":0,"first_user_text":"hi"}]}"#,
    )
    .unwrap();
    std::fs::write(
        scenario.path().join("model.jsonl"),
        concat!(
            r#"{"session":0,"route":"main","index":0,"kind":"response","content":"A","finish_reason":"stop","usage":null,"stream":[{"content":"A"}]}"#,
            "\n",
            r#"{"session":0,"route":"main","index":1,"kind":"response","content":"B","finish_reason":"stop","usage":null,"stream":[{"content":"B"}]}"#,
            "\n"
        ),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh-mock-llm"))
        .arg("--scenario")
        .arg(scenario.path())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    tokio::time::timeout(Duration::from_secs(10), stdout.read_line(&mut first))
        .await
        .unwrap()
        .unwrap();
    let url = first
        .trim_end()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");

    let body = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .json(&serde_json::json!({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains(r#""delta":{"content":"A"}"#), "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"));
    let status: serde_json::Value = reqwest::get(format!("{url}/__replay/status"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["served"], 1);
    assert_eq!(status["unconsumed"][0]["index"], 1);

    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let code = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).await.unwrap();
    let report: serde_json::Value = serde_json::from_str(rest.trim()).unwrap();
    assert_eq!(
        report["unconsumed"],
        serde_json::json!([{"session":0,"route":"main","index":1}])
    );
    assert_eq!(code.code(), Some(1));
}
