use std::sync::atomic::AtomicUsize;

use pretty_assertions::assert_eq;

use super::*;

struct Fixed {
    answers: Answers,
    calls: AtomicUsize,
}

impl UserQuestionProvider for Fixed {
    fn ask(
        &self,
        request: QuestionRequest,
    ) -> BoxFuture<'static, Result<Answers, UserQuestionError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let answers = self.answers.clone();
        let _ = request;
        Box::pin(async move { Ok(answers) })
    }
}

struct Never;

impl UserQuestionProvider for Never {
    fn ask(&self, _: QuestionRequest) -> BoxFuture<'static, Result<Answers, UserQuestionError>> {
        Box::pin(std::future::pending())
    }
}

struct Directory(CallerStanding);

impl AgentDirectory for Directory {
    fn standing(&self, _: &Caller) -> CallerStanding {
        self.0
    }
}

fn fixed(answers: Answers) -> Arc<Fixed> {
    Arc::new(Fixed {
        answers,
        calls: AtomicUsize::new(0),
    })
}

fn request(questions: Vec<Question>) -> QuestionRequest {
    QuestionRequest {
        questions,
        caller: None,
        signal: CancellationToken::new(),
    }
}

fn one() -> Vec<Question> {
    let mut q = Question::new("q", "Pick one");
    q.options = Some(vec![
        QuestionOption::new("A", None),
        QuestionOption::new("B", Some("b")),
    ]);
    vec![q]
}

#[tokio::test]
async fn checks_run_in_upstream_order_with_exact_messages() {
    let root = Scope::root();
    let service = UserQuestions::install(&root).unwrap();
    // 1: an aborted signal wins over everything, even an empty request.
    let aborted = QuestionRequest {
        signal: {
            let t = CancellationToken::new();
            t.cancel();
            t
        },
        ..request(Vec::new())
    };
    let error = service.ask(aborted).await.unwrap_err();
    assert_eq!(
        (error.code, error.message.as_str()),
        (QuestionErrorCode::AskAborted, ABORTED)
    );
    // 2: empty.
    let error = service.ask(request(Vec::new())).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "ask_user_question requires at least one question"
    );
    // 7: no provider.
    let error = service.ask(request(one())).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "no user-questions provider is registered"
    );
    assert_eq!(error.code.as_str(), "NO_PROVIDER");
}

#[tokio::test]
async fn a_delegated_caller_is_refused_before_the_provider() {
    let root = Scope::root();
    let service = UserQuestions::install(&root).unwrap();
    let provider = fixed(Answers::default());
    service.register_provider(&root, provider.clone()).unwrap();
    let agent = root
        .child(dsh_kernel::ScopeKind::Agent, "agent:child")
        .unwrap();
    agent
        .provide::<dyn AgentDirectory>(Arc::new(Directory(CallerStanding::Delegated)))
        .unwrap();
    let mut req = request(one());
    req.caller = Some(Caller {
        agent_id: "child".into(),
        scope: agent.clone(),
    });
    let error = service.ask(req.clone()).await.unwrap_err();
    assert_eq!(error.code, QuestionErrorCode::DelegatedCaller);
    assert_eq!(error.message, DELEGATED);
    assert_eq!(provider.calls.load(Ordering::SeqCst), 0);

    let stale = root
        .child(dsh_kernel::ScopeKind::Agent, "agent:stale")
        .unwrap();
    stale
        .provide::<dyn AgentDirectory>(Arc::new(Directory(CallerStanding::NotLive)))
        .unwrap();
    req.caller = Some(Caller {
        agent_id: "stale".into(),
        scope: stale,
    });
    let error = service.ask(req).await.unwrap_err();
    assert_eq!(error.message, NOT_LIVE);
}

#[tokio::test]
async fn intents_must_name_an_option_and_carry_detail() {
    let root = Scope::root();
    let service = UserQuestions::install(&root).unwrap();
    let mut questions = one();
    questions[0].intent = Some(QuestionIntent::PlanReview {
        approve: "Approve".into(),
    });
    let error = service.ask(request(questions.clone())).await.unwrap_err();
    assert_eq!(
        error.message,
        "question q declares intent plan-review whose approve label \"Approve\" names none of its options"
    );
    questions[0].intent = Some(QuestionIntent::PlanReview {
        approve: "A".into(),
    });
    let error = service.ask(request(questions.clone())).await.unwrap_err();
    assert_eq!(
        error.message,
        "question q declares intent plan-review without the detail it reviews"
    );
    questions[0].detail = Some("# Plan".into());
    let error = service.ask(request(questions)).await.unwrap_err();
    assert_eq!(error.code, QuestionErrorCode::NoProvider);
}

#[tokio::test]
async fn one_provider_answers_and_a_second_is_refused_until_the_first_is_disposed() {
    let root = Scope::root();
    let service = UserQuestions::install(&root).unwrap();
    let owner = root.child(dsh_kernel::ScopeKind::Plugin, "tui").unwrap();
    let answers = Answers {
        answers: vec![Answer::selected("q", vec!["A".into()])],
    };
    service
        .register_provider(&owner, fixed(answers.clone()))
        .unwrap();
    let error = service
        .register_provider(&root, fixed(Answers::default()))
        .err()
        .unwrap();
    assert_eq!(
        error.message,
        "a user-questions provider is already registered"
    );
    assert_eq!(error.code, QuestionErrorCode::DuplicateProvider);
    let got = service.ask(request(one())).await.unwrap();
    assert_eq!(
        got.to_json(),
        r#"{"answers":[{"id":"q","selected":["A"]}]}"#
    );
    owner.dispose();
    assert!(!service.has_provider());
    service.register_provider(&root, fixed(answers)).unwrap();
}

#[tokio::test]
async fn a_turn_abort_while_waiting_rejects_with_the_abort_text() {
    let root = Scope::root();
    let service = UserQuestions::install(&root).unwrap();
    service.register_provider(&root, Arc::new(Never)).unwrap();
    let req = request(one());
    let signal = req.signal.clone();
    let pending = service.ask(req);
    signal.cancel();
    let error = pending.await.unwrap_err();
    assert_eq!(error.code, QuestionErrorCode::AskAborted);
}

#[test]
fn multi_select_travels_as_camel_case_and_absent_stays_absent() {
    let mut q = Question::new("m", "Which?");
    let plain = serde_json::to_value(&q).unwrap();
    assert_eq!(plain, serde_json::json!({"id": "m", "question": "Which?"}));
    q.multi_select = Some(true);
    let multi = serde_json::to_value(&q).unwrap();
    assert_eq!(multi["multiSelect"], true);
}

#[test]
fn answers_from_a_client_are_validated_like_the_web_provider() {
    let mut questions = one();
    let ok = Answers {
        answers: vec![Answer::selected("q", vec!["A".into()])],
    };
    assert_eq!(validate_answers(&questions, &ok), Ok(()));
    let not_an_option = Answers {
        answers: vec![Answer::selected("q", vec!["Z".into()])],
    };
    assert_eq!(
        validate_answers(&questions, &not_an_option)
            .unwrap_err()
            .to_string(),
        "\"Z\" is not an option of question \"q\""
    );
    let two = Answers {
        answers: vec![Answer::selected("q", vec!["A".into(), "B".into()])],
    };
    assert_eq!(
        validate_answers(&questions, &two).unwrap_err().to_string(),
        "question \"q\" takes one choice or one custom answer"
    );
    questions[0].multi_select = Some(true);
    assert_eq!(validate_answers(&questions, &two), Ok(()));
    let dup = Answers {
        answers: vec![Answer::selected("q", vec!["A".into(), "A".into()])],
    };
    assert_eq!(
        validate_answers(&questions, &dup).unwrap_err().to_string(),
        "duplicate label \"A\" for question \"q\""
    );
    let blank = Answers {
        answers: vec![Answer::custom("q", "  ")],
    };
    assert_eq!(
        validate_answers(&questions, &blank)
            .unwrap_err()
            .to_string(),
        "blank custom answer for question \"q\""
    );
    let wrong_id = Answers {
        answers: vec![Answer::selected("x", vec![])],
    };
    assert_eq!(
        validate_answers(&questions, &wrong_id)
            .unwrap_err()
            .to_string(),
        "answer \"x\" does not match question \"q\""
    );
    assert_eq!(
        validate_answers(&questions, &Answers::default()),
        Err(AnswersError::Count {
            expected: 1,
            got: 0
        })
    );
}
