//! Crate-level tests of `dsh-mcp` against the reference MCP server
//! (`@modelcontextprotocol/server-everything`, installed by `npm ci --prefix tests/mcp-server`).
// Test helpers outside `#[test]` fns are still test code; clippy.toml only exempts the fns.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
