//! The `dsh` binary: argv → configuration → host (`dsh-host`) → front-end. The only crate that
//! writes to the terminal; no plugin logic lives here.
//!
//! stdout rules: `dsh exec` prints the final answer (text) or JSON lines (stream-json) and
//! nothing else; `dsh acp` writes only protocol frames to stdout. Diagnostics go to stderr
//! through `tracing` (`DSH_LOG=debug` to see them).

/// `eprintln!` that never panics.
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::out::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `println!` that never panics on a closed reader.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::out::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod acp;
mod exec;
mod host;
mod mcp_cmd;
mod out;
mod profile;
mod sessions;
mod tui;
mod web;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use clap::Subcommand;

/// dsh: an agent harness for DeepSeek models, built around one guarded tool runtime.
#[derive(Debug, Parser)]
#[command(
    name = "dsh",
    version,
    about,
    long_about = None,
    after_help = "With no command, dsh opens the interactive terminal UI in the current folder."
)]
// No `args_conflicts_with_subcommands`: clap counts a global flag such as `--trust-project` as
// an argument, so `dsh --trust-project exec …` would become a prompt "exec …". A subcommand is
// recognised as the first word; once a prompt has begun, later words stay prompt words.
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Open the UI and send this first prompt (words are joined with spaces).
    prompt: Vec<String>,
    /// The working directory of the session (default: the current folder).
    #[arg(long, short = 'C')]
    cwd: Option<PathBuf>,
    /// The model id to use (default from config).
    #[arg(long, short = 'm')]
    model: Option<String>,
    /// Trust this folder's `.dsh/config.toml` for this run (see `dsh trust`).
    #[arg(long, global = true)]
    trust_project: bool,
    /// Upstream's launcher: `sdk` serves the SDK runtime protocol on stdio (what the
    /// published SDK clients start); `headless "task"` runs like `dsh exec "task"`.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Upstream's YAML patch files: refused with what dsh takes instead.
    #[arg(long, value_name = "FILE", requires = "profile")]
    patch: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one task headless and print the final answer (the task from stdin with `-` or
    /// when piped in).
    Exec(exec::ExecArgs),
    /// Reopen a stored session in the interactive UI (default: the newest one of this folder).
    Resume {
        /// The session id.
        id: Option<String>,
        /// The folder whose newest session is reopened (default: the current folder).
        #[arg(long, short = 'C')]
        cwd: Option<PathBuf>,
        /// The model id to use from the next request.
        #[arg(long, short = 'm')]
        model: Option<String>,
    },
    /// Serve the Agent Client Protocol on stdio (add dsh to Zed as a custom agent server).
    Acp,
    /// Serve the browser app on a local web server (ACP over WebSocket at /acp).
    Web(web::WebArgs),
    /// Print the tool catalog the model sees in this folder.
    Tools {
        /// Print exactly the schemas sent to the model, as JSON.
        #[arg(long)]
        json: bool,
        /// The project folder (default: the current folder).
        #[arg(long)]
        cwd: Option<PathBuf>,
    },
    /// Inspect stored sessions ($DSH_HOME/sessions).
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// MCP servers from the configuration.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// Configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Trust a folder's own `.dsh/config.toml` (recorded in $DSH_HOME/config.toml). Until
    /// then, its settings that could widen the sandbox, redirect credentials or start
    /// processes are ignored.
    Trust {
        /// The folder (default: the current folder).
        path: Option<PathBuf>,
        /// Mark the folder untrusted instead.
        #[arg(long)]
        revoke: bool,
    },
}

#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// List stored sessions, most recently active first.
    List,
    /// Print a session as a readable transcript (`--json`: its events as JSON lines, crash
    /// repair shown as it would be applied).
    Show {
        /// The session id (or a unique prefix).
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Delete a stored session.
    Rm {
        /// The session id (or a unique prefix).
        id: String,
    },
    /// List a session's checkpoints of the workspace's files, oldest first.
    Checkpoints {
        /// The session id (or a unique prefix).
        id: String,
        /// An array of objects: id, time, turn, step, prompt, tree.
        #[arg(long)]
        json: bool,
    },
    /// Make the session's workspace files exactly what they were at a checkpoint.
    Restore {
        /// The session id (or a unique prefix).
        id: String,
        /// The checkpoint id (`dsh sessions checkpoints ID` lists them).
        checkpoint: String,
    },
    /// Write a session's raw log and its descendants' logs as one ZIP archive.
    Export {
        /// The session id (or a unique prefix).
        id: String,
        /// Where to write the archive (default `<id>.zip`; `-` for stdout).
        #[arg(short, long)]
        output: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Connect to each configured server once and list its state and tools.
    List {
        /// Print the statuses as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve this folder's tools to an MCP client on stdio, under the configured policy.
    ///
    /// Offered: the tools that do their work for any caller (files, search, bash and jobs,
    /// web, skills, MCP tools of the configured servers, ...), each call through the same
    /// guarded pipeline as the model's, approvals refused. Not offered: tools that answer only
    /// inside a model's turn (ask_user_question, exit_plan_mode, goals, ralph), and the
    /// delegation tools (subagent, subagent_fork, workflow, send_message, list_agents,
    /// interrupt_agent) unless a model key is set, since delegated children need one.
    Serve {
        /// The project folder (default: the current folder).
        #[arg(long, short = 'C')]
        cwd: Option<PathBuf>,
        /// The sandbox mode of the served tools.
        #[arg(long, short = 's', value_enum)]
        sandbox: Option<exec::Sandbox>,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate the configuration, then print it with the layer each key came from.
    Show {
        /// The project folder whose `.dsh/config.toml` applies (default: the current folder).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Print JSON (the effective tree and each key's origin) instead of TOML.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    // Re-executed as the process guard of an unconfined tool command (the fallback when
    // `dsh-tool-guard` is missing): nothing else runs.
    if let Some(code) = dsh_tool_guard::run_if_invoked() {
        return code;
    }
    take_credentials_from_environment();
    // Non-dumpable: a tool command of the same user cannot read dsh's memory or environment
    // through /proc, nor attach to it (only a caller with CAP_SYS_PTRACE, such as root, can);
    // no core dump holds the key. Exec resets it, so children are ordinary processes.
    if let Err(error) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        note!("dsh: warning: cannot make the process non-dumpable: {error}");
    }
    let cli = Cli::parse();
    if cli.command.is_some() && (cli.cwd.is_some() || cli.model.is_some()) {
        use clap::CommandFactory;
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "-C/--cwd and -m/--model go after the command (`dsh exec -C DIR …`)",
            )
            .exit();
    }
    if cli.command.is_some() && cli.profile.is_some() {
        use clap::CommandFactory;
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--profile takes no command (`dsh --profile sdk`, `dsh --profile headless \"task\"`)",
            )
            .exit();
    }
    if cli.trust_project {
        host::trust_for_this_run();
    }
    // The interactive UI owns the terminal: its diagnostics go to a file instead of stderr.
    init_tracing(
        cli.profile.is_none() && matches!(cli.command, None | Some(Command::Resume { .. })),
    );
    dsh_tool_shell::guard::set_program(dsh_tool_shell::guard::installed_or_self());
    let result = match cli.command {
        None if cli.profile.is_some() => profile::run(profile::ProfileArgs {
            profile: cli.profile.unwrap_or_default(),
            patches: cli.patch,
            words: cli.prompt,
            cwd: cli.cwd,
            model: cli.model,
        }),
        None => tui::run(tui::TuiArgs {
            start: dsh_tui::Start::New,
            prompt: (!cli.prompt.is_empty()).then(|| cli.prompt.join(" ")),
            cwd: cli.cwd,
            model: cli.model,
        }),
        Some(Command::Resume { id, cwd, model }) => tui::run(tui::TuiArgs {
            start: dsh_tui::Start::Resume(id),
            prompt: None,
            cwd,
            model,
        }),
        Some(Command::Exec(args)) => exec::run(args),
        Some(Command::Tools { json, cwd }) => host::tools(json, cwd),
        Some(Command::Acp) => acp::run(),
        Some(Command::Web(args)) => web::run(args),
        Some(Command::Mcp {
            command: McpCommand::List { json },
        }) => mcp_cmd::list(json),
        Some(Command::Mcp {
            command: McpCommand::Serve { cwd, sandbox },
        }) => mcp_cmd::serve(cwd, sandbox),
        Some(Command::Sessions {
            command: SessionsCommand::List,
        }) => sessions::list(),
        Some(Command::Sessions {
            command: SessionsCommand::Show { id, json },
        }) => sessions::show(&id, json),
        Some(Command::Sessions {
            command: SessionsCommand::Rm { id },
        }) => sessions::rm(&id),
        Some(Command::Sessions {
            command: SessionsCommand::Checkpoints { id, json },
        }) => sessions::checkpoints(&id, json),
        Some(Command::Sessions {
            command: SessionsCommand::Restore { id, checkpoint },
        }) => sessions::restore(&id, &checkpoint),
        Some(Command::Sessions {
            command: SessionsCommand::Export { id, output },
        }) => sessions::export(&id, output),
        Some(Command::Config {
            command: ConfigCommand::Show { cwd, json },
        }) => host::config_show(cwd, json),
        Some(Command::Trust { path, revoke }) => host::trust(path, revoke),
    };
    // A log still open somewhere (a task the runtime did not get to drop) may have queued
    // events its writer thread has not written yet; exiting must not lose them.
    dsh_session::settle_all();
    match result {
        Ok(code) => code,
        Err(error) => {
            note!("dsh: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Moves every credential-like variable (the provider key among them) out of the process
/// environment into `dsh-secrets`' private store, and overwrites its value where the kernel
/// shows the environment (`/proc/<pid>/environ` reads the strings the process started with,
/// which removing a variable leaves in place). Runs first in `main`: no other thread exists
/// yet, which is what makes changing the environment sound.
#[allow(unsafe_code)]
fn take_credentials_from_environment() {
    let taken = dsh_secrets::credential_vars();
    if taken.is_empty() {
        return;
    }
    wipe_initial_values(&taken);
    for (name, _) in &taken {
        // SAFETY: single-threaded at this point (first statement of `main` after the guard
        // check, which does not return here), so no other thread reads the environment.
        unsafe { std::env::remove_var(name) };
    }
    dsh_secrets::keep_taken(taken);
}

/// Zeroes the value bytes of each `taken` variable in the C environment's strings.
#[allow(unsafe_code)]
fn wipe_initial_values(taken: &[(String, String)]) {
    unsafe extern "C" {
        static environ: *const *mut std::ffi::c_char;
    }
    // SAFETY: single-threaded (see the caller). `environ` is the C library's NULL-terminated
    // array of NUL-terminated `NAME=value` strings, all writable (the initial stack, or the
    // heap for a variable set since); each write stays inside one string's own bytes and keeps
    // its length (the terminating NUL is untouched), so every pointer stays valid.
    unsafe {
        let mut entry = environ;
        if entry.is_null() {
            return;
        }
        while !(*entry).is_null() {
            let text = *entry;
            let bytes = std::ffi::CStr::from_ptr(text).to_bytes();
            if let Some(eq) = bytes.iter().position(|b| *b == b'=')
                && taken
                    .iter()
                    .any(|(name, _)| name.as_bytes() == &bytes[..eq])
            {
                let value_len = bytes.len() - eq - 1;
                std::ptr::write_bytes(text.add(eq + 1), 0, value_len);
            }
            entry = entry.add(1);
        }
    }
}

fn init_tracing(to_file: bool) {
    // stderr belongs to the user: its messages say what to do, and timestamped diagnostics
    // appear there only when `DSH_LOG` asks. A log file keeps warnings by default.
    let default = if to_file { "warn" } else { "off" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("DSH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let file = to_file
        .then(|| {
            let dir = dsh_host::config::dsh_home().ok()?.join("logs");
            std::fs::create_dir_all(&dir).ok()?;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("dsh.log"))
                .ok()
        })
        .flatten();
    // A failed log write is never reported by printing (that panics on a closed stderr).
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .log_internal_errors(false);
    let _ = match file {
        Some(file) => builder
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file))
            .try_init(),
        None if to_file => builder.with_writer(std::io::sink).try_init(),
        // Colours only for a terminal; a closed stderr swallows the rest of the log.
        None => builder
            .with_ansi(out::stderr_is_terminal())
            .with_writer(|| out::QuietStderr)
            .try_init(),
    };
}
