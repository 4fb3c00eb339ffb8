//! `web_search` through the tool pipeline against local servers speaking each provider's wire
//! format (hooks-and-tools-spec §F.4).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use dsh_kernel::Plugin;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::Message;
use dsh_tools::AgentGone;
use dsh_tools::AgentHandle;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use dsh_web_search::SessionEvents;
use dsh_web_search::WebSearchPlugin;
use serde_json::Value;
use serde_json::json;

/// What the fake provider saw, and what it answers.
#[derive(Default)]
struct Seen {
    requests: Mutex<Vec<(String, HeaderMap, Value)>>,
    answers: Mutex<Vec<(u16, Value)>>,
    redirect_hits: Mutex<u32>,
}

async fn handle(
    State(seen): State<Arc<Seen>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> impl IntoResponse {
    seen.requests
        .lock()
        .unwrap()
        .push((uri.path().to_owned(), headers, body.clone()));
    let query = body
        .pointer("/messages/0/content/0/text")
        .or_else(|| body.pointer("/messages/0/content"))
        .or_else(|| body.get("query"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut answers = seen.answers.lock().unwrap();
    // An answer keyed to the query when one mentions it, else the next one.
    let index = answers
        .iter()
        .position(|(_, a)| {
            a.get("forQuery")
                .and_then(Value::as_str)
                .is_some_and(|q| query.contains(q))
        })
        .unwrap_or(0);
    let (status, mut answer) = if answers.is_empty() {
        (200, json!({}))
    } else {
        answers.remove(index)
    };
    if let Some(obj) = answer.as_object_mut() {
        obj.remove("forQuery");
    }
    if status == 302 {
        return (
            StatusCode::FOUND,
            [(
                "location",
                answer["location"].as_str().unwrap_or("/").to_owned(),
            )],
            Json(json!({})),
        )
            .into_response();
    }
    (StatusCode::from_u16(status).unwrap(), Json(answer)).into_response()
}

async fn redirected(State(seen): State<Arc<Seen>>) -> impl IntoResponse {
    *seen.redirect_hits.lock().unwrap() += 1;
    Json(json!({}))
}

async fn server(seen: Arc<Seen>) -> String {
    let app = Router::new()
        .route("/messages", post(handle))
        .route("/search", post(handle))
        .route("/chat/completions", post(handle))
        .route("/elsewhere", post(redirected).get(redirected))
        .with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

#[derive(Default)]
struct Events(Mutex<Vec<(String, Value)>>);

impl SessionEvents for Events {
    fn record(&self, kind: &str, data: Value) {
        self.0.lock().unwrap().push((kind.to_owned(), data));
    }
}

struct Agent {
    scope: Scope,
}

impl AgentHandle for Agent {
    fn id(&self) -> &str {
        "agent"
    }
    fn scope(&self) -> &Scope {
        &self.scope
    }
    fn inject(&self, _message: Message) -> Result<(), AgentGone> {
        Ok(())
    }
}

struct Setup {
    _root: Scope,
    registry: Arc<ToolRegistry>,
    agent: Arc<dyn AgentHandle>,
    events: Arc<Events>,
}

fn setup(config: Value) -> Setup {
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let scope = root.child(ScopeKind::Plugin, "web-search").unwrap();
    WebSearchPlugin
        .apply(&scope, serde_json::from_value(config).unwrap())
        .unwrap();
    let agent_scope = root.child(ScopeKind::Agent, "agent").unwrap();
    let events = Arc::new(Events::default());
    agent_scope
        .provide::<dyn SessionEvents>(events.clone())
        .unwrap();
    Setup {
        _root: root,
        registry,
        agent: Arc::new(Agent { scope: agent_scope }),
        events,
    }
}

impl Setup {
    async fn search(&self, queries: Value) -> (bool, String) {
        let input = ToolCallInput::new(
            "c",
            "web_search",
            json!({"queries": queries}),
            CancellationToken::new(),
        )
        .agent(self.agent.clone());
        let result = self.registry.execute(input).await;
        (result.is_error, result.text())
    }
}

const KEY: &str = "sk-test-secret-123";

fn deepseek_answer(urls: &[(&str, &str)]) -> Value {
    let items: Vec<Value> = urls
        .iter()
        .map(|(url, title)| json!({"type": "web_search_result", "url": url, "title": title, "page_age": "2024-05-01"}))
        .collect();
    json!({"content": [
        {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "x"}},
        {"type": "web_search_tool_result", "tool_use_id": "s1", "content": items},
        {"type": "text", "text": "answer", "citations": [{"type": "web_search_result_location", "url": urls[0].0, "cited_text": "quoted bit"}]}
    ]})
}

#[tokio::test]
async fn deepseek_sends_the_native_search_request_and_logs_it_without_the_key() {
    let seen = Arc::new(Seen::default());
    let base = server(seen.clone()).await;
    *seen.answers.lock().unwrap() = vec![(
        200,
        deepseek_answer(&[("https://a.example/1", "A"), ("https://b.example/2", "")]),
    )];
    let s = setup(json!({"deepseek": {"api_key": KEY, "base_url": base}}));
    let (err, text) = s.search(json!(["rust async"])).await;
    assert!(!err, "{text}");
    assert_eq!(
        text,
        "Sources:\n- [A](https://a.example/1) \u{2014} quoted bit (2024-05-01)\n- [b.example](https://b.example/2) \u{2014} (2024-05-01)\n\nCite the relevant URLs above as markdown links in your answer."
    );
    let requests = seen.requests.lock().unwrap();
    let (path, headers, body) = &requests[0];
    assert_eq!(path, "/messages");
    assert_eq!(headers["x-api-key"], KEY);
    assert_eq!(headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert_eq!(headers["user-agent"], "deepseek-harness/0.0.1");
    assert_eq!(
        body["messages"][0]["content"][0]["text"],
        "Perform a web search for the query: rust async"
    );
    assert_eq!(
        body["tools"][0],
        json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 5})
    );
    let events = s.events.0.lock().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, "web/deepseek-search-llm-request");
    assert_eq!(events[0].1["apiVersion"], "2023-06-01");
    assert_eq!(events[0].1["body"], *body);
    assert!(
        !events[0].1.to_string().contains(KEY),
        "the key never reaches the log"
    );
}

#[tokio::test]
async fn deepseek_without_native_results_is_an_error() {
    let seen = Arc::new(Seen::default());
    let base = server(seen.clone()).await;
    *seen.answers.lock().unwrap() = vec![(
        200,
        json!({"content": [{"type": "text", "text": "I think..."}]}),
    )];
    let s = setup(json!({"deepseek": {"api_key": KEY, "base_url": base}}));
    let (err, text) = s.search(json!(["x"])).await;
    assert!(err);
    assert_eq!(
        text,
        "Error: DeepSeek returned no web_search_tool_result blocks; the request may not have triggered native web search"
    );
}

#[tokio::test]
async fn exa_drops_results_without_highlights() {
    let seen = Arc::new(Seen::default());
    let base = server(seen.clone()).await;
    *seen.answers.lock().unwrap() = vec![(
        200,
        json!({"results": [
            {"url": "https://kept.example", "title": "Kept", "highlights": ["the highlight"], "publishedDate": "2023-01-01"},
            {"url": "https://dropped.example", "title": "Dropped", "highlights": []},
            {"url": "https://blank.example", "highlights": ["  "]}
        ]}),
    )];
    let s = setup(json!({"exa": {"api_key": KEY, "base_url": base}, "search_max_results": 3}));
    let (_, text) = s.search(json!(["q"])).await;
    assert_eq!(
        text,
        "Sources:\n- [Kept](https://kept.example) \u{2014} the highlight (2023-01-01)\n\nCite the relevant URLs above as markdown links in your answer."
    );
    let requests = seen.requests.lock().unwrap();
    let (path, headers, body) = &requests[0];
    assert_eq!(path, "/search");
    assert_eq!(headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(
        body,
        &json!({"query": "q", "type": "auto", "contents": {"highlights": {"highlightsPerUrl": 1}}, "numResults": 3})
    );
}

#[tokio::test]
async fn perplexity_citations_become_url_only_sources_and_content_renders_per_query() {
    let seen = Arc::new(Seen::default());
    let base = server(seen.clone()).await;
    *seen.answers.lock().unwrap() = vec![
        (
            200,
            json!({"forQuery": "first", "choices": [{"message": {"content": "Answer one."}}], "citations": ["https://c.example/1"]}),
        ),
        (
            200,
            json!({"forQuery": "second", "choices": [{"message": {"content": "Answer two."}}],
                     "search_results": [{"url": "https://s.example", "title": "S", "snippet": "snip", "date": "2022"}]}),
        ),
    ];
    let s = setup(json!({"perplexity": {"api_key": KEY, "base_url": base}}));
    let (err, text) = s.search(json!(["first", "second"])).await;
    assert!(!err, "{text}");
    assert_eq!(
        text,
        "### first\n\nAnswer one.\n\n### second\n\nAnswer two.\n\nSources:\n- [c.example](https://c.example/1)\n- [S](https://s.example) \u{2014} snip (2022)\n\nCite the relevant URLs above as markdown links in your answer."
    );
    let requests = seen.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].0, "/chat/completions");
    assert_eq!(requests[0].2["model"], "sonar");
}

#[tokio::test]
async fn duplicates_search_once_and_one_failure_fails_the_call() {
    let seen = Arc::new(Seen::default());
    let base = server(seen.clone()).await;
    *seen.answers.lock().unwrap() = vec![(200, json!({"results": []}))];
    let s = setup(json!({"exa": {"api_key": KEY, "base_url": base}}));
    let (_, text) = s.search(json!(["same", "same"])).await;
    assert_eq!(
        text,
        "No results found.\n\nCite the relevant URLs above as markdown links in your answer."
    );
    assert_eq!(seen.requests.lock().unwrap().len(), 1);
    *seen.answers.lock().unwrap() = vec![
        (200, json!({"forQuery": "fine", "results": []})),
        (
            500,
            json!({"forQuery": "broken", "error": "index unavailable"}),
        ),
    ];
    let (err, text) = s.search(json!(["fine", "broken"])).await;
    assert!(err);
    assert_eq!(text, "Error: index unavailable");
    *seen.answers.lock().unwrap() = vec![(503, json!({}))];
    let (_, text) = s.search(json!(["x"])).await;
    assert_eq!(text, "Error: Exa API error (HTTP 503)");
}

#[tokio::test]
async fn a_redirect_is_an_error_and_its_target_is_never_contacted() {
    let seen = Arc::new(Seen::default());
    let base = server(seen.clone()).await;
    *seen.answers.lock().unwrap() = vec![(302, json!({"location": format!("{base}/elsewhere")}))];
    let s = setup(json!({"exa": {"api_key": KEY, "base_url": base}}));
    let (err, text) = s.search(json!(["x"])).await;
    assert!(err);
    assert_eq!(text, "Error: Exa API error (HTTP 302)");
    assert_eq!(*seen.redirect_hits.lock().unwrap(), 0);
}

#[tokio::test]
async fn selection_and_availability() {
    let s = setup(json!({"exa": {"api_key": KEY}, "perplexity": {"api_key": KEY}}));
    let (err, text) = s.search(json!(["x"])).await;
    assert!(err);
    assert_eq!(
        text,
        "Error: multiple usable web providers are registered (exa, perplexity); configure one explicitly"
    );
    let s = setup(json!({"search_provider": "deepseek-official", "exa": {"api_key": KEY}}));
    let (_, text) = s.search(json!(["x"])).await;
    assert_eq!(
        text,
        "Error: configured web provider \"deepseek-official\" is not registered"
    );
    // Without a usable provider the tool is not offered at all.
    let s = setup(json!({"exa": {"base_url": "http://127.0.0.1:9"}}));
    assert!(s.registry.get("web_search", None).is_none() || std::env::var("EXA_API_KEY").is_ok());
    let (_, text) = s.search(json!(["x"])).await;
    assert!(text.starts_with("Error:"), "{text}");
}
