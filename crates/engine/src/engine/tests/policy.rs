//! RFC 0248 §B through the engine, and the RFC 0032 rules it leaves in
//! place: the cap, budget growth, clamping, malformed policies, refusals.

use super::*;
use callai_wire::ErrorCode;
use serde_json::{Value, json};

#[test]
fn refusal_is_never_retried() {
    let r = run(
        json!([
            reply("I can't help with that.", "refusal", 3),
            reply(OK, "stop", 1)
        ]),
        structured(json!({"retry": {"maxAttempts": 16}})),
    );
    assert_eq!(r.err().code, ErrorCode::EnvelopeRefusal);
    assert_eq!(r.mock_log.len(), 1);
    assert_eq!(r.named("envelope.refusal").len(), 1);
    assert_eq!(r.exhausted_total(), 1);
}

#[test]
fn b1_max_attempts_caps_requests() {
    for cap in 1..=3u32 {
        let script: Vec<Value> = (0..5).map(|_| reply(CUT, "length", 10)).collect();
        let r = run_with(
            config(|c| c.retry.max_retry_attempts = 16),
            json!(script),
            structured(json!({"retry": {"maxAttempts": cap}})),
        );
        assert_eq!(r.err().code, ErrorCode::EnvelopeTruncationUnrecoverable);
        assert_eq!(r.mock_log.len() as u32, cap);
        assert_eq!(r.exhausted_total(), cap);
    }
}

#[test]
fn b1_the_cap_includes_the_fallback() {
    let r = run(
        json!([
            reply(PROSE, "stop", 1),
            reply(PROSE, "stop", 1),
            reply(OK, "stop", 1)
        ]),
        structured(json!({"retry": {"maxAttempts": 2}})),
    );
    assert_eq!(r.err().code, ErrorCode::EnvelopeInvalid);
    assert_eq!(r.mock_log.len(), 2);
    assert_eq!(
        r.named("envelope.nlToFormat.engaged").len(),
        1,
        "the 2nd request is the fallback"
    );
}

#[test]
fn b4_max_attempts_one_on_truncation_emits_exhausted_one() {
    let r = run(
        json!([reply(CUT, "length", 2000), reply(OK, "stop", 1)]),
        structured(json!({"maxTokens": 2000, "retry": {"maxAttempts": 1}})),
    );
    assert_eq!(r.err().code, ErrorCode::EnvelopeTruncationUnrecoverable);
    assert_eq!(r.mock_log.len(), 1);
    assert_eq!(r.exhausted_total(), 1);
    assert!(r.named("envelope.retry.attempted").is_empty());
    assert!(r.named("envelope.nlToFormat.engaged").is_empty());
}

#[test]
fn b2_grow_max_tokens_false_keeps_the_budget() {
    let r = run(
        json!([
            reply(CUT, "length", 900),
            reply(CUT, "length", 900),
            reply(OK, "stop", 1)
        ]),
        structured(json!({"maxTokens": 500, "retry": {"growMaxTokens": false}})),
    );
    assert_eq!(r.ok().attempts.unwrap().count, 3);
    assert!(
        r.mock_log.iter().all(|l| l.max_tokens == 500),
        "{:?}",
        r.mock_log
    );
    assert_eq!(
        r.ok().attempts.unwrap().output_tokens,
        Some(1001),
        "clamped to 500 each"
    );
}

#[test]
fn b2_without_max_tokens_the_host_default_is_the_bound() {
    let r = run(
        json!([reply(CUT, "length", 9000), reply(OK, "stop", 1)]),
        structured(json!({"retry": {"growMaxTokens": false}})),
    );
    assert!(
        r.mock_log.iter().all(|l| l.max_tokens == 4000),
        "{:?}",
        r.mock_log
    );
    let grown = run(
        json!([reply(CUT, "length", 9000), reply(OK, "stop", 1)]),
        structured(json!({})),
    );
    assert_eq!(grown.mock_log[1].max_tokens, 8000, "default 4000 doubled");
}

#[test]
fn growth_clamps_at_the_ceiling_and_a_clamped_truncation_is_terminal() {
    let c = config(|c| {
        c.retry.provider_max_tokens = 6000;
        c.retry.max_retry_attempts = 5;
    });
    let script: Vec<Value> = (0..5).map(|_| reply(CUT, "length", 99999)).collect();
    let r = run_with(c, json!(script), structured(json!({"maxTokens": 2000})));
    assert_eq!(
        r.mock_log.iter().map(|l| l.max_tokens).collect::<Vec<_>>(),
        [2000, 4000, 6000]
    );
    assert_eq!(r.err().code, ErrorCode::EnvelopeTruncationUnrecoverable);
    assert_eq!(r.exhausted_total(), 3);
}

#[test]
fn b3_a_cap_above_the_ceiling_is_clamped_not_refused() {
    let script: Vec<Value> = (0..20)
        .map(|_| json!({"error": {"status": 500, "message": "down"}}))
        .collect();
    let r = run(
        json!(script),
        structured(json!({"retry": {"maxAttempts": 16}})),
    );
    assert_eq!(r.err().code, ErrorCode::ProviderUnavailable);
    assert_eq!(r.mock_log.len(), 3, "the host ceiling of 3 wins");
    assert_eq!(r.exhausted_total(), 3);
}

#[test]
fn b5_malformed_retry_is_refused_before_any_request() {
    for bad in [json!(0), json!(17), json!(2.5), json!("3"), json!(null)] {
        let r = run(
            json!([reply(OK, "stop", 1)]),
            structured(json!({"retry": {"maxAttempts": bad}})),
        );
        assert_eq!(r.err().code, ErrorCode::ValidationError);
        assert_eq!(r.err().field(), Some("retry.maxAttempts"));
        assert!(r.mock_log.is_empty());
    }
    let r = run(
        json!([reply(OK, "stop", 1)]),
        structured(json!({"retry": {"growMaxTokens": "no"}})),
    );
    assert_eq!(r.err().field(), Some("retry.growMaxTokens"));
}

#[test]
fn retry_is_ignored_without_the_flag() {
    let off = config(|c| c.call_accounting.retry_policy = false);
    let r = run_with(
        off.clone(),
        json!([reply(OK, "stop", 1)]),
        structured(json!({"retry": {"maxAttempts": 2.5}})),
    );
    assert!(
        r.outcome.is_ok(),
        "a malformed retry is ignored: {:?}",
        r.outcome
    );
    let r = run_with(
        off,
        json!([reply(CUT, "length", 1), reply(OK, "stop", 1)]),
        structured(json!({"retry": {"maxAttempts": 1}})),
    );
    assert_eq!(
        r.ok().attempts.unwrap().count,
        2,
        "the cap is not honoured either"
    );
}

#[test]
fn a_rejected_request_is_not_retried() {
    let r = run(
        json!([{"error": {"status": 400, "message": "bad model"}}, reply(OK, "stop", 1)]),
        structured(json!({})),
    );
    assert_eq!(r.err().code, ErrorCode::ProviderRejected);
    assert_eq!(r.exhausted_total(), 1);
}

#[test]
fn a_script_that_runs_out_is_an_error_not_a_hang() {
    let r = run(json!([reply(CUT, "length", 1)]), structured(json!({})));
    assert_eq!(r.err().code, ErrorCode::ProviderUnavailable);
    assert!(r.err().message.contains("exhausted"), "{}", r.err().message);
    assert_eq!(r.exhausted_total(), 1, "only the served request counts");
    let r = run(json!([]), structured(json!({})));
    assert!(r.named("envelope.retry.exhausted").is_empty());
}

/// Issue 22 #13: a field the spec does not define (`response_schema`) is
/// named in an event with the field it looks like (`warn`, the default),
/// refused naming it (`refuse`), or passed over (`ignore`); it used to
/// vanish silently and turn a structured call into a text call.
#[test]
fn unknown_request_fields_are_named_refused_or_ignored() {
    use crate::config::UnknownFields;
    let request = json!({"messages": [{"role": "user", "content": "A scene."}],
                         "response_schema": {"type": "object"}});
    let r = run(json!([reply("prose", "stop", 3)]), request.clone());
    assert_eq!(r.ok().content.as_deref(), Some("prose"));
    let named = r.named("request.unknownFields");
    assert_eq!(
        named,
        [json!({"nodeId": "test.node",
                "fields": [{"name": "response_schema", "didYouMean": "responseSchema"}]})]
    );

    let mut refuse = HostConfig::default();
    refuse.policy.unknown_request_fields = UnknownFields::Refuse;
    let r = run_with(refuse, json!([reply("prose", "stop", 3)]), request.clone());
    assert_eq!(r.err().field(), Some("response_schema"));
    assert!(
        r.err().message.contains("responseSchema"),
        "{}",
        r.err().message
    );
    assert!(r.mock_log.is_empty(), "refused before any request");

    let mut ignore = HostConfig::default();
    ignore.policy.unknown_request_fields = UnknownFields::Ignore;
    let r = run_with(ignore, json!([reply("prose", "stop", 3)]), request);
    assert!(r.ok().content.is_some());
    assert!(r.named("request.unknownFields").is_empty());
}
