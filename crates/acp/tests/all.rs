//! Crate-level tests of the ACP bridge: one binary, modules under `suite/`.
// Helpers outside `#[test]` functions panic on broken fixtures by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
