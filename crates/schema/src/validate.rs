//! Total value validation with upstream's exact messages (`validateJsonSchemaValue`, spec §2.5).
//!
//! The walk is an explicit task stack. A `oneOf` runs each branch as a probe: the branch's
//! violations are counted, then discarded, and only the match count is reported. Lossless checks
//! are done once per node on the parts its schema did not already validate, so the total cost
//! stays linear in the size of the value even when it is thousands of levels deep.

use serde_json::{Map, Value};

use crate::json::{
    is_integral, is_lossless, is_lossless_number, is_negative_zero, json_eq, to_js_json,
};
use crate::path::{PathId, Paths};

enum Task<'a> {
    Visit {
        schema: &'a Value,
        value: &'a Value,
        path: PathId,
    },
    ObjectEnd {
        properties: Option<&'a Map<String, Value>>,
        closed: bool,
        value: &'a Map<String, Value>,
        path: PathId,
        start: usize,
    },
    ArrayEnd {
        items_checked: bool,
        value: &'a Value,
        path: PathId,
        start: usize,
    },
    OneOf {
        branches: &'a [Value],
        next: usize,
        matched: usize,
        probing: bool,
        value: &'a Value,
        path: PathId,
        start: usize,
    },
}

struct Walk<'a> {
    paths: Paths<'a>,
    out: Vec<String>,
}

impl Walk<'_> {
    /// The quoted display form: the implicit parameter root (`""`) shows as `arguments`.
    fn shown(&self, path: PathId) -> String {
        let text = self.paths.render(path);
        if text.is_empty() {
            String::from("arguments")
        } else {
            text
        }
    }

    fn push(&mut self, path: PathId, tail: &str) {
        let p = self.shown(path);
        self.out.push(format!("\"{p}\" {tail}"));
    }
}

/// Validates `value` against `schema`. Total: returns every violation, empty when valid.
/// `root` is the display root: `""` shows as `arguments` (parameters), `"value"` for outputs.
///
/// `schema` is expected to have passed [`crate::assert_supported`]. A node outside the subset
/// (which upstream treats as a programming error and throws on) yields a violation here
/// instead, so this function never panics.
pub fn validate(schema: &Value, value: &Value, root: &str) -> Vec<String> {
    let mut walk = Walk {
        paths: Paths::new(root),
        out: Vec::new(),
    };
    let mut tasks = vec![Task::Visit {
        schema,
        value,
        path: Paths::ROOT,
    }];
    while let Some(task) = tasks.pop() {
        match task {
            Task::Visit {
                schema,
                value,
                path,
            } => visit(schema, value, path, &mut walk, &mut tasks),
            Task::ObjectEnd {
                properties,
                closed,
                value,
                path,
                start,
            } => {
                let undeclared = value
                    .iter()
                    .filter(|(k, _)| !properties.is_some_and(|p| p.contains_key(*k)));
                if closed {
                    for (key, _) in undeclared.clone() {
                        let child = walk.paths.key(path, key);
                        walk.push(
                            child,
                            "is not a declared property (additionalProperties: false)",
                        );
                    }
                }
                // Declared members that produced no violation are lossless already.
                if walk.out.len() == start && !undeclared.clone().all(|(_, v)| is_lossless(v)) {
                    walk.push(path, "must be a lossless JSON object");
                }
            }
            Task::ArrayEnd {
                items_checked,
                value,
                path,
                start,
            } => {
                if walk.out.len() == start && !items_checked && !is_lossless(value) {
                    walk.push(path, "must be a dense lossless JSON array");
                }
            }
            Task::OneOf {
                branches,
                next,
                mut matched,
                probing,
                value,
                path,
                start,
            } => {
                if probing {
                    if walk.out.len() == start {
                        matched += 1;
                    }
                    walk.out.truncate(start);
                }
                if let Some(branch) = branches.get(next) {
                    tasks.push(Task::OneOf {
                        branches,
                        next: next + 1,
                        matched,
                        probing: true,
                        value,
                        path,
                        start,
                    });
                    tasks.push(Task::Visit {
                        schema: branch,
                        value,
                        path,
                    });
                } else if matched != 1 {
                    walk.push(
                        path,
                        &format!("must match exactly one oneOf branch (matched {matched})"),
                    );
                }
            }
        }
    }
    walk.out
}

fn visit<'a>(
    schema: &'a Value,
    value: &'a Value,
    path: PathId,
    walk: &mut Walk<'a>,
    tasks: &mut Vec<Task<'a>>,
) {
    let Value::Object(node) = schema else {
        walk.push(
            path,
            "cannot be validated: the schema node is not a schema object",
        );
        return;
    };
    let ty = match (node.get("type"), node.get("oneOf")) {
        (Some(Value::String(ty)), _) => ty.as_str(),
        (Some(other), _) => {
            let shown = to_js_json(other);
            walk.push(
                path,
                &format!("cannot be validated: unsupported schema type {shown}"),
            );
            return;
        }
        (None, Some(Value::Array(branches))) => {
            let start = walk.out.len();
            tasks.push(Task::OneOf {
                branches,
                next: 0,
                matched: 0,
                probing: false,
                value,
                path,
                start,
            });
            return;
        }
        (None, Some(_)) => {
            walk.push(path, "cannot be validated: oneOf is not an array");
            return;
        }
        (None, None) => {
            if !is_lossless(value) {
                walk.push(path, "must be a lossless JSON value");
            }
            return;
        }
    };
    let type_ok = match (ty, value) {
        ("string", Value::String(_)) | ("boolean", Value::Bool(_)) | ("null", Value::Null) => true,
        ("string", _) => return walk.push(path, "must be a string"),
        ("boolean", _) => return walk.push(path, "must be a boolean"),
        ("null", _) => return walk.push(path, "must be null"),
        ("number", Value::Number(n)) => {
            if !is_lossless_number(n) {
                return walk.push(path, "must be a finite JSON number");
            }
            true
        }
        ("number", _) => return walk.push(path, "must be a number"),
        ("integer", Value::Number(n)) if is_lossless_number(n) || is_negative_zero(n) => {
            if !is_integral(n) {
                return walk.push(path, "must be an integer");
            }
            if is_negative_zero(n) {
                return walk.push(path, "must be a finite JSON number");
            }
            true
        }
        ("integer", _) => return walk.push(path, "must be an integer"),
        ("object", Value::Object(map)) => {
            object(node, map, path, walk, tasks);
            return;
        }
        ("object", _) => return walk.push(path, "must be an object"),
        ("array", Value::Array(items)) => {
            let start = walk.out.len();
            let item_schema = node.get("items").filter(|s| !s.is_null());
            tasks.push(Task::ArrayEnd {
                items_checked: item_schema.is_some(),
                value,
                path,
                start,
            });
            if let Some(item_schema) = item_schema {
                for (i, item) in items.iter().enumerate().rev() {
                    let child = walk.paths.index(path, i);
                    tasks.push(Task::Visit {
                        schema: item_schema,
                        value: item,
                        path: child,
                    });
                }
            }
            return;
        }
        ("array", _) => return walk.push(path, "must be an array"),
        (other, _) => {
            let shown = to_js_json(&Value::String(other.to_owned()));
            return walk.push(
                path,
                &format!("cannot be validated: unsupported schema type {shown}"),
            );
        }
    };
    if type_ok {
        literals(node, value, path, walk);
    }
}

/// Enum is checked before const; a value outside the enum is not also compared to const.
fn literals(node: &Map<String, Value>, value: &Value, path: PathId, walk: &mut Walk<'_>) {
    if let Some(Value::Array(allowed)) = node.get("enum")
        && !allowed.iter().any(|e| json_eq(e, value))
    {
        let list: Vec<String> = allowed.iter().map(to_js_json).collect();
        let list = list.join(",");
        return walk.push(path, &format!("must be one of [{list}]"));
    }
    if let Some(expected) = node.get("const")
        && !json_eq(expected, value)
    {
        let shown = to_js_json(expected);
        walk.push(path, &format!("must be {shown}"));
    }
}

/// Object order: required (in `required` order), then children (declaration order, depth-first,
/// scheduled on the task stack), then undeclared keys and the lossless check in `ObjectEnd`.
fn object<'a>(
    node: &'a Map<String, Value>,
    value: &'a Map<String, Value>,
    path: PathId,
    walk: &mut Walk<'a>,
    tasks: &mut Vec<Task<'a>>,
) {
    let start = walk.out.len();
    if let Some(Value::Array(required)) = node.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !value.contains_key(name) {
                let child = walk.paths.key(path, name);
                let shown = walk.paths.render(child);
                walk.out
                    .push(format!("missing required property \"{shown}\""));
            }
        }
    }
    let properties = match node.get("properties") {
        Some(Value::Object(props)) => Some(props),
        _ => None,
    };
    let closed = node.get("additionalProperties") == Some(&Value::Bool(false));
    tasks.push(Task::ObjectEnd {
        properties,
        closed,
        value,
        path,
        start,
    });
    if let Some(props) = properties {
        let present: Vec<(&'a String, &'a Value)> = props.iter().collect();
        for (key, sub) in present.into_iter().rev() {
            if let Some(member) = value.get(key.as_str()) {
                let child = walk.paths.key(path, key);
                tasks.push(Task::Visit {
                    schema: sub,
                    value: member,
                    path: child,
                });
            }
        }
    }
}
