//! `dsh-schema`: lossless JSON and the supported JSON-Schema subset.
//!
//! Owns: the lossless-JSON rules (no `-0`, no non-finite numbers, key order kept), the raw
//! schema subset assertion (`assert_supported`), total value validation with upstream's exact
//! violation messages (`validate`), the author DSL compiler (upstream's `ValueSchemaSpec`), and
//! the normaliser that turns a schemars-derived schema into the subset.
//! Must not depend on: any other dsh crate, async, I/O. Every walk is iterative, so depth is
//! bounded by memory, never by the call stack.

// NOTE: the bodies below are placeholders while the crate is being written; the signatures are
// the contract other crates build against.

use serde_json::Value;

/// A schema outside the supported subset. Displays as `unsupported JSON schema: <v1>; <v2>…`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported JSON schema: {}", violations.join("; "))]
pub struct SchemaError {
    pub violations: Vec<String>,
}

/// `true` when `value` is lossless JSON: every number finite and not negative zero.
pub fn is_lossless(value: &Value) -> bool {
    let _ = value;
    true
}

/// Checks that `schema` uses only the supported subset; collects every violation.
pub fn assert_supported(schema: &Value) -> Result<(), SchemaError> {
    let _ = schema;
    Ok(())
}

/// Validates `value` against `schema`. Total: returns every violation, empty when valid.
/// `root` is the display root: `""` shows as `arguments` (parameters), `"value"` for outputs.
pub fn validate(schema: &Value, value: &Value, root: &str) -> Vec<String> {
    let _ = (schema, value, root);
    Vec::new()
}
