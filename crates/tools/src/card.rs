//! Presentation render intents (cards): the neutral vocabulary a bridge maps to its wire.
//! Presenters are pure functions of arguments and the durable result.

use dsh_protocol::ContentBlock;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use crate::definition::ToolDefinition;
use crate::result::ResultView;

/// Icon hint of a generic call card.
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

/// `{path, line?}`; `line` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileLocation {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub line: Option<u64>,
}

impl FileLocation {
    /// A location without a line.
    pub fn path(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            line: None,
        }
    }
}

/// `{path, oldText, newText}`; `oldText: null` for a new file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileDiff {
    pub path: String,
    pub old_text: Option<String>,
    pub new_text: String,
}

/// The pending card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "card", rename_all = "camelCase")]
pub enum ToolCallView {
    #[serde(rename_all = "camelCase")]
    Generic {
        title: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        kind: Option<ToolCallKind>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        raw_input: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        content: Option<Vec<ContentBlock>>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        locations: Option<Vec<FileLocation>>,
    },
    #[serde(rename_all = "camelCase")]
    Terminal {
        title: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        description: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        cwd: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Diff {
        title: String,
        diffs: Vec<FileDiff>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        locations: Option<Vec<FileLocation>>,
    },
}

impl ToolCallView {
    /// A generic card with only a title.
    pub fn generic(title: impl Into<String>) -> Self {
        Self::Generic {
            title: title.into(),
            kind: None,
            raw_input: None,
            content: None,
            locations: None,
        }
    }

    /// Sets the icon kind of a generic card (no effect on other cards).
    pub fn kind(mut self, new_kind: ToolCallKind) -> Self {
        if let Self::Generic { kind, .. } = &mut self {
            *kind = Some(new_kind);
        }
        self
    }

    /// Sets the raw input of a generic card.
    pub fn raw_input(mut self, input: Value) -> Self {
        if let Self::Generic { raw_input, .. } = &mut self {
            *raw_input = Some(input);
        }
        self
    }

    /// Sets follow-along locations (generic and diff cards).
    pub fn locations(mut self, new: Vec<FileLocation>) -> Self {
        match &mut self {
            Self::Generic { locations, .. } | Self::Diff { locations, .. } => {
                *locations = Some(new)
            }
            Self::Terminal { .. } => {}
        }
        self
    }

    /// A terminal card: `title` is the command.
    pub fn terminal(
        command: impl Into<String>,
        description: Option<String>,
        cwd: Option<String>,
    ) -> Self {
        Self::Terminal {
            title: command.into(),
            description,
            cwd,
        }
    }

    /// A diff card.
    pub fn diff(title: impl Into<String>, diffs: Vec<FileDiff>) -> Self {
        Self::Diff {
            title: title.into(),
            diffs,
            locations: None,
        }
    }

    /// The fallback pending card: title = tool name, raw arguments as input.
    pub fn fallback(name: &str, arguments: &Value) -> Self {
        Self::generic(name).raw_input(arguments.clone())
    }
}

/// `{number, text}` of a read card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadFileLine {
    pub number: u64,
    pub text: String,
}

/// `{lineNumber, line}` of a search match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchMatch {
    pub line_number: u64,
    pub line: String,
}

/// One file of a `matches` search card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchFile {
    pub path: String,
    pub matches: Vec<SearchMatch>,
}

/// A web source of a web-search card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebSource {
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub snippet: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub published_at: Option<String>,
}

/// The body of a `search` card, tagged by `shape`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "shape", rename_all = "camelCase")]
pub enum SearchView {
    Matches {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        title: Option<String>,
        files: Vec<SearchFile>,
        truncated: bool,
        total: u64,
    },
    Paths {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        title: Option<String>,
        paths: Vec<String>,
        truncated: bool,
        total: u64,
    },
}

/// The body of a `web` card, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum WebView {
    Search {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        title: Option<String>,
        sources: Vec<WebSource>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        answer: Option<String>,
        truncated: bool,
    },
    #[serde(rename_all = "camelCase")]
    Fetch {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        title: Option<String>,
        url: String,
        status_code: u16,
        truncated: bool,
    },
}

/// The completed card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "card", rename_all = "camelCase")]
pub enum ToolResultView {
    Generic {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        title: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        content: Option<Vec<ContentBlock>>,
    },
    /// `exit_code` and `signal` are mutually exclusive; use [`ToolResultView::terminal`].
    #[serde(rename_all = "camelCase")]
    Terminal {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        title: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        output: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        exit_code: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        signal: Option<String>,
    },
    Diff {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        title: Option<String>,
        diffs: Vec<FileDiff>,
    },
    Search(SearchView),
    #[serde(rename_all = "camelCase")]
    Read {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        title: Option<String>,
        path: String,
        /// 1-based requested first line, kept even when `lines` is empty.
        offset: u64,
        lines: Vec<ReadFileLine>,
        total_lines: u64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        lang: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        content: Option<String>,
    },
    Web(WebView),
}

/// How a terminal command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalExit {
    Code(i64),
    Signal(String),
}

impl ToolResultView {
    /// A terminal result; the exit is either a code or a signal, never both.
    pub fn terminal(
        title: Option<String>,
        output: Option<String>,
        exit: Option<TerminalExit>,
    ) -> Self {
        let (exit_code, signal) = match exit {
            Some(TerminalExit::Code(code)) => (Some(code), None),
            Some(TerminalExit::Signal(signal)) => (None, Some(signal)),
            None => (None, None),
        };
        Self::Terminal {
            title,
            output,
            exit_code,
            signal,
        }
    }
}

/// A logged call's arguments as the loop, presenters and every front-end see them: parsed
/// JSON; the raw string when it is not JSON (never `Null`), so a typed tool reports that its
/// arguments must be an object instead of the loop inventing an error; `{}` when empty.
pub fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// The pending card of a call: the definition's presenter, or the generic fallback when it has
/// none, returns nothing, or the logged arguments no longer fit (soft validation).
pub fn call_card(
    definition: Option<&ToolDefinition>,
    name: &str,
    arguments: &Value,
) -> ToolCallView {
    definition
        .and_then(|def| def.present_call(arguments))
        .unwrap_or_else(|| ToolCallView::fallback(name, arguments))
}

/// The completed card, or `None` for the fallback (keep the pending title, show raw content).
pub fn result_card(
    definition: Option<&ToolDefinition>,
    arguments: &Value,
    result: &ResultView,
) -> Option<ToolResultView> {
    definition.and_then(|def| def.present_result(arguments, result))
}

#[cfg(test)]
#[path = "card_tests.rs"]
mod tests;
