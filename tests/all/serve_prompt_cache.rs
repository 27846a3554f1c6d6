//! Anthropic prompt caching through the Messages drop-in (issue 51, item
//! 4), against a real `serve` and a loopback fake: `cache_control` on system
//! blocks, message blocks and tools reaches an Anthropic-kind provider
//! where the client set it, the cache's reads and writes are counted per
//! attempt in the trace, and a call no target of which takes it is refused
//! naming the field, before any request.

use callai_tests::fake_server::Reply;
use callai_tests::serve::TestServer;
use serde_json::{Value, json};

/// A Messages API answer whose usage reads `read` tokens from the cache
/// and writes `written`.
pub(crate) fn cached_reply(read: u32, written: u32) -> Reply {
    Reply::Json(
        200,
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m-1",
               "content": [{"type": "text", "text": "Oslo is cold."}],
               "stop_reason": "end_turn", "stop_sequence": null,
               "usage": {"input_tokens": 12, "output_tokens": 4,
                         "cache_read_input_tokens": read,
                         "cache_creation_input_tokens": written}}),
        vec![],
    )
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// A request with a breakpoint on the second system block, on the first
/// user turn's last block, and on the tool.
fn cached_request() -> Value {
    json!({
        "model": "p/m-1", "max_tokens": 50,
        "system": [{"type": "text", "text": "You are terse. "},
                   {"type": "text", "text": "Here is a long style guide.",
                    "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "tools": [{"name": "weather", "input_schema": {"type": "object"},
                   "cache_control": ephemeral()}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "A long document."},
                                         {"type": "text", "text": " Now:", "cache_control": ephemeral()}]},
            {"role": "assistant", "content": "Ready."},
            {"role": "user", "content": "How is Oslo?"}
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_control_reaches_an_anthropic_provider_where_the_client_set_it() {
    let replies = vec![cached_reply(0, 900), cached_reply(900, 0)];
    let (server, fake) = TestServer::before_fake("anthropic", "model = \"m-1\"", replies).await;
    for _ in 0..2 {
        let answer = server.post("/v1/messages", &cached_request()).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let received = fake.received();
    assert_eq!(received.len(), 2);
    let body = &received[0].body;
    // The system prompt keeps its blocks, the breakpoint on the second.
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You are terse. "},
               {"type": "text", "text": "Here is a long style guide.",
                "cache_control": {"type": "ephemeral", "ttl": "1h"}}]),
        "{body}"
    );
    assert_eq!(body["tools"][0]["cache_control"], ephemeral(), "{body}");
    // The first user turn ends with the breakpoint; the later turns have none.
    let first = &body["messages"][0]["content"];
    let last_block = first.as_array().and_then(|b| b.last()).unwrap();
    assert_eq!(last_block["cache_control"], ephemeral(), "{body}");
    assert_eq!(last_block["text"], "A long document. Now:", "{body}");
    assert_eq!(body["messages"][1]["content"], "Ready.", "{body}");
    assert_eq!(body["messages"][2]["content"], "How is Oslo?", "{body}");
    // Each attempt's cache writes and reads are counted in its trace.
    let calls = server.get("/v1/calls").await.body;
    let by_written: Vec<(Value, Value)> = calls["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let r = &c["requests"][0];
            (
                r["cacheWriteInputTokens"].clone(),
                r["cachedInputTokens"].clone(),
            )
        })
        .collect();
    assert!(by_written.contains(&(json!(900), json!(0))), "{calls}");
    assert!(by_written.contains(&(json!(0), json!(900))), "{calls}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_control_is_refused_by_name_where_no_target_takes_it() {
    let (server, fake) = TestServer::before_fake("openai", "model = \"m-1\"", vec![]).await;
    let answer = server.post("/v1/messages", &cached_request()).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("system[1].cache_control"), "{message}");
    assert!(message.contains("\"p\""), "{message}");
    // A malformed breakpoint is refused naming its key.
    let mut bad = cached_request();
    bad["tools"][0]["cache_control"] = json!({"type": "persistent"});
    let answer = server.post("/v1/messages", &bad).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("tools[0].cache_control.type"), "{message}");
    assert!(
        fake.received().is_empty(),
        "no request reached the provider"
    );
    server.shutdown().await;
}
