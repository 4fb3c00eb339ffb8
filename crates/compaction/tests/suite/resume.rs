//! Resume and fork after a checkpoint (§8.11): checklist E66.

use dsh_agent::scripted::text_response;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use super::support::Options;
use super::support::Rig;
use super::support::create;
use super::support::emit_call;
use super::support::idle;

#[tokio::test]
async fn a_compacted_session_resumes_and_forks_with_the_same_history() {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(home.path());
    let log = store
        .create(CreateOptions {
            cwd: Some(home.path().to_path_buf()),
            ..CreateOptions::default()
        })
        .unwrap();
    let id = log.id().to_owned();
    let rig = Rig::with(Options {
        log: Some(log),
        ..Options::default()
    });
    rig.adapter.push_chunks(emit_call("c1", 100));
    rig.adapter.push_chunks(text_response("first answer"));
    rig.prompt(&"a long first prompt ".repeat(20)).await;
    rig.adapter
        .push_chunks(text_response("summary of the first turn"));
    let reply = dsh_compaction::run_compact(
        &rig.compaction,
        &rig.agent,
        "",
        None,
        &CancellationToken::new(),
    )
    .await;
    assert!(reply.success, "{reply:?}");
    let derived = rig.log().derive_messages();
    let surface = rig.log().surface_seqs();
    rig.agent.dispose().await;
    drop(rig);

    // Resume in a new "process": the surface is rebuilt from the log, the meter refolds.
    let resumed = store.resume(&id).unwrap();
    assert_eq!(resumed.derive_messages(), derived);
    assert_eq!(resumed.surface_seqs(), surface);
    let rig = Rig::with(Options {
        log: Some(resumed),
        ..Options::default()
    });
    let meter = rig.compaction.meter().measure(rig.log(), None).unwrap();
    assert_eq!(
        meter.nodes.iter().map(|n| n.seq).collect::<Vec<_>>(),
        surface
    );
    let resumed_agent = create(&rig.root, &rig.tools, &rig.adapter, rig.log().clone(), true);
    rig.adapter.push_chunks(text_response("continued"));
    resumed_agent
        .followup(dsh_protocol::Message::user_text("continue"))
        .unwrap();
    idle(&resumed_agent).await;
    let request = rig.adapter.requests().last().unwrap().clone();
    assert!(
        dsh_protocol::text_of(&request.messages[0].content).starts_with(dsh_compaction::PREAMBLE)
    );
    // The bracket of the previous process is closed, so a new compaction is not busy.
    rig.adapter.push_chunks(text_response("second summary"));
    let again = dsh_compaction::run_compact(
        &rig.compaction,
        &resumed_agent,
        "",
        None,
        &CancellationToken::new(),
    )
    .await;
    assert!(again.success, "{again:?}");
    resumed_agent.dispose().await;

    // Fork: the child's seed carries the checkpoints.
    let child = store.fork(&id, None, None).unwrap();
    let parent = store.load(&id).unwrap();
    let parent_log = dsh_session::SessionLog::from_seed(
        parent.header.clone(),
        parent.events.iter().map(|e| e.as_ref().clone()).collect(),
    )
    .unwrap();
    assert_eq!(child.derive_messages(), parent_log.derive_messages());
    assert_eq!(
        child
            .events()
            .unwrap()
            .iter()
            .filter(|e| e.kind == "compaction/summary")
            .count(),
        2
    );
}
