mod checklist;
mod client;
mod harness;
mod snapshots;
mod wire;
