//! Provider retry decisions (normal mode): which failures retry, how long to wait, and the
//! `policyKey` that scopes a step's retry budget. Pure, so the loop owns logging and sleeping.

use std::time::Duration;

use dsh_protocol::LlmFailure;
use serde_json::Value;

use crate::codes;

/// The normal-mode retry policy. The loop numbers retries per step from 1; retry `n` is allowed
/// while `n <= max_retries`.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// Fraction of the backoff randomized either way (0.1 → ×0.9..×1.1).
    pub jitter_ratio: f64,
    pub retryable_codes: Vec<String>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_millis(10_000),
            jitter_ratio: 0.1,
            retryable_codes: [
                codes::EMPTY_RESPONSE,
                codes::RATE_LIMIT,
                codes::SERVER,
                codes::TIMEOUT,
                codes::TRANSPORT,
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

/// HTTP statuses of the 5xx class that no retry can change.
fn is_permanent_status(status: u16) -> bool {
    matches!(status, 501 | 505 | 511)
}

impl RetryPolicy {
    /// Whether the failure's code is one this policy retries at all. A server status that
    /// says the request can never succeed there (501 Not Implemented, 505 HTTP Version Not
    /// Supported, 511 Network Authentication Required) keeps its `SERVER` code but is not
    /// retried: waiting would only delay the message that says what to fix.
    pub fn is_retryable(&self, failure: &LlmFailure) -> bool {
        self.retryable_codes.contains(&failure.code)
            && !failure.status.is_some_and(is_permanent_status)
    }

    /// The wait before retry number `attempt` (1-based): the provider's `Retry-After` verbatim
    /// when it is positive, else jittered exponential backoff; never above `max_delay`.
    pub fn delay(&self, attempt: u32, failure: &LlmFailure) -> Duration {
        self.delay_with(attempt, failure, rand::random::<f64>())
    }

    /// [`Self::delay`] with the random draw (`0.0..1.0`) supplied, for deterministic callers.
    pub fn delay_with(&self, attempt: u32, failure: &LlmFailure, random: f64) -> Duration {
        match failure.provider_retry_after_ms.filter(|ms| *ms > 0) {
            Some(ms) => Duration::from_millis(ms).min(self.max_delay),
            None => self.backoff(attempt, random),
        }
    }

    /// The full normal-mode decision for retry number `attempt` (1-based): `None` when the loop
    /// must give up (code not retryable, budget spent, or a provider `Retry-After` longer than
    /// `max_delay`), else the wait.
    pub fn decide(&self, attempt: u32, failure: &LlmFailure) -> Option<Duration> {
        self.decide_with(attempt, failure, rand::random::<f64>())
    }

    /// [`Self::decide`] with the random draw supplied.
    pub fn decide_with(&self, attempt: u32, failure: &LlmFailure, random: f64) -> Option<Duration> {
        if attempt == 0 || attempt > self.max_retries || !self.is_retryable(failure) {
            return None;
        }
        if let Some(ms) = failure.provider_retry_after_ms.filter(|ms| *ms > 0)
            && Duration::from_millis(ms) > self.max_delay
        {
            return None;
        }
        Some(self.delay_with(attempt, failure, random))
    }

    // min(min(initial·2^(retry−1), max) · (1 − j + 2j·rand), max), in whole milliseconds.
    fn backoff(&self, attempt: u32, random: f64) -> Duration {
        let max = self.max_delay.as_secs_f64() * 1000.0;
        let exponent = attempt.saturating_sub(1).min(62);
        let base = (self.base_delay.as_secs_f64() * 1000.0 * 2f64.powi(exponent as i32)).min(max);
        let jitter = self.jitter_ratio.clamp(0.0, 1.0);
        let random = if random.is_finite() {
            random.clamp(0.0, 1.0)
        } else {
            0.5
        };
        let ms = (base * (1.0 - jitter + 2.0 * jitter * random))
            .min(max)
            .max(0.0);
        Duration::from_millis(ms.round() as u64)
    }

    /// The `policyKey` of `llm/retry` events: compact JSON of
    /// `["normal", maxRetries, sortedCodes, initialDelayMs, maxDelayMs, jitterRatio]`.
    pub fn policy_key(&self) -> String {
        let mut sorted = self.retryable_codes.clone();
        sorted.sort();
        sorted.dedup();
        let key = Value::Array(vec![
            Value::from("normal"),
            Value::from(self.max_retries),
            Value::from(sorted),
            js_number(self.base_delay.as_secs_f64() * 1000.0),
            js_number(self.max_delay.as_secs_f64() * 1000.0),
            js_number(self.jitter_ratio),
        ]);
        key.to_string()
    }
}

/// A number as JavaScript prints it: integral values without a fraction (`500`, not `500.0`).
pub(crate) fn js_number(value: f64) -> Value {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        Value::from(value as i64)
    } else {
        serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
    }
}

#[cfg(test)]
#[path = "retry_tests.rs"]
mod tests;
