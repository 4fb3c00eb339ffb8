//! Code Mode through the registry: presentation, the dispatch bridge, the scheduler, the
//! outer result (tool-runtime-spec §7, checklist items 69–80).
// Helpers outside `#[test]` functions unwrap fixture setup; a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod dispatch;
mod presentation;
mod scheduling;
