//! Non-2xx responses → canonical failures with their facts (status, Retry-After, request id).

use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use dsh_protocol::LlmFailure;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::codes;

/// Classifies an HTTP error response. `body` is the (possibly truncated) response text.
pub(crate) fn failure_from_http(
    status: u16,
    headers: &HeaderMap,
    body: &str,
    now: SystemTime,
) -> LlmFailure {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let field = |key: &str| {
        error
            .and_then(|e| e.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let body_message = field("message");
    let message = if body_message.is_empty() {
        format!("DeepSeek API error (HTTP {status})")
    } else {
        body_message.to_owned()
    };
    let wording = format!("{} {} {}", field("code"), field("type"), body_message);
    let code = match status {
        401 | 403 => codes::AUTH.to_owned(),
        413 => codes::INVALID_REQUEST.to_owned(),
        _ if mentions_quota(&wording) => codes::QUOTA.to_owned(),
        429 => codes::RATE_LIMIT.to_owned(),
        400 if mentions_context_overflow(&format!("{wording} {body}")) => {
            codes::CONTEXT_WINDOW_EXCEEDED.to_owned()
        }
        400 => codes::INVALID_REQUEST.to_owned(),
        500.. => codes::SERVER.to_owned(),
        _ => format!("HTTP_{status}"),
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let mut failure = LlmFailure::new(code, message);
    failure.status = Some(status);
    failure.provider_retry_after_ms = header("retry-after").and_then(|v| retry_after_ms(v, now));
    failure.request_id = header("x-request-id")
        .or_else(|| header("x-deepseek-request-id"))
        .map(String::from);
    failure
}

fn normalize(text: &str) -> String {
    text.to_lowercase().replace(['_', '-'], " ")
}

fn mentions_quota(text: &str) -> bool {
    let text = normalize(text);
    [
        "insufficient quota",
        "insufficient balance",
        "insufficient credit",
        "insufficient funds",
        "quota exceeded",
        "exceeded your current quota",
        "exceeded quota",
        "out of credits",
        "credit balance is too low",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

fn mentions_context_overflow(text: &str) -> bool {
    let text = normalize(text);
    [
        "context length exceeded",
        "maximum context length",
        "exceeds the model context window",
        "exceeds the context window",
        "context window exceeded",
        "prompt is too long",
        "too many tokens",
        "input is too long",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

/// `Retry-After` as milliseconds: integer seconds, or an HTTP date in the future. Zero, past
/// and unparsable values give `None`.
pub(crate) fn retry_after_ms(value: &str, now: SystemTime) -> Option<u64> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        let seconds: u64 = value.parse().ok()?;
        return seconds.checked_mul(1000).filter(|ms| *ms > 0);
    }
    let at = parse_http_date(value)?;
    let now_ms = now.duration_since(UNIX_EPOCH).ok()?.as_millis();
    let at_ms = u128::from(at) * 1000;
    let ms = at_ms.checked_sub(now_ms).filter(|ms| *ms > 0)?;
    u64::try_from(ms).ok()
}

/// Parses the IMF-fixdate form (`Sun, 06 Nov 1994 08:49:37 GMT`) into Unix seconds.
fn parse_http_date(value: &str) -> Option<u64> {
    let rest = value.split_once(", ").map_or(value, |(_, rest)| rest);
    let mut parts = rest.split_ascii_whitespace();
    let day: u32 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut clock = parts.next()?.split(':').map(|p| p.parse::<u64>().ok());
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let seconds = days.checked_mul(86_400)? + (hour * 3600 + minute * 60 + second) as i64;
    u64::try_from(seconds).ok()
}

// Howard Hinnant's days_from_civil.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use pretty_assertions::assert_eq;
    use reqwest::header::HeaderValue;

    use super::*;

    fn classify(status: u16, body: &str) -> LlmFailure {
        failure_from_http(status, &HeaderMap::new(), body, SystemTime::now())
    }

    fn body(message: &str, kind: &str, code: &str) -> String {
        serde_json::json!({"error":{"message":message,"type":kind,"code":code}}).to_string()
    }

    #[test]
    fn statuses_map_to_canonical_codes() {
        let cases = [
            (
                401,
                body("bad key", "authentication_error", "invalid_api_key"),
                "AUTH",
            ),
            (403, body("forbidden", "", ""), "AUTH"),
            (413, body("too large", "", ""), "INVALID_REQUEST"),
            (
                429,
                body("slow down", "rate_limit_error", "rate_limit_exceeded"),
                "RATE_LIMIT",
            ),
            (
                429,
                body("You exceeded your current quota", "", ""),
                "QUOTA",
            ),
            (
                402,
                body(
                    "Insufficient Balance",
                    "unknown_error",
                    "invalid_request_error",
                ),
                "QUOTA",
            ),
            (
                400,
                body(
                    "This model's maximum context length is 131072 tokens",
                    "",
                    "",
                ),
                "CONTEXT_WINDOW_EXCEEDED",
            ),
            (
                400,
                body(
                    "too long",
                    "invalid_request_error",
                    "context_length_exceeded",
                ),
                "CONTEXT_WINDOW_EXCEEDED",
            ),
            (
                400,
                body("bad field", "invalid_request_error", ""),
                "INVALID_REQUEST",
            ),
            (500, body("boom", "", ""), "SERVER"),
            (503, String::new(), "SERVER"),
            (404, String::new(), "HTTP_404"),
        ];
        for (status, body, code) in cases {
            let failure = classify(status, &body);
            assert_eq!(failure.code, code, "{status} {body}");
            assert_eq!(failure.status, Some(status));
        }
    }

    #[test]
    fn message_comes_from_the_body_or_a_generic_text() {
        assert_eq!(
            classify(401, &body("simulated provider error (HTTP 401)", "", "")).message,
            "simulated provider error (HTTP 401)"
        );
        assert_eq!(
            classify(502, "<html>bad gateway</html>").message,
            "DeepSeek API error (HTTP 502)"
        );
    }

    #[test]
    fn facts_come_from_headers() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("3"));
        headers.insert("x-deepseek-request-id", HeaderValue::from_static("req-2"));
        let failure = failure_from_http(429, &headers, "", SystemTime::now());
        assert_eq!(failure.provider_retry_after_ms, Some(3000));
        assert_eq!(failure.request_id.as_deref(), Some("req-2"));
        headers.insert("x-request-id", HeaderValue::from_static("req-1"));
        assert_eq!(
            failure_from_http(429, &headers, "", SystemTime::now())
                .request_id
                .as_deref(),
            Some("req-1")
        );
    }

    #[test]
    fn retry_after_accepts_seconds_and_future_dates_only() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(retry_after_ms("2", now), Some(2000));
        assert_eq!(retry_after_ms("0", now), None);
        assert_eq!(retry_after_ms("-1", now), None);
        assert_eq!(retry_after_ms("soon", now), None);
        assert_eq!(
            retry_after_ms("Sun, 06 Nov 1994 08:49:42 GMT", now),
            Some(5000)
        );
        assert_eq!(retry_after_ms("Sun, 06 Nov 1994 08:49:37 GMT", now), None);
        assert_eq!(retry_after_ms("Sat, 05 Nov 1994 08:49:37 GMT", now), None);
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2000 12:00:00 GMT"),
            Some(951_825_600)
        );
    }
}
