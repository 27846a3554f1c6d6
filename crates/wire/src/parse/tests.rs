//! The request reader against every way a request can be wrong.

use crate::{CallRequest, RetryField};
use serde_json::{Value, json};

fn refused_field(v: Value) -> String {
    let err = CallRequest::from_value(&v, RetryField::Honoured).expect_err("must be refused");
    assert_eq!(err.code, crate::ErrorCode::ValidationError, "{err}");
    err.field().expect("details.field").to_owned()
}

fn with_retry(retry: Value) -> Value {
    json!({"messages": [{"role": "user", "content": "hi"}], "retry": retry})
}

#[test]
fn a_full_request_parses_and_ignores_unknown_top_level_fields() {
    let r = CallRequest::from_value(
        &json!({
            "provider": "mock", "model": "m", "systemPrompt": "be brief",
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
            "temperature": 0.5, "maxTokens": 2000, "stopSequences": ["END"],
            "responseSchema": {"type": "object"},
            "retry": {"maxAttempts": 2, "growMaxTokens": false},
            "someFutureField": true
        }),
        RetryField::Honoured,
    )
    .unwrap();
    assert_eq!(r.messages.len(), 2);
    assert_eq!(r.max_tokens, Some(2000));
    assert_eq!(r.retry.unwrap().max_attempts, Some(2));
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
        json!(16.5),
        json!(1e10),
    ] {
        assert_eq!(
            refused_field(with_retry(json!({ "maxAttempts": bad }))),
            "retry.maxAttempts",
            "maxAttempts {bad}"
        );
    }
}

#[test]
fn whole_numbers_written_as_decimals_are_integers() {
    for text in ["1.0", "3e0", "16.0", "1.6e1", "2.0E0"] {
        let request = format!(
            r#"{{"messages": [{{"role": "user", "content": "hi"}}], "maxTokens": 100.0,
                "retry": {{"maxAttempts": {text}}}}}"#
        );
        let r = CallRequest::from_json(&request, RetryField::Honoured)
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        let expected: f64 = text.parse().unwrap();
        assert_eq!(
            r.retry.unwrap().max_attempts,
            Some(expected as u32),
            "{text}"
        );
        assert_eq!(r.max_tokens, Some(100));
    }
}

#[test]
fn a_number_too_large_for_a_float_names_its_key() {
    for (text, field) in [
        (
            r#"{"messages": [{"role": "user", "content": "hi"}], "retry": {"maxAttempts": 1e400}}"#,
            "retry.maxAttempts",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "hi"}], "maxTokens": -1e999}"#,
            "maxTokens",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e400}"#,
            "temperature",
        ),
    ] {
        let err = CallRequest::from_json(text, RetryField::Honoured).unwrap_err();
        assert_eq!(err.field(), Some(field), "{err}");
    }
    let err = CallRequest::from_json(r#"{"messages": ["#, RetryField::Honoured).unwrap_err();
    assert_eq!(err.field(), Some("request"));
    assert!(err.message.contains("not valid JSON"), "{err}");
}

#[test]
fn malformed_grow_max_tokens_and_retry_are_refused() {
    for bad in [json!(null), json!("false"), json!(0)] {
        assert_eq!(
            refused_field(with_retry(json!({ "growMaxTokens": bad }))),
            "retry.growMaxTokens"
        );
    }
    for bad in [json!(3), json!(null), json!([1]), json!("x")] {
        assert_eq!(refused_field(with_retry(bad)), "retry");
    }
    assert_eq!(
        refused_field(with_retry(json!({"maxAttempt": 1}))),
        "retry.maxAttempt"
    );
}

#[test]
fn the_retry_field_is_ignored_when_not_honoured() {
    let v = with_retry(json!({"maxAttempts": 2.5}));
    assert_eq!(
        CallRequest::from_value(&v, RetryField::Ignored)
            .unwrap()
            .retry,
        None
    );
}

#[test]
fn other_fields_are_refused_by_name() {
    for (v, field) in [
        (json!({}), "messages"),
        (json!({"messages": []}), "messages"),
        (json!({"messages": "hi"}), "messages"),
        (json!({"messages": [3]}), "messages[0]"),
        (json!({"messages": [{"content": "x"}]}), "messages[0].role"),
        (
            json!({"messages": [{"role": "robot", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"messages": [{"role": "user"}]}),
            "messages[0].content",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "temperature": 3}),
            "temperature",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}),
            "temperature",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "maxTokens": 0}),
            "maxTokens",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "maxTokens": 1.5}),
            "maxTokens",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "stopSequences": ["a", 1]}),
            "stopSequences[1]",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "responseSchema": "object"}),
            "responseSchema",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "provider": 1}),
            "provider",
        ),
        (json!([1]), "request"),
    ] {
        assert_eq!(refused_field(v.clone()), field, "{v}");
    }
}

#[test]
fn a_key_sent_twice_counts_as_its_last_value() {
    let text = r#"{"model": 5, "messages": [{"role": "user", "content": "hi"}], "model": "m"}"#;
    let r = CallRequest::from_json(text, RetryField::Honoured).unwrap();
    assert_eq!(r.model.as_deref(), Some("m"));
    let text = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "model": 5}"#;
    let e = CallRequest::from_json(text, RetryField::Honoured).unwrap_err();
    assert_eq!(e.field(), Some("model"));
}

#[test]
fn unknown_fields_are_named_once_each_in_byte_order() {
    let text = r#"{"mesages": 1, "messages": [{"role": "user", "content": "hi"}],
                   "colour": 2, "mesages": 3}"#;
    let (_, unknown) = CallRequest::from_json_naming_unknown(text, RetryField::Honoured).unwrap();
    let names: Vec<&str> = unknown.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["colour", "mesages"]);
    assert_eq!(unknown[1].did_you_mean.as_deref(), Some("messages"));
}

#[test]
fn a_request_inside_a_body_is_read_in_the_same_pass() {
    #[derive(serde::Deserialize)]
    struct Body {
        request: crate::ParsedRequest,
    }
    // A field of the wrong shape is the request's refusal, not the body's.
    let body: Body = serde_json::from_str(r#"{"request": {"messages": "hi"}}"#).unwrap();
    let e = body.request.check(RetryField::Honoured).unwrap_err();
    assert_eq!(e.field(), Some("messages"));
    // Not an object is serde's own refusal of the body.
    let e = serde_json::from_str::<Body>(r#"{"request": "hi"}"#)
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .starts_with(r#"invalid type: string "hi", expected a map"#),
        "{e}"
    );
}

#[test]
fn a_typed_request_is_checked_as_one_read_from_json() {
    let request = CallRequest {
        messages: vec![crate::Message::user("hi")],
        response_schema: Some(json!("x")),
        ..CallRequest::default()
    };
    let e = crate::ParsedRequest::typed(request.clone(), None)
        .check(RetryField::Honoured)
        .unwrap_err();
    assert_eq!(e.field(), Some("responseSchema"));
    let retry: crate::ParsedRetry = serde_json::from_str(r#"{"maxAttempts": 2.5}"#).unwrap();
    let fine = CallRequest {
        response_schema: None,
        ..request
    };
    let e = crate::ParsedRequest::typed(fine.clone(), Some(retry.clone()))
        .check(RetryField::Honoured)
        .unwrap_err();
    assert_eq!(e.field(), Some("retry.maxAttempts"));
    // A host that ignores `retry` ignores a malformed one too.
    let (checked, _) = crate::ParsedRequest::typed(fine, Some(retry))
        .check(RetryField::Ignored)
        .unwrap();
    assert_eq!(checked.retry, None);
}

#[test]
fn tools_calls_and_results_read_into_their_types() {
    let r = CallRequest::from_json(
        r#"{"messages": [
              {"role": "user", "content": "weather?"},
              {"role": "assistant", "content": null,
               "toolCalls": [{"id": "c1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"}]},
              {"role": "tool", "toolCallId": "c1", "content": "sunny"}],
            "tools": [{"name": "weather", "parameters": {"type": "object"}, "strict": true}],
            "toolChoice": "required", "parallelToolCalls": false}"#,
        RetryField::Honoured,
    )
    .unwrap();
    assert_eq!(r.messages[1].tool_calls[0].name, "weather");
    assert_eq!(r.messages[1].content, "");
    assert_eq!(r.messages[2].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(r.tool_choice, Some(crate::ToolChoice::Required));
    assert_eq!(r.parallel_tool_calls, Some(false));
    // Written back, the request is the same request.
    let again = CallRequest::from_value(&r.canonical(), RetryField::Honoured).unwrap();
    assert_eq!(again, r);
}

#[test]
fn a_request_without_tools_serialises_as_before() {
    let r = CallRequest::from_json(
        r#"{"messages": [{"role": "user", "content": "x"}]}"#,
        RetryField::Honoured,
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        r#"{"messages":[{"role":"user","content":"x"}]}"#
    );
}

#[test]
fn malformed_tools_are_refused_naming_the_path() {
    let field = |body: &str| {
        CallRequest::from_json(body, RetryField::Honoured)
            .unwrap_err()
            .field()
            .map(str::to_owned)
    };
    let m = r#""messages": [{"role": "user", "content": "x"}]"#;
    assert_eq!(
        field(&format!(r#"{{{m}, "tools": [{{"name": "a"}}]}}"#)).as_deref(),
        Some("tools[0]")
    );
    assert_eq!(
        field(&format!(
            r#"{{{m}, "tools": [{{"name": 3, "parameters": {{}}}}]}}"#
        ))
        .as_deref(),
        Some("tools[0].name")
    );
    assert_eq!(
        field(&format!(r#"{{{m}, "toolChoice": "required"}}"#)).as_deref(),
        Some("toolChoice")
    );
    assert_eq!(
        field(r#"{"messages": [{"role": "tool", "content": "x"}]}"#).as_deref(),
        Some("messages[0].toolCallId")
    );
    assert_eq!(
        field(r#"{"messages": [{"role": "user", "content": "x", "toolCalls": [{"id": 1}]}]}"#)
            .as_deref(),
        Some("messages[0].toolCalls[0].id")
    );
    assert_eq!(
        field(r#"{"messages": [{"role": "user", "content": "x", "toolCalls": []}], "parallelToolCalls": 1}"#)
            .as_deref(),
        Some("parallelToolCalls")
    );
}
