//! The client as the user-questions provider (`ask_user_question`, plan review, MCP
//! elicitation). ACP v1 has elicitation: when the client advertised
//! `clientCapabilities.elicitation.form`, each ask is one `elicitation/create` form (a question
//! with options is an `enum` — an array of them for multi-select —, one without is free text).
//! Otherwise the ask degrades to `session/request_permission` whose options are the answers,
//! one request per question (single choice; a question without options cannot be asked so).

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::CreateElicitationRequest;
use agent_client_protocol::v1::schema::PermissionOption;
use agent_client_protocol::v1::schema::PermissionOptionKind;
use agent_client_protocol::v1::schema::RequestPermissionOutcome;
use agent_client_protocol::v1::schema::RequestPermissionRequest;
use agent_client_protocol::v1::schema::ToolCallUpdate;
use agent_client_protocol::v1::schema::ToolCallUpdateFields;
use dsh_agent::AgentHandle;
use dsh_kernel::BoxFuture;
use dsh_user_questions::Answer;
use dsh_user_questions::Answers;
use dsh_user_questions::Question;
use dsh_user_questions::QuestionErrorCode;
use dsh_user_questions::QuestionRequest;
use dsh_user_questions::UserQuestionError;
use dsh_user_questions::UserQuestionProvider;
use dsh_user_questions::UserQuestions;
use serde_json::Map;
use serde_json::Value;
use serde_json::json;

/// Asks the session's client (the newest attached connection).
pub(crate) struct ClientQuestions {
    clients: crate::session::Clients,
    elicitation: bool,
}

/// Offers the client as the provider when the composition has a user-questions service and no
/// provider yet. Owned by `agent`'s scope: when that session goes, the next one offers again.
pub(crate) fn offer(agent: &AgentHandle, clients: crate::session::Clients, elicitation: bool) {
    let Some(service) = UserQuestions::for_scope(agent.scope()) else {
        return;
    };
    if service.has_provider() {
        return;
    }
    let provider = Arc::new(ClientQuestions {
        clients,
        elicitation,
    });
    if let Err(error) = service.register_provider(agent.scope(), provider) {
        tracing::debug!(%error, "user-questions provider already registered");
    }
}

fn failed(message: impl Into<String>) -> UserQuestionError {
    UserQuestionError::new(QuestionErrorCode::ProviderFailed, message)
}

/// The elicitation form for `questions`.
pub(crate) fn form(session_id: &str, questions: &[Question]) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for question in questions {
        let title = question
            .header
            .clone()
            .unwrap_or_else(|| question.question.clone());
        let description = match &question.detail {
            Some(detail) => format!("{}\n\n{detail}", question.question),
            None => question.question.clone(),
        };
        let labels: Vec<&str> = question.labels().collect();
        let property = if labels.is_empty() {
            json!({"type": "string", "title": title, "description": description})
        } else if question.is_multi_select() {
            json!({"type": "array", "title": title, "description": description,
                   "items": {"type": "string", "enum": labels}})
        } else {
            let one_of: Vec<Value> = question
                .options
                .iter()
                .flatten()
                .map(|o| {
                    let mut option = json!({"const": o.label, "title": o.label});
                    if let Some(description) = &o.description {
                        option["description"] = description.clone().into();
                    }
                    option
                })
                .collect();
            json!({"type": "string", "title": title, "description": description, "oneOf": one_of})
        };
        properties.insert(question.id.clone(), property);
        required.push(question.id.clone());
    }
    let message = match questions {
        [one] => one.question.clone(),
        _ => "Please answer these questions.".to_owned(),
    };
    json!({
        "mode": "form",
        "sessionId": session_id,
        "requestedSchema": {"type": "object", "properties": properties, "required": required},
        "message": message,
    })
}

/// Answers from an accepted form's `content`.
pub(crate) fn answers_from_form(questions: &[Question], content: &Map<String, Value>) -> Answers {
    let answers = questions
        .iter()
        .map(|question| match content.get(&question.id) {
            Some(Value::Array(items)) => Answer::selected(
                question.id.clone(),
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            ),
            Some(Value::String(text)) if question.labels().any(|l| l == text) => {
                Answer::selected(question.id.clone(), vec![text.clone()])
            }
            Some(Value::String(text)) if !text.trim().is_empty() => {
                Answer::custom(question.id.clone(), text.clone())
            }
            _ => Answer::selected(question.id.clone(), Vec::new()),
        })
        .collect();
    Answers { answers }
}

impl ClientQuestions {
    async fn elicit(
        connection: ConnectionTo<Client>,
        session_id: String,
        questions: Vec<Question>,
    ) -> Result<Answers, UserQuestionError> {
        let request: CreateElicitationRequest =
            serde_json::from_value(form(&session_id, &questions))
                .map_err(|e| failed(format!("cannot build the elicitation form: {e}")))?;
        let response = connection
            .send_request(request)
            .block_task()
            .await
            .map_err(|e| failed(format!("elicitation/create failed: {e}")))?;
        let response = serde_json::to_value(&response).map_err(|e| failed(e.to_string()))?;
        match response.get("action").and_then(Value::as_str) {
            Some("accept") => {
                let content = response
                    .get("content")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                let answers = answers_from_form(&questions, &content);
                dsh_user_questions::validate_answers(&questions, &answers).map_err(|reason| {
                    failed(format!("the client's answer was not valid: {reason}"))
                })?;
                Ok(answers)
            }
            _ => Err(UserQuestionError::cancelled()),
        }
    }

    async fn permission(
        connection: ConnectionTo<Client>,
        session_id: String,
        call_id: String,
        questions: Vec<Question>,
    ) -> Result<Answers, UserQuestionError> {
        let mut answers = Vec::new();
        for question in &questions {
            let labels: Vec<String> = question.labels().map(str::to_owned).collect();
            if labels.is_empty() {
                return Err(failed(format!(
                    "question {} has no options, and this client cannot take a free-text answer",
                    question.id
                )));
            }
            let options = labels
                .iter()
                .enumerate()
                .map(|(i, label)| {
                    PermissionOption::new(
                        format!("answer-{i}"),
                        label.clone(),
                        PermissionOptionKind::AllowOnce,
                    )
                })
                .collect();
            let fields = ToolCallUpdateFields::new().title(question.question.clone());
            let ask = RequestPermissionRequest::new(
                session_id.clone(),
                ToolCallUpdate::new(call_id.clone(), fields),
                options,
            );
            let response = connection
                .send_request(ask)
                .block_task()
                .await
                .map_err(|e| failed(format!("session/request_permission failed: {e}")))?;
            match response.outcome {
                RequestPermissionOutcome::Selected(selected) => {
                    let index = selected
                        .option_id
                        .0
                        .strip_prefix("answer-")
                        .and_then(|i| i.parse::<usize>().ok());
                    let Some(label) = index.and_then(|i| labels.get(i)) else {
                        return Err(failed("the client chose an option that was not offered"));
                    };
                    answers.push(Answer::selected(question.id.clone(), vec![label.clone()]));
                }
                _ => return Err(UserQuestionError::cancelled()),
            }
        }
        Ok(Answers { answers })
    }
}

impl UserQuestionProvider for ClientQuestions {
    fn ask(
        &self,
        request: QuestionRequest,
    ) -> BoxFuture<'static, Result<Answers, UserQuestionError>> {
        let connection = self.clients.current();
        let elicitation = self.elicitation;
        Box::pin(async move {
            let Some(connection) = connection else {
                return Err(failed("no client is attached to the session"));
            };
            let Some(caller) = request.caller else {
                return Err(UserQuestionError::new(
                    QuestionErrorCode::AskMissingAgent,
                    "ACP user interaction requires an agent-owned session",
                ));
            };
            // The ACP session id is the agent id.
            let session_id = caller.agent_id;
            if elicitation {
                Self::elicit(connection, session_id, request.questions).await
            } else {
                let call_id = format!("question-{}", uuid::Uuid::new_v4());
                Self::permission(connection, session_id, call_id, request.questions).await
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use dsh_user_questions::QuestionOption;
    use pretty_assertions::assert_eq;

    use super::*;

    fn questions() -> Vec<Question> {
        let mut pick = Question::new("mode", "Which mode?");
        pick.options = Some(vec![
            QuestionOption::new("Fast (Recommended)", Some("quick")),
            QuestionOption::new("Slow", None),
        ]);
        let mut many = Question::new("langs", "Which languages?");
        many.options = Some(vec![
            QuestionOption::new("Rust", None),
            QuestionOption::new("Go", None),
        ]);
        many.multi_select = Some(true);
        let free = Question::new("name", "Your name?");
        vec![pick, many, free]
    }

    #[test]
    fn the_form_is_a_valid_acp_elicitation_request() {
        let value = form("sess-1", &questions());
        let typed: CreateElicitationRequest = serde_json::from_value(value.clone()).unwrap();
        let back = serde_json::to_value(&typed).unwrap();
        assert_eq!(back["mode"], "form");
        assert_eq!(back["sessionId"], "sess-1");
        let props = &back["requestedSchema"]["properties"];
        assert_eq!(props["mode"]["oneOf"][0]["const"], "Fast (Recommended)");
        assert_eq!(props["langs"]["type"], "array");
        assert_eq!(props["name"]["type"], "string");
    }

    #[test]
    fn form_content_maps_to_answers() {
        let content = json!({"mode": "Slow", "langs": ["Rust", "Go"], "name": "Ada"});
        let answers = answers_from_form(&questions(), content.as_object().unwrap());
        assert_eq!(
            answers.to_json(),
            r#"{"answers":[{"id":"mode","selected":["Slow"]},{"id":"langs","selected":["Rust","Go"]},{"id":"name","selected":[],"custom":"Ada"}]}"#
        );
    }
}
