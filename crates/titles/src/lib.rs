//! `dsh-titles`: session titles.
//!
//! Owns: fallback titles (before a session's first model request, if it has no title yet, its
//! first human prompt names it: `session/title {source: {kind: "fallback"}}`) and
//! model-generated titles (one side request after the first request header,
//! `session-title-first-prompt-llm`), as [`FallbackTitlePlugin`] (`[plugins.fallback-title]`)
//! and [`LlmTitlePlugin`] (`[plugins.session-title]`), so `dsh sessions list`, `dsh resume`
//! and editors (`session_info_update`) show something better than an id.
//! Must not depend on: other capability crates, the host, a front-end.

use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_agent::RequestInput;
use dsh_kernel::Scope;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_session::Event;
use dsh_session::data::SessionTitle;
use dsh_session::data::TitleSource;
use dsh_session::kind;

mod llm;
pub use llm::LlmTitles;
pub use llm::TitleSettings;

/// At most this many words…
const MAX_WORDS: usize = 5;
/// …and this many UTF-8 bytes.
const MAX_BYTES: usize = 40;

/// `[plugins.fallback-title]` (only `enabled`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackSettings {}

/// Titles every session that reaches a request without one, from its first prompt.
#[derive(Debug, Default)]
pub struct FallbackTitlePlugin;

impl Plugin for FallbackTitlePlugin {
    type Config = FallbackSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, _config: FallbackSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        host.hooks
            .request
            .register(ctx, move |input: RequestInput, next| {
                Box::pin(async move {
                    title_if_untitled(&input.agent);
                    next.run(input).await
                })
            });
        Ok(())
    }
}

impl HostPlugin for FallbackTitlePlugin {
    const NAME: &'static str = "fallback-title";
}

/// A top-level session's first request also starts the model-generated title, through the
/// host's model adapter.
#[derive(Debug, Default)]
pub struct LlmTitlePlugin;

impl Plugin for LlmTitlePlugin {
    type Config = TitleSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: TitleSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let llm = LlmTitles::new(config, host.adapter.clone());
        host.hooks
            .request
            .register(ctx, move |input: RequestInput, next| {
                let llm = llm.clone();
                Box::pin(async move {
                    let agent = input.agent.clone();
                    let config = next.run(input).await?;
                    llm.arm(&agent, &config);
                    Ok(config)
                })
            });
        Ok(())
    }
}

impl HostPlugin for LlmTitlePlugin {
    const NAME: &'static str = "session-title";
}

fn title_if_untitled(agent: &AgentHandle) {
    let log = agent.log();
    // Runs before every request: one lookup once titled, never a walk of the log.
    if log.last_of_kind(kind::SESSION_TITLE).is_some() {
        return;
    }
    let Some((seq, text)) = first_prompt(&log.events()) else {
        return;
    };
    let title = fallback_title(&text);
    if title.is_empty() {
        return;
    }
    let data = SessionTitle {
        title,
        message_seqs: vec![seq],
        source: TitleSource::Fallback,
    };
    if let Err(error) = log.append_data(&data, None) {
        tracing::warn!(%error, "cannot record the session title");
    }
}

/// The seq and text of the session's first human `user/message` (text blocks joined by a
/// space).
fn first_prompt(events: &[Arc<Event>]) -> Option<(u64, String)> {
    let prompt = events.iter().find(|event| {
        event.kind == kind::USER_MESSAGE
            && event
                .data
                .pointer("/source/kind")
                .and_then(serde_json::Value::as_str)
                == Some("user")
    })?;
    let text = prompt
        .data
        .get("content")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|block| block.get("text").and_then(serde_json::Value::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    Some((prompt.seq, text))
}

/// The first words of `text` (control characters dropped), within the word and byte budgets.
pub fn fallback_title(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut words = cleaned.split_whitespace().take(MAX_WORDS).peekable();
    let title = join_within(words.clone(), MAX_BYTES);
    match words.peek() {
        // A first word longer than the budget is cut at a character boundary instead.
        Some(first) if title.is_empty() => {
            let mut end = MAX_BYTES.min(first.len());
            while !first.is_char_boundary(end) {
                end -= 1;
            }
            first[..end].to_owned()
        }
        _ => title,
    }
}

/// Joins `words` with single spaces, stopping before the first word that would make the
/// result longer than `max_bytes`.
pub fn join_within<'a>(words: impl Iterator<Item = &'a str>, max_bytes: usize) -> String {
    let mut joined = String::new();
    for word in words {
        let separator = usize::from(!joined.is_empty());
        if joined.len() + separator + word.len() > max_bytes {
            break;
        }
        if separator == 1 {
            joined.push(' ');
        }
        joined.push_str(word);
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_take_the_first_five_words_within_forty_bytes() {
        assert_eq!(
            fallback_title("Use the bash tool to run exactly: echo TERMINAL_OK. Then reply"),
            "Use the bash tool to"
        );
        assert_eq!(fallback_title("say pong"), "say pong");
        assert_eq!(
            fallback_title("  tabs\tand\nnewlines\u{7} count "),
            "tabs and newlines count"
        );
        assert_eq!(
            fallback_title("internationalization-and-localization-of-everything now"),
            "internationalization-and-localization-of"
        );
        assert_eq!(
            fallback_title("ééééééééééééééééééééé"),
            "éééééééééééééééééééé"
        );
        assert_eq!(fallback_title("   "), "");
    }
}
