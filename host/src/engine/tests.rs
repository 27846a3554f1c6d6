//! The engine against RFC 0248 §A and §B, row by row, with a scripted mock.

use super::Engine;
use crate::config::HostConfig;
use crate::error::{CallError, ErrorCode};
use crate::events::{Event, EventLog};
use crate::mock::{MockLogEntry, MockProvider, MockScript};
use crate::provider::Providers;
use crate::result::{CallResult, StructuredMode};
use serde_json::{Value, json};
use std::sync::Arc;

pub(crate) struct Run {
    pub outcome: Result<CallResult, CallError>,
    pub events: Vec<Event>,
    pub mock_log: Vec<MockLogEntry>,
}

impl Run {
    fn ok(&self) -> &CallResult {
        self.outcome.as_ref().expect("the call should succeed")
    }

    fn err(&self) -> &CallError {
        self.outcome.as_ref().expect_err("the call should fail")
    }

    fn named(&self, name: &str) -> Vec<Value> {
        self.events
            .iter()
            .filter(|e| e.type_name() == name)
            .map(|e| e.to_json()["payload"].clone())
            .collect()
    }

    fn exhausted_total(&self) -> u32 {
        let ex = self.named("envelope.retry.exhausted");
        assert_eq!(ex.len(), 1, "one exhausted event: {:?}", self.events);
        ex[0]["totalAttempts"].as_u64().unwrap() as u32
    }
}

pub(crate) fn run_with(config: HostConfig, script: Value, request: Value) -> Run {
    let script = MockScript::from_json(&script.to_string()).unwrap();
    let mock = Arc::new(MockProvider::new(script, config.mock.native));
    let engine = Engine::new(Arc::new(config), Providers::new().with(mock.clone()));
    let events = EventLog::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = rt.block_on(engine.call_json("test.node", &request.to_string(), &events));
    Run {
        outcome,
        events: events.take(),
        mock_log: mock.log(),
    }
}

fn run(script: Value, request: Value) -> Run {
    run_with(HostConfig::default(), script, request)
}

fn structured(extra: Value) -> Value {
    let mut r = json!({
        "messages": [{"role": "user", "content": "Write a scene."}],
        "responseSchema": {"type": "object", "required": ["scene"],
                            "properties": {"scene": {"type": "string"}}}
    });
    r.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    r
}

fn reply(content: &str, finish: &str, tokens: u32) -> Value {
    json!({"content": content, "finishReason": finish, "outputTokens": tokens})
}

const OK: &str = r#"{"scene": "ok"}"#;
const CUT: &str = r#"{"scene": "it was a dark"#;
const PROSE: &str = "Once upon a time, in prose.";
const WRONG: &str = r#"{"title": "no scene"}"#;

fn config(edit: impl FnOnce(&mut HostConfig)) -> HostConfig {
    let mut c = HostConfig::default();
    edit(&mut c);
    c
}

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
    let c = config(|c| c.policy.allowed_providers = Some(vec!["mock".into()]));
    let mut c2 = c.clone();
    c2.providers.openai = Some(Default::default());
    let r = run_with(
        c2,
        json!([reply(OK, "stop", 1)]),
        structured(json!({"provider": "openai"})),
    );
    assert_eq!(r.err().code, ErrorCode::PolicyDenied);
    assert!(r.mock_log.is_empty());
    assert!(r.events.is_empty(), "no request, no event: {:?}", r.events);
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
    assert_eq!(r.named("envelope.retry.attempted")[0]["reason"], "unknown");
}

#[test]
fn a3_structured_output_native_prompt_and_absent() {
    let r = run(json!([reply(OK, "stop", 1)]), structured(json!({})));
    assert_eq!(
        r.ok().attempts.unwrap().structured_output,
        Some(StructuredMode::Native)
    );
    assert_eq!(
        r.mock_log[0].structured_output,
        Some(StructuredMode::Native)
    );

    let prompt = config(|c| c.mock.native = false);
    let r = run_with(prompt, json!([reply(OK, "stop", 1)]), structured(json!({})));
    assert_eq!(
        r.ok().attempts.unwrap().structured_output,
        Some(StructuredMode::Prompt)
    );
    assert_eq!(
        r.mock_log[0].structured_output,
        Some(StructuredMode::Prompt)
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
