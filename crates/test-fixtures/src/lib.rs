//! `dsh-test-fixtures`: the test-only plugins, and the one way a test turns them on.
//!
//! Owns: the behaviour the recorded conformance compositions added on top of the product
//! (`fixture_plugins` in a scenario): [`WorkspaceContextCompactionFixture`]
//! (`[plugins.workspace-context-compaction-fixture]`) and [`SubagentReportFence`]
//! (`[plugins.subagent-report-fence]`), both off by default, turned on by configuration like
//! any plugin, and [`insert_into`], which adds them to the host's plugin table.
//!
//! How they reach a binary: `dsh-host`'s `test-fixtures` feature (an optional dependency on
//! this crate). Only test code enables it: the `dsh` package's dev-dependency on `dsh-host`,
//! so `cargo test` builds the `dsh` binary its end-to-end tests and the conformance runner
//! drive with the fixtures, and `cargo build -p dsh` (or `--release`) builds it without them:
//! the shipped binary neither lists nor contains them (`.ci/run` checks both).
//! Must not be a normal dependency of anything but `dsh-host` (behind that feature); no
//! production crate reads a test switch.

mod report_fence;
mod workspace_context;

use dsh_plugin::PluginSpec;

pub use report_fence::FenceSettings;
pub use report_fence::SubagentReportFence;
pub use report_fence::install_report_fence;
pub use workspace_context::FIXTURE_CHECKPOINT_TEXT;
pub use workspace_context::FIXTURE_COMPACTION_ID;
pub use workspace_context::FixtureSettings;
pub use workspace_context::WorkspaceContextCompactionFixture;
pub use workspace_context::install_baseline_compaction_fixture;

/// Adds the fixture plugins to `table`, each right after the plugin whose behaviour it bends
/// (so its hooks sit where they sat when the scenarios were recorded), or at the end.
pub fn insert_into(table: &mut Vec<PluginSpec>) {
    insert_after(
        table,
        "workspace-instructions",
        PluginSpec::of::<WorkspaceContextCompactionFixture>(),
    );
    insert_after(table, "subagents", PluginSpec::of::<SubagentReportFence>());
}

fn insert_after(table: &mut Vec<PluginSpec>, anchor: &str, spec: PluginSpec) {
    let at = table
        .iter()
        .position(|line| line.name == anchor)
        .map_or(table.len(), |i| i + 1);
    table.insert(at, spec);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fixture_follows_the_plugin_it_bends_and_is_off_by_default() {
        let mut table = vec![
            PluginSpec::of::<dsh_instructions::WorkspaceInstructionsPlugin>(),
            PluginSpec::of::<dsh_subagent::SubagentPlugin>(),
        ];
        insert_into(&mut table);
        let names: Vec<&str> = table.iter().map(|line| line.name).collect();
        assert_eq!(
            names,
            [
                "workspace-instructions",
                "workspace-context-compaction-fixture",
                "subagents",
                "subagent-report-fence",
            ]
        );
        assert!(
            table[1..]
                .iter()
                .step_by(2)
                .all(|line| !line.enabled_by_default)
        );
    }
}
