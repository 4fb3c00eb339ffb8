//! Crate-level tests of `dsh-tool-shell` against real `bash` processes.
// Test helpers outside `#[test]` fns are still test code; clippy.toml only exempts the fns.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
