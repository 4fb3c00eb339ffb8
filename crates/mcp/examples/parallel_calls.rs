//! Benchmark: two slow calls to one MCP server, one after the other and concurrently.
//! Run with `cargo run -p dsh-mcp --example parallel_calls --release` after
//! `npm ci --prefix tests/mcp-server`. Figures go to docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Instant;

use dsh_kernel::Scope;
use dsh_mcp::McpOptions;
use dsh_mcp::McpServer;
use dsh_mcp::McpServerConfig;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use serde_json::json;

#[tokio::main]
async fn main() {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp-server/node_modules/.bin/mcp-server-everything");
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let config = McpServerConfig::stdio(
        "everything",
        bin.display().to_string(),
        vec!["stdio".into()],
    );
    let server = McpServer::mount(&root, &registry, config, &McpOptions::default())
        .await
        .unwrap();
    let name = "mcp__everything__trigger-long-running-operation";
    let call = |id: &str, seconds: u64| {
        let input = ToolCallInput::new(
            id,
            name,
            json!({"duration": seconds, "steps": 2}),
            CancellationToken::new(),
        );
        registry.execute(input)
    };
    let started = Instant::now();
    assert!(!call("a", 3).await.is_error);
    assert!(!call("b", 4).await.is_error);
    let sequential = started.elapsed();
    let started = Instant::now();
    let (a, b) = tokio::join!(call("c", 3), call("d", 4));
    assert!(!a.is_error && !b.is_error);
    let parallel = started.elapsed();
    println!("two calls (3 s and 4 s) one after the other: {sequential:.2?}");
    println!("the same two calls concurrently:             {parallel:.2?}");
    server.dispose();
}
