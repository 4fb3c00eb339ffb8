use std::sync::Mutex;

use dsh_kernel::BoxFuture;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use dsh_user_questions::Answer;
use dsh_user_questions::Answers;
use dsh_user_questions::UserQuestionProvider;
use pretty_assertions::assert_eq;

use super::*;

struct Recording {
    seen: Mutex<Vec<QuestionRequest>>,
}

impl UserQuestionProvider for Recording {
    fn ask(
        &self,
        request: QuestionRequest,
    ) -> BoxFuture<'static, Result<Answers, UserQuestionError>> {
        self.seen.lock().unwrap().push(request);
        Box::pin(async {
            Ok(Answers {
                answers: vec![Answer::selected("q", vec!["A".into()])],
            })
        })
    }
}

fn setup() -> (Scope, Arc<ToolRegistry>, Arc<UserQuestions>) {
    let root = Scope::root();
    let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let service = UserQuestions::install(&root).unwrap();
    register(&tools, &root, Some(service.clone())).unwrap();
    (root, tools, service)
}

async fn call(tools: &ToolRegistry, args: Value, signal: CancellationToken) -> (String, bool) {
    let result = tools
        .execute(ToolCallInput::new("c1", NAME, args, signal))
        .await;
    (result.text(), result.is_error)
}

#[tokio::test]
async fn c4_items_1_2_4_errors_through_the_seam() {
    let (_root, tools, _service) = setup();
    // Agent-less: the root service still answers (no provider).
    assert_eq!(
        call(&tools, json!({"questions": []}), CancellationToken::new()).await,
        (
            "Error: ask_user_question requires at least one question".into(),
            true
        )
    );
    let one = json!({"questions": [{"id": "q", "question": "Pick?"}]});
    assert_eq!(
        call(&tools, one.clone(), CancellationToken::new()).await,
        (
            "Error: no user-questions provider is registered".into(),
            true
        )
    );
    let aborted = CancellationToken::new();
    aborted.cancel();
    // An already-aborted call stops in the pipeline before the body; the seam's own text
    // (`ask_user_question was aborted before the user answered`) is tested in dsh-user-questions.
    let (text, error) = call(&tools, one, aborted).await;
    assert!(error);
    assert_eq!(
        text,
        format!(
            "Error: {}",
            dsh_tools::ToolError::aborted_before_dispatch().message
        )
    );
}

#[tokio::test]
async fn c4_items_5_6_the_answer_text_and_multi_select() {
    let (root, tools, service) = setup();
    let provider = Arc::new(Recording {
        seen: Mutex::new(Vec::new()),
    });
    service.register_provider(&root, provider.clone()).unwrap();
    let args = json!({"questions": [
        {"id": "q", "question": "Pick?", "header": "Choose", "options": [{"label": "A", "description": "a"}, {"label": "B"}], "multi_select": true, "extra": 1},
        {"id": "r", "question": "Plain?"}
    ]});
    let (text, error) = call(&tools, args, CancellationToken::new()).await;
    assert_eq!(
        (text.as_str(), error),
        (r#"{"answers":[{"id":"q","selected":["A"]}]}"#, false)
    );
    let seen = provider.seen.lock().unwrap();
    let questions = &seen[0].questions;
    assert_eq!(questions[0].multi_select, Some(true));
    assert_eq!(questions[1].multi_select, None);
    assert_eq!(questions[0].header.as_deref(), Some("Choose"));
    assert_eq!(
        questions[0].options.as_ref().unwrap()[0]
            .description
            .as_deref(),
        Some("a")
    );
    assert!(
        questions
            .iter()
            .all(|q| q.detail.is_none() && q.intent.is_none())
    );
}

struct Dismissing;

impl UserQuestionProvider for Dismissing {
    fn ask(&self, _: QuestionRequest) -> BoxFuture<'static, Result<Answers, UserQuestionError>> {
        Box::pin(async { Err(UserQuestionError::cancelled()) })
    }
}

#[tokio::test]
async fn c4_item_9_a_client_cancel_is_the_cancelled_text() {
    let (root, tools, service) = setup();
    service
        .register_provider(&root, Arc::new(Dismissing))
        .unwrap();
    let args = json!({"questions": [{"id": "q", "question": "Pick?"}]});
    assert_eq!(
        call(&tools, args, CancellationToken::new()).await,
        ("Error: the user cancelled ask_user_question".into(), true)
    );
}
