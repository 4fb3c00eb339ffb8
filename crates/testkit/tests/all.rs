//! Integration tests of dsh-testkit (one binary, see STYLE §3.4).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
