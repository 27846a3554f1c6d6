//! What an SRE reads (issue 51, items 7 and 8), against a real `serve`,
//! loopback fakes and an in-process OTLP receiver: a target failing again
//! and again is skipped for a cool-down and then tried by one call, its
//! state in `/metrics`; latency histograms for every endpoint, errors per
//! provider and status, input tokens; spans that carry the tenant and the
//! call id, under the caller's `traceparent`.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::otlp::Receiver;
use callai_tests::serve::{TestServer, samples};
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::time::Duration;

fn down() -> Reply {
    Reply::Json(503, json!({"error": {"message": "overloaded"}}), vec![])
}

fn ok() -> Reply {
    Api::OpenAi.reply("fine", None, "stop", Some(3))
}

fn chain(dead: &str, live: &str, cool_down_ms: u64) -> String {
    format!(
        "[providers.dead]\nkind = \"openai\"\nbaseUrl = \"{dead}\"\napiKeyEnv = \"\"\nmodel = \"d\"\n\
         [providers.live]\nkind = \"openai\"\nbaseUrl = \"{live}\"\napiKeyEnv = \"\"\nmodel = \"l\"\n\
         [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\ncircuitBreakerFailures = 3\n\
         circuitBreakerCoolDownMs = {cool_down_ms}\n\
         [models.fast]\ntargets = [\"dead\", \"live\"]\n"
    )
}

fn call() -> Value {
    json!({"request": {"model": "fast", "messages": [{"role": "user", "content": "hi"}]}})
}

/// The `callai_circuit_breaker_state` series of `dead` at 1.
fn dead_state(metrics: &str) -> String {
    samples(metrics, "callai_circuit_breaker_state")
        .into_iter()
        .find(|(labels, n)| labels.contains("provider=\"dead\"") && *n == 1.0)
        .map(|(labels, _)| labels)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_failing_again_and_again_is_skipped_for_a_cool_down_then_tried_once() {
    let dead = FakeServer::repeating(down()).await;
    let live = FakeServer::repeating(ok()).await;
    let server = TestServer::start(&chain(dead.url(), live.url(), 400)).await;
    for _ in 0..3 {
        let answer = server.post("/v1/call", &call()).await;
        assert_eq!(answer.body["result"]["content"], "fine", "{}", answer.body);
    }
    assert_eq!(dead.count(), 3, "each call tried it first");
    assert!(dead_state(&server.metrics().await).contains("state=\"open\""));
    // Open: the next calls go to the live target first, and only there.
    for _ in 0..5 {
        let answer = server.post("/v1/call", &call()).await;
        assert_eq!(answer.body["result"]["attempts"]["count"], 1);
    }
    assert_eq!((dead.count(), live.count()), (3, 8));
    // The cool-down over: half open, one call tries it first again.
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(dead_state(&server.metrics().await).contains("state=\"half_open\""));
    let answer = server.post("/v1/call", &call()).await;
    assert_eq!(answer.body["result"]["attempts"]["count"], 2);
    assert_eq!(dead.count(), 4);
    // It failed again: open, skipped.
    server.post("/v1/call", &call()).await;
    assert_eq!(dead.count(), 4);
    let metrics = server.metrics().await;
    assert!(dead_state(&metrics).contains("state=\"open\""), "{metrics}");
    let errors = samples(&metrics, "callai_provider_errors_total");
    assert!(
        errors.contains(&(r#"{provider="dead",status="503"}"#.into(), 4.0)),
        "{errors:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_is_timed_and_input_tokens_are_counted_beside_output() {
    let live = FakeServer::repeating(ok()).await;
    let server = TestServer::start(&chain(live.url(), live.url(), 1000)).await;
    let hi = json!([{"role": "user", "content": "hi"}]);
    server.post("/v1/call", &call()).await;
    server
        .post(
            "/v1/chat/completions",
            &json!({"model": "fast", "messages": hi}),
        )
        .await;
    server
        .post(
            "/v1/messages",
            &json!({"model": "fast", "max_tokens": 10, "messages": hi}),
        )
        .await;
    server.get("/v1/models").await;
    let metrics = server.metrics().await;
    let counts = samples(&metrics, "callai_http_request_duration_seconds_count");
    for endpoint in [
        "/v1/call",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/models",
    ] {
        let method = if endpoint == "/v1/models" {
            "GET"
        } else {
            "POST"
        };
        let labels = format!("{{endpoint=\"{endpoint}\",method=\"{method}\",status=\"200\"}}");
        assert!(
            counts.contains(&(labels.clone(), 1.0)),
            "{labels} in {counts:?}"
        );
    }
    assert!(
        metrics.contains(
            "callai_http_request_duration_seconds_bucket{le=\"0.001\",endpoint=\"/v1/call\""
        ),
        "{metrics}"
    );
    // 11 input tokens of each of the three calls, as the fake reports.
    let input = samples(&metrics, "callai_input_tokens_total");
    assert!(
        input
            .iter()
            .any(|(l, n)| l.contains("provider=\"dead\"") && *n == 33.0),
        "{input:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_spans_carry_its_tenant_and_id_under_the_callers_traceparent() {
    let receiver = Receiver::start().await;
    let toml = format!(
        "[telemetry]\notlpEndpoint = \"{}\"\n[server]\ntokenEnv = \"ADMIN\"\n\
         [tenants.acme]\ntokenEnv = \"ACME\"\n",
        receiver.endpoint
    );
    let server = TestServer::start_with(&toml, None, |k| match k {
        "ADMIN" => Some("tok-admin".into()),
        "ACME" => Some("tok-acme".into()),
        _ => None,
    })
    .await;
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", server.url))
        .bearer_auth("tok-acme")
        .header("traceparent", parent)
        .header("content-type", "application/json")
        .body(json!({"model": "mock", "messages": [{"role": "user", "content": "hi"}]}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["x-callai-call-id"]
        .to_str()
        .unwrap()
        .to_owned();
    // And one with a traceparent that is not one: a trace of its own.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/call", server.url))
        .bearer_auth("tok-acme")
        .header("traceparent", "not-a-trace")
        .header("content-type", "application/json")
        .body(json!({"request": {"messages": [{"role": "user", "content": "hi"}]}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    server.shutdown().await;
    let spans = receiver.wait_for(4).await;
    let chats: Vec<_> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat"))
        .collect();
    assert_eq!(chats.len(), 2, "{spans:#?}");
    let under = chats
        .iter()
        .find(|s| s.attr("callai.call.id") == &json!(id))
        .expect("the call's span names its id");
    assert_eq!(under.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(under.parent_span_id, "00f067aa0ba902b7");
    assert_eq!(under.attr("callai.tenant"), &json!("acme"));
    let own = chats
        .iter()
        .find(|s| s.attr("callai.call.id") != &json!(id))
        .unwrap();
    assert_eq!(own.parent_span_id, "");
    assert_ne!(own.trace_id, under.trace_id);
    assert_eq!(own.attr("callai.tenant"), &json!("acme"));
}
