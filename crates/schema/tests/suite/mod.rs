mod checklist;
mod deep;
mod derive;
mod json_schema;
mod lossless;
mod schema_dsl;

use dsh_schema::SchemaError;
use serde_json::Value;

/// The violations of a failed compile/assert; panics (test failure) on success.
pub fn violations<T: std::fmt::Debug>(result: Result<T, SchemaError>) -> Vec<String> {
    match result {
        Ok(v) => panic!("expected a SchemaError, got {v:?}"),
        Err(e) => e.violations,
    }
}

/// Asserts that compiling/asserting yields exactly `expected`.
#[track_caller]
pub fn assert_violations<T: std::fmt::Debug>(result: Result<T, SchemaError>, expected: &[&str]) {
    pretty_assertions::assert_eq!(violations(result), expected);
}

/// `validate` with root `value`.
pub fn check(schema: &Value, value: &Value) -> Vec<String> {
    dsh_schema::validate(schema, value, "value")
}

/// `-0.0` as a JSON value (what serde_json produces when parsing `-0.0`).
pub fn neg_zero() -> Value {
    serde_json::from_str("-0.0").expect("parses")
}

/// An object from owned values. (`json!` would serialise an embedded `Value` by reference, a
/// recursive deep copy: unusable for deep values.)
pub fn obj(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}
