//! The session's model when a client picked one (ACP's `model` config option): logged as
//! `model/selected {model}` and folded back when the session is resumed or forked, so a
//! reopened session keeps asking the model it was switched to. A selection stays in force as
//! the model of every request, the configured model included: within a loop the agent seeds
//! each request from the last logged header, so only the hook brings a switched session back.

use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_agent::CallConfig;
use dsh_session::SessionLog;
use dsh_session::data::EventData;
use serde::Deserialize;
use serde::Serialize;

use crate::host::HostError;

/// `model/selected {model}`: the model the session's requests use from then on (the
/// configured one again when it names it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSelected {
    pub model: String,
}

impl EventData for ModelSelected {
    const KIND: &'static str = "model/selected";
}

/// The model selected on one agent; one request hook on the agent's scope reads it (so the
/// service holds no guard of its own, and the hook goes with the agent).
#[derive(Default)]
struct Choice(Arc<Mutex<Option<String>>>);

impl Choice {
    fn of(agent: &AgentHandle) -> Result<Arc<Self>, HostError> {
        if let Some(choice) = agent.scope().service::<Self>() {
            return Ok(choice);
        }
        let choice = Arc::new(Self::default());
        let selected = choice.0.clone();
        agent
            .hooks()
            .request
            .register(agent.scope(), move |input, next| {
                let selected = dsh_sync::lock(&selected).clone();
                Box::pin(async move {
                    let config = next.run(input).await?;
                    Ok(match selected {
                        Some(model) => CallConfig { model, ..config },
                        None => config,
                    })
                })
            });
        agent.scope().provide(choice.clone())?;
        Ok(choice)
    }

    fn set(&self, model: &str) {
        *dsh_sync::lock(&self.0) = Some(model.to_owned());
    }

    fn get(&self) -> Option<String> {
        dsh_sync::lock(&self.0).clone()
    }
}

/// The model `agent`'s next request uses: the one a client selected, else the configured one.
pub fn current(agent: &AgentHandle) -> String {
    agent
        .scope()
        .service::<Choice>()
        .and_then(|choice| choice.get())
        .unwrap_or_else(|| agent.model().to_owned())
}

/// Switches `agent` to `model` from its next request and logs it, so resume keeps it.
pub fn select(agent: &AgentHandle, model: &str) -> Result<(), HostError> {
    if current(agent) == model {
        return Ok(());
    }
    agent.log().append_data(
        &ModelSelected {
            model: model.to_owned(),
        },
        None,
    )?;
    Choice::of(agent)?.set(model);
    Ok(())
}

/// On resume and fork: the last model the log records as selected, applied again.
pub(crate) fn restore(agent: &AgentHandle) -> Result<(), HostError> {
    if let Some(selected) = latest_selection(agent.log()) {
        Choice::of(agent)?.set(&selected.model);
    }
    Ok(())
}

/// The latest readable `model/selected` of `log` (O(1): the latest one, unless it does not
/// decode).
fn latest_selection(log: &SessionLog) -> Option<ModelSelected> {
    let latest = log.last_of_kind(ModelSelected::KIND)?;
    latest.decode::<ModelSelected>()?.ok().or_else(|| {
        // An unreadable latest selection: an earlier one stands (dsh never writes one).
        log.events()
            .ok()?
            .iter()
            .rev()
            .find_map(|event| event.decode::<ModelSelected>()?.ok())
    })
}

#[cfg(test)]
mod tests {
    use dsh_session::SessionHeader;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_latest_readable_selection_is_restored() {
        let log = SessionLog::in_memory(SessionHeader::new("s", None));
        assert_eq!(latest_selection(&log), None);
        let select = |model: &str| {
            log.append_data(
                &ModelSelected {
                    model: model.into(),
                },
                None,
            )
            .unwrap();
        };
        select("a");
        log.append("other/event", json!({}), None).unwrap();
        select("b");
        assert_eq!(
            latest_selection(&log).map(|s| s.model).as_deref(),
            Some("b")
        );
        // An unreadable latest selection falls back to the one before it.
        log.append("model/selected", json!({"model": 7}), None)
            .unwrap();
        assert_eq!(
            latest_selection(&log).map(|s| s.model).as_deref(),
            Some("b")
        );
    }
}
