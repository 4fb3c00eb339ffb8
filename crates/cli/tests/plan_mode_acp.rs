//! Plan mode as an ACP session mode, over the real `dsh acp` wire: the approval presets are
//! offered again as `<preset>+plan` (docs/steering.md), `session/set_mode` moves both axes,
//! and what the log records (an approved `exit_plan_mode`, `/plan`) moves the editor's mode
//! selector through `current_mode_update`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use serde_json::json;
use support::Acp;
use support::model_server;
use support::sse;

const PLAN_SECTION_START: &str = "Plan mode is active.";

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

fn mode_updates(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["method"] == "session/update")
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "current_mode_update")
        .map(|f| {
            f["params"]["update"]["currentModeId"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

fn system_prompt(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_is_a_session_mode_beside_the_presets() {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.session-title]\nenabled = false\n\n[plugins.plan-mode]\nenabled = true\n",
    )
    .unwrap();
    let plan = "# Rename the helper\n\n1. Read it.\n2. Rename it.";
    let (url, bodies) = model_server(vec![
        reply("I looked around."),
        tool_call("call_1", "exit_plan_mode", json!({ "plan": plan })),
        reply("Carrying out the plan."),
        reply("Back in plan mode."),
    ])
    .await;
    let mut acp = Acp::start(work.path(), home.path(), &url);
    // The plan review reaches this client (no form elicitation) as a permission request
    // whose options are the answers: approve it.
    let reviews = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let seen = reviews.clone();
    acp.answer = Box::new(move |request| {
        if request["method"] != "session/request_permission" {
            return Err(json!({"code": -32601, "message": "Method not found"}));
        }
        seen.lock().unwrap().push(request["params"].clone());
        let approve = request["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == "Approve")
            .expect("an Approve option")["optionId"]
            .clone();
        Ok(json!({"outcome": {"outcome": "selected", "optionId": approve}}))
    });
    acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await;
    let created = acp
        .request(
            2,
            "session/new",
            json!({"cwd": work.path(), "mcpServers": []}),
        )
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let modes = &created["result"]["modes"];
    let ids: Vec<&str> = modes["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "read-only",
            "read-only+plan",
            "workspace-write",
            "workspace-write+plan",
            "danger-full-access",
            "danger-full-access+plan"
        ]
    );
    let current = modes["currentModeId"].as_str().unwrap().to_owned();
    assert!(!current.ends_with("+plan"), "{current}");
    assert_eq!(
        modes["availableModes"][1]["name"], "read-only · plan",
        "{modes}"
    );

    // Selecting `<preset>+plan` turns plan mode on and keeps the preset: one update.
    let wanted = format!("{current}+plan");
    let answer = acp
        .request(
            3,
            "session/set_mode",
            json!({"sessionId": session, "modeId": wanted}),
        )
        .await;
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(mode_updates(&acp.frames), std::slice::from_ref(&wanted));

    let prompt = |id: u64, text: &str| {
        (
            id,
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    };
    let (id, params) = prompt(4, "look around");
    let done = acp.request(id, "session/prompt", params).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(system_prompt(&bodies.lock().unwrap()[0]).contains(PLAN_SECTION_START));

    // The model presents its plan; the client approves the review; plan mode ends at the
    // next step, and the editor's selector follows without being asked to.
    let (id, params) = prompt(5, "now make the plan");
    let done = acp.request(id, "session/prompt", params).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let reviews = reviews.lock().unwrap().clone();
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(
        reviews[0]["toolCall"]["title"],
        "Approve this plan and leave plan mode?"
    );
    assert_eq!(mode_updates(&acp.frames), [wanted.clone(), current.clone()]);
    {
        let bodies = bodies.lock().unwrap();
        assert_eq!(bodies.len(), 3);
        assert!(system_prompt(&bodies[1]).contains(PLAN_SECTION_START));
        assert!(
            !system_prompt(&bodies[2]).contains(PLAN_SECTION_START),
            "the step after the approval is taken outside plan mode"
        );
    }

    // `/plan` (a slash command over ACP) moves the selector too.
    let (id, params) = prompt(6, "/plan");
    let done = acp.request(id, "session/prompt", params).await;
    assert!(done.get("error").is_none(), "{done}");
    assert_eq!(
        mode_updates(&acp.frames),
        [wanted.clone(), current.clone(), wanted.clone()]
    );

    // Back to the bare preset: plan mode off, the preset unchanged.
    let answer = acp
        .request(
            7,
            "session/set_mode",
            json!({"sessionId": session, "modeId": current}),
        )
        .await;
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(
        mode_updates(&acp.frames),
        [wanted.clone(), current.clone(), wanted, current.clone()]
    );
    let unknown = acp
        .request(
            8,
            "session/set_mode",
            json!({"sessionId": session, "modeId": "+plan"}),
        )
        .await;
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown mode"),
        "{unknown}"
    );
    acp.stop().await;

    // The log has the whole story: on, off at the approval, on by /plan, off again.
    let states = plan_states(home.path());
    assert_eq!(states, [true, false, true, false]);
}

fn plan_states(home: &std::path::Path) -> Vec<bool> {
    fn find(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                find(&path, out);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    find(&home.join("sessions"), &mut files);
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "plan/mode")
        .map(|e| e["data"]["active"].as_bool().unwrap())
        .collect()
}
