//! Tool calls through `callai serve` (issue 33), with a plain HTTP client
//! in front and loopback fakes of both provider kinds behind: either
//! drop-in against either kind, a malformed call retried with corrective
//! text that names the tool (each request counted, output tokens summed),
//! calls and results mapped both ways, streamed calls in each API's
//! deltas, and what the host cannot take refused naming it. Each test
//! checks what the fake received, not only what came back.

use callai_tests::fake_server::{FakeServer, Received, Reply};
use callai_tests::serve::{CallaiHeaders, TestServer};
use callai_tests::wire::Api;
use serde_json::{Value, json};

/// A server whose provider `p` speaks `api` to a fake answering `replies`.
async fn serve(api: Api, replies: Vec<Reply>) -> (TestServer, FakeServer) {
    TestServer::before_fake(api.name(), "model = \"m-1\"", replies).await
}

async fn post(server: &TestServer, path: &str, body: &Value) -> (u16, Value, CallaiHeaders) {
    let answer = server.exchange(path, body, None).await;
    (answer.status, answer.body, answer.headers)
}

fn weather_schema() -> Value {
    json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}},
           "additionalProperties": false})
}

/// The replies of a malformed call (for Anthropic, whose input is always
/// an object, one against the schema), then a valid one.
fn bad_then_good(api: Api) -> Vec<Reply> {
    let bad = match api {
        Api::OpenAi => "{\"city\": ",
        Api::Anthropic => "{\"town\": \"Oslo\"}",
    };
    vec![
        api.tool_reply("", &[("call_1", "weather", bad)], Some(7)),
        api.tool_reply(
            "",
            &[("call_2", "weather", "{\"city\": \"Oslo\"}")],
            Some(9),
        ),
    ]
}

/// The tool names the fake was offered, whichever API.
fn offered(received: &Received) -> Vec<String> {
    received.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .or(t["function"]["name"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_client_calls_tools_through_either_provider_kind() {
    for kind in [Api::OpenAi, Api::Anthropic] {
        let (server, fake) = serve(kind, bad_then_good(kind)).await;
        let body = json!({
            "model": "p", "max_tokens": 100,
            "messages": [{"role": "user", "content": "Weather in Oslo?"}],
            "tools": [{"type": "function", "function": {"name": "weather",
                       "description": "The weather in a city", "parameters": weather_schema()}}]
        });
        let (status, answer, headers) = post(&server, "/v1/chat/completions", &body).await;
        assert_eq!(status, 200, "{kind:?}: {answer}");
        let choice = &answer["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls", "{kind:?}");
        assert_eq!(choice["message"]["content"], Value::Null);
        let call = &choice["message"]["tool_calls"][0];
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], "weather");
        assert_eq!(call["id"], "call_2");
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"city": "Oslo"}));
        assert_eq!(headers.get("x-callai-attempts-count"), Some("2"));
        assert_eq!(headers.get("x-callai-attempts-output-tokens"), Some("16"));
        assert_eq!(answer["callai"]["attempts"]["count"], 2);
        assert_eq!(
            answer["usage"]["completion_tokens"], 9,
            "the final attempt's"
        );
        let seen = fake.received();
        assert_eq!(seen.len(), 2, "{kind:?}");
        assert_eq!(offered(&seen[0]), ["weather"], "{kind:?}");
        assert_eq!(offered(&seen[1]), ["weather"]);
        let corrective = seen[1].last_text();
        assert!(
            corrective.contains("tool `weather`"),
            "{kind:?}: {corrective}"
        );
        match kind {
            Api::OpenAi => {
                assert_eq!(seen[0].body["tool_choice"], "auto");
                assert_eq!(seen[0].body["tools"][0]["type"], "function");
            }
            Api::Anthropic => {
                assert_eq!(seen[0].body["tool_choice"], json!({"type": "auto"}));
                assert_eq!(seen[0].body["tools"][0]["input_schema"], weather_schema());
            }
        }
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_client_calls_tools_through_either_provider_kind() {
    for kind in [Api::OpenAi, Api::Anthropic] {
        let (server, fake) = serve(kind, bad_then_good(kind)).await;
        let mut body = json!({
            "model": "p", "max_tokens": 100,
            "messages": [{"role": "user", "content": "Weather in Oslo?"}],
            "tools": [{"name": "weather", "input_schema": weather_schema()}],
            "tool_choice": {"type": "tool", "name": "weather"}
        });
        // A prompt-caching breakpoint goes only to a provider that takes
        // one (serve_prompt_cache has the refusal where none does).
        if kind == Api::Anthropic {
            body["tools"][0]["cache_control"] = json!({"type": "ephemeral"});
        }
        let (status, answer, headers) = post(&server, "/v1/messages", &body).await;
        assert_eq!(status, 200, "{kind:?}: {answer}");
        assert_eq!(answer["stop_reason"], "tool_use");
        let blocks = answer["content"].as_array().unwrap();
        assert_eq!(blocks.len(), 1, "{answer}");
        assert_eq!(blocks[0]["type"], "tool_use");
        assert_eq!(blocks[0]["name"], "weather");
        assert_eq!(blocks[0]["input"], json!({"city": "Oslo"}));
        assert_eq!(headers.get("x-callai-attempts-count"), Some("2"));
        // A forced call without a responseSchema has no structured-output
        // mode (accounting.md, "Which calls say structuredOutput").
        assert_eq!(headers.get("x-callai-structured-output"), Some("none"));
        let seen = fake.received();
        assert_eq!(seen.len(), 2);
        match kind {
            Api::OpenAi => assert_eq!(
                seen[0].body["tool_choice"],
                json!({"type": "function", "function": {"name": "weather"}})
            ),
            Api::Anthropic => {
                assert_eq!(
                    seen[0].body["tool_choice"],
                    json!({"type": "tool", "name": "weather"})
                );
                let cached = json!({"type": "ephemeral"});
                assert_eq!(seen[0].body["tools"][0]["cache_control"], cached);
                assert_eq!(seen[1].body["tools"][0]["cache_control"], cached);
            }
        }
        assert!(seen[1].last_text().contains("tool `weather`"));
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_and_results_in_a_conversation_map_both_ways() {
    // An OpenAI conversation to an Anthropic provider.
    let (server, fake) = serve(
        Api::Anthropic,
        vec![Api::Anthropic.reply("Sunny.", None, "stop", Some(2))],
    )
    .await;
    let body = json!({
        "model": "p",
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_9", "type": "function",
              "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "call_9", "content": "sunny, 20 C"}
        ],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": weather_schema()}}]
    });
    let (status, answer, _) = post(&server, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], "Sunny.");
    let sent = &fake.received()[0].body["messages"];
    assert_eq!(
        sent[1],
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "call_9",
               "name": "weather", "input": {"city": "Oslo"}}]})
    );
    assert_eq!(
        sent[2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_9",
               "content": "sunny, 20 C"}]})
    );
    server.shutdown().await;

    // An Anthropic conversation to an OpenAI provider.
    let (server, fake) = serve(
        Api::OpenAi,
        vec![Api::OpenAi.reply("Sunny.", None, "stop", Some(2))],
    )
    .await;
    let body = json!({
        "model": "p", "max_tokens": 50,
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
              {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9",
              "content": [{"type": "text", "text": "sunny"}]}, {"type": "text", "text": "Thanks"}]}
        ],
        "tools": [{"name": "weather", "input_schema": weather_schema()}]
    });
    let (status, answer, _) = post(&server, "/v1/messages", &body).await;
    assert_eq!(status, 200, "{answer}");
    let sent = &fake.received()[0].body["messages"];
    assert_eq!(sent[1]["role"], "assistant");
    assert_eq!(sent[1]["content"], "Let me look.");
    assert_eq!(sent[1]["tool_calls"][0]["id"], "toolu_9");
    assert_eq!(
        serde_json::from_str::<Value>(
            sent[1]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap()
        )
        .unwrap(),
        json!({"city": "Oslo"})
    );
    assert_eq!(
        sent[2],
        json!({"role": "tool", "content": "sunny", "tool_call_id": "toolu_9"})
    );
    assert_eq!(sent[3], json!({"role": "user", "content": "Thanks"}));
    server.shutdown().await;
}

/// The `data:` payloads of a server-sent event stream, with their names.
fn events(text: &str) -> Vec<(Option<String>, Value)> {
    let mut out = Vec::new();
    let mut name = None;
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("event: ") {
            name = Some(n.to_owned());
        } else if let Some(data) = line.strip_prefix("data: ") {
            let value = serde_json::from_str(data).unwrap_or(Value::String(data.into()));
            out.push((name.take(), value));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_call_is_judged_then_sent_in_each_apis_deltas() {
    let (server, fake) = serve(Api::OpenAi, bad_then_good(Api::OpenAi)).await;
    let body = json!({
        "model": "p", "stream": true,
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": weather_schema()}}]
    });
    let (status, answer, headers) = post(&server, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200);
    assert_eq!(headers.get("x-callai-attempts-count"), Some("2"));
    let chunks = events(answer.as_str().unwrap());
    let calls: Vec<&Value> = chunks
        .iter()
        .filter_map(|(_, c)| c["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .collect();
    assert_eq!(calls.len(), 1, "only the judged call: {chunks:?}");
    assert_eq!(calls[0]["index"], 0);
    assert_eq!(calls[0]["function"]["name"], "weather");
    assert_eq!(calls[0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
    let finish: Vec<&Value> = chunks
        .iter()
        .map(|(_, c)| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, [&json!("tool_calls")]);
    assert_eq!(fake.count(), 2);
    server.shutdown().await;

    let (server, _fake) = serve(Api::Anthropic, bad_then_good(Api::Anthropic)).await;
    let body = json!({
        "model": "p", "max_tokens": 100, "stream": true,
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "tools": [{"name": "weather", "input_schema": weather_schema()}]
    });
    let (status, answer, _) = post(&server, "/v1/messages", &body).await;
    assert_eq!(status, 200);
    let evs = events(answer.as_str().unwrap());
    let names: Vec<&str> = evs.iter().filter_map(|(n, _)| n.as_deref()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(evs[3].1["content_block"]["type"], "tool_use");
    assert_eq!(evs[3].1["content_block"]["name"], "weather");
    assert_eq!(evs[4].1["delta"]["type"], "input_json_delta");
    let input: Value =
        serde_json::from_str(evs[4].1["delta"]["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(input, json!({"city": "Oslo"}));
    assert_eq!(evs[6].1["delta"]["stop_reason"], "tool_use");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_call_offers_tools_and_returns_the_judged_calls() {
    let (server, fake) = serve(Api::OpenAi, bad_then_good(Api::OpenAi)).await;
    let body = json!({"request": {
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "tools": [{"name": "weather", "parameters": weather_schema()}],
        "toolChoice": "required"
    }});
    let (status, answer, _) = post(&server, "/v1/call", &body).await;
    assert_eq!(status, 200, "{answer}");
    let result = &answer["result"];
    assert_eq!(result["finishReason"], "tool-call");
    assert_eq!(result["toolCalls"][0]["name"], "weather");
    assert_eq!(result["attempts"]["count"], 2);
    assert!(
        result["attempts"].get("structuredOutput").is_none(),
        "{result}"
    );
    assert_eq!(fake.received()[0].body["tool_choice"], "required");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_host_cannot_take_is_refused_naming_it() {
    let (server, fake) = serve(Api::OpenAi, vec![]).await;
    let user = json!([{"role": "user", "content": "x"}]);
    for (path, body, param) in [
        (
            "/v1/chat/completions",
            json!({"model": "p", "messages": user, "functions": [{"name": "f"}]}),
            "functions",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "p", "messages": user, "tools": [{"type": "custom", "custom": {}}]}),
            "tools[0].type",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "p", "messages": user, "tool_choice": "required"}),
            "toolChoice",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "p", "messages": [{"role": "tool", "content": "x"}]}),
            "messages[0].tool_call_id",
        ),
        (
            "/v1/messages",
            json!({"model": "p", "max_tokens": 5, "messages": user,
                   "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
            "tools[0].type",
        ),
        (
            "/v1/messages",
            json!({"model": "p", "max_tokens": 5, "messages": user,
                   "tools": [{"name": "a b", "input_schema": {"type": "object"}}]}),
            "tools[0].name",
        ),
    ] {
        let (status, answer, _) = post(&server, path, &body).await;
        assert_eq!(status, 400, "{param}: {answer}");
        assert!(answer.to_string().contains(param), "{param}: {answer}");
    }
    assert_eq!(fake.count(), 0);
    server.shutdown().await;
}
