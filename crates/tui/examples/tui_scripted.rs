//! The real UI loop in a real terminal over a scripted model and the real tools: used by the
//! pseudo-terminal test (`tests/pty.rs`) and handy for trying the UI without an API key.
//!
//! `cargo run -p dsh-tui --example tui_scripted -- DIR` (DIR gets `project/` and `home/`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;

use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("dsh-tui-scripted"));
    std::fs::create_dir_all(dir.join("project"))?;
    let factory = common::TestHost::new(&dir);
    let probe = serde_json::json!({"command": "echo needs-approval", "description": "Probe"});
    factory.adapter.push_chunks(tool_call_response(
        "call_p",
        "bash",
        &probe.to_string(),
        Some("Running the probe."),
    ));
    factory.adapter.push_chunks(text_response("All done."));
    let mut app = factory.app(dsh_tui::Start::New);
    app.prompt = std::env::args().nth(2);
    dsh_tui::run(app).await
}
