//! What a held-out audit of the accounting found (issue 51, items 13 to
//! 16), against a real `serve` and loopback fakes: one reason per request
//! in every record, a tool reply's finish reason in its trace, an
//! unoffered tool's name never quoted back, and `structuredOutput` only
//! where a `responseSchema` was given.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::{TestServer, samples};
use callai_tests::wire::Api;
use serde_json::{Value, json};

fn down() -> Reply {
    Reply::Json(503, json!({"error": {"message": "overloaded"}}), vec![])
}

/// A loopback address nothing listens on: bound, then closed.
pub(crate) fn closed_port() -> String {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_after_an_unreached_target_has_one_reason_in_every_record() {
    let pb = FakeServer::repeating(down()).await;
    let toml = format!(
        "[providers.dead]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\nmodel = \"md\"\n\
         [providers.pb]\nkind = \"openai\"\nbaseUrl = \"{}\"\napiKeyEnv = \"\"\nmodel = \"mb\"\n\
         [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n\
         [models.chain]\ntargets = [\"dead\", \"pb/mb\"]\n",
        closed_port(),
        pb.url()
    );
    let server = TestServer::start(&toml).await;
    let body = json!({"request": {"model": "chain", "messages": [{"role": "user", "content": "hi"}]},
                      "events": true});
    let answer = server.post("/v1/call", &body).await;
    assert_eq!(
        answer.body["error"]["code"], "provider_unavailable",
        "{}",
        answer.body
    );
    let events = answer.body["events"].as_array().unwrap();
    // Each request's reason, as announced before it and as counted after.
    let of = |kind: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["type"] == kind)
            .map(|e| e["payload"]["reason"].as_str().unwrap().to_owned())
            .collect()
    };
    let (announced, counted) = (of("envelope.retry.attempted"), of("provider.usage"));
    assert_eq!(counted.len(), pb.count(), "one usage event per request");
    assert!(counted.len() >= 2, "{counted:?}");
    assert_eq!(
        announced,
        counted[1..],
        "each retry announced with the reason its request is counted under"
    );
    // The trace and the metrics say the same of each request.
    let trace = &server.get("/v1/calls").await.body["data"][0];
    let traced: Vec<&str> = trace["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    let words: Vec<String> = counted
        .iter()
        .map(|r| r.trim_start_matches("x-host-callai-").replace('-', "_"))
        .collect();
    assert_eq!(traced, words, "{trace}");
    let metrics = server.metrics().await;
    let requests = samples(&metrics, "callai_provider_requests_total");
    for reason in &counted[1..] {
        let n = counted.iter().filter(|r| *r == reason).count() as f64;
        let labels = format!("{{provider=\"pb\",reason=\"{reason}\"}}");
        assert!(
            requests.contains(&(labels.clone(), n)),
            "{labels} {requests:?}"
        );
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_tool_use_reply_is_traced_as_the_tool_call_it_is() {
    for api in [Api::Anthropic, Api::OpenAi] {
        let replies =
            vec![api.tool_reply("", &[("t1", "weather", "{\"city\": \"Oslo\"}")], Some(5))];
        let (server, _fake) = TestServer::before_fake(api.name(), "model = \"m-1\"", replies).await;
        let body = json!({"request": {"messages": [{"role": "user", "content": "weather?"}],
            "tools": [{"name": "weather", "parameters": {"type": "object"}}]}});
        let answer = server.post("/v1/call", &body).await;
        assert_eq!(
            answer.body["result"]["finishReason"], "tool-call",
            "{}",
            answer.body
        );
        let trace = &server.get("/v1/calls").await.body["data"][0];
        assert_eq!(
            trace["requests"][0]["outcome"], "tool-call",
            "{:?}: {trace}",
            api
        );
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unoffered_tool_is_never_quoted_back_the_offered_ones_are_named() {
    let secret = "card_4111111111111111_exp_0927_cvv_123";
    let api = Api::OpenAi;
    let replies = vec![
        api.tool_reply("", &[("c1", secret, "{}")], Some(5)),
        api.tool_reply("", &[("c2", secret, "{}")], Some(5)),
    ];
    let (server, fake) = TestServer::before_fake(api.name(), "model = \"m-1\"", replies).await;
    let body = json!({"request": {"messages": [{"role": "user", "content": "pay"}],
        "tools": [{"name": "search", "parameters": {"type": "object"}},
                  {"name": "weather", "parameters": {"type": "object"}}],
        "retry": {"maxAttempts": 2}}, "events": true});
    let answer = server.post("/v1/call", &body).await;
    assert_eq!(
        answer.body["error"]["code"], "envelope_invalid",
        "{}",
        answer.body
    );
    let received = fake.received();
    assert_eq!(received.len(), 2);
    // The corrective text sent with the retry names what was offered, and
    // no byte of the reply's name.
    let retry = received[1].body["messages"].to_string();
    assert!(
        retry.contains("search") && retry.contains("weather"),
        "{retry}"
    );
    // The model's own turn is sent back as it was (it is the conversation);
    // what the host wrote itself never repeats the name.
    let host_text: Vec<&Value> = received[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "assistant")
        .collect();
    assert!(
        !json!(host_text).to_string().contains("4111"),
        "{host_text:?}"
    );
    let everything_else = json!([answer.body["error"], answer.body["events"]]).to_string();
    assert!(!everything_else.contains("4111"), "{everything_else}");
    let attempted = answer.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "envelope.retry.attempted")
        .unwrap();
    let previous = attempted["payload"]["previousError"].as_str().unwrap();
    assert!(previous.contains("search, weather"), "{previous}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_tool_call_without_a_response_schema_says_no_structured_output() {
    let api = Api::Anthropic;
    let call = |id: &str| api.tool_reply("", &[(id, "weather", "{\"city\": \"Oslo\"}")], Some(4));
    let (server, _fake) =
        TestServer::before_fake(api.name(), "model = \"m-1\"", vec![call("a"), call("b")]).await;
    let tools = json!([{"name": "weather", "parameters": {"type": "object"}}]);
    let forced = json!({"request": {"messages": [{"role": "user", "content": "w"}],
        "tools": tools, "toolChoice": "required"}});
    let answer = server.post("/v1/call", &forced).await;
    let attempts = &answer.body["result"]["attempts"];
    assert_eq!(attempts["count"], 1, "{}", answer.body);
    assert!(attempts.get("structuredOutput").is_none(), "{attempts}");
    let trace = &server.get("/v1/calls").await.body["data"][0];
    assert!(
        trace["attempts"].get("structuredOutput").is_none(),
        "{trace}"
    );
    // With a responseSchema the field is there, native through the forced
    // tool Anthropic answers with.
    let (server2, _fake2) = TestServer::before_fake(
        api.name(),
        "model = \"m-1\"",
        vec![api.reply("", Some(json!({"city": "Oslo"})), "tool_use", Some(4))],
    )
    .await;
    let schema = json!({"request": {"messages": [{"role": "user", "content": "w"}],
        "responseSchema": {"type": "object", "required": ["city"]}}});
    let answer = server2.post("/v1/call", &schema).await;
    assert_eq!(
        answer.body["result"]["attempts"]["structuredOutput"], "native",
        "{}",
        answer.body
    );
    server.shutdown().await;
    server2.shutdown().await;
}
