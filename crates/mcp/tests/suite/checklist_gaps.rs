//! tool-catalog-spec §11 items 76–77 against a minimal scripted MCP server (a real `node`
//! child speaking newline-delimited JSON-RPC over stdio). Unlike the reference server, it
//! records exactly what dsh sent and answers `isError` deterministically (see
//! `docs/checklists.md`).
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::time::Duration;

use dsh_mcp::McpOptions;
use dsh_mcp::McpServer;
use dsh_mcp::McpServerConfig;
use dsh_mcp::public_name;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::support::Harness;

/// Lists a dotted tool name and a failing tool; appends every `tools/call` params object to
/// the file named by `argv[1]`.
const SERVER: &str = r#"
const fs = require('fs');
const readline = require('readline');
const log = process.argv[1];
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (!line.trim()) return;
  const msg = JSON.parse(line);
  if (msg.id === undefined) return;
  const reply = (result) => send({ jsonrpc: '2.0', id: msg.id, result });
  switch (msg.method) {
    case 'initialize':
      return reply({ protocolVersion: msg.params.protocolVersion,
        capabilities: { tools: {} }, serverInfo: { name: 'gaps', version: '1.0.0' } });
    case 'ping':
      return reply({});
    case 'tools/list':
      return reply({ tools: [
        { name: 'files.read', description: 'Read a file',
          inputSchema: { type: 'object', properties: { path: { type: 'string' } },
                         required: ['path'], additionalProperties: false } },
        { name: 'fail', description: 'Always fails', inputSchema: { type: 'object' } },
      ] });
    case 'tools/call':
      fs.appendFileSync(log, JSON.stringify(msg.params) + '\n');
      if (msg.params.name === 'fail') {
        return reply({ isError: true, content: [
          { type: 'text', text: 'bad input' }, { type: 'text', text: 'try again' } ] });
      }
      return reply({ content: [{ type: 'text', text: 'read ok' }] });
    default:
      return send({ jsonrpc: '2.0', id: msg.id,
        error: { code: -32601, message: 'Method not found' } });
  }
});
"#;

fn node_available() -> bool {
    let found = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        eprintln!("SKIPPED: `node` is not on PATH");
    }
    found
}

fn calls(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn item_76_77_raw_name_unvalidated_arguments_and_is_error_text() {
    if !node_available() {
        return;
    }
    let log = std::env::temp_dir().join(format!("dsh-mcp-gaps-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let mut config = McpServerConfig::stdio(
        "gh",
        "node",
        vec!["-e".into(), SERVER.into(), log.display().to_string()],
    );
    config.timeout_ms = 20_000;
    let h = Harness::new();
    let server = tokio::time::timeout(
        Duration::from_secs(30),
        McpServer::mount(&h.root, &h.registry, config, &McpOptions::default()),
    )
    .await
    .unwrap()
    .unwrap();

    // Item 76: a valid name is `mcp__<server>__<tool>`; an invalid one gets the hash suffix.
    assert_eq!(public_name("gh", "foo"), "mcp__gh__foo");
    let dotted = public_name("gh", "files.read");
    assert!(dotted.starts_with("mcp__gh__files_read_"), "{dotted}");
    let suffix = &dotted["mcp__gh__files_read_".len()..];
    assert_eq!(suffix.len(), 12);
    assert!(suffix.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(h.has(&dotted), "registered as {dotted}");
    assert!(h.has("mcp__gh__fail"));
    let long = public_name("gh", &"t".repeat(100));
    assert!(long.len() <= 64, "{long}");
    assert_eq!(long, public_name("gh", &"t".repeat(100)), "deterministic");

    // Item 77: the raw name goes out, and arguments that violate the advertised schema are
    // sent exactly as given.
    let args = json!({"path": 42, "extra": [true, null]});
    let ok = h.call(&dotted, args.clone()).await;
    assert!(!ok.is_error, "{}", ok.text());
    assert_eq!(ok.text(), "read ok");

    // A server `isError` result becomes `Error: <text>`.
    let failed = h.call("mcp__gh__fail", json!({})).await;
    assert!(failed.is_error);
    assert_eq!(failed.text(), "Error: bad input\ntry again");

    // `_meta` (progress token, client facts) is the client library's; the call is the rest.
    let sent: Vec<Value> = calls(&log)
        .into_iter()
        .map(|params| json!({"name": params["name"], "arguments": params["arguments"]}))
        .collect();
    assert_eq!(
        sent,
        vec![
            json!({"name": "files.read", "arguments": args}),
            json!({"name": "fail", "arguments": {}}),
        ]
    );
    server.dispose();
    let _ = std::fs::remove_file(&log);
}
