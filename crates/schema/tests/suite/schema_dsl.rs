//! Port of upstream `schema.spec.ts` (spec §9.1): the author DSL compiler.

use dsh_schema::{compile_parameters, compile_value, drop_deep};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{assert_violations, violations};

#[test]
fn dsl_01_compiles_every_root() {
    let cases = [
        (
            json!({"type":"string","enum":["a","b"],"const":"a"}),
            json!({"type":"string","enum":["a","b"],"const":"a"}),
        ),
        (
            json!({"type":"number","description":"n"}),
            json!({"type":"number","description":"n"}),
        ),
        (
            json!({"type":"integer","enum":[1,2]}),
            json!({"type":"integer","enum":[1,2]}),
        ),
        (
            json!({"type":"boolean","const":true}),
            json!({"type":"boolean","const":true}),
        ),
        (json!({"type":"null"}), json!({"type":"null"})),
        (
            json!({"type":"array","items":{"type":"json"}}),
            json!({"type":"array","items":{}}),
        ),
        (json!({"type":"array"}), json!({"type":"array"})),
        (
            json!({"type":"object","additionalProperties":false}),
            json!({"type":"object","additionalProperties":false}),
        ),
        (
            json!({"type":"json","description":"anything","title":"Any","default":1,"examples":[1,"a"]}),
            json!({"description":"anything","title":"Any","default":1,"examples":[1,"a"]}),
        ),
        (
            json!({"oneOf":[{"type":"string"},{"type":"number"}],"description":"s or n"}),
            json!({"oneOf":[{"type":"string"},{"type":"number"}],"description":"s or n"}),
        ),
    ];
    for (spec, expected) in cases {
        let compiled = compile_value(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(compiled, expected, "{spec}");
        // Key order is observable: compare serialised text too.
        assert_eq!(compiled.to_string(), expected.to_string());
    }
}

#[test]
fn dsl_02_parameter_root_open_nested_objects_keep_openness_and_required() {
    let spec = json!({
        "path": {"type":"string","required":true,"description":"Absolute path"},
        "offset": {"type":"number"},
        "opts": {
            "type":"object","additionalProperties":true,"description":"Options",
            "properties": {
                "a": {"type":"string","required":true},
                "b": {"type":"object","additionalProperties":false,"properties":{"c":{"type":"boolean","required":true}}}
            }
        }
    });
    let expected = json!({
        "type":"object",
        "properties":{
            "path":{"type":"string","description":"Absolute path"},
            "offset":{"type":"number"},
            "opts":{
                "type":"object","description":"Options","additionalProperties":true,
                "properties":{
                    "a":{"type":"string"},
                    "b":{"type":"object","additionalProperties":false,"properties":{"c":{"type":"boolean"}},"required":["c"]}
                },
                "required":["a"]
            }
        },
        "required":["path"]
    });
    let compiled = compile_parameters(&spec).expect("compiles");
    assert_eq!(compiled.to_string(), expected.to_string());
    assert!(compiled.get("additionalProperties").is_none());
}

#[test]
fn dsl_02_spec_example_and_empty_map() {
    let spec = json!({"path":{"type":"string","required":true,"description":"Absolute path"},"offset":{"type":"number"}});
    assert_eq!(
        compile_parameters(&spec).expect("compiles").to_string(),
        r#"{"type":"object","properties":{"path":{"type":"string","description":"Absolute path"},"offset":{"type":"number"}},"required":["path"]}"#
    );
    assert_eq!(
        compile_parameters(&json!({}))
            .expect("compiles")
            .to_string(),
        r#"{"type":"object","properties":{}}"#
    );
}

#[test]
fn dsl_03_rejects_forged_author_forms() {
    let value_cases: Vec<(Value, &str)> = vec![
        (
            json!({"type":"object"}),
            "schema.additionalProperties must be explicitly true or false",
        ),
        (
            json!({"type":"object","additionalProperties":"no"}),
            "schema.additionalProperties must be explicitly true or false",
        ),
        (
            json!({"oneOf":[{"type":"string"}]}),
            "schema.oneOf must be an array of at least two value schemas",
        ),
        (
            json!({"oneOf":{"type":"string"}}),
            "schema.oneOf must be an array of at least two value schemas",
        ),
        (
            json!({"type":"string","enum":[1]}),
            "schema.enum must be a non-empty array of string values",
        ),
        (
            json!({"type":"string","enum":"a"}),
            "schema.enum must be a non-empty array of scalar values",
        ),
        (
            json!({"type":"string","enum":[]}),
            "schema.enum must be a non-empty array of scalar values",
        ),
        (
            json!({"type":"string","enum":[["a"]]}),
            "schema.enum must be a non-empty array of scalar values",
        ),
        (
            json!({"type":"string","enum":["a"],"const":"b"}),
            "schema.const must be one of schema.enum when both are declared",
        ),
        (
            json!({"type":"integer","const":1.5}),
            "schema.const must be a integer value",
        ),
        (
            json!({"type":"number","default":super::neg_zero()}),
            "schema.default annotation must be lossless JSON data",
        ),
        (
            json!({"type":"array","items":{"type":"string","required":true}}),
            "schema.items.required is not supported by the value schema DSL",
        ),
        (
            json!({"type":"array","items":"string"}),
            "schema.items must be a value schema object",
        ),
        (
            json!({"type":"string","pattern":"^a"}),
            "schema.pattern is not supported by the value schema DSL",
        ),
        (
            json!({"type":"string","items":{"type":"json"}}),
            "schema.items is not supported by the value schema DSL",
        ),
        (
            json!({"type":"string","oneOf":[{"type":"string"},{"type":"null"}]}),
            "schema cannot declare both type and oneOf",
        ),
        (
            json!({}),
            "schema.type must be string/number/integer/boolean/null/array/object/json, or use oneOf",
        ),
        (
            json!({"description":"only"}),
            "schema.type must be string/number/integer/boolean/null/array/object/json, or use oneOf",
        ),
        (
            json!({"type":"date"}),
            "schema.type must be string/number/integer/boolean/null/array/object/json, or use oneOf",
        ),
        (Value::Null, "schema must be a value schema object"),
        (
            json!({"type":"string","required":true}),
            "schema.required is not supported by the value schema DSL",
        ),
        (
            json!({"oneOf":[{"type":"string","required":true},{"type":"null"}]}),
            "schema.oneOf[0].required is not supported by the value schema DSL",
        ),
        (
            json!({"type":"object","additionalProperties":true,"properties":null}),
            "schema.properties must be an object of value schemas",
        ),
        (
            json!({"type":"object","additionalProperties":true,"properties":[]}),
            "schema.properties must be an object of value schemas",
        ),
    ];
    for (spec, message) in value_cases {
        let err = compile_value(&spec).expect_err(&spec.to_string());
        assert_eq!(err.violations, vec![message.to_owned()], "{spec}");
        assert_eq!(
            err.to_string(),
            format!("unsupported JSON schema: {message}")
        );
    }
    let param_cases: Vec<(Value, &str)> = vec![
        (
            json!({"a":{"type":"string","required":false}}),
            "parameters.a.required must be true when present",
        ),
        (
            json!({"a":{"type":"string","required":"yes"}}),
            "parameters.a.required must be true when present",
        ),
        (Value::Null, "parameters must be an object of value schemas"),
        (json!([]), "parameters must be an object of value schemas"),
        (
            json!({"a":null}),
            "parameters.a must be a value schema object",
        ),
        (
            json!({"a":{}}),
            "parameters.a.type must be string/number/integer/boolean/null/array/object/json, or use oneOf",
        ),
        (
            json!({"o":{"type":"object","additionalProperties":false,"properties":{"k":{"type":"string","required":0}}}}),
            "parameters.o.properties.k.required must be true when present",
        ),
        // Type-correctness is the raw assertion's job: its paths are rooted at `schema`.
        (
            json!({"a":{"type":"integer","enum":[1.5]}}),
            "schema.properties.a.enum must be a non-empty array of integer values",
        ),
    ];
    for (spec, message) in param_cases {
        assert_violations(compile_parameters(&spec), &[message]);
    }
}

#[test]
fn dsl_03_collects_every_author_error_in_walk_order() {
    let spec = json!({
        "a": {"type":"object"},
        "b": {"type":"string","minLength":1},
        "c": {"type":"array","items":{"type":"wat"}}
    });
    assert_violations(
        compile_parameters(&spec),
        &[
            "parameters.a.additionalProperties must be explicitly true or false",
            "parameters.b.minLength is not supported by the value schema DSL",
            "parameters.c.items.type must be string/number/integer/boolean/null/array/object/json, or use oneOf",
        ],
    );
}

#[test]
fn dsl_04_cycles_cannot_be_expressed() {
    // Upstream rejects cyclic author objects with `<path> is circular`. A `serde_json::Value` is
    // a tree: a cycle cannot be built, and a shared sub-spec is simply copied, so both sibling
    // positions compile independently.
    let shared = json!({"type":"string"});
    let spec = json!({"a": shared.clone(), "b": shared});
    let compiled = compile_parameters(&spec).expect("compiles");
    assert_eq!(compiled["properties"]["a"], compiled["properties"]["b"]);
}

/// `{"oneOf":[{"oneOf":[…, {"type":"null"}]}, {"type":"null"}]}` with `depth` layers, built
/// without recursion.
pub fn one_of_chain(depth: usize, leaf: Value) -> Value {
    let mut node = leaf;
    for _ in 0..depth {
        node = super::obj(vec![(
            "oneOf",
            Value::Array(vec![node, json!({"type":"null"})]),
        )]);
    }
    node
}

#[test]
fn dsl_05_compiles_a_5000_deep_one_of_chain_keeping_every_layer() {
    let spec = one_of_chain(5000, json!({"type":"string"}));
    let compiled = compile_value(&spec).expect("compiles");
    let mut layers = 0;
    let mut cur = &compiled;
    while let Some(Value::Array(branches)) = cur.get("oneOf") {
        assert_eq!(branches.len(), 2);
        assert_eq!(branches[1], json!({"type":"null"}));
        layers += 1;
        cur = &branches[0];
    }
    assert_eq!(layers, 5000);
    assert_eq!(cur, &json!({"type":"string"}));
    drop_deep(compiled);
    drop_deep(spec);
}

#[test]
fn dsl_06_proto_property_is_plain_data() {
    let spec =
        json!({"__proto__":{"type":"string","required":true},"constructor":{"type":"number"}});
    let compiled = compile_parameters(&spec).expect("compiles");
    assert_eq!(
        compiled.to_string(),
        r#"{"type":"object","properties":{"__proto__":{"type":"string"},"constructor":{"type":"number"}},"required":["__proto__"]}"#
    );
    assert_eq!(
        dsh_schema::validate(&compiled, &json!({}), ""),
        vec![r#"missing required property "__proto__""#]
    );
    assert!(dsh_schema::validate(&compiled, &json!({"__proto__":"x"}), "").is_empty());
}

#[test]
fn dsl_07_to_10_type_inference_is_ts_only() {
    // §9.1 items 7–10 assert TypeScript inference; the Rust analogue is the schemars path
    // (`parameters_for::<T>()`), covered in `derive.rs`. Here: compiled output is always a
    // supported raw schema, the invariant the inference relied on.
    let spec = json!({"a":{"type":"array","items":{"oneOf":[{"type":"integer"},{"type":"object","additionalProperties":false}]}}});
    let compiled = compile_parameters(&spec).expect("compiles");
    dsh_schema::assert_supported(&compiled).expect("supported");
    assert!(!violations(compile_value(&json!({"type":"tuple"}))).is_empty());
}
