//! The frames: one compact JSON object per `\n`-terminated line, classified as upstream's
//! transport does (a line that is not a JSON object is ignored; `params` that are not an
//! object count as `{}`).

use serde_json::Map;
use serde_json::Value;
use serde_json::json;

/// The only error code the server answers with (upstream's handler failures and unknown
/// methods alike); clients treat it as opaque and show the message.
pub const INTERNAL_ERROR: i64 = -32603;

/// A request's id: a string or a number, echoed back verbatim.
pub type RequestId = Value;

/// One classified input line.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Map<String, Value>,
    },
    Notification {
        method: String,
    },
    /// An answer to a server→client request (the server sends none, so it is dropped).
    Response,
}

/// Classifies one line; `None` for a blank line, a line that is not a JSON object, or an
/// object that is neither a request, a notification nor a response.
pub fn classify(line: &str) -> Option<Incoming> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(line) else {
        return None;
    };
    let id = message
        .remove("id")
        .filter(|id| id.is_string() || id.is_number());
    let method = match message.remove("method") {
        Some(Value::String(method)) => Some(method),
        _ => None,
    };
    let params = match message.remove("params") {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    };
    match (id, method) {
        (Some(id), Some(method)) => Some(Incoming::Request { id, method, params }),
        (None, Some(method)) => Some(Incoming::Notification { method }),
        (Some(_), None) => Some(Incoming::Response),
        (None, None) => None,
    }
}

pub fn result(id: &RequestId, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

pub fn error(id: &RequestId, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": INTERNAL_ERROR, "message": message}})
        .to_string()
}

pub fn notification(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_that_are_not_objects_are_ignored() {
        for line in [
            "",
            "  ",
            "not json",
            "[1,2]",
            "3",
            "\"x\"",
            "{}",
            "{\"id\":true}",
        ] {
            assert_eq!(classify(line), None, "{line}");
        }
    }

    #[test]
    fn params_that_are_not_an_object_count_as_empty() {
        let Some(Incoming::Request { id, method, params }) =
            classify(r#"{"jsonrpc":"2.0","id":7,"method":"shutdown","params":[1,2]}"#)
        else {
            panic!("not a request");
        };
        assert_eq!(
            (id, method.as_str(), params.len()),
            (json!(7), "shutdown", 0)
        );
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","id":"a","method":"shutdown"}"#),
            Some(Incoming::Request { .. })
        ));
    }

    #[test]
    fn notifications_and_responses_are_told_apart() {
        assert_eq!(
            classify(r#"{"method":"x","params":{}}"#),
            Some(Incoming::Notification { method: "x".into() })
        );
        assert_eq!(
            classify(r#"{"id":"1","result":{}}"#),
            Some(Incoming::Response)
        );
    }

    #[test]
    fn errors_carry_the_request_id_and_the_one_code() {
        let frame: Value = serde_json::from_str(&error(&json!("r1"), "boom")).unwrap();
        assert_eq!(
            frame,
            json!({"jsonrpc":"2.0","id":"r1","error":{"code":-32603,"message":"boom"}})
        );
    }
}
