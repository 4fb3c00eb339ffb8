//! The `terminal-bash` backend: an interactive bash on a PTY with a fixed prompt and the
//! prompt marker its readiness detection relies on.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::config::BashBackendConfig;
use crate::error::TerminalError;
use crate::pty::PtySession;
use crate::pty::SpawnSpec;
use crate::service::OpenRequest;
use crate::service::TerminalBackend;

/// The prompt the shell shows.
pub const PROMPT: &str = "dsh> ";
/// Emits `OSC 133;D;<status>` before every prompt (and resets PS1, which a command may change).
pub const PROMPT_COMMAND: &str = r#"printf "\033]133;D;%s\007" "$?"; PS1='dsh> '"#;

/// The bash backend.
#[derive(Debug, Clone)]
pub struct BashBackend {
    config: Arc<BashBackendConfig>,
}

impl BashBackend {
    pub fn new(config: BashBackendConfig) -> Self {
        Self {
            config: Arc::new(config),
        }
    }

    pub fn config(&self) -> &BashBackendConfig {
        &self.config
    }
}

fn set(env: &mut Vec<(String, String)>, name: &str, value: &str) {
    env.retain(|(existing, _)| existing != name);
    env.push((name.to_owned(), value.to_owned()));
}

/// The backend's environment overrides on top of the scrubbed child environment.
pub fn terminal_env(
    mut env: Vec<(String, String)>,
    owner: &str,
    pty_id: &str,
) -> Vec<(String, String)> {
    for (name, value) in [
        ("TERM", "dumb"),
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
        ("DSH_SHELL", "1"),
        ("DSH_SESSION_ID", owner),
        ("DSH_PTY_SESSION_ID", pty_id),
        ("PS1", PROMPT),
        ("PROMPT_COMMAND", PROMPT_COMMAND),
        ("BASH_SILENCE_DEPRECATION_WARNING", "1"),
    ] {
        set(&mut env, name, value);
    }
    env
}

impl TerminalBackend for BashBackend {
    fn open(
        &self,
        request: OpenRequest,
    ) -> BoxFuture<'static, Result<(Arc<PtySession>, String), TerminalError>> {
        let config = self.config.clone();
        Box::pin(async move {
            let env = terminal_env(request.env, &request.owner, &request.id);
            PtySession::spawn(
                config,
                SpawnSpec {
                    cwd: request.cwd,
                    env,
                    wrapper: request.wrapper,
                },
            )
            .await
        })
    }
}
