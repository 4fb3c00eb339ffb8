//! `[plugins.file-references]` and `[plugins.session-references]` on the host.
//!
//! `file-references` (on): the [`FileReferences`] candidate service front-ends complete `@`
//! paths with (a root service), and the `context:file-reference` guidance for agents that can
//! `read`. The mention itself is plain prompt text, in the TUI and in `dsh exec` alike.
//! `session-references` (off): the prepended pre-step listener that turns `@[label](dsh-session:…)`
//! mentions in direct user messages into one untrusted snapshot, read from the session store
//! (live sessions of this process win).

use std::sync::Arc;

use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::Scope;
use dsh_plugin::Section;
use dsh_plugin::Slot;
use dsh_plugin::invalid_config;
use dsh_session::SessionStore;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Map;
use serde_json::Value;

use crate::candidates::FILE_REFERENCE_SECTION;
use crate::candidates::FileReferenceConfig;
use crate::candidates::FileReferences;
use crate::candidates::file_reference_guidance;
use crate::session::SessionReferenceConfig;
use crate::session::SessionReferences;
use crate::session::StoreReader;

/// Keys in the crate's own spelling, so its parser gives upstream's error texts.
fn camel(entries: impl IntoIterator<Item = (&'static str, Option<Value>)>) -> Value {
    let map: Map<String, Value> = entries
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_owned(), v?)))
        .collect();
    Value::Object(map)
}

/// `[plugins.file-references]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileReferenceSettings {
    /// Default 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<Value>,
    /// Default 10 000 (the fuzzy index's bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_entries: Option<Value>,
    /// Default `[".git", "node_modules"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_directories: Option<Value>,
}

/// The file-references plugin.
#[derive(Debug, Default)]
pub struct FileReferencesPlugin;

impl Plugin for FileReferencesPlugin {
    type Config = FileReferenceSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, settings: FileReferenceSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let value = camel([
            ("maxResults", settings.max_results),
            ("maxEntries", settings.max_entries),
            ("excludedDirectories", settings.excluded_directories),
        ]);
        let config = FileReferenceConfig::parse(&value)
            .map_err(|e| invalid_config(Self::NAME, None, e.0))?;
        ctx.provide(Arc::new(FileReferences::new(config)))?;
        // Weak: the prompt registry must not keep the tool registry alive.
        let tools = Arc::downgrade(&host.tools);
        let _ = host.prompts.register_section(
            ctx,
            Section::dynamic(FILE_REFERENCE_SECTION, Slot::Preamble, move |agent| {
                let readable = tools
                    .upgrade()
                    .is_some_and(|tools| tools.get("read", Some(agent)).is_some());
                file_reference_guidance(readable).to_owned()
            }),
        );
        Ok(())
    }
}

impl HostPlugin for FileReferencesPlugin {
    const NAME: &'static str = "file-references";
}

/// `[plugins.session-references]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionReferenceSettings {
    /// Default and hard maximum 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_references: Option<Value>,
    /// Default 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_limit: Option<Value>,
    /// Default 65 536 (UTF-8 bytes of one referenced session's JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_reference_bytes: Option<Value>,
}

/// The session-references plugin (needs the host's session store).
#[derive(Debug, Default)]
pub struct SessionReferencesPlugin;

impl Plugin for SessionReferencesPlugin {
    type Config = SessionReferenceSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, settings: SessionReferenceSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let value = camel([
            ("maxReferences", settings.max_references),
            ("candidateLimit", settings.candidate_limit),
            ("maxReferenceBytes", settings.max_reference_bytes),
        ]);
        let config = SessionReferenceConfig::parse(&value)
            .map_err(|e| invalid_config(Self::NAME, None, e.message))?;
        let store = ctx.service::<dyn SessionStore>().ok_or_else(|| {
            invalid_config(Self::NAME, None, "no session store is composed".to_owned())
        })?;
        let reader = Arc::new(StoreReader::new(store));
        let live = reader.clone();
        host.sessions.attach(ctx, Self::NAME, move |session| {
            live.register_live(session.agent.log());
            Ok(())
        })?;
        let references = SessionReferences::new(config, reader);
        let _ = references.install(ctx, &host.hooks);
        ctx.provide(references)?;
        Ok(())
    }
}

impl HostPlugin for SessionReferencesPlugin {
    const NAME: &'static str = "session-references";
    const ENABLED_BY_DEFAULT: bool = false;
}
