//! Property tests of the retry engine over random scripts: whatever the
//! provider does, `attempts` tells the truth about the requests it saw.

use callai_engine::wire::{CallError, CallRequest, CallResult};
use callai_engine::{Event, EventLog, Host, HostConfig, MockLogEntry, MockProvider, MockScript};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::sync::Arc;

const CONTENTS: [&str; 5] = [
    r#"{"scene": "ok"}"#,
    r#"{"scene": "cut"#,
    "Just prose, no JSON.",
    r#"{"title": 1}"#,
    "```json\n{\"scene\": \"fenced\"}\n```",
];

fn entry() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => (0..CONTENTS.len(), prop::sample::select(vec!["stop", "length", "refusal", "content-filter"]),
              prop::option::of(0u32..20_000))
            .prop_map(|(c, finish, tokens)| {
                let mut e = json!({"content": CONTENTS[c], "finishReason": finish});
                if let Some(t) = tokens {
                    e["outputTokens"] = t.into();
                }
                e
            }),
        1 => prop::sample::select(vec![400u16, 429, 500, 503])
            .prop_map(|s| json!({"error": {"status": s, "message": "scripted"}})),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    script: Vec<Value>,
    ceiling: u32,
    structured: bool,
    max_tokens: Option<u32>,
    max_attempts: Option<u32>,
    grow: Option<bool>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(entry(), 0..20),
        1u32..=16,
        any::<bool>(),
        prop::option::of(1u32..8000),
        prop::option::of(1u32..=16),
        prop::option::of(any::<bool>()),
    )
        .prop_map(
            |(script, ceiling, structured, max_tokens, max_attempts, grow)| Case {
                script,
                ceiling,
                structured,
                max_tokens,
                max_attempts,
                grow,
            },
        )
}

fn run(case: &Case) -> (Result<CallResult, CallError>, Vec<Event>, Vec<MockLogEntry>) {
    let mut config = HostConfig::default();
    config.retry.max_retry_attempts = case.ceiling;
    let script = MockScript::from_json(&Value::from(case.script.clone()).to_string()).unwrap();
    let mock = Arc::new(MockProvider::new(
        script,
        callai_engine::wire::StructuredOutput::Native,
    ));
    let host = Host::builder(config)
        .build()
        .unwrap()
        .with_provider("mock", mock.clone());
    let mut request = json!({"messages": [{"role": "user", "content": "go"}]});
    if case.structured {
        request["responseSchema"] = json!({"type": "object", "required": ["scene"]});
    }
    if let Some(n) = case.max_tokens {
        request["maxTokens"] = n.into();
    }
    let mut retry = serde_json::Map::new();
    if let Some(n) = case.max_attempts {
        retry.insert("maxAttempts".into(), n.into());
    }
    if let Some(g) = case.grow {
        retry.insert("growMaxTokens".into(), g.into());
    }
    if !retry.is_empty() {
        request["retry"] = Value::Object(retry);
    }
    let request =
        CallRequest::from_value(&request, callai_engine::wire::RetryField::Honoured).unwrap();
    let events = EventLog::new();
    // Paused time: backoff waits pass at once.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let outcome = rt.block_on(host.call("prop.node", &request, &events));
    (outcome, events.take(), mock.log())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn attempts_tell_the_truth(case in case()) {
        let (outcome, events, log) = run(&case);
        let seen = log.len() as u32;
        let cap = case.max_attempts.map_or(case.ceiling, |n| n.min(case.ceiling));
        prop_assert!(seen <= cap, "{seen} requests over a cap of {cap}");

        // One provider.usage per request the mock saw.
        let usage_events = events.iter().filter(|e| e.type_name() == "provider.usage").count();
        prop_assert_eq!(usage_events as u32, seen);

        // B.2: never above the request's budget (or the default) without growth.
        let base = case.max_tokens.unwrap_or(4000);
        if case.grow == Some(false) {
            prop_assert!(log.iter().all(|l| l.max_tokens <= base));
        }

        match outcome {
            Ok(result) => {
                let a = result.attempts.expect("attempts advertised");
                prop_assert_eq!(a.count, seen);
                // The sum of the clamped reported tokens of every served reply.
                let mut sum = 0u64;
                let mut complete = true;
                for (entry, request) in case.script.iter().zip(&log) {
                    match entry.get("outputTokens").and_then(Value::as_u64) {
                        Some(t) => sum += t.min(u64::from(request.max_tokens)),
                        None => complete = false,
                    }
                }
                prop_assert_eq!(a.usage_complete, complete);
                if seen > 0 && (complete || sum > 0 || a.output_tokens.is_some()) {
                    prop_assert_eq!(a.output_tokens.unwrap_or(0), sum);
                }
                prop_assert_eq!(a.structured_output.is_some(), case.structured);
                prop_assert!(events.iter().all(|e| e.type_name() != "envelope.retry.exhausted"));
            }
            Err(error) => {
                let exhausted: Vec<u64> = events
                    .iter()
                    .filter_map(|e| match e {
                        Event::RetryExhausted { total_attempts, .. } => Some(u64::from(*total_attempts)),
                        _ => None,
                    })
                    .collect();
                if seen == 0 {
                    prop_assert!(exhausted.is_empty());
                } else {
                    prop_assert_eq!(exhausted, vec![u64::from(seen)]);
                    prop_assert_eq!(error.details.as_ref().unwrap()["totalAttempts"].as_u64(), Some(u64::from(seen)));
                }
            }
        }

        // Exactly one envelope.retry.attempted before each request after the
        // first that was sent, and none for a request never sent (the
        // script ran out); each provider.usage says why its request went.
        let attempted = events.iter().filter(|e| e.type_name() == "envelope.retry.attempted").count() as u32;
        prop_assert_eq!(attempted, seen.saturating_sub(1));
        let mut usage = events.iter().filter_map(|e| match e {
            Event::ProviderUsage { reason, .. } => Some(reason.as_ref()),
            _ => None,
        });
        prop_assert_eq!(usage.next(), (seen > 0).then_some("first"));
        prop_assert!(usage.all(|r| r != "first"));
    }
}
