//! Render-intent cards (tool-runtime-spec §8.3, catalog §1C), defined locally until `dsh-tools`
//! publishes its own; the shapes (tag `card`, camelCase keys, optional keys omitted) are the wire.

use dsh_protocol::ContentBlock;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileLocation {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

impl FileLocation {
    pub fn path(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            line: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileDiff {
    pub path: String,
    pub old_text: Option<String>,
    pub new_text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadFileLine {
    pub number: u64,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchFileMatches {
    pub path: String,
    pub matches: Vec<SearchMatch>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchMatch {
    pub line_number: u64,
    pub line: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "card", rename_all = "lowercase")]
pub enum CallView {
    Generic {
        title: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<ToolCallKind>,
        #[serde(default, rename = "rawInput", skip_serializing_if = "Option::is_none")]
        raw_input: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Vec<ContentBlock>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        locations: Option<Vec<FileLocation>>,
    },
    Terminal {
        title: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
    },
    Diff {
        title: String,
        diffs: Vec<FileDiff>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        locations: Option<Vec<FileLocation>>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "shape", rename_all = "lowercase")]
pub enum SearchView {
    Matches {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        files: Vec<SearchFileMatches>,
        truncated: bool,
        total: u64,
    },
    Paths {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        paths: Vec<String>,
        truncated: bool,
        total: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "card", rename_all = "lowercase")]
pub enum ResultView {
    Generic {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Vec<ContentBlock>>,
    },
    Terminal {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        #[serde(default, rename = "exitCode", skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
    },
    Diff {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        diffs: Vec<FileDiff>,
    },
    Search(SearchView),
    Read {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        path: String,
        offset: u64,
        lines: Vec<ReadFileLine>,
        #[serde(rename = "totalLines")]
        total_lines: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lang: Option<String>,
        /// The fallback text: the envelope body (numbered lines and footer).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
    },
}

/// What a presenter sees of a finished call: only what the log keeps (replay-safe).
#[derive(Debug, Clone, Copy)]
pub struct ResultInput<'a> {
    pub content: &'a [ContentBlock],
    pub is_error: bool,
    pub meta: Option<&'a Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn cards_serialize_with_card_tag_and_camel_case() {
        let view = ResultView::Search(SearchView::Paths {
            title: None,
            paths: vec!["a".into()],
            truncated: false,
            total: 1,
        });
        assert_eq!(
            serde_json::to_string(&view).unwrap_or_default(),
            r#"{"card":"search","shape":"paths","paths":["a"],"truncated":false,"total":1}"#
        );
        let call = CallView::Diff {
            title: "Write a".into(),
            diffs: vec![FileDiff {
                path: "a".into(),
                old_text: None,
                new_text: "x".into(),
            }],
            locations: Some(vec![FileLocation::path("a")]),
        };
        assert_eq!(
            serde_json::to_string(&call).unwrap_or_default(),
            r#"{"card":"diff","title":"Write a","diffs":[{"path":"a","oldText":null,"newText":"x"}],"locations":[{"path":"a"}]}"#
        );
    }
}
