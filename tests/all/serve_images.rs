//! Images (issue 34, item 4): OpenAI `image_url` parts and Anthropic
//! `image` blocks reach a provider of either kind in its own format; a
//! provider with `vision = false` refuses them naming the field; an image
//! is held to `[limits] maxImageBytes`; none of its bytes go to the run
//! log. Checked on what a loopback fake received.

use callai_engine::wire::StructuredOutput;
use callai_engine::{
    CallInput, Host, HostConfig, Journal, MockProvider, MockScript, Recording, RunLog, RunSession,
};
use callai_runlog_sqlite::SqliteRunLog;
use callai_tests::serve::TestServer;
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::sync::Arc;

/// A tiny PNG's first bytes, base64: what a client sends inline.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB";

fn data_url() -> String {
    format!("data:image/png;base64,{PNG}")
}

/// An OpenAI client's user message: text, then two images.
fn openai_request() -> Value {
    json!({"model": "p", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is in these?"},
        {"type": "image_url", "image_url": {"url": data_url(), "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_from_the_openai_client_reaches_an_anthropic_provider_as_image_blocks() {
    let reply = vec![Api::Anthropic.reply("a cat", None, "stop", Some(2))];
    let (server, fake) = TestServer::before_fake("anthropic", "", reply).await;
    let answer = server.post("/v1/chat/completions", &openai_request()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["choices"][0]["message"]["content"], "a cat");
    let sent = &fake.received()[0].body;
    assert_eq!(
        sent["messages"][0]["content"],
        json!([
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
            {"type": "text", "text": "what is in these?"}
        ])
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_block_from_the_anthropic_client_reaches_an_openai_provider_as_image_url() {
    let reply = vec![
        Api::OpenAi.reply("a dog", None, "stop", Some(2)),
        Api::OpenAi.reply("a dog", None, "stop", Some(2)),
    ];
    let (server, fake) = TestServer::before_fake("openai", "", reply).await;
    let request = json!({"model": "p", "max_tokens": 50, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "text", "text": "and this?"}]}]});
    let answer = server.post("/v1/messages", &request).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["content"][0]["text"], "a dog");
    let sent = fake.received()[0].body.clone();
    assert_eq!(
        sent["messages"][0]["content"],
        json!([
            {"type": "text", "text": "and this?"},
            {"type": "image_url", "image_url": {"url": data_url()}}
        ])
    );
    // /v1/call takes the same image in its own request's shape.
    let call = json!({"request": {"messages": [{"role": "user", "content": "and this?",
                                                "images": [{"url": data_url()}]}]}});
    let answer = server.post("/v1/call", &call).await;
    assert_eq!(answer.body["result"]["content"], "a dog", "{}", answer.body);
    assert_eq!(fake.received()[1].body["messages"], sent["messages"]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_without_vision_and_an_image_too_large_are_refused_before_any_request() {
    let reply = vec![Api::OpenAi.reply("never", None, "stop", Some(2))];
    let keys = "vision = false\n[limits]\nmaxImageBytes = 16";
    let (server, fake) = TestServer::before_fake("openai", keys, reply).await;
    let answer = server.post("/v1/chat/completions", &openai_request()).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("vision = false"), "{message}");
    assert_eq!(answer.body["error"]["param"], "messages[0].images[0]");
    // A malformed image is refused naming the client's own part.
    let mut bad = openai_request();
    bad["messages"][0]["content"][1]["image_url"]["url"] = json!("http://example.com/a.png");
    let answer = server.post("/v1/chat/completions", &bad).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_eq!(
        answer.body["error"]["param"],
        "messages[0].content[1].image_url"
    );
    // Over maxImageBytes (24 bytes against 16), on a provider that takes images.
    server.shutdown().await;
    let reply = vec![Api::OpenAi.reply("never", None, "stop", Some(2))];
    let (server, fake2) =
        TestServer::before_fake("openai", "[limits]\nmaxImageBytes = 16", reply).await;
    let answer = server.post("/v1/chat/completions", &openai_request()).await;
    assert_eq!(
        answer.body["callai"]["error"]["code"], "limit_exceeded",
        "{}",
        answer.body
    );
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("limits.maxImageBytes") && message.contains("24 bytes"),
        "{message}"
    );
    assert_eq!(
        (fake.count(), fake2.count()),
        (0, 0),
        "refused before any request"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_call_keeps_no_image_bytes_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let log: Arc<dyn RunLog> = Arc::new(SqliteRunLog::open(&dir.path().join("runs.db")).unwrap());
    let mock = MockProvider::new(
        MockScript::replies([("a cat", 2)]),
        StructuredOutput::Native,
    );
    let host = Host::builder(HostConfig::default())
        .mock(mock)
        .build()
        .unwrap();
    let big = "QUJD".repeat(4096);
    let request = json!({"messages": [{"role": "user", "content": "what is it?",
        "images": [{"url": format!("data:image/jpeg;base64,{big}")}]}]})
    .to_string();
    let journal = Journal::record(log.clone(), "r1", "n", Recording::default())
        .await
        .unwrap();
    let mut session = RunSession::new(host.clone(), "n", journal);
    let first = session
        .call(CallInput::Json(request.clone()))
        .await
        .unwrap();
    assert_eq!(first.unwrap().content.as_deref(), Some("a cat"));
    let (finished, _) = session.finish(Ok("done".into())).await;
    finished.unwrap();
    let run = log.load("r1".into()).await.unwrap();
    let stored = run.calls[0].request.to_string();
    assert!(
        !stored.contains(&big[..64]),
        "an image's bytes in the run log: {stored}"
    );
    let image = &run.calls[0].request["messages"][0]["images"][0]["inline"];
    assert_eq!(image["mediaType"], "image/jpeg", "{stored}");
    assert_eq!(image["sha256"].as_str().map(str::len), Some(64), "{stored}");
    // Replayed with the same image, the call is the recorded one.
    let journal = Journal::replay(log.as_ref(), "r1").await.unwrap();
    let mut replay = RunSession::new(host, "n", journal);
    let again = replay.call(CallInput::Json(request)).await.unwrap();
    assert_eq!(again.unwrap().content.as_deref(), Some("a cat"));
}
