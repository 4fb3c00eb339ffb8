mod checklist_gaps;
mod common;
mod invariants;
mod persistence;
mod repair;
mod store;
mod upstream;
