use std::time::Duration;

use dsh_protocol::LlmFailure;
use pretty_assertions::assert_eq;

use super::*;

fn failure(code: &str) -> LlmFailure {
    LlmFailure::new(code, "x")
}

#[test]
fn default_policy_key_matches_upstream_shape() {
    assert_eq!(
        RetryPolicy::default().policy_key(),
        r#"["normal",5,["EMPTY_RESPONSE","RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0.1]"#
    );
}

#[test]
fn recorded_policy_key_is_reproduced() {
    let policy = RetryPolicy {
        max_retries: 1,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(1),
        jitter_ratio: 0.0,
        retryable_codes: vec!["RATE_LIMIT".into()],
    };
    assert_eq!(policy.policy_key(), r#"["normal",1,["RATE_LIMIT"],1,1,0]"#);
}

#[test]
fn only_the_listed_codes_retry() {
    let policy = RetryPolicy::default();
    for code in [
        "EMPTY_RESPONSE",
        "RATE_LIMIT",
        "SERVER",
        "TIMEOUT",
        "TRANSPORT",
    ] {
        assert!(policy.is_retryable(&failure(code)), "{code}");
        assert!(
            policy.decide_with(1, &failure(code), 0.5).is_some(),
            "{code}"
        );
    }
    for code in [
        "AUTH",
        "CONTEXT_WINDOW_EXCEEDED",
        "INVALID_REQUEST",
        "QUOTA",
        "STREAM_CLOSED",
    ] {
        assert!(!policy.is_retryable(&failure(code)), "{code}");
        assert_eq!(policy.decide_with(1, &failure(code), 0.5), None, "{code}");
    }
}

#[test]
fn budget_is_five_retries() {
    let policy = RetryPolicy::default();
    let server = failure("SERVER");
    assert!(policy.decide_with(5, &server, 0.5).is_some());
    assert_eq!(policy.decide_with(6, &server, 0.5), None);
    assert_eq!(policy.decide_with(0, &server, 0.5), None);
}

#[test]
fn backoff_doubles_with_jitter_bounds_and_caps() {
    let policy = RetryPolicy::default();
    let server = failure("SERVER");
    assert_eq!(
        policy.delay_with(1, &server, 0.5),
        Duration::from_millis(500)
    );
    assert_eq!(
        policy.delay_with(1, &server, 0.0),
        Duration::from_millis(450)
    );
    assert_eq!(
        policy.delay_with(1, &server, 1.0),
        Duration::from_millis(550)
    );
    assert_eq!(
        policy.delay_with(2, &server, 0.5),
        Duration::from_millis(1000)
    );
    assert_eq!(
        policy.delay_with(5, &server, 0.5),
        Duration::from_millis(8000)
    );
    // 16 s is capped to 10 s before jitter, and jitter never lifts it above the cap.
    assert_eq!(
        policy.delay_with(6, &server, 0.0),
        Duration::from_millis(9000)
    );
    assert_eq!(
        policy.delay_with(6, &server, 1.0),
        Duration::from_millis(10_000)
    );
    assert_eq!(
        policy.delay_with(60, &server, 1.0),
        Duration::from_millis(10_000)
    );
    for attempt in 1..=5 {
        let delay = policy.delay(attempt, &server);
        assert!(delay >= Duration::from_millis(450) && delay <= Duration::from_millis(10_000));
    }
}

#[test]
fn retry_after_is_used_verbatim_or_gives_up_when_too_long() {
    let policy = RetryPolicy::default();
    let mut limited = failure("RATE_LIMIT");
    limited.provider_retry_after_ms = Some(3000);
    assert_eq!(
        policy.decide_with(1, &limited, 0.0),
        Some(Duration::from_millis(3000))
    );
    assert_eq!(policy.delay(4, &limited), Duration::from_millis(3000));
    limited.provider_retry_after_ms = Some(10_000);
    assert_eq!(
        policy.decide_with(1, &limited, 0.0),
        Some(Duration::from_millis(10_000))
    );
    limited.provider_retry_after_ms = Some(10_001);
    assert_eq!(policy.decide_with(1, &limited, 0.0), None);
    assert_eq!(policy.delay(1, &limited), Duration::from_millis(10_000));
    limited.provider_retry_after_ms = Some(0);
    assert_eq!(
        policy.decide_with(1, &limited, 0.5),
        Some(Duration::from_millis(500))
    );
}

#[test]
fn a_permanent_server_status_is_not_retried() {
    let policy = RetryPolicy::default();
    for status in [501, 505, 511] {
        let mut permanent = failure("SERVER");
        permanent.status = Some(status);
        assert!(!policy.is_retryable(&permanent), "{status}");
        assert_eq!(policy.decide_with(1, &permanent, 0.5), None, "{status}");
    }
    for status in [500, 502, 503, 504] {
        let mut transient = failure("SERVER");
        transient.status = Some(status);
        assert!(policy.is_retryable(&transient), "{status}");
    }
}
