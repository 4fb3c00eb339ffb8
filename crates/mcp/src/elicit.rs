//! `elicitation/create` from a server, asked through the user-questions seam: one question per
//! field of the requested form, the answers folded back into the content object the schema
//! describes. Without an answerer (or when the user gives up) the server hears decline/cancel.

use dsh_user_questions::Answer;
use dsh_user_questions::QuestionErrorCode;
use dsh_user_questions::QuestionOption;
use dsh_user_questions::QuestionRequest;
use dsh_user_questions::UserQuestions;
use rmcp::model::ElicitResult;
use rmcp::model::ElicitationAction;
use serde_json::Map;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// How one field's answer becomes a JSON value.
#[derive(Debug, Clone, PartialEq)]
enum Field {
    Text,
    Integer,
    Number,
    Boolean,
    /// Option label → the value the schema wants.
    Choice(Vec<(String, Value)>),
    Choices(Vec<(String, Value)>),
}

#[derive(Debug, Clone)]
struct FormField {
    key: String,
    field: Field,
    default: Option<Value>,
    question: dsh_user_questions::Question,
}

const YES: &str = "Yes";
const NO: &str = "No";

/// `(label, value)` pairs from `enum` (+ legacy `enumNames`) or `oneOf`/`anyOf` `{const, title}`.
fn choices(schema: &Value) -> Option<Vec<(String, Value)>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let names = schema.get("enumNames").and_then(Value::as_array);
        return Some(
            values
                .iter()
                .enumerate()
                .map(|(i, value)| {
                    let label = names
                        .and_then(|n| n.get(i))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| plain(value));
                    (label, value.clone())
                })
                .collect(),
        );
    }
    let list = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)?;
    Some(
        list.iter()
            .filter_map(|entry| {
                let value = entry.get("const")?.clone();
                let label = entry
                    .get("title")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| plain(&value));
                Some((label, value))
            })
            .collect(),
    )
}

fn plain(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

fn form_fields(message: &str, schema: &Value) -> Vec<FormField> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut fields = Vec::new();
    for (key, property) in properties {
        let title = property.get("title").and_then(Value::as_str);
        let description = property.get("description").and_then(Value::as_str);
        let mut question =
            dsh_user_questions::Question::new(key.clone(), description.or(title).unwrap_or(key));
        question.header = title.map(str::to_owned);
        let kind = property.get("type").and_then(Value::as_str).unwrap_or("");
        let field = match kind {
            "boolean" => Field::Boolean,
            "integer" => Field::Integer,
            "number" => Field::Number,
            "array" => property
                .get("items")
                .and_then(choices)
                .map_or(Field::Text, Field::Choices),
            _ => choices(property).map_or(Field::Text, Field::Choice),
        };
        let labels: Option<Vec<String>> = match &field {
            Field::Boolean => Some(vec![YES.to_owned(), NO.to_owned()]),
            Field::Choice(c) | Field::Choices(c) => {
                Some(c.iter().map(|(l, _)| l.clone()).collect())
            }
            _ => None,
        };
        question.options = labels.map(|labels| {
            labels
                .into_iter()
                .map(|label| QuestionOption::new(label, None))
                .collect()
        });
        if matches!(field, Field::Choices(_)) {
            question.multi_select = Some(true);
        }
        fields.push(FormField {
            key: key.clone(),
            field,
            default: property.get("default").cloned(),
            question,
        });
    }
    // The server's explanation travels with the first question.
    if let Some(first) = fields.first_mut() {
        first.question.detail = Some(message.to_owned());
    }
    fields
}

/// One answer as the schema's value; `None` when the user left it empty (the default, if
/// any, then applies) or gave something the field cannot hold.
fn value_of(field: &Field, answer: &Answer) -> Result<Option<Value>, String> {
    let custom = answer
        .custom
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let pick = |options: &[(String, Value)], label: &str| {
        options
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, v)| v.clone())
    };
    Ok(match field {
        Field::Text => custom
            .map(|t| Value::String(t.to_owned()))
            .or_else(|| answer.selected.first().map(|s| Value::String(s.clone()))),
        Field::Integer | Field::Number => {
            let Some(text) = custom.or(answer.selected.first().map(String::as_str)) else {
                return Ok(None);
            };
            let number: serde_json::Number = if matches!(field, Field::Integer) {
                text.parse::<i64>()
                    .map_err(|_| format!("{text:?} is not a whole number"))?
                    .into()
            } else {
                text.parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .ok_or_else(|| format!("{text:?} is not a number"))?
            };
            Some(Value::Number(number))
        }
        Field::Boolean => match answer.selected.first().map(String::as_str).or(custom) {
            Some(YES) => Some(Value::Bool(true)),
            Some(NO) => Some(Value::Bool(false)),
            Some(other) => match other.to_ascii_lowercase().as_str() {
                "yes" | "true" | "y" => Some(Value::Bool(true)),
                "no" | "false" | "n" => Some(Value::Bool(false)),
                _ => return Err(format!("{other:?} is neither yes nor no")),
            },
            None => None,
        },
        Field::Choice(options) => answer
            .selected
            .first()
            .and_then(|label| pick(options, label))
            .or_else(|| custom.map(|t| Value::String(t.to_owned()))),
        Field::Choices(options) => {
            let picked: Vec<Value> = answer
                .selected
                .iter()
                .filter_map(|label| pick(options, label))
                .collect();
            (!picked.is_empty()).then_some(Value::Array(picked))
        }
    })
}

fn reply(action: ElicitationAction, content: Option<Value>) -> ElicitResult {
    let result = ElicitResult::new(action);
    match content {
        Some(content) => result.with_content(content),
        None => result,
    }
}

/// Asks the user for a form elicitation. An answerer that is missing or fails declines; the
/// user (or the server's cancellation) aborting cancels.
pub(crate) async fn ask_form(
    questions: &UserQuestions,
    server: &str,
    message: &str,
    schema: &Value,
    signal: CancellationToken,
) -> ElicitResult {
    let fields = form_fields(message, schema);
    if fields.is_empty() {
        // Nothing to fill in: the form is a confirmation.
        let mut question = dsh_user_questions::Question::new("confirm", message);
        question.header = Some(format!("MCP server {server}"));
        question.options = Some(vec![
            QuestionOption::new(YES, None),
            QuestionOption::new(NO, None),
        ]);
        let request = QuestionRequest {
            questions: vec![question],
            caller: None,
            signal,
        };
        return match questions.ask(request).await {
            Ok(answers) => {
                let yes = answers
                    .answers
                    .first()
                    .is_some_and(|a| a.selected.first().map(String::as_str) == Some(YES));
                if yes {
                    reply(ElicitationAction::Accept, Some(Value::Object(Map::new())))
                } else {
                    reply(ElicitationAction::Decline, None)
                }
            }
            Err(e) => failed(server, &e),
        };
    }
    let request = QuestionRequest {
        questions: fields.iter().map(|f| f.question.clone()).collect(),
        caller: None,
        signal,
    };
    let answers = match questions.ask(request).await {
        Ok(answers) => answers,
        Err(e) => return failed(server, &e),
    };
    let mut content = Map::new();
    for field in &fields {
        let answer = answers.answers.iter().find(|a| a.id == field.key);
        let value = match answer.map(|a| value_of(&field.field, a)) {
            Some(Ok(value)) => value,
            Some(Err(reason)) => {
                tracing::warn!(server, field = %field.key, %reason, "elicitation answer does not fit its field; declining");
                return reply(ElicitationAction::Decline, None);
            }
            None => None,
        };
        if let Some(value) = value.or_else(|| field.default.clone()) {
            content.insert(field.key.clone(), value);
        }
    }
    reply(ElicitationAction::Accept, Some(Value::Object(content)))
}

fn failed(server: &str, error: &dsh_user_questions::UserQuestionError) -> ElicitResult {
    tracing::debug!(server, code = error.code.as_str(), message = %error.message, "elicitation not answered");
    match error.code {
        QuestionErrorCode::AskAborted => reply(ElicitationAction::Cancel, None),
        _ => reply(ElicitationAction::Decline, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_become_questions_and_answers_fold_back() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "title": "Name", "description": "Your name"},
            "ok": {"type": "boolean"},
            "n": {"type": "integer", "default": 42},
            "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}]},
            "fish": {"type": "array", "items": {"anyOf": [{"const": "f1", "title": "Tuna"}, {"const": "f2", "title": "Trout"}]}}
        }});
        let fields = form_fields("Please fill in", &schema);
        assert_eq!(fields.len(), 5);
        assert_eq!(fields[0].question.question, "Your name");
        assert_eq!(fields[0].question.detail.as_deref(), Some("Please fill in"));
        assert_eq!(
            fields[1].question.labels().collect::<Vec<_>>(),
            ["Yes", "No"]
        );
        assert!(fields[4].question.is_multi_select());
        let v = |i: usize, a: Answer| value_of(&fields[i].field, &a);
        assert_eq!(
            v(0, Answer::custom("name", " Ada ")),
            Ok(Some(json!("Ada")))
        );
        assert_eq!(
            v(1, Answer::selected("ok", vec!["No".into()])),
            Ok(Some(json!(false)))
        );
        assert_eq!(v(2, Answer::custom("n", "7")), Ok(Some(json!(7))));
        assert!(v(2, Answer::custom("n", "seven")).is_err());
        assert_eq!(v(2, Answer::custom("n", "")), Ok(None));
        assert_eq!(
            v(3, Answer::selected("hero", vec!["Superman".into()])),
            Ok(Some(json!("h1")))
        );
        assert_eq!(
            v(
                4,
                Answer::selected("fish", vec!["Trout".into(), "Tuna".into()])
            ),
            Ok(Some(json!(["f2", "f1"])))
        );
    }
}
