//! The plugin table: every built-in capability, one line each, in mount order. A plugin's
//! services are visible to the plugins below it; `HostPlugin::USES` re-applies dependents.
//! Adding a capability is one crate plus one line here.

use dsh_plugin::PluginSpec;

use crate::permissions::ApprovalPlugin;
use crate::permissions::SandboxPlugin;

/// The built-in plugins, in mount order.
pub fn builtin_plugins() -> Vec<PluginSpec> {
    #[cfg_attr(
        not(feature = "test-fixtures"),
        expect(unused_mut, reason = "only a test build adds lines")
    )]
    let mut table = vec![
        PluginSpec::of::<SandboxPlugin>(),
        PluginSpec::of::<ApprovalPlugin>(),
        PluginSpec::of::<dsh_approval::UserApprovalPlugin>(),
        PluginSpec::of::<dsh_tool_ask_user::UserQuestionsPlugin>(),
        PluginSpec::of::<dsh_attachments::AttachmentsPlugin>(),
        PluginSpec::of::<dsh_spill::SpillPlugin>(),
        PluginSpec::of::<dsh_titles::FallbackTitlePlugin>(),
        PluginSpec::of::<dsh_titles::LlmTitlePlugin>(),
        PluginSpec::of::<dsh_tool_web::WebPlugin>(),
        PluginSpec::of::<dsh_tool_todo::TodoPlugin>(),
        PluginSpec::of::<dsh_tool_skill::SkillPlugin>(),
        PluginSpec::of::<dsh_hooks::HooksPlugin<dsh_hooks::ClaudeCode>>(),
        PluginSpec::of::<dsh_hooks::HooksPlugin<dsh_hooks::Codex>>(),
        PluginSpec::of::<dsh_code::CodePlugin>(),
        PluginSpec::of::<dsh_tool_shell::JobsPlugin>(),
        PluginSpec::of::<dsh_tool_shell::BashPlugin>(),
        PluginSpec::of::<dsh_tool_fs::FsPlugin>(),
        PluginSpec::of::<dsh_mcp::McpPlugin>(),
        PluginSpec::of::<dsh_terminal::TerminalPlugin>(),
        PluginSpec::of::<dsh_terminal::PersistentBashPlugin>(),
        PluginSpec::of::<dsh_web_search::WebSearchPlugin>(),
        PluginSpec::of::<dsh_lsp::LspPlugin>(),
        PluginSpec::of::<dsh_session_query::SessionQueryPlugin>(),
        PluginSpec::of::<dsh_schedule::SchedulePlugin>(),
        PluginSpec::of::<dsh_token_meter::TokenMeterPlugin>(),
        PluginSpec::of::<dsh_compaction::ToolResultPrunerPlugin>(),
        PluginSpec::of::<dsh_compaction::CompactionPlugin>(),
        PluginSpec::of::<dsh_instructions::WorkspaceInstructionsPlugin>(),
        PluginSpec::of::<dsh_references::FileReferencesPlugin>(),
        PluginSpec::of::<dsh_references::SessionReferencesPlugin>(),
        PluginSpec::of::<dsh_ambient::TimeContextPlugin>(),
        PluginSpec::of::<dsh_ambient::TmuxContextPlugin>(),
        PluginSpec::of::<dsh_guard::TimeoutPlugin>(),
        PluginSpec::of::<dsh_guard::RepeatPlugin>(),
        PluginSpec::of::<dsh_tool_ask_user::AskUserPlugin>(),
        PluginSpec::of::<dsh_plan_mode::PlanModePlugin>(),
        PluginSpec::of::<dsh_goal::GoalPlugin>(),
        PluginSpec::of::<dsh_checkpoints::CheckpointsPlugin>(),
        PluginSpec::of::<dsh_subagent::SubagentPlugin>(),
        PluginSpec::of::<dsh_workflow::WorkflowPlugin>(),
        PluginSpec::of::<dsh_subagent_remote::RemoteSubagentsPlugin>(),
        // Last: a preset's tool filter names the tools every other per-session piece attached.
        PluginSpec::of::<dsh_presets::PresetsPlugin>(),
    ];
    // Test builds only (`dsh-host/test-fixtures`): the fixture plugins, off by default.
    #[cfg(feature = "test-fixtures")]
    dsh_test_fixtures::insert_into(&mut table);
    table
}
