use std::sync::{Arc, Mutex};

use futures::executor::block_on;

use super::*;
use crate::ScopeKind;

type Log = Arc<Mutex<Vec<String>>>;

/// A waterfall listener that records `tag`, appends it to the input and delegates.
fn tagging(
    log: &Log,
    tag: &'static str,
) -> impl Fn(String, Next<String, String>) -> BoxFuture<'static, String> + Send + Sync + 'static {
    let log = log.clone();
    move |input: String, next: Next<String, String>| {
        log.lock().unwrap().push(tag.to_owned());
        Box::pin(async move {
            let out = next.run(format!("{input}>{tag}")).await;
            format!("{out}<{tag}")
        })
    }
}

fn base() -> impl FnOnce(String) -> BoxFuture<'static, String> + Send + 'static {
    |input| Box::pin(async move { format!("[{input}]") })
}

fn run(wf: &Waterfall<String, String>, subject: Option<&Scope>) -> String {
    block_on(wf.dispatch(subject, "in".to_owned(), base()))
}

#[test]
fn waterfall_order_prepend_and_disposal() {
    let log: Log = Arc::default();
    let root = Scope::root();
    let wf = Waterfall::<String, String>::new("test/wf");
    assert_eq!(run(&wf, None), "[in]");
    wf.register(&root, tagging(&log, "a"));
    let b = wf.register(&root, tagging(&log, "b"));
    wf.prepend(&root, tagging(&log, "p"));
    assert_eq!(wf.len(), 3);
    assert_eq!(run(&wf, None), "[in>p>a>b]<b<a<p");
    assert_eq!(*log.lock().unwrap(), ["p", "a", "b"]);
    b.dispose();
    assert_eq!(run(&wf, None), "[in>p>a]<a<p");
    root.dispose();
    assert!(wf.is_empty());
    assert_eq!(run(&wf, None), "[in]");
}

#[test]
fn waterfall_short_circuit_skips_inner_listeners_and_base() {
    let log: Log = Arc::default();
    let root = Scope::root();
    let wf = Waterfall::<String, String>::new("test/wf");
    wf.register(&root, tagging(&log, "outer"));
    wf.register(&root, |input: String, _next: Next<String, String>| {
        Box::pin(async move { format!("blocked({input})") }) as BoxFuture<'static, String>
    });
    wf.register(&root, tagging(&log, "inner"));
    assert_eq!(run(&wf, None), "blocked(in>outer)<outer");
    assert_eq!(*log.lock().unwrap(), ["outer"]);
}

#[test]
fn waterfall_filters_agent_listeners_by_subject() {
    let log: Log = Arc::default();
    let root = Scope::root();
    let agent1 = root.child(ScopeKind::Agent, "a1").unwrap();
    let agent2 = root.child(ScopeKind::Agent, "a2").unwrap();
    let sub = agent1.child(ScopeKind::Plugin, "sub").unwrap();
    let wf = Waterfall::<String, String>::new("test/wf");
    wf.register(&root, tagging(&log, "g"));
    wf.register(&sub, tagging(&log, "a1"));
    assert_eq!(run(&wf, None), "[in>g]<g");
    assert_eq!(run(&wf, Some(&agent2)), "[in>g]<g");
    assert_eq!(run(&wf, Some(&agent1)), "[in>g>a1]<a1<g");
    assert_eq!(run(&wf, Some(&sub)), "[in>g>a1]<a1<g");
}

#[test]
fn waterfall_snapshot_is_taken_at_dispatch() {
    let root = Scope::root();
    let wf = Arc::new(Waterfall::<String, String>::new("test/wf"));
    let log: Log = Arc::default();
    let (wf2, root2, log2) = (wf.clone(), root.clone(), log.clone());
    // A listener that registers another one mid-dispatch (no deadlock; not seen this time).
    wf.register(&root, move |input: String, next: Next<String, String>| {
        wf2.register(&root2, tagging(&log2, "late"));
        next.run(input)
    });
    assert_eq!(run(&wf, None), "[in]");
    assert_eq!(wf.len(), 2);
}

#[test]
fn registering_on_a_disposed_scope_is_removed_at_once() {
    let root = Scope::root();
    root.dispose();
    let wf = Waterfall::<String, String>::new("test/wf");
    let d = wf.register(&root, |i: String, next: Next<String, String>| next.run(i));
    assert!(d.is_disposed());
    assert!(wf.is_empty());
}

#[test]
fn serial_runs_in_order_and_stops_at_the_first_error() {
    let root = Scope::root();
    let hook = Serial::<u32>::new("test/serial");
    let log: Log = Arc::default();
    for (tag, fail) in [("one", false), ("two", true), ("three", false)] {
        let log = log.clone();
        hook.register(&root, move |event: Arc<u32>| {
            let log = log.clone();
            Box::pin(async move {
                log.lock().unwrap().push(format!("{tag}:{event}"));
                if fail {
                    Err(HookError::msg(format!("{tag} refused")))
                } else {
                    Ok(())
                }
            })
        });
    }
    let err = block_on(hook.dispatch(None, Arc::new(7))).unwrap_err();
    assert_eq!(err.to_string(), "two refused");
    assert_eq!(*log.lock().unwrap(), ["one:7", "two:7"]);
    root.dispose();
    assert!(hook.is_empty());
    block_on(hook.dispatch(None, Arc::new(8))).unwrap();
}

#[test]
fn observe_contains_errors_and_panics() {
    let root = Scope::root();
    let agent = root.child(ScopeKind::Agent, "agent").unwrap();
    let hook = Observe::<String>::new("test/observe");
    let log: Log = Arc::default();
    let l = log.clone();
    hook.register(&root, move |e: &String| {
        l.lock().unwrap().push(format!("first:{e}"));
        Ok(())
    });
    hook.register(&root, |_e: &String| Err(HookError::msg("nope")));
    hook.register(&root, |_e: &String| -> Result<(), HookError> {
        panic!("observer boom")
    });
    let l = log.clone();
    hook.register(&agent, move |e: &String| {
        l.lock().unwrap().push(format!("agent:{e}"));
        Ok(())
    });
    let l = log.clone();
    let last = hook.register(&root, move |e: &String| {
        l.lock().unwrap().push(format!("last:{e}"));
        Ok(())
    });
    hook.emit(None, &"x".to_owned());
    hook.emit(Some(&agent), &"y".to_owned());
    assert_eq!(
        *log.lock().unwrap(),
        ["first:x", "last:x", "first:y", "agent:y", "last:y"]
    );
    last.dispose();
    agent.dispose();
    assert_eq!(hook.len(), 3);
}
