//! What the bridge asks of the host: sessions, modes, models, credentials and prompt images,
//! all from [`dsh_host::SessionHost`] (the one session API of `dsh exec`, `dsh acp` and the
//! TUI). The bridge never composes an agent itself; it drives the returned [`AgentHandle`] and
//! renders its session log.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_attachments::AttachmentError;
use dsh_attachments::LocalAttachmentStore;
use dsh_host::SessionHost;
use dsh_plugin::ModeAxis;
use dsh_session::data::RequestHeader;
use dsh_tools::ImageAttachment;

use crate::error::Failure;
use crate::images::ImageInput;
use crate::images::ImageStoreError;
use crate::images::PromptImage;
use crate::images::PromptImageStore;

/// One approval preset (or preset + plan mode) offered as an ACP session mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModeInfo {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
}

/// The session's modes: the current one and every one it may switch to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModeState {
    pub current: String,
    pub available: Vec<ModeInfo>,
}

/// Follows the session's mode from its log: given the current mode id and a committed event,
/// the new id when the event moves the mode (plan mode's `plan/mode`, logged by `/plan` or an
/// approved `exit_plan_mode`). The bridge then sends `current_mode_update`. Called inside the
/// log's event callback: it must not append to the log.
pub(crate) type ModeWatch = Arc<dyn Fn(&str, &dsh_session::Event) -> Option<String> + Send + Sync>;

/// An agent ready to be driven, plus what the bridge needs to render it.
pub(crate) struct SessionParts {
    pub agent: AgentHandle,
    /// Where the agent's transcript gets its tools' cards and its plugins' items.
    pub presentation: dsh_transcript::Presentation,
    pub modes: Option<ModeState>,
    /// Moves `modes.current` when the log says the mode changed.
    pub mode_watch: Option<ModeWatch>,
}

/// Remote MCP transports the host accepts in `mcpServers`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct McpTransports {
    pub http: bool,
    pub sse: bool,
}

/// A stored session as `session/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredSession {
    pub session_id: String,
    pub cwd: PathBuf,
    pub title: Option<String>,
    /// Epoch milliseconds of the last activity (or creation), used for newest-first order.
    pub updated_at_ms: Option<u64>,
}

/// One way a user can give the agent model credentials, advertised in `authMethods`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthMethodInfo {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
}

/// The one authentication method: the key in the agent's environment.
const API_KEY_METHOD: &str = "api-key-env";

/// The bridge's view of the host.
pub(crate) struct AcpHost {
    sessions: SessionHost,
}

impl AcpHost {
    pub(crate) fn new(sessions: SessionHost) -> Self {
        Self { sessions }
    }

    /// A fresh agent for `session_id` in `cwd`, with the client's MCP servers connected.
    pub(crate) async fn create(
        &self,
        session_id: String,
        cwd: PathBuf,
        mcp_servers: Vec<serde_json::Value>,
    ) -> Result<SessionParts, Failure> {
        let agent = self
            .sessions
            .create(dsh_host::NewSession {
                id: Some(session_id),
                cwd,
            })
            .map_err(|error| Failure::internal(format!("{error:#}")))?;
        if let Err(error) = self.sessions.start_session_mcp(&agent, &mcp_servers).await {
            agent.dispose().await;
            return Err(Failure::invalid(format!("{error:#}")));
        }
        Ok(self.parts(agent))
    }

    /// Resumes a stored session; the agent stays idle until the next prompt. The bridge checks
    /// the resumed log's cwd against the request's.
    pub(crate) fn load(&self, session_id: &str) -> Result<SessionParts, Failure> {
        self.sessions
            .load(session_id)
            .map(|agent| self.parts(agent))
            .map_err(|error| {
                Failure::invalid(format!("cannot resume session {session_id}: {error:#}"))
            })
    }

    /// Every top-level stored session with an absolute cwd (optionally only `cwd`), newest
    /// first.
    pub(crate) fn list(
        &self,
        cwd: Option<&std::path::Path>,
    ) -> Result<Vec<StoredSession>, Failure> {
        let mut sessions: Vec<StoredSession> = self
            .sessions
            .list()
            .map_err(|e| Failure::internal(e.to_string()))?
            .into_iter()
            .filter(|summary| summary.parent_session.is_none())
            .filter_map(|summary| {
                let session_cwd = PathBuf::from(summary.cwd.as_deref()?);
                if !session_cwd.is_absolute() || cwd.is_some_and(|wanted| wanted != session_cwd) {
                    return None;
                }
                Some(StoredSession {
                    session_id: summary.id.clone(),
                    cwd: session_cwd,
                    title: summary.title.clone(),
                    updated_at_ms: Some(dsh_host::last_activity(&summary)),
                })
            })
            .collect();
        sessions.sort_by_key(|s| std::cmp::Reverse(s.updated_at_ms));
        Ok(sessions)
    }

    /// Whether `create` accepts client-provided MCP servers: only with the `mcp` plugin
    /// mounted (otherwise a non-empty `mcpServers` is refused as not supported).
    pub(crate) fn supports_mcp_servers(&self) -> bool {
        self.sessions.is_mounted("mcp")
    }

    /// The remote transports advertised besides stdio: `dsh-mcp` takes streamable-HTTP and
    /// legacy HTTP+SSE servers from `session/new`.
    pub(crate) fn mcp_transports(&self) -> McpTransports {
        McpTransports {
            http: self.supports_mcp_servers(),
            sse: self.supports_mcp_servers(),
        }
    }

    pub(crate) fn auth_methods(&self) -> Vec<AuthMethodInfo> {
        vec![AuthMethodInfo {
            id: API_KEY_METHOD.to_owned(),
            name: "API key in the environment".to_owned(),
            description: Some(format!(
                "Set {} in the environment your editor starts `dsh acp` with (the agent server's `env` setting), then restart the agent.",
                self.sessions.api_key_env()
            )),
        }]
    }

    /// Whether the model can be reached with the key at hand now; `AuthRequired` makes
    /// `session/new` and `authenticate` answer `auth_required`.
    pub(crate) fn check_credentials(&self) -> Result<(), Failure> {
        if self.sessions.has_api_key() {
            return Ok(());
        }
        Err(Failure::auth_required(format!(
            "no API key: set {} in the environment your editor starts `dsh acp` with",
            self.sessions.api_key_env()
        )))
    }

    /// Where inline prompt images are stored; `None` (no attachments plugin) means image
    /// prompts are never advertised.
    pub(crate) fn prompt_images(&self) -> Option<Arc<dyn PromptImageStore>> {
        self.sessions
            .attachments()
            .map(|store| Arc::new(PromptImages(store)) as Arc<dyn PromptImageStore>)
    }

    /// Whether a route declares image input: the agent's current route (its latest request
    /// header), else the configured one (what `initialize` advertises).
    pub(crate) fn image_input(&self, agent: Option<&AgentHandle>) -> Result<ImageInput, Failure> {
        let header = agent
            .and_then(|agent| agent.log().request_header())
            .and_then(|event| event.decode::<RequestHeader>())
            .transpose()
            .map_err(|error| Failure::internal(format!("unreadable request header: {error}")))?
            .map(|header| header.header.config);
        let (provider, model) = match header {
            Some(config) => (config.provider, config.model),
            None => self.sessions.route(),
        };
        Ok(match self.sessions.accepts_images(&provider, &model) {
            None => ImageInput::Unresolved,
            Some(accepts_images) => ImageInput::Model {
                model,
                accepts_images,
            },
        })
    }

    /// Switches `agent`'s model from its next request, durably (see `dsh_host::model_choice`).
    pub(crate) fn set_model(&self, agent: &AgentHandle, model: &str) -> Result<(), Failure> {
        self.sessions
            .set_model(agent, model)
            .map_err(|error| Failure::internal(format!("{error:#}")))
    }

    /// The models a session may switch to (its `model` config option).
    pub(crate) fn models(&self) -> Vec<String> {
        self.sessions.models()
    }

    /// `session/set_mode` with a combined id: the preset part switches the approval preset
    /// (only when it changes), the `+plan` part turns plan mode on or off.
    pub(crate) fn set_mode(&self, agent: &AgentHandle, mode_id: &str) -> Result<(), Failure> {
        let axis = agent.scope().service::<dyn ModeAxis>();
        let (preset, plan_on) = match &axis {
            Some(axis) => axis.split_mode_id(mode_id),
            None => (mode_id, false),
        };
        if self.sessions.current_preset(agent).map(|p| p.name) != Some(preset) {
            self.sessions
                .set_preset(agent, preset)
                .map_err(|error| Failure::invalid(format!("{error:#}")))?;
        }
        if let Some(axis) = axis {
            axis.set(agent, plan_on);
        }
        Ok(())
    }

    /// The session's modes: every approval preset, and with plan mode composed each preset
    /// again with plan mode on (`<preset>+plan`, docs/steering.md).
    fn parts(&self, agent: AgentHandle) -> SessionParts {
        let axis = agent.scope().service::<dyn ModeAxis>();
        let preset = self
            .sessions
            .current_preset(&agent)
            .map_or("custom", |preset| preset.name);
        let current = match &axis {
            Some(axis) => axis.mode_id(preset, axis.is_on(&agent)),
            None => preset.to_owned(),
        };
        let mut available = Vec::new();
        for preset in self.sessions.presets() {
            available.push(ModeInfo {
                id: preset.name.to_owned(),
                name: preset.name.to_owned(),
                description: Some(preset.description.to_owned()),
            });
            if let Some(axis) = &axis {
                available.push(ModeInfo {
                    id: axis.mode_id(preset.name, true),
                    name: axis.variant_name(preset.name),
                    description: Some(axis.variant_description(Some(preset.description))),
                });
            }
        }
        let mode_watch = axis.map(|axis| {
            Arc::new(move |current: &str, event: &dsh_session::Event| axis.follow(current, event))
                as ModeWatch
        });
        let presentation = self.sessions.presentation(&agent);
        SessionParts {
            agent,
            presentation,
            modes: Some(ModeState { current, available }),
            mode_watch,
        }
    }
}

/// The bridge's prompt-image seam over the attachments plugin's store.
struct PromptImages(Arc<LocalAttachmentStore>);

impl PromptImageStore for PromptImages {
    fn accepted_media_types(&self) -> Vec<String> {
        self.0.accepted_media_types()
    }

    fn save_images(&self, batch: &[PromptImage]) -> Result<Vec<ImageAttachment>, ImageStoreError> {
        let records = batch
            .iter()
            .map(|image| self.0.describe(&image.bytes, Some(&image.media_type), None))
            .collect::<Result<Vec<_>, _>>()
            .map_err(store_error)?;
        let pairs: Vec<(ImageAttachment, &[u8])> = records
            .iter()
            .cloned()
            .zip(batch.iter().map(|image| image.bytes.as_slice()))
            .collect();
        self.0.save_images(&pairs).map_err(store_error)?;
        Ok(records)
    }

    fn load_image(&self, attachment: &ImageAttachment) -> Result<Vec<u8>, String> {
        self.0.load(attachment).map_err(|e| e.to_string())
    }
}

fn store_error(error: AttachmentError) -> ImageStoreError {
    if error.is_rejection() {
        ImageStoreError::Rejected(error.to_string())
    } else {
        ImageStoreError::Failed(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn prompt_images_are_stored_and_refusals_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(LocalAttachmentStore::under_home(dir.path()));
        let images = PromptImages(store.clone());
        let records = images
            .save_images(&[PromptImage {
                media_type: "image/png".into(),
                bytes: RED_PNG.to_vec(),
            }])
            .unwrap();
        assert_eq!(records[0].bytes, 69);
        assert_eq!(store.load(&records[0]).unwrap(), RED_PNG);
        let refused = images
            .save_images(&[PromptImage {
                media_type: "image/png".into(),
                bytes: b"not an image".to_vec(),
            }])
            .unwrap_err();
        assert_eq!(
            refused,
            ImageStoreError::Rejected("image bytes are not PNG/JPEG/WebP/GIF".into())
        );
    }

    const RED_PNG: [u8; 69] = [
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90,
        0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8,
        0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00,
        0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
}
