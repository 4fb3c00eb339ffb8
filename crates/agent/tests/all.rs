//! Crate-level tests of the agent loop: the real loop with only the model scripted.

mod suite;
