//! The drop-in endpoints of `callai serve` (issue 23), with a plain HTTP
//! client: the OpenAI and Anthropic shapes in and out, RFC 0248 in the
//! `callai` extension and the `x-callai-*` headers, `usage` the final
//! attempt's, streaming, the model list, and every refusal in the API's own
//! error shape naming its `param`.

use callai_tests::fake_server::FakeServer;
use callai_tests::serve::{TestServer, metric_in};
use callai_tests::wire::Api;
use serde_json::{Value, json};

const KEY: &str = "sk-fake-dropin";

/// A server whose provider `fake` is an OpenAI-compatible fake answering
/// `replies` in turn (and the mock).
async fn server_before(replies: Vec<callai_tests::fake_server::Reply>) -> (TestServer, FakeServer) {
    let fake = FakeServer::start(replies).await;
    let toml = format!(
        "[providers.fake]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\nmodel = \"m-1\"\n[retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n",
        fake.url()
    );
    let server =
        TestServer::start_with(&toml, None, |k| (k == "FAKE_KEY").then(|| KEY.to_owned())).await;
    (server, fake)
}

async fn post(
    server: &TestServer,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{}{path}", server.url))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    request.send().await.unwrap()
}

async fn json_of(r: reqwest::Response) -> Value {
    serde_json::from_str(&r.text().await.unwrap()).unwrap()
}

fn header(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

fn scene_schema() -> Value {
    json!({"type": "object", "required": ["scene"], "properties": {"scene": {"type": "string"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_carries_the_summed_attempts_and_the_final_usage() {
    let api = Api::OpenAi;
    let (server, fake) = server_before(vec![
        api.reply("{\"scene\": \"cut", None, "length", Some(100)),
        api.reply("{\"place\": 1}", None, "stop", Some(30)),
        api.reply("{\"scene\": \"ok\"}", None, "stop", Some(20)),
    ])
    .await;
    let body = json!({
        "model": "fake/m-2",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "a scene"}],
        "max_tokens": 100,
        "response_format": {"type": "json_schema", "json_schema": {"name": "scene", "schema": scene_schema()}},
        "user": "u-1", "seed": 7, "n": 1
    });
    let r = post(&server, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-callai-attempts-count").as_deref(), Some("3"));
    assert_eq!(
        header(&r, "x-callai-attempts-output-tokens").as_deref(),
        Some("150")
    );
    assert_eq!(
        header(&r, "x-callai-usage-complete").as_deref(),
        Some("true")
    );
    assert_eq!(
        header(&r, "x-callai-structured-output").as_deref(),
        Some("native")
    );
    let answer: Value = json_of(r).await;
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["model"], "fake/m-1", "the model that answered");
    let content = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(content).unwrap(),
        json!({"scene": "ok"})
    );
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        answer["usage"]["completion_tokens"], 20,
        "the final attempt's"
    );
    assert_eq!(answer["callai"]["attempts"]["count"], 3);
    assert_eq!(answer["callai"]["attempts"]["outputTokens"], 150);
    let sent = fake.received();
    assert_eq!(sent.len(), 3, "the fake saw attempts.count requests");
    assert_eq!(sent[0].body["model"], "m-2");
    assert_eq!(
        sent[1].body["max_tokens"], 200,
        "the truncation doubled the budget"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_maps_the_anthropic_shape_and_takes_x_api_key() {
    let toml = "[server]\ntokenEnv = \"CALLAI_TOKEN\"\n";
    let server = TestServer::start_with(toml, None, |k| {
        (k == "CALLAI_TOKEN").then(|| "t0k".to_owned())
    })
    .await;
    let body = json!({
        "model": "mock", "max_tokens": 50, "system": "be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "output_config": {"format": {"type": "json_schema", "schema": scene_schema()}},
        "callai": {"script": [{"content": "{\"scene\": 1}", "outputTokens": 9}, {"content": "{\"scene\": \"x\"}"}]}
    });
    let unauthorised = post(&server, "/v1/messages", &body, &[]).await;
    assert_eq!(unauthorised.status(), 401);
    let e: Value = json_of(unauthorised).await;
    assert_eq!(
        (e["type"].as_str(), e["error"]["type"].as_str()),
        (Some("error"), Some("authentication_error"))
    );
    let r = post(
        &server,
        "/v1/messages",
        &body,
        &[("x-api-key", "t0k"), ("anthropic-version", "2023-06-01")],
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-callai-attempts-count").as_deref(), Some("2"));
    assert_eq!(
        header(&r, "x-callai-usage-complete").as_deref(),
        Some("false")
    );
    assert_eq!(
        header(&r, "x-callai-attempts-output-tokens").as_deref(),
        Some("9")
    );
    let answer: Value = json_of(r).await;
    assert_eq!(answer["type"], "message");
    assert_eq!(answer["content"][0]["text"], "{\"scene\":\"x\"}");
    assert_eq!(answer["stop_reason"], "end_turn");
    assert_eq!(
        answer["usage"],
        json!({}),
        "the final attempt reported no usage"
    );
    assert_eq!(answer["callai"]["attempts"]["usageComplete"], false);
    // The OpenAI shape for a chat completion without the token.
    let r = post(
        &server,
        "/v1/chat/completions",
        &json!({"model": "mock", "messages": []}),
        &[],
    )
    .await;
    assert_eq!(r.status(), 401);
    let e: Value = json_of(r).await;
    assert_eq!(e["error"]["type"], "authentication_error");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_host_cannot_honour_is_refused_naming_its_param() {
    let server = TestServer::start("[server]\nmaxBodyBytes = 4096\n").await;
    let hi = json!([{"role": "user", "content": "hi"}]);
    let cases = [
        (json!({"model": "mock", "messages": hi, "n": 2}), "n"),
        (
            json!({"model": "mock", "messages": hi, "tools": []}),
            "tools",
        ),
        (
            json!({"model": "mock", "messages": hi, "logprobs": true}),
            "logprobs",
        ),
        (json!({"model": "gpt-4o", "messages": hi}), "model"),
        (
            json!({"model": "mock", "messages": hi, "callai": {"retry": {"maxAttempts": 0}}}),
            "retry.maxAttempts",
        ),
        (
            json!({"model": "mock", "messages": hi, "callai": {"retyr": {}}}),
            "callai.retyr",
        ),
        (
            json!({"model": "mock", "messages": [{"role": "function", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "mock", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
            "messages[0].content[0].image_url",
        ),
        (
            json!({"model": "mock", "messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}),
            "messages[0].content[0]",
        ),
        (
            json!({"model": "mock", "messages": hi, "frobnicate": 1}),
            "frobnicate",
        ),
    ];
    for (body, param) in cases {
        let r = post(&server, "/v1/chat/completions", &body, &[]).await;
        assert_eq!(r.status(), 400, "{body}");
        let e: Value = json_of(r).await;
        assert_eq!(e["error"]["param"], param, "{body}: {e}");
        assert_eq!(e["error"]["type"], "invalid_request_error");
    }
    // A schema past limits.maxSchemaWork is named in the API's own words.
    let doubling = callai_tests::schemas::doubling_in_form("pointer", 31);
    let costly = json!({"model": "mock", "messages": hi,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": doubling}}});
    let r = post(&server, "/v1/chat/completions", &costly, &[]).await;
    assert_eq!(r.status(), 400);
    let e = json_of(r).await;
    assert_eq!(
        e["error"]["param"], "response_format.json_schema.schema",
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maxSchemaWork"),
        "{e}"
    );
    let r = post(
        &server,
        "/v1/chat/completions",
        &json!({"model": "mock", "messages": hi}),
        &[("x-callai-max-attempts", "many")],
    )
    .await;
    assert_eq!(r.status(), 400);
    assert_eq!(json_of(r).await["error"]["param"], "retry.maxAttempts");
    let big = json!({"model": "mock", "messages": [{"role": "user", "content": "x".repeat(5000)}]});
    let r = post(&server, "/v1/chat/completions", &big, &[]).await;
    assert_eq!(r.status(), 413);
    let r = post(
        &server,
        "/v1/messages",
        &json!({"model": "mock", "max_tokens": 5, "messages": hi, "thinking": {"type": "adaptive"}}),
        &[],
    )
    .await;
    assert_eq!(r.status(), 400);
    let e: Value = json_of(r).await;
    assert_eq!(e["type"], "error");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("thinking: extended thinking, which [\"mock\"] cannot take"),
        "{e}"
    );
    an_exhausted_envelope_is_422(&server, &hi).await;
    server.shutdown().await;
}

/// An exhausted envelope is 422, and says the host will not be helped by
/// the client sending it again.
async fn an_exhausted_envelope_is_422(server: &TestServer, hi: &Value) {
    let truncating = json!({"model": "mock", "messages": hi, "max_tokens": 10,
        "response_format": {"type": "json_object"},
        "callai": {"retry": {"maxAttempts": 1}, "script": [{"content": "{", "finishReason": "length", "outputTokens": 10}]}});
    let r = post(server, "/v1/chat/completions", &truncating, &[]).await;
    assert_eq!(r.status(), 422);
    assert_eq!(header(&r, "x-should-retry").as_deref(), Some("false"));
    assert_eq!(header(&r, "x-callai-attempts-count").as_deref(), Some("1"));
    let e: Value = json_of(r).await;
    assert_eq!(e["error"]["code"], "envelope_truncation_unrecoverable");
}

/// The `data:` payloads of an SSE body, with their `event:` names.
fn frames(text: &str) -> Vec<(Option<String>, String)> {
    text.split("\n\n")
        .filter(|f| !f.trim().is_empty())
        .map(|f| {
            let event = f
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .map(str::to_owned);
            let data = f
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap()
                .to_owned();
            (event, data)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_apis_stream_with_usage_and_attempts_at_the_end() {
    let server = TestServer::start("").await;
    let script = json!([{"error": {"status": 503, "message": "busy"}}, {"content": "Hello", "outputTokens": 5, "inputTokens": 2}]);
    let body = json!({"model": "mock", "messages": [{"role": "user", "content": "hi"}], "stream": true,
        "stream_options": {"include_usage": true}, "callai": {"script": script}});
    let r = post(
        &server,
        "/v1/chat/completions",
        &body,
        &[("x-stainless-retry-count", "1")],
    )
    .await;
    assert_eq!(r.status(), 200);
    assert!(
        header(&r, "content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let frames_seen = frames(&r.text().await.unwrap());
    assert_eq!(frames_seen.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = frames_seen[..frames_seen.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Hello");
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["completion_tokens"], 5);
    assert_eq!(last["callai"]["attempts"]["count"], 2);
    assert_eq!(last["callai"]["attempts"]["outputTokens"], 5);
    assert_eq!(
        last["callai"]["attempts"]["usageComplete"], false,
        "the 503 reported none"
    );
    let body = json!({"model": "mock", "max_tokens": 50, "stream": true,
        "messages": [{"role": "user", "content": "hi"}], "callai": {"script": script}});
    let r = post(&server, "/v1/messages", &body, &[]).await;
    let frames_seen = frames(&r.text().await.unwrap());
    let events: Vec<&str> = frames_seen
        .iter()
        .map(|(e, _)| e.as_deref().unwrap())
        .collect();
    assert_eq!(
        events,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let delta: Value = serde_json::from_str(&frames_seen[4].1).unwrap();
    assert_eq!(delta["usage"]["output_tokens"], 5);
    assert_eq!(delta["callai"]["attempts"]["count"], 2);
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    let metrics = server.metrics().await;
    assert_eq!(
        metric_in(
            &metrics,
            "callai_client_retries_total{endpoint=\"chat_completions\"}"
        ),
        1.0
    );
    assert_eq!(
        metric_in(&metrics, "callai_calls_total{outcome=\"ok\"}"),
        2.0
    );
    let models = server.get("/v1/models").await.body;
    assert_eq!(models["object"], "list");
    assert!(
        models["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"] == "mock/mock-1" && m["owned_by"] == "mock"),
        "{models}"
    );
    server.shutdown().await;
}
