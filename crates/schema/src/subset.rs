//! The raw JSON-Schema subset (`assertSupportedJsonSchema`, spec §2.4).
//!
//! Walk order: a node's own violations (unknown keywords in key order, then `type`/`oneOf`,
//! then the constraint keywords in the fixed order below, then annotations), then its children
//! depth-first (properties in declaration order, `items`, `oneOf` branches).

use serde_json::{Map, Value};

use crate::error::SchemaError;
use crate::json::{is_integral, is_lossless, is_lossless_number, is_negative_zero, json_eq};
use crate::path::{Lazy, PathId, Paths};

/// The scalar/container type names of the subset.
pub const TYPES: [&str; 7] = [
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Constraint keywords other than `type`/`oneOf`, in the order upstream reports them.
const KEYWORDS: [&str; 6] = [
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
];

const ANNOTATIONS: [&str; 4] = ["description", "title", "default", "examples"];

fn is_known(key: &str) -> bool {
    key == "type" || key == "oneOf" || KEYWORDS.contains(&key) || ANNOTATIONS.contains(&key)
}

fn allowed_on(keyword: &str, ty: &str) -> bool {
    match keyword {
        "properties" | "required" | "additionalProperties" => ty == "object",
        "items" => ty == "array",
        // enum/const: scalars only
        _ => !matches!(ty, "object" | "array"),
    }
}

/// `true` when `v` is a lossless JSON value of scalar type `ty`.
pub(crate) fn matches_scalar_type(v: &Value, ty: &str) -> bool {
    match (ty, v) {
        ("string", Value::String(_)) | ("boolean", Value::Bool(_)) | ("null", Value::Null) => true,
        ("number", Value::Number(n)) => is_lossless_number(n),
        ("integer", Value::Number(n)) => {
            is_lossless_number(n) && is_integral(n) && !is_negative_zero(n)
        }
        _ => false,
    }
}

/// Checks that `schema` uses only the supported subset; collects every violation in walk order,
/// with paths rooted at `schema`.
pub fn assert_supported(schema: &Value) -> Result<(), SchemaError> {
    SchemaError::check(collect(schema))
}

/// [`assert_supported`] plus the rule that the root is an object schema (structured outputs of
/// subagents and workflows). Tool outputs may have any root; use [`assert_supported`] for them.
pub fn assert_object_schema(schema: &Value) -> Result<(), SchemaError> {
    let mut violations = collect(schema);
    let is_object_root = schema.get("type").and_then(Value::as_str) == Some("object");
    if !is_object_root {
        violations.push(String::from(
            r#"schema.type must be "object" (structured output is object-rooted)"#,
        ));
    }
    SchemaError::check(violations)
}

fn collect(schema: &Value) -> Vec<String> {
    let mut paths = Paths::new("schema");
    let mut out = Vec::new();
    let mut stack: Vec<(&Value, PathId)> = vec![(schema, Paths::ROOT)];
    while let Some((node, path)) = stack.pop() {
        let mut children: Vec<(&Value, PathId)> = Vec::new();
        check_node(node, path, &mut paths, &mut out, &mut children);
        stack.extend(children.into_iter().rev());
    }
    out
}

fn check_node<'a>(
    node: &'a Value,
    path: PathId,
    paths: &mut Paths<'a>,
    out: &mut Vec<String>,
    children: &mut Vec<(&'a Value, PathId)>,
) {
    let mut here = Lazy::new(path);
    let Value::Object(map) = node else {
        let p = here.get(paths);
        out.push(format!("{p} must be a schema object"));
        return;
    };
    for key in map.keys().filter(|k| !is_known(k)) {
        let p = here.get(paths);
        out.push(format!(
            "{p}.{key} is not a supported keyword (subset: type/oneOf/properties/required/additionalProperties/items/enum/const + annotations)"
        ));
    }
    match (map.get("type"), map.get("oneOf")) {
        (Some(_), Some(_)) => {
            let p = here.get(paths);
            out.push(format!("{p} cannot declare both type and oneOf"));
        }
        (Some(ty), None) => check_typed(map, ty, &mut here, paths, out, children),
        (None, Some(branches)) => {
            match branches {
                Value::Array(items) if items.len() >= 2 => {}
                _ => {
                    let p = here.get(paths);
                    out.push(format!(
                        "{p}.oneOf must be an array of at least two schemas"
                    ));
                }
            }
            for kw in KEYWORDS.iter().filter(|kw| map.contains_key(**kw)) {
                let p = here.get(paths);
                out.push(format!("{p}.{kw} is not supported beside oneOf"));
            }
            if let Value::Array(items) = branches {
                let one_of = paths.key(path, "oneOf");
                for (i, branch) in items.iter().enumerate() {
                    children.push((branch, paths.index(one_of, i)));
                }
            }
        }
        (None, None) => {
            for kw in KEYWORDS.iter().filter(|kw| map.contains_key(**kw)) {
                let p = here.get(paths);
                out.push(format!("{p}.{kw} requires type or oneOf"));
            }
        }
    }
    check_annotations(map, &mut here, paths, out);
}

fn check_typed<'a>(
    map: &'a Map<String, Value>,
    ty: &Value,
    here: &mut Lazy,
    paths: &mut Paths<'a>,
    out: &mut Vec<String>,
    children: &mut Vec<(&'a Value, PathId)>,
) {
    let path = here.id();
    let ty = match ty {
        Value::String(t) if TYPES.contains(&t.as_str()) => t.as_str(),
        Value::Array(_) => {
            let p = here.get(paths);
            out.push(format!(
                "{p}.type must be a single type string (type arrays are not supported)"
            ));
            return;
        }
        _ => {
            let p = here.get(paths);
            out.push(format!(
                "{p}.type must be one of object/array/string/number/integer/boolean/null"
            ));
            return;
        }
    };
    let mut enum_ok = None;
    let mut const_ok = None;
    for kw in KEYWORDS {
        let Some(v) = map.get(kw) else { continue };
        if !allowed_on(kw, ty) {
            let p = here.get(paths);
            out.push(format!("{p}.{kw} is not supported on type \"{ty}\""));
            continue;
        }
        match kw {
            "properties" => match v {
                Value::Object(props) => {
                    let props_path = paths.key(path, "properties");
                    for (k, sub) in props {
                        children.push((sub, paths.key(props_path, k)));
                    }
                }
                _ => {
                    let p = here.get(paths);
                    out.push(format!("{p}.properties must be an object of schemas"));
                }
            },
            "required" => check_required(map, v, here, paths, out),
            "additionalProperties" => {
                if !v.is_boolean() {
                    let p = here.get(paths);
                    out.push(format!("{p}.additionalProperties must be a boolean"));
                }
            }
            "items" => children.push((v, paths.key(path, "items"))),
            "enum" => match v {
                Value::Array(items)
                    if !items.is_empty() && items.iter().all(|e| matches_scalar_type(e, ty)) =>
                {
                    enum_ok = Some(items);
                }
                _ => {
                    let p = here.get(paths);
                    out.push(format!("{p}.enum must be a non-empty array of {ty} values"));
                }
            },
            _ => {
                if matches_scalar_type(v, ty) {
                    const_ok = Some(v);
                } else {
                    let p = here.get(paths);
                    out.push(format!("{p}.const must be a {ty} value"));
                }
            }
        }
    }
    if let (Some(items), Some(c)) = (enum_ok, const_ok)
        && !items.iter().any(|e| json_eq(e, c))
    {
        let p = here.get(paths);
        out.push(format!(
            "{p}.const must be one of {p}.enum when both are declared"
        ));
    }
}

fn check_required(
    map: &Map<String, Value>,
    required: &Value,
    here: &mut Lazy,
    paths: &Paths<'_>,
    out: &mut Vec<String>,
) {
    let names: Option<Vec<&str>> = match required {
        Value::Array(items) => items.iter().map(Value::as_str).collect(),
        _ => None,
    };
    let Some(names) = names else {
        let p = here.get(paths);
        out.push(format!("{p}.required must be an array of strings"));
        return;
    };
    let props = match map.get("properties") {
        None => None,
        Some(Value::Object(props)) => Some(props),
        // A malformed `properties` is reported on its own; naming checks would only cascade.
        Some(_) => return,
    };
    for name in names {
        if !props.is_some_and(|props| props.contains_key(name)) {
            let p = here.get(paths);
            out.push(format!(
                "{p}.required names \"{name}\" which is not in properties"
            ));
        }
    }
}

fn check_annotations(
    map: &Map<String, Value>,
    here: &mut Lazy,
    paths: &Paths<'_>,
    out: &mut Vec<String>,
) {
    for key in ["description", "title"] {
        if map.get(key).is_some_and(|v| !v.is_string()) {
            let p = here.get(paths);
            out.push(format!("{p}.{key} must be a string"));
        }
    }
    for key in ["default", "examples"] {
        if map.get(key).is_some_and(|v| !is_lossless(v)) {
            let p = here.get(paths);
            out.push(format!("{p}.{key} annotation must be lossless JSON data"));
        }
    }
}
