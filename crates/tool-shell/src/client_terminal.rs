//! A foreground `bash` call run in the client's terminal (ACP `terminal/*`), when the front-end
//! provides [`dsh_tools::ClientTerminals`]: the client shows the command live, as its terminal
//! capability intends.
//!
//! The client gets exactly what this process would have spawned: the sandbox runner's
//! argument list when the call is confined, and a cleared environment holding only the
//! child environment dsh computes (`env -i K=V…`), so neither the confinement nor the
//! environment filter depends on the client. A terminal merges stdout and stderr; the result
//! carries that text as stdout.

use std::sync::Arc;
use std::time::Duration;

use dsh_tools::ClientTerminals;
use dsh_tools::TerminalCommand;
use tokio_util::sync::CancellationToken;

use crate::bash::BashArgs;
use crate::bash::BashOutput;
use crate::bash::SandboxReport;
use crate::bash::StreamText;
use crate::bash::resolve_workdir;
use crate::context::ShellContext;
use crate::error::ShellError;
use crate::sandbox;
use crate::sandbox::SandboxMode;

/// The program that clears the environment before anything else runs.
fn env_program() -> String {
    let absolute = std::path::Path::new("/usr/bin/env");
    if absolute.exists() {
        absolute.to_string_lossy().into_owned()
    } else {
        "env".to_owned()
    }
}

/// `env -i K=V… [runner args…] bash -c <command>`.
pub(crate) fn command_line(args: &BashArgs, ctx: &ShellContext) -> (String, Vec<String>) {
    let cwd = resolve_workdir(args, ctx);
    let mut argv = vec!["-i".to_owned()];
    argv.extend(
        ctx.child_env()
            .into_iter()
            // `env` would read a name containing `=` as part of the value.
            .filter(|(name, _)| !name.is_empty() && !name.contains('='))
            .map(|(name, value)| format!("{name}={value}")),
    );
    if let Some(launch) = ctx.sandbox.as_ref().and_then(|policy| policy.launch(&cwd)) {
        // The client's terminal runs it: dsh does not see it end.
        let (program, args) = launch.detach();
        argv.push(program.to_string_lossy().into_owned());
        argv.extend(args.iter().map(|a| a.to_string_lossy().into_owned()));
    }
    argv.extend(["bash".to_owned(), "-c".to_owned(), args.command.clone()]);
    (env_program(), argv)
}

pub(crate) async fn run(
    args: &BashArgs,
    ctx: &ShellContext,
    terminals: Arc<dyn ClientTerminals>,
    call_id: &str,
    timeout_ms: f64,
    cancel: &CancellationToken,
) -> Result<BashOutput, ShellError> {
    let (program, argv) = command_line(args, ctx);
    let outcome = terminals
        .run(TerminalCommand {
            call_id: call_id.to_owned(),
            program,
            args: argv,
            cwd: resolve_workdir(args, ctx),
            output_byte_limit: ctx.config.max_output_bytes as u64,
            timeout: Duration::from_secs_f64(timeout_ms / 1000.0),
            signal: cancel.clone(),
        })
        .await
        .map_err(|reason| {
            ShellError::plain(format!("the client could not run the command: {reason}"))
        })?;
    if outcome.aborted || cancel.is_cancelled() {
        return Err(ShellError::aborted());
    }
    let exit_code = outcome.exit_code.and_then(|code| i32::try_from(code).ok());
    let sandbox = match &ctx.sandbox {
        None => None,
        Some(policy) => {
            let confined = policy.mode != SandboxMode::DangerFullAccess;
            if confined
                && !outcome.timed_out
                && let Some(line) = sandbox::runner_failure(exit_code, &outcome.output)
            {
                return Err(sandbox::sandbox_unavailable(policy.mode, Some(&line)));
            }
            Some(SandboxReport {
                mode: policy.mode,
                denied: sandbox::detect_denial(
                    &outcome.output,
                    policy,
                    &resolve_workdir(args, ctx),
                ),
                enforcement: confined.then(|| "bwrap".to_owned()),
                runner_failed: None,
                limit: confined
                    .then(|| sandbox::limit_note(&outcome.output, policy))
                    .flatten(),
            })
        }
    };
    Ok(BashOutput::Foreground {
        exit_code,
        signal: outcome.signal,
        timed_out: outcome.timed_out,
        aborted: false,
        timeout_ms,
        stdout: StreamText {
            text: outcome.output,
            truncated: outcome.truncated,
            spill_path: None,
            spill_missing: outcome
                .truncated
                .then(|| "the client's terminal keeps only the tail".to_owned()),
        },
        stderr: StreamText {
            text: String::new(),
            truncated: false,
            spill_path: None,
            spill_missing: None,
        },
        sandbox,
    })
}
