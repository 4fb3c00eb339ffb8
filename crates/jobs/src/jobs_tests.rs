use super::*;
use crate::notice::*;
use futures::FutureExt;
use pretty_assertions::assert_eq;
use tokio::sync::oneshot;

/// A producer driven by the test: it settles when the test sends an outcome or when cancelled.
struct Scripted {
    output: Mutex<String>,
    cancel_tx: Mutex<Option<oneshot::Sender<()>>>,
    fail_cancel: bool,
}

impl JobProducer for Scripted {
    fn cancel(&self, _reason: Option<&str>) -> Result<(), JobError> {
        if self.fail_cancel {
            return Err(JobError::CancelRefused("cannot cancel".into()));
        }
        if let Some(tx) = self.cancel_tx.lock().unwrap().take() {
            let _ = tx.send(());
        }
        Ok(())
    }

    fn read_output(&self) -> Option<String> {
        Some(std::mem::take(&mut *self.output.lock().unwrap()))
    }
}

struct Handle {
    producer: Arc<Scripted>,
    finish: oneshot::Sender<JobOutcome>,
}

fn scripted() -> (Handle, JobRun) {
    let (cancel_tx, cancel_rx) = oneshot::channel();
    let (finish, finish_rx) = oneshot::channel::<JobOutcome>();
    let producer = Arc::new(Scripted {
        output: Mutex::new(String::new()),
        cancel_tx: Mutex::new(Some(cancel_tx)),
        fail_cancel: false,
    });
    let done = async move {
        tokio::select! {
            outcome = finish_rx => outcome.map_err(|_| JobError::Failed("dropped".to_owned())),
            _ = cancel_rx => Ok(JobOutcome { status: JobStatus::Killed, detail: Some("signal: SIGTERM".into()), output: None }),
        }
    };
    (
        Handle {
            producer: producer.clone(),
            finish,
        },
        JobRun {
            producer,
            done: done.boxed(),
        },
    )
}

fn spec(kind: &str, owner: Option<&OwnerId>) -> JobSpec {
    JobSpec {
        kind: kind.into(),
        label: "work".into(),
        owner: owner.cloned(),
        output_limit_bytes: None,
    }
}

async fn settled(runtime: &JobsRuntime, owner: Option<&OwnerId>, id: &str) -> PublicJob {
    runtime
        .wait(owner, id, Duration::from_secs(5), &CancellationToken::new())
        .await
        .unwrap()
}

#[tokio::test]
async fn ids_are_per_kind_sequences() {
    let rt = JobsRuntime::new(JobsConfig::default());
    let a = OwnerId::new("a");
    let mut handles = Vec::new();
    let mut ids = Vec::new();
    for kind in ["bash", "bash", "subagent", "bash"] {
        let (h, run) = scripted();
        handles.push(h);
        ids.push(rt.start(spec(kind, Some(&a)), || Ok(run)).unwrap());
    }
    assert_eq!(ids, ["bash-1", "bash-2", "subagent-1", "bash-3"]);
}

#[tokio::test]
async fn limit_counts_live_jobs_per_owner_and_skips_run() {
    let rt = JobsRuntime::new(JobsConfig {
        max_concurrent_jobs_per_owner: 2,
    });
    let a = OwnerId::new("a");
    let b = OwnerId::new("b");
    let (h1, r1) = scripted();
    let (_h2, r2) = scripted();
    rt.start(spec("bash", Some(&a)), || Ok(r1)).unwrap();
    rt.start(spec("bash", Some(&a)), || Ok(r2)).unwrap();
    let mut ran = false;
    let err = rt
        .start(spec("bash", Some(&a)), || {
            ran = true;
            Err(ShellError::plain("unreachable"))
        })
        .unwrap_err();
    assert!(!ran);
    assert_eq!(
        err.message,
        "background job limit reached for this owner (limit: 2); use job_kill to stop an unneeded job, wait for it to finish, then retry"
    );
    // Another owner and the unowned bucket are separate.
    let (_h3, r3) = scripted();
    rt.start(spec("bash", Some(&b)), || Ok(r3)).unwrap();
    let (_h4, r4) = scripted();
    rt.start(spec("bash", None), || Ok(r4)).unwrap();
    // A finished job frees its slot.
    h1.finish
        .send(JobOutcome {
            status: JobStatus::Completed,
            detail: None,
            output: None,
        })
        .unwrap();
    settled(&rt, Some(&a), "bash-1").await;
    let (_h5, r5) = scripted();
    assert_eq!(
        rt.start(spec("bash", Some(&a)), || Ok(r5)).unwrap(),
        "bash-5"
    );
}

#[tokio::test]
async fn access_is_fenced_by_owner() {
    let rt = JobsRuntime::new(JobsConfig::default());
    let a = OwnerId::new("a");
    let b = OwnerId::new("b");
    let (_h, run) = scripted();
    let id = rt.start(spec("bash", Some(&a)), || Ok(run)).unwrap();
    let foreign = "job bash-1 belongs to another session";
    assert_eq!(rt.read(Some(&b), &id).unwrap_err().message, foreign);
    assert_eq!(rt.kill(Some(&b), &id, None).unwrap_err().message, foreign);
    assert_eq!(rt.get(None, &id).unwrap_err().message, foreign);
    let wait = rt
        .wait(
            Some(&b),
            &id,
            Duration::from_millis(1),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(wait.unwrap_err().message, foreign);
    assert_eq!(
        rt.read(Some(&a), "bash-9").unwrap_err().message,
        "unknown job bash-9"
    );
    assert!(rt.list(Some(&b)).is_empty());
    assert_eq!(rt.list(Some(&a)).len(), 1);
    // Unowned jobs are open to everyone.
    let (_h2, run2) = scripted();
    let open = rt.start(spec("bash", None), || Ok(run2)).unwrap();
    assert!(rt.read(Some(&b), &open).is_ok());
    assert_eq!(rt.list(Some(&b)).len(), 1);
}

#[tokio::test]
async fn reads_consume_and_final_output_waits_for_settlement() {
    let rt = JobsRuntime::new(JobsConfig::default());
    let a = OwnerId::new("a");
    let (h, run) = scripted();
    let id = rt.start(spec("bash", Some(&a)), || Ok(run)).unwrap();
    h.producer.output.lock().unwrap().push_str("one\n");
    assert_eq!(rt.read(Some(&a), &id).unwrap().text, "one\n");
    assert_eq!(rt.read(Some(&a), &id).unwrap().text, "");

    // A final-output job (no readOutput) yields "" until terminal, then its output.
    struct FinalOnly;
    impl JobProducer for FinalOnly {
        fn cancel(&self, _reason: Option<&str>) -> Result<(), JobError> {
            Ok(())
        }
    }
    let (tx, rx) = oneshot::channel::<()>();
    let run = JobRun {
        producer: Arc::new(FinalOnly),
        done: async move {
            let _ = rx.await;
            Ok(JobOutcome {
                status: JobStatus::Completed,
                detail: None,
                output: Some("answer".into()),
            })
        }
        .boxed(),
    };
    let sub = rt.start(spec("subagent", Some(&a)), || Ok(run)).unwrap();
    assert_eq!(rt.read(Some(&a), &sub).unwrap().text, "");
    tx.send(()).unwrap();
    settled(&rt, Some(&a), &sub).await;
    assert_eq!(rt.read(Some(&a), &sub).unwrap().text, "answer");
    assert_eq!(rt.read(Some(&a), &sub).unwrap().text, "answer");
}

#[tokio::test]
async fn completion_notice_is_sent_once_and_not_after_kill() {
    let rt = JobsRuntime::new(JobsConfig::default());
    let a = OwnerId::new("a");
    let mut notices = rt.subscribe(&a);
    let (h, run) = scripted();
    let id = rt
        .start(
            JobSpec {
                label: "sleep 1; echo hi".into(),
                ..spec("bash", Some(&a))
            },
            || Ok(run),
        )
        .unwrap();
    h.finish
        .send(JobOutcome {
            status: JobStatus::Completed,
            detail: Some("exit code: 0".into()),
            output: None,
        })
        .unwrap();
    let notice = tokio::time::timeout(Duration::from_secs(5), notices.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        notice.text,
        format!(
            "background job {id} (bash: sleep 1; echo hi) finished [status: completed, exit code: 0]. Read its output with job_output."
        )
    );
    let message = notice_message(&notice);
    assert_eq!(message.source.kind(), "plugin");
    assert_eq!(
        message.source.get("plugin").and_then(|v| v.as_str()),
        Some("tool-jobs")
    );
    assert_eq!(
        message.source.get("form").and_then(|v| v.as_str()),
        Some("notice")
    );

    // Killed jobs are reported: no notice.
    let (_h2, run2) = scripted();
    let id2 = rt.start(spec("bash", Some(&a)), || Ok(run2)).unwrap();
    let (outcome, job) = rt.kill(Some(&a), &id2, Some("stop")).unwrap();
    assert_eq!(outcome, KillOutcome::CancellationRequested);
    assert_eq!(job.status, JobStatus::Stopping);
    let done = settled(&rt, Some(&a), &id2).await;
    assert_eq!(done.status_line(), "[status: killed, signal: SIGTERM]");
    let (again, _) = rt.kill(Some(&a), &id2, None).unwrap();
    assert_eq!(again, KillOutcome::AlreadyFinished);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(notices.try_recv().is_err());
}

#[tokio::test]
async fn wait_timeout_leaves_job_running_and_abort_rejects() {
    let rt = JobsRuntime::new(JobsConfig::default());
    let a = OwnerId::new("a");
    let (_h, run) = scripted();
    let id = rt.start(spec("bash", Some(&a)), || Ok(run)).unwrap();
    let live = rt
        .wait(
            Some(&a),
            &id,
            Duration::from_millis(20),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(live.status, JobStatus::Running);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = rt
        .wait(Some(&a), &id, Duration::from_secs(5), &cancel)
        .await
        .unwrap_err();
    assert_eq!(err.message, "wait aborted");
}

#[tokio::test]
async fn dispose_owner_cancels_and_removes_without_notice() {
    let rt = JobsRuntime::new(JobsConfig::default());
    let a = OwnerId::new("a");
    let b = OwnerId::new("b");
    let mut notices = rt.subscribe(&a);
    let (_h1, r1) = scripted();
    let (_h2, r2) = scripted();
    let (_h3, r3) = scripted();
    rt.start(spec("bash", Some(&a)), || Ok(r1)).unwrap();
    rt.start(spec("bash", Some(&a)), || Ok(r2)).unwrap();
    let other = rt.start(spec("bash", Some(&b)), || Ok(r3)).unwrap();
    tokio::time::timeout(Duration::from_secs(5), rt.dispose_owner(&a))
        .await
        .unwrap();
    assert!(rt.list(Some(&a)).is_empty());
    assert_eq!(rt.get(Some(&b), &other).unwrap().status, JobStatus::Running);
    assert!(notices.try_recv().is_err());
}

#[tokio::test]
async fn cancel_failure_propagates_and_keeps_state() {
    let rt = JobsRuntime::new(JobsConfig::default());
    let producer = Arc::new(Scripted {
        output: Mutex::new(String::new()),
        cancel_tx: Mutex::new(None),
        fail_cancel: true,
    });
    let run = JobRun {
        producer,
        done: futures::future::pending().boxed(),
    };
    let id = rt.start(spec("bash", None), || Ok(run)).unwrap();
    assert_eq!(
        rt.kill(None, &id, None).unwrap_err().message,
        "cannot cancel"
    );
    assert_eq!(rt.get(None, &id).unwrap().status, JobStatus::Running);
}

#[test]
fn notice_is_bounded_with_prefix_and_action() {
    let job = PublicJob {
        id: "bash-1".into(),
        kind: "bash".into(),
        label: "x".repeat(500),
        status: JobStatus::Completed,
        detail: Some("exit code: 0".into()),
        started_at: 0,
        finished_at: Some(1),
    };
    let text = notice_text(&job, Some(100));
    assert!(text.len() <= 100);
    assert!(text.starts_with("background job bash-1 (bash: xxx"));
    assert!(text.ends_with("\n[notice truncated]\nDone; job_output."));
}

#[test]
fn wake_budget_allows_three_consecutive_wakes() {
    let mut budget = WakeBudget::default();
    assert_eq!(budget.decide(true), NoticeDelivery::FollowUp);
    assert_eq!(budget.decide(false), NoticeDelivery::Inject);
    assert_eq!(budget.decide(true), NoticeDelivery::FollowUp);
    assert_eq!(budget.decide(true), NoticeDelivery::FollowUp);
    assert_eq!(budget.decide(true), NoticeDelivery::Inject);
    budget.on_user_message();
    assert_eq!(budget.decide(true), NoticeDelivery::FollowUp);
    let mut quiet = WakeBudget::new(CompletionDelivery::Quiet, 3);
    assert_eq!(quiet.decide(true), NoticeDelivery::Inject);
}
