//! Exact upstream texts: tool descriptions, parameter descriptions, prompt sections.

/// The bash description up to (not including) the background sentence.
pub const BASH_DESCRIPTION_CORE: &str = "Execute a bash command (`bash -c`) and return its stdout/stderr. Each call runs in a fresh shell: no state (cwd, variables, functions) persists between calls — pass `workdir` instead of using `cd`. Non-zero exits are reported as `[exit code: N]`. Current harness environment facts are exposed through managed `$DSH_*` variables; inspect them when needed. Commands may run under a file sandbox; a blocked file operation is reported as `[sandbox: file access denied under <mode> mode]` — a policy denial, not a bug in the command; do not retry another way. Long output is truncated to its tail; the full output is saved to a file whose path is reported when available.";

/// Last sentence when `run_in_background` is offered.
pub const BASH_BACKGROUND_ENABLED: &str = "Set `run_in_background: true` for long-running commands: the call returns a job id immediately; read its output with `job_output` and stop it with `job_kill`.";

/// Last sentence when background execution is disabled.
pub const BASH_BACKGROUND_DISABLED: &str =
    "Background execution is not available; long-running commands must finish within the timeout.";

/// Appended (after one space) when the executor confines.
pub const BASH_ESCALATION_PARAGRAPH: &str = "Attempting a command the sandbox may deny is safe and expected: run it and read the marker rather than assuming the denial. When a command is denied and a wider mode would let it succeed, escalate immediately in the same turn — the one sanctioned exception to a denial: retry the exact same command once with `sandbox_permissions` (the narrowest wider mode that suffices) plus a one-sentence `justification`. Do not detour through chat to ask permission first — the approval prompt raised by that retry is how the user consents. If the session states approval prompts are disabled, there is no exception: a denial is final — do not set `sandbox_permissions`. Never escalate speculatively: ground the request in a real denial — normally the one this command just hit; escalating up front is fine only when this session already denied the same access. A rejected escalation is final for that command — stop and explain, never work around it — but it does not forbid attempting or escalating other commands later.";

/// Description of the `command` parameter.
pub const BASH_PARAM_COMMAND: &str = "The bash command to execute.";

/// Description of the `description` parameter.
pub const BASH_PARAM_DESCRIPTION: &str = "Clear, concise description of what this command does in active voice, 5-10 words (shown in the UI). Examples: \"ls\" → \"List files in current directory\"; \"git status\" → \"Show working tree status\"; \"npm install\" → \"Install package dependencies\".";

/// Description of the `timeoutMs` parameter.
pub const BASH_PARAM_TIMEOUTMS: &str = "Timeout in milliseconds. The executor applies its configured default and cap, and kills the command on expiry.";

/// Description of the `workdir` parameter.
pub const BASH_PARAM_WORKDIR: &str = "Working directory for this command. Defaults to the session workspace; a relative path is resolved against it.";

/// Description of the `run_in_background` parameter.
pub const BASH_PARAM_RUN_IN_BACKGROUND: &str = "Run in the background and return a job id immediately (collect with job_output, stop with job_kill). No timeout applies.";

/// Description of the `sandbox_permissions` parameter.
pub const BASH_PARAM_SANDBOX_PERMISSIONS: &str = "The wider sandbox mode this command needs. Only valid as a one-shot retry of a command the sandbox just denied; requires justification and user approval.";

/// Description of the `justification` parameter.
pub const BASH_PARAM_JUSTIFICATION: &str = "Required with sandbox_permissions: one sentence for the user explaining why this exact command needs the wider access.";

/// Description of `job_output`.
pub const JOB_OUTPUT_DESCRIPTION: &str = "Read a background job. Stream jobs return only output since the previous read; final-output jobs return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap.";

/// Description of the `job_output` parameter `job_id`.
pub const JOB_OUTPUT_PARAM_JOB_ID: &str =
    "Job id returned by the tool that started the background work.";

/// Description of the `job_output` parameter `wait`.
pub const JOB_OUTPUT_PARAM_WAIT: &str = "Block until the job reaches a terminal status or the timeout expires. A timed-out wait returns [status: running] and leaves the job alive.";

/// Description of the `job_output` parameter `timeout_ms`.
pub const JOB_OUTPUT_PARAM_TIMEOUT_MS: &str = "Max wait in milliseconds (only meaningful with wait: true). Defaults to the configured wait timeout; capped by the configured maximum.";

/// Description of `job_list`.
pub const JOB_LIST_DESCRIPTION: &str =
    "List your background jobs (running and finished) with their ids, kinds, and statuses.";

/// Description of `job_kill`.
pub const JOB_KILL_DESCRIPTION: &str = "Request cancellation of a running background job by job id. Returns immediately; the job settles as killed once its work actually stops.";

/// Description of the `job_kill` parameter `job_id`.
pub const JOB_KILL_PARAM_JOB_ID: &str =
    "Job id returned by the tool that started the background work.";

/// Description of the `job_kill` parameter `reason`.
pub const JOB_KILL_PARAM_REASON: &str =
    "Optional short reason, recorded in the log and forwarded to the job.";

/// Prompt section `tool:bash` (order 105).
pub const BASH_PROMPT_SECTION: &str =
    "Check the [exit code: N] marker on every bash result; investigate failures before moving on.";

/// Prompt section `tool:jobs` (order 106).
pub const JOBS_PROMPT_SECTION: &str = "Track every background job id you start. You are notified in-session when a job finishes — do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running job's work. Before giving a final answer, collect every still-relevant job with job_output (set wait: true only when you are genuinely blocked on it), and job_kill jobs that stopped mattering.";
