//! Crate-level tests of compaction: the real agent loop and session log, only the model scripted.

mod suite;
