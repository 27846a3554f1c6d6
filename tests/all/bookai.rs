//! The Book AI pack: its budget charges real provider requests, with host
//! retries on and off, on the README's two scripts.

use callai_engine::HostConfig;
use callai_tests::bookai::{input, script};
use callai_tests::{pack, run};
use serde_json::{Value, json};

/// (calls the pack made, requests attempts reported, output tokens, requests the mock saw)
fn spent(
    config: HostConfig,
    script_name: &str,
    host_retries: bool,
) -> (u64, u64, u64, usize, Value) {
    let out = run(
        &pack("bookai-scene"),
        config,
        &script(script_name),
        &input(host_retries, 4),
    );
    let v = out.ok().clone();
    let s = &v["spent"];
    (
        s["calls"].as_u64().unwrap(),
        s["requests"].as_u64().unwrap(),
        s["outputTokens"].as_u64().unwrap(),
        out.mock_log.len(),
        v,
    )
}

#[test]
fn a_clean_run_costs_one_request_either_way() {
    for host_retries in [false, true] {
        let (calls, requests, tokens, seen, v) =
            spent(HostConfig::default(), "clean", host_retries);
        assert_eq!((calls, requests, tokens, seen), (1, 1, 420, 1), "{v}");
        assert_eq!(v["scene"]["mood"], "tense");
    }
}

#[test]
fn host_retries_off_the_packs_own_loop_makes_one_request_per_call() {
    let (calls, requests, tokens, seen, v) =
        spent(HostConfig::default(), "truncation-and-violation", false);
    assert_eq!(v["hostRetries"], "off");
    assert_eq!((calls, requests, seen), (3, 3, 3), "{v}");
    assert_eq!(
        tokens,
        1500 + 900 + 850,
        "the truncated draft clamped to its 1500 budget"
    );
    assert_eq!(v["estimate"]["requests"], 3);
    assert_eq!(v["spent"]["outputTokensIsFloor"], false);
}

#[test]
fn host_retries_on_a_call_counter_undercounts_and_attempts_do_not() {
    let (calls, requests, tokens, seen, v) =
        spent(HostConfig::default(), "truncation-and-violation", true);
    assert_eq!(v["hostRetries"], "on");
    assert_eq!(calls, 2, "what a pack that counts calls believes");
    assert_eq!(
        (requests, seen),
        (3, 3),
        "what attempts report, and what the provider saw"
    );
    assert_eq!(tokens, 1500 + 900 + 850);
}

#[test]
fn without_retry_policy_the_pack_counts_attempts() {
    let mut config = HostConfig::default();
    config.call_accounting.retry_policy = false;
    let (calls, requests, _, seen, v) = spent(config, "truncation-and-violation", false);
    assert_eq!(v["hostRetries"], "on", "it cannot turn host retries off");
    assert_eq!((calls, requests, seen), (2, 3, 3), "{v}");
    assert!(v["estimate"]["requests"].is_null());
}

#[test]
fn a_run_that_would_exceed_max_calls_is_refused_with_estimate_and_spend() {
    let out = run(
        &pack("bookai-scene"),
        HostConfig::default(),
        &script("truncation-and-violation"),
        &input(true, 2),
    );
    let message = match &out.output {
        Err(callai_engine::RunError::Node(m)) => m.clone(),
        other => panic!("expected a refusal, got {other:?}"),
    };
    let v: Value = serde_json::from_str(&message).unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("maxRequests = 2 would be exceeded"),
        "{v}"
    );
    assert_eq!(
        v["spent"]["requests"], 2,
        "the draft's host retry was charged"
    );
    assert_eq!(out.mock_log.len(), 2, "the repair was never sent");
    // The draft call was narrowed to the two requests the budget allowed.
    assert!(v["estimate"].is_object());
}

#[test]
fn the_output_token_budget_is_charged_by_attempts() {
    let over = json!({"premise": "p", "maxCalls": 4, "maxOutputTokens": 3000, "maxTokens": 1500})
        .to_string();
    let out = run(
        &pack("bookai-scene"),
        HostConfig::default(),
        &script("truncation-and-violation"),
        &over,
    );
    let message = match &out.output {
        Err(callai_engine::RunError::Node(m)) => m.clone(),
        other => panic!("expected a refusal, got {other:?}"),
    };
    let v: Value = serde_json::from_str(&message).unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("maxOutputTokens"),
        "{v}"
    );
}
