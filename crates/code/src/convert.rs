//! Iterative JSON ↔ JavaScript value conversion: depth is bounded by memory, never the stack.

use rquickjs::Array;
use rquickjs::Ctx;
use rquickjs::Object;
use rquickjs::object::Property;
use serde_json::Map;
use serde_json::Number;
use serde_json::Value;

/// Largest integer a double represents exactly (`Number.MAX_SAFE_INTEGER + 1`).
const EXACT: f64 = 9_007_199_254_740_992.0;

fn number(f: f64) -> Result<Value, NotJson> {
    if !f.is_finite() || (f == 0.0 && f.is_sign_negative()) {
        return Err(NotJson::NonFiniteOrNegativeZero);
    }
    if f.fract() == 0.0 && f.abs() <= EXACT {
        // Integral doubles are JSON integers (`1`, not `1.0`).
        #[allow(clippy::cast_possible_truncation)]
        return Ok(Value::from(f as i64));
    }
    Number::from_f64(f)
        .map(Value::Number)
        .ok_or(NotJson::NonFinite)
}

/// Why a JavaScript value has no lossless JSON form.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotJson {
    #[error("non-finite or negative-zero number")]
    NonFiniteOrNegativeZero,
    #[error("non-finite number")]
    NonFinite,
    #[error("a {0} is not JSON")]
    Type(&'static str),
    #[error("not an object")]
    NotAnObject,
    #[error("empty conversion stack")]
    EmptyStack,
    #[error(transparent)]
    Engine(rquickjs::Error),
}

enum Frame<'js> {
    Array {
        src: Array<'js>,
        len: usize,
        next: usize,
        out: Vec<Value>,
        key: Option<String>,
    },
    Object {
        src: Object<'js>,
        keys: Vec<String>,
        next: usize,
        out: Map<String, Value>,
        key: Option<String>,
    },
}

/// A primitive as JSON, `Ok(None)` for a container, `Err` for anything not JSON.
fn primitive(value: &rquickjs::Value<'_>) -> Result<Option<Value>, NotJson> {
    if value.is_null() {
        return Ok(Some(Value::Null));
    }
    if let Some(b) = value.as_bool() {
        return Ok(Some(Value::Bool(b)));
    }
    if let Some(i) = value.as_int() {
        return Ok(Some(Value::from(i)));
    }
    if let Some(f) = value.as_float() {
        return number(f).map(Some);
    }
    if let Some(s) = value.as_string() {
        return s
            .to_string()
            .map(|s| Some(Value::String(s)))
            .map_err(NotJson::Engine);
    }
    if value.is_array() || value.is_object() && !value.is_function() {
        return Ok(None);
    }
    Err(NotJson::Type(value.type_name()))
}

fn open<'js>(value: rquickjs::Value<'js>, key: Option<String>) -> Result<Frame<'js>, NotJson> {
    if let Some(array) = value.clone().into_array() {
        let len = array.len();
        return Ok(Frame::Array {
            src: array,
            len,
            next: 0,
            out: Vec::with_capacity(len.min(1024)),
            key,
        });
    }
    let object = value.into_object().ok_or(NotJson::NotAnObject)?;
    let keys = object
        .keys::<String>()
        .collect::<rquickjs::Result<Vec<String>>>()
        .map_err(NotJson::Engine)?;
    Ok(Frame::Object {
        src: object,
        keys,
        next: 0,
        out: Map::new(),
        key,
    })
}

/// Converts a (snapshotted) JavaScript value to JSON.
pub(crate) fn js_to_json(value: rquickjs::Value<'_>) -> Result<Value, NotJson> {
    if let Some(simple) = primitive(&value)? {
        return Ok(simple);
    }
    let mut stack = vec![open(value, None)?];
    loop {
        let Some(top) = stack.last_mut() else {
            return Err(NotJson::EmptyStack);
        };
        let child = match top {
            Frame::Array { src, len, next, .. } if *next < *len => {
                let index = *next;
                *next += 1;
                Some((
                    src.get::<rquickjs::Value>(index).map_err(NotJson::Engine)?,
                    None,
                ))
            }
            Frame::Object {
                src, keys, next, ..
            } if *next < keys.len() => {
                let key = keys[*next].clone();
                *next += 1;
                let child = src
                    .get::<_, rquickjs::Value>(key.as_str())
                    .map_err(NotJson::Engine)?;
                Some((child, Some(key)))
            }
            _ => None,
        };
        if let Some((child, key)) = child {
            match primitive(&child)? {
                Some(simple) => push(top, key, simple),
                None => stack.push(open(child, key)?),
            }
            continue;
        }
        let (done, key) = match stack.pop() {
            Some(Frame::Array { out, key, .. }) => (Value::Array(out), key),
            Some(Frame::Object { out, key, .. }) => (Value::Object(out), key),
            None => return Err(NotJson::EmptyStack),
        };
        match stack.last_mut() {
            None => return Ok(done),
            Some(parent) => push(parent, key, done),
        }
    }
}

fn push(frame: &mut Frame<'_>, key: Option<String>, value: Value) {
    match frame {
        Frame::Array { out, .. } => out.push(value),
        Frame::Object { out, .. } => {
            out.insert(key.unwrap_or_default(), value);
        }
    }
}

fn scalar<'js>(ctx: &Ctx<'js>, value: &Value) -> rquickjs::Result<Option<rquickjs::Value<'js>>> {
    Ok(Some(match value {
        Value::Null => rquickjs::Value::new_null(ctx.clone()),
        Value::Bool(b) => rquickjs::Value::new_bool(ctx.clone(), *b),
        Value::Number(n) => match n.as_i64().and_then(|i| i32::try_from(i).ok()) {
            Some(i) => rquickjs::Value::new_int(ctx.clone(), i),
            None => rquickjs::Value::new_number(ctx.clone(), n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => rquickjs::String::from_str(ctx.clone(), s)?.into_value(),
        Value::Array(_) | Value::Object(_) => return Ok(None),
    }))
}

enum Children<'a> {
    Array(std::slice::Iter<'a, Value>, usize),
    Object(serde_json::map::Iter<'a>),
}

fn container<'a, 'js>(
    ctx: &Ctx<'js>,
    value: &'a Value,
) -> rquickjs::Result<(Object<'js>, Children<'a>)> {
    Ok(match value {
        Value::Array(items) => (
            Array::new(ctx.clone())?.into_object(),
            Children::Array(items.iter(), 0),
        ),
        Value::Object(map) => (Object::new(ctx.clone())?, Children::Object(map.iter())),
        _ => (Object::new(ctx.clone())?, Children::Array([].iter(), 0)),
    })
}

fn place<'js>(
    target: &Object<'js>,
    index: Option<usize>,
    key: Option<&str>,
    value: rquickjs::Value<'js>,
) -> rquickjs::Result<()> {
    match (index, key) {
        (Some(i), _) => target.set(i as u32, value),
        // Defined, not assigned: a "__proto__" key must stay an own data property.
        (None, Some(k)) => target.prop(
            k,
            Property::from(value).writable().enumerable().configurable(),
        ),
        (None, None) => Ok(()),
    }
}

/// Builds a fresh JavaScript value from JSON.
pub(crate) fn json_to_js<'js>(
    ctx: &Ctx<'js>,
    value: &Value,
) -> rquickjs::Result<rquickjs::Value<'js>> {
    if let Some(simple) = scalar(ctx, value)? {
        return Ok(simple);
    }
    let (root, children) = container(ctx, value)?;
    let mut stack = vec![(root.clone(), children)];
    while let Some((target, children)) = stack.last_mut() {
        let next = match children {
            Children::Array(iter, index) => iter.next().map(|v| {
                let i = *index;
                *index += 1;
                (Some(i), None, v)
            }),
            Children::Object(iter) => iter.next().map(|(k, v)| (None, Some(k.as_str()), v)),
        };
        let Some((index, key, child)) = next else {
            stack.pop();
            continue;
        };
        let target = target.clone();
        match scalar(ctx, child)? {
            Some(simple) => place(&target, index, key, simple)?,
            None => {
                let (object, grandchildren) = container(ctx, child)?;
                place(&target, index, key, object.clone().into_value())?;
                stack.push((object, grandchildren));
            }
        }
    }
    Ok(root.into_value())
}
