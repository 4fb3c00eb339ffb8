//! §10 items 45, 49–52: tool scheduling.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_agent::AbortReason;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_calls_response;
use dsh_protocol::Message;
use dsh_tools::PreDecision;
use dsh_tools::ToolError;
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::sync::Notify;

use super::support::Options;
use super::support::Rig;
use super::support::idle;
use super::support::text;
use super::support::tool;

#[tokio::test]
async fn item_45_cancel_during_tools_commits_started_and_synthesizes_unstarted() {
    let rig = Rig::new();
    let entered = Arc::new(Notify::new());
    let signal = entered.clone();
    rig.register(tool("slow", false, move |_, run| {
        let signal = signal.clone();
        async move {
            signal.notify_one();
            run.signal().cancelled().await;
            Ok("stopped".to_owned())
        }
    }));
    rig.register(tool("never", false, |_, _| async { Ok("ran".to_owned()) }));
    rig.adapter.push_chunks(tool_calls_response(&[
        ("c1", "slow", "{}"),
        ("c2", "never", "{}"),
        ("c3", "never", ""),
    ]));
    rig.agent.followup(Message::user_text("go")).unwrap();
    tokio::time::timeout(Duration::from_secs(5), entered.notified())
        .await
        .unwrap();
    rig.agent.cancel(AbortReason::User, false);
    idle(&rig.agent).await;
    let calls: Vec<String> = rig
        .of("tool/call")
        .iter()
        .map(|e| e.data["callId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(calls, ["c1", "c2", "c3"]);
    let results = rig.of("tool/result");
    assert_eq!(
        results[0].data["error"]["code"], "ABORTED",
        "the started call's success was overtaken by the abort"
    );
    for (result, call) in results[1..].iter().zip(&rig.of("tool/call")[1..]) {
        assert_eq!(
            text(&result.data["message"]["content"][0]),
            "Error: tool call aborted before dispatch"
        );
        assert_eq!(result.data["message"]["content"][0]["isError"], true);
        assert_eq!(
            result.data["error"],
            json!({"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"})
        );
        assert_eq!(result.source_event_seqs(), Some(&[call.seq][..]));
    }
    assert_eq!(rig.of("tool/call")[2].data["arguments"], "");
    assert_eq!(
        rig.turn_ends(),
        [json!({"kind": "aborted", "reason": {"kind": "user"}})]
    );
    assert_eq!(rig.adapter.requests().len(), 1);
}

#[tokio::test]
async fn item_49_tool_call_precedes_pre_execute_and_is_cited() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rig = Rig::new();
    let (sink, log) = (seen.clone(), rig.log().clone());
    rig.tools
        .pre_execute()
        .register(&rig.root, move |exec, next| {
            let last = log.last().unwrap();
            sink.lock().unwrap().push((
                last.kind.to_string(),
                last.data["callId"].clone(),
                exec.call_id().to_owned(),
            ));
            next.run(exec)
        });
    rig.register(super::support::echo());
    rig.adapter
        .push_chunks(tool_calls_response(&[("c1", "echo", r#"{"text":"a"}"#)]));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    assert_eq!(
        *seen.lock().unwrap(),
        [("tool/call".to_owned(), json!("c1"), "c1".to_owned())]
    );
    let call = &rig.of("tool/call")[0];
    assert_eq!(
        call.data,
        json!({"turn": 1, "step": 1, "callId": "c1", "name": "echo", "arguments": "{\"text\":\"a\"}"})
    );
    let result = &rig.of("tool/result")[0];
    assert_eq!(result.source_event_seqs(), Some(&[call.seq][..]));
    let message = &result.data["message"];
    assert_eq!(message["source"], json!({"kind": "tool", "callId": "c1"}));
    assert_eq!(
        message["content"],
        json!([{"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "a"}], "isError": false}])
    );
}

#[tokio::test]
async fn item_50_results_commit_in_model_order_when_a_later_call_finishes_first() {
    let rig = Rig::new();
    let finished = Arc::new(Mutex::new(Vec::new()));
    let (slow_sink, fast_sink) = (finished.clone(), finished.clone());
    rig.register(tool("slow", true, move |_, _| {
        let sink = slow_sink.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(60)).await;
            sink.lock().unwrap().push("slow");
            Ok("slow".to_owned())
        }
    }));
    rig.register(tool("fast", true, move |_, _| {
        let sink = fast_sink.clone();
        async move {
            sink.lock().unwrap().push("fast");
            Ok("fast".to_owned())
        }
    }));
    rig.adapter.push_chunks(tool_calls_response(&[
        ("c1", "slow", "{}"),
        ("c2", "fast", "{}"),
    ]));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    assert_eq!(*finished.lock().unwrap(), ["fast", "slow"]);
    let order: Vec<String> = rig
        .log()
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "tool/call" || e.kind == "tool/result")
        .map(|e| {
            format!(
                "{} {}",
                e.kind,
                e.data
                    .get("callId")
                    .cloned()
                    .unwrap_or_else(|| e.data["message"]["source"]["callId"].clone())
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            r#"tool/call "c1""#,
            r#"tool/call "c2""#,
            r#"tool/result "c1""#,
            r#"tool/result "c2""#
        ]
    );
}

#[tokio::test]
async fn item_51_the_parallel_pool_is_bounded_and_exclusive_calls_are_barriers() {
    let rig = Rig::with(Options {
        max_parallel: 2,
        ..Options::default()
    });
    let live = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let during_exclusive = Arc::new(AtomicUsize::new(usize::MAX));
    let (l1, p1) = (live.clone(), peak.clone());
    rig.register(tool("par", true, move |_, _| {
        let (live, peak) = (l1.clone(), p1.clone());
        async move {
            let now = live.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            live.fetch_sub(1, Ordering::SeqCst);
            Ok("p".to_owned())
        }
    }));
    let (l2, d2) = (live.clone(), during_exclusive.clone());
    rig.register(tool("excl", false, move |_, _| {
        let (live, during) = (l2.clone(), d2.clone());
        async move {
            during.store(live.load(Ordering::SeqCst), Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            during.fetch_max(live.load(Ordering::SeqCst), Ordering::SeqCst);
            Ok("x".to_owned())
        }
    }));
    let calls = [
        ("c1", "par", "{}"),
        ("c2", "par", "{}"),
        ("c3", "par", "{}"),
        ("c4", "excl", "{}"),
        ("c5", "par", "{}"),
    ];
    rig.adapter.push_chunks(tool_calls_response(&calls));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    assert_eq!(peak.load(Ordering::SeqCst), 2);
    assert_eq!(
        during_exclusive.load(Ordering::SeqCst),
        0,
        "nothing else runs while the exclusive call does"
    );
    // The exclusive call starts only after every earlier result is committed, and the next
    // call only after its result.
    let kinds: Vec<String> = rig
        .log()
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "tool/call" || e.kind == "tool/result")
        .map(|e| e.kind.to_string())
        .collect();
    let c4 = rig.of("tool/call")[3].seq;
    let results_before_c4 = rig.of("tool/result").iter().filter(|e| e.seq < c4).count();
    assert_eq!(results_before_c4, 3);
    assert_eq!(
        kinds[kinds.len() - 4..],
        ["tool/call", "tool/result", "tool/call", "tool/result"]
    );
}

#[tokio::test]
async fn item_52_thrown_errors_and_unknown_tools_become_error_results() {
    let rig = Rig::new();
    rig.register(tool("boom", false, |_, _| async {
        Err::<String, _>(ToolError::new("boom"))
    }));
    rig.adapter.push_chunks(tool_calls_response(&[
        ("c1", "boom", "{}"),
        ("c2", "nope", "{}"),
    ]));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    let results = rig.of("tool/result");
    let block = &results[0].data["message"]["content"][0];
    assert_eq!(
        (text(block), block["isError"].clone()),
        ("Error: boom".to_owned(), json!(true))
    );
    assert!(
        results[0].data.get("error").is_none(),
        "a plain thrown error has no {{name, code}}"
    );
    let block = &results[1].data["message"]["content"][0];
    assert_eq!(text(block), "Error: unknown tool \"nope\"");
    assert_eq!(results[1].data["error"]["code"], "UNKNOWN_TOOL");
    let _ = PreDecision::Allow;
}
