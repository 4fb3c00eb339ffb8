//! The summarization request (§8.6): a one-shot side request through the LLM seam, never a
//! loop step. It replays the latest logged system prompt and tools so the provider's prefix
//! cache still hits, then the shadowed messages, then one instruction message.

use std::sync::Arc;

use dsh_llm::BlockAssembler;
use dsh_llm::ModelAdapter;
use dsh_llm::ModelRequest;
use dsh_llm::RequestPurpose;
use dsh_protocol::ContentBlock;
use dsh_protocol::FinishReason;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::TokenUsage;
use dsh_session::data::EpochHeader;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

/// The `plugin` of the instruction message's source (side request only, never logged).
pub const INSTRUCTION_PLUGIN: &str = "dsh-compaction-basic";

/// The section headings of a checkpoint, in order.
pub const SUMMARY_SECTIONS: [&str; 8] = [
    "## Primary Request and Intent",
    "## Key Technical Concepts",
    "## Files and Code",
    "## Errors and Fixes",
    "## Pending Jobs",
    "## Current Work",
    "## Next Step",
    "## Critical Context",
];

/// What the summarizer is told to do. Our own wording; the headings are the interface.
pub const COMPACTION_INSTRUCTION: &str = "\
Stop working on the task for this one reply. Your job now is to compress everything in the conversation above into a checkpoint that will stand in for it: later turns will see only your checkpoint and the newest messages, so anything you leave out is gone.

Write the checkpoint as Markdown with exactly these eight sections, in this order, each heading on its own line:

## Primary Request and Intent
## Key Technical Concepts
## Files and Code
## Errors and Fixes
## Pending Jobs
## Current Work
## Next Step
## Critical Context

Under each heading write short bullet points. Write `(none)` under a heading that has nothing to record.

Keep the facts exact: copy file paths, commands, identifiers, error messages, versions and numbers verbatim rather than paraphrasing them. Record what the user asked for and every correction, preference or piece of feedback they gave. Under Files and Code, name each file that was read or changed and what matters about it; under Pending Jobs, list background work still running or promised; under Current Work and Next Step, say precisely where the work stopped and what comes next.

If the conversation above already begins with a <compacted-summary> block from an earlier checkpoint, fold its content into your sections instead of quoting it.

Reply with the checkpoint only. Do not call tools, do not continue the task, and do not mention that this is a summary or a checkpoint.";

/// Where the summary request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryTarget {
    pub provider: String,
    pub model: String,
}

/// A summary that could not be produced; `code` is the LLM failure code when there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SummaryError {
    pub code: String,
    pub message: String,
}

impl SummaryError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

pub const NO_TARGET: &str = "no provider/model available for summarization: set both BasicCompactionConfig summarization fields, route one request, or set both AgentOptions fields";
pub const TRUNCATED: &str = "summarization truncated at the token cap (incomplete checkpoint)";
pub const IMAGE_OUTPUT: &str = "compaction summary cannot contain image output";
pub const EMPTY_SUMMARY: &str = "summarization produced no text summary content";

/// The target: the configured pair, else the latest header's route, else the agent options.
pub fn resolve_target(
    configured: Option<(&str, &str)>,
    header: Option<&EpochHeader>,
    agent: (&str, &str),
) -> Result<SummaryTarget, SummaryError> {
    let pick = configured
        .or_else(|| header.map(|h| (h.config.provider.as_str(), h.config.model.as_str())))
        .or_else(|| (!agent.0.is_empty() && !agent.1.is_empty()).then_some(agent));
    match pick {
        Some((provider, model)) if !provider.is_empty() && !model.is_empty() => Ok(SummaryTarget {
            provider: provider.to_owned(),
            model: model.to_owned(),
        }),
        _ => Err(SummaryError::new("NO_TARGET", NO_TARGET)),
    }
}

/// The instruction message closing the request.
pub fn instruction_message() -> Message {
    Message::user(
        vec![ContentBlock::text(COMPACTION_INSTRUCTION)],
        MessageSource::plugin(INSTRUCTION_PLUGIN),
    )
}

/// The side request: header system and tools, shadowed messages, instruction.
pub fn build_request(
    header: Option<&EpochHeader>,
    shadowed: Vec<Message>,
    target: &SummaryTarget,
    max_tokens: u64,
    session_id: &str,
) -> ModelRequest {
    let mut messages = shadowed;
    messages.push(instruction_message());
    ModelRequest {
        model: target.model.clone(),
        system: header.and_then(|h| h.system.clone()),
        messages: messages.into(),
        tools: header.and_then(|h| h.tools.clone()).unwrap_or_default(),
        temperature: None,
        max_tokens: Some(u32::try_from(max_tokens).unwrap_or(u32::MAX)),
        stop: Vec::new(),
        reasoning_effort: None,
        session_id: Some(session_id.to_owned()),
        purpose: Some(RequestPurpose::Compaction),
    }
}

/// What a successful summary call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryOutput {
    /// Text blocks only.
    pub summary: Vec<ContentBlock>,
    /// Every assembled block, as the provider returned them.
    pub raw_output: Vec<ContentBlock>,
    pub usage: Option<TokenUsage>,
}

/// Runs the request and validates the result.
pub async fn summarize(
    adapter: Arc<dyn ModelAdapter>,
    request: ModelRequest,
    signal: CancellationToken,
) -> Result<SummaryOutput, SummaryError> {
    let cancel = signal.child_token();
    let mut stream = adapter.stream(request, cancel.clone());
    let mut assembler = BlockAssembler::new();
    loop {
        let next = tokio::select! {
            biased;
            () = signal.cancelled() => None,
            chunk = stream.next() => chunk,
        };
        match next {
            Some(chunk) => assembler.push(&chunk),
            None => break,
        }
    }
    if signal.is_cancelled() {
        cancel.cancel();
        return Err(SummaryError::new("ABORTED", "summarization was cancelled"));
    }
    match assembler.finish() {
        FinishReason::Error { failure } | FinishReason::Aborted { failure } => {
            return Err(SummaryError::new(&failure.code, failure.message));
        }
        FinishReason::MaxTokens => return Err(SummaryError::new("MAX_TOKENS", TRUNCATED)),
        FinishReason::Stop | FinishReason::ToolCalls => {}
    }
    let raw_output = assembler
        .blocks()
        .map_err(|e| SummaryError::new("INVALID_RESPONSE", e.to_string()))?;
    if raw_output
        .iter()
        .any(|b| matches!(b, ContentBlock::Image { .. }))
    {
        return Err(SummaryError::new("UNSUPPORTED_CONTENT", IMAGE_OUTPUT));
    }
    let summary: Vec<ContentBlock> = raw_output
        .iter()
        .filter(|b| matches!(b, ContentBlock::Text { .. }))
        .cloned()
        .collect();
    if dsh_protocol::text_of(&summary).trim().is_empty() {
        return Err(SummaryError::new("EMPTY_SUMMARY", EMPTY_SUMMARY));
    }
    Ok(SummaryOutput {
        summary,
        raw_output,
        usage: assembler.usage().cloned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_agent::scripted::ScriptedAdapter;
    use dsh_agent::scripted::error_response;
    use dsh_agent::scripted::max_tokens_response;
    use dsh_agent::scripted::text_response;
    use dsh_agent::scripted::tool_call_response;
    use dsh_protocol::LlmFailure;
    use dsh_protocol::StreamChunk;
    use dsh_session::data::HeaderConfig;
    use pretty_assertions::assert_eq;

    fn header() -> EpochHeader {
        EpochHeader {
            config: HeaderConfig {
                provider: "hp".into(),
                model: "hm".into(),
                temperature: Some(0.3),
                max_tokens: None,
                reasoning_effort: Some("high".into()),
                stop: None,
            },
            adapter_defaults: None,
            system: Some("sys".into()),
            tools: Some(vec![dsh_protocol::ToolSchema {
                name: "bash".into(),
                description: "d".into(),
                parameters: serde_json::json!({"type": "object"}),
            }]),
        }
    }

    #[test]
    fn the_instruction_names_every_section_in_order() {
        let mut at = 0;
        for heading in SUMMARY_SECTIONS {
            let found = COMPACTION_INSTRUCTION[at..]
                .find(&format!("{heading}\n"))
                .unwrap_or_else(|| panic!("{heading} missing or out of order"));
            at += found + heading.len();
        }
        for needle in [
            "(none)",
            "<compacted-summary>",
            "Do not call tools",
            "verbatim",
        ] {
            assert!(COMPACTION_INSTRUCTION.contains(needle), "{needle}");
        }
    }

    #[test]
    fn target_prefers_config_then_header_then_agent() {
        let h = header();
        let pair = |t: SummaryTarget| (t.provider, t.model);
        assert_eq!(
            pair(resolve_target(Some(("cp", "cm")), Some(&h), ("ap", "am")).unwrap()),
            ("cp".into(), "cm".into())
        );
        assert_eq!(
            pair(resolve_target(None, Some(&h), ("ap", "am")).unwrap()),
            ("hp".into(), "hm".into())
        );
        assert_eq!(
            pair(resolve_target(None, None, ("ap", "am")).unwrap()),
            ("ap".into(), "am".into())
        );
        assert_eq!(
            resolve_target(None, None, ("", "")).unwrap_err().message,
            NO_TARGET
        );
    }

    #[test]
    fn the_request_replays_header_system_and_tools_without_sampling_overrides() {
        // Checklist E52.
        let h = header();
        let shadowed = vec![Message::user_text("one"), Message::user_text("two")];
        let target = SummaryTarget {
            provider: "hp".into(),
            model: "hm".into(),
        };
        let request = build_request(Some(&h), shadowed.clone(), &target, 8192, "sid");
        assert_eq!(request.system.as_deref(), Some("sys"));
        assert_eq!(request.tools, h.tools.clone().unwrap());
        assert_eq!(request.messages.len(), 3);
        assert_eq!(request.messages.to_messages()[..2], shadowed[..]);
        let last = &request.messages[2];
        assert_eq!(dsh_protocol::text_of(&last.content), COMPACTION_INSTRUCTION);
        assert_eq!(
            last.source.get("plugin").and_then(|v| v.as_str()),
            Some(INSTRUCTION_PLUGIN)
        );
        assert_eq!(request.max_tokens, Some(8192));
        assert_eq!(request.purpose, Some(RequestPurpose::Compaction));
        assert_eq!(request.temperature, None);
        assert_eq!(request.reasoning_effort, None);
        assert_eq!(request.session_id.as_deref(), Some("sid"));
        assert_eq!(request.model, "hm");
    }

    async fn run(chunks: Vec<StreamChunk>) -> Result<SummaryOutput, SummaryError> {
        let adapter = ScriptedAdapter::new("hp");
        adapter.push_chunks(chunks);
        let target = SummaryTarget {
            provider: "hp".into(),
            model: "hm".into(),
        };
        let request = build_request(None, vec![], &target, 32, "s");
        summarize(adapter, request, CancellationToken::new()).await
    }

    #[tokio::test]
    async fn results_are_validated() {
        let ok = run(text_response("## Primary Request and Intent\n- x"))
            .await
            .unwrap();
        assert_eq!(
            ok.summary,
            vec![ContentBlock::text("## Primary Request and Intent\n- x")]
        );
        assert_eq!(ok.raw_output, ok.summary);
        // Checklist E55.
        let truncated = run(max_tokens_response("## Prim")).await.unwrap_err();
        assert_eq!(truncated, SummaryError::new("MAX_TOKENS", TRUNCATED));
        let empty = run(text_response("  \n ")).await.unwrap_err();
        assert_eq!(empty.message, EMPTY_SUMMARY);
        let failed = run(error_response(LlmFailure::new("SERVER", "upstream 500")))
            .await
            .unwrap_err();
        assert_eq!(failed, SummaryError::new("SERVER", "upstream 500"));
        // Tool calls are dropped from the summary but kept in the raw output.
        let mixed = run(tool_call_response("c", "bash", "{}", None))
            .await
            .unwrap_err();
        assert_eq!(mixed.message, EMPTY_SUMMARY);
    }

    #[tokio::test]
    async fn cancellation_stops_the_call() {
        let adapter = ScriptedAdapter::new("hp");
        adapter.set_chunk_delay(Some(std::time::Duration::from_secs(5)));
        adapter.push_chunks(text_response("late"));
        let target = SummaryTarget {
            provider: "hp".into(),
            model: "hm".into(),
        };
        let signal = CancellationToken::new();
        let task = tokio::spawn(summarize(
            adapter,
            build_request(None, vec![], &target, 32, "s"),
            signal.clone(),
        ));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        signal.cancel();
        let error = task.await.unwrap().unwrap_err();
        assert_eq!(error.code, "ABORTED");
    }
}
