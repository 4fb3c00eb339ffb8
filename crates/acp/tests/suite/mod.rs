mod checklist;
mod client;
mod harness;
mod images;
mod live_output;
mod snapshots;
mod wire;
