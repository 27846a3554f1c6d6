//! The drivers: eight legs, each writing its scripts and requests, running
//! the fixture node through the target, and handing what it saw to judges.

use super::judges;
use super::{Finding, LegOutcome, Observation, Target, Variant};
use serde_json::{Value, json};

/// One leg of the scenario.
#[derive(Debug)]
pub struct Leg {
    /// Its name in the report.
    pub name: &'static str,
    /// Drives and judges it.
    pub run: fn(&dyn Target) -> LegOutcome,
}

/// The eight legs, in order.
pub fn all() -> &'static [Leg] {
    &[
        Leg {
            name: "count-and-sum",
            run: count_and_sum,
        },
        Leg {
            name: "fallback-counted",
            run: fallback_counted,
        },
        Leg {
            name: "usage-incomplete",
            run: usage_incomplete,
        },
        Leg {
            name: "structured-mode",
            run: structured_mode,
        },
        Leg {
            name: "replay",
            run: replay,
        },
        Leg {
            name: "cap",
            run: cap,
        },
        Leg {
            name: "no-growth",
            run: no_growth,
        },
        Leg {
            name: "clamp-and-refuse",
            run: clamp_and_refuse,
        },
    ]
}

const SCENE_OK: &str = r#"{"scene": "the harbour at dawn"}"#;
const SCENE_CUT: &str = r#"{"scene": "the harbour at"#;
const SCENE_WRONG: &str = r#"{"title": "no scene here"}"#;
const PROSE: &str = "The harbour at dawn was quiet, and the boats rocked gently.";

fn reply(content: &str, finish: &str, tokens: Option<u32>) -> Value {
    let mut r = json!({"content": content, "finishReason": finish});
    if let Some(t) = tokens {
        r["outputTokens"] = t.into();
    }
    r
}

/// A structured request; `extra` adds or replaces fields.
fn scene_request(extra: Value) -> Value {
    let mut r = json!({
        "messages": [{"role": "user", "content": "Write one short scene as JSON."}],
        "responseSchema": {"type": "object", "required": ["scene"],
                           "properties": {"scene": {"type": "string"}}}
    });
    if let (Some(r), Some(extra)) = (r.as_object_mut(), extra.as_object()) {
        r.extend(extra.clone());
    }
    r
}

fn flag(target: &dyn Target, name: &str) -> bool {
    target.facet()["aiProviders"]["callAccounting"][name] == true
}

fn gate(target: &dyn Target, name: &str) -> Option<LegOutcome> {
    (!flag(target, name)).then(|| LegOutcome::Skip {
        reason: format!("the host does not advertise callAccounting.{name}"),
    })
}

fn judged(findings: Vec<Finding>) -> LegOutcome {
    LegOutcome::Judged { findings }
}

fn blocked(reason: impl Into<String>) -> LegOutcome {
    LegOutcome::Blocked {
        reason: reason.into(),
    }
}

/// Runs a request; `None` (the host cannot run this variant) blocks the leg.
fn observe(
    target: &dyn Target,
    variant: Variant,
    script: &Value,
    request: &Value,
) -> Result<Observation, LegOutcome> {
    target
        .run(variant, script, request)
        .ok_or_else(|| blocked(format!("the host cannot run the {variant:?} variant")))
}

/// The premise of a retry leg: the host sent more than one request.
fn retried(o: &Observation, what: &str) -> Result<(), LegOutcome> {
    match o.requests.len() {
        0 | 1 => Err(blocked(format!(
            "the host made {} request(s) where a host that retries {what} makes more",
            o.requests.len()
        ))),
        _ => Ok(()),
    }
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(outcome) => return outcome,
        }
    };
}

/// §A.1, §A.2 (sum), §A.3 (native), §A.4: the RFC's own example.
fn count_and_sum(target: &dyn Target) -> LegOutcome {
    if let Some(skip) = gate(target, "attempts") {
        return skip;
    }
    let script = json!([
        reply(SCENE_CUT, "length", Some(5000)),
        reply(SCENE_OK, "stop", Some(1800))
    ]);
    let o = tri!(observe(
        target,
        Variant::Default,
        &script,
        &scene_request(json!({"maxTokens": 2000}))
    ));
    tri!(retried(&o, "a truncation"));
    judged(vec![
        judges::count(&o),
        judges::output_tokens_sum(&o),
        judges::usage_complete(&o),
        judges::usage_is_final_attempt(&o),
        judges::structured_output(&o, Some(o.offered_mode())),
    ])
}

/// §A.1: the natural-language fallback is a request and counts; on failure,
/// `totalAttempts` is the requests sent, not the configured maximum.
fn fallback_counted(target: &dyn Target) -> LegOutcome {
    if let Some(skip) = gate(target, "attempts") {
        return skip;
    }
    let script = json!([
        reply(PROSE, "stop", Some(40)),
        reply(PROSE, "stop", Some(41)),
        reply(SCENE_OK, "stop", Some(12)),
        reply(SCENE_OK, "stop", Some(12))
    ]);
    let o = tri!(observe(
        target,
        Variant::Default,
        &script,
        &scene_request(json!({}))
    ));
    tri!(retried(&o, "schema violations"));
    if o.error().is_some() {
        return blocked(format!(
            "the call failed where the script ends in valid JSON: {}",
            o.output
        ));
    }
    // The leg's premise is a fallback sent: without one (a host with
    // nlFallback off) the count proves nothing about fallbacks.
    if o.events_named("envelope.nlToFormat.engaged").is_empty() {
        return blocked(
            "the host sent no natural-language fallback (envelope.nlToFormat.engaged), \
             so there is none to count",
        );
    }
    let failing = json!([
        reply(SCENE_WRONG, "stop", Some(8)),
        reply("I won't.", "refusal", Some(2)),
        reply(SCENE_OK, "stop", Some(1))
    ]);
    let f = tri!(observe(
        target,
        Variant::Default,
        &failing,
        &scene_request(json!({}))
    ));
    judged(vec![
        judges::count(&o),
        judges::output_tokens_sum(&o),
        judges::total_attempts(&f),
    ])
}

/// §A.2: an attempt without usage makes `usageComplete` false.
fn usage_incomplete(target: &dyn Target) -> LegOutcome {
    if let Some(skip) = gate(target, "attempts") {
        return skip;
    }
    let script = json!([
        reply(SCENE_CUT, "length", None),
        reply(SCENE_OK, "stop", Some(50))
    ]);
    let o = tri!(observe(
        target,
        Variant::Default,
        &script,
        &scene_request(json!({"maxTokens": 300}))
    ));
    tri!(retried(&o, "a truncation"));
    judged(vec![
        judges::count(&o),
        judges::usage_complete(&o),
        judges::output_tokens_sum(&o),
    ])
}

/// §A.3: prompt mode says `prompt`; a text call carries no `structuredOutput`.
fn structured_mode(target: &dyn Target) -> LegOutcome {
    if let Some(skip) = gate(target, "attempts") {
        return skip;
    }
    let prompt = tri!(observe(
        target,
        Variant::PromptMode,
        &json!([reply(SCENE_OK, "stop", Some(9))]),
        &scene_request(json!({}))
    ));
    let text_request = json!({"messages": [{"role": "user", "content": "Say hello."}]});
    let text = tri!(observe(
        target,
        Variant::Default,
        &json!([reply("Hello.", "stop", Some(2))]),
        &text_request
    ));
    judged(vec![
        judges::structured_output(&prompt, Some("prompt")),
        judges::structured_output(&text, None),
    ])
}

/// §A.5: replay returns the recorded `attempts`, with no provider request.
fn replay(target: &dyn Target) -> LegOutcome {
    if let Some(skip) = gate(target, "attempts") {
        return skip;
    }
    if !target.supports_replay() {
        return LegOutcome::Skip {
            reason: "the host does not support replay".into(),
        };
    }
    let script = json!([
        reply(SCENE_CUT, "length", Some(5000)),
        reply(SCENE_OK, "stop", Some(1800))
    ]);
    let request = scene_request(json!({"maxTokens": 2000}));
    match target.record_and_replay(&script, &request) {
        Some((recorded, _)) if recorded.attempts().is_none() => blocked(format!(
            "the recorded run has no attempts to replay: {}",
            recorded.output
        )),
        Some((recorded, replayed)) => judged(vec![judges::replay_equal(&recorded, &replayed)]),
        None => blocked("the host could not record and replay the run"),
    }
}

/// §B.1, §B.4: the cap holds; `maxAttempts: 1` fails with `totalAttempts: 1`.
fn cap(target: &dyn Target) -> LegOutcome {
    if let Some(skip) = gate(target, "retryPolicy") {
        return skip;
    }
    let cut = || reply(SCENE_CUT, "length", Some(100));
    let one = tri!(observe(
        target,
        Variant::Default,
        &json!([cut(), reply(SCENE_OK, "stop", Some(5))]),
        &scene_request(json!({"maxTokens": 100, "retry": {"maxAttempts": 1}}))
    ));
    let two = tri!(observe(
        target,
        Variant::Default,
        &json!([cut(), cut(), cut(), reply(SCENE_OK, "stop", Some(5))]),
        &scene_request(json!({"maxTokens": 100, "retry": {"maxAttempts": 2}}))
    ));
    judged(vec![
        judges::cap(&one, 1),
        judges::total_attempts(&one),
        judges::cap(&two, 2),
    ])
}

/// §B.2: no request above the caller's budget, or above the host default
/// (the first request's budget) when the caller names none.
fn no_growth(target: &dyn Target) -> LegOutcome {
    if let Some(skip) = gate(target, "retryPolicy") {
        return skip;
    }
    let script = json!([
        reply(SCENE_CUT, "length", Some(900)),
        reply(SCENE_CUT, "length", Some(900)),
        reply(SCENE_OK, "stop", Some(5))
    ]);
    let named = tri!(observe(
        target,
        Variant::Default,
        &script,
        &scene_request(json!({"maxTokens": 500, "retry": {"growMaxTokens": false}}))
    ));
    tri!(retried(&named, "a truncation"));
    let unnamed = tri!(observe(
        target,
        Variant::Default,
        &script,
        &scene_request(json!({"retry": {"growMaxTokens": false}}))
    ));
    let default_budget = unnamed.requests.first().map_or(0, |r| r.max_tokens);
    judged(vec![
        judges::no_growth(&named, 500),
        judges::no_growth(&unnamed, default_budget),
    ])
}

/// §B.3 and §B.5: a cap above the ceiling is clamped; a malformed one refused.
fn clamp_and_refuse(target: &dyn Target) -> LegOutcome {
    if let Some(skip) = gate(target, "retryPolicy") {
        return skip;
    }
    let ceiling = target.facet()["capabilities"]["envelopes"]["reliability"]["maxRetryAttempts"]
        .as_u64()
        .unwrap_or(16);
    let failures: Vec<Value> = (0..20)
        .map(|_| json!({"error": {"status": 503, "message": "busy"}}))
        .collect();
    let high = tri!(observe(
        target,
        Variant::Default,
        &Value::from(failures),
        &scene_request(json!({"retry": {"maxAttempts": 16}}))
    ));
    let mut findings = vec![judges::clamped(&high, ceiling)];
    let script = json!([reply(SCENE_OK, "stop", Some(1))]);
    for (retry, field) in [
        (json!({"maxAttempts": 0}), "retry.maxAttempts"),
        (json!({"maxAttempts": 17}), "retry.maxAttempts"),
        (json!({"maxAttempts": 2.5}), "retry.maxAttempts"),
        (json!({"maxAttempts": "3"}), "retry.maxAttempts"),
        (json!({"maxAttempts": null}), "retry.maxAttempts"),
        (json!({"growMaxTokens": "no"}), "retry.growMaxTokens"),
    ] {
        let o = tri!(observe(
            target,
            Variant::Default,
            &script,
            &scene_request(json!({"retry": retry}))
        ));
        findings.push(judges::malformed_refused(&o, field));
    }
    judged(findings)
}
