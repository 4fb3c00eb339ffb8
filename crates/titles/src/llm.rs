//! Model-generated session titles (`session-title-first-prompt-llm`): once the first main
//! `request/header` of a top-level session is logged, one side request through the session's
//! adapter names the session from its first human prompt. The request runs detached from the
//! turn: it never delays or fails it, and its title may land after the turn ended.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_agent::AgentHandle;
use dsh_agent::CallConfig;
use dsh_llm::CancellationToken;
use dsh_llm::ModelAdapter;
use dsh_llm::ModelRequest;
use dsh_llm::RequestPurpose;
use dsh_protocol::ContentBlock;
use dsh_protocol::FinishReason;
use dsh_protocol::LlmFailure;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::StreamChunk;
use dsh_session::Event;
use dsh_session::WeakSessionLog;
use dsh_session::data::Route;
use dsh_session::data::SessionTitle;
use dsh_session::data::TitleSource;
use dsh_session::kind;
use futures::StreamExt;
use serde::Deserialize;
use tokio::sync::broadcast;

/// The title provider's name in `session/title` and `session/title-llm-request`.
pub const TITLE_PROVIDER: &str = "session-title-first-prompt-llm";
/// The source plugin of the side request's user message.
const MESSAGE_PLUGIN: &str = "dsh-session-title-llm";
pub(crate) const TITLE_LLM_REQUEST: &str = "session/title-llm-request";
pub const SYSTEM_PROMPT: &str = "Create a concise title for an AI coding-assistant session from the supplied human messages.\nReturn only the title on one line, **in plain text of natural language**, with no quotes, prefix, explanation, Markdown, XML, or terminal control codes. No code is allowed.\nUse the language of the messages.\nAim for about 5 words in non-CJK languages or 10 CJK characters.";
/// Prompt text beyond this many UTF-8 bytes is not sent.
const MAX_INPUT_BYTES: usize = 4096;
/// A title longer than this (UTF-8 bytes) is cut at a word boundary.
const MAX_TITLE_BYTES: usize = 120;
/// `request/context` follows the header in the same synchronous section; waiting this long
/// for it keeps the side request's log entry after it without depending on it being logged.
const CONTEXT_GRACE: Duration = Duration::from_millis(50);

/// `[plugins.session-title]`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TitleSettings {
    /// The title model; `None` uses the model of the session's main request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_max_tokens() -> u32 {
    64
}

fn default_timeout_ms() -> u64 {
    30_000
}

impl Default for TitleSettings {
    fn default() -> Self {
        Self {
            model: None,
            max_tokens: default_max_tokens(),
            timeout_ms: default_timeout_ms(),
        }
    }
}

/// The LLM title provider: settings, the adapter it calls, and the sessions it has armed.
pub struct LlmTitles {
    settings: TitleSettings,
    adapter: Arc<dyn ModelAdapter>,
    armed: Mutex<HashSet<String>>,
    prompts: super::FirstPrompts,
}

impl LlmTitles {
    pub fn new(settings: TitleSettings, adapter: Arc<dyn ModelAdapter>) -> Arc<Self> {
        Arc::new(Self {
            settings,
            adapter,
            armed: Mutex::new(HashSet::new()),
            prompts: super::FirstPrompts::default(),
        })
    }

    /// Called from the `agent/request` hook after the chain chose `config`, i.e. just before
    /// the step logs its header: arms one side request for a top-level session's first
    /// request, which starts once that header is in the log.
    pub fn arm(self: &Arc<Self>, agent: &AgentHandle, config: &CallConfig) {
        let log = agent.log();
        let header = log.header();
        if header.parent_session.is_some() || header.delegation_depth > 0 {
            return;
        }
        // Taken before the check below: once it passes, no user title is in the log, so one
        // set later (which the side request must yield to) has a seq from here on.
        let titles_from = log.len();
        // Runs before every request, so these are lookups, not walks of the log. A fallback
        // title is only written while a session has none, so the latest title is a fallback
        // exactly when no other kind of title was ever set.
        let already = log.last_of_kind(kind::REQUEST_HEADER).is_some()
            || log.last_of_kind(TITLE_LLM_REQUEST).is_some()
            || log.last_of_kind(kind::SESSION_TITLE).is_some_and(|event| {
                event.data.pointer("/source/kind").and_then(|k| k.as_str()) != Some("fallback")
            });
        if already {
            return;
        }
        let Some((seq, text)) = self.prompts.find(log) else {
            return;
        };
        // Found: a session is armed at most once, and never asks again.
        self.prompts.forget(log.id());
        {
            let mut armed = dsh_sync::lock(&self.armed);
            if !armed.insert(log.id().to_owned()) {
                return;
            }
        }
        let route = Route {
            provider: config.provider.clone(),
            model: self
                .settings
                .model
                .clone()
                .unwrap_or_else(|| config.model.clone()),
        };
        let plan = TitlePlan::new(seq, &text, route, self.settings.max_tokens);
        let events = log.subscribe();
        let weak = log.downgrade();
        let this = self.clone();
        tokio::spawn(async move { this.run(weak, events, plan, titles_from).await });
    }

    async fn run(
        &self,
        log: WeakSessionLog,
        mut events: broadcast::Receiver<Arc<Event>>,
        plan: TitlePlan,
        titles_from: u64,
    ) {
        if !wait_for_header(&log, &mut events).await {
            return;
        }
        // Whatever arrives (normally `request/context`), the side request is logged after it.
        let _next = tokio::time::timeout(CONTEXT_GRACE, events.recv()).await;
        drop(events);
        let Some(strong) = log.upgrade() else { return };
        let session_id = strong.id().to_owned();
        if let Err(error) = strong.append(TITLE_LLM_REQUEST, plan.log_data(), None) {
            tracing::warn!(%error, "cannot record the session-title request");
            return;
        }
        drop(strong);
        let request = plan.request(session_id);
        let timeout = Duration::from_millis(self.settings.timeout_ms);
        let text = match tokio::time::timeout(timeout, self.complete(request)).await {
            Ok(Ok(text)) => text,
            Ok(Err(failure)) => {
                let message = &failure.message;
                tracing::warn!(%message, code = %failure.code, "the session-title request failed");
                return;
            }
            Err(_) => {
                tracing::warn!(?timeout, "the session-title request timed out");
                return;
            }
        };
        let title = sanitize_title(&text);
        if title.is_empty() {
            tracing::debug!("the title model returned no usable title");
            return;
        }
        let Some(strong) = log.upgrade() else { return };
        // A user title can only have been set since the session was armed (`titles_from`).
        // Unreadable: the user may have titled it; the model's title is not worth the risk.
        let user_titled = strong.events_since(titles_from).map_or(true, |events| {
            events.iter().any(|event| {
                event.kind == kind::SESSION_TITLE
                    && event.data.pointer("/source/kind").and_then(|k| k.as_str()) == Some("user")
            })
        });
        if user_titled {
            return;
        }
        let data = SessionTitle {
            title,
            message_seqs: vec![plan.seq],
            source: TitleSource::Provider {
                provider: TITLE_PROVIDER.to_owned(),
                model: Some(plan.route.clone()),
            },
        };
        if let Err(error) = strong.append_data(&data, None) {
            tracing::warn!(%error, "cannot record the session title");
        }
    }

    /// The streamed text of one title request, or the provider's failure.
    async fn complete(&self, request: ModelRequest) -> Result<String, LlmFailure> {
        let cancel = CancellationToken::new();
        let _cancel_on_drop = cancel.clone().drop_guard();
        let mut stream = self.adapter.stream(request, cancel);
        let mut text = String::new();
        while let Some(chunk) = stream.next().await {
            match chunk {
                StreamChunk::TextDelta { text: delta, .. } => text.push_str(&delta),
                StreamChunk::Finish { reason, .. } => {
                    return match reason {
                        FinishReason::Error { failure } | FinishReason::Aborted { failure } => {
                            Err(failure)
                        }
                        _ => Ok(text),
                    };
                }
                _ => {}
            }
        }
        Ok(text)
    }
}

/// Waits until the log has a `request/header`; false when the log went away first.
async fn wait_for_header(
    log: &WeakSessionLog,
    events: &mut broadcast::Receiver<Arc<Event>>,
) -> bool {
    loop {
        match events.recv().await {
            Ok(event) if event.kind == kind::REQUEST_HEADER => return true,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => {
                if log
                    .upgrade()
                    .is_some_and(|log| log.request_header().is_some())
                {
                    return true;
                }
            }
            Err(broadcast::error::RecvError::Closed) => return false,
        }
    }
}

/// Everything one side request needs, fixed when it is armed.
#[derive(Debug, Clone, PartialEq)]
pub struct TitlePlan {
    pub seq: u64,
    pub route: Route,
    pub message: Message,
    pub max_tokens: u32,
}

impl TitlePlan {
    pub fn new(seq: u64, prompt: &str, route: Route, max_tokens: u32) -> Self {
        let mut end = prompt.len().min(MAX_INPUT_BYTES);
        while !prompt.is_char_boundary(end) {
            end -= 1;
        }
        let array = serde_json::json!([{ "seq": seq, "text": &prompt[..end] }]);
        let text =
            format!("Generate the session title from this JSON array of human messages:\n{array}");
        Self {
            seq,
            route,
            message: Message::user(
                vec![ContentBlock::text(text)],
                MessageSource::plugin(MESSAGE_PLUGIN),
            ),
            max_tokens,
        }
    }

    /// `session/title-llm-request` data.
    pub fn log_data(&self) -> serde_json::Value {
        serde_json::json!({
            "titleProvider": TITLE_PROVIDER,
            "messageSeqs": [self.seq],
            "route": self.route,
            "system": SYSTEM_PROMPT,
            "messages": [self.message],
            "maxTokens": self.max_tokens,
        })
    }

    pub fn request(&self, session_id: String) -> ModelRequest {
        ModelRequest {
            model: self.route.model.clone(),
            system: Some(SYSTEM_PROMPT.to_owned()),
            messages: vec![self.message.clone()].into(),
            max_tokens: Some(self.max_tokens),
            session_id: Some(session_id),
            purpose: Some(RequestPurpose::SessionTitle),
            ..ModelRequest::default()
        }
    }
}

/// One plain line: the first non-empty line, without control characters, Markdown markers,
/// surrounding quotes or a `Title:` prefix, whitespace collapsed, within the byte budget.
pub fn sanitize_title(raw: &str) -> String {
    let line = raw
        .lines()
        .map(|line| {
            line.chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect::<String>()
        })
        .find(|line| !line.trim().is_empty())
        .unwrap_or_default();
    const WRAPPERS: &[char] = &[
        '"', '\'', '`', '*', '_', '“', '”', '‘', '’', '「', '」', '«', '»',
    ];
    let mut line = line
        .trim_start_matches(|c: char| matches!(c, '#' | '>' | '-') || c.is_whitespace())
        .trim_matches(WRAPPERS)
        .trim();
    for prefix in ["title:", "session title:"] {
        if line.len() >= prefix.len()
            && line.is_char_boundary(prefix.len())
            && line[..prefix.len()].eq_ignore_ascii_case(prefix)
        {
            line = line[prefix.len()..].trim();
        }
    }
    let line = line.trim_matches(WRAPPERS).trim();
    let line = line
        .strip_suffix('.')
        .unwrap_or(line)
        .trim_matches(WRAPPERS);
    super::join_within(line.split_whitespace(), MAX_TITLE_BYTES)
}

#[cfg(test)]
#[path = "llm_tests.rs"]
mod tests;
