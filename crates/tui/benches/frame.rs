//! Frame cost with a long finished transcript: `cargo bench -p dsh-tui --bench frame`.
//! An idle frame (nothing changed) against a frame whose render cache is empty, and against
//! re-rendering and re-wrapping the whole transcript (what every frame did before the cache).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_session::Event;
use dsh_tui::Presenters;
use dsh_tui::RenderCache;
use dsh_tui::Transcript;
use dsh_tui::UiState;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;
use serde_json::json;

const TURNS: u64 = 300;
const ANSWER: &str = "Here is what changed, with **bold**, `code` and a [link](https://example.com):\n\n| file | lines |\n|---|---|\n| src/cart.rs | +12 -3 |\n| src/coupon.rs | +40 |\n\n- first point\n  - a nested one that is long enough to wrap at a hundred columns of terminal width, twice over\n- second point\n\n```rust\nfn total(items: &[Item]) -> u64 {\n    items.iter().map(|i| i.price).sum()\n}\n```";

fn event(seq: u64, kind: &str, data: Value) -> Arc<Event> {
    Arc::new(Event::new(kind, seq, 1000 + seq, data))
}

fn long_state() -> UiState {
    let mut events = Vec::new();
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        seq
    };
    for turn in 1..=TURNS {
        events.push(event(next(), "turn/start", json!({"turn": turn})));
        let user = Message::user_text(format!("question {turn}: what changed in the cart?"));
        events.push(event(
            next(),
            "user/message",
            serde_json::to_value(user).unwrap(),
        ));
        let answer = Message::assistant(
            vec![ContentBlock::text(ANSWER)],
            MessageSource::model("p", "m"),
        );
        events.push(event(
            next(),
            "assistant/message",
            json!({"turn": turn, "step": 1, "message": answer}),
        ));
        events.push(event(
            next(),
            "turn/end",
            json!({"turn": turn, "reason": {"kind": "completed"}}),
        ));
    }
    let mut state = UiState::new("m", "/tmp/project", "bench");
    state.transcript = Transcript::from_events(events.iter(), &Presenters::default());
    state
}

fn frames(c: &mut Criterion) {
    let state = long_state();
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let mut group = c.benchmark_group("tui_frame_300_turns_100x30");
    group.bench_function("idle_frame_cached", |b| {
        b.iter(|| {
            terminal.draw(|f| dsh_tui::render(&state, f)).unwrap();
        });
    });
    group.bench_function("frame_empty_cache", |b| {
        b.iter(|| {
            *state.render_cache.borrow_mut() = RenderCache::default();
            terminal.draw(|f| dsh_tui::render(&state, f)).unwrap();
        });
    });
    group.bench_function("whole_transcript_rewrapped", |b| {
        b.iter(|| {
            *state.render_cache.borrow_mut() = RenderCache::default();
            dsh_tui::view::transcript_lines(&state, 100)
        });
    });
    group.finish();
}

criterion_group!(benches, frames);
criterion_main!(benches);
