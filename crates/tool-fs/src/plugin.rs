//! `[plugins.fs]`: the file tools, bound per session to its cwd and file policy.
//!
//! The tools' definitions depend on the session's permissions (the escalation parameter is
//! offered only when approval can be asked), so they attach per session and are re-attached
//! when the session's preset changes.

use std::sync::Arc;

use dsh_attachments::LocalAttachmentStore;
use dsh_kernel::Scope;
use dsh_plugin::ApprovalPolicy;
use dsh_plugin::AttachedSession;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::Section;
use dsh_plugin::Slot;
use dsh_spill::SpillStore;
use serde::Deserialize;
use serde::Serialize;

use crate::FilePolicy;
use crate::FsContext;
use crate::read_image::ImageRoute;
use crate::read_image::ImageSupport;
use crate::schema;

/// `[plugins.fs]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsSettings {
    /// Sample over-cap glob results across the tree instead of keeping the oldest (upstream
    /// `globSampling`, default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob_sampling: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob_max_results: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grep_max_matches: Option<usize>,
    /// How long one call's file I/O may take, in milliseconds (default 60 000): past it the
    /// call fails with `FS_TIMEOUT` and its blocked thread is abandoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_timeout_ms: Option<u64>,
}

/// The file policy of `session` now: its mode rooted at its cwd; dsh's home closed but for the
/// session's own log, its spill folder (with `spill`) and the skills; escalation offered only
/// when approval can be asked.
pub fn session_policy(
    session: &dsh_plugin::SessionContext,
    spill: Option<&SpillStore>,
) -> FilePolicy {
    let permissions = session.permissions();
    let mut policy = FilePolicy::new(permissions.sandbox, session.cwd());
    if let Some(home) = session.home() {
        policy = policy
            .with_dsh_home(home)
            .allow_reading(&home.join("skills"));
    }
    if let Some(log) = session.log_path() {
        policy = policy.allow_reading(&log);
    }
    if let Some(dir) = spill.and_then(|spill| spill.session_dir(session.id()).ok()) {
        policy = policy.allow_reading(&dir);
    }
    policy.approval_never =
        policy.escalation_advertised && permissions.approval == ApprovalPolicy::Never;
    policy.escalation_advertised =
        policy.escalation_advertised && permissions.approval != ApprovalPolicy::Never;
    policy
}

/// The file tools plugin.
#[derive(Debug, Default)]
pub struct FsPlugin;

impl Plugin for FsPlugin {
    type Config = FsSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: FsSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        for section in [
            schema::READ_SECTION,
            schema::WRITE_SECTION,
            schema::EDIT_SECTION,
            schema::GREP_SECTION,
        ] {
            host.prompts
                .register_section(ctx, Section::new(section.id, Slot::Tools, section.text));
        }
        host.prompts.register_section(
            ctx,
            Section::new(
                schema::GLOB_SECTION,
                Slot::Tools,
                schema::glob_section_text(config.glob_sampling.unwrap_or(true)),
            ),
        );
        // Read when the plugin applies: a change of either plugin re-applies this one.
        let spill = ctx.service::<SpillStore>();
        let attachments = ctx.service::<LocalAttachmentStore>();
        let services = host.clone();
        host.sessions
            .attach(ctx, Self::NAME, move |session: &AttachedSession<'_>| {
                let context = session.context;
                let mut fs =
                    FsContext::new(context.cwd(), session_policy(context, spill.as_deref()));
                if let Some(spill) = &spill {
                    fs.spill = crate::SpillConfig::new(SpillStore::clone(spill), context.id());
                }
                if let Some(sampling) = config.glob_sampling {
                    fs.limits.sample_over_cap_glob_results = sampling;
                }
                if let Some(max) = config.glob_max_results {
                    fs.limits.glob_max_results = max;
                }
                if let Some(max) = config.grep_max_matches {
                    fs.limits.grep_max_matches = max;
                }
                if let Some(ms) = config.io_timeout_ms {
                    fs.limits.io_timeout = std::time::Duration::from_millis(ms.max(1));
                }
                if let Some(store) = &attachments {
                    let (provider, model) = (&services.info.provider, &services.info.model);
                    let route = match services.accepts_images(provider, model) {
                        None => ImageRoute::Unresolved,
                        Some(accepts_images) => ImageRoute::Model {
                            model: model.clone(),
                            accepts_images,
                        },
                    };
                    fs.images = Some(ImageSupport {
                        store: store.clone() as Arc<dyn dsh_tools::AttachmentStore>,
                        accepted_media_types: store.accepted_media_types(),
                        route,
                    });
                }
                crate::register::register_fs_tools(&services.tools, session.scope, fs)
                    .map_err(PluginError::other)?;
                Ok(())
            })?;
        Ok(())
    }
}

impl HostPlugin for FsPlugin {
    const NAME: &'static str = "fs";
    const USES: &'static [&'static str] = &["spill", "attachments"];
}
