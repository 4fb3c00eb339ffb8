//! `[plugins.spill]`: the spill store (a service other plugins write oversized output to) and
//! the generic inline-cap policy.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_kernel::Scope;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use serde::Deserialize;
use serde::Serialize;

use crate::SpillPolicy;
use crate::SpillStore;

/// `[plugins.spill]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpillSettings {
    /// Results whose text exceeds this many bytes move to a spill file; `0` disables the
    /// generic policy (the file tools and bash still spill what they cap).
    #[serde(default = "default_inline_cap")]
    pub max_inline_bytes: usize,
    /// Where spill files go (default: each stored session's own folder, `<session>/spill/`;
    /// other sessions use a private folder under the OS temp directory, removed at exit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
}

fn default_inline_cap() -> usize {
    50_000
}

impl Default for SpillSettings {
    fn default() -> Self {
        Self {
            max_inline_bytes: default_inline_cap(),
            root: None,
        }
    }
}

/// Provides the [`SpillStore`] as a service and installs the generic policy.
#[derive(Debug, Default)]
pub struct SpillPlugin;

impl Plugin for SpillPlugin {
    type Config = SpillSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: SpillSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let store = match &config.root {
            Some(root) => SpillStore::new(root),
            None => {
                let store = SpillStore::in_temp_dir();
                let root = store.root().to_path_buf();
                ctx.defer(move || {
                    let _ = std::fs::remove_dir_all(root);
                });
                // A stored session spills into its own folder: its files go with it.
                let placer = store.clone();
                host.sessions.attach(ctx, Self::NAME, move |session| {
                    if let Some(folder) = session
                        .context
                        .log_path()
                        .as_deref()
                        .and_then(|p| p.parent())
                    {
                        placer.place_session(session.context.id(), folder.join("spill"));
                    }
                    Ok(())
                })?;
                store
            }
        };
        ctx.provide(Arc::new(store.clone()))?;
        if config.max_inline_bytes > 0 {
            crate::install_policy(
                &host.tools,
                ctx,
                SpillPolicy {
                    max_inline_bytes: config.max_inline_bytes,
                    store,
                },
            );
        }
        Ok(())
    }
}

impl HostPlugin for SpillPlugin {
    const NAME: &'static str = "spill";
}
