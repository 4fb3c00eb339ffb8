//! Crate-level tests of `dsh-session`: persistence, crash repair, fork, upstream logs.
// Shared helpers live outside `#[test]` functions, where clippy's test allowance does not reach.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
