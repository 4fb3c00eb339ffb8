//! §10 items 30–36: requests and headers.

use dsh_agent::CallConfig;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_llm::ModelInfo;
use dsh_protocol::Message;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::Options;
use super::support::Rig;
use super::support::echo;

fn switch_model(model: &'static str) -> Options {
    Options {
        setup: Some(Box::new(move |root, hooks, _| {
            hooks.request.register(root, move |input, next| {
                Box::pin(async move {
                    let config = next.run(input).await?;
                    Ok(CallConfig {
                        model: model.to_owned(),
                        ..config
                    })
                })
            });
        })),
        ..Options::default()
    }
}

#[tokio::test]
async fn item_30_request_messages_and_envelope_equal_the_log() {
    let rig = Rig::new();
    rig.register(echo());
    rig.adapter
        .push_chunks(tool_call_response("c1", "echo", r#"{"text":"x"}"#, None));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    let requests = rig.adapter.requests();
    let events = rig.log().events().unwrap();
    // Each request equals the surface derived from the events before its first chunk.
    let starts: Vec<u64> = events
        .windows(2)
        .filter(|w| w[1].kind == "assistant/chunk" && w[0].kind != "assistant/chunk")
        .map(|w| w[1].seq)
        .collect();
    for (request, first_chunk) in requests.iter().zip(&starts) {
        let seed = events[..*first_chunk as usize]
            .iter()
            .map(|e| e.as_ref().clone())
            .collect::<Vec<_>>();
        let prefix =
            dsh_session::SessionLog::from_seed(dsh_session::SessionHeader::new("p", None), seed)
                .unwrap();
        let derived: Vec<Message> = prefix
            .derive_messages()
            .iter()
            .map(|m| m.as_ref().clone())
            .collect();
        assert_eq!(request.messages, derived);
        let header = &prefix.request_header().unwrap().data["header"];
        assert_eq!(header["config"]["model"], request.model.as_str());
        assert_eq!(header["system"], request.system.clone().unwrap());
        assert_eq!(
            header["tools"],
            serde_json::to_value(&request.tools).unwrap()
        );
        assert!(header["config"].get("temperature").is_none() && request.temperature.is_none());
    }
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].messages.len(), 3);
}

#[tokio::test]
async fn item_31_header_reasons_initial_then_change_only_on_difference() {
    let rig = Rig::with(Options {
        setup: Some(Box::new(|root, hooks, cell| {
            let cell = cell.clone();
            hooks.request.register(root, move |input, next| {
                // From the third turn on, switch the temperature.
                let turns = cell.get().map_or(0, |a: &dsh_agent::AgentHandle| {
                    a.log().turn_state().last_turn
                });
                Box::pin(async move {
                    let config = next.run(input).await?;
                    Ok(if turns >= 3 {
                        CallConfig {
                            temperature: Some(0.5),
                            ..config
                        }
                    } else {
                        config
                    })
                })
            });
        })),
        ..Options::default()
    });
    for t in ["a", "b", "c"] {
        rig.adapter.push_chunks(text_response(t));
    }
    rig.prompt("one").await;
    rig.prompt("two").await;
    rig.prompt("three").await;
    let headers = rig.of("request/header");
    let reasons: Vec<&str> = headers
        .iter()
        .map(|e| e.data["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["initial", "change"]);
    assert_eq!(
        headers[1].data["header"]["config"]["temperature"],
        json!(0.5)
    );
    assert_eq!(rig.adapter.requests()[2].temperature, Some(0.5));
}

#[tokio::test]
async fn item_32_request_context_only_when_the_route_changes() {
    let rig = Rig::with(Options {
        setup: Some(Box::new(|root, hooks, cell| {
            let cell = cell.clone();
            hooks.request.register(root, move |input, next| {
                let turns = cell.get().map_or(0, |a: &dsh_agent::AgentHandle| {
                    a.log().turn_state().last_turn
                });
                Box::pin(async move {
                    let config = next.run(input).await?;
                    Ok(if turns >= 3 {
                        CallConfig {
                            model: "other".into(),
                            ..config
                        }
                    } else {
                        config
                    })
                })
            });
        })),
        ..Options::default()
    });
    for t in ["a", "b", "c"] {
        rig.adapter.push_chunks(text_response(t));
    }
    rig.prompt("one").await;
    rig.prompt("two").await;
    rig.prompt("three").await;
    let contexts: Vec<_> = rig
        .of("request/context")
        .iter()
        .map(|e| e.data.value().clone())
        .collect();
    assert_eq!(
        contexts,
        [
            json!({"provider": "mock", "model": "mock"}),
            json!({"provider": "mock", "model": "other"})
        ]
    );
}

#[tokio::test]
async fn item_33_an_agent_request_listener_switches_the_model() {
    let rig = Rig::with(switch_model("mock-pro"));
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("go").await;
    assert_eq!(rig.adapter.requests()[0].model, "mock-pro");
    assert_eq!(
        rig.of("request/header")[0].data["header"]["config"]["model"],
        "mock-pro"
    );
    assert_eq!(
        rig.of("assistant/message")[0].data["message"]["source"]["model"],
        "mock-pro"
    );
}

#[tokio::test]
async fn item_34_missing_model_fails_the_turn_without_a_model_call() {
    let rig = Rig::with(switch_model(""));
    rig.prompt("go").await;
    assert!(rig.adapter.requests().is_empty());
    let end = &rig.turn_ends()[0];
    assert_eq!(end["kind"], "error");
    assert_eq!(end["error"]["code"], "UNKNOWN");
    assert!(
        end["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("agent \"session-test\" has no provider/model")
    );
}

#[tokio::test]
async fn item_35_adapter_defaults_are_flagged_and_re_resolved() {
    let rig = Rig::new();
    rig.adapter.set_model_info(Some(ModelInfo {
        context_window: 1_000_000,
        default_max_tokens: Some(256_000),
        efforts: vec!["low".into(), "high".into(), "max".into()],
        default_effort: Some("high".into()),
        input_modalities: vec!["text".into()],
    }));
    rig.register(echo());
    rig.adapter
        .push_chunks(tool_call_response("c1", "echo", "{}", None));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    let headers = rig.of("request/header");
    assert_eq!(
        headers.len(),
        1,
        "the re-materialized continuation header is unchanged"
    );
    let header = &headers[0].data["header"];
    assert_eq!(
        serde_json::to_string(&header["config"]).unwrap(),
        r#"{"provider":"mock","model":"mock","maxTokens":256000,"reasoningEffort":"high"}"#
    );
    assert_eq!(
        serde_json::to_string(&header["adapterDefaults"]).unwrap(),
        r#"{"reasoningEffort":true,"maxTokens":true}"#
    );
    assert_eq!(
        rig.of("request/context")[0].data["contextWindow"],
        1_000_000
    );
    for request in rig.adapter.requests() {
        assert_eq!(
            (request.max_tokens, request.reasoning_effort.as_deref()),
            (Some(256_000), Some("high"))
        );
    }

    // An explicit maxTokens is not an adapter default and persists.
    let rig = Rig::with(Options {
        max_tokens: Some(1000),
        ..Options::default()
    });
    rig.adapter.set_model_info(Some(ModelInfo {
        context_window: 10,
        default_max_tokens: Some(256_000),
        efforts: vec![],
        default_effort: None,
        input_modalities: vec![],
    }));
    rig.adapter.push_chunks(text_response("a"));
    rig.adapter.push_chunks(text_response("b"));
    rig.prompt("one").await;
    rig.prompt("two").await;
    let header = &rig.of("request/header")[0].data["header"];
    assert_eq!(header["config"]["maxTokens"], 1000);
    assert!(header.get("adapterDefaults").is_none());
    assert_eq!(rig.adapter.requests()[1].max_tokens, Some(1000));
}

#[tokio::test]
async fn item_36_an_unsupported_explicit_effort_fails_before_provider_io() {
    let rig = Rig::with(Options {
        setup: Some(Box::new(|root, hooks, _| {
            hooks.request.register(root, |input, next| {
                Box::pin(async move {
                    let config = next.run(input).await?;
                    Ok(CallConfig {
                        reasoning_effort: Some("ultra".into()),
                        ..config
                    })
                })
            });
        })),
        ..Options::default()
    });
    rig.adapter.set_model_info(Some(ModelInfo {
        context_window: 10,
        default_max_tokens: None,
        efforts: vec!["low".into(), "high".into()],
        default_effort: None,
        input_modalities: vec![],
    }));
    rig.prompt("go").await;
    assert!(rig.adapter.requests().is_empty());
    assert!(rig.of("request/header").is_empty());
    assert_eq!(
        rig.turn_ends()[0]["error"]["code"],
        "UNSUPPORTED_REASONING_EFFORT"
    );
}
