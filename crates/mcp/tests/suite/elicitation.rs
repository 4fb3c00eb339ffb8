//! Elicitation against the reference server: its form arrives as questions on the
//! user-questions seam, and the answers come back as the content its schema describes.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_mcp::McpOptions;
use dsh_mcp::McpServer;
use dsh_user_questions::Answer;
use dsh_user_questions::Answers;
use dsh_user_questions::QuestionRequest;
use dsh_user_questions::UserQuestionError;
use dsh_user_questions::UserQuestionProvider;
use dsh_user_questions::UserQuestions;
use futures::future::BoxFuture;
use serde_json::json;

use super::support::*;

/// Answers a few fields, leaves the rest empty, and keeps what it was asked.
#[derive(Default)]
struct Person(Mutex<Vec<dsh_user_questions::Question>>);

impl UserQuestionProvider for Person {
    fn ask(
        &self,
        request: QuestionRequest,
    ) -> BoxFuture<'static, Result<Answers, UserQuestionError>> {
        self.0
            .lock()
            .unwrap()
            .extend(request.questions.iter().cloned());
        let answers = request
            .questions
            .iter()
            .map(|q| match q.id.as_str() {
                "name" => Answer::custom("name", "Ada Lovelace"),
                "check" => Answer::selected("check", vec!["Yes".into()]),
                "integer" => Answer::custom("integer", "7"),
                "titledSingleSelectEnum" => {
                    Answer::selected("titledSingleSelectEnum", vec!["Wonder Woman".into()])
                }
                "titledMultipleSelectEnum" => {
                    Answer::selected("titledMultipleSelectEnum", vec!["Salmon".into()])
                }
                "legacyTitledEnum" => Answer::selected("legacyTitledEnum", vec!["Dogs".into()]),
                other => Answer::custom(other, ""),
            })
            .collect();
        Box::pin(async move { Ok(Answers { answers }) })
    }
}

async fn trigger(h: &Harness) -> String {
    let input = dsh_tools::ToolCallInput::new(
        "call-elicit",
        "mcp__everything__trigger-elicitation-request",
        json!({}),
        dsh_tools::CancellationToken::new(),
    );
    let result = tokio::time::timeout(Duration::from_secs(30), h.registry.execute(input))
        .await
        .unwrap();
    assert!(!result.is_error, "{}", result.text());
    result.text()
}

#[tokio::test]
async fn a_form_elicitation_is_asked_as_questions_and_answered_in_the_schema() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let questions = UserQuestions::install(&h.root).unwrap();
    let person = Arc::new(Person::default());
    let _provider = questions
        .register_provider(&h.root, person.clone())
        .unwrap();
    let options = McpOptions {
        questions: Some(questions),
        ..McpOptions::default()
    };
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &options,
    )
    .await
    .unwrap();
    let text = trigger(&h).await;
    assert!(text.contains("- Name: Ada Lovelace"), "{text}");
    assert!(text.contains("- Agreed to terms: true"), "{text}");
    assert!(text.contains("- Favorite Integer: 7"), "{text}");
    assert!(text.contains("\"legacyTitledEnum\": \"pet-2\""), "{text}");
    // Choices travel as the schema's values; empty answers fall back to the defaults.
    assert!(text.contains("\"hero-3\""), "{text}");
    assert!(text.contains("\"fish-2\""), "{text}");
    assert!(text.contains("It was a dark and stormy night."), "{text}");

    let asked = person.0.lock().unwrap().clone();
    let ids: Vec<&str> = asked.iter().map(|q| q.id.as_str()).collect();
    assert!(ids.starts_with(&["name", "check"]), "{ids:?}");
    assert_eq!(
        asked[0].detail.as_deref(),
        Some("Please provide inputs for the following fields:")
    );
    assert_eq!(asked[0].question, "Your full, legal name");
    let hero = asked
        .iter()
        .find(|q| q.id == "titledSingleSelectEnum")
        .unwrap();
    assert_eq!(
        hero.labels().collect::<Vec<_>>(),
        ["Superman", "Green Lantern", "Wonder Woman"]
    );
    assert!(
        asked
            .iter()
            .find(|q| q.id == "untitledMultipleSelectEnum")
            .unwrap()
            .is_multi_select()
    );
    server.dispose();
}

#[tokio::test]
async fn with_nobody_to_answer_the_server_hears_a_decline() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    // The seam is there (so elicitation is offered) but no front-end answers questions.
    let questions = UserQuestions::install(&h.root).unwrap();
    let options = McpOptions {
        questions: Some(questions),
        ..McpOptions::default()
    };
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &options,
    )
    .await
    .unwrap();
    let text = trigger(&h).await;
    assert!(text.contains("User declined"), "{text}");
    server.dispose();
}

#[tokio::test]
async fn without_the_seam_elicitation_is_not_offered() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &McpOptions::default(),
    )
    .await
    .unwrap();
    // The reference server registers its elicitation tool only for clients that offer it.
    assert!(
        h.registry
            .get("mcp__everything__trigger-elicitation-request", None)
            .is_none()
    );
    server.dispose();
}
