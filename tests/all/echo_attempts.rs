//! The conformance node end to end: wasm pack → host → engine → mock.

use callai_engine::HostConfig;
use callai_tests::echo;
use serde_json::json;

fn hi() -> serde_json::Value {
    json!({"messages": [{"role": "user", "content": "hi"}]})
}

#[test]
fn a_text_call_returns_content_usage_and_attempts() {
    let out = echo(
        HostConfig::default(),
        json!([{"content": "Hello!", "finishReason": "stop", "outputTokens": 3, "inputTokens": 5}]),
        hi(),
    );
    assert_eq!(
        out.ok(),
        &json!({"content": "Hello!", "finishReason": "stop",
                "usage": {"inputTokens": 5, "outputTokens": 3, "totalTokens": 8},
                "attempts": {"count": 1, "outputTokens": 3, "usageComplete": true}})
    );
    assert_eq!(out.mock_log.len(), 1);
    assert_eq!(out.events_named("provider.usage").len(), 1);
}

#[test]
fn a_structured_call_whose_reply_validates() {
    let request = json!({
        "messages": [{"role": "user", "content": "scene"}],
        "responseSchema": {"type": "object", "required": ["scene"],
                           "properties": {"scene": {"type": "string"}}}
    });
    let out = echo(
        HostConfig::default(),
        json!([{"content": "{\"scene\": \"a quiet harbour\"}", "outputTokens": 7}]),
        request,
    );
    assert_eq!(out.ok()["data"], json!({"scene": "a quiet harbour"}));
    assert_eq!(out.ok()["attempts"]["structuredOutput"], "native");
    assert!(out.ok().get("content").is_none());
}

#[test]
fn the_seed_example_end_to_end() {
    let request = json!({
        "messages": [{"role": "user", "content": "scene"}],
        "maxTokens": 2000,
        "responseSchema": {"type": "object", "required": ["scene"]}
    });
    let out = echo(
        HostConfig::default(),
        json!([{"content": "{\"scene\": \"it was", "finishReason": "length", "outputTokens": 5000},
               {"content": "{\"scene\": \"ok\"}", "finishReason": "stop", "outputTokens": 1800}]),
        request,
    );
    assert_eq!(
        out.ok()["attempts"],
        json!({"count": 2, "outputTokens": 3800, "usageComplete": true, "structuredOutput": "native"})
    );
    assert_eq!(out.ok()["usage"]["outputTokens"], 1800);
    let budgets: Vec<u32> = out.mock_log.iter().map(|l| l.max_tokens).collect();
    assert_eq!(budgets, [2000, 4000]);
}

#[test]
fn a_malformed_request_is_a_validation_error_naming_the_field() {
    for (request, field) in [
        (
            json!({"messages": [{"role": "user", "content": "hi"}], "retry": {"maxAttempts": 2.5}}),
            "retry.maxAttempts",
        ),
        (
            json!({"messages": [{"role": "user", "content": "hi"}], "retry": {"maxAttempts": "3"}}),
            "retry.maxAttempts",
        ),
        (
            json!({"messages": [{"role": "user", "content": "hi"}], "retry": {"growMaxTokens": null}}),
            "retry.growMaxTokens",
        ),
        (
            json!({"messages": [{"role": "user", "content": "hi"}], "retry": 3}),
            "retry",
        ),
        (json!({"messages": "hi"}), "messages"),
        (
            json!({"messages": [{"role": "user", "content": "hi"}], "maxTokens": -5}),
            "maxTokens",
        ),
    ] {
        let out = echo(HostConfig::default(), json!([{"content": "x"}]), request);
        let error = &out.ok()["error"];
        assert_eq!(error["code"], "validation_error");
        assert_eq!(error["details"]["field"], field);
        assert!(error["message"].as_str().unwrap().contains(field));
        assert!(out.mock_log.is_empty(), "refused before any request");
    }
}

#[test]
fn numbers_in_retry_are_whole_numbers_or_refused_naming_the_key() {
    let hi = r#""messages": [{"role": "user", "content": "hi"}]"#;
    // Whole numbers written as decimals are integers, to JSON Schema and to
    // JavaScript alike: accepted.
    for n in ["1.0", "3e0", "16.0"] {
        let out = callai_tests::run(
            &callai_tests::pack("echo-attempts"),
            HostConfig::default(),
            &json!([{"content": "x", "outputTokens": 1}]),
            &format!(r#"{{{hi}, "retry": {{"maxAttempts": {n}}}}}"#),
        );
        assert_eq!(out.ok()["content"], "x", "maxAttempts {n}");
    }
    // A fraction, or a number no float holds: refused, naming retry.maxAttempts.
    for n in ["2.5", "1e400", "-1e400", "16.000001"] {
        let out = callai_tests::run(
            &callai_tests::pack("echo-attempts"),
            HostConfig::default(),
            &json!([{"content": "x"}]),
            &format!(r#"{{{hi}, "retry": {{"maxAttempts": {n}}}}}"#),
        );
        let error = &out.ok()["error"];
        assert_eq!(error["code"], "validation_error", "maxAttempts {n}");
        assert_eq!(
            error["details"]["field"], "retry.maxAttempts",
            "maxAttempts {n}"
        );
        assert!(out.mock_log.is_empty());
    }
}

#[test]
fn request_json_that_does_not_parse_is_refused() {
    let out = callai_tests::run(
        &callai_tests::pack("echo-attempts"),
        HostConfig::default(),
        &json!([{"content": "x"}]),
        "{\"messages\": [",
    );
    assert_eq!(out.ok()["error"]["details"]["field"], "request");
}

#[test]
fn a_script_that_runs_out_is_an_error_the_pack_sees() {
    let out = echo(
        HostConfig::default(),
        json!([{"content": "{\"a\":", "finishReason": "length", "outputTokens": 10}]),
        json!({"messages": [{"role": "user", "content": "hi"}], "responseSchema": {"type": "object"}}),
    );
    let error = &out.ok()["error"];
    assert_eq!(error["code"], "provider_unavailable");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("script exhausted"),
        "{error}"
    );
    assert_eq!(
        out.events_named("envelope.retry.exhausted")[0]["totalAttempts"],
        1
    );
}

#[test]
fn a_failed_call_carries_total_attempts_and_emits_exhausted() {
    let out = echo(
        HostConfig::default(),
        json!([{"content": "{\"a\":", "finishReason": "length", "outputTokens": 10}]),
        json!({"messages": [{"role": "user", "content": "hi"}], "responseSchema": {"type": "object"},
               "retry": {"maxAttempts": 1}}),
    );
    assert_eq!(
        out.ok()["error"]["code"],
        "envelope_truncation_unrecoverable"
    );
    assert_eq!(out.ok()["error"]["details"]["totalAttempts"], 1);
    assert_eq!(
        out.events_named("envelope.retry.exhausted")[0]["totalAttempts"],
        1
    );
}

#[test]
fn flags_off_hide_attempts_and_ignore_retry() {
    let mut config = HostConfig::default();
    config.call_accounting.attempts = false;
    config.call_accounting.retry_policy = false;
    let out = echo(
        config,
        json!([{"content": "hi", "outputTokens": 1}]),
        json!({"messages": [{"role": "user", "content": "hi"}], "retry": {"maxAttempts": 0}}),
    );
    assert_eq!(out.ok()["content"], "hi");
    assert!(out.ok().get("attempts").is_none());
}
