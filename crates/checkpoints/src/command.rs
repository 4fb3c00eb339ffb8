//! `/undo`, `/redo` and `/rewind` on the command registry (so the TUI, ACP and a resumed
//! `dsh exec` session all have them). Each runs with the agent held idle.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_commands::CommandCall;
use dsh_commands::CommandRegistry;
use dsh_commands::CommandResult;
use dsh_commands::CommandSpec;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_plugin::Sessions;
use dsh_session::SessionLog;

use crate::CheckpointError;
use crate::Checkpoints;
use crate::CommandError;
use crate::RewindArgumentError;
use crate::engine::excerpt;

pub const UNDO: &str = "undo";
pub const REDO: &str = "redo";
pub const REWIND: &str = "rewind";

/// What `/rewind N` restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewindParts {
    Files,
}

/// `/rewind` parsed: no argument lists the prompts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewind {
    List,
    To(u64, RewindParts),
}

pub const REWIND_USAGE: &str = "Usage: /rewind N [files] — restores the files to before prompt N of this session (/rewind alone lists the prompts).";

/// Parses `/rewind`'s argument.
pub fn parse_rewind(argument: &str) -> Result<Rewind, RewindArgumentError> {
    let mut words = argument.split_whitespace();
    let Some(first) = words.next() else {
        return Ok(Rewind::List);
    };
    let Ok(n) = first.parse::<u64>() else {
        return Err(RewindArgumentError::NotANumber(first.to_owned()));
    };
    let parts = match words.next() {
        None | Some("files") => RewindParts::Files,
        Some(other) => {
            return Err(RewindArgumentError::UnknownPart(other.to_owned()));
        }
    };
    if let Some(extra) = words.next() {
        return Err(RewindArgumentError::Unexpected(extra.to_owned()));
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

type Op = fn(&Checkpoints, &SessionLog, &std::path::Path, &str) -> Result<String, CommandError>;

async fn run_op(
    checkpoints: Arc<Checkpoints>,
    sessions: Arc<Sessions>,
    call: CommandCall,
    op: Op,
) -> Result<CommandResult, String> {
    // String: the command-handler seam (`dsh_commands::CommandHandler`); this never fails.
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
    let outcome =
        tokio::task::spawn_blocking(move || op(&checkpoints, &log, &cwd, &argument)).await;
    drop(guard);
    Ok(match outcome {
        Ok(Ok(text)) => CommandResult::text(text),
        Ok(Err(error)) => CommandResult::error(error.to_string()),
        Err(error) => CommandResult::error(format!("the restore did not finish: {error}")),
    })
}

fn undo(
    c: &Checkpoints,
    log: &SessionLog,
    cwd: &std::path::Path,
    _: &str,
) -> Result<String, CommandError> {
    Ok(c.undo(log, cwd)?)
}

fn redo(
    c: &Checkpoints,
    log: &SessionLog,
    cwd: &std::path::Path,
    _: &str,
) -> Result<String, CommandError> {
    Ok(c.redo(log, cwd)?)
}

fn rewind(
    c: &Checkpoints,
    log: &SessionLog,
    cwd: &std::path::Path,
    argument: &str,
) -> Result<String, CommandError> {
    match parse_rewind(argument)? {
        Rewind::List => Ok(prompt_list(c, log)?),
        Rewind::To(n, RewindParts::Files) => {
            let timeline = c.timeline(log)?;
            let prompts = timeline.prompts();
            let Some((turn, _, _)) = n.checked_sub(1).and_then(|i| prompts.get(i as usize)) else {
                return Err(CommandError::NoSuchPrompt {
                    n,
                    count: prompts.len(),
                });
            };
            Ok(c.rewind(log, cwd, *turn)?)
        }
    }
}

/// Registers the three commands, owned by `owner`.
pub fn register(
    registry: &CommandRegistry,
    owner: &Scope,
    checkpoints: Arc<Checkpoints>,
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
            "Restore the files to before one of this session's prompts",
            rewind,
            Some("[N] [files]"),
        ),
    ];
    let mut disposers = Vec::new();
    for (name, description, op, hint) in specs {
        let (checkpoints, sessions) = (checkpoints.clone(), sessions.clone());
        let mut spec = CommandSpec::new(name, description, move |call: CommandCall| {
            run_op(checkpoints.clone(), sessions.clone(), call, op)
        });
        if let Some(hint) = hint {
            spec = spec.input(hint);
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
            parse_rewind("x").unwrap_err().to_string(),
            format!("\"x\" is not a prompt number. {REWIND_USAGE}")
        );
        assert_eq!(
            parse_rewind("1 files extra"),
            Err(RewindArgumentError::Unexpected("extra".into()))
        );
        assert_eq!(
            parse_rewind("1 chat").unwrap_err().to_string(),
            format!(
                "\"chat\" is not a part to rewind (this build rewinds the files; the conversation is rewound by forking the session at that prompt). {REWIND_USAGE}"
            )
        );
        assert_eq!(
            CommandError::NoSuchPrompt { n: 4, count: 2 }.to_string(),
            "there is no prompt 4: this session has 2 (run /rewind to list them)"
        );
    }
}
