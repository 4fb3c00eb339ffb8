//! The crate's one error type.

/// A schema outside the supported subset (or an invalid author form). Displays as
/// `unsupported JSON schema: <v1>; <v2>…`, upstream's `JsonSchemaError` (`UNSUPPORTED_SCHEMA`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported JSON schema: {}", violations.join("; "))]
pub struct SchemaError {
    pub violations: Vec<String>,
}

impl SchemaError {
    /// Upstream's error code for this failure.
    pub const CODE: &'static str = "UNSUPPORTED_SCHEMA";
    /// Upstream's error class name (`info.name`).
    pub const NAME: &'static str = "JsonSchemaError";

    pub(crate) fn check(violations: Vec<String>) -> Result<(), SchemaError> {
        if violations.is_empty() {
            Ok(())
        } else {
            Err(SchemaError { violations })
        }
    }
}
