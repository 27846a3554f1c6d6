//! Packs that misbehave are stopped with an error naming the limit, and the
//! next run on the same host succeeds.

use callai_engine::{HostConfig, RunError};
use callai_host::{PackRuntime, RuntimeOptions};
use callai_tests::{echo, pack, pack_in, run};
use serde_json::json;

fn with(edit: impl FnOnce(&mut HostConfig)) -> HostConfig {
    let mut c = HostConfig::default();
    edit(&mut c);
    c
}

fn stopped_by(result: &Result<serde_json::Value, RunError>) -> &'static str {
    match result {
        Err(RunError::Limit { key, .. }) => key,
        other => panic!("expected a limit, got {other:?}"),
    }
}

/// After each misbehaving run, a good run on the same runtime still works.
fn next_run_succeeds() {
    let out = echo(
        HostConfig::default(),
        json!([{"content": "still here", "outputTokens": 2}]),
        json!({"messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(out.ok()["content"], "still here");
}

#[test]
fn a_pack_that_loops_forever_runs_out_of_fuel() {
    let config = with(|c| c.limits.fuel = 200_000_000);
    let out = run(&pack("loop_forever"), config, &json!([]), "{}");
    assert_eq!(stopped_by(&out.output), "limits.fuel");
    next_run_succeeds();
}

#[test]
fn a_pack_that_loops_forever_hits_the_wall_clock() {
    let config = with(|c| c.limits.wall_ms = 300);
    let out = run(&pack("loop_forever"), config, &json!([]), "{}");
    assert_eq!(stopped_by(&out.output), "limits.wallMs");
    next_run_succeeds();
}

#[test]
fn a_run_waiting_on_a_slow_provider_hits_the_wall_clock() {
    let config = with(|c| {
        c.limits.wall_ms = 200;
        c.mock.latency_ms = 5_000;
    });
    let (host, _) =
        callai_tests::host_with_script(config, &json!([{"content": "late", "outputTokens": 1}]));
    let start = std::time::Instant::now();
    let request = json!({"messages": [{"role": "user", "content": "hi"}]}).to_string();
    let out = callai_tests::block_on(pack("echo-attempts").run(&host, "slow", &request));
    match out.result {
        Err(RunError::Limit { key, .. }) => assert_eq!(key, "limits.wallMs"),
        other => panic!("expected the wall-clock limit, got {other:?}"),
    }
    assert!(
        start.elapsed() < std::time::Duration::from_secs(4),
        "stopped, not waited out"
    );
    next_run_succeeds();
}

#[test]
fn a_pack_that_allocates_without_end_hits_the_memory_limit() {
    let config = with(|c| c.limits.memory_bytes = 16 << 20);
    let out = run(&pack("alloc_forever"), config, &json!([]), "{}");
    assert_eq!(stopped_by(&out.output), "limits.memoryBytes");
    next_run_succeeds();
}

#[test]
fn a_pack_that_traps_is_stopped_and_the_host_goes_on() {
    let out = run(
        &pack("trap"),
        HostConfig::default(),
        &json!([{"content": "x"}]),
        "hi",
    );
    assert!(matches!(out.output, Err(RunError::Trap(_))));
    next_run_succeeds();
}

#[test]
fn a_pack_that_calls_in_a_tight_loop_hits_the_call_cap() {
    let config = with(|c| c.limits.max_calls_per_run = 10);
    let replies: Vec<serde_json::Value> = (0..20)
        .map(|_| json!({"content": "ok", "outputTokens": 1}))
        .collect();
    let out = run(&pack("call_loop"), config, &json!(replies), "{}");
    assert_eq!(stopped_by(&out.output), "limits.maxCallsPerRun");
    assert_eq!(
        out.mock_log.len(),
        10,
        "the eleventh call never reached the provider"
    );
    next_run_succeeds();
}

#[test]
fn a_pack_that_sends_a_100_mb_prompt_hits_the_request_limit() {
    // A runtime whose memory admits the 100 MB string, so the request limit
    // (not the memory limit) is what stops it.
    let big = PackRuntime::with_options(&RuntimeOptions {
        max_concurrent_runs: 2,
        max_memory_bytes: 512 << 20,
        ..RuntimeOptions::default()
    })
    .unwrap();
    let config = with(|c| c.limits.memory_bytes = 512 << 20);
    let out = run(
        &pack_in(&big, "huge_prompt"),
        config,
        &json!([{"content": "x"}]),
        r#"{"megabytes": 100}"#,
    );
    assert_eq!(stopped_by(&out.output), "limits.maxRequestBytes");
    assert!(out.mock_log.is_empty());
    // The same pack with a small prompt goes through.
    let ok = run(
        &pack_in(&big, "huge_prompt"),
        HostConfig::default(),
        &json!([{"content": "x", "outputTokens": 1}]),
        r#"{"megabytes": 0}"#,
    );
    assert_eq!(ok.ok()["content"], "x");
    next_run_succeeds();
}

#[test]
fn an_oversized_reply_fails_the_call_with_limit_exceeded() {
    let config = with(|c| c.limits.max_response_bytes = 1000);
    let out = echo(
        config,
        json!([{"content": "y".repeat(5000), "outputTokens": 1}]),
        json!({"messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(out.ok()["error"]["code"], "limit_exceeded");
    assert!(
        out.ok()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limits.maxResponseBytes")
    );
}
