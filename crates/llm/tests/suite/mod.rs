mod conformance;
mod errors;
mod server;
mod stream;
mod checklist_gaps;
