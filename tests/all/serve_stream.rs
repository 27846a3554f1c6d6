//! A streamed text call relays its provider's stream (issue 23): the
//! pieces arrive as the provider sends them, through both providers and
//! both APIs; a stream cut after some text is reported, not retried; and a
//! client that goes away mid-stream cancels the upstream request, which is
//! still counted.

use callai_tests::fake_server::{FakeServer, Reply};
use callai_tests::serve::{TestServer, metric_in};
use callai_tests::wire::Api;
use serde_json::{Value, json};
use std::time::Duration;

/// A server whose provider `fake` (of `api`'s kind) answers `replies`.
async fn server(api: Api, replies: Vec<Reply>) -> (TestServer, FakeServer) {
    let fake = FakeServer::start(replies).await;
    let toml = format!(
        "[providers.fake]\nkind = \"{}\"\nbaseUrl = \"{}\"\napiKeyEnv = \"FAKE_KEY\"\nmodel = \"m-1\"\n\
         [retry]\nbackoffBaseMs = 1\nbackoffMaxMs = 2\n",
        api.name(),
        fake.url()
    );
    let server = TestServer::start_with(&toml, None, |k| {
        (k == "FAKE_KEY").then(|| "sk-fake-stream-tests-0248".to_owned())
    })
    .await;
    (server, fake)
}

/// The `data:` payloads of `text`, parsed (`[DONE]` as a string).
fn payloads(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap_or(Value::String(d.into())))
        .collect()
}

async fn stream(server: &TestServer, path: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", server.url))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

/// The text of the OpenAI chunks or Anthropic deltas among `payloads`.
fn text_of(payloads: &[Value]) -> String {
    payloads
        .iter()
        .filter_map(|p| {
            p.pointer("/choices/0/delta/content")
                .or_else(|| p.pointer("/delta/text"))
                .and_then(Value::as_str)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_call_streams_as_its_provider_does_through_both_apis() {
    let pause = Duration::from_millis(150);
    for provider in [Api::OpenAi, Api::Anthropic] {
        let pieces = ["Once ", "upon ", "a time"];
        let replies = vec![
            Reply::Json(503, json!({"error": {"message": "busy"}}), vec![]),
            provider.stream_reply(&pieces, "stop", Some(7), pause),
            provider.stream_reply(&pieces, "stop", Some(7), pause),
        ];
        let (server, fake) = server(provider, replies).await;
        let chat = json!({"model": "fake", "stream": true, "stream_options": {"include_usage": true},
                          "messages": [{"role": "user", "content": "a story"}]});
        let messages = json!({"model": "fake", "stream": true, "max_tokens": 50,
                              "messages": [{"role": "user", "content": "a story"}]});
        for (path, body) in [("/v1/chat/completions", chat), ("/v1/messages", messages)] {
            let mut r = stream(&server, path, body).await;
            assert_eq!(r.status(), 200);
            // The first piece arrives before the provider has sent the rest.
            let started = std::time::Instant::now();
            let mut seen = String::new();
            let mut arrivals = Vec::new();
            while let Some(chunk) = r.chunk().await.unwrap() {
                let text = String::from_utf8_lossy(&chunk).into_owned();
                if !text_of(&payloads(&text)).is_empty() {
                    arrivals.push(started.elapsed());
                }
                seen.push_str(&text);
            }
            let all = payloads(&seen);
            assert_eq!(
                text_of(&all),
                "Once upon a time",
                "{provider:?} {path}: {seen}"
            );
            assert!(
                arrivals.len() >= 2,
                "{provider:?} {path}: one piece at a time: {arrivals:?}"
            );
            let end = all
                .iter()
                .rev()
                .find(|p| p.get("callai").is_some())
                .unwrap_or_else(|| panic!("{provider:?} {path}: no callai in {seen}"));
            assert_eq!(
                end["callai"]["attempts"]["count"],
                json!(if path == "/v1/chat/completions" { 2 } else { 1 }),
                "{provider:?} {path}: {end}"
            );
            let usage = end.get("usage").unwrap();
            let out = usage
                .get("completion_tokens")
                .or_else(|| usage.get("output_tokens"));
            assert_eq!(
                out,
                Some(&json!(7)),
                "{provider:?} {path}: the final attempt's usage"
            );
        }
        let sent = fake.received();
        assert_eq!(sent.len(), 3, "{provider:?}: the 503 and two streams");
        assert_eq!(
            sent[1].body["stream"], true,
            "{provider:?}: streamed upstream"
        );
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_after_text_is_reported_not_retried() {
    let Reply::Events { events, pause, .. } =
        Api::OpenAi.stream_reply(&["Half ", "a story"], "stop", Some(3), Duration::ZERO)
    else {
        unreachable!()
    };
    let cut = Reply::Events {
        events: events[..2].to_vec(),
        pause,
        cut: true,
    };
    let (server, fake) = server(
        Api::OpenAi,
        vec![cut, Api::OpenAi.reply("again", None, "stop", Some(1))],
    )
    .await;
    let r = stream(
        &server,
        "/v1/chat/completions",
        json!({"model": "fake", "stream": true,
        "messages": [{"role": "user", "content": "a story"}]}),
    )
    .await;
    let all = payloads(&r.text().await.unwrap());
    assert_eq!(text_of(&all), "Half ");
    let error = all.last().unwrap();
    assert_eq!(error["error"]["code"], "provider_unavailable", "{all:?}");
    assert_eq!(
        fake.received().len(),
        1,
        "the client has half a story: not sent again"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_cancels_the_request_and_it_is_counted() {
    let slow = Api::OpenAi.stream_reply(
        &["a ", "b ", "c ", "d ", "e"],
        "stop",
        Some(5),
        Duration::from_millis(400),
    );
    let (server, fake) = server(Api::OpenAi, vec![slow]).await;
    let mut r = stream(
        &server,
        "/v1/chat/completions",
        json!({"model": "fake", "stream": true,
        "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    // Read until the first piece of text, then hang up.
    let mut seen = String::new();
    while text_of(&payloads(&seen)).is_empty() {
        let chunk = r.chunk().await.unwrap().expect("a first piece");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(r);
    let mut cancelled = 0.0;
    for _ in 0..100 {
        cancelled = server
            .metric("callai_calls_total{outcome=\"cancelled\"}")
            .await;
        if cancelled > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        cancelled, 1.0,
        "the call was dropped when its client went away"
    );
    let metrics = server.metrics().await;
    assert_eq!(
        metric_in(
            &metrics,
            "callai_provider_requests_total{provider=\"fake\",reason=\"first\"}"
        ),
        1.0,
        "the request in flight is counted"
    );
    assert!(
        fake.body_bytes_sent() < 400,
        "the upstream stream was not read to its end after the client left ({} bytes)",
        fake.body_bytes_sent()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_text_call_cut_by_its_token_limit_is_reported_not_retried() {
    // The client already holds the text: a truncated stream ends with the
    // API's own "length" reason, one attempt, and no second request.
    for provider in [Api::OpenAi, Api::Anthropic] {
        let replies = vec![
            provider.stream_reply(&["Once ", "upon"], "length", Some(2), Duration::ZERO),
            provider.reply("never sent", None, "stop", Some(1)),
        ];
        let (server, fake) = server(provider, replies).await;
        let (path, body) = match provider {
            Api::OpenAi => (
                "/v1/chat/completions",
                json!({"model": "fake", "stream": true, "max_tokens": 2,
                       "stream_options": {"include_usage": true},
                       "messages": [{"role": "user", "content": "a story"}]}),
            ),
            Api::Anthropic => (
                "/v1/messages",
                json!({"model": "fake", "stream": true, "max_tokens": 2,
                       "messages": [{"role": "user", "content": "a story"}]}),
            ),
        };
        let r = stream(&server, path, body).await;
        assert_eq!(r.status(), 200);
        let all = payloads(&r.text().await.unwrap());
        assert_eq!(text_of(&all), "Once upon", "{provider:?}: {all:?}");
        let reason = all.iter().find_map(|p| {
            p.pointer("/choices/0/finish_reason")
                .or_else(|| p.pointer("/delta/stop_reason"))
                .and_then(Value::as_str)
        });
        let expected = match provider {
            Api::OpenAi => "length",
            Api::Anthropic => "max_tokens",
        };
        assert_eq!(reason, Some(expected), "{provider:?}: {all:?}");
        let end = all
            .iter()
            .rev()
            .find(|p| p.get("callai").is_some())
            .unwrap_or_else(|| panic!("{provider:?}: no callai in {all:?}"));
        assert_eq!(end["callai"]["attempts"]["count"], 1, "{provider:?}: {end}");
        assert_eq!(
            fake.received().len(),
            1,
            "{provider:?}: a truncated stream is not sent again"
        );
        server.shutdown().await;
    }
}
