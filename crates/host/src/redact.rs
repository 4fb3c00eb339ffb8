//! Tool results never carry a registered secret (the provider key): a `tools/post-execute`
//! listener replaces every occurrence in the result's text with a marker before the result is
//! logged or sent to the model, whatever tool produced it (a `cat` of a process environment
//! under `danger-full-access`, an MCP server echoing its environment, …). Installed by the host
//! on its root before any plugin, so no configuration can switch it off.

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_tools::PostDecision;
use dsh_tools::PostInput;
use dsh_tools::ToolRegistry;

/// Installs the listener. Register it before the spill policy so that the spill policy, which
/// runs outermost, spills the redacted text.
pub fn install(registry: &ToolRegistry, owner: &Scope) -> Disposer {
    registry
        .post_execute()
        .prepend(owner, move |input: PostInput, next| {
            Box::pin(async move {
                let decision = next.run(input.clone()).await?;
                Ok(redact(&input, decision))
            })
        })
}

fn redact(input: &PostInput, decision: PostDecision) -> PostDecision {
    match decision {
        PostDecision::Accept {
            content,
            value: None,
            additional_contexts,
        } => {
            let blocks = content.as_deref().unwrap_or(&input.result.content);
            match redact_blocks(blocks) {
                Some(clean) => PostDecision::Accept {
                    content: Some(clean),
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
        PostDecision::Block {
            feedback,
            additional_contexts,
        } => PostDecision::Block {
            feedback: redact_blocks(&feedback).unwrap_or(feedback),
            additional_contexts,
        },
        other => other,
    }
}

/// The blocks with secrets replaced, or `None` when none held one.
fn redact_blocks(blocks: &[ContentBlock]) -> Option<Vec<ContentBlock>> {
    let mut changed = false;
    let clean = blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text, .. } => match dsh_secrets::redact(text) {
                Some(clean) => {
                    changed = true;
                    ContentBlock::text(clean)
                }
                None => block.clone(),
            },
            other => other.clone(),
        })
        .collect();
    changed.then_some(clean)
}
