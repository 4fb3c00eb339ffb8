//! The composition of the capability plugins of issue #17 (terminals, persistent bash, …):
//! each is a `dsh_kernel::Plugin` mounted from its `[plugins.<name>]` table. Kept apart from
//! `compose.rs` so it moves into the host's plugin table as one line per plugin.

use std::sync::Arc;

use anyhow::Context;
use dsh_agent::prompt::Section;
use dsh_kernel::Mounted;
use dsh_kernel::Scope;

use crate::config::Config;
use crate::shell::ShellPlugin;

/// The mounted capability plugins and the prompt sections they contribute.
#[derive(Default)]
pub struct ReachPlugins {
    /// Held so the plugins stay mounted; the root's disposal unmounts them.
    #[allow(dead_code)]
    mounted: Vec<Mounted>,
    sections: Vec<Section>,
}

fn mount(
    root: &Scope,
    config: &Config,
    plugin: Arc<dyn dsh_kernel::AnyPlugin>,
) -> anyhow::Result<Mounted> {
    let name = plugin.plugin_name().to_owned();
    dsh_kernel::mount(root, plugin, config.plugin_settings(&name))
        .with_context(|| format!("cannot mount [plugins.{name}]"))
}

impl ReachPlugins {
    pub fn mount(config: &Config, root: &Scope, shell: &ShellPlugin) -> anyhow::Result<Self> {
        let mut plugins = Self::default();
        if config.plugin_enabled("session-query", false)? {
            let plugin = dsh_session_query::SessionQueryPlugin {
                store: Some(dsh_session::SessionStore::new(config.home.clone())),
            };
            plugins.mounted.push(mount(root, config, Arc::new(plugin))?);
            let tools = config
                .get("plugins.session-query.tools")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(true);
            if tools {
                let (id, order) = dsh_session_query::SECTION;
                plugins.sections.push(Section::new(
                    id,
                    f64::from(order),
                    dsh_session_query::SECTION_TEXT,
                ));
            }
        }
        if config.plugin_enabled("web-search", true)? {
            let mounted = mount(root, config, Arc::new(dsh_web_search::WebSearchPlugin))?;
            if mounted
                .scope()
                .service::<dsh_web_search::WebSearch>()
                .is_some_and(|web| web.any_available())
            {
                let settings: dsh_web_search::WebSearchPluginConfig =
                    serde_json::from_value(config.plugin_settings("web-search"))
                        .context("invalid [plugins.web-search] settings")?;
                let (id, order) = dsh_web_search::SECTION;
                plugins.sections.push(Section::new(
                    id,
                    f64::from(order),
                    dsh_web_search::section_text(settings.search_max_queries, settings.fetch),
                ));
            }
            plugins.mounted.push(mounted);
        }
        if config.plugin_enabled("schedule", false)? {
            plugins
                .mounted
                .push(mount(root, config, Arc::new(dsh_schedule::SchedulePlugin))?);
        }
        if config.plugin_enabled("lsp", false)? {
            // The workspace is the session's cwd (its header), never the process cwd.
            let workspace: dsh_lsp::WorkspaceResolver = Arc::new(|run: &dsh_tools::ToolRun| {
                run.agent()?
                    .scope()
                    .service::<crate::compose::SessionState>()
                    .map(|state| state.cwd.clone())
            });
            let plugin = dsh_lsp::LspPlugin { workspace };
            plugins.mounted.push(mount(root, config, Arc::new(plugin))?);
            let (id, order) = dsh_lsp::SECTION;
            plugins
                .sections
                .push(Section::new(id, f64::from(order), dsh_lsp::SECTION_TEXT));
        }
        if let Some(resolve) = shell.resolver() {
            if config.plugin_enabled("terminal", false)? {
                let plugin = dsh_terminal::TerminalPlugin {
                    resolve: resolve.clone(),
                    jobs: shell.jobs(),
                };
                plugins.mounted.push(mount(root, config, Arc::new(plugin))?);
                let (id, order) = dsh_terminal::SECTION;
                plugins.sections.push(Section::new(
                    id,
                    f64::from(order),
                    dsh_terminal::SECTION_TEXT,
                ));
            }
            if config.plugin_enabled("bash-persistent", false)? {
                let plugin = dsh_terminal::PersistentBashPlugin { resolve };
                plugins.mounted.push(mount(root, config, Arc::new(plugin))?);
            }
        }
        Ok(plugins)
    }

    pub fn prompt_sections(&self) -> Vec<Section> {
        self.sections.clone()
    }
}

/// A new session joins the session-query corpus while it is live, and gets the event sink
/// providers log their side requests through.
pub fn attach_session(
    root: &Scope,
    handle: &dsh_agent::AgentHandle,
    log: &dsh_session::SessionLog,
) -> anyhow::Result<()> {
    let agent = handle.scope();
    if let Some(query) = root.service::<dsh_session_query::SessionQuery>() {
        query.register_live(log);
    }
    if let (Some(schedules), Some(registry)) = (
        root.service::<dsh_schedule::Schedules>(),
        root.service::<dsh_tools::ToolRegistry>(),
    ) {
        schedules
            .attach(&registry, agent, log, Arc::new(AgentInbox(handle.clone())))
            .map_err(|e| anyhow::anyhow!("cannot attach reminders: {e}"))?;
    }
    agent.provide::<dyn dsh_web_search::SessionEvents>(Arc::new(LogEvents(log.downgrade())))?;
    Ok(())
}

/// Appends plugin side events (log-only) to the session they happened in.
struct LogEvents(dsh_session::WeakSessionLog);

impl dsh_web_search::SessionEvents for LogEvents {
    fn record(&self, kind: &str, data: serde_json::Value) {
        if let Some(log) = self.0.upgrade()
            && let Err(error) = log.append(kind, data, None)
        {
            tracing::warn!(%error, kind, "cannot log a plugin event");
        }
    }
}

/// `dsh sessions export ID [-o FILE]`.
pub fn export_session(
    id: &str,
    output: Option<std::path::PathBuf>,
) -> anyhow::Result<std::process::ExitCode> {
    let store = dsh_session::SessionStore::new(crate::config::dsh_home()?);
    let query = dsh_session_query::SessionQuery::new(
        Some(store),
        dsh_session_query::IndexConfig {
            open_at: dsh_session_query::OpenAt::Never,
            ..dsh_session_query::IndexConfig::default()
        },
    )
    .map_err(|e| anyhow::anyhow!(e.message))?;
    let bytes = dsh_session_query::export::export_session(&query, id)
        .map_err(|e| anyhow::anyhow!("cannot export session {id}: {}", e.message))?;
    let path = output.unwrap_or_else(|| std::path::PathBuf::from(format!("{id}.zip")));
    if path.as_os_str() == "-" {
        use std::io::Write;
        std::io::stdout().lock().write_all(&bytes)?;
    } else {
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("dsh: wrote {}", path.display());
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Reminders arrive as follow-ups of the session's agent, only while it is idle.
struct AgentInbox(dsh_agent::AgentHandle);

impl dsh_schedule::ReminderInbox for AgentInbox {
    fn is_idle(&self) -> bool {
        self.0.status() == dsh_agent::AgentStatus::Idle
    }

    fn followup(&self, message: dsh_protocol::Message) -> Result<(), String> {
        self.0
            .followup(message)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}
