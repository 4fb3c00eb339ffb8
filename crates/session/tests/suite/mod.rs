mod common;
mod invariants;
mod persistence;
mod repair;
mod store;
mod upstream;
mod checklist_gaps;
