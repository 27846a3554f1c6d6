//! Packs that misbehave, and the typed entry.

use callai_engine::{HostConfig, RunError};
use callai_tests::{pack, run};
use serde_json::json;

#[test]
fn a_trapping_pack_fails_its_run_and_the_host_goes_on() {
    let trap = pack("trap");
    let out = run(
        &trap,
        HostConfig::default(),
        &json!([{"content": "x"}]),
        "hi",
    );
    match &out.output {
        Err(RunError::Trap(message)) => assert!(
            message.contains("unreachable") || message.contains("trap"),
            "{message}"
        ),
        other => panic!("expected a trap, got {other:?}"),
    }
    assert_eq!(out.calls, 1, "the call before the trap was made");
    assert_eq!(
        out.events_named("provider.usage").len(),
        1,
        "its events are kept"
    );
    // The same pack, and another, still run on the same runtime.
    let again = run(
        &trap,
        HostConfig::default(),
        &json!([{"content": "x"}]),
        "hi",
    );
    assert!(matches!(again.output, Err(RunError::Trap(_))));
    let echo = callai_tests::echo(
        HostConfig::default(),
        json!([{"content": "fine", "outputTokens": 1}]),
        json!({"messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(echo.ok()["content"], "fine");
}

#[test]
fn a_node_error_is_reported_as_such() {
    // A typed node fails when its input is not what it takes, naming why.
    for (input, needle) in [
        ("not json", "expected ident"),
        (r#"{"nothing": 1}"#, "missing field `prompt`"),
    ] {
        let out = run(
            &pack("typed_call"),
            HostConfig::default(),
            &json!([]),
            input,
        );
        match out.output {
            Err(RunError::Node(m)) => {
                assert!(m.contains("the node's input is not what it takes"), "{m}");
                assert!(m.contains(needle), "{m}");
            }
            other => panic!("expected a node error, got {other:?}"),
        }
    }
}

#[test]
fn the_typed_entry_counts_and_validates_like_the_json_entry() {
    let typed = pack("typed_call");
    let out = run(
        &typed,
        HostConfig::default(),
        &json!([{"content": "{\"a\": 1", "finishReason": "length", "outputTokens": 900},
                {"content": "{\"a\": 1}", "outputTokens": 40}]),
        &json!({"prompt": "p", "maxTokens": 500, "schema": {"type": "object"}}).to_string(),
    );
    let result = &out.ok()["result"];
    assert_eq!(
        result["attempts"],
        json!({"count": 2, "outputTokens": 540, "usageComplete": true, "structuredOutput": "native"})
    );
    assert_eq!(result["data"], json!({"a": 1}));
    assert_eq!(
        out.ok()["flags"],
        json!({"attempts": true, "retryPolicy": true})
    );

    for bad in [0, 17] {
        let out = run(
            &typed,
            HostConfig::default(),
            &json!([{"content": "x"}]),
            &json!({"prompt": "p", "maxAttempts": bad}).to_string(),
        );
        assert_eq!(out.ok()["error"]["code"], "validation_error");
        assert_eq!(out.ok()["error"]["details"]["field"], "retry.maxAttempts");
        assert!(out.mock_log.is_empty());
    }

    let out = run(&typed, HostConfig::default(),
        &json!([{"content": "{", "finishReason": "length", "outputTokens": 9}, {"content": "{}"}]),
        &json!({"prompt": "p", "maxTokens": 100, "schema": {"type": "object"}, "growMaxTokens": false}).to_string());
    assert!(out.mock_log.iter().all(|l| l.max_tokens == 100));
    assert_eq!(out.ok()["result"]["attempts"]["usageComplete"], false);
}

#[test]
fn the_pack_reads_the_flags_the_config_sets() {
    let mut config = HostConfig::default();
    config.call_accounting.retry_policy = false;
    let out = run(
        &pack("typed_call"),
        config,
        &json!([{"content": "x", "outputTokens": 1}]),
        &json!({"prompt": "p"}).to_string(),
    );
    assert_eq!(
        out.ok()["flags"],
        json!({"attempts": true, "retryPolicy": false})
    );
}
