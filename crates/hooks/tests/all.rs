//! Crate-level tests of the hook bridges: a real agent loop (scripted model), the real tool
//! registry and pipeline, real hook commands run by the local executor.

mod suite;
