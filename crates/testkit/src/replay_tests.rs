use super::*;
use crate::scenario::ScenarioSpec;
use std::path::Path;

fn scenario(model: &[Value], sessions: Value) -> Scenario {
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "acp", "name": "t", "sessions": sessions
    }))
    .unwrap();
    let model = model
        .iter()
        .map(|v| serde_json::from_value(v.clone()).unwrap())
        .collect();
    Scenario::from_parts(spec, model)
}

fn text_entry(session: usize, index: usize, text: &str) -> Value {
    json!({"session": session, "route": "main", "index": index, "kind": "response",
        "content": text, "finish_reason": "stop", "usage": null, "stream": [{"content": text}]})
}

async fn start(s: &Scenario, ws: Option<&Path>) -> ReplayServer {
    ReplayServer::start(s, "127.0.0.1:0".parse().unwrap(), ws.map(Path::to_path_buf))
        .await
        .unwrap()
}

fn chat(user: &str) -> Value {
    json!({"model": "deepseek-v4-flash", "stream": true,
        "messages": [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": user}]})
}

async fn post(server: &ReplayServer, header: Option<&str>, body: &Value) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(format!("{}/chat/completions", server.url()))
        .json(body);
    if let Some(h) = header {
        req = req.header(SESSION_HEADER, h);
    }
    req.send().await.unwrap()
}

fn content_of(body: &str) -> String {
    body.split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| {
            let v: Value = serde_json::from_str(d).unwrap();
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test]
async fn serves_a_response_entry_as_exact_sse() {
    let s = scenario(&[text_entry(0, 0, "DONE")], json!([]));
    let server = start(&s, None).await;
    let resp = post(&server, None, &chat("hi")).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let body = resp.text().await.unwrap();
    let head = r#"{"id":"replay-1","object":"chat.completion.chunk","created":0,"model":"deepseek-v4-flash","choices":[{"index":0,"delta":"#;
    let expected = format!(
        "data: {head}{{\"role\":\"assistant\",\"content\":\"\"}},\"finish_reason\":null}}]}}\n\n\
         data: {head}{{\"content\":\"DONE\"}},\"finish_reason\":null}}]}}\n\n\
         data: {head}{{}},\"finish_reason\":\"stop\"}}]}}\n\n\
         data: [DONE]\n\n"
    );
    assert_eq!(body, expected);
    assert!(server.unconsumed().is_empty());
    assert!(server.unanswered().is_empty());
    assert_eq!(server.served(), 1);
}

#[tokio::test]
async fn serves_an_error_entry_with_status_and_body_without_stream() {
    let s = scenario(
        &[
            json!({"session": 0, "route": "main", "index": 0, "kind": "error",
            "error": {"status": 401, "code": "AUTH", "message": "nope",
                "body": {"error": {"message": "nope", "type": "authentication_error", "code": "invalid_api_key"}}}}),
        ],
        json!([]),
    );
    let server = start(&s, None).await;
    let resp = post(&server, None, &chat("hi")).await;
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["content-type"], "application/json");
    assert_eq!(
        resp.text().await.unwrap(),
        r#"{"error":{"message":"nope","type":"authentication_error","code":"invalid_api_key"}}"#
    );
}

#[tokio::test]
async fn hang_entry_streams_prefix_creates_marker_and_holds_until_disconnect() {
    let ws = tempfile::tempdir().unwrap();
    let s = scenario(
        &[
            json!({"session": 0, "route": "main", "index": 0, "kind": "hang", "content": "partial",
            "ready_file": ".ready", "stream": [{"content": "partial"}]}),
        ],
        json!([]),
    );
    let server = start(&s, Some(ws.path())).await;
    let mut resp = post(&server, None, &chat("hi")).await;
    assert_eq!(resp.status(), 200);
    let mut got = String::new();
    while !got.contains("partial") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), resp.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        got.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let marker = ws.path().join(".ready");
    for _ in 0..100 {
        if marker.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(marker.exists());
    // Nothing more arrives: no finish, no [DONE].
    let more = tokio::time::timeout(Duration::from_millis(300), resp.chunk()).await;
    assert!(more.is_err(), "hang must not send more: {more:?}");
    assert!(!got.contains("[DONE]"));
    assert_eq!(server.in_flight(), 1);
    drop(resp);
    for _ in 0..100 {
        if server.in_flight() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.in_flight(), 0);
}

#[tokio::test]
async fn binds_sessions_by_header_in_first_seen_order() {
    let s = scenario(
        &[
            text_entry(0, 0, "P0"),
            text_entry(0, 1, "P1"),
            text_entry(1, 0, "C0"),
        ],
        json!([]),
    );
    let server = start(&s, None).await;
    let a = post(&server, Some("parent"), &chat("x"))
        .await
        .text()
        .await
        .unwrap();
    let b = post(&server, Some("child"), &chat("x"))
        .await
        .text()
        .await
        .unwrap();
    let c = post(&server, Some("parent"), &chat("x"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        (content_of(&a), content_of(&b), content_of(&c)),
        ("P0".into(), "C0".into(), "P1".into())
    );
    assert!(server.unconsumed().is_empty());
}

#[tokio::test]
async fn binds_sessions_by_first_user_text_without_header() {
    let s = scenario(
        &[text_entry(0, 0, "P0"), text_entry(1, 0, "C0")],
        json!([{"session": 0, "first_user_text": "parent task"}, {"session": 1, "first_user_text": "child task"}]),
    );
    let server = start(&s, None).await;
    let child = post(&server, None, &chat("child task"))
        .await
        .text()
        .await
        .unwrap();
    // A forked child repeats the parent's history, then its own prompt.
    let mut forked = chat("parent task");
    forked["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "content": [{"type": "text", "text": "child task"}]}));
    let parent = post(&server, None, &chat("parent task"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        (content_of(&child), content_of(&parent)),
        ("C0".into(), "P0".into())
    );
    let resp = post(&server, None, &forked).await;
    assert_eq!(resp.status(), 500);
    let un = server.unanswered();
    assert_eq!(un.len(), 1);
    assert_eq!(un[0].session, Some(1));
}

#[tokio::test]
async fn records_unanswered_requests_and_reports_unconsumed_entries() {
    let s = scenario(
        &[
            text_entry(0, 0, "A"),
            text_entry(0, 1, "B"),
            json!({"session": 0, "route": "title", "index": 0, "kind": "response", "content": "T",
            "finish_reason": "stop", "match": {"system_prefix": "Create a concise title"}}),
        ],
        json!([]),
    );
    let server = start(&s, None).await;
    let _ = post(&server, None, &chat("x")).await.text().await.unwrap();
    assert_eq!(
        server.unconsumed(),
        vec![
            Unconsumed {
                session: 0,
                route: "main".into(),
                index: 1
            },
            Unconsumed {
                session: 0,
                route: "title".into(),
                index: 0
            },
        ]
    );
    let title = json!({"model": "t", "messages": [{"role": "system", "content": "Create a concise title for this.\nmore"}, {"role": "user", "content": "x"}]});
    assert_eq!(
        content_of(&post(&server, None, &title).await.text().await.unwrap()),
        "T"
    );
    let _ = post(&server, None, &chat("x")).await.text().await.unwrap();
    assert!(server.unconsumed().is_empty());

    let resp = post(&server, None, &chat("x")).await;
    assert_eq!(resp.status(), 500);
    let body: Value = resp.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no remaining model entry")
    );
    let resp = reqwest::Client::new()
        .get(format!("{}/models", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let un = server.unanswered();
    assert_eq!(un.len(), 2);
    assert_eq!(un[0].route.as_deref(), Some("main"));
    assert_eq!(un[1].path, "/models");
}

#[tokio::test]
async fn repeat_entries_answer_every_request() {
    let mut e = text_entry(0, 0, "R");
    e["repeat"] = json!(true);
    let s = scenario(&[e], json!([]));
    let server = start(&s, None).await;
    for _ in 0..3 {
        assert_eq!(
            content_of(&post(&server, None, &chat("x")).await.text().await.unwrap()),
            "R"
        );
    }
    assert!(server.unconsumed().is_empty());
    assert!(server.unanswered().is_empty());
}

#[tokio::test]
async fn refuses_non_loopback() {
    let s = scenario(&[], json!([]));
    let err = ReplayServer::start(&s, "0.0.0.0:0".parse().unwrap(), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("non-loopback"));
}

#[tokio::test]
async fn title_replies_wait_until_the_main_route_is_drained_and_idle() {
    let s = scenario(
        &[
            text_entry(0, 0, "A"),
            json!({"session": 0, "route": "title", "index": 0, "kind": "response", "content": "T",
            "finish_reason": "stop", "match": {"system_prefix": "Create a concise title"},
            "stream": [{"content": "T"}]}),
        ],
        json!([]),
    );
    let server = Arc::new(start(&s, None).await);
    let title = json!({"model": "t", "messages": [{"role": "system", "content": "Create a concise title for this."}, {"role": "user", "content": "x"}]});
    let started = std::time::Instant::now();
    let pending = {
        let server = server.clone();
        tokio::spawn(async move { post(&server, None, &title).await.text().await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !pending.is_finished(),
        "the title reply must wait for the main route"
    );
    let main = post(&server, None, &chat("x")).await.text().await.unwrap();
    let main_done = started.elapsed();
    assert_eq!(content_of(&main), "A");
    assert_eq!(content_of(&pending.await.unwrap()), "T");
    assert!(started.elapsed() >= main_done + TITLE_SETTLE / 2);
    assert!(server.unconsumed().is_empty());
}
