//! `kind = "gemini"` (issue 55, item 1) through `callai serve`, against a
//! loopback fake of the Gemini API that checks what it was sent: the
//! endpoint naming the model, the key in `x-goog-api-key`, structured
//! output as `responseJsonSchema`, a `MAX_TOKENS` reply then a complete
//! one (two attempts, the second with a doubled `maxOutputTokens`), a
//! function-call loop through the Chat Completions drop-in, `SAFETY` never
//! retried, a streamed reply, and cached input priced from a price file.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::TestServer;
use serde_json::{Value, json};
use std::time::Duration;

const KEY: &str = "gm-test-key";

fn answer(parts: Value, finish: &str, usage: Value) -> Reply {
    Reply::ok(json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish}],
        "usageMetadata": usage,
        "modelVersion": "gemini-2.5-flash"
    }))
}

fn usage(input: u32, cached: u32, output: u32) -> Value {
    json!({"promptTokenCount": input, "cachedContentTokenCount": cached,
           "candidatesTokenCount": output, "totalTokenCount": input + output})
}

async fn server(fake: &FakeServer, extra: &str) -> TestServer {
    let toml = format!(
        "[providers.gemini]\nbaseUrl = \"{}/v1beta\"\nmodel = \"gemini-2.5-flash\"\n\
         [defaults]\nprovider = \"gemini\"\n[retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n{extra}",
        fake.url().trim_end_matches("/v1")
    );
    TestServer::start_with(&toml, None, |k| {
        (k == "GEMINI_API_KEY").then(|| KEY.to_owned())
    })
    .await
}

/// Issue 55 tests: structured output is `responseJsonSchema`; a
/// `MAX_TOKENS` reply is a truncation: the second attempt doubles
/// `maxOutputTokens`; both are counted, and cached input is priced at its
/// own rate from the price file's `gemini/…` entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_structured_answer_is_asked_again_with_twice_the_budget() {
    let fake = FakeServer::start(vec![
        answer(
            json!([{"text": "{\"scene\": \"A li"}]),
            "MAX_TOKENS",
            usage(100, 0, 50),
        ),
        answer(
            json!([{"text": "{\"scene\": \"A lighthouse.\"}"}]),
            "STOP",
            usage(100, 60, 9),
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.json");
    std::fs::write(
        &prices,
        json!({"gemini/gemini-2.5-flash": {
            "input_cost_per_token": 0.000001, "output_cost_per_token": 0.000004,
            "cache_read_input_token_cost": 0.0000001, "litellm_provider": "gemini",
            "mode": "chat"}})
        .to_string(),
    )
    .unwrap();
    let server = server(
        &fake,
        &format!("[pricing]\nfile = {:?}\n", prices.display().to_string()),
    )
    .await;
    let call = json!({"request": {"messages": [{"role": "user", "content": "A scene."}],
                                  "maxTokens": 50,
                                  "responseSchema": {"type": "object", "required": ["scene"],
                                                     "properties": {"scene": {"type": "string"}}}}});
    let r = server.exchange("/v1/call", &call, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["result"]["data"]["scene"], "A lighthouse.");
    let attempts = &r.body["result"]["attempts"];
    assert_eq!(
        (&attempts["count"], &attempts["outputTokens"]),
        (&json!(2), &json!(59))
    );
    assert_eq!(attempts["structuredOutput"], "native");
    let sent = fake.received();
    assert_eq!(sent.len(), 2);
    for s in &sent {
        assert_eq!(s.path, "/v1beta/models/gemini-2.5-flash:generateContent");
        assert_eq!(s.headers["x-goog-api-key"], KEY);
        assert!(!s.headers.contains_key("authorization"));
        let g = &s.body["generationConfig"];
        assert_eq!(g["responseMimeType"], "application/json");
        assert_eq!(g["responseJsonSchema"]["required"], json!(["scene"]));
    }
    assert_eq!(sent[0].body["generationConfig"]["maxOutputTokens"], 50);
    assert_eq!(sent[1].body["generationConfig"]["maxOutputTokens"], 100);
    // The trace prices each attempt: 40 input at 1e-6, 60 cached at 1e-7
    // and 9 output at 4e-6 for the second.
    let id = r.headers.get("x-callai-call-id").unwrap().to_owned();
    let trace = server.get(&format!("/v1/calls/{id}")).await.body;
    let second = &trace["requests"][1];
    assert_eq!(second["cachedInputTokens"], 60, "{trace}");
    assert_eq!(second["cost"]["amount"], json!(0.000082), "{trace}");
    assert!(!trace.to_string().contains(KEY));
}

/// Issue 55 tests: a `SAFETY` finish is the provider's refusal, never
/// retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_safety_block_is_a_refusal_and_is_not_retried() {
    let fake = FakeServer::start(vec![
        answer(json!([]), "SAFETY", usage(10, 0, 0)),
        answer(json!([{"text": "never"}]), "STOP", usage(10, 0, 1)),
    ])
    .await;
    let server = server(&fake, "").await;
    let call =
        json!({"request": {"messages": [{"role": "user", "content": "x"}], "maxTokens": 20}});
    let r = server.exchange("/v1/call", &call, None).await;
    assert_eq!(r.body["error"]["code"], "envelope_refusal", "{}", r.body);
    assert_eq!(fake.received().len(), 1);
}

/// Issue 55 tests: a function-call loop through `/v1/chat/completions`:
/// the model's `functionCall` is the answer's tool call; its result goes
/// back as a `functionResponse` naming the function.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_call_loop_goes_through_the_chat_drop_in() {
    let fake = FakeServer::start(vec![
        answer(
            json!([{"functionCall": {"id": "fc-1", "name": "lookup", "args": {"q": "tide"}}}]),
            "STOP",
            usage(30, 0, 8),
        ),
        answer(
            json!([{"text": "High tide at six."}]),
            "STOP",
            usage(45, 0, 6),
        ),
    ])
    .await;
    let server = server(&fake, "").await;
    let tools = json!([{"type": "function", "function": {"name": "lookup",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                       "required": ["q"]}}}]);
    let first = json!({"model": "gemini", "tools": tools, "tool_choice": "required",
                       "messages": [{"role": "user", "content": "When is high tide?"}]});
    let r = server.exchange("/v1/chat/completions", &first, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let call = &r.body["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["id"], "fc-1");
    assert_eq!(call["function"]["name"], "lookup");
    assert_eq!(r.body["choices"][0]["finish_reason"], "tool_calls");
    let sent = &fake.received()[0].body;
    assert_eq!(
        sent["tools"][0]["functionDeclarations"][0]["name"],
        "lookup"
    );
    assert_eq!(sent["toolConfig"]["functionCallingConfig"]["mode"], "ANY");
    let second = json!({"model": "gemini", "tools": tools, "messages": [
        {"role": "user", "content": "When is high tide?"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "fc-1", "content": "{\"high\": \"18:00\"}"}]});
    let r = server.exchange("/v1/chat/completions", &second, None).await;
    assert_eq!(
        r.body["choices"][0]["message"]["content"], "High tide at six.",
        "{}",
        r.body
    );
    let contents = &fake.received()[1].body["contents"];
    assert_eq!(
        contents[1]["parts"][0]["functionCall"],
        json!({"id": "fc-1", "name": "lookup", "args": {"q": "tide"}})
    );
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [{"functionResponse": {"id": "fc-1", "name": "lookup",
                                                               "response": {"high": "18:00"}}}]})
    );
}

/// Issue 55 tests: a streamed call goes to `streamGenerateContent?alt=sse`
/// and its chunks reach the client as they come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_comes_chunk_by_chunk() {
    let chunk = |text: &str, finish: Option<&str>| {
        let mut c =
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]});
        if let Some(f) = finish {
            c["candidates"][0]["finishReason"] = json!(f);
            c["usageMetadata"] = usage(7, 0, 3);
        }
        (None, c.to_string())
    };
    let fake = FakeServer::start(vec![Reply::Events {
        events: vec![
            chunk("Tide ", None),
            chunk("at ", None),
            chunk("six.", Some("STOP")),
        ],
        pause: Duration::from_millis(5),
        cut: false,
    }])
    .await;
    let server = server(&fake, "").await;
    let body = json!({"model": "gemini", "stream": true,
                      "messages": [{"role": "user", "content": "When?"}]});
    let events = server.events("/v1/chat/completions", &body, None).await;
    let text: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Tide at six.");
    let sent = &fake.received()[0];
    assert_eq!(
        sent.path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
}

/// Issue 55 tests: the thinking a client asks for reaches Gemini as
/// `thinkingConfig`: Anthropic's `thinking` through `/v1/messages`, its
/// budget as `thinkingBudget`, and OpenAI's `reasoning_effort` through
/// `/v1/chat/completions`; the thoughts are counted as output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_thinking_reaches_gemini_as_thinking_config() {
    let thought = json!({"promptTokenCount": 10, "candidatesTokenCount": 4,
                         "thoughtsTokenCount": 30, "totalTokenCount": 44});
    let reply = answer(
        json!([{"text": "Planning…", "thought": true}, {"text": "Six."}]),
        "STOP",
        thought,
    );
    let fake = FakeServer::start(vec![reply.clone(), reply]).await;
    let server = server(&fake, "").await;
    let messages = json!({"model": "gemini", "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [{"role": "user", "content": "When is high tide?"}]});
    let r = server.exchange("/v1/messages", &messages, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["usage"]["output_tokens"], 34, "{}", r.body);
    let chat = json!({"model": "gemini", "reasoning_effort": "medium",
        "messages": [{"role": "user", "content": "When is high tide?"}]});
    let r = server.exchange("/v1/chat/completions", &chat, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["choices"][0]["message"]["content"], "Six.");
    let sent = fake.received();
    let budgets: Vec<_> = sent
        .iter()
        .map(|s| s.body["generationConfig"]["thinkingConfig"]["thinkingBudget"].clone())
        .collect();
    assert_eq!(budgets, [json!(2048), json!(2048)]);
}

/// Issue 55 tests: `/v1/embeddings` to a Gemini model goes to
/// `batchEmbedContents`, one request per text, and its vectors come back
/// as OpenAI's `data`; the input tokens it reports are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_go_to_batch_embed_contents() {
    let fake = FakeServer::start(vec![Reply::ok(json!({
        "embeddings": [{"values": [0.5, -1.0]}, {"values": [1.0, 2.0]}],
        "usageMetadata": {"promptTokenCount": 4}
    }))])
    .await;
    let route = "[models.\"g-embed\"]\ntargets = [\"gemini/gemini-embedding-001\"]\n\
                 kind = \"embedding\"\n";
    let server = server(&fake, route).await;
    let body = json!({"model": "g-embed", "input": ["tide", "moon"], "dimensions": 2});
    let r = server.exchange("/v1/embeddings", &body, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["data"][1]["embedding"], json!([1.0, 2.0]));
    assert_eq!(r.body["data"][1]["index"], 1);
    assert_eq!(r.body["usage"]["prompt_tokens"], 4);
    let sent = &fake.received()[0];
    assert_eq!(
        sent.path,
        "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    );
    assert_eq!(sent.headers["x-goog-api-key"], KEY);
    let requests = sent.body["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1]["content"]["parts"][0]["text"], "moon");
    assert_eq!(requests[1]["model"], "models/gemini-embedding-001");
    assert_eq!(requests[1]["outputDimensionality"], 2);
}
