//! The `tokenMeter` service: one fold per session, advanced on demand by what the log appended
//! since the last read, so a measurement costs the new events only.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_session::SessionLog;
use dsh_session::data::EpochHeader;

use crate::fold::MeterError;
use crate::fold::MeterFold;
use crate::fold::TokenMeasurement;
use crate::pressure::ContextPressure;
use crate::pressure::PressureFold;

#[derive(Debug, Default)]
struct Folds {
    meter: MeterFold,
    pressure: PressureFold,
}

/// Shared by everything that prices a session (compaction, status lines, usage reports).
#[derive(Debug, Default)]
pub struct TokenMeter {
    sessions: Mutex<HashMap<String, Arc<Mutex<Folds>>>>,
}

impl TokenMeter {
    pub fn new() -> Self {
        Self::default()
    }

    fn folds(&self, log: &SessionLog) -> Arc<Mutex<Folds>> {
        let mut sessions = dsh_sync::lock(&self.sessions);
        let entry = sessions.entry(log.id().to_owned()).or_default().clone();
        {
            let mut folds = dsh_sync::lock(&entry);
            // A shorter log under the same id is another instance (a reload): start over.
            if folds.meter.next_seq() > log.len() || folds.pressure.next_seq() > log.len() {
                *folds = Folds::default();
            }
        }
        entry
    }

    /// Runs `f` on the session's meter fold after catching it up with the log.
    pub fn with_fold<T>(
        &self,
        log: &SessionLog,
        f: impl FnOnce(&MeterFold) -> T,
    ) -> Result<T, MeterError> {
        let entry = self.folds(log);
        let mut folds = dsh_sync::lock(&entry);
        folds.meter.catch_up(log)?;
        Ok(f(&folds.meter))
    }

    /// `measure(session, header?)`.
    pub fn measure(
        &self,
        log: &SessionLog,
        header: Option<&EpochHeader>,
    ) -> Result<TokenMeasurement, MeterError> {
        self.with_fold(log, |fold| fold.measure(header))
    }

    /// The context-fill projection of a session.
    pub fn pressure(&self, log: &SessionLog) -> ContextPressure {
        let entry = self.folds(log);
        let mut folds = dsh_sync::lock(&entry);
        // A first reading late in a long session (`dsh exec`'s closing usage line) reads the log
        // back a window at a time; a failure leaves the projection where it got to.
        let from = folds.pressure.next_seq();
        if let Err(error) = log.visit_since(from, |event| folds.pressure.advance(event)) {
            tracing::warn!(%error, "context pressure: cannot read the session log");
        }
        folds.pressure.value()
    }

    /// Drops a session's folds (when its log is closed for good).
    pub fn forget(&self, session_id: &str) {
        dsh_sync::lock(&self.sessions).remove(session_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::Message;
    use dsh_session::SessionHeader;
    use dsh_session::SurfaceIntent;
    use dsh_session::data::UserMessage;

    #[test]
    fn a_reloaded_shorter_log_refolds_from_scratch() {
        let meter = TokenMeter::new();
        let long = SessionLog::in_memory(SessionHeader::new("same", None));
        for _ in 0..3 {
            long.append_data(
                &UserMessage(Message::user_text("abcd")),
                Some(SurfaceIntent::append()),
            )
            .unwrap();
        }
        assert_eq!(meter.measure(&long, None).unwrap().surface_tokens, 27);
        let short = SessionLog::in_memory(SessionHeader::new("same", None));
        short
            .append_data(
                &UserMessage(Message::user_text("abcd")),
                Some(SurfaceIntent::append()),
            )
            .unwrap();
        assert_eq!(meter.measure(&short, None).unwrap().surface_tokens, 9);
        meter.forget("same");
        assert_eq!(meter.measure(&long, None).unwrap().surface_tokens, 27);
    }
}
