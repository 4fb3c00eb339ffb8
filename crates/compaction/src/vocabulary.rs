//! The durable vocabulary (§8.2). All four events are log-only (no `surfaceOp`); field order is
//! the order upstream writes.

use dsh_protocol::ContentBlock;
use dsh_protocol::TokenUsage;
use dsh_session::data::EventData;
use serde::Deserialize;
use serde::Serialize;

pub const COMPACTION_START: &str = "compaction/start";
pub const COMPACTION_SUMMARY: &str = "compaction/summary";
pub const COMPACTION_END: &str = "compaction/end";
pub const COMPACTION_PRUNE: &str = "compaction/prune";

/// `{start, end}` seqs of a shadowed surface span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowedRange {
    pub start: u64,
    pub end: u64,
}

/// `compaction/start {compactionId, sourceCommandId?, turn}`; `turn` is `null` for manual runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionStart {
    pub compaction_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_command_id: Option<String>,
    pub turn: Option<u64>,
}

/// `compaction/summary`: the summary and its provenance, priced by `shadowedTokenCount` (the
/// shadow price of the replacement that follows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummary {
    pub compaction_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_command_id: Option<String>,
    pub summary: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<Vec<ContentBlock>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub llm_stream_call: bool,
    pub shadowed_range: ShadowedRange,
    pub shadowed_seqs: Vec<u64>,
    pub shadowed_token_count: u64,
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
}

/// `compaction/end {compactionId, sourceCommandId?, turn, error?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionEnd {
    pub compaction_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_command_id: Option<String>,
    pub turn: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `compaction/prune {shadowedRange, shadowedSeqs, shadowedTokenCount}`: the shadow price of the
/// pruned `tool/result` replacement that follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionPrune {
    pub shadowed_range: ShadowedRange,
    pub shadowed_seqs: Vec<u64>,
    pub shadowed_token_count: u64,
}

impl EventData for CompactionStart {
    const KIND: &'static str = COMPACTION_START;
}
impl EventData for CompactionSummary {
    const KIND: &'static str = COMPACTION_SUMMARY;
}
impl EventData for CompactionEnd {
    const KIND: &'static str = COMPACTION_END;
}
impl EventData for CompactionPrune {
    const KIND: &'static str = COMPACTION_PRUNE;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_written_in_upstream_order() {
        let start = CompactionStart {
            compaction_id: "c".into(),
            source_command_id: None,
            turn: None,
        };
        assert_eq!(
            serde_json::to_string(&start).unwrap(),
            r#"{"compactionId":"c","turn":null}"#
        );
        let summary = CompactionSummary {
            compaction_id: "c".into(),
            source_command_id: Some("cmd".into()),
            summary: vec![ContentBlock::text("s")],
            raw_output: Some(vec![ContentBlock::text("s")]),
            llm_stream_call: true,
            shadowed_range: ShadowedRange { start: 4, end: 4 },
            shadowed_seqs: vec![4],
            shadowed_token_count: 266,
            provider: "p".into(),
            model: "m".into(),
            max_tokens: Some(32),
            usage: None,
        };
        assert_eq!(
            serde_json::to_string(&summary).unwrap(),
            r#"{"compactionId":"c","sourceCommandId":"cmd","summary":[{"type":"text","text":"s"}],"rawOutput":[{"type":"text","text":"s"}],"llmStreamCall":true,"shadowedRange":{"start":4,"end":4},"shadowedSeqs":[4],"shadowedTokenCount":266,"provider":"p","model":"m","maxTokens":32}"#
        );
        let end = CompactionEnd {
            compaction_id: "c".into(),
            source_command_id: None,
            turn: Some(1),
            error: Some("boom".into()),
        };
        assert_eq!(
            serde_json::to_string(&end).unwrap(),
            r#"{"compactionId":"c","turn":1,"error":"boom"}"#
        );
    }
}
