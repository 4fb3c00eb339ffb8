use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::FinishReason;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::StreamChunk;
use dsh_protocol::TokenUsage;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_session::SurfaceIntent;
use dsh_session::data::AssistantChunk;
use dsh_session::data::AssistantMessage;
use dsh_session::data::EpochHeader;
use dsh_session::data::HeaderConfig;
use dsh_session::data::HeaderReason;
use dsh_session::data::RequestHeader;
use dsh_session::data::StepEnd;
use dsh_session::data::StepStart;
use dsh_session::data::TurnStart;
use dsh_session::data::UserMessage;
use pretty_assertions::assert_eq;

use super::*;
use crate::estimate::estimate_text;

fn header(system: &str) -> EpochHeader {
    EpochHeader {
        config: HeaderConfig {
            provider: "p".into(),
            model: "m".into(),
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
            stop: None,
        },
        adapter_defaults: None,
        system: Some(system.into()),
        tools: None,
    }
}

fn usage(input: u64, output: u64) -> TokenUsage {
    TokenUsage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: Some(100),
        cache_write_tokens: None,
        reasoning_tokens: Some(7),
    }
}

struct Fixture {
    log: SessionLog,
}

impl Fixture {
    fn new() -> Self {
        let log = SessionLog::in_memory(SessionHeader::new("s", None));
        log.set_clock(Arc::new(|| 1));
        Self { log }
    }

    fn user(&self, text: &str) -> u64 {
        self.log
            .append_data(
                &UserMessage(Message::user_text(text)),
                Some(SurfaceIntent::append()),
            )
            .unwrap()
            .seq
    }

    fn header(&self, header: EpochHeader) {
        self.log
            .append_data(
                &RequestHeader {
                    header,
                    reason: HeaderReason::Initial,
                },
                None,
            )
            .unwrap();
    }

    fn step(&self, turn: u64, step: u64) {
        self.log
            .append_data(&StepStart { turn, step }, None)
            .unwrap();
    }

    fn end_step(&self, turn: u64, step: u64) {
        self.log.append_data(&StepEnd { turn, step }, None).unwrap();
    }

    /// Streams `text` as chunks and commits the assistant message citing them.
    fn answer(&self, turn: u64, step: u64, text: &str, usage: Option<TokenUsage>) -> u64 {
        let chunks = [
            StreamChunk::TextDelta {
                index: 0,
                text: text.into(),
            },
            StreamChunk::Finish {
                reason: FinishReason::Stop,
                replay_state: None,
            },
        ];
        let mut seqs = Vec::new();
        for chunk in chunks {
            let event = self
                .log
                .append_data(&AssistantChunk { turn, step, chunk }, None)
                .unwrap();
            seqs.push(event.seq);
        }
        let message = Message::assistant(
            vec![ContentBlock::text(text)],
            MessageSource::model("p", "m"),
        );
        self.log
            .append_data(
                &AssistantMessage {
                    turn,
                    step,
                    message,
                    interrupted: false,
                    usage,
                },
                Some(SurfaceIntent::append_from(seqs)),
            )
            .unwrap()
            .seq
    }

    fn fold(&self) -> MeterFold {
        let mut fold = MeterFold::new();
        fold.catch_up(&self.log).unwrap();
        fold
    }
}

fn price(text: &str) -> u64 {
    estimate_text(text) + 8
}

#[test]
fn the_surface_sum_follows_appends_and_nodes_mirror_the_log_surface() {
    let f = Fixture::new();
    f.log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    f.user("hello there");
    f.user("x");
    let fold = f.fold();
    assert_eq!(fold.surface_tokens(), price("hello there") + price("x"));
    let seqs: Vec<u64> = fold.nodes().iter().map(|n| n.seq).collect();
    assert_eq!(seqs, f.log.surface_seqs());
    // Without a header the measurement is the surface alone.
    let m = fold.measure(None);
    assert_eq!(m.baseline, Baseline::None);
    assert_eq!(m.total_tokens, m.surface_tokens);
}

#[test]
fn a_replacement_removes_the_shadowed_sum_and_adds_the_checkpoint() {
    // Checklist D41.
    let f = Fixture::new();
    let a = f.user(&"a".repeat(400));
    let b = f.user(&"b".repeat(400));
    f.user("tail");
    let before = f.fold().surface_tokens();
    let checkpoint = Message::user(
        vec![ContentBlock::text("summary")],
        MessageSource::plugin("compact"),
    );
    f.log
        .append_data(
            &UserMessage(checkpoint),
            Some(SurfaceIntent::replace(a, b, vec![a, b])),
        )
        .unwrap();
    let fold = f.fold();
    let shadowed = price(&"a".repeat(400)) + price(&"b".repeat(400));
    assert_eq!(fold.surface_tokens(), before - shadowed + price("summary"));
    let seqs: Vec<u64> = fold.nodes().iter().map(|n| n.seq).collect();
    assert_eq!(seqs, f.log.surface_seqs());
}

#[test]
fn a_matching_header_measures_provider_usage_plus_the_signed_delta() {
    // Checklist D40.
    let f = Fixture::new();
    let h = header("system prompt");
    f.header(h.clone());
    f.step(1, 1);
    let at_start = f.fold().surface_tokens();
    f.user("prompt");
    f.answer(1, 1, "answer", Some(usage(5000, 40)));
    f.end_step(1, 1);
    f.user("steering after the answer");
    let fold = f.fold();
    let m = fold.measure(None);
    let provider = 5000 + 100 + 40;
    assert_eq!(
        m.baseline,
        Baseline::Usage {
            tokens: provider,
            usage: usage(5000, 40)
        }
    );
    // The anchor's surface is the surface at step/start plus the streamed output.
    let anchor_surface = at_start + price("answer");
    let delta = fold.surface_tokens() as i64 - anchor_surface as i64;
    assert_eq!(m.surface_delta_tokens, delta);
    assert_eq!(m.total_tokens, (provider as i64 + delta) as u64);
}

#[test]
fn a_changed_header_falls_back_to_the_full_heuristic() {
    // Checklist D42.
    let f = Fixture::new();
    f.header(header("one"));
    f.step(1, 1);
    f.user("prompt");
    f.answer(1, 1, "answer", Some(usage(5000, 40)));
    f.end_step(1, 1);
    let changed = header("a different system prompt");
    let fold = f.fold();
    let m = fold.measure(Some(&changed));
    assert_eq!(
        m.total_tokens,
        crate::estimate_header(&changed) + fold.surface_tokens()
    );
    assert_eq!(m.surface_delta_tokens, 0);
    // A newly logged header does the same without passing it.
    f.header(changed.clone());
    let m = f.fold().measure(None);
    assert_eq!(
        m.total_tokens,
        crate::estimate_header(&changed) + fold.surface_tokens()
    );
}

#[test]
fn implausibly_small_usage_is_replaced_by_the_estimate() {
    let f = Fixture::new();
    let h = header(&"s".repeat(4000));
    f.header(h.clone());
    f.step(1, 1);
    f.user("prompt");
    f.answer(1, 1, "answer", Some(usage(1, 1)));
    let fold = f.fold();
    let m = fold.measure(None);
    let expected = crate::estimate_header(&h) + price("answer");
    assert_eq!(m.baseline, Baseline::Estimated { tokens: expected });
}

#[test]
fn negative_totals_clamp_to_zero_after_compaction() {
    let f = Fixture::new();
    f.header(header("h"));
    let a = f.user(&"a".repeat(4000));
    f.step(1, 1);
    f.answer(1, 1, "ok", Some(usage(0, 0)));
    f.end_step(1, 1);
    // Usage 100 (cache read) is below the heuristic, so the baseline is estimated; replacing a
    // big node makes the delta strongly negative but never below zero.
    let checkpoint = Message::user(
        vec![ContentBlock::text("s")],
        MessageSource::plugin("compact"),
    );
    f.log
        .append_data(
            &UserMessage(checkpoint),
            Some(SurfaceIntent::replace(a, a, vec![a])),
        )
        .unwrap();
    let m = f.fold().measure(None);
    assert!(m.surface_delta_tokens < 0);
    assert!(m.total_tokens < price(&"a".repeat(4000)));
}

#[test]
fn an_assistant_message_outside_its_step_is_a_fold_error() {
    let f = Fixture::new();
    f.step(1, 1);
    f.answer(1, 2, "x", None);
    let mut fold = MeterFold::new();
    let error = fold.catch_up(&f.log).unwrap_err();
    assert!(matches!(error, MeterError::AssistantOutsideStep { .. }));
    // Sticky.
    assert_eq!(fold.catch_up(&f.log).unwrap_err(), error);
}

#[test]
fn the_fold_is_incremental_and_equals_a_fresh_refold() {
    let f = Fixture::new();
    let mut live = MeterFold::new();
    f.header(header("h"));
    live.catch_up(&f.log).unwrap();
    for i in 0..20 {
        f.step(1, i + 1);
        f.user(&format!("message {i}"));
        live.catch_up(&f.log).unwrap();
        f.answer(
            1,
            i + 1,
            &"r".repeat(i as usize * 10),
            Some(usage(10 * i, 3)),
        );
        f.end_step(1, i + 1);
        live.catch_up(&f.log).unwrap();
    }
    let fresh = f.fold();
    assert_eq!(live.measure(None), fresh.measure(None));
    assert_eq!(live.total_tokens(None), fresh.measure(None).total_tokens);
    let other = header("changed");
    assert_eq!(
        live.total_tokens(Some(&other)),
        live.measure(Some(&other)).total_tokens
    );
    assert_eq!(live.next_seq(), f.log.len());
}
