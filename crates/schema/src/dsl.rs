//! The author DSL compiler (upstream `ValueSchemaSpec` → raw subset, spec §2.1–2.2).
//!
//! Post-order over an explicit stack: `Enter` checks one author node and schedules its
//! children, `Exit` assembles the compiled node from its children's results. Compiled key
//! order follows upstream's output: `type`, annotations, then the kind's keywords
//! (`additionalProperties`, `properties`, `required` / `items` / `enum`, `const`).

use serde_json::{Map, Value};

use crate::error::SchemaError;
use crate::json::{clone_deep, drop_deep};
use crate::path::{Lazy, PathId, Paths};
use crate::subset::assert_supported;

const ANNOTATIONS: [&str; 4] = ["description", "title", "default", "examples"];
const SCALARS: [&str; 5] = ["string", "number", "integer", "boolean", "null"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Directly inside a property map: may carry `required: true`.
    Property,
    /// A value root, an `items` node or a `oneOf` branch.
    Value,
}

enum Kind<'a> {
    Scalar(&'a str),
    Json,
    Array {
        has_items: bool,
    },
    Object {
        properties: Option<Vec<&'a str>>,
        required: Vec<&'a str>,
    },
    OneOf {
        branches: usize,
    },
    /// The implicit parameter root.
    Parameters {
        properties: Vec<&'a str>,
        required: Vec<&'a str>,
    },
    /// An invalid node; its result is a placeholder and the compile fails anyway.
    Failed {
        children: usize,
    },
}

enum Step<'a> {
    Enter {
        node: &'a Value,
        path: PathId,
        role: Role,
    },
    Exit {
        node: Option<&'a Map<String, Value>>,
        kind: Kind<'a>,
    },
}

struct Compiler<'a> {
    paths: Paths<'a>,
    errors: Vec<String>,
    steps: Vec<Step<'a>>,
    built: Vec<Value>,
}

/// Compiles a parameter map (upstream `ParameterSchemaSpec`, as JSON: `{ "<key>": <property
/// spec>, … }`) into `{"type":"object","properties":{…},"required":[…]}`. The root stays open
/// (never gets `additionalProperties`); `required` lists the keys marked `"required": true` in
/// declaration order and is omitted when none is. Errors are rooted at `parameters`; the
/// compiled output is then checked with [`assert_supported`] (rooted at `schema`).
pub fn compile_parameters(spec: &Value) -> Result<Value, SchemaError> {
    let mut c = Compiler::new("parameters");
    match spec {
        Value::Object(map) => {
            let (properties, required) = c.property_map(map, Paths::ROOT);
            // Beneath the children it assembles.
            c.steps.insert(
                0,
                Step::Exit {
                    node: None,
                    kind: Kind::Parameters {
                        properties,
                        required,
                    },
                },
            );
        }
        _ => {
            c.errors.push(String::from(
                "parameters must be an object of value schemas",
            ));
            c.built.push(Value::Null);
        }
    }
    c.run()
}

/// Compiles one value schema (upstream `ValueSchemaSpec`, as JSON) into the raw subset.
/// Errors are rooted at `schema`. `{"type":"json"}` compiles to `{}` (any lossless JSON).
pub fn compile_value(spec: &Value) -> Result<Value, SchemaError> {
    let mut c = Compiler::new("schema");
    c.steps.push(Step::Enter {
        node: spec,
        path: Paths::ROOT,
        role: Role::Value,
    });
    c.run()
}

impl<'a> Compiler<'a> {
    fn new(root: &'a str) -> Self {
        Self {
            paths: Paths::new(root),
            errors: Vec::new(),
            steps: Vec::new(),
            built: Vec::new(),
        }
    }

    fn run(mut self) -> Result<Value, SchemaError> {
        while let Some(step) = self.steps.pop() {
            match step {
                Step::Enter { node, path, role } => self.enter(node, path, role),
                Step::Exit { node, kind } => self.exit(node, kind),
            }
        }
        let out = self.built.pop().unwrap_or(Value::Null);
        for leftover in self.built {
            drop_deep(leftover);
        }
        if !self.errors.is_empty() {
            drop_deep(out);
            return Err(SchemaError {
                violations: self.errors,
            });
        }
        if let Err(err) = assert_supported(&out) {
            drop_deep(out);
            return Err(err);
        }
        Ok(out)
    }

    /// Schedules every property of a property map at `path.<key>`; returns the keys in order and
    /// the keys marked `required: true`.
    fn property_map(
        &mut self,
        map: &'a Map<String, Value>,
        path: PathId,
    ) -> (Vec<&'a str>, Vec<&'a str>) {
        let mut keys = Vec::new();
        let mut required = Vec::new();
        let mut children = Vec::new();
        for (key, prop) in map {
            keys.push(key.as_str());
            if prop.get("required") == Some(&Value::Bool(true)) {
                required.push(key.as_str());
            }
            children.push(Step::Enter {
                node: prop,
                path: self.paths.key(path, key),
                role: Role::Property,
            });
        }
        self.steps.extend(children.into_iter().rev());
        (keys, required)
    }

    fn fail(&mut self, here: &mut Lazy, tail: &str) {
        let p = here.get(&self.paths);
        self.errors.push(format!("{p}{tail}"));
    }

    fn enter(&mut self, node: &'a Value, path: PathId, role: Role) {
        let mut here = Lazy::new(path);
        let Value::Object(map) = node else {
            self.fail(&mut here, " must be a value schema object");
            self.built.push(Value::Null);
            return;
        };
        let kind_name = match (map.get("type"), map.get("oneOf")) {
            (Some(_), Some(_)) => {
                self.fail(&mut here, " cannot declare both type and oneOf");
                None
            }
            (None, Some(_)) => Some("oneOf"),
            (Some(Value::String(t)), None)
                if t == "json"
                    || t == "array"
                    || t == "object"
                    || SCALARS.contains(&t.as_str()) =>
            {
                Some(t.as_str())
            }
            _ => {
                self.fail(&mut here, ".type must be string/number/integer/boolean/null/array/object/json, or use oneOf");
                None
            }
        };
        let Some(kind_name) = kind_name else {
            self.steps.push(Step::Exit {
                node: Some(map),
                kind: Kind::Failed { children: 0 },
            });
            return;
        };
        let own: &[&str] = match kind_name {
            "oneOf" => &["oneOf"],
            "array" => &["type", "items"],
            "object" => &["type", "properties", "additionalProperties"],
            "json" => &["type"],
            _ => &["type", "enum", "const"],
        };
        for key in map.keys() {
            let allowed = own.contains(&key.as_str())
                || ANNOTATIONS.contains(&key.as_str())
                || (role == Role::Property && key == "required");
            if !allowed {
                self.fail(
                    &mut here,
                    &format!(".{key} is not supported by the value schema DSL"),
                );
            }
        }
        if role == Role::Property && map.get("required").is_some_and(|r| r != &Value::Bool(true)) {
            self.fail(&mut here, ".required must be true when present");
        }
        let before = self.steps.len();
        let kind = match kind_name {
            "oneOf" => match map.get("oneOf") {
                Some(Value::Array(branches)) if branches.len() >= 2 => {
                    let one_of = self.paths.key(path, "oneOf");
                    let mut children = Vec::new();
                    for (i, branch) in branches.iter().enumerate() {
                        children.push(Step::Enter {
                            node: branch,
                            path: self.paths.index(one_of, i),
                            role: Role::Value,
                        });
                    }
                    self.steps.extend(children.into_iter().rev());
                    Kind::OneOf {
                        branches: branches.len(),
                    }
                }
                _ => {
                    self.fail(
                        &mut here,
                        ".oneOf must be an array of at least two value schemas",
                    );
                    Kind::Failed { children: 0 }
                }
            },
            "array" => {
                let items = map.get("items");
                if let Some(items) = items {
                    let child = self.paths.key(path, "items");
                    self.steps.push(Step::Enter {
                        node: items,
                        path: child,
                        role: Role::Value,
                    });
                }
                Kind::Array {
                    has_items: items.is_some(),
                }
            }
            "object" => {
                if !map
                    .get("additionalProperties")
                    .is_some_and(Value::is_boolean)
                {
                    self.fail(
                        &mut here,
                        ".additionalProperties must be explicitly true or false",
                    );
                }
                match map.get("properties") {
                    None => Kind::Object {
                        properties: None,
                        required: Vec::new(),
                    },
                    Some(Value::Object(props)) => {
                        let props_path = self.paths.key(path, "properties");
                        let (keys, required) = self.property_map(props, props_path);
                        Kind::Object {
                            properties: Some(keys),
                            required,
                        }
                    }
                    Some(_) => {
                        self.fail(&mut here, ".properties must be an object of value schemas");
                        Kind::Failed { children: 0 }
                    }
                }
            }
            "json" => Kind::Json,
            scalar => {
                let enum_ok = match map.get("enum") {
                    None => true,
                    Some(Value::Array(items)) => {
                        !items.is_empty() && items.iter().all(|v| !v.is_array() && !v.is_object())
                    }
                    Some(_) => false,
                };
                if !enum_ok {
                    self.fail(
                        &mut here,
                        ".enum must be a non-empty array of scalar values",
                    );
                }
                Kind::Scalar(scalar)
            }
        };
        // Children were pushed above this Exit's slot; put the Exit beneath them.
        self.steps.insert(
            before,
            Step::Exit {
                node: Some(map),
                kind,
            },
        );
    }

    fn exit(&mut self, node: Option<&'a Map<String, Value>>, kind: Kind<'a>) {
        let children = match &kind {
            Kind::Scalar(_) | Kind::Json => 0,
            Kind::Array { has_items } => usize::from(*has_items),
            Kind::Object { properties, .. } => properties.as_ref().map_or(0, Vec::len),
            Kind::OneOf { branches } => *branches,
            Kind::Parameters { properties, .. } => properties.len(),
            Kind::Failed { children } => *children,
        };
        let mut results = self
            .built
            .split_off(self.built.len().saturating_sub(children))
            .into_iter();
        let mut out = Map::new();
        let annotate = |out: &mut Map<String, Value>| {
            if let Some(node) = node {
                for key in ANNOTATIONS {
                    if let Some(v) = node.get(key) {
                        out.insert(key.to_owned(), clone_deep(v));
                    }
                }
            }
        };
        let props_of =
            |keys: &[&str], results: &mut dyn Iterator<Item = Value>| -> Map<String, Value> {
                keys.iter()
                    .map(|k| ((*k).to_owned(), results.next().unwrap_or(Value::Null)))
                    .collect()
            };
        let required_of = |required: &[&str]| {
            Value::Array(
                required
                    .iter()
                    .map(|k| Value::String((*k).to_owned()))
                    .collect(),
            )
        };
        match kind {
            Kind::Failed { .. } => {
                results.for_each(drop_deep);
                self.built.push(Value::Null);
                return;
            }
            Kind::Parameters {
                properties,
                required,
            } => {
                out.insert("type".into(), "object".into());
                out.insert(
                    "properties".into(),
                    Value::Object(props_of(&properties, &mut results)),
                );
                if !required.is_empty() {
                    out.insert("required".into(), required_of(&required));
                }
            }
            Kind::OneOf { .. } => {
                out.insert("oneOf".into(), Value::Array(results.by_ref().collect()));
                annotate(&mut out);
            }
            Kind::Json => annotate(&mut out),
            Kind::Scalar(ty) => {
                out.insert("type".into(), ty.into());
                annotate(&mut out);
                for key in ["enum", "const"] {
                    if let Some(v) = node.and_then(|n| n.get(key)) {
                        out.insert(key.to_owned(), clone_deep(v));
                    }
                }
            }
            Kind::Array { .. } => {
                out.insert("type".into(), "array".into());
                annotate(&mut out);
                if let Some(items) = results.next() {
                    out.insert("items".into(), items);
                }
            }
            Kind::Object {
                properties,
                required,
            } => {
                out.insert("type".into(), "object".into());
                annotate(&mut out);
                if let Some(additional) = node.and_then(|n| n.get("additionalProperties")) {
                    out.insert("additionalProperties".into(), additional.clone());
                }
                if let Some(keys) = properties {
                    out.insert(
                        "properties".into(),
                        Value::Object(props_of(&keys, &mut results)),
                    );
                }
                if !required.is_empty() {
                    out.insert("required".into(), required_of(&required));
                }
            }
        }
        self.built.push(Value::Object(out));
    }
}
