//! The generic spill policy: a `tools/post-execute` listener that moves an oversized text
//! result to a spill file and leaves the model a bounded preview plus the file's locator.
//!
//! It is registered outermost and delegates first, so it sees the final decision of every
//! other post-execute listener. It is best-effort: when anything about spilling fails the
//! original content stays, because losing a result is worse than an oversized one.

use std::sync::Arc;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_tools::PostDecision;
use dsh_tools::PostInput;
use dsh_tools::ToolRegistry;

use crate::SpillStore;
use crate::apply_inline_cap;

/// Settings of the generic policy (`maxInlineBytes` upstream).
#[derive(Debug, Clone)]
pub struct SpillPolicy {
    pub max_inline_bytes: usize,
    pub store: SpillStore,
}

/// Installs the policy on `registry`'s post-execute stage, owned by `owner`.
pub fn install_policy(registry: &ToolRegistry, owner: &Scope, policy: SpillPolicy) -> Disposer {
    let policy = Arc::new(policy);
    registry
        .post_execute()
        .prepend(owner, move |input: PostInput, next| {
            let policy = policy.clone();
            Box::pin(async move {
                let decision = next.run(input.clone()).await?;
                Ok(apply(&policy, &input, decision))
            })
        })
}

fn apply(policy: &SpillPolicy, input: &PostInput, decision: PostDecision) -> PostDecision {
    let PostDecision::Accept {
        content,
        value: None,
        additional_contexts,
    } = decision
    else {
        return decision;
    };
    let exec = &input.exec;
    let skip = exec.parent().is_some() || exec.name() == "read";
    let blocks = content.as_deref().unwrap_or(&input.result.content);
    let all_text = blocks
        .iter()
        .all(|block| matches!(block, ContentBlock::Text { .. }));
    let session = exec.agent().map(|agent| agent.id().to_owned());
    let replaced = match (skip, all_text, session) {
        (false, true, Some(session)) => {
            let text = dsh_protocol::text_of(blocks);
            apply_inline_cap(
                &policy.store,
                &session,
                exec.name(),
                &text,
                policy.max_inline_bytes,
            )
        }
        _ => None,
    };
    match replaced {
        Some(preview) => PostDecision::Accept {
            content: Some(vec![ContentBlock::text(preview)]),
            value: None,
            additional_contexts,
        },
        None => PostDecision::Accept {
            content,
            value: None,
            additional_contexts,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dsh_kernel::ScopeKind;
    use dsh_protocol::Message;
    use dsh_protocol::text_of;
    use dsh_tools::AgentGone;
    use dsh_tools::AgentHandle;
    use dsh_tools::CancellationToken;
    use dsh_tools::RegistryConfig;
    use dsh_tools::Tool;
    use dsh_tools::ToolCallInput;
    use dsh_tools::ToolRun;
    use pretty_assertions::assert_eq;
    use serde_json::Value;
    use serde_json::json;

    use super::*;

    struct TestAgent(Scope);

    impl AgentHandle for TestAgent {
        fn id(&self) -> &str {
            "session-under-test"
        }
        fn scope(&self) -> &Scope {
            &self.0
        }
        fn inject(&self, _message: Message) -> Result<(), AgentGone> {
            Ok(())
        }
    }

    fn echo(name: &str) -> dsh_tools::ToolDefinition {
        Tool::builder(name)
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

    async fn run(root: &str, tool: &str, text: &str) -> String {
        let scope = Scope::root();
        let registry = ToolRegistry::new(RegistryConfig::default());
        registry.register(&scope, echo(tool)).unwrap();
        install_policy(
            &registry,
            &scope,
            SpillPolicy {
                max_inline_bytes: 800,
                store: SpillStore::new(root),
            },
        );
        let agent = Arc::new(TestAgent(scope.child(ScopeKind::Agent, "a").unwrap()));
        let input =
            ToolCallInput::new("c", tool, json!({ "text": text }), CancellationToken::new())
                .agent(agent);
        text_of(&registry.execute(input).await.content)
    }

    #[tokio::test]
    async fn reproduces_the_recorded_bash_spill_arithmetic() {
        // The recording's spill root had 27 characters; the split depends on that length.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        let pad = 27usize.saturating_sub(root.to_string_lossy().len());
        let root = format!("{}{}", root.to_string_lossy(), "x".repeat(pad));
        assert_eq!(root.len(), 27, "temp dir path too long for this test");
        let text = format!("SPILL_START-{}-SPILL_END", "x".repeat(2000));
        let out = run(&root, "bash", &text).await;
        assert_eq!(out.len(), 800);
        assert!(out.starts_with(&format!("SPILL_START-{}", "x".repeat(291))));
        assert!(out.contains(&format!(
            "{}-SPILL_END\n\n(Omitted 1417 bytes. Full formatted result stored at: {root}/session-",
            "x".repeat(292)
        )));
        assert!(out.ends_with(
            "-bash.txt. Use read with offset/limit, or grep this path to search within it.)"
        ));
        let locator = out
            .split("stored at: ")
            .nth(1)
            .unwrap()
            .split(". Use read")
            .next()
            .unwrap();
        assert_eq!(std::fs::read_to_string(locator).unwrap(), text);
    }

    #[tokio::test]
    async fn small_results_and_read_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_string_lossy().into_owned();
        assert_eq!(run(&root, "bash", "short").await, "short");
        let big = "y".repeat(5000);
        assert_eq!(run(&root, "read", &big).await, big);
    }
}
