//! Item 77: starts in submission order, safe calls overlap up to the cap, exclusive calls run
//! alone and hold their barrier through post-execute, commits in submission order.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_code::CodeModeConfig;
use dsh_code::QuickJsConfig;
use dsh_kernel::BoxFuture;
use dsh_tools::Execution;
use dsh_tools::PostInput;
use dsh_tools::PresentationMode;
use pretty_assertions::assert_eq;

use crate::support::*;

#[tokio::test]
async fn safe_calls_overlap_and_start_in_submission_order() {
    let env = env(PresentationMode::Code);
    let tracker = Arc::new(Tracker::default());
    env.register(sleeper("read", true, 150, tracker.clone()));
    let result = env
        .run("return await Promise.all([1, 2, 3].map((i) => tools.read({i})))")
        .await;
    assert_eq!(
        text(&result),
        "[\n  \"read:1\",\n  \"read:2\",\n  \"read:3\"\n]"
    );
    assert_eq!(tracker.peak.load(Ordering::SeqCst), 3);
    let ids = env.log.ids();
    let starts: Vec<&str> = ids
        .iter()
        .filter(|(t, _)| t == "tool/code-dispatch-start")
        .map(|(_, id)| id.as_str())
        .collect();
    assert_eq!(
        starts,
        vec!["call-1:code:1", "call-1:code:2", "call-1:code:3"]
    );
    let settles: Vec<&str> = ids
        .iter()
        .filter(|(t, _)| t == "tool/code-dispatch")
        .map(|(_, id)| id.as_str())
        .collect();
    assert_eq!(settles, starts);
}

#[tokio::test]
async fn the_parallel_cap_bounds_overlap() {
    let env = env_with(
        PresentationMode::Code,
        CodeModeConfig {
            max_parallel_sub_calls: 2,
        },
        QuickJsConfig::default(),
    );
    let tracker = Arc::new(Tracker::default());
    env.register(sleeper("read", true, 80, tracker.clone()));
    env.run("await Promise.all([1, 2, 3, 4, 5].map((i) => tools.read({i})))")
        .await;
    assert_eq!(tracker.peak.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_exclusive_call_waits_for_the_pool_runs_alone_and_blocks_later_safe_calls() {
    let env = env(PresentationMode::Code);
    let tracker = Arc::new(Tracker::default());
    env.register(sleeper("read", true, 80, tracker.clone()));
    env.register(sleeper("write", false, 80, tracker.clone()));
    env.run("await Promise.all([tools.read({i: 1}), tools.read({i: 2}), tools.write({i: 3}), tools.read({i: 4}), tools.write({i: 5}), tools.write({i: 6})])")
        .await;
    let order = tracker.order.lock().unwrap().clone();
    let position = |s: &str| order.iter().position(|e| e == s).unwrap();
    assert!(position("end read:1") < position("start write:3"));
    assert!(position("end read:2") < position("start write:3"));
    assert!(position("end write:3") < position("start read:4"));
    assert!(position("end read:4") < position("start write:5"));
    assert!(position("end write:5") < position("start write:6"));
    assert_eq!(tracker.peak.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn post_execute_runs_in_submission_order_and_an_exclusive_barrier_spans_it() {
    let env = env(PresentationMode::Code);
    let tracker = Arc::new(Tracker::default());
    env.register(sleeper("read", true, 10, tracker.clone()));
    env.register(sleeper("write", false, 10, tracker.clone()));
    let slow_first = Arc::new(Tracker::default());
    env.register(sleeper("slowread", true, 200, slow_first));
    let events: Arc<Mutex<Vec<String>>> = Arc::default();
    let post_events = events.clone();
    env.registry.post_execute().register(
        &env.root,
        move |input: PostInput, next| -> BoxFuture<'static, _> {
            let events = post_events.clone();
            Box::pin(async move {
                let id = input.exec.call_id().to_owned();
                events.lock().unwrap().push(format!("post-start {id}"));
                if input.exec.name() == "write" {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                events.lock().unwrap().push(format!("post-end {id}"));
                next.run(input).await
            })
        },
    );
    let pre_events = events.clone();
    env.registry
        .pre_execute()
        .register(&env.root, move |exec: Arc<Execution>, next| {
            pre_events
                .lock()
                .unwrap()
                .push(format!("pre {}", exec.call_id()));
            next.run(exec)
        });
    env.run("await Promise.all([tools.slowread({i: 1}), tools.read({i: 2}), tools.write({i: 3}), tools.read({i: 4})])")
        .await;
    let events = events.lock().unwrap().clone();
    let position = |s: &str| events.iter().position(|e| e == s).unwrap_or(usize::MAX);
    // Commits in submission order although call 2's body finished first.
    assert!(position("post-end call-1:code:1") < position("post-start call-1:code:2"));
    // The exclusive write keeps its barrier through its post-execute.
    assert!(
        position("post-end call-1:code:3") < position("pre call-1:code:4"),
        "{events:?}"
    );
}
