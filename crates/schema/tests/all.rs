//! Crate-level tests: one binary, suites in `tests/suite/`.
// Shared test helpers are plain functions, which clippy's in-test allowance does not cover.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod suite;
