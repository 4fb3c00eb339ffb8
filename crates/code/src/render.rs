//! Rendering the outer `run_code` result (tool-runtime-spec §7.4).

use serde_json::Value;

/// The text when a program printed and returned nothing.
pub const NO_OUTPUT: &str = "(run_code completed with no output)";

/// Children indented deeper than this render compactly.
const MAX_INDENT: usize = 10;

/// `logs.join('\n')`, then the rendered result, empty parts dropped, joined by `\n`.
pub fn render_text(logs: &[String], result: Option<&Value>) -> String {
    let logs = logs.join("\n");
    let result = match result {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => pretty_json(other),
    };
    match (logs.is_empty(), result.is_empty()) {
        (true, true) => NO_OUTPUT.to_owned(),
        (false, true) => logs,
        (true, false) => result,
        (false, false) => format!("{logs}\n{result}"),
    }
}

/// `JSON.stringify(v, null, 2)` with indentation capped: a container whose children would be
/// indented by more than 10 characters renders compactly. Iterative.
pub fn pretty_json(value: &Value) -> String {
    enum Step<'a> {
        Visit(&'a Value, usize),
        Text(String),
    }
    let mut out = String::new();
    let mut steps = vec![Step::Visit(value, 0)];
    while let Some(step) = steps.pop() {
        let (value, depth) = match step {
            Step::Text(text) => {
                out.push_str(&text);
                continue;
            }
            Step::Visit(value, depth) => (value, depth),
        };
        let inner = (depth + 1) * 2;
        let empty = match value {
            Value::Array(items) => items.is_empty(),
            Value::Object(map) => map.is_empty(),
            _ => true,
        };
        if empty || inner > MAX_INDENT {
            out.push_str(&dsh_schema::to_js_json(value));
            continue;
        }
        let pad = " ".repeat(inner);
        let close = format!("\n{}", " ".repeat(depth * 2));
        match value {
            Value::Array(items) => {
                out.push('[');
                steps.push(Step::Text(format!("{close}]")));
                for (i, item) in items.iter().enumerate().rev() {
                    steps.push(Step::Visit(item, depth + 1));
                    let sep = if i > 0 { "," } else { "" };
                    steps.push(Step::Text(format!("{sep}\n{pad}")));
                }
            }
            Value::Object(map) => {
                out.push('{');
                steps.push(Step::Text(format!("{close}}}")));
                for (i, (key, item)) in map.iter().enumerate().rev() {
                    steps.push(Step::Visit(item, depth + 1));
                    let sep = if i > 0 { "," } else { "" };
                    let key = serde_json::to_string(key).unwrap_or_default();
                    steps.push(Step::Text(format!("{sep}\n{pad}{key}: ")));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_four_shapes() {
        assert_eq!(render_text(&[], None), NO_OUTPUT);
        assert_eq!(render_text(&["a".into(), "b".into()], None), "a\nb");
        assert_eq!(render_text(&[], Some(&json!("raw \"s\""))), "raw \"s\"");
        assert_eq!(render_text(&["l".into()], Some(&json!(null))), "l\nnull");
        assert_eq!(render_text(&[], Some(&json!(""))), NO_OUTPUT);
    }

    #[test]
    fn pretty_json_matches_stringify_up_to_depth_four() {
        assert_eq!(
            pretty_json(&json!({"n": 42, "ok": true})),
            "{\n  \"n\": 42,\n  \"ok\": true\n}"
        );
        assert_eq!(pretty_json(&json!(["x", 2])), "[\n  \"x\",\n  2\n]");
        assert_eq!(pretty_json(&json!({})), "{}");
        assert_eq!(pretty_json(&json!([])), "[]");
        assert_eq!(
            pretty_json(&json!({"a": [], "b": {}})),
            "{\n  \"a\": [],\n  \"b\": {}\n}"
        );
        assert_eq!(pretty_json(&json!(1e21)), "1e+21");
        assert_eq!(
            pretty_json(&json!({"a": {"b": [1, {"c": 2}]}})),
            "{\n  \"a\": {\n    \"b\": [\n      1,\n      {\n        \"c\": 2\n      }\n    ]\n  }\n}"
        );
    }

    #[test]
    fn containers_at_depth_five_render_compactly() {
        let value = json!([[[[[[1, 2], {"k": "v"}]]]]]);
        assert_eq!(
            pretty_json(&value),
            "[\n  [\n    [\n      [\n        [\n          [1,2],\n          {\"k\":\"v\"}\n        ]\n      ]\n    ]\n  ]\n]"
        );
    }

    #[test]
    fn a_5000_deep_array_stays_bounded() {
        let mut value = json!(0);
        for _ in 0..5000 {
            value = Value::Array(vec![value]);
        }
        let text = pretty_json(&value);
        assert!(text.len() < 11_000, "{}", text.len());
        dsh_schema::drop_deep(value);
    }
}
