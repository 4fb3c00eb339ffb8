//! The transaction and its log shape (§8.3, §8.6, §8.7): checklist E49–E55, E65.

use dsh_agent::scripted::max_tokens_response;
use dsh_agent::scripted::text_response;
use dsh_compaction::COMPACTION_INSTRUCTION;
use dsh_compaction::CompactionError;
use dsh_compaction::PREAMBLE;
use dsh_compaction::SUMMARY_CLOSE;
use dsh_llm::RequestPurpose;
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::Options;
use super::support::Rig;
use super::support::derived_texts;
use super::support::emit_call;

/// Window 2000 (threshold 1600), keep 20 tokens, no pruner. Turn 1 stays below the threshold;
/// turn 2's second step is over it, so its pre-step compacts everything before turn 2's call.
fn pressured() -> Rig {
    Rig::with(Options {
        config: json!({"retainTokens": 20}),
        pruner: None,
        context_window: Some(2000),
        ..Options::default()
    })
}

/// Turn 2: a 2000-character result, then the summary, then `answer`.
async fn second_turn(rig: &Rig, summary: Vec<dsh_protocol::StreamChunk>, answer: &str) {
    rig.adapter.push_chunks(emit_call("c3", 2000));
    rig.adapter.push_chunks(summary);
    rig.adapter.push_chunks(text_response(answer));
    rig.prompt("turn two").await;
}

async fn first_turn(rig: &Rig) {
    rig.adapter.push_chunks(emit_call("c1", 5000));
    rig.adapter.push_chunks(emit_call("c2", 10));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("turn one").await;
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
    assert!(rig.of("compaction/start").is_empty());
}

#[tokio::test]
async fn a_pressure_compaction_logs_the_bracket_before_the_entered_batch() {
    let rig = pressured();
    first_turn(&rig).await;
    let surface_before = rig.log().surface_seqs();
    let before = rig.log().len();
    second_turn(
        &rig,
        text_response("## Primary Request and Intent\n- emit text"),
        "turn two answer",
    )
    .await;
    // Checklist E49: four events sharing one id, inside the turn, between the steps.
    let kinds = rig.kinds_since(before);
    let at = kinds.iter().position(|k| k == "compaction/start").unwrap();
    assert_eq!(
        kinds[at - 1..at + 5],
        [
            "step/end",
            "compaction/start",
            "compaction/summary",
            "user/message",
            "compaction/end",
            "step/start",
        ]
    );
    let start = &rig.of("compaction/start")[0];
    let summary = &rig.of("compaction/summary")[0];
    let end = &rig.of("compaction/end")[0];
    let checkpoint = rig.log().get(summary.seq + 1).unwrap().unwrap();
    let id = start.data["compactionId"].as_str().unwrap().to_owned();
    assert_eq!(start.data, json!({"compactionId": id, "turn": 2}));
    assert_eq!(end.data, json!({"compactionId": id, "turn": 2}));
    assert_eq!(checkpoint.data["source"]["compactionId"], id.as_str());
    assert_eq!(summary.data["compactionId"], id.as_str());
    // The span: from the first surface node through turn 2's prompt, stopping before the
    // call whose result is the newest node — head-anchored and balanced (E53).
    let shadowed: Vec<u64> = serde_json::from_value(summary.data["shadowedSeqs"].clone()).unwrap();
    assert_eq!(shadowed[..surface_before.len()], surface_before[..]);
    assert_eq!(
        shadowed.len(),
        surface_before.len() + 1,
        "turn 1 and turn 2's prompt"
    );
    let last = *shadowed.last().unwrap();
    assert_eq!(
        summary.data["shadowedRange"],
        json!({"start": shadowed[0], "end": last})
    );
    // E50.
    let mut sources = vec![start.seq, summary.seq];
    sources.extend(&shadowed);
    assert_eq!(checkpoint.source_event_seqs(), Some(&sources[..]));
    assert_eq!(
        serde_json::to_value(checkpoint.surface_op().unwrap()).unwrap(),
        json!({"op": "replace", "start": shadowed[0], "end": last})
    );
    // E51.
    assert_eq!(
        checkpoint.data["content"],
        json!([
            {"type": "text", "text": format!("{PREAMBLE}\n\n<compacted-summary>")},
            {"type": "text", "text": "## Primary Request and Intent\n- emit text"},
            {"type": "text", "text": SUMMARY_CLOSE},
        ])
    );
    assert_eq!(
        checkpoint.data["source"],
        json!({"kind": "plugin", "plugin": "compact", "compactionId": id})
    );
    // Provenance.
    assert_eq!(summary.data["provider"], "mock");
    assert_eq!(summary.data["model"], "mock-model");
    assert_eq!(summary.data["maxTokens"], 8192);
    assert_eq!(summary.data["llmStreamCall"], true);
    assert_eq!(summary.data["usage"]["inputTokens"], 10);
    // E65: the checkpoint leads the derived history; the shadowed events stay in the log.
    let texts = derived_texts(rig.log());
    assert!(texts[0].starts_with(PREAMBLE), "{}", texts[0]);
    assert_eq!(texts[1], "<call emit>");
    for seq in &shadowed {
        assert!(rig.log().get(*seq).unwrap().is_some());
        assert!(!rig.log().surface_seqs().contains(seq));
    }
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
}

#[tokio::test]
async fn the_summary_request_replays_the_header_and_the_shadowed_messages() {
    // Checklist E52.
    let rig = pressured();
    first_turn(&rig).await;
    second_turn(&rig, text_response("short summary"), "ok").await;
    let requests = rig.adapter.requests();
    let main = &requests[3];
    let summary = &requests[4];
    assert_eq!(summary.purpose, Some(RequestPurpose::Compaction));
    assert_eq!(summary.system, main.system);
    assert!(summary.system.is_some());
    assert_eq!(summary.tools, main.tools);
    assert_eq!(summary.max_tokens, Some(8192));
    assert_eq!(summary.temperature, None);
    assert_eq!(summary.reasoning_effort, None);
    // The shadowed messages are exactly what turn 2's first request carried (turn 1 and the
    // prompt), in surface order.
    let shadowed = &main.messages[..];
    assert_eq!(summary.messages[..shadowed.len()], shadowed[..]);
    assert_eq!(summary.messages.len(), shadowed.len() + 1);
    assert_eq!(
        dsh_protocol::text_of(&summary.messages.last().unwrap().content),
        COMPACTION_INSTRUCTION
    );
    // The next step's request sees the checkpoint first.
    let next = &requests[5];
    assert!(dsh_protocol::text_of(&next.messages[0].content).starts_with(PREAMBLE));
}

#[tokio::test]
async fn a_summary_that_does_not_shrink_closes_the_bracket_with_an_error() {
    // Checklist E54 and E56: the surface is unchanged and the turn continues.
    let rig = pressured();
    first_turn(&rig).await;
    let surface = rig.log().surface_seqs();
    second_turn(&rig, text_response(&"long ".repeat(3000)), "still answered").await;
    let end = &rig.of("compaction/end")[0];
    let error = end.data["error"].as_str().unwrap();
    assert!(
        error.starts_with("summary is not smaller than the shadowed content ("),
        "{error}"
    );
    assert!(error.contains(" estimated framed tokens >= "), "{error}");
    assert!(rig.of("compaction/summary").is_empty());
    assert_eq!(rig.log().surface_seqs()[..surface.len()], surface[..]);
    assert_eq!(rig.log().replace_generation(), 0);
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
}

#[tokio::test]
async fn a_truncated_summary_is_rejected_with_the_spec_text() {
    // Checklist E55.
    let rig = pressured();
    first_turn(&rig).await;
    second_turn(&rig, max_tokens_response("## Primary Req"), "answered").await;
    let end = &rig.of("compaction/end")[0];
    assert_eq!(
        end.data["error"],
        "summarization truncated at the token cap (incomplete checkpoint)"
    );
    assert_eq!(rig.log().replace_generation(), 0);
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
}

#[tokio::test]
async fn a_failing_or_empty_summarizer_leaves_the_session_usable() {
    for (script, expected) in [
        (
            dsh_agent::scripted::error_response(dsh_protocol::LlmFailure::new(
                "SERVER",
                "summarizer is down",
            )),
            "summarizer is down",
        ),
        (
            text_response("   "),
            "summarization produced no text summary content",
        ),
    ] {
        let rig = pressured();
        first_turn(&rig).await;
        second_turn(&rig, script, "answered anyway").await;
        assert_eq!(rig.of("compaction/end")[0].data["error"], expected);
        assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
        let last = rig.of("assistant/message").last().unwrap().clone();
        assert_eq!(
            last.data["message"]["content"][0],
            json!({"type": "text", "text": "answered anyway"})
        );
    }
}

#[tokio::test]
async fn compact_region_validates_its_span() {
    let rig = pressured();
    first_turn(&rig).await;
    let surface = rig.log().surface_seqs();
    let token = CancellationToken::new();
    let call = |start, end| {
        let rig = &rig;
        let token = token.clone();
        async move {
            rig.compaction
                .compact_region(start, end, &rig.agent, &token)
                .await
                .unwrap_err()
        }
    };
    assert_eq!(
        call(999, surface[0]).await,
        CompactionError::Invalid("compactRegion: start seq 999 not found in surface".into())
    );
    assert_eq!(
        call(surface[0], 998).await,
        CompactionError::Invalid("compactRegion: end seq 998 not found in surface".into())
    );
    assert_eq!(
        call(surface[2], surface[0]).await,
        CompactionError::Invalid(format!(
            "compactRegion: start seq {} (position 2) is after end seq {} (position 0) on the surface",
            surface[2], surface[0]
        ))
    );
    assert_eq!(
        call(surface[2], surface[2]).await,
        CompactionError::Invalid(format!(
            "compactRegion: start seq {} is not a balanced boundary (would split a step's tool-call/result pair)",
            surface[2]
        ))
    );
    assert_eq!(
        call(surface[0], surface[1]).await,
        CompactionError::Invalid(format!(
            "compactRegion: end seq {} is not a balanced boundary (would split a step, or the step is still open)",
            surface[1]
        ))
    );
    // A valid span on an idle session has no open turn to live in (§14.5).
    assert_eq!(
        call(surface[0], surface[0]).await,
        CompactionError::Invalid(
            "compactRegion: no open turn — automatic compaction events must be enclosed in a turn"
                .into()
        )
    );
    assert!(rig.of("compaction/start").is_empty());
}
