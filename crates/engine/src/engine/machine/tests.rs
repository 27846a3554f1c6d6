//! The state machine alone: outcomes in, steps out. No provider, no clock,
//! no wasm.

use super::*;
use crate::engine::classify::classify;
use crate::engine::tests::structured;
use crate::provider::{FailureKind, StopReason};
use serde_json::json;

/// The engine tests' structured request, with `extra` fields, validated.
pub(super) fn request(extra: serde_json::Value) -> CallRequest {
    CallRequest::from_value(&structured(extra), callai_wire::RetryField::Honoured).unwrap()
}

pub(super) fn reply(content: &str, stop: StopReason, tokens: Option<u32>) -> ProviderReply {
    ProviderReply {
        content: content.into(),
        tool_calls: Vec::new(),
        stop,
        input_tokens: None,
        cached_input_tokens: None,
        cache_write_input_tokens: None,
        reasoning_tokens: None,
        output_tokens: tokens,
        model: None,
        status: None,
        thinking: Vec::new(),
    }
}

/// The one target of the machine tests: the mock, native (the model is
/// not what these tests look at).
const MOCK: &[Target<'static>] = &[Target {
    provider: "mock",
    model: String::new(),
    native: true,
}];

fn machine<'a>(config: &'a HostConfig, r: &'a CallRequest) -> CallMachine<'a> {
    chained(config, r, MOCK)
}

/// A machine whose call goes to `targets`, in order.
pub(super) fn chained<'a>(
    config: &'a HostConfig,
    r: &'a CallRequest,
    targets: &'a [Target<'a>],
) -> CallMachine<'a> {
    let schema = r
        .response_schema
        .as_ref()
        .map(|s| CompiledSchema::compile(s, 1_000_000).unwrap());
    CallMachine::new(CallSpec {
        config,
        node_id: "node",
        request: r,
        schema,
        tools: None,
        targets,
        events: Events::Made,
    })
}

pub(super) const CX: Context<'static> = Context {
    jitter: 0.5,
    remaining: &|| None,
};

/// Feeds `reply` to the machine, classified as the driver would.
pub(super) fn answer(m: &mut CallMachine<'_>, reply: ProviderReply) -> Step {
    let verdict = classify(&reply, m.schema(), None, 1 << 20);
    m.on_outcome(Outcome::Reply(reply, verdict), CX)
}

pub(super) fn sent(step: &Step) -> &Attempt {
    match step {
        Step::Send(a) => a,
        other => panic!("expected a request, got {other:?}"),
    }
}

pub(super) fn types(m: &mut CallMachine<'_>) -> Vec<&'static str> {
    m.drain_events().map(|e| e.type_name()).collect()
}

#[test]
fn the_seed_example_step_by_step() {
    let config = HostConfig::default();
    let r = request(json!({"maxTokens": 2000}));
    let mut m = machine(&config, &r);
    let first = m.start();
    assert_eq!(
        (sent(&first).reason, sent(&first).number),
        (RequestReason::First, 1)
    );
    assert_eq!(sent(&first).request.max_tokens, 2000);
    let second = answer(
        &mut m,
        reply(r#"{"scene": "cu"#, StopReason::Length, Some(2000)),
    );
    assert_eq!(sent(&second).reason, RequestReason::Truncation);
    assert_eq!(sent(&second).request.max_tokens, 4000, "budget doubled");
    // The retry is not announced until its request is known to be sent.
    assert_eq!(types(&mut m), ["provider.usage", "envelope.truncated"]);
    let done = answer(
        &mut m,
        reply(r#"{"scene": "ok"}"#, StopReason::Stop, Some(1800)),
    );
    let Step::Done(Ok(result)) = done else {
        panic!("{done:?}")
    };
    let a = result.attempts.unwrap();
    assert_eq!(
        (a.count, a.output_tokens, a.usage_complete),
        (2, Some(3800), true)
    );
    assert_eq!(
        types(&mut m),
        ["envelope.retry.attempted", "provider.usage"]
    );
}

#[test]
fn a_transient_failure_waits_with_jitter_then_resends() {
    let config = HostConfig::default();
    let r = request(json!({}));
    let mut m = machine(&config, &r);
    m.start();
    let f = ProviderFailure::from_status(503, "busy");
    let step = m.on_outcome(
        Outcome::Failed(f.clone()),
        Context {
            jitter: 0.5,
            remaining: &|| None,
        },
    );
    assert_eq!(
        step,
        Step::Wait(Duration::from_millis(250)),
        "half of the 500 ms base"
    );
    let again = m.resume();
    assert_eq!(sent(&again).reason, RequestReason::Transient);
    // The second failure in a row: the ceiling doubles.
    let step = m.on_outcome(
        Outcome::Failed(f),
        Context {
            jitter: 0.5,
            remaining: &|| None,
        },
    );
    assert_eq!(step, Step::Wait(Duration::from_millis(500)));
    let events: Vec<serde_json::Value> = m.drain_events().map(|e| e.to_json()).collect();
    let usage: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "provider.usage")
        .collect();
    assert_eq!(usage[0]["payload"]["reason"], "first");
    assert_eq!(usage[1]["payload"]["reason"], "x-host-callai-transient");
    let attempted = events
        .iter()
        .find(|e| e["type"] == "envelope.retry.attempted")
        .unwrap();
    assert_eq!(attempted["payload"]["reason"], "x-host-callai-transient");
    assert_eq!(attempted["payload"]["previousError"], "HTTP 503: busy");
}

#[test]
fn retry_after_is_honoured_and_a_longer_one_gives_up() {
    let config = HostConfig::default();
    let r = request(json!({}));
    let mut m = machine(&config, &r);
    m.start();
    let mut f = ProviderFailure::from_status(429, "slow down");
    f.retry_after = Some(Duration::from_secs(2));
    assert_eq!(
        m.on_outcome(Outcome::Failed(f.clone()), CX),
        Step::Wait(Duration::from_secs(2))
    );
    m.resume();
    f.retry_after = Some(Duration::from_secs(61));
    let Step::Done(Err(e)) = m.on_outcome(Outcome::Failed(f), CX) else {
        panic!("gives up")
    };
    assert_eq!(e.code, ErrorCode::ProviderUnavailable);
    assert!(e.message.contains("maxRetryAfterMs"), "{}", e.message);
    assert_eq!(e.total_attempts(), Some(2));
}

#[test]
fn a_wait_longer_than_the_run_has_left_gives_up_at_once() {
    let config = HostConfig::default();
    let r = request(json!({}));
    let mut m = machine(&config, &r);
    m.start();
    let mut f = ProviderFailure::from_status(503, "busy");
    f.retry_after = Some(Duration::from_secs(5));
    let cx = Context {
        jitter: 0.5,
        remaining: &|| Some(Duration::from_secs(1)),
    };
    let Step::Done(Err(e)) = m.on_outcome(Outcome::Failed(f), cx) else {
        panic!("gives up")
    };
    assert_eq!(e.code, ErrorCode::ProviderUnavailable);
    assert!(e.message.contains("wall-clock limit"), "{}", e.message);
    assert!(
        !types(&mut m).contains(&"envelope.retry.attempted"),
        "no retry announced for a request never sent"
    );
}

#[test]
fn a_connection_that_fails_is_no_attempt_and_the_same_request_goes_again() {
    let config = HostConfig::default();
    let r = request(json!({}));
    let mut m = machine(&config, &r);
    m.start();
    let truncated = answer(
        &mut m,
        reply(r#"{"scene": "cu"#, StopReason::Length, Some(1)),
    );
    let doubled = sent(&truncated).clone();
    types(&mut m);
    let refused = || ProviderFailure::new(FailureKind::Unreached, None, "could not connect");
    // Backoff, then the very request that could not be sent: same number,
    // same reason, same budget, its announcement still pending.
    let Step::Wait(_) = m.on_outcome(Outcome::Failed(refused()), CX) else {
        panic!("waits")
    };
    assert!(
        types(&mut m).is_empty(),
        "nothing happened that an event says"
    );
    assert_eq!(sent(&m.resume()), &doubled);
    let done = answer(
        &mut m,
        reply(r#"{"scene": "ok"}"#, StopReason::Stop, Some(2)),
    );
    let Step::Done(Ok(result)) = done else {
        panic!("ends well")
    };
    assert_eq!(result.attempts.as_ref().unwrap().count, 2);
    // At the cap of tries, the call gives up with the attempts it made.
    let mut m = machine(&config, &r);
    m.start();
    let mut step = m.on_outcome(Outcome::Failed(refused()), CX);
    for _ in 0..5 {
        match step {
            Step::Wait(_) => step = m.on_outcome(Outcome::Failed(refused()), CX),
            _ => break,
        }
    }
    let Step::Done(Err(e)) = step else {
        panic!("gives up, got {step:?}")
    };
    assert_eq!(e.code, ErrorCode::ProviderUnavailable);
    assert_eq!(e.total_attempts(), None, "{e:?}");
    assert!(types(&mut m).is_empty());
}

#[test]
fn a_request_that_is_never_sent_is_never_announced() {
    let config = HostConfig::default();
    let r = request(json!({}));
    let mut m = machine(&config, &r);
    m.start();
    answer(
        &mut m,
        reply(r#"{"scene": "cu"#, StopReason::Length, Some(1)),
    );
    let gone = ProviderFailure::new(FailureKind::Unanswerable, None, "script exhausted");
    let Step::Done(Err(e)) = m.on_outcome(Outcome::Failed(gone), CX) else {
        panic!("ends")
    };
    assert_eq!(e.total_attempts(), Some(1));
    assert_eq!(
        types(&mut m),
        [
            "provider.usage",
            "envelope.truncated",
            "envelope.retry.exhausted"
        ]
    );
}

#[test]
fn every_request_says_why_it_was_sent() {
    let config = HostConfig::default();
    let r = request(json!({"retry": {"maxAttempts": 3}}));
    let mut m = machine(&config, &r);
    let mut reasons = vec![sent(&m.start()).reason];
    reasons.push(
        sent(&answer(
            &mut m,
            reply(r#"{"title": 1}"#, StopReason::Stop, Some(1)),
        ))
        .reason,
    );
    // The last request of the cap, after prose: the fallback.
    reasons.push(sent(&answer(&mut m, reply("prose", StopReason::Stop, Some(1)))).reason);
    assert_eq!(
        reasons,
        [
            RequestReason::First,
            RequestReason::SchemaViolation,
            RequestReason::Fallback
        ]
    );
    answer(
        &mut m,
        reply(r#"{"scene": "ok"}"#, StopReason::Stop, Some(1)),
    );
    let engaged = m.drain_events().map(|e| e.type_name()).collect::<Vec<_>>();
    assert_eq!(
        engaged,
        [
            "provider.usage",
            "envelope.retry.attempted",
            "provider.usage",
            "envelope.retry.attempted",
            "envelope.nlToFormat.engaged",
            "provider.usage"
        ]
    );

    // A native mode the provider rejects: the next request is in prompt mode.
    let r = request(json!({}));
    let mut m = machine(&config, &r);
    assert_eq!(
        sent(&m.start()).request.structured.as_ref().unwrap().mode,
        StructuredOutput::Native
    );
    let refused = ProviderFailure::new(FailureKind::NativeUnsupported, Some(400), "no json_schema");
    let next = m.on_outcome(Outcome::Failed(refused), CX);
    assert_eq!(sent(&next).reason, RequestReason::NativeRejected);
    assert_eq!(
        sent(&next).request.structured.as_ref().unwrap().mode,
        StructuredOutput::Prompt
    );
}
