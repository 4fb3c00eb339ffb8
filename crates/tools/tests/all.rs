//! Crate-level tests of dsh-tools (one binary; see tests/suite).
// Helpers outside `#[test]` functions unwrap fixture setup; a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
