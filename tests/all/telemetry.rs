//! OpenTelemetry traces from `callai serve`, received over OTLP/HTTP by a
//! receiver in this process and decoded: a span per node run, a `chat
//! {model}` span per ctx.callAI in the GenAI conventions, one child span
//! per provider request.

use callai_tests::otlp::{Receiver, Span};
use callai_tests::serve::TestServer;
use serde_json::json;

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one span {name:?} in {spans:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_traced_call_by_call_and_request_by_request() {
    let receiver = Receiver::start().await;
    let toml = format!(
        "[telemetry]\notlpEndpoint = \"{}\"\nserviceName = \"callai-test\"",
        receiver.endpoint
    );
    let server = TestServer::start(&toml).await;
    let request = json!({
        "messages": [{"role": "user", "content": "hi"}],
        "maxTokens": 100,
        "responseSchema": {"type": "object", "required": ["x"]}
    });
    let script = json!([
        {"content": "{\"x\": ", "finishReason": "length", "outputTokens": 100, "inputTokens": 10},
        {"content": "{\"x\": 1}", "outputTokens": 7, "inputTokens": 12}
    ]);
    let run = server
        .post(
            "/v1/runs",
            &json!({"pack": "echo-attempts", "input": request, "script": script, "runId": "traced"}),
        )
        .await;
    assert_eq!(run.body["status"], "ok", "{}", run.body);
    // A call of its own (no run above it), refused before any request.
    let refused = server
        .post("/v1/call", &json!({"request": {"messages": []}}))
        .await;
    assert_eq!(refused.status, 400);
    // Shutting down sends what is left.
    server.shutdown().await;
    let spans = receiver.wait_for(5).await;
    assert!(
        spans.iter().all(|s| s.service == "callai-test"),
        "{spans:#?}"
    );

    let root = one(&spans, "run conformance.callai.echo-attempts");
    assert_eq!(root.parent_span_id, "");
    assert_eq!(root.attr("callai.run.id"), "traced");
    assert_eq!(root.attr("callai.pack"), "echo-attempts");
    assert_eq!(root.status_code, 1);

    let chat = one(&spans, "chat mock-1");
    assert_eq!(chat.parent_span_id, root.span_id);
    assert_eq!(chat.trace_id, root.trace_id);
    for (key, want) in [
        ("gen_ai.operation.name", json!("chat")),
        ("gen_ai.provider.name", json!("mock")),
        ("gen_ai.request.model", json!("mock-1")),
        ("gen_ai.request.max_tokens", json!(100)),
        ("gen_ai.response.finish_reasons", json!(["stop"])),
        ("gen_ai.usage.input_tokens", json!(22)),
        ("gen_ai.usage.output_tokens", json!(107)),
        ("callai.attempts.count", json!(2)),
        ("callai.attempts.usage_complete", json!(true)),
    ] {
        assert_eq!(chat.attr(key), &want, "{key} of {chat:#?}");
    }

    let mut attempts: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("attempt "))
        .collect();
    attempts.sort_by_key(|s| s.attr("callai.attempt.index").as_i64());
    assert_eq!(attempts.len(), 2, "{spans:#?}");
    let want = [
        (1, "first", 100, 100, "length"),
        (2, "truncation", 200, 7, "stop"),
    ];
    for (span, (index, reason, max_tokens, out, finish)) in attempts.iter().zip(want) {
        assert_eq!(span.parent_span_id, chat.span_id);
        assert_eq!(span.attr("callai.attempt.index"), &json!(index));
        assert_eq!(span.attr("callai.attempt.reason"), &json!(reason));
        assert_eq!(span.attr("gen_ai.request.max_tokens"), &json!(max_tokens));
        assert_eq!(span.attr("gen_ai.usage.output_tokens"), &json!(out));
        assert_eq!(
            span.attr("gen_ai.response.finish_reasons"),
            &json!([finish])
        );
    }

    let refusal = one(&spans, "chat");
    assert_eq!(refusal.parent_span_id, "");
    assert_eq!(refusal.attr("error.type"), "validation_error");
    assert_eq!(refusal.attr("callai.attempts.count"), &json!(0));
    assert_eq!(refusal.status_code, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_request_carries_its_http_status() {
    use callai_tests::fake_server::{FakeServer, Reply};
    let ok = json!({"model": "fake", "choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 5}});
    let fake = FakeServer::start(vec![
        Reply::Json(503, json!({"error": {"message": "busy"}}), vec![]),
        Reply::ok(ok),
    ])
    .await;
    let receiver = Receiver::start().await;
    let toml = format!(
        "[telemetry]\notlpEndpoint = \"{}\"\n[retry]\nbackoffBaseMs = 0\nbackoffMaxMs = 0\n\
         [defaults]\nprovider = \"openai\"\n[providers.openai]\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\nmodel = \"fake\"\n\
         prices = {{ input = 1.0, output = 2.0, currency = \"USD\" }}",
        receiver.endpoint,
        fake.url()
    );
    let server = TestServer::start(&toml).await;
    let a = server
        .post(
            "/v1/call",
            &json!({"request": {"messages": [{"role": "user", "content": "hi"}]}}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["result"]["attempts"]["count"], 2);
    server.shutdown().await;
    let spans = receiver.wait_for(3).await;
    let chat = one(&spans, "chat fake");
    assert_eq!(chat.parent_span_id, "");
    assert_eq!(chat.attr("gen_ai.provider.name"), "openai");
    let first = one(&spans, "attempt 1");
    assert_eq!(first.attr("http.response.status_code"), &json!(503));
    assert_eq!(first.attr("error.type"), "503");
    assert_eq!(first.status_code, 2);
    let second = one(&spans, "attempt 2");
    assert_eq!(second.attr("http.response.status_code"), &json!(200));
    assert_eq!(
        second.attr("callai.attempt.reason"),
        "x-host-callai-transient"
    );
    assert_eq!(second.attr("gen_ai.usage.output_tokens"), &json!(5));
    // Each attempt carries its cost (issue 35, item 5): the 503 nothing, as
    // no provider bills a refusal (issue 51, item 1), and complete; the
    // reply at 3 and 5 tokens, per million at 1 and 2; the call their sum.
    let amount = |s: &Span| s.attr("callai.cost.amount").as_f64().unwrap();
    assert_eq!(amount(first), 0.0);
    assert_eq!(first.attr("callai.cost.complete"), &json!(true));
    assert_eq!(amount(second), 13e-6, "exactly: 13 billionths of a dollar");
    assert_eq!(second.attr("callai.cost.complete"), &json!(true));
    assert_eq!(second.attr("callai.cost.currency"), "USD");
    assert_eq!(amount(chat), amount(second));
    assert_eq!(chat.attr("callai.cost.complete"), &json!(true));
}
