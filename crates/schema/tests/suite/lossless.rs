//! Lossless JSON (spec §1.1) and the JS-compatible printers.

use dsh_schema::{is_lossless, js_number, json_eq, to_js_json};
use serde_json::{Value, json};

use super::neg_zero;

#[test]
fn lossless_rejects_negative_zero_only() {
    assert!(is_lossless(
        &json!({"a":[0, 0.0, -1, -1.5, 1e308, u64::MAX, i64::MIN, "-0", null, true]})
    ));
    assert!(!is_lossless(&neg_zero()));
    assert!(!is_lossless(
        &serde_json::from_str::<Value>("-0").expect("parses")
    ));
    assert!(!is_lossless(&json!([{"x":[neg_zero()]}])));
    // Non-finite numbers cannot enter a serde_json::Value: they become null.
    assert_eq!(json!(f64::NAN), Value::Null);
}

#[test]
fn json_eq_compares_numbers_by_value() {
    assert!(json_eq(&json!(1), &json!(1.0)));
    assert!(json_eq(&json!({"a":1,"b":[2]}), &json!({"b":[2.0],"a":1})));
    assert!(!json_eq(&json!(u64::MAX), &json!(u64::MAX - 1)));
    assert!(!json_eq(&json!([1]), &json!([1, 2])));
    assert!(!json_eq(&json!("1"), &json!(1)));
}

#[test]
fn js_number_formatting_matches_javascript() {
    let cases = [
        (1.0, "1"),
        (-5.5, "-5.5"),
        (0.1, "0.1"),
        (123.456, "123.456"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e300, "1.5e+300"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.25e-7, "1.25e-7"),
        (9007199254740992.0, "9007199254740992"),
        (-0.0, "0"),
    ];
    for (f, text) in cases {
        assert_eq!(js_number(f), text, "{f}");
    }
    assert_eq!(
        to_js_json(&json!({"a":[1.0,"x\n",null,{"b":false}]})),
        r#"{"a":[1,"x\n",null,{"b":false}]}"#
    );
}
