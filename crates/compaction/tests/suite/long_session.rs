//! A long session in process: a model that keeps calling a tool with large results against a
//! small context window. The session never fails, compactions keep happening, the surface stays
//! bounded, the provider's context-length refusals are recovered, and a resumed log continues
//! from the last checkpoint. (Timing is measured by the whole-binary benchmark, not here.)

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_agent::scripted::Script;
use dsh_agent::scripted::error_response;
use dsh_agent::scripted::text_response;
use dsh_llm::RequestPurpose;
use dsh_protocol::LlmFailure;
use dsh_token_meter::estimate_message;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::Options;
use super::support::Rig;
use super::support::create;
use super::support::emit_call;
use super::support::idle;

const WINDOW: u64 = 8_000;

/// Answers by what is asked: summaries for compaction, a refusal for an oversized request,
/// otherwise the next tool call until `steps`, then `DONE`.
fn model(rig: &Rig, steps: usize) -> Arc<AtomicUsize> {
    let served = Arc::new(AtomicUsize::new(0));
    for _ in 0..steps * 3 {
        let served = served.clone();
        rig.adapter.push(Script::Computed(Arc::new(move |request| {
            if request.purpose == Some(RequestPurpose::Compaction) {
                return text_response("## Primary Request and Intent\n- emit text until told to stop\n## Current Work\n- emitting");
            }
            let size: u64 = request.messages.iter().map(|m| estimate_message(m)).sum();
            if size > WINDOW {
                return error_response(LlmFailure::new(
                    "CONTEXT_WINDOW_EXCEEDED",
                    "request exceeded the model context window",
                ));
            }
            let step = served.fetch_add(1, Ordering::SeqCst);
            if step >= steps {
                text_response("DONE")
            } else {
                emit_call(&format!("c{step}"), 2_000 + (step % 7) * 1_000)
            }
        })));
    }
    served
}

#[tokio::test]
async fn hundreds_of_large_tool_steps_stay_inside_a_small_window() {
    let steps = 300;
    let rig = Rig::with(Options {
        context_window: Some(WINDOW),
        config: json!({"thresholdRatio": 0.6, "retainRatio": 0.2}),
        ..Options::default()
    });
    let served = model(&rig, steps);
    rig.prompt("Emit text until told to stop.").await;
    assert_eq!(rig.turn_end(), json!({"kind": "completed"}));
    assert_eq!(served.load(Ordering::SeqCst), steps + 1);
    let summaries = rig.of("compaction/summary").len();
    assert!(summaries > 10, "only {summaries} compactions");
    // Every bracket closed; no failed attempt left the session stuck.
    assert_eq!(
        rig.of("compaction/start").len(),
        rig.of("compaction/end").len()
    );
    // The surface (what the next request carries) stays bounded by the window.
    let size: u64 = rig
        .log()
        .derive_messages()
        .iter()
        .map(|m| estimate_message(m))
        .sum();
    assert!(size < WINDOW, "surface {size} tokens");
    // Every request the model answered fit the window.
    let last = rig.adapter.requests().last().unwrap().clone();
    assert!(
        last.messages
            .iter()
            .map(|m| estimate_message(m))
            .sum::<u64>()
            <= WINDOW
    );

    // Resume after the last checkpoint: a new agent over the same log continues from it.
    let seed: Vec<_> = rig
        .log()
        .events()
        .unwrap()
        .iter()
        .map(|e| e.as_ref().clone())
        .collect();
    let header = rig.log().header().clone();
    rig.agent.dispose().await;
    let log = dsh_session::SessionLog::from_seed(header, seed).unwrap();
    let derived = log.derive_messages();
    let resumed = create(&rig.root, &rig.tools, &rig.adapter, log, true);
    let before = rig.adapter.requests().len();
    // The model (still queued) now answers DONE.
    resumed
        .followup(dsh_protocol::Message::user_text("anything left?"))
        .unwrap();
    idle(&resumed).await;
    let requests = rig.adapter.requests();
    let first = requests[before..]
        .iter()
        .find(|r| r.purpose.is_none())
        .unwrap();
    assert_eq!(first.messages[..derived.len()], derived[..]);
    assert!(
        dsh_protocol::text_of(&first.messages[0].content).starts_with(dsh_compaction::PREAMBLE)
    );
    let end = resumed
        .log()
        .events()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e.kind == "turn/end")
        .unwrap()
        .clone();
    assert_eq!(end.data["reason"], json!({"kind": "completed"}));
}
