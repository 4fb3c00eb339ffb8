//! `run_in_background` and the job tools against real processes.

use std::sync::Arc;
use std::time::Duration;

use dsh_tool_shell::BashArgs;
use dsh_tool_shell::JobToolsConfig;
use dsh_tool_shell::JobsConfig;
use dsh_tool_shell::JobsContext;
use dsh_tool_shell::JobsRuntime;
use dsh_tool_shell::OwnerId;
use dsh_tool_shell::ShellContext;
use dsh_tool_shell::bash;
use dsh_tool_shell::job_tools::JobKillArgs;
use dsh_tool_shell::job_tools::JobListArgs;
use dsh_tool_shell::job_tools::JobOutputArgs;
use dsh_tool_shell::job_tools::job_kill;
use dsh_tool_shell::job_tools::job_list;
use dsh_tool_shell::job_tools::job_output;
use dsh_tool_shell::job_tools::render_job_kill_text;
use dsh_tool_shell::job_tools::render_job_list_text;
use dsh_tool_shell::job_tools::render_job_output_text;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use super::support::all_dead;
use super::support::context;
use super::support::read_pids;

struct Env {
    _dir: tempfile::TempDir,
    shell: ShellContext,
    jobs: JobsContext,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let runtime = JobsRuntime::new(JobsConfig::default());
    let owner = OwnerId::new("agent-a");
    let mut shell = context(dir.path());
    shell.jobs = Some(runtime.clone());
    shell.owner = Some(owner.clone());
    shell.config.grace_ms = 500;
    let jobs = JobsContext {
        runtime,
        caller: Some(owner),
        config: JobToolsConfig::default(),
    };
    Env {
        _dir: dir,
        shell,
        jobs,
    }
}

fn bg(command: &str) -> BashArgs {
    let mut args = BashArgs::new(command, "Run in background");
    args.run_in_background = Some(true);
    args
}

async fn start(env: &Env, command: &str) -> String {
    let out = bash::run(bg(command), &env.shell, CancellationToken::new())
        .await
        .unwrap();
    bash::render_text(&out)
}

async fn read(jobs: &JobsContext, id: &str, wait: Option<f64>) -> String {
    let args = JobOutputArgs {
        job_id: id.into(),
        wait: wait.map(|_| true),
        timeout_ms: wait,
    };
    render_job_output_text(
        &job_output(args, jobs, CancellationToken::new())
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn background_ids_and_completed_output() {
    let env = env();
    assert_eq!(
        start(&env, "echo done").await,
        "started background job bash-1"
    );
    assert_eq!(
        start(&env, "echo out; echo err >&2; exit 4").await,
        "started background job bash-2"
    );
    assert_eq!(
        read(&env.jobs, "bash-1", Some(5000.0)).await,
        "done\n[status: completed, exit code: 0]"
    );
    assert_eq!(
        read(&env.jobs, "bash-1", None).await,
        "(no new output)\n[status: completed, exit code: 0]"
    );
    assert_eq!(
        read(&env.jobs, "bash-2", Some(5000.0)).await,
        "out\n[stderr]\nerr\n[status: completed, exit code: 4]"
    );
}

#[tokio::test]
async fn running_job_reads_deltas_and_survives_a_timed_out_wait() {
    let env = env();
    let marker = env.shell.cwd.join("second");
    start(
        &env,
        &format!(
            "echo one; while [ ! -e {} ]; do sleep 0.05; done; echo two; sleep 1000",
            marker.display()
        ),
    )
    .await;
    let mut first = String::new();
    for _ in 0..100 {
        first = read(&env.jobs, "bash-1", None).await;
        if first != "(no new output)\n[status: running]" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(first, "one\n[status: running]");
    assert_eq!(
        read(&env.jobs, "bash-1", Some(50.0)).await,
        "(no new output)\n[status: running]"
    );
    std::fs::write(&marker, "").unwrap();
    let mut second = String::new();
    for _ in 0..100 {
        second = read(&env.jobs, "bash-1", None).await;
        if second != "(no new output)\n[status: running]" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(second, "two\n[status: running]");
    let list = job_list(JobListArgs {}, &env.jobs, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        render_job_list_text(&list),
        format!("bash-1 [bash] running — {}", list.jobs[0].label)
    );
    env.jobs.runtime.dispose().await;
}

#[tokio::test]
async fn kill_stops_the_group_and_reports_sigterm_without_notice() {
    let env = env();
    let mut notices = env
        .jobs
        .runtime
        .subscribe(env.shell.owner.as_ref().unwrap());
    let pid_file = env.shell.cwd.join("pids");
    start(
        &env,
        &format!(
            "sleep 1000 & echo $! >> {f}; echo $$ >> {f}; wait",
            f = pid_file.display()
        ),
    )
    .await;
    let pids = read_pids(&pid_file, 2).await;
    let kill = job_kill(
        JobKillArgs {
            job_id: "bash-1".into(),
            reason: Some("done".into()),
        },
        &env.jobs,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        render_job_kill_text(&kill),
        "requested cancellation of job bash-1"
    );
    assert_eq!(kill.job.status.as_str(), "stopping");
    assert_eq!(
        read(&env.jobs, "bash-1", Some(5000.0)).await,
        "(no new output)\n[status: killed, signal: SIGTERM]"
    );
    assert!(all_dead(&pids).await);
    let again = job_kill(
        JobKillArgs {
            job_id: "bash-1".into(),
            reason: None,
        },
        &env.jobs,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        render_job_kill_text(&again),
        "job bash-1 had already finished [status: killed, signal: SIGTERM]"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(notices.try_recv().is_err());
}

#[tokio::test]
async fn completion_notice_reaches_the_owner() {
    let env = env();
    let mut notices = env
        .jobs
        .runtime
        .subscribe(env.shell.owner.as_ref().unwrap());
    start(&env, "echo hi").await;
    let notice = tokio::time::timeout(Duration::from_secs(5), notices.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        notice.text,
        "background job bash-1 (bash: echo hi) finished [status: completed, exit code: 0]. Read its output with job_output."
    );
}

#[tokio::test]
async fn other_sessions_are_fenced_out() {
    let env = env();
    start(&env, "sleep 1000").await;
    let other = JobsContext {
        caller: Some(OwnerId::new("agent-b")),
        ..env.jobs.clone()
    };
    let args = JobOutputArgs {
        job_id: "bash-1".into(),
        wait: None,
        timeout_ms: None,
    };
    let err = job_output(args, &other, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.message, "job bash-1 belongs to another session");
    let err = job_kill(
        JobKillArgs {
            job_id: "bash-1".into(),
            reason: None,
        },
        &other,
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.message, "job bash-1 belongs to another session");
    let list = job_list(JobListArgs {}, &other, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(render_job_list_text(&list), "(no background jobs)");
    let args = JobOutputArgs {
        job_id: "bash-7".into(),
        wait: None,
        timeout_ms: None,
    };
    assert_eq!(
        job_output(args, &env.jobs, CancellationToken::new())
            .await
            .unwrap_err()
            .message,
        "unknown job bash-7"
    );
    env.jobs.runtime.dispose().await;
}

#[tokio::test]
async fn dispose_owner_kills_its_processes() {
    let env = env();
    let pid_file = env.shell.cwd.join("pids");
    start(
        &env,
        &format!(
            "echo $$ >> {f}; sleep 1000 & echo $! >> {f}; wait",
            f = pid_file.display()
        ),
    )
    .await;
    let pids = read_pids(&pid_file, 2).await;
    let owner = env.shell.owner.clone().unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        env.jobs.runtime.dispose_owner(&owner),
    )
    .await
    .unwrap();
    assert!(all_dead(&pids).await);
    assert!(env.jobs.runtime.list(Some(&owner)).is_empty());
}

#[tokio::test]
async fn limit_applies_before_spawning() {
    let mut env = env();
    let runtime = JobsRuntime::new(JobsConfig {
        max_concurrent_jobs_per_owner: 1,
    });
    env.shell.jobs = Some(runtime.clone());
    let marker = env.shell.cwd.join("ran");
    start(&env, "sleep 1000").await;
    let err = bash::run(
        bg(&format!("touch {}", marker.display())),
        &env.shell,
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.message,
        "background job limit reached for this owner (limit: 1); use job_kill to stop an unneeded job, wait for it to finish, then retry"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!marker.exists());
    runtime.dispose().await;
}

#[tokio::test]
async fn spawn_failure_settles_killed_before_exit() {
    let env = env();
    let mut args = bg("echo never");
    args.workdir = Some("missing-dir".into());
    let out = bash::run(args, &env.shell, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(bash::render_text(&out), "started background job bash-1");
    assert_eq!(
        read(&env.jobs, "bash-1", Some(5000.0)).await,
        "[stderr]\nspawn failed: Error: spawn bash ENOENT\n[status: killed, killed before exit]"
    );
    assert_eq!(
        read(&env.jobs, "bash-1", None).await,
        "(no new output)\n[status: killed, killed before exit]"
    );
}

#[tokio::test]
async fn lossy_reads_point_at_the_spill() {
    let mut env = env();
    env.shell.config.max_output_bytes = 10;
    start(&env, "printf '%s' 0123456789abcdefghij").await;
    let text = read(&env.jobs, "bash-1", Some(5000.0)).await;
    let spill = env.shell.cwd.join(".spill");
    let prefix = format!(
        "abcdefghij\n[some output was dropped from memory; full output: {}",
        spill.display()
    );
    assert!(text.starts_with(&prefix), "{text}");
    assert!(
        text.ends_with("-bash-stdout.txt]\n[status: completed, exit code: 0]"),
        "{text}"
    );
    let path = text
        .split("full output: ")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        "0123456789abcdefghij"
    );
}

#[tokio::test]
async fn argument_errors() {
    let env = env();
    let args = JobOutputArgs {
        job_id: String::new(),
        wait: None,
        timeout_ms: None,
    };
    assert_eq!(
        job_output(args, &env.jobs, CancellationToken::new())
            .await
            .unwrap_err()
            .message,
        "invalid job_id: expected a non-empty string, got \"\""
    );
    start(&env, "true").await;
    let args = JobOutputArgs {
        job_id: "bash-1".into(),
        wait: Some(true),
        timeout_ms: Some(0.0),
    };
    assert_eq!(
        job_output(args, &env.jobs, CancellationToken::new())
            .await
            .unwrap_err()
            .message,
        "invalid wait timeout: expected a positive number of milliseconds, got 0"
    );
    let mut no_jobs = env.shell.clone();
    no_jobs.jobs = None;
    assert_eq!(
        bash::run(bg("true"), &no_jobs, CancellationToken::new())
            .await
            .unwrap_err()
            .message,
        "background jobs unavailable: load @deepseek-ai/dsh-jobs and @deepseek-ai/dsh-tool-jobs"
    );
    start(&env, "sleep 1000").await;
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let args = JobOutputArgs {
        job_id: "bash-2".into(),
        wait: Some(true),
        timeout_ms: None,
    };
    let err = job_output(
        args,
        &JobsContext {
            runtime: Arc::clone(&env.jobs.runtime),
            ..env.jobs.clone()
        },
        cancelled,
    )
    .await
    .unwrap_err();
    assert_eq!(err.message, "wait aborted");
    assert_eq!(
        read(&env.jobs, "bash-2", None).await,
        "(no new output)\n[status: running]"
    );
    env.jobs.runtime.dispose().await;
}
