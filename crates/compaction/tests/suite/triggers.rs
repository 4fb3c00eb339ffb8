//! Automatic triggers (§8.8) and the pruner phase (§8.9): checklist E44–E48, E56–E59.

use dsh_agent::scripted::error_response;
use dsh_agent::scripted::text_response;
use dsh_compaction::PRUNE_MARKER;
use dsh_compaction::ToolResultPruneConfig;
use dsh_protocol::LlmFailure;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::Options;
use super::support::Rig;
use super::support::emit_call;

fn inner_text(message: &dsh_protocol::Message) -> String {
    message
        .content
        .iter()
        .map(|b| match b {
            dsh_protocol::ContentBlock::ToolResult { content, .. } => {
                dsh_protocol::text_of(content)
            }
            _ => String::new(),
        })
        .collect()
}

fn overflow() -> Vec<dsh_protocol::StreamChunk> {
    error_response(LlmFailure::new(
        "CONTEXT_WINDOW_EXCEEDED",
        "request exceeded the model context window",
    ))
}

#[tokio::test]
async fn below_the_threshold_nothing_is_written() {
    // Checklist E44 (with the default 1 000 000 window and an oversized tool result that the
    // pruner would cut if it ran).
    let rig = Rig::new();
    rig.adapter.push_chunks(emit_call("c1", 20_000));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    rig.adapter.push_chunks(text_response("again"));
    rig.prompt("more").await;
    for kind in [
        "compaction/start",
        "compaction/prune",
        "compaction/summary",
        "compaction/end",
    ] {
        assert!(rig.of(kind).is_empty(), "{kind}");
    }
}

#[tokio::test]
async fn pruning_alone_can_relieve_pressure_without_a_summary() {
    // Checklist E46–E48: window 6000 (threshold 4800); a 20 000-character result is pruned to
    // 4096 + marker + 1024 code points and no summarization request is made.
    let rig = Rig::with(Options {
        context_window: Some(6000),
        ..Options::default()
    });
    rig.adapter.push_chunks(emit_call("c1", 20_000));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    let original = rig.of("tool/result")[0].clone();
    rig.adapter.push_chunks(text_response("second"));
    rig.prompt("again").await;
    assert_eq!(rig.adapter.requests().len(), 3, "no summary request");
    assert!(rig.of("compaction/start").is_empty());
    let prune = &rig.of("compaction/prune")[0];
    assert_eq!(
        prune.data["shadowedRange"],
        json!({"start": original.seq, "end": original.seq})
    );
    let replacement = rig.log().get(prune.seq + 1).unwrap().unwrap();
    assert_eq!(replacement.kind, "tool/result");
    assert_eq!(replacement.source_event_seqs(), Some(&[original.seq][..]));
    let text = replacement.data["message"]["content"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(text.chars().count(), 4096 + 39 + 1024);
    assert!(text.contains(PRUNE_MARKER));
    assert_eq!(
        replacement.data["message"]["id"],
        original.data["message"]["id"]
    );
    // The pruned result is what the next request carried.
    let last = rig.adapter.requests().last().unwrap().clone();
    let carried = last
        .messages
        .iter()
        .find(|m| m.source.kind() == "tool")
        .unwrap();
    assert_eq!(inner_text(carried), text);
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
}

#[tokio::test]
async fn a_context_overflow_compacts_with_retain_zero_and_retries_the_same_step() {
    // Checklist E57, in the shape of the compaction-recovery scenario.
    let rig = Rig::new();
    rig.adapter.push_chunks(emit_call("c1", 10));
    rig.adapter.push_chunks(overflow());
    rig.adapter.push_chunks(text_response("premise summary"));
    rig.adapter.push_chunks(text_response("RECOVERED"));
    rig.prompt(&"establish a long premise ".repeat(40)).await;
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
    let summary = &rig.of("compaction/summary")[0];
    let prompt = &rig.of("user/message")[0];
    assert_eq!(summary.data["shadowedSeqs"], json!([prompt.seq]));
    assert_eq!(rig.of("compaction/start")[0].data["turn"], 1);
    assert!(rig.of("llm/retry").is_empty());
    // Same step: one step/start for step 2, the retry after the bracket.
    let steps: Vec<_> = rig
        .of("step/start")
        .iter()
        .map(|e| e.data["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2]);
    let requests = rig.adapter.requests();
    assert_eq!(requests.len(), 4);
    assert!(
        dsh_protocol::text_of(&requests[3].messages[0].content)
            .starts_with(dsh_compaction::PREAMBLE)
    );
    // The newest tool result remains verbatim.
    let result = requests[3].messages.last().unwrap();
    assert_eq!(result.source.kind(), "tool");
    assert_eq!(inner_text(result), "x".repeat(10));
}

#[tokio::test]
async fn a_second_overflow_without_an_answer_is_not_retried() {
    // Checklist E58.
    let rig = Rig::new();
    rig.adapter.push_chunks(emit_call("c1", 10));
    rig.adapter.push_chunks(overflow());
    rig.adapter.push_chunks(text_response("summary"));
    rig.adapter.push_chunks(overflow());
    rig.prompt(&"premise ".repeat(100)).await;
    assert_eq!(rig.turn_end()["kind"], "error");
    assert_eq!(rig.turn_end()["error"]["code"], "CONTEXT_WINDOW_EXCEEDED");
    assert_eq!(rig.of("compaction/start").len(), 1);
    assert_eq!(rig.adapter.remaining(), 0);
    // The budget resets when the agent goes idle: a new turn may recover again.
    rig.adapter.push_chunks(overflow());
    rig.adapter.push_chunks(text_response("summary two"));
    rig.adapter.push_chunks(text_response("fine"));
    rig.prompt("next").await;
    assert_eq!(rig.of("compaction/start").len(), 2);
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
}

#[tokio::test]
async fn max_overflow_retries_zero_disables_recovery() {
    let rig = Rig::with(Options {
        config: json!({"maxOverflowRetries": 0}),
        ..Options::default()
    });
    rig.adapter.push_chunks(emit_call("c1", 10));
    rig.adapter.push_chunks(overflow());
    rig.prompt(&"premise ".repeat(100)).await;
    assert_eq!(rig.turn_end()["error"]["code"], "CONTEXT_WINDOW_EXCEEDED");
    assert!(rig.of("compaction/start").is_empty());
}

#[tokio::test]
async fn an_overflow_with_nothing_compactable_preserves_the_original_error() {
    let rig = Rig::new();
    rig.adapter.push_chunks(overflow());
    // Step 1 has no header before it is logged; once logged the surface is a single prompt.
    rig.prompt("only node").await;
    assert_eq!(rig.turn_end()["error"]["code"], "CONTEXT_WINDOW_EXCEEDED");
    assert!(rig.of("compaction/start").is_empty());
}

#[tokio::test]
async fn pruning_progress_alone_authorizes_the_overflow_retry() {
    // The summary fails, but the pruned result already changed the surface: retry.
    let rig = Rig::with(Options {
        pruner: Some(ToolResultPruneConfig::default()),
        ..Options::default()
    });
    rig.adapter.push_chunks(emit_call("c1", 20_000));
    rig.adapter.push_chunks(overflow());
    rig.adapter
        .push_chunks(error_response(LlmFailure::new("SERVER", "down")));
    rig.adapter.push_chunks(text_response("after pruning"));
    rig.prompt("p").await;
    assert_eq!(rig.of("compaction/prune").len(), 1);
    assert_eq!(rig.of("compaction/end")[0].data["error"], "down");
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
}

#[tokio::test]
async fn an_unmatched_start_after_the_end_seed_is_busy_and_one_before_it_is_stale() {
    // Checklist E59.
    let busy = Rig::with(Options::default());
    busy.log()
        .append(
            "compaction/start",
            json!({"compactionId": "other-process", "turn": null}),
            None,
        )
        .unwrap();
    busy.adapter.push_chunks(emit_call("c1", 10));
    busy.adapter.push_chunks(overflow());
    busy.prompt(&"premise ".repeat(100)).await;
    assert_eq!(busy.turn_end()["error"]["code"], "CONTEXT_WINDOW_EXCEEDED");
    assert_eq!(busy.of("compaction/start").len(), 1);
    assert!(busy.of("compaction/end").is_empty());

    // Seeded from a log whose unmatched start precedes the seed marker: stale.
    let seed_log = SessionLog::in_memory(SessionHeader::new("seeded", None));
    seed_log
        .append(
            "compaction/start",
            json!({"compactionId": "crashed", "turn": 1}),
            None,
        )
        .unwrap();
    let seed: Vec<_> = seed_log
        .events()
        .unwrap()
        .iter()
        .map(|e| e.as_ref().clone())
        .collect();
    let log = SessionLog::from_seed(SessionHeader::new("seeded", None), seed).unwrap();
    let stale = Rig::with(Options {
        log: Some(log),
        ..Options::default()
    });
    stale.adapter.push_chunks(emit_call("c1", 10));
    stale.adapter.push_chunks(overflow());
    stale.adapter.push_chunks(text_response("summary"));
    stale.adapter.push_chunks(text_response("ok"));
    stale.prompt(&"premise ".repeat(100)).await;
    assert_eq!(stale.turn_end(), json!({"kind": "completed"}));
    assert_eq!(stale.of("compaction/start").len(), 2);
}

#[tokio::test]
async fn a_route_without_capacity_warns_and_the_step_continues() {
    let rig = Rig::with(Options {
        context_window: None,
        ..Options::default()
    });
    rig.adapter.push_chunks(emit_call("c1", 10));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
    assert!(rig.of("compaction/start").is_empty());
}
