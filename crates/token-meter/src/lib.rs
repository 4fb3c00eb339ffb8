//! `dsh-token-meter`: how many tokens the next request will carry (context-spec §7).
//!
//! Owns: the fixed estimate heuristic (UTF-16 code units / 4 plus per-block and per-message
//! overheads), the per-session fold of the log into surface prices and provider-usage anchors,
//! the request-pressure measurement compaction decides on, and the context-fill projection the
//! front-ends show. Everything is a pure fold over the session log: resume and fork refold
//! from seq 0 and get the same figures.
//! Must not depend on: the agent loop, compaction, any front-end.

mod config;
mod estimate;
mod fold;
mod plugin;
mod pressure;
mod service;

pub use config::TokenMeterConfig;
pub use config::TokenMeterConfigError;
pub use estimate::BLOCK_OVERHEAD;
pub use estimate::CHARS_PER_TOKEN;
pub use estimate::ROLE_OVERHEAD;
pub use estimate::estimate_block;
pub use estimate::estimate_content;
pub use estimate::estimate_header;
pub use estimate::estimate_message;
pub use estimate::estimate_text;
pub use estimate::utf16_len;
pub use fold::Baseline;
pub use fold::MeterError;
pub use fold::MeterFold;
pub use fold::Node;
pub use fold::TokenMeasurement;
pub use fold::event_message;
pub use plugin::TokenMeterPlugin;
pub use pressure::ContextPressure;
pub use pressure::PressureFold;
pub use service::TokenMeter;
