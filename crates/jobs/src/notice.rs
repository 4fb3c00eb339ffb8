//! Completion notices of background jobs: the notice text, the message that carries it, and
//! the consecutive-wake budget the agent loop applies when the owner is idle.

use crate::jobs::JobNotice;
use crate::jobs::PublicJob;

const NOTICE_TRUNCATED: &str = "\n[notice truncated]\nDone; job_output.";

/// `background job <id> (<kind>: <label>) finished [status: …]. Read its output with job_output.`
/// bounded by the producer's output limit (id prefix first, then the action).
pub fn notice_text(job: &PublicJob, limit: Option<u64>) -> String {
    let text = format!(
        "background job {} ({}: {}) finished {}. Read its output with job_output.",
        job.id,
        job.kind,
        job.label,
        job.status_line()
    );
    let Some(limit) = limit.and_then(|l| usize::try_from(l).ok()) else {
        return text;
    };
    if text.len() <= limit {
        return text;
    }
    let mut keep = limit.saturating_sub(NOTICE_TRUNCATED.len());
    while keep > 0 && !text.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{NOTICE_TRUNCATED}", &text[..keep])
}

/// How a completion notice reaches its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompletionDelivery {
    /// Wake an idle owner with a follow-up turn (budget permitting).
    #[default]
    Wakeup,
    /// Never open a turn; always inject into the next step.
    Quiet,
}

/// The decision for one notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeDelivery {
    /// `followup()`: open a new turn for the idle owner.
    FollowUp,
    /// `inject()`: add to the next step.
    Inject,
}

/// The consecutive-wake counter: an idle owner is woken at most `max` times in a row; claiming
/// a user message resets it.
#[derive(Debug, Clone)]
pub struct WakeBudget {
    max: u32,
    used: u32,
    delivery: CompletionDelivery,
}

impl WakeBudget {
    /// `maxConsecutiveWakes` defaults to 3 and is at least 1.
    pub fn new(delivery: CompletionDelivery, max_consecutive_wakes: u32) -> Self {
        Self {
            max: max_consecutive_wakes.max(1),
            used: 0,
            delivery,
        }
    }

    pub fn decide(&mut self, owner_idle: bool) -> NoticeDelivery {
        if owner_idle && self.delivery == CompletionDelivery::Wakeup && self.used < self.max {
            self.used += 1;
            NoticeDelivery::FollowUp
        } else {
            NoticeDelivery::Inject
        }
    }

    /// A `source.kind == 'user'` message was claimed.
    pub fn on_user_message(&mut self) {
        self.used = 0;
    }
}

impl Default for WakeBudget {
    fn default() -> Self {
        Self::new(CompletionDelivery::Wakeup, 3)
    }
}

/// The user message carrying a completion notice into the owner's conversation.
pub fn notice_message(notice: &JobNotice) -> dsh_protocol::Message {
    let source = dsh_protocol::MessageSource::plugin("tool-jobs")
        .with("form", "notice")
        .with(
            "summary",
            format!(
                "background job {} {}",
                notice.job.id,
                notice.job.status_line()
            ),
        );
    dsh_protocol::Message::user(
        vec![dsh_protocol::ContentBlock::text(notice.text.clone())],
        source,
    )
}
