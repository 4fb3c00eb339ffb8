//! `dsh-titles`: session titles.
//!
//! Owns: fallback titles (before a session's first model request, if it has no title yet, its
//! first human prompt names it: `session/title {source: {kind: "fallback"}}`) and
//! model-generated titles (one side request after the first request header,
//! `session-title-first-prompt-llm`), as [`FallbackTitlePlugin`] (`[plugins.fallback-title]`)
//! and [`LlmTitlePlugin`] (`[plugins.session-title]`), so `dsh sessions list`, `dsh resume`
//! and editors (`session_info_update`) show something better than an id.
//! Must not depend on: other capability crates, the host, a front-end.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_agent::RequestInput;
use dsh_kernel::Scope;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_session::Event;
use dsh_session::SessionLog;
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
        let prompts = Arc::new(FirstPrompts::default());
        host.hooks
            .request
            .register(ctx, move |input: RequestInput, next| {
                let prompts = prompts.clone();
                Box::pin(async move {
                    title_if_untitled(&input.agent, &prompts);
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

fn title_if_untitled(agent: &AgentHandle, prompts: &FirstPrompts) {
    let log = agent.log();
    // Runs before every request: one lookup once titled, never a walk of the log.
    if log.last_of_kind(kind::SESSION_TITLE).is_some() {
        return;
    }
    let Some((seq, text)) = prompts.find(log) else {
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
    match log.append_data(&data, None) {
        // Titled: the lookup above answers from now on.
        Ok(_) => prompts.forget(log.id()),
        Err(error) => tracing::warn!(%error, "cannot record the session title"),
    }
}

/// The seq and text of `event` when it is a human `user/message` (text blocks joined by a
/// space).
fn prompt_of(event: &Event) -> Option<(u64, String)> {
    let human = event.kind == kind::USER_MESSAGE
        && event
            .data
            .pointer("/source/kind")
            .and_then(serde_json::Value::as_str)
            == Some("user");
    if !human {
        return None;
    }
    let text = event
        .data
        .get("content")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|block| block.get("text").and_then(serde_json::Value::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    Some((event.seq, text))
}

/// The seq and text of the session's first human `user/message`.
#[cfg(test)]
fn first_prompt(events: &[Arc<Event>]) -> Option<(u64, String)> {
    events.iter().find_map(|event| prompt_of(event))
}

/// How far the search for one session's first human prompt got: the events before `next_seq`
/// hold none, or `found` is it (a log only grows, so it never changes once found).
#[derive(Debug, Default)]
struct FirstPromptFold {
    next_seq: u64,
    found: Option<(u64, String)>,
}

impl FirstPromptFold {
    /// Reads what `log` appended since the last call, up to its first human prompt. A log
    /// shorter than what was read is another instance under the same id: the search restarts.
    fn catch_up(&mut self, log: &SessionLog) {
        if log.len() < self.next_seq {
            *self = Self::default();
        }
        if self.found.is_some() {
            return;
        }
        let events = match log.events_since(self.next_seq) {
            Ok(events) => events,
            Err(error) => {
                // The fold stays where it was; the next call tries again.
                tracing::warn!(%error, "session title: cannot read the session log");
                return;
            }
        };
        for event in events {
            self.next_seq = event.seq + 1;
            if let Some(found) = prompt_of(&event) {
                self.found = Some(found);
                return;
            }
        }
    }
}

/// The first human prompt of each session, by session id, searched incrementally: asked
/// before every request of an untitled session, it reads only what was appended since.
#[derive(Debug, Default)]
pub(crate) struct FirstPrompts(Mutex<HashMap<String, FirstPromptFold>>);

impl FirstPrompts {
    fn folds(&self) -> std::sync::MutexGuard<'_, HashMap<String, FirstPromptFold>> {
        dsh_sync::lock(&self.0)
    }

    /// The seq and text of the first human `user/message` of `log`.
    pub(crate) fn find(&self, log: &SessionLog) -> Option<(u64, String)> {
        let mut folds = self.folds();
        let fold = folds.entry(log.id().to_owned()).or_default();
        fold.catch_up(log);
        fold.found.clone()
    }

    /// Drops a session's search (it will not be asked again).
    pub(crate) fn forget(&self, id: &str) {
        self.folds().remove(id);
    }
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
    use dsh_protocol::ContentBlock;
    use dsh_protocol::Message;
    use dsh_protocol::MessageSource;
    use dsh_session::SessionHeader;
    use dsh_session::SurfaceIntent;
    use dsh_session::data::UserMessage;

    use super::*;

    fn message(log: &SessionLog, source: MessageSource, text: &str) {
        let message = Message::user(vec![ContentBlock::text(text)], source);
        log.append_data(&UserMessage(message), Some(SurfaceIntent::append()))
            .unwrap();
    }

    fn other(log: &SessionLog) {
        log.append("other/event", serde_json::json!({}), None)
            .unwrap();
    }

    #[test]
    fn the_first_prompt_search_is_the_whole_log_one() {
        let log = SessionLog::in_memory(SessionHeader::new("s", None));
        let prompts = FirstPrompts::default();
        let steps = [
            None,
            Some((MessageSource::plugin("schedule"), "not human")),
            None,
            Some((MessageSource::user(), "first human words")),
            Some((MessageSource::user(), "second human words")),
            None,
        ];
        for (i, step) in steps.into_iter().enumerate() {
            match step {
                Some((source, text)) => message(&log, source, text),
                None => other(&log),
            }
            assert_eq!(
                prompts.find(&log),
                first_prompt(&log.events().unwrap()),
                "step {i}"
            );
            // The search stops at the prompt and reads nothing twice before it.
            let read = prompts.folds().get("s").map(|fold| fold.next_seq);
            assert_eq!(read, Some(log.len().min(4)), "step {i}");
        }
        assert_eq!(
            prompts.find(&log),
            Some((3, "first human words".to_owned()))
        );
    }

    #[test]
    fn a_shorter_log_under_the_same_id_restarts_the_search() {
        let prompts = FirstPrompts::default();
        let long = SessionLog::in_memory(SessionHeader::new("s", None));
        for _ in 0..4 {
            other(&long);
        }
        assert_eq!(prompts.find(&long), None);
        // Another instance of the session, shorter than what was read: its prompt at seq 1
        // is found although the search had passed seq 1 of the longer log.
        let short = SessionLog::in_memory(SessionHeader::new("s", None));
        other(&short);
        message(&short, MessageSource::user(), "hello there");
        assert_eq!(prompts.find(&short), Some((1, "hello there".to_owned())));
        assert_eq!(prompts.find(&short), first_prompt(&short.events().unwrap()));
        // Another session has its own search.
        assert_eq!(
            prompts.find(&SessionLog::in_memory(SessionHeader::new("t", None))),
            None
        );
        prompts.forget("s");
        assert_eq!(prompts.find(&short), Some((1, "hello there".to_owned())));
    }

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
