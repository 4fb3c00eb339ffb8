//! `dsh-guard`: advisory and deadline guards on the tool pipeline (upstream
//! `repeat-tool-reminder` and `timeout-policy`).
//!
//! Owns: detecting consecutive identical tool calls per agent and the reminder texts
//! ([`repeat`]), and enforcing each tool's declared `timeoutMs` as a cooperative deadline with
//! the `TOOL_TIMEOUT` failure ([`timeout`]).
//! Does not own: the tools, the pipeline stages themselves.
//! Must not depend on: front-ends, concrete tool crates.

pub mod repeat;
pub mod timeout;
