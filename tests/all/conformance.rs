//! The conformance scenario: it passes this host, skips what a host does not
//! advertise, and its judges reject every wrong host answer.

use callai_conformance::{
    self as conformance, HostTarget, LegOutcome, Observation, Target, Variant, judges,
};
use callai_engine::wire::StructuredOutput;
use callai_engine::{Host, HostConfig, MockLogEntry};
use callai_tests::pack;
use serde_json::{Value, json};

fn target(config: HostConfig) -> HostTarget {
    let host = Host::builder(config).build().unwrap();
    HostTarget::new(pack("echo-attempts"), host).unwrap()
}

#[test]
fn this_host_passes_every_leg_non_vacuously() {
    let report = conformance::run(&target(HostConfig::default()));
    assert!(!report.failed(), "{}", report.table());
    assert_eq!(report.legs().len(), 8);
    let (pass, fail, skip, blocked) = report.tally();
    assert_eq!((fail, skip, blocked), (0, 0, 0), "{}", report.table());
    assert!(pass >= 22, "{pass} findings");
}

#[test]
fn legs_are_skipped_not_passed_without_their_flags() {
    let mut config = HostConfig::default();
    config.call_accounting.attempts = false;
    config.call_accounting.retry_policy = false;
    let report = conformance::run(&target(config));
    assert!(
        report
            .legs()
            .iter()
            .all(|l| matches!(l.outcome, LegOutcome::Skip { .. })),
        "{}",
        report.table()
    );
    let mut config = HostConfig::default();
    config.call_accounting.retry_policy = false;
    let report = conformance::run(&target(config));
    let skipped: Vec<&str> = report
        .legs()
        .iter()
        .filter(|l| matches!(l.outcome, LegOutcome::Skip { .. }))
        .map(|l| l.leg)
        .collect();
    assert_eq!(skipped, ["cap", "no-growth", "clamp-and-refuse"]);
    assert!(!report.failed(), "{}", report.table());
}

#[test]
fn a_host_that_does_not_retry_is_blocked_not_judged() {
    let mut config = HostConfig::default();
    config.retry.max_retry_attempts = 1;
    let report = conformance::run(&target(config));
    let blocked: Vec<&str> = report
        .legs()
        .iter()
        .filter(|l| matches!(l.outcome, LegOutcome::Blocked { .. }))
        .map(|l| l.leg)
        .collect();
    assert!(
        blocked.contains(&"count-and-sum") && blocked.contains(&"fallback-counted"),
        "{}",
        report.table()
    );
    assert!(!report.failed(), "{}", report.table());
}

/// Issue 22 #12: fallback-counted passed on a host with `nlFallback = false`,
/// which never sends a fallback; its premise did not happen, so it is
/// blocked, and the rest of the scenario still passes.
#[test]
fn without_a_fallback_the_fallback_leg_is_blocked_not_passed() {
    let mut config = HostConfig::default();
    config.retry.nl_fallback = false;
    let report = conformance::run(&target(config));
    let leg = report
        .legs()
        .iter()
        .find(|l| l.leg == "fallback-counted")
        .expect("the leg ran");
    assert!(
        matches!(&leg.outcome, LegOutcome::Blocked { reason } if reason.contains("fallback")),
        "{}",
        report.table()
    );
    assert!(!report.failed(), "{}", report.table());
}

/// A host that answers like the reference host: it wraps this one and
/// rewrites what the pack and the event log see.
struct WrongHost {
    inner: HostTarget,
    lie: fn(&mut Observation),
}

impl Target for WrongHost {
    fn facet(&self) -> Value {
        self.inner.facet()
    }
    fn supports_replay(&self) -> bool {
        self.inner.supports_replay()
    }
    fn run(&self, variant: Variant, script: &Value, request: &Value) -> Option<Observation> {
        let mut o = self.inner.run(variant, script, request)?;
        (self.lie)(&mut o);
        Some(o)
    }
    fn record_and_replay(
        &self,
        script: &Value,
        request: &Value,
    ) -> Option<(Observation, Observation)> {
        let (recorded, mut replayed) = self.inner.record_and_replay(script, request)?;
        (self.lie)(&mut replayed);
        Some((recorded, replayed))
    }
}

fn failed_rules(lie: fn(&mut Observation)) -> Vec<String> {
    let report = conformance::run(&WrongHost {
        inner: target(HostConfig::default()),
        lie,
    });
    let mut rules: Vec<String> = report
        .legs()
        .iter()
        .flat_map(|l| match &l.outcome {
            LegOutcome::Judged { findings } => findings
                .iter()
                .filter(|f| !f.ok)
                .map(|f| f.rule.clone())
                .collect(),
            _ => vec![],
        })
        .collect();
    rules.dedup();
    rules
}

#[test]
fn the_reference_hosts_answers_are_caught_end_to_end() {
    // Its count leaves out the fallback request.
    let rules = failed_rules(|o| {
        if !o.events_named("envelope.nlToFormat.engaged").is_empty()
            && let Some(c) = o.output.pointer_mut("/attempts/count")
        {
            *c = json!(c.as_u64().unwrap() - 1);
        }
    });
    assert!(rules.iter().any(|r| r.starts_with("A.1")), "{rules:?}");
    // Its totalAttempts is the configured maximum, not the requests sent.
    let rules = failed_rules(|o| {
        for e in &mut o.events {
            if e["type"] == "envelope.retry.exhausted" {
                e["payload"]["totalAttempts"] = json!(3);
            }
        }
    });
    assert!(rules.iter().any(|r| r.starts_with("B.4")), "{rules:?}");
    // Its usage is the last attempt's only, nothing summed.
    let rules = failed_rules(|o| {
        let last = o.output.pointer("/usage/outputTokens").cloned();
        if let (Some(t), Some(last)) = (o.output.pointer_mut("/attempts/outputTokens"), last) {
            *t = last;
        }
    });
    assert!(
        rules.iter().any(|r| r.starts_with("A.2 outputTokens")),
        "{rules:?}"
    );
}

// Self-tests of each judge on hand-written observations: a right answer
// passes, each wrong answer is rejected.

fn entry(max_tokens: u32, mode: Option<StructuredOutput>) -> MockLogEntry {
    MockLogEntry {
        max_tokens,
        structured_output: mode,
        messages: 1,
    }
}

fn seed() -> Observation {
    Observation {
        script: json!([{"content": "{\"scene\": \"it", "finishReason": "length", "outputTokens": 5000},
                       {"content": "{\"scene\": \"ok\"}", "outputTokens": 1800}]),
        request: json!({"maxTokens": 2000}),
        output: json!({"data": {"scene": "ok"}, "usage": {"outputTokens": 1800},
                       "attempts": {"count": 2, "outputTokens": 3800, "usageComplete": true, "structuredOutput": "native"}}),
        events: vec![
            json!({"type": "provider.usage", "payload": {}}),
            json!({"type": "provider.usage", "payload": {}}),
        ],
        requests: vec![
            entry(2000, Some(StructuredOutput::Native)),
            entry(4000, Some(StructuredOutput::Native)),
        ],
        native: true,
    }
}

fn with(mut o: Observation, pointer: &str, v: Value) -> Observation {
    *o.output.pointer_mut(pointer).unwrap() = v;
    o
}

#[test]
fn judges_accept_the_right_answer() {
    let o = seed();
    for f in [
        judges::count(&o),
        judges::output_tokens_sum(&o),
        judges::usage_complete(&o),
        judges::usage_is_final_attempt(&o),
        judges::structured_output(&o, Some("native")),
        judges::replay_equal(
            &o,
            &Observation {
                requests: vec![],
                ..o.clone()
            },
        ),
    ] {
        assert!(f.ok, "{f:?}");
    }
}

#[test]
fn judges_reject_each_wrong_answer() {
    let o = seed();
    let wrong = [
        // A.1 a count that leaves out a request.
        judges::count(&with(o.clone(), "/attempts/count", json!(1))),
        // A.1 provider.usage that does not corroborate.
        judges::count(&Observation {
            events: vec![json!({"type": "provider.usage", "payload": {}})],
            ..o.clone()
        }),
        // A.1 no attempts at all where the flag says there must be.
        judges::count(&Observation {
            output: json!({"data": {}}),
            ..o.clone()
        }),
        // A.2 outputTokens of the last attempt only.
        judges::output_tokens_sum(&with(o.clone(), "/attempts/outputTokens", json!(1800))),
        // A.2 the unclamped sum.
        judges::output_tokens_sum(&with(o.clone(), "/attempts/outputTokens", json!(6800))),
        // A.2 usageComplete true over an attempt without usage.
        judges::usage_complete(&Observation {
            script: json!([{"content": "x", "finishReason": "length"}, {"content": "y", "outputTokens": 1800}]),
            ..o.clone()
        }),
        // A.3 the wrong structuredOutput.
        judges::structured_output(
            &with(o.clone(), "/attempts/structuredOutput", json!("prompt")),
            Some("native"),
        ),
        // A.3 structuredOutput present on a text call.
        judges::structured_output(&o, None),
        // A.4 usage summed instead of the final attempt's.
        judges::usage_is_final_attempt(&with(o.clone(), "/usage/outputTokens", json!(3800))),
        // A.5 a replay with a different count.
        judges::replay_equal(
            &o,
            &Observation {
                requests: vec![],
                ..with(o.clone(), "/attempts/count", json!(3))
            },
        ),
        // A.5 a replay that went to the provider.
        judges::replay_equal(&o, &o),
        // B.1 a cap not honoured.
        judges::cap(&o, 1),
        // B.2 budget grown despite growMaxTokens false.
        judges::no_growth(&o, 2000),
    ];
    for f in &wrong {
        assert!(!f.ok, "a wrong answer passed: {f:?}");
    }
}

#[test]
fn total_attempts_judge_rejects_the_configured_maximum() {
    let failed = |total: u64| Observation {
        script: json!([]),
        request: json!({}),
        output: json!({"error": {"code": "envelope_refusal", "message": "no"}}),
        events: vec![
            json!({"type": "envelope.retry.exhausted", "payload": {"totalAttempts": total}}),
        ],
        requests: vec![entry(100, None), entry(100, None)],
        native: true,
    };
    assert!(judges::total_attempts(&failed(2)).ok);
    assert!(
        !judges::total_attempts(&failed(3)).ok,
        "configured maximum instead of requests sent"
    );
    assert!(
        !judges::total_attempts(&Observation {
            events: vec![],
            ..failed(2)
        })
        .ok,
        "no exhausted event"
    );
}

#[test]
fn malformed_and_clamp_judges_reject_wrong_answers() {
    let refused = |output: Value, requests: Vec<MockLogEntry>| Observation {
        script: json!([]),
        request: json!({"retry": {"maxAttempts": 2.5}}),
        output,
        events: vec![],
        requests,
        native: true,
    };
    let right = refused(
        json!({"error": {"code": "validation_error", "message": "m", "details": {"field": "retry.maxAttempts"}}}),
        vec![],
    );
    assert!(judges::malformed_refused(&right, "retry.maxAttempts").ok);
    // Ignored: the call went through.
    assert!(
        !judges::malformed_refused(
            &refused(json!({"content": "hi"}), vec![entry(1, None)]),
            "retry.maxAttempts"
        )
        .ok
    );
    // Refused without details.field.
    assert!(
        !judges::malformed_refused(
            &refused(
                json!({"error": {"code": "validation_error", "message": "m"}}),
                vec![]
            ),
            "retry.maxAttempts"
        )
        .ok
    );
    // Refused with the wrong code.
    assert!(!judges::malformed_refused(&refused(json!({"error": {"code": "policy_denied", "message": "m", "details": {"field": "retry.maxAttempts"}}}), vec![]), "retry.maxAttempts").ok);
    // B.3: refusing a cap above the ceiling is wrong, so is exceeding the ceiling.
    assert!(!judges::clamped(&right, 3).ok);
    let four = refused(
        json!({"error": {"code": "provider_unavailable", "message": "m"}}),
        vec![entry(1, None); 4],
    );
    assert!(!judges::clamped(&four, 3).ok);
    assert!(judges::clamped(&four, 4).ok);
}
