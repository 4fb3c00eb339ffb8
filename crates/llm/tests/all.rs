//! Crate-level tests of `dsh-llm` against real HTTP servers on 127.0.0.1.
// Test helpers outside `#[test]` fns are still test code; clippy.toml only exempts the fns.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
