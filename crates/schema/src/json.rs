//! Lossless-JSON rules and iterative helpers over `serde_json::Value`.
//!
//! `serde_json::Value`'s own `Drop`, `Clone` and `PartialEq` recurse once per nesting level, so a
//! value a few thousand levels deep can exhaust a thread's stack. The helpers here walk with an
//! explicit stack instead; use them wherever depth comes from a peer or an author.

use serde_json::{Map, Number, Value};

/// `true` when `n` is a lossless JSON number: finite and not negative zero.
pub fn is_lossless_number(n: &Number) -> bool {
    // Integers held as u64/i64 are always finite and have no negative zero; only floats can
    // carry -0.0 (serde_json parses `-0.0` and `-0` as f64) or, in theory, a non-finite value.
    match n.as_f64() {
        Some(f) if n.is_f64() => f.is_finite() && !(f == 0.0 && f.is_sign_negative()),
        Some(_) => true,
        None => false,
    }
}

/// `true` when `value` is lossless JSON: every number finite and not negative zero.
pub fn is_lossless(value: &Value) -> bool {
    let mut stack: Vec<&Value> = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Number(n) if !is_lossless_number(n) => return false,
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(map) => stack.extend(map.values()),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
        }
    }
    true
}

/// The numeric value of a JSON number with JSON (IEEE-754 double) semantics.
pub(crate) fn number_value(n: &Number) -> f64 {
    // u64/i64 -> f64 rounds large integers exactly as a JS parser would.
    n.as_f64().unwrap_or(f64::NAN)
}

/// `true` when `n` is an integer by value (`1.0` is an integer), finite.
pub(crate) fn is_integral(n: &Number) -> bool {
    if n.is_u64() || n.is_i64() {
        return true;
    }
    let f = number_value(n);
    f.is_finite() && f.fract() == 0.0
}

/// `true` when `n` is negative zero.
pub(crate) fn is_negative_zero(n: &Number) -> bool {
    n.is_f64() && n.as_f64().is_some_and(|f| f == 0.0 && f.is_sign_negative())
}

/// Structural JSON equality with numbers compared by value (`1 == 1.0`), iterative.
/// Object key order does not matter.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    let mut stack: Vec<(&Value, &Value)> = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        match (a, b) {
            (Value::Null, Value::Null) => {}
            (Value::Bool(x), Value::Bool(y)) if x == y => {}
            (Value::String(x), Value::String(y)) if x == y => {}
            (Value::Number(x), Value::Number(y)) => {
                // Exact integer compare first so huge u64/i64 values are not conflated by f64.
                let same = match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                    (Some(p), Some(q), _, _) => p == q,
                    (_, _, Some(p), Some(q)) => p == q,
                    _ => number_value(x) == number_value(y),
                };
                if !same {
                    return false;
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                stack.extend(x.iter().zip(y.iter()));
            }
            (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
                for (k, xv) in x {
                    match y.get(k) {
                        Some(yv) => stack.push((xv, yv)),
                        None => return false,
                    }
                }
            }
            _ => return false,
        }
    }
    true
}

/// Drops `value` without recursion, so arbitrarily deep values cannot overflow the stack.
pub fn drop_deep(value: Value) {
    let mut stack: Vec<Value> = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
        }
    }
}

/// Deep-copies `value` without recursion (key order kept).
pub fn clone_deep(value: &Value) -> Value {
    enum Step<'a> {
        Visit(&'a Value),
        Array(usize),
        Object(&'a Map<String, Value>),
    }
    let mut steps = vec![Step::Visit(value)];
    let mut built: Vec<Value> = Vec::new();
    while let Some(step) = steps.pop() {
        match step {
            Step::Visit(Value::Array(items)) => {
                steps.push(Step::Array(items.len()));
                steps.extend(items.iter().rev().map(Step::Visit));
            }
            Step::Visit(Value::Object(map)) => {
                steps.push(Step::Object(map));
                steps.extend(map.values().rev().map(Step::Visit));
            }
            Step::Visit(scalar) => built.push(scalar.clone()),
            Step::Array(n) => {
                let items = built.split_off(built.len().saturating_sub(n));
                built.push(Value::Array(items));
            }
            Step::Object(map) => {
                let values = built.split_off(built.len().saturating_sub(map.len()));
                let out: Map<String, Value> = map.keys().cloned().zip(values).collect();
                built.push(Value::Object(out));
            }
        }
    }
    built.pop().unwrap_or(Value::Null)
}

/// Compact JSON text as JavaScript's `JSON.stringify` prints it (numbers in JS notation:
/// `1` for `1.0`, `1e+21`, `1e-7`). Iterative.
pub fn to_js_json(value: &Value) -> String {
    enum Step<'a> {
        Visit(&'a Value),
        Text(&'static str),
        Key(&'a str),
    }
    let mut out = String::new();
    let mut steps = vec![Step::Visit(value)];
    while let Some(step) = steps.pop() {
        match step {
            Step::Text(t) => out.push_str(t),
            Step::Key(k) => {
                out.push_str(&string_literal(k));
                out.push(':');
            }
            Step::Visit(Value::Null) => out.push_str("null"),
            Step::Visit(Value::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
            Step::Visit(Value::Number(n)) => out.push_str(&js_number(number_value(n))),
            Step::Visit(Value::String(s)) => out.push_str(&string_literal(s)),
            Step::Visit(Value::Array(items)) => {
                out.push('[');
                steps.push(Step::Text("]"));
                for (i, item) in items.iter().enumerate().rev() {
                    steps.push(Step::Visit(item));
                    if i > 0 {
                        steps.push(Step::Text(","));
                    }
                }
            }
            Step::Visit(Value::Object(map)) => {
                out.push('{');
                steps.push(Step::Text("}"));
                for (i, (k, v)) in map.iter().enumerate().rev() {
                    steps.push(Step::Visit(v));
                    steps.push(Step::Key(k));
                    if i > 0 {
                        steps.push(Step::Text(","));
                    }
                }
            }
        }
    }
    out
}

fn string_literal(s: &str) -> String {
    // Serialising a &str cannot fail; JSON.stringify escapes the same set (quote, backslash,
    // control characters) for well-formed Unicode.
    serde_json::to_string(s).unwrap_or_default()
}

/// Formats a finite double the way JavaScript's `Number.prototype.toString` does.
pub fn js_number(f: f64) -> String {
    if f.is_nan() {
        return String::from("NaN");
    }
    if f.is_infinite() {
        return String::from(if f > 0.0 { "Infinity" } else { "-Infinity" });
    }
    if f == 0.0 {
        return String::from("0");
    }
    // Shortest round-trip digits and decimal exponent, from Rust's `{:e}` (e.g. "1.5e-7").
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let k = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    let n = exp + 1; // position of the decimal point relative to the digit string
    let sign = if f < 0.0 { "-" } else { "" };
    let body = if k <= n && n <= 21 {
        let zeros = usize::try_from(n - k).unwrap_or(0);
        format!("{digits}{}", "0".repeat(zeros))
    } else if 0 < n && n <= 21 {
        let split = usize::try_from(n).unwrap_or(0);
        format!("{}.{}", &digits[..split], &digits[split..])
    } else if -6 < n && n <= 0 {
        let zeros = usize::try_from(-n).unwrap_or(0);
        format!("0.{}{digits}", "0".repeat(zeros))
    } else {
        let e = n - 1;
        let e_sign = if e >= 0 { "+" } else { "-" };
        let abs_e = e.abs();
        if k == 1 {
            format!("{digits}e{e_sign}{abs_e}")
        } else {
            format!("{}.{}e{e_sign}{abs_e}", &digits[..1], &digits[1..])
        }
    };
    format!("{sign}{body}")
}
