//! Port of upstream `json-schema.spec.ts` (spec §9.2): the raw subset and value validation.

use dsh_schema::{assert_object_schema, assert_supported, drop_deep, validate};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{assert_violations, check, neg_zero};

const SUBSET: &str =
    "(subset: type/oneOf/properties/required/additionalProperties/items/enum/const + annotations)";

#[test]
fn js_01_accepts_every_supported_shape() {
    for schema in [
        json!({"type":"string"}),
        json!({"type":"number"}),
        json!({"type":"integer"}),
        json!({"type":"boolean"}),
        json!({"type":"null"}),
        json!({"type":"array","items":{"type":"string"}}),
        json!({"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}},"required":["b"],"additionalProperties":false}},"required":["a"]}),
        json!({"oneOf":[{"type":"string"},{"type":"null"}],"description":"d"}),
        json!({}),
        json!({"description":"any","title":"Any","default":{"a":[1,2]},"examples":[null]}),
        json!({"type":"string","enum":["a"],"const":"a"}),
    ] {
        assert_supported(&schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
    }
}

#[test]
fn js_02_object_rooted_assertion() {
    assert_violations(
        assert_object_schema(&json!({"type":"string"})),
        &[r#"schema.type must be "object" (structured output is object-rooted)"#],
    );
    assert_violations(
        assert_object_schema(&json!({})),
        &[r#"schema.type must be "object" (structured output is object-rooted)"#],
    );
    assert!(assert_object_schema(&json!({"type":"object","properties":{}})).is_ok());
    // Tool outputs may have any root.
    assert!(assert_supported(&json!({"type":"string"})).is_ok());
}

#[test]
fn js_03_non_schema_nodes_unknown_types_and_type_arrays() {
    assert_violations(
        assert_supported(&Value::Null),
        &["schema must be a schema object"],
    );
    assert_violations(
        assert_supported(&json!([])),
        &["schema must be a schema object"],
    );
    assert_violations(
        assert_supported(&json!("string")),
        &["schema must be a schema object"],
    );
    assert_violations(
        assert_supported(&json!({"type":"date"})),
        &["schema.type must be one of object/array/string/number/integer/boolean/null"],
    );
    assert_violations(
        assert_supported(&json!({"type":["string","null"]})),
        &["schema.type must be a single type string (type arrays are not supported)"],
    );
    assert_violations(
        assert_supported(&json!({"type":"object","properties":{"a":1}})),
        &["schema.properties.a must be a schema object"],
    );
}

#[test]
fn js_04_one_of_rules() {
    assert_violations(
        assert_supported(&json!({"oneOf":[{"type":"string"}]})),
        &["schema.oneOf must be an array of at least two schemas"],
    );
    assert_violations(
        assert_supported(&json!({"oneOf":{}})),
        &["schema.oneOf must be an array of at least two schemas"],
    );
    assert_violations(
        assert_supported(&json!({"type":"string","oneOf":[{"type":"string"},{"type":"null"}]})),
        &["schema cannot declare both type and oneOf"],
    );
    assert_violations(
        assert_supported(
            &json!({"oneOf":[{"type":"string"},{"type":"null"}],"properties":{},"required":[],"additionalProperties":false,"items":{},"enum":[1],"const":1}),
        ),
        &[
            "schema.properties is not supported beside oneOf",
            "schema.required is not supported beside oneOf",
            "schema.additionalProperties is not supported beside oneOf",
            "schema.items is not supported beside oneOf",
            "schema.enum is not supported beside oneOf",
            "schema.const is not supported beside oneOf",
        ],
    );
    assert_violations(
        assert_supported(&json!({"oneOf":[{"type":"string"},{"type":"strin"}]})),
        &["schema.oneOf[1].type must be one of object/array/string/number/integer/boolean/null"],
    );
}

#[test]
fn js_05_unknown_and_misplaced_keywords() {
    for kw in [
        "anyOf",
        "allOf",
        "not",
        "pattern",
        "minimum",
        "maxLength",
        "$ref",
    ] {
        let mut schema = json!({"type":"string"});
        schema[kw] = json!(1);
        assert_violations(
            assert_supported(&schema),
            &[&format!("schema.{kw} is not a supported keyword {SUBSET}")],
        );
    }
    assert_violations(
        assert_supported(&json!({"type":"string","properties":{},"items":{}})),
        &[
            r#"schema.properties is not supported on type "string""#,
            r#"schema.items is not supported on type "string""#,
        ],
    );
    assert_violations(
        assert_supported(&json!({"type":"object","enum":[{}]})),
        &[r#"schema.enum is not supported on type "object""#],
    );
    assert_violations(
        assert_supported(&json!({"type":"array","const":[],"required":[]})),
        &[
            r#"schema.required is not supported on type "array""#,
            r#"schema.const is not supported on type "array""#,
        ],
    );
    // Without type or oneOf: fixed order, whatever the key order.
    assert_violations(
        assert_supported(
            &json!({"const":1,"enum":[1],"items":{},"additionalProperties":true,"required":[],"properties":{}}),
        ),
        &[
            "schema.properties requires type or oneOf",
            "schema.required requires type or oneOf",
            "schema.additionalProperties requires type or oneOf",
            "schema.items requires type or oneOf",
            "schema.enum requires type or oneOf",
            "schema.const requires type or oneOf",
        ],
    );
}

#[test]
fn js_06_collects_all_independent_violations() {
    let schema = json!({
        "type":"object",
        "pattern":"x",
        "properties":{"a":{"type":"strng"},"b":{"type":"array","items":{"type":"string","minLength":1}}},
    });
    assert_violations(
        assert_supported(&schema),
        &[
            &format!("schema.pattern is not a supported keyword {SUBSET}"),
            "schema.properties.a.type must be one of object/array/string/number/integer/boolean/null",
            &format!("schema.properties.b.items.minLength is not a supported keyword {SUBSET}"),
        ],
    );
}

#[test]
fn js_07_object_keyword_messages() {
    assert_violations(
        assert_supported(&json!({"type":"object","properties":[]})),
        &["schema.properties must be an object of schemas"],
    );
    assert_violations(
        assert_supported(&json!({"type":"object","properties":null})),
        &["schema.properties must be an object of schemas"],
    );
    assert_violations(
        assert_supported(&json!({"type":"object","properties":{"a":true}})),
        &["schema.properties.a must be a schema object"],
    );
    assert_violations(
        assert_supported(&json!({"type":"object","required":"a"})),
        &["schema.required must be an array of strings"],
    );
    assert_violations(
        assert_supported(&json!({"type":"object","required":["a",1]})),
        &["schema.required must be an array of strings"],
    );
    assert_violations(
        assert_supported(&json!({"type":"object","properties":{"a":{}},"required":["a","b"]})),
        &[r#"schema.required names "b" which is not in properties"#],
    );
    assert_violations(
        assert_supported(&json!({"type":"object","additionalProperties":{}})),
        &["schema.additionalProperties must be a boolean"],
    );
}

#[test]
fn js_08_type_correct_enum_and_const() {
    for schema in [
        json!({"type":"string","enum":["a","b"],"const":"a"}),
        json!({"type":"number","enum":[1.5,2],"const":2.0}),
        json!({"type":"integer","enum":[1,2.0],"const":1}),
        json!({"type":"boolean","enum":[true],"const":true}),
        json!({"type":"null","enum":[null],"const":null}),
    ] {
        assert_supported(&schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
    }
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"type":"string","enum":[]}),
            "schema.enum must be a non-empty array of string values",
        ),
        (
            json!({"type":"string","enum":["a",1]}),
            "schema.enum must be a non-empty array of string values",
        ),
        (
            json!({"type":"number","enum":[1, neg_zero()]}),
            "schema.enum must be a non-empty array of number values",
        ),
        (
            json!({"type":"integer","enum":[1.5]}),
            "schema.enum must be a non-empty array of integer values",
        ),
        (
            json!({"type":"null","enum":[0]}),
            "schema.enum must be a non-empty array of null values",
        ),
        (
            json!({"type":"boolean","enum":"true"}),
            "schema.enum must be a non-empty array of boolean values",
        ),
        (
            json!({"type":"string","const":1}),
            "schema.const must be a string value",
        ),
        (
            json!({"type":"number","const":neg_zero()}),
            "schema.const must be a number value",
        ),
        (
            json!({"type":"integer","const":neg_zero()}),
            "schema.const must be a integer value",
        ),
        (
            json!({"type":"null","const":false}),
            "schema.const must be a null value",
        ),
        (
            json!({"type":"string","enum":["a"],"const":"b"}),
            "schema.const must be one of schema.enum when both are declared",
        ),
    ];
    for (schema, message) in cases {
        assert_violations(assert_supported(&schema), &[message]);
    }
}

#[test]
fn js_09_annotation_checks() {
    assert_violations(
        assert_supported(
            &json!({"description":1,"title":false,"default":neg_zero(),"examples":[{"a":neg_zero()}]}),
        ),
        &[
            "schema.description must be a string",
            "schema.title must be a string",
            "schema.default annotation must be lossless JSON data",
            "schema.examples annotation must be lossless JSON data",
        ],
    );
    assert!(
        assert_supported(
            &json!({"type":"string","default":{"deep":[1,{"x":null}]},"examples":["a"]})
        )
        .is_ok()
    );
}

#[test]
fn js_11_sibling_reuse_is_fine() {
    let shared = json!({"type":"object","properties":{"x":{"type":"number"}}});
    let schema = json!({"type":"object","properties":{"a":shared.clone(),"b":shared}});
    assert!(assert_supported(&schema).is_ok());
}

#[test]
fn js_12_asserts_a_5000_deep_one_of_chain() {
    let schema = super::schema_dsl::one_of_chain(5000, json!({"type":"string"}));
    assert!(assert_supported(&schema).is_ok());
    drop_deep(schema);
    let bad = super::schema_dsl::one_of_chain(5000, json!({"type":"wat"}));
    let errs = super::violations(assert_supported(&bad));
    assert_eq!(errs.len(), 1);
    assert!(errs[0].starts_with("schema.oneOf[0].oneOf[0]."));
    assert!(
        errs[0].ends_with(
            "oneOf[0].type must be one of object/array/string/number/integer/boolean/null"
        )
    );
    assert_eq!(errs[0].matches("oneOf[0]").count(), 5000);
    drop_deep(bad);
}

#[test]
fn js_13_required_checked_against_own_keys() {
    assert_violations(
        assert_supported(&json!({"type":"object","required":["toString"]})),
        &[r#"schema.required names "toString" which is not in properties"#],
    );
}

#[test]
fn js_14_validate_accepts_valid_roots() {
    assert!(check(&json!({"type":"string"}), &json!("s")).is_empty());
    assert!(check(&json!({"type":"number"}), &json!(1.5)).is_empty());
    assert!(check(&json!({"type":"integer"}), &json!(3)).is_empty());
    assert!(check(&json!({"type":"boolean"}), &json!(false)).is_empty());
    assert!(check(&json!({"type":"null"}), &Value::Null).is_empty());
    assert!(
        check(
            &json!({"type":"array","items":{"type":"number"}}),
            &json!([1, 2.5])
        )
        .is_empty()
    );
    assert!(
        check(
            &json!({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}),
            &json!({"a":"x","extra":1})
        )
        .is_empty()
    );
}

#[test]
fn js_15_wrong_scalar_messages() {
    let cases: Vec<(Value, Value, &str)> = vec![
        (
            json!({"type":"string"}),
            json!(1),
            r#""value" must be a string"#,
        ),
        (
            json!({"type":"number"}),
            json!("1"),
            r#""value" must be a number"#,
        ),
        (
            json!({"type":"number"}),
            neg_zero(),
            r#""value" must be a finite JSON number"#,
        ),
        (
            json!({"type":"integer"}),
            json!(1.5),
            r#""value" must be an integer"#,
        ),
        (
            json!({"type":"integer"}),
            json!("1"),
            r#""value" must be an integer"#,
        ),
        (
            json!({"type":"integer"}),
            neg_zero(),
            r#""value" must be a finite JSON number"#,
        ),
        (
            json!({"type":"boolean"}),
            json!(0),
            r#""value" must be a boolean"#,
        ),
        (
            json!({"type":"null"}),
            json!(false),
            r#""value" must be null"#,
        ),
        (
            json!({"type":"object"}),
            json!([]),
            r#""value" must be an object"#,
        ),
        (
            json!({"type":"array"}),
            json!({}),
            r#""value" must be an array"#,
        ),
    ];
    for (schema, value, message) in cases {
        assert_eq!(check(&schema, &value), vec![message], "{schema} / {value}");
    }
    // Integers by value: 1.0 is an integer.
    assert!(check(&json!({"type":"integer"}), &json!(1.0)).is_empty());
    assert!(
        check(
            &json!({"type":"integer"}),
            &serde_json::from_str::<Value>("1e3").expect("parses")
        )
        .is_empty()
    );
}

#[test]
fn js_16_enum_before_const() {
    let schema = json!({"type":"string","enum":["a","b"],"const":"a"});
    assert_eq!(
        check(&schema, &json!("c")),
        vec![r#""value" must be one of ["a","b"]"#]
    );
    assert_eq!(check(&schema, &json!("b")), vec![r#""value" must be "a""#]);
    assert!(check(&schema, &json!("a")).is_empty());
    assert_eq!(
        check(&json!({"type":"number","const":1}), &json!(2)),
        vec![r#""value" must be 1"#]
    );
    assert!(check(&json!({"type":"number","const":1}), &json!(1.0)).is_empty());
}

#[test]
fn js_17_required_nested_and_closed_object_paths() {
    let schema = json!({
        "type":"object",
        "properties":{
            "a":{"type":"string"},
            "nested":{"type":"object","properties":{"b":{"type":"number"}},"required":["b"],"additionalProperties":false}
        },
        "required":["a","nested"]
    });
    assert_eq!(
        check(&schema, &json!({"nested":{"x":1}})),
        vec![
            r#"missing required property "value.a""#,
            r#"missing required property "value.nested.b""#,
            r#""value.nested.x" is not a declared property (additionalProperties: false)"#,
        ]
    );
    // Raw objects are open by default.
    assert!(check(&schema, &json!({"a":"x","nested":{"b":1},"more":true})).is_empty());
    assert_eq!(
        check(&schema, &json!("obj")),
        vec![r#""value" must be an object"#]
    );
}

#[test]
fn js_18_lossy_members_and_non_objects() {
    let schema = json!({"type":"object","properties":{"a":{"type":"string"}}});
    assert_eq!(
        check(&schema, &json!({"a":"x","b":neg_zero()})),
        vec![r#""value" must be a lossless JSON object"#]
    );
    // Other violations suppress the lossless report.
    assert_eq!(
        check(&schema, &json!({"a":1,"b":neg_zero()})),
        vec![r#""value.a" must be a string"#]
    );
    // No `undefined`/Date in serde_json; the closest non-object is a string timestamp.
    assert_eq!(
        check(&schema, &json!("2024-01-01T00:00:00Z")),
        vec![r#""value" must be an object"#]
    );
}

#[test]
fn js_20_arrays_validate_per_index() {
    let schema = json!({"type":"array","items":{"type":"string"}});
    assert_eq!(
        check(&schema, &json!(["a", 1, "c", null])),
        vec![
            r#""value[1]" must be a string"#,
            r#""value[3]" must be a string"#
        ]
    );
    assert_eq!(
        check(&json!({"type":"array"}), &json!([1, [neg_zero()]])),
        vec![r#""value" must be a dense lossless JSON array"#]
    );
    assert!(check(&json!({"type":"array"}), &json!([1, [2], {"a":null}])).is_empty());
}

#[test]
fn js_21_exactly_one_one_of() {
    let overlap = json!({"oneOf":[{"type":"number"},{"type":"integer"}]});
    assert_eq!(
        check(&overlap, &json!(1)),
        vec![r#""value" must match exactly one oneOf branch (matched 2)"#]
    );
    assert!(check(&overlap, &json!(1.5)).is_empty());
    assert_eq!(
        check(&overlap, &json!("x")),
        vec![r#""value" must match exactly one oneOf branch (matched 0)"#]
    );
    // Branch violations are not reported, only the count.
    let nested = json!({"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"object","properties":{"k":{"type":"string"}},"required":["k"]}]}}});
    assert_eq!(
        check(&nested, &json!({"v":{"k":1}})),
        vec![r#""value.v" must match exactly one oneOf branch (matched 0)"#]
    );
    assert!(check(&nested, &json!({"v":{"k":"x"}})).is_empty());
}

#[test]
fn js_22_validates_a_5000_deep_one_of_chain() {
    let schema = super::schema_dsl::one_of_chain(5000, json!({"type":"string"}));
    assert!(check(&schema, &json!("x")).is_empty());
    // `null` matches the innermost layer once, so layers alternate between matching exactly one
    // branch (odd depth) and two (even depth): 5 000 is even.
    assert_eq!(
        check(&schema, &Value::Null),
        vec![r#""value" must match exactly one oneOf branch (matched 2)"#]
    );
    assert_eq!(
        check(&schema, &json!(1)),
        vec![r#""value" must match exactly one oneOf branch (matched 0)"#]
    );
    drop_deep(schema);
}

#[test]
fn js_23_unconstrained_schema_accepts_only_lossless_json() {
    for value in [json!(null), json!(1), json!("s"), json!([1, {"a":[true]}])] {
        assert!(check(&json!({}), &value).is_empty());
    }
    assert_eq!(
        check(&json!({}), &neg_zero()),
        vec![r#""value" must be a lossless JSON value"#]
    );
    assert_eq!(
        check(&json!({"description":"any"}), &json!({"a":[neg_zero()]})),
        vec![r#""value" must be a lossless JSON value"#]
    );
}

#[test]
fn js_24_own_property_semantics_and_tolerated_undefined_keywords() {
    assert_eq!(
        check(
            &json!({"type":"object","required":["toString"]}),
            &json!({})
        ),
        vec![r#"missing required property "value.toString""#]
    );
    assert!(
        check(
            &json!({"type":"object","properties":{"constructor":{"type":"string"}}}),
            &json!({})
        )
        .is_empty()
    );
    assert!(
        check(
            &json!({"type":"object","properties":null,"required":null}),
            &json!({"a":1})
        )
        .is_empty()
    );
}

#[test]
fn js_25_forged_unknown_type_is_reported_not_panicked() {
    // Upstream throws (an exhaustiveness backstop). Validation here is total, so the forged node
    // becomes a violation instead.
    let out = validate(&json!({"type":"date"}), &json!("x"), "value");
    assert_eq!(
        out,
        vec![r#""value" cannot be validated: unsupported schema type "date""#]
    );
    assert_eq!(validate(&json!(["x"]), &json!(1), "value").len(), 1);
}
