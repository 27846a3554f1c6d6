//! Extended thinking through the Messages drop-in (issue 51, item 4),
//! against a real `serve` and a loopback fake: `thinking` reaches an
//! Anthropic-kind provider as the client sent it, the answer's signed
//! thinking blocks come back to the client (whole and streamed) and go
//! back to the provider in the next turn as they came, their tokens are
//! counted as output, and a call no target of which can think is refused
//! naming `thinking`.

use callai_tests::fake_server::Reply;
use callai_tests::serve::TestServer;
use serde_json::{Value, json};

const SIGNATURE: &str = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pk";

/// A Messages API answer that thought, then answered `text` (or called
/// the weather tool), having used `output` tokens, stopping for `stop`.
fn thought_reply(content: Value, stop: &str, output: u32) -> Reply {
    Reply::Json(
        200,
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m-1",
               "content": content, "stop_reason": stop, "stop_sequence": null,
               "usage": {"input_tokens": 40, "output_tokens": output}}),
        vec![],
    )
}

fn thinking_block() -> Value {
    json!({"type": "thinking", "thinking": "Oslo is north; check the weather.", "signature": SIGNATURE})
}

fn redacted_block() -> Value {
    json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"})
}

fn weather_tool() -> Value {
    json!([{"name": "weather", "input_schema": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}])
}

fn thinking_request() -> Value {
    json!({
        "model": "p/m-1", "max_tokens": 3000,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": weather_tool(),
        "messages": [{"role": "user", "content": "Weather in Oslo?"}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_reaches_the_provider_and_its_signed_blocks_go_round_trip() {
    let tool_use =
        json!({"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}});
    let replies = vec![
        thought_reply(
            json!([thinking_block(), redacted_block(), tool_use]),
            "tool_use",
            900,
        ),
        thought_reply(json!([{"type": "text", "text": "Sunny."}]), "end_turn", 5),
    ];
    let (server, fake) = TestServer::before_fake("anthropic", "model = \"m-1\"", replies).await;
    let answer = server
        .exchange("/v1/messages", &thinking_request(), None)
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let received = fake.received();
    assert_eq!(received.len(), 1);
    let sent = &received[0].body;
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048}),
        "{sent}"
    );
    assert_eq!(sent["max_tokens"], 3000, "{sent}");
    // The answer leads with the thinking blocks as the provider signed them.
    let content = &answer.body["content"];
    assert_eq!(content[0], thinking_block(), "{content}");
    assert_eq!(content[1], redacted_block(), "{content}");
    assert_eq!(content[2]["type"], "tool_use", "{content}");
    assert_eq!(answer.body["stop_reason"], "tool_use");
    // Thinking tokens are output tokens, counted in the attempts' record.
    assert_eq!(answer.headers.get("x-callai-attempts-count"), Some("1"));
    assert_eq!(
        answer.headers.get("x-callai-attempts-output-tokens"),
        Some("900"),
        "{:?}",
        answer.headers
    );
    assert_eq!(answer.body["usage"]["output_tokens"], 900);

    // The next turn passes the blocks back; the provider gets them as they
    // came, in front of the tool call.
    let mut next = thinking_request();
    next["messages"] = json!([
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": content[2]["id"], "content": "sunny"}]}
    ]);
    let answer = server.exchange("/v1/messages", &next, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let sent = &fake.received()[1].body;
    let assistant = &sent["messages"][1];
    assert_eq!(assistant["role"], "assistant", "{sent}");
    assert_eq!(assistant["content"][0], thinking_block(), "{sent}");
    assert_eq!(assistant["content"][1], redacted_block(), "{sent}");
    assert_eq!(assistant["content"][2]["type"], "tool_use", "{sent}");
    assert_eq!(sent["messages"][2]["content"][0]["type"], "tool_result");
    server.shutdown().await;
}

/// The `data:` payloads of a server-sent event stream.
fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_sends_its_thinking_blocks_first_as_the_messages_api_does() {
    let replies = vec![thought_reply(
        json!([thinking_block(), {"type": "text", "text": "Sunny."}]),
        "end_turn",
        700,
    )];
    let (server, _fake) = TestServer::before_fake("anthropic", "model = \"m-1\"", replies).await;
    let mut request = thinking_request();
    request["stream"] = json!(true);
    request.as_object_mut().unwrap().remove("tools");
    let answer = server.exchange("/v1/messages", &request, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let events = events(answer.body.as_str().unwrap());
    let kinds: Vec<(&str, Option<u64>)> = events
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["index"].as_u64()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("message_start", None),
            ("content_block_start", Some(0)),
            ("content_block_delta", Some(0)),
            ("content_block_delta", Some(0)),
            ("content_block_stop", Some(0)),
            ("content_block_start", Some(1)),
            ("content_block_delta", Some(1)),
            ("content_block_stop", Some(1)),
            ("message_delta", None),
            ("message_stop", None),
        ],
        "{events:?}"
    );
    assert_eq!(events[1]["content_block"]["type"], "thinking");
    assert_eq!(
        events[2]["delta"],
        json!({"type": "thinking_delta", "thinking": "Oslo is north; check the weather."})
    );
    assert_eq!(
        events[3]["delta"],
        json!({"type": "signature_delta", "signature": SIGNATURE})
    );
    assert_eq!(events[6]["delta"]["text"], "Sunny.");
    assert_eq!(events[8]["usage"]["output_tokens"], 700);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_is_refused_by_name_where_no_target_can_think_or_the_api_would_refuse_it() {
    let (server, fake) = TestServer::before_fake("openai", "model = \"m-1\"", vec![]).await;
    let answer = server.post("/v1/messages", &thinking_request()).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("thinking") && message.contains("\"p\""),
        "{message}"
    );
    let mut over = thinking_request();
    over["thinking"]["budget_tokens"] = json!(3000);
    let answer = server.post("/v1/messages", &over).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("thinking.budget_tokens"), "{message}");
    let mut unsigned = thinking_request();
    unsigned["messages"] = json!([
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "Hello"}]},
        {"role": "user", "content": "Weather?"}
    ]);
    let answer = server.post("/v1/messages", &unsigned).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("messages[1].content[0].signature"),
        "{message}"
    );
    assert!(
        fake.received().is_empty(),
        "no request reached the provider"
    );
    server.shutdown().await;
}
