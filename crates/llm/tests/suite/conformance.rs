//! Every recorded model response of the conformance scenarios, served over SSE exactly as the
//! replay server will, must give the recorded usage, finish and model output.
//! Data: `$DSH_CONFORMANCE_DIR` (default `../shared/conformance` beside the repository); skipped when absent.

use std::path::PathBuf;

use dsh_llm::BlockAssembler;
use dsh_llm::ContentBlock;
use dsh_llm::FinishReason;
use dsh_llm::StreamChunk;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;
use wiremock::Mock;
use wiremock::MockServer;
use wiremock::ResponseTemplate;

use super::server::Reply;
use super::server::Server;
use super::server::Step;
use super::server::delta;
use super::server::done;
use super::server::events;
use super::server::last;
use super::stream::adapter;
use super::stream::collect;
use super::stream::finish_of;
use super::stream::prompt;

fn entries() -> Vec<(String, Value)> {
    let root = std::env::var_os("DSH_CONFORMANCE_DIR").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/conformance"
            ))
        },
        PathBuf::from,
    );
    let mut out = Vec::new();
    for suite in ["acp", "headless"] {
        let Ok(dirs) = std::fs::read_dir(root.join(suite)) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = dirs.filter_map(|d| d.ok().map(|d| d.path())).collect();
        dirs.sort();
        for dir in dirs {
            let Ok(text) = std::fs::read_to_string(dir.join("model.jsonl")) else {
                continue;
            };
            for (line_no, line) in text.lines().enumerate() {
                let name = format!("{}:{}", dir.display(), line_no + 1);
                out.push((name, serde_json::from_str(line).unwrap()));
            }
        }
    }
    out
}

/// The SSE body for a `response` entry, per the conformance README.
fn sse_body(entry: &Value) -> Vec<u8> {
    let mut payloads = vec![delta(json!({"role":"assistant","content":""}), None)];
    let calls = entry["tool_calls"].as_array().cloned().unwrap_or_default();
    let replaced: Vec<bool> = calls
        .iter()
        .map(|c| c.get("streamed_arguments").is_some())
        .collect();
    for (k, call) in calls.iter().enumerate().filter(|(k, _)| replaced[*k]) {
        payloads.push(delta(
            json!({"tool_calls":[{"index":k,"id":call["id"],"type":"function","function":{"name":call["name"],"arguments":call["arguments"]}}]}),
            None,
        ));
    }
    for element in entry["stream"].as_array().cloned().unwrap_or_default() {
        if let Some(text) = element.get("reasoning") {
            payloads.push(delta(json!({"reasoning_content": text}), None));
        } else if let Some(text) = element.get("content") {
            payloads.push(delta(json!({"content": text}), None));
        } else if let Some(k) = element.get("tool_call").and_then(Value::as_u64) {
            if replaced[k as usize] {
                continue;
            }
            let call = match element.get("id") {
                Some(id) => {
                    json!({"index":k,"id":id,"type":"function","function":{"name":element["name"],"arguments":element["arguments"]}})
                }
                None => json!({"index":k,"function":{"arguments":element["arguments"]}}),
            };
            payloads.push(delta(json!({"tool_calls":[call]}), None));
        }
    }
    payloads.push(last(
        entry["finish_reason"].as_str().unwrap(),
        entry["usage"].clone(),
    ));
    [events(&payloads), done()].concat()
}

#[tokio::test]
async fn recorded_responses_reproduce_recorded_usage_finish_and_output() {
    let responses: Vec<(String, Value)> = entries()
        .into_iter()
        .filter(|(_, e)| e["kind"] == "response")
        .collect();
    if responses.is_empty() {
        return; // no conformance data on this machine
    }
    let replies = responses
        .iter()
        .map(|(_, e)| Reply::sse(vec![Step::Send(sse_body(e))]))
        .collect();
    let server = Server::start(replies).await;
    let adapter = adapter(&server.base_url);
    for (name, entry) in &responses {
        let chunks = collect(&adapter, prompt("replay")).await;
        let finish = serde_json::to_value(finish_of(&chunks)).unwrap();
        assert_eq!(&finish, &entry["recorded_finish"], "{name}");
        let usage = chunks.iter().find_map(|c| match c {
            StreamChunk::Usage { usage } => Some(serde_json::to_value(usage).unwrap()),
            _ => None,
        });
        assert_eq!(
            usage.unwrap_or(Value::Null),
            entry["recorded_usage"],
            "{name}"
        );
        if !matches!(
            finish_of(&chunks),
            FinishReason::Stop | FinishReason::ToolCalls | FinishReason::MaxTokens
        ) {
            continue;
        }
        let mut assembler = BlockAssembler::new();
        chunks.iter().for_each(|c| assembler.push(c));
        let mut reasoning = None;
        let mut content = None;
        let mut calls = Vec::new();
        for block in assembler.blocks().unwrap() {
            match block {
                ContentBlock::Reasoning { text } => reasoning = Some(text),
                ContentBlock::Text { text } => content = Some(text),
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    calls.push(json!({"id": id, "name": name, "arguments": arguments}));
                }
                other => panic!("{name}: unexpected block {other:?}"),
            }
        }
        assert_eq!(
            reasoning.map_or(Value::Null, Value::from),
            entry["reasoning"],
            "{name}"
        );
        assert_eq!(
            content.map_or(Value::Null, Value::from),
            entry["content"],
            "{name}"
        );
        let recorded: Vec<Value> = entry["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|_| entry["finish_reason"] != "length")
            .map(|c| json!({"id": c["id"], "name": c["name"], "arguments": c["arguments"]}))
            .collect();
        assert_eq!(calls, recorded, "{name}");
    }
    assert_eq!(server.requests().len(), responses.len());
}

#[tokio::test]
async fn recorded_error_entries_classify_as_recorded() {
    for (name, entry) in entries().into_iter().filter(|(_, e)| e["kind"] == "error") {
        let error = &entry["error"];
        let server = MockServer::start().await;
        let status = error["status"].as_u64().unwrap() as u16;
        Mock::given(wiremock::matchers::method("POST"))
            .respond_with(
                ResponseTemplate::new(status)
                    .set_body_raw(error["body"].to_string(), "application/json"),
            )
            .mount(&server)
            .await;
        let FinishReason::Error { failure } =
            finish_of(&collect(&adapter(&server.uri()), prompt("x")).await)
        else {
            panic!("{name}: not an error finish");
        };
        let recorded = &entry["recorded_finish"]["failure"];
        assert_eq!(
            (
                failure.code.as_str(),
                failure.message.as_str(),
                failure.status
            ),
            (
                recorded["code"].as_str().unwrap(),
                recorded["message"].as_str().unwrap(),
                Some(status)
            ),
            "{name}"
        );
    }
}
