//! Depth: every walk is iterative (checklist item 16). These run on default test threads
//! (2 MiB stacks), and every deep value is dismantled with `drop_deep`.

use dsh_schema::{
    assert_supported, clone_deep, compile_parameters, drop_deep, is_lossless, json_eq, to_js_json,
    validate,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{neg_zero, obj};

fn nest_objects(depth: usize, leaf: Value) -> Value {
    let mut v = leaf;
    for _ in 0..depth {
        v = obj(vec![("a", v)]);
    }
    v
}

fn nest_arrays(depth: usize, leaf: Value) -> Value {
    let mut v = leaf;
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

/// Compiles a `depth`-deep closed-object parameter chain, asserts it, and validates good and
/// bad values against it.
pub fn deep_object_chain_round_trip(depth: usize) {
    let mut prop = json!({"type":"string","required":true});
    for _ in 1..depth {
        prop = obj(vec![
            ("type", json!("object")),
            ("additionalProperties", json!(false)),
            ("required", json!(true)),
            ("properties", obj(vec![("a", prop)])),
        ]);
    }
    let spec = obj(vec![("a", prop)]);
    let schema = compile_parameters(&spec).expect("compiles");
    assert!(assert_supported(&schema).is_ok());

    let good = nest_objects(depth, json!("x"));
    assert!(validate(&schema, &good, "").is_empty());

    let bad = nest_objects(depth, json!(1));
    let out = validate(&schema, &bad, "");
    let path = vec!["a"; depth].join(".");
    assert_eq!(out, vec![format!("\"{path}\" must be a string")]);

    let missing = nest_objects(depth - 1, json!({}));
    assert_eq!(
        validate(&schema, &missing, ""),
        vec![format!("missing required property \"{path}\"")]
    );

    let extra = nest_objects(depth - 1, json!({"a":"x","zz":neg_zero()}));
    let parent = vec!["a"; depth - 1].join(".");
    assert_eq!(
        validate(&schema, &extra, ""),
        vec![format!(
            "\"{parent}.zz\" is not a declared property (additionalProperties: false)"
        )]
    );
    for v in [spec, schema, good, bad, missing, extra] {
        drop_deep(v);
    }
}

#[test]
fn deep_5000_object_chain() {
    deep_object_chain_round_trip(5000);
}

#[test]
fn deep_5000_nested_arrays() {
    let lossy = nest_arrays(5000, neg_zero());
    assert!(!is_lossless(&lossy));
    assert_eq!(
        validate(&json!({"type":"array"}), &lossy, "value"),
        vec![r#""value" must be a dense lossless JSON array"#]
    );
    assert_eq!(
        validate(&json!({}), &lossy, "value"),
        vec![r#""value" must be a lossless JSON value"#]
    );

    // A 5 000-deep `items` chain against a 5 000-deep value, failing at the bottom.
    let mut schema = json!({"type":"string"});
    for _ in 0..5000 {
        schema = obj(vec![("type", json!("array")), ("items", schema)]);
    }
    assert!(assert_supported(&schema).is_ok());
    let good = nest_arrays(5000, json!("s"));
    assert!(validate(&schema, &good, "value").is_empty());
    let bad = nest_arrays(5000, json!(false));
    assert_eq!(
        validate(&schema, &bad, "value"),
        vec![format!("\"value{}\" must be a string", "[0]".repeat(5000))]
    );
    for v in [lossy, schema, good, bad] {
        drop_deep(v);
    }
}

#[test]
fn deep_helpers_are_iterative() {
    let v = nest_objects(20_000, nest_arrays(20_000, json!(1.5)));
    assert!(is_lossless(&v));
    let copy = clone_deep(&v);
    assert!(json_eq(&v, &copy));
    let text = to_js_json(&copy);
    assert!(text.starts_with(r#"{"a":{"a":"#));
    assert!(text.contains("[[1.5]]"));
    let other = nest_objects(20_000, nest_arrays(20_000, json!(2)));
    assert!(!json_eq(&v, &other));
    for v in [v, copy, other] {
        drop_deep(v);
    }
}
