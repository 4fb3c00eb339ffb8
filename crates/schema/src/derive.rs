//! Normalising schemars-derived schemas into the supported subset.
//!
//! schemars (draft 2020-12) emits more than the subset allows: `$ref`/`$defs`, `$schema`, a root
//! `title`, type arrays for `Option<T>`, `anyOf` for untagged enums and nullable references,
//! `format`/range keywords for integers, `prefixItems` for tuples, boolean schemas, and
//! `additionalProperties` schemas for maps. This module inlines references (refusing recursive
//! types), drops keywords that only narrow a type, and rewrites the rest into subset forms.
//! Dropped range/format keywords are still enforced when serde deserialises the typed value.

use std::rc::Rc;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

use crate::error::SchemaError;
use crate::json::{clone_deep, drop_deep, is_lossless};
use crate::subset::assert_supported;

/// Keywords that only narrow an already-typed value (or carry metadata the subset has no slot
/// for). Dropping them widens validation; serde still enforces the Rust type.
const DROPPED: [&str; 29] = [
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
    "$anchor",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "patternProperties",
    "prefixItems",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Emitted key order, matching the DSL compiler (and upstream's compiled schemas).
const ORDER: [&str; 12] = [
    "type",
    "oneOf",
    "description",
    "title",
    "default",
    "examples",
    "additionalProperties",
    "properties",
    "required",
    "items",
    "enum",
    "const",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Nulls {
    /// `Option<T>` becomes plain `T` (the key is simply not required): argument schemas.
    Strip,
    /// `Option<T>` becomes `oneOf: [T, {"type":"null"}]`: output values really contain `null`.
    Branch,
}

/// The ref names being expanded on the way from the root to a node.
struct Chain {
    name: String,
    parent: Option<Rc<Chain>>,
}

fn chain_has(chain: &Option<Rc<Chain>>, name: &str) -> bool {
    let mut cur = chain.as_deref();
    while let Some(link) = cur {
        if link.name == name {
            return true;
        }
        cur = link.parent.as_deref();
    }
    false
}

/// Turns a schemars 1.x schema into the supported subset: `$ref`s inlined (recursive types are
/// an error), `$schema`/root `title`/`format`/range keywords dropped, `Option<T>` made plain `T`,
/// `anyOf` turned into `oneOf`, all-string-literal `oneOf`s collapsed into `enum`, nested objects
/// given an explicit `additionalProperties` (`false` from `#[serde(deny_unknown_fields)]`, else
/// `true`), and the root left without `additionalProperties`. The result passes
/// [`assert_supported`]; anything that cannot be expressed is reported, never silently kept.
pub fn normalize_schemars(schema: Value) -> Result<Value, SchemaError> {
    normalize(schema, Nulls::Strip)
}

/// The model-facing `parameters` schema of an argument type `T` (`#[derive(Deserialize,
/// JsonSchema)]`): object-rooted, open at the root, `Option` fields optional and non-nullable,
/// doc comments kept as property descriptions (the type's own doc comment is not: the tool's
/// description says what it does).
pub fn parameters_for<T: JsonSchema>() -> Result<Value, SchemaError> {
    let schema = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut out = normalize(schema.to_value(), Nulls::Strip)?;
    if out.get("type").and_then(Value::as_str) != Some("object") {
        drop_deep(out);
        return Err(SchemaError {
            violations: vec![String::from(
                r#"schema.type must be "object" (tool parameters are object-rooted)"#,
            )],
        });
    }
    if let Value::Object(root) = &mut out {
        root.shift_remove("description");
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    Ok(out)
}

/// The output `schema` of a value type `T` (`#[derive(Serialize, JsonSchema)]`), as the value is
/// serialised: `Option<T>` becomes `oneOf: [T, {"type":"null"}]` because `null` really appears.
pub fn value_schema_for<T: JsonSchema>() -> Result<Value, SchemaError> {
    let schema = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>();
    normalize(schema.to_value(), Nulls::Branch)
}

enum Step {
    Enter {
        node: Value,
        path: usize,
        chain: Option<Rc<Chain>>,
        root: bool,
    },
    Exit {
        node: Map<String, Value>,
        properties: Vec<String>,
        items: bool,
        branches: usize,
    },
}

struct Normalizer {
    defs: Map<String, Value>,
    root_name: String,
    nulls: Nulls,
    errors: Vec<String>,
    /// Owned path texts, rendered eagerly: schemars schemas are shallow (one level per Rust type
    /// nesting) so this stays small.
    paths: Vec<String>,
}

fn normalize(schema: Value, nulls: Nulls) -> Result<Value, SchemaError> {
    let mut schema = schema;
    let mut defs = Map::new();
    let mut root_name = String::from("#");
    if let Value::Object(root) = &mut schema {
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(found)) = root.shift_remove(key) {
                defs.extend(found);
            }
        }
        if let Some(Value::String(title)) = root.shift_remove("title") {
            root_name = title;
        }
    }
    let mut n = Normalizer {
        defs,
        root_name,
        nulls,
        errors: Vec::new(),
        paths: vec![String::from("schema")],
    };
    let mut steps: Vec<Step> = vec![Step::Enter {
        node: schema,
        path: 0,
        chain: None,
        root: true,
    }];
    let mut built: Vec<Value> = Vec::new();
    while let Some(step) = steps.pop() {
        match step {
            Step::Enter {
                node,
                path,
                chain,
                root,
            } => n.enter(node, path, chain, root, &mut steps, &mut built),
            Step::Exit {
                node,
                properties,
                items,
                branches,
            } => {
                let count = properties.len() + usize::from(items) + branches;
                let mut results = built
                    .split_off(built.len().saturating_sub(count))
                    .into_iter();
                built.push(n.exit(node, &properties, items, branches, &mut results));
            }
        }
    }
    let out = built.pop().unwrap_or(Value::Null);
    built.into_iter().for_each(drop_deep);
    n.defs.into_iter().for_each(|(_, v)| drop_deep(v));
    if !n.errors.is_empty() {
        drop_deep(out);
        return Err(SchemaError {
            violations: n.errors,
        });
    }
    if let Err(err) = assert_supported(&out) {
        drop_deep(out);
        return Err(err);
    }
    Ok(out)
}

impl Normalizer {
    fn child(&mut self, parent: usize, suffix: &str) -> usize {
        let text = format!(
            "{}{suffix}",
            self.paths.get(parent).map_or("schema", String::as_str)
        );
        self.paths.push(text);
        self.paths.len() - 1
    }

    fn fail(&mut self, path: usize, tail: &str) {
        let p = self.paths.get(path).map_or("schema", String::as_str);
        self.errors.push(format!("{p}{tail}"));
    }

    fn enter(
        &mut self,
        node: Value,
        path: usize,
        chain: Option<Rc<Chain>>,
        root: bool,
        steps: &mut Vec<Step>,
        built: &mut Vec<Value>,
    ) {
        let mut chain = chain;
        let mut map = match node {
            Value::Object(map) => map,
            Value::Bool(true) => Map::new(),
            Value::Bool(false) => {
                self.fail(
                    path,
                    " is the schema `false` (no value is valid), which the subset cannot express",
                );
                built.push(Value::Null);
                return;
            }
            other => {
                // Not a schema at all: let the subset assertion report it at the right path.
                built.push(other);
                return;
            }
        };
        // Rewrite this node until it is stable: a reference may resolve to another reference,
        // and a nullable `anyOf` may collapse into its only remaining branch.
        loop {
            if let Some(reference) = map.shift_remove("$ref") {
                let name = match reference.as_str() {
                    Some("#") => self.root_name.clone(),
                    Some(r) => {
                        let tail = r
                            .strip_prefix("#/$defs/")
                            .or_else(|| r.strip_prefix("#/definitions/"))
                            .unwrap_or(r);
                        // JSON-pointer unescaping (`~1` is `/`, `~0` is `~`).
                        tail.replace("~1", "/").replace("~0", "~")
                    }
                    None => String::new(),
                };
                let recursive = reference.as_str() == Some("#") || chain_has(&chain, &name);
                if recursive {
                    self.fail(
                        path,
                        &format!(" refers to the recursive type \"{name}\"; recursive types cannot be expressed in the supported subset"),
                    );
                    drop_deep(Value::Object(map));
                    built.push(Value::Null);
                    return;
                }
                let Some(Value::Object(def)) = self.defs.get(&name).map(clone_deep) else {
                    self.fail(path, &format!(".$ref {reference} cannot be resolved"));
                    drop_deep(Value::Object(map));
                    built.push(Value::Null);
                    return;
                };
                // Keywords beside the reference (a field's doc comment) override the target's.
                let mut merged = def;
                for (k, v) in map {
                    merged.insert(k, v);
                }
                map = merged;
                chain = Some(Rc::new(Chain {
                    name,
                    parent: chain,
                }));
                continue;
            }
            if let Some(any_of) = map.shift_remove("anyOf") {
                if map.contains_key("oneOf") {
                    // Both at once has no subset form; put it back for the assertion to report.
                    map.insert("anyOf".into(), any_of);
                } else {
                    map.insert("oneOf".into(), any_of);
                }
            }
            if self.nulls == Nulls::Strip
                && let Some(Value::Array(branches)) = map.get_mut("oneOf")
            {
                branches.retain(|b| !is_null_schema(b));
                if branches.len() == 1
                    && let Some(Value::Array(mut only)) = map.shift_remove("oneOf")
                    && let Some(Value::Object(branch)) = only.pop()
                {
                    let mut merged = branch;
                    for (k, v) in map {
                        merged.insert(k, v);
                    }
                    map = merged;
                    continue;
                }
            }
            break;
        }
        for key in DROPPED {
            if let Some(v) = map.shift_remove(key) {
                drop_deep(v);
            }
        }
        if map.get("default").is_some_and(|d| !is_lossless(d)) {
            map.shift_remove("default");
        }
        self.type_array(&mut map);
        if let Some(Value::Bool(_) | Value::Array(_)) = map.get("items") {
            // Tuples (`prefixItems` + `items: false`) have no subset form: any array.
            map.shift_remove("items");
        }
        let is_object = map.get("type").and_then(Value::as_str) == Some("object");
        if root {
            map.shift_remove("additionalProperties");
        } else if is_object
            && !map
                .get("additionalProperties")
                .is_some_and(Value::is_boolean)
        {
            // A map's value schema (`additionalProperties: {…}`) has no subset form: keep it open.
            if let Some(v) = map.insert("additionalProperties".into(), Value::Bool(true)) {
                drop_deep(v);
            }
        }
        // Detach children; they come back, normalised, in `exit`.
        let mut children = Vec::new();
        let mut properties = Vec::new();
        if let Some(Value::Object(props)) = map.get_mut("properties") {
            let taken = std::mem::take(props);
            let props_path = self.child(path, ".properties");
            for (key, sub) in taken {
                let child = self.child(props_path, &format!(".{key}"));
                properties.push(key);
                children.push(Step::Enter {
                    node: sub,
                    path: child,
                    chain: chain.clone(),
                    root: false,
                });
            }
        }
        let items = match map.get_mut("items") {
            Some(sub) => {
                let sub = std::mem::take(sub);
                let child = self.child(path, ".items");
                children.push(Step::Enter {
                    node: sub,
                    path: child,
                    chain: chain.clone(),
                    root: false,
                });
                true
            }
            None => false,
        };
        let mut branches = 0;
        if let Some(Value::Array(list)) = map.get_mut("oneOf") {
            let taken = std::mem::take(list);
            branches = taken.len();
            for (i, sub) in taken.into_iter().enumerate() {
                let child = self.child(path, &format!(".oneOf[{i}]"));
                children.push(Step::Enter {
                    node: sub,
                    path: child,
                    chain: chain.clone(),
                    root: false,
                });
            }
        }
        steps.push(Step::Exit {
            node: map,
            properties,
            items,
            branches,
        });
        steps.extend(children.into_iter().rev());
    }

    /// `type: [T, "null"]` (schemars' `Option<T>`) → `T`, or `oneOf: [T, null]` for outputs.
    fn type_array(&self, map: &mut Map<String, Value>) {
        let Some(Value::Array(types)) = map.get("type") else {
            return;
        };
        let non_null: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        if non_null.len() == types.len() || non_null.len() != 1 {
            // No null, or a genuine multi-type union: leave it for the assertion to report.
            return;
        }
        let ty = non_null.into_iter().next().unwrap_or(Value::Null);
        if let Some(Value::Array(values)) = map.get_mut("enum") {
            values.retain(|v| !v.is_null());
        }
        match self.nulls {
            Nulls::Strip => {
                map.insert("type".into(), ty);
            }
            Nulls::Branch => {
                // Type-specific keywords move into the non-null branch; annotations stay outside.
                let mut branch = Map::new();
                branch.insert("type".into(), ty);
                for key in [
                    "properties",
                    "required",
                    "additionalProperties",
                    "items",
                    "enum",
                    "const",
                ] {
                    if let Some(v) = map.shift_remove(key) {
                        branch.insert(key.into(), v);
                    }
                }
                map.shift_remove("type");
                let null = Value::Object(Map::from_iter([("type".into(), Value::from("null"))]));
                map.insert(
                    "oneOf".into(),
                    Value::Array(vec![Value::Object(branch), null]),
                );
            }
        }
    }

    fn exit(
        &mut self,
        mut node: Map<String, Value>,
        properties: &[String],
        items: bool,
        branches: usize,
        results: &mut dyn Iterator<Item = Value>,
    ) -> Value {
        if !properties.is_empty() {
            let props: Map<String, Value> = properties
                .iter()
                .map(|k| (k.clone(), results.next().unwrap_or(Value::Null)))
                .collect();
            node.insert("properties".into(), Value::Object(props));
        }
        if items {
            node.insert("items".into(), results.next().unwrap_or(Value::Null));
        }
        if branches > 0 {
            let list: Vec<Value> = results.take(branches).collect();
            node.insert("oneOf".into(), Value::Array(list));
            collapse_string_literals(&mut node);
        }
        let mut out = Map::new();
        for key in ORDER {
            if let Some(v) = node.shift_remove(key) {
                out.insert(key.into(), v);
            }
        }
        out.extend(node);
        Value::Object(out)
    }
}

fn is_null_schema(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.len() == 1 && m.get("type").and_then(Value::as_str) == Some("null"))
}

/// A `oneOf` whose branches are all string literals (`{"type":"string","const":"A"}` or
/// `{"type":"string","enum":[…]}`, as schemars emits for unit variants with doc comments)
/// becomes one `{"type":"string","enum":[…]}`; per-variant descriptions are dropped.
fn collapse_string_literals(node: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = node.get("oneOf") else {
        return;
    };
    let mut values = Vec::new();
    for branch in branches {
        let Some(b) = branch.as_object() else { return };
        if b.get("type").and_then(Value::as_str) != Some("string")
            || b.keys().any(|k| {
                !matches!(
                    k.as_str(),
                    "type" | "const" | "enum" | "description" | "title"
                )
            })
        {
            return;
        }
        match (b.get("const"), b.get("enum")) {
            (Some(c @ Value::String(_)), None) => values.push(c.clone()),
            (None, Some(Value::Array(list))) if list.iter().all(Value::is_string) => {
                values.extend(list.iter().cloned())
            }
            _ => return,
        }
    }
    node.shift_remove("oneOf");
    node.insert("type".into(), Value::from("string"));
    node.insert("enum".into(), Value::Array(values));
}
