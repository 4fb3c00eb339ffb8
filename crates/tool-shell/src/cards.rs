//! UI render intents (tool-runtime-spec §8.3), the subset the shell tools produce. Local until
//! `dsh-tools` exports the shared card vocabulary; the JSON shapes are upstream's.

use dsh_protocol::ContentBlock;
use serde::Serialize;
use serde_json::Value;

/// Icon hint of a generic call card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolCallKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Fetch,
    Other,
}

/// The pending card of a call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "card",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum ToolCallView {
    Generic {
        title: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        kind: Option<ToolCallKind>,
        #[serde(skip_serializing_if = "Option::is_none")]
        raw_input: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<Vec<ContentBlock>>,
    },
    Terminal {
        title: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
    },
}

/// The completed card of a call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "card",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum ToolResultView {
    Generic {
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<Vec<ContentBlock>>,
    },
    /// `exit_code` and `signal` are mutually exclusive.
    Terminal {
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
    },
}

/// A generic result card showing `text` as a console block (background acknowledgements and
/// error results).
pub(crate) fn console_card(text: &str) -> ToolResultView {
    let body = text.trim_end_matches('\n');
    ToolResultView::Generic {
        title: None,
        content: Some(vec![ContentBlock::text(format!("```console\n{body}\n```"))]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn terminal_cards_serialize_with_upstream_keys() {
        let call = ToolCallView::Terminal {
            title: "ls".into(),
            description: Some("List".into()),
            cwd: None,
        };
        assert_eq!(
            serde_json::to_value(&call).unwrap(),
            json!({"card":"terminal","title":"ls","description":"List"})
        );
        let result = ToolResultView::Terminal {
            title: None,
            output: Some("x\n".into()),
            exit_code: Some(3),
            signal: None,
        };
        assert_eq!(
            serde_json::to_value(&result).unwrap(),
            json!({"card":"terminal","output":"x\n","exitCode":3})
        );
        let generic = ToolCallView::Generic {
            title: "t".into(),
            kind: Some(ToolCallKind::Execute),
            raw_input: Some(json!("t")),
            content: None,
        };
        assert_eq!(
            serde_json::to_value(&generic).unwrap(),
            json!({"card":"generic","title":"t","kind":"execute","rawInput":"t"})
        );
    }
}
