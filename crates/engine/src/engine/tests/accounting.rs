//! RFC 0248 §A through the engine: count, summed tokens, usageComplete,
//! structuredOutput, usage, and the events that corroborate them.

use super::*;
use callai_wire::ErrorCode;
use callai_wire::StructuredOutput;
use serde_json::json;

#[test]
fn the_seed_example_truncation_then_success() {
    let r = run(
        json!([reply(CUT, "length", 5000), reply(OK, "stop", 1800)]),
        structured(json!({"maxTokens": 2000})),
    );
    let result = r.ok();
    assert_eq!(
        serde_json::to_value(result.attempts).unwrap(),
        json!({"count": 2, "outputTokens": 3800, "usageComplete": true, "structuredOutput": "native"})
    );
    assert_eq!(
        result.usage.unwrap().output_tokens,
        Some(1800),
        "§A.4 usage is the final attempt's"
    );
    assert_eq!(result.data, Some(json!({"scene": "ok"})));
    assert_eq!(
        r.mock_log.iter().map(|l| l.max_tokens).collect::<Vec<_>>(),
        [2000, 4000]
    );
    assert_eq!(r.named("envelope.truncated").len(), 1);
    assert_eq!(r.named("provider.usage").len(), 2);
    let attempted = r.named("envelope.retry.attempted");
    assert_eq!(attempted.len(), 1);
    assert_eq!(attempted[0]["attempt"], 2);
    assert_eq!(attempted[0]["reason"], "truncation");
    // A truncation retry carries no corrective text.
    assert_eq!(r.mock_log[1].messages, 1);
}

#[test]
fn a1_count_includes_schema_retries_and_the_fallback() {
    let r = run(
        json!([
            reply(PROSE, "stop", 10),
            reply(PROSE, "stop", 11),
            reply(OK, "stop", 12)
        ]),
        structured(json!({})),
    );
    let a = r.ok().attempts.unwrap();
    assert_eq!(a.count, 3);
    assert_eq!(a.count as usize, r.mock_log.len());
    assert_eq!(a.output_tokens, Some(33));
    let engaged = r.named("envelope.nlToFormat.engaged");
    assert_eq!(engaged.len(), 1, "the third request is the fallback");
    assert_eq!(engaged[0]["fallbackCalls"], 1);
    // The corrective retry appended one instruction; the fallback is a fresh
    // one-message conversation.
    assert_eq!(
        r.mock_log.iter().map(|l| l.messages).collect::<Vec<_>>(),
        [1, 2, 1]
    );
}

#[test]
fn a1_a_failed_call_counts_the_fallback_in_total_attempts() {
    let r = run(
        json!([
            reply(PROSE, "stop", 1),
            reply(PROSE, "stop", 1),
            reply(PROSE, "stop", 1)
        ]),
        structured(json!({})),
    );
    assert_eq!(r.err().code, ErrorCode::EnvelopeInvalid);
    assert_eq!(r.exhausted_total(), 3, "the fallback request counts");
    assert_eq!(r.mock_log.len(), 3);
    let details = r.err().details.as_ref().unwrap();
    assert_eq!(details["totalAttempts"], 3);
    assert_eq!(details["outputTokens"], 3);
    assert_eq!(details["usageComplete"], true);
}

#[test]
fn a1_a_policy_denial_is_no_attempt() {
    // An embedder's provider under its own name, left out by the policy.
    let c = config(|c| c.policy.allowed_providers = Some(vec!["mock".into()]));
    let other = Arc::new(MockProvider::new(
        MockScript::replies([("never sent", 1)]),
        StructuredOutput::Native,
    ));
    let host = Host::builder(c)
        .provider("other", other.clone())
        .build()
        .unwrap();
    let events = EventLog::new();
    let request = callai_wire::CallRequest::from_value(
        &structured(json!({"provider": "other"})),
        callai_wire::RetryField::Honoured,
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = rt.block_on(host.call("n", &request, &events)).unwrap_err();
    assert_eq!(err.code, ErrorCode::PolicyDenied);
    assert!(other.log().is_empty());
    assert!(
        events.is_empty(),
        "no request, no event: {:?}",
        events.snapshot()
    );
    assert_eq!(host.allowed_providers(), ["mock"]);
}

#[test]
fn a2_missing_usage_makes_usage_incomplete() {
    let r = run(
        json!([{"content": CUT, "finishReason": "length"}, reply(OK, "stop", 50)]),
        structured(json!({})),
    );
    let a = r.ok().attempts.unwrap();
    assert_eq!(
        (a.count, a.output_tokens, a.usage_complete),
        (2, Some(50), false)
    );
    let r = run(
        json!([{"content": "hi"}]),
        json!({"messages": [{"role": "user", "content": "x"}]}),
    );
    let a = r.ok().attempts.unwrap();
    assert_eq!(
        (a.count, a.output_tokens, a.usage_complete),
        (1, None, false)
    );
    assert_eq!(r.ok().usage, None, "no usage reported, none invented");
}

#[test]
fn a2_a_transport_failure_counts_and_reports_no_usage() {
    let r = run(
        json!([{"error": {"status": 503, "message": "overloaded"}}, reply(OK, "stop", 9)]),
        structured(json!({})),
    );
    let a = r.ok().attempts.unwrap();
    assert_eq!(
        (a.count, a.output_tokens, a.usage_complete),
        (2, Some(9), false)
    );
    assert_eq!(
        r.named("envelope.retry.attempted")[0]["reason"],
        "x-host-callai-transient"
    );
    let reasons: Vec<Value> = r
        .named("provider.usage")
        .iter()
        .map(|u| u["reason"].clone())
        .collect();
    assert_eq!(reasons, [json!("first"), json!("x-host-callai-transient")]);
}

#[test]
fn a3_structured_output_native_prompt_and_absent() {
    let r = run(json!([reply(OK, "stop", 1)]), structured(json!({})));
    assert_eq!(
        r.ok().attempts.unwrap().structured_output,
        Some(StructuredOutput::Native)
    );
    assert_eq!(
        r.mock_log[0].structured_output,
        Some(StructuredOutput::Native)
    );

    let prompt = config(|c| c.mock.native = false);
    let r = run_with(prompt, json!([reply(OK, "stop", 1)]), structured(json!({})));
    assert_eq!(
        r.ok().attempts.unwrap().structured_output,
        Some(StructuredOutput::Prompt)
    );
    assert_eq!(
        r.mock_log[0].structured_output,
        Some(StructuredOutput::Prompt)
    );

    let r = run(
        json!([{"content": "hi", "outputTokens": 2}]),
        json!({"messages": [{"role": "user", "content": "x"}]}),
    );
    let a = r.ok().attempts.unwrap();
    assert_eq!(
        a.structured_output, None,
        "a text call has no structuredOutput"
    );
    assert!(
        !serde_json::to_value(a)
            .unwrap()
            .as_object()
            .unwrap()
            .contains_key("structuredOutput")
    );
}

#[test]
fn a_attempts_absent_without_the_flag() {
    let off = config(|c| c.call_accounting.attempts = false);
    let r = run_with(
        off,
        json!([reply(CUT, "length", 1), reply(OK, "stop", 1)]),
        structured(json!({})),
    );
    assert_eq!(r.ok().attempts, None);
    assert_eq!(r.mock_log.len(), 2, "the host still retries");
}

#[test]
fn recovery_is_not_a_retry() {
    let fenced = format!("Here:\n```json\n{OK}\n```");
    let r = run(json!([reply(&fenced, "stop", 4)]), structured(json!({})));
    assert_eq!(r.ok().attempts.unwrap().count, 1);
    assert_eq!(
        r.named("envelope.recovery.applied")[0]["path"],
        "markdown-fence"
    );
    assert!(r.named("envelope.retry.attempted").is_empty());
}

#[test]
fn schema_violation_retries_with_budget_unchanged() {
    let r = run(
        json!([reply(WRONG, "stop", 5), reply(OK, "stop", 6)]),
        structured(json!({"maxTokens": 300})),
    );
    assert_eq!(r.ok().attempts.unwrap().count, 2);
    assert_eq!(
        r.mock_log.iter().map(|l| l.max_tokens).collect::<Vec<_>>(),
        [300, 300]
    );
    let attempted = r.named("envelope.retry.attempted");
    assert_eq!(attempted[0]["reason"], "schema-violation");
    assert!(
        attempted[0]["previousError"]
            .as_str()
            .unwrap()
            .contains("scene")
    );
    assert!(
        r.named("envelope.nlToFormat.engaged").is_empty(),
        "JSON replies get no fallback"
    );
}

#[test]
fn provider_usage_once_per_request_and_attempted_before_each_retry() {
    let r = run(
        json!([
            reply(CUT, "length", 1),
            reply(WRONG, "stop", 2),
            reply(OK, "stop", 3)
        ]),
        structured(json!({})),
    );
    let kinds: Vec<&str> = r.events.iter().map(|e| e.type_name()).collect();
    assert_eq!(
        kinds,
        [
            "provider.usage",
            "envelope.truncated",
            "envelope.retry.attempted",
            "provider.usage",
            "envelope.retry.attempted",
            "provider.usage",
        ]
    );
    let attempts: Vec<u64> = r
        .named("envelope.retry.attempted")
        .iter()
        .map(|p| p["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [2, 3]);
}

#[test]
fn unknown_provider_is_a_validation_error() {
    let r = run(
        json!([reply(OK, "stop", 1)]),
        structured(json!({"provider": "nope"})),
    );
    assert_eq!(r.err().field(), Some("provider"));
}

/// Issue 22 #10: a transient failure re-sends the request that failed. With
/// [schema violation, 503, ok], the third request is the corrective one the
/// 503 swallowed, not the caller's first prompt again.
#[test]
fn a_transient_failure_resends_the_corrective_request() {
    let r = run(
        json!([
            reply(r#"{"scene": 42}"#, "stop", 10),
            {"error": {"status": 503, "message": "overloaded"}},
            reply(OK, "stop", 12)
        ]),
        structured(json!({})),
    );
    assert_eq!(r.ok().attempts.unwrap().count, 3);
    let messages: Vec<usize> = r.mock_log.iter().map(|l| l.messages).collect();
    assert!(
        messages[1] > messages[0],
        "the second request corrects: {messages:?}"
    );
    assert_eq!(
        messages[2], messages[1],
        "the third re-sends it: {messages:?}"
    );
}
