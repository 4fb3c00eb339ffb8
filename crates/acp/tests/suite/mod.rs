mod checklist;
mod client;
mod harness;
mod images;
mod snapshots;
mod wire;
