//! The turn/step driver (§2.5) and the pre-step (§2.6).

use std::collections::BTreeMap;
use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::ToolSchema;
use dsh_session::SurfaceIntent;
use dsh_session::data::InboxTarget;
use dsh_session::data::StepEnd;
use dsh_session::data::StepStart;
use dsh_session::data::TurnEnd;
use dsh_session::data::TurnEndReason;
use dsh_session::data::UserMessage;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentHandle;
use crate::agent::OpenedTurn;
use crate::agent::is_snapshot_source;
use crate::error::TurnError;
use crate::error::error_chain;
use crate::hooks::AgentEvent;
use crate::hooks::PreStepDecision;
use crate::hooks::PreStepInput;
use crate::hooks::TurnStopping;
use crate::prompt::Assembly;
use crate::prompt::HARNESS_IDENTITY;
use crate::prompt::RUNTIME_CONTEXT_NONE;
use crate::prompt::SNAPSHOT_PLUGIN;
use crate::prompt::Section;
use crate::prompt::Slot;
use crate::prompt::assemble;
use crate::prompt::complete_section;
use crate::prompt::order_tools;
use crate::prompt::render_contexts;
use dsh_sync::lock;

/// The evaluated prompt inputs of one step.
pub(crate) struct StepAssembly {
    pub(crate) assembly: Assembly,
    pub(crate) vars: BTreeMap<String, String>,
    pub(crate) tools: Vec<ToolSchema>,
}

/// Throws (returns `Aborted`) when the activity was cancelled.
pub(crate) fn check(abort: &CancellationToken) -> Result<(), TurnError> {
    if abort.is_cancelled() {
        Err(TurnError::Aborted)
    } else {
        Ok(())
    }
}

enum Flow {
    /// The turn ended normally: start the next turn if work is pending.
    Continue,
    /// Blocked or an empty first claim: pending work parks until the next waking send.
    Park,
}

impl AgentHandle {
    /// `kick()`: runs turns while there is work, then converges (replaying a latched wake).
    pub(crate) async fn drive(self, first: Option<OpenedTurn>) {
        let mut next = first;
        loop {
            let more = match next.take() {
                Some(opened) => self.run_turn(opened).await,
                None => false,
            };
            if !self.finish_turn(more) {
                break;
            }
            next = self.open_turn();
        }
    }

    /// One turn after its synchronous head. Returns `true` when it ended normally, so pending
    /// work may start the next turn.
    async fn run_turn(&self, opened: OpenedTurn) -> bool {
        let OpenedTurn {
            turn,
            abort,
            claimed,
        } = opened;
        let mut ends: Option<TurnEndReason> = None;
        let mut step_no = 0u64;
        let outcome = self
            .turn_body(turn, &abort, claimed, &mut ends, &mut step_no)
            .await;
        let (reason, more) = match outcome {
            Ok(Flow::Continue) => (ends.unwrap_or(TurnEndReason::Completed), true),
            Ok(Flow::Park) => (ends.unwrap_or(TurnEndReason::Completed), false),
            Err(_) if abort.is_cancelled() => (
                TurnEndReason::Aborted {
                    reason: self.abort_cause(),
                },
                false,
            ),
            Err(TurnError::Aborted) => (
                TurnEndReason::Aborted {
                    reason: self.abort_cause(),
                },
                false,
            ),
            Err(TurnError::Failed(failure)) => {
                self.emit(AgentEvent::Error {
                    agent: self.inner.id.clone(),
                    turn,
                    step: step_no,
                    error: failure.clone(),
                });
                (TurnEndReason::Error { error: failure }, false)
            }
        };
        if let Err(error) = self.inner.log.append_data(&TurnEnd { turn, reason }, None) {
            tracing::error!(agent = %self.inner.id, %error, "cannot close turn {turn}");
            return false;
        }
        // The turn is over once its end is durable; the log's writer does the fsync.
        if let Err(error) = self.inner.log.sync().await {
            tracing::error!(agent = %self.inner.id, %error, "turn {turn} is not durable");
            return false;
        }
        more
    }

    async fn turn_body(
        &self,
        turn: u64,
        abort: &CancellationToken,
        claimed: Result<Vec<Message>, crate::AgentError>,
        ends: &mut Option<TurnEndReason>,
        step_no: &mut u64,
    ) -> Result<Flow, TurnError> {
        let mut pre_claimed = Some(claimed.map_err(|e| TurnError::unknown(error_chain(&e)))?);
        let mut target = InboxTarget::NextTurn;
        loop {
            check(abort)?;
            let step = *step_no + 1;
            let claimed = match pre_claimed.take() {
                Some(claimed) => claimed,
                None => self
                    .claim(target, turn)
                    .map_err(|e| TurnError::unknown(error_chain(&e)))?,
            };
            let (decision, assembly) = self.pre_step(claimed, turn, step, abort).await?;
            let messages = match decision {
                PreStepDecision::Reject => {
                    *ends = Some(TurnEndReason::Blocked);
                    return Ok(Flow::Park);
                }
                PreStepDecision::Enter(messages) => messages,
            };
            if ends.is_some() && messages.is_empty() {
                break;
            }
            if *step_no == 0 && messages.is_empty() {
                *ends = Some(TurnEndReason::Completed);
                return Ok(Flow::Park);
            }
            check(abort)?;
            self.inner
                .log
                .append_data(&StepStart { turn, step }, None)?;
            *step_no = step;
            let result = async {
                for message in messages {
                    self.note_entered(&message);
                    self.inner
                        .log
                        .append_data(&UserMessage(message), Some(SurfaceIntent::append()))?;
                }
                self.step(turn, step, &assembly, abort).await
            }
            .await;
            // The step is over once `step/end` is durable: a failed write fails the step.
            let closed = match self.inner.log.append_data(&StepEnd { turn, step }, None) {
                Ok(_) => self.inner.log.sync().await,
                Err(error) => Err(error),
            };
            let step_end = result?;
            closed?;
            if *ends != Some(TurnEndReason::MaxTokens) {
                *ends = step_end;
            }
            check(abort)?;
            if ends.is_some() && self.next_step_empty() {
                let event = Arc::new(TurnStopping {
                    agent: self.clone(),
                    turn,
                    signal: abort.clone(),
                });
                self.inner
                    .hooks
                    .turn_stopping
                    .dispatch(Some(&self.inner.scope), event)
                    .await
                    .map_err(|e| TurnError::unknown(error_chain(&e)))?;
                check(abort)?;
            }
            if ends.is_some() && self.next_step_empty() {
                break;
            }
            target = InboxTarget::NextStep;
        }
        Ok(Flow::Continue)
    }

    fn next_step_empty(&self) -> bool {
        lock(&self.inner.state).inbox.next_step.is_empty()
    }

    /// Assembles the prompt, decides the runtime-context snapshot and runs `agent/pre-step`.
    async fn pre_step(
        &self,
        claimed: Vec<Message>,
        turn: u64,
        step: u64,
        abort: &CancellationToken,
    ) -> Result<(PreStepDecision, StepAssembly), TurnError> {
        let assembly = self.assemble()?;
        check(abort)?;
        let mut messages = claimed;
        if let Some(snapshot) = self.snapshot(&assembly)? {
            messages.push(snapshot);
        }
        let input = PreStepInput {
            agent: self.clone(),
            messages,
            turn,
            step,
            signal: abort.clone(),
        };
        let decision = self
            .inner
            .hooks
            .pre_step
            .dispatch(Some(&self.inner.scope), input, |input| {
                Box::pin(async move { Ok(PreStepDecision::Enter(input.messages)) })
            })
            .await
            .map_err(|e| TurnError::unknown(error_chain(&e)))?;
        check(abort)?;
        Ok((decision, assembly))
    }

    fn assemble(&self) -> Result<StepAssembly, TurnError> {
        let prompt = &self.inner.prompt;
        let mut sections = Vec::new();
        if prompt.include_harness_identity {
            sections.push(Section::new(
                "harness:identity",
                Slot::Identity,
                HARNESS_IDENTITY,
            ));
        }
        sections.push(Section::new(
            "deployment:persona",
            Slot::Persona,
            prompt.persona.clone(),
        ));
        let (registered, mut contexts) = match &self.inner.prompts {
            Some(registry) => registry.visible(&self.inner.scope),
            None => (Vec::new(), Vec::new()),
        };
        // A registered complete section (a preset's complete persona) is the whole prompt.
        let complete =
            complete_section(&registered).map_err(|e| TurnError::unknown(e.to_string()))?;
        if prompt.persona_complete {
            sections.retain(|s| s.name == "deployment:persona");
        } else if let Some(complete) = complete {
            sections = vec![complete];
        } else {
            sections.extend(registered);
            sections.extend(prompt.sections.iter().cloned());
        }
        contexts.extend(prompt.contexts.iter().cloned());
        let suppressed = self
            .inner
            .prompts
            .as_ref()
            .is_some_and(|registry| registry.contexts_suppressed(&self.inner.scope));
        if !prompt.include_runtime_context || suppressed {
            contexts.clear();
        }
        let mut vars = prompt.variables.clone();
        vars.insert("provider".into(), self.inner.provider.clone());
        vars.insert("model".into(), self.inner.model.clone());
        if let Some(cwd) = &self.inner.cwd {
            vars.insert("cwd".into(), cwd.clone());
        }
        let provider = prompt.tool_schemas.clone().or_else(|| {
            self.inner
                .prompts
                .as_ref()
                .and_then(|registry| registry.tool_schemas(&self.inner.scope))
        });
        let schemas = match &provider {
            Some(provider) => provider(&self.inner.scope).map_err(TurnError::unknown)?,
            None => self
                .inner
                .tools
                .schemas(Some(&self.inner.scope))
                .map_err(|e| TurnError::unknown(error_chain(&e)))?,
        };
        let tools = order_tools(schemas, prompt.tool_order.as_deref())
            .map_err(|e| TurnError::unknown(e.to_string()))?;
        Ok(StepAssembly {
            assembly: assemble(&sections, &contexts, &self.inner.scope),
            vars,
            tools,
        })
    }

    /// The runtime-context snapshot message due at this step, if any (§2.6 step 3).
    fn snapshot(&self, step: &StepAssembly) -> Result<Option<Message>, TurnError> {
        let rendered = render_contexts(&step.assembly, &step.vars)
            .map_err(|e| TurnError::unknown(e.to_string()))?;
        // The latest snapshot still in the history, from the log's per-source index (a backward
        // scan here cost O(history) on every step).
        let retained = self
            .inner
            .log
            .latest_message_from_plugin(SNAPSHOT_PLUGIN)
            .filter(|m| is_snapshot_source(&m.source))
            .map(|m| dsh_protocol::text_of(&m.content));
        let message = match rendered {
            Some((text, sections)) => {
                let sections: Vec<Value> = sections
                    .into_iter()
                    .map(|(name, text)| json!({"name": name, "text": text}))
                    .collect();
                let source = MessageSource::plugin(SNAPSHOT_PLUGIN)
                    .with("form", "snapshot")
                    .with("sections", sections);
                Message::user(vec![ContentBlock::text(text)], source)
            }
            None if retained.is_none() && !self.snapshot_ever_logged() => return Ok(None),
            None => Message::user(
                vec![ContentBlock::text(RUNTIME_CONTEXT_NONE)],
                MessageSource::plugin(SNAPSHOT_PLUGIN),
            ),
        };
        if retained.as_deref() == Some(dsh_protocol::text_of(&message.content).as_str()) {
            return Ok(None);
        }
        Ok(Some(message))
    }
}
