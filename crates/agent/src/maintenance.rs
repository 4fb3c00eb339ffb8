//! Maintenance (ALS §2.4 `runMaintenance`): work that needs the agent idle and must not race a
//! turn, such as manual compaction. Admission is reserved synchronously; while it is held the
//! public status stays `idle`, waking sends queue and latch, and `cancel()` aborts the
//! maintenance token. Releasing it replays a latched wake when work is pending.

use tokio_util::sync::CancellationToken;

use crate::agent::AgentHandle;
use crate::agent::Phase;
use crate::error::AgentError;
use dsh_sync::lock;

/// Held idle admission; dropping it ends the maintenance phase.
#[derive(Debug)]
#[must_use = "dropping the guard ends maintenance at once"]
pub struct Maintenance {
    agent: AgentHandle,
    token: CancellationToken,
}

impl Maintenance {
    /// Fires when the agent is cancelled or disposed during maintenance.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for Maintenance {
    fn drop(&mut self) {
        let latched = {
            let mut state = lock(&self.agent.inner.state);
            let latched = matches!(state.phase, Phase::Maintenance { latch: true, .. });
            state.phase = Phase::Idle;
            latched && !state.inbox.is_empty() && !state.disposing
        };
        // A latched wake goes straight from maintenance to running, so `when_idle` never sees
        // a gap in between.
        if latched {
            self.agent.wake();
        } else {
            self.agent.inner.idle.send_replace(true);
        }
    }
}

impl AgentHandle {
    /// Reserves idle admission now. Fails unless the agent is idle, not disposing, and has no
    /// queued prompt.
    pub fn begin_maintenance(&self) -> Result<Maintenance, AgentError> {
        let token = {
            let mut state = lock(&self.inner.state);
            if state.disposing {
                return Err(AgentError::Disposed(self.inner.id.clone()));
            }
            if !matches!(state.phase, Phase::Idle) || !state.inbox.next_turn.is_empty() {
                return Err(AgentError::NotIdle(self.inner.id.clone()));
            }
            let token = CancellationToken::new();
            state.phase = Phase::Maintenance {
                abort: token.clone(),
                latch: false,
            };
            token
        };
        self.inner.idle.send_replace(false);
        Ok(Maintenance {
            agent: self.clone(),
            token,
        })
    }
}
