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
    _mounted: Vec<Mounted>,
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
        if let Some(resolve) = shell.resolver() {
            if config.plugin_enabled("terminal", false)? {
                let plugin = dsh_terminal::TerminalPlugin {
                    resolve: resolve.clone(),
                    jobs: shell.jobs(),
                };
                plugins
                    ._mounted
                    .push(mount(root, config, Arc::new(plugin))?);
                let (id, order) = dsh_terminal::SECTION;
                plugins.sections.push(Section::new(
                    id,
                    f64::from(order),
                    dsh_terminal::SECTION_TEXT,
                ));
            }
            if config.plugin_enabled("bash-persistent", false)? {
                let plugin = dsh_terminal::PersistentBashPlugin { resolve };
                plugins
                    ._mounted
                    .push(mount(root, config, Arc::new(plugin))?);
            }
        }
        Ok(plugins)
    }

    pub fn prompt_sections(&self) -> Vec<Section> {
        self.sections.clone()
    }
}
