//! `[plugins.token-meter]`: the shared [`TokenMeter`] service (no settings; any key fails).

use std::sync::Arc;

use dsh_plugin::HostPlugin;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::Scope;

use crate::TokenMeter;
use crate::TokenMeterConfig;

/// Provides one [`TokenMeter`] for the composition (compaction and front-ends share it).
#[derive(Debug, Default)]
pub struct TokenMeterPlugin;

impl Plugin for TokenMeterPlugin {
    type Config = TokenMeterConfig;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, _config: TokenMeterConfig) -> Result<(), PluginError> {
        ctx.provide(Arc::new(TokenMeter::new()))?;
        Ok(())
    }
}

impl HostPlugin for TokenMeterPlugin {
    const NAME: &'static str = "token-meter";
}
