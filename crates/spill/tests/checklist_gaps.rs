//! tool-catalog-spec §11 items 78–79 through a real registry: the generic policy caps a large
//! plain-text result at `maxInlineBytes`, and any spill failure (or no policy at all) leaves the
//! original result untouched and not an error (see `docs/checklists.md`).
// Helpers outside `#[test]` functions panic on broken fixtures by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::text_of;
use dsh_spill::SpillPolicy;
use dsh_spill::SpillStore;
use dsh_spill::install_policy;
use dsh_tools::AgentGone;
use dsh_tools::AgentHandle;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

struct TestAgent(Scope);

impl AgentHandle for TestAgent {
    fn id(&self) -> &str {
        "session-gaps"
    }
    fn scope(&self) -> &Scope {
        &self.0
    }
    fn inject(&self, _message: Message) -> Result<(), AgentGone> {
        Ok(())
    }
}

fn echo() -> dsh_tools::ToolDefinition {
    Tool::builder("echo_text")
        .description("echo text")
        .raw_output(json!({"type": "string"}), |_args, value: &Value| {
            Ok(vec![ContentBlock::text(value.as_str().unwrap_or_default())])
        })
        .run(|args: Value, _run: ToolRun| async move {
            Ok(args
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned())
        })
        .build()
        .unwrap()
}

/// Runs `echo_text` once; `policy` is installed when given. Returns (text, is_error).
async fn run(policy: Option<SpillPolicy>, text: &str) -> (String, bool) {
    let scope = Scope::root();
    let registry = ToolRegistry::new(RegistryConfig::default());
    let _tool = registry.register(&scope, echo()).unwrap();
    let _policy = policy.map(|p| install_policy(&registry, &scope, p));
    let agent = Arc::new(TestAgent(scope.child(ScopeKind::Agent, "a").unwrap()));
    let input = ToolCallInput::new(
        "c1",
        "echo_text",
        json!({ "text": text }),
        CancellationToken::new(),
    )
    .agent(agent);
    let result = registry.execute(input).await;
    (text_of(&result.content), result.is_error)
}

#[tokio::test]
async fn item_78_a_result_over_max_inline_bytes_is_capped_with_the_omitted_footer() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..3000).map(|n| format!("{n}\n")).collect();
    for cap in [600usize, 1000, 4096] {
        let policy = SpillPolicy {
            max_inline_bytes: cap,
            store: SpillStore::new(dir.path().join("spill")),
        };
        let (out, is_error) = run(Some(policy), &text).await;
        assert!(!is_error);
        assert!(out.len() <= cap, "{} > {cap}", out.len());
        assert!(out.contains("\n\n(Omitted "), "{out}");
        assert!(
            out.ends_with(". Use read with offset/limit, or grep this path to search within it.)"),
            "{out}"
        );
        let path = out
            .split("Full formatted result stored at: ")
            .nth(1)
            .unwrap()
            .split(". Use read")
            .next()
            .unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), text);
        let omitted: usize = out
            .split("(Omitted ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        // The preview is a head and a tail of the original; the count is exactly the rest.
        let preview = out.split("\n\n(Omitted ").next().unwrap();
        assert_eq!(omitted, text.len() - preview.len());
        assert!(text.starts_with(&preview[..10]) && text.ends_with(&preview[preview.len() - 10..]));
    }
}

#[tokio::test]
async fn item_79_a_spill_failure_leaves_the_result_unchanged_and_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // The store root is a regular file: no session directory can be created under it.
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "x").unwrap();
    let text = "z".repeat(20_000);
    // Control: the same cap with a writable store does replace the result.
    let writable = SpillPolicy {
        max_inline_bytes: 2000,
        store: SpillStore::new(dir.path().join("ok")),
    };
    let (spilled, _) = run(Some(writable), &text).await;
    assert!(spilled.len() <= 2000 && spilled.contains("(Omitted "));
    let failing = SpillPolicy {
        max_inline_bytes: 2000,
        store: SpillStore::new(blocker.join("spill")),
    };
    assert_eq!(run(Some(failing), &text).await, (text.clone(), false));
    assert_eq!(std::fs::read_to_string(&blocker).unwrap(), "x");
}

#[tokio::test]
async fn item_79_without_a_spill_store_a_large_result_is_unchanged() {
    let text = "q".repeat(200_000);
    assert_eq!(run(None, &text).await, (text.clone(), false));
}
