//! `callai serve`, through its HTTP API: every endpoint and status, the
//! token, bad bodies, uploads, ctx.callAI as a service.

use callai_tests::serve::{TestServer, hello, samples, truncating};
use serde_json::json;
use std::time::Duration;

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
            &json!({"request": {"messages": [{"role": "user", "content": "x"}], "provider": "other"},
                    "script": []}),
        )
        .await;
    // A provider the host does not have is the engine's refusal, as on
    // `callai run` (issue 22 #11: it was refused on `script`).
    assert_eq!(elsewhere.body["error"]["details"]["field"], "provider");

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
        // The malformed retry, the provider this host lacks, and the other
        // provider it lacks (refused with a script too).
        callai_tests::serve::metric_in(&text, r#"callai_calls_total{outcome="validation_error"}"#),
        3.0,
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
    // Issue 22 #11: with a script too, the policy speaks first, as on
    // `callai run` (it was a 400 naming `script`).
    let a = server
        .post("/v1/call", &json!({"request": {"messages": [{"role": "user", "content": "x"}], "provider": "openai"},
                                  "script": [{"content": "x"}]}))
        .await;
    assert_eq!(a.status, 403, "{}", a.body);
    assert_eq!(a.body["error"]["code"], "policy_denied");
    server.shutdown().await;
}

/// Issue 22 #18: a call that brings no script gets the built-in mock's
/// default reply, as `callai run` gives a component without one (it was
/// `mock script exhausted: request 1 but the script has 0 replies`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_without_a_script_gets_the_default_reply_or_a_valid_instance() {
    let server = TestServer::start("").await;
    let call = json!({"request": hello()});
    for _ in 0..2 {
        let a = server.post("/v1/call", &call).await;
        assert_eq!(a.status, 200, "{}", a.body);
        let result = &a.body["result"];
        assert_eq!(result["content"], "Hello from the built-in mock provider.");
        assert_eq!(result["attempts"]["count"], 1);
    }
    // Issue 36 #1: a structured call without a script gets a value its
    // schema accepts, at the first attempt, natively and in the prompt
    // (it was `mock script exhausted: request 2 but the script has 1
    // replies`).
    let schema = json!({"type": "object", "additionalProperties": false,
        "properties": {"scene": {"type": "string", "minLength": 3},
                       "mood": {"enum": ["calm", "tense"]},
                       "beats": {"type": "array", "minItems": 2,
                                 "items": {"type": "integer", "minimum": 1}}},
        "required": ["scene", "mood", "beats"]});
    let structured = json!({"request": {"messages": [{"role": "user", "content": "a scene"}],
                                        "responseSchema": schema}});
    let a = server.post("/v1/call", &structured).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let result = &a.body["result"];
    assert_eq!(
        result["data"],
        json!({"scene": "xxx", "mood": "calm", "beats": [1, 1]}),
        "{result}"
    );
    assert_eq!(result["attempts"]["count"], 1, "{result}");
    assert_eq!(result["attempts"]["structuredOutput"], "native");
    server.shutdown().await;
    let prompt = TestServer::start("[mock]\nnative = false\n").await;
    let a = prompt.post("/v1/call", &structured).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["result"]["attempts"]["count"], 1);
    assert_eq!(a.body["result"]["attempts"]["structuredOutput"], "prompt");
    prompt.shutdown().await;
}
