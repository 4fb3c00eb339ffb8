//! `/undo`, `/redo` and `/rewind` on the command registry (so the TUI, ACP and a resumed
//! `dsh exec` session all have them). Each runs with the agent held idle.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_commands::CommandCall;
use dsh_commands::CommandChoice;
use dsh_commands::CommandRegistry;
use dsh_commands::CommandResult;
use dsh_commands::CommandSpec;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_plugin::Sessions;
use dsh_session::SessionLog;
use dsh_session::SessionStore;

use crate::CheckpointError;
use crate::Checkpoints;
use crate::engine::excerpt;

pub const UNDO: &str = "undo";
pub const REDO: &str = "redo";
pub const REWIND: &str = "rewind";

/// What `/rewind N` restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewindParts {
    /// The workspace's files, in this session.
    Files,
    /// The conversation: a fork of the session before that prompt, which the front-end
    /// switches to (the session itself is left as it is).
    Conversation,
    /// Both: the files first, then the fork.
    Both,
}

impl RewindParts {
    pub const ALL: [RewindParts; 3] = [Self::Files, Self::Conversation, Self::Both];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Files => "files",
            Self::Conversation => "conversation",
            Self::Both => "both",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Files => "restore the files; the conversation goes on",
            Self::Conversation => "continue in a fork of the conversation; the files stay",
            Self::Both => "restore the files and continue in a fork of the conversation",
        }
    }

    fn files(self) -> bool {
        matches!(self, Self::Files | Self::Both)
    }

    fn conversation(self) -> bool {
        matches!(self, Self::Conversation | Self::Both)
    }
}

/// `/rewind` parsed: no argument lists the prompts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewind {
    List,
    To(u64, RewindParts),
}

pub const REWIND_USAGE: &str = "Usage: /rewind N [files|conversation|both] — back to before prompt N of this session: its files (the default), its conversation (a fork at that prompt; nothing is deleted), or both (/rewind alone lists the prompts).";

/// Parses `/rewind`'s argument.
// String: arrived from main with the conversation rewind during this round; typing it (and
// the ops below) is the follow-up.
pub fn parse_rewind(argument: &str) -> Result<Rewind, String> {
    let mut words = argument.split_whitespace();
    let Some(first) = words.next() else {
        return Ok(Rewind::List);
    };
    let Ok(n) = first.parse::<u64>() else {
        return Err(format!(
            "\"{first}\" is not a prompt number. {REWIND_USAGE}"
        ));
    };
    let parts = match words.next() {
        None => RewindParts::Files,
        Some(word) => match RewindParts::ALL.into_iter().find(|p| p.as_str() == word) {
            Some(parts) => parts,
            None => {
                return Err(format!(
                    "\"{word}\" is not a part to rewind: say files, conversation or both. {REWIND_USAGE}"
                ));
            }
        },
    };
    if let Some(extra) = words.next() {
        return Err(format!("unexpected \"{extra}\". {REWIND_USAGE}"));
    }
    Ok(Rewind::To(n, parts))
}

/// The prompt list `/rewind` shows: prompt number, turn, the prompt.
pub fn prompt_list(checkpoints: &Checkpoints, log: &SessionLog) -> Result<String, CheckpointError> {
    let timeline = checkpoints.timeline(log)?;
    let prompts = timeline.prompts();
    if prompts.is_empty() {
        return Ok("No prompt of this session has a checkpoint yet.".into());
    }
    let mut lines = vec!["Prompts (rewind with /rewind N):".to_owned()];
    for (i, (turn, prompt, _)) in prompts.iter().enumerate() {
        let undone = timeline.turns.get(turn).is_some_and(|t| t.undone);
        lines.push(format!(
            "  {}. {}{}",
            i + 1,
            excerpt(prompt.as_deref().unwrap_or("(no text)"), 70),
            if undone { " [undone]" } else { "" }
        ));
    }
    Ok(lines.join("\n"))
}

/// What the commands work with: the checkpoints, and the session store a conversation
/// rewind forks in (`None` where the host provides none: then only the files rewind).
#[derive(Clone)]
pub struct Undo {
    pub checkpoints: Arc<Checkpoints>,
    pub sessions: Option<Arc<dyn SessionStore>>,
}

// String: the command-handler seam's error (see dsh_commands::CommandHandler).
type Op = fn(&Undo, &SessionLog, &std::path::Path, &str) -> Result<CommandResult, String>;

// String: the command-handler seam's error (see dsh_commands::CommandHandler).
async fn run_op(
    undo: Undo,
    sessions: Arc<Sessions>,
    call: CommandCall,
    op: Op,
) -> Result<CommandResult, String> {
    let Some((_, context)) = sessions.get(call.agent.id()) else {
        return Ok(CommandResult::error(
            "this session has no workspace to restore",
        ));
    };
    let Ok(guard) = call.agent.begin_maintenance() else {
        return Ok(CommandResult::error(
            "the agent is working: wait for the turn to end (or cancel it), then try again",
        ));
    };
    let log = call.agent.log().clone();
    let cwd: PathBuf = context.cwd().to_path_buf();
    let argument = call.argument().to_owned();
    let outcome = tokio::task::spawn_blocking(move || op(&undo, &log, &cwd, &argument)).await;
    drop(guard);
    Ok(match outcome {
        Ok(Ok(result)) => result,
        Ok(Err(text)) => CommandResult::error(text),
        Err(error) => CommandResult::error(format!("the restore did not finish: {error}")),
    })
}

// String: an `Op` (above): the text is the command's error, shown as it is.
fn undo(
    u: &Undo,
    log: &SessionLog,
    cwd: &std::path::Path,
    _: &str,
) -> Result<CommandResult, String> {
    u.checkpoints
        .undo(log, cwd)
        .map(CommandResult::text)
        .map_err(|e| e.to_string())
}

// String: an `Op` (above): the text is the command's error, shown as it is.
fn redo(
    u: &Undo,
    log: &SessionLog,
    cwd: &std::path::Path,
    _: &str,
) -> Result<CommandResult, String> {
    u.checkpoints
        .redo(log, cwd)
        .map(CommandResult::text)
        .map_err(|e| e.to_string())
}

// String: an `Op` (above): the text is the command's error, shown as it is.
fn rewind(
    u: &Undo,
    log: &SessionLog,
    cwd: &std::path::Path,
    argument: &str,
) -> Result<CommandResult, String> {
    let (n, parts) = match parse_rewind(argument)? {
        Rewind::List => {
            return prompt_list(&u.checkpoints, log)
                .map(CommandResult::text)
                .map_err(|e| e.to_string());
        }
        Rewind::To(n, parts) => (n, parts),
    };
    let timeline = u.checkpoints.timeline(log).map_err(|e| e.to_string())?;
    let prompts = timeline.prompts();
    let Some((turn, prompt, _)) = n.checked_sub(1).and_then(|i| prompts.get(i as usize)) else {
        return Err(format!(
            "there is no prompt {n}: this session has {} (run /rewind to list them)",
            prompts.len()
        ));
    };
    let store = match (parts.conversation(), &u.sessions) {
        (false, _) => None,
        (true, Some(store)) => Some(store),
        (true, None) => {
            return Err(
                "this front-end's host keeps no session store to fork in: only the files can be rewound here (/rewind N files)"
                    .into(),
            );
        }
    };
    let mut lines = Vec::new();
    if parts.files() {
        lines.push(
            u.checkpoints
                .rewind(log, cwd, *turn)
                .map_err(|e| e.to_string())?,
        );
    }
    let Some(store) = store else {
        return Ok(CommandResult::text(lines.join("\n")));
    };
    let fork = fork_before_turn(store.as_ref(), log, *turn).map_err(|e| {
        let done = if parts.files() {
            " (the files were rewound)"
        } else {
            ""
        };
        format!("cannot fork the conversation before prompt {n}{done}: {e}")
    })?;
    let about = prompt
        .as_deref()
        .map(|p| format!(" (\"{}\")", excerpt(p, 60)))
        .unwrap_or_default();
    lines.push(format!(
        "Rewound the conversation to before prompt {n}{about}: it continues in session {fork}, a fork; this session ({}) is kept as it was.{}",
        log.id(),
        if parts.files() {
            ""
        } else {
            " The files were left as they are."
        }
    ));
    Ok(CommandResult::Switch {
        text: Some(lines.join("\n")),
        session: fork,
    })
}

/// Forks the session just before turn `turn` opened (its prompt and everything after are left
/// out) and returns the fork's id. The fork is written and released: a front-end opens it.
pub fn fork_before_turn(
    store: &dyn SessionStore,
    log: &SessionLog,
    turn: u64,
) -> Result<String, CheckpointError> {
    let mut opened = None;
    log.visit_since(0, |event| {
        if opened.is_none()
            && event.kind == dsh_session::kind::TURN_START
            && event.turn() == Some(turn)
        {
            opened = Some(event.seq);
        }
    })?;
    let Some(opened) = opened else {
        return Err(CheckpointError::Missing(format!(
            "turn {turn} is not in this session's log"
        )));
    };
    let forked = match opened.checked_sub(1) {
        Some(boundary) => store.fork_log(log, Some(boundary), None)?,
        // Nothing came before it: the fork starts empty, in the same folder.
        None => store.create(dsh_session::CreateOptions {
            cwd: log.header().cwd.as_ref().map(PathBuf::from),
            parent_session: Some(log.id().to_owned()),
            delegation_depth: log.header().delegation_depth,
            ..Default::default()
        })?,
    };
    forked.persist()?;
    forked.flush()?;
    Ok(forked.id().to_owned())
}

/// The argument's choices for a picker: the prompts, then the parts.
fn rewind_choices(
    checkpoints: &Checkpoints,
    log: &SessionLog,
    partial: &str,
) -> Vec<CommandChoice> {
    let mut words = partial.split_whitespace();
    let (first, second) = (words.next(), words.next());
    match (first, second) {
        (None, _) => {
            let Ok(timeline) = checkpoints.timeline(log) else {
                return Vec::new();
            };
            timeline
                .prompts()
                .iter()
                .enumerate()
                .map(|(i, (turn, prompt, _))| {
                    let undone = timeline.turns.get(turn).is_some_and(|t| t.undone);
                    CommandChoice {
                        value: (i + 1).to_string(),
                        label: format!(
                            "{}. {}",
                            i + 1,
                            excerpt(prompt.as_deref().unwrap_or("(no text)"), 70)
                        ),
                        detail: if undone {
                            "undone".into()
                        } else {
                            String::new()
                        },
                    }
                })
                .collect()
        }
        (Some(n), None) => RewindParts::ALL
            .map(|parts| CommandChoice {
                value: format!("{n} {}", parts.as_str()),
                label: parts.as_str().to_owned(),
                detail: parts.describe().to_owned(),
            })
            .to_vec(),
        (Some(_), Some(_)) => Vec::new(),
    }
}

/// Registers the three commands, owned by `owner`.
pub fn register(
    registry: &CommandRegistry,
    owner: &Scope,
    undo_service: Undo,
    sessions: Arc<Sessions>,
) -> Result<Vec<Disposer>, dsh_commands::CommandError> {
    let specs: [(&str, &str, Op, Option<&str>); 3] = [
        (
            UNDO,
            "Restore the files to before the last turn's changes",
            undo,
            None,
        ),
        (
            REDO,
            "Re-apply the changes the last /undo took back",
            redo,
            None,
        ),
        (
            REWIND,
            "Go back to before one of this session's prompts: its files, its conversation (a fork), or both",
            rewind,
            Some("[N] [files|conversation|both]"),
        ),
    ];
    let mut disposers = Vec::new();
    for (name, description, op, hint) in specs {
        let (service, sessions) = (undo_service.clone(), sessions.clone());
        let mut spec = CommandSpec::new(name, description, move |call: CommandCall| {
            run_op(service.clone(), sessions.clone(), call, op)
        });
        if let Some(hint) = hint {
            spec = spec.input(hint);
        }
        if name == REWIND {
            let checkpoints = undo_service.checkpoints.clone();
            spec = spec.choices(move |agent: &AgentHandle, partial: &str| {
                rewind_choices(&checkpoints, agent.log(), partial)
            });
        }
        disposers.push(registry.register(owner, spec)?);
    }
    Ok(disposers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewind_arguments_parse_or_say_what_to_type() {
        assert_eq!(parse_rewind("  "), Ok(Rewind::List));
        assert_eq!(parse_rewind("2"), Ok(Rewind::To(2, RewindParts::Files)));
        assert_eq!(
            parse_rewind("1 files"),
            Ok(Rewind::To(1, RewindParts::Files))
        );
        assert_eq!(
            parse_rewind("3 conversation"),
            Ok(Rewind::To(3, RewindParts::Conversation))
        );
        assert_eq!(parse_rewind("1 both"), Ok(Rewind::To(1, RewindParts::Both)));
        assert!(parse_rewind("x").unwrap_err().contains("Usage: /rewind"));
        assert!(
            parse_rewind("1 chat")
                .unwrap_err()
                .contains("files, conversation or both")
        );
        assert!(parse_rewind("1 files extra").is_err());
    }
}
