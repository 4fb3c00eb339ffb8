//! Gap-filling tests for agent-loop-spec §10 items whose owning behaviour lives in the loop but
//! that the per-area suites did not pin (see `docs/checklists.md`).

use dsh_agent::PromptConfig;
use dsh_agent::scripted::text_response;
use dsh_session::data::RequestHeader;
use pretty_assertions::assert_eq;

use super::support::Options;
use super::support::Rig;

/// Item 11 (canonical half): with no system prompt and no tools the logged header has neither
/// key, and `request_header()` folds to the latest header.
#[tokio::test]
async fn item_11_canonical_headers_omit_empty_system_and_tools_and_the_latest_wins() {
    let rig = Rig::with(Options {
        prompt: PromptConfig {
            include_harness_identity: false,
            include_runtime_context: false,
            ..PromptConfig::default()
        },
        ..Options::default()
    });
    rig.adapter.push_chunks(text_response("a"));
    rig.prompt("go").await;
    let request = rig.adapter.requests().remove(0);
    assert!(request.system.as_deref().unwrap_or("").is_empty());
    assert!(request.tools.is_empty());
    let headers = rig.of("request/header");
    assert_eq!(headers.len(), 1);
    let header = headers[0].data["header"].as_object().unwrap();
    assert_eq!(header.keys().collect::<Vec<_>>(), ["config"]);

    // A tool appears: the next request logs a `change` header, and the fold returns it.
    rig.register(super::support::echo());
    rig.adapter.push_chunks(text_response("b"));
    rig.prompt("again").await;
    let headers = rig.of("request/header");
    assert_eq!(headers.len(), 2);
    let latest = rig.log().request_header().unwrap();
    assert_eq!(latest, headers[1]);
    let decoded = latest.decode::<RequestHeader>().unwrap().unwrap();
    assert!(decoded.header.system.is_none());
    assert_eq!(decoded.header.tools.unwrap()[0].name, "echo");
}
