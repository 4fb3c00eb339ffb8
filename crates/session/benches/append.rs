//! Log append throughput: one step's worth of events (a step/start, 40 streamed chunks, the
//! assistant message, a tool call and result, a step/end) appended to a persisted log:
//! - `persisted`: timed until the step's end is durable (`flush()`, the blocking form of the
//!   loop's `sync().await` barrier);
//! - `persisted_no_wait`: the appending thread's own time, not waiting for the writer (what an
//!   async worker spends per step; the writer thread catches up in the background);
//! - `in_memory`: the same into an in-memory log.
//!
//! `cargo bench -p dsh-session --bench append`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use criterion::Criterion;
use criterion::Throughput;
use criterion::criterion_group;
use criterion::criterion_main;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::StreamChunk;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_session::SurfaceIntent;
use dsh_session::data::AssistantChunk;
use dsh_session::data::AssistantMessage;
use dsh_session::data::StepEnd;
use dsh_session::data::StepStart;
use dsh_session::data::ToolCall;
use dsh_session::data::ToolResult;
use dsh_session::data::TurnStart;

const CHUNKS: usize = 40;
/// Events per step: step/start, the chunks, assistant/message, tool/call, tool/result, step/end.
const EVENTS_PER_STEP: u64 = CHUNKS as u64 + 5;

fn step(log: &SessionLog, step: u64) {
    log.append_data(&StepStart { turn: 1, step }, None).unwrap();
    let mut seqs = Vec::with_capacity(CHUNKS);
    for _ in 0..CHUNKS {
        let chunk = StreamChunk::TextDelta {
            index: 0,
            text: "some streamed words ".into(),
        };
        let event = log
            .append_data(
                &AssistantChunk {
                    turn: 1,
                    step,
                    chunk,
                },
                None,
            )
            .unwrap();
        seqs.push(event.seq);
    }
    let call = format!("call_{step}");
    let message = Message::assistant(
        vec![
            ContentBlock::text("some streamed words ".repeat(CHUNKS)),
            ContentBlock::ToolCall {
                id: call.clone(),
                name: "bash".into(),
                arguments: r#"{"command":"echo hi"}"#.into(),
            },
        ],
        MessageSource::model("p", "m"),
    );
    let data = AssistantMessage {
        turn: 1,
        step,
        message,
        interrupted: false,
        usage: None,
    };
    log.append_data(&data, Some(SurfaceIntent::append_from(seqs)))
        .unwrap();
    let call_event = log
        .append_data(
            &ToolCall {
                turn: 1,
                step,
                call_id: call.clone(),
                name: "bash".into(),
                arguments: r#"{"command":"echo hi"}"#.into(),
            },
            None,
        )
        .unwrap();
    let result = ToolResult {
        turn: 1,
        step,
        message: Message::tool_result(&call, vec![ContentBlock::text("hi\n")], false),
        error: None,
        meta: None,
    };
    log.append_data(
        &result,
        Some(SurfaceIntent::append_from(vec![call_event.seq])),
    )
    .unwrap();
    log.append_data(&StepEnd { turn: 1, step }, None).unwrap();
}

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("session_append_step");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(EVENTS_PER_STEP));

    let home = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(home.path());
    let log = store
        .create(CreateOptions {
            cwd: Some(home.path().to_path_buf()),
            ..CreateOptions::default()
        })
        .unwrap();
    log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    let mut n = 0;
    group.bench_function("persisted", |b| {
        b.iter(|| {
            n += 1;
            step(&log, n);
            log.flush().unwrap();
        })
    });
    group.bench_function("persisted_no_wait", |b| {
        b.iter(|| {
            n += 1;
            step(&log, n);
        })
    });
    log.flush().unwrap();

    let memory = SessionLog::in_memory(SessionHeader::new("bench", None));
    memory.append_data(&TurnStart { turn: 1 }, None).unwrap();
    let mut m = 0;
    group.bench_function("in_memory", |b| {
        b.iter(|| {
            m += 1;
            step(&memory, m);
        })
    });
    group.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
