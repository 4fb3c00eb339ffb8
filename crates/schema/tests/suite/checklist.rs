//! Conformance checklist items 1–16 (spec §11, "DSL and validation").

use dsh_schema::{assert_supported, compile_parameters, compile_value, drop_deep, validate};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{assert_violations, neg_zero, violations};

fn params(spec: Value) -> Value {
    compile_parameters(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

#[test]
fn item_01_required_lists_marked_keys_in_declaration_order() {
    let schema = params(json!({
        "z":{"type":"string","required":true},
        "a":{"type":"number"},
        "m":{"type":"boolean","required":true},
    }));
    assert_eq!(schema["required"], json!(["z", "m"]));
    let none = params(json!({"a":{"type":"number"}}));
    assert!(none.get("required").is_none());
    assert_eq!(
        none.to_string(),
        r#"{"type":"object","properties":{"a":{"type":"number"}}}"#
    );
}

#[test]
fn item_02_root_never_has_additional_properties_nested_objects_keep_theirs() {
    let schema = params(json!({
        "open":{"type":"object","additionalProperties":true},
        "closed":{"type":"object","additionalProperties":false,"properties":{"x":{"type":"object","additionalProperties":true}}},
    }));
    assert!(schema.get("additionalProperties").is_none());
    assert_eq!(
        schema["properties"]["open"]["additionalProperties"],
        json!(true)
    );
    assert_eq!(
        schema["properties"]["closed"]["additionalProperties"],
        json!(false)
    );
    assert_eq!(
        schema["properties"]["closed"]["properties"]["x"]["additionalProperties"],
        json!(true)
    );
}

#[test]
fn item_03_object_node_without_boolean_additional_properties_is_rejected() {
    assert_violations(
        compile_parameters(&json!({"o":{"type":"object","properties":{}}})),
        &["parameters.o.additionalProperties must be explicitly true or false"],
    );
    assert_violations(
        compile_value(&json!({"type":"object","additionalProperties":1})),
        &["schema.additionalProperties must be explicitly true or false"],
    );
}

#[test]
fn item_04_one_of_arity_type_plus_one_of_and_literal_types() {
    assert_violations(
        compile_value(&json!({"oneOf":[{"type":"string"}]})),
        &["schema.oneOf must be an array of at least two value schemas"],
    );
    assert_violations(
        compile_value(&json!({"type":"string","oneOf":[{"type":"string"},{"type":"null"}]})),
        &["schema cannot declare both type and oneOf"],
    );
    assert_violations(
        compile_value(&json!({"type":"number","enum":["1"]})),
        &["schema.enum must be a non-empty array of number values"],
    );
    assert_violations(
        compile_value(&json!({"type":"boolean","const":"true"})),
        &["schema.const must be a boolean value"],
    );
    assert_violations(
        compile_value(&json!({"type":"integer","enum":[1,2],"const":3})),
        &["schema.const must be one of schema.enum when both are declared"],
    );
    // Raw form too.
    assert_violations(
        assert_supported(&json!({"oneOf":[{"type":"string"}]})),
        &["schema.oneOf must be an array of at least two schemas"],
    );
}

#[test]
fn item_05_unsupported_keywords_are_rejected_with_a_path() {
    let schema = json!({"type":"object","properties":{"p":{"type":"string","pattern":"^a"},"q":{"anyOf":[]},"r":{"$ref":"#/x"}}});
    let subset = "(subset: type/oneOf/properties/required/additionalProperties/items/enum/const + annotations)";
    assert_violations(
        assert_supported(&schema),
        &[
            &format!("schema.properties.p.pattern is not a supported keyword {subset}"),
            &format!("schema.properties.q.anyOf is not a supported keyword {subset}"),
            &format!("schema.properties.r.$ref is not a supported keyword {subset}"),
        ],
    );
}

#[test]
fn item_06_every_independent_violation_in_one_error() {
    let err = assert_supported(&json!({
        "type":"object",
        "properties":{"a":{"type":"string","enum":[1]},"b":{"type":["string"]}},
        "required":["a","c"],
        "additionalProperties":"no",
    }))
    .expect_err("invalid");
    assert_eq!(
        err.violations,
        vec![
            r#"schema.required names "c" which is not in properties"#,
            "schema.additionalProperties must be a boolean",
            "schema.properties.a.enum must be a non-empty array of string values",
            "schema.properties.b.type must be a single type string (type arrays are not supported)",
        ]
    );
    assert_eq!(
        err.to_string(),
        format!("unsupported JSON schema: {}", err.violations.join("; "))
    );
}

#[test]
fn item_07_missing_required_key_message() {
    // The tool runtime wraps these as `invalid arguments: <v1>; <v2>…` (INVALID_ARGS) before the
    // body runs; this crate owns the violation text.
    let schema =
        params(json!({"path":{"type":"string","required":true},"limit":{"type":"integer"}}));
    let out = validate(&schema, &json!({"limit":3}), "");
    assert_eq!(out, vec![r#"missing required property "path""#]);
    assert_eq!(
        format!("invalid arguments: {}", out.join("; ")),
        r#"invalid arguments: missing required property "path""#
    );
}

#[test]
fn item_08_explicit_null_counts_as_present() {
    let schema = params(json!({"path":{"type":"string","required":true}}));
    assert_eq!(
        validate(&schema, &json!({"path":null}), ""),
        vec![r#""path" must be a string"#]
    );
    assert_eq!(
        validate(&schema, &json!({}), ""),
        vec![r#"missing required property "path""#]
    );
}

#[test]
fn item_09_extra_keys_open_root_closed_nested() {
    let schema = params(json!({
        "server":{"type":"object","additionalProperties":false,"properties":{"host":{"type":"string","required":true}}},
    }));
    assert!(validate(&schema, &json!({"server":{"host":"h"},"extra":1}), "").is_empty());
    assert_eq!(
        validate(&schema, &json!({"server":{"host":"h","port":1}}), ""),
        vec![r#""server.port" is not a declared property (additionalProperties: false)"#]
    );
}

#[test]
fn item_10_paths_and_non_object_root() {
    let schema = params(json!({
        "servers":{"type":"array","required":true,"items":{"type":"object","additionalProperties":false,"properties":{"host":{"type":"string","required":true}}}},
    }));
    assert_eq!(
        validate(
            &schema,
            &json!({"servers":[{"host":"a"},{"host":7},{}]}),
            ""
        ),
        vec![
            r#""servers[1].host" must be a string"#,
            r#"missing required property "servers[2].host""#
        ]
    );
    for root in [json!("raw text"), json!([]), json!(null), json!(1)] {
        assert_eq!(
            validate(&schema, &root, ""),
            vec![r#""arguments" must be an object"#]
        );
    }
}

#[test]
fn item_11_enum_compact_json_and_enum_before_const() {
    let schema = params(json!({"color":{"type":"string","enum":["red","green"]}}));
    assert_eq!(
        validate(&schema, &json!({"color":"blue"}), ""),
        vec![r#""color" must be one of ["red","green"]"#]
    );
    let nums = compile_value(&json!({"type":"number","enum":[1.0, 2.5, 1e21]})).expect("compiles");
    assert_eq!(
        validate(&nums, &json!(3), "value"),
        vec![r#""value" must be one of [1,2.5,1e+21]"#]
    );
    let both =
        compile_value(&json!({"type":"string","enum":["a","b"],"const":"a"})).expect("compiles");
    assert_eq!(
        validate(&both, &json!("z"), "value"),
        vec![r#""value" must be one of ["a","b"]"#]
    );
    assert_eq!(
        validate(&both, &json!("b"), "value"),
        vec![r#""value" must be "a""#]
    );
}

#[test]
fn item_12_one_of_match_count() {
    let schema =
        compile_value(&json!({"oneOf":[{"type":"number"},{"type":"integer"}]})).expect("compiles");
    assert_eq!(
        validate(&schema, &json!(2), "value"),
        vec![r#""value" must match exactly one oneOf branch (matched 2)"#]
    );
    assert_eq!(
        validate(&schema, &json!(true), "value"),
        vec![r#""value" must match exactly one oneOf branch (matched 0)"#]
    );
    assert!(validate(&schema, &json!(2.5), "value").is_empty());
}

#[test]
fn item_13_negative_zero_rejected_wherever_a_number_is_validated() {
    let nz = neg_zero();
    assert_eq!(
        validate(&json!({"type":"number"}), &nz, "value"),
        vec![r#""value" must be a finite JSON number"#]
    );
    assert_eq!(
        validate(&json!({"type":"integer"}), &nz, "value"),
        vec![r#""value" must be a finite JSON number"#]
    );
    assert_eq!(
        validate(&json!({}), &nz, "value"),
        vec![r#""value" must be a lossless JSON value"#]
    );
    assert_eq!(
        validate(&json!({"type":"array"}), &json!([nz.clone()]), "value"),
        vec![r#""value" must be a dense lossless JSON array"#]
    );
    assert_eq!(
        validate(
            &json!({"type":"object"}),
            &json!({"k": nz.clone()}),
            "value"
        ),
        vec![r#""value" must be a lossless JSON object"#]
    );
    // Schema literals and annotations too.
    assert!(assert_supported(&json!({"type":"number","const":nz.clone()})).is_err());
    assert!(assert_supported(&json!({"type":"number","enum":[nz.clone()]})).is_err());
    assert!(assert_supported(&json!({"default":nz.clone()})).is_err());
    assert!(!dsh_schema::is_lossless(&json!({"a":[1, nz]})));
    assert!(dsh_schema::is_lossless(&json!({"a":[0, 0.0, -1, 1e308]})));
}

#[test]
fn item_14_defaults_are_never_applied() {
    let schema = params(json!({"limit":{"type":"integer","default":10}}));
    let args = json!({});
    assert!(validate(&schema, &args, "").is_empty());
    assert_eq!(args, json!({}), "validation does not fill in defaults");
    // A default does not satisfy `required` either.
    let required = params(json!({"limit":{"type":"integer","default":10,"required":true}}));
    assert_eq!(
        validate(&required, &json!({}), ""),
        vec![r#"missing required property "limit""#]
    );
}

#[test]
fn item_15_validation_is_total() {
    let schemas = [
        params(
            json!({"a":{"oneOf":[{"type":"string"},{"type":"array","items":{"type":"json"}}]},"b":{"type":"object","additionalProperties":false}}),
        ),
        json!({"type":"array","items":{"type":"object","properties":{"x":{"type":"integer","enum":[1,2]}}}}),
        json!({}),
        // Forged schemas outside the subset still do not panic.
        json!({"type":["string"]}),
        json!({"oneOf":"x"}),
        json!(null),
    ];
    let values = [
        json!(null),
        json!(true),
        json!(-1),
        json!(1.5),
        neg_zero(),
        json!("s"),
        json!([]),
        json!({}),
        json!({"a":[1,{"b":neg_zero()}],"b":{"z":1}}),
        json!([{"x":3},{"x":"1"},7]),
        json!({"a":"s","b":{}}),
    ];
    for schema in &schemas {
        for value in &values {
            let _ = validate(schema, value, "");
            let _ = validate(schema, value, "value");
        }
    }
    assert_eq!(
        validate(&schemas[0], &json!({"a":"s","b":{}}), ""),
        Vec::<String>::new()
    );
}

#[test]
fn item_16_thousands_of_levels_deep() {
    // Compile + assert + validate 5 000-deep oneOf chains, properties chains and nested arrays;
    // see `deep.rs` for the rest. Runs on a default (2 MiB) test thread.
    let spec = super::schema_dsl::one_of_chain(5000, json!({"type":"integer"}));
    let compiled = compile_value(&spec).expect("compiles");
    assert!(validate(&compiled, &json!(3), "value").is_empty());
    assert_eq!(
        violations(compile_value(&super::schema_dsl::one_of_chain(
            5000,
            json!({})
        )))
        .len(),
        1
    );
    drop_deep(spec);
    drop_deep(compiled);
    super::deep::deep_object_chain_round_trip(5000);
}
