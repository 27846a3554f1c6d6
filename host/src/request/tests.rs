//! Parsing and refusing requests, field by field.

use super::*;
use serde_json::json;

fn parse(v: Value) -> Result<CallRequest, CallError> {
    CallRequest::from_value(&v, true)
}

fn refused_field(v: Value) -> String {
    let err = parse(v).expect_err("must be refused");
    assert_eq!(err.code, crate::ErrorCode::ValidationError, "{err}");
    err.field().expect("details.field").to_owned()
}

fn with_retry(retry: Value) -> Value {
    json!({"messages": [{"role": "user", "content": "hi"}], "retry": retry})
}

#[test]
fn a_full_request_parses() {
    let r = parse(json!({
        "provider": "mock", "model": "m", "systemPrompt": "be brief",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        "temperature": 0.5, "maxTokens": 2000, "stopSequences": ["END"],
        "responseSchema": {"type": "object"},
        "retry": {"maxAttempts": 2, "growMaxTokens": false},
        "someFutureField": true
    }))
    .unwrap();
    assert_eq!(r.messages.len(), 2);
    assert_eq!(r.max_tokens, Some(2000));
    assert_eq!(
        r.retry,
        Some(RetryPolicy {
            max_attempts: Some(2),
            grow_max_tokens: Some(false)
        })
    );
    assert!(r.is_structured());
}

#[test]
fn malformed_max_attempts_is_refused_naming_the_key() {
    for bad in [
        json!(0),
        json!(17),
        json!(2.5),
        json!("3"),
        json!(null),
        json!(-1),
    ] {
        assert_eq!(
            refused_field(with_retry(json!({ "maxAttempts": bad }))),
            "retry.maxAttempts",
            "maxAttempts {bad}"
        );
    }
}

#[test]
fn malformed_grow_max_tokens_is_refused_naming_the_key() {
    for bad in [json!(null), json!("false"), json!(0)] {
        assert_eq!(
            refused_field(with_retry(json!({ "growMaxTokens": bad }))),
            "retry.growMaxTokens"
        );
    }
}

#[test]
fn a_non_object_retry_is_refused() {
    for bad in [json!(3), json!(null), json!([1]), json!("x")] {
        assert_eq!(refused_field(with_retry(bad)), "retry");
    }
    assert_eq!(
        refused_field(with_retry(json!({"maxAttempt": 1}))),
        "retry.maxAttempt"
    );
}

#[test]
fn limits_of_max_attempts_are_accepted() {
    for ok in [1, 16] {
        let r = parse(with_retry(json!({ "maxAttempts": ok }))).unwrap();
        assert_eq!(r.retry.unwrap().max_attempts, Some(ok));
    }
    let r = parse(with_retry(json!({}))).unwrap();
    assert_eq!(r.retry, Some(RetryPolicy::default()));
}

#[test]
fn retry_is_ignored_even_when_malformed_without_the_flag() {
    let r = CallRequest::from_value(&with_retry(json!({"maxAttempts": 2.5})), false).unwrap();
    assert_eq!(r.retry, None);
    let typed = CallRequest {
        messages: vec![Message::user("hi")],
        retry: Some(RetryPolicy {
            max_attempts: Some(0),
            grow_max_tokens: None,
        }),
        ..Default::default()
    };
    assert!(typed.validate(false).is_ok());
    assert_eq!(
        typed.validate(true).unwrap_err().field(),
        Some("retry.maxAttempts")
    );
}

#[test]
fn other_malformed_fields_are_named() {
    let m = json!([{"role": "user", "content": "hi"}]);
    assert_eq!(refused_field(json!({})), "messages");
    assert_eq!(refused_field(json!({"messages": []})), "messages");
    assert_eq!(refused_field(json!({"messages": "hi"})), "messages");
    assert_eq!(
        refused_field(json!({"messages": [{"role": "bot", "content": "x"}]})),
        "messages[0].role"
    );
    assert_eq!(
        refused_field(json!({"messages": [{"role": "user"}]})),
        "messages[0].content"
    );
    assert_eq!(
        refused_field(json!({"messages": m, "maxTokens": 0})),
        "maxTokens"
    );
    assert_eq!(
        refused_field(json!({"messages": m, "maxTokens": 1.5})),
        "maxTokens"
    );
    assert_eq!(
        refused_field(json!({"messages": m, "temperature": 3})),
        "temperature"
    );
    assert_eq!(
        refused_field(json!({"messages": m, "provider": 1})),
        "provider"
    );
    assert_eq!(
        refused_field(json!({"messages": m, "stopSequences": ["a", 2]})),
        "stopSequences[1]"
    );
    assert_eq!(
        refused_field(json!({"messages": m, "responseSchema": "object"})),
        "responseSchema"
    );
    assert_eq!(
        refused_field(json!({"messages": m, "responseSchema": {"type": 12}})),
        "responseSchema"
    );
    assert_eq!(refused_field(json!([1, 2])), "request");
    let err = CallRequest::from_json("{not json", true).unwrap_err();
    assert_eq!(err.field(), Some("request"));
}
