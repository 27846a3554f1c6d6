//! `callai serve` under load and at its end: hostile packs beside healthy
//! runs, many runs at once with metrics that match what the providers
//! saw, a full host, shutdown with runs in flight.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::{TestServer, hello, samples, truncating};
use serde_json::{Value, json};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_packs_fail_alone_beside_healthy_runs() {
    let server =
        std::sync::Arc::new(TestServer::start("[limits]\nwallMs = 2000\nfuel = 2000000000").await);
    let mut tasks = Vec::new();
    for pack in ["trap", "loop_forever"] {
        let s = server.clone();
        tasks.push(tokio::spawn(async move {
            (
                pack,
                s.post("/v1/runs", &json!({"pack": pack, "input": 1})).await,
            )
        }));
    }
    for i in 0..20 {
        let s = server.clone();
        tasks.push(tokio::spawn(async move {
            let script = json!([{"content": format!("reply {i}"), "outputTokens": i + 1}]);
            (
                "echo-attempts",
                s.post(
                    "/v1/runs",
                    &json!({"pack": "echo-attempts", "input": hello(), "script": script}),
                )
                .await,
            )
        }));
    }
    let mut healthy = 0;
    for t in tasks {
        let (pack, a) = t.await.unwrap();
        assert_eq!(a.status, 200, "{pack}: {}", a.body);
        match pack {
            "trap" => {
                assert_eq!(a.body["status"], "failed");
                assert_eq!(a.body["error"]["kind"], "trap", "{}", a.body);
            }
            "loop_forever" => {
                assert_eq!(a.body["status"], "failed");
                assert_eq!(a.body["error"]["kind"], "limit", "{}", a.body);
            }
            _ => {
                assert_eq!(a.body["status"], "ok", "{}", a.body);
                let content = a.body["output"]["content"].as_str().unwrap();
                let n: u64 = content.strip_prefix("reply ").unwrap().parse().unwrap();
                assert_eq!(a.body["attempts"]["outputTokens"], n + 1);
                healthy += 1;
            }
        }
    }
    assert_eq!(healthy, 20);
    let text = server.metrics().await;
    assert_eq!(
        callai_tests::serve::metric_in(&text, r#"callai_runs_total{status="failed"}"#),
        2.0
    );
    assert_eq!(
        callai_tests::serve::metric_in(&text, r#"callai_runs_total{status="ok"}"#),
        20.0
    );
    std::sync::Arc::into_inner(server).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_runs_at_once_each_get_their_own_attempts() {
    let server = std::sync::Arc::new(TestServer::start("[mock]\nlatencyMs = 20").await);
    let mut tasks = Vec::new();
    let mut expected_requests = 0;
    for i in 0..200usize {
        let n = 1 + i % 3;
        expected_requests += n;
        let (request, script) = truncating(n);
        let s = server.clone();
        tasks.push(tokio::spawn(async move {
            let body = json!({"pack": "echo-attempts", "input": request, "script": script,
                              "runId": format!("many-{i}")});
            (i, n, s.post("/v1/runs", &body).await)
        }));
    }
    for t in tasks {
        let (i, n, a) = t.await.unwrap();
        assert_eq!(a.status, 200, "{i}: {}", a.body);
        assert_eq!(a.body["runId"], format!("many-{i}"));
        assert_eq!(a.body["status"], "ok", "{i}: {}", a.body);
        let tokens = 100 * (n as u64 - 1) + 7;
        assert_eq!(
            a.body["attempts"],
            json!({"count": n, "outputTokens": tokens, "usageComplete": true}),
            "{i}"
        );
        assert_eq!(a.body["output"]["attempts"]["count"], n, "{i}");
    }
    let text = server.metrics().await;
    let requests = samples(&text, "callai_provider_requests_total");
    let total: f64 = requests.iter().map(|s| s.1).sum();
    assert_eq!(total, expected_requests as f64, "{requests:?}");
    // 200 first requests; each truncated reply led to one truncation retry.
    assert!(
        requests.contains(&(r#"{provider="mock",reason="first"}"#.into(), 200.0)),
        "{requests:?}"
    );
    assert!(requests.contains(&(
        r#"{provider="mock",reason="truncation"}"#.into(),
        (expected_requests - 200) as f64
    )));
    assert_eq!(
        callai_tests::serve::metric_in(&text, r#"callai_runs_total{status="ok"}"#),
        200.0
    );
    assert_eq!(
        callai_tests::serve::metric_in(&text, "callai_run_duration_seconds_count"),
        200.0
    );
    std::sync::Arc::into_inner(server).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_a_real_provider_are_counted_as_the_provider_saw_them() {
    let reply = json!({"model": "fake", "choices": [{"message": {"content": "{\"x\": 1}"}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 5}});
    let replies = (0..60)
        .map(|_| {
            Reply::Delay(
                Duration::from_millis(20),
                Box::new(Reply::ok(reply.clone())),
            )
        })
        .collect();
    let fake = FakeServer::start(replies).await;
    let toml = format!(
        "[defaults]\nprovider = \"openai\"\n[providers.openai]\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\nmodel = \"fake\"",
        fake.url()
    );
    let server = std::sync::Arc::new(TestServer::start(&toml).await);
    let (request, _) = truncating(1);
    let mut tasks = Vec::new();
    for _ in 0..40 {
        let s = server.clone();
        let body = json!({"request": request});
        tasks.push(tokio::spawn(async move { s.post("/v1/call", &body).await }));
    }
    for t in tasks {
        let a = t.await.unwrap();
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.body["result"]["attempts"]["count"], 1);
    }
    let text = server.metrics().await;
    let requests: Vec<_> = samples(&text, "callai_provider_requests_total")
        .into_iter()
        .filter(|s| s.1 > 0.0)
        .collect();
    assert_eq!(
        requests,
        vec![(
            r#"{provider="openai",reason="first"}"#.to_owned(),
            fake.received().len() as f64
        )]
    );
    assert_eq!(
        callai_tests::serve::metric_in(&text, r#"callai_output_tokens_total{provider="openai"}"#),
        5.0 * fake.received().len() as f64
    );
    std::sync::Arc::into_inner(server).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_host_answers_503_with_retry_after() {
    let toml =
        "[mock]\nlatencyMs = 400\n[limits]\nmaxConcurrentRuns = 1\n[server]\nmaxQueuedRuns = 1";
    let server = TestServer::start(toml).await;
    let slow = |i: u32| {
        json!({"pack": "echo-attempts", "input": hello(), "wait": false,
                               "script": [{"content": format!("{i}"), "outputTokens": 1}]})
    };
    assert_eq!(server.post("/v1/runs", &slow(1)).await.status, 202);
    assert_eq!(server.post("/v1/runs", &slow(2)).await.status, 202);
    let full = server.post("/v1/runs", &slow(3)).await;
    assert_eq!(full.status, 503, "{}", full.body);
    assert_eq!(full.body["error"]["code"], "overloaded");
    assert_eq!(full.retry_after.as_deref(), Some("1"));
    let call = server
        .post(
            "/v1/call",
            &json!({"request": hello(), "script": [{"content": "x"}]}),
        )
        .await;
    assert_eq!(call.status, 503);
    server.shutdown().await;
}

/// Posts a run of echo-attempts under `run_id` whose mock answers `content`
/// (after the config's latency), in the background; its answer, as JSON.
fn in_flight(server: &TestServer, run_id: &str, content: &str) -> tokio::task::JoinHandle<Value> {
    let url = format!("{}/v1/runs", server.url);
    let body = json!({"pack": "echo-attempts", "input": hello(), "runId": run_id,
                      "script": [{"content": content, "outputTokens": 1}]});
    tokio::spawn(async move {
        let text = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        serde_json::from_str(&text).unwrap()
    })
}

/// Waits until this server holds the run `id` (admitted, and so past any
/// compile).
async fn wait_until_running(server: &TestServer, id: &str) {
    for _ in 0..500 {
        if server.get(&format!("/v1/runs/{id}")).await.status == 200 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("run {id} never started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_runs_in_flight_finish() {
    let mut server = TestServer::start("[mock]\nlatencyMs = 300").await;
    let in_flight = in_flight(&server, "in-flight", "finished");
    wait_until_running(&server, "in-flight").await;
    server.begin_shutdown();
    let answer = in_flight.await.unwrap();
    assert_eq!(answer["status"], "ok", "{answer}");
    assert_eq!(answer["output"]["content"], "finished");
    server.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_fails_runs_past_the_grace_period_cleanly() {
    let mut server =
        TestServer::start("[mock]\nlatencyMs = 30000\n[server]\nshutdownGraceMs = 200").await;
    let in_flight = in_flight(&server, "in-flight", "never");
    wait_until_running(&server, "in-flight").await;
    let started = std::time::Instant::now();
    server.begin_shutdown();
    let answer = in_flight.await.unwrap();
    assert_eq!(answer["status"], "failed", "{answer}");
    assert_eq!(answer["error"]["kind"], "shutdown");
    server.stopped().await;
    // Stopped by the grace period, not by the 30 s provider.
    assert!(started.elapsed() < Duration::from_secs(20));
}
