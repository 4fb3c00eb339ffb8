//! `[plugins.workspace-context-compaction-fixture]`, for the recorded `agent-instructions`
//! conformance scenario (`fixture_plugins: workspace-context-compaction`): after the first
//! successful `read` of a given path, replace the visible instruction baseline by a stand-in
//! compaction checkpoint, as the recorded composition did.

use dsh_agent::AgentHandle;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_session::SurfaceIntent;
use dsh_session::data::UserMessage;
use dsh_session::kind;
use dsh_tools::PostInput;
use dsh_tools::ToolRegistry;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

/// The checkpoint text the recorded fixture wrote.
pub const FIXTURE_CHECKPOINT_TEXT: &str = "Earlier context was compacted for this snapshot.";
/// The compaction id the recorded fixture used.
pub const FIXTURE_COMPACTION_ID: &str = "workspace-context-fixture";

fn fixture_path() -> String {
    "nested/task.txt".to_owned()
}

/// `[plugins.workspace-context-compaction-fixture]`: the path whose first read triggers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureSettings {
    #[serde(default = "fixture_path")]
    pub read_path: String,
}

impl Default for FixtureSettings {
    fn default() -> Self {
        Self {
            read_path: fixture_path(),
        }
    }
}

/// The `agent-instructions` scenario's fixture (see [`FIXTURE_CHECKPOINT_TEXT`]).
#[derive(Debug, Default)]
pub struct WorkspaceContextCompactionFixture;

impl Plugin for WorkspaceContextCompactionFixture {
    type Config = FixtureSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, settings: FixtureSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let _ = install_baseline_compaction_fixture(ctx, &host.tools, settings.read_path);
        Ok(())
    }
}

impl HostPlugin for WorkspaceContextCompactionFixture {
    const NAME: &'static str = "workspace-context-compaction-fixture";
    const ENABLED_BY_DEFAULT: bool = false;
}

/// Registers the post-execute listener on `tools`, owned by `owner`.
pub fn install_baseline_compaction_fixture(
    owner: &Scope,
    tools: &ToolRegistry,
    read_path: String,
) -> Disposer {
    tools
        .post_execute()
        .register(owner, move |input: PostInput, next| {
            let read_path = read_path.clone();
            Box::pin(async move {
                let matches = !input.result.is_error
                    && input.exec.name() == "read"
                    && input
                        .exec
                        .arguments()
                        .and_then(|a| a.get("file_path"))
                        .and_then(Value::as_str)
                        == Some(read_path.as_str());
                let agent = input
                    .exec
                    .agent()
                    .and_then(|a| AgentHandle::from_scope(a.scope()));
                let downstream = next.run(input).await;
                if matches && let Some(agent) = agent {
                    replace_baseline(&agent);
                }
                downstream
            })
        })
}

fn replace_baseline(agent: &AgentHandle) {
    let log = agent.log();
    let baseline = log
        .surface_seqs()
        .into_iter()
        .filter_map(|seq| log.get(seq).ok().flatten())
        .find(|e| {
            e.kind == kind::USER_MESSAGE
                && e.data.pointer("/source/kind").and_then(Value::as_str)
                    == Some(dsh_instructions::SOURCE_KIND)
                && e.data.pointer("/source/baseline") == Some(&Value::Bool(true))
        });
    let Some(baseline) = baseline else {
        tracing::warn!(agent = %agent.id(), "fixture: workspace baseline missing before snapshot compaction");
        return;
    };
    let checkpoint = Message::user(
        vec![ContentBlock::text(FIXTURE_CHECKPOINT_TEXT)],
        MessageSource::plugin("compact").with("compactionId", FIXTURE_COMPACTION_ID),
    );
    if let Err(error) = log.append_data(
        &UserMessage(checkpoint),
        Some(SurfaceIntent::replace(
            baseline.seq,
            baseline.seq,
            vec![baseline.seq],
        )),
    ) {
        tracing::warn!(agent = %agent.id(), %error, "fixture: cannot replace the baseline");
    }
}
