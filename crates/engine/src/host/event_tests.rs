//! A call whose event sink keeps nothing is the same call: the engine
//! skips making its events, and nothing else.

use crate::{EventLog, Host, HostConfig, MockProvider, MockScript};
use callai_wire::{CallError, CallRequest, CallResult, RetryField, StructuredOutput};

/// A truncation, then a reply that fits: two requests, a retry announced.
const SCRIPT: &str = r#"[
    {"content": "{\"a\": ", "finishReason": "length", "outputTokens": 100},
    {"content": "{\"a\": 1}", "finishReason": "stop", "outputTokens": 7}
]"#;

fn call(events: &EventLog) -> Result<CallResult, CallError> {
    let host = Host::builder(HostConfig::default())
        .mock(MockProvider::new(
            MockScript::from_json(SCRIPT).unwrap(),
            StructuredOutput::Native,
        ))
        .build()
        .unwrap();
    let request = CallRequest::from_json(
        r#"{"messages": [{"role": "user", "content": "hi"}], "maxTokens": 100,
            "responseSchema": {"type": "object"}}"#,
        RetryField::Honoured,
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(host.call_with("n", &request, events, crate::CallOptions::default()))
}

#[test]
fn a_call_whose_events_are_discarded_has_the_same_outcome() {
    let kept = EventLog::new();
    let with_events = call(&kept).unwrap();
    let discarded = EventLog::discarding();
    let without = call(&discarded).unwrap();
    assert_eq!(with_events, without);
    assert_eq!(without.attempts.unwrap().count, 2);
    assert_eq!(without.attempts.unwrap().output_tokens, Some(107));
    let names: Vec<_> = kept.snapshot().iter().map(|e| e.type_name()).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "provider.usage").count(),
        2,
        "{names:?}"
    );
    assert!(names.contains(&"envelope.truncated"), "{names:?}");
    assert!(names.contains(&"envelope.retry.attempted"), "{names:?}");
    assert!(discarded.is_empty());
}
