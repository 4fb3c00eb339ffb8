use super::*;

fn route() -> Route {
    Route {
        provider: "deepseek-official".into(),
        model: "deepseek-v4-flash".into(),
    }
}

#[test]
fn the_side_request_carries_the_recorded_system_prompt_and_one_user_message() {
    let plan = TitlePlan::new(
        7,
        "Run echo hi in bash and tell me what it printed.",
        route(),
        64,
    );
    let request = plan.request("sess-1".into());
    assert_eq!(request.model, "deepseek-v4-flash");
    assert_eq!(request.system.as_deref(), Some(SYSTEM_PROMPT));
    assert!(SYSTEM_PROMPT.starts_with(
        "Create a concise title for an AI coding-assistant session from the supplied human messages.\n"
    ));
    assert_eq!(request.max_tokens, Some(64));
    assert_eq!(request.session_id.as_deref(), Some("sess-1"));
    assert_eq!(request.purpose, Some(RequestPurpose::SessionTitle));
    assert!(request.tools.is_empty());
    assert_eq!(request.reasoning_effort, None);
    assert_eq!(request.messages.len(), 1);
    let body = dsh_llm::chat_request_body(&request);
    assert_eq!(
        body["messages"][1],
        serde_json::json!({"role": "user", "content": "Generate the session title from this JSON array of human messages:\n[{\"seq\":7,\"text\":\"Run echo hi in bash and tell me what it printed.\"}]"})
    );
    assert_eq!(body["thinking"], serde_json::json!({"type": "disabled"}));
    assert_eq!(body["max_tokens"], 64);
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "model",
            "messages",
            "stream",
            "stream_options",
            "thinking",
            "max_tokens"
        ]
    );
    assert_eq!(
        body["messages"][0],
        serde_json::json!({"role": "system", "content": SYSTEM_PROMPT})
    );
}

#[test]
fn the_log_entry_matches_the_recorded_shape() {
    let plan = TitlePlan::new(
        4,
        "Reply with exactly TITLE_DONE. Do not use tools.",
        route(),
        32,
    );
    let data = plan.log_data();
    let keys: Vec<&str> = data
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "titleProvider",
            "messageSeqs",
            "route",
            "system",
            "messages",
            "maxTokens"
        ]
    );
    assert_eq!(data["titleProvider"], TITLE_PROVIDER);
    assert_eq!(data["messageSeqs"], serde_json::json!([4]));
    assert_eq!(
        data["route"],
        serde_json::json!({"provider": "deepseek-official", "model": "deepseek-v4-flash"})
    );
    assert_eq!(data["maxTokens"], 32);
    let message = &data["messages"][0];
    let keys: Vec<&str> = message
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["content", "source", "role", "id"]);
    assert_eq!(
        message["source"],
        serde_json::json!({"kind": "plugin", "plugin": "dsh-session-title-llm"})
    );
    assert_eq!(
        message["content"],
        serde_json::json!([{"type": "text", "text": "Generate the session title from this JSON array of human messages:\n[{\"seq\":4,\"text\":\"Reply with exactly TITLE_DONE. Do not use tools.\"}]"}])
    );
}

#[test]
fn long_prompts_are_cut_at_the_input_budget_on_a_char_boundary() {
    let prompt = "é".repeat(3000);
    let plan = TitlePlan::new(1, &prompt, route(), 64);
    let text = dsh_protocol::text_of(&plan.message.content);
    let json = text.split_once('\n').unwrap().1;
    let array: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(array[0]["text"].as_str().unwrap().len(), MAX_INPUT_BYTES);
}

#[test]
fn titles_are_sanitised_to_one_plain_line() {
    assert_eq!(
        sanitize_title("Late durable session title"),
        "Late durable session title"
    );
    assert_eq!(
        sanitize_title("\n  \"Fake echo test\"\nmore"),
        "Fake echo test"
    );
    assert_eq!(
        sanitize_title("# **Title: Fix the parser.**"),
        "Fix the parser"
    );
    assert_eq!(
        sanitize_title("Fix\u{1b}[31m colors\tnow"),
        "Fix [31m colors now"
    );
    assert_eq!(sanitize_title("`run tests`"), "run tests");
    assert_eq!(sanitize_title("「修复解析器」"), "修复解析器");
    assert_eq!(sanitize_title("   \n\n"), "");
    let long = "word ".repeat(100);
    let title = sanitize_title(&long);
    assert!(title.len() <= MAX_TITLE_BYTES && title.ends_with("word"));
}

#[test]
fn settings_default_to_64_tokens_and_the_session_model() {
    let settings: TitleSettings = serde_json::from_value(serde_json::json!({})).unwrap();
    assert_eq!(settings, TitleSettings::default());
    assert_eq!(settings.max_tokens, 64);
    assert_eq!(settings.model, None);
    let custom: TitleSettings =
        serde_json::from_value(serde_json::json!({"model": "m", "max_tokens": 32})).unwrap();
    assert_eq!(custom.model.as_deref(), Some("m"));
    assert!(serde_json::from_value::<TitleSettings>(serde_json::json!({"nope": 1})).is_err());
}
