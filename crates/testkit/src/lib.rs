//! `dsh-testkit`: the replay model server and the conformance runner.
//!
//! Owns: loading conformance scenarios, laying out their workspaces, serving recorded model
//! responses over loopback HTTP ([`ReplayServer`]), a scripted plain chat-completions server
//! that records requests ([`chat::ChatServer`]), driving the `dsh` binary over ACP or
//! headless stream-json, normalising output and judging a run against the recording.
//! Must not depend on: any shipped `dsh-*` crate at runtime (it drives the real binary as a
//! black box); shipped crates must not depend on it except as a dev-dependency.
//!
//! Binaries:
//! - `dsh-mock-llm --scenario DIR [--addr 127.0.0.1:0] [--workspace DIR]` prints
//!   `listening on http://127.0.0.1:PORT`, serves until SIGINT/SIGTERM, then prints
//!   `{"served","unconsumed","unanswered"}` (also at `GET /__replay/status`).
//! - `dsh-conformance [--bin DSH] [--report FILE] [--verbose] [--wait-ms N] DIR...`.

pub mod acp;
mod aux_server;
mod binding;
pub mod chat;
pub mod composition;
pub mod error;
pub mod harness;
pub mod headless;
pub mod judge;
pub mod long_session;
pub mod normalize;
pub mod replay;
pub mod runner;
pub mod scenario;
pub mod session_log;
pub mod sse;
pub mod synthetic;
pub mod transcript_check;
pub mod workspace;

pub use error::{Result, TestkitError};
pub use normalize::Normalizer;
pub use replay::{ReplayServer, Unanswered, Unconsumed};
pub use runner::{NOT_IMPLEMENTED, RunReport, RunnerOptions, ScenarioReport, Status};
pub use scenario::Scenario;
