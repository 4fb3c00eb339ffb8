use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::*;

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::default()
}

fn push(log: &Log, s: &str) -> impl FnOnce() + Send + 'static {
    let log = log.clone();
    let s = s.to_owned();
    move || log.lock().unwrap().push(s)
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

#[test]
fn dispose_runs_children_first_newest_first_exactly_once() {
    let log = log();
    let root = Scope::root();
    root.defer(push(&log, "root-1"));
    let a = root.child(ScopeKind::Plugin, "a").unwrap();
    a.defer(push(&log, "a-1"));
    a.defer(push(&log, "a-2"));
    let b = root.child(ScopeKind::Plugin, "b").unwrap();
    let b_agent = b.child(ScopeKind::Agent, "b-agent").unwrap();
    b.defer(push(&log, "b-1"));
    b_agent.defer(push(&log, "b-agent-1"));
    root.defer(push(&log, "root-2"));

    root.dispose();
    root.dispose();
    b.dispose();
    assert_eq!(
        entries(&log),
        ["b-agent-1", "b-1", "a-2", "a-1", "root-2", "root-1"]
    );
    assert!(root.is_disposed() && a.is_disposed() && b_agent.is_disposed());
    assert!(matches!(
        root.child(ScopeKind::Plugin, "late"),
        Err(KernelError::ScopeDisposed { .. })
    ));
}

#[test]
fn a_panicking_disposer_does_not_stop_the_rest() {
    let log = log();
    let root = Scope::root();
    let child = root.child(ScopeKind::Plugin, "p").unwrap();
    child.defer(push(&log, "child"));
    root.defer(push(&log, "first"));
    root.defer(|| panic!("boom"));
    child.defer(|| panic!("child boom"));
    root.defer(push(&log, "last"));
    root.dispose();
    assert_eq!(entries(&log), ["child", "last", "first"]);
}

#[test]
fn disposing_a_child_detaches_it_and_leaves_the_parent_alive() {
    let log = log();
    let root = Scope::root();
    let child = root.child(ScopeKind::Plugin, "p").unwrap();
    child.defer(push(&log, "child"));
    root.defer(push(&log, "root"));
    child.dispose();
    assert_eq!(entries(&log), ["child"]);
    assert!(!root.is_disposed());
    root.dispose();
    assert_eq!(entries(&log), ["child", "root"]);
}

#[test]
fn early_disposer_runs_once_and_leaves_the_scope() {
    let count = Arc::new(AtomicUsize::new(0));
    let root = Scope::root();
    let c = count.clone();
    let d = root.defer(move || {
        c.fetch_add(1, Ordering::SeqCst);
    });
    let clone = d.clone();
    assert!(!d.is_disposed());
    d.dispose();
    clone.dispose();
    assert!(d.is_disposed() && clone.is_disposed());
    root.dispose();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert!(root.inner.state.lock().unwrap().disposers.is_empty());
}

#[test]
fn dropping_a_disposer_does_not_undo() {
    let log = log();
    let root = Scope::root();
    drop(root.defer(push(&log, "x")));
    assert!(entries(&log).is_empty());
    root.dispose();
    assert_eq!(entries(&log), ["x"]);
}

#[test]
fn defer_on_a_disposed_scope_runs_immediately() {
    let log = log();
    let root = Scope::root();
    root.dispose();
    let d = root.defer(push(&log, "now"));
    assert_eq!(entries(&log), ["now"]);
    assert!(d.is_disposed());
    assert!(Disposer::noop().is_disposed());
}

#[test]
fn a_disposer_that_defers_onto_its_disposing_scope_is_not_lost() {
    let log = log();
    let root = Scope::root();
    let (r, l) = (root.clone(), log.clone());
    root.defer(move || {
        r.defer(push(&l, "nested"));
    });
    root.dispose();
    assert_eq!(entries(&log), ["nested"]);
}

#[test]
fn ancestry_and_agent_chain() {
    let root = Scope::root();
    let plugin = root.child(ScopeKind::Plugin, "p").unwrap();
    let outer = plugin.child(ScopeKind::Agent, "outer").unwrap();
    let inner = outer.child(ScopeKind::Agent, "inner").unwrap();
    let leaf = inner.child(ScopeKind::Plugin, "leaf").unwrap();
    let names = |v: Vec<Scope>| v.iter().map(|s| s.name().to_owned()).collect::<Vec<_>>();
    assert_eq!(
        names(leaf.ancestors()),
        ["leaf", "inner", "outer", "p", "root"]
    );
    assert_eq!(names(leaf.agent_chain()), ["outer", "inner"]);
    assert_eq!(leaf.nearest_agent(), Some(inner.clone()));
    assert_eq!(plugin.nearest_agent(), None);
    assert!(leaf.is_within(&outer) && leaf.is_within(&leaf) && !outer.is_within(&leaf));
    assert_eq!(leaf.parent(), Some(inner));
    assert_eq!(root.parent(), None);
    assert_eq!(root.kind(), ScopeKind::Root);
    assert_ne!(root.id(), plugin.id());
}

#[test]
fn ten_thousand_deep_dispose_does_not_overflow() {
    // A small stack makes any per-level recursion (in dispose or in drop) fail loudly.
    let worker = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let log = log();
            let root = Scope::root();
            let mut leaf = root.clone();
            for i in 0..10_000 {
                leaf = leaf.child(ScopeKind::Plugin, format!("n{i}")).unwrap();
                leaf.defer(push(&log, &format!("n{i}")));
            }
            root.dispose();
            let got = entries(&log);
            assert_eq!(got.len(), 10_000);
            assert_eq!(got.first().map(String::as_str), Some("n9999"));
            assert_eq!(got.last().map(String::as_str), Some("n0"));
            assert!(leaf.is_disposed());
            // The leaf is now the only owner of the 10,000-long parent chain.
            drop(root);
            drop(leaf);
        })
        .unwrap();
    worker.join().unwrap();
}

#[test]
fn services_provide_lookup_and_shadowing() {
    trait Greeter: Send + Sync {
        fn greet(&self) -> &'static str;
    }
    struct A;
    struct B;
    impl Greeter for A {
        fn greet(&self) -> &'static str {
            "a"
        }
    }
    impl Greeter for B {
        fn greet(&self) -> &'static str {
            "b"
        }
    }
    let root = Scope::root();
    let p1 = root.child(ScopeKind::Plugin, "p1").unwrap();
    let p2 = root.child(ScopeKind::Plugin, "p2").unwrap();
    assert!(root.service::<dyn Greeter>().is_none());
    p1.provide::<dyn Greeter>(Arc::new(A)).unwrap();
    // Global provider: visible from a sibling branch too.
    assert_eq!(p2.service::<dyn Greeter>().unwrap().greet(), "a");
    let shadow = p2.provide::<dyn Greeter>(Arc::new(B)).unwrap();
    assert_eq!(p1.service::<dyn Greeter>().unwrap().greet(), "b");
    shadow.dispose();
    assert_eq!(p1.service::<dyn Greeter>().unwrap().greet(), "a");
    p2.provide::<dyn Greeter>(Arc::new(B)).unwrap();
    p2.dispose();
    assert_eq!(root.service::<dyn Greeter>().unwrap().greet(), "a");
    // Types are distinct keys.
    p1.provide(Arc::new(42_u32)).unwrap();
    assert_eq!(*root.service::<u32>().unwrap(), 42);
    assert!(root.service::<u64>().is_none());
    p1.dispose();
    assert!(root.service::<dyn Greeter>().is_none());
    assert!(root.service::<u32>().is_none());
    assert!(matches!(
        p1.provide(Arc::new(1_u8)),
        Err(KernelError::ScopeDisposed { .. })
    ));
    assert!(root.service::<u8>().is_none());
}

#[test]
fn agent_scoped_services_are_visible_only_inside_their_agent() {
    let root = Scope::root();
    let agent1 = root.child(ScopeKind::Agent, "agent1").unwrap();
    let agent2 = root.child(ScopeKind::Agent, "agent2").unwrap();
    let inside = agent1.child(ScopeKind::Plugin, "inside").unwrap();
    let below = inside.child(ScopeKind::Plugin, "below").unwrap();
    root.provide(Arc::new(String::from("global"))).unwrap();
    inside.provide(Arc::new(String::from("agent1"))).unwrap();
    assert_eq!(*agent1.service::<String>().unwrap(), "agent1");
    assert_eq!(*below.service::<String>().unwrap(), "agent1");
    assert_eq!(*agent2.service::<String>().unwrap(), "global");
    assert_eq!(*root.service::<String>().unwrap(), "global");
    agent1.dispose();
    assert_eq!(*below.service::<String>().unwrap(), "global");
}

#[test]
fn concurrent_registration_and_dispose_run_every_undo_exactly_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let root = Scope::root();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (root, runs) = (root.clone(), runs.clone());
            std::thread::spawn(move || {
                for i in 0..500 {
                    let target = root
                        .child(ScopeKind::Plugin, format!("t{t}-{i}"))
                        .unwrap_or_else(|_| root.clone());
                    let runs = runs.clone();
                    let d = target.defer(move || {
                        runs.fetch_add(1, Ordering::SeqCst);
                    });
                    if i % 3 == 0 {
                        d.dispose();
                    }
                }
            })
        })
        .collect();
    root.dispose();
    for t in threads {
        t.join().unwrap();
    }
    root.dispose();
    assert_eq!(runs.load(Ordering::SeqCst), 4 * 500);
}

#[test]
fn early_dispose_contains_a_panic() {
    let root = Scope::root();
    let d = root.defer(|| panic!("early boom"));
    d.dispose();
    assert!(d.is_disposed());
    root.dispose();
}
