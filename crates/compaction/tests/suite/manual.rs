//! Manual compaction and `/compact` (§8.10): checklist E60–E64.

use std::time::Duration;

use dsh_agent::scripted::text_response;
use dsh_compaction::CompactReply;
use dsh_compaction::ManualCode;
use dsh_compaction::run_compact;
use dsh_protocol::Message;
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::Rig;
use super::support::emit_call;
use super::support::idle;

async fn history(rig: &Rig) {
    rig.adapter.push_chunks(emit_call("c1", 20_000));
    rig.adapter.push_chunks(text_response("first answer"));
    rig.prompt("first").await;
    rig.adapter.push_chunks(text_response("second answer"));
    rig.prompt("second").await;
}

async fn compact(rig: &Rig, args: &str) -> CompactReply {
    run_compact(
        &rig.compaction,
        &rig.agent,
        args,
        Some("cmd-1".into()),
        &CancellationToken::new(),
    )
    .await
}

#[tokio::test]
async fn arguments_are_a_usage_error_that_writes_nothing() {
    // Checklist E60.
    let rig = Rig::new();
    history(&rig).await;
    let before = rig.log().len();
    let reply = compact(&rig, " now").await;
    assert_eq!(
        reply,
        CompactReply {
            success: false,
            text: "Usage: /compact (no arguments)".into(),
            source_event_seq: None
        }
    );
    assert_eq!(rig.log().len(), before);
    // Blank arguments are no arguments.
    rig.adapter.push_chunks(text_response("summary"));
    assert!(compact(&rig, "  ").await.success);
}

#[tokio::test]
async fn an_idle_compaction_opens_a_null_turn_bracket_and_reports_its_size() {
    // Checklist E61 and E64 (no pruning: the 20 000-character result is summarized whole).
    let rig = Rig::new();
    history(&rig).await;
    let before = rig.log().len();
    rig.adapter.push_chunks(text_response(
        "## Primary Request and Intent\n- two prompts",
    ));
    let reply = compact(&rig, "").await;
    let summary = rig.of("compaction/summary")[0].clone();
    let shadowed = summary.data["shadowedSeqs"].as_array().unwrap().len();
    let tokens = summary.data["shadowedTokenCount"].as_u64().unwrap();
    assert_eq!(
        reply,
        CompactReply {
            success: true,
            text: format!("Compacted {shadowed} history items (~{tokens} tokens)."),
            source_event_seq: Some(summary.seq),
        }
    );
    assert_eq!(
        rig.kinds_since(before),
        [
            "compaction/start",
            "compaction/summary",
            "user/message",
            "compaction/end"
        ]
    );
    let start = &rig.of("compaction/start")[0];
    assert_eq!(start.data["turn"], json!(null));
    assert_eq!(start.data["sourceCommandId"], "cmd-1");
    assert_eq!(rig.of("compaction/end")[0].data["turn"], json!(null));
    assert_eq!(
        rig.log().get(summary.seq + 1).unwrap().unwrap().data["source"]["sourceCommandId"],
        "cmd-1"
    );
    assert!(rig.of("compaction/prune").is_empty());
    // Everything but the newest indivisible unit (the last answer).
    assert_eq!(rig.log().derive_messages().len(), 2);
    // The session goes on from the checkpoint.
    rig.adapter.push_chunks(text_response("third"));
    rig.prompt("third").await;
    let last = rig.adapter.requests().last().unwrap().clone();
    assert!(dsh_protocol::text_of(&last.messages[0].content).starts_with(dsh_compaction::PREAMBLE));
}

#[tokio::test]
async fn a_single_node_is_not_compactable() {
    // Checklist E62.
    let rig = Rig::new();
    rig.log()
        .append_data(
            &dsh_session::data::UserMessage(Message::user_text("lonely")),
            Some(dsh_session::SurfaceIntent::append()),
        )
        .unwrap();
    let before = rig.log().len();
    let reply = compact(&rig, "").await;
    assert_eq!(reply.text, "No compactable history yet.");
    assert!(reply.success);
    assert_eq!(rig.log().len(), before);
    let empty = Rig::new();
    assert_eq!(
        compact(&empty, "").await.text,
        "No compactable history yet."
    );
}

#[tokio::test]
async fn a_running_agent_is_busy() {
    // Checklist E63.
    let rig = Rig::new();
    history(&rig).await;
    rig.adapter.set_chunk_delay(Some(Duration::from_millis(30)));
    rig.adapter.push_chunks(text_response("slow answer"));
    rig.agent.followup(Message::user_text("busy now")).unwrap();
    let reply = compact(&rig, "").await;
    assert_eq!(
        reply.text,
        "Compaction is unavailable because this process has an active compaction, or the agent is not idle."
    );
    assert!(!reply.success);
    idle(&rig.agent).await;
    assert!(rig.of("compaction/start").is_empty());
}

#[tokio::test]
async fn failures_map_to_their_texts_and_the_conversation_is_unchanged() {
    let rig = Rig::new();
    history(&rig).await;
    let surface = rig.log().surface_seqs();
    rig.adapter.push_chunks(dsh_agent::scripted::error_response(
        dsh_protocol::LlmFailure::new("SERVER", "down"),
    ));
    let reply = compact(&rig, "").await;
    assert_eq!(
        reply.text,
        "Compaction could not produce a useful summary. The conversation is unchanged; the attempt is recorded in the session log."
    );
    assert_eq!(rig.log().surface_seqs(), surface);
    assert_eq!(rig.of("compaction/end")[0].data["error"], "down");
    // Direct API: the code is `summary`.
    rig.adapter.push_chunks(text_response("   "));
    let error = rig
        .compaction
        .compact_now(&rig.agent, &CancellationToken::new(), None)
        .await
        .unwrap_err();
    assert_eq!(error.code, ManualCode::Summary);
    assert_eq!(
        error.message,
        "manual compaction could not produce a smaller summary"
    );
}

#[tokio::test]
async fn cancelling_the_invocation_reports_cancelled_and_closes_the_bracket() {
    let rig = Rig::new();
    history(&rig).await;
    rig.adapter.set_chunk_delay(Some(Duration::from_secs(5)));
    rig.adapter.push_chunks(text_response("never"));
    let signal = CancellationToken::new();
    let cancel = signal.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let reply = run_compact(&rig.compaction, &rig.agent, "", None, &signal).await;
    assert_eq!(reply.text, "Compaction cancelled.");
    let end = &rig.of("compaction/end")[0];
    assert_eq!(end.data["error"], "compaction was cancelled");
    // A prompt sent afterwards runs normally.
    rig.adapter.set_chunk_delay(None);
    rig.adapter.push_chunks(text_response("after"));
    rig.prompt("after").await;
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
}

#[tokio::test]
async fn a_prompt_sent_during_manual_compaction_runs_after_it() {
    let rig = Rig::new();
    history(&rig).await;
    rig.adapter.set_chunk_delay(Some(Duration::from_millis(5)));
    rig.adapter.push_chunks(text_response("the summary"));
    rig.adapter.push_chunks(text_response("queued answer"));
    let agent = rig.agent.clone();
    let sender = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        agent.followup(Message::user_text("queued")).unwrap();
    });
    let reply = compact(&rig, "").await;
    sender.await.unwrap();
    assert!(reply.success, "{reply:?}");
    idle(&rig.agent).await;
    let end = rig.of("compaction/end")[0].seq;
    let turn3 = rig.of("turn/start")[2].seq;
    assert!(turn3 > end, "the queued prompt waited for the bracket");
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
}

#[tokio::test]
async fn the_registered_command_logs_run_and_done_around_the_bracket() {
    // Checklist E61, I98, I99, I100.
    use dsh_commands::CommandRegistry;
    let rig = Rig::new();
    let registry = CommandRegistry::install(&rig.root).unwrap();
    dsh_compaction::register_compact(&registry, &rig.root, rig.compaction.clone()).unwrap();
    let info = registry.find(rig.agent.scope(), "compact").unwrap();
    assert_eq!(info.description, "Compact older conversation history");
    assert!(info.input.is_none());
    history(&rig).await;
    // Not commands: nothing logged.
    let before = rig.log().len();
    for line in ["/Compact", " /compact", "/unknown"] {
        let executed = registry
            .execute(&rig.agent, line, vec![], CancellationToken::new())
            .await
            .unwrap();
        assert!(executed.is_none(), "{line}");
    }
    assert_eq!(rig.log().len(), before);
    rig.adapter.push_chunks(text_response("the summary"));
    let executed = registry
        .execute(&rig.agent, "/compact", vec![], CancellationToken::new())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        rig.kinds_since(before),
        [
            "command/run",
            "compaction/start",
            "compaction/summary",
            "user/message",
            "compaction/end",
            "command/done"
        ]
    );
    let run = &rig.of("command/run")[0];
    assert_eq!(
        run.data,
        json!({"commandId": executed.command_id, "name": "compact", "args": "", "source": {"kind": "user"}})
    );
    let done = &rig.of("command/done")[0];
    let summary = &rig.of("compaction/summary")[0];
    assert_eq!(done.data["sourceEventSeq"], summary.seq);
    assert_eq!(done.data["kind"], "success");
    let text = done.data["text"].as_str().unwrap().to_owned();
    assert!(text.starts_with("Compacted "));
    assert_eq!(
        rig.of("compaction/start")[0].data["sourceCommandId"],
        executed.command_id.as_str()
    );
    // The result text never reaches the model.
    rig.adapter.push_chunks(text_response("next"));
    rig.prompt("next").await;
    let request = rig.adapter.requests().last().unwrap().clone();
    assert!(
        request
            .messages
            .iter()
            .all(|m| !dsh_protocol::text_of(&m.content).contains(&text))
    );
    // An argument: the usage error, recorded, with no bracket.
    let executed = registry
        .execute(&rig.agent, "/compact now", vec![], CancellationToken::new())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        executed.result,
        dsh_commands::CommandResult::error("Usage: /compact (no arguments)")
    );
    assert_eq!(rig.of("compaction/start").len(), 1);
    assert_eq!(rig.of("command/run")[1].data["args"], " now");
}
