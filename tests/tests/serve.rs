//! `callai serve`, through its HTTP API: every endpoint and status, the
//! token, bad bodies, hostile packs beside healthy runs, many runs at once
//! with metrics that match what the providers saw, shutdown in flight.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::{TestServer, samples};
use serde_json::{Value, json};
use std::time::Duration;

fn hello() -> Value {
    json!({"messages": [{"role": "user", "content": "hi"}]})
}

/// A structured request whose script makes `n` provider requests: `n - 1`
/// truncated replies, then a good one.
fn truncating(n: usize) -> (Value, Value) {
    let request = json!({
        "messages": [{"role": "user", "content": "hi"}],
        "maxTokens": 100,
        "responseSchema": {"type": "object", "required": ["x"]}
    });
    let mut script: Vec<Value> = (1..n)
        .map(|_| json!({"content": "{\"x\": ", "finishReason": "length", "outputTokens": 100}))
        .collect();
    script.push(json!({"content": "{\"x\": 1}", "outputTokens": 7}));
    (request, Value::Array(script))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_endpoints_answer() {
    let server = TestServer::start("").await;
    let a = server.get("/healthz").await;
    assert_eq!((a.status, a.body), (200, json!({"status": "ok"})));

    let facet = server.get("/v1/facet").await;
    assert_eq!(facet.status, 200);
    assert_eq!(
        facet.body["aiProviders"]["callAccounting"],
        json!({"attempts": true, "retryPolicy": true})
    );
    let doc = server.get("/.well-known/openwop").await;
    assert_eq!(doc.status, 200);
    assert_eq!(
        doc.body["capabilities"]["aiProviders"],
        facet.body["aiProviders"]
    );
    let reliability = &doc.body["capabilities"]["envelopes"]["reliability"];
    assert_eq!(reliability["supported"], true);
    assert_eq!(reliability["maxRetryAttempts"], 3);
    assert_eq!(
        reliability["completion"],
        json!({"distinguishesTruncation": true, "truncationBudgetMultiplier": 2})
    );

    let packs = server.get("/v1/packs").await;
    assert_eq!(packs.status, 200);
    let names: Vec<&str> = packs
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for name in [
        "echo-attempts",
        "bookai-scene",
        "trap",
        "loop_forever",
        "multi_call",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let trap = packs
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "trap")
        .unwrap();
    assert_eq!(trap["nodeId"], "trap");
    assert_eq!(trap["sha256"].as_str().unwrap().len(), 64);

    let m = server.get("/metrics").await;
    assert_eq!(m.status, 200);
    let text = m.body.as_str().unwrap();
    for family in [
        "callai_runs_total",
        "callai_calls_total",
        "callai_provider_requests_total",
        "callai_output_tokens_total",
        "callai_run_duration_seconds",
    ] {
        let typed = format!("# TYPE {} ", family.trim_end_matches("_total"));
        assert!(text.contains(&typed), "{family} in\n{text}");
    }

    let missing = server.get("/v1/nothing").await;
    assert_eq!(
        (missing.status, missing.body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let wrong = server.send("DELETE", "/v1/packs", None).await;
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.body["error"]["code"], "method_not_allowed");
    let unknown = server.get("/v1/runs/no-such-run").await;
    assert_eq!(
        (unknown.status, unknown.body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let unknown = server.get("/v1/runs/no-such-run/events").await;
    assert_eq!(unknown.status, 404);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_answers_with_its_attempts_and_events() {
    let server = TestServer::start("").await;
    let (request, script) = truncating(2);
    let a = server
        .post(
            "/v1/runs",
            &json!({"pack": "echo-attempts", "input": request, "script": script,
                    "runId": "r-1", "events": true}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["runId"], "r-1");
    assert_eq!(a.body["status"], "ok");
    assert_eq!(a.body["calls"], 1);
    assert_eq!(
        a.body["attempts"],
        json!({"count": 2, "outputTokens": 107, "usageComplete": true})
    );
    // The node's own output: the call's attempts as the pack saw them.
    assert_eq!(a.body["output"]["attempts"]["count"], 2);
    assert_eq!(a.body["output"]["data"], json!({"x": 1}));
    let types: Vec<&str> = a.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(
        types.contains(&"envelope.truncated") && types.contains(&"provider.usage"),
        "{types:?}"
    );

    let again = server.get("/v1/runs/r-1").await;
    assert_eq!(again.status, 200);
    for key in ["runId", "status", "calls", "attempts", "output"] {
        assert_eq!(again.body[key], a.body[key], "{key}");
    }
    let events = server.get("/v1/runs/r-1/events").await;
    assert_eq!(events.status, 200);
    assert_eq!(events.body["isComplete"], true);
    let list = events.body["events"].as_array().unwrap();
    assert_eq!(list.len(), a.body["events"].as_array().unwrap().len());
    for (i, e) in list.iter().enumerate() {
        assert_eq!(e["sequence"], i + 1);
        assert!(e["timestamp"].as_str().unwrap().ends_with('Z'), "{e}");
        assert_eq!(e["type"], a.body["events"][i]["type"]);
    }
    let usage = list.iter().find(|e| e["type"] == "provider.usage").unwrap();
    assert_eq!(usage["nodeId"], "conformance.callai.echo-attempts");

    // The same run id again is a conflict.
    let dup = server
        .post(
            "/v1/runs",
            &json!({"pack": "echo-attempts", "input": hello(), "runId": "r-1"}),
        )
        .await;
    assert_eq!(
        (dup.status, dup.body["error"]["code"].as_str()),
        (409, Some("conflict"))
    );

    // A string input reaches the node as its quoted JSON text: the node
    // cannot read it as a request, and says so.
    let text = server
        .post("/v1/runs", &json!({"pack": "echo-attempts", "input": "hi"}))
        .await;
    assert_eq!(text.status, 200);
    assert_eq!(text.body["output"]["error"]["code"], "validation_error");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_not_waited_for_is_polled_to_its_end() {
    let server = TestServer::start("[mock]\nlatencyMs = 200").await;
    let a = server
        .post(
            "/v1/runs",
            &json!({"pack": "echo-attempts", "input": hello(), "wait": false,
                    "script": [{"content": "late", "outputTokens": 2}]}),
        )
        .await;
    assert_eq!(a.status, 202, "{}", a.body);
    assert_eq!(a.body["status"], "running");
    let id = a.body["runId"].as_str().unwrap().to_owned();
    assert!(id.starts_with("run-"), "{id}");
    let first = server.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(first.body["status"], "running");
    let events = server.get(&format!("/v1/runs/{id}/events")).await;
    assert_eq!(events.body["isComplete"], false);
    let done = loop {
        let a = server.get(&format!("/v1/runs/{id}")).await;
        if a.body["status"] != "running" {
            break a;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(done.body["status"], "ok");
    assert_eq!(done.body["output"]["content"], "late");
    assert_eq!(done.body["attempts"]["count"], 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_refused_naming_what_is_wrong() {
    let server = TestServer::start("[server]\nmaxBodyBytes = 4096\nmaxPackBytes = 65536").await;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("/v1/runs", b"not json".to_vec(), 400, "body"),
        ("/v1/runs", b"[]".to_vec(), 400, "body"),
        ("/v1/runs", br#"{"input": {}}"#.to_vec(), 400, "pack"),
        (
            "/v1/runs",
            br#"{"pack": "echo-attempts"}"#.to_vec(),
            400,
            "input",
        ),
        (
            "/v1/runs",
            br#"{"pack": "echo-attempts", "input": 1, "wait": 1}"#.to_vec(),
            400,
            "wait",
        ),
        (
            "/v1/runs",
            br#"{"pack": "echo-attempts", "input": 1, "durable": true}"#.to_vec(),
            400,
            "durable",
        ),
        (
            "/v1/runs",
            br#"{"pack": "echo-attempts", "input": 1, "script": {}}"#.to_vec(),
            400,
            "script",
        ),
        (
            "/v1/runs",
            br#"{"pack": "echo-attempts", "input": 1, "extra": 1}"#.to_vec(),
            400,
            "extra",
        ),
        ("/v1/call", b"{".to_vec(), 400, "body"),
        ("/v1/call", br#"{"script": []}"#.to_vec(), 400, "request"),
        ("/v1/call", br#"{"request": []}"#.to_vec(), 400, "request"),
    ];
    for (path, body, status, field) in cases {
        let a = server.send("POST", path, Some(body.clone())).await;
        assert_eq!(
            a.status,
            status,
            "{path} {}: {}",
            String::from_utf8_lossy(&body),
            a.body
        );
        assert_eq!(a.body["error"]["code"], "validation_error");
        assert_eq!(a.body["error"]["details"]["field"], field, "{}", a.body);
    }
    let big = vec![b' '; 5000];
    for path in ["/v1/runs", "/v1/call"] {
        let a = server.send("POST", path, Some(big.clone())).await;
        assert_eq!(a.status, 413, "{path}");
        assert_eq!(a.body["error"]["code"], "payload_too_large");
        assert_eq!(a.body["error"]["details"]["limit"], "server.maxBodyBytes");
    }
    let unknown = server
        .post("/v1/runs", &json!({"pack": "nope", "input": 1}))
        .await;
    assert_eq!(unknown.status, 404);
    assert!(
        unknown.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nope")
    );

    // A pack upload that is no component, an empty one, one too large.
    for (body, status) in [
        (b"\0asm\x01\0\0\0garbage".to_vec(), 400),
        (b"hello".to_vec(), 400),
        (Vec::new(), 400),
        (vec![0u8; 70_000], 413),
    ] {
        let a = server.send("PUT", "/v1/packs/junk", Some(body)).await;
        assert_eq!(a.status, status, "{}", a.body);
        assert!(a.body["error"]["message"].is_string());
    }
    let packs = server.get("/v1/packs").await;
    assert!(!packs.body.to_string().contains("junk"));
    // The server is still whole.
    let ok = server
        .post(
            "/v1/runs",
            &json!({"pack": "echo-attempts", "input": hello()}),
        )
        .await;
    assert_eq!(ok.body["status"], "ok");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uploaded_pack_runs_and_names_are_guarded() {
    let server = TestServer::start("").await;
    let bytes = std::fs::read(callai_test_programs_artifacts::path("multi_call").unwrap()).unwrap();
    let a = server
        .send("PUT", "/v1/packs/mine?nodeId=my.node", Some(bytes.clone()))
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(a.body["name"], "mine");
    assert_eq!(a.body["nodeId"], "my.node");
    assert_eq!(a.body["sha256"], callai_server::sha256_hex(&bytes));
    let listed = server.get("/v1/packs").await;
    let mine = listed
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "mine")
        .unwrap()
        .clone();
    assert_eq!(mine, a.body);
    // The same bytes under the name of a `--packs` file hash alike.
    let file = listed
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "multi_call")
        .unwrap();
    assert_eq!(file["sha256"], a.body["sha256"]);
    // Replacing an upload is fine; a bundled or --packs name is not.
    let again = server
        .send("PUT", "/v1/packs/mine", Some(bytes.clone()))
        .await;
    assert_eq!(again.status, 201);
    for taken in ["echo-attempts", "trap"] {
        let a = server
            .send("PUT", &format!("/v1/packs/{taken}"), Some(bytes.clone()))
            .await;
        assert_eq!(a.status, 409, "{taken}");
    }
    let bad = server
        .send("PUT", "/v1/packs/.hidden", Some(bytes.clone()))
        .await;
    assert_eq!(
        (bad.status, bad.body["error"]["details"]["field"].as_str()),
        (400, Some("name"))
    );

    let run = server
        .post(
            "/v1/runs",
            &json!({"pack": "mine", "input": {"calls": 2},
                    "script": [{"content": "a", "outputTokens": 1}, {"content": "b", "outputTokens": 2}]}),
        )
        .await;
    assert_eq!(run.status, 200, "{}", run.body);
    assert_eq!(run.body["status"], "ok", "{}", run.body);
    assert_eq!(run.body["calls"], 2);
    assert_eq!(
        run.body["attempts"],
        json!({"count": 2, "outputTokens": 3, "usageComplete": true})
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_call_is_ctx_call_ai_as_a_service() {
    let server = TestServer::start("[policy]\nallowedProviders = [\"mock\"]").await;
    let (request, script) = truncating(3);
    let a = server
        .post(
            "/v1/call",
            &json!({"request": request, "script": script, "events": true}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let attempts = &a.body["result"]["attempts"];
    assert_eq!(
        (
            attempts["count"].as_u64(),
            attempts["outputTokens"].as_u64()
        ),
        (Some(3), Some(207))
    );
    assert_eq!(attempts["structuredOutput"], "native");
    assert_eq!(a.body["result"]["data"], json!({"x": 1}));
    let retried = a.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "envelope.retry.attempted")
        .count();
    assert_eq!(retried, 2);

    // §B.5: a malformed retry is refused with validation_error naming it.
    let bad = server
        .post(
            "/v1/call",
            &json!({"request": {"messages": [], "retry": {"maxAttempts": 2.5}}}),
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert_eq!(bad.body["error"]["code"], "validation_error");
    assert_eq!(bad.body["error"]["details"]["field"], "retry.maxAttempts");

    let denied = server
        .post("/v1/call", &json!({"request": {"messages": [{"role": "user", "content": "x"}], "provider": "openai"}}))
        .await;
    // `openai` is not configured: refused before any request.
    assert_eq!(denied.status, 400, "{}", denied.body);
    let down = server
        .post(
            "/v1/call",
            &json!({"request": hello(), "script": [{"error": {"status": 400, "message": "bad request"}}]}),
        )
        .await;
    assert_eq!(down.status, 502, "{}", down.body);
    assert_eq!(
        down.body["error"]["details"]["totalAttempts"], 1,
        "{}",
        down.body
    );
    let elsewhere = server
        .post(
            "/v1/call",
            &json!({"request": {"messages": [], "provider": "other"}, "script": []}),
        )
        .await;
    assert_eq!(elsewhere.body["error"]["details"]["field"], "script");

    // Every request the mock answered is counted, by reason.
    let text = server.metrics().await;
    let requests: f64 = samples(&text, "callai_provider_requests_total")
        .iter()
        .map(|s| s.1)
        .sum();
    assert_eq!(requests, 4.0, "{text}");
    let by_reason = samples(&text, "callai_provider_requests_total");
    assert!(
        by_reason.contains(&(r#"{provider="mock",reason="truncation"}"#.into(), 2.0)),
        "{by_reason:?}"
    );
    assert_eq!(
        callai_tests::serve::metric_in(&text, r#"callai_calls_total{outcome="ok"}"#),
        1.0
    );
    assert_eq!(
        callai_tests::serve::metric_in(&text, r#"callai_calls_total{outcome="validation_error"}"#),
        2.0,
        "{text}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_denial_is_a_403() {
    let server = TestServer::start(
        "[policy]\nallowedProviders = [\"mock\"]\n[providers.openai]\nbaseUrl = \"http://127.0.0.1:9/v1\"\napiKeyEnv = \"\"",
    )
    .await;
    let a = server
        .post("/v1/call", &json!({"request": {"messages": [{"role": "user", "content": "x"}], "provider": "openai"}}))
        .await;
    assert_eq!(a.status, 403, "{}", a.body);
    assert_eq!(a.body["error"]["code"], "policy_denied");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_guards_everything_but_health_and_discovery() {
    let toml = "[server]\ntokenEnv = \"CALLAI_TEST_TOKEN\"";
    let server = TestServer::start_with(toml, None, |k| {
        (k == "CALLAI_TEST_TOKEN").then(|| "s3cret-token".to_owned())
    })
    .await;
    for path in ["/v1/facet", "/v1/packs", "/metrics", "/v1/runs/x"] {
        let none = server.send_as("GET", path, None, None).await;
        assert_eq!(none.status, 401, "{path}");
        assert_eq!(none.body["error"]["code"], "unauthorized");
        let wrong = server
            .send_as("GET", path, None, Some("s3cret-tokeN"))
            .await;
        assert_eq!(wrong.status, 401, "{path}");
        assert!(!wrong.body.to_string().contains("s3cret"), "{}", wrong.body);
    }
    let post = server
        .send_as("POST", "/v1/call", Some(b"{}".to_vec()), None)
        .await;
    assert_eq!(post.status, 401);
    for path in ["/healthz", "/.well-known/openwop"] {
        assert_eq!(
            server.send_as("GET", path, None, None).await.status,
            200,
            "{path}"
        );
    }
    assert_eq!(server.get("/v1/facet").await.status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_server_stays_on_loopback() {
    let config = callai_host::HostConfig::default();
    let options = callai_server::ServerOptions {
        listen: Some("0.0.0.0:0".parse().unwrap()),
        ..callai_server::ServerOptions::default()
    };
    let e = callai_server::Server::bind(config, options)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("server.tokenEnv"), "{e}");
    let config =
        callai_host::HostConfig::from_toml("[server]\ntokenEnv = \"CALLAI_NO_SUCH_VAR_0248\"")
            .unwrap();
    let options = callai_server::ServerOptions {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        env: std::sync::Arc::new(|_| None),
        ..callai_server::ServerOptions::default()
    };
    let e = callai_server::Server::bind(config, options)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("CALLAI_NO_SUCH_VAR_0248"), "{e}");
}

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
    let url = server.url.clone();
    let in_flight = tokio::spawn(async move {
        let body = json!({"pack": "echo-attempts", "input": hello(), "runId": "in-flight",
                          "script": [{"content": "finished", "outputTokens": 1}]});
        reqwest::Client::new()
            .post(format!("{url}/v1/runs"))
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    wait_until_running(&server, "in-flight").await;
    server.begin_shutdown();
    let answer: Value = serde_json::from_str(&in_flight.await.unwrap()).unwrap();
    assert_eq!(answer["status"], "ok", "{answer}");
    assert_eq!(answer["output"]["content"], "finished");
    server.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_fails_runs_past_the_grace_period_cleanly() {
    let mut server =
        TestServer::start("[mock]\nlatencyMs = 30000\n[server]\nshutdownGraceMs = 200").await;
    let url = server.url.clone();
    let in_flight = tokio::spawn(async move {
        let body = json!({"pack": "echo-attempts", "input": hello(), "runId": "in-flight",
                          "script": [{"content": "never", "outputTokens": 1}]});
        reqwest::Client::new()
            .post(format!("{url}/v1/runs"))
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    wait_until_running(&server, "in-flight").await;
    let started = std::time::Instant::now();
    server.begin_shutdown();
    let answer: Value = serde_json::from_str(&in_flight.await.unwrap()).unwrap();
    assert_eq!(answer["status"], "failed", "{answer}");
    assert_eq!(answer["error"]["kind"], "shutdown");
    server.stopped().await;
    // Stopped by the grace period, not by the 30 s provider.
    assert!(started.elapsed() < Duration::from_secs(20));
}
