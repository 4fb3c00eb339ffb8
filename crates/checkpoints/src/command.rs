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
        None | Some("files") => RewindParts::Files,
        Some(other) => {
            return Err(format!(
                "\"{other}\" is not a part to rewind (this build rewinds the files; the conversation is rewound by forking the session at that prompt). {REWIND_USAGE}"
            ));
        }
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

type Op = fn(&Checkpoints, &SessionLog, &std::path::Path, &str) -> Result<String, String>;

async fn run_op(
    checkpoints: Arc<Checkpoints>,
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
    let outcome =
        tokio::task::spawn_blocking(move || op(&checkpoints, &log, &cwd, &argument)).await;
    drop(guard);
    Ok(match outcome {
        Ok(Ok(text)) => CommandResult::text(text),
        Ok(Err(text)) => CommandResult::error(text),
        Err(error) => CommandResult::error(format!("the restore did not finish: {error}")),
    })
}

fn undo(
    c: &Checkpoints,
    log: &SessionLog,
    cwd: &std::path::Path,
    _: &str,
) -> Result<String, String> {
    c.undo(log, cwd).map_err(|e| e.to_string())
}

fn redo(
    c: &Checkpoints,
    log: &SessionLog,
    cwd: &std::path::Path,
    _: &str,
) -> Result<String, String> {
    c.redo(log, cwd).map_err(|e| e.to_string())
}

fn rewind(
    c: &Checkpoints,
    log: &SessionLog,
    cwd: &std::path::Path,
    argument: &str,
) -> Result<String, String> {
    match parse_rewind(argument)? {
        Rewind::List => prompt_list(c, log).map_err(|e| e.to_string()),
        Rewind::To(n, RewindParts::Files) => {
            let timeline = c.timeline(log).map_err(|e| e.to_string())?;
            let prompts = timeline.prompts();
            let Some((turn, _, _)) = n.checked_sub(1).and_then(|i| prompts.get(i as usize)) else {
                return Err(format!(
                    "there is no prompt {n}: this session has {} (run /rewind to list them)",
                    prompts.len()
                ));
            };
            c.rewind(log, cwd, *turn).map_err(|e| e.to_string())
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
        assert!(parse_rewind("x").unwrap_err().contains("Usage: /rewind"));
        assert!(parse_rewind("1 files extra").is_err());
    }
}
