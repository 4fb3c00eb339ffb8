//! Recorded conformance texts, reproduced by running the recorded commands for real.

use dsh_tool_shell::BashArgs;
use dsh_tool_shell::BashOutput;
use dsh_tool_shell::bash;
use dsh_tool_shell::spill::SpillStore;
use dsh_tool_shell::spill::apply_inline_cap;
use pretty_assertions::assert_eq;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::support::context;

fn records(jsonl: &str) -> Vec<Value> {
    jsonl
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs every recorded `bash` call and compares the model text (workspace path as `{{cwd}}`).
async fn replay(jsonl: &str) -> usize {
    let mut checked = 0;
    for rec in records(jsonl).into_iter().filter(|r| r["name"] == "bash") {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let args: BashArgs = serde_json::from_value(rec["arguments"].clone()).unwrap();
        let out = bash::run(args.clone(), &ctx, CancellationToken::new())
            .await
            .unwrap();
        let text = bash::render_text(&out).replace(dir.path().to_str().unwrap(), "{{cwd}}");
        assert_eq!(text, rec["text"].as_str().unwrap());
        assert_eq!(rec["is_error"], false);
        let blocks = bash::render(&args, &out);
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].to_value(), rec["content"][0]);
        checked += 1;
    }
    checked
}

#[tokio::test]
async fn bash_tool_turn() {
    assert_eq!(
        replay(include_str!(
            "../fixtures/bash-tool-turn.tool-results.jsonl"
        ))
        .await,
        1
    );
}

#[tokio::test]
async fn tool_call_turn() {
    assert_eq!(
        replay(include_str!(
            "../fixtures/tool-call-turn.tool-results.jsonl"
        ))
        .await,
        1
    );
}

#[tokio::test]
async fn code_mode_nested_bash_calls_and_canonical_stdout() {
    let jsonl = include_str!("../fixtures/code-mode-turn.tool-results.jsonl");
    assert_eq!(replay(jsonl).await, 2);
    // The run_code program reads `out.stdout.text` from the canonical value.
    let dir = tempfile::tempdir().unwrap();
    let out = bash::run(
        BashArgs::new("echo CODE_ONE", "Print CODE_ONE"),
        &context(dir.path()),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let value = serde_json::to_value(&out).unwrap();
    assert_eq!(value["stdout"]["text"].as_str().unwrap().trim(), "CODE_ONE");
}

/// `bash-spill`: the 2022-byte output under the generic 800-byte inline cap. The spill root is
/// padded to the recording's 27 characters so the preview split is the same; the locator is
/// then tokenized as the conformance README describes.
#[tokio::test]
async fn bash_spill_preview_and_notice() {
    let rec = records(include_str!("../fixtures/bash-spill.tool-results.jsonl")).remove(0);
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_str().unwrap().to_owned();
    let pad = 27 - base.len() - 1;
    let root = format!("{base}/{}", "r".repeat(pad));
    assert_eq!(root.len(), "/tmp/dsh-acp-snap-ee77dff02".len());
    let mut ctx = context(dir.path());
    ctx.spill = std::sync::Arc::new(SpillStore::new(&root));

    let args: BashArgs = serde_json::from_value(rec["arguments"].clone()).unwrap();
    let out = bash::run(args, &ctx, CancellationToken::new())
        .await
        .unwrap();
    let BashOutput::Foreground { stdout, .. } = &out else {
        panic!("foreground expected")
    };
    assert!(
        !stdout.truncated,
        "2022 bytes fit the executor's 64 000-byte tail"
    );
    let full = bash::render_text(&out);
    assert_eq!(full.len(), 2022);

    let replaced = apply_inline_cap(&ctx.spill, &ctx.session_id, "bash", &full, 800).unwrap();
    assert_eq!(replaced.len(), 800);
    let tokenize = |text: &str, root: &str| -> String {
        let start = text.find(root).unwrap();
        let end = start + text[start..].find("-bash.txt").unwrap() + "-bash.txt".len();
        format!(
            "{}{{{{spillLocator:bash.txt}}}}{}",
            &text[..start],
            &text[end..]
        )
    };
    let expected = rec["text"].as_str().unwrap();
    assert_eq!(
        tokenize(&replaced, &root),
        tokenize(expected, "/tmp/dsh-acp-snap-ee77dff02")
    );

    // The locator follows `<root>/session-<12 hex>/<12 hex>-bash.txt` and holds the full text.
    let start = replaced.find(&root).unwrap();
    let locator =
        &replaced[start..start + replaced[start..].find("-bash.txt").unwrap() + "-bash.txt".len()];
    let rel: Vec<&str> = locator[root.len() + 1..].split('/').collect();
    assert_eq!(rel.len(), 2);
    assert!(rel[0].starts_with("session-") && rel[0].len() == 20);
    assert!(
        rel[1].len() == 12 + "-bash.txt".len()
            && rel[1][..12].chars().all(|c| c.is_ascii_hexdigit())
    );
    assert_eq!(std::fs::read_to_string(locator).unwrap(), full);
}

/// `escalation-rejected` against an unconfined executor: there is nothing to escalate from,
/// so the request is refused up front (the confined replay is in `escalation.rs`).
#[tokio::test]
async fn escalation_without_confining_executor_is_refused() {
    let rec = records(include_str!(
        "../fixtures/escalation-rejected.tool-results.jsonl"
    ))
    .remove(0);
    let dir = tempfile::tempdir().unwrap();
    let args: BashArgs = serde_json::from_value(rec["arguments"].clone()).unwrap();
    let err = bash::run(args, &context(dir.path()), CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "sandbox_permissions is not available in this composition (no sandboxing executor to escalate)"
    );
}
