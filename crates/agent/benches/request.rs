//! Request building at 100, 1,000 and 10,000 messages: after one step's messages are appended
//! to the log (an assistant tool call and its result), build the next request from the log and
//! encode the body the provider receives. Flat means the time does not grow with the history.
//! `cargo bench -p dsh-agent --bench request`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::Duration;
use std::time::Instant;

use criterion::BenchmarkId;
use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use dsh_llm::DeepSeekAdapter;
use dsh_llm::DeepSeekConfig;
use dsh_llm::ModelRequest;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::ToolSchema;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_session::SurfaceIntent;
use dsh_session::data::AssistantMessage;
use dsh_session::data::ToolResult;
use dsh_session::data::UserMessage;
use serde_json::json;

/// Appends one tool-calling step: the assistant's reasoning and call, then the call's result.
fn append_step(log: &SessionLog, i: usize) {
    let call = format!("call_{i}");
    let assistant = Message::assistant(
        vec![
            ContentBlock::Reasoning {
                text: format!("Step {i}: the next command prints its number, so run it now."),
            },
            ContentBlock::ToolCall {
                id: call.clone(),
                name: "bash".into(),
                arguments: json!({"command": format!("echo step-{i}"), "description": "Run"})
                    .to_string(),
            },
        ],
        MessageSource::model("deepseek-official", "deepseek-v4-flash"),
    );
    log.append_data(
        &AssistantMessage {
            turn: 1,
            step: i as u64 + 1,
            message: assistant,
            interrupted: false,
            usage: None,
        },
        Some(SurfaceIntent::append_from(vec![])),
    )
    .unwrap();
    let call_seq = log.len() - 1;
    let result = Message::tool_result(
        &call,
        vec![ContentBlock::text(format!(
            "step-{i}\n(exit code 0; the command printed one line of output)"
        ))],
        false,
    );
    log.append_data(
        &ToolResult {
            turn: 1,
            step: i as u64 + 1,
            message: result,
            error: None,
            meta: None,
        },
        Some(SurfaceIntent::append_from(vec![call_seq])),
    )
    .unwrap();
}

/// A log whose history holds `messages` messages (a prompt, then tool steps).
fn history(messages: usize) -> SessionLog {
    let log = SessionLog::in_memory(SessionHeader::new("bench", None));
    log.append_data(
        &UserMessage(Message::user_text("Run the numbered commands.")),
        Some(SurfaceIntent::append()),
    )
    .unwrap();
    for i in 0..messages.saturating_sub(1) / 2 {
        append_step(&log, i);
    }
    log
}

fn tools() -> Vec<ToolSchema> {
    (0..12)
        .map(|i| ToolSchema {
            name: format!("tool_{i}"),
            description: "A tool with a short description.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        })
        .collect()
}

/// The request the step sends, encoded as the provider receives it.
fn build(adapter: &DeepSeekAdapter, log: &SessionLog, tools: &[ToolSchema]) -> usize {
    let request = ModelRequest {
        model: "deepseek-v4-flash".into(),
        system: Some("You are a coding agent.".into()),
        messages: log.derive_messages(),
        tools: tools.to_vec(),
        max_tokens: Some(256_000),
        reasoning_effort: Some("high".into()),
        session_id: Some(log.id().to_owned()),
        ..ModelRequest::default()
    };
    adapter.request_body(request).unwrap().len()
}

fn request_building(c: &mut Criterion) {
    let tools = tools();
    let adapter = DeepSeekAdapter::new(DeepSeekConfig::default()).unwrap();
    let mut group = c.benchmark_group("request_after_one_step");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(4));
    for messages in [100usize, 1_000, 10_000] {
        let mut log = history(messages);
        let mut step = messages;
        black_box(build(&adapter, &log, &tools));
        group.bench_function(BenchmarkId::from_parameter(messages), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Keep the history within 10% of its nominal size.
                    if log.derive_messages().len() > messages + messages / 10 + 2 {
                        log = history(messages);
                        black_box(build(&adapter, &log, &tools));
                        // After a long untimed setup the scheduler would preempt this thread
                        // inside the timed part on a busy machine; a short sleep evens it out.
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let start = Instant::now();
                    append_step(&log, step);
                    black_box(build(&adapter, &log, &tools));
                    total += start.elapsed();
                    step += 1;
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, request_building);
criterion_main!(benches);
