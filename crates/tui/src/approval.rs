//! The UI as the agent's approval channel: a pipeline `ask` becomes an inline prompt that only
//! the asking call waits on; "allow for the session" is remembered per tool name.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use dsh_kernel::BoxFuture;
use dsh_tools::ApprovalOutcome;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;
use dsh_tools::CancellationToken;
use tokio::sync::mpsc;
use tokio::sync::oneshot;

/// The person's answer to one prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Once,
    Session,
    Reject,
}

impl Answer {
    pub const ALL: [Answer; 3] = [Answer::Once, Answer::Session, Answer::Reject];
    /// A sandbox escalation is decided per call: no session-wide grant is offered.
    pub const ONCE_OR_REJECT: [Answer; 2] = [Answer::Once, Answer::Reject];

    pub fn label(self) -> &'static str {
        match self {
            Self::Once => "allow once",
            Self::Session => "allow for this session",
            Self::Reject => "reject",
        }
    }

    pub fn key(self) -> char {
        match self {
            Self::Once => 'y',
            Self::Session => 'a',
            Self::Reject => 'n',
        }
    }
}

/// One pending prompt, as the UI holds it.
#[derive(Debug)]
pub struct PendingApproval {
    pub tool_name: String,
    pub call_id: String,
    pub reason: Option<String>,
    /// The asking call's token: once cancelled, the prompt is stale.
    pub signal: CancellationToken,
    /// Highlighted option (index into [`PendingApproval::answers`]).
    pub selected: usize,
    reply: Option<oneshot::Sender<Answer>>,
}

/// Whether an approval reason asks for a wider sandbox (`escalate sandbox to <mode>: …`).
pub fn is_escalation(reason: Option<&str>) -> bool {
    reason.is_some_and(|r| r.starts_with("escalate sandbox to "))
}

impl PendingApproval {
    /// A prompt with no one waiting (snapshot tests draw these).
    pub fn detached(tool_name: &str, call_id: &str, reason: Option<&str>) -> Self {
        Self {
            tool_name: tool_name.to_owned(),
            call_id: call_id.to_owned(),
            reason: reason.map(str::to_owned),
            signal: CancellationToken::new(),
            selected: 0,
            reply: None,
        }
    }

    /// The answers this prompt offers.
    pub fn answers(&self) -> &'static [Answer] {
        if is_escalation(self.reason.as_deref()) {
            &Answer::ONCE_OR_REJECT
        } else {
            &Answer::ALL
        }
    }

    pub fn answer(mut self, answer: Answer) {
        if let Some(reply) = self.reply.take() {
            // The asker may be gone (call cancelled); nothing left to tell.
            let _ = reply.send(answer);
        }
    }
}

/// Whether prompts are shown or answered automatically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalMode {
    Ask,
    /// Every request is allowed once without a prompt.
    Auto,
}

/// The [`ApprovalService`] the TUI provides on each agent's scope.
#[derive(Clone)]
pub struct TuiApproval {
    tx: mpsc::UnboundedSender<PendingApproval>,
    granted: Arc<Mutex<HashSet<String>>>,
    auto: Arc<AtomicBool>,
}

impl std::fmt::Debug for TuiApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TuiApproval").finish_non_exhaustive()
    }
}

impl TuiApproval {
    /// The service and the stream of prompts the UI must show.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<PendingApproval>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let service = Self {
            tx,
            granted: Arc::default(),
            auto: Arc::default(),
        };
        (service, rx)
    }

    pub fn mode(&self) -> ApprovalMode {
        if self.auto.load(Ordering::Relaxed) {
            ApprovalMode::Auto
        } else {
            ApprovalMode::Ask
        }
    }

    pub fn set_mode(&self, mode: ApprovalMode) {
        self.auto
            .store(mode == ApprovalMode::Auto, Ordering::Relaxed);
    }

    /// Tools allowed for the rest of the session.
    pub fn granted(&self) -> Vec<String> {
        let mut names: Vec<String> = dsh_sync::lock(&self.granted).iter().cloned().collect();
        names.sort();
        names
    }

    /// Forgets session grants (a new session starts clean).
    pub fn reset(&self) {
        dsh_sync::lock(&self.granted).clear();
    }
}

impl ApprovalService for TuiApproval {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        // A session grant covers a tool's ordinary asks, never a wider sandbox.
        let escalation = is_escalation(request.reason.as_deref());
        let granted = !escalation && dsh_sync::lock(&self.granted).contains(&request.tool_name);
        if granted || self.auto.load(Ordering::Relaxed) {
            return Box::pin(std::future::ready(ApprovalOutcome::AllowedOnce));
        }
        let (reply, answer) = oneshot::channel();
        let pending = PendingApproval {
            tool_name: request.tool_name.clone(),
            call_id: request.call_id,
            reason: request.reason,
            signal: request.signal.clone(),
            selected: 0,
            reply: Some(reply),
        };
        if self.tx.send(pending).is_err() {
            return Box::pin(std::future::ready(ApprovalOutcome::Unavailable));
        }
        let memory = self.granted.clone();
        let tool = request.tool_name;
        let signal = request.signal;
        Box::pin(async move {
            tokio::select! {
                answer = answer => match answer {
                    Ok(Answer::Once) => ApprovalOutcome::AllowedOnce,
                    Ok(Answer::Session) if escalation => ApprovalOutcome::AllowedOnce,
                    Ok(Answer::Session) => {
                        dsh_sync::lock(&memory).insert(tool);
                        ApprovalOutcome::AllowedOnce
                    }
                    Ok(Answer::Reject) => ApprovalOutcome::Rejected,
                    // The UI went away without answering.
                    Err(_) => ApprovalOutcome::Unavailable,
                },
                () = signal.cancelled() => ApprovalOutcome::Cancelled,
            }
        })
    }
}
