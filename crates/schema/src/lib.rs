//! `dsh-schema`: lossless JSON and the supported JSON-Schema subset.
//!
//! Owns: the lossless-JSON rules (no `-0`, no non-finite numbers, key order kept), the raw
//! schema subset assertion ([`assert_supported`]), total value validation with upstream's exact
//! violation messages ([`validate`]), the author DSL compiler (upstream's `ValueSchemaSpec`,
//! [`compile_parameters`] / [`compile_value`]), and the normaliser that turns a schemars-derived
//! schema into the subset ([`parameters_for`], [`value_schema_for`]).
//! Must not depend on: any other dsh crate, async, I/O. Every walk is iterative, so depth is
//! bounded by memory, never by the call stack ([`drop_deep`] / [`clone_deep`] / [`json_eq`]
//! exist because `serde_json::Value`'s own `Drop`/`Clone`/`PartialEq` recurse).

mod derive;
mod dsl;
mod error;
mod json;
mod path;
mod subset;
mod validate;

pub use derive::{normalize_schemars, parameters_for, value_schema_for};
pub use dsl::{compile_parameters, compile_value};
pub use error::SchemaError;
pub use json::{
    clone_deep, drop_deep, is_lossless, is_lossless_number, js_number, json_eq, to_js_json,
};
pub use subset::{TYPES, assert_object_schema, assert_supported};
pub use validate::validate;
