//! Model-facing prose of the shell tools: tool descriptions, parameter descriptions and the
//! system-prompt sections. The wording is ours; only the markers quoted inside it
//! (`[exit code: N]`, the sandbox denial marker, `[status: ...]`) and the tool and parameter
//! names are interface, because the model sees them verbatim in results and schemas.

/// The bash description up to (not including) the background sentence.
pub const BASH_DESCRIPTION_CORE: &str = "Run a command with `bash -c` and return what it wrote to stdout and stderr. Every call starts a new shell, so nothing carries over from earlier calls: not the working directory, not variables, not functions. Set `workdir` instead of running `cd`. A non-zero exit status is appended as `[exit code: N]`. Facts about the harness environment are available in managed `$DSH_*` variables; read them when you need them. Commands may be confined by a file sandbox: a blocked file operation shows up as `[sandbox: file access denied under <mode> mode]`. That is a policy decision, not a fault in the command, so do not try to reach the same result by another route. When the output is long, only its tail is returned, together with the path of a file holding the full output when one could be saved.";

/// Last sentence when `run_in_background` is offered.
pub const BASH_BACKGROUND_ENABLED: &str = "For commands that run a long time, pass `run_in_background: true`: the call returns a job id at once, `job_output` reads the job's output and `job_kill` stops it.";

/// Last sentence when background execution is disabled.
pub const BASH_BACKGROUND_DISABLED: &str =
    "Background execution is not offered here, so every command has to finish within its timeout.";

/// Appended (after one space) when the executor confines.
pub const BASH_ESCALATION_PARAGRAPH: &str = "Running a command that the sandbox might block is safe: run it and look for the marker rather than predicting a denial. If a command is denied and a wider sandbox mode would let it work, escalate at once, in the same turn; this is the only permitted way past a denial. Re-run exactly the same command one time with `sandbox_permissions` set to the narrowest wider mode that is enough, plus a one-sentence `justification`. Do not ask the user in chat first: the approval prompt raised by that retry is where the user agrees or refuses. When the session says approval prompts are disabled, there is no way past a denial: treat it as final and never set `sandbox_permissions`. Escalate only in response to a denial that actually happened, normally the one this command just received; asking for a wider mode up front is acceptable only when this session has already been denied the same access. If the user rejects an escalation, that command is settled: stop and explain instead of working around it. Other commands may still be run, and escalated, later.";

/// Description of the `command` parameter.
pub const BASH_PARAM_COMMAND: &str = "The command line to run with `bash -c`.";

/// Description of the `description` parameter.
pub const BASH_PARAM_DESCRIPTION: &str = "A 5-10 word label in active voice saying what the command does; the user sees it in the UI. For example \"cargo test\" → \"Run the test suite\", \"ls src\" → \"List files in src\", \"git diff\" → \"Show uncommitted changes\".";

/// Description of the `timeoutMs` parameter.
pub const BASH_PARAM_TIMEOUTMS: &str = "Time limit in milliseconds; the command is killed when it runs out. Without it the executor's default applies, and a value above the executor's maximum is lowered to that maximum.";

/// Description of the `workdir` parameter.
pub const BASH_PARAM_WORKDIR: &str = "Directory to run the command in. If omitted, the session workspace; relative paths are taken from there.";

/// Description of the `run_in_background` parameter.
pub const BASH_PARAM_RUN_IN_BACKGROUND: &str = "Start the command as a background job and return its job id at once; read it with job_output and stop it with job_kill. Background jobs have no timeout.";

/// Description of the `sandbox_permissions` parameter.
pub const BASH_PARAM_SANDBOX_PERMISSIONS: &str = "Wider sandbox mode to request for this one command. Use it only to retry, once, a command the sandbox has just denied; it needs a justification and the user's approval.";

/// Description of the `justification` parameter.
pub const BASH_PARAM_JUSTIFICATION: &str = "One sentence, shown to the user, on why this command needs the wider mode. Required whenever sandbox_permissions is set.";

/// Description of `job_output`.
pub const JOB_OUTPUT_DESCRIPTION: &str = "Read the output of a background job. A streaming job (such as a bash command) returns only what it wrote since your previous read; a job that produces one final result returns it once the job has finished. The response always ends with a `[status: ...]` line. A read returns immediately unless you pass `wait: true`, which blocks until the job finishes or the wait limit runs out.";

/// Description of the `job_output` parameter `job_id`.
pub const JOB_OUTPUT_PARAM_JOB_ID: &str = "The job's id, as returned by the tool that started it.";

/// Description of the `job_output` parameter `wait`.
pub const JOB_OUTPUT_PARAM_WAIT: &str = "Wait for the job to finish before reading, up to the timeout. If the timeout passes first, the result ends with [status: running] and the job keeps running.";

/// Description of the `job_output` parameter `timeout_ms`.
pub const JOB_OUTPUT_PARAM_TIMEOUT_MS: &str = "How long to wait, in milliseconds; used only with wait: true. Default: the configured wait timeout. Values above the configured maximum are capped to it.";

/// Description of `job_list`.
pub const JOB_LIST_DESCRIPTION: &str =
    "Show your background jobs, running and finished, with each job's id, kind and status.";

/// Description of `job_kill`.
pub const JOB_KILL_DESCRIPTION: &str = "Ask a running background job to stop. Returns at once; the job's status becomes killed when its work has actually ended.";

/// Description of the `job_kill` parameter `job_id`.
pub const JOB_KILL_PARAM_JOB_ID: &str = JOB_OUTPUT_PARAM_JOB_ID;

/// Description of the `job_kill` parameter `reason`.
pub const JOB_KILL_PARAM_REASON: &str =
    "Optional short reason for stopping; it is logged and passed on to the job.";

/// Prompt section `tool:bash` (order 105).
pub const BASH_PROMPT_SECTION: &str = "An [exit code: N] marker on a bash result means the command failed: find out why before you go on.";

/// Prompt section `tool:jobs` (order 106).
pub const JOBS_PROMPT_SECTION: &str = "Keep track of the id of every background job you start. The session tells you when a job finishes, so do not poll it in a loop or sleep while waiting: carry on with work that does not depend on it, and do not redo what a running job is already doing. Before your final answer, collect every job whose result still matters with job_output (use wait: true only when you truly cannot proceed without it), and stop the jobs that no longer matter with job_kill.";
