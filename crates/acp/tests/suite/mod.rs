mod checklist;
mod client;
mod harness;
mod images;
mod live_output;
mod questions;
mod snapshots;
mod wire;
