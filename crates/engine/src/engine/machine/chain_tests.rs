//! A route's chain in the machine alone: which target each request goes
//! to, why, and what counts as an attempt.

use super::tests::{CX, answer, chained, reply, request, sent, types};
use super::*;
use crate::provider::StopReason;
use serde_json::json;

/// A chain of `a` (native) then `b` (schema in the prompt).
fn chain() -> [Target<'static>; 2] {
    [
        Target {
            provider: "a",
            model: "a-1".into(),
            native: true,
        },
        Target {
            provider: "b",
            model: "b-1".into(),
            native: false,
        },
    ]
}

fn failed(m: &mut CallMachine<'_>, f: ProviderFailure) -> Step {
    m.on_outcome(Outcome::Failed(f), CX)
}

#[test]
fn an_unavailable_target_hands_the_call_to_the_next_at_once() {
    let config = HostConfig::default();
    let r = request(json!({}));
    let targets = chain();
    let mut m = chained(&config, &r, &targets);
    let first = m.start();
    let a = sent(&first);
    assert_eq!((a.target, a.request.model.as_deref()), (0, Some("a-1")));
    assert_eq!(
        a.request.structured.as_ref().map(|s| s.mode),
        Some(StructuredOutput::Native)
    );
    // A 503: no backoff, the next target, counted as a second attempt.
    let next = failed(&mut m, ProviderFailure::from_status(503, "down"));
    let b = sent(&next);
    assert_eq!(
        (b.target, b.number, b.reason),
        (1, 2, RequestReason::ProviderFallback)
    );
    assert_eq!(b.request.model.as_deref(), Some("b-1"));
    assert_eq!(
        b.request.structured.as_ref().map(|s| s.mode),
        Some(StructuredOutput::Prompt),
        "b takes the schema in the prompt"
    );
    let done = answer(
        &mut m,
        reply(r#"{"scene": "ok"}"#, StopReason::Stop, Some(5)),
    );
    let Step::Done(Ok(result)) = done else {
        panic!("{done:?}")
    };
    let attempts = result.attempts.unwrap();
    assert_eq!((attempts.count, attempts.output_tokens), (2, Some(5)));
    assert_eq!(attempts.structured_output, Some(StructuredOutput::Prompt));
    let events: Vec<serde_json::Value> = m.drain_events().map(|e| e.to_json()).collect();
    let usage: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"] == "provider.usage")
        .map(|e| {
            let p = &e["payload"];
            (
                p["provider"].as_str().unwrap(),
                p["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        usage,
        [("a", "first"), ("b", "x-host-callai-provider-fallback")]
    );
}

#[test]
fn a_refused_connection_moves_on_without_an_attempt() {
    let config = HostConfig::default();
    let r = request(json!({}));
    let targets = chain();
    let mut m = chained(&config, &r, &targets);
    m.start();
    let refused = ProviderFailure::new(FailureKind::Unreached, None, "connection refused");
    let next = failed(&mut m, refused);
    let b = sent(&next);
    assert_eq!(
        (b.target, b.number),
        (1, 1),
        "a refused connection is no attempt"
    );
    assert!(types(&mut m).is_empty());
    let done = answer(
        &mut m,
        reply(r#"{"scene": "ok"}"#, StopReason::Stop, Some(3)),
    );
    let Step::Done(Ok(result)) = done else {
        panic!("{done:?}")
    };
    assert_eq!(result.attempts.unwrap().count, 1);
}

#[test]
fn a_chain_that_is_down_starts_again_after_a_backoff_within_the_ceiling() {
    let config = HostConfig::default();
    let r = request(json!({}));
    let targets = chain();
    let mut m = chained(&config, &r, &targets);
    m.start();
    let down = || ProviderFailure::from_status(503, "down");
    assert_eq!(sent(&failed(&mut m, down())).target, 1);
    // The chain's end: back to its first target, after the backoff.
    let Step::Wait(_) = failed(&mut m, down()) else {
        panic!("waits")
    };
    let again = m.resume();
    assert_eq!(
        (
            sent(&again).target,
            sent(&again).number,
            sent(&again).reason
        ),
        (0, 3, RequestReason::Transient)
    );
    // The ceiling (3) is the call's, whichever target: no fourth request.
    let Step::Done(Err(e)) = failed(&mut m, down()) else {
        panic!("gives up")
    };
    assert_eq!(e.code, ErrorCode::ProviderUnavailable);
    assert_eq!(e.total_attempts(), Some(3));
}

#[test]
fn a_reply_keeps_the_call_on_its_target() {
    let config = HostConfig::default();
    let r = request(json!({"maxTokens": 100}));
    let targets = chain();
    let mut m = chained(&config, &r, &targets);
    m.start();
    let next = answer(
        &mut m,
        reply(r#"{"scene": "cu"#, StopReason::Length, Some(100)),
    );
    let retry = sent(&next);
    assert_eq!((retry.target, retry.reason), (0, RequestReason::Truncation));
    // A rejected request (400) is not unavailability: the call ends.
    let rejected = ProviderFailure::from_status(400, "bad request");
    let Step::Done(Err(e)) = failed(&mut m, rejected) else {
        panic!("ends")
    };
    assert_eq!(e.code, ErrorCode::ProviderRejected);
}

/// Issue 51, item 13: a target that cannot be reached, met again after a
/// transient failure of the next, hands the call on under one reason in
/// every record: the retry announced for the request that never left is
/// announced again as the fall-over it became.
#[test]
fn a_retry_whose_target_is_unreached_is_announced_as_the_fall_over_it_became() {
    let config = HostConfig::default();
    let r = request(json!({}));
    let targets = chain();
    let mut m = chained(&config, &r, &targets);
    let _to_a = m.start();
    let refused = || ProviderFailure::new(FailureKind::Unreached, None, "refused");
    let step = failed(&mut m, refused());
    let b = sent(&step);
    assert_eq!(
        (b.target, b.number, b.reason),
        (1, 1, RequestReason::ProviderFallback)
    );
    // b answers 503: the round starts again at a, after a backoff.
    let step = failed(&mut m, ProviderFailure::from_status(503, "down"));
    let step = match step {
        Step::Wait(_) => m.resume(),
        other => other,
    };
    let a = sent(&step);
    assert_eq!((a.target, a.reason), (0, RequestReason::Transient));
    // a is still refused: the request goes to b, and says so everywhere.
    let step = failed(&mut m, refused());
    let b = sent(&step);
    assert_eq!(
        (b.target, b.number, b.reason),
        (1, 2, RequestReason::ProviderFallback)
    );
    let done = answer(
        &mut m,
        reply(r#"{"scene": "ok"}"#, StopReason::Stop, Some(1)),
    );
    assert!(matches!(done, Step::Done(Ok(_))), "{done:?}");
    let events: Vec<serde_json::Value> = m.drain_events().map(|e| e.to_json()).collect();
    let said: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"] == "envelope.retry.attempted" || e["type"] == "provider.usage")
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["payload"]["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        said,
        [
            ("provider.usage", "x-host-callai-provider-fallback"),
            (
                "envelope.retry.attempted",
                "x-host-callai-provider-fallback"
            ),
            ("provider.usage", "x-host-callai-provider-fallback"),
        ]
    );
}

/// A quota's refusal of `needed` requests of `provider`, with `left`.
fn over_quota(provider: &str) -> ProviderFailure {
    let refusal = crate::budget::Refusal {
        key: "requests",
        left: 0,
        needed: 1,
        room: crate::budget::Limits::default(),
        resets_at_ms: Some(60_000),
        limit: 10,
        per: crate::budget::Window::Minute,
    };
    ProviderFailure::throttled(crate::budget::quota_exceeded(provider, &refusal))
}

#[test]
fn a_request_its_quota_holds_back_goes_to_the_next_target_and_is_no_attempt() {
    let config = HostConfig::default();
    let r = request(json!({}));
    let targets = chain();
    let mut m = chained(&config, &r, &targets);
    assert!(m.has_next_target());
    let first = m.start();
    assert_eq!(sent(&first).target, 0);
    let next = failed(&mut m, over_quota("a"));
    let b = sent(&next);
    assert_eq!((b.target, b.number), (1, 1), "the first attempt, to b");
    assert!(!m.has_next_target());
    let done = answer(
        &mut m,
        reply(r#"{"scene": "ok"}"#, StopReason::Stop, Some(5)),
    );
    let Step::Done(Ok(result)) = done else {
        panic!("{done:?}")
    };
    assert_eq!(result.attempts.unwrap().count, 1);
}

#[test]
fn at_the_chains_end_a_held_back_request_ends_the_call_naming_the_quota() {
    let config = HostConfig::default();
    let r = request(json!({}));
    let targets = chain();
    let mut m = chained(&config, &r, &targets);
    m.start();
    // a is down: b takes the call, and its quota has no room.
    let next = failed(&mut m, ProviderFailure::from_status(503, "down"));
    assert_eq!(sent(&next).target, 1);
    let done = failed(&mut m, over_quota("b"));
    let Step::Done(Err(e)) = done else {
        panic!("{done:?}")
    };
    assert_eq!(e.code, ErrorCode::ProviderUnavailable);
    let d = e.details.unwrap();
    assert_eq!(d["reason"], "provider_quota");
    assert_eq!(d["provider"], "b");
    assert_eq!(
        (&d["quota"], &d["limit"], &d["per"]),
        (&json!("requests"), &json!(10), &json!("1m"))
    );
    assert_eq!(d["resetsAt"], "1970-01-01T00:01:00Z");
    assert_eq!(d["totalAttempts"], 1, "a's 503 was an attempt; b's was not");
    assert!(
        e.message
            .contains("[providers.b.limits] requests = 10 per 1m"),
        "{}",
        e.message
    );
}
