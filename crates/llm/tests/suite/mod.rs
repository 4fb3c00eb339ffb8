mod checklist_gaps;
mod conformance;
mod errors;
mod server;
mod stream;
