//! schemars-derived schemas normalised into the subset.

#![allow(dead_code)] // fields exist for their derived schemas only

use std::collections::BTreeMap;

use dsh_schema::{
    assert_supported, normalize_schemars, parameters_for, validate, value_schema_for,
};
use pretty_assertions::assert_eq;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Reads a file (type docs never reach the parameters schema).
#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    /// Absolute path of the file to read.
    file_path: String,
    /// 1-based line to start from.
    offset: Option<u64>,
    /// Maximum number of lines.
    limit: Option<u64>,
}

#[test]
fn derive_read_args() {
    let schema = parameters_for::<ReadArgs>().expect("normalises");
    let expected = json!({
        "type":"object",
        "properties":{
            "file_path":{"type":"string","description":"Absolute path of the file to read."},
            "offset":{"type":"integer","description":"1-based line to start from."},
            "limit":{"type":"integer","description":"Maximum number of lines."}
        },
        "required":["file_path"]
    });
    assert_eq!(schema.to_string(), expected.to_string());
    assert!(
        validate(
            &schema,
            &json!({"file_path":"/a","offset":2,"extra":true}),
            ""
        )
        .is_empty()
    );
    assert_eq!(
        validate(&schema, &json!({"offset":2}), ""),
        vec![r#"missing required property "file_path""#]
    );
    assert_eq!(
        validate(&schema, &json!({"file_path":"/a","limit":1.5}), ""),
        vec![r#""limit" must be an integer"#]
    );
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Fast,
    Slow,
}

#[derive(Deserialize, JsonSchema)]
enum Documented {
    /// Go fast.
    Fast,
    /// Go slow.
    Slow,
}

/// A server.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Server {
    host: String,
    port: Option<u16>,
}

#[derive(Deserialize, JsonSchema)]
struct Labels {
    name: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Action {
    Move { x: i32, y: i32 },
    Stop,
}

#[derive(Deserialize, JsonSchema)]
enum Shape {
    Circle { r: f64 },
    Square(f64),
    Empty,
}

#[derive(Deserialize, JsonSchema)]
struct Complex {
    /// How to run.
    mode: Mode,
    documented: Option<Documented>,
    /// Servers to contact.
    servers: Vec<Server>,
    labels: Labels,
    action: Action,
    shape: Shape,
    env: BTreeMap<String, String>,
    data: serde_json::Value,
    pair: (u8, String),
    #[serde(default)]
    verbose: bool,
    ratio: f32,
}

#[test]
fn derive_enums_nested_structs_maps_and_any() {
    let schema = parameters_for::<Complex>().expect("normalises");
    let props = &schema["properties"];
    assert_eq!(
        props["mode"],
        json!({"type":"string","description":"How to run.","enum":["fast","slow"]})
    );
    assert_eq!(
        props["documented"],
        json!({"type":"string","enum":["Fast","Slow"]})
    );
    assert_eq!(
        props["servers"].to_string(),
        json!({"type":"array","description":"Servers to contact.","items":{
            "type":"object","description":"A server.","additionalProperties":false,
            "properties":{"host":{"type":"string"},"port":{"type":"integer"}},"required":["host"]
        }})
        .to_string()
    );
    assert_eq!(props["labels"]["additionalProperties"], json!(true));
    assert_eq!(
        props["action"]["oneOf"][0]["properties"]["kind"],
        json!({"type":"string","const":"move"})
    );
    assert_eq!(props["action"]["oneOf"][1]["required"], json!(["kind"]));
    assert_eq!(
        props["shape"]["oneOf"][0],
        json!({"type":"string","enum":["Empty"]})
    );
    assert_eq!(
        props["env"],
        json!({"type":"object","additionalProperties":true})
    );
    assert_eq!(props["data"], json!({}));
    assert_eq!(props["pair"], json!({"type":"array"}));
    assert_eq!(props["verbose"], json!({"type":"boolean","default":false}));
    assert_eq!(props["ratio"], json!({"type":"number"}));
    let required = schema["required"].as_array().expect("required");
    assert!(!required.contains(&json!("documented")) && !required.contains(&json!("verbose")));
    assert!(schema.get("additionalProperties").is_none());
    assert!(
        schema.get("title").is_none()
            && schema.get("$schema").is_none()
            && schema.get("$defs").is_none()
    );
    assert_supported(&schema).expect("supported");

    let args = json!({
        "mode":"fast","servers":[{"host":"a","port":1}],"labels":{"name":"n","x":1},
        "action":{"kind":"move","x":1,"y":2},"shape":{"Circle":{"r":1.0}},"env":{"A":"b"},
        "data":[1,{"k":null}],"pair":[1,"a"],"ratio":0.5
    });
    assert_eq!(validate(&schema, &args, ""), Vec::<String>::new());
    let bad = json!({
        "mode":"medium","servers":[{"host":"a","extra":1}],"labels":{"name":"n"},
        "action":{"kind":"jump"},"shape":"Empty","env":{},"data":null,"pair":[],"ratio":1
    });
    assert_eq!(
        validate(&schema, &bad, ""),
        vec![
            r#""mode" must be one of ["fast","slow"]"#,
            r#""servers[0].extra" is not a declared property (additionalProperties: false)"#,
            r#""action" must match exactly one oneOf branch (matched 0)"#,
        ]
    );
}

#[derive(Deserialize, JsonSchema)]
struct Node {
    value: u32,
    next: Option<Box<Node>>,
}

#[derive(Deserialize, JsonSchema)]
struct Tree {
    root: Branch,
}

#[derive(Deserialize, JsonSchema)]
struct Branch {
    children: Vec<Branch>,
}

#[test]
fn derive_rejects_recursive_types() {
    let err = parameters_for::<Node>().expect_err("recursive");
    assert_eq!(
        err.violations,
        vec![
            r#"schema.properties.next refers to the recursive type "Node"; recursive types cannot be expressed in the supported subset"#
        ]
    );
    let err = parameters_for::<Tree>().expect_err("recursive");
    assert_eq!(
        err.violations,
        vec![
            r#"schema.properties.root.properties.children.items refers to the recursive type "Branch"; recursive types cannot be expressed in the supported subset"#
        ]
    );
}

#[derive(Serialize, JsonSchema)]
struct ReadOutput {
    content: String,
    /// Set when the file was cut short.
    truncated_at: Option<u64>,
    lines: Vec<u32>,
}

#[test]
fn derive_output_values_keep_null() {
    let schema = value_schema_for::<ReadOutput>().expect("normalises");
    assert_eq!(
        schema["properties"]["truncated_at"].to_string(),
        r#"{"oneOf":[{"type":"integer"},{"type":"null"}],"description":"Set when the file was cut short."}"#
    );
    assert!(
        validate(
            &schema,
            &json!({"content":"x","truncated_at":null,"lines":[1]}),
            "value"
        )
        .is_empty()
    );
    assert!(
        validate(
            &schema,
            &json!({"content":"x","truncated_at":4,"lines":[]}),
            "value"
        )
        .is_empty()
    );
    assert_eq!(
        validate(&schema, &json!({"content":"x","lines":[]}), "value"),
        vec![r#"missing required property "value.truncated_at""#]
    );
}

#[derive(Deserialize, JsonSchema)]
struct NotAnObject(String);

#[test]
fn derive_parameters_must_be_object_rooted() {
    let err = parameters_for::<NotAnObject>().expect_err("string root");
    assert_eq!(
        err.violations,
        vec![r#"schema.type must be "object" (tool parameters are object-rooted)"#]
    );
    assert_eq!(
        value_schema_for::<NotAnObject>()
            .expect("any root")
            .to_string(),
        r#"{"type":"string"}"#
    );
}

#[test]
fn normalize_raw_schemars_shapes() {
    let raw = json!({
        "$schema":"https://json-schema.org/draft/2020-12/schema",
        "title":"Args",
        "type":"object",
        "properties":{
            "a":{"$ref":"#/$defs/A","description":"field doc wins"},
            "b":{"type":["string","null"],"enum":["x",null]},
            "c":false
        },
        "$defs":{"A":{"description":"type doc","type":"object","properties":{"n":{"type":"integer","format":"int64","minimum":0}},"required":["n"]}}
    });
    let err = normalize_schemars(raw.clone()).expect_err("false schema");
    assert_eq!(
        err.violations,
        vec![
            "schema.properties.c is the schema `false` (no value is valid), which the subset cannot express"
        ]
    );
    let mut ok = raw;
    ok["properties"]
        .as_object_mut()
        .expect("map")
        .shift_remove("c");
    let out = normalize_schemars(ok).expect("normalises");
    assert_eq!(
        out.to_string(),
        json!({"type":"object","properties":{
            "a":{"type":"object","description":"field doc wins","additionalProperties":true,"properties":{"n":{"type":"integer"}},"required":["n"]},
            "b":{"type":"string","enum":["x"]}
        }})
        .to_string()
    );
    // Keywords with no subset form are reported, not dropped.
    let err = normalize_schemars(json!({"type":"object","properties":{"x":{"not":{}}}}))
        .expect_err("not");
    assert!(err.violations[0].starts_with("schema.properties.x.not is not a supported keyword"));
    let err = normalize_schemars(json!({"$ref":"#/$defs/Missing"})).expect_err("dangling");
    assert_eq!(
        err.violations,
        vec![r##"schema.$ref "#/$defs/Missing" cannot be resolved"##]
    );
}
